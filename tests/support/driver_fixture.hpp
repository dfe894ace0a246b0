// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The shared fixture of the driver conformance suite (tests/driver/conformance_*.cpp). The suite
// checks the facts of docs DRIVER_FACTS.md through the entry-point table, so the same tests run on
// the simulated driver (CI) and on the real driver on a GPU (TETHER_DRIVER=sim|cuda). It ports the
// scenarios of the probe reference/driver_facts.cpp with shorter durations.
//
// What it provides:
// - driver(): the process-wide state, made once: the table, device 0's primary context (retained,
//   never released), the probe's PTX module (kernels noop(u64), other(u64), spin(u64 ns)), a
//   non-blocking stream, and the simulator's twins of the three kernels.
// - DriverFixture: makes the context current on the test's thread; finish() ends every test
//   (stream synchronized, no simulator violation left).
// - Obj: an observed user object (destructor count, thread, start/end times, optional sleep,
//   optional driver call inside the destructor), with make_uo / attach / wait_count / still_alive.
// - HostRec: an observed graph host-node callback.
//
// Why waits poll: deferred destructors run on a driver thread and no driver call waits for them
// (fact 5e2), so a test that expects a release polls with a deadline; a test that expects "not
// released" settles for settle_ms first.
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "sim/sim.hpp"
#include "tether.hpp"

// Why in the global namespace: CUresult and CUgraphExecUpdateResult are global enums, so doctest
// finds these by argument-dependent lookup and prints "CUDA_ERROR_INVALID_VALUE" instead of "1".
inline doctest::String toString(CUresult r) {
  return doctest::String(std::string(tether::result_name(static_cast<int>(r))).c_str());
}
inline doctest::String toString(CUgraphExecUpdateResult r) {
  switch (r) {
    case CU_GRAPH_EXEC_UPDATE_SUCCESS:
      return "CU_GRAPH_EXEC_UPDATE_SUCCESS";
    case CU_GRAPH_EXEC_UPDATE_ERROR:
      return "CU_GRAPH_EXEC_UPDATE_ERROR";
    case CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED:
      return "CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED";
    case CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED:
      return "CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED";
    case CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED:
      return "CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED";
    case CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED:
      return "CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED";
    case CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED:
      return "CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED";
    case CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE:
      return "CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE";
    case CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED:
      return "CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED";
  }
  return "CU_GRAPH_EXEC_UPDATE_?";
}

namespace tether_test {

using tether::detail::Entry;
using tether::detail::raw;

// ------------------------------------------------------------------------------------------ time

inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
/// Milliseconds from `from` to `to` (steady-clock nanoseconds).
inline double ms_between(std::int64_t from, std::int64_t to) {
  return static_cast<double>(to - from) / 1e6;
}
inline void sleep_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

/// How long a "not released" check waits before concluding (the probe used 150 ms).
inline constexpr int settle_ms = 50;
/// The longest a test waits for a destructor that must run.
inline constexpr int wait_ms = 3000;
/// Nanoseconds per millisecond, for spin-kernel arguments.
inline constexpr std::uint64_t ms_ns = 1000ull * 1000ull;

// ------------------------------------------------------------------------------- driver state

/// The probe's kernels: noop(u64) and other(u64) do nothing; spin(u64 ns) busy-waits ns
/// nanoseconds on %globaltimer. The simulator runs their twins (registered in driver()).
inline constexpr const char* probe_ptx = R"PTX(
.version 8.0
.target sm_90
.address_size 64

.visible .entry noop(.param .u64 noop_p0)
{
  ret;
}

.visible .entry other(.param .u64 other_p0)
{
  ret;
}

.visible .entry spin(.param .u64 spin_ns)
{
  .reg .pred %p<2>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [spin_ns];
  mov.u64 %rd2, %globaltimer;
SPIN_LOOP:
  mov.u64 %rd3, %globaltimer;
  sub.u64 %rd4, %rd3, %rd2;
  setp.lt.u64 %p1, %rd4, %rd1;
  @%p1 bra SPIN_LOOP;
  ret;
}
)PTX";

