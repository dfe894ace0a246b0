// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Communicators, collectives, groups, registrations, the watchdog and the sequence check
// (docs/multi-gpu.md). Every NCCL call on one communicator is made under its lock (NCCL does not
// allow concurrent calls on one communicator, ncclCommAbort excepted), with its context current
// and the caller's context put back after it (NCCL moves the current context as it works).
#include "library.hpp"

#include "../attach/attachment.hpp"
#include "../exec/exec.hpp"

namespace tether::detail {

using nccl_abi::Result;
using Clock = std::chrono::steady_clock;

namespace {

// Communicators alive and being destroyed, and the NCCL jobs queued (deregistrations), for
// wait_closed and communicator_counts.
struct Counts {
  std::mutex mu;
  std::condition_variable cv;
  std::size_t alive = 0;
  std::size_t closing = 0;
  std::size_t jobs = 0;
};
Counts& counts() {
  static Counts* c = new Counts;  // immortal: communicators may close during exit
  return *c;
}
// Set when the process exits: NCCL's threads and its library's static state are torn down then,
// and an NCCL call racing with that crashed a process on the H200 (a communicator destroyed by its
// closing thread during exit). From then on nothing more is handed to NCCL: what is left goes with
// the process, as tether leaves what it cannot release safely at exit.
std::atomic<bool> g_exiting{false};
void on_exit() noexcept {
  g_exiting.store(true, std::memory_order_release);
  Counts& c = counts();
  std::unique_lock lock(c.mu);
  // Closing threads already running finish first (NCCL's destroy of a communicator whose graphs are
  // gone returns within its proxy's poll, half a second); a bounded wait, as one may wait for graphs
  // that outlive the program.
  c.cv.wait_for(lock, std::chrono::seconds(10), [&] { return c.closing == 0 && c.jobs == 0; });
}
void watch_exit() noexcept {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(&on_exit); });
}

void count_done(std::size_t Counts::*field) noexcept {
  Counts& c = counts();
  std::lock_guard lock(c.mu);
  --(c.*field);
  c.cv.notify_all();
}

// Makes `ctx` current for NCCL calls and puts back the context that was current before (NCCL's
// cudaSetDevice moves it; with none before, `ctx` stays current, as ScopedContext leaves it).
class NcclContext {
 public:
  NcclContext(const DriverTable& t, CUcontext ctx) : t_(t), ctx_(ctx) {
    call<Entry::cuCtxGetCurrent>(t, "reading the current context before an NCCL call", &prev_);
    if (prev_ != ctx) call<Entry::cuCtxSetCurrent>(t, "making a communicator's context current", ctx);
  }
  ~NcclContext() {
    CUcontext now = nullptr;
    const CUcontext want = prev_ ? prev_ : ctx_;
    if (raw<Entry::cuCtxGetCurrent>(t_, &now) == CUDA_SUCCESS && now == want) return;
    if (CUresult r = raw<Entry::cuCtxSetCurrent>(t_, want); r != CUDA_SUCCESS)
      report_failure(t_, Entry::cuCtxSetCurrent, r, "putting back the caller's context after an NCCL call");
  }
  NcclContext(const NcclContext&) = delete;
  NcclContext& operator=(const NcclContext&) = delete;

 private:
  const DriverTable& t_;
  CUcontext ctx_;
  CUcontext prev_ = nullptr;
};

std::atomic<std::uint64_t> g_stamp{0};  // issue order of collectives, process-wide

std::shared_ptr<LaunchObserver> make_collective_observer(const OwnerScan& scan);

}  // namespace

struct CommState {
  const NcclTable* nccl = nullptr;
  const DriverTable* drv = nullptr;
  ContextPtr ctx;
  ::ncclComm* comm = nullptr;
  int rank = 0;
  int size = 0;
  int device = 0;
  nccl::CommunicatorOptions options;
  std::mutex mu;  // every NCCL call on `comm` but ncclCommAbort
  std::atomic<bool> aborted{false};
  // An asynchronous error NCCL reported to a tether call (0: none seen): launches of executables
  // holding collectives on it are refused without asking NCCL each time.
  std::atomic<int> failed{0};
  mutable std::mutex reason_mu;
  std::string reason;  // why it was aborted

  CommState() {
    Counts& c = counts();
    std::lock_guard lock(c.mu);
    ++c.alive;
  }
  CommState(const CommState&) = delete;
  CommState& operator=(const CommState&) = delete;
  ~CommState();

  std::string label() const { return fmt::format("rank {} of {} (device {})", rank, size, device); }
  // Aborts once; returns false if it already was.
  bool abort(std::string why) noexcept;
  std::string abort_reason() const {
    std::lock_guard lock(reason_mu);
    return reason;
  }
};

