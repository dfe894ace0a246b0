// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "context.hpp"
#include "stream.hpp"
#include "unique_handle.hpp"

namespace tether::detail {

// cuEventDestroy with the event's context pushed, under the release rule.
struct DestroyEvent {
  ContextPtr owner;
  void operator()(CUevent e) const noexcept;
};

using EventHandle = UniqueHandle<CUevent, DestroyEvent>;

}  // namespace tether::detail

TETHER_EXPORT namespace tether {

/// A shared reference to a CUDA event (`cuEventCreate` through `Context::make_event`;
/// `cuEventDestroy` when the last copy is dropped). Shared because graph event nodes keep the
/// event they record or wait for alive. Copying (and moving) shares the event; an Event is never
/// empty. The event keeps its context alive; every driver call runs with that context pushed.
/// Thread safety: all members are safe to call concurrently; the last copy may be dropped on any
/// thread (the release rule of docs/design/attachments.md), and never throws.
class Event {
 public:
  /// What `inspect` shows for an event a node owns.
  friend std::string tether_owner_label(const Event&) { return "Event"; }
  Event(const Event&) noexcept = default;
  Event& operator=(const Event&) noexcept = default;
  ~Event() = default;

  /// The driver handle, valid while any copy lives.
  CUevent get() const noexcept { return handle_->get(); }

  /// Records the event on `stream` (`cuEventRecord`): it completes when the work queued on the
  /// stream so far has finished. Throws UsageError if `stream` is empty, DriverError (for
  /// example a stream of another context).
  void record(const Stream& stream) const;

  /// Waits until the most recent record has completed (`cuEventSynchronize`); returns at once if
  /// the event was never recorded. Throws DriverError.
  void synchronize() const;

  /// Whether the most recent record has completed (`cuEventQuery`): `CUDA_SUCCESS` is true,
  /// `CUDA_ERROR_NOT_READY` false. Throws DriverError for any other result.
  bool query() const;

  /// Milliseconds between two completed records (`cuEventElapsedTime`), about 0.5 µs resolution.
  /// Throws DriverError: CUDA_ERROR_NOT_READY if either has not completed, CUDA_ERROR_INVALID_HANDLE
  /// if either was never recorded or was made with `EventFlags::disable_timing`.
  static float elapsed_ms(const Event& start, const Event& end);

  /// The context the event belongs to.
  Context context() const noexcept;

  /// Whether both share the same event.
  friend bool operator==(const Event& a, const Event& b) noexcept { return a.handle_ == b.handle_; }

 private:
  friend class Context;
  explicit Event(std::shared_ptr<const detail::EventHandle> h) noexcept : handle_(std::move(h)) {}

  std::shared_ptr<const detail::EventHandle> handle_;
};

}  // namespace tether
