// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Driver conformance, capture_facts c3a-c3n: cuStreamBeginCaptureToGraph into an existing root
// graph, into the embedded graph of a child node and into a conditional body; what a node of the
// target may not do during the capture; and what an invalidated or failed capture leaves of the
// target graph (nothing: it is destroyed).
#include <doctest/doctest.h>

#include "capture_support.hpp"
#include "sim/sim.hpp"
#include "support/driver_fixture.hpp"
#include "tether.hpp"

using namespace tether::detail;
using namespace tether_test;

namespace {

CUresult begin_to_graph(CUstream s, CUgraph g, const CUgraphNode* deps, std::size_t n) {
  return raw<Entry::cuStreamBeginCaptureToGraph>(table(), s, g, deps, static_cast<const CUgraphEdgeData*>(nullptr), n,
                                                 CU_STREAM_CAPTURE_MODE_GLOBAL);
}

CUresult get_nodes(CUgraph g, std::size_t& n) {
  return raw<Entry::cuGraphGetNodes>(table(), g, static_cast<CUgraphNode*>(nullptr), &n);
}

CUresult try_instantiate(CUgraph g, CUgraphExec& e) {
  return raw<Entry::cuGraphInstantiateWithFlags>(table(), &e, g, 0ull);
}

// Which node the destroy-node variants of c3g-c3j try to destroy.
enum class Victim { other_pre_existing, upstream_pre_existing, given_dependency, frontier };

}  // namespace

TEST_SUITE_BEGIN("driver conformance");

