// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Deferred cleanup (docs/design/attachments.md). User-object destructors run inside driver calls or on a
// driver thread, where CUDA calls fail; they only push onto this lock-free queue. The reclaimer
// thread (or an explicit tether::reclaim()) releases what was pushed, with CUDA calls permitted.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "../driver/error.hpp"

namespace tether::detail {

/// Something the reclaimer releases. Intrusive (the link lives in the item) so that pushing never
/// allocates: pushes happen inside user-object destructors.
class Reclaimable {
 public:
  Reclaimable() = default;
  Reclaimable(const Reclaimable&) = delete;
  Reclaimable& operator=(const Reclaimable&) = delete;
  /// Releases the item and whatever it owns; runs on a thread where CUDA calls are allowed.
  /// Must not throw; it usually ends with `delete this`.
  virtual void reclaim() noexcept = 0;

 protected:
  ~Reclaimable() = default;

 private:
  friend class Reclaimer;
  Reclaimable* next_ = nullptr;
};

/// Marks the current thread as one where CUDA calls are not allowed (inside a user-object
/// destructor or a host callback that tether runs) for the scope of the object. Resource
/// destructors that run under it defer their driver calls to the reclaimer.
class ForbidCuda {
 public:
  ForbidCuda() noexcept;
  ~ForbidCuda();
  ForbidCuda(const ForbidCuda&) = delete;
  ForbidCuda& operator=(const ForbidCuda&) = delete;
};

/// Whether the current thread is inside a ForbidCuda scope.
bool cuda_forbidden_here() noexcept;

/// Whether this process is a child made by fork() after tether was used (CUDA cannot be used
/// there: the driver's threads and the simulator's do not exist in the child).
bool forked_child() noexcept;
/// Registers the fork handler (once; called when a runtime is opened).
void watch_fork() noexcept;

[[noreturn]] void throw_in_callback(std::string_view what);
[[noreturn]] void throw_in_forked_child(std::string_view what);

/// The check at the top of every public call that makes a driver call or takes a tether lock:
/// refuses it with UsageError inside a host callback tether runs (the driver refuses CUDA calls
/// there, and a lock another thread holds could never be released while the callback blocks the
/// driver's only callback thread) and in a forked child. `what` names the call ("Graph::edit").
inline void check_calls_allowed(std::string_view what) {
  if (cuda_forbidden_here()) [[unlikely]]
    throw_in_callback(what);
  if (forked_child()) [[unlikely]]
    throw_in_forked_child(what);
}

/// Counts tether host callables running now (on the driver's callback thread). Why: while a host
/// callback runs, cuMemFree and cuModuleLoadData block until it returns, and a cuMemAlloc on any
/// other thread blocks behind such a cuMemFree; the reclaimer therefore starts no blocking release
/// while a tether callable runs (see docs/design/attachments.md, "Blocking driver calls").
class CallbackScope {
 public:
  CallbackScope() noexcept;
  ~CallbackScope();
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;
};
/// Waits until no tether host callable runs.
void wait_for_no_callbacks() noexcept;

/// Tether work with host callables that is queued or running: launches of executables that have
/// host nodes (from GraphExec::launch until a host function queued behind the launch runs) and
/// stream host functions (Stream::host, until a host function behind it runs). Why: while a host
/// callback runs, cuMemFreeHost and cuModuleUnload wait for it, and a cuMemAlloc or cuMemAllocHost
/// on any other thread waits behind such a cuMemFreeHost (release_probe A10, A12, B6 on the H200);
/// a host node of a launch that is already queued may start at any moment and wait for an
/// application thread that allocates. So the reclaimer makes those releases only while no such
/// work is queued or running, and holds the gate (exclusive) for the call's duration, so none can
/// be queued meanwhile: begin_host_work takes it shared, only around a counter increment, never
/// across a driver call. A blocking release that finds work in flight is parked and retried when
/// the count returns to zero (the last end_host_work wakes the reclaimer). Never throws.
void begin_host_work() noexcept;
/// Ends one unit of begin_host_work. Lock-free: safe on the driver's callback thread.
void end_host_work() noexcept;
/// A host function that calls end_host_work (queued behind the work it ends).
void end_host_work_fn(void*) noexcept;
/// Units of host work queued or running now (tests and inspect).
long host_work_in_flight() noexcept;
/// The gate of a blocking release: holds it exclusively if no tether host work is queued or
/// running and no tether host callable runs; otherwise holds nothing (check owns_lock()).
std::unique_lock<std::shared_mutex> try_blocking_release_gate() noexcept;
/// Marks a blocking release (cuMemFree, cuMemFreeHost, cuModuleUnload) in progress on the
/// reclaimer, for the scope of the object. Why: the wait for running callables and the release
/// are not atomic — a callable that starts between them makes the release wait for it (the
/// residual window of docs/design/attachments.md, "Blocking driver calls"); tests tell that case
/// apart with reclaimer_in_blocking_release().
class BlockingReleaseScope {
 public:
  BlockingReleaseScope() noexcept;
  ~BlockingReleaseScope();
  BlockingReleaseScope(const BlockingReleaseScope&) = delete;
  BlockingReleaseScope& operator=(const BlockingReleaseScope&) = delete;
};
/// Whether the reclaimer is inside a blocking release right now.
bool reclaimer_in_blocking_release() noexcept;

/// Restores the capture modes tether's releases switched on this thread (end of a drain on a thread
/// that is not the reclaimer's). Defined with the release rule in resources/context.cpp.
void restore_capture_modes() noexcept;

/// Whether the current thread is the reclaimer's (tests assert where owners die).
bool on_reclaimer_thread() noexcept;

/// Whether the current thread is releasing queued items right now (the reclaimer thread, or a
/// caller of tether::reclaim()): where owners are meant to die.
bool draining_here() noexcept;

/// Runs `fn` on the reclaimer (later, where CUDA calls are allowed). For resource destructors that
/// find themselves where the driver refuses calls. Allocates; never throws (on allocation failure
/// the release is reported through the error hook and leaked).
void run_on_reclaimer(std::function<void()> fn) noexcept;

class Reclaimer {
 public:
  /// The process-wide reclaimer; never destroyed.
  static Reclaimer& instance() noexcept;