namespace {

// What must outlive NCCL once the process exits (a communicator's context, a deferred NCCL call
// and what it holds) is kept here until the process is gone: never released, and reachable from a
// global so that leak checkers do not report it.
template <class T>
void keep_until_exit(T&& value) noexcept {
  static std::mutex mu;
  static auto* kept = new std::vector<std::shared_ptr<void>>();
  try {
    std::lock_guard lock(mu);
    kept->push_back(std::make_shared<std::decay_t<T>>(std::forward<T>(value)));
  } catch (...) {
  }
}

// Destroys (or aborts) a communicator on a thread of its own: NCCL's destroy waits, without a
// timeout, for every graph that captured work on a communicator of its process, and across
// processes for the other local ranks' destroys; no tether thread and no caller may wait for that.
void close_on_own_thread(const NcclTable* t, ContextPtr ctx, ::ncclComm* comm, bool abort, std::string label) noexcept {
  if (g_exiting.load(std::memory_order_acquire)) {
    keep_until_exit(std::move(ctx));  // NCCL may be gone: the communicator and its context go with the process
    return;
  }
  {
    Counts& c = counts();
    std::lock_guard lock(c.mu);
    ++c.closing;
  }
  try {
    std::thread([t, ctx = std::move(ctx), comm, abort, label = std::move(label)]() mutable {
      const DriverTable& drv = *ctx->table;
      // NCCL synchronizes and frees as it closes: in GLOBAL mode that would invalidate a stream
      // capture on any other thread.
      relax_capture_mode(drv);
      if (CUresult r = raw<Entry::cuCtxSetCurrent>(drv, ctx->context); r != CUDA_SUCCESS)
        report_failure(drv, Entry::cuCtxSetCurrent, r, "making a communicator's context current to destroy it");
      bool use_abort = abort;
      if (!use_abort) {
        // NCCL's destroy of a communicator with an asynchronous error returns that error, destroys
        // nothing and leaves the thread inside a group: abort such a one.
        Result async = Result::success;
        if (t->ncclCommGetAsyncError(comm, &async) != Result::success ||
            (async != Result::success && async != Result::in_progress))
          use_abort = true;
      }
      Result r = use_abort ? t->ncclCommAbort(comm) : t->ncclCommDestroy(comm);
      if (r != Result::success && !use_abort) r = t->ncclCommAbort(comm);
      if (r != Result::success)
        report_error("destroying an NCCL communicator",
                     fmt::format("{} of {} failed with {}: it is left to the process's exit",
                                 use_abort ? "ncclCommAbort" : "ncclCommDestroy", label, nccl::result_name(static_cast<int>(r))));
      ctx.reset();  // the primary context goes after NCCL freed what it held in it
      count_done(&Counts::closing);
    }).detach();
  } catch (...) {
    count_done(&Counts::closing);
    report_error("destroying an NCCL communicator",
                 fmt::format("no thread could be started to destroy {}: it is left to the process's exit", label));
  }
}

// One thread for NCCL's quick deferred calls (deregistrations): they may not run where the
// owner died (a host callback, the reclaimer holding other work), and must not wait behind a
// communicator's destroy.
class Jobs {
 public:
  void post(std::function<void()> job) noexcept {
    if (g_exiting.load(std::memory_order_acquire)) {
      keep_until_exit(std::move(job));  // kept with what it holds: see on_exit
      return;
    }
    try {
      std::lock_guard lock(mu_);
      if (!started_) {
        std::thread([this] { run(); }).detach();
        started_ = true;
      }
      q_.push_back(std::move(job));
      {
        Counts& c = counts();
        std::lock_guard count_lock(c.mu);
        ++c.jobs;
      }
      cv_.notify_one();
    } catch (...) {
      report_error("queueing an NCCL deregistration", "out of memory or no thread: the registration is left to the "
                                                      "communicator's destruction");
    }
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return !q_.empty(); });
        job = std::move(q_.front());
        q_.pop_front();
      }
      job();
      job = nullptr;  // what it held goes before it counts as done
      count_done(&Counts::jobs);
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> q_;
  bool started_ = false;
};
Jobs& jobs() {
  static Jobs* j = new Jobs;  // immortal, like its thread
  return *j;
}

}  // namespace

CommState::~CommState() {
  if (comm && !aborted.load(std::memory_order_acquire))
    close_on_own_thread(nccl, std::move(ctx), comm, false, label());
  count_done(&Counts::alive);
}

bool CommState::abort(std::string why) noexcept {
  if (aborted.exchange(true, std::memory_order_acq_rel)) return false;
  try {
    std::lock_guard lock(reason_mu);
    reason = std::move(why);
  } catch (...) {
  }
  close_on_own_thread(nccl, ctx, comm, true, label());
  return true;
}

struct Registration {
  mutable std::shared_ptr<CommState> comm;
  void* handle = nullptr;
  Registration(std::shared_ptr<CommState> c, void* h) noexcept : comm(std::move(c)), handle(h) {}
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;
  ~Registration() {
    if (!comm) return;  // registering failed: nothing to deregister
    jobs().post([comm = std::move(comm), h = handle] {
      CommState& cs = *comm;
      std::lock_guard lock(cs.mu);
      if (cs.aborted.load(std::memory_order_acquire)) return;  // NCCL's abort freed its registrations
      const DriverTable& drv = *cs.drv;
      relax_capture_mode(drv);
      try {
        NcclContext cx(drv, cs.ctx->context);
        if (Result r = cs.nccl->ncclCommDeregister(cs.comm, h); r != Result::success)
          report_error("deregistering a buffer from an NCCL communicator",
                       fmt::format("ncclCommDeregister on {} failed with {}", cs.label(), nccl::result_name(static_cast<int>(r))));
      } catch (const std::exception& e) {
        report_error("deregistering a buffer from an NCCL communicator", e.what());
      }
    });
  }
};

std::shared_ptr<CommState> registration_comm(const Registration& r) noexcept { return r.comm; }

namespace {
// For the members that call nothing and take no lock shared with the driver's threads (the
// queries, and abort, which hands NCCL's call to a thread of its own): they answer anywhere, a
// host callback included.
void check_live(const CommState* comm, const char* what) {
  if (!comm) throw_empty(what, "Communicator");
}
}  // namespace

void check_comm(const CommState* comm, const char* what) {
  check_calls_allowed(what);
  check_live(comm, what);
}

void throw_empty_operand(const char* what, const char* role) {
  throw UsageError(fmt::format("{}: the {} buffer is empty", what, role));
}

const ContextState* buffer_context(const Context& c) noexcept { return state_of(c).get(); }

namespace {

// ------------------------------------------------------------------------------- descriptions

std::string_view kind_name(CollectiveKind k) noexcept {
  switch (k) {
    case CollectiveKind::all_reduce: return "all_reduce";
    case CollectiveKind::all_gather: return "all_gather";
    case CollectiveKind::reduce_scatter: return "reduce_scatter";
    case CollectiveKind::broadcast: return "broadcast";
    case CollectiveKind::reduce: return "reduce";
    case CollectiveKind::send: return "send";
    case CollectiveKind::recv: return "recv";
  }
  return "collective";
}

NcclEntry entry_of(CollectiveKind k) noexcept {
  switch (k) {
    case CollectiveKind::all_reduce: return NcclEntry::ncclAllReduce;
    case CollectiveKind::all_gather: return NcclEntry::ncclAllGather;
    case CollectiveKind::reduce_scatter: return NcclEntry::ncclReduceScatter;
    case CollectiveKind::broadcast: return NcclEntry::ncclBroadcast;
    case CollectiveKind::reduce: return NcclEntry::ncclReduce;
    case CollectiveKind::send: return NcclEntry::ncclSend;
    case CollectiveKind::recv: return NcclEntry::ncclRecv;
  }
  return NcclEntry::ncclAllReduce;
}

// What a collective is, in words: "all_reduce of 1024 float32 (sum)".
struct Desc {
  CollectiveKind kind;
  nccl::DataType type;
  nccl::ReduceOp op;
  int root;
  std::size_t count;
};
std::string describe_collective(const Desc& d) {
  const std::string_view k = kind_name(d.kind), t = nccl::to_string(d.type), op = nccl::to_string(d.op);
  switch (d.kind) {
    case CollectiveKind::all_reduce: return fmt::format("{} of {} {} ({})", k, d.count, t, op);
    case CollectiveKind::all_gather: return fmt::format("{} of {} {} per rank", k, d.count, t);
    case CollectiveKind::reduce_scatter: return fmt::format("{} of {} {} per rank ({})", k, d.count, t, op);
    case CollectiveKind::broadcast: return fmt::format("{} of {} {} from rank {}", k, d.count, t, d.root);
    case CollectiveKind::reduce: return fmt::format("{} of {} {} ({}) to rank {}", k, d.count, t, op, d.root);
    case CollectiveKind::send: return fmt::format("{} of {} {} to rank {}", k, d.count, t, d.root);
    case CollectiveKind::recv: return fmt::format("{} of {} {} from rank {}", k, d.count, t, d.root);
  }
  return std::string(k);
}
std::string describe_collective(const CollectiveCall& c) { return describe_collective(Desc{c.kind, c.type, c.op, c.root_or_peer, c.count}); }

}  // namespace

