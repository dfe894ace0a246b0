// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Oracles and the fixture of the attachment-core tests (tests/attach, tests/graph), which drive
// the internals (Owners, NodeAttachment, Transaction, the ops insertion path, Hierarchy) on the
// driver TETHER_DRIVER selects.
//
// What it provides:
// - Tracker / Probe: a move-only owner that records, in its group's shared Tracker, each
//   destruction: how many, per probe, on which thread, whether detail::draining_here() was true
//   (where owners are meant to die) and whether the thread was inside a watched driver call.
// - watched_table(): a copy of the driver table whose calls that can run user-object destructors
//   (or that commit makes) mark the calling thread, so a probe can tell "inside a driver call".
// - DestroyHook: installs detail::attachment_destroy_hook for a scope.
// - AttachEnv: the per-test fixture (context current, fill kernel twin, error reports captured,
//   and at the end: every attachment reclaimed, registry back to its size, no simulator
//   violation, no unexpected error report).
// - Exec: a raw executable (instantiate / launch / destroy through the table; not wrapped yet).
// - small helpers: edit(), ref_of(), host callables with a trampoline, kernel calls.
//
// Why waits poll: release is asynchronous (a user-object destructor only queues; the reclaimer
// releases later), so "released" is a bounded poll and "still alive" settles for settle_ms first.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/driver_fixture.hpp"
#include "tether.hpp"
#include "raw_ops.hpp"

namespace tether_test {

/// The contents of a buffer (synchronous copy).
inline std::vector<float> read(const tether::SharedBuffer<float>& b) {
  std::vector<float> v(b.size());
  b.copy_to(v);
  return v;
}

/// Whether every element equals `x` (false for an empty vector).
inline bool all_equal(const std::vector<float>& v, float x) {
  for (float f : v)
    if (f != x) return false;
  return !v.empty();
}


using tether::detail::Box;
using tether::detail::BoxRef;
using tether::detail::DriverTable;
using tether::detail::Hierarchy;
using tether::detail::NodeAttachment;
using tether::detail::NodeRecord;
using tether::detail::NodeRef;
using tether::detail::Transaction;

// ------------------------------------------------------------------------- watched driver calls

/// Depth of watched driver calls on this thread (see watched_table()).
inline thread_local int t_in_driver_call = 0;

template <Entry E, class F = typename tether::detail::EntryTraits<E>::type>
struct Watched;
template <Entry E, class... A>
struct Watched<E, CUresult (*)(A...)> {
  static inline CUresult (*original)(A...) = nullptr;
  static inline std::atomic<std::uint64_t> calls{0};  // calls through the watched table
  static CUresult fn(A... a) {
    calls.fetch_add(1);
    ++t_in_driver_call;
    CUresult r = original(a...);
    --t_in_driver_call;
    return r;
  }
  static void install(DriverTable& t) {
    original = t.get<E>();
    t.set<E>(&fn);
  }
};

/// The test driver's table, with every call that may run a user-object destructor on the calling
/// thread (and every call commit makes) marking the thread while it runs. Hierarchies made with it
/// make all their driver calls through it. Lives until the process exits.
inline const DriverTable& watched_table() {
  static const DriverTable* w = [] {
    auto* c = new DriverTable(table());
    Watched<Entry::cuGraphDestroy>::install(*c);
    Watched<Entry::cuGraphDestroyNode>::install(*c);
    Watched<Entry::cuGraphReleaseUserObject>::install(*c);
    Watched<Entry::cuUserObjectRelease>::install(*c);
    Watched<Entry::cuGraphExecDestroy>::install(*c);
    return c;
  }();
  return *w;
}

// ------------------------------------------------------------------------------ probe owners

/// Shared by one group of probes: what happened to them.
class Tracker {
 public:
  /// Destructions so far.
  int destroyed() const noexcept { return destroyed_.load(); }
  /// Destructions that happened where owners must not die: draining_here() false.
  int outside_drain() const noexcept { return outside_drain_.load(); }
  /// Destructions on a thread inside a watched driver call.
  int inside_driver_call() const noexcept { return inside_call_.load(); }
  /// Destructions on the reclaimer's thread.
  int on_reclaimer() const noexcept { return on_reclaimer_.load(); }
  /// Probes made in this group.
  int made() const {
    std::lock_guard lock(mu_);
    return static_cast<int>(per_probe_.size());
  }
  /// Whether no probe of the group was destroyed more than once.
  bool none_twice() const {
    std::lock_guard lock(mu_);
    return std::all_of(per_probe_.begin(), per_probe_.end(), [](int n) { return n <= 1; });
  }
  /// How often probe `id` was destroyed.
  int times(int id) const {
    std::lock_guard lock(mu_);
    return per_probe_.at(static_cast<std::size_t>(id));
  }
  /// The threads the destructions ran on, in order.
  std::vector<std::thread::id> threads() const {
    std::lock_guard lock(mu_);
    return threads_;
  }

