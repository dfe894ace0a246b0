// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Driver conformance, facts 11a-11r, 11k-11l2, 11w1-11w4 and 11x1-11x3: the error codes of invalid
// arguments, and which destroyed handles the driver checks (graphs) and which it does not (nodes).
#include <doctest/doctest.h>

#include "sim/sim.hpp"
#include "support/driver_fixture.hpp"
#include "tether.hpp"

using namespace tether::detail;
using namespace tether_test;

namespace {
constexpr const CUgraphNode* no_deps = nullptr;
}  // namespace

TEST_SUITE_BEGIN("driver conformance");

TEST_CASE_FIXTURE(
    DriverFixture,
    "11a 11b 11c 11d 11e 11f 11g: NULL graphs and execs in add, instantiate, destroy, clone and launch, "
    "and cuGraphCreate with flags 1, return CUDA_ERROR_INVALID_VALUE") {
  std::uint64_t v = 0;
  void* args[] = {&v};
  CUDA_KERNEL_NODE_PARAMS p = kernel_params(noop, args);
  const CUgraph null_graph = nullptr;
  const CUgraphExec null_exec = nullptr;
  CUgraphNode n = nullptr;
  CHECK(raw<Entry::cuGraphAddKernelNode>(t, &n, null_graph, no_deps, std::size_t{0}, &p) ==
        CUDA_ERROR_INVALID_VALUE);  // 11a
  CUgraphExec e = nullptr;
  CHECK(raw<Entry::cuGraphInstantiateWithFlags>(t, &e, null_graph, 0ull) == CUDA_ERROR_INVALID_VALUE);  // 11b
  CHECK(raw<Entry::cuGraphDestroy>(t, null_graph) == CUDA_ERROR_INVALID_VALUE);                         // 11c
  CUgraph c = nullptr;
  CHECK(raw<Entry::cuGraphClone>(t, &c, null_graph) == CUDA_ERROR_INVALID_VALUE);      // 11d
  CHECK(raw<Entry::cuGraphLaunch>(t, null_exec, stream) == CUDA_ERROR_INVALID_VALUE);  // 11e
  CHECK(raw<Entry::cuGraphExecDestroy>(t, null_exec) == CUDA_ERROR_INVALID_VALUE);     // 11f
  CUgraph g1 = nullptr;
  CHECK(raw<Entry::cuGraphCreate>(t, &g1, 1u) == CUDA_ERROR_INVALID_VALUE);  // 11g
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "11h: cuGraphAddKernelNode with neither a function nor a kernel returns CUDA_ERROR_INVALID_HANDLE") {
  std::uint64_t v = 0;
  void* args[] = {&v};
  CUgraph g = new_graph();
  CUDA_KERNEL_NODE_PARAMS q = kernel_params(nullptr, args);
  CUgraphNode n = nullptr;
  CHECK(raw<Entry::cuGraphAddKernelNode>(t, &n, g, no_deps, std::size_t{0}, &q) == CUDA_ERROR_INVALID_HANDLE);
  CHECK(node_count(g) == 0);
  destroy_graph(g);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "11i 11j 11m 11n 11o 11p 11k 11l: cuGraphAddKernelNode returns CUDA_ERROR_INVALID_VALUE for "
    "gridDimX 0, missing kernelParams, a NULL or missing dependency, a dependency from another graph, a "
    "duplicate dependency, NULL params and a NULL out pointer") {
  std::uint64_t v = 0;
  void* args[] = {&v};
  CUDA_KERNEL_NODE_PARAMS p = kernel_params(noop, args);
  CUgraph g = new_graph();
  CUgraphNode n = nullptr;

  CUDA_KERNEL_NODE_PARAMS q2 = kernel_params(noop, args);
  q2.gridDimX = 0;
  CHECK(raw<Entry::cuGraphAddKernelNode>(t, &n, g, no_deps, std::size_t{0}, &q2) ==
        CUDA_ERROR_INVALID_VALUE);  // 11i
  CUDA_KERNEL_NODE_PARAMS q3 = kernel_params(noop, nullptr);
  CHECK(raw<Entry::cuGraphAddKernelNode>(t, &n, g, no_deps, std::size_t{0}, &q3) ==
        CUDA_ERROR_INVALID_VALUE);  // 11j
  CUgraphNode null_dep[1] = {nullptr};
  CHECK(raw<Entry::cuGraphAddKernelNode>(t, &n, g, null_dep, std::size_t{1}, &p) ==
        CUDA_ERROR_INVALID_VALUE);  // 11m
  CHECK(raw<Entry::cuGraphAddKernelNode>(t, &n, g, no_deps, std::size_t{1}, &p) ==
        CUDA_ERROR_INVALID_VALUE);  // 11n
  CUgraph og = new_graph();
  CUgraphNode on = add_kernel(og, noop, 0);
  CHECK(raw<Entry::cuGraphAddKernelNode>(t, &n, g, &on, std::size_t{1}, &p) ==
        CUDA_ERROR_INVALID_VALUE);  // 11o
  CUgraphNode a = add_kernel(g, noop, 0);
  CUgraphNode dup[2] = {a, a};
  CHECK(raw<Entry::cuGraphAddKernelNode>(t, &n, g, dup, std::size_t{2}, &p) ==
        CUDA_ERROR_INVALID_VALUE);  // 11p
  CHECK(raw<Entry::cuGraphAddKernelNode>(t, &n, g, no_deps, std::size_t{0},
                                         static_cast<const CUDA_KERNEL_NODE_PARAMS*>(nullptr)) ==
        CUDA_ERROR_INVALID_VALUE);  // 11k
  CHECK(raw<Entry::cuGraphAddKernelNode>(t, static_cast<CUgraphNode*>(nullptr), g, no_deps, std::size_t{0},
                                         &p) == CUDA_ERROR_INVALID_VALUE);  // 11l
  CHECK(node_count(g) == 1);                                                // only `a` was added
  destroy_graph(og);
  destroy_graph(g);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "11q 11r: cuGraphChildGraphNodeGetGraph on a kernel node and cuGraphAddChildGraphNode with a NULL "
    "child return CUDA_ERROR_INVALID_VALUE") {
  CUgraph g = new_graph();
  CUgraphNode a = add_kernel(g, noop, 0);
  CUgraph qg = nullptr;
  CHECK(raw<Entry::cuGraphChildGraphNodeGetGraph>(t, a, &qg) == CUDA_ERROR_INVALID_VALUE);  // 11q
  CUgraphNode n = nullptr;
  CHECK(raw<Entry::cuGraphAddChildGraphNode>(t, &n, g, no_deps, std::size_t{0},
                                             static_cast<CUgraph>(nullptr)) ==
        CUDA_ERROR_INVALID_VALUE);  // 11r
  destroy_graph(g);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "11l2: cuGraphInstantiate with a NULL out pointer returns CUDA_ERROR_INVALID_VALUE") {
  CUgraph g = new_graph();
  add_kernel(g, noop, 0);
  CHECK(raw<Entry::cuGraphInstantiateWithFlags>(t, static_cast<CUgraphExec*>(nullptr), g, 0ull) ==
        CUDA_ERROR_INVALID_VALUE);
  destroy_graph(g);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "11x1 11x2 11x3: a destroyed graph handle gets CUDA_ERROR_INVALID_VALUE from cuGraphGetNodes, "
    "cuGraphInstantiate and a second cuGraphDestroy") {
  CUgraph g = new_graph();
  add_kernel(g, noop, 0);
  destroy_graph(g);
  std::size_t nn = 12345;
  CHECK(raw<Entry::cuGraphGetNodes>(t, g, static_cast<CUgraphNode*>(nullptr), &nn) ==
        CUDA_ERROR_INVALID_VALUE);
  CUgraphExec e = nullptr;
  CHECK(raw<Entry::cuGraphInstantiateWithFlags>(t, &e, g, 0ull) == CUDA_ERROR_INVALID_VALUE);
  CHECK(raw<Entry::cuGraphDestroy>(t, g) == CUDA_ERROR_INVALID_VALUE);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "11w1 11w2 11w3: the driver does not check destroyed node handles: cuGraphNodeGetType and "
                  "cuGraphKernelNodeSetParams succeed on one, and using it as a dependency returns "
                  "CUDA_ERROR_INVALID_VALUE") {
  CUgraph g = new_graph();
  CUgraphNode a = add_kernel(g, noop, 0);
  CHECK(raw<Entry::cuGraphDestroyNode>(t, a) == CUDA_SUCCESS);
  CUgraphNode n = nullptr;
  {
    tether::sim::ExpectViolations expected;  // destroyed_node_use, on the simulator
    CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
    CHECK(raw<Entry::cuGraphNodeGetType>(t, a, &type) == CUDA_SUCCESS);  // 11w1
    std::uint64_t v = 0;
    void* args[] = {&v};
    CUDA_KERNEL_NODE_PARAMS p = kernel_params(noop, args);
    CHECK(raw<Entry::cuGraphKernelNodeSetParams>(t, a, &p) == CUDA_SUCCESS);  // 11w2
    CHECK(raw<Entry::cuGraphAddKernelNode>(t, &n, g, &a, std::size_t{1}, &p) ==
          CUDA_ERROR_INVALID_VALUE);  // 11w3
  }
  CHECK(node_count(g) == 0);
  // The real driver is silent; the simulator reports the use of a destroyed node.
  expect_violations(tether::sim::ViolationKind::destroyed_node_use);
  destroy_graph(g);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "11w4: a second cuGraphDestroyNode on a node crashes the real driver; the simulator rejects it and "
    "records double_node_destroy") {
  if (!on_simulator()) {
    MESSAGE("skipped on the real driver: it crashes");
    return;
  }
  CUgraph g = new_graph();
  CUgraphNode a = add_kernel(g, noop, 0);
  add_kernel(g, noop, 1);
  CHECK(raw<Entry::cuGraphDestroyNode>(t, a) == CUDA_SUCCESS);
  {
    tether::sim::ExpectViolations expected;  // double_node_destroy
    CHECK(raw<Entry::cuGraphDestroyNode>(t, a) != CUDA_SUCCESS);
  }
  expect_violations(tether::sim::ViolationKind::double_node_destroy);
  CHECK(node_count(g) == 1);
  destroy_graph(g);
  finish();
}

TEST_SUITE_END();