  /// Starts the thread if it is not running. Called from ordinary code paths (prepare), never from
  /// a destructor, so that push() itself never has to create a thread.
  void ensure_started();

  /// Queues an item and wakes the thread. Lock-free, allocation-free, never throws: safe inside a
  /// user-object destructor, from any thread, while any lock is held.
  void push(Reclaimable* item) noexcept;

  /// Queues an item that only the reclaimer's own thread may release (a release that can block
  /// while a host callback runs: an application thread calling tether::reclaim() hands it over
  /// instead of blocking). Same guarantees as push().
  void push_to_thread(Reclaimable* item) noexcept;

  /// Keeps an item that may not be released yet (a blocking release while tether host work is in
  /// flight) for the reclaimer's thread to retry once none is. Same guarantees as push().
  void park(Reclaimable* item) noexcept;

  /// Wakes the thread (it looks at the queues and the parked items again). Lock-free.
  void wake() noexcept;
  /// Whether process exit has begun (parked items are then released without waiting).
  bool stopping() const noexcept { return stopping_.load(std::memory_order_acquire); }

  /// Releases everything queued, on the calling thread, until the queue stays empty (releasing an
  /// item may queue more). Returns how many items were released. The caller must be on a thread
  /// where CUDA calls are allowed.
  std::size_t drain() noexcept;

  /// Waits until every item pushed before the call has been released, or the timeout passes.
  bool wait_idle(std::chrono::nanoseconds timeout);

  std::uint64_t pushed() const noexcept { return pushed_.load(std::memory_order_acquire); }
  std::uint64_t released() const noexcept { return released_.load(std::memory_order_acquire); }
  /// Whether process exit has drained the queue: later items are leaked on purpose.
  bool exited() const noexcept { return exited_.load(std::memory_order_acquire); }
  /// Whether the reclaimer's thread has finished (process exit): no item can be handed to it.
  bool thread_gone() const noexcept { return thread_done_.load(std::memory_order_acquire); }

 private:
  Reclaimer() = default;
  void run();
  static void at_exit() noexcept;
  std::size_t drain_list(std::atomic<Reclaimable*>& head, bool thread_list) noexcept;
  /// Pushes onto a lock-free stack; returns the previous head.
  static Reclaimable* push_onto(std::atomic<Reclaimable*>& head, Reclaimable* item) noexcept;

  std::atomic<Reclaimable*> head_{nullptr};
  std::atomic<Reclaimable*> thread_head_{nullptr};  // for the reclaimer's thread only
  std::atomic<Reclaimable*> parked_{nullptr};       // blocking releases waiting for no host work
  /// Hands the parked items to the thread's list; returns whether there were any.
  bool unpark() noexcept;
  std::atomic<std::uint32_t> wake_{0};
  std::atomic<std::uint64_t> pushed_{0};
  std::atomic<std::uint64_t> released_{0};
  std::atomic<std::uint64_t> thread_pending_{0};  // handed to the thread and not released yet
  std::mutex start_mu_;
  std::atomic<bool> started_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> thread_done_{false};  // the thread finished its last batch and returned
  std::atomic<bool> exited_{false};
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
};

}  // namespace tether::detail

TETHER_EXPORT namespace tether {

/// Releases, on the calling thread, every owner whose last CUDA consumer is gone and that the
/// reclaimer has not released yet — except frees and unloads (cuMemFree, cuMemFreeHost,
/// cuModuleUnload), which block while any host callback runs and are handed to the reclaimer's own
/// thread instead. Returns how many attachments (or deferred resources) were handled. Runs in
/// RELAXED capture mode and restores the thread's mode. Thread safety: safe to call from any thread
/// where CUDA calls are allowed, concurrently with the reclaimer thread; inside a host callback or a
/// forked child it does nothing and returns 0.
std::size_t reclaim() noexcept;

/// Waits until everything already queued for release has been released, or `timeout` passes;
/// returns whether it was. It does not wait for user objects the driver releases later (CUDA
/// queues a release when the last graph, executable or launch using an attachment lets go, up to
/// a few hundred microseconds after that): `wait_released(ctx, timeout)` waits for those too.
/// Throws UsageError inside a host callback and on the reclaimer itself (an owner's destructor).
bool wait_reclaimed(std::chrono::milliseconds timeout);

}  // namespace tether
