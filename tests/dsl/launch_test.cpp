// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Launch configuration (tether::Launch) on kernel nodes, in edits and in executables; extra owners
// of updates; non-owning node handles and views. Runs on both drivers.
#include <doctest/doctest.h>

#include "support/dsl_fixture.hpp"

using namespace tether;
using namespace tether_test;
using detail::Entry;

TEST_SUITE_BEGIN("dsl");

namespace {

CUlaunchAttributeValue attribute(const DslFixture& f, CUgraphNode n, CUlaunchAttributeID id) {
  CUlaunchAttributeValue v{};
  detail::call<Entry::cuGraphKernelNodeGetAttribute>(f.table(), "reading an attribute", n, id, &v);
  return v;
}
unsigned shared_bytes(const DslFixture& f, CUgraphNode n) {
  CUDA_KERNEL_NODE_PARAMS p{};
  detail::call<Entry::cuGraphKernelNodeGetParams>(f.table(), "reading a kernel node", n, &p);
  return p.sharedMemBytes;
}

}  // namespace

TEST_CASE_FIXTURE(DslFixture, "Launch: dynamic shared memory beyond 48 KiB raises the kernel's limit once per size, and "
                              "the node runs with it") {
  SharedBuffer<float> x = buffer(64, 1.0f);
  const std::size_t bytes = 150000;
  const std::uint64_t sets = simulated ? sim::call_count("cuFuncSetAttribute") : 0;
  Graph g{ctx};
  Node<KernelNode<float*, float, int>> a, b;
  g.edit([&](Edit& e) {
    a = e.launch(k.scale, Launch{Grid{1}, Block{64}}.shared_memory(bytes), x, 2.0f, 64);
    b = e.after(a).launch(k.scale, Launch{Grid{1}, Block{64}}.shared_memory(bytes), x, 2.0f, 64);
  });
  if (simulated) CHECK(sim::call_count("cuFuncSetAttribute") == sets + 1);
  CHECK(shared_bytes(*this, a.get()) == bytes);
  int max = 0;
  detail::call<Entry::cuFuncGetAttribute>(table(), "reading the limit", &max,
                                          CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k.scale.function());
  CHECK(max >= static_cast<int>(bytes));
  run(g);
  CHECK(read(x) == std::vector<float>(64, 4.0f));
  // Within 48 KiB nothing is raised.
  g.edit([&](Edit& e) { e.update(a, Launch{Grid{1}, Block{64}}.shared_memory(1024), x, 1.0f, 64); });
  if (simulated) CHECK(sim::call_count("cuFuncSetAttribute") == sets + 1);
  CHECK(shared_bytes(*this, a.get()) == 1024u);
}

TEST_CASE_FIXTURE(DslFixture, "Launch: dynamic shared memory beyond the device's opt-in maximum is refused, naming the "
                              "kernel and the size, and adds no node") {
  SharedBuffer<float> x = buffer(4, 1.0f);
  Graph g{ctx};
  CHECK_THROWS_WITH_AS(
      g.edit([&](Edit& e) { e.launch(k.scale, Launch{Grid{1}, Block{4}}.shared_memory(300000), x, 2.0f, 4); }),
      doctest::Contains("raising kernel 'scale''s dynamic shared memory limit to 300000 bytes"), DriverError);
  CHECK(g.node_count() == 0);
  CHECK_THROWS_WITH_AS(
      g.edit([&](Edit& e) {
        e.launch(k.scale, Launch{Grid{1}, Block{4}}.shared_memory(std::size_t{1} << 33), x, 2.0f, 4);
      }),
      doctest::Contains("do not fit the driver's 32-bit field"), UsageError);
}

TEST_CASE_FIXTURE(DslFixture, "Launch: the attributes it sets are on the kernel node, and an edit update changes those "
                              "its Launch sets and keeps the others") {
  SharedBuffer<float> x = buffer(8, 1.0f);
  Graph g{ctx};
  Node<KernelNode<float*, float, int>> n;
  g.edit([&](Edit& e) { n = e.launch(k.scale, Launch{Grid{2}, Block{4}}.priority(1).cluster(Cluster{2}), x, 2.0f, 8); });
  CHECK(attribute(*this, n.get(), CU_LAUNCH_ATTRIBUTE_PRIORITY).priority == 1);
  CHECK(attribute(*this, n.get(), CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION).clusterDim.x == 2);
  g.edit([&](Edit& e) { e.update(n, Launch{Grid{2}, Block{4}}.priority(3), x, 3.0f, 8); });
  CHECK(attribute(*this, n.get(), CU_LAUNCH_ATTRIBUTE_PRIORITY).priority == 3);
  CHECK(attribute(*this, n.get(), CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION).clusterDim.x == 2);  // kept
  run(g);
  CHECK(read(x) == std::vector<float>(8, 3.0f));
}

