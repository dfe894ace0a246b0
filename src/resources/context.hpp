// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Contexts, and the two mechanisms every resource deleter shares: running a driver call with the
// owning context pushed (ScopedContext), and the release rule (release here, or defer to the
// reclaimer where the thread may not call CUDA). docs/design/attachments.md.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "../driver/error.hpp"
#include "../driver/table.hpp"
#include "../runtime/runtime.hpp"
#include "../attach/reclaimer.hpp"
#include "unique_handle.hpp"

TETHER_EXPORT namespace tether {
class Context;
class Stream;
class Event;
class Image;
class Module;
template <class T>
class DeviceBuffer;
template <class T>
class PinnedBuffer;
}  // namespace tether

namespace tether::detail {

// The shared state behind every copy of a Context, and behind every resource made in it: resources
// hold it so that the primary context stays retained until the last of them has been released
// (the driver resets a primary context, destroying everything in it, when its count reaches 0).
struct ContextState {
  ContextState(Runtime rt, CUdevice dev) noexcept : runtime(rt), table(&table_of(rt)), device(dev) {}
  ContextState(const ContextState&) = delete;
  ContextState& operator=(const ContextState&) = delete;
  ~ContextState();  // cuDevicePrimaryCtxRelease, under the release rule

  Runtime runtime;
  const DriverTable* table;
  CUdevice device;
  CUcontext context = nullptr;  // set once retained; null means nothing to release
  // Peer access from this context, one bit per device ordinal below 64 (others are never cached):
  // `peers` once cuCtxEnablePeerAccess succeeded (or answered that it already had), `no_peers` once
  // the driver answered that the pair is unsupported (the topology does not change). Why here: a
  // kernel node that uses another device's buffer checks it on every add, update and launch, and
  // one atomic load is what that costs once the pair is known. Cleared for a device when a
  // ContextState of it goes (context.cpp): its primary context may then be reset, which takes the
  // access with it.
  mutable std::atomic<std::uint64_t> peers{0};
  mutable std::atomic<std::uint64_t> no_peers{0};
};

using ContextPtr = std::shared_ptr<const ContextState>;

/// Set once the process has made contexts of two different devices (Context::primary). Until then
/// no buffer can belong to another device than a kernel's, and a kernel spec does not look: one
/// relaxed load of this flag is what peer access costs a single-device program per node.
inline std::atomic<bool> several_devices{false};

/// Whether `self` has enabled access to device `peer`'s memory (cached: no driver call). The same
/// device counts as enabled.
inline bool peer_enabled(const ContextState& self, CUdevice peer) noexcept {
  if (peer == self.device) return true;
  return peer >= 0 && peer < 64 && ((self.peers.load(std::memory_order_acquire) >> peer) & 1u);
}
/// Enables access from `self` to the memory of `peer`'s device (cuCtxEnablePeerAccess with `self`
/// current, in RELAXED capture mode, the caller's context restored), unless the cache says it
/// is; ALREADY_ENABLED counts as success. Returns false where the driver answers that the pair is
/// unsupported (remembered: later calls make no driver call). Throws UsageError inside a host
/// callback, DriverError for any other failure (`what` says what tether was doing).
bool enable_peer(const ContextState& self, const ContextState& peer, std::string_view what);

const ContextPtr& state_of(const Context& ctx) noexcept;
/// Registers what Context::synchronize calls before cuCtxSynchronize (the capture layer notes it
/// on every active capture: cuCtxSynchronize invalidates them all, and an invalidation is then
/// reported with its likely cause). One observer; never throws.
void observe_context_synchronize(void (*fn)() noexcept) noexcept;
Context context_from(ContextPtr state) noexcept;

/// Makes `ctx` current on the calling thread for the lifetime of the object (cuCtxGetCurrent):
/// if it already is, nothing else happens; if no context is current, `ctx` is made current
/// (cuCtxSetCurrent) and stays current afterwards, as the CUDA runtime does; only if another
/// context is current is `ctx` pushed (cuCtxPushCurrent) and popped again (cuCtxPopCurrent).
/// Why keep it current: a push and pop per call costs two driver calls, a push cannot be undone
/// from another thread, and the real driver crashed in cuGraphExecKernelNodeSetParams without a
/// current context. Throws UsageError inside a host callback or a forked child, DriverError if the
/// driver refuses; a failed pop is reported through the error hook. Not movable: a pop must
/// happen on the pushing thread.
class ScopedContext {
 public:
  ScopedContext(const DriverTable& table, CUcontext ctx);
  explicit ScopedContext(const ContextState& state) : ScopedContext(*state.table, state.context) {}
  /// For a caller that has already checked that driver calls are allowed on this thread
  /// (check_calls_allowed): the same without that check.
  struct CallsChecked {};
  static constexpr CallsChecked calls_checked{};
  ScopedContext(const DriverTable& table, CUcontext ctx, CallsChecked);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