  /// Waits (bounded poll) until at least `n` probes were destroyed; whether they were.
  bool wait_destroyed(int n, int ms = wait_ms) const {
    const std::int64_t end = now_ns() + static_cast<std::int64_t>(ms) * 1'000'000;
    while (destroyed_.load() < n) {
      if (now_ns() > end) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return true;
  }
  /// Settles for a while, then whether exactly `n` probes have been destroyed (for "still alive").
  bool destroyed_after_settle(int n) const {
    sleep_ms(settle_ms);
    return destroyed_.load() == n;
  }

 private:
  friend class Probe;
  int add_probe() {
    std::lock_guard lock(mu_);
    per_probe_.push_back(0);
    threads_.reserve(per_probe_.size());
    return static_cast<int>(per_probe_.size()) - 1;
  }
  void record(int id) noexcept {
    if (!tether::detail::draining_here()) outside_drain_.fetch_add(1);
    if (t_in_driver_call > 0) inside_call_.fetch_add(1);
    if (tether::detail::on_reclaimer_thread()) on_reclaimer_.fetch_add(1);
    {
      std::lock_guard lock(mu_);
      ++per_probe_[static_cast<std::size_t>(id)];
      if (threads_.size() < threads_.capacity()) threads_.push_back(std::this_thread::get_id());
    }
    destroyed_.fetch_add(1);  // last: a waiter that sees the count sees everything above
  }

  mutable std::mutex mu_;
  std::vector<int> per_probe_;
  std::vector<std::thread::id> threads_;
  std::atomic<int> destroyed_{0};
  std::atomic<int> outside_drain_{0};
  std::atomic<int> inside_call_{0};
  std::atomic<int> on_reclaimer_{0};
};

/// A move-only owner that tells its Tracker when it dies (a moved-from probe tells nothing).
class Probe {
 public:
  explicit Probe(std::shared_ptr<Tracker> t) : t_(std::move(t)), id_(t_->add_probe()) {}
  Probe(Probe&& o) noexcept : t_(std::move(o.t_)), id_(o.id_) {}
  Probe& operator=(Probe&&) = delete;
  Probe(const Probe&) = delete;
  Probe& operator=(const Probe&) = delete;
  ~Probe() {
    if (t_) t_->record(id_);
  }
  int id() const noexcept { return id_; }

