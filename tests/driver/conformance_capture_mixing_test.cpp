// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Driver conformance, capture_facts c5a-c5n, c6a, c6b, c10n: explicit nodes added to the graph of
// an ongoing capture, cuStreamUpdateCaptureDependencies, conditional nodes built during a capture
// (with an explicit body and with a body captured from a second stream), and the nodes and graph a
// capture does not let go of.
#include <doctest/doctest.h>

#include "capture_support.hpp"
#include "conformance_threads.hpp"
#include "sim/sim.hpp"
#include "support/driver_fixture.hpp"
#include "tether.hpp"

using namespace tether::detail;
using namespace tether_test;

namespace {

CUresult update_deps(CUstream s, CUgraphNode* nodes, std::size_t n, unsigned flags) {
  return raw<Entry::cuStreamUpdateCaptureDependencies>(table(), s, nodes, static_cast<const CUgraphEdgeData*>(nullptr),
                                                       n, flags);
}

CUgraphNode add_empty(CUgraph g, const CUgraphNode* deps = nullptr, std::size_t n = 0) {
  CUgraphNode x = nullptr;
  CHECK(raw<Entry::cuGraphAddEmptyNode>(table(), &x, g, deps, n) == CUDA_SUCCESS);
  return x;
}

// Adds an IF node (handle default 1, reset at each launch) after deps.
CondNode add_if(CUgraph g, const CUgraphNode* deps, std::size_t ndeps) {
  CondNode c;
  CUgraphConditionalHandle h = 0;
  c.handle_result = raw<Entry::cuGraphConditionalHandleCreate>(table(), &h, g, driver().ctx, 1u,
                                                              static_cast<unsigned>(CU_GRAPH_COND_ASSIGN_DEFAULT));
  if (c.handle_result != CUDA_SUCCESS) return c;
  CUgraphNodeParams np{};
  np.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  np.conditional.handle = h;
  np.conditional.type = CU_GRAPH_COND_TYPE_IF;
  np.conditional.size = 1;
  np.conditional.ctx = driver().ctx;
  c.add_result =
      raw<Entry::cuGraphAddNode>(table(), &c.node, g, deps, static_cast<const CUgraphEdgeData*>(nullptr), ndeps, &np);
  if (c.add_result == CUDA_SUCCESS) c.body = np.conditional.phGraph_out[0];
  return c;
}

CUresult end_run_destroy(CUstream s, std::size_t expected_nodes) {
  CUgraph g = nullptr;
  CUresult r = raw<Entry::cuStreamEndCapture>(table(), s, &g);
  if (g == nullptr) return r;
  CHECK(node_count(g) == expected_nodes);
  CUgraphExec e = instantiate(g);
  CHECK(raw<Entry::cuGraphLaunch>(table(), e, s) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuStreamSynchronize>(table(), s) == CUDA_SUCCESS);
  destroy_exec(e);
  destroy_graph(g);
  return r;
}

enum class Victim { explicit_node, upstream_captured, frontier };

}  // namespace

TEST_SUITE_BEGIN("driver conformance");

