// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "../attach/owners.hpp"
#include "context.hpp"
#include "unique_handle.hpp"

TETHER_EXPORT namespace tether {
class Event;
class Launch;
struct Grid;
struct Block;
template <class T>
struct AllocResult;
template <class... Args>
class Kernel;
template <class T>
struct Unowned;
template <class T>
class Param;
template <class Kind>
class Node;
struct HostNode;
struct EventRecordNode;
struct EventWaitNode;
struct MemcpyNode;
struct MemsetNode;
struct MemAllocNode;
struct MemFreeNode;
template <class... Args>
struct KernelNode;
}  // namespace tether

namespace tether::detail {

// The owners of a stream's operations issued outside capture, kept until the stream has passed
// them: one host-function marker per burst hands a whole burst to the reclaimer (never released
// on the driver's callback thread).
struct StreamBurst {
  std::mutex mu;
  Owners owners;
  std::size_t ops = 0;
};

// cuStreamDestroy with the stream's context pushed, under the release rule; first hands the
// burst still pending to a marker behind the stream's work.
struct DestroyStream {
  ContextPtr owner;
  std::shared_ptr<StreamBurst> burst;
  void operator()(CUstream s) const noexcept;
};

/// Hands the burst to a marker on `s` (cuLaunchHostFunc) unless it is empty; the caller holds
/// `b.mu`, and `s` must not be capturing (the marker would be captured). On failure the owners
/// stay in the burst.
CUresult flush_burst_locked(const DriverTable& t, CUstream s, StreamBurst& b) noexcept;
/// The same, taking the lock; throws DriverError.
void flush_burst(const ContextState& cs, CUstream s, StreamBurst& b);
/// cuStreamIsCapturing; throws DriverError naming `what`.
CUstreamCaptureStatus capture_status(const DriverTable& t, CUstream s, std::string_view what);

struct StreamAccess;

}  // namespace tether::detail

// Memory pools (mem_pool.hpp): the pool type Stream::alloc_buffer takes.
TETHER_EXPORT namespace tether {
class MemPool;
}  // namespace tether

