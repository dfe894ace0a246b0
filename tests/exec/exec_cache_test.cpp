// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// ExecCache: lazy builds, least-recently-used eviction under a count and a byte budget (a
// generated family of access sequences checked against a reference model), shared ownership of
// evicted executables (in flight and held), concurrent gets of one key building once, failed
// builds, limits, the empty state and host callbacks.
#include <doctest/doctest.h>

#include <atomic>
#include <list>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/dsl_fixture.hpp"
#include "support/launch_gate.hpp"

using namespace tether;
using namespace tether_test;

namespace {

// The executable for key `n`: one fill of `x` with the value n, so a launch shows which key ran.
struct Builds {
  DslFixture& f;
  SharedBuffer<float> x;
  std::atomic<int> made{0};
  GraphExec operator()(int n) {
    ++made;
    Graph g{f.ctx};
    g.edit([&](Edit& e) { e.launch(f.k.fill, Grid{1}, Block{4}, x, static_cast<float>(n), 4); });
    return g.instantiate();
  }
};

// What a least-recently-used cache with these limits and costs holds after `keys`.
std::list<int> model(const std::vector<int>& keys, std::size_t max_count, std::size_t max_bytes,
                     std::size_t (*cost)(int)) {
  std::list<int> lru;  // most recent first
  std::size_t bytes = 0;
  for (int k : keys) {
    auto it = std::find(lru.begin(), lru.end(), k);
    if (it != lru.end()) {
      lru.splice(lru.begin(), lru, it);
      continue;
    }
    lru.push_front(k);
    bytes += cost(k);
    while (lru.size() > 1 && (lru.size() > max_count || bytes > max_bytes)) {
      bytes -= cost(lru.back());
      lru.pop_back();
    }
  }
  return lru;
}

std::size_t cost_of(int key) { return 100 + 37 * static_cast<std::size_t>(key); }

}  // namespace

TEST_SUITE_BEGIN("exec cache");

TEST_CASE_FIXTURE(DslFixture, "an executable cache builds a key on its first use only and launches the key's executable") {
  Builds b{*this, buffer(4, 0.0f)};
  ExecCache<int> cache([&](int n) { return b(n); });
  cache.launch(3, stream);
  stream.synchronize();
  CHECK(read(b.x) == std::vector<float>(4, 3.0f));
  cache.launch(5, stream);
  cache.launch(3, stream);
  stream.synchronize();
  CHECK(read(b.x) == std::vector<float>(4, 3.0f));
  CHECK(b.made.load() == 2);
  ExecCacheStats s = cache.stats();
  CHECK(s.hits == 1);
  CHECK(s.misses == 2);
  CHECK(s.evictions == 0);
  CHECK(s.count == 2);
  CHECK(cache.size() == 2);
  CHECK(cache.contains(3));
  CHECK_FALSE(cache.contains(4));
  CHECK(cache.get(5) == cache.get(5));  // the same executable, shared
}

TEST_CASE_FIXTURE(DslFixture, "an executable cache holds what a least-recently-used model holds, for every generated access sequence under count and byte limits") {
  Builds b{*this, buffer(4, 0.0f)};
  std::mt19937 rng(2026);
  const std::size_t counts[] = {1, 2, 3, 5, std::numeric_limits<std::size_t>::max()};
  const std::size_t budgets[] = {1, 250, 400, 1000, std::numeric_limits<std::size_t>::max()};
  int sequences = 0;
  for (std::size_t max_count : counts)
    for (std::size_t max_bytes : budgets)
      for (int len : {1, 4, 12}) {
        std::vector<int> keys(len);
        for (int& k : keys) k = static_cast<int>(rng() % 6);
        ExecCache<int> cache([&](int n) { return b(n); }, ExecCacheLimits{max_count, max_bytes},
                             [](int n, const GraphExec&) { return cost_of(n); });
        std::uint64_t hits = 0, misses = 0;
        for (int k : keys) {
          (cache.contains(k) ? hits : misses)++;
          REQUIRE(cache.get(k) != nullptr);
        }
        const std::list<int> want = model(keys, max_count, max_bytes, cost_of);
        INFO("max_count=" << max_count << " max_bytes=" << max_bytes << " sequence of " << len);
        CHECK(cache.size() == want.size());
        std::size_t bytes = 0;
        for (int k : want) {
          CHECK(cache.contains(k));
          bytes += cost_of(k);
        }
        for (int k = 0; k < 6; ++k)
          if (std::find(want.begin(), want.end(), k) == want.end()) CHECK_FALSE(cache.contains(k));
        ExecCacheStats s = cache.stats();
        CHECK(s.hits == hits);
        CHECK(s.misses == misses);
        CHECK(s.bytes == bytes);
        CHECK(s.evictions == misses - want.size());
        ++sequences;
      }
  CHECK(sequences == 75);
}

