// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Node specs as values (docs/dsl.md "Node specs"): every kind's spec through every consumer's one
// door (Edit::add, Edit::update, GraphExec::update, tether::enqueue), the empty state, the
// release of an unused spec's owners, and the checks made when a spec is made.
#include <doctest/doctest.h>

#include <atomic>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "support/dsl_fixture.hpp"
#include "support/messages.hpp"

using namespace tether;
using namespace tether_test;

namespace {

CUgraphNodeType type_of(const DslFixture& f, CUgraphNode n) {
  CUgraphNodeType t{};
  detail::call<detail::Entry::cuGraphNodeGetType>(f.table(), "reading a node's type", n, &t);
  return t;
}

// One maker per spec kind, each giving a fresh spec over the fixture's resources.
struct Makers {
  DslFixture& f;
  SharedBuffer<float> a, b;
  Event ev;
  std::shared_ptr<std::atomic<int>> ran = std::make_shared<std::atomic<int>>(0);
  auto kernel() { return tether::kernel(f.k.fill, Grid{1}, Block{16}, a, 5.0f, 16); }
  auto memset() { return tether::memset(a, 2.0f); }
  auto memcpy() { return tether::memcpy(b, a); }
  auto host() {
    return tether::host([r = ran] { r->fetch_add(1); });
  }
  auto record() { return tether::record(ev); }
  auto wait() { return tether::wait(ev); }
  auto empty() { return tether::empty(); }
};

// Calls `fn(maker)` for every kind, `maker()` giving a fresh spec of it.
template <class Fn>
void each_kind(Makers& m, Fn&& fn) {
  fn([&] { return m.kernel(); });
  fn([&] { return m.memset(); });
  fn([&] { return m.memcpy(); });
  fn([&] { return m.host(); });
  fn([&] { return m.record(); });
  fn([&] { return m.wait(); });
  fn([&] { return m.empty(); });
}

}  // namespace

TEST_CASE_FIXTURE(DslFixture, "every kind's spec added with Edit::add makes a node of its kind that keeps the spec's "
                              "owners until the graph goes, and leaves the spec empty") {
  Makers m{*this, buffer(16, 1.0f), buffer(16, 0.0f), ctx.make_event()};
  auto log = std::make_shared<WitnessLog>();
  int kinds = 0;
  {
    Graph g{ctx};
    each_kind(m, [&](auto make) {
      auto spec = make().keeping(Owners{Witness(log)});
      using S = std::remove_cvref_t<decltype(spec)>;
      CHECK(static_cast<bool>(spec));
      Edit e = g.edit();
      auto n = e.add(std::move(spec));
      CHECK_FALSE(spec);
      e.commit();
      REQUIRE(n.valid());
      CHECK(type_of(*this, n.get()) == S::type);
      ++kinds;
    });
    wait_released(ctx, 5s);
    CHECK(log->destroyed.load() == 0);  // the graph keeps every version
  }
  CHECK(eventually([&] { return log->destroyed.load() == kinds; }));
  CHECK(log->outside_reclaimer.load() == 0);
}

TEST_CASE_FIXTURE(DslFixture, "a spec's node runs what its one-line spelling runs: kernel, memset, memcpy and host "
                              "specs added in order give the same results") {
  Makers m{*this, buffer(16, 1.0f), buffer(16, 0.0f), ctx.make_event()};
  Graph g{ctx};
  g.edit([&](Edit& e) {
    auto set = e.add(m.memset());                // a = 2
    auto fill = e.after(set).add(m.kernel());    // a = 5
    auto copy = e.after(fill).add(m.memcpy());   // b = a
    e.after(copy).add(m.host());
  });
  run(g);
  CHECK(read(m.b) == std::vector<float>(16, 5.0f));
  CHECK(m.ran->load() == 1);
}

TEST_CASE_FIXTURE(DslFixture, "a moved kernel spec keeps its argument values: the node launched from it fills with "
                              "them") {
  SharedBuffer<float> a = buffer(8, 0.0f);
  Spec<KernelNode<float*, float, int>> first = tether::kernel(k.fill, Grid{1}, Block{8}, a, 7.0f, 8);
  Spec<KernelNode<float*, float, int>> second = std::move(first);
  CHECK_FALSE(first);
  Spec<KernelNode<float*, float, int>> third(tether::kernel(k.fill, Grid{1}, Block{8}, a, 1.0f, 8));
  third = std::move(second);  // the assigned-over spec's owners go to the reclaimer
  CHECK_FALSE(second);
  Graph g{ctx};
  g.edit([&](Edit& e) { e.add(std::move(third)); });
  run(g);
  CHECK(read(a) == std::vector<float>(8, 7.0f));
}