TETHER_EXPORT namespace tether {

/// An owned CUDA stream (`cuStreamCreate` through `Context::make_stream`, `cuStreamDestroy` when
/// dropped). Move-only; a moved-from or default-constructed Stream is empty, and using an empty
/// stream throws UsageError (it never silently means the legacy default stream). Dropping a
/// stream with work still queued is fine: the work completes, and the owners of tether's
/// operations on it stay alive until it has. The stream keeps its context alive.
///
/// Stream work (docs/capture.md): `launch`, `memcpy`, `memset`, `host`, `record`, `wait`,
/// `alloc_async` and `free_async` take the same typed arguments and owner adapters as an edit's
/// node creators. Outside capture each operation keeps its owners until the stream has passed it:
/// they join the stream's current burst, and one host-function marker per burst (after 64
/// operations, before `synchronize`, before a capture begins, and when the stream is dropped)
/// hands the burst to tether's reclaimer once the stream reaches it. During a stream capture
/// (tether's `Capture`, or one begun by other code) the operation's owners are attached to the
/// captured node instead, and the operation returns that node's typed handle (usable at once, a
/// node of the Graph the capture ends in; invalid if the capture fails); outside capture, or where
/// the node cannot be identified, the handle is invalid and the owners are kept by the stream or,
/// anonymously, by the captured graph.
///
/// Thread safety: concurrent const members are safe (operations from several threads on one
/// stream are serialised by tether, in an unspecified order); destruction, `reset`, `release`
/// and assignment need exclusive access. No member may be called inside a host callback
/// (UsageError). The destructor may run on any thread (see the release rule in
/// docs/design/attachments.md) and never throws.
class Stream {
 public:
  /// What `inspect` shows for a stream a node owns.
  friend std::string tether_owner_label(const Stream&) { return "Stream"; }
  /// An empty stream.
  Stream() noexcept = default;

  /// Takes ownership of `stream`, a stream created in `ctx` (it will be destroyed with
  /// `cuStreamDestroy`). Never calls the driver.
  static Stream from_native_handle(const Context& ctx, CUstream stream) noexcept;

  /// The driver handle (null when empty).
  CUstream get() const noexcept { return handle_.get(); }

  /// Waits until all work queued on the stream has finished (`cuStreamSynchronize`, context
  /// pushed), after handing the stream's pending burst of owners to a marker: once it returns,
  /// those owners are on tether's reclaimer. Runs in RELAXED capture mode, so it never invalidates
  /// another stream's capture. Throws UsageError when empty or while the stream is capturing
  /// (synchronizing it would invalidate the capture), DriverError (which may report an error of
  /// earlier asynchronous work).
  void synchronize() const;

  /// Whether all work queued on the stream has finished (`cuStreamQuery`, context pushed, RELAXED
  /// capture mode): `CUDA_SUCCESS` is true, `CUDA_ERROR_NOT_READY` false. Throws UsageError when
  /// empty or while the stream is capturing, DriverError for any other result.
  bool query() const;

  /// Whether the stream takes part in a stream capture (`cuStreamIsCapturing`: active or
  /// invalidated, begun by tether or by other code). Throws UsageError when empty, DriverError.
  bool capturing() const;

  /// Launches `k` with `launch` (dimensions, dynamic shared memory, attributes) and `args`,
  /// checked at compile time like `Edit::launch` (count, types, no narrowing). `cuLaunchKernel`,
  /// or `cuLaunchKernelEx` when the Launch sets attributes; dynamic shared memory beyond 48 KiB
  /// raises the kernel's limit first. Keeps `k` and every owned argument (see the class comment).
  /// Throws UsageError for bad arguments (before any driver call), DriverError.
  template <class... P, class... A>
  Node<KernelNode<P...>> launch(const Kernel<P...>& k, const Launch& launch, A&&... args) const;
  /// The same with dynamic parameter `launch` as the launch configuration: its current Launch is
  /// used, and a node captured from it binds it (docs/serving.md). UsageError for an empty parameter.
  template <class... P, class... A>
  Node<KernelNode<P...>> launch(const Kernel<P...>& k, const Param<Launch>& launch, A&&... args) const;
  /// Shorthand for `launch(k, Launch{grid, block}, args...)`.
  template <class... P, class... A>
  Node<KernelNode<P...>> launch(const Kernel<P...>& k, Grid grid, Block block, A&&... args) const;
  /// Copies `count` elements (default: all of `src`) from `src` to `dst` (`cuMemcpyHtoDAsync`,
  /// `DtoHAsync`, `DtoDAsync` or `cuMemcpyAsync`, by the ends' kinds); the ends as `Edit::memcpy`
  /// takes them. Throws like `Edit::memcpy`, DriverError.
  template <class Dst, class Src>
  Node<MemcpyNode> memcpy(Dst&& dst, Src&& src, std::size_t count = 0) const;
  /// Sets every element of `dst` to `value` (`cuMemsetD8Async`, `D16Async` or `D32Async`); the
  /// destination as `Edit::memset` takes it.
  template <class Dst, class T>
  Node<MemsetNode> memset(Dst&& dst, const T& value) const;
  /// Runs `fn()` on the driver's callback thread when the stream reaches it (`cuLaunchHostFunc`);
  /// in a capture, on every launch of the captured graph. `fn` and its captured state are kept as
  /// long as anything may still run it; it may not call CUDA (tether's calls throw there).
  template <class F>
  Node<HostNode> host(F&& fn) const;
  /// Records `event` here (`cuEventRecord`). Inside a capture this creates no node: it marks a
  /// point another stream of the capture can wait for. Keeps the event alive as long as needed.
  void record(const Event& event) const;
  /// Makes later work wait for `event` (`cuStreamWaitEvent`). Inside a capture, waiting for an
  /// event recorded in the same capture adds an edge (a fork or join), not a node; waiting for
  /// one recorded outside it is refused by the driver (STREAM_CAPTURE_ISOLATION, which
  /// invalidates the capture): use `wait_external` for that.
  void wait(const Event& event) const;
  /// Records `event` with CU_EVENT_RECORD_EXTERNAL (`cuEventRecordWithFlags`): inside a capture
  /// an event record node (keeping the event), for work outside the graph to wait for; outside
  /// capture a plain record.
  Node<EventRecordNode> record_external(const Event& event) const;
  /// Waits for `event` with CU_EVENT_WAIT_EXTERNAL: inside a capture an event wait node (keeping
  /// the event) on an event recorded outside the graph; outside capture a plain wait.
  Node<EventWaitNode> wait_external(const Event& event) const;
  /// A stream-ordered allocation of `count` elements of T (`cuMemAllocAsync`): usable by work
  /// queued after this call, until `free_async` (the memory is not owned: free it). Inside a
  /// capture it is a graph allocation, and `node` is its memory allocation node. Throws
  /// UsageError for 0 or overflowing counts, DriverError.
  template <class T>
  AllocResult<T> alloc_async(std::size_t count) const;
  /// Frees memory from `alloc_async` in stream order (`cuMemFreeAsync`).
  template <class T>
  Node<MemFreeNode> free_async(const Unowned<T>& memory) const;

  // ---- owned stream-ordered allocations (memory pools; defined in mem_pool.hpp, docs/memory.md)

  /// An owned stream-ordered allocation of `count` elements of T from the device's current pool
  /// (its default pool unless other code changed it): `cuMemAllocAsync` on this stream, returned
  /// as a DeviceBuffer usable everywhere one is (kernel arguments, memcpy and memset ends, stream
  /// work, graph nodes, captures). Ordering rule: the memory may be used by work queued on this
  /// stream after the call; work on another stream (and the synchronous `copy_from`, `copy_to`,
  /// `fill_bytes`) must first be ordered after it (an Event recorded here and waited for there, or
  /// `synchronize()`). Its contents start indeterminate. When the last owner goes (after every
  /// tether operation and graph node that used it has finished, as for any buffer), the memory is
  /// freed in stream order with `cuMemFreeAsync` on an internal stream of the context, which
  /// tether first ordered after this allocation (`cuEventRecord` here, `cuStreamWaitEvent` there):
  /// no release ever calls `cuMemFree`, so dropping one never waits for a running host callback.
  /// Refused while the stream captures: a captured allocation is a graph allocation, made on
  /// every launch of the graph, not a buffer (use `alloc_async`, whose node the capture returns,
  /// or allocate before the capture). Throws UsageError (empty stream, 0 or overflowing `count`,
  /// a capturing stream, inside a host callback), DriverError naming the entry point and the size
  /// (CUDA_ERROR_OUT_OF_MEMORY); nothing is left allocated on failure.
  template <class T>
  DeviceBuffer<T> alloc_buffer(std::size_t count) const;
  /// The same from `pool` (`cuMemAllocFromPoolAsync`); the buffer keeps the pool alive. Throws
  /// as above, and UsageError for an empty pool or one of another context than the stream's.
  template <class T>
  DeviceBuffer<T> alloc_buffer(std::size_t count, const MemPool& pool) const;

  /// The context the stream belongs to. Throws UsageError when empty.
  Context context() const;

  /// Gives up ownership: returns the handle (the caller must destroy it) and leaves the stream
  /// empty, after handing the pending burst of owners to a marker on the stream. The context is
  /// not kept alive for the returned handle.
  CUstream release() noexcept;
  /// Destroys the stream now (under the release rule) and leaves this object empty.
  void reset() noexcept { handle_.reset(); }
  /// Exchanges the streams of two objects.
  void swap(Stream& other) noexcept { handle_.swap(other.handle_); }
  /// Whether a stream is owned.
  explicit operator bool() const noexcept { return static_cast<bool>(handle_); }

 private:
  friend class Context;
  friend struct detail::StreamAccess;
  explicit Stream(detail::UniqueHandle<CUstream, detail::DestroyStream> h) noexcept : handle_(std::move(h)) {}
  const detail::ContextState& state(const char* what) const;
  // Both launch spellings: `config` is a Launch or a Param<Launch>.
  template <class... P, class L, class... A>
  Node<KernelNode<P...>> launch_with(const Kernel<P...>& k, const L& config, A&&... args) const;

  detail::UniqueHandle<CUstream, detail::DestroyStream> handle_;
};

}  // namespace tether
