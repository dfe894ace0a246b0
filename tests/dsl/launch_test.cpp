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

template <class T>
SharedBuffer<T> zeros(Context& ctx, std::size_t n) {
  SharedBuffer<T> b = ctx.alloc<T>(n).share();
  std::vector<T> h(n, T{});
  b.copy_from(h);
  return b;
}
template <class T>
std::vector<T> host(const SharedBuffer<T>& b) {
  std::vector<T> h(b.size());
  b.copy_to(h);
  return h;
}

// The attribute kernels (tests/kernels/kernels.cu): each reports what its launch gave it.
struct AttrKernels {
  Kernel<int*, int> dyn_smem;
  Kernel<unsigned*> cluster_dims;
  Kernel<int*, int*> coop_sync;
  explicit AttrKernels(const Context& ctx)
      : dyn_smem(test_module(ctx).kernel<int*, int>("dyn_smem")),
        cluster_dims(test_module(ctx).kernel<unsigned*>("cluster_dims")),
        coop_sync(test_module(ctx).kernel<int*, int*>("coop_sync")) {}
};

}  // namespace

TEST_CASE_FIXTURE(DslFixture, "Launch::shared_memory: a kernel node gets the dynamic shared memory it asks for, beyond "
                              "48 KiB too, and the kernel can use all of it") {
  AttrKernels ak(ctx);
  for (std::size_t floats : {std::size_t{1024}, std::size_t{25000}, std::size_t{50000}}) {
    CAPTURE(floats);
    SharedBuffer<int> result = zeros<int>(ctx, 2);
    Graph g{ctx};
    g.edit([&](Edit& e) {
      e.launch(ak.dyn_smem, Launch{Grid{2}, Block{256}}.shared_memory(floats * sizeof(float)), result,
               static_cast<int>(floats));
    });
    run(g);
    CHECK(host(result) == std::vector<int>{0, static_cast<int>(floats)});
  }
}

TEST_CASE_FIXTURE(DslFixture, "Launch::cluster: the kernel runs in clusters of the given shape, and an executable "
                              "update to a grid the cluster does not divide is refused, keeping the last version") {
  AttrKernels ak(ctx);
  SharedBuffer<unsigned> out = zeros<unsigned>(ctx, 5), other = zeros<unsigned>(ctx, 5);
  Graph g{ctx};
  Node<KernelNode<unsigned*>> n;
  g.edit([&](Edit& e) { n = e.launch(ak.cluster_dims, Launch{Grid{8}, Block{32}}.cluster(Cluster{2}), out); });
  GraphExec exec = g.instantiate();
  exec.launch(stream);
  stream.synchronize();
  CHECK(host(out) == std::vector<unsigned>{2, 1, 1, 2, 8});
  CHECK_THROWS_WITH_AS(exec.update(n, Launch{Grid{7}, Block{32}}, other), doctest::Contains("cuGraphExecNodeSetParams"),
                       DriverError);
  exec.launch(stream);
  stream.synchronize();
  CHECK(host(out)[4] == 16u);
  CHECK(host(other)[4] == 0u);
}

TEST_CASE_FIXTURE(DslFixture, "Launch::cooperative: a cooperative node's grid can synchronise, one without cannot, and "
                              "a grid too large to be co-resident is refused when the node is made") {
  AttrKernels ak(ctx);
  SharedBuffer<int> counter = zeros<int>(ctx, 1), out = zeros<int>(ctx, 2);
  SharedBuffer<int> counter2 = zeros<int>(ctx, 1), out2 = zeros<int>(ctx, 2);
  Graph g{ctx};
  g.edit([&](Edit& e) {
    e.launch(ak.coop_sync, Launch{Grid{4}, Block{64}}.cooperative(), counter, out);
    e.launch(ak.coop_sync, Launch{Grid{4}, Block{64}}, counter2, out2);
  });
  run(g);
  CHECK(host(out) == std::vector<int>{4, 1});
  CHECK(host(out2)[1] == -1);
  Graph big{ctx};
  CHECK_THROWS_WITH_AS(
      big.edit([&](Edit& e) { e.launch(ak.coop_sync, Launch{Grid{100000}, Block{1024}}.cooperative(), counter, out); }),
      doctest::Contains("CU_LAUNCH_ATTRIBUTE_COOPERATIVE (Launch::cooperative)"), DriverError);
  CHECK(big.node_count() == 0);
}

