// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Driver conformance, facts 6a-6h, R2 and the self-child crash: child-graph nodes embed a clone
// that carries the child's references, the embedded handle, and finding nodes in clones.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "sim/sim.hpp"
#include "support/driver_fixture.hpp"
#include "tether.hpp"

using namespace tether::detail;
using namespace tether_test;

namespace {

bool contains(const std::vector<CUgraphNode>& v, CUgraphNode n) {
  return std::find(v.begin(), v.end(), n) != v.end();
}

CUgraph embedded_graph(CUgraphNode child_node) {
  CUgraph emb = nullptr;
  CHECK(raw<Entry::cuGraphChildGraphNodeGetGraph>(table(), child_node, &emb) == CUDA_SUCCESS);
  return emb;
}

}  // namespace

TEST_SUITE_BEGIN("driver conformance");

TEST_CASE_FIXTURE(
    DriverFixture,
    "6a 6a2 6a3: cuGraphAddChildGraphNode embeds a clone that carries the child's references under a "
    "different handle, and cuGraphDestroyNode on the child node releases them") {
  Obj o;
  CUgraph child = new_graph();
  add_kernel(child, noop, 0);
  attach(child, o);
  CUgraph parent = new_graph();
  CUgraphNode cn = add_child(parent, child);
  CUgraph emb = embedded_graph(cn);
  CHECK(emb != nullptr);
  CHECK(emb != child);  // 6a2
  if (emb != nullptr) CHECK(node_count(emb) == 1);
  destroy_graph(child);
  CHECK(still_alive(o));  // 6a
  CHECK(raw<Entry::cuGraphDestroyNode>(t, cn) == CUDA_SUCCESS);
  CHECK(wait_count(o, 1, 2000));  // 6a3
  destroy_graph(parent);
  sleep_ms(20);
  CHECK(o.count.load() == 1);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "6b: references inside a child node follow clones and instantiations of the parent: the object "
    "lives until the parent, its clone and its exec are all gone") {
  Obj o;
  CUgraph child = new_graph();
  add_kernel(child, noop, 0);
  attach(child, o);
  CUgraph parent = new_graph();
  add_child(parent, child);
  destroy_graph(child);
  CUgraph pclone = nullptr;
  CHECK(raw<Entry::cuGraphClone>(t, &pclone, parent) == CUDA_SUCCESS);
  CUgraphExec e = instantiate(parent);
  destroy_graph(parent);
  CHECK(still_alive(o));
  destroy_graph(pclone);
  CHECK(still_alive(o));
  launch(e);
  sync();
  destroy_exec(e);
  CHECK(ran_once(o));
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "6c: a user object retained on the embedded graph handle is held by an exec of the parent") {
  Obj o;
  CUgraph child = new_graph();
  add_kernel(child, noop, 0);
  CUgraph parent = new_graph();
  CUgraphNode cn = add_child(parent, child);
  destroy_graph(child);
  CUgraph emb = embedded_graph(cn);
  CUuserObject u = make_uo(o, 1);
  CHECK(raw<Entry::cuGraphRetainUserObject>(
            t, emb, u, 1u, static_cast<unsigned>(CU_GRAPH_USER_OBJECT_MOVE)) == CUDA_SUCCESS);
  CUgraphExec e = instantiate(parent);
  destroy_graph(parent);
  CHECK(still_alive(o));
  destroy_exec(e);
  CHECK(ran_once(o));
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "6d: cuGraphExecChildGraphNodeSetParams makes the exec drop the old child's references and take "
    "the new child's") {
  Obj a;
  Obj b;
  CUgraph c1 = new_graph();
  add_kernel(c1, noop, 0);
  attach(c1, a);
  CUgraph c2 = new_graph();
  add_kernel(c2, noop, 1);
  attach(c2, b);
  CUgraph parent = new_graph();
  CUgraphNode cn = add_child(parent, c1);
  destroy_graph(c1);
  CUgraphExec e = instantiate(parent);
  CHECK(still_alive(a));
  CHECK(raw<Entry::cuGraphExecChildGraphNodeSetParams>(t, e, cn, c2) == CUDA_SUCCESS);
  destroy_graph(c2);
  destroy_graph(parent);  // only the exec can still hold A (if it kept it) and B
  CHECK(wait_count(a, 1, 1000));
  CHECK(still_alive(b));
  destroy_exec(e);
  CHECK(ran_once(b));
  CHECK(a.count.load() == 1);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "6e: a child node added with CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE owns the child graph itself, and "
    "its references die with the parent") {
  Obj o;
  CUgraph child = new_graph();
  add_kernel(child, noop, 0);
  attach(child, o);
  CUgraph parent = new_graph();
  CUgraphNodeParams np{};
  np.type = CU_GRAPH_NODE_TYPE_GRAPH;
  np.graph.graph = child;
  np.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
  CUgraphNode cn = nullptr;
  CUresult r = raw<Entry::cuGraphAddNode>(t, &cn, parent, static_cast<const CUgraphNode*>(nullptr),
                                          static_cast<const CUgraphEdgeData*>(nullptr), std::size_t{0}, &np);
  CHECK(r == CUDA_SUCCESS);
  if (r == CUDA_SUCCESS) {
    CUgraph emb = embedded_graph(cn);
    CHECK(emb == child);
  }
  CHECK(still_alive(o));
  destroy_graph(parent);
  CHECK(ran_once(o));
  if (r != CUDA_SUCCESS) destroy_graph(child);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "6f 6g: after cuGraphDestroyNode of a child node, its stale embedded handle gets "
                  "CUDA_ERROR_INVALID_VALUE from cuGraphGetNodes and cuGraphAddKernelNode") {
  CUgraph child = new_graph();
  add_kernel(child, noop, 0);
  CUgraph parent = new_graph();
  CUgraphNode cn = add_child(parent, child);
  CUgraph emb = embedded_graph(cn);
  CHECK(raw<Entry::cuGraphDestroyNode>(t, cn) == CUDA_SUCCESS);
  std::size_t nn = 12345;
  CHECK(raw<Entry::cuGraphGetNodes>(t, emb, static_cast<CUgraphNode*>(nullptr), &nn) ==
        CUDA_ERROR_INVALID_VALUE);
  CHECK(nn == 12345);  // untouched
  std::uint64_t v = 0;
  void* args[] = {&v};
  CUDA_KERNEL_NODE_PARAMS p = kernel_params(noop, args);
  CUgraphNode k = nullptr;
  CHECK(raw<Entry::cuGraphAddKernelNode>(t, &k, emb, static_cast<const CUgraphNode*>(nullptr), std::size_t{0},
                                         &p) == CUDA_ERROR_INVALID_VALUE);
  destroy_graph(child);
  destroy_graph(parent);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "6h 6h2: cuGraphDestroy on the embedded graph of a child node returns CUDA_ERROR_INVALID_VALUE and "
    "the parent can still be destroyed") {
  CUgraph child = new_graph();
  add_kernel(child, noop, 0);
  CUgraph parent = new_graph();
  CUgraphNode cn = add_child(parent, child);
  CUgraph emb = embedded_graph(cn);
  CHECK(raw<Entry::cuGraphDestroy>(t, emb) == CUDA_ERROR_INVALID_VALUE);  // 6h
  CHECK(raw<Entry::cuGraphDestroy>(t, parent) == CUDA_SUCCESS);           // 6h2
  destroy_graph(child);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "R2: cuGraphNodeFindInClone maps each original node to its copy in a clone and in the embedded "
    "graph of a child node") {
  CUgraph g = new_graph();
  CUgraphNode a = add_kernel(g, noop, 0);
  CUgraphNode b = add_kernel(g, noop, 1, &a, 1);

  SUBCASE("in a clone") {
    CUgraph c = nullptr;
    REQUIRE(raw<Entry::cuGraphClone>(t, &c, g) == CUDA_SUCCESS);
    CUgraphNode ca = nullptr;
    CUgraphNode cb = nullptr;
    CHECK(raw<Entry::cuGraphNodeFindInClone>(t, &ca, a, c) == CUDA_SUCCESS);
    CHECK(raw<Entry::cuGraphNodeFindInClone>(t, &cb, b, c) == CUDA_SUCCESS);
    CHECK(ca != nullptr);
    CHECK(cb != nullptr);
    CHECK(ca != cb);
    const auto cnodes = nodes_of(c);
    CHECK(cnodes.size() == 2);
    CHECK(contains(cnodes, ca));
    CHECK(contains(cnodes, cb));
    CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
    CHECK(raw<Entry::cuGraphNodeGetType>(t, ca, &type) == CUDA_SUCCESS);
    CHECK(type == CU_GRAPH_NODE_TYPE_KERNEL);
    destroy_graph(c);
  }
  SUBCASE("in the embedded graph of a child node") {
    CUgraph parent = new_graph();
    CUgraphNode cn = add_child(parent, g);
    CUgraph emb = embedded_graph(cn);
    CUgraphNode ea = nullptr;
    CUgraphNode eb = nullptr;
    CHECK(raw<Entry::cuGraphNodeFindInClone>(t, &ea, a, emb) == CUDA_SUCCESS);
    CHECK(raw<Entry::cuGraphNodeFindInClone>(t, &eb, b, emb) == CUDA_SUCCESS);
    CHECK(ea != nullptr);
    CHECK(eb != nullptr);
    CHECK(ea != eb);
    const auto enodes = nodes_of(emb);
    CHECK(enodes.size() == 2);
    CHECK(contains(enodes, ea));
    CHECK(contains(enodes, eb));
    destroy_graph(parent);
  }
  destroy_graph(g);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "11s: cuGraphAddChildGraphNode with a graph as its own child crashes the real driver; the "
                  "simulator rejects it and records self_child") {
  if (!on_simulator()) {
    MESSAGE("skipped on the real driver: it crashes");
    return;
  }
  CUgraph g = new_graph();
  add_kernel(g, noop, 0);
  CUgraphNode n = nullptr;
  {
    tether::sim::ExpectViolations expected;  // self_child
    CHECK(raw<Entry::cuGraphAddChildGraphNode>(t, &n, g, static_cast<const CUgraphNode*>(nullptr),
                                               std::size_t{0}, g) != CUDA_SUCCESS);
  }
  expect_violations(tether::sim::ViolationKind::self_child);
  CHECK(node_count(g) == 1);
  destroy_graph(g);
  finish();
}

TEST_SUITE_END();
