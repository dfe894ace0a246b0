// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Driver conformance, capture_facts c4 (capture mode x calling thread x operation) and c10f, c10h-j,
// c10t, c10w: which calls invalidate an ongoing stream capture. Each run begins a capture on a
// fresh non-blocking stream, captures one kernel and records an event in it, makes one operation
// from the capturing thread or another thread (in the thread capture mode the case sets), and then
// observes the operation's result, the capture status, the next captured launch and the end.
#include <doctest/doctest.h>

#include "conformance_threads.hpp"
#include "sim/sim.hpp"
#include "support/driver_fixture.hpp"
#include "tether.hpp"

using namespace tether::detail;
using namespace tether_test;

namespace {

enum class Op {
  mem_alloc,
  mem_free,
  mem_alloc_host,
  instantiate_other,
  exec_destroy_other,
  event_query_other,
  event_sync_other,
  other_stream_sync,
  other_stream_query,
  ctx_sync,
  stream_sync,
  stream_query,
  event_query_captured,
  event_sync_captured,
  launch_other_stream,
  uo_create_release,
};

const char* name(Op op) {
  switch (op) {
    case Op::mem_alloc: return "cuMemAlloc";
    case Op::mem_free: return "cuMemFree (buffer allocated before the capture)";
    case Op::mem_alloc_host: return "cuMemAllocHost";
    case Op::instantiate_other: return "cuGraphInstantiate (unrelated graph)";
    case Op::exec_destroy_other: return "cuGraphExecDestroy (unrelated exec, launched before)";
    case Op::event_query_other: return "cuEventQuery (event recorded before the capture)";
    case Op::event_sync_other: return "cuEventSynchronize (event recorded before the capture)";
    case Op::other_stream_sync: return "cuStreamSynchronize (another stream)";
    case Op::other_stream_query: return "cuStreamQuery (another stream)";
    case Op::ctx_sync: return "cuCtxSynchronize";
    case Op::stream_sync: return "cuStreamSynchronize (capturing stream)";
    case Op::stream_query: return "cuStreamQuery (capturing stream)";
    case Op::event_query_captured: return "cuEventQuery (event recorded in the capture)";
    case Op::event_sync_captured: return "cuEventSynchronize (event recorded in the capture)";
    case Op::launch_other_stream: return "cuLaunchKernel (another stream)";
    case Op::uo_create_release: return "cuUserObjectCreate + cuUserObjectRelease";
  }
  return "?";
}

// The "potentially unsafe" calls: harmful only under the thread/capture mode rules.
constexpr Op unsafe_ops[] = {Op::mem_alloc,         Op::mem_free,          Op::mem_alloc_host,
                             Op::instantiate_other, Op::exec_destroy_other, Op::event_query_other,
                             Op::event_sync_other,  Op::other_stream_sync, Op::other_stream_query};
// Invalidate in every mode.
constexpr Op always_ops[] = {Op::ctx_sync, Op::stream_sync, Op::stream_query, Op::event_query_captured,
                             Op::event_sync_captured};
// Never invalidate.
constexpr Op harmless_ops[] = {Op::launch_other_stream, Op::uo_create_release};

CUresult expected_failure(Op op) {
  return op == Op::event_query_captured || op == Op::event_sync_captured ? CUDA_ERROR_CAPTURED_EVENT
                                                                         : CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

enum class Who { same, other };

struct Outcome {
  CUresult op = CUDA_ERROR_UNKNOWN;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult next_launch = CUDA_ERROR_UNKNOWN;
  CUresult end = CUDA_ERROR_UNKNOWN;
};

CUresult launch_noop(CUfunction f, CUstream s) {
  std::uint64_t arg = 0;
  void* args[] = {&arg};
  return raw<Entry::cuLaunchKernel>(table(), f, 1u, 1u, 1u, 1u, 1u, 1u, 0u, s, args, static_cast<void**>(nullptr));
}

CUresult exchange_mode(CUstreamCaptureMode& mode) {
  return raw<Entry::cuThreadExchangeStreamCaptureMode>(table(), &mode);
}

int g_uo_runs = 0;
void CUDA_CB count_uo(void*) { ++g_uo_runs; }

// One run of the matrix: capture in `capture_mode`; `op` from `who`, whose thread mode is
// `thread_mode` during the call.
Outcome run_case(CUcontext ctx, CUfunction noop, CUstreamCaptureMode capture_mode, Who who,
                 CUstreamCaptureMode thread_mode, Op op) {
  const tether::detail::DriverTable& t = table();
  // Resources made before the capture.
  CUdeviceptr buf = 0;
  REQUIRE(raw<Entry::cuMemAlloc>(t, &buf, std::size_t{1} << 20) == CUDA_SUCCESS);
  CUstream other = nullptr;
  REQUIRE(raw<Entry::cuStreamCreate>(t, &other, static_cast<unsigned>(CU_STREAM_NON_BLOCKING)) == CUDA_SUCCESS);
  CUgraph graph_other = new_graph();
  add_kernel(graph_other, noop, 1);
  CUgraphExec exec_other = instantiate(graph_other);
  REQUIRE(raw<Entry::cuGraphLaunch>(t, exec_other, other) == CUDA_SUCCESS);
  CUevent ev_other = nullptr, ev_cap = nullptr;
  REQUIRE(raw<Entry::cuEventCreate>(t, &ev_other, static_cast<unsigned>(CU_EVENT_DISABLE_TIMING)) == CUDA_SUCCESS);
  REQUIRE(raw<Entry::cuEventCreate>(t, &ev_cap, static_cast<unsigned>(CU_EVENT_DISABLE_TIMING)) == CUDA_SUCCESS);
  REQUIRE(raw<Entry::cuEventRecord>(t, ev_other, other) == CUDA_SUCCESS);
  REQUIRE(raw<Entry::cuStreamSynchronize>(t, other) == CUDA_SUCCESS);

  CUstream s = nullptr;
  REQUIRE(raw<Entry::cuStreamCreate>(t, &s, static_cast<unsigned>(CU_STREAM_NON_BLOCKING)) == CUDA_SUCCESS);
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, capture_mode) == CUDA_SUCCESS);
  REQUIRE(launch_noop(noop, s) == CUDA_SUCCESS);
  REQUIRE(raw<Entry::cuEventRecord>(t, ev_cap, s) == CUDA_SUCCESS);