 private:
  std::shared_ptr<Tracker> t_;
  int id_;
};

inline std::shared_ptr<Tracker> tracker() {
  return std::make_shared<Tracker>();
}

// ------------------------------------------------------------------------------ destroy hook

/// Installs `fn` as detail::attachment_destroy_hook for the scope.
class DestroyHook {
 public:
  explicit DestroyHook(void (*fn)(NodeAttachment*)) { tether::detail::attachment_destroy_hook.store(fn); }
  ~DestroyHook() { tether::detail::attachment_destroy_hook.store(nullptr); }
  DestroyHook(const DestroyHook&) = delete;
  DestroyHook& operator=(const DestroyHook&) = delete;
};

// ------------------------------------------------------------------------------ error reports

inline std::mutex g_reports_mu;
inline std::vector<std::string> g_reports;

inline void capture_report(const tether::ErrorReport& r) noexcept {
  try {
    std::lock_guard lock(g_reports_mu);
    g_reports.push_back(std::string(r.where) + ": " + std::string(r.what));
  } catch (...) {
  }
}

/// The reports captured since the last call.
inline std::vector<std::string> take_reports() {
  std::lock_guard lock(g_reports_mu);
  return std::exchange(g_reports, {});
}

// ------------------------------------------------------------------------------ fill kernel

/// fill(float* p, float v, int n) sets p[0..n) to v, one element per thread. On a GPU the PTX runs;
/// on the simulator the twin registered by AttachEnv does.
inline constexpr const char* fill_ptx = R"PTX(
.version 7.0
.target sm_52
.address_size 64

.visible .entry fill(
  .param .u64 fill_p,
  .param .f32 fill_v,
  .param .u32 fill_n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .f32 %f<2>;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [fill_p];
  ld.param.f32 %f1, [fill_v];
  ld.param.u32 %r2, [fill_n];
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %tid.x;
  mad.lo.s32 %r6, %r3, %r4, %r5;
  setp.ge.s32 %p1, %r6, %r2;
  @%p1 bra DONE;
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.s32 %rd3, %r6, 4;
  add.s64 %rd4, %rd2, %rd3;
  st.global.f32 [%rd4], %f1;
DONE:
  ret;
}
)PTX";

using FillKernel = tether::Kernel<float*, float, int>;

inline void register_fill_twin() {
  static const bool once = [] {
    tether::sim::register_kernel<float*, float, int>(
        "fill", [](const tether::sim::LaunchInfo& info, float* p, float v, int n) {
          std::size_t end = std::min(info.threads(), static_cast<std::size_t>(n < 0 ? 0 : n));
          for (std::size_t i = 0; i < end; ++i) p[i] = v;
        });
    return true;
  }();
  (void)once;
}

/// A kernel call of fill(p, v, n) with 256-thread blocks, its arguments copied.
inline tether::detail::KernelCall fill_call(CUfunction f, float* p, float v, int n) {
  void* args[] = {&p, &v, &n};
  CUDA_KERNEL_NODE_PARAMS kp = kernel_params(f, args);
  kp.gridDimX = static_cast<unsigned>((n + 255) / 256);
  kp.blockDimX = 256;
  const std::size_t sizes[] = {sizeof(float*), sizeof(float), sizeof(int)};
  return tether::detail::KernelCall::copy(kp, sizes);
}

/// A kernel call of a probe kernel taking one u64 (noop, other, spin).
inline tether::detail::KernelCall u64_call(CUfunction f, std::uint64_t arg) {
  void* args[] = {&arg};
  CUDA_KERNEL_NODE_PARAMS kp = kernel_params(f, args);
  const std::size_t sizes[] = {sizeof(std::uint64_t)};
  return tether::detail::KernelCall::copy(kp, sizes);
}

// ------------------------------------------------------------------------------ host callables

/// The trampoline of a host node whose callable of type F lives in the node's Owners bundle.
template <class F>
struct HostTrampoline {
  static void run(void* p) { (*static_cast<F*>(p))(); }
};

/// A callable ready to be a host node: its address (stable: it lives on the heap) and the owner
/// that keeps it (move it into the node's Owners).
template <class F>
struct HostCallable {
  CUhostFn fn;
  void* data;
  std::unique_ptr<F> owner;
};
template <class F>
HostCallable<F> host_callable(F f) {
  auto p = std::make_unique<F>(std::move(f));
  void* data = p.get();
  return {&HostTrampoline<F>::run, data, std::move(p)};
}

// ------------------------------------------------------------------------------ graph helpers

/// Waits (bounded poll) until `pred()` holds; whether it did.
template <class P>
bool wait_until(P&& pred, int ms = wait_ms) {
  const std::int64_t end = now_ns() + static_cast<std::int64_t>(ms) * 1'000'000;
  while (!pred()) {
    if (now_ns() > end) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

/// A host function that does nothing (for host nodes whose callable does not matter).
inline void host_nothing(void*) {}

/// Runs `f(tx)` in one transaction on `h` and commits; returns what `f` returned.
template <class F>
auto edit(const std::shared_ptr<Hierarchy>& h, F&& f) {
  Transaction tx(h);
  if constexpr (std::is_void_v<decltype(f(tx))>) {
    f(tx);
    tx.commit();
  } else {
    auto r = f(tx);
    tx.commit();
    return r;
  }
}

/// A handle's view of a node.
inline NodeRef ref_of(const std::shared_ptr<Hierarchy>& h, NodeRecord* r) {
  return NodeRef{h, r, r->generation.load()};
}

/// Nodes of a raw graph, as the driver counts them.
inline std::size_t driver_nodes(CUgraph g) {
  return node_count(g);
}

/// A raw executable graph (executables are not wrapped yet): instantiated from `g` through `t`,
/// destroyed by reset() or the destructor.
class Exec {
 public:
  Exec(const DriverTable& t, CUgraph g) : t_(&t) {
    REQUIRE(raw<Entry::cuGraphInstantiateWithFlags>(t, &e_, g, 0ull) == CUDA_SUCCESS);
  }
  ~Exec() { reset(); }
  Exec(const Exec&) = delete;
  Exec& operator=(const Exec&) = delete;
  CUgraphExec get() const noexcept { return e_; }
  void launch(CUstream s) const { CHECK(raw<Entry::cuGraphLaunch>(*t_, e_, s) == CUDA_SUCCESS); }
  /// Launches and waits for the stream.
  void run(CUstream s) const {
    launch(s);
    CHECK(raw<Entry::cuStreamSynchronize>(*t_, s) == CUDA_SUCCESS);
  }
  void reset() {
    if (e_) CHECK(raw<Entry::cuGraphExecDestroy>(*t_, std::exchange(e_, nullptr)) == CUDA_SUCCESS);
  }

 private:
  const DriverTable* t_;
  CUgraphExec e_ = nullptr;
};

// ------------------------------------------------------------------------------ fixture

/// The fixture of every attachment-core test. See the file comment.
struct AttachEnv {
  const Driver& drv = driver();
  const DriverTable& t = *drv.table;
  bool sim = drv.simulated;
  tether::Runtime rt = tether::Runtime::open();
  tether::Context ctx = rt.context(0);
  CUstream stream = drv.stream;
  std::uint64_t live_before = 0;
  std::uint64_t acc_before = 0;
  std::size_t registry_before = 0;
  std::size_t uo_before = 0;
  tether::ErrorHook previous_hook = nullptr;
  std::thread::id main_tid = std::this_thread::get_id();

  AttachEnv() {
    register_fill_twin();
    REQUIRE(raw<Entry::cuCtxSetCurrent>(t, drv.ctx) == CUDA_SUCCESS);
    CHECK(tether::wait_reclaimed(std::chrono::milliseconds(wait_ms)));
    if (sim) {
      tether::sim::clear_faults();
      auto left = tether::sim::violations();
      if (!left.empty()) {
        MESSAGE("violations left by an earlier test, cleared:\n" << describe(left));
        tether::sim::clear_violations();
      }
      CHECK(tether::sim::quiesce(std::chrono::milliseconds(wait_ms)));
      uo_before = tether::sim::stats().user_objects;
    }
    live_before = NodeAttachment::live();
    acc_before = tether::detail::ExecAccumulator::live();
    registry_before = tether::detail::Registry::instance().size();
    take_reports();
    previous_hook = tether::set_error_hook(&capture_report);
  }

  ~AttachEnv() {
    CHECK(raw<Entry::cuStreamSynchronize>(t, stream) == CUDA_SUCCESS);
    if (sim) tether::sim::clear_faults();
    CHECK_MESSAGE(wait_attachments(live_before, acc_before),
                  "attachments left alive: " << NodeAttachment::live() << " (before: " << live_before << ")");
    CHECK(tether::wait_reclaimed(std::chrono::milliseconds(wait_ms)));
    CHECK(tether::detail::Registry::instance().size() == registry_before);
    tether::set_error_hook(previous_hook);
    for (const std::string& r : take_reports()) FAIL_CHECK("unexpected error report: " << r);
    if (sim) {
      CHECK(tether::sim::quiesce(std::chrono::milliseconds(wait_ms)));
      CHECK(tether::sim::stats().user_objects == uo_before);
      check_no_violations();
      tether::sim::clear_violations();
    }
  }

  /// Waits (bounded poll) until no more attachments and accumulators are alive than `a` and `x`.
  static bool wait_attachments(std::uint64_t a, std::uint64_t x, int ms = wait_ms) {
    const std::int64_t end = now_ns() + static_cast<std::int64_t>(ms) * 1'000'000;
    while (NodeAttachment::live() > a || tether::detail::ExecAccumulator::live() > x) {
      if (now_ns() > end) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return NodeAttachment::live() == a && tether::detail::ExecAccumulator::live() == x;
  }

  /// A new hierarchy (root graph) through the test driver's table, or `through` if given.
  std::shared_ptr<Hierarchy> graph(const DriverTable* through = nullptr) const {
    return Hierarchy::create(through ? *through : t);
  }

  /// The fill kernel of a freshly loaded module.
  FillKernel load_fill() const {
    return ctx.load_module(tether::Image::from_ptx(fill_ptx)).kernel<float*, float, int>("fill");
  }

  void sync() const { CHECK(raw<Entry::cuStreamSynchronize>(t, stream) == CUDA_SUCCESS); }

  /// Zeroes `b` and waits for it. Why the context synchronize: fill_bytes runs on the legacy
  /// stream, which the tests' non-blocking stream does not wait for.
  template <class T>
  void zero(const tether::SharedBuffer<T>& b) const {
    b.fill_bytes(0);
    ctx.synchronize();
  }
};

}  // namespace tether_test