/// The owner every collective's node keeps besides its buffers: the communicator, and what the
/// collective is (for inspect, and for the executable's scan: which communicators its launches
/// use, in which order).
struct CollectiveNote final : ScannedOwner {
  std::shared_ptr<CommState> comm;
  Desc desc;
  std::uint64_t stamp = 0;
  CollectiveNote(std::shared_ptr<CommState> c, Desc d, std::uint64_t s) : comm(std::move(c)), desc(d), stamp(s) {}
  CollectiveNote(const CollectiveNote&) = default;
  friend std::string tether_owner_label(const CollectiveNote& n) {
    return fmt::format("{} on Communicator {}", describe_collective(n.desc), n.comm->label());
  }
  friend void tether_owner_scan(const CollectiveNote& n, OwnerScan& s) { s.found.push_back(&n); }
};

namespace {

// ---------------------------------------------------------------------------------- checks

// The checks every collective makes before NCCL is called; fills in the default count.
void check_call(const CommState& cs, const ContextState& stream_ctx, CollectiveCall& c, const char* what) {
  if (stream_ctx.table != cs.drv || stream_ctx.device != cs.device)
    throw UsageError(fmt::format("{}: the stream belongs to device {}, the communicator ({}) to device {}: issue it on "
                                 "a stream of device {}",
                                 what, stream_ctx.device, cs.label(), cs.device, cs.device));
  const bool rooted = c.kind == CollectiveKind::broadcast || c.kind == CollectiveKind::reduce;
  const bool p2p = c.kind == CollectiveKind::send || c.kind == CollectiveKind::recv;
  if ((rooted || p2p) && (c.root_or_peer < 0 || c.root_or_peer >= cs.size))
    throw UsageError(fmt::format("{}: {} {} is not a rank of the communicator ({} ranks)", what, p2p ? "peer" : "root",
                                 c.root_or_peer, cs.size));
  if (static_cast<int>(c.op) < 0 || static_cast<int>(c.op) > 4)
    throw UsageError(fmt::format("{}: {} is not one of NCCL's reductions", what, static_cast<int>(c.op)));
  for (auto [op, role] : {std::pair{&c.send, "send"}, std::pair{&c.recv, "receive"}})
    if (op->ctx && (op->ctx->table != cs.drv || op->ctx->device != cs.device))
      throw UsageError(fmt::format("{}: the {} buffer is memory of device {}; the communicator's rank ({}) reads and "
                                   "writes its buffers on device {}",
                                   what, role, op->ctx->device, cs.label(), cs.device));
  const auto n = static_cast<std::size_t>(cs.size);
  if (c.count == nccl::whole) {
    switch (c.kind) {
      case CollectiveKind::reduce_scatter:
      case CollectiveKind::broadcast:
      case CollectiveKind::recv: c.count = c.recv.elements; break;
      default: c.count = c.send.elements; break;
    }
  }
  const bool gathers = c.kind == CollectiveKind::all_gather || c.kind == CollectiveKind::reduce_scatter;
  if (gathers && c.count > std::numeric_limits<std::size_t>::max() / n)
    throw UsageError(fmt::format("{}: {} elements per rank over {} ranks overflow", what, c.count, n));
  auto need = [&](const NcclOperand& op, const char* role, std::size_t elements) {
    if (op.elements < elements)
      throw UsageError(fmt::format("{}: the {} buffer holds {} {}; the {} needs {}", what, role, op.elements,
                                   nccl::to_string(c.type), describe_collective(c),
                                   elements));
  };
  switch (c.kind) {
    case CollectiveKind::all_reduce:
      need(c.send, "send", c.count);
      need(c.recv, "receive", c.count);
      break;
    case CollectiveKind::all_gather:
      need(c.send, "send", c.count);
      need(c.recv, "receive", c.count * n);
      break;
    case CollectiveKind::reduce_scatter:
      need(c.send, "send", c.count * n);
      need(c.recv, "receive", c.count);
      break;
    case CollectiveKind::broadcast:
      if (cs.rank == c.root_or_peer) need(c.send, "send", c.count);
      need(c.recv, "receive", c.count);
      break;
    case CollectiveKind::reduce:
      need(c.send, "send", c.count);
      if (cs.rank == c.root_or_peer) need(c.recv, "receive", c.count);
      break;
    case CollectiveKind::send: need(c.send, "send", c.count); break;
    case CollectiveKind::recv: need(c.recv, "receive", c.count); break;
  }
}

[[noreturn]] void throw_aborted(const CommState& cs, std::string_view what) {
  throw UsageError(fmt::format("{}: the communicator ({}) was aborted ({}); it cannot be used any more: make a new one",
                               what, cs.label(), cs.abort_reason()));
}

// Whether NCCL's answer `async` is an error; if so it is kept in `cs.failed`, so that launches are
// refused without asking NCCL again.
bool note_async_error(const CommState& cs, Result async) noexcept {
  if (async == Result::success || async == Result::in_progress) return false;
  const_cast<CommState&>(cs).failed.store(static_cast<int>(async), std::memory_order_release);
  return true;
}

[[noreturn]] void throw_async_error(const CommState& cs, Result async, std::string_view what) {
  throw_nccl_error(*cs.nccl, NcclEntry::ncclCommGetAsyncError, async,
                   fmt::format("{}: the communicator ({}) reported an asynchronous error, so it cannot run more work; "
                               "drop it and everything that holds it (tether then aborts it) and make a new one",
                               what, cs.label()));
}

// Refuses a communicator that was aborted or reported an asynchronous error (NCCL would not run
// the work, or would hang). Call under cs.mu with its context current.
void check_usable_locked(const CommState& cs, std::string_view what) {
  if (cs.aborted.load(std::memory_order_acquire)) throw_aborted(cs, what);
  Result async = Result::success;
  if (Result r = cs.nccl->ncclCommGetAsyncError(cs.comm, &async); r != Result::success)
    throw_nccl_error(*cs.nccl, NcclEntry::ncclCommGetAsyncError, r, fmt::format("{}: asking {} for its state", what, cs.label()));
  if (note_async_error(cs, async)) throw_async_error(cs, async, what);
}

// What a launch checks per communicator, without a call to NCCL (a launch costs nothing more):
// an abort, and an asynchronous error a tether call or the watchdog saw.
void check_launchable(const CommState& cs, std::string_view what) {
  if (cs.aborted.load(std::memory_order_acquire)) throw_aborted(cs, what);
  if (const int e = cs.failed.load(std::memory_order_acquire); e != 0) throw_async_error(cs, static_cast<Result>(e), what);
}

Result call_collective(const NcclTable& t, const CollectiveCall& c, ::ncclComm* comm, CUstream s) {
  const auto type = static_cast<nccl_abi::DataType>(c.type);
  const auto op = static_cast<nccl_abi::RedOp>(c.op);
  const void* send = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(c.send.address));
  void* recv = reinterpret_cast<void*>(static_cast<std::uintptr_t>(c.recv.address));
  switch (c.kind) {
    case CollectiveKind::all_reduce: return t.ncclAllReduce(send, recv, c.count, type, op, comm, s);
    case CollectiveKind::all_gather: return t.ncclAllGather(send, recv, c.count, type, comm, s);
    case CollectiveKind::reduce_scatter: return t.ncclReduceScatter(send, recv, c.count, type, op, comm, s);
    case CollectiveKind::broadcast: return t.ncclBroadcast(send, recv, c.count, type, c.root_or_peer, comm, s);
    case CollectiveKind::reduce: return t.ncclReduce(send, recv, c.count, type, op, c.root_or_peer, comm, s);
    case CollectiveKind::send: return t.ncclSend(send, c.count, type, c.root_or_peer, comm, s);
    case CollectiveKind::recv: return t.ncclRecv(recv, c.count, type, c.root_or_peer, comm, s);
  }
  return Result::invalid_argument;
}

