// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The typed DSL through the public API: every node kind, retention (scenarios A, B, D, E through
// Graph/Edit), updates changing future instantiations only (F1, F5), removal (F3), conditionals,
// and thread safety. Buffer contents tell which parameter version ran.
#include <doctest/doctest.h>

#include <memory>
#include <thread>
#include <vector>

#include "support/dsl_fixture.hpp"

using namespace tether;
using namespace tether_test;

TEST_SUITE_BEGIN("dsl");

TEST_CASE_FIXTURE(DslFixture, "a graph built in one edit runs its memset and kernel nodes in order") {
  SharedBuffer<float> x = buffer(256, 0.0f);
  Graph g{ctx};
  g.edit([&](Edit& e) {
    auto set = e.memset(x, 1.5f);
    e.after(set).launch(k.scale, Grid{1}, Block{256}, x, 2.0f, 256);
  });
  CHECK(g.node_count() == 2);
  run(g);
  CHECK(read(x) == std::vector<float>(256, 3.0f));
}

TEST_CASE_FIXTURE(DslFixture, "A1: a kernel node keeps its module alive after the user dropped the module and kernel") {
  SharedBuffer<float> x = buffer(64, 0.0f);
  Graph g{ctx};
  std::size_t modules_before = simulated ? sim::stats().modules : 0;
  {
    Module m = test_module(ctx);
    Kernel<float*, float, int> fill = m.kernel<float*, float, int>("fill");
    g.edit([&](Edit& e) { e.launch(fill, Grid{1}, Block{64}, x, 7.0f, 64); });
  }
  if (simulated) CHECK(sim::stats().modules == modules_before + 1);
  run(g);
  CHECK(read(x) == std::vector<float>(64, 7.0f));
  g = Graph{ctx};  // the old graph goes; its kernel node's version with it
  if (simulated) CHECK(eventually([&] { return sim::stats().modules == modules_before; }));
}

TEST_CASE_FIXTURE(DslFixture, "A2: a moved-in DeviceBuffer is retained by the node, written by the launch and freed after the graph") {
  std::size_t allocations = simulated ? sim::stats().device_allocations : 0;
  Graph g{ctx};
  Unowned<float> view;
  {
    DeviceBuffer<float> y = ctx.alloc<float>(32);
    view = unowned(y);
    g.edit([&](Edit& e) { e.launch(k.fill, Grid{1}, Block{32}, std::move(y), 4.0f, 32); });
  }
  if (simulated) CHECK(sim::stats().device_allocations == allocations + 1);
  run(g);
  std::vector<float> h(32);
  detail::call<detail::Entry::cuMemcpyDtoH>(table(), "reading", h.data(),
                                            static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(view.ptr)),
                                            std::size_t{32 * sizeof(float)});
  CHECK(h == std::vector<float>(32, 4.0f));
  g = Graph{ctx};
  if (simulated) CHECK(eventually([&] { return sim::stats().device_allocations == allocations; }));
}

TEST_CASE_FIXTURE(DslFixture, "A4: a move-only host callable runs on every launch and is released with the graph") {
  auto log = std::make_shared<WitnessLog>();
  auto calls = std::make_shared<std::atomic<int>>(0);
  Graph g{ctx};
  g.edit([&](Edit& e) {
    e.host([w = Witness(log), state = std::make_unique<int>(3), calls] { calls->fetch_add(*state); });
  });
  run(g, 3);
  CHECK(calls->load() == 9);
  CHECK(log->destroyed.load() == 0);
  g = Graph{ctx};
  CHECK(eventually([&] { return log->destroyed.load() == 1; }));
  CHECK(log->outside_reclaimer.load() == 0);
}

TEST_CASE_FIXTURE(DslFixture, "A3: event record and wait nodes keep their event alive after the user dropped it") {
  std::size_t events = simulated ? sim::stats().events : 0;
  Graph g{ctx};
  {
    Event ev = ctx.make_event();
    g.edit([&](Edit& e) {
      auto r = e.record(ev);
      e.after(r).wait(ev);
    });
  }
  if (simulated) CHECK(sim::stats().events == events + 1);
  run(g, 2);
  g = Graph{ctx};
  if (simulated) CHECK(eventually([&] { return sim::stats().events == events; }));
}