/// Registers the simulator's twins of the probe's kernels (the real driver ignores twins).
inline void register_probe_twins() {
  using tether::sim::LaunchInfo;
  tether::sim::register_kernel<std::uint64_t>("noop", [](const LaunchInfo&, std::uint64_t) {});
  tether::sim::register_kernel<std::uint64_t>("other", [](const LaunchInfo&, std::uint64_t) {});
  tether::sim::register_kernel<std::uint64_t>("spin", [](const LaunchInfo&, std::uint64_t ns) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(static_cast<std::int64_t>(ns)));
  });
}

/// Process-wide driver state shared by every conformance test (never torn down: the primary
/// context, module and stream live until the process exits, like the driver itself).
struct Driver {
  const tether::detail::DriverTable* table = nullptr;
  bool simulated = false;
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  CUmodule module = nullptr;
  CUfunction noop = nullptr;
  CUfunction other = nullptr;
  CUfunction spin = nullptr;
  CUstream stream = nullptr;
};

inline void require_ok(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS)
    throw std::runtime_error(std::string("conformance fixture: ") + what + " failed with " +
                             std::string(tether::result_name(static_cast<int>(r))));
}

inline Driver make_driver() {
  register_probe_twins();
  Driver d;
  tether::Runtime rt = tether::Runtime::open();
  d.table = &tether::detail::table_of(rt);
  d.simulated = rt.kind() == tether::DriverKind::simulated;
  const tether::detail::DriverTable& t = *d.table;
  require_ok(raw<Entry::cuDeviceGet>(t, &d.device, 0), "cuDeviceGet");
  require_ok(raw<Entry::cuDevicePrimaryCtxRetain>(t, &d.ctx, d.device), "cuDevicePrimaryCtxRetain");
  require_ok(raw<Entry::cuCtxSetCurrent>(t, d.ctx), "cuCtxSetCurrent");
  require_ok(raw<Entry::cuModuleLoadData>(t, &d.module, static_cast<const void*>(probe_ptx)),
             "cuModuleLoadData");
  require_ok(raw<Entry::cuModuleGetFunction>(t, &d.noop, d.module, "noop"), "cuModuleGetFunction(noop)");
  require_ok(raw<Entry::cuModuleGetFunction>(t, &d.other, d.module, "other"), "cuModuleGetFunction(other)");
  require_ok(raw<Entry::cuModuleGetFunction>(t, &d.spin, d.module, "spin"), "cuModuleGetFunction(spin)");
  require_ok(raw<Entry::cuStreamCreate>(t, &d.stream, static_cast<unsigned>(CU_STREAM_NON_BLOCKING)),
             "cuStreamCreate");
  return d;
}

/// The shared driver state, made on first use (throws std::runtime_error if it cannot be made).
inline const Driver& driver() {
  static const Driver d = make_driver();
  return d;
}
inline const tether::detail::DriverTable& table() {
  return *driver().table;
}

/// Whether the tests run on tether's simulated driver.
inline bool on_simulator() {
  return tether::Runtime::open().kind() == tether::DriverKind::simulated;
}

// ---------------------------------------------------------------------- simulator violations

inline std::string describe(const std::vector<tether::sim::Violation>& vs) {
  std::string s;
  for (const auto& v : vs) {
    s += std::string(tether::sim::to_string(v.kind)) + " in '" + v.entry_point + "': " + v.detail + "\n";
  }
  return s;
}

/// On the simulator: checks that no violation was recorded.
inline void check_no_violations() {
  if (!on_simulator()) return;
  auto vs = tether::sim::violations();
  CHECK_MESSAGE(vs.empty(), "unexpected simulator violations:\n" << describe(vs));
}

/// On the simulator: checks that at least one violation of `kind`, and none of another kind, was
/// recorded, then forgets them (for tests that misuse the driver on purpose).
inline void expect_violations(tether::sim::ViolationKind kind) {
  if (!on_simulator()) return;
  auto vs = tether::sim::violations();
  std::size_t matching = 0;
  for (const auto& v : vs) matching += v.kind == kind ? 1 : 0;
  CHECK_MESSAGE(matching >= 1, "expected a " << std::string(tether::sim::to_string(kind))
                                             << " violation; recorded:\n"
                                             << describe(vs));
  CHECK_MESSAGE(matching == vs.size(), "violations of other kinds recorded:\n" << describe(vs));
  tether::sim::clear_violations();
}

// ------------------------------------------------------------------------- observed objects

