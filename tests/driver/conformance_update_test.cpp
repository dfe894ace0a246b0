// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Driver conformance, facts 7a-7d, 11u1-11u7 and 11v1-11v3: whole-exec updates swap references,
// per-node exec updates leave them alone, and what the driver answers to updates it refuses.
#include <doctest/doctest.h>

#include "sim/sim.hpp"
#include "support/driver_fixture.hpp"
#include "tether.hpp"

using namespace tether::detail;
using namespace tether_test;

namespace {

CUgraphExecUpdateResultInfo empty_info() {
  CUgraphExecUpdateResultInfo info{};
  return info;
}

}  // namespace

TEST_SUITE_BEGIN("driver conformance");

TEST_CASE_FIXTURE(
    DriverFixture,
    "7a: cuGraphExecUpdate makes the exec drop the old graph's references and hold the source graph's") {
  Obj a;
  Obj b;
  CUgraph g1 = new_graph();
  add_kernel(g1, noop, 0);
  attach(g1, a);
  CUgraph g2 = new_graph();
  add_kernel(g2, noop, 7);
  attach(g2, b);
  CUgraphExec e = instantiate(g1);
  CUgraphExecUpdateResultInfo info = empty_info();
  CHECK(raw<Entry::cuGraphExecUpdate>(t, e, g2, &info) == CUDA_SUCCESS);
  CHECK(info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS);
  destroy_graph(g1);
  CHECK(wait_count(a, 1, 1000));  // the exec no longer holds A
  destroy_graph(g2);
  CHECK(still_alive(b));  // the exec holds B
  launch(e);
  sync();
  destroy_exec(e);
  CHECK(ran_once(b));
  CHECK(a.count.load() == 1);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "7b: updating from a graph that holds the same object keeps it in the exec, and its destructor "
    "runs once at exec destruction") {
  Obj a;
  CUgraph g1 = new_graph();
  add_kernel(g1, noop, 0);
  CUuserObject u = make_uo(a, 2);
  CHECK(raw<Entry::cuGraphRetainUserObject>(t, g1, u, 1u, static_cast<unsigned>(CU_GRAPH_USER_OBJECT_MOVE)) ==
        CUDA_SUCCESS);
  CUgraph g2 = new_graph();
  add_kernel(g2, noop, 1);
  CHECK(raw<Entry::cuGraphRetainUserObject>(t, g2, u, 1u, static_cast<unsigned>(CU_GRAPH_USER_OBJECT_MOVE)) ==
        CUDA_SUCCESS);
  CUgraphExec e = instantiate(g1);
  CUgraphExecUpdateResultInfo info = empty_info();
  CHECK(raw<Entry::cuGraphExecUpdate>(t, e, g2, &info) == CUDA_SUCCESS);
  destroy_graph(g1);
  destroy_graph(g2);
  CHECK(still_alive(a));
  destroy_exec(e);
  CHECK(ran_once(a));
  finish();
}

