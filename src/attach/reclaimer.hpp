// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Deferred cleanup (docs/design/attachments.md, "The reclaimer"). One executor: one lock-free queue
// of typed jobs that every deferral uses (defer), one library thread that runs them where CUDA
// calls are allowed, and one per-thread role, set by scopes and consulted in one function
// (verdict), that decides what a release or a call may do on the calling thread now.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "../driver/error.hpp"

namespace tether::detail {

// ------------------------------------------------------------------------------------ the role

/// What the calling thread is doing for tether right now. Set only by ThreadRoleScope.
enum class ThreadRole : std::uint8_t {
  application,             ///< an ordinary thread: CUDA calls allowed
  host_callback,           ///< inside a host node or host function tether runs (the driver's callback thread)
  user_object_destructor,  ///< inside a CUDA user-object destructor (inside a driver call, or on a driver thread)
  draining,                ///< an application thread releasing queued jobs (tether::reclaim(), the exit drain)
  reclaimer,               ///< tether's reclaimer thread
};

/// The calling thread's role.
ThreadRole thread_role() noexcept;

/// Sets the calling thread's role for the scope of the object and restores the previous one.
/// `host_callback` also counts the callable as running (the reclaimer starts no blocking release
/// while one runs: docs/design/attachments.md, "Blocking driver calls"); the last one to end wakes
/// the reclaimer. Lock-free, never throws: usable on the driver's callback thread.
class ThreadRoleScope {
 public:
  explicit ThreadRoleScope(ThreadRole role) noexcept;
  ~ThreadRoleScope();
  ThreadRoleScope(const ThreadRoleScope&) = delete;
  ThreadRoleScope& operator=(const ThreadRoleScope&) = delete;

