// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Driver conformance, facts 2a-2f, 3a-3c, 10, 11t-11w, 11z and 11z3: references owned by graphs
// (retain, move, release, destroy, clone) and node operations that leave them alone.
#include <doctest/doctest.h>

#include "sim/sim.hpp"
#include "support/driver_fixture.hpp"
#include "tether.hpp"

using namespace tether::detail;
using namespace tether_test;

namespace {
constexpr unsigned move_refs = static_cast<unsigned>(CU_GRAPH_USER_OBJECT_MOVE);
}  // namespace

TEST_SUITE_BEGIN("driver conformance");

TEST_CASE_FIXTURE(DriverFixture,
                  "2a 2a2: cuGraphRetainUserObject without MOVE adds a graph-owned reference that "
                  "cuGraphReleaseUserObject drops; destroying the graph afterwards runs nothing more") {
  Obj o;
  CUgraph g = new_graph();
  CUuserObject u = make_uo(o, 1);
  CHECK(raw<Entry::cuGraphRetainUserObject>(t, g, u, 1u, 0u) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuUserObjectRelease>(t, u, 1u) == CUDA_SUCCESS);
  CHECK(still_alive(o));  // the graph's reference keeps it
  CHECK(raw<Entry::cuGraphReleaseUserObject>(t, g, u, 1u) == CUDA_SUCCESS);
  CHECK(wait_count(o));
  destroy_graph(g);
  sleep_ms(20);
  CHECK(o.count.load() == 1);  // 2a2
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "2b 2b2: a reference moved into a graph is released by cuGraphDestroy, which runs the destructor "
    "once, synchronously, on the calling thread") {
  Obj o;
  CUgraph g = new_graph();
  CUuserObject u = make_uo(o, 1);
  CHECK(raw<Entry::cuGraphRetainUserObject>(t, g, u, 1u, move_refs) == CUDA_SUCCESS);
  CHECK(still_alive(o));
  CHECK(raw<Entry::cuGraphDestroy>(t, g) == CUDA_SUCCESS);
  CHECK(o.count.load() == 1);  // ran before cuGraphDestroy returned
  CHECK(ran_once(o));
  CHECK(o.tid.load() == main_tid);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "2c: a graph holding 3 references keeps the object after releasing 2, and cuGraphDestroy releases "
    "the last one") {
  Obj o;
  CUgraph g = new_graph();
  CUuserObject u = make_uo(o, 1);
  CHECK(raw<Entry::cuGraphRetainUserObject>(t, g, u, 3u, 0u) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuUserObjectRelease>(t, u, 1u) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuGraphReleaseUserObject>(t, g, u, 2u) == CUDA_SUCCESS);
  CHECK(still_alive(o));
  destroy_graph(g);
  CHECK(ran_once(o));
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "2d: two MOVE retains of one object into one graph add up, and destroying the graph releases both "
    "and runs the destructor once") {
  Obj o;
  CUgraph g = new_graph();
  CUuserObject u = make_uo(o, 2);
  CHECK(raw<Entry::cuGraphRetainUserObject>(t, g, u, 1u, move_refs) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuGraphRetainUserObject>(t, g, u, 1u, move_refs) == CUDA_SUCCESS);
  CHECK(still_alive(o));
  destroy_graph(g);
  CHECK(ran_once(o));
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "2e: cuGraphRetainUserObject(count 2, MOVE) moves two of the caller's references and "
                  "cuGraphDestroy releases both") {
  Obj o;
  CUgraph g = new_graph();
  CUuserObject u = make_uo(o, 1);
  CHECK(raw<Entry::cuUserObjectRetain>(t, u, 1u) == CUDA_SUCCESS);  // the caller holds 2
  CHECK(raw<Entry::cuGraphRetainUserObject>(t, g, u, 2u, move_refs) == CUDA_SUCCESS);
  CHECK(still_alive(o));
  destroy_graph(g);
  CHECK(ran_once(o));
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "2f 2f2: cuGraphReleaseUserObject(count 2) on a graph holding 1 reference returns CUDA_SUCCESS, "
    "runs no destructor, and the destructor runs once at cuGraphDestroy") {
  Obj o;
  CUgraph g = new_graph();
  CUuserObject u = make_uo(o, 1);
  CHECK(raw<Entry::cuGraphRetainUserObject>(t, g, u, 1u, move_refs) == CUDA_SUCCESS);
  {
    tether::sim::ExpectViolations expected;  // over_release, on the simulator
    CHECK(raw<Entry::cuGraphReleaseUserObject>(t, g, u, 2u) == CUDA_SUCCESS);  // over-release: not reported
    CHECK(still_alive(o));
    destroy_graph(g);
    CHECK(ran_once(o));
  }
  // The real driver is silent; the simulator reports the over-release.
  expect_violations(tether::sim::ViolationKind::over_release);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "11z: cuGraphReleaseUserObject on a graph holding no reference returns CUDA_SUCCESS and uses up "
    "one of the caller's references") {
  Obj o;
  CUgraph g = new_graph();
  CUuserObject u = make_uo(o, 2);
  {
    tether::sim::ExpectViolations expected;  // over_release: the graph's release, then its destruction
    CHECK(raw<Entry::cuGraphReleaseUserObject>(t, g, u, 1u) == CUDA_SUCCESS);
    CHECK(still_alive(o));
    CHECK(raw<Entry::cuUserObjectRelease>(t, u, 1u) == CUDA_SUCCESS);
    const bool consumed = wait_count(o, 1, 500);  // the caller's first release was its last
    CHECK(consumed);
    if (!consumed) {
      CHECK(raw<Entry::cuUserObjectRelease>(t, u, 1u) == CUDA_SUCCESS);
      wait_count(o);
    }
    destroy_graph(g);
  }
  CHECK(o.count.load() == 1);
  expect_violations(tether::sim::ViolationKind::over_release);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "11t 11u 11v 11w 11z3: cuGraphRetainUserObject with a NULL graph, a NULL object, a count of 0 or "
    "flags 2 returns CUDA_ERROR_INVALID_VALUE and changes no reference") {
  Obj o;
  CUgraph g = new_graph();
  CUuserObject u = make_uo(o, 1);
  CHECK(raw<Entry::cuGraphRetainUserObject>(t, static_cast<CUgraph>(nullptr), u, 1u, 0u) ==
        CUDA_ERROR_INVALID_VALUE);  // 11t
  CHECK(raw<Entry::cuGraphRetainUserObject>(t, g, static_cast<CUuserObject>(nullptr), 1u, 0u) ==
        CUDA_ERROR_INVALID_VALUE);                                                          // 11u
  CHECK(raw<Entry::cuGraphRetainUserObject>(t, g, u, 0u, 0u) == CUDA_ERROR_INVALID_VALUE);  // 11v
  CHECK(raw<Entry::cuGraphRetainUserObject>(t, g, u, 1u, 2u) == CUDA_ERROR_INVALID_VALUE);  // 11w
  CHECK(still_alive(o));                                                                    // 11z3
  CHECK(raw<Entry::cuUserObjectRelease>(t, u, 1u) == CUDA_SUCCESS);
  CHECK(wait_count(o));  // neither the graph nor the caller gained a reference
  destroy_graph(g);
  CHECK(o.count.load() == 1);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "3a: cuGraphClone copies the graph's references: destroying the original keeps the object, "
                  "destroying the clone frees it") {
  Obj o;
  CUgraph g = new_graph();
  add_kernel(g, noop, 0);
  attach(g, o);
  CUgraph c = nullptr;
  CHECK(raw<Entry::cuGraphClone>(t, &c, g) == CUDA_SUCCESS);
  destroy_graph(g);
  CHECK(still_alive(o));
  destroy_graph(c);
  CHECK(ran_once(o));
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "3b: a clone holds as many references as the original (2): releasing 1 from the clone keeps the "
    "object, releasing 1 more frees it") {
  Obj o;
  CUgraph g = new_graph();
  CUuserObject u = make_uo(o, 2);
  CHECK(raw<Entry::cuGraphRetainUserObject>(t, g, u, 2u, move_refs) == CUDA_SUCCESS);
  CUgraph c = nullptr;
  CHECK(raw<Entry::cuGraphClone>(t, &c, g) == CUDA_SUCCESS);
  destroy_graph(g);
  CHECK(raw<Entry::cuGraphReleaseUserObject>(t, c, u, 1u) == CUDA_SUCCESS);
  CHECK(still_alive(o));
  CHECK(raw<Entry::cuGraphReleaseUserObject>(t, c, u, 1u) == CUDA_SUCCESS);
  CHECK(wait_count(o));
  destroy_graph(c);
  CHECK(o.count.load() == 1);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "3c: references retained on the original after cuGraphClone are not shared with the clone") {
  Obj o;
  CUgraph g = new_graph();
  CUgraph c = nullptr;
  CHECK(raw<Entry::cuGraphClone>(t, &c, g) == CUDA_SUCCESS);
  attach(g, o);
  destroy_graph(g);
  CHECK(wait_count(o, 1, 1000));
  destroy_graph(c);
  CHECK(o.count.load() == 1);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "10: cuGraphDestroyNode, cuGraphKernelNodeSetParams and cuGraphNodeSetParams leave the graph's "
    "user-object references unchanged") {
  Obj o;
  CUgraph g = new_graph();
  CUgraphNode n1 = add_kernel(g, noop, 0);
  CUgraphNode n2 = add_kernel(g, noop, 1, &n1, 1);
  attach(g, o);
  CHECK(raw<Entry::cuGraphDestroyNode>(t, n1) == CUDA_SUCCESS);
  CHECK(still_alive(o));
  std::uint64_t v = 5;
  void* args[] = {&v};
  CUDA_KERNEL_NODE_PARAMS p = kernel_params(other, args);
  CHECK(raw<Entry::cuGraphKernelNodeSetParams>(t, n2, &p) == CUDA_SUCCESS);
  CHECK(still_alive(o));
  CUgraphNodeParams np{};
  np.type = CU_GRAPH_NODE_TYPE_KERNEL;
  np.kernel.func = noop;
  np.kernel.gridDimX = np.kernel.gridDimY = np.kernel.gridDimZ = 1;
  np.kernel.blockDimX = np.kernel.blockDimY = np.kernel.blockDimZ = 1;
  np.kernel.kernelParams = args;
  CHECK(raw<Entry::cuGraphNodeSetParams>(t, n2, &np) == CUDA_SUCCESS);
  CHECK(still_alive(o));
  destroy_graph(g);
  CHECK(ran_once(o));
  finish();
}

TEST_SUITE_END();