TEST_CASE_FIXTURE(DslFixture, "A5: extra owners given with keeping are retained with the node and unowned memory is not") {
  auto kept = std::make_shared<WitnessLog>();
  SharedBuffer<float> x = buffer(16, 0.0f);
  std::optional<DeviceBuffer<float>> scratch(ctx.alloc<float>(16));
  std::size_t allocations = simulated ? sim::stats().device_allocations : 0;
  Graph g{ctx};
  g.edit([&](Edit& e) {
    auto set = e.memset(unowned(*scratch), 2.0f);
    e.after(set).keeping(Owners{Witness(kept)}).memcpy(x, unowned(*scratch));
  });
  run(g);
  CHECK(read(x) == std::vector<float>(16, 2.0f));
  scratch.reset();  // the graph did not retain it: freed at once (on the reclaimer)
  if (simulated) CHECK(eventually([&] { return sim::stats().device_allocations == allocations - 1; }));
  CHECK(kept->destroyed.load() == 0);
  g = Graph{ctx};
  CHECK(eventually([&] { return kept->destroyed.load() == 1; }));
}

TEST_CASE_FIXTURE(DslFixture, "A6: destroying a graph releases every owner exactly once, on the reclaimer") {
  auto log = std::make_shared<WitnessLog>();
  {
    Graph g{ctx};
    g.edit([&](Edit& e) {
      Node<> prev = e.after().keeping(Owners{Witness(log)}).empty();
      for (int i = 0; i < 50; ++i) prev = e.after(prev).keeping(Owners{Witness(log), Witness(log)}).empty();
    });
  }
  CHECK(eventually([&] { return log->destroyed.load() == 101; }));
  std::this_thread::sleep_for(20ms);
  CHECK(log->destroyed.load() == 101);
  CHECK(log->outside_reclaimer.load() == 0);
}

TEST_CASE_FIXTURE(DslFixture, "B1: a clone keeps every owner alive after the source is gone, runs, and maps source nodes") {
  auto log = std::make_shared<WitnessLog>();
  SharedBuffer<float> x = buffer(8, 1.0f);
  std::optional<Graph> g(std::in_place, ctx);
  Node<KernelNode<float*, float, int>> n;
  g->edit([&](Edit& e) { n = e.after().keeping(Owners{Witness(log)}).launch(k.scale, Grid{1}, Block{8}, x, 3.0f, 8); });
  Graph c = g->clone();
  auto in_clone = c.find(n);
  CHECK(in_clone.valid());
  CHECK(in_clone.get() != n.get());
  // Node handles share ownership of their graph: drop them too, so the source really goes.
  n = {};
  in_clone = {};
  g.reset();
  CHECK(log->destroyed.load() == 0);
  run(c);
  CHECK(read(x) == std::vector<float>(8, 3.0f));
  c = Graph{ctx};
  CHECK(eventually([&] { return log->destroyed.load() == 1; }));
}

TEST_CASE_FIXTURE(DslFixture, "B5 F1: updating a kernel node's arguments changes future instantiations only") {
  SharedBuffer<float> x = buffer(8, 1.0f), y = buffer(8, 1.0f);
  auto old_log = std::make_shared<WitnessLog>();
  Graph g{ctx};
  Node<KernelNode<float*, float, int>> n;
  g.edit([&](Edit& e) { n = e.after().keeping(Owners{Witness(old_log)}).launch(k.scale, Grid{1}, Block{8}, x, 2.0f, 8); });
  CUgraphExec before = instantiate(g);
  g.edit([&](Edit& e) { e.update(n, Grid{1}, Block{8}, y, 5.0f, 8); });
  CHECK(old_log->destroyed.load() == 0);  // the executable still holds the old version
  launch(before);
  CHECK(read(x) == std::vector<float>(8, 2.0f));
  CHECK(read(y) == std::vector<float>(8, 1.0f));
  run(g);
  CHECK(read(y) == std::vector<float>(8, 5.0f));
  CHECK(read(x) == std::vector<float>(8, 2.0f));
  destroy(before);
  CHECK(eventually([&] { return old_log->destroyed.load() == 1; }));
}

