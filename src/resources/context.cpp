// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "context.hpp"

#include "../attach/reclaimer.hpp"
#include "buffer.hpp"
#include "event.hpp"
#include "module.hpp"
#include "stream.hpp"

namespace tether::detail {

void report_failure(const DriverTable& t, Entry entry, CUresult r, const char* what) noexcept {
  try {
    throw_call_error(t, entry, r, what);
  } catch (const std::exception& e) {
    report_error(what, e.what());
  } catch (...) {
    report_error(what, "unknown error");
  }
}

namespace {

// Why these: each waits for every running host callback (cuMemFree: ctx_block_probe 4f;
// cuMemFreeHost and cuModuleUnload: release_probe A10, A12), and while cuMemFree or cuMemFreeHost
// waits, a cuMemAlloc or cuMemAllocHost on any other thread waits behind it (release_probe B3, B5,
// B6; block_probe "free"; H200, 2026-12-02). An application thread whose own host node waits for
// it must never end up in one of them, so they run on the reclaimer only, and there only while no
// tether host work is queued or running (try_blocking_release_gate). Device memory is no longer
// among them: tether frees it with cuMemFreeAsync (free_device_memory), which returns at once
// while a callback runs and which nothing waits behind (A4, B2, C1).
constexpr bool blocks_while_callbacks_run(Entry e) noexcept {
  return e == Entry::cuMemFree || e == Entry::cuMemFreeHost || e == Entry::cuModuleUnload;
}
// Releases that must run on the reclaimer even though they do not block: cuMemFreeAsync from a
// thread in GLOBAL capture mode invalidates another thread's GLOBAL capture (release_probe D1); the
// reclaimer runs in RELAXED mode (D2).
constexpr bool reclaimer_only(Entry e) noexcept { return blocks_while_callbacks_run(e) || e == Entry::cuMemFreeAsync; }

// One deferred release: one allocation, no std::function.
class DeferredRelease final : public Reclaimable {
 public:
  DeferredRelease(const DriverTable* t, CUcontext ctx, ContextPtr keep, Entry entry, ReleaseCall call,
                  std::uintptr_t bits, const char* what) noexcept
      : t_(t), ctx_(ctx), keep_(std::move(keep)), entry_(entry), call_(call), bits_(bits), what_(what) {}
  void reclaim() noexcept override;