TEST_CASE_FIXTURE(DslFixture, "an evicted executable stays alive while a launch uses it and while a caller holds it, and its owners go after both") {
  auto log = std::make_shared<WitnessLog>();
  auto gate = std::make_shared<LaunchGate>();
  ExecCache<int> cache(
      [&](int n) {
        Graph g{ctx};
        g.edit([&](Edit& e) {
          if (n == 0)
            e.after().keeping(Owners{Witness(log)}).host([gate] { gate->wait(); });
          else
            e.empty();
        });
        return g.instantiate();
      },
      ExecCacheLimits{2});
  std::shared_ptr<GraphExec> held = cache.get(0);
  cache.get(1);
  cache.launch(0, stream);
  REQUIRE(eventually([&] { return gate->waiting.load() == 1; }));
  cache.get(1);                       // key 1 the most recent,
  cache.set_limits(ExecCacheLimits{1});  // so key 0 is evicted while its launch is in flight
  CHECK_FALSE(cache.contains(0));
  CHECK(cache.stats().evictions == 1);
  held.reset();  // the last reference: the executable is destroyed, its launch still in flight
  check_owner_outlives_launch(*gate, *log, stream);
}

TEST_CASE_FIXTURE(DslFixture, "concurrent gets of one key build it once, and other keys' hits do not wait for that build") {
  Builds b{*this, buffer(4, 0.0f)};
  std::atomic<bool> release{false};
  std::atomic<int> slow_started{0};
  ExecCache<int> cache([&](int n) {
    if (n == 7) {
      slow_started.fetch_add(1);
      while (!release.load()) std::this_thread::sleep_for(100us);
    }
    return b(n);
  });
  cache.get(1);
  std::vector<std::thread> threads;
  std::vector<std::shared_ptr<GraphExec>> got(4);
  for (int i = 0; i < 4; ++i) threads.emplace_back([&, i] { got[i] = cache.get(7); });
  REQUIRE(eventually([&] { return slow_started.load() == 1; }));
  CHECK(cache.get(1) != nullptr);  // a hit while key 7 is being built
  CHECK_FALSE(cache.contains(7));
  release = true;
  for (auto& t : threads) t.join();
  CHECK(slow_started.load() == 1);
  for (auto& e : got) CHECK(e == got[0]);
  ExecCacheStats s = cache.stats();
  CHECK(s.misses == 2);
  CHECK(s.hits == 1 + 3);  // key 1 during the build, key 7 by the three that did not build it
}

TEST_CASE_FIXTURE(DslFixture, "a build that throws keeps nothing for its key, counts a failed build, and a later get builds again") {
  Builds b{*this, buffer(4, 0.0f)};
  int calls = 0;
  ExecCache<int> cache([&](int n) -> GraphExec {
    if (calls++ == 0) throw std::runtime_error("capture failed for batch " + std::to_string(n));
    return b(n);
  });
  CHECK_THROWS_WITH(cache.get(8), "capture failed for batch 8");
  CHECK_FALSE(cache.contains(8));
  CHECK(cache.stats().failed_builds == 1);
  CHECK(cache.stats().count == 0);
  CHECK(cache.get(8) != nullptr);
  CHECK(cache.contains(8));
  ExecCache<int> empty_result([](int) { return GraphExec{}; });
  CHECK_THROWS_WITH_AS(empty_result.get(1), doctest::Contains("the build function returned an empty GraphExec"), UsageError);
  CHECK(empty_result.size() == 0);
  ExecCache<int> bad_cost([&](int n) { return b(n); }, {}, [](int, const GraphExec&) -> std::size_t {
    throw std::runtime_error("no size");
  });
  CHECK_THROWS_WITH(bad_cost.get(2), "no size");
  CHECK(bad_cost.size() == 0);
  CHECK(bad_cost.stats().failed_builds == 1);
}

TEST_CASE_FIXTURE(DslFixture, "prewarming builds the keys not held, once each, and a later get of them is a hit") {
  Builds b{*this, buffer(4, 0.0f)};
  ExecCache<int> cache([&](int n) { return b(n); });
  cache.get(2);
  CHECK(cache.prewarm({1, 2, 4, 8, 4}) == 3);
  CHECK(b.made.load() == 4);
  CHECK(cache.size() == 4);
  std::vector<int> more{8, 16};
  CHECK(cache.prewarm(more) == 1);
  cache.launch(16, stream);
  stream.synchronize();
  CHECK(read(b.x) == std::vector<float>(4, 16.0f));
  CHECK(cache.stats().misses == 5);
  CHECK(cache.stats().hits == 1);
}