/// The driver call a destructor or host callback makes (facts 9a-9j).
enum class InsideCall {
  none,
  ctx_get_current,  ///< cuCtxGetCurrent
  mem_free,         ///< cuMemFree(dptr)
  mem_alloc,        ///< cuMemAlloc (host callbacks only)
  stream_query,     ///< cuStreamQuery(driver().stream)
  release_other,    ///< cuUserObjectRelease(other, 1)
};

/// What `call` returned, or -1 before it was made.
inline int make_inside_call(InsideCall call, CUdeviceptr dptr, CUuserObject other) {
  const tether::detail::DriverTable& t = table();
  switch (call) {
    case InsideCall::none:
      return -1;
    case InsideCall::ctx_get_current: {
      CUcontext c = nullptr;
      return static_cast<int>(raw<Entry::cuCtxGetCurrent>(t, &c));
    }
    case InsideCall::mem_free:
      return static_cast<int>(raw<Entry::cuMemFree>(t, dptr));
    case InsideCall::mem_alloc: {
      CUdeviceptr d = 0;
      return static_cast<int>(raw<Entry::cuMemAlloc>(t, &d, std::size_t{256}));
    }
    case InsideCall::stream_query:
      return static_cast<int>(raw<Entry::cuStreamQuery>(t, driver().stream));
    case InsideCall::release_other:
      return static_cast<int>(raw<Entry::cuUserObjectRelease>(t, other, 1u));
  }
  return -1;
}

/// A user object whose destructor records when, where and how often it ran.
struct Obj {
  std::atomic<int> count{0};             // destructor calls
  std::atomic<std::thread::id> tid{};    // thread of the (last) destructor call
  std::atomic<std::int64_t> t_start{0};  // now_ns() when the destructor started
  std::atomic<std::int64_t> t_end{0};    // ... and finished
  int sleep_ms = 0;                      // the destructor sleeps this long
  InsideCall call = InsideCall::none;    // the driver call the destructor makes
  CUdeviceptr dptr = 0;                  // for InsideCall::mem_free
  CUuserObject other = nullptr;          // for InsideCall::release_other
  std::atomic<int> api_result{-1};       // what the call returned (a CUresult), -1 before
  std::atomic<bool> api_done{false};     // the call returned

  CUresult result() const { return static_cast<CUresult>(api_result.load()); }
};

inline void CUDA_CB obj_destroy(void* p) {
  Obj* o = static_cast<Obj*>(p);
  o->t_start.store(now_ns());
  o->tid.store(std::this_thread::get_id());
  if (o->call != InsideCall::none) {
    o->api_result.store(make_inside_call(o->call, o->dptr, o->other));
    o->api_done.store(true);
  }
  if (o->sleep_ms > 0) tether_test::sleep_ms(o->sleep_ms);
  o->t_end.store(now_ns());
  o->count.fetch_add(1);
}

/// Creates a user object observed by `o` with `refs` references (NO_DESTRUCTOR_SYNC).
inline CUuserObject make_uo(Obj& o, unsigned refs = 1) {
  CUuserObject u = nullptr;
  REQUIRE(raw<Entry::cuUserObjectCreate>(table(), &u, static_cast<void*>(&o), &obj_destroy, refs,
                                         static_cast<unsigned>(CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)) ==
          CUDA_SUCCESS);
  return u;
}

/// Creates a user object observed by `o` and moves its only reference into graph `g`.
inline CUuserObject attach(CUgraph g, Obj& o) {
  CUuserObject u = make_uo(o, 1);
  CHECK(raw<Entry::cuGraphRetainUserObject>(
            table(), g, u, 1u, static_cast<unsigned>(CU_GRAPH_USER_OBJECT_MOVE)) == CUDA_SUCCESS);
  return u;
}