 private:
  void enter(const DriverTable& table, CUcontext ctx);
  const DriverTable* table_;  // non-null when a push must be popped
  std::thread::id pusher_;    // the thread whose stack holds the push
};

/// Switches the calling thread to CU_STREAM_CAPTURE_MODE_RELAXED for `table`'s driver, once per
/// thread, and remembers the previous mode (cuThreadExchangeStreamCaptureMode). Called before
/// every driver call tether makes on its reclaimer: there synchronous frees and executable
/// destruction would otherwise invalidate a GLOBAL-mode stream capture running on any other
/// thread (capture facts c4/global/other). Never throws.
void relax_capture_mode(const DriverTable& table) noexcept;
/// Restores the capture modes relax_capture_mode changed on this thread (end of a drain on a
/// thread that is not the reclaimer's).
void restore_capture_modes() noexcept;

/// Runs a scope in CU_STREAM_CAPTURE_MODE_RELAXED on the calling thread and restores the thread's
/// previous mode at its end (cuThreadExchangeStreamCaptureMode, twice). Why: tether's own
/// potentially unsafe calls (instantiate, synchronous allocation, waits for other streams and
/// events) then never invalidate a stream capture, on this thread or any other (capture facts
/// c4, relaxed rows). If the exchange fails the scope runs in the thread's own mode.
class RelaxedScope {
 public:
  explicit RelaxedScope(const DriverTable& t) noexcept;
  ~RelaxedScope();
  RelaxedScope(const RelaxedScope&) = delete;
  RelaxedScope& operator=(const RelaxedScope&) = delete;

 private:
  const DriverTable* t_ = nullptr;
  CUstreamCaptureMode previous_ = CU_STREAM_CAPTURE_MODE_RELAXED;
};

// ------------------------------------------------------------------------------ the release rule
//
// Every deleter that calls the driver goes through release_with (and the primary context's own
// release through the same code in context.cpp); what it may do on the calling thread is the
// reclaimer's verdict (attach/reclaimer.hpp), asked once:
// - releases that can block while a host callback runs (cuMemFree, cuMemFreeHost, cuModuleUnload:
//   they wait for every running callback, and a cuMemAlloc on any thread waits behind them) run
//   only on the reclaimer, never on the caller's thread; the reclaimer makes one only while the
//   host is idle (no tether host work queued or running; otherwise the job waits in its backlog),
//   and in RELAXED capture mode (a synchronous free in GLOBAL mode would invalidate other threads'
//   stream captures); device memory's cuMemFreeAsync does not block but runs on the reclaimer too,
//   for the capture mode;
// - where CUDA calls are forbidden (a host callback or a user-object destructor: ThreadRole), or
//   when the driver answers CUDA_ERROR_NOT_PERMITTED, the release is deferred as a ReleaseJob
//   (carrying the table, the context, the typed handle and the context's state, so that the
//   primary context outlives the deferred release);
// - otherwise the call runs here with the owning context current, and any failure is reported
//   through the error hook (destructors never throw).

struct PooledFree;

/// A handle a release frees, typed; its type chooses the driver call (release_entry):
/// CUdeviceptr cuMemFreeAsync on the per-thread stream, PooledFree* cuMemFreeAsync on the pool's
/// free stream, void* (pinned memory) cuMemFreeHost, CUstream cuStreamDestroy, CUevent
/// cuEventDestroy, CUmodule cuModuleUnload, CUmemoryPool cuMemPoolDestroy, CUdevice
/// cuDevicePrimaryCtxRelease.
using ReleaseHandle = std::variant<CUdeviceptr, PooledFree*, void*, CUstream, CUevent, CUmodule, CUmemoryPool, CUdevice>;

/// The driver entry point that releases a handle of type `H`.
template <class H>
constexpr Entry release_entry() noexcept {
  if constexpr (std::is_same_v<H, CUdeviceptr> || std::is_same_v<H, PooledFree*>)
    return Entry::cuMemFreeAsync;
  else if constexpr (std::is_same_v<H, void*>)
    return Entry::cuMemFreeHost;
  else if constexpr (std::is_same_v<H, CUstream>)
    return Entry::cuStreamDestroy;
  else if constexpr (std::is_same_v<H, CUevent>)
    return Entry::cuEventDestroy;
  else if constexpr (std::is_same_v<H, CUmodule>)
    return Entry::cuModuleUnload;
  else if constexpr (std::is_same_v<H, CUmemoryPool>)
    return Entry::cuMemPoolDestroy;
  else {
    static_assert(std::is_same_v<H, CUdevice>, "release_entry: not a handle tether releases");
    return Entry::cuDevicePrimaryCtxRelease;
  }
}
/// The entry point that releases `h`.
Entry release_entry(const ReleaseHandle& h) noexcept;

/// Frees a pool buffer in stream order (mem_pool.cpp): the call a PooledFree* handle releases with.
CUresult pooled_free_call(const DriverTable& t, PooledFree* f) noexcept;

/// A deferred release (a Job of kind `release`): what release_owned could not do on its thread.
struct ReleaseJob final : Job {
  ReleaseJob(const DriverTable* t, CUcontext c, ContextPtr k, ReleaseHandle h, const char* w) noexcept
      : Job(Kind::release), table(t), ctx(c), keep(std::move(k)), handle(h), what(w) {}
  const DriverTable* table;
  CUcontext ctx;       // null: the call needs no context (the primary context's release)
  ContextPtr keep;     // keeps the primary context retained until the release has run
  ReleaseHandle handle;
  const char* what;
};

/// Releases `h` with `owner`'s context current, under the release rule. `what` says what is being
/// released ("destroying a stream") and must be a literal.
void release_owned(const ContextPtr& owner, ReleaseHandle h, const char* what) noexcept;

/// Releases handle `h` with driver entry `E` under the release rule (see above).
template <Entry E, class H>
void release_with(const ContextPtr& owner, H h, const char* what) noexcept {
  static_assert(release_entry<H>() == E, "release_with: this handle type is released with another entry point");
  release_owned(owner, ReleaseHandle(std::in_place_type<H>, h), what);
}

/// Throws UsageError saying that `what` (a type, possibly with the call) was used while empty.
[[noreturn]] void throw_empty(std::string_view what);
/// Throws UsageError: "`call`: this `type` is moved from or empty (...)".
[[noreturn]] void throw_empty(std::string_view call, std::string_view type);

}  // namespace tether::detail