TEST_CASE_FIXTURE(DslFixture, "Launch: a rolled-back update restores the attributes and the parameters it changed") {
  SharedBuffer<float> x = buffer(4, 1.0f);
  Graph g{ctx};
  Node<KernelNode<float*, float, int>> n;
  g.edit([&](Edit& e) { n = e.launch(k.scale, Launch{Grid{1}, Block{4}}.priority(2).shared_memory(512), x, 2.0f, 4); });
  {
    Edit e = g.edit();
    e.update(n, Launch{Grid{1}, Block{4}}.priority(7).shared_memory(2048), x, 5.0f, 4);
    CHECK(attribute(*this, n.get(), CU_LAUNCH_ATTRIBUTE_PRIORITY).priority == 7);
  }  // rolled back
  CHECK(attribute(*this, n.get(), CU_LAUNCH_ATTRIBUTE_PRIORITY).priority == 2);
  CHECK(shared_bytes(*this, n.get()) == 512u);
  run(g);
  CHECK(read(x) == std::vector<float>(4, 2.0f));
}

TEST_CASE_FIXTURE(DslFixture, "GraphExec::update changes dynamic shared memory and arguments per launch, and refuses a "
                              "Launch that sets a node attribute, naming it") {
  SharedBuffer<float> x = buffer(16, 1.0f), y = buffer(16, 1.0f);
  Graph g{ctx};
  Node<KernelNode<float*, float, int>> n;
  g.edit([&](Edit& e) { n = e.launch(k.scale, Launch{Grid{1}, Block{16}}.shared_memory(4096), x, 2.0f, 16); });
  GraphExec exec = g.instantiate();
  for (int i = 0; i < 4; ++i) {
    exec.update(n, Launch{Grid{1}, Block{16}}.shared_memory(4096u * static_cast<unsigned>(i + 1)), i % 2 ? x : y, 2.0f, 16);
    exec.launch(stream);
  }
  stream.synchronize();
  CHECK(read(x) == std::vector<float>(16, 4.0f));
  CHECK(read(y) == std::vector<float>(16, 4.0f));
  CHECK_THROWS_WITH_AS(exec.update(n, Launch{Grid{1}, Block{16}}.priority(1), x, 2.0f, 16),
                       doctest::Contains("the Launch sets priority, a node attribute, which an executable cannot "
                                         "change per node"),
                       UsageError);
  CHECK_THROWS_WITH_AS(exec.update(n, Launch{Grid{1}, Block{16}}.cooperative(), x, 2.0f, 16),
                       doctest::Contains("sets cooperative"), UsageError);
  exec.launch(stream);  // still the last good version (x)
  stream.synchronize();
  CHECK(read(x) == std::vector<float>(16, 8.0f));
}

TEST_CASE_FIXTURE(DslFixture, "Edit::keeping(...).update: the extra owners live with that version only and go when a "
                              "later update supersedes it") {
  auto log = std::make_shared<WitnessLog>();
  SharedBuffer<float> x = buffer(4, 1.0f);
  Graph g{ctx};
  Node<KernelNode<float*, float, int>> n;
  Node<HostNode> h;
  g.edit([&](Edit& e) {
    n = e.launch(k.scale, Grid{1}, Block{4}, x, 2.0f, 4);
    h = e.host([] {});
  });
  g.edit([&](Edit& e) {
    e.keeping(Owners{Witness(log)}).update(n, Grid{1}, Block{4}, x, 3.0f, 4);
    e.keeping(Owners{Witness(log)}).update(h, [] {});
  });
  CHECK(wait_released(ctx, 5s));
  CHECK(log->destroyed.load() == 0);
  g.edit([&](Edit& e) { e.update(n, Grid{1}, Block{4}, x, 4.0f, 4); });  // no carry-over
  CHECK(eventually([&] { return log->destroyed.load() == 1; }));
  g.edit([&](Edit& e) { e.update(h, [] {}); });
  CHECK(eventually([&] { return log->destroyed.load() == 2; }));
  CHECK(log->outside_reclaimer.load() == 0);
  // One update per keeping: a second update through it is refused.
  Edit e = g.edit();
  auto once = e.keeping(Owners{Witness(log)});
  std::move(once).update(h, [] {});
  CHECK_THROWS_WITH_AS(std::move(once).update(h, [] {}), doctest::Contains("this update was already made"), UsageError);
}

