// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "context.hpp"

#include "../attach/reclaimer.hpp"
#include "buffer.hpp"
#include "event.hpp"
#include "module.hpp"
#include "stream.hpp"

namespace tether::detail {

namespace {

// Why these: each waits for every running host callback (cuMemFree: ctx_block_probe 4f;
// cuMemFreeHost and cuModuleUnload: release_probe A10, A12), and while cuMemFree or cuMemFreeHost
// waits, a cuMemAlloc or cuMemAllocHost on any other thread waits behind it (release_probe B3, B5,
// B6; block_probe "free"; H200, 2026-12-02). An application thread whose own host node waits for
// it must never end up in one of them, so they run on the reclaimer only, and there only while the
// host is idle (Verdict::go_when_host_idle). Device memory is no longer among them: tether frees it
// with cuMemFreeAsync (call_release), which returns at once while a callback runs and which nothing
// waits behind (A4, B2, C1).
constexpr bool blocks_while_callbacks_run(Entry e) noexcept {
  return e == Entry::cuMemFree || e == Entry::cuMemFreeHost || e == Entry::cuModuleUnload;
}
// Releases that must run on the reclaimer even though they do not block: cuMemFreeAsync from a
// thread in GLOBAL capture mode invalidates another thread's GLOBAL capture (release_probe D1); the
// reclaimer runs in RELAXED mode (D2).
constexpr Act act_of(Entry e) noexcept {
  if (blocks_while_callbacks_run(e)) return Act::release_blocking;
  return e == Entry::cuMemFreeAsync ? Act::release_reclaimer_only : Act::release;
}

// The one driver call per handle type.
CUresult call_release(const DriverTable& t, const ReleaseHandle& h) noexcept {
  struct Call {
    const DriverTable& t;
    // Why stream-ordered, on the releasing thread's per-thread stream: cuMemFree waits for every
    // running host callback and makes allocations on other threads wait behind it, so an
    // application whose host node waits for a thread that allocates would deadlock on a release
    // tether chose to make; cuMemFreeAsync returns at once while a callback runs, nothing waits
    // behind it, and it returns the memory to the device once that stream reaches it
    // (release_probe A4, B2, C1, E1; H200). The stream holds nothing else, and the release runs only
    // after CUDA released the last consumer of the memory, so nothing needs to be ordered before
    // it. The per-thread stream needs no creation or destruction; the release runs on the
    // reclaimer (RELAXED capture mode: D1, D2).
    CUresult operator()(CUdeviceptr p) const { return raw<Entry::cuMemFreeAsync>(t, p, CU_STREAM_PER_THREAD); }
    CUresult operator()(PooledFree* f) const { return pooled_free_call(t, f); }
    CUresult operator()(void* p) const { return raw<Entry::cuMemFreeHost>(t, p); }
    CUresult operator()(CUstream s) const { return raw<Entry::cuStreamDestroy>(t, s); }
    CUresult operator()(CUevent e) const { return raw<Entry::cuEventDestroy>(t, e); }
    CUresult operator()(CUmodule m) const { return raw<Entry::cuModuleUnload>(t, m); }
    CUresult operator()(CUmemoryPool p) const { return raw<Entry::cuMemPoolDestroy>(t, p); }
    CUresult operator()(CUdevice d) const { return raw<Entry::cuDevicePrimaryCtxRelease>(t, d); }
  };
  return std::visit(Call{t}, h);
}

void defer_release(const DriverTable* t, CUcontext ctx, ContextPtr keep, const ReleaseHandle& h,
                   const char* what) noexcept {
  defer_new<ReleaseJob>("deferring a release to the reclaimer (the resource is leaked)", t, ctx, std::move(keep), h,
                        what);
}

// Makes `ctx` current for a release without throwing. On the reclaimer (a thread tether owns) the
// context is set and left current, so a batch of releases costs one query each; on any other
// thread it is pushed and popped, leaving that thread as it was. Sets `pop` when a pop is owed.
// `failed` receives the entry point that failed, for the report.
CUresult enter_context(const DriverTable& t, CUcontext ctx, bool& pop, Entry& failed) noexcept {
  pop = false;
  CUcontext cur = nullptr;
  failed = Entry::cuCtxGetCurrent;
  CUresult r = raw<Entry::cuCtxGetCurrent>(t, &cur);
  if (r != CUDA_SUCCESS) return r;
  if (cur == ctx) return CUDA_SUCCESS;
  failed = on_reclaimer_thread() ? Entry::cuCtxSetCurrent : Entry::cuCtxPushCurrent;
  if (on_reclaimer_thread()) return raw<Entry::cuCtxSetCurrent>(t, ctx);
  r = raw<Entry::cuCtxPushCurrent>(t, ctx);
  pop = r == CUDA_SUCCESS;
  return r;
}

// The release rule, written once. `ctx` null means the call needs no context (the primary context
// release). `keep` holds the owning context's state while a deferred release waits, so the
// primary context is still retained when the release finally runs. `v` is the verdict for this
// release on this thread; `as_job` is true on the reclaimer's attempt (a job being run): a refusal
// there would loop forever, so it is reported instead of deferred again.
void release_core(const DriverTable* t, CUcontext ctx, ContextPtr keep, const ReleaseHandle& h, const char* what,
                  Verdict v, bool as_job) noexcept {
  // Why the verdict comes before any call: inside a host callback or user-object destructor even
  // cuCtxGetCurrent is refused (and the simulator records the attempt as a violation).
  if (v == Verdict::defer) return defer_release(t, ctx, std::move(keep), h, what);
  if (v == Verdict::leak) return;  // the driver is unusable in a forked child: leaked on purpose
  const Entry entry = release_entry(h);
  if (draining_here()) relax_capture_mode(*t);  // never an application thread's own mode
  bool pop = false;
  if (ctx) {
    Entry failed = Entry::cuCtxGetCurrent;
    CUresult entered = enter_context(*t, ctx, pop, failed);
    if (entered == CUDA_ERROR_NOT_PERMITTED && !as_job) return defer_release(t, ctx, std::move(keep), h, what);
    if (entered != CUDA_SUCCESS) return report_failure(*t, failed, entered, what);
  }
  CUresult r = CUDA_SUCCESS;
  if (blocks_while_callbacks_run(entry)) {
    Reclaimer::BlockingRelease releasing;
    r = call_release(*t, h);
  } else {
    r = call_release(*t, h);
  }
  if (pop) {
    CUcontext popped = nullptr;
    CUresult p = raw<Entry::cuCtxPopCurrent>(*t, &popped);
    if (p != CUDA_SUCCESS) report_failure(*t, Entry::cuCtxPopCurrent, p, what);
  }
  if (r == CUDA_SUCCESS) return;
  if (r == CUDA_ERROR_NOT_PERMITTED && !as_job) return defer_release(t, ctx, std::move(keep), h, what);
  report_failure(*t, entry, r, what);
}

// Tables whose capture mode this thread switched to RELAXED, with the mode to restore.
struct RelaxedTables {
  std::array<std::pair<const DriverTable*, CUstreamCaptureMode>, 4> entries{};
  std::size_t n = 0;
};
thread_local RelaxedTables t_relaxed;

}  // namespace

namespace {
// cuThreadExchangeStreamCaptureMode to RELAXED; the previous mode into `previous`, or the failure
// reported (`why` says what that means) and false.
bool exchange_to_relaxed(const DriverTable& t, CUstreamCaptureMode& previous, const char* why) noexcept {
  previous = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (CUresult res = raw<Entry::cuThreadExchangeStreamCaptureMode>(t, &previous); res != CUDA_SUCCESS) {
    report_failure(t, Entry::cuThreadExchangeStreamCaptureMode, res, why);
    return false;
  }
  return true;
}
}  // namespace

void relax_capture_mode(const DriverTable& t) noexcept {
  RelaxedTables& r = t_relaxed;
  for (std::size_t i = 0; i < r.n; ++i)
    if (r.entries[i].first == &t) return;
  if (r.n == r.entries.size()) return;  // more drivers than tether ever opens: nothing remembered
  CUstreamCaptureMode mode{};
  if (!exchange_to_relaxed(t, mode,
                           "switching tether's releasing thread to relaxed capture mode (a GLOBAL-mode capture on "
                           "another thread may be invalidated by its releases)"))
    return;
  r.entries[r.n++] = {&t, mode};
}

RelaxedScope::RelaxedScope(const DriverTable& t) noexcept {
  CUstreamCaptureMode mode{};
  if (!exchange_to_relaxed(t, mode,
                           "switching to relaxed capture mode for a call that may invalidate a stream capture (it "
                           "runs in the thread's own mode)"))
    return;
  t_ = &t;
  previous_ = mode;
}

RelaxedScope::~RelaxedScope() {
  if (!t_) return;
  if (CUresult r = raw<Entry::cuThreadExchangeStreamCaptureMode>(*t_, &previous_); r != CUDA_SUCCESS)
    report_failure(*t_, Entry::cuThreadExchangeStreamCaptureMode, r,
                   "restoring the thread's capture mode (it stays RELAXED)");
}

void restore_capture_modes() noexcept {
  RelaxedTables& r = t_relaxed;
  while (r.n) {
    auto [t, mode] = r.entries[--r.n];
    raw<Entry::cuThreadExchangeStreamCaptureMode>(*t, &mode);
  }
}

Entry release_entry(const ReleaseHandle& h) noexcept {
  return std::visit([](auto x) { return release_entry<decltype(x)>(); }, h);
}

void release_owned(const ContextPtr& owner, ReleaseHandle h, const char* what) noexcept {
  release_core(owner->table, owner->context, owner, h, what, verdict(act_of(release_entry(h))), false);
}

JobOutcome run_release_job(Job& job) noexcept {
  auto& j = static_cast<ReleaseJob&>(job);
  const Verdict v = verdict(act_of(release_entry(j.handle)), true);
  if (v == Verdict::hand_over) return JobOutcome::hand_over;
  if (v == Verdict::go_when_host_idle) {
    // Held for the call: no tether host work can be queued while the release runs.
    std::unique_lock gate = Reclaimer::instance().try_host_idle_gate();
    if (!gate.owns_lock()) return JobOutcome::wait_host_idle;
    release_core(j.table, j.ctx, std::move(j.keep), j.handle, j.what, Verdict::go, true);
  } else {
    release_core(j.table, j.ctx, std::move(j.keep), j.handle, j.what, v, true);
  }
  delete &j;
  return JobOutcome::done;
}

namespace {

// Every ContextState holding a retained primary context, so that the last one of a device can
// clear that device from the others' peer caches: its release may reset the primary context, and
// a reset context's peers lose their access to it (the next context of the device must be enabled
// again). Immortal: states may go during process exit. The lock is never held across a driver call.
struct LiveStates {
  std::mutex mu;
  std::vector<const ContextState*> list;
};
LiveStates& live_states() {
  static LiveStates* p = new LiveStates;
  return *p;
}

void register_state(const ContextState& s) {
  LiveStates& l = live_states();
  std::lock_guard lock(l.mu);
  l.list.push_back(&s);
}

void unregister_state(const ContextState& s) noexcept {
  LiveStates& l = live_states();
  std::lock_guard lock(l.mu);
  auto it = std::find(l.list.begin(), l.list.end(), &s);
  if (it == l.list.end()) return;  // never registered (Context::primary failed)
  l.list.erase(it);
  if (s.device < 0 || s.device >= 64) return;
  for (const ContextState* o : l.list)
    if (o->table == s.table && o->device == s.device) return;  // still retained: no reset
  const std::uint64_t keep = ~(std::uint64_t{1} << s.device);
  for (const ContextState* o : l.list)
    if (o->table == s.table) o->peers.fetch_and(keep, std::memory_order_acq_rel);
}

}  // namespace

bool enable_peer(const ContextState& self, const ContextState& peer, std::string_view what) {
  const CUdevice d = peer.device;
  if (d == self.device) return true;
  const std::uint64_t bit = d >= 0 && d < 64 ? std::uint64_t{1} << d : 0;
  if (self.peers.load(std::memory_order_acquire) & bit) return true;
  if (self.no_peers.load(std::memory_order_acquire) & bit) return false;
  check_calls_allowed(what);
  CUresult r = CUDA_SUCCESS;
  {
    // Why RELAXED: the call may come inside a stream capture (a captured kernel's first use of a
    // buffer of another device), and tether's own calls never invalidate a capture.
    RelaxedScope relaxed(*self.table);
    ScopedContext scope(*self.table, self.context, ScopedContext::calls_checked);
    r = raw<Entry::cuCtxEnablePeerAccess>(*self.table, peer.context, 0u);
  }
  if (r == CUDA_SUCCESS || r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
    self.peers.fetch_or(bit, std::memory_order_acq_rel);
    return true;
  }
  if (r == CUDA_ERROR_PEER_ACCESS_UNSUPPORTED) {
    self.no_peers.fetch_or(bit, std::memory_order_acq_rel);
    return false;
  }
  throw_call_error(*self.table, Entry::cuCtxEnablePeerAccess, r,
                   fmt::format("{}: enabling access from device {}'s context to the memory of device {}", what,
                               self.device, d));
}

void enable_for_kernel(const ContextState& kernel, std::string_view name, std::span<const ForeignArg> args,
                       std::string_view what) {
  for (const ForeignArg& a : args) {
    const ContextState& peer = *a.state;
    if (enable_peer(kernel, peer, what)) continue;
    throw UsageError(fmt::format(
        "{}: argument {} of kernel '{}' is a buffer of device {}, and the kernel runs on device {}, which cannot "
        "access device {}'s memory on this machine (no peer access between them: cuDeviceCanAccessPeer 0, "
        "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED; Context::can_access_peer tells beforehand): copy the data into a "
        "buffer of device {} first (a memcpy node or Stream::memcpy, which need no peer access), or run the kernel "
        "on device {}",
        what, a.index, name, peer.device, kernel.device, peer.device, kernel.device, peer.device));
  }
}

ContextState::~ContextState() {
  if (!context) return;
  unregister_state(*this);
  const ReleaseHandle h(std::in_place_type<CUdevice>, device);
  release_core(table, nullptr, nullptr, h, "releasing a device's primary context", verdict(Act::release), false);
}

ScopedContext::ScopedContext(const DriverTable& table, CUcontext ctx) : table_(nullptr) {
  check_calls_allowed("a tether call");
  enter(table, ctx);
}

ScopedContext::ScopedContext(const DriverTable& table, CUcontext ctx, CallsChecked) : table_(nullptr) {
  enter(table, ctx);
}

void ScopedContext::enter(const DriverTable& table, CUcontext ctx) {
  CUcontext current = nullptr;
  call<Entry::cuCtxGetCurrent>(table, "finding the calling thread's current context", &current);
  if (current == ctx) return;
  if (current == nullptr) {
    call<Entry::cuCtxSetCurrent>(table, "making a context current for a tether call", ctx);
    return;
  }
  call<Entry::cuCtxPushCurrent>(table, "making a context current for a tether call", ctx);
  table_ = &table;
  pusher_ = std::this_thread::get_id();
}

ScopedContext::~ScopedContext() {
  if (!table_) return;  // nothing was pushed
  if (pusher_ != std::this_thread::get_id()) {
    // An Edit dropped on another thread than the one that opened it: popping here would pop this
    // thread's context. The push stays on the opening thread's stack (it had another context current).
    report_error("restoring the caller's context",
                 "an edit was dropped on another thread than the one that opened it; the context it pushed stays "
                 "pushed on the opening thread (pop it there with cuCtxPopCurrent)");
    return;
  }
  CUcontext popped = nullptr;
  CUresult r = raw<Entry::cuCtxPopCurrent>(*table_, &popped);
  if (r != CUDA_SUCCESS) report_failure(*table_, Entry::cuCtxPopCurrent, r, "restoring the caller's context");
}

void throw_empty(std::string_view what) {
  throw UsageError(fmt::format("this {} is moved from or empty (default-constructed, moved from, released or reset)",
                               what));
}

void throw_empty(std::string_view call, std::string_view type) {
  throw UsageError(fmt::format("{}: this {} is moved from or empty (default-constructed, moved from, released or "
                               "reset)",
                               call, type));
}

}  // namespace tether::detail