// ------------------------------------------------------------------------------- the watchdog

// Work that must finish in time: an event recorded behind it on its stream, and the communicators
// to abort if it does not.
struct Watch {
  std::vector<std::weak_ptr<CommState>> comms;
  ContextPtr ctx;  // the event's
  CUevent event = nullptr;
  Clock::time_point deadline;
  std::chrono::milliseconds limit{0};
  std::string what;
};

class Watchdog {
 public:
  void add(Watch w) {
    std::lock_guard lock(mu_);
    if (!started_) {
      std::thread([this] { run(); }).detach();
      started_ = true;
    }
    watches_.push_back(std::move(w));
    cv_.notify_one();
  }

 private:
  void run() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait_for(lock, std::chrono::milliseconds(5), [&] { return !watches_.empty(); });
      std::vector<Watch> now = std::move(watches_);
      watches_.clear();
      lock.unlock();
      std::vector<Watch> keep;
      for (Watch& w : now)
        if (!check(w)) keep.push_back(std::move(w));
      lock.lock();
      for (Watch& w : keep) watches_.push_back(std::move(w));
      if (!keep.empty()) {
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        lock.lock();
      }
    }
  }
  // Whether `w` is settled (finished, expired and acted on, or failed).
  static bool check(Watch& w) noexcept {
    if (g_exiting.load(std::memory_order_acquire)) {  // the driver may be going: leave the event
      keep_until_exit(std::move(w.ctx));
      return true;
    }
    const DriverTable& drv = *w.ctx->table;
    // A query from a GLOBAL-mode thread would invalidate other threads' stream captures.
    relax_capture_mode(drv);
    if (raw<Entry::cuCtxSetCurrent>(drv, w.ctx->context) != CUDA_SUCCESS) return false;
    const CUresult q = raw<Entry::cuEventQuery>(drv, w.event);
    if (q == CUDA_ERROR_NOT_READY && Clock::now() < w.deadline) return false;
    if (q == CUDA_ERROR_NOT_READY) {
      std::string why = fmt::format("the NCCL watchdog: {} did not finish within {} ms; tether aborted the communicator "
                                    "(ncclCommAbort: NCCL's kernels return, and every later use of it throws)",
                                    w.what, w.limit.count());
      bool any = false;
      for (auto& c : w.comms)
        if (std::shared_ptr<CommState> s = c.lock()) any |= s->abort(why);
      if (any) report_error("the NCCL watchdog", why);
    } else if (q != CUDA_SUCCESS) {
      report_failure(drv, Entry::cuEventQuery, q, "the NCCL watchdog, waiting for watched work (it is no longer watched)");
    }
    if (CUresult r = raw<Entry::cuEventDestroy>(drv, w.event); r != CUDA_SUCCESS)
      report_failure(drv, Entry::cuEventDestroy, r, "the NCCL watchdog, destroying an event");
    return true;
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Watch> watches_;
  bool started_ = false;
};
Watchdog& watchdog() {
  static Watchdog* w = new Watchdog;  // immortal, like its thread
  return *w;
}

// Watches the work queued on `stream` so far (an event recorded there). Never throws: the work is
// queued already; a watch that cannot be set up is reported.
void watch(std::vector<std::weak_ptr<CommState>> comms, const Stream& stream, std::chrono::milliseconds limit,
           std::string what) noexcept {
  try {
    const ContextState& cs = StreamAccess::state(stream, "the NCCL watchdog");
    const DriverTable& drv = *cs.table;
    ScopedContext scope(cs);
    CUevent e = nullptr;
    call<Entry::cuEventCreate>(drv, "the NCCL watchdog, making an event", &e, static_cast<unsigned>(CU_EVENT_DISABLE_TIMING));
    if (CUresult r = raw<Entry::cuEventRecord>(drv, e, stream.get()); r != CUDA_SUCCESS) {
      (void)raw<Entry::cuEventDestroy>(drv, e);
      throw_call_error(drv, Entry::cuEventRecord, r, "the NCCL watchdog, recording an event behind the watched work");
    }
    watchdog().add(Watch{std::move(comms), StreamAccess::owner(stream), e, Clock::now() + limit, limit, std::move(what)});
  } catch (const std::exception& e) {
    report_error("watching NCCL work (it is not watched)", e.what());
  }
}

}  // namespace

// ------------------------------------------------------------------------------------ groups

struct GroupAccess {
  /// The outermost group open on this thread, or null.
  static nccl::Group* outermost() noexcept;
  static nccl::Group::Pending& pending(nccl::Group& g);
};

}  // namespace tether::detail