TEST_CASE_FIXTURE(DslFixture, "F1: memset, memcpy, host and event nodes take new parameters for future instantiations") {
  SharedBuffer<float> a = buffer(4, 0.0f), b = buffer(4, 0.0f), c = buffer(4, 9.0f);
  auto hits = std::make_shared<std::atomic<int>>(0);
  Event e1 = ctx.make_event(), e2 = ctx.make_event();
  Graph g{ctx};
  Node<MemsetNode> set;
  Node<MemcpyNode> copy;
  Node<HostNode> host;
  Node<EventRecordNode> rec;
  g.edit([&](Edit& e) {
    set = e.memset(a, 1.0f);
    copy = e.after(set).memcpy(b, a);
    host = e.after(copy).host([hits] { hits->fetch_add(1); });
    rec = e.after(host).record(e1);
  });
  run(g);
  CHECK(read(b) == std::vector<float>(4, 1.0f));
  CHECK(hits->load() == 1);
  g.edit([&](Edit& e) {
    e.update(set, a, 4.0f);
    e.update(copy, c, a);  // now copies a into c
    e.update(host, [hits] { hits->fetch_add(10); });
    e.update(rec, e2);
  });
  run(g);
  CHECK(read(c) == std::vector<float>(4, 4.0f));
  CHECK(read(b) == std::vector<float>(4, 1.0f));
  CHECK(hits->load() == 11);
  CHECK(e2.query());
}

TEST_CASE_FIXTURE(DslFixture, "F2: a failed update leaves the node's parameters, owners and future instantiations as before") {
  if (!simulated) {
    MESSAGE("fault injection needs the simulator");
    return;
  }
  SharedBuffer<float> x = buffer(4, 1.0f), y = buffer(4, 1.0f);
  auto log = std::make_shared<WitnessLog>();
  auto rejected = std::make_shared<WitnessLog>();
  Graph g{ctx};
  Node<KernelNode<float*, float, int>> n;
  g.edit([&](Edit& e) { n = e.after().keeping(Owners{Witness(log)}).launch(k.scale, Grid{1}, Block{4}, x, 2.0f, 4); });
  sim::fail_call("cuGraphNodeSetParams", 1, Errc::invalid_value);
  CHECK_THROWS_AS(g.edit([&](Edit& e) { e.update(n, Grid{1}, Block{4}, y, 7.0f, 4); }), DriverError);
  // A validation failure (destination too small) is caught before the driver.
  SharedBuffer<float> small = buffer(2, 0.0f);
  std::uint64_t calls = sim::call_count("*");
  Graph h{ctx};
  CHECK_THROWS_AS(h.edit([&](Edit& e) { e.memcpy(small, x); }), UsageError);
  CHECK(sim::call_count("*") - calls < 10);  // graph creation and context push/pop only
  run(g);
  CHECK(read(x) == std::vector<float>(4, 2.0f));
  CHECK(read(y) == std::vector<float>(4, 1.0f));
  CHECK(log->destroyed.load() == 0);
  (void)rejected;
}

TEST_CASE_FIXTURE(DslFixture, "F3: a removed node cannot be updated or removed again, and the driver destroys it once") {
  Graph g{ctx};
  Node<EmptyNode> a;
  g.edit([&](Edit& e) { a = e.empty(); });
  std::uint64_t destroys = simulated ? sim::call_count("cuGraphDestroyNode") : 0;
  g.edit([&](Edit& e) {
    e.remove(a);
    e.remove(a);  // idempotent within the edit
  });
  CHECK_FALSE(a.valid());
  CHECK(g.node_count() == 0);
  CHECK_THROWS_AS(g.edit([&](Edit& e) { e.remove(a); }), UsageError);
  CHECK_THROWS_AS(a.get(), UsageError);
  if (simulated) CHECK(sim::call_count("cuGraphDestroyNode") == destroys + 1);
}

TEST_CASE_FIXTURE(DslFixture, "a removal that was rolled back can be made again, and removing every node of a graph in one edit removes each once") {
  Graph g{ctx};
  std::vector<Node<EmptyNode>> nodes(300);
  g.edit([&](Edit& e) {
    for (auto& n : nodes) n = e.empty();
  });
  {
    Edit e = g.edit();
    e.remove(nodes[0]);
    e.remove(nodes[1]);
  }  // rolled back: the removals are forgotten
  CHECK(nodes[0].valid());
  CHECK(g.node_count() == 300);
  std::uint64_t destroys = simulated ? sim::call_count("cuGraphDestroyNode") : 0;
  g.edit([&](Edit& e) {
    for (auto& n : nodes) e.remove(n);
    for (auto& n : nodes) e.remove(n);  // each a second time: idempotent
  });
  CHECK(g.node_count() == 0);
  for (auto& n : nodes) CHECK_FALSE(n.valid());
  if (simulated) CHECK(sim::call_count("cuGraphDestroyNode") == destroys + 300);
}

