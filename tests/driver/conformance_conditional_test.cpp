// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Driver conformance, facts 8a-8f: conditional nodes (IF and WHILE, added with cuGraphAddNode),
// references retained on their body graphs, and cuGraphClone refusing graphs that contain them.
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

TEST_CASE_FIXTURE(
    DriverFixture,
    "8a0 8a1 8a: an IF node's body accepts a user object, and cuGraphClone of a graph holding a "
    "conditional node fails with CUDA_ERROR_NOT_SUPPORTED (the body's reference dies with the original)") {
  Obj o;
  CUgraph g = new_graph();
  CondNode c = add_cond(g, CU_GRAPH_COND_TYPE_IF, 1);
  CHECK(c.handle_result == CUDA_SUCCESS);  // 8a0
  REQUIRE(c.add_result == CUDA_SUCCESS);   // 8a0
  REQUIRE(c.body != nullptr);
  add_kernel(c.body, noop, 0);
  CUuserObject u = make_uo(o, 1);
  CUresult r = raw<Entry::cuGraphRetainUserObject>(t, c.body, u, 1u, move_refs);
  CHECK(r == CUDA_SUCCESS);  // 8a1
  if (r != CUDA_SUCCESS) raw<Entry::cuUserObjectRelease>(t, u, 1u);
  CUgraph cl = nullptr;
  CHECK(raw<Entry::cuGraphClone>(t, &cl, g) == CUDA_ERROR_NOT_SUPPORTED);  // 8a
  destroy_graph(g);
  CHECK(wait_count(o));  // no clone holds it
  if (cl != nullptr) destroy_graph(cl);
  sleep_ms(20);
  CHECK(o.count.load() == 1);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "8b: a user object retained on an IF body is held by the exec from instantiation until exec "
    "destruction") {
  Obj o;
  CUgraph g = new_graph();
  CondNode c = add_cond(g, CU_GRAPH_COND_TYPE_IF, 1);
  REQUIRE(c.add_result == CUDA_SUCCESS);
  add_kernel(c.body, noop, 0);
  CUuserObject u = make_uo(o, 1);
  CHECK(raw<Entry::cuGraphRetainUserObject>(t, c.body, u, 1u, move_refs) == CUDA_SUCCESS);
  CUgraphExec e = instantiate(g);
  destroy_graph(g);
  CHECK(still_alive(o));
  launch(e);  // the body runs (the condition defaults to 1)
  sync();
  CHECK(still_alive(o));
  destroy_exec(e);
  CHECK(ran_once(o));
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "8c0 8c: a WHILE node's body accepts a user object, cuGraphClone refuses the graph with "
                  "CUDA_ERROR_NOT_SUPPORTED, and the exec holds the body's reference until it is destroyed") {
  Obj o;
  CUgraph g = new_graph();
  CondNode c = add_cond(g, CU_GRAPH_COND_TYPE_WHILE, 0);  // 0: the body never runs
  CHECK(c.handle_result == CUDA_SUCCESS);                 // 8c0
  REQUIRE(c.add_result == CUDA_SUCCESS);                  // 8c0
  add_kernel(c.body, noop, 0);
  CUuserObject u = make_uo(o, 1);
  CHECK(raw<Entry::cuGraphRetainUserObject>(t, c.body, u, 1u, move_refs) == CUDA_SUCCESS);
  CUgraph cl = nullptr;
  CHECK(raw<Entry::cuGraphClone>(t, &cl, g) == CUDA_ERROR_NOT_SUPPORTED);
  CUgraphExec e = instantiate(g);
  destroy_graph(g);
  CHECK(still_alive(o));
  if (cl != nullptr) destroy_graph(cl);
  CHECK(still_alive(o));
  launch(e);
  sync();
  destroy_exec(e);
  CHECK(ran_once(o));
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "8d: cuGraphDestroyNode on a conditional node releases the references held by its body") {
  Obj o;
  CUgraph g = new_graph();
  CondNode c = add_cond(g, CU_GRAPH_COND_TYPE_IF, 0);
  REQUIRE(c.add_result == CUDA_SUCCESS);
  CUuserObject u = make_uo(o, 1);
  CHECK(raw<Entry::cuGraphRetainUserObject>(t, c.body, u, 1u, move_refs) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuGraphDestroyNode>(t, c.node) == CUDA_SUCCESS);
  CHECK(wait_count(o, 1, 2000));
  destroy_graph(g);
  sleep_ms(20);
  CHECK(o.count.load() == 1);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "8e: the references of a child-graph node inside an IF body are held by the exec of the outer "
    "graph") {
  Obj o;
  CUgraph child = new_graph();
  add_kernel(child, noop, 0);
  attach(child, o);
  CUgraph g = new_graph();
  CondNode c = add_cond(g, CU_GRAPH_COND_TYPE_IF, 1);
  REQUIRE(c.add_result == CUDA_SUCCESS);
  add_child(c.body, child);
  destroy_graph(child);
  CUgraphExec e = instantiate(g);
  destroy_graph(g);
  CHECK(still_alive(o));
  launch(e);
  sync();
  destroy_exec(e);
  CHECK(ran_once(o));
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "8f: cuGraphDestroy on the body graph of a conditional node returns CUDA_ERROR_INVALID_VALUE") {
  CUgraph g = new_graph();
  CondNode c = add_cond(g, CU_GRAPH_COND_TYPE_IF, 0);
  REQUIRE(c.add_result == CUDA_SUCCESS);
  CHECK(raw<Entry::cuGraphDestroy>(t, c.body) == CUDA_ERROR_INVALID_VALUE);
  CHECK(raw<Entry::cuGraphDestroy>(t, g) == CUDA_SUCCESS);
  finish();
}

TEST_SUITE_END();