namespace tether::nccl {

namespace {
thread_local Group* t_group = nullptr;
}  // namespace

// A group's collectives wait here, checked, until the outermost group ends; NCCL sees them only
// then, between one ncclGroupStart and its ncclGroupEnd. Why not call NCCL as they come, as a raw
// group would: a failure of tether's own calls before the group's end (reading a stream's capture
// state, staging owners on a captured graph) would then leave NCCL's group open on this thread,
// queuing every later NCCL call of the thread forever (the NCCL failure sweep found it).
struct Group::Pending {
  struct Op {
    std::shared_ptr<detail::CommState> comm;
    CUstream stream;
    detail::CollectiveCall call;
  };
  const detail::NcclTable* nccl = nullptr;
  std::vector<detail::ForeignPart> parts;  // one per stream, with the owners of its collectives
  std::vector<Op> ops;
  ~Pending() {
    for (detail::ForeignPart& p : parts)
      if (!p.owners.empty()) detail::defer(std::move(p.owners));  // released on the reclaimer, as always
  }
};

Group::Group() noexcept : outer_(t_group) { t_group = this; }

Group::~Group() {
  if (ended_) return;
  try {
    end();
  } catch (...) {
    report_current_exception("ending an nccl::Group that was dropped without end()");
  }
}

void Group::end() {
  if (ended_) throw UsageError("nccl::Group::end: this group has ended already");
  if (t_group != this)
    throw UsageError("nccl::Group::end: a group opened inside this one is still open (or this group belongs to another "
                     "thread); end the inner one first");
  ended_ = true;
  t_group = outer_;
  if (outer_ || !pending_ || pending_->ops.empty()) return;  // an inner group's work is the outermost's
  std::unique_ptr<Pending> owned = std::move(pending_);
  Pending& p = *owned;
  detail::check_calls_allowed("nccl::Group::end");
  std::vector<std::shared_ptr<detail::CommState>> comms;
  for (const Pending::Op& op : p.ops) comms.push_back(op.comm);
  std::sort(comms.begin(), comms.end());
  comms.erase(std::unique(comms.begin(), comms.end()), comms.end());
  for (const auto& c : comms) {  // before NCCL sees anything: a refusal leaves nothing behind
    std::lock_guard lock(c->mu);
    detail::NcclContext cx(*c->drv, c->ctx->context);
    detail::check_usable_locked(*c, "nccl::Group::end");
  }
  detail::Result r = detail::Result::success;
  detail::NcclEntry failed = detail::NcclEntry::ncclGroupEnd;
  const Pending::Op* failed_op = nullptr;
  auto issue = [&] {
    std::vector<std::unique_lock<std::mutex>> locks;
    for (const auto& c : comms) locks.emplace_back(c->mu);
    // The group launches on every communicator's device: the caller's context is put back after.
    // RELAXED, as for a single collective (NCCL connects ranks at their first use).
    detail::NcclContext cx(*comms.front()->drv, comms.front()->ctx->context);
    detail::RelaxedScope relaxed(*comms.front()->drv);
    if ((r = p.nccl->ncclGroupStart()) != detail::Result::success) {
      failed = detail::NcclEntry::ncclGroupStart;
      return false;
    }
    for (const Pending::Op& op : p.ops)
      if (detail::Result q = detail::call_collective(*p.nccl, op.call, op.comm->comm, op.stream);
          q != detail::Result::success && !failed_op) {
        r = q;
        failed = detail::entry_of(op.call.kind);
        failed_op = &op;
      }
    // Always ended, so that the thread leaves NCCL's group; NCCL launches nothing of a group in
    // which a call failed.
    if (detail::Result q = p.nccl->ncclGroupEnd(); q != detail::Result::success && !failed_op) {
      r = q;
      failed = detail::NcclEntry::ncclGroupEnd;
    }
    return r == detail::Result::success;
  };
  auto raise = [&] {
    std::string what = failed_op ? fmt::format("{} on {}, in a group of {} NCCL operation(s)",
                                               detail::describe_collective(failed_op->call), failed_op->comm->label(), p.ops.size())
                                 : fmt::format("ending a group of {} NCCL operation(s)", p.ops.size());
    detail::throw_nccl_error(*p.nccl, failed, r, std::move(what));
  };
  detail::submit_foreign(p.parts, issue, raise, "nccl::Group::end");
  // The watchdog watches each stream of the group that was not capturing.
  std::vector<std::weak_ptr<detail::CommState>> watched;
  std::chrono::milliseconds limit{0};
  for (const auto& c : comms)
    if (c->options.watchdog.count() > 0) {
      watched.push_back(c);
      limit = limit.count() == 0 ? c->options.watchdog : std::min(limit, c->options.watchdog);
    }
  if (!watched.empty())
    for (detail::ForeignPart& part : p.parts)
      if (!part.captured)
        detail::watch(watched, *part.stream, limit,
                      fmt::format("a group of {} NCCL operation(s) ({} on {}, ...) queued on a stream", p.ops.size(),
                                  detail::describe_collective(p.ops.front().call), p.ops.front().comm->label()));
}

}  // namespace tether::nccl

namespace tether::detail {

nccl::Group* GroupAccess::outermost() noexcept {
  nccl::Group* g = nccl::t_group;
  while (g && g->outer_) g = g->outer_;
  return g;
}
nccl::Group::Pending& GroupAccess::pending(nccl::Group& g) {
  if (!g.pending_) g.pending_ = std::make_unique<nccl::Group::Pending>();
  return *g.pending_;
}

// ------------------------------------------------------------------------------ collectives

NodeRef nccl_collective(const std::shared_ptr<CommState>& comm, const Stream& stream, CollectiveCall c, Owners&& owners,
                        const char* what) {
  ReleaseIfUnused guard(owners);
  check_comm(comm.get(), what);
  CommState& cs = *comm;
  if (!stream) throw_empty(what, "Stream");
  const ContextState& sctx = StreamAccess::state(stream, what);
  check_call(cs, sctx, c, what);
  const Desc desc{c.kind, c.type, c.op, c.root_or_peer, c.count};
  auto label = [&] { return fmt::format("{} on {}", describe_collective(desc), cs.label()); };  // made only where it is shown
  owners += Owners{CollectiveNote(comm, desc, g_stamp.fetch_add(1, std::memory_order_relaxed) + 1)};
  Result r = Result::success;
  auto issue = [&] {
    std::lock_guard lock(cs.mu);
    NcclContext cx(*cs.drv, cs.ctx->context);
    check_usable_locked(cs, what);
    // RELAXED: NCCL connects ranks at their first collective (NCCL_RUNTIME_CONNECT, the default),
    // enabling peer access and allocating, which a GLOBAL-mode capture on any thread prohibits:
    // on two H200s of one process the first captured all_reduce failed so ("failed to peer with
    // device 1: operation not permitted when stream is capturing").
    RelaxedScope relaxed(*cs.drv);
    r = call_collective(*cs.nccl, c, cs.comm, stream.get());
    return r == Result::success;
  };
  auto raise = [&] { throw_nccl_error(*cs.nccl, entry_of(c.kind), r, label()); };

  if (nccl::Group* g = GroupAccess::outermost()) {
    // Checked now, issued to NCCL at the outermost group's end (Group::Pending says why).
    if (cs.aborted.load(std::memory_order_acquire)) throw_aborted(cs, what);
    auto& p = GroupAccess::pending(*g);
    if (p.nccl && p.nccl != cs.nccl)
      throw UsageError(fmt::format("{}: an nccl::Group holds operations of one NCCL; this communicator uses another",
                                   what));
    p.ops.reserve(p.ops.size() + 1);  // room first: nothing can fail once the owners moved
    p.parts.reserve(p.parts.size() + 1);
    auto part = std::find_if(p.parts.begin(), p.parts.end(), [&](const ForeignPart& x) { return x.stream->get() == stream.get(); });
    p.nccl = cs.nccl;
    p.ops.push_back({comm, stream.get(), c});
    if (part == p.parts.end())
      p.parts.push_back(ForeignPart{&stream, std::move(owners), {}, false});
    else
      part->owners += std::move(owners);
    return {};
  }

  ForeignPart part{&stream, std::move(owners), {}, false};
  submit_foreign({&part, 1}, issue, raise, what);
  if (!part.captured && cs.options.watchdog.count() > 0)
    watch({comm}, stream, cs.options.watchdog, fmt::format("{} queued on a stream", label()));
  return std::move(part.node);
}

std::shared_ptr<const Registration> nccl_register(const std::shared_ptr<CommState>& comm, const ContextState* buffer_ctx,
                                                  CUdeviceptr address, std::size_t bytes, const char* what) {
  check_comm(comm.get(), what);
  CommState& cs = *comm;
  if (buffer_ctx && (buffer_ctx->table != cs.drv || buffer_ctx->device != cs.device))
    throw UsageError(fmt::format("{}: the buffer is memory of device {}; the communicator ({}) is on device {}", what,
                                 buffer_ctx->device, cs.label(), cs.device));
  check_provided(*cs.nccl, NcclEntry::ncclCommRegister, what);
  auto reg = std::make_shared<Registration>(comm, nullptr);  // before NCCL: nothing to undo if it throws
  std::lock_guard lock(cs.mu);
  NcclContext cx(*cs.drv, cs.ctx->context);
  if (cs.aborted.load(std::memory_order_acquire)) {
    reg->comm.reset();
    throw_aborted(cs, what);
  }
  void* handle = nullptr;
  if (Result r = cs.nccl->ncclCommRegister(cs.comm, reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)), bytes, &handle);
      r != Result::success) {
    reg->comm.reset();  // nothing to deregister
    throw_nccl_error(*cs.nccl, NcclEntry::ncclCommRegister, r, fmt::format("registering {} bytes with {}", bytes, cs.label()));
  }
  reg->handle = handle;
  return reg;
}