TEST_CASE_FIXTURE(DslFixture, "a kernel spec's launch() gives back its dimensions and dynamic shared memory, and its "
                              "attributes where it has any, also after a move") {
  SharedBuffer<float> a = buffer(8, 0.0f);
  auto plain = tether::kernel(k.fill, Launch{Grid{3, 2, 1}, Block{8, 4, 2}}.shared_memory(1024), a, 1.0f, 8);
  auto moved = std::move(plain);
  const Launch l = moved.launch();
  CHECK(l.grid().x == 3);
  CHECK(l.grid().y == 2);
  CHECK(l.block().x == 8);
  CHECK(l.block().z == 2);
  CHECK(l.shared_memory_bytes() == 1024);
  CHECK(l.attributes() == 0);
  auto attributed = tether::kernel(k.fill, Launch{Grid{1}, Block{8}}.priority(1), a, 1.0f, 8);
  CHECK(attributed.launch().attributes() == Launch::priority_bit);
  CHECK(attributed.launch().block().x == 8);
}

TEST_CASE_FIXTURE(DslFixture, "every consumer refuses an empty spec with a UsageError naming itself, and keeping on an "
                              "empty spec is refused too") {
  Makers m{*this, buffer(16, 1.0f), buffer(16, 0.0f), ctx.make_event()};
  Graph g{ctx};
  Node<MemsetNode> n;
  g.edit([&](Edit& e) { n = e.memset(m.a, 0.0f); });
  GraphExec exec = g.instantiate();
  auto spent = [&] {
    auto s = m.memset();
    auto taken = std::move(s);
    (void)taken;
    return s;
  };
  {
    Edit e = g.edit();
    CHECK(throws_with<UsageError>([&] { e.add(spent()); }, "Edit::add: this spec is empty"));
    CHECK(throws_with<UsageError>([&] { e.update(n, spent()); }, "Edit::update: this spec is empty"));
  }
  CHECK(throws_with<UsageError>([&] { exec.update(n, spent()); }, "GraphExec::update: this spec is empty"));
  CHECK(throws_with<UsageError>([&] { tether::enqueue(stream, spent()); }, "tether::enqueue: this spec is empty"));
  CHECK(throws_with<UsageError>([&] { spent().keeping(Owners{1}); }, "keeping: this spec is empty"));
}

TEST_CASE_FIXTURE(DslFixture, "a spec dropped unused, or refused by its consumer, releases its owners on the "
                              "reclaimer exactly once") {
  Makers m{*this, buffer(16, 1.0f), buffer(16, 0.0f), ctx.make_event()};
  auto log = std::make_shared<WitnessLog>();
  int made = 0;
  each_kind(m, [&](auto make) {
    { auto spec = make().keeping(Owners{Witness(log)}); }
    ++made;
  });
  // Refused: an edit that already ended.
  Graph g{ctx};
  Edit e = g.edit();
  e.commit();
  CHECK(throws_with<UsageError>([&] { e.add(m.memset().keeping(Owners{Witness(log)})); },
                                "this edit was already committed or rolled back"));
  ++made;
  CHECK(eventually([&] { return log->destroyed.load() == made; }));
  CHECK(log->outside_reclaimer.load() == 0);
}

TEST_CASE_FIXTURE(DslFixture, "Edit::update and GraphExec::update take every updatable kind's spec as the node's next "
                              "version, and an edit's rollback puts the previous one back") {
  Makers m{*this, buffer(16, 1.0f), buffer(16, 0.0f), ctx.make_event()};
  Graph g{ctx};
  Node<KernelNode<float*, float, int>> kn;
  Node<MemsetNode> ms;
  Node<MemcpyNode> mc;
  Node<HostNode> h;
  Node<EventRecordNode> rec;
  Node<EventWaitNode> wt;
  Event other = ctx.make_event();
  g.edit([&](Edit& e) {
    ms = e.memset(m.a, 3.0f);
    kn = e.after(ms).launch(k.fill, Grid{1}, Block{16}, m.a, 9.0f, 16);
    mc = e.after(kn).memcpy(m.b, m.a);
    h = e.after(mc).host([] {});
    rec = e.after(h).record(other);
    wt = e.wait(other);
  });
  auto log = std::make_shared<WitnessLog>();
  {
    Edit e = g.edit();
    e.update(ms, m.memset().keeping(Owners{Witness(log)}));
    e.update(kn, m.kernel());
    e.update(mc, m.memcpy());
    e.update(h, m.host());
    e.update(rec, m.record());
    e.update(wt, m.wait());
  }  // rolled back: every version goes, the nodes run their first ones
  CHECK(eventually([&] { return log->destroyed.load() == 1; }));
  run(g);
  CHECK(read(m.b) == std::vector<float>(16, 9.0f));
  CHECK(m.ran->load() == 0);

  g.edit([&](Edit& e) {
    e.update(kn, m.kernel());  // fill with 5
    e.update(h, m.host());
  });
  run(g);
  CHECK(read(m.b) == std::vector<float>(16, 5.0f));
  CHECK(m.ran->load() == 1);

  GraphExec exec = g.instantiate();
  exec.update(kn, tether::kernel(k.fill, Grid{1}, Block{16}, m.a, 6.0f, 16));
  exec.update(ms, m.memset());
  exec.update(mc, m.memcpy());
  exec.update(h, m.host());
  exec.update(rec, m.record());
  exec.update(wt, m.wait());
  exec.launch(stream);
  stream.synchronize();
  CHECK(read(m.b) == std::vector<float>(16, 6.0f));
  CHECK(m.ran->load() == 2);
}