 private:
  ThreadRole previous_;
  ThreadRole role_;
};

/// What the calling thread wants to do, as far as its role matters.
enum class Act : std::uint8_t {
  call,                    ///< a public call that makes driver calls or takes a tether lock
  wait_for_reclaimer,      ///< wait until queued jobs have run (wait_reclaimed, wait_released)
  release,                 ///< a release that may run on any thread where CUDA calls are allowed
  release_reclaimer_only,  ///< a release that must run on the reclaimer (its capture mode is RELAXED)
  release_blocking,        ///< a release that blocks while a host callback runs (cuMemFree, cuMemFreeHost, cuModuleUnload)
};

/// The answer of verdict().
enum class Verdict : std::uint8_t {
  go,                     ///< do it here, now
  go_when_host_idle,      ///< (a job on the reclaimer) do it here only while no tether host work is in flight
  defer,                  ///< queue it as a job for the reclaimer
  hand_over,              ///< (a job run by a draining application thread) leave it to the reclaimer's own thread
  leak,                   ///< a forked child: the driver is unusable, the resource is leaked on purpose
  refuse_in_callback,     ///< UsageError: not inside a host callback or user-object destructor
  refuse_in_forked_child, ///< UsageError: not in a forked child
  refuse_on_reclaimer,    ///< UsageError: the reclaimer would wait for itself
};

/// The one place the thread's role is consulted: what `act` may do on this thread now. `as_job`
/// says that the release is a queued job being run (false: a deleter's first attempt). Never throws.
Verdict verdict(Act act, bool as_job = false) noexcept;

/// Throws the UsageError of a refusing verdict for call `what` ("Graph::edit").
[[noreturn]] void refuse(Verdict v, std::string_view what);

/// Whether verdict(Act::call) is `go`: its fast path, for the check at the top of every call.
bool calls_allowed_here() noexcept;

/// The check at the top of every public call that makes a driver call or takes a tether lock:
/// refuses it with UsageError inside a host callback tether runs (the driver refuses CUDA calls
/// there, and a lock another thread holds could never be released while the callback blocks the
/// driver's only callback thread) and in a forked child. `what` names the call ("Graph::edit").
inline void check_calls_allowed(std::string_view what) {
  if (!calls_allowed_here()) [[unlikely]]
    refuse(verdict(Act::call), what);
}
/// The same for a C string: measured only when refused (a strlen per call otherwise).
inline void check_calls_allowed(const char* what) {
  if (!calls_allowed_here()) [[unlikely]]
    refuse(verdict(Act::call), what);
}

/// Whether CUDA calls are refused on this thread (a host callback or a user-object destructor).
inline bool cuda_forbidden_here() noexcept {
  ThreadRole r = thread_role();
  return r == ThreadRole::host_callback || r == ThreadRole::user_object_destructor;
}
/// Whether the current thread is the reclaimer's (tests assert where owners die).
inline bool on_reclaimer_thread() noexcept { return thread_role() == ThreadRole::reclaimer; }
/// Whether the current thread is releasing queued jobs right now (the reclaimer, or a caller of
/// tether::reclaim()): where owners are meant to die.
inline bool draining_here() noexcept {
  ThreadRole r = thread_role();
  return r == ThreadRole::reclaimer || r == ThreadRole::draining;
}

/// Whether this process is a child made by fork() after tether was used (CUDA cannot be used
/// there: the driver's threads and the simulator's do not exist in the child).
bool forked_child() noexcept;
/// Registers the fork handler (once; called when a runtime is opened).
void watch_fork() noexcept;

// ------------------------------------------------------------------------- tether host work

/// Tether work with host callables that is queued or running: launches of executables that have
/// host nodes (from GraphExec::launch until a host function queued behind the launch runs) and
/// stream host functions (Stream::host, until a host function behind it runs). Why: while a host
/// callback runs, cuMemFreeHost and cuModuleUnload wait for it, and a cuMemAlloc or cuMemAllocHost
/// on any other thread waits behind such a cuMemFreeHost (release_probe A10, A12, B6 on the H200);
/// a host node of a launch that is already queued may start at any moment and wait for an
/// application thread that allocates. So the reclaimer makes those releases only while the host
/// is idle (host_idle()), and holds a gate exclusively for the call's duration, so no work can be
/// queued meanwhile: begin_host_work takes it shared, only around a counter increment, never
/// across a driver call. A blocking release that finds work in flight waits in the reclaimer's
/// backlog until the host is idle (the last end_host_work wakes the reclaimer). Never throws.
void begin_host_work() noexcept;
/// Ends one unit of begin_host_work. Lock-free: safe on the driver's callback thread.
void end_host_work() noexcept;
/// A host function that calls end_host_work (queued behind the work it ends).
void end_host_work_fn(void*) noexcept;
/// Units of host work queued or running now (tests and inspect).
long host_work_in_flight() noexcept;
/// Whether no tether host work is queued or running and no tether host callable runs.
bool host_idle() noexcept;
/// Whether the reclaimer is inside a blocking release right now. Why: the check for running
/// callables and the release are not atomic — a callable that starts between them makes the
/// release wait for it (the residual window of docs/design/attachments.md, "Blocking driver
/// calls"); tests tell that case apart with it.
bool reclaimer_in_blocking_release() noexcept;

/// Restores the capture modes tether's releases switched on this thread (end of a drain on a thread
/// that is not the reclaimer's). Defined with the release rule in resources/context.cpp.
void restore_capture_modes() noexcept;

// -------------------------------------------------------------------------------------- jobs

class NodeAttachment;
class ExecAccumulator;

/// Something the reclaimer runs: a small closed set of typed kinds, each a struct deriving from
/// Job, dispatched by one switch (reclaimer.cpp). Intrusive (the link lives in the job) so that
/// deferring never allocates: deferrals happen inside user-object destructors.
class Job {
 public:
  enum class Kind : std::uint8_t {
    owners,          ///< NodeAttachment: an attachment, or unused owner groups (attach/)
    accumulator,     ///< ExecAccumulator: an executable's owner accumulator (attach/)
    release,         ///< ReleaseJob: a driver handle released with its entry point (resources/context)
    destroy_exec,    ///< ExecDestroyJob: an executable's destruction (exec/)
    destroy_graph,   ///< GraphDestroyJob: a graph hierarchy's cuGraphDestroy (graph/)
    destroy_stream,  ///< StreamDestroyJob: a stream's last marker and destroy (resources/stream)
    retire,          ///< RetireJob: a launch marker that releases superseded executable owners (exec/)
  };
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;
  Kind kind() const noexcept { return kind_; }

 protected:
  explicit Job(Kind k) noexcept : kind_(k) {}
  ~Job() = default;

 private:
  friend class Reclaimer;
  Job* next_ = nullptr;
  Kind kind_;
  bool held_ = false;  // handed over or waiting for an idle host (counted in Reclaimer::held_)
};

/// What running a job came to.
enum class JobOutcome : std::uint8_t {
  done,            ///< it ran (and freed itself)
  hand_over,       ///< not on this thread: the reclaimer's own thread must run it
  wait_host_idle,  ///< not now: it runs once no tether host work is in flight
};

// The kinds' run functions, each defined with its kind (the one place that casts to it). Each
// frees its job when done.
JobOutcome run_release_job(Job& job) noexcept;
void run_exec_destroy_job(Job& job) noexcept;
void run_graph_destroy_job(Job& job) noexcept;
void run_stream_destroy_job(Job& job) noexcept;
void run_retire_job(Job& job) noexcept;

/// Queues `job` for the reclaimer and wakes it. The one deferral every part of tether uses.
/// Lock-free, allocation-free, never throws: safe inside a user-object destructor, from any
/// thread, while any lock is held. The reclaimer must have been started (Reclaimer::ensure_started)
/// by an ordinary code path before, or `job` waits for the next start or the exit drain.
void defer(Job* job) noexcept;

/// Starts the reclaimer thread if it is not running. Throws std::system_error if it cannot start.
void start_reclaimer();

/// Makes a job of type `J` from `args` and defers it; starts the reclaimer if needed. Allocates:
/// on failure the job's resources are leaked and the failure is reported through the error hook
/// (`what` says what was deferred). Never throws.
template <class J, class... A>
void defer_new(const char* what, A&&... args) noexcept {
  try {
    start_reclaimer();
    defer(new J(std::forward<A>(args)...));
  } catch (...) {
    report_current_exception(what);
  }
}

/// The executor. One process-wide instance; never destroyed.
class Reclaimer {
 public:
  static Reclaimer& instance() noexcept;