/// Waits (polling, at most `ms`) until the destructor ran `target` times; whether it did.
/// Makes no driver call while it waits.
inline bool wait_count(const Obj& o, int target = 1, int ms = wait_ms) {
  const std::int64_t end = now_ns() + static_cast<std::int64_t>(ms) * 1000000;
  while (o.count.load() < target) {
    if (now_ns() > end) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

/// Whether the destructor has not run after settling for settle_ms.
inline bool still_alive(const Obj& o) {
  sleep_ms(settle_ms);
  return o.count.load() == 0;
}

/// Whether the destructor runs, and then has run exactly once (settles 20 ms for a second run).
inline bool ran_once(const Obj& o) {
  if (!wait_count(o)) return false;
  sleep_ms(20);
  return o.count.load() == 1;
}

/// A graph host-node callback that records its thread and makes an optional driver call.
struct HostRec {
  std::atomic<int> calls{0};
  std::atomic<std::thread::id> tid{};
  InsideCall call = InsideCall::none;
  CUdeviceptr dptr = 0;
  std::atomic<int> api_result{-1};

  CUresult result() const { return static_cast<CUresult>(api_result.load()); }
};

inline void CUDA_CB host_record(void* p) {
  HostRec* h = static_cast<HostRec*>(p);
  h->tid.store(std::this_thread::get_id());
  if (h->call != InsideCall::none) h->api_result.store(make_inside_call(h->call, h->dptr, nullptr));
  h->calls.fetch_add(1);
}

// ------------------------------------------------------------------------------ graph helpers

/// Kernel-node parameters for a 1x1x1 launch of `f` with `args`.
inline CUDA_KERNEL_NODE_PARAMS kernel_params(CUfunction f, void** args) {
  CUDA_KERNEL_NODE_PARAMS p{};
  p.func = f;
  p.gridDimX = p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = args;
  return p;
}

inline CUgraph new_graph() {
  CUgraph g = nullptr;
  REQUIRE(raw<Entry::cuGraphCreate>(table(), &g, 0u) == CUDA_SUCCESS);
  return g;
}

/// Adds a kernel node running `f(arg)` after `deps`; checks that it succeeded.
inline CUgraphNode add_kernel(CUgraph g, CUfunction f, std::uint64_t arg, const CUgraphNode* deps = nullptr,
                              std::size_t ndeps = 0) {
  void* args[] = {&arg};
  CUDA_KERNEL_NODE_PARAMS p = kernel_params(f, args);
  CUgraphNode n = nullptr;
  CHECK(raw<Entry::cuGraphAddKernelNode>(table(), &n, g, deps, ndeps, &p) == CUDA_SUCCESS);
  return n;
}

/// Adds a child-graph node embedding (a clone of) `child`; checks that it succeeded.
inline CUgraphNode add_child(CUgraph parent, CUgraph child) {
  CUgraphNode n = nullptr;
  CHECK(raw<Entry::cuGraphAddChildGraphNode>(table(), &n, parent, static_cast<const CUgraphNode*>(nullptr),
                                             std::size_t{0}, child) == CUDA_SUCCESS);
  return n;
}

/// Adds a host node calling host_record(&h).
inline CUgraphNode add_host(CUgraph g, HostRec& h) {
  CUDA_HOST_NODE_PARAMS hp{};
  hp.fn = &host_record;
  hp.userData = &h;
  CUgraphNode n = nullptr;
  CHECK(raw<Entry::cuGraphAddHostNode>(table(), &n, g, static_cast<const CUgraphNode*>(nullptr),
                                       std::size_t{0}, &hp) == CUDA_SUCCESS);
  return n;
}

inline CUgraphExec instantiate(CUgraph g) {
  CUgraphExec e = nullptr;
  REQUIRE(raw<Entry::cuGraphInstantiateWithFlags>(table(), &e, g, 0ull) == CUDA_SUCCESS);
  return e;
}

inline std::size_t node_count(CUgraph g) {
  std::size_t n = 0;
  CHECK(raw<Entry::cuGraphGetNodes>(table(), g, static_cast<CUgraphNode*>(nullptr), &n) == CUDA_SUCCESS);
  return n;
}

inline std::vector<CUgraphNode> nodes_of(CUgraph g) {
  std::size_t n = node_count(g);
  std::vector<CUgraphNode> v(n);
  CHECK(raw<Entry::cuGraphGetNodes>(table(), g, v.data(), &n) == CUDA_SUCCESS);
  v.resize(n);
  return v;
}

inline void destroy_graph(CUgraph g) {
  CHECK(raw<Entry::cuGraphDestroy>(table(), g) == CUDA_SUCCESS);
}
inline void destroy_exec(CUgraphExec e) {
  CHECK(raw<Entry::cuGraphExecDestroy>(table(), e) == CUDA_SUCCESS);
}

/// A conditional node and its first body graph (the probe's add_cond).
struct CondNode {
  CUgraphNode node = nullptr;
  CUgraph body = nullptr;
  CUresult handle_result = CUDA_SUCCESS;  // cuGraphConditionalHandleCreate
  CUresult add_result = CUDA_SUCCESS;     // cuGraphAddNode
};

/// Adds an IF or WHILE conditional node (one body) whose handle defaults to `dflt` at each launch.
inline CondNode add_cond(CUgraph g, CUgraphConditionalNodeType type, unsigned dflt) {
  CondNode c;
  CUgraphConditionalHandle h = 0;
  c.handle_result = raw<Entry::cuGraphConditionalHandleCreate>(
      table(), &h, g, driver().ctx, dflt, static_cast<unsigned>(CU_GRAPH_COND_ASSIGN_DEFAULT));
  if (c.handle_result != CUDA_SUCCESS) return c;
  CUgraphNodeParams np{};
  np.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  np.conditional.handle = h;
  np.conditional.type = type;
  np.conditional.size = 1;
  np.conditional.ctx = driver().ctx;
  c.add_result =
      raw<Entry::cuGraphAddNode>(table(), &c.node, g, static_cast<const CUgraphNode*>(nullptr),
                                 static_cast<const CUgraphEdgeData*>(nullptr), std::size_t{0}, &np);
  if (c.add_result == CUDA_SUCCESS) c.body = np.conditional.phGraph_out[0];
  return c;
}

// ------------------------------------------------------------------------------------ fixture

/// Per-test fixture: the shared driver state, current on the test's thread. Every test ends with
/// finish().
class DriverFixture {
 public:
  DriverFixture()
      : drv(driver()),
        t(*drv.table),
        ctx(drv.ctx),
        stream(drv.stream),
        noop(drv.noop),
        other(drv.other),
        spin(drv.spin),
        sim(drv.simulated),
        main_tid(std::this_thread::get_id()) {
    make_current();
    if (sim) {
      // Why: a test that failed half-way may have left violations; they would fail the next test.
      auto left = tether::sim::violations();
      if (!left.empty()) {
        MESSAGE("violations left by an earlier test, cleared:\n" << describe(left));
        tether::sim::clear_violations();
      }
    }
  }

 protected:
  const Driver& drv;
  const tether::detail::DriverTable& t;
  CUcontext ctx;
  CUstream stream;
  CUfunction noop;
  CUfunction other;
  CUfunction spin;
  bool sim;
  std::thread::id main_tid;

  /// Makes the shared context current on the calling thread (call it first on a new thread).
  void make_current() const { REQUIRE(raw<Entry::cuCtxSetCurrent>(t, ctx) == CUDA_SUCCESS); }

  void launch(CUgraphExec e) const { CHECK(raw<Entry::cuGraphLaunch>(t, e, stream) == CUDA_SUCCESS); }
  void launch_on(CUgraphExec e, CUstream s) const {
    CHECK(raw<Entry::cuGraphLaunch>(t, e, s) == CUDA_SUCCESS);
  }
  void sync() const { CHECK(raw<Entry::cuStreamSynchronize>(t, stream) == CUDA_SUCCESS); }
  void sync_on(CUstream s) const { CHECK(raw<Entry::cuStreamSynchronize>(t, s) == CUDA_SUCCESS); }
  /// Uploads `e` and waits, so that a later launch's timing excludes the first-launch upload.
  void upload(CUgraphExec e) const {
    CHECK(raw<Entry::cuGraphUpload>(t, e, stream) == CUDA_SUCCESS);
    sync();
  }
  CUstream new_stream() const {
    CUstream s = nullptr;
    REQUIRE(raw<Entry::cuStreamCreate>(t, &s, static_cast<unsigned>(CU_STREAM_NON_BLOCKING)) == CUDA_SUCCESS);
    return s;
  }
  void destroy_stream(CUstream s) const {
    sync_on(s);
    CHECK(raw<Entry::cuStreamDestroy>(t, s) == CUDA_SUCCESS);
  }
  /// Polls cuStreamQuery until the stream is idle (at most 3 s); returns the last result.
  CUresult wait_stream_idle() const {
    const std::int64_t end = now_ns() + 3'000'000'000;
    CUresult q = raw<Entry::cuStreamQuery>(t, stream);
    while (q == CUDA_ERROR_NOT_READY && now_ns() < end) {
      sleep_ms(1);
      q = raw<Entry::cuStreamQuery>(t, stream);
    }
    return q;
  }

  /// The end of every test: the shared stream synchronized and, on the simulator, no violation.
  void finish() const {
    sync();
    check_no_violations();
  }
};

}  // namespace tether_test