TEST_CASE_FIXTURE(DslFixture, "a kernel update spec must launch the kernel the node runs: another kernel is refused by "
                              "name in an edit and in an executable") {
  SharedBuffer<float> a = buffer(8, 1.0f);
  Graph g{ctx};
  Node<KernelNode<float*, float, int>> n;
  g.edit([&](Edit& e) { n = e.launch(k.fill, Grid{1}, Block{8}, a, 2.0f, 8); });
  GraphExec exec = g.instantiate();
  {
    Edit e = g.edit();
    CHECK(throws_with<UsageError>([&] { e.update(n, tether::kernel(k.scale, Grid{1}, Block{8}, a, 2.0f, 8)); },
                                  "Edit::update: the spec launches kernel 'scale', but the node runs kernel 'fill'"));
  }
  CHECK(throws_with<UsageError>([&] { exec.update(n, tether::kernel(k.scale, Grid{1}, Block{8}, a, 2.0f, 8)); },
                                "GraphExec::update: the spec launches kernel 'scale', but the node runs kernel 'fill'"));
  CHECK(throws_with<UsageError>(
      [&] { exec.update(n, tether::kernel(k.fill, Launch{Grid{1}, Block{8}}.priority(1), a, 2.0f, 8)); },
      "GraphExec::update: the Launch sets"));
}

TEST_CASE_FIXTURE(DslFixture, "a spec's checks run when it is made and name the factory: empty buffers, zero "
                              "dimensions, sizes that do not fit") {
  SharedBuffer<float> empty_buffer;
  SharedBuffer<float> small = buffer(4, 0.0f), big = buffer(8, 0.0f);
  CHECK(throws_with<UsageError>([&] { (void)tether::memset(empty_buffer, 0.0f); }, "tether::memset:"));
  CHECK(throws_with<UsageError>([&] { (void)tether::kernel(k.fill, Grid{0}, Block{1}, big, 1.0f, 8); },
                                "tether::kernel:"));
  CHECK(throws_with<UsageError>([&] { (void)tether::kernel(k.fill, Grid{1}, Block{1}, empty_buffer, 1.0f, 8); },
                                "tether::kernel: argument 0"));
  CHECK(throws_with<UsageError>([&] { (void)tether::memcpy(small, big); }, "tether::memcpy:"));
}

TEST_CASE_FIXTURE(DslFixture, "tether::enqueue issues each kind's stream call outside capture, and inside a capture "
                              "returns a handle to the node of the spec's kind") {
  Makers m{*this, buffer(16, 1.0f), buffer(16, 0.0f), ctx.make_event()};
  tether::enqueue(stream, m.memset());
  tether::enqueue(stream, m.kernel());
  tether::enqueue(stream, m.memcpy());
  tether::enqueue(stream, m.host());
  auto unused = tether::enqueue(stream, m.record());
  CHECK_FALSE(unused.valid());  // outside capture: no node
  tether::enqueue(stream, m.wait());
  stream.synchronize();
  CHECK(read(m.b) == std::vector<float>(16, 5.0f));
  CHECK(m.ran->load() == 1);

  std::vector<std::pair<CUgraphNode, CUgraphNodeType>> seen;
  Graph g = tether::capture(stream, [&] {
    auto note = [&](auto n, CUgraphNodeType t) {
      REQUIRE(n.valid());
      seen.emplace_back(n.get(), t);
    };
    note(tether::enqueue(stream, m.memset()), CU_GRAPH_NODE_TYPE_MEMSET);
    note(tether::enqueue(stream, m.kernel()), CU_GRAPH_NODE_TYPE_KERNEL);
    note(tether::enqueue(stream, m.memcpy()), CU_GRAPH_NODE_TYPE_MEMCPY);
    note(tether::enqueue(stream, m.host()), CU_GRAPH_NODE_TYPE_HOST);
  });
  REQUIRE(seen.size() == 4);
  for (auto& [n, t] : seen) CHECK(type_of(*this, n) == t);
  run(g);
  CHECK(m.ran->load() == 2);
}
