// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Executable graphs: scenario groups C (in-flight launches, bounded reclamation) and G
// (instantiate, launch, upload, per-node and whole updates, enable/disable), and H4 (threads).
// "In flight" means a launch held open by a host node blocked on a gate.
#include <doctest/doctest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "support/dsl_fixture.hpp"
#include "support/launch_gate.hpp"

using namespace tether;
using namespace tether_test;

namespace {

using Gate = LaunchGate;

int alive(const WitnessLog& log, int made) { return made - log.destroyed.load(); }

}  // namespace

TEST_SUITE_BEGIN("exec");

TEST_CASE_FIXTURE(DslFixture, "G1: an executable launches and uploads, and per-node updates change it but not the graph") {
  SharedBuffer<float> x = buffer(8, 1.0f), y = buffer(8, 1.0f);
  Graph g{ctx};
  Node<KernelNode<float*, float, int>> n;
  g.edit([&](Edit& e) { n = e.launch(k.scale, Grid{1}, Block{8}, x, 2.0f, 8); });
  GraphExec exec = g.instantiate();
  exec.upload(stream);
  exec.launch(stream);
  stream.synchronize();
  CHECK(read(x) == std::vector<float>(8, 2.0f));
  exec.update(n, Grid{1}, Block{8}, y, 3.0f, 8);
  exec.launch(stream);
  stream.synchronize();
  CHECK(read(y) == std::vector<float>(8, 3.0f));
  CHECK(read(x) == std::vector<float>(8, 2.0f));
  GraphExec fresh = g.instantiate();  // the graph still has its own version
  fresh.launch(stream);
  stream.synchronize();
  CHECK(read(x) == std::vector<float>(8, 4.0f));
  CHECK(read(y) == std::vector<float>(8, 3.0f));
}

TEST_CASE_FIXTURE(DslFixture, "G2: kernel, memcpy and memset nodes can be disabled and enabled again, and disabled nodes do not run") {
  SharedBuffer<float> x = buffer(4, 1.0f), y = buffer(4, 0.0f);
  Graph g{ctx};
  Node<KernelNode<float*, float, int>> kn;
  Node<MemsetNode> set;
  Node<MemcpyNode> copy;
  g.edit([&](Edit& e) {
    set = e.memset(y, 5.0f);
    kn = e.after(set).launch(k.scale, Grid{1}, Block{4}, x, 2.0f, 4);
    copy = e.after(kn).memcpy(y, x);
  });
  GraphExec exec = g.instantiate();
  exec.enable(kn, false);
  exec.enable(copy, false);
  CHECK_FALSE(exec.enabled(kn));
  CHECK_FALSE(exec.enabled(copy));
  CHECK(exec.enabled(set));
  exec.launch(stream);
  stream.synchronize();
  CHECK(read(x) == std::vector<float>(4, 1.0f));
  CHECK(read(y) == std::vector<float>(4, 5.0f));
  exec.enable(kn, true);
  exec.enable(copy, true);
  exec.enable(set, false);
  exec.launch(stream);
  stream.synchronize();
  CHECK(read(x) == std::vector<float>(4, 2.0f));
  CHECK(read(y) == std::vector<float>(4, 2.0f));
}

TEST_CASE_FIXTURE(DslFixture, "G3: a rejected per-node update releases its owners and the executable keeps its version") {
  if (!simulated) {
    MESSAGE("fault injection needs the simulator");
    return;
  }
  SharedBuffer<float> x = buffer(4, 1.0f);
  auto rejected = std::make_shared<WitnessLog>();
  Graph g{ctx};
  Node<HostNode> h;
  auto hits = std::make_shared<std::atomic<int>>(0);
  g.edit([&](Edit& e) { h = e.host([hits] { hits->fetch_add(1); }); });
  GraphExec exec = g.instantiate();
  sim::fail_call("cuGraphExecNodeSetParams", 1, Errc::invalid_value);
  CHECK_THROWS_AS(exec.update(h, [w = Witness(rejected), hits] { hits->fetch_add(100); }), DriverError);
  CHECK(eventually([&] { return rejected->destroyed.load() == 1; }));
  CHECK(rejected->outside_reclaimer.load() == 0);
  exec.launch(stream);
  stream.synchronize();
  CHECK(hits->load() == 1);
}