 private:
  const DriverTable* t_;
  CUcontext ctx_;
  ContextPtr keep_;
  Entry entry_;
  ReleaseCall call_;
  std::uintptr_t bits_;
  const char* what_;
};

void release_core(const DriverTable* t, CUcontext ctx, ContextPtr keep, Entry entry, ReleaseCall call,
                  std::uintptr_t bits, const char* what, bool may_defer) noexcept;

void defer_release(const DriverTable* t, CUcontext ctx, ContextPtr keep, Entry entry, ReleaseCall call,
                   std::uintptr_t bits, const char* what) noexcept {
  Reclaimer& r = Reclaimer::instance();
  try {
    r.ensure_started();
    r.push(new DeferredRelease(t, ctx, std::move(keep), entry, call, bits, what));
  } catch (...) {
    report_current_exception("deferring a release to the reclaimer (the resource is leaked)");
  }
}

void DeferredRelease::reclaim() noexcept {
  Reclaimer& r = Reclaimer::instance();
  // An application thread draining (tether::reclaim()) hands a release that can block (or that
  // would invalidate other threads' captures in its capture mode) to the reclaimer's own thread
  // instead of making it: its own host node may be what the release waits for.
  if (reclaimer_only(entry_) && !on_reclaimer_thread() && !r.thread_gone()) return r.push_to_thread(this);
  if (blocks_while_callbacks_run(entry_) && on_reclaimer_thread() && !r.stopping()) {
    std::unique_lock gate = try_blocking_release_gate();
    if (!gate.owns_lock()) return r.park(this);  // retried when no tether host work is in flight
    release_core(t_, ctx_, std::move(keep_), entry_, call_, bits_, what_, false);
  } else {
    release_core(t_, ctx_, std::move(keep_), entry_, call_, bits_, what_, false);
  }
  delete this;
}

// Makes `ctx` current for a release without throwing. On the reclaimer (a thread tether owns) the
// context is set and left current, so a batch of releases costs one query each; on any other
// thread it is pushed and popped, leaving that thread as it was. Sets `pop` when a pop is owed.
CUresult enter_context(const DriverTable& t, CUcontext ctx, bool& pop) noexcept {
  pop = false;
  CUcontext cur = nullptr;
  CUresult r = raw<Entry::cuCtxGetCurrent>(t, &cur);
  if (r != CUDA_SUCCESS) return r;
  if (cur == ctx) return CUDA_SUCCESS;
  if (on_reclaimer_thread()) return raw<Entry::cuCtxSetCurrent>(t, ctx);
  r = raw<Entry::cuCtxPushCurrent>(t, ctx);
  pop = r == CUDA_SUCCESS;
  return r;
}

// The release rule, written once. `ctx` null means the call needs no context (the primary context
// release). `keep` holds the owning context's state while a deferred release waits, so the
// primary context is still retained when the release finally runs. `may_defer` is false on the
// reclaimer's attempt: a refusal there would loop forever, so it is reported instead.
void release_core(const DriverTable* t, CUcontext ctx, ContextPtr keep, Entry entry, ReleaseCall call,
                  std::uintptr_t bits, const char* what, bool may_defer) noexcept {
  // Why check before any call: inside a host callback or user-object destructor even
  // cuCtxGetCurrent is refused (and the simulator records the attempt as a violation).
  const bool blocking = blocks_while_callbacks_run(entry);
  // Why a blocking release found on the reclaimer is deferred too: it may go only while no tether
  // host work is in flight, and only a queued release can wait for that (parked) without holding
  // up the rest of the queue.
  if (may_defer && (cuda_forbidden_here() || (reclaimer_only(entry) && !on_reclaimer_thread()) ||
                    (blocking && on_reclaimer_thread() && !Reclaimer::instance().stopping())))
    return defer_release(t, ctx, std::move(keep), entry, call, bits, what);
  if (forked_child()) return;  // the driver is unusable in a forked child: leaked on purpose
  if (draining_here()) relax_capture_mode(*t);  // never an application thread's own mode
  bool pop = false;
  if (ctx) {
    CUresult entered = enter_context(*t, ctx, pop);
    if (entered == CUDA_ERROR_NOT_PERMITTED && may_defer)
      return defer_release(t, ctx, std::move(keep), entry, call, bits, what);
    if (entered != CUDA_SUCCESS) return report_failure(*t, Entry::cuCtxSetCurrent, entered, what);
  }
  CUresult r = CUDA_SUCCESS;
  if (blocking) {
    BlockingReleaseScope releasing;
    r = call(*t, bits);
  } else {
    r = call(*t, bits);
  }
  if (pop) {
    CUcontext popped = nullptr;
    CUresult p = raw<Entry::cuCtxPopCurrent>(*t, &popped);
    if (p != CUDA_SUCCESS) report_failure(*t, Entry::cuCtxPopCurrent, p, what);
  }
  if (r == CUDA_SUCCESS) return;
  if (r == CUDA_ERROR_NOT_PERMITTED && may_defer)
    return defer_release(t, ctx, std::move(keep), entry, call, bits, what);
  report_failure(*t, entry, r, what);
}

CUresult release_primary_call(const DriverTable& t, std::uintptr_t device) {
  return raw<Entry::cuDevicePrimaryCtxRelease>(t, static_cast<CUdevice>(device));
}

// Tables whose capture mode this thread switched to RELAXED, with the mode to restore.
struct RelaxedTables {
  std::array<std::pair<const DriverTable*, CUstreamCaptureMode>, 4> entries{};
  std::size_t n = 0;
};
thread_local RelaxedTables t_relaxed;

}  // namespace

void relax_capture_mode(const DriverTable& t) noexcept {
  RelaxedTables& r = t_relaxed;
  for (std::size_t i = 0; i < r.n; ++i)
    if (r.entries[i].first == &t) return;
  if (r.n == r.entries.size()) return;  // more drivers than tether ever opens: nothing remembered
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (CUresult res = raw<Entry::cuThreadExchangeStreamCaptureMode>(t, &mode); res != CUDA_SUCCESS) {
    report_failure(t, Entry::cuThreadExchangeStreamCaptureMode, res,
                   "switching tether's releasing thread to relaxed capture mode (a GLOBAL-mode capture on another "
                   "thread may be invalidated by its releases)");
    return;
  }
  r.entries[r.n++] = {&t, mode};
}

RelaxedScope::RelaxedScope(const DriverTable& t) noexcept {
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (CUresult r = raw<Entry::cuThreadExchangeStreamCaptureMode>(t, &mode); r != CUDA_SUCCESS) {
    report_failure(t, Entry::cuThreadExchangeStreamCaptureMode, r,
                   "switching to relaxed capture mode for a call that may invalidate a stream capture (it runs in "
                   "the thread's own mode)");
    return;
  }
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

void release_owned(const ContextPtr& owner, Entry entry, ReleaseCall call, std::uintptr_t bits,
                   const char* what) noexcept {
  release_core(owner->table, owner->context, owner, entry, call, bits, what, true);
}

ContextState::~ContextState() {
  if (!context) return;
  release_core(table, nullptr, nullptr, Entry::cuDevicePrimaryCtxRelease, &release_primary_call,
               static_cast<std::uintptr_t>(device), "releasing a device's primary context", true);
}

ScopedContext::ScopedContext(const DriverTable& table, CUcontext ctx) : table_(nullptr) {
  check_calls_allowed("a tether call");
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