TEST_CASE_FIXTURE(DslFixture, "erase, clear and tighter limits drop the cache's executables, least recently used first, and keep the most recent") {
  Builds b{*this, buffer(4, 0.0f)};
  ExecCache<int> cache([&](int n) { return b(n); }, {}, [](int n, const GraphExec&) { return cost_of(n); });
  cache.prewarm({0, 1, 2, 3});
  cache.get(0);  // 0 is now the most recent; 1 the least
  CHECK(cache.erase(2));
  CHECK_FALSE(cache.erase(2));
  CHECK(cache.stats().bytes == cost_of(0) + cost_of(1) + cost_of(3));
  cache.set_limits(ExecCacheLimits{2});
  CHECK_FALSE(cache.contains(1));
  CHECK(cache.contains(0));
  CHECK(cache.contains(3));
  cache.set_limits(ExecCacheLimits{100, 1});  // a budget nothing fits: the most recent stays
  CHECK(cache.size() == 1);
  CHECK(cache.contains(0));
  CHECK(cache.limits().max_bytes == 1);
  cache.clear();
  CHECK(cache.size() == 0);
  CHECK(cache.stats().bytes == 0);
  CHECK(cache.stats().evictions == 2);  // erase and clear are not evictions
}

TEST_CASE_FIXTURE(DslFixture, "an executable cache refuses an empty build function and zero limits, naming them, and its empty state refuses use") {
  CHECK_THROWS_WITH_AS(ExecCache<int>(ExecCache<int>::Build{}), doctest::Contains("the build function is empty"), UsageError);
  auto build = [&](int) { return GraphExec{}; };
  CHECK_THROWS_WITH_AS(ExecCache<int>(build, ExecCacheLimits{0}), doctest::Contains("max_count is 0"), UsageError);
  CHECK_THROWS_WITH_AS(ExecCache<int>(build, ExecCacheLimits{1, 0}), doctest::Contains("max_bytes is 0"), UsageError);
  ExecCache<int> cache(build);
  CHECK_THROWS_WITH_AS(cache.set_limits(ExecCacheLimits{0}), doctest::Contains("ExecCache::set_limits: ExecCacheLimits::max_count is 0"), UsageError);
  ExecCache<int> moved = std::move(cache);
  CHECK(static_cast<bool>(moved));
  for (ExecCache<int>* c : {&cache, new ExecCache<int>()}) {
    CHECK_FALSE(static_cast<bool>(*c));
    CHECK(c->size() == 0);
    CHECK_FALSE(c->contains(1));
    CHECK(c->stats().misses == 0);
    CHECK_THROWS_WITH_AS(c->get(1), doctest::Contains("ExecCache::get: this ExecCache is empty"), UsageError);
    CHECK_THROWS_WITH_AS(c->launch(1, stream), doctest::Contains("ExecCache::get: this ExecCache is empty"), UsageError);
    CHECK_THROWS_WITH_AS(c->prewarm({1}), doctest::Contains("ExecCache::prewarm: this ExecCache is empty"), UsageError);
    CHECK_THROWS_WITH_AS(c->erase(1), doctest::Contains("ExecCache::erase: this ExecCache is empty"), UsageError);
    CHECK_THROWS_WITH_AS(c->clear(), doctest::Contains("ExecCache::clear: this ExecCache is empty"), UsageError);
    CHECK_THROWS_WITH_AS(c->limits(), doctest::Contains("ExecCache::limits: this ExecCache is empty"), UsageError);
    if (c != &cache) delete c;
  }
}

TEST_CASE_FIXTURE(DslFixture, "inside a host callback an executable cache's get, launch and prewarm throw UsageError naming the call, and its queries answer") {
  Builds b{*this, buffer(4, 0.0f)};
  ExecCache<int> cache([&](int n) { return b(n); });
  cache.get(1);
  std::vector<std::string> refused;
  bool answered = false;
  Graph g{ctx};
  g.edit([&](Edit& e) {
    e.host([&] {
      for (auto call : std::initializer_list<std::function<void()>>{
               [&] { cache.get(1); }, [&] { cache.launch(1, stream); }, [&] { cache.prewarm({2}); }}) {
        try {
          call();
        } catch (const UsageError& err) {
          refused.push_back(err.what());
        }
      }
      answered = cache.contains(1) && cache.size() == 1 && cache.stats().misses == 1;
    });
  });
  g.instantiate().launch(stream);
  stream.synchronize();
  REQUIRE(refused.size() == 3);
  CHECK(refused[0].find("ExecCache::get") != std::string::npos);
  CHECK(refused[0].find("host callback") != std::string::npos);
  CHECK(refused[1].find("ExecCache::get") != std::string::npos);
  CHECK(refused[2].find("ExecCache::prewarm") != std::string::npos);
  CHECK(answered);
  CHECK(b.made.load() == 1);
}

TEST_SUITE_END();