namespace {

// ncclMemFree of NCCL memory whose last owner went: on the NCCL thread (ncclMemFree unmaps and
// synchronizes: never on a host callback or an application thread in GLOBAL capture mode).
void nccl_mem_free(const ContextPtr& owner, CUdeviceptr p) noexcept {
  jobs().post([owner, p] {
    const DriverTable& drv = *owner->table;
    relax_capture_mode(drv);
    try {
      const NcclTable& t = nccl_table(owner->runtime);
      NcclContext cx(drv, owner->context);
      if (Result r = t.ncclMemFree(reinterpret_cast<void*>(static_cast<std::uintptr_t>(p))); r != Result::success)
        report_error("freeing NCCL memory", fmt::format("ncclMemFree failed with {}", nccl::result_name(static_cast<int>(r))));
    } catch (const std::exception& e) {
      report_error("freeing NCCL memory", e.what());
    }
  });
}

}  // namespace

DeviceMemory nccl_mem_alloc(const Context& ctx, std::size_t count, std::size_t elem_size, std::string_view type) {
  constexpr const char* what = "nccl::alloc";
  check_calls_allowed(what);
  if (count == 0) throw UsageError(fmt::format("{}: allocating 0 elements of {}: a buffer cannot be empty", what, type));
  if (count > std::numeric_limits<std::size_t>::max() / elem_size)
    throw UsageError(fmt::format("{}: {} elements of {} overflow", what, count, type));
  const ContextState& cs = *state_of(ctx);
  const NcclTable& t = nccl_table(cs.runtime);
  check_provided(t, NcclEntry::ncclMemAlloc, what);
  void* p = nullptr;
  {
    RelaxedScope relaxed(*cs.table);
    NcclContext cx(*cs.table, cs.context);
    if (Result r = t.ncclMemAlloc(&p, count * elem_size); r != Result::success)
      throw_nccl_error(t, NcclEntry::ncclMemAlloc, r,
                       fmt::format("{}: allocating {} elements of {} ({} bytes) on device {}", what, count, type,
                                   count * elem_size, cs.device));
  }
  return DeviceMemory(ctx, static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p)), count * elem_size, &nccl_mem_free);
}

namespace {

std::shared_ptr<CommState> make_state(const NcclTable& t, const Context& ctx, ::ncclComm* comm, int rank, int size,
                                      const nccl::CommunicatorOptions& options) {
  try {
    auto s = std::make_shared<CommState>();
    s->nccl = &t;
    s->ctx = state_of(ctx);
    s->drv = s->ctx->table;
    s->comm = comm;
    s->rank = rank;
    s->size = size;
    s->device = s->ctx->device;
    s->options = options;
    launch_observer_factory.store(&make_collective_observer, std::memory_order_release);
    watch_exit();
    return s;
  } catch (...) {
    close_on_own_thread(&t, state_of(ctx), comm, false, fmt::format("rank {} of {}", rank, size));
    throw;
  }
}

void check_options(const nccl::CommunicatorOptions& o, const char* what) {
  if (o.watchdog.count() < 0)
    throw UsageError(fmt::format("{}: CommunicatorOptions::watchdog is negative ({} ms)", what, o.watchdog.count()));
}

}  // namespace

}  // namespace tether::detail

