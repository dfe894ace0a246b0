// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Driver conformance, facts 4a-4g, 5a-5e2, R4 and R5: references held by executable graphs,
// destructors deferred to a driver thread once an exec was launched or uploaded, and how launches
// of execs overlap. Durations are the probe's scaled down (100 ms kernels instead of 200 ms).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "sim/sim.hpp"
#include "support/driver_fixture.hpp"
#include "tether.hpp"

using namespace tether::detail;
using namespace tether_test;

namespace {

constexpr std::uint64_t spin_100ms = 100 * ms_ns;

// An exec of a graph holding one `kernel(arg)` node and `o`'s only reference; the graph is gone.
CUgraphExec exec_holding(Obj& o, CUfunction kernel, std::uint64_t arg) {
  CUgraph g = new_graph();
  add_kernel(g, kernel, arg);
  attach(g, o);
  CUgraphExec e = instantiate(g);
  destroy_graph(g);
  return e;
}

}  // namespace

TEST_SUITE_BEGIN("driver conformance");

TEST_CASE_FIXTURE(
    DriverFixture,
    "4a 4a2: cuGraphInstantiate copies the references into the exec, and cuGraphExecDestroy of a "
    "launched exec runs the destructor later on a driver thread") {
  Obj o;
  CUgraph g = new_graph();
  add_kernel(g, noop, 0);
  attach(g, o);
  CUgraphExec e = instantiate(g);
  destroy_graph(g);
  CHECK(still_alive(o));  // 4a: the exec holds it
  launch(e);
  sync();
  CHECK(still_alive(o));  // 4a: launches do not release it
  CHECK(raw<Entry::cuGraphExecDestroy>(t, e) == CUDA_SUCCESS);
  CHECK(o.count.load() == 0);  // 4a2: not before cuGraphExecDestroy returned
  REQUIRE(ran_once(o));
  CHECK(o.tid.load() != main_tid);  // 4a2: on a driver thread
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "4e: cuGraphExecDestroy of a never-launched exec runs the destructor synchronously on the calling "
    "thread") {
  Obj o;
  CUgraphExec e = exec_holding(o, noop, 0);
  CHECK(raw<Entry::cuGraphExecDestroy>(t, e) == CUDA_SUCCESS);
  CHECK(o.count.load() == 1);
  CHECK(ran_once(o));
  CHECK(o.tid.load() == main_tid);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "4f: cuGraphExecDestroy of an exec that was uploaded but never launched defers the destructor to a "
    "driver thread") {
  Obj o;
  CUgraphExec e = exec_holding(o, noop, 0);
  upload(e);
  CHECK(raw<Entry::cuGraphExecDestroy>(t, e) == CUDA_SUCCESS);
  CHECK(o.count.load() == 0);
  REQUIRE(ran_once(o));
  CHECK(o.tid.load() != main_tid);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "4g: after a launched exec was synchronized, cuGraphExecDestroy frees its objects soon (under 50 "
    "ms) but never before it returns, and on a driver thread") {
  constexpr int trials = 10;
  int before_return = 0;
  int on_caller = 0;
  std::vector<double> latency_ms;
  for (int i = 0; i < trials; ++i) {
    Obj o;
    CUgraphExec e = exec_holding(o, noop, 0);
    launch(e);
    sync();
    sleep_ms(2);
    const std::int64_t t0 = now_ns();
    CHECK(raw<Entry::cuGraphExecDestroy>(t, e) == CUDA_SUCCESS);
    before_return += o.count.load();
    REQUIRE(wait_count(o));
    on_caller += o.tid.load() == main_tid ? 1 : 0;
    latency_ms.push_back(ms_between(t0, o.t_start.load()));
  }
  std::sort(latency_ms.begin(), latency_ms.end());
  INFO("deferred destructor latency ms min/median/max: "
       << latency_ms.front() << "/" << latency_ms[trials / 2] << "/" << latency_ms.back());
  CHECK(before_return == 0);
  CHECK(on_caller == 0);
  CHECK(latency_ms.back() < 50.0);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "4b: references retained on the graph after instantiation are not held by the exec") {
  Obj o;
  CUgraph g = new_graph();
  add_kernel(g, noop, 0);
  CUgraphExec e = instantiate(g);
  attach(g, o);
  destroy_graph(g);
  CHECK(wait_count(o, 1, 1000));
  destroy_exec(e);
  CHECK(o.count.load() == 1);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "4c: releasing the graph's reference after instantiation leaves the exec's reference in place") {
  Obj o;
  CUgraph g = new_graph();
  add_kernel(g, noop, 0);
  CUuserObject u = make_uo(o, 1);
  CHECK(raw<Entry::cuGraphRetainUserObject>(t, g, u, 1u, 0u) == CUDA_SUCCESS);
  CUgraphExec e = instantiate(g);
  CHECK(raw<Entry::cuGraphReleaseUserObject>(t, g, u, 1u) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuUserObjectRelease>(t, u, 1u) == CUDA_SUCCESS);
  CHECK(still_alive(o));
  destroy_exec(e);
  CHECK(ran_once(o));
  destroy_graph(g);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture, "4d: each of two execs of one graph holds its own reference") {
  Obj o;
  CUgraph g = new_graph();
  add_kernel(g, noop, 0);
  attach(g, o);
  CUgraphExec e1 = instantiate(g);
  CUgraphExec e2 = instantiate(g);
  destroy_graph(g);
  destroy_exec(e1);
  CHECK(still_alive(o));
  destroy_exec(e2);
  CHECK(ran_once(o));
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "5a 5a2: an exec destroyed while its 100 ms launch is pending returns at once, and the destructor "
    "runs after the launch on a driver thread that is neither the destroying thread, nor a thread "
    "blocked in cuStreamSynchronize, nor the host-callback thread") {
  // The thread that runs host-node callbacks on this stream.
  HostRec h;
  CUgraph hg = new_graph();
  add_host(hg, h);
  CUgraphExec he = instantiate(hg);
  launch(he);
  sync();
  destroy_exec(he);
  destroy_graph(hg);
  REQUIRE(h.calls.load() == 1);

  Obj o;
  CUgraphExec e = exec_holding(o, spin, spin_100ms);
  upload(e);
  const std::int64_t t0 = now_ns();
  launch(e);
  const std::int64_t t1 = now_ns();
  CHECK(raw<Entry::cuGraphExecDestroy>(t, e) == CUDA_SUCCESS);
  const std::int64_t t2 = now_ns();
  const int at_return = o.count.load();
  std::atomic<std::thread::id> sync_tid{};
  std::atomic<std::int64_t> t_sync{0};
  std::atomic<int> sync_result{-1};
  std::thread th([&] {
    sync_tid.store(std::this_thread::get_id());
    CUresult r = raw<Entry::cuCtxSetCurrent>(t, ctx);
    if (r == CUDA_SUCCESS) r = raw<Entry::cuStreamSynchronize>(t, stream);
    t_sync.store(now_ns());
    sync_result.store(static_cast<int>(r));
  });
  const bool ran = wait_count(o, 1, 5000);
  th.join();
  CHECK(static_cast<CUresult>(sync_result.load()) == CUDA_SUCCESS);
  REQUIRE(ran);
  INFO("launch call ms " << ms_between(t0, t1) << ", cuGraphExecDestroy call ms " << ms_between(t1, t2)
                         << ", destructor start ms " << ms_between(t0, o.t_start.load())
                         << ", cuStreamSynchronize return ms " << ms_between(t0, t_sync.load()));
  CHECK(at_return == 0);                            // 5a
  CHECK(ms_between(t1, t2) < 50.0);                 // 5a: cuGraphExecDestroy did not wait for the launch
  CHECK(ms_between(t0, o.t_start.load()) >= 75.0);  // 5a: not before the launch completed
  CHECK(o.tid.load() != main_tid);                  // 5a2
  CHECK(o.tid.load() != sync_tid.load());           // 5a2
  CHECK(o.tid.load() != h.tid.load());              // 5a2
  CHECK(o.count.load() == 1);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "5b: the deferred destructor runs after the launch completes with no further driver call from the "
    "application") {
  Obj o;
  CUgraphExec e = exec_holding(o, spin, spin_100ms);
  upload(e);
  const std::int64_t t0 = now_ns();
  launch(e);
  CHECK(raw<Entry::cuGraphExecDestroy>(t, e) == CUDA_SUCCESS);
  const bool ran = wait_count(o, 1, 5000);  // no driver call while waiting
  REQUIRE(ran);
  CHECK(ms_between(t0, o.t_start.load()) >= 75.0);
  CHECK(o.tid.load() != main_tid);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "5c: an exec destroyed with three queued 60 ms launches keeps its objects until the last launch "
    "completes") {
  Obj o;
  CUgraphExec e = exec_holding(o, spin, 60 * ms_ns);
  upload(e);
  const std::int64_t t0 = now_ns();
  for (int i = 0; i < 3; ++i) launch(e);
  CHECK(raw<Entry::cuGraphExecDestroy>(t, e) == CUDA_SUCCESS);
  const bool ran = wait_count(o, 1, 5000);
  REQUIRE(ran);
  CHECK(ms_between(t0, o.t_start.load()) >= 150.0);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "5d: destroying the graph while its exec is in flight leaves the exec's reference; after the "
    "launch was synchronized cuGraphExecDestroy frees the object within 50 ms on a driver thread") {
  Obj o;
  CUgraph g = new_graph();
  add_kernel(g, spin, spin_100ms);
  attach(g, o);
  CUgraphExec e = instantiate(g);
  launch(e);
  destroy_graph(g);
  sync();
  CHECK(still_alive(o));
  const std::int64_t t2 = now_ns();
  CHECK(raw<Entry::cuGraphExecDestroy>(t, e) == CUDA_SUCCESS);
  CHECK(o.count.load() == 0);
  REQUIRE(ran_once(o));
  CHECK(o.tid.load() != main_tid);
  CHECK(ms_between(t2, o.t_start.load()) < 50.0);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "5e 5e2: deferred destructors run one after another on one driver thread, and neither "
                  "cuStreamSynchronize nor cuCtxSynchronize waits for them") {
  // Two 60 ms launches whose execs are destroyed in flight; each destructor sleeps 120 ms, so the
  // first one (60..180 ms) is still running when both launches are done (120 ms).
  constexpr int dtor_ms = 120;
  Obj a;
  Obj b;
  a.sleep_ms = dtor_ms;
  b.sleep_ms = dtor_ms;
  CUgraphExec ea = exec_holding(a, spin, 60 * ms_ns);
  CUgraphExec eb = exec_holding(b, spin, 60 * ms_ns);
  CHECK(raw<Entry::cuGraphUpload>(t, ea, stream) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuGraphUpload>(t, eb, stream) == CUDA_SUCCESS);
  sync();
  const std::int64_t t0 = now_ns();
  launch(ea);
  launch(eb);
  destroy_exec(ea);
  destroy_exec(eb);
  sync();
  const std::int64_t t1 = now_ns();
  const int done_at_stream_sync = a.count.load() + b.count.load();
  CHECK(raw<Entry::cuCtxSynchronize>(t) == CUDA_SUCCESS);
  const std::int64_t t2 = now_ns();
  const int done_at_ctx_sync = a.count.load() + b.count.load();
  REQUIRE(wait_count(a, 1, 5000));
  REQUIRE(wait_count(b, 1, 5000));
  INFO("stream sync ms " << ms_between(t0, t1) << ", ctx sync ms " << ms_between(t0, t2) << ", A ["
                         << ms_between(t0, a.t_start.load()) << ", " << ms_between(t0, a.t_end.load())
                         << "], B [" << ms_between(t0, b.t_start.load()) << ", "
                         << ms_between(t0, b.t_end.load()) << "]");
  CHECK(done_at_stream_sync == 0);  // 5e2
  CHECK(done_at_ctx_sync == 0);     // 5e
  const bool overlap = a.t_start.load() < b.t_end.load() && b.t_start.load() < a.t_end.load();
  CHECK_FALSE(overlap);
  CHECK(a.tid.load() == b.tid.load());
  CHECK(a.tid.load() != main_tid);
  CHECK(ms_between(t0, a.t_start.load()) >= 45.0);  // after A's launch completed
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "R4: one exec launched on two streams runs its launches one after the other") {
  CUstream s2 = new_stream();
  CUgraph g = new_graph();
  add_kernel(g, spin, spin_100ms);
  CUgraphExec e = instantiate(g);
  upload(e);
  const std::int64_t t0 = now_ns();
  launch_on(e, stream);
  launch_on(e, s2);
  sync_on(s2);
  const std::int64_t t_b = now_ns();
  sync_on(stream);
  INFO("second stream done at " << ms_between(t0, t_b) << " ms");
  CHECK(ms_between(t0, t_b) >= 175.0);
  destroy_exec(e);
  destroy_graph(g);
  destroy_stream(s2);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture, "R5: two execs of one graph launched on two streams run concurrently") {
  CUstream s2 = new_stream();
  CUgraph g = new_graph();
  add_kernel(g, spin, spin_100ms);
  CUgraphExec e1 = instantiate(g);
  CUgraphExec e2 = instantiate(g);
  upload(e1);
  CHECK(raw<Entry::cuGraphUpload>(t, e2, s2) == CUDA_SUCCESS);
  sync_on(s2);
  const std::int64_t t0 = now_ns();
  launch_on(e1, stream);
  launch_on(e2, s2);
  sync_on(stream);
  sync_on(s2);
  const std::int64_t t1 = now_ns();
  INFO("both done at " << ms_between(t0, t1) << " ms (serial would be 200 ms)");
  CHECK(ms_between(t0, t1) >= 75.0);
  CHECK(ms_between(t0, t1) < 170.0);
  destroy_exec(e1);
  destroy_exec(e2);
  destroy_graph(g);
  destroy_stream(s2);
  finish();
}

TEST_SUITE_END();