  /// Starts the thread if it is not running. Called from ordinary code paths (prepare), never from
  /// a destructor, so that defer() itself never has to create a thread.
  void ensure_started();

  /// Runs everything queued, on the calling thread, until the queue stays empty (a job may queue
  /// more). Jobs that only the reclaimer's thread may run are handed over to it (queued again, after
  /// the drain). Returns how many jobs were handled (run or handed over for the first time). The
  /// caller must be on a thread where CUDA calls are allowed.
  std::size_t drain() noexcept;

  /// Waits until every job deferred before the call has run, or the timeout passes.
  bool wait_idle(std::chrono::nanoseconds timeout);

  std::uint64_t pushed() const noexcept { return pushed_.load(std::memory_order_acquire); }
  std::uint64_t released() const noexcept { return released_.load(std::memory_order_acquire); }
  /// Whether process exit has begun (jobs waiting for an idle host then run without waiting).
  bool stopping() const noexcept { return stopping_.load(std::memory_order_acquire); }
  /// Whether process exit has drained the queue: later jobs are leaked on purpose.
  bool exited() const noexcept { return exited_.load(std::memory_order_acquire); }
  /// Whether the reclaimer's thread has finished (process exit): no job can be handed to it.
  bool thread_gone() const noexcept { return thread_done_.load(std::memory_order_acquire); }

  /// The gate of a blocking release: held exclusively if the host is idle; otherwise holds nothing
  /// (check owns_lock()).
  std::unique_lock<std::shared_mutex> try_host_idle_gate() noexcept;

 private:
  friend void defer(Job* job) noexcept;
  friend void begin_host_work() noexcept;
  friend void end_host_work() noexcept;
  friend long host_work_in_flight() noexcept;
  friend bool host_idle() noexcept;
  friend class ThreadRoleScope;
  Reclaimer() = default;
  void run();
  static void at_exit() noexcept;
  /// Pushes onto the queue; returns the previous head. Counted in pushed_ only if `count`.
  void push(Job* job, bool count) noexcept;
  /// Runs one job; returns its outcome.
  static JobOutcome run_one(Job* job) noexcept;
  /// Runs the backlog (jobs waiting for an idle host); those that still must wait stay.
  void run_backlog() noexcept;
  void wake() noexcept;
  /// Marks a job that could not run yet (counted once in held_ until it runs).
  void hold(Job* job) noexcept;
  /// Counts a job that ran (`held`: it had been held).
  void finished(bool held) noexcept;

  std::atomic<Job*> head_{nullptr};  // the queue: a lock-free stack, run in the order of arrival
  Job* backlog_ = nullptr;           // the reclaimer thread's own: jobs waiting for an idle host (FIFO)
  Job** backlog_tail_ = &backlog_;
  std::atomic<std::uint32_t> wake_{0};
  std::atomic<std::uint64_t> pushed_{0};
  std::atomic<std::uint64_t> released_{0};
  std::atomic<std::uint64_t> held_{0};  // jobs handed over to the thread or in its backlog, not run yet
  std::atomic<long> host_work_{0};
  std::atomic<int> callbacks_{0};          // tether host callables running now
  std::atomic<int> blocking_releases_{0};  // blocking releases in progress
  std::mutex start_mu_;
  std::atomic<bool> started_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> thread_done_{false};  // the thread finished its last batch and returned
  std::atomic<bool> exited_{false};
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;

 public:
  /// Marks a blocking release in progress for the scope of the object (reclaimer_in_blocking_release).
  class BlockingRelease {
   public:
    BlockingRelease() noexcept { instance().blocking_releases_.fetch_add(1, std::memory_order_acq_rel); }
    ~BlockingRelease() { instance().blocking_releases_.fetch_sub(1, std::memory_order_acq_rel); }
    BlockingRelease(const BlockingRelease&) = delete;
    BlockingRelease& operator=(const BlockingRelease&) = delete;
  };
  friend bool reclaimer_in_blocking_release() noexcept;
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