TEST_CASE_FIXTURE(DslFixture, "F5: a committed edit publishes all changes and releases previous versions only after commit") {
  auto v1 = std::make_shared<WitnessLog>();
  SharedBuffer<float> x = buffer(4, 1.0f);
  Graph g{ctx};
  Node<KernelNode<float*, float, int>> n;
  Node<EmptyNode> extra;
  g.edit([&](Edit& e) { n = e.after().keeping(Owners{Witness(v1)}).launch(k.scale, Grid{1}, Block{4}, x, 2.0f, 4); });
  {
    Edit e = g.edit();
    e.update(n, Grid{1}, Block{4}, x, 3.0f, 4);
    extra = e.after(n).empty();
    CHECK(extra.valid());
    std::this_thread::sleep_for(20ms);
    CHECK(v1->destroyed.load() == 0);  // nothing released before publication
    e.commit();
  }
  CHECK(g.node_count() == 2);
  CHECK(eventually([&] { return v1->destroyed.load() == 1; }));
  run(g);
  CHECK(read(x) == std::vector<float>(4, 3.0f));
}

TEST_CASE_FIXTURE(DslFixture, "an edit dropped without commit leaves the graph, its handles and its owners as before") {
  auto log = std::make_shared<WitnessLog>();
  Graph g{ctx};
  Node<EmptyNode> kept;
  g.edit([&](Edit& e) { kept = e.empty(); });
  Node<EmptyNode> added;
  {
    Edit e = g.edit();
    added = e.after(kept).keeping(Owners{Witness(log)}).empty();
    auto other = e.empty();
    e.connect(added, other);
  }
  CHECK_FALSE(added.valid());
  CHECK(kept.valid());
  CHECK(g.node_count() == 1);
  CHECK(eventually([&] { return log->destroyed.load() == 1; }));
}

TEST_CASE_FIXTURE(DslFixture, "an exception inside edit(fn) rolls everything back and propagates") {
  Graph g{ctx};
  Node<EmptyNode> a;
  struct Boom {};
  CHECK_THROWS_AS(g.edit([&](Edit& e) {
    a = e.empty();
    e.after(a).empty();
    throw Boom{};
  }),
                  Boom);
  CHECK(g.node_count() == 0);
  CHECK_FALSE(a.valid());
}

TEST_CASE_FIXTURE(DslFixture, "D1: a view of an embedded graph is editable while its graph lives, and does not keep "
                              "the graph or its owners alive once the graph is dropped") {
  auto log = std::make_shared<WitnessLog>();
  GraphRef view;
  Node<EmptyNode> inside;
  const std::size_t graphs = live_graphs();
  {
    Graph parent{ctx};
    {
      Graph source{ctx};
      source.edit([&](Edit& e) { e.after().keeping(Owners{Witness(log)}).empty(); });
      parent.edit([&](Edit& e) { view = e.embed(source).graph; });
    }
    CHECK(view.valid());
    CHECK(view.node_count() == 1);
    view.edit([&](Edit& e) { inside = e.empty(); });
    CHECK(view.node_count() == 2);
    CHECK(log->destroyed.load() == 0);
  }
  CHECK(live_graphs() == graphs);
  CHECK_FALSE(view.valid());
  CHECK_FALSE(inside.valid());
  CHECK(eventually([&] { return log->destroyed.load() == 1; }));
  CHECK_THROWS_WITH_AS(view.edit(), doctest::Contains("the graph view is invalid (empty, its graph is gone"), UsageError);
  CHECK_THROWS_WITH_AS(inside.get(), doctest::Contains("this node handle is invalid"), UsageError);
}

