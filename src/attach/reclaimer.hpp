// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Deferred cleanup (ARCHITECTURE.md §5). User-object destructors run inside driver calls or on a
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

/// Whether the current thread is the reclaimer's (tests assert where owners die).
bool on_reclaimer_thread() noexcept;

/// Whether the current thread is releasing queued items right now (the reclaimer thread, or a
/// caller of tether::reclaim()): where owners are meant to die.
bool draining_here() noexcept;

/// Runs `fn` on the reclaimer (later, where CUDA calls are allowed). For resource destructors that
/// find themselves where the driver refuses calls. Allocates; never throws (on allocation failure
/// the release is reported through the error hook and leaked).
void defer_to_reclaimer(std::function<void()> fn) noexcept;

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

  /// Releases everything queued, on the calling thread, until the queue stays empty (releasing an
  /// item may queue more). Returns how many items were released. The caller must be on a thread
  /// where CUDA calls are allowed.
  std::size_t drain() noexcept;

  /// Waits until every item pushed before the call has been released, or the timeout passes.
  bool wait_idle(std::chrono::nanoseconds timeout);

  std::uint64_t pushed() const noexcept { return pushed_.load(std::memory_order_acquire); }
  std::uint64_t released() const noexcept { return released_.load(std::memory_order_acquire); }

 private:
  Reclaimer() = default;
  void run();
  static void at_exit() noexcept;

  std::atomic<Reclaimable*> head_{nullptr};
  std::atomic<std::uint32_t> wake_{0};
  std::atomic<std::uint64_t> pushed_{0};
  std::atomic<std::uint64_t> released_{0};
  std::atomic<bool> started_{false};
  std::atomic<bool> stopping_{false};
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
};

}  // namespace tether::detail

TETHER_EXPORT namespace tether {

/// Releases, on the calling thread, every owner whose last CUDA consumer is gone and that the
/// reclaimer has not released yet. Returns how many attachments (or deferred resources) were
/// released. Thread safety: safe to call from any thread where CUDA calls are allowed, concurrently
/// with the reclaimer thread; inside a host callback it does nothing and returns 0.
std::size_t reclaim() noexcept;

/// Waits until everything queued for release so far has been released, or `timeout` passes;
/// returns whether it was. Release is queued by CUDA (when the last graph, executable or launch
/// using an attachment lets go), so "the launch finished" is not enough: wait for the owner itself
/// (see `tether::testing`) or call this after the driver has run the destructors.
bool wait_reclaimed(std::chrono::milliseconds timeout);

}  // namespace tether
