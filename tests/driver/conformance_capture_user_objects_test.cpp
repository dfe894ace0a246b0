// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Driver conformance, capture_facts c2a-c2k: user objects created, retained and released on the
// graph of an ongoing capture (from the capturing thread, another thread and host callbacks), what
// cuStreamEndCapture returns, and when the references of a failed capture are released.
#include <doctest/doctest.h>

#include "capture_support.hpp"
#include "conformance_threads.hpp"
#include "sim/sim.hpp"
#include "support/driver_fixture.hpp"
#include "tether.hpp"

using namespace tether::detail;
using namespace tether_test;

namespace {

constexpr unsigned move_refs = static_cast<unsigned>(CU_GRAPH_USER_OBJECT_MOVE);

// What a host callback did while a capture was going on (capture_facts c2i, c2j).
struct HostTry {
  CUstream cap = nullptr;           // the stream the callback launches into
  CUgraph g = nullptr;              // the graph it retains a reference on
  CUuserObject pre = nullptr;       // the object it retains
  Obj* fresh_obj = nullptr;         // observes the object it creates
  CUuserObject fresh = nullptr;
  CUfunction kernel = nullptr;
  std::atomic<bool> go{false};
  std::atomic<bool> done{false};
  std::atomic<std::thread::id> tid{};
  CUresult create = CUDA_ERROR_UNKNOWN, info = CUDA_ERROR_UNKNOWN, retain = CUDA_ERROR_UNKNOWN,
           launch = CUDA_ERROR_UNKNOWN;
};

void CUDA_CB host_try(void* p) {
  auto* h = static_cast<HostTry*>(p);
  h->tid.store(std::this_thread::get_id());
  const std::int64_t end = now_ns() + 3'000'000'000;
  while (!h->go.load() && now_ns() < end) sleep_ms(1);
  const tether::detail::DriverTable& t = table();
  h->create = raw<Entry::cuUserObjectCreate>(t, &h->fresh, static_cast<void*>(h->fresh_obj), &obj_destroy, 1u,
                                            static_cast<unsigned>(CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  h->info = raw<Entry::cuStreamGetCaptureInfo>(t, h->cap, &st, static_cast<cuuint64_t*>(nullptr),
                                               static_cast<CUgraph*>(nullptr),
                                               static_cast<const CUgraphNode**>(nullptr),
                                               static_cast<const CUgraphEdgeData**>(nullptr),
                                               static_cast<std::size_t*>(nullptr));
  h->retain = raw<Entry::cuGraphRetainUserObject>(t, h->g, h->pre, 1u, 0u);
  h->launch = launch_kernel(h->kernel, h->cap);
  h->done.store(true);
}

bool wait_flag(const std::atomic<bool>& f, int ms = wait_ms) {
  const std::int64_t end = now_ns() + static_cast<std::int64_t>(ms) * 1000000;
  while (!f.load()) {
    if (now_ns() > end) return false;
    sleep_ms(1);
  }
  return true;
}

}  // namespace

TEST_SUITE_BEGIN("driver conformance");

TEST_CASE_FIXTURE(DriverFixture,
                  "c2a c2b c2c c2e: during a GLOBAL capture a user object is created and retained on the capture "
                  "graph (moved, and counted then released once) without harm to the capture; cuStreamEndCapture "
                  "returns that very graph, which holds them, and cuGraphDestroy of the never-instantiated graph runs "
                  "the destructors synchronously on the calling thread") {
  Obj a, b;
  CUstream s = new_stream();
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
  Cap c = capinfo(s);
  CUuserObject ua = make_uo(a);
  CHECK(raw<Entry::cuGraphRetainUserObject>(t, c.g, ua, 1u, move_refs) == CUDA_SUCCESS);
  CUuserObject ub = make_uo(b);
  CHECK(raw<Entry::cuGraphRetainUserObject>(t, c.g, ub, 2u, 0u) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuGraphReleaseUserObject>(t, c.g, ub, 1u) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuUserObjectRelease>(t, ub, 1u) == CUDA_SUCCESS);  // the caller's own reference
  CHECK(capture_status(s) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CHECK(launch_kernel(noop, s) == CUDA_SUCCESS);
  CUgraph g = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_SUCCESS);
  CHECK(g == c.g);  // c2b
  CHECK(still_alive(a));  // c2c
  CHECK(b.count.load() == 0);
  destroy_graph(g);  // c2e
  CHECK(a.count.load() == 1);  // c2f: released inside the call, on this thread
  CHECK(a.tid.load() == main_tid);
  CHECK(ran_once(b));  // c2k: released (when was not observed)
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c2d: references retained during capture are held by the executable after cuGraphDestroy and "
                  "across a launch, and released exactly once after cuGraphExecDestroy, later and on a driver "
                  "thread since the executable was launched") {
  Obj a;
  CUstream s = new_stream();
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
  Cap c = capinfo(s);
  attach(c.g, a);
  CUgraph g = nullptr;
  REQUIRE(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_SUCCESS);
  CUgraphExec e = instantiate(g);
  destroy_graph(g);
  CHECK(still_alive(a));
  launch(e);
  sync();
  CHECK(still_alive(a));
  destroy_exec(e);
  CHECK(ran_once(a));
  CHECK(a.tid.load() != main_tid);
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c2h c10k: another thread sees a GLOBAL capture through cuStreamGetCaptureInfo (same graph and "
                  "set), creates a user object and retains it on the capture graph, and launches a kernel into the "
                  "capture, all without invalidating it; the returned graph holds the object") {
  Obj a;
  CUstream s = new_stream();
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
  Cap c = capinfo(s);
  Cap seen;
  CUresult create = CUDA_ERROR_UNKNOWN, retain = CUDA_ERROR_UNKNOWN;
  {
    Call call(ctx, [&] {
      seen = capinfo(s);
      CUuserObject u = nullptr;
      create = raw<Entry::cuUserObjectCreate>(table(), &u, static_cast<void*>(&a), &obj_destroy, 1u,
                                              static_cast<unsigned>(CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
      if (create == CUDA_SUCCESS) retain = raw<Entry::cuGraphRetainUserObject>(table(), seen.g, u, 1u, move_refs);
      return launch_kernel(other, s);
    });
    REQUIRE(call.returned_within(wait_ms));
    CHECK(call.result() == CUDA_SUCCESS);  // c10k
  }
  CHECK(seen.st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CHECK(seen.g == c.g);
  CHECK(same_set(seen.deps, c.deps));
  CHECK(create == CUDA_SUCCESS);
  CHECK(retain == CUDA_SUCCESS);
  CHECK(capture_status(s) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  Cap after = capinfo(s);
  REQUIRE(after.deps.size() == 1);
  CHECK(node_type(after.deps[0]) == CU_GRAPH_NODE_TYPE_KERNEL);
  CHECK(same_set(deps_of(after.deps[0]), c.deps));
  CUgraph g = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_SUCCESS);
  CHECK(g == c.g);
  CHECK(node_count(g) == 2);
  CHECK(still_alive(a));
  destroy_graph(g);
  CHECK(a.count.load() == 1);
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c2f c2k: a capture invalidated by cuStreamSynchronize keeps the objects retained on its graph "
                  "until cuStreamEndCapture, reports no graph, still takes a retain on the old graph handle, and "
                  "the end (STREAM_CAPTURE_INVALIDATED, no graph) releases them, synchronously on the calling thread "
                  "for the one retained before the invalidation") {
  Obj a, b;
  CUstream s = new_stream();
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
  Cap c = capinfo(s);
  attach(c.g, a);
  CHECK(raw<Entry::cuStreamSynchronize>(t, s) == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CHECK(still_alive(a));
  Cap ci = capinfo(s);
  CHECK(ci.r == CUDA_SUCCESS);
  CHECK(ci.st == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  CHECK(ci.g == nullptr);
  CUuserObject ub = make_uo(b);  // c2k
  CHECK(raw<Entry::cuGraphRetainUserObject>(t, c.g, ub, 1u, move_refs) == CUDA_SUCCESS);
  CHECK(node_count(c.g) == 1);
  CUgraph g = reinterpret_cast<CUgraph>(std::uintptr_t{0x10});
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CHECK(g == nullptr);
  CHECK(a.count.load() == 1);  // c2f: released inside the call, on this thread
  CHECK(a.tid.load() == main_tid);
  CHECK(ran_once(b));  // c2k: released (when was not observed)
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c2g: a stream forked into the capture and never joined back makes cuStreamEndCapture fail with "
                  "STREAM_CAPTURE_UNJOINED and no graph; the objects retained on the graph are released "
                  "synchronously there, and the forked stream is left out of any capture") {
  Obj a;
  CUstream s = new_stream();
  CUstream s2 = new_stream();
  CUevent ev = make_event();
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
  REQUIRE(raw<Entry::cuEventRecord>(t, ev, s) == CUDA_SUCCESS);
  REQUIRE(raw<Entry::cuStreamWaitEvent>(t, s2, ev, 0u) == CUDA_SUCCESS);
  REQUIRE(launch_kernel(noop, s2) == CUDA_SUCCESS);  // never joined back
  Cap c = capinfo(s);
  attach(c.g, a);
  CUgraph g = reinterpret_cast<CUgraph>(std::uintptr_t{0x10});
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
  CHECK(g == nullptr);
  CHECK(a.count.load() == 1);
  CHECK(a.tid.load() == main_tid);
  CHECK(capture_status(s) == CU_STREAM_CAPTURE_STATUS_NONE);
  CHECK(capture_status(s2) == CU_STREAM_CAPTURE_STATUS_NONE);
  CHECK(launch_kernel(noop, s2) == CUDA_SUCCESS);  // runs: not captured
  CHECK(capture_status(s2) == CU_STREAM_CAPTURE_STATUS_NONE);
  CUgraph g2 = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s2, &g2) == CUDA_ERROR_ILLEGAL_STATE);
  CHECK(g2 == nullptr);
  sync_on(s2);
  destroy_event(ev);
  destroy_stream(s);
  destroy_stream(s2);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c2i: inside a host callback on another stream while the main thread captures, cuUserObjectCreate, "
                  "cuStreamGetCaptureInfo and cuGraphRetainUserObject on the capture graph succeed, launching into "
                  "the capture is NOT_PERMITTED, and the capture goes on with only its own node") {
  Obj pre, fresh;
  HostTry h;
  h.fresh_obj = &fresh;
  h.pre = make_uo(pre);
  h.kernel = noop;
  CUstream srun = new_stream();
  CUstream s = new_stream();
  h.cap = s;
  REQUIRE(raw<Entry::cuLaunchHostFunc>(t, srun, &host_try, static_cast<void*>(&h)) == CUDA_SUCCESS);
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
  Cap c = capinfo(s);
  h.g = c.g;
  {
    tether::sim::ExpectViolations expected;  // the callback's calls (call_in_callback)
    h.go.store(true);
    REQUIRE(wait_flag(h.done));
  }
  CHECK(h.create == CUDA_SUCCESS);
  CHECK(h.info == CUDA_SUCCESS);
  CHECK(h.retain == CUDA_SUCCESS);
  CHECK(h.launch == CUDA_ERROR_NOT_PERMITTED);
  CHECK(h.tid.load() != main_tid);
  CHECK(capture_status(s) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CUgraph g = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_SUCCESS);
  CHECK(node_count(g) == 1);
  sync_on(srun);
  // The simulator records every call made inside a host function (the documentation forbids them).
  expect_violations(tether::sim::ViolationKind::call_in_callback);
  CHECK(pre.count.load() == 0);  // the graph holds the reference the callback retained
  destroy_graph(g);
  if (h.create == CUDA_SUCCESS) CHECK(raw<Entry::cuUserObjectRelease>(t, h.fresh, 1u) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuUserObjectRelease>(t, h.pre, 1u) == CUDA_SUCCESS);
  CHECK(pre.count.load() == 1);
  CHECK(fresh.count.load() == 1);
  destroy_stream(s);
  destroy_stream(srun);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c2j: inside a captured host callback, when its executable runs, cuUserObjectCreate, "
                  "cuStreamGetCaptureInfo and cuGraphRetainUserObject on the source graph succeed and a kernel "
                  "launch is NOT_PERMITTED") {
  Obj pre, fresh;
  HostTry h;
  h.fresh_obj = &fresh;
  h.pre = make_uo(pre);
  h.kernel = noop;
  h.go.store(true);
  CUstream s = new_stream();
  CUstream other_stream = new_stream();
  h.cap = other_stream;
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  REQUIRE(raw<Entry::cuLaunchHostFunc>(t, s, &host_try, static_cast<void*>(&h)) == CUDA_SUCCESS);
  CUgraph g = nullptr;
  REQUIRE(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_SUCCESS);
  h.g = g;
  CUgraphExec e = instantiate(g);
  {
    tether::sim::ExpectViolations expected;  // the callback's calls (call_in_callback)
    launch_on(e, s);
    sync_on(s);
    REQUIRE(wait_flag(h.done));
  }
  CHECK(h.create == CUDA_SUCCESS);
  CHECK(h.info == CUDA_SUCCESS);
  CHECK(h.retain == CUDA_SUCCESS);
  CHECK(h.launch == CUDA_ERROR_NOT_PERMITTED);
  CHECK(h.tid.load() != main_tid);
  expect_violations(tether::sim::ViolationKind::call_in_callback);
  destroy_exec(e);
  destroy_graph(g);  // releases the reference the callback retained on it
  if (h.create == CUDA_SUCCESS) CHECK(raw<Entry::cuUserObjectRelease>(t, h.fresh, 1u) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuUserObjectRelease>(t, h.pre, 1u) == CUDA_SUCCESS);
  CHECK(wait_count(pre));
  CHECK(wait_count(fresh));
  destroy_stream(s);
  destroy_stream(other_stream);
  finish();
}

TEST_SUITE_END();