TEST_CASE_FIXTURE(DslFixture, "D5: removing a child-graph node invalidates its views and nodes without reaching the driver") {
  Graph source{ctx};
  source.edit([&](Edit& e) { e.empty(); });
  Graph g{ctx};
  EmbedResult child;
  Node<EmptyNode> inner;
  g.edit([&](Edit& e) {
    child = e.embed(source);
    inner = e.in(child.graph).empty();
  });
  CHECK(inner.valid());
  g.edit([&](Edit& e) { e.remove(child.node); });
  CHECK_FALSE(child.graph.valid());
  CHECK_FALSE(inner.valid());
  std::uint64_t calls = simulated ? sim::call_count("*") : 0;
  CHECK_THROWS_AS(child.graph.edit(), UsageError);
  CHECK_THROWS_AS(child.graph.get(), UsageError);
  CHECK_THROWS_AS(g.edit([&](Edit& e) { e.after(inner).empty(); }), UsageError);
  // Only the last edit's open/close touched the driver (the context push and pop).
  if (simulated) CHECK(sim::call_count("*") - calls <= 4);
}

TEST_CASE_FIXTURE(DslFixture, "D7: embedding a graph into itself is rejected before any driver call") {
  Graph g{ctx};
  g.edit([&](Edit& e) { e.empty(); });
  std::uint64_t adds = simulated ? sim::call_count("cuGraphAddNode") : 0;
  CHECK_THROWS_AS(g.edit([&](Edit& e) { e.embed(g); }), UsageError);
  if (simulated) CHECK(sim::call_count("cuGraphAddNode") == adds);
  CHECK(g.node_count() == 1);
}

TEST_CASE_FIXTURE(DslFixture, "E1: a while body runs until its kernel clears the condition, and its view is invalid once the graph is gone") {
  SharedBuffer<int> counter = ctx.alloc<int>(1).share();
  int three = 3;
  counter.copy_from(std::span<const int>(&three, 1));
  SharedBuffer<float> x = buffer(1, 1.0f);
  BodyRef body;
  std::optional<Graph> g(std::in_place, ctx);
  g->edit([&](Edit& e) {
    Condition c = e.condition(1);
    body = e.while_(c).body;
    auto step = e.in(body).launch(k.scale, Grid{1}, Block{1}, x, 2.0f, 1);
    e.after(step).launch(k.countdown, Grid{1}, Block{1}, c.handle(), counter);
  });
  run(*g);
  CHECK(read(x) == std::vector<float>(1, 8.0f));
  body.edit([&](BodyEdit& e) { e.empty(); });
  CHECK(body.node_count() == 3);
  g.reset();
  CHECK_FALSE(body.valid());
  CHECK_THROWS_WITH_AS(body.node_count(), doctest::Contains("the graph view is invalid"), UsageError);
}

TEST_CASE_FIXTURE(DslFixture, "E2: removing a conditional node releases every branch's owners and invalidates its views and nodes") {
  auto log = std::make_shared<WitnessLog>();
  Graph g{ctx};
  IfElseResult branches;
  Node<EmptyNode> in_then;
  g.edit([&](Edit& e) {
    Condition c = e.condition(0);
    branches = e.if_else(c);
    in_then = e.in(branches.then_).keeping(Owners{Witness(log)}).empty();
    e.in(branches.else_).keeping(Owners{Witness(log)}).empty();
  });
  CHECK(branches.then_.valid());
  g.edit([&](Edit& e) { e.remove(branches.node); });
  CHECK_FALSE(branches.then_.valid());
  CHECK_FALSE(branches.else_.valid());
  CHECK_FALSE(in_then.valid());
  CHECK(eventually([&] { return log->destroyed.load() == 2; }));
  CHECK(g.node_count() == 0);
}

TEST_CASE_FIXTURE(DslFixture, "E3: cloning a graph with a conditional node reports the driver's refusal and changes nothing") {
  Graph g{ctx};
  g.edit([&](Edit& e) { e.if_(e.condition()); });
  try {
    (void)g.clone();
    FAIL("clone should have been refused");
  } catch (const DriverError& err) {
    CHECK(err.code() == Errc::not_supported);
    CHECK(err.entry_point() == "cuGraphClone");
  }
  CHECK(g.node_count() == 1);
  g.edit([&](Edit& e) { e.empty(); });
  CHECK(g.node_count() == 2);
}

