// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "exec.hpp"

#include "topology.hpp"

#include "../introspect/inspect.hpp"

namespace tether {

namespace detail {

/// The executable's lock. Why not std::mutex: on the per-node update path a pthread mutex pair
/// costs about 55 instructions; this is one compare-exchange to lock and one exchange to unlock,
/// and sleeps (a futex, through std::atomic::wait) only when another thread holds it. State: 0
/// free, 1 held, 2 held with a thread waiting. Not recursive.
class ExecLock {
 public:
  // Out of line so that bench/instructions counts it as a lock (a call, about four instructions).
  [[gnu::noinline]] void lock() noexcept {
    std::uint32_t free = 0;
    if (state_.compare_exchange_strong(free, 1, std::memory_order_acquire, std::memory_order_relaxed)) [[likely]]
      return;
    while (state_.exchange(2, std::memory_order_acquire) != 0) state_.wait(2, std::memory_order_relaxed);
  }
  void unlock() noexcept {
    if (state_.exchange(0, std::memory_order_release) == 2) state_.notify_one();
  }

 private:
  std::atomic<std::uint32_t> state_{0};
};

/// Owners of per-node executable updates, and the lock of the executable. Shared by the
/// GraphExec, its accumulator (which CUDA keeps for every in-flight launch) and pending
/// reclamation markers; released on the reclaimer.
struct ExecOwners {
  struct Retired {
    std::uint64_t after_launches;  // launches 1..after_launches may still use these
    Owners owners;
    const NodeRecord* rec = nullptr;  // whose version it was, and the record's generation then (for inspect)
    std::uint32_t generation = 0;
  };
  // Why one lock for launches, updates and the markers' releases: a per-node update is a
  // ~200 ns driver call, and every extra lock is a measurable share of it (docs/performance.md).
  // A marker's release waits at most for one launch or update of its executable.
  ExecLock mu;
  std::uint64_t launches = 0;
  std::uint64_t completed = 0;  // launches a marker has seen complete (for inspect)
  CUstream last_stream = nullptr;
  bool updated_from_other = false;  // the last whole update came from another graph (for inspect)
  // The executable's own version of one node.
  struct Slot {
    const NodeRecord* rec = nullptr;
    Owners owners;
    std::uint64_t installed_at = 0;  // launches made before this version was installed
    // The version CUDA's executable was instantiated (or whole-updated) from: non-owning, kept
    // alive by the executable's copy of its user-object reference until the next whole update
    // (or a child-graph update of the node's graph clears it). Read only by inspect.
    const NodeAttachment* base = nullptr;
    std::uint32_t base_generation = 0;  // rec's generation when `base` was noted (a removed node's record is recycled)
    std::uint32_t generation = 0;       // rec's generation when `owners` were installed
  };
  // The executable's own version per node of its source, indexed by the record's dense index
  // (RecordStore::index_of; never erased: a whole update empties the values). Why an index and
  // not a hash of the record: updates of the nodes in creation order, the common case, then walk
  // the table from one slot to the next instead of touching a random cache line each (measured on
  // the H200, docs/performance.md: with a multiplicative hash the per-node update's ratio to the
  // raw driver was 2.30 against the older code's 2.06 despite 200 fewer instructions; with this
  // index 1.75 against 1.92, on another machine). Sized at instantiate for every record of the
  // source, so that per-node updates do not allocate.
  std::vector<Slot> table;
  std::size_t used = 0;
  std::vector<Retired> retired;  // superseded and possibly used by a launch, oldest first
  // After a whole update from another graph: per slot, the version of that graph's node paired
  // with the slot's node (the root graphs' nodes in creation order, as the driver pairs them),
  // which the executable now runs. Non-owning, like `base`: the executable's copies of that
  // graph's user-object references keep them until the next whole update. Read by parameter sets.
  std::vector<const NodeAttachment*> other;
  // The last whole update from another graph came from one whose topology the plan does not match
  // position by position (an edge differs): the driver, which pairs nodes by structure, accepted it
  // (docs/serving.md, "Agreement"), so creation order does not say which node runs which version.
  bool other_unpaired = false;