TEST_CASE_FIXTURE(DslFixture, "G4: a whole update replaces the executable's versions and releases earlier per-node owners") {
  SharedBuffer<float> x = buffer(4, 1.0f), y = buffer(4, 1.0f), z = buffer(4, 1.0f);
  auto per_node = std::make_shared<WitnessLog>();
  Graph g{ctx};
  Node<KernelNode<float*, float, int>> n;
  Node<HostNode> h;
  g.edit([&](Edit& e) {
    n = e.launch(k.scale, Grid{1}, Block{4}, x, 2.0f, 4);
    h = e.after(n).host([] {});
  });
  GraphExec exec = g.instantiate();
  exec.launch(stream);
  exec.update(h, [w = Witness(per_node)] {});
  exec.launch(stream);
  stream.synchronize();
  g.edit([&](Edit& e) { e.update(n, Grid{1}, Block{4}, z, 7.0f, 4); });
  UpdateResult r = exec.update(g);
  CHECK(static_cast<bool>(r));
  exec.launch(stream);  // its marker proves the earlier launches ended
  stream.synchronize();
  CHECK(eventually([&] { return per_node->destroyed.load() == 1; }));
  CHECK(read(z) == std::vector<float>(4, 7.0f));
  (void)y;
}

TEST_CASE_FIXTURE(DslFixture, "G5: a failed whole update reports the reason and the node, and the executable is unchanged") {
  SharedBuffer<float> x = buffer(4, 1.0f);
  Graph g{ctx};
  g.edit([&](Edit& e) { e.launch(k.scale, Grid{1}, Block{4}, x, 2.0f, 4); });
  GraphExec exec = g.instantiate();
  Graph bigger{ctx};
  bigger.edit([&](Edit& e) {
    e.launch(k.scale, Grid{1}, Block{4}, x, 2.0f, 4);
    e.empty();
  });
  UpdateResult r = exec.update(bigger);
  CHECK_FALSE(static_cast<bool>(r));
  CHECK(r.reason == UpdateResult::Reason::topology_changed);
  Graph other_type{ctx};
  Node<EmptyNode> wrong;
  other_type.edit([&](Edit& e) { wrong = e.empty(); });
  UpdateResult t = exec.update(other_type);
  CHECK(t.reason == UpdateResult::Reason::node_type_changed);
  CHECK(t.node == wrong);
  CHECK(to_string(t.reason) == "node_type_changed");
  CHECK(fmt::format("{}", t) == fmt::format("node_type_changed (node {})", static_cast<const void*>(wrong.get())));
  CHECK(fmt::format("{}", UpdateResult{}) == "success");
  exec.launch(stream);
  stream.synchronize();
  CHECK(read(x) == std::vector<float>(4, 2.0f));
}

TEST_CASE_FIXTURE(DslFixture, "C1: destroying an executable during a launch keeps its owners until the launch ends") {
  auto log = std::make_shared<WitnessLog>();
  auto gate = std::make_shared<Gate>();
  std::optional<GraphExec> exec;
  {
    Graph g{ctx};
    g.edit([&](Edit& e) { e.after().keeping(Owners{Witness(log)}).host([gate] { gate->wait(); }); });
    exec.emplace(g.instantiate());
  }
  exec->launch(stream);
  REQUIRE(eventually([&] { return gate->waiting.load() == 1; }));
  exec.reset();  // never blocks on the launch in flight
  check_owner_outlives_launch(*gate, *log, stream);
}

TEST_CASE_FIXTURE(DslFixture, "C2: a whole update during a launch keeps the replaced owners until that launch ends") {
  auto old_log = std::make_shared<WitnessLog>();
  auto gate = std::make_shared<Gate>();
  Graph g{ctx};
  Node<HostNode> h;
  g.edit([&](Edit& e) { h = e.after().keeping(Owners{Witness(old_log)}).host([gate] { gate->wait(); }); });
  GraphExec exec = g.instantiate();
  exec.launch(stream);
  REQUIRE(eventually([&] { return gate->waiting.load() == 1; }));
  g.edit([&](Edit& e) { e.update(h, [] {}); });  // the graph drops its old version
  CHECK(static_cast<bool>(exec.update(g)));         // and so does the executable
  std::this_thread::sleep_for(30ms);
  CHECK(old_log->destroyed.load() == 0);
  gate->open = true;
  stream.synchronize();
  CHECK(eventually([&] { return old_log->destroyed.load() == 1; }));
}