TEST_CASE_FIXTURE(DslFixture, "switch and if/else nodes run the body the kernel selects") {
  SharedBuffer<float> x = buffer(1, 1.0f);
  Graph g{ctx};
  g.edit([&](Edit& e) {
    Condition c = e.condition(0);
    auto pick = e.launch(k.set_condition, Grid{1}, Block{1}, c.handle(), 2u);
    auto sw = e.after(pick).switch_(c, 3);
    e.in(sw.cases[0]).launch(k.scale, Grid{1}, Block{1}, x, 10.0f, 1);
    e.in(sw.cases[1]).launch(k.scale, Grid{1}, Block{1}, x, 100.0f, 1);
    e.in(sw.cases[2]).launch(k.scale, Grid{1}, Block{1}, x, 5.0f, 1);
  });
  run(g);
  CHECK(read(x) == std::vector<float>(1, 5.0f));
}

TEST_CASE_FIXTURE(DslFixture, "graph memory allocation nodes give memory the nodes between alloc and free can use") {
  SharedBuffer<float> out = buffer(8, 0.0f);
  Graph g{ctx};
  g.edit([&](Edit& e) {
    auto a = e.alloc<float>(8);
    auto f = e.after(a.node).launch(k.fill, Grid{1}, Block{8}, a.memory, 6.0f, 8);
    auto c = e.after(f).memcpy(out, a.memory);
    e.after(c).free(a.memory);
  });
  run(g);
  CHECK(read(out) == std::vector<float>(8, 6.0f));
}

TEST_CASE_FIXTURE(DslFixture, "opening a second edit of the same graph on the same thread is refused instead of deadlocking") {
  Graph g{ctx};
  Edit e = g.edit();
  CHECK_THROWS_AS(g.edit(), UsageError);
  e.empty();
  e.commit();
  CHECK(g.node_count() == 1);
  CHECK_THROWS_AS(e.commit(), UsageError);
  CHECK_THROWS_AS(e.empty(), UsageError);
}

TEST_CASE_FIXTURE(DslFixture, "concurrent edits of different graphs are independent and edits of one graph serialise") {
  Graph shared{ctx};
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      try {
        ctx.make_current();
        Graph own{ctx};
        for (int i = 0; i < 25; ++i) {
          own.edit([&](Edit& e) { e.empty(); });
          shared.edit([&](Edit& e) { e.empty(); });
        }
        if (own.node_count() != 25) failures.fetch_add(1);
      } catch (...) {
        failures.fetch_add(1);
      }
      (void)t;
    });
  for (auto& th : threads) th.join();
  CHECK(failures.load() == 0);
  CHECK(shared.node_count() == 100);
}

TEST_SUITE_END();

TEST_SUITE_BEGIN("dsl");

TEST_CASE_FIXTURE(DslFixture, "D6: replacing a child node's graph invalidates the old views and publishes the new ones") {
  auto old_log = std::make_shared<WitnessLog>();
  auto new_log = std::make_shared<WitnessLog>();
  std::optional<Graph> a(std::in_place, ctx);
  a->edit([&](Edit& e) { e.after().keeping(Owners{Witness(old_log)}).empty(); });
  Graph b{ctx};
  b.edit([&](Edit& e) {
    auto x = e.after().keeping(Owners{Witness(new_log)}).empty();
    e.after(x).empty();
  });
  Graph g{ctx};
  Node<EmptyNode> pre, post;
  EmbedResult child;
  g.edit([&](Edit& e) {
    pre = e.empty();
    child = e.after(pre).embed(*a);
    post = e.after(child.node).empty();
  });
  a.reset();  // only g's embedded copy holds the old owner now
  EmbedResult fresh;
  g.edit([&](Edit& e) { fresh = e.replace(child.node, b); });
  CHECK_FALSE(child.node.valid());
  CHECK_FALSE(child.graph.valid());
  CHECK(fresh.graph.valid());
  CHECK(fresh.graph.node_count() == 2);
  CHECK(g.node_count() == 3);
  std::size_t edges = 0;
  detail::call<detail::Entry::cuGraphGetEdges>(table(), "counting edges", g.get(), static_cast<CUgraphNode*>(nullptr),
                                               static_cast<CUgraphNode*>(nullptr),
                                               static_cast<CUgraphEdgeData*>(nullptr), &edges);
  CHECK(edges == 2);  // pre -> new child -> post
  CHECK(eventually([&] { return old_log->destroyed.load() == 1; }));
  CHECK(new_log->destroyed.load() == 0);
  run(g);
}

TEST_SUITE_END();