TETHER_EXPORT namespace tether {

/// Flags of a stream made by `Context::make_stream` (`cuStreamCreate`'s `CU_STREAM_*`).
enum class StreamFlags : unsigned {
  default_ = CU_STREAM_DEFAULT,           ///< synchronizes with the legacy default stream
  non_blocking = CU_STREAM_NON_BLOCKING,  ///< does not synchronize with the legacy default stream
};

/// Flags of an event made by `Context::make_event` (`cuEventCreate`'s `CU_EVENT_*`); combine
/// them with `|`.
enum class EventFlags : unsigned {
  default_ = CU_EVENT_DEFAULT,                ///< timing enabled, `synchronize` spins
  blocking_sync = CU_EVENT_BLOCKING_SYNC,     ///< `synchronize` blocks the thread instead of spinning
  disable_timing = CU_EVENT_DISABLE_TIMING,   ///< no timestamps (cheaper; `elapsed_ms` refuses it)
};

/// Combines event flags.
constexpr EventFlags operator|(EventFlags a, EventFlags b) noexcept {
  return static_cast<EventFlags>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
/// Intersects event flags.
constexpr EventFlags operator&(EventFlags a, EventFlags b) noexcept {
  return static_cast<EventFlags>(static_cast<unsigned>(a) & static_cast<unsigned>(b));
}

/// A shared reference to the primary context of one device, and the factory of everything that
/// lives in it: streams, events, modules and device or pinned buffers.
///
/// The first Context of a device retains its primary context (`cuDevicePrimaryCtxRetain`); the
/// context is released (`cuDevicePrimaryCtxRelease`) when the last Context copy *and* the last
/// resource made through it are gone, so a resource never outlives its context. Every member
/// that calls the driver runs with this context pushed on the calling thread and restores the
/// caller's context afterwards: users never call `cuCtxSetCurrent`. Copying (and moving) shares
/// the reference; a Context is never empty. Equality compares the underlying `CUcontext`.
/// Thread safety: all members are safe to call concurrently on the same or different copies.
class Context {
 public:
  /// The primary context of device `ordinal` of `rt` (`cuDeviceGet`, `cuDevicePrimaryCtxRetain`).
  /// Throws UsageError if `ordinal` is not in [0, rt.device_count()), DriverError if the driver
  /// refuses. Same as `rt.context(ordinal)`.
  static Context primary(const Runtime& rt, int ordinal);

  Context(const Context&) noexcept = default;
  Context& operator=(const Context&) noexcept = default;
  ~Context() = default;

  /// The device (`CUdevice`) whose primary context this is.
  CUdevice device() const noexcept;
  /// The driver handle. It stays valid while this Context (or a resource made in it) lives.
  CUcontext get() const noexcept;
  /// The runtime (driver) the context belongs to.
  Runtime runtime() const noexcept;

  /// Makes this context current on the calling thread (`cuCtxSetCurrent`), for raw driver calls
  /// made outside tether; tether's own calls never need it. Throws DriverError.
  void make_current() const;

  /// Waits until all work in this context has finished (`cuCtxSynchronize`, context pushed).
  /// Throws DriverError, which may report an error of earlier asynchronous work.
  void synchronize() const;

  /// Creates a stream in this context (`cuStreamCreate`, context pushed). Throws DriverError.
  Stream make_stream(StreamFlags flags = StreamFlags::non_blocking) const;

  /// Creates an event in this context (`cuEventCreate`, context pushed). Throws DriverError.
  Event make_event(EventFlags flags = EventFlags::default_) const;

  /// Loads a module image (fatbin, cubin or PTX) into this context (`cuModuleLoadData`, context
  /// pushed; PTX is JIT-compiled by the driver). Throws DriverError (for example
  /// CUDA_ERROR_INVALID_PTX or CUDA_ERROR_NO_BINARY_FOR_GPU).
  Module load_module(const Image& image) const;

  /// Allocates `n` elements of `T` of device memory (`cuMemAlloc`, context pushed), uninitialised.
  /// Throws UsageError for `n == 0` or a size that overflows, DriverError if the driver refuses
  /// (CUDA_ERROR_OUT_OF_MEMORY). Defined in buffer.hpp.
  template <class T>
  DeviceBuffer<T> alloc(std::size_t n) const;

  /// Allocates `n` elements of `T` of page-locked host memory (`cuMemAllocHost`, context
  /// pushed), uninitialised. Throws like `alloc`. Defined in buffer.hpp.
  template <class T>
  PinnedBuffer<T> alloc_pinned(std::size_t n) const;

  /// Whether kernels running in this context can use memory of `peer`'s device once peer access
  /// is enabled (`cuDeviceCanAccessPeer(device(), peer.device())`; no call where an earlier
  /// `enable_peer_access` already knows the answer; the answer "no" is remembered too, the topology
  /// being fixed). True for the same device, whose memory needs no peer access. Throws UsageError
  /// for a context of another runtime, or inside a host callback where it has to ask the driver;
  /// DriverError. Thread safety: as every member. Since 0.7.
  bool can_access_peer(const Context& peer) const;

  /// Lets kernels running in this context use memory allocated in `peer`'s device
  /// (`cuCtxEnablePeerAccess(peer, 0)` with this context pushed, in RELAXED capture mode, the
  /// caller's context restored). Idempotent: access already enabled, by tether or by anyone else
  /// (CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED), is success, and the same device needs nothing. The
  /// pairs enabled are cached in the context, so a repeated call costs one atomic load and no
  /// driver call; tether calls it itself for a kernel that keeps a buffer of another device
  /// (docs/multi-gpu.md). Copies between devices never need it. Throws UsageError naming both
  /// devices where the machine cannot connect them (CUDA_ERROR_PEER_ACCESS_UNSUPPORTED; copy the
  /// data with a memcpy instead), for a context of another runtime, or inside a host callback;
  /// DriverError for any other refusal (CUDA_ERROR_TOO_MANY_PEERS). Thread safety: as every
  /// member; concurrent calls for the same pair may each call the driver once. Since 0.7.
  void enable_peer_access(const Context& peer) const;

  /// Whether both refer to the same context of the same driver.
  friend bool operator==(const Context& a, const Context& b) noexcept {
    return a.state_->table == b.state_->table && a.state_->context == b.state_->context;
  }

 private:
  explicit Context(detail::ContextPtr state) noexcept : state_(std::move(state)) {}
  friend const detail::ContextPtr& detail::state_of(const Context& ctx) noexcept;
  friend Context detail::context_from(detail::ContextPtr state) noexcept;

  detail::ContextPtr state_;
};

}  // namespace tether

namespace tether::detail {
inline const ContextPtr& state_of(const Context& ctx) noexcept { return ctx.state_; }
inline Context context_from(ContextPtr state) noexcept { return Context(std::move(state)); }

/// A kernel argument whose buffer belongs to another context than the kernel's: what a kernel
/// spec records when it is made (kernel.hpp), to enable peer access before its driver call. Not
/// owning: the buffer, among the spec's owners, keeps the state alive until then.
struct ForeignArg {
  const ContextState* state;  // the buffer's context
  std::size_t index;          // the argument's position, from 0
};

/// Enables access from `kernel` (the kernel's context) to the device of each of `args`
/// (enable_peer: one atomic load per argument once known). Throws UsageError naming the
/// argument's position, both devices and the kernel `name` where the machine cannot connect the
/// pair, before the caller's own driver call; DriverError for any other refusal.
void enable_for_kernel(const ContextState& kernel, std::string_view name, std::span<const ForeignArg> args,
                       std::string_view what);
}  // namespace tether::detail