  CUdeviceptr fresh = 0;
  void* host = nullptr;
  CUgraphExec inst = nullptr;
  bool exec_other_destroyed = false;
  auto operation = [&]() -> CUresult {
    switch (op) {
      case Op::mem_alloc: return raw<Entry::cuMemAlloc>(table(), &fresh, std::size_t{1} << 20);
      case Op::mem_free: return raw<Entry::cuMemFree>(table(), buf);
      case Op::mem_alloc_host: return raw<Entry::cuMemAllocHost>(table(), &host, std::size_t{65536});
      case Op::instantiate_other: return raw<Entry::cuGraphInstantiateWithFlags>(table(), &inst, graph_other, 0ull);
      case Op::exec_destroy_other: return raw<Entry::cuGraphExecDestroy>(table(), exec_other);
      case Op::event_query_other: return raw<Entry::cuEventQuery>(table(), ev_other);
      case Op::event_sync_other: return raw<Entry::cuEventSynchronize>(table(), ev_other);
      case Op::other_stream_sync: return raw<Entry::cuStreamSynchronize>(table(), other);
      case Op::other_stream_query: return raw<Entry::cuStreamQuery>(table(), other);
      case Op::ctx_sync: return raw<Entry::cuCtxSynchronize>(table());
      case Op::stream_sync: return raw<Entry::cuStreamSynchronize>(table(), s);
      case Op::stream_query: return raw<Entry::cuStreamQuery>(table(), s);
      case Op::event_query_captured: return raw<Entry::cuEventQuery>(table(), ev_cap);
      case Op::event_sync_captured: return raw<Entry::cuEventSynchronize>(table(), ev_cap);
      case Op::launch_other_stream: return launch_noop(noop, other);
      case Op::uo_create_release: {
        CUuserObject u = nullptr;
        CUresult r = raw<Entry::cuUserObjectCreate>(table(), &u, nullptr, &count_uo, 1u,
                                                    static_cast<unsigned>(CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
        return r == CUDA_SUCCESS ? raw<Entry::cuUserObjectRelease>(table(), u, 1u) : r;
      }
    }
    return CUDA_ERROR_UNKNOWN;
  };
  auto in_mode = [&]() -> CUresult {
    CUstreamCaptureMode m = thread_mode;
    CUresult set = exchange_mode(m);
    if (set != CUDA_SUCCESS) return set;
    CUresult r = operation();
    CUresult back = exchange_mode(m);  // restores the thread's previous mode
    return back == CUDA_SUCCESS ? r : back;
  };

  Outcome o;
  if (who == Who::same) {
    o.op = in_mode();
  } else {
    Call c(ctx, in_mode);
    REQUIRE(c.returned_within(wait_ms));
    o.op = c.result();
  }
  CHECK(raw<Entry::cuStreamIsCapturing>(t, s, &o.status) == CUDA_SUCCESS);
  o.next_launch = launch_noop(noop, s);
  CUgraph captured = nullptr;
  o.end = raw<Entry::cuStreamEndCapture>(t, s, &captured);
  if (captured != nullptr) CHECK(raw<Entry::cuGraphDestroy>(t, captured) == CUDA_SUCCESS);

  // Cleanup, whatever the operation did. A refused cuMemFree / cuGraphExecDestroy did nothing on
  // the simulator; what the driver does then is not known, so only the simulator checks it.
  if (fresh != 0) CHECK(raw<Entry::cuMemFree>(t, fresh) == CUDA_SUCCESS);
  if (host != nullptr) CHECK(raw<Entry::cuMemFreeHost>(t, host) == CUDA_SUCCESS);
  if (inst != nullptr) CHECK(raw<Entry::cuGraphExecDestroy>(t, inst) == CUDA_SUCCESS);
  exec_other_destroyed = op == Op::exec_destroy_other && o.op == CUDA_SUCCESS;
  if (!exec_other_destroyed) {
    CUresult r = raw<Entry::cuGraphExecDestroy>(t, exec_other);
    if (on_simulator()) CHECK(r == CUDA_SUCCESS);
  }
  if (!(op == Op::mem_free && o.op == CUDA_SUCCESS)) {
    CUresult r = raw<Entry::cuMemFree>(t, buf);
    if (on_simulator()) CHECK(r == CUDA_SUCCESS);
  }
  CHECK(raw<Entry::cuGraphDestroy>(t, graph_other) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuStreamSynchronize>(t, s) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuStreamSynchronize>(t, other) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuStreamDestroy>(t, s) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuStreamDestroy>(t, other) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuEventDestroy>(t, ev_other) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuEventDestroy>(t, ev_cap) == CUDA_SUCCESS);
  return o;
}

void check_invalidated(const Outcome& o, CUresult op_result) {
  CHECK(o.op == op_result);
  CHECK(o.status == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  CHECK(o.next_launch == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CHECK(o.end == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
}

void check_survived(const Outcome& o) {
  CHECK(o.op == CUDA_SUCCESS);
  CHECK(o.status == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CHECK(o.next_launch == CUDA_SUCCESS);
  CHECK(o.end == CUDA_SUCCESS);
}

const char* name(CUstreamCaptureMode m) {
  switch (m) {
    case CU_STREAM_CAPTURE_MODE_GLOBAL: return "GLOBAL";
    case CU_STREAM_CAPTURE_MODE_THREAD_LOCAL: return "THREAD_LOCAL";
    case CU_STREAM_CAPTURE_MODE_RELAXED: return "RELAXED";
    default: return "?";
  }
}

struct Combo {
  CUstreamCaptureMode capture;
  Who who;
  CUstreamCaptureMode thread;
};

// Every (capture mode, calling thread, thread mode) combination the probe ran.
constexpr Combo all_combos[] = {
    {CU_STREAM_CAPTURE_MODE_GLOBAL, Who::same, CU_STREAM_CAPTURE_MODE_GLOBAL},
    {CU_STREAM_CAPTURE_MODE_GLOBAL, Who::other, CU_STREAM_CAPTURE_MODE_GLOBAL},
    {CU_STREAM_CAPTURE_MODE_GLOBAL, Who::same, CU_STREAM_CAPTURE_MODE_RELAXED},
    {CU_STREAM_CAPTURE_MODE_GLOBAL, Who::other, CU_STREAM_CAPTURE_MODE_RELAXED},
    {CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, Who::same, CU_STREAM_CAPTURE_MODE_GLOBAL},
    {CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, Who::other, CU_STREAM_CAPTURE_MODE_GLOBAL},
    {CU_STREAM_CAPTURE_MODE_RELAXED, Who::same, CU_STREAM_CAPTURE_MODE_GLOBAL},
    {CU_STREAM_CAPTURE_MODE_RELAXED, Who::other, CU_STREAM_CAPTURE_MODE_GLOBAL},
};

}  // namespace

TEST_SUITE_BEGIN("driver conformance");

TEST_CASE_FIXTURE(DriverFixture,
                  "a capture in GLOBAL mode on one thread is invalidated by cuMemFree on another GLOBAL thread, and "
                  "survives it when that thread switched itself to RELAXED with cuThreadExchangeStreamCaptureMode") {
  {
    Outcome o = run_case(ctx, noop, CU_STREAM_CAPTURE_MODE_GLOBAL, Who::other, CU_STREAM_CAPTURE_MODE_GLOBAL,
                         Op::mem_free);
    CHECK(o.op == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK(o.status == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    CHECK(o.end == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  }
  {
    Outcome o = run_case(ctx, noop, CU_STREAM_CAPTURE_MODE_GLOBAL, Who::other, CU_STREAM_CAPTURE_MODE_RELAXED,
                         Op::mem_free);
    CHECK(o.op == CUDA_SUCCESS);
    CHECK(o.status == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CHECK(o.end == CUDA_SUCCESS);
  }
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c4 global/same global/other: during a GLOBAL capture, synchronous allocation and free, "
                  "cuMemAllocHost, instantiate, exec destroy and queries or syncs of other streams and events from "
                  "any GLOBAL-mode thread return STREAM_CAPTURE_UNSUPPORTED and invalidate the capture") {
  for (Who who : {Who::same, Who::other}) {
    for (Op op : unsafe_ops) {
      INFO(std::string(name(op)));
      INFO(std::string(who == Who::same ? "capturing thread" : "another thread"));
      check_invalidated(run_case(ctx, noop, CU_STREAM_CAPTURE_MODE_GLOBAL, who, CU_STREAM_CAPTURE_MODE_GLOBAL, op),
                        CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    }
  }
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c4 thread_local: a THREAD_LOCAL capture is invalidated by those calls from the capturing thread "
                  "only; another GLOBAL-mode thread makes them without harm") {
  for (Op op : unsafe_ops) {
    INFO(std::string(name(op)));
    check_invalidated(
        run_case(ctx, noop, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, Who::same, CU_STREAM_CAPTURE_MODE_GLOBAL, op),
        CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    check_survived(
        run_case(ctx, noop, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, Who::other, CU_STREAM_CAPTURE_MODE_GLOBAL, op));
  }
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c4 same_relaxed other_relaxed relaxed: a thread in RELAXED mode, or any thread during a RELAXED "
                  "capture, allocates, frees, instantiates, destroys execs and queries or syncs other streams and "
                  "events without harm") {
  const Combo combos[] = {
      {CU_STREAM_CAPTURE_MODE_GLOBAL, Who::same, CU_STREAM_CAPTURE_MODE_RELAXED},
      {CU_STREAM_CAPTURE_MODE_GLOBAL, Who::other, CU_STREAM_CAPTURE_MODE_RELAXED},
      {CU_STREAM_CAPTURE_MODE_RELAXED, Who::same, CU_STREAM_CAPTURE_MODE_GLOBAL},
      {CU_STREAM_CAPTURE_MODE_RELAXED, Who::other, CU_STREAM_CAPTURE_MODE_GLOBAL},
  };
  for (const Combo& c : combos) {
    for (Op op : unsafe_ops) {
      INFO(std::string(name(op)));
      INFO(std::string(name(c.capture)));
      INFO(std::string(name(c.thread)));
      INFO(std::string(c.who == Who::same ? "capturing thread" : "another thread"));
      check_survived(run_case(ctx, noop, c.capture, c.who, c.thread, op));
    }
  }
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c4 every mode: cuCtxSynchronize and syncing or querying the capturing stream return "
                  "STREAM_CAPTURE_UNSUPPORTED, querying or syncing an event recorded in the capture returns "
                  "CUDA_ERROR_CAPTURED_EVENT, and each invalidates the capture") {
  for (const Combo& c : all_combos) {
    for (Op op : always_ops) {
      INFO(std::string(name(op)));
      INFO(std::string(name(c.capture)));
      INFO(std::string(name(c.thread)));
      INFO(std::string(c.who == Who::same ? "capturing thread" : "another thread"));
      check_invalidated(run_case(ctx, noop, c.capture, c.who, c.thread, op), expected_failure(op));
    }
  }
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c4 every mode: a kernel launch on another stream and a user object create and release never "
                  "invalidate a capture") {
  for (const Combo& c : all_combos) {
    for (Op op : harmless_ops) {
      INFO(std::string(name(op)));
      INFO(std::string(name(c.capture)));
      INFO(std::string(name(c.thread)));
      INFO(std::string(c.who == Who::same ? "capturing thread" : "another thread"));
      g_uo_runs = 0;
      check_survived(run_case(ctx, noop, c.capture, c.who, c.thread, op));
      if (op == Op::uo_create_release) CHECK(g_uo_runs == 1);  // the destructor ran inside the release
    }
  }
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c10t: the capture mode is per thread, GLOBAL by default; cuThreadExchangeStreamCaptureMode "
                  "returns the previous mode, and a new thread starts in GLOBAL while another is RELAXED") {
  CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
  REQUIRE(exchange_mode(m) == CUDA_SUCCESS);
  CHECK(m == CU_STREAM_CAPTURE_MODE_GLOBAL);
  CUstreamCaptureMode seen = CU_STREAM_CAPTURE_MODE_RELAXED;
  {
    Call c(ctx, [&] {
      CUstreamCaptureMode x = CU_STREAM_CAPTURE_MODE_GLOBAL;
      CUresult r = exchange_mode(x);
      seen = x;
      return r;
    });
    REQUIRE(c.returned_within(wait_ms));
    CHECK(c.result() == CUDA_SUCCESS);
  }
  CHECK(seen == CU_STREAM_CAPTURE_MODE_GLOBAL);
  m = CU_STREAM_CAPTURE_MODE_GLOBAL;
  REQUIRE(exchange_mode(m) == CUDA_SUCCESS);
  CHECK(m == CU_STREAM_CAPTURE_MODE_RELAXED);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c10h c10i c10j: cuStreamEndCapture from another thread is STREAM_CAPTURE_WRONG_THREAD and ends "
                  "the capture in GLOBAL and THREAD_LOCAL mode, and returns the graph in RELAXED mode") {
  for (CUstreamCaptureMode mode :
       {CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, CU_STREAM_CAPTURE_MODE_RELAXED}) {
    INFO(std::string(name(mode)));
    CUstream s = new_stream();
    REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, mode) == CUDA_SUCCESS);
    REQUIRE(launch_noop(noop, s) == CUDA_SUCCESS);
    CUgraph g = nullptr;
    {
      Call c(ctx, [&] { return raw<Entry::cuStreamEndCapture>(table(), s, &g); });
      REQUIRE(c.returned_within(wait_ms));
      if (mode == CU_STREAM_CAPTURE_MODE_RELAXED) {
        CHECK(c.result() == CUDA_SUCCESS);
      } else {
        CHECK(c.result() == CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
      }
    }
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    CHECK(raw<Entry::cuStreamIsCapturing>(t, s, &st) == CUDA_SUCCESS);
    CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE);
    if (mode == CU_STREAM_CAPTURE_MODE_RELAXED) {
      REQUIRE(g != nullptr);
      CHECK(node_count(g) == 1);
      destroy_graph(g);
    } else {
      CHECK(g == nullptr);
    }
    destroy_stream(s);
  }
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c10w: destroying a stream that captures in GLOBAL mode succeeds and ends the capture, so a "
                  "synchronous cuMemAlloc afterwards succeeds") {
  CUstream s = new_stream();
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  REQUIRE(launch_noop(noop, s) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuStreamDestroy>(t, s) == CUDA_SUCCESS);
  CUdeviceptr d = 0;
  CHECK(raw<Entry::cuMemAlloc>(t, &d, std::size_t{1} << 20) == CUDA_SUCCESS);
  if (d != 0) CHECK(raw<Entry::cuMemFree>(t, d) == CUDA_SUCCESS);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c10f: beginning a capture twice is ILLEGAL_STATE; ending it on a stream that joined it is "
                  "STREAM_CAPTURE_UNMATCHED and invalidates the origin's capture") {
  CUstream s = new_stream();
  CUstream s2 = new_stream();
  CUevent ev = nullptr;
  REQUIRE(raw<Entry::cuEventCreate>(t, &ev, static_cast<unsigned>(CU_EVENT_DISABLE_TIMING)) == CUDA_SUCCESS);
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_ERROR_ILLEGAL_STATE);
  REQUIRE(launch_noop(noop, s) == CUDA_SUCCESS);
  REQUIRE(raw<Entry::cuEventRecord>(t, ev, s) == CUDA_SUCCESS);
  REQUIRE(raw<Entry::cuStreamWaitEvent>(t, s2, ev, 0u) == CUDA_SUCCESS);  // s2 joins the capture
  CHECK(raw<Entry::cuStreamBeginCapture>(t, s2, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_ERROR_ILLEGAL_STATE);
  CUgraph g = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s2, &g) == CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  CHECK(raw<Entry::cuStreamIsCapturing>(t, s, &st) == CUDA_SUCCESS);
  CHECK(st == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CHECK(g == nullptr);
  CHECK(raw<Entry::cuEventDestroy>(t, ev) == CUDA_SUCCESS);
  destroy_stream(s);
  destroy_stream(s2);
  finish();
}

TEST_SUITE_END();
