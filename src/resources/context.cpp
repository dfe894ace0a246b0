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

// Reports a failed release through the error hook, with the same message a throwing call gives.
void report_failure(const DriverTable& t, Entry entry, CUresult r, const char* what) noexcept {
  try {
    throw_call_error(t, entry, r, what);
  } catch (const std::exception& e) {
    report_error(what, e.what());
  } catch (...) {
    report_error(what, "unknown error");
  }
}

// The release rule, written once. `ctx` null means the call needs no context (the primary context
// release). `keep` holds the owning context's state while a deferred release waits, so the
// primary context is still retained when the release finally runs. `may_defer` is false on the
// reclaimer's second attempt: a refusal there would loop forever, so it is reported instead.
void release_core(const DriverTable* t, CUcontext ctx, ContextPtr keep, Entry entry, ReleaseCall call,
                  std::uintptr_t bits, const char* what, bool may_defer) noexcept {
  auto defer = [&] {
    defer_to_reclaimer([t, ctx, keep = std::move(keep), entry, call, bits, what] {
      release_core(t, ctx, keep, entry, call, bits, what, false);
    });
  };
  // Why check before any call: inside a host callback or user-object destructor even
  // cuCtxPushCurrent is refused (and the simulator records the attempt as a violation).
  if (may_defer && cuda_forbidden_here()) return defer();
  if (ctx) {
    CUresult pushed = raw<Entry::cuCtxPushCurrent>(*t, ctx);
    if (pushed == CUDA_ERROR_NOT_PERMITTED && may_defer) return defer();
    if (pushed != CUDA_SUCCESS) return report_failure(*t, Entry::cuCtxPushCurrent, pushed, what);
  }
  CUresult r = call(*t, bits);
  if (ctx) {
    CUcontext popped = nullptr;
    CUresult p = raw<Entry::cuCtxPopCurrent>(*t, &popped);
    if (p != CUDA_SUCCESS) report_failure(*t, Entry::cuCtxPopCurrent, p, what);
  }
  if (r == CUDA_SUCCESS) return;
  if (r == CUDA_ERROR_NOT_PERMITTED && may_defer) return defer();
  report_failure(*t, entry, r, what);
}

CUresult release_primary_call(const DriverTable& t, std::uintptr_t device) {
  return raw<Entry::cuDevicePrimaryCtxRelease>(t, static_cast<CUdevice>(device));
}

}  // namespace

void release_owned(const ContextPtr& owner, Entry entry, ReleaseCall call, std::uintptr_t bits,
                   const char* what) noexcept {
  release_core(owner->table, owner->context, owner, entry, call, bits, what, true);
}

ContextState::~ContextState() {
  if (!context) return;
  release_core(table, nullptr, nullptr, Entry::cuDevicePrimaryCtxRelease, &release_primary_call,
               static_cast<std::uintptr_t>(device), "releasing a device's primary context", true);
}

ScopedContext::ScopedContext(const DriverTable& table, CUcontext ctx) : table_(&table) {
  // One cheap query instead of a push and a pop when the caller already has the context current.
  CUcontext current = nullptr;
  call<Entry::cuCtxGetCurrent>(table, "finding the calling thread's current context", &current);
  if (current == ctx && ctx) {
    table_ = nullptr;
    return;
  }
  call<Entry::cuCtxPushCurrent>(table, "making a context current for a tether call", ctx);
}

ScopedContext::~ScopedContext() {
  if (!table_) return;  // nothing was pushed
  CUcontext popped = nullptr;
  CUresult r = raw<Entry::cuCtxPopCurrent>(*table_, &popped);
  if (r != CUDA_SUCCESS) report_failure(*table_, Entry::cuCtxPopCurrent, r, "restoring the caller's context");
}

void throw_empty(std::string_view what) {
  throw UsageError(fmt::format("this {} is empty (moved from, released or default-constructed)", what));
}

}  // namespace tether::detail

namespace tether {

Context Context::primary(const Runtime& rt, int ordinal) {
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
  detail::call<detail::Entry::cuCtxSetCurrent>(*state_->table, "making a context current on the calling thread",
                                               state_->context);
}

void Context::synchronize() const {
  detail::ScopedContext scope(*state_);
  detail::call<detail::Entry::cuCtxSynchronize>(*state_->table, "synchronizing a context");
}

Stream Context::make_stream(StreamFlags flags) const {
  detail::ScopedContext scope(*state_);
  CUstream s = nullptr;
  detail::call<detail::Entry::cuStreamCreate>(*state_->table, "creating a stream", &s, static_cast<unsigned>(flags));
  return Stream(detail::UniqueHandle<CUstream, detail::DestroyStream>(s, detail::DestroyStream{state_}));
}

Event Context::make_event(EventFlags flags) const {
  // Why allocate first: nothing can fail between creating the event and handing it to its owner.
  auto h = std::make_shared<detail::EventHandle>(CUevent{}, detail::DestroyEvent{state_});
  detail::ScopedContext scope(*state_);
  CUevent e = nullptr;
  detail::call<detail::Entry::cuEventCreate>(*state_->table, "creating an event", &e, static_cast<unsigned>(flags));
  h->reset(e);
  return Event(std::move(h));
}

Module Context::load_module(const Image& image) const {
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