TEST_CASE_FIXTURE(DslFixture, "GraphExec::keeping(...).update: the extra owners are kept until that version is "
                              "superseded and no launch can use it") {
  auto log = std::make_shared<WitnessLog>();
  SharedBuffer<float> x = buffer(4, 1.0f);
  Graph g{ctx};
  Node<KernelNode<float*, float, int>> n;
  g.edit([&](Edit& e) { n = e.launch(k.scale, Grid{1}, Block{4}, x, 2.0f, 4); });
  GraphExec exec = g.instantiate();
  exec.keeping(Owners{Witness(log)}).update(n, Grid{1}, Block{4}, x, 3.0f, 4);
  exec.launch(stream);
  stream.synchronize();
  CHECK(wait_released(ctx, 5s));
  CHECK(log->destroyed.load() == 0);
  exec.update(n, Grid{1}, Block{4}, x, 1.0f, 4);  // supersedes it; the launch that used it completed
  exec.reclaim(stream);
  CHECK(eventually([&] { return log->destroyed.load() == 1; }));
  CHECK(read(x) == std::vector<float>(4, 3.0f));
}

TEST_CASE_FIXTURE(DslFixture, "a node handle of a removed node, of a rolled-back edit or of any node does not keep the "
                              "graph or its owners alive") {
  auto log = std::make_shared<WitnessLog>();
  const std::size_t graphs = live_graphs();
  Node<HostNode> removed, rolled_back, kept;
  {
    Graph g{ctx};
    g.edit([&](Edit& e) {
      removed = e.host([w = Witness(log)] {});
      kept = e.host([w = Witness(log)] {});
    });
    g.edit([&](Edit& e) { e.remove(removed); });
    {
      Edit e = g.edit();
      rolled_back = e.host([w = Witness(log)] {});
    }
    CHECK_FALSE(removed.valid());
    CHECK_FALSE(rolled_back.valid());
    CHECK(kept.valid());
    CHECK(live_graphs() == graphs + 1);
  }
  CHECK(live_graphs() == graphs);
  CHECK_FALSE(kept.valid());
  CHECK(eventually([&] { return log->destroyed.load() == 3; }));
  CHECK_THROWS_WITH_AS(kept.get(), doctest::Contains("this node handle is invalid"), UsageError);
}

TEST_CASE_FIXTURE(DslFixture, "an executable keeps its source graph's definition: its nodes stay updatable after the "
                              "Graph is dropped, and the definition goes with the executable") {
  const std::size_t graphs = live_graphs();
  SharedBuffer<float> x = buffer(4, 1.0f);
  Node<KernelNode<float*, float, int>> n;
  std::optional<GraphExec> exec;
  {
    Graph g{ctx};
    g.edit([&](Edit& e) { n = e.launch(k.scale, Grid{1}, Block{4}, x, 2.0f, 4); });
    exec = g.instantiate();
  }
  CHECK(live_graphs() == graphs + 1);
  CHECK(n.valid());
  exec->update(n, Grid{1}, Block{4}, x, 5.0f, 4);
  exec->launch(stream);
  stream.synchronize();
  CHECK(read(x) == std::vector<float>(4, 5.0f));
  exec.reset();
  CHECK(live_graphs() == graphs);
  CHECK_FALSE(n.valid());
}

TEST_CASE_FIXTURE(DslFixture, "a kernel node added in an edit can be updated in the same edit, and twice") {
  SharedBuffer<float> x = buffer(4, 1.0f), y = buffer(4, 1.0f);
  Graph g{ctx};
  g.edit([&](Edit& e) {
    auto n = e.launch(k.scale, Grid{1}, Block{4}, x, 2.0f, 4);
    e.update(n, Grid{1}, Block{4}, y, 3.0f, 4);
    e.update(n, Launch{Grid{1}, Block{4}}.shared_memory(256), y, 4.0f, 4);
  });
  run(g);
  CHECK(read(x) == std::vector<float>(4, 1.0f));
  CHECK(read(y) == std::vector<float>(4, 4.0f));
}

TEST_SUITE_END();