TEST_CASE_FIXTURE(DslFixture, "C3: a per-node update during a launch releases the old owners once that launch ends, before the executable goes") {
  auto v1 = std::make_shared<WitnessLog>();
  auto gate = std::make_shared<Gate>();
  Graph g{ctx};
  Node<HostNode> h;
  Node<HostNode> hold;
  g.edit([&](Edit& e) {
    hold = e.host([gate] { gate->wait(); });
    h = e.after(hold).host([] {});
  });
  GraphExec exec = g.instantiate();
  exec.update(h, [w = Witness(v1)] {});  // an executable-only version
  exec.launch(stream);                  // uses v1
  REQUIRE(eventually([&] { return gate->waiting.load() == 1; }));
  exec.update(h, [] {});                // supersedes v1 while the launch is in flight
  std::this_thread::sleep_for(30ms);
  CHECK(v1->destroyed.load() == 0);
  gate->open = true;
  stream.synchronize();
  exec.reclaim(stream);  // or the next launch: proves the launch that used v1 ended
  stream.synchronize();
  CHECK(eventually([&] { return v1->destroyed.load() == 1; }));
  CHECK(exec.live_node_versions() == 1);
}

TEST_CASE_FIXTURE(DslFixture, "C4: ten thousand per-node updates with fresh buffers while launching keep live versions bounded") {
  const int updates = simulated ? 10000 : 2000;
  auto log = std::make_shared<WitnessLog>();
  Graph g{ctx};
  Node<KernelNode<float*, float, int>> n;
  SharedBuffer<float> first = buffer(4, 1.0f);
  g.edit([&](Edit& e) { n = e.launch(k.fill, Grid{1}, Block{4}, first, 0.0f, 4); });
  GraphExec exec = g.instantiate();
  int made = 0;
  int worst = 0;
  std::size_t worst_versions = 0;
  for (int i = 0; i < updates; ++i) {
    SharedBuffer<float> fresh = ctx.alloc<float>(4).share();
    exec.update(n, Grid{1}, Block{4}, std::move(fresh), static_cast<float>(i), 4);
    exec.launch(stream);
    if (i % 2 == 1) {
      // Every second launch is waited for; live owners: the current version plus what the last two
      // launches may still use.
      stream.synchronize();
      wait_reclaimed(1s);
      worst_versions = std::max(worst_versions, exec.live_node_versions());
    }
    (void)log;
    (void)made;
  }
  stream.synchronize();
  exec.reclaim(stream);
  stream.synchronize();
  CHECK(eventually([&] { return exec.live_node_versions() == 1; }));
  MESSAGE("C4: " << updates << " updates, at most " << worst_versions << " live versions after a synchronized launch");
  CHECK(worst_versions <= 3);
  (void)worst;
  (void)alive;
}

TEST_CASE_FIXTURE(DslFixture, "H4: threads building, instantiating, updating and launching their own graphs lose no release") {
  auto log = std::make_shared<WitnessLog>();
  constexpr int threads = 4, rounds = 20;
  std::vector<std::thread> ts;
  std::atomic<int> failures{0};
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&] {
      try {
        Stream s = ctx.make_stream();
        SharedBuffer<float> x = ctx.alloc<float>(4).share();
        for (int r = 0; r < rounds; ++r) {
          Graph g{ctx};
          Node<HostNode> h;
          g.edit([&](Edit& e) {
            auto f = e.after().keeping(Owners{Witness(log)}).launch(k.fill, Grid{1}, Block{4}, x, 1.0f, 4);
            h = e.after(f).host([w = Witness(log)] {});
          });
          GraphExec exec = g.instantiate();
          exec.launch(s);
          exec.update(h, [w = Witness(log)] {});
          exec.launch(s);
          s.synchronize();
        }
      } catch (...) {
        failures.fetch_add(1);
      }
    });
  for (auto& th : ts) th.join();
  CHECK(failures.load() == 0);
  CHECK(eventually([&] { return log->destroyed.load() == threads * rounds * 3; }));
  CHECK(log->outside_reclaimer.load() == 0);
}

TEST_SUITE_END();

TEST_CASE_FIXTURE(DslFixture, "an executable dropped just before its graph and the graph are never destroyed at the same "
                              "time (the H200 double-frees inside libcuda when the two overlap)") {
  SharedBuffer<float> x = buffer(64, 1.0f);
  for (int i = 0; i < 200; ++i) {
    Graph g{ctx};
    g.edit([&](Edit& e) { e.launch(k.scale, Grid{1}, Block{64}, x, 1.0f, 64); });
    GraphExec exec = g.instantiate();
    if (i % 2) exec.launch(stream);
    exec.reset();  // cuGraphExecDestroy on the reclaimer
    g.reset();     // the graph's last holder: its cuGraphDestroy must not overlap the executable's destroy
  }
  stream.synchronize();
  CHECK(wait_reclaimed(5s));
  if (simulated) {
    for (const sim::Violation& v : sim::violations()) CHECK_MESSAGE(false, v.detail);
    sim::clear_violations();
  }
}