TEST_CASE_FIXTURE(DslFixture, "Launch: every attribute setter reaches the kernel node (read back) and the graph runs, "
                              "and preferred_cluster, which the H200 refuses, is refused naming it") {
  struct Case {
    const char* name;
    Launch launch;
    CUlaunchAttributeID id;
    std::function<bool(const CUlaunchAttributeValue&)> holds;
  };
  SharedBuffer<float> x = buffer(8, 1.0f);
  const Launch base{Grid{2}, Block{4}};
  const std::vector<Case> cases{
      {"cooperative", Launch(base).cooperative(), CU_LAUNCH_ATTRIBUTE_COOPERATIVE,
       [](const CUlaunchAttributeValue& v) { return v.cooperative == 1; }},
      {"cluster", Launch(base).cluster(Cluster{2}), CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
       [](const CUlaunchAttributeValue& v) { return v.clusterDim.x == 2 && v.clusterDim.y == 1; }},
      {"cluster_scheduling", Launch(base).cluster_scheduling(ClusterScheduling::spread),
       CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE,
       [](const CUlaunchAttributeValue& v) { return v.clusterSchedulingPolicyPreference == CU_CLUSTER_SCHEDULING_POLICY_SPREAD; }},
      {"priority", Launch(base).priority(-3), CU_LAUNCH_ATTRIBUTE_PRIORITY,
       [](const CUlaunchAttributeValue& v) { return v.priority == -3; }},
      {"mem_sync_domain", Launch(base).mem_sync_domain(CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE), CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN,
       [](const CUlaunchAttributeValue& v) { return v.memSyncDomain == CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE; }},
      {"access_policy", Launch(base).access_policy(AccessPolicy{x.data(), 32, 0.5f}), CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW,
       [&](const CUlaunchAttributeValue& v) { return v.accessPolicyWindow.base_ptr == x.data() && v.accessPolicyWindow.num_bytes == 32; }},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    Graph g{ctx};
    Node<KernelNode<float*, float, int>> n;
    g.edit([&](Edit& e) { n = e.launch(k.scale, c.launch, x, 1.0f, 8); });
    CHECK(c.holds(attribute(*this, n.get(), c.id)));
    InstantiateOptions o;
    o.use_node_priority = true;
    GraphExec exec = g.instantiate(o);
    exec.launch(stream);
    stream.synchronize();
  }
  Graph g{ctx};
  CHECK_THROWS_WITH_AS(g.edit([&](Edit& e) { e.launch(k.scale, Launch(base).cluster(Cluster{2}).preferred_cluster(Cluster{4}), x, 1.0f, 8); }),
                       doctest::Contains("CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION"), DriverError);
  CHECK(g.node_count() == 0);
}

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
  g.edit([&](Edit& e) { n = e.launch(k.scale, Launch{Grid{2}, Block{4}}.priority(-1).cluster(Cluster{2}), x, 2.0f, 8); });
  CHECK(attribute(*this, n.get(), CU_LAUNCH_ATTRIBUTE_PRIORITY).priority == -1);
  CHECK(attribute(*this, n.get(), CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION).clusterDim.x == 2);
  g.edit([&](Edit& e) { e.update(n, Launch{Grid{2}, Block{4}}.priority(-3), x, 3.0f, 8); });
  CHECK(attribute(*this, n.get(), CU_LAUNCH_ATTRIBUTE_PRIORITY).priority == -3);
  CHECK(attribute(*this, n.get(), CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION).clusterDim.x == 2);  // kept
  run(g);
  CHECK(read(x) == std::vector<float>(8, 3.0f));
}

TEST_CASE_FIXTURE(DslFixture, "Launch: a rolled-back update restores the attributes and the parameters it changed") {
  SharedBuffer<float> x = buffer(4, 1.0f);
  Graph g{ctx};
  Node<KernelNode<float*, float, int>> n;
  g.edit([&](Edit& e) { n = e.launch(k.scale, Launch{Grid{1}, Block{4}}.priority(-2).shared_memory(512), x, 2.0f, 4); });
  {
    Edit e = g.edit();
    e.update(n, Launch{Grid{1}, Block{4}}.priority(-4).shared_memory(2048), x, 5.0f, 4);
    CHECK(attribute(*this, n.get(), CU_LAUNCH_ATTRIBUTE_PRIORITY).priority == -4);
  }  // rolled back
  CHECK(attribute(*this, n.get(), CU_LAUNCH_ATTRIBUTE_PRIORITY).priority == -2);
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

TEST_CASE_FIXTURE(DslFixture, "an edit update's spec with keeping: the extra owners live with that version only and go "
                              "when a later update supersedes it") {
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
    e.update(n, tether::kernel(k.scale, Grid{1}, Block{4}, x, 3.0f, 4).keeping(Owners{Witness(log)}));
    e.update(h, tether::host([] {}).keeping(Owners{Witness(log)}));
  });
  CHECK(wait_released(ctx, 5s));
  CHECK(log->destroyed.load() == 0);
  g.edit([&](Edit& e) { e.update(n, Grid{1}, Block{4}, x, 4.0f, 4); });  // no carry-over
  CHECK(eventually([&] { return log->destroyed.load() == 1; }));
  g.edit([&](Edit& e) { e.update(h, [] {}); });
  CHECK(eventually([&] { return log->destroyed.load() == 2; }));
  CHECK(log->outside_reclaimer.load() == 0);
  // One update per spec: a second update with it is refused.
  Edit e = g.edit();
  auto once = tether::host([] {}).keeping(Owners{Witness(log)});
  e.update(h, std::move(once));
  CHECK_FALSE(once);
  CHECK_THROWS_WITH_AS(e.update(h, std::move(once)), doctest::Contains("Edit::update: this spec is empty"), UsageError);
}

TEST_CASE_FIXTURE(DslFixture, "an executable update's spec with keeping: the extra owners are kept until that version "
                              "is superseded and no launch can use it") {
  auto log = std::make_shared<WitnessLog>();
  SharedBuffer<float> x = buffer(4, 1.0f);
  Graph g{ctx};
  Node<KernelNode<float*, float, int>> n;
  g.edit([&](Edit& e) { n = e.launch(k.scale, Grid{1}, Block{4}, x, 2.0f, 4); });
  GraphExec exec = g.instantiate();
  exec.update(n, tether::kernel(k.scale, Grid{1}, Block{4}, x, 3.0f, 4).keeping(Owners{Witness(log)}));
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
