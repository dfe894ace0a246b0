// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "reclaimer.hpp"

#include <pthread.h>

#include <shared_mutex>

#include "attachment.hpp"

namespace tether::detail {

namespace {
// Why initial-exec: the role is read at the top of every public call and release; the default
// model costs a __tls_get_addr call per read (measured: ~20 instructions), this one a load. One
// byte of static TLS, which even a library loaded late with dlopen finds in the reserve.
__attribute__((tls_model("initial-exec"))) thread_local ThreadRole t_role = ThreadRole::application;

bool forbidden(ThreadRole r) noexcept { return r == ThreadRole::host_callback || r == ThreadRole::user_object_destructor; }
std::atomic<bool> g_forked{false};
void on_fork_child() { g_forked.store(true, std::memory_order_release); }

// Why never destroyed: host functions and releases may run during static destruction.
std::shared_mutex& host_work_gate() noexcept {
  static std::shared_mutex* m = new std::shared_mutex;
  return *m;
}
}  // namespace

ThreadRole thread_role() noexcept { return t_role; }

ThreadRoleScope::ThreadRoleScope(ThreadRole role) noexcept : previous_(t_role), role_(role) {
  if (role == ThreadRole::host_callback) Reclaimer::instance().callbacks_.fetch_add(1, std::memory_order_acq_rel);
  t_role = role;
}

ThreadRoleScope::~ThreadRoleScope() {
  t_role = previous_;
  if (role_ == ThreadRole::host_callback) {
    Reclaimer& r = Reclaimer::instance();
    if (r.callbacks_.fetch_sub(1, std::memory_order_acq_rel) == 1) r.wake();  // a waiting blocking release may go
  }
}

bool calls_allowed_here() noexcept { return !forbidden(t_role) && !g_forked.load(std::memory_order_relaxed); }

Verdict verdict(Act act, bool as_job) noexcept {
  const ThreadRole role = t_role;
  const bool forbidden = detail::forbidden(role);
  switch (act) {
    case Act::call:
      if (calls_allowed_here()) return Verdict::go;
      if (forbidden) return Verdict::refuse_in_callback;
      if (forked_child()) return Verdict::refuse_in_forked_child;
      return Verdict::go;
    case Act::wait_for_reclaimer:
      if (forbidden) return Verdict::refuse_in_callback;
      if (forked_child()) return Verdict::refuse_in_forked_child;
      if (role == ThreadRole::reclaimer) return Verdict::refuse_on_reclaimer;
      return Verdict::go;
    case Act::release:
    case Act::release_reclaimer_only:
    case Act::release_blocking: break;
  }
  Reclaimer& r = Reclaimer::instance();
  const bool reclaimer = role == ThreadRole::reclaimer;
  if (as_job) {
    // A job being run (by the reclaimer, or by a thread draining): it is not deferred again.
    // An application thread draining (tether::reclaim()) leaves a release that can block (or that
    // would invalidate other threads' captures in its capture mode) to the reclaimer's own thread
    // instead of making it: its own host node may be what the release waits for.
    if (act != Act::release && !reclaimer && !r.thread_gone()) return Verdict::hand_over;
    if (act == Act::release_blocking && reclaimer && !r.stopping()) return Verdict::go_when_host_idle;
    return forked_child() ? Verdict::leak : Verdict::go;
  }
  // A deleter's first attempt. Why a blocking release found on the reclaimer is deferred too: it
  // may go only while the host is idle, and only a queued job can wait for that without holding
  // up the rest of the queue.
  if (forbidden || (act != Act::release && !reclaimer) ||
      (act == Act::release_blocking && reclaimer && !r.stopping()))
    return Verdict::defer;
  return forked_child() ? Verdict::leak : Verdict::go;
}

void refuse(Verdict v, std::string_view what) {
  switch (v) {
    case Verdict::refuse_in_forked_child:
      throw UsageError(fmt::format("{} cannot be called in a child process made by fork() after tether was used: "
                                   "CUDA does not support fork after initialisation (the driver's threads do not "
                                   "exist in the child); start a new process with posix_spawn or exec instead",
                                   what));
    case Verdict::refuse_on_reclaimer:
      throw UsageError(fmt::format("{} cannot be called on tether's reclaimer (an owner's destructor): it would wait "
                                   "for itself",
                                   what));
    default:
      throw UsageError(fmt::format("{} cannot be called inside a host callback (a host node or host function that "
                                   "tether runs): the driver refuses CUDA calls there (CUDA_ERROR_NOT_PERMITTED) "
                                   "and a lock held elsewhere could wait for this very callback; do the work on "
                                   "another thread (dropping tether objects inside the callback is fine: their "
                                   "release is deferred)",
                                   what));
  }
}

bool forked_child() noexcept { return g_forked.load(std::memory_order_relaxed); }
void watch_fork() noexcept {
  static std::once_flag once;
  std::call_once(once, [] { ::pthread_atfork(nullptr, nullptr, &on_fork_child); });
}

void begin_host_work() noexcept {
  std::shared_lock lock(host_work_gate());
  Reclaimer::instance().host_work_.fetch_add(1, std::memory_order_acq_rel);
}
void end_host_work() noexcept {
  Reclaimer& r = Reclaimer::instance();
  if (r.host_work_.fetch_sub(1, std::memory_order_acq_rel) == 1) r.wake();
}
void end_host_work_fn(void*) noexcept { end_host_work(); }
long host_work_in_flight() noexcept { return Reclaimer::instance().host_work_.load(std::memory_order_acquire); }
bool host_idle() noexcept {
  Reclaimer& r = Reclaimer::instance();
  return r.host_work_.load(std::memory_order_acquire) == 0 && r.callbacks_.load(std::memory_order_acquire) == 0;
}
bool reclaimer_in_blocking_release() noexcept {
  return Reclaimer::instance().blocking_releases_.load(std::memory_order_acquire) > 0;
}

std::unique_lock<std::shared_mutex> Reclaimer::try_host_idle_gate() noexcept {
  if (!host_idle()) return {};
  std::unique_lock lock(host_work_gate());
  // Checked again under the gate: work counted before it was taken is visible now, and no new
  // work can be counted until it is released.
  if (!host_idle()) return {};
  return lock;
}

Reclaimer& Reclaimer::instance() noexcept {
  // Why never destroyed: user objects may be released by the driver during and after static
  // destruction; the queue must still be there to take them (they are then leaked on purpose).
  static Reclaimer* r = new Reclaimer();
  return *r;
}

void start_reclaimer() { Reclaimer::instance().ensure_started(); }

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

void defer(Job* job) noexcept { Reclaimer::instance().push(job, true); }

void Reclaimer::push(Job* job, bool count) noexcept {
  Job* h = head_.load(std::memory_order_relaxed);
  do {
    job->next_ = h;
  } while (!head_.compare_exchange_weak(h, job, std::memory_order_release, std::memory_order_relaxed));
  if (count) pushed_.fetch_add(1, std::memory_order_acq_rel);
  // Only the push that makes the queue non-empty wakes the thread. Why that is enough: the thread
  // reads wake_ before it takes the queue, so a job pushed onto a non-empty queue is taken by
  // that drain, and a push onto the emptied queue bumps wake_ after the read, so the wait below
  // returns at once. A burst of releases (a graph destroyed) then costs one wake, not one each.
  if (h == nullptr) wake();
}

void Reclaimer::wake() noexcept {
  wake_.fetch_add(1, std::memory_order_release);
  wake_.notify_one();
}

JobOutcome Reclaimer::run_one(Job* job) noexcept {
  switch (job->kind()) {
    case Job::Kind::owners: static_cast<NodeAttachment*>(job)->reclaim(); return JobOutcome::done;
    case Job::Kind::accumulator: static_cast<ExecAccumulator*>(job)->reclaim(); return JobOutcome::done;
    case Job::Kind::release: return run_release_job(*job);
    case Job::Kind::destroy_exec: run_exec_destroy_job(*job); return JobOutcome::done;
    case Job::Kind::destroy_graph: run_graph_destroy_job(*job); return JobOutcome::done;
    case Job::Kind::destroy_stream: run_stream_destroy_job(*job); return JobOutcome::done;
    case Job::Kind::retire: run_retire_job(*job); return JobOutcome::done;
  }
  return JobOutcome::done;
}

void Reclaimer::hold(Job* job) noexcept {
  if (job->held_) return;
  job->held_ = true;
  held_.fetch_add(1, std::memory_order_acq_rel);
}

void Reclaimer::finished(bool held) noexcept {
  released_.fetch_add(1, std::memory_order_acq_rel);
  if (held) held_.fetch_sub(1, std::memory_order_acq_rel);
}

std::size_t Reclaimer::drain() noexcept {
  const ThreadRole role = t_role;
  const bool reclaimer = role == ThreadRole::reclaimer;
  std::optional<ThreadRoleScope> draining;
  if (!reclaimer && role != ThreadRole::draining) draining.emplace(ThreadRole::draining);
  std::size_t n = 0, done = 0;
  Job* handed = nullptr;  // jobs for the reclaimer's own thread, queued again after the drain
  Job** handed_tail = &handed;
  for (;;) {
    Job* list = head_.exchange(nullptr, std::memory_order_acquire);
    if (!list) break;
    Job* fifo = nullptr;  // the stack is newest-first; run in the order of arrival
    while (list) {
      Job* next = list->next_;
      list->next_ = fifo;
      fifo = list;
      list = next;
    }
    while (fifo) {
      Job* next = fifo->next_;
      const bool held = fifo->held_;  // read first: a job that runs frees itself
      switch (run_one(fifo)) {
        case JobOutcome::done:
          ++n;
          ++done;
          finished(held);
          break;
        case JobOutcome::hand_over:
          if (!held) ++n;  // handled: this drain's part is done (counted once, however often it is handed)
          hold(fifo);
          fifo->next_ = nullptr;
          *handed_tail = fifo;
          handed_tail = &fifo->next_;
          break;
        case JobOutcome::wait_host_idle:  // only the reclaimer's thread gets this outcome
          hold(fifo);
          fifo->next_ = nullptr;
          *backlog_tail_ = fifo;
          backlog_tail_ = &fifo->next_;
          break;
      }
      fifo = next;
    }
  }
  // Queued again, not counted again: each stays counted as pushed until the reclaimer runs it.
  // Why after the loop: queued at once, this very drain would take them again, forever.
  while (handed) {
    Job* next = handed->next_;
    push(handed, false);
    handed = next;
  }
  if (!reclaimer && draining) {
    draining.reset();
    restore_capture_modes();  // an application thread's own mode
  }
  if (done) {
    std::lock_guard lock(idle_mu_);
    idle_cv_.notify_all();
  }
  return n;
}

void Reclaimer::run_backlog() noexcept {
  Job* list = std::exchange(backlog_, nullptr);
  backlog_tail_ = &backlog_;
  std::size_t done = 0;
  while (list) {
    Job* next = list->next_;
    if (run_one(list) == JobOutcome::done) {  // held: it is in the backlog
      ++done;
      finished(true);
    } else {  // the host is busy again: it waits on, in its place
      list->next_ = nullptr;
      *backlog_tail_ = list;
      backlog_tail_ = &list->next_;
    }
    list = next;
  }
  if (done) {
    std::lock_guard lock(idle_mu_);
    idle_cv_.notify_all();
  }
}

bool Reclaimer::wait_idle(std::chrono::nanoseconds timeout) {
  const std::uint64_t target = pushed();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock lock(idle_mu_);
  // Jobs handed over or waiting for an idle host are held: waited for too, whenever they came.
  while (released() < target || held_.load(std::memory_order_acquire) != 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    // Short waits: a release may complete between the check and the wait without a notify here.
    idle_cv_.wait_for(lock, std::chrono::milliseconds(1));
  }
  return true;
}

void Reclaimer::run() {
  ThreadRoleScope role(ThreadRole::reclaimer);
  for (;;) {
    std::uint32_t seen = wake_.load(std::memory_order_acquire);
    while (drain() != 0) {
    }
    const bool stopping = stopping_.load(std::memory_order_acquire);
    // Jobs waiting for an idle host go once it is; at exit, always (they then skip the gate).
    if (backlog_ && (stopping || host_idle())) {
      run_backlog();
      if (!stopping) continue;
    }
    if (stopping) {
      do {  // what was deferred while the last batch ran
        run_backlog();
      } while (drain() != 0 || backlog_);
      thread_done_.store(true, std::memory_order_release);
      thread_done_.notify_all();
      return;
    }
    wake_.wait(seen, std::memory_order_acquire);
  }
}

void Reclaimer::at_exit() noexcept {
  // Orderly exit: the thread finishes the batch it took (a single exchange here would find the
  // queue empty while the thread still releases hundreds of jobs concurrently with static
  // destruction), then this thread releases whatever is left. The driver's own exit handlers run
  // after this one (they were registered earlier, at cuInit). Jobs queued after this point are
  // leaked on purpose. Why a bound: the thread may be blocked in a driver call (a cuMemFree waits
  // for a host callback that never returns); exit must not hang on it.
  Reclaimer& r = instance();
  r.stopping_.store(true, std::memory_order_release);
  r.wake();
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

}  // namespace tether::detail

namespace tether {

std::size_t reclaim() noexcept {
  if (detail::cuda_forbidden_here() || detail::forked_child()) return 0;
  return detail::Reclaimer::instance().drain();
}

bool wait_reclaimed(std::chrono::milliseconds timeout) {
  if (detail::Verdict v = detail::verdict(detail::Act::wait_for_reclaimer); v != detail::Verdict::go)
    detail::refuse(v, "tether::wait_reclaimed");
  return detail::Reclaimer::instance().wait_idle(timeout);
}

}  // namespace tether
