// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "reclaimer.hpp"

#include <pthread.h>

#include <shared_mutex>

namespace tether::detail {

namespace {
thread_local int t_forbid = 0;
thread_local bool t_reclaimer = false;
thread_local int t_draining = 0;

class DeferredCall final : public Reclaimable {
 public:
  explicit DeferredCall(std::function<void()> fn) : fn_(std::move(fn)) {}
  void reclaim() noexcept override {
    try {
      fn_();
    } catch (...) {
      report_current_exception("running a deferred release on the reclaimer");
    }
    delete this;
  }

 private:
  std::function<void()> fn_;
};
}  // namespace

ForbidCuda::ForbidCuda() noexcept { ++t_forbid; }
ForbidCuda::~ForbidCuda() { --t_forbid; }
bool cuda_forbidden_here() noexcept { return t_forbid > 0; }

namespace {
std::atomic<bool> g_forked{false};
std::atomic<int> g_callbacks{0};
void on_fork_child() { g_forked.store(true, std::memory_order_release); }
}  // namespace

bool forked_child() noexcept { return g_forked.load(std::memory_order_relaxed); }
void watch_fork() noexcept {
  static std::once_flag once;
  std::call_once(once, [] { ::pthread_atfork(nullptr, nullptr, &on_fork_child); });
}

void throw_in_callback(std::string_view what) {
  throw UsageError(fmt::format("{} cannot be called inside a host callback (a host node or host function that "
                               "tether runs): the driver refuses CUDA calls there (CUDA_ERROR_NOT_PERMITTED) and "
                               "a lock held elsewhere could wait for this very callback; do the work on another "
                               "thread (dropping tether objects inside the callback is fine: their release is "
                               "deferred)",
                               what));
}
void throw_in_forked_child(std::string_view what) {
  throw UsageError(fmt::format("{} cannot be called in a child process made by fork() after tether was used: CUDA "
                               "does not support fork after initialisation (the driver's threads do not exist in "
                               "the child); start a new process with posix_spawn or exec instead",
                               what));
}

CallbackScope::CallbackScope() noexcept { g_callbacks.fetch_add(1, std::memory_order_acq_rel); }
CallbackScope::~CallbackScope() {
  if (g_callbacks.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    g_callbacks.notify_all();
    Reclaimer::instance().wake();  // a parked blocking release may go now
  }
}

namespace {
std::atomic<long> g_host_work{0};
// Why never destroyed: host functions and releases may run during static destruction.
std::shared_mutex& host_work_gate() noexcept {
  static std::shared_mutex* m = new std::shared_mutex;
  return *m;
}
}  // namespace

void begin_host_work() noexcept {
  std::shared_lock lock(host_work_gate());
  g_host_work.fetch_add(1, std::memory_order_acq_rel);
}
void end_host_work() noexcept {
  if (g_host_work.fetch_sub(1, std::memory_order_acq_rel) == 1) Reclaimer::instance().wake();
}
void end_host_work_fn(void*) noexcept { end_host_work(); }
long host_work_in_flight() noexcept { return g_host_work.load(std::memory_order_acquire); }

std::unique_lock<std::shared_mutex> try_blocking_release_gate() noexcept {
  if (g_host_work.load(std::memory_order_acquire) != 0 || g_callbacks.load(std::memory_order_acquire) != 0) return {};
  std::unique_lock lock(host_work_gate());
  // Checked again under the gate: work counted before it was taken is visible now, and no new
  // work can be counted until it is released.
  if (g_host_work.load(std::memory_order_acquire) != 0 || g_callbacks.load(std::memory_order_acquire) != 0) return {};
  return lock;
}
namespace {
std::atomic<int> g_blocking_releases{0};
}  // namespace
BlockingReleaseScope::BlockingReleaseScope() noexcept { g_blocking_releases.fetch_add(1, std::memory_order_acq_rel); }
BlockingReleaseScope::~BlockingReleaseScope() { g_blocking_releases.fetch_sub(1, std::memory_order_acq_rel); }
bool reclaimer_in_blocking_release() noexcept { return g_blocking_releases.load(std::memory_order_acquire) > 0; }

void wait_for_no_callbacks() noexcept {
  for (int n = g_callbacks.load(std::memory_order_acquire); n != 0; n = g_callbacks.load(std::memory_order_acquire))
    g_callbacks.wait(n, std::memory_order_acquire);
}
bool on_reclaimer_thread() noexcept { return t_reclaimer; }
bool draining_here() noexcept { return t_draining > 0; }

Reclaimer& Reclaimer::instance() noexcept {
  // Why never destroyed: user objects may be released by the driver during and after static
  // destruction; the queue must still be there to take them (they are then leaked on purpose).
  static Reclaimer* r = new Reclaimer();
  return *r;
}

void Reclaimer::ensure_started() {
  if (started_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(start_mu_);
  if (started_.load(std::memory_order_relaxed)) return;
  // Why started_ is set only after the thread exists: if creating it throws, a later call tries
  // again instead of believing a thread drains the queue.
  std::thread([this] { run(); }).detach();
  std::atexit(&Reclaimer::at_exit);
  started_.store(true, std::memory_order_release);
}

Reclaimable* Reclaimer::push_onto(std::atomic<Reclaimable*>& head, Reclaimable* item) noexcept {
  Reclaimable* h = head.load(std::memory_order_relaxed);
  do {
    item->next_ = h;
  } while (!head.compare_exchange_weak(h, item, std::memory_order_release, std::memory_order_relaxed));
  return h;
}

void Reclaimer::push(Reclaimable* item) noexcept {
  Reclaimable* h = push_onto(head_, item);
  pushed_.fetch_add(1, std::memory_order_acq_rel);
  // Only the push that makes the queue non-empty wakes the thread. Why that is enough: the thread
  // reads wake_ before it takes the queue, so an item pushed onto a non-empty queue is taken by
  // that drain, and a push onto the emptied queue bumps wake_ after the read, so the wait below
  // returns at once. A burst of releases (a graph destroyed) then costs one wake, not one each.
  if (h == nullptr) {
    wake_.fetch_add(1, std::memory_order_release);
    wake_.notify_one();
  }
}

void Reclaimer::park(Reclaimable* item) noexcept {
  push_onto(parked_, item);
  thread_pending_.fetch_add(1, std::memory_order_acq_rel);
  // Why wake: the work that made it park may have ended between the check and the push.
  wake();
}

void Reclaimer::wake() noexcept {
  wake_.fetch_add(1, std::memory_order_release);
  wake_.notify_one();
}

bool Reclaimer::unpark() noexcept {
  Reclaimable* list = parked_.exchange(nullptr, std::memory_order_acquire);
  if (!list) return false;
  while (list) {
    Reclaimable* next = list->next_;
    // Counted in thread_pending_ once already (by park): push onto the thread's list directly.
    push_onto(thread_head_, list);
    list = next;
  }
  return true;
}

void Reclaimer::push_to_thread(Reclaimable* item) noexcept {
  push_onto(thread_head_, item);
  thread_pending_.fetch_add(1, std::memory_order_acq_rel);
  wake_.fetch_add(1, std::memory_order_release);
  wake_.notify_one();
}

std::size_t Reclaimer::drain() noexcept {
  std::size_t n = drain_list(head_, false);
  // The reclaimer's own thread (and the exit drain, once that thread is gone) also releases what
  // only it may release.
  if (t_reclaimer || thread_done_.load(std::memory_order_acquire)) n += drain_list(thread_head_, true);
  return n;
}

std::size_t Reclaimer::drain_list(std::atomic<Reclaimable*>& head, bool thread_list) noexcept {
  std::size_t n = 0;
  ++t_draining;
  for (;;) {
    Reclaimable* list = head.exchange(nullptr, std::memory_order_acquire);
    if (!list) break;
    Reclaimable* fifo = nullptr;  // the stack is newest-first; release in the order of arrival
    while (list) {
      Reclaimable* next = list->next_;
      list->next_ = fifo;
      fifo = list;
      list = next;
    }
    while (fifo) {
      Reclaimable* next = fifo->next_;
      fifo->reclaim();
      ++n;
      // An item handed over to the thread stays counted as pushed until the thread releases it.
      if (thread_list)
        thread_pending_.fetch_sub(1, std::memory_order_acq_rel);
      else
        released_.fetch_add(1, std::memory_order_acq_rel);
      fifo = next;
    }
  }
  --t_draining;
  if (!t_reclaimer && t_draining == 0) restore_capture_modes();  // an application thread's own mode
  if (n) {
    std::lock_guard lock(idle_mu_);
    idle_cv_.notify_all();
  }
  return n;
}

bool Reclaimer::wait_idle(std::chrono::nanoseconds timeout) {
  const std::uint64_t target = pushed();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock lock(idle_mu_);
  while (released() < target || thread_pending_.load(std::memory_order_acquire) != 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    // Short waits: a release may complete between the check and the wait without a notify here.
    idle_cv_.wait_for(lock, std::chrono::milliseconds(1));
  }
  return true;
}

void Reclaimer::run() {
  t_reclaimer = true;
  for (;;) {
    std::uint32_t seen = wake_.load(std::memory_order_acquire);
    while (drain() != 0) {
    }
    // Parked blocking releases go once no tether host work is queued or running; at exit, always.
    const bool stopping = stopping_.load(std::memory_order_acquire);
    if ((stopping || (host_work_in_flight() == 0 && g_callbacks.load(std::memory_order_acquire) == 0)) &&
        parked_.load(std::memory_order_acquire)) {
      if (!stopping) {
        unpark();
        continue;
      }
    }
    if (stopping) {
      do {  // what was pushed while the last batch ran, and what was parked
        unpark();
      } while (drain() != 0);
      thread_done_.store(true, std::memory_order_release);
      thread_done_.notify_all();
      return;
    }
    wake_.wait(seen, std::memory_order_acquire);
  }
}

void Reclaimer::at_exit() noexcept {
  // Orderly exit: the thread finishes the batch it took (a single exchange here would find the
  // queue empty while the thread still releases hundreds of items concurrently with static
  // destruction), then this thread releases whatever is left. The driver's own exit handlers run
  // after this one (they were registered earlier, at cuInit). Items queued after this point are
  // leaked on purpose. Why a bound: the thread may be blocked in a driver call (a cuMemFree waits
  // for a host callback that never returns); exit must not hang on it.
  Reclaimer& r = instance();
  r.stopping_.store(true, std::memory_order_release);
  r.wake_.fetch_add(1, std::memory_order_release);
  r.wake_.notify_one();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!r.thread_done_.load(std::memory_order_acquire)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      report_error("draining tether's reclaimer at exit",
                   "the reclaimer thread did not finish within 5 s (blocked in a driver call?); the owners it has "
                   "not released are leaked");
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!cuda_forbidden_here()) r.drain();
  r.exited_.store(true, std::memory_order_release);
}

void run_on_reclaimer(std::function<void()> fn) noexcept {
  Reclaimer& r = Reclaimer::instance();
  try {
    r.ensure_started();
    r.push(new DeferredCall(std::move(fn)));
  } catch (...) {
    report_current_exception("deferring a release to the reclaimer (the resource is leaked)");
  }
}

}  // namespace tether::detail

namespace tether {

std::size_t reclaim() noexcept {
  if (detail::cuda_forbidden_here() || detail::forked_child()) return 0;
  return detail::Reclaimer::instance().drain();
}

bool wait_reclaimed(std::chrono::milliseconds timeout) {
  detail::check_calls_allowed("tether::wait_reclaimed");
  if (detail::on_reclaimer_thread())
    throw UsageError("tether::wait_reclaimed cannot be called on tether's reclaimer (an owner's destructor): it "
                     "would wait for itself");
  return detail::Reclaimer::instance().wait_idle(timeout);
}

}  // namespace tether
