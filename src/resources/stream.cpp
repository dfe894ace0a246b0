// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "stream.hpp"

#include "../attach/attachment.hpp"

namespace tether {

namespace detail {

namespace {

// Runs on the driver's callback thread: no CUDA call, no release there, only a hand-over.
void burst_passed(void* head) noexcept { defer(static_cast<Job*>(static_cast<NodeAttachment*>(head))); }

bool stream_capturing(const DriverTable& t, CUstream s) noexcept {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  return raw<Entry::cuStreamIsCapturing>(t, s, &st) != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE;
}

// Flushes a burst that could not get a marker: waits for the stream instead, or keeps the owners
// for good (a leak, never a release while the stream may still use them).
void flush_the_hard_way(const DriverTable& t, CUstream s, StreamBurst& b, CUresult why) noexcept {
  if (b.owners.empty()) return;
  if (!stream_capturing(t, s) && raw<Entry::cuStreamSynchronize>(t, s) == CUDA_SUCCESS) {
    defer(std::move(b.owners));
    return;
  }
  report_error("handing a stream's owners to a marker", fmt::format("cuLaunchHostFunc failed with {}, and the stream "
                                                                    "could not be waited for: its owners are kept for "
                                                                    "good",
                                                                    result_name(why)));
  (void)OwnersAccess::release(b.owners);  // deliberately leaked
}

}  // namespace

CUstreamCaptureStatus capture_status(const DriverTable& t, CUstream s, std::string_view what) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  call<Entry::cuStreamIsCapturing>(t, fmt::format("{}: asking whether the stream captures", what), s, &st);
  return st;
}

CUresult flush_burst_locked(const DriverTable& t, CUstream s, StreamBurst& b) noexcept {
  b.ops = 0;
  if (b.owners.empty()) return CUDA_SUCCESS;
  try {
    Reclaimer::instance().ensure_started();
  } catch (...) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  NodeAttachment* head = OwnersAccess::release(b.owners);
  CUresult r = raw<Entry::cuLaunchHostFunc>(t, s, &burst_passed, static_cast<void*>(head));
  if (r != CUDA_SUCCESS) OwnersAccess::restore(b.owners, head);
  return r;
}

void flush_burst(const ContextState& cs, CUstream s, StreamBurst& b) {
  std::lock_guard lock(b.mu);
  if (CUresult r = flush_burst_locked(*cs.table, s, b); r != CUDA_SUCCESS)
    throw_call_error(*cs.table, Entry::cuLaunchHostFunc, r, "handing a stream's owners to a marker");
}

namespace {
void flush_before_destroy(const DriverTable& t, CUstream s, StreamBurst& b) noexcept {
  std::lock_guard lock(b.mu);
  if (b.owners.empty()) return;
  if (stream_capturing(t, s)) {
    // A marker would be captured into someone else's graph, and a wait would invalidate it.
    report_error("dropping a stream that captures", "the owners of its earlier operations are kept for good");
    (void)OwnersAccess::release(b.owners);
    return;
  }
  if (CUresult r = flush_burst_locked(t, s, b); r != CUDA_SUCCESS) flush_the_hard_way(t, s, b, r);
}
}  // namespace

// A stream dropped where CUDA calls are refused, with owners in its burst (a Job of kind
// destroy_stream): its last marker, then its destroy.
struct StreamDestroyJob final : Job {
  StreamDestroyJob(ContextPtr o, CUstream s, std::shared_ptr<StreamBurst> b) noexcept
      : Job(Kind::destroy_stream), owner(std::move(o)), stream(s), burst(std::move(b)) {}
  ContextPtr owner;
  CUstream stream;
  std::shared_ptr<StreamBurst> burst;
};

void run_stream_destroy_job(Job& j) noexcept {
  auto& job = static_cast<StreamDestroyJob&>(j);
  try {
    {
      ScopedContext scope(*job.owner);
      flush_before_destroy(*job.owner->table, job.stream, *job.burst);
    }
    release_with<Entry::cuStreamDestroy>(job.owner, job.stream, "destroying a stream");
  } catch (...) {
    report_current_exception("destroying a stream on the reclaimer (it is leaked)");
  }
  delete &job;
}

void DestroyStream::operator()(CUstream s) const noexcept {
  if (burst && !burst->owners.empty()) {
    if (cuda_forbidden_here()) {
      // Inside a host callback or a user-object destructor: the marker and the destroy both go
      // to the reclaimer, in that order.
      defer_new<StreamDestroyJob>("deferring a stream's destruction to the reclaimer (it is leaked)", owner, s, burst);
      return;
    }
    try {
      ScopedContext scope(*owner);
      flush_before_destroy(*owner->table, s, *burst);
    } catch (...) {
      flush_the_hard_way(*owner->table, s, *burst, CUDA_ERROR_INVALID_CONTEXT);
    }
  }
  release_with<Entry::cuStreamDestroy>(owner, s, "destroying a stream");
}

}  // namespace detail

