// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The simulator's choices for stream capture where the H200 was not observed or crashed
// (docs/simulator.md, "stream capture"): each test returns early on the real driver.
#include <doctest/doctest.h>

#include "capture_support.hpp"
#include "sim/sim.hpp"
#include "support/driver_fixture.hpp"
#include "tether.hpp"

using namespace tether::detail;
using namespace tether_test;

namespace {

CUresult begin_to_graph(CUstream s, CUgraph g) {
  return raw<Entry::cuStreamBeginCaptureToGraph>(table(), s, g, static_cast<const CUgraphNode*>(nullptr),
                                                 static_cast<const CUgraphEdgeData*>(nullptr), std::size_t{0},
                                                 CU_STREAM_CAPTURE_MODE_GLOBAL);
}

}  // namespace

TEST_SUITE_BEGIN("simulator only");

TEST_CASE_FIXTURE(DriverFixture,
                  "the simulator refuses a capture into a graph that an ongoing capture captures into with "
                  "ILLEGAL_STATE and records capture_into_capturing_graph, where the real driver crashed") {
  if (!sim) return;
  CUstream s = new_stream();
  CUstream s2 = new_stream();
  CUgraph g0 = new_graph();
  REQUIRE(begin_to_graph(s, g0) == CUDA_SUCCESS);
  {
    tether::sim::ExpectViolations expected;  // capture_into_capturing_graph
    CHECK(begin_to_graph(s2, g0) == CUDA_ERROR_ILLEGAL_STATE);
  }
  expect_violations(tether::sim::ViolationKind::capture_into_capturing_graph);
  CHECK(capture_status(s2) == CU_STREAM_CAPTURE_STATUS_NONE);
  CHECK(capture_status(s) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s2, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  CUgraph captured = capinfo(s2).g;
  CHECK(begin_to_graph(s, captured) == CUDA_ERROR_ILLEGAL_STATE);  // s captures already
  CUstream s3 = new_stream();
  {
    tether::sim::ExpectViolations expected;  // capture_into_capturing_graph
    CHECK(begin_to_graph(s3, captured) == CUDA_ERROR_ILLEGAL_STATE);
  }
  expect_violations(tether::sim::ViolationKind::capture_into_capturing_graph);
  CUgraph out = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s2, &out) == CUDA_SUCCESS);
  destroy_graph(out);
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &out) == CUDA_SUCCESS);
  CHECK(out == g0);
  destroy_graph(g0);
  destroy_stream(s);
  destroy_stream(s2);
  destroy_stream(s3);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "a failed capture into the embedded graph of a child node kills that graph's handle and releases "
                  "its references; the parent then refuses instantiation, cloning and embedding with INVALID_VALUE "
                  "and can still be destroyed") {
  if (!sim) return;
  Obj o;
  CUgraph child = new_graph();
  add_kernel(child, noop, 0);
  CUgraph parent = new_graph();
  CUgraphNode cn = add_child(parent, child);
  CUgraph emb = nullptr;
  REQUIRE(raw<Entry::cuGraphChildGraphNodeGetGraph>(t, cn, &emb) == CUDA_SUCCESS);
  CUstream s = new_stream();
  REQUIRE(begin_to_graph(s, emb) == CUDA_SUCCESS);
  REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
  attach(emb, o);
  // While the capture goes on, neither the parent nor the child node may go.
  CHECK(raw<Entry::cuGraphDestroy>(t, parent) == CUDA_ERROR_ILLEGAL_STATE);
  CHECK(raw<Entry::cuGraphDestroyNode>(t, cn) == CUDA_ERROR_ILLEGAL_STATE);
  CHECK(raw<Entry::cuStreamSynchronize>(t, s) == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUgraph out = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &out) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CHECK(o.count.load() == 1);
  std::size_t n = 0;
  CHECK(raw<Entry::cuGraphGetNodes>(t, emb, static_cast<CUgraphNode*>(nullptr), &n) == CUDA_ERROR_INVALID_VALUE);
  CUgraphExec e = nullptr;
  CHECK(raw<Entry::cuGraphInstantiateWithFlags>(t, &e, parent, 0ull) == CUDA_ERROR_INVALID_VALUE);
  CUgraph cl = nullptr;
  CHECK(raw<Entry::cuGraphClone>(t, &cl, parent) == CUDA_ERROR_INVALID_VALUE);
  CUgraph outer = new_graph();
  CUgraphNode x = nullptr;
  CHECK(raw<Entry::cuGraphAddChildGraphNode>(t, &x, outer, static_cast<const CUgraphNode*>(nullptr), std::size_t{0},
                                             parent) == CUDA_ERROR_INVALID_VALUE);
  destroy_graph(outer);
  destroy_graph(parent);
  destroy_graph(child);
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "CU_STREAM_PER_THREAD is a stream of each thread, apart from the legacy stream: a capture on it "
                  "does not capture the legacy stream's work, and a legacy-stream launch beside it is "
                  "STREAM_CAPTURE_IMPLICIT since the per-thread stream is blocking") {
  if (!sim) return;
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  CUstreamCaptureStatus other_thread_status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  std::thread th([&] {
    make_current();
    CHECK(raw<Entry::cuStreamIsCapturing>(table(), CU_STREAM_PER_THREAD, &other_thread_status) == CUDA_SUCCESS);
  });
  th.join();
  CHECK(other_thread_status == CU_STREAM_CAPTURE_STATUS_NONE);
  CHECK(launch_kernel(noop, CU_STREAM_LEGACY) == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
  CHECK(capture_status(CU_STREAM_PER_THREAD) == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  CUgraph g = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, CU_STREAM_PER_THREAD, &g) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  finish();
}

TEST_SUITE_END();