  std::uint32_t hint = 0;  // the source's record chunk of the last lookup (RecordStore::index_of)
  /// The slot of `r` (a record of the source, whose records are `store`), or null if it has none.
  Slot* find(const RecordStore& store, const NodeRecord* r) noexcept {
    const std::size_t i = store.index_of(r, hint);
    return i < table.size() && table[i].rec == r ? &table[i] : nullptr;
  }
  /// The slot of `r`, made if missing (may allocate: call before the driver call).
  Slot& slot(const RecordStore& store, const NodeRecord* r) {
    const std::size_t i = store.index_of(r, hint);
    if (i >= table.size()) [[unlikely]]
      reserve(std::max(i + 1, table.size() * 2));
    Slot& x = table[i];
    if (!x.rec) {
      x.rec = r;
      ++used;
    }
    return x;
  }
  /// Room for the records of indices below `records`.
  void reserve(std::size_t records) {
    if (table.size() < records) table.resize(records);
  }
  /// Supersedes `slot`'s version: released at once (into `dead`, dropped by the caller outside the
  /// lock) if no launch was made since it was installed, so no launch can use it; otherwise kept
  /// until the launches made so far have completed. `retired` must have room for one more.
  void supersede(Slot& slot, Owners& dead) noexcept {
    if (slot.owners.empty()) return;
    if (slot.installed_at == launches)
      dead += std::move(slot.owners);
    else
      retired.push_back({launches, std::move(slot.owners), slot.rec, slot.rec->generation.load(std::memory_order_relaxed)});
  }
};

/// Whether any graph of `h` has a host node (tracked or not).
bool has_host_nodes(const Hierarchy& h) noexcept {
  for (const Box& b : h.boxes)
    if (!b.retired.load(std::memory_order_relaxed))
      for (NodeRecord* r = b.first; r; r = r->next)
        if (r->type == CU_GRAPH_NODE_TYPE_HOST) return true;
  return false;
}
/// Notes each node's current version of `h` as the one the executable was made from. The table
/// must have room for every record of `h` (`reserve(h.records.size())`), so that this does not
/// allocate.
void record_bases(ExecOwners& o, const Hierarchy& h) noexcept {
  for (const Box& b : h.boxes)
    if (!b.retired.load(std::memory_order_relaxed))
      for (NodeRecord* r = b.first; r; r = r->next) {
        ExecOwners::Slot& x = o.table[h.records.index_of(r, o.hint)];
        if (!x.rec) {
          x.rec = r;
          ++o.used;
        }
        x.base = r->current;
        x.base_generation = r->generation.load(std::memory_order_relaxed);
      }
}

/// The memory every version `o` keeps, each allocation once: the other graph's versions after a
/// whole update from it, the instantiated ones, the executable's own and the superseded ones.
/// The caller holds the executable's lock.
OwnedMemory exec_memory(const ExecOwners& o) {
  MemoryTally t;
  for (const NodeAttachment* a : o.other) groups_measure(a, t);
  for (const ExecOwners::Slot& x : o.table) {
    groups_measure(x.base, t);
    groups_measure(OwnersAccess::head(x.owners), t);
  }
  for (const ExecOwners::Retired& x : o.retired) groups_measure(OwnersAccess::head(x.owners), t);
  return t.value();
}

/// Releases retired owners that only launches up to `completed` could have used, here.
void release_retired(const std::shared_ptr<ExecOwners>& owners, std::uint64_t completed) noexcept;
/// The same, later, on the reclaimer.
void release_retired_later(const std::shared_ptr<ExecOwners>& owners, std::uint64_t completed) noexcept;

std::atomic<std::size_t> g_live_execs{0};

// An executable's destruction: run where the executable dies, or deferred (a Job of kind
// destroy_exec).
struct ExecDestroyJob final : Job {
  struct Work {
    const DriverTable* d;
    CUgraphExec e;
    CUuserObject uo;
    CUcontext c;
    Context keep;
    std::shared_ptr<std::atomic<int>> dying;
    void operator()() const noexcept;
  };
  explicit ExecDestroyJob(Work w) noexcept : Job(Kind::destroy_exec), work(std::move(w)) {}
  Work work;
};

void ExecDestroyJob::Work::operator()() const noexcept {
  relax_capture_mode(*d);
  CUcontext cur = nullptr;
  CUresult got = raw<Entry::cuCtxGetCurrent>(*d, &cur);
  constexpr const char* kContext =
      "making a context current to destroy an executable (the executable is destroyed all the same)";
  if (got != CUDA_SUCCESS)
    report_failure(*d, Entry::cuCtxGetCurrent, got, kContext);
  else if (cur != c)
    if (CUresult set = raw<Entry::cuCtxSetCurrent>(*d, c); set != CUDA_SUCCESS)
      report_failure(*d, Entry::cuCtxSetCurrent, set, kContext);
  if (e) {
    std::lock_guard serial(graph_destroy_mutex());  // never beside its source's cuGraphDestroy
    CUresult r = raw<Entry::cuGraphExecDestroy>(*d, e);
    if (r != CUDA_SUCCESS) report_failure(*d, Entry::cuGraphExecDestroy, r, "destroying an executable graph");
  }
  if (dying) dying->fetch_sub(1, std::memory_order_acq_rel);
  if (uo) {
    CUresult r = raw<Entry::cuUserObjectRelease>(*d, uo, 1u);
    if (r != CUDA_SUCCESS)
      report_failure(*d, Entry::cuUserObjectRelease, r, "releasing an executable's owner accumulator");
  }
}

void run_exec_destroy_job(Job& j) noexcept {
  auto& job = static_cast<ExecDestroyJob&>(j);
  job.work();
  delete &job;
}

struct ExecState {
  const DriverTable* drv = nullptr;
  Context ctx;
  CUgraphExec exec = nullptr;
  ExecAccumulator* acc = nullptr;  // the caller's reference; CUDA's copy lives in the executable
  std::shared_ptr<ExecOwners> owners;  // its mutex is the executable's lock
  // Per-node updates take nodes of this graph's root. Why owned: node handles do not own their
  // graph, and an executable's nodes stay updatable after the Graph itself was dropped; compared
  // with a handle by ownership, so a new graph allocated where another died never matches.
  std::shared_ptr<Hierarchy> source;
  InstantiateOptions options;  // for update_or_reinstantiate
  // The topology of the graph it was made from (at instantiation or the last whole update), which
  // plan_update compares: the source is usually edited before an update. Guarded by the lock.
  std::shared_ptr<const Topology> topology;
  bool counted = false;         // in source->live_execs (set once the driver made the executable)
  bool single_instance = false; // its source has conditional nodes (CUDA instantiates it once at a time)
  // Its graph has host nodes: each launch counts as tether host work until a host function behind
  // it runs (begin_host_work). Fixed at instantiation: an update cannot change the node types.
  bool has_host = false;
  // What its launches do for owners that ask (LaunchObserver); set at instantiation and whole
  // updates, under the lock. `observed` lets a launch skip the lock when there is none.
  std::shared_ptr<LaunchObserver> observer;
  std::atomic<bool> observed{false};
  void observe(std::shared_ptr<LaunchObserver> o) noexcept {
    observed.store(o != nullptr, std::memory_order_release);
    observer = std::move(o);
  }

  explicit ExecState(const Context& c) : ctx(c) { g_live_execs.fetch_add(1, std::memory_order_relaxed); }