namespace tether::nccl {

std::string tether_owner_label(const Communicator& c) {
  return c.s_ ? "Communicator " + c.s_->label() : std::string("Communicator (empty)");
}

UniqueId UniqueId::generate(const Runtime& rt) {
  detail::check_calls_allowed("nccl::UniqueId::generate");
  const detail::NcclTable& t = detail::nccl_table(rt);
  detail::nccl_abi::UniqueId raw{};
  if (detail::Result r = t.ncclGetUniqueId(&raw); r != detail::Result::success)
    detail::throw_nccl_error(t, detail::NcclEntry::ncclGetUniqueId, r, "making a communicator's unique id");
  UniqueId id;
  std::memcpy(id.bytes_.data(), raw.internal, size);
  return id;
}

Communicator Communicator::create(const Context& ctx, const UniqueId& id, int size, int rank,
                                  const CommunicatorOptions& options) {
  constexpr const char* what = "nccl::Communicator::create";
  detail::check_calls_allowed(what);
  if (!id)
    throw UsageError(fmt::format("{}: the UniqueId is empty (make one with nccl::UniqueId::generate on one rank, and "
                                 "hand the same id to every rank)",
                                 what));
  if (size < 1) throw UsageError(fmt::format("{}: a communicator has at least 1 rank, not {}", what, size));
  if (rank < 0 || rank >= size)
    throw UsageError(fmt::format("{}: rank {} is not a rank of a {}-rank communicator (0 to {})", what, rank, size, size - 1));
  detail::check_options(options, what);
  const detail::ContextState& cs = *detail::state_of(ctx);
  const detail::NcclTable& t = detail::nccl_table(cs.runtime);
  detail::nccl_abi::UniqueId raw{};
  std::memcpy(raw.internal, id.bytes().data(), UniqueId::size);
  ::ncclComm* comm = nullptr;
  detail::Result r;
  {
    // NCCL allocates and synchronizes as it sets up: RELAXED, so that no other thread's stream
    // capture is invalidated; its context moves are undone.
    detail::RelaxedScope relaxed(*cs.table);
    detail::NcclContext cx(*cs.table, cs.context);
    r = t.ncclCommInitRank(&comm, size, raw, rank);
  }
  if (r != detail::Result::success)
    detail::throw_nccl_error(t, detail::NcclEntry::ncclCommInitRank, r,
                             fmt::format("joining rank {} of {} on device {}", rank, size, cs.device));
  return Communicator(detail::make_state(t, ctx, comm, rank, size, options));
}

std::vector<Communicator> Communicator::create_all(std::span<const Context> contexts, const CommunicatorOptions& options) {
  constexpr const char* what = "nccl::Communicator::create_all";
  detail::check_calls_allowed(what);
  if (contexts.empty()) throw UsageError(fmt::format("{}: no context was given", what));
  detail::check_options(options, what);
  std::vector<int> devices;
  for (std::size_t i = 0; i < contexts.size(); ++i) {
    const detail::ContextState& cs = *detail::state_of(contexts[i]);
    if (cs.table != detail::state_of(contexts[0])->table)
      throw UsageError(fmt::format("{}: context {} belongs to another runtime than context 0", what, i));
    if (std::find(devices.begin(), devices.end(), cs.device) != devices.end())
      throw UsageError(fmt::format("{}: contexts {} and {} are both of device {}; NCCL takes one rank per device", what,
                                   std::find(devices.begin(), devices.end(), cs.device) - devices.begin(), i, cs.device));
    devices.push_back(cs.device);
  }
  const detail::ContextState& first = *detail::state_of(contexts[0]);
  const detail::NcclTable& t = detail::nccl_table(first.runtime);
  std::vector<::ncclComm*> comms(contexts.size(), nullptr);
  detail::Result r;
  {
    detail::RelaxedScope relaxed(*first.table);
    detail::NcclContext cx(*first.table, first.context);
    r = t.ncclCommInitAll(comms.data(), static_cast<int>(comms.size()), devices.data());
  }
  if (r != detail::Result::success)
    detail::throw_nccl_error(t, detail::NcclEntry::ncclCommInitAll, r,
                             fmt::format("making a communicator of {} devices of this process", comms.size()));
  std::vector<Communicator> out;
  std::vector<std::shared_ptr<detail::CommState>> made;
  try {
    out.reserve(comms.size());
    for (std::size_t i = 0; i < comms.size(); ++i) {
      ::ncclComm* c = std::exchange(comms[i], nullptr);
      out.push_back(Communicator(detail::make_state(t, contexts[i], c, static_cast<int>(i), static_cast<int>(comms.size()),
                                                    options)));
    }
  } catch (...) {
    for (std::size_t i = 0; i < comms.size(); ++i)
      if (comms[i])
        detail::close_on_own_thread(&t, detail::state_of(contexts[i]), comms[i], false,
                                    fmt::format("rank {} of {}", i, comms.size()));
    throw;
  }
  return out;
}

int Communicator::rank() const {
  detail::check_live(s_.get(), "Communicator::rank");
  return s_->rank;
}
int Communicator::size() const {
  detail::check_live(s_.get(), "Communicator::size");
  return s_->size;
}
Context Communicator::context() const {
  detail::check_live(s_.get(), "Communicator::context");
  return detail::context_from(s_->ctx);
}
::ncclComm* Communicator::get() const noexcept { return s_ ? s_->comm : nullptr; }
const CommunicatorOptions& Communicator::options() const {
  detail::check_live(s_.get(), "Communicator::options");
  return s_->options;
}

Errc Communicator::async_error() const {
  constexpr const char* what = "Communicator::async_error";
  detail::check_comm(s_.get(), what);
  detail::CommState& cs = *s_;
  std::lock_guard lock(cs.mu);
  if (cs.aborted.load(std::memory_order_acquire)) return Errc::invalid_usage;  // NCCL's handle is gone
  detail::NcclContext cx(*cs.drv, cs.ctx->context);
  detail::Result async = detail::Result::success;
  if (detail::Result r = cs.nccl->ncclCommGetAsyncError(cs.comm, &async); r != detail::Result::success)
    detail::throw_nccl_error(*cs.nccl, detail::NcclEntry::ncclCommGetAsyncError, r, fmt::format("{} on {}", what, cs.label()));
  (void)detail::note_async_error(cs, async);
  return static_cast<Errc>(async);
}

void Communicator::abort(std::string_view why) const {
  detail::check_live(s_.get(), "Communicator::abort");
  s_->abort(std::string(why));
}
bool Communicator::aborted() const {
  detail::check_live(s_.get(), "Communicator::aborted");
  return s_->aborted.load(std::memory_order_acquire);
}
std::string Communicator::abort_reason() const {
  detail::check_live(s_.get(), "Communicator::abort_reason");
  return s_->abort_reason();
}

bool wait_closed(std::chrono::milliseconds timeout) {
  detail::Counts& c = detail::counts();
  std::unique_lock lock(c.mu);
  return c.cv.wait_for(lock, timeout, [&] { return c.closing == 0 && c.jobs == 0; });
}

CommunicatorCounts communicator_counts() noexcept {
  detail::Counts& c = detail::counts();
  std::lock_guard lock(c.mu);
  return {c.alive, c.closing};
}

}  // namespace tether::nccl