namespace tether {

Context Context::primary(const Runtime& rt, int ordinal) {
  detail::check_calls_allowed("Context::primary");
  if (ordinal < 0 || ordinal >= rt.device_count())
    throw UsageError(fmt::format("device ordinal {} is out of range: the {} driver sees {} device{}", ordinal,
                                 to_string(rt.kind()), rt.device_count(), rt.device_count() == 1 ? "" : "s"));
  const detail::DriverTable& t = detail::table_of(rt);
  CUdevice dev = 0;
  detail::call<detail::Entry::cuDeviceGet>(t, [&] { return fmt::format("getting device {}", ordinal); }, &dev, ordinal);
  // Why the state is made before the retain: if allocating it threw after the retain, the
  // reference would leak; its destructor releases only once `context` is set.
  auto state = std::make_shared<detail::ContextState>(rt, dev);
  CUcontext ctx = nullptr;
  detail::call<detail::Entry::cuDevicePrimaryCtxRetain>(
      t, [&] { return fmt::format("retaining the primary context of device {}", ordinal); }, &ctx, dev);
  state->context = ctx;
  detail::register_state(*state);  // may throw std::bad_alloc: the state then releases the context
  // Why a process-wide flag: a buffer of another device than a kernel's needs a context of a
  // second device first, so kernel specs skip the check until one exists (a single-device program
  // on a machine with several GPUs included).
  static std::atomic<int> first_device{-1};
  if (int first = -1; !first_device.compare_exchange_strong(first, dev) && first != dev)
    detail::several_devices.store(true, std::memory_order_relaxed);
  return Context(std::move(state));
}

Context Runtime::context(int ordinal) const { return Context::primary(*this, ordinal); }

CUdevice Context::device() const noexcept { return state_->device; }
CUcontext Context::get() const noexcept { return state_->context; }
Runtime Context::runtime() const noexcept { return state_->runtime; }

void Context::make_current() const {
  detail::check_calls_allowed("Context::make_current");
  detail::call<detail::Entry::cuCtxSetCurrent>(*state_->table, "making a context current on the calling thread",
                                               state_->context);
}

namespace detail {
namespace {
std::atomic<void (*)() noexcept> g_ctx_synchronize_observer{nullptr};
}  // namespace
void observe_context_synchronize(void (*fn)() noexcept) noexcept { g_ctx_synchronize_observer.store(fn); }
}  // namespace detail

void Context::synchronize() const {
  detail::check_calls_allowed("Context::synchronize");
  detail::ScopedContext scope(*state_);
  if (auto* observe = detail::g_ctx_synchronize_observer.load(std::memory_order_acquire)) observe();
  detail::call<detail::Entry::cuCtxSynchronize>(*state_->table, "synchronizing a context");
}

Stream Context::make_stream(StreamFlags flags) const {
  detail::check_calls_allowed("Context::make_stream");
  auto burst = std::make_shared<detail::StreamBurst>();  // first: nothing can fail after the stream exists
  detail::ScopedContext scope(*state_);
  CUstream s = nullptr;
  detail::call<detail::Entry::cuStreamCreate>(*state_->table, "creating a stream", &s, static_cast<unsigned>(flags));
  return Stream(detail::UniqueHandle<CUstream, detail::DestroyStream>(s, detail::DestroyStream{state_, std::move(burst)}));
}

Event Context::make_event(EventFlags flags) const {
  detail::check_calls_allowed("Context::make_event");
  // Why allocate first: nothing can fail between creating the event and handing it to its owner.
  auto h = std::make_shared<detail::EventHandle>(CUevent{}, detail::DestroyEvent{state_});
  detail::ScopedContext scope(*state_);
  CUevent e = nullptr;
  detail::call<detail::Entry::cuEventCreate>(*state_->table, "creating an event", &e, static_cast<unsigned>(flags));
  h->reset(e);
  return Event(std::move(h));
}

namespace {
void check_same_runtime(const detail::ContextState& a, const detail::ContextState& b, const char* call) {
  if (a.table != b.table)
    throw UsageError(fmt::format("{}: the peer context belongs to the {} driver and this one to the {} driver; peer "
                                 "access joins contexts of one runtime",
                                 call, to_string(b.runtime.kind()), to_string(a.runtime.kind())));
}
}  // namespace

bool Context::can_access_peer(const Context& peer) const {
  const detail::ContextState& p = *peer.state_;
  check_same_runtime(*state_, p, "Context::can_access_peer");
  if (p.device == state_->device) return true;
  if (detail::peer_enabled(*state_, p.device)) return true;
  const std::uint64_t bit = p.device >= 0 && p.device < 64 ? std::uint64_t{1} << p.device : 0;
  if (state_->no_peers.load(std::memory_order_acquire) & bit) return false;
  detail::check_calls_allowed("Context::can_access_peer");
  int can = 0;
  detail::call<detail::Entry::cuDeviceCanAccessPeer>(
      *state_->table,
      [&] { return fmt::format("asking whether device {} can access the memory of device {}", state_->device, p.device); },
      &can, state_->device, p.device);
  if (!can) state_->no_peers.fetch_or(bit, std::memory_order_acq_rel);  // the topology does not change
  return can != 0;
}

void Context::enable_peer_access(const Context& peer) const {
  const detail::ContextState& p = *peer.state_;
  check_same_runtime(*state_, p, "Context::enable_peer_access");
  if (detail::enable_peer(*state_, p, "Context::enable_peer_access")) return;
  throw UsageError(fmt::format(
      "Context::enable_peer_access: device {} cannot access the memory of device {} on this machine (no peer "
      "access between them: cuDeviceCanAccessPeer 0, CUDA_ERROR_PEER_ACCESS_UNSUPPORTED; can_access_peer tells "
      "beforehand): keep the memory a kernel of device {} uses on device {}, copying it there with a memcpy "
      "(Stream::memcpy, a memcpy node), which needs no peer access",
      state_->device, p.device, state_->device, state_->device));
}

Module Context::load_module(const Image& image) const {
  detail::check_calls_allowed("Context::load_module");
  auto h = std::make_shared<detail::ModuleHandle>(CUmodule{}, detail::UnloadModule{state_});
  detail::ScopedContext scope(*state_);
  CUmodule m = nullptr;
  detail::call<detail::Entry::cuModuleLoadData>(
      *state_->table, [&] { return fmt::format("loading a module image of {} bytes", image.size()); }, &m,
      static_cast<const void*>(image.data()));
  h->reset(m);
  return Module(std::move(h));
}

}  // namespace tether