  /// Holds the executable's lock with its context current: what every call on it needs.
  struct Guard {
    // Every caller went through GraphExec::live(), which checked that driver calls are allowed here.
    explicit Guard(ExecState& s) : lock(s.owners->mu), scope(*s.drv, s.ctx.get(), ScopedContext::calls_checked) {}
    std::lock_guard<ExecLock> lock;
    ScopedContext scope;
  };
  ~ExecState() {
    g_live_execs.fetch_sub(1, std::memory_order_relaxed);
    const DriverTable* d = drv;
    CUgraphExec e = exec;
    CUuserObject uo = acc ? acc->user_object() : nullptr;
    CUcontext c = ctx.get();
    owners.reset();  // the accumulator keeps its own share for launches in flight
    std::shared_ptr<std::atomic<int>> dying;
    if (counted && source) {
      dying = source->dying_execs;
      dying->fetch_add(1, std::memory_order_acq_rel);
      source->live_execs.fetch_sub(1, std::memory_order_acq_rel);
    }
    ExecDestroyJob::Work destroy{d, e, uo, c, ctx, std::move(dying)};
    // Why on the reclaimer: cuGraphExecDestroy on an application thread in GLOBAL capture mode
    // invalidates a stream capture on any other thread (capture facts c4). It never blocks on
    // launches in flight: CUDA keeps what they use until they complete. An executable of a graph
    // with conditional nodes is destroyed here instead (in RELAXED mode, so no capture is harmed):
    // CUDA instantiates such a graph once at a time, and the caller may instantiate it again at
    // once; waiting for the reclaimer there could wait behind a host callback the caller opens.
    constexpr const char* kDefer = "deferring an executable's destruction to the reclaimer (it is leaked)";
    if (verdict(Act::release_reclaimer_only) == Verdict::go) {
      destroy();
    } else if (single_instance && verdict(Act::release) == Verdict::go) {
      try {
        ScopedContext scope(*d, c);
        RelaxedScope relaxed(*d);
        destroy();
      } catch (...) {
        defer_new<ExecDestroyJob>(kDefer, std::move(destroy));  // no context could be made current here
      }
    } else {
      defer_new<ExecDestroyJob>(kDefer, std::move(destroy));
    }
  }
};

// Follows a launch on its stream; when it runs, that launch and every earlier one of the
// executable have completed, so owners superseded before it can go (on the reclaimer: a Job of
// kind retire).
struct RetireJob final : Job {
  RetireJob(std::shared_ptr<ExecOwners> o, std::uint64_t c) noexcept
      : Job(Kind::retire), owners(std::move(o)), completed(c) {}
  /// The host function queued behind the launch (CUhostFn): only defers the job.
  static void run(void* self) noexcept { defer(static_cast<RetireJob*>(self)); }
  std::shared_ptr<ExecOwners> owners;
  std::uint64_t completed;
};
using Marker = RetireJob;  // the name the launch paths use

void run_retire_job(Job& j) noexcept {
  auto& job = static_cast<RetireJob&>(j);
  release_retired(job.owners, job.completed);
  delete &job;
}

namespace {

UpdateResult::Reason reason_of(CUgraphExecUpdateResult r) {
  switch (r) {
    case CU_GRAPH_EXEC_UPDATE_SUCCESS: return UpdateResult::Reason::success;
    case CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED: return UpdateResult::Reason::topology_changed;
    case CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED: return UpdateResult::Reason::node_type_changed;
    case CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED: return UpdateResult::Reason::function_changed;
    case CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED: return UpdateResult::Reason::parameters_changed;
    case CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED: return UpdateResult::Reason::not_supported;
    case CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE:
      return UpdateResult::Reason::unsupported_function_change;
    case CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED: return UpdateResult::Reason::attributes_changed;
    default: return UpdateResult::Reason::error;
  }
}

// The record of `node` in `h` (the offending node of a failed update), or null.
NodeRecord* find_record(Hierarchy& h, CUgraphNode node) {
  for (Box& b : h.boxes)
    for (NodeRecord* r = b.first; r; r = r->next)
      if (r->node == node) return r;
  return nullptr;
}

// Supersedes every current per-node version (a whole update replaces them all): released at
// once where no launch used them, retired otherwise. Allocates (a whole update is not on the
// per-node path): call before the driver call.
void reserve_retire_all(ExecOwners& o) { o.retired.reserve(o.retired.size() + o.used); }
void retire_all(ExecOwners& o, Owners& dead) noexcept {
  for (ExecOwners::Slot& x : o.table) o.supersede(x, dead);
}

// Throws UsageError for an empty stream: a null CUstream would silently mean the legacy stream.
void check_stream(const Stream& s, std::string_view call) {
  if (!s) throw_empty(call, "Stream");
}

}  // namespace

void release_retired_later(const std::shared_ptr<ExecOwners>& owners, std::uint64_t completed) noexcept {
  try {
    defer(new RetireJob(owners, completed));
  } catch (...) {
    report_error("queueing the release of superseded executable owners", "out of memory (released later)");
  }
}

void release_retired(const std::shared_ptr<ExecOwners>& owners, std::uint64_t completed) noexcept {
  std::vector<ExecOwners::Retired> done;
  {
    std::lock_guard lock(owners->mu);
    auto& r = owners->retired;
    owners->completed = std::max(owners->completed, completed);
    auto keep = std::find_if(r.begin(), r.end(), [&](const ExecOwners::Retired& x) { return x.after_launches > completed; });
    try {
      done.reserve(static_cast<std::size_t>(keep - r.begin()));
    } catch (...) {
      return;  // out of memory: released after a later launch or with the executable
    }
    for (auto it = r.begin(); it != keep; ++it) done.push_back(std::move(*it));
    r.erase(r.begin(), keep);
  }
  done.clear();  // owners die here, outside the lock
}

// The observer of an executable made from `h` (locked by the caller), or null: what the owners
// that ask for one (LaunchObserverFactory) found in the current versions of its nodes.
std::shared_ptr<LaunchObserver> make_observer(const Hierarchy& h) {
  LaunchObserverFactory f = launch_observer_factory.load(std::memory_order_acquire);
  if (!f) return nullptr;
  OwnerScan scan;
  for (const Box& b : h.boxes)
    if (!b.retired.load(std::memory_order_relaxed))
      for (const NodeRecord* r = b.first; r; r = r->next) groups_scan(r->current, scan);
  return scan.found.empty() ? nullptr : f(scan);
}

// CUDA instantiates a graph with conditional nodes once at a time: whether `h` has any, and a
// UsageError if an executable of it is alive, or dropped and not destroyed yet.
bool has_conditional_nodes(const Hierarchy& h);
void check_single_instance(const Hierarchy& h, std::string_view what);

}  // namespace detail

std::string_view to_string(UpdateResult::Reason r) noexcept {
  switch (r) {
    case UpdateResult::Reason::success: return "success";
    case UpdateResult::Reason::error: return "error";
    case UpdateResult::Reason::topology_changed: return "topology_changed";
    case UpdateResult::Reason::node_type_changed: return "node_type_changed";
    case UpdateResult::Reason::function_changed: return "function_changed";
    case UpdateResult::Reason::parameters_changed: return "parameters_changed";
    case UpdateResult::Reason::not_supported: return "not_supported";
    case UpdateResult::Reason::unsupported_function_change: return "unsupported_function_change";
    case UpdateResult::Reason::attributes_changed: return "attributes_changed";
  }
  return "unknown";
}

GraphExec Graph::instantiate() const { return instantiate(InstantiateOptions{}); }

GraphExec Graph::instantiate(const InstantiateOptions& options) const {
  detail::check_calls_allowed("Graph::instantiate");
  const auto& h = live("Graph::instantiate");
  if (options.upload) detail::check_stream(*options.upload, "Graph::instantiate (InstantiateOptions::upload)");
  const detail::DriverTable& drv = *h->drv;
  detail::HierarchyGuard lock(h->mu, "Graph::instantiate");
  // An undo failed on this graph: the driver's graph may hold what the metadata says is gone.
  h->check_usable();
  const bool single_instance = detail::has_conditional_nodes(*h);
  if (single_instance) detail::check_single_instance(*h, "Graph::instantiate");
  detail::ScopedContext scope(drv, ctx().get());
  auto state = std::make_shared<detail::ExecState>(ctx());
  state->drv = &drv;
  state->source = h;
  state->single_instance = single_instance;
  state->has_host = detail::has_host_nodes(*h);
  state->observe(detail::make_observer(*h));
  state->options = options;
  state->options.upload = nullptr;  // a re-instantiation does not upload (the stream may be gone)
  if (options.plan_updates) {
    std::shared_ptr<detail::Topology> topo = detail::read_topology(*h, options.use_node_priority);
    topo->forget_records();
    state->topology = std::move(topo);
  }
  state->owners = std::make_shared<detail::ExecOwners>();
  state->owners->reserve(h->records.size());
  detail::record_bases(*state->owners, *h);
  detail::ExecAccumulator* acc = detail::ExecAccumulator::create(drv);
  acc->owners() += Owners{state->owners};
  unsigned long long flags = 0;
  if (options.auto_free_on_launch) flags |= CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
  if (options.device_launch) flags |= CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH;
  if (options.use_node_priority) flags |= CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
  try {
    detail::with_accumulator_on(
        drv, h->root().graph, acc,
        [&] {
          // RELAXED: instantiating never invalidates a stream capture on any thread (capture facts c4).
          detail::RelaxedScope relaxed(drv);
          detail::call<detail::Entry::cuGraphInstantiateWithFlags>(drv, "instantiating a graph", &state->exec,
                                                                    h->root().graph, flags);
        },
        [&] {
          state->acc = acc;
          if (single_instance) {
            state->counted = true;
            h->live_execs.fetch_add(1, std::memory_order_acq_rel);
          }
        });
  } catch (...) {
    // The executable does not exist: releasing our reference ends the accumulator.
    detail::raw<detail::Entry::cuUserObjectRelease>(drv, acc->user_object(), 1u);
    throw;
  }
  GraphExec exec(std::move(state));
  if (options.upload) exec.upload(*options.upload);
  return exec;
}

GraphExec::GraphExec(GraphExec&&) noexcept = default;
GraphExec& GraphExec::operator=(GraphExec&&) noexcept = default;
GraphExec::~GraphExec() = default;
void GraphExec::reset() noexcept { s_.reset(); }

detail::ExecState& GraphExec::live(std::string_view call) const {
  detail::check_calls_allowed(call);
  if (!s_) [[unlikely]]
    detail::throw_empty(call, "GraphExec");
  return *s_;
}

const Context& GraphExec::context() const noexcept { return s_->ctx; }
const detail::DriverTable& GraphExec::table() const noexcept { return *s_->drv; }
CUgraphExec GraphExec::handle() const noexcept { return s_->exec; }
CUgraphExec GraphExec::get() const noexcept { return s_ ? s_->exec : nullptr; }

void GraphExec::launch(const Stream& stream) {
  detail::ExecState& st = live("GraphExec::launch");
  detail::check_stream(stream, "GraphExec::launch");
  std::shared_ptr<detail::LaunchObserver> observer;
  if (st.observed.load(std::memory_order_acquire)) [[unlikely]] {
    {
      std::lock_guard lock(st.owners->mu);
      observer = st.observer;
    }
    if (observer) observer->before_launch(stream);
  }
  launch_locked(st, stream);
  if (observer) observer->after_launch(stream);
}

void GraphExec::launch_locked(detail::ExecState& st, const Stream& stream) {
  detail::ExecState::Guard locked(st);
  detail::ExecOwners& o = *st.owners;
  const detail::DriverTable& drv = *st.drv;
  CUstream s = stream.get();
  if (st.has_host) {
    detail::begin_host_work();
    if (CUresult r = detail::raw<detail::Entry::cuGraphLaunch>(drv, st.exec, s); r != CUDA_SUCCESS) {
      detail::end_host_work();
      detail::throw_call_error(drv, detail::Entry::cuGraphLaunch, r, "launching an executable graph");
    }
    // Why a host function: it runs once the launch completed (one callback thread runs them in
    // stream order), ending the launch's host work without anyone waiting for it.
    if (CUresult r = detail::raw<detail::Entry::cuLaunchHostFunc>(drv, s, &detail::end_host_work_fn, nullptr);
        r != CUDA_SUCCESS) {
      detail::end_host_work();
      report_error("queueing the end of a launch's host work",
                   std::string(result_name(r)) + " (a blocking release may now wait for this launch's host nodes)");
    }
  } else {
    detail::call<detail::Entry::cuGraphLaunch>(drv, "launching an executable graph", st.exec, s);
  }
  std::uint64_t n = ++o.launches;
  o.last_stream = s;
  if (o.retired.empty()) return;  // no cost per launch when nothing was superseded
  // Why a host function and not a wait: nothing waits for the marker (a blocked host callback
  // would hold it up, as the driver runs every host function of the process on one thread); until
  // it runs, the retired versions stay alive, one set per launch at most.
  auto* marker = new detail::Marker(st.owners, n);
  CUresult r = detail::raw<detail::Entry::cuLaunchHostFunc>(drv, s, &detail::Marker::run, static_cast<void*>(marker));
  if (r != CUDA_SUCCESS) {
    delete marker;
    report_error("queueing the release of superseded executable owners",
                 std::string(result_name(r)) + " (they are released after a later launch)");
  }
}

void GraphExec::upload(const Stream& stream) {
  detail::ExecState& st = live("GraphExec::upload");
  detail::check_stream(stream, "GraphExec::upload");
  detail::ExecState::Guard locked(st);
  detail::call<detail::Entry::cuGraphUpload>(*st.drv, "uploading an executable graph", st.exec, stream.get());
}

UpdateResult GraphExec::update(const Graph& graph) {
  detail::ExecState& st = live("GraphExec::update");
  const auto& h = detail::GraphAccess::live(graph, "GraphExec::update");
  // Lock order: a hierarchy before an executable, never the other way round.
  detail::HierarchyGuard source_lock(h->mu, "GraphExec::update");
  h->check_usable();
  std::shared_ptr<detail::Topology> topo;
  if (st.options.plan_updates) {
    detail::ScopedContext scope(*st.drv, st.ctx.get());
    topo = detail::read_topology(*h, st.options.use_node_priority);
  }
  return update_locked(h, std::move(topo));
}

UpdatePlan GraphExec::plan_update(const Graph& graph) const {
  detail::ExecState& st = live("GraphExec::plan_update");
  const auto& h = detail::GraphAccess::live(graph, "GraphExec::plan_update");
  if (!st.options.plan_updates)
    throw UsageError("GraphExec::plan_update: this executable was instantiated with InstantiateOptions::plan_updates "
                     "= false, so it kept no topology to plan with (instantiate it with plan_updates = true)");
  detail::HierarchyGuard source_lock(h->mu, "GraphExec::plan_update");
  h->check_usable();
  detail::ScopedContext scope(*st.drv, st.ctx.get());
  std::shared_ptr<detail::Topology> topo = detail::read_topology(*h, st.options.use_node_priority);
  std::shared_ptr<const detail::Topology> mine;
  {
    std::lock_guard lock(st.owners->mu);
    mine = st.topology;
  }
  return detail::plan(*mine, *topo, h);
}

// The whole update from `h` (locked by the caller), whose topology is `topo`.
UpdateResult GraphExec::update_locked(const std::shared_ptr<detail::Hierarchy>& h, std::shared_ptr<detail::Topology> topo) {
  detail::ExecState& st = *s_;
  detail::ExecOwners& o = *st.owners;
  Owners dead;
  {
    std::lock_guard lock(o.mu);
    const bool paired = h == st.source || !topo || !st.topology || static_cast<bool>(detail::plan(*st.topology, *topo, h));
    if (topo) topo->forget_records();
    const detail::DriverTable& drv = *st.drv;
    detail::ScopedContext scope(drv, st.ctx.get());
    // Room for every node's base (slots are never erased: records of removed nodes stay).
    if (h == st.source) o.reserve(h->records.size());
    detail::reserve_retire_all(o);
    // The other graph's root nodes' versions in creation order, which the driver pairs with the
    // source's (`ExecOwners::other`), taken before the call so that publishing cannot fail.
    std::vector<const detail::NodeAttachment*> other;
    if (h != st.source)
      for (const detail::NodeRecord* x = h->root().first; x; x = x->next) other.push_back(x->current);
    std::shared_ptr<detail::LaunchObserver> observer = detail::make_observer(*h);
    CUgraphExecUpdateResultInfo info{};
    CUresult r = CUDA_SUCCESS;
    detail::with_accumulator_on(
        drv, h->root().graph, st.acc,
        [&] { r = detail::raw<detail::Entry::cuGraphExecUpdate>(drv, st.exec, h->root().graph, &info); },
        [&] {
          if (r != CUDA_SUCCESS) return;
          detail::retire_all(o, dead);
          for (detail::ExecOwners::Slot& x : o.table) x.base = nullptr;
          o.updated_from_other = h != st.source;
          st.observe(std::move(observer));
          st.topology = std::move(topo);
          o.other = std::move(other);
          o.other_unpaired = !paired;
          if (h == st.source) detail::record_bases(o, *h);
        });
    if (r != CUDA_SUCCESS) {
      if (r != CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE)
        detail::throw_call_error(drv, detail::Entry::cuGraphExecUpdate, r, "updating an executable graph");
      UpdateResult result;
      // Why not trust info.result alone: the driver may refuse the update without filling it in,
      // and its default (CU_GRAPH_EXEC_UPDATE_SUCCESS) would report the refusal as a success.
      result.reason = info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS ? UpdateResult::Reason::error
                                                                   : detail::reason_of(info.result);
      if (info.errorNode)
        if (detail::NodeRecord* rec = detail::find_record(*h, info.errorNode))
          result.node = detail::NodeAccess::make<AnyKind>(detail::NodeRef{h, rec, rec->generation.load()});
      return result;
    }
  }
  detail::defer(std::move(dead));
  return {};
}

namespace detail {

bool has_conditional_nodes(const Hierarchy& h) { return h.root_conditionals.load(std::memory_order_acquire) > 0; }

void check_single_instance(const Hierarchy& h, std::string_view what) {
  if (h.live_execs.load(std::memory_order_acquire) > 0)
    throw UsageError(fmt::format("{}: this graph has conditional nodes and an executable of it exists; CUDA "
                                 "instantiates such a graph once at a time (\"Graphs with conditional nodes cannot be "
                                 "instantiated more than once\"): update that executable (GraphExec::update), or drop "
                                 "it first",
                                 what));
  // Dropped where CUDA calls are forbidden (a host callback, a destructor): destroyed on the
  // reclaimer, not waited for here (the reclaimer may wait behind a callback this thread opens).
  if (h.dying_execs->load(std::memory_order_acquire) > 0)
    throw UsageError(fmt::format("{}: this graph has conditional nodes and a dropped executable of it is not "
                                 "destroyed yet (it was dropped inside a host callback or an owner's destructor, "
                                 "and the reclaimer destroys it); CUDA instantiates such a graph once at a time: "
                                 "call tether::wait_reclaimed() first",
                                 what));
}

}  // namespace detail

UpdateResult GraphExec::update_or_reinstantiate(const Graph& graph) {
  detail::ExecState& st = live("GraphExec::update_or_reinstantiate");
  const auto& h = detail::GraphAccess::live(graph, "GraphExec::update_or_reinstantiate");
  UpdateResult r;
  {
    // The plan and the update under one lock of the graph: no edit comes between them.
    detail::HierarchyGuard source_lock(h->mu, "GraphExec::update_or_reinstantiate");
    h->check_usable();
    std::shared_ptr<detail::Topology> topo;
    UpdatePlan p;
    if (st.options.plan_updates) {
      detail::ScopedContext scope(*st.drv, st.ctx.get());
      topo = detail::read_topology(*h, st.options.use_node_priority);
      std::shared_ptr<const detail::Topology> mine;
      {
        std::lock_guard lock(st.owners->mu);
        mine = st.topology;
      }
      p = detail::plan(*mine, *topo, h);
    }
    if (p) {
      r = update_locked(h, std::move(topo));
      if (r) return r;
    } else {
      // Foreseen: no cuGraphExecUpdate call, so nothing of the refusal reaches the driver.
      r.reason = p.reason;
      r.node = p.node;
      r.planned = true;
      r.rule = std::move(p.rule);
    }
  }
  const InstantiateOptions options = st.options;
  // CUDA instantiates a graph with conditional nodes once at a time: when this executable is the
  // one instance of `graph`, it must go first (destroyed here, as every such executable is).
  if (st.counted && st.source == h && detail::has_conditional_nodes(*st.source)) reset();
  GraphExec fresh = graph.instantiate(options);
  *this = std::move(fresh);
  r.reinstantiated = true;
  return r;
}

void GraphExec::throw_node_error(const char* what, bool valid) {
  if (valid)
    throw UsageError(fmt::format("{} is not a node of the graph this executable was instantiated from", what));
  throw UsageError(fmt::format("{} is not valid (default-constructed, removed, or its graph was destroyed)", what));
}

detail::NodeRecord* GraphExec::checked_record(const detail::NodeRef& n, const char* what) const {
  // Called with the source's publish lock held: a commit or rollback that retires the node cannot
  // run between this check and the driver call (the real driver does not validate node handles).
  detail::NodeRecord* r = n.record;
  if (!n.current() || r->box != s_->source->root_box || !r->alive) throw_node_error(what, n.current());
  return r;
}

void GraphExec::set_node(detail::NodeRecord* r, CUgraphNodeParams& p, const char* noun) {
  CUresult res = detail::raw<detail::Entry::cuGraphExecNodeSetParams>(*s_->drv, s_->exec, r->node, &p);
  if (res != CUDA_SUCCESS)
    detail::throw_call_error(*s_->drv, detail::Entry::cuGraphExecNodeSetParams, res,
                             fmt::format("updating {} of an executable graph", noun));
}

void GraphExec::node_update(const detail::NodeRef& n, const char* node_what,
                            detail::FunctionRef<Owners(detail::NodeRecord*)> build) {
  // Compared by ownership: the record is read only once the source (kept by this executable) is
  // known to be its hierarchy.
  if (!n.record || !detail::same_hierarchy(n.hierarchy, s_->source)) throw_node_error(node_what, n.valid());
  std::shared_lock publishing(s_->source->publish_mu);
  detail::NodeRecord* r = checked_record(n, node_what);
  Owners dead;
  {
    // The context is made current: the real driver crashed (SIGSEGV) in
    // cuGraphExecKernelNodeSetParams with no current context.
    detail::ExecState::Guard locked(*s_);
    detail::ExecOwners& o = *s_->owners;
    // Make room before the driver call, so that publishing afterwards cannot fail (the slot's
    // address stays valid until the next growth; the retired list gets room for one more).
    detail::ExecOwners::Slot& slot = o.slot(s_->source->records, r);
    if (o.retired.size() == o.retired.capacity()) o.retired.reserve(o.retired.capacity() * 2 + 4);
    Owners owners = build(r);  // a rejected update releases its owners (on the reclaimer)
    o.supersede(slot, dead);
    slot.owners = std::move(owners);
    slot.installed_at = o.launches;
    slot.generation = r->generation.load(std::memory_order_relaxed);
  }
  detail::defer(std::move(dead));
}

namespace detail {

namespace {

struct ParamSite {
  ExecOwners::Slot* slot;
  const ParamUse* use;
};

[[noreturn]] void throw_unpaired(std::string_view what) {
  throw UsageError(fmt::format(
      "{}: this executable was last updated from another graph, and the graph it was instantiated from has gained "
      "or lost nodes since, so its nodes (which per-node updates and parameter sets name) cannot be paired with the "
      "nodes the executable now runs: update it from its own graph again, or instantiate the other graph",
      what));
}

[[noreturn]] void throw_nested_param(std::string_view name, std::size_t nested) {
  throw UsageError(fmt::format(
      "GraphExec::set: parameter '{}' is bound to {} node{} inside embedded graphs or conditional bodies of this "
      "executable, which CUDA does not update one by one (cuGraphExecKernelNodeSetParams takes the top graph's nodes): "
      "set it in the graph (Edit::set) and update the executable from it (GraphExec::update); no node changed",
      name, nested, nested == 1 ? "" : "s"));
}

/// The slots whose running version binds `p`: the version of a per-node update or set, else the
/// version instantiated (or whole-updated) from the source, else — after a whole update from
/// another graph — that graph's version paired with the slot's node (its root nodes in creation
/// order). The caller holds the source's publish lock (shared) and the executable's lock.
/// Bound nodes inside embedded graphs and bodies are counted in `nested` (the driver updates only
/// the top graph's nodes one by one).
void param_sites(ExecState& st, const ParamStateBase* p, std::vector<ParamSite>& out, std::size_t& nested,
                 std::string_view what) {
  ExecOwners& o = *st.owners;
  const Box* root = st.source->root_box;
  auto running = [](ExecOwners::Slot& x, std::uint32_t gen, const NodeAttachment* fallback) -> const NodeAttachment* {
    if (!x.owners.empty()) return x.generation == gen ? OwnersAccess::head(x.owners) : nullptr;
    return fallback;
  };
  auto binding = [&](const NodeAttachment* v) -> const ParamUse* {
    const ParamUse* u = param_use_of(v);
    return u && u->uses(p) ? u : nullptr;
  };
  if (o.other.empty()) {
    for (ExecOwners::Slot& x : o.table) {
      if (!x.rec || !x.rec->alive) continue;
      const std::uint32_t gen = x.rec->generation.load(std::memory_order_relaxed);
      if (const ParamUse* u = binding(running(x, gen, x.base && x.base_generation == gen ? x.base : nullptr))) {
        if (x.rec->box == root)
          out.push_back({&x, u});
        else
          ++nested;
      }
    }
    return;
  }
  if (o.other_unpaired)
    throw UsageError(fmt::format(
        "{}: this executable was last updated from another graph whose edges differ from the ones it was made "
        "from; the driver accepted that update, pairing the nodes by structure, so which node of this graph runs "
        "which of the other graph's versions is not known: set the parameter in that graph (Edit::set) and update "
        "the executable from it again",
        what));
  std::size_t k = 0;
  for (NodeRecord* r = st.source->root().first; r; r = r->next) {
    ExecOwners::Slot* x = o.find(st.source->records, r);
    const std::uint32_t gen = r->generation.load(std::memory_order_relaxed);
    if (!x || x->base_generation != gen) continue;  // added since the executable was made
    if (k == o.other.size()) throw_unpaired(what);
    if (const ParamUse* u = binding(running(*x, gen, o.other[k++]))) out.push_back({x, u});
  }
  if (k != o.other.size()) throw_unpaired(what);
}

}  // namespace

}  // namespace detail

std::size_t GraphExec::set_param(const detail::ParamValue& v) {
  using detail::Entry;
  detail::ExecState& st = live("GraphExec::set");
  std::shared_lock publishing(st.source->publish_mu);
  Owners dead;
  std::size_t n = 0;
  {
    detail::ExecState::Guard locked(st);
    detail::ExecOwners& o = *st.owners;
    const detail::DriverTable& drv = *st.drv;
    std::vector<detail::ParamSite> sites;
    std::size_t nested = 0;
    detail::param_sites(st, v.state, sites, nested, "GraphExec::set");
    if (nested) detail::throw_nested_param(v.state->name(), nested);
    n = sites.size();
    if (n == 0) return 0;
    if (v.state->launch()) {
      detail::check_launch_set(v, "GraphExec::set", true);
      for (const detail::ParamSite& x : sites) detail::raise_for_launch_set(drv, *x.use, v, "GraphExec::set");
    }
    // Everything that can fail but the driver calls first: the next versions and room to retire
    // the current ones, so that after the calls nothing can fail.
    std::vector<Owners> next(n);
    std::vector<const detail::ParamUse*> made(n);
    try {
      for (std::size_t i = 0; i < n; ++i) made[i] = &next[i].adopt(sites[i].use->with(v));
      o.retired.reserve(o.retired.size() + n);
    } catch (...) {
      for (Owners& x : next) detail::defer(std::move(x));
      throw;
    }
    void* args[detail::kMaxParamArgs];
    std::size_t done = 0;
    CUresult r = CUDA_SUCCESS;
    for (; done < n; ++done) {
      const CUDA_KERNEL_NODE_PARAMS p = made[done]->params(args);
      r = detail::raw<Entry::cuGraphExecKernelNodeSetParams>(drv, st.exec, sites[done].slot->rec->node, &p);
      if (r != CUDA_SUCCESS) break;
    }
    if (r != CUDA_SUCCESS) {
      // All or nothing: the nodes set before the refused one get their running version back.
      for (std::size_t i = 0; i < done; ++i) {
        const CUDA_KERNEL_NODE_PARAMS p = sites[i].use->params(args);
        if (CUresult back = detail::raw<Entry::cuGraphExecKernelNodeSetParams>(drv, st.exec, sites[i].slot->rec->node, &p);
            back != CUDA_SUCCESS)
          detail::report_failure(drv, Entry::cuGraphExecKernelNodeSetParams, back,
                                 "putting a kernel node of an executable back after a refused parameter set (the node "
                                 "keeps the new value; its owners stay alive with the executable)");
      }
      for (Owners& x : next) detail::defer(std::move(x));
      detail::throw_call_error(
          drv, Entry::cuGraphExecKernelNodeSetParams, r,
          fmt::format("setting parameter '{}' on kernel node {} of the {} bound to it in an executable (kernel {}); "
                      "no node changed",
                      v.state->name(), done + 1, n, sites[done].use->core->kernel));
    }
    const std::uint64_t launches = o.launches;
    for (std::size_t i = 0; i < n; ++i) {
      detail::ExecOwners::Slot& slot = *sites[i].slot;
      // A value set: the superseded version keeps nothing the new one does not (param_use_only),
      // so it goes at once, and launches need no marker to release it. The new version then
      // stands for the launches the old one served: it keeps the old one's install count, so that
      // whatever supersedes it next keeps the buffers they share for those launches too.
      if (!v.held && detail::param_use_only(detail::OwnersAccess::head(slot.owners))) {
        dead += std::move(slot.owners);
      } else {
        o.supersede(slot, dead);
        slot.installed_at = launches;
      }
      slot.owners = std::move(next[i]);
      slot.generation = slot.rec->generation.load(std::memory_order_relaxed);
    }
  }
  detail::defer(std::move(dead));
  return n;
}

std::size_t GraphExec::bound_param(const detail::ParamStateBase* p) const {
  if (!s_) detail::throw_empty("GraphExec::bound_nodes", "GraphExec");
  detail::ExecState& st = *s_;
  std::shared_lock publishing(st.source->publish_mu);
  std::lock_guard lock(st.owners->mu);
  std::vector<detail::ParamSite> sites;
  std::size_t nested = 0;
  detail::param_sites(st, p, sites, nested, "GraphExec::bound_nodes");
  return sites.size();
}

void GraphExec::update(const Node<ChildNode>& node, const Graph& graph) {
  detail::ExecState& st = live("GraphExec::update");
  const detail::NodeRef& n = detail::NodeAccess::ref(node);
  if (!n.record || !detail::same_hierarchy(n.hierarchy, st.source)) throw_node_error("the child graph node to update", n.valid());
  const auto& h = detail::GraphAccess::live(graph, "GraphExec::update");
  detail::HierarchyGuard source_lock(h->mu, "GraphExec::update");
  h->check_usable();
  std::shared_lock publishing(st.source->publish_mu);
  detail::NodeRecord* r = checked_record(n, "the child graph node to update");
  detail::ExecState::Guard locked(st);
  // CUDA swaps the references: the executable drops the old child's and takes `graph`'s (fact 6d).
  detail::call<detail::Entry::cuGraphExecChildGraphNodeSetParams>(
      *st.drv, "updating a child graph node of an executable graph", st.exec, r->node, h->root().graph);
  // Those dropped references were what kept the instantiated versions below the node alive.
  for (detail::Box& b : st.source->boxes) {
    bool below = false;
    for (const detail::Box* p = &b; p && !below; p = p->parent) below = p->owner == r;
    if (below)
      for (detail::NodeRecord* x = b.first; x; x = x->next)
        if (detail::ExecOwners::Slot* slot = st.owners->find(st.source->records, x)) slot->base = nullptr;
  }
}

void GraphExec::set_enabled(const detail::NodeRef& n, bool on) {
  detail::ExecState& st = live("GraphExec::enable");
  if (!n.record || !detail::same_hierarchy(n.hierarchy, st.source)) throw_node_error("the node to enable or disable", n.valid());
  std::shared_lock publishing(st.source->publish_mu);
  detail::NodeRecord* r = checked_record(n, "the node to enable or disable");
  detail::ExecState::Guard locked(st);
  detail::call<detail::Entry::cuGraphNodeSetEnabled>(*st.drv, on ? "enabling a node" : "disabling a node", st.exec,
                                                     r->node, on ? 1u : 0u);
}

bool GraphExec::get_enabled(const detail::NodeRef& n) const {
  detail::ExecState& st = live("GraphExec::enabled");
  if (!n.record || !detail::same_hierarchy(n.hierarchy, st.source)) throw_node_error("the node to query", n.valid());
  std::shared_lock publishing(st.source->publish_mu);
  detail::NodeRecord* r = checked_record(n, "the node to query");
  detail::ExecState::Guard locked(st);
  unsigned on = 0;
  detail::call<detail::Entry::cuGraphNodeGetEnabled>(*st.drv, "querying whether a node is enabled", st.exec, r->node,
                                                     &on);
  return on != 0;
}

void GraphExec::reclaim(const Stream& stream) {
  detail::ExecState& st = live("GraphExec::reclaim");
  detail::check_stream(stream, "GraphExec::reclaim");
  detail::ExecOwners& o = *st.owners;
  std::lock_guard lock(o.mu);
  if (o.launches == 0) {
    detail::release_retired_later(st.owners, 0);
    return;
  }
  if (stream.get() != o.last_stream)
    throw UsageError("GraphExec::reclaim: pass the stream of the executable's last launch");
  if (o.retired.empty()) return;
  auto* marker = new detail::Marker(st.owners, o.launches);
  detail::ScopedContext scope(*st.drv, st.ctx.get());
  CUresult r = detail::raw<detail::Entry::cuLaunchHostFunc>(*st.drv, stream.get(), &detail::Marker::run,
                                                           static_cast<void*>(marker));
  if (r != CUDA_SUCCESS) {
    delete marker;
    detail::throw_call_error(*st.drv, detail::Entry::cuLaunchHostFunc, r, "queueing the release of superseded owners");
  }
}

std::size_t GraphExec::live_node_versions() const noexcept {
  if (!s_) return 0;
  std::lock_guard lock(s_->owners->mu);
  std::size_t n = s_->owners->retired.size();
  for (const detail::ExecOwners::Slot& x : s_->owners->table) n += x.owners.empty() ? 0 : 1;
  return n;
}

OwnedMemory owned_memory(const GraphExec& exec) {
  if (!exec.s_) detail::throw_empty("tether::owned_memory", "GraphExec");
  detail::ExecOwners& o = *exec.s_->owners;
  std::lock_guard lock(o.mu);
  return detail::exec_memory(o);
}

std::size_t live_executables() noexcept { return detail::g_live_execs.load(std::memory_order_relaxed); }
std::size_t live_graphs() noexcept { return detail::Hierarchy::live(); }

namespace {
struct Sentinel {
  std::atomic<bool> released{false};
  static void on_destroy(void* self) {
    auto* s = static_cast<Sentinel*>(self);
    s->released.store(true, std::memory_order_release);
    s->released.notify_all();
  }
};
}  // namespace

bool wait_released(const Context& ctx, std::chrono::milliseconds timeout) {
  if (detail::Verdict v = detail::verdict(detail::Act::wait_for_reclaimer); v != detail::Verdict::go)
    detail::refuse(v, "tether::wait_released");
  using namespace detail;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const DriverTable& drv = table_of(ctx.runtime());
  auto left = [&] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - std::chrono::steady_clock::now());
  };
  if (!Reclaimer::instance().wait_idle(left())) return false;
  // The sentinel takes the path of a launched executable's references: the driver's deferred
  // destructors run one after another on one thread, so once it has run, so has every release the
  // driver had queued before it. RELAXED for the calls below: instantiate and exec destroy in
  // GLOBAL mode would invalidate another thread's stream capture.
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  call<Entry::cuThreadExchangeStreamCaptureMode>(drv, "switching to relaxed capture mode", &mode);
  struct Restore {
    const DriverTable& drv;
    CUstreamCaptureMode mode;
    ~Restore() { raw<Entry::cuThreadExchangeStreamCaptureMode>(drv, &mode); }
  } restore{drv, mode};
  // Leaked on purpose if it never runs (the driver may still call it).
  auto* sentinel = new Sentinel;
  ScopedContext scope(*state_of(ctx));
  CUstream s = nullptr;
  CUgraph g = nullptr;
  CUgraphExec e = nullptr;
  CUuserObject uo = nullptr;
  auto cleanup = [&] {
    if (e) raw<Entry::cuGraphExecDestroy>(drv, e);
    if (g) raw<Entry::cuGraphDestroy>(drv, g);
    if (s) raw<Entry::cuStreamDestroy>(drv, s);
  };
  try {
    call<Entry::cuUserObjectCreate>(drv, "creating the sentinel of wait_released", &uo, static_cast<void*>(sentinel),
                                    &Sentinel::on_destroy, 1u, static_cast<unsigned>(CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    call<Entry::cuGraphCreate>(drv, "creating the sentinel graph of wait_released", &g, 0u);
    call<Entry::cuGraphRetainUserObject>(drv, "retaining the sentinel of wait_released", g, uo, 1u,
                                         static_cast<unsigned>(CU_GRAPH_USER_OBJECT_MOVE));
    uo = nullptr;  // the graph holds it now
    CUgraphNode n = nullptr;
    call<Entry::cuGraphAddEmptyNode>(drv, "adding the sentinel node of wait_released", &n, g,
                                     static_cast<const CUgraphNode*>(nullptr), std::size_t{0});
    call<Entry::cuStreamCreate>(drv, "creating the sentinel stream of wait_released", &s,
                                static_cast<unsigned>(CU_STREAM_NON_BLOCKING));
    call<Entry::cuGraphInstantiateWithFlags>(drv, "instantiating the sentinel of wait_released", &e, g, 0ull);
    call<Entry::cuGraphLaunch>(drv, "launching the sentinel of wait_released", e, s);
  } catch (...) {
    if (uo) raw<Entry::cuUserObjectRelease>(drv, uo, 1u);
    cleanup();
    throw;
  }
  cleanup();
  while (!sentinel->released.load(std::memory_order_acquire)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  delete sentinel;
  return Reclaimer::instance().wait_idle(left());
}

}  // namespace tether

namespace tether {

namespace detail {
Inspection inspect_boxes(const std::shared_ptr<Hierarchy>& h, Box& top,
                         std::unordered_map<const NodeRecord*, std::pair<std::size_t, std::size_t>>* where);
}  // namespace detail

Inspection inspect(const GraphExec& exec) {
  detail::check_calls_allowed("tether::inspect");
  if (!exec.s_) detail::throw_empty("tether::inspect", "GraphExec");
  detail::ExecState& st = *exec.s_;
  const std::shared_ptr<detail::Hierarchy>& h = st.source;
  // Lock order: the hierarchy before the executable, as every update.
  detail::HierarchyGuard lock(h->mu, "tether::inspect");
  detail::ScopedContext scope(*st.drv, st.ctx.get());
  std::unordered_map<const detail::NodeRecord*, std::pair<std::size_t, std::size_t>> where;
  Inspection in = detail::inspect_boxes(h, h->root(), &where);
  in.executable = true;
  detail::ExecOwners& o = *st.owners;
  std::lock_guard locked(o.mu);
  in.launches = o.launches;
  in.completed = o.completed;
  in.updated_from_other_graph = o.updated_from_other;
  // A version of a node removed from the graph since (its record freed or recycled) has no place
  // in the graph's picture: GraphInfo::none.
  auto place = [&](ExecVersion& v, const detail::NodeRecord* r, std::uint32_t generation) {
    v.graph = v.node = GraphInfo::none;
    if (r->generation.load(std::memory_order_acquire) != generation) return;
    if (auto it = where.find(r); it != where.end()) std::tie(v.graph, v.node) = it->second;
  };
  for (const detail::ExecOwners::Slot& x : o.table) {
    if (!x.rec) continue;
    if (x.base) {
      ExecVersion v;
      v.state = ExecVersion::State::instantiated;
      place(v, x.rec, x.base_generation);
      x.base->describe(v.owners);
      v.memory = detail::groups_memory(x.base);
      in.versions.push_back(std::move(v));
    }
    if (const detail::NodeAttachment* a = detail::OwnersAccess::head(x.owners)) {
      ExecVersion v;
      v.state = ExecVersion::State::updated;
      place(v, x.rec, x.rec->generation.load(std::memory_order_acquire));
      v.since_launch = x.installed_at;
      a->describe(v.owners);
      v.memory = detail::groups_memory(a);
      in.versions.push_back(std::move(v));
    }
  }
  for (const detail::ExecOwners::Retired& x : o.retired) {
    ExecVersion v;
    v.state = ExecVersion::State::superseded;
    if (x.rec) place(v, x.rec, x.generation);
    v.last_launch = x.after_launches;
    if (const detail::NodeAttachment* a = detail::OwnersAccess::head(x.owners)) {
      a->describe(v.owners);
      v.memory = detail::groups_memory(a);
    }
    in.versions.push_back(std::move(v));
  }
  in.memory = detail::exec_memory(o);
  std::sort(in.versions.begin(), in.versions.end(), [](const ExecVersion& a, const ExecVersion& b) {
    return std::tie(a.graph, a.node, a.state, a.last_launch, a.since_launch) <
           std::tie(b.graph, b.node, b.state, b.last_launch, b.since_launch);
  });
  return in;
}

}  // namespace tether