TEST_CASE_FIXTURE(DriverFixture,
                  "c3a c3b c3c c3d: a capture into an existing graph reports that graph and the given dependencies; "
                  "the captured node lands there depending on them; the end returns the target itself; a second "
                  "capture into it (same id) and one without dependencies (a root) work too; the target "
                  "instantiates, and references retained on it before and during the capture are released once") {
  Obj a, b;
  CUgraph g0 = new_graph();
  CUgraphNode A = add_kernel(g0, noop, 0);
  attach(g0, a);
  CUstream s = new_stream();
  REQUIRE(begin_to_graph(s, g0, &A, 1) == CUDA_SUCCESS);
  Cap c = capinfo(s);  // c3a
  CHECK(c.st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CHECK(c.g == g0);
  CHECK(same_set(c.deps, {A}));
  Tracker T(g0);
  T.seed(s);
  Step st = T.after(s, launch_kernel(noop, s));  // c3b
  REQUIRE(st.exact());
  CHECK(st.chained());
  CUgraphNode B = st.node();
  CHECK(same_set(deps_of(B), {A}));
  attach(c.g, b);
  CUgraph out = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &out) == CUDA_SUCCESS);
  CHECK(out == g0);
  CHECK(node_count(g0) == 2);

  REQUIRE(begin_to_graph(s, g0, &B, 1) == CUDA_SUCCESS);  // c3c
  Cap c2 = capinfo(s);
  CHECK(c2.id == c.id);
  T.seed(s);
  st = T.after(s, launch_kernel(noop, s));
  REQUIRE(st.exact());
  CHECK(same_set(deps_of(st.node()), {B}));
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &out) == CUDA_SUCCESS);
  CHECK(out == g0);
  REQUIRE(begin_to_graph(s, g0, nullptr, 0) == CUDA_SUCCESS);
  CHECK(capinfo(s).n == 0);
  T.seed(s);
  st = T.after(s, launch_kernel(noop, s));
  REQUIRE(st.exact());
  CHECK(deps_of(st.node()).empty());
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &out) == CUDA_SUCCESS);
  CHECK(out == g0);
  CHECK(node_count(g0) == 4);

  CUgraphExec e = instantiate(g0);  // c3d
  launch_on(e, s);
  sync_on(s);
  destroy_graph(g0);
  CHECK(still_alive(a));
  CHECK(b.count.load() == 0);
  destroy_exec(e);
  CHECK(ran_once(a));
  CHECK(ran_once(b));
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c3e: a capture into the embedded graph of a child-graph node adds the node there, the end returns "
                  "the embedded graph, and the captured kernel runs as part of the parent") {
  Counter ctr;
  CUgraph child = new_graph();
  add_kernel(child, noop, 0);
  CUgraph parent = new_graph();
  CUgraphNode cn = add_child(parent, child);
  CUgraph emb = nullptr;
  REQUIRE(raw<Entry::cuGraphChildGraphNodeGetGraph>(t, cn, &emb) == CUDA_SUCCESS);
  CUstream s = new_stream();
  REQUIRE(begin_to_graph(s, emb, nullptr, 0) == CUDA_SUCCESS);
  CHECK(capinfo(s).g == emb);
  CHECK(ctr.inc(s) == CUDA_SUCCESS);
  CUgraph out = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &out) == CUDA_SUCCESS);
  CHECK(out == emb);
  CHECK(node_count(emb) == 2);
  CUgraphExec e = instantiate(parent);
  launch_on(e, s);
  sync_on(s);
  CHECK(ctr.read() == 1);
  destroy_exec(e);
  destroy_graph(parent);
  destroy_graph(child);
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c3f: a capture into the body of an IF node (default 1) works: the dependency set is the captured "
                  "node, the end returns the body, the body runs once per launch, and a user object retained on the "
                  "capture graph (the body) is held by the outer executable") {
  Obj a;
  Counter ctr;
  CUgraph parent = new_graph();
  CondNode cnd = add_cond(parent, CU_GRAPH_COND_TYPE_IF, 1);
  REQUIRE(cnd.add_result == CUDA_SUCCESS);
  CUstream s = new_stream();
  REQUIRE(begin_to_graph(s, cnd.body, nullptr, 0) == CUDA_SUCCESS);
  Cap c = capinfo(s);
  CHECK(c.g == cnd.body);
  Tracker T(cnd.body);
  T.seed(s);
  Step st = T.after(s, ctr.inc(s));
  CHECK(st.exact());
  attach(c.g, a);
  CUgraph out = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &out) == CUDA_SUCCESS);
  CHECK(out == cnd.body);
  CUgraphExec e = instantiate(parent);
  launch_on(e, s);
  launch_on(e, s);
  sync_on(s);
  CHECK(ctr.read() == 2);
  destroy_graph(parent);
  CHECK(still_alive(a));
  destroy_exec(e);
  CHECK(ran_once(a));
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c3f2: a host function captured into a conditional body is accepted and the capture ends, but "
                  "cuGraphInstantiate of the outer graph refuses it with INVALID_VALUE") {
  HostRec h;
  CUgraph parent = new_graph();
  CondNode cnd = add_cond(parent, CU_GRAPH_COND_TYPE_IF, 1);
  REQUIRE(cnd.add_result == CUDA_SUCCESS);
  CUstream s = new_stream();
  REQUIRE(begin_to_graph(s, cnd.body, nullptr, 0) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuLaunchHostFunc>(t, s, &host_record, static_cast<void*>(&h)) == CUDA_SUCCESS);
  CHECK(capture_status(s) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CUgraph out = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &out) == CUDA_SUCCESS);
  CHECK(node_count(cnd.body) == 1);
  CUgraphExec e = nullptr;
  CHECK(try_instantiate(parent, e) == CUDA_ERROR_INVALID_VALUE);
  if (e != nullptr) destroy_exec(e);
  CHECK(h.calls.load() == 0);
  destroy_graph(parent);
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c3g c3h c3i c3j: during a capture into an existing graph, cuGraphDestroyNode of any node of the "
                  "target (unrelated, upstream of the captured node, the given dependency, the current dependency) "
                  "is ILLEGAL_STATE and changes nothing: the capture goes on and the target runs") {
  for (Victim v :
       {Victim::other_pre_existing, Victim::upstream_pre_existing, Victim::given_dependency, Victim::frontier}) {
    INFO(static_cast<int>(v));
    CUgraph g0 = new_graph();
    CUgraphNode A = add_kernel(g0, noop, 0);
    CUgraphNode A2 = add_kernel(g0, noop, 0);
    CUstream s = new_stream();
    REQUIRE(begin_to_graph(s, g0, &A, 1) == CUDA_SUCCESS);
    CUgraphNode victim = nullptr;
    switch (v) {
      case Victim::other_pre_existing:
        REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
        victim = A2;
        break;
      case Victim::upstream_pre_existing:
        REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
        victim = A;
        break;
      case Victim::given_dependency: victim = A; break;
      case Victim::frontier:
        REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
        victim = capinfo(s).deps.at(0);
        break;
    }
    std::size_t before = node_count(g0);
    Cap c0 = capinfo(s);
    CHECK(raw<Entry::cuGraphDestroyNode>(t, victim) == CUDA_ERROR_ILLEGAL_STATE);
    Cap c1 = capinfo(s);
    CHECK(c1.st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CHECK(same_set(c1.deps, c0.deps));
    CHECK(node_count(g0) == before);
    CHECK(node_type(victim) == CU_GRAPH_NODE_TYPE_KERNEL);
    CHECK(launch_kernel(noop, s) == CUDA_SUCCESS);
    CHECK(capinfo(s).deps.size() == 1);
    CUgraph out = nullptr;
    CHECK(raw<Entry::cuStreamEndCapture>(t, s, &out) == CUDA_SUCCESS);
    CHECK(out == g0);
    CHECK(node_count(g0) == (v == Victim::given_dependency ? 3u : 4u));
    CUgraphExec e = instantiate(g0);
    launch_on(e, s);
    sync_on(s);
    destroy_exec(e);
    destroy_graph(g0);
    destroy_stream(s);
  }
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c3k: a capture into an existing graph invalidated by cuStreamSynchronize destroys the target at "
                  "cuStreamEndCapture: cuGraphGetNodes, cuGraphInstantiate and cuGraphDestroy on it return "
                  "INVALID_VALUE and the user object retained on it during the capture is released") {
  Obj a;
  CUgraph g0 = new_graph();
  CUgraphNode A = add_kernel(g0, noop, 0);
  CUstream s = new_stream();
  REQUIRE(begin_to_graph(s, g0, &A, 1) == CUDA_SUCCESS);
  REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
  REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
  attach(capinfo(s).g, a);
  CHECK(node_count(g0) == 3);
  CHECK(raw<Entry::cuStreamSynchronize>(t, s) == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CHECK(capture_status(s) == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  CUgraph out = reinterpret_cast<CUgraph>(std::uintptr_t{0x10});
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &out) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CHECK(out == nullptr);
  std::size_t n = 0;
  CHECK(get_nodes(g0, n) == CUDA_ERROR_INVALID_VALUE);
  CHECK(ran_once(a));
  CUgraphExec e = nullptr;
  CHECK(try_instantiate(g0, e) == CUDA_ERROR_INVALID_VALUE);
  CHECK(e == nullptr);
  CHECK(raw<Entry::cuGraphDestroy>(t, g0) == CUDA_ERROR_INVALID_VALUE);
  CHECK(a.count.load() == 1);
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c3l: a capture into an existing graph whose forked stream is never joined fails at "
                  "cuStreamEndCapture with STREAM_CAPTURE_UNJOINED and destroys the target (cuGraphGetNodes, "
                  "cuGraphInstantiate and cuGraphDestroy return INVALID_VALUE); the forked stream is left out of any "
                  "capture") {
  CUgraph g0 = new_graph();
  CUgraphNode A = add_kernel(g0, noop, 0);
  CUstream s = new_stream();
  CUstream s2 = new_stream();
  CUevent ev = make_event();
  REQUIRE(begin_to_graph(s, g0, &A, 1) == CUDA_SUCCESS);
  REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
  REQUIRE(raw<Entry::cuEventRecord>(t, ev, s) == CUDA_SUCCESS);
  REQUIRE(raw<Entry::cuStreamWaitEvent>(t, s2, ev, 0u) == CUDA_SUCCESS);
  REQUIRE(launch_kernel(noop, s2) == CUDA_SUCCESS);
  CHECK(node_count(g0) == 3);
  CUgraph out = reinterpret_cast<CUgraph>(std::uintptr_t{0x10});
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &out) == CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
  CHECK(out == nullptr);
  std::size_t n = 0;
  CHECK(get_nodes(g0, n) == CUDA_ERROR_INVALID_VALUE);
  CHECK(capture_status(s2) == CU_STREAM_CAPTURE_STATUS_NONE);
  CUgraphExec e = nullptr;
  CHECK(try_instantiate(g0, e) == CUDA_ERROR_INVALID_VALUE);
  CHECK(e == nullptr);
  CHECK(raw<Entry::cuGraphDestroy>(t, g0) == CUDA_ERROR_INVALID_VALUE);
  destroy_event(ev);
  destroy_stream(s);
  destroy_stream(s2);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c3n: during a capture into an existing graph, cuGraphInstantiate of the target is "
                  "STREAM_CAPTURE_UNSUPPORTED and invalidates the capture, cuGraphClone of it works (2 nodes), and "
                  "the end (STREAM_CAPTURE_INVALIDATED) destroys the target") {
  CUgraph g0 = new_graph();
  CUgraphNode A = add_kernel(g0, noop, 0);
  CUstream s = new_stream();
  REQUIRE(begin_to_graph(s, g0, &A, 1) == CUDA_SUCCESS);
  REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
  CUgraphExec e = nullptr;
  CHECK(try_instantiate(g0, e) == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CHECK(e == nullptr);
  CUgraph cl = nullptr;
  CHECK(raw<Entry::cuGraphClone>(t, &cl, g0) == CUDA_SUCCESS);
  REQUIRE(cl != nullptr);
  CHECK(node_count(cl) == 2);
  destroy_graph(cl);
  CHECK(capture_status(s) == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  CUgraph out = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &out) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CHECK(out == nullptr);
  CHECK(raw<Entry::cuGraphDestroy>(t, g0) == CUDA_ERROR_INVALID_VALUE);
  destroy_stream(s);
  finish();
}

TEST_SUITE_END();