namespace tether::detail {

namespace {

// ------------------------------------------------------------------------ executables' launches

// What the ranks compare before an executable's first launch (check_sequences): how many
// collectives this rank's executable holds on the communicator, a hash of them all, and the
// first kListed of them, packed.
struct Packed {
  std::uint8_t kind;
  std::uint8_t type;
  std::uint8_t op;
  std::uint8_t pad = 0;
  std::int32_t root;
  std::uint64_t count;
};
constexpr std::size_t kListed = 16;
struct Summary {
  std::uint64_t count = 0;
  std::uint64_t hash = 0;
  Packed first[kListed]{};
};
static_assert(std::is_trivially_copyable_v<Summary>);

Summary summarize(const std::vector<Desc>& seq) {
  Summary s;
  s.count = seq.size();
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the packed descriptions
  for (std::size_t i = 0; i < seq.size(); ++i) {
    const Desc& d = seq[i];
    Packed p{static_cast<std::uint8_t>(d.kind), static_cast<std::uint8_t>(d.type), static_cast<std::uint8_t>(d.op), 0,
             d.root, static_cast<std::uint64_t>(d.count)};
    if (i < kListed) s.first[i] = p;
    const auto* b = reinterpret_cast<const unsigned char*>(&p);
    for (std::size_t k = 0; k < sizeof p; ++k) h = (h ^ b[k]) * 1099511628211ull;
  }
  s.hash = h;
  return s;
}

std::string describe_packed(const Packed& p) {
  return describe_collective(Desc{static_cast<CollectiveKind>(p.kind), static_cast<nccl::DataType>(p.type),
                       static_cast<nccl::ReduceOp>(p.op), p.root, static_cast<std::size_t>(p.count)});
}

class CollectiveObserver final : public LaunchObserver {
 public:
  struct PerComm {
    std::shared_ptr<CommState> comm;
    std::vector<Desc> sequence;  // issue order
  };
  explicit CollectiveObserver(std::vector<PerComm> comms) : comms_(std::move(comms)) {
    for (const PerComm& c : comms_) {
      checks_ |= c.comm->options.check_sequences;
      if (c.comm->options.watchdog.count() > 0) {
        watched_.push_back(c.comm);
        limit_ = limit_.count() == 0 ? c.comm->options.watchdog : std::min(limit_, c.comm->options.watchdog);
      }
    }
  }

  void before_launch(const Stream&) override {
    for (const PerComm& c : comms_) check_launchable(*c.comm, "GraphExec::launch (an executable holding NCCL collectives)");
    if (!checks_) return;
    std::lock_guard lock(check_mu_);
    if (checked_) return;
    for (const PerComm& c : comms_)
      if (c.comm->options.check_sequences) compare(c);
    checked_ = true;
  }

  void after_launch(const Stream& stream) noexcept override {
    if (watched_.empty()) return;
    try {
      std::size_t n = 0;
      for (const PerComm& c : comms_) n += c.sequence.size();
      watch(watched_, stream, limit_,
            fmt::format("a launch of an executable holding {} NCCL collective(s) (the first: {} on {})", n,
                        describe_collective(comms_.front().sequence.front()), comms_.front().comm->label()));
    } catch (const std::exception& e) {
      report_error("watching a launch of an executable holding NCCL collectives", e.what());
    }
  }

 private:
  // The sequence check of one communicator: an all-gather of every rank's Summary.
  static void compare(const PerComm& c) {
    CommState& cs = *c.comm;
    const Summary mine = summarize(c.sequence);
    Context ctx = context_from(cs.ctx);
    const auto n = static_cast<std::size_t>(cs.size);
    DeviceBuffer<std::byte> send = ctx.alloc<std::byte>(sizeof(Summary));
    DeviceBuffer<std::byte> recv = ctx.alloc<std::byte>(sizeof(Summary) * n);
    send.copy_from(std::span<const std::byte>(reinterpret_cast<const std::byte*>(&mine), sizeof mine));
    Stream s = ctx.make_stream();
    {
      std::lock_guard lock(cs.mu);
      NcclContext cx(*cs.drv, cs.ctx->context);
      check_usable_locked(cs, "GraphExec::launch (comparing the ranks' collectives)");
      if (Result r = cs.nccl->ncclAllGather(reinterpret_cast<const void*>(static_cast<std::uintptr_t>(send.address())),
                                            reinterpret_cast<void*>(static_cast<std::uintptr_t>(recv.address())),
                                            sizeof(Summary), nccl_abi::DataType::uint8, cs.comm, s.get());
          r != Result::success)
        throw_nccl_error(*cs.nccl, NcclEntry::ncclAllGather, r,
                         fmt::format("comparing the ranks' collectives before the first launch ({})", cs.label()));
    }
    s.synchronize();
    std::vector<Summary> all(n);
    recv.copy_to(std::span<std::byte>(reinterpret_cast<std::byte*>(all.data()), sizeof(Summary) * n));
    for (std::size_t r = 0; r < n; ++r) {
      if (all[r].count == all[0].count && all[r].hash == all[0].hash) continue;
      std::string first;
      const std::uint64_t listed = std::min<std::uint64_t>({all[0].count, all[r].count, kListed});
      std::uint64_t at = listed;
      for (std::uint64_t i = 0; i < listed; ++i)
        if (std::memcmp(&all[0].first[i], &all[r].first[i], sizeof(Packed)) != 0) {
          at = i;
          break;
        }
      auto item = [&](std::size_t rank) {
        return at < all[rank].count ? (at < kListed ? describe_packed(all[rank].first[at]) : std::string("(not listed)"))
                                    : std::string("none");
      };
      if (at < kListed && (at < all[0].count || at < all[r].count))
        first = fmt::format("; the first difference is collective {}: rank 0 {}, rank {} {}", at + 1, item(0), r, item(r));
      throw UsageError(fmt::format(
          "GraphExec::launch: the ranks' executables hold different NCCL collectives on the communicator (this is {}; "
          "CommunicatorOptions::check_sequences): rank 0 holds {}, rank {} holds {}{}. NCCL needs every rank to capture "
          "the same collectives in the same order; this launch would hang or corrupt data",
          cs.label(), all[0].count, r, all[r].count, first));
    }
  }

  std::vector<PerComm> comms_;
  bool checks_ = false;
  std::mutex check_mu_;
  bool checked_ = false;
  std::vector<std::weak_ptr<CommState>> watched_;
  std::chrono::milliseconds limit_{0};
};

std::shared_ptr<LaunchObserver> make_collective_observer(const OwnerScan& scan) {
  std::vector<const CollectiveNote*> notes;
  for (const ScannedOwner* o : scan.found)
    if (const auto* n = dynamic_cast<const CollectiveNote*>(o)) notes.push_back(n);
  if (notes.empty()) return nullptr;
  std::sort(notes.begin(), notes.end(), [](const CollectiveNote* a, const CollectiveNote* b) { return a->stamp < b->stamp; });
  std::vector<CollectiveObserver::PerComm> comms;
  for (const CollectiveNote* n : notes) {
    auto it = std::find_if(comms.begin(), comms.end(), [&](const auto& c) { return c.comm == n->comm; });
    if (it == comms.end()) it = comms.insert(comms.end(), CollectiveObserver::PerComm{n->comm, {}});
    it->sequence.push_back(n->desc);
  }
  return std::make_shared<CollectiveObserver>(std::move(comms));
}

}  // namespace

}  // namespace tether::detail