TEST_CASE_FIXTURE(DriverFixture, "7c: cuGraphExecKernelNodeSetParams does not touch user-object references") {
  Obj a;
  CUgraph g1 = new_graph();
  CUgraphNode n = add_kernel(g1, noop, 0);
  attach(g1, a);
  CUgraphExec e = instantiate(g1);
  std::uint64_t v = 42;
  void* args[] = {&v};
  CUDA_KERNEL_NODE_PARAMS p = kernel_params(noop, args);
  CHECK(raw<Entry::cuGraphExecKernelNodeSetParams>(t, e, n, &p) == CUDA_SUCCESS);
  destroy_graph(g1);
  CHECK(still_alive(a));
  launch(e);
  sync();
  destroy_exec(e);
  CHECK(ran_once(a));
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "7d: cuGraphExecUpdate during an in-flight 100 ms launch holds the replaced references until that "
    "launch completes") {
  Obj a;
  Obj b;
  CUgraph g1 = new_graph();
  add_kernel(g1, spin, 100 * ms_ns);
  attach(g1, a);
  CUgraph g2 = new_graph();
  add_kernel(g2, spin, 1000);
  attach(g2, b);
  CUgraphExec e = instantiate(g1);
  destroy_graph(g1);
  upload(e);
  const std::int64_t t0 = now_ns();
  launch(e);
  CUgraphExecUpdateResultInfo info = empty_info();
  CHECK(raw<Entry::cuGraphExecUpdate>(t, e, g2, &info) == CUDA_SUCCESS);
  const std::int64_t t1 = now_ns();
  destroy_graph(g2);
  CHECK(a.count.load() == 0);
  REQUIRE(wait_count(a, 1, 5000));
  INFO("update call ms " << ms_between(t0, t1) << ", A's destructor started at ms "
                         << ms_between(t0, a.t_start.load()));
  CHECK(ms_between(t0, a.t_start.load()) >= 75.0);
  sync();
  CHECK(b.count.load() == 0);
  destroy_exec(e);
  CHECK(ran_once(b));
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "11u1 11u2 11u3 11u4 11u5 11u7: cuGraphExecUpdate refuses other topologies and node types with "
    "their reasons, accepts a function change, and the exec still launches afterwards") {
  CUgraph g1 = new_graph();
  add_kernel(g1, noop, 0);
  CUgraphExec e1 = instantiate(g1);

  // 11u1: a different node count
  CUgraph g2 = new_graph();
  CUgraphNode b = add_kernel(g2, noop, 0);
  add_kernel(g2, noop, 0, &b, 1);
  CUgraphExecUpdateResultInfo info = empty_info();
  CHECK(raw<Entry::cuGraphExecUpdate>(t, e1, g2, &info) == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  CHECK(info.result == CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
  CHECK(info.errorNode == nullptr);

  // 11u2: kernel node -> empty node
  CUgraph g3 = new_graph();
  CUgraphNode en = nullptr;
  CHECK(raw<Entry::cuGraphAddEmptyNode>(t, &en, g3, static_cast<const CUgraphNode*>(nullptr),
                                        std::size_t{0}) == CUDA_SUCCESS);
  info = empty_info();
  CHECK(raw<Entry::cuGraphExecUpdate>(t, e1, g3, &info) == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  CHECK(info.result == CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED);
  CHECK(info.errorNode == en);

  // 11u3: the kernel's function changed, same context
  CUgraph g4 = new_graph();
  add_kernel(g4, other, 0);
  info = empty_info();
  CHECK(raw<Entry::cuGraphExecUpdate>(t, e1, g4, &info) == CUDA_SUCCESS);
  CHECK(info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS);

  // 11u4: a chain of 2 -> two independent nodes
  CUgraph g6 = new_graph();
  CUgraphNode c1 = add_kernel(g6, noop, 0);
  add_kernel(g6, noop, 0, &c1, 1);
  CUgraphExec e6 = instantiate(g6);
  CUgraph g5 = new_graph();
  add_kernel(g5, noop, 0);
  add_kernel(g5, noop, 0);
  info = empty_info();
  CHECK(raw<Entry::cuGraphExecUpdate>(t, e6, g5, &info) == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  CHECK(info.result == CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);

  // 11u5: graph NULL
  info = empty_info();
  CHECK(raw<Entry::cuGraphExecUpdate>(t, e1, static_cast<CUgraph>(nullptr), &info) ==
        CUDA_ERROR_INVALID_VALUE);
  CHECK(info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS);  // untouched

  // 11u7: still launchable
  CHECK(raw<Entry::cuGraphLaunch>(t, e1, stream) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuStreamSynchronize>(t, stream) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuGraphLaunch>(t, e6, stream) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuStreamSynchronize>(t, stream) == CUDA_SUCCESS);

  destroy_exec(e1);
  destroy_exec(e6);
  for (CUgraph g : {g1, g2, g3, g4, g5, g6}) destroy_graph(g);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "11u6: cuGraphExecUpdate with a NULL resultInfo and an identical graph returns CUDA_SUCCESS") {
  CUgraph g = new_graph();
  add_kernel(g, noop, 0);
  CUgraphExec e = instantiate(g);
  CHECK(raw<Entry::cuGraphExecUpdate>(t, e, g, static_cast<CUgraphExecUpdateResultInfo*>(nullptr)) ==
        CUDA_SUCCESS);
  destroy_exec(e);
  destroy_graph(g);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "11v1 11v2 11v3: cuGraphExecKernelNodeSetParams refuses a node of another graph "
                  "(INVALID_VALUE) and a NULL function (INVALID_HANDLE), and accepts a function change") {
  std::uint64_t v = 0;
  void* args[] = {&v};
  CUgraph g1 = new_graph();
  CUgraphNode a = add_kernel(g1, noop, 0);
  CUgraphExec e1 = instantiate(g1);
  CUgraph g2 = new_graph();
  CUgraphNode b = add_kernel(g2, noop, 0);
  CUDA_KERNEL_NODE_PARAMS p = kernel_params(noop, args);
  CHECK(raw<Entry::cuGraphExecKernelNodeSetParams>(t, e1, b, &p) == CUDA_ERROR_INVALID_VALUE);  // 11v1
  CUDA_KERNEL_NODE_PARAMS q = kernel_params(other, args);
  CHECK(raw<Entry::cuGraphExecKernelNodeSetParams>(t, e1, a, &q) == CUDA_SUCCESS);  // 11v2
  CUDA_KERNEL_NODE_PARAMS q0 = kernel_params(nullptr, args);
  CHECK(raw<Entry::cuGraphExecKernelNodeSetParams>(t, e1, a, &q0) == CUDA_ERROR_INVALID_HANDLE);  // 11v3
  destroy_exec(e1);
  destroy_graph(g1);
  destroy_graph(g2);
  finish();
}

TEST_SUITE_END();