Stream Stream::from_native_handle(const Context& ctx, CUstream stream) noexcept {
  std::shared_ptr<detail::StreamBurst> burst;
  try {
    burst = std::make_shared<detail::StreamBurst>();
  } catch (...) {
    // Without a burst the stream's operations throw UsageError (see StreamAccess::burst).
  }
  detail::DestroyStream destroy{detail::state_of(ctx), std::move(burst)};
  return Stream(detail::UniqueHandle<CUstream, detail::DestroyStream>(stream, std::move(destroy)));
}

const detail::ContextState& Stream::state(const char* what) const {
  detail::check_calls_allowed(what);
  if (!handle_) detail::throw_empty(what, "Stream");
  return *handle_.deleter().owner;
}

CUstream Stream::release() noexcept {
  if (handle_ && handle_.deleter().burst) {
    const detail::ContextState& s = *handle_.deleter().owner;
    if (!detail::cuda_forbidden_here()) {
      try {
        detail::ScopedContext scope(s);
        detail::flush_before_destroy(*s.table, get(), *handle_.deleter().burst);
      } catch (...) {
        detail::flush_the_hard_way(*s.table, get(), *handle_.deleter().burst, CUDA_ERROR_INVALID_CONTEXT);
      }
    }
  }
  return handle_.release();
}

namespace {
// Why refused before any driver call: waiting for or querying a capturing stream invalidates its
// capture in every mode (capture facts c4).
void refuse_capturing(const detail::DriverTable& t, CUstream s, const char* what, const char* doing) {
  if (detail::capture_status(t, s, what) != CU_STREAM_CAPTURE_STATUS_NONE)
    throw UsageError(fmt::format("{}: the stream is capturing ({} it would invalidate the capture); end the capture "
                                 "first",
                                 what, doing));
}
}  // namespace

void Stream::synchronize() const {
  const detail::ContextState& s = state("Stream::synchronize");
  detail::ScopedContext scope(s);
  refuse_capturing(*s.table, get(), "Stream::synchronize", "synchronizing");
  // The burst goes to a marker; if the marker cannot be queued, the owners are held here and
  // released once the wait below has seen the stream pass them (the failure is reported).
  Owners passed;
  if (detail::StreamBurst* b = handle_.deleter().burst.get()) {
    std::lock_guard lock(b->mu);
    if (CUresult r = detail::flush_burst_locked(*s.table, get(), *b); r != CUDA_SUCCESS) {
      passed = std::move(b->owners);
      b->ops = 0;
      detail::report_failure(*s.table, detail::Entry::cuLaunchHostFunc, r,
                             "handing a stream's owners to a marker before synchronizing (they are released after "
                             "the wait instead)");
    }
  }
  detail::RelaxedScope relaxed(*s.table);
  CUresult r = detail::raw<detail::Entry::cuStreamSynchronize>(*s.table, get());
  if (r != CUDA_SUCCESS) {
    if (!passed.empty()) {
      // Not known to be passed: back into the burst, for a later marker or wait.
      std::lock_guard lock(handle_.deleter().burst->mu);
      handle_.deleter().burst->owners += std::move(passed);
    }
    detail::throw_call_error(*s.table, detail::Entry::cuStreamSynchronize, r, "synchronizing a stream");
  }
  detail::defer(std::move(passed));
}

bool Stream::query() const {
  const detail::ContextState& s = state("Stream::query");
  detail::ScopedContext scope(s);
  refuse_capturing(*s.table, get(), "Stream::query", "querying");
  detail::RelaxedScope relaxed(*s.table);
  CUresult r = detail::raw<detail::Entry::cuStreamQuery>(*s.table, get());
  if (r == CUDA_SUCCESS) return true;
  if (r == CUDA_ERROR_NOT_READY) return false;
  detail::throw_call_error(*s.table, detail::Entry::cuStreamQuery, r, "querying a stream");
}

bool Stream::capturing() const {
  const detail::ContextState& s = state("Stream::capturing");
  return detail::capture_status(*s.table, get(), "Stream::capturing") != CU_STREAM_CAPTURE_STATUS_NONE;
}

Context Stream::context() const {
  if (!handle_) detail::throw_empty("Stream::context", "Stream");
  return detail::context_from(handle_.deleter().owner);
}

}  // namespace tether
