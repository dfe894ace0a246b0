// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "context.hpp"
#include "unique_handle.hpp"

namespace tether::detail {

// cuStreamDestroy with the stream's context pushed, under the release rule.
struct DestroyStream {
  ContextPtr owner;
  void operator()(CUstream s) const noexcept;
};

}  // namespace tether::detail

TETHER_EXPORT namespace tether {

/// An owned CUDA stream (`cuStreamCreate` through `Context::make_stream`, `cuStreamDestroy` when
/// dropped). Move-only; a moved-from or default-constructed Stream is empty, and using an empty
/// stream throws UsageError (it never silently means the legacy default stream). Dropping a
/// stream with work still queued is fine: the work completes. The stream keeps its context
/// alive. Thread safety: concurrent const members are safe; destruction, `reset`, `release` and
/// assignment need exclusive access. The destructor may run on any thread (see the release rule
/// in docs/design/attachments.md) and never throws.
class Stream {
 public:
  /// An empty stream.
  Stream() noexcept = default;

  /// Takes ownership of `stream`, a stream created in `ctx` (it will be destroyed with
  /// `cuStreamDestroy`). Never calls the driver.
  static Stream from_native_handle(const Context& ctx, CUstream stream) noexcept;

  /// The driver handle (null when empty).
  CUstream get() const noexcept { return handle_.get(); }

  /// Waits until all work queued on the stream has finished (`cuStreamSynchronize`, context
  /// pushed). Throws UsageError when empty, DriverError (which may report an error of earlier
  /// asynchronous work).
  void synchronize() const;

  /// Whether all work queued on the stream has finished (`cuStreamQuery`, context pushed):
  /// `CUDA_SUCCESS` is true, `CUDA_ERROR_NOT_READY` false. Throws UsageError when empty,
  /// DriverError for any other result.
  bool query() const;

  /// The context the stream belongs to. Throws UsageError when empty.
  Context context() const;

  /// Gives up ownership: returns the handle (the caller must destroy it) and leaves the stream
  /// empty. The context is not kept alive for the returned handle.
  CUstream release() noexcept { return handle_.release(); }
  /// Destroys the stream now (under the release rule) and leaves this object empty.
  void reset() noexcept { handle_.reset(); }
  /// Exchanges the streams of two objects.
  void swap(Stream& other) noexcept { handle_.swap(other.handle_); }
  /// Whether a stream is owned.
  explicit operator bool() const noexcept { return static_cast<bool>(handle_); }

 private:
  friend class Context;
  explicit Stream(detail::UniqueHandle<CUstream, detail::DestroyStream> h) noexcept : handle_(std::move(h)) {}
  const detail::ContextState& state(const char* what) const;

  detail::UniqueHandle<CUstream, detail::DestroyStream> handle_;
};

}  // namespace tether