TEST_CASE_FIXTURE(DriverFixture,
                  "c5a c5b c5c c5d c5e: explicit nodes added to the capture graph leave the dependency set as it is; "
                  "cuStreamUpdateCaptureDependencies SET makes the next captured node depend on exactly the given "
                  "nodes, ADD and flags 0 add to the set; an explicit leaf never joined does not fail the end and "
                  "runs with the graph") {
  HostRec h;
  CUstream s = new_stream();
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
  Cap c = capinfo(s);
  CUgraphNode K1 = c.deps.at(0);
  CUgraphNode X = add_kernel(c.g, noop, 7, c.deps.data(), c.deps.size());  // c5a
  CHECK(capture_status(s) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CHECK(same_set(capinfo(s).deps, {K1}));
  CHECK(same_set(deps_of(X), {K1}));
  CHECK(node_count(c.g) == 2);

  Tracker T(c.g);
  CHECK(update_deps(s, &X, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES) == CUDA_SUCCESS);  // c5b
  CHECK(same_set(capinfo(s).deps, {X}));
  T.seed(s);
  Step k2 = T.after(s, launch_kernel(noop, s));
  REQUIRE(k2.exact());
  CHECK(same_set(deps_of(k2.node()), {X}));

  CUgraphNode Y = add_empty(c.g);  // c5c
  T.seed(s);
  CHECK(update_deps(s, &Y, 1, CU_STREAM_ADD_CAPTURE_DEPENDENCIES) == CUDA_SUCCESS);
  CHECK(same_set(capinfo(s).deps, {k2.node(), Y}));
  T.seed(s);
  Step k3 = T.after(s, launch_kernel(noop, s));
  REQUIRE(k3.exact());
  CHECK(same_set(deps_of(k3.node()), {k2.node(), Y}));

  CUgraphNode Z = add_empty(c.g);  // c5d
  CHECK(update_deps(s, &Z, 1, 0u) == CUDA_SUCCESS);
  CHECK(same_set(capinfo(s).deps, {k3.node(), Z}));
  REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);

  Cap ce = capinfo(s);  // c5e
  CUDA_HOST_NODE_PARAMS hp{};
  hp.fn = &host_record;
  hp.userData = &h;
  CUgraphNode H = nullptr;
  CHECK(raw<Entry::cuGraphAddHostNode>(t, &H, c.g, ce.deps.data(), ce.deps.size(), &hp) == CUDA_SUCCESS);
  CUgraph g = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_SUCCESS);
  CHECK(g == c.g);
  CHECK(node_count(g) == 8);
  CUgraphExec e = instantiate(g);
  launch_on(e, s);
  sync_on(s);
  CHECK(h.calls.load() == 1);
  destroy_exec(e);
  destroy_graph(g);
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c5f c5g c5h c5i c5j: cuStreamUpdateCaptureDependencies refuses flags 2 and a node of another graph "
                  "with INVALID_VALUE (the capture goes on), is ILLEGAL_STATE on a stream that is not capturing, "
                  "SET with no nodes makes the next node a root, and zeroed edge data is accepted") {
  CUstream s = new_stream();
  {  // c5f
    REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
    REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
    CUgraphNode n = capinfo(s).deps.at(0);
    CHECK(update_deps(s, &n, 1, 2u) == CUDA_ERROR_INVALID_VALUE);
    CHECK(capture_status(s) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CHECK(end_run_destroy(s, 1) == CUDA_SUCCESS);
  }
  {  // c5g
    CUgraph foreign = new_graph();
    CUgraphNode F = add_kernel(foreign, noop, 0);
    REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
    REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
    CHECK(update_deps(s, &F, 1, CU_STREAM_ADD_CAPTURE_DEPENDENCIES) == CUDA_ERROR_INVALID_VALUE);
    CHECK(capture_status(s) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CHECK(launch_kernel(noop, s) == CUDA_SUCCESS);
    CHECK(end_run_destroy(s, 2) == CUDA_SUCCESS);
    destroy_graph(foreign);
  }
  {  // c5h
    CUgraph g = new_graph();
    CUgraphNode n = add_kernel(g, noop, 0);
    CHECK(update_deps(s, &n, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES) == CUDA_ERROR_ILLEGAL_STATE);
    destroy_graph(g);
  }
  {  // c5i
    REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
    REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
    Cap c = capinfo(s);
    CHECK(update_deps(s, nullptr, 0, CU_STREAM_SET_CAPTURE_DEPENDENCIES) == CUDA_SUCCESS);
    CHECK(capinfo(s).n == 0);
    Tracker T(c.g);
    T.seed(s);
    Step k = T.after(s, launch_kernel(noop, s));
    REQUIRE(k.exact());
    CHECK(deps_of(k.node()).empty());
    CHECK(end_run_destroy(s, 2) == CUDA_SUCCESS);
  }
  {  // c5j
    REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
    REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
    CUgraphNode n = capinfo(s).deps.at(0);
    CUgraphEdgeData ed{};
    CHECK(raw<Entry::cuStreamUpdateCaptureDependencies>(t, s, &n, &ed, std::size_t{1},
                                                        static_cast<unsigned>(CU_STREAM_SET_CAPTURE_DEPENDENCIES)) ==
          CUDA_SUCCESS);
    CHECK(end_run_destroy(s, 1) == CUDA_SUCCESS);
  }
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c5k: another thread adds a kernel node to the capture graph after the capture's set and makes it "
                  "the set with cuStreamUpdateCaptureDependencies; the capturing thread's next kernel depends on "
                  "it") {
  CUstream s = new_stream();
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
  Cap c = capinfo(s);
  CUgraphNode X = nullptr;
  {
    Call call(ctx, [&] {
      Cap c2 = capinfo(s);
      if (!c2.active()) return c2.r;
      std::uint64_t arg = 0;
      void* args[] = {&arg};
      CUDA_KERNEL_NODE_PARAMS kp = kernel_params(driver().noop, args);
      CUresult r = raw<Entry::cuGraphAddKernelNode>(table(), &X, c2.g, c2.deps.data(), c2.deps.size(), &kp);
      return r == CUDA_SUCCESS ? update_deps(s, &X, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES) : r;
    });
    REQUIRE(call.returned_within(wait_ms));
    CHECK(call.result() == CUDA_SUCCESS);
  }
  REQUIRE(X != nullptr);
  Tracker T(c.g);
  T.seed(s);
  Step k = T.after(s, launch_kernel(noop, s));
  REQUIRE(k.exact());
  CHECK(same_set(deps_of(k.node()), {X}));
  CUgraph g = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_SUCCESS);
  CHECK(g == c.g);
  CHECK(node_count(g) == 3);
  destroy_graph(g);
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c5l c5m c5n c10n: during a capture cuGraphDestroyNode of an explicit node, of a captured node "
                  "upstream of the set or of the node that is the set is ILLEGAL_STATE and changes nothing, and "
                  "cuGraphDestroy of the capture graph is ILLEGAL_STATE; the capture goes on and ends with the same "
                  "graph") {
  for (Victim v : {Victim::explicit_node, Victim::upstream_captured, Victim::frontier}) {
    INFO(static_cast<int>(v));
    CUstream s = new_stream();
    REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
    REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
    Cap c = capinfo(s);
    CUgraphNode victim = nullptr;
    std::size_t expected = 0;
    switch (v) {
      case Victim::explicit_node:
        victim = add_kernel(c.g, noop, 0, c.deps.data(), c.deps.size());
        expected = 3;
        break;
      case Victim::upstream_captured:
        victim = c.deps.at(0);
        REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
        expected = 3;
        break;
      case Victim::frontier:
        victim = c.deps.at(0);
        expected = 2;
        break;
    }
    std::size_t before = node_count(c.g);
    Cap c0 = capinfo(s);
    CHECK(raw<Entry::cuGraphDestroyNode>(t, victim) == CUDA_ERROR_ILLEGAL_STATE);
    Cap c1 = capinfo(s);
    CHECK(c1.st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CHECK(same_set(c1.deps, c0.deps));
    CHECK(node_count(c.g) == before);
    CHECK(node_type(victim) == CU_GRAPH_NODE_TYPE_KERNEL);
    if (v == Victim::frontier) {  // c10n
      CHECK(raw<Entry::cuGraphDestroy>(t, c.g) == CUDA_ERROR_ILLEGAL_STATE);
      CHECK(capture_status(s) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    }
    CHECK(launch_kernel(noop, s) == CUDA_SUCCESS);
    CUgraph g = nullptr;
    CHECK(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_SUCCESS);
    CHECK(g == c.g);
    CHECK(node_count(g) == expected);
    CUgraphExec e = instantiate(g);
    launch_on(e, s);
    sync_on(s);
    destroy_exec(e);
    destroy_graph(g);
    destroy_stream(s);
  }
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c6a: an IF node built during a capture (handle and node on the capture graph, the node after the "
                  "capture's set and then made the set) with an explicitly filled body runs its body once per launch, "
                  "and the next captured kernel depends on it") {
  Counter body, outer;
  CUstream s = new_stream();
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  REQUIRE(outer.inc(s) == CUDA_SUCCESS);
  Cap c = capinfo(s);
  CondNode cnd = add_if(c.g, c.deps.data(), c.deps.size());
  CHECK(cnd.handle_result == CUDA_SUCCESS);
  REQUIRE(cnd.add_result == CUDA_SUCCESS);
  CHECK(update_deps(s, &cnd.node, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES) == CUDA_SUCCESS);
  body.add(cnd.body);
  Tracker T(c.g);
  T.seed(s);
  Step k2 = T.after(s, outer.inc(s));
  REQUIRE(k2.exact());
  CHECK(same_set(deps_of(k2.node()), {cnd.node}));
  CUgraph g = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_SUCCESS);
  CHECK(node_type(cnd.node) == CU_GRAPH_NODE_TYPE_CONDITIONAL);
  CUgraphExec e = instantiate(g);
  launch_on(e, s);
  launch_on(e, s);
  sync_on(s);
  CHECK(body.read() == 2);
  CHECK(outer.read() == 4);
  destroy_exec(e);
  destroy_graph(g);
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c6b: the body of an IF node built during a capture of one stream is captured from a second stream "
                  "with cuStreamBeginCaptureToGraph (another capture id) while the first still captures; a user "
                  "object retained on the second capture's graph (the body) is held by the executable, and the body "
                  "runs once per launch") {
  Obj a;
  Counter body, outer;
  CUstream s = new_stream();
  CUstream s2 = new_stream();
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  REQUIRE(outer.inc(s) == CUDA_SUCCESS);
  Cap c = capinfo(s);
  CondNode cnd = add_if(c.g, c.deps.data(), c.deps.size());
  REQUIRE(cnd.add_result == CUDA_SUCCESS);
  CHECK(update_deps(s, &cnd.node, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES) == CUDA_SUCCESS);
  REQUIRE(raw<Entry::cuStreamBeginCaptureToGraph>(t, s2, cnd.body, static_cast<const CUgraphNode*>(nullptr),
                                                  static_cast<const CUgraphEdgeData*>(nullptr), std::size_t{0},
                                                  CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  Cap c2 = capinfo(s2);
  CHECK(c2.g == cnd.body);
  CHECK(c2.id != c.id);
  CHECK(body.inc(s2) == CUDA_SUCCESS);
  CHECK(node_count(cnd.body) == 1);
  attach(c2.g, a);
  CUgraph out2 = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s2, &out2) == CUDA_SUCCESS);
  CHECK(out2 == cnd.body);
  CHECK(outer.inc(s) == CUDA_SUCCESS);
  CUgraph g = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_SUCCESS);
  CUgraphExec e = instantiate(g);
  launch_on(e, s);
  launch_on(e, s);
  sync_on(s);
  CHECK(body.read() == 2);
  CHECK(outer.read() == 4);
  destroy_graph(g);
  CHECK(still_alive(a));
  destroy_exec(e);
  CHECK(ran_once(a));
  destroy_stream(s);
  destroy_stream(s2);
  finish();
}

TEST_SUITE_END();
