// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "exec.hpp"

namespace tether {

namespace detail {

/// Owners of per-node executable updates, and the lock of the executable. Shared by the
/// GraphExec, its accumulator (which CUDA keeps for every in-flight launch) and pending
/// reclamation markers; released on the reclaimer.
struct ExecOwners {
  struct Retired {
    std::uint64_t after_launches;  // launches 1..after_launches may still use these
    Owners owners;
  };
  // Why one lock for launches, updates and the markers' releases: a per-node update is a
  // ~200 ns driver call, and every extra lock is a measurable share of it (docs/performance.md).
  // A marker's release waits at most for one launch or update of its executable.
  std::mutex mu;
  std::uint64_t launches = 0;
  CUstream last_stream = nullptr;
  // The executable's own version per node: an open-addressing table keyed by record (never
  // erased: a whole update empties the values), sized at instantiate for every node of the source
  // so that per-node updates do not allocate.
  std::vector<std::pair<const NodeRecord*, Owners>> current;
  std::size_t used = 0;
  std::vector<Retired> retired;  // superseded, oldest first (a few at most)

  // Records sit side by side in their hierarchy's storage, so their address divided by the record
  // size keeps nodes made one after another in neighbouring slots: updating nodes in creation order
  // walks the table instead of jumping through it.
  static std::size_t hash(const NodeRecord* r, std::size_t mask) noexcept {
    return static_cast<std::size_t>(reinterpret_cast<std::uintptr_t>(r) / sizeof(NodeRecord)) & mask;
  }
  /// Where `r` is, or the empty slot where it would go.
  std::size_t probe(const NodeRecord* r) const noexcept {
    const std::size_t mask = current.size() - 1;
    std::size_t i = hash(r, mask);
    while (current[i].first && current[i].first != r) i = (i + 1) & mask;
    return i;
  }
  /// The slot of `r`, made if missing (may allocate: call before the driver call).
  Owners& slot(const NodeRecord* r) {
    reserve(used + 1);
    std::size_t i = probe(r);
    if (!current[i].first) {
      current[i].first = r;
      ++used;
    }
    return current[i].second;
  }
  /// Room for `nodes` entries at most half full (a power of two, at least 16 slots).
  void reserve(std::size_t nodes) {
    if (current.size() >= nodes * 2) return;
    std::vector<std::pair<const NodeRecord*, Owners>> old(std::bit_ceil(std::max<std::size_t>(16, nodes * 2)));
    old.swap(current);
    for (auto& [r, o] : old)
      if (r) current[probe(r)] = {r, std::move(o)};
  }
};

/// Releases retired owners that only launches up to `completed` could have used, here.
void release_retired(const std::shared_ptr<ExecOwners>& owners, std::uint64_t completed) noexcept;
/// The same, later, on the reclaimer.
void release_retired_later(const std::shared_ptr<ExecOwners>& owners, std::uint64_t completed) noexcept;

struct ExecState {
  const DriverTable* drv = nullptr;
  Context ctx;
  CUgraphExec exec = nullptr;
  ExecAccumulator* acc = nullptr;  // the caller's reference; CUDA's copy lives in the executable
  std::shared_ptr<ExecOwners> owners;  // its mutex is the executable's lock
  // Per-node updates take nodes of this graph's root. Why a weak_ptr, compared by owner: a raw
  // pointer would match a new graph allocated where the source died.
  std::weak_ptr<const Hierarchy> source;

  explicit ExecState(const Context& c) : ctx(c) {}

  /// Holds the executable's lock with its context current: what every call on it needs.
  struct Guard {
    explicit Guard(ExecState& s) : lock(s.owners->mu), scope(*s.drv, s.ctx.get()) {}
    std::lock_guard<std::mutex> lock;
    ScopedContext scope;
  };
  ~ExecState() {
    const DriverTable* d = drv;
    CUgraphExec e = exec;
    CUuserObject uo = acc ? acc->user_object() : nullptr;
    owners.reset();  // the accumulator keeps its own share for launches in flight
    auto destroy = [d, e, uo] {
      if (e) {
        CUresult r = raw<Entry::cuGraphExecDestroy>(*d, e);
        if (r != CUDA_SUCCESS) report_error("destroying an executable graph", result_name(r));
      }
      if (uo) {
        CUresult r = raw<Entry::cuUserObjectRelease>(*d, uo, 1u);
        if (r != CUDA_SUCCESS) report_error("releasing an executable's owner accumulator", result_name(r));
      }
    };
    // Never blocks on launches in flight: CUDA keeps what they use until they complete.
    if (cuda_forbidden_here())
      defer_to_reclaimer(destroy);
    else
      destroy();
  }
};

namespace {

// Follows a launch on its stream; when it runs, that launch and every earlier one of the
// executable have completed, so owners superseded before it can go (on the reclaimer).
class Marker final : public Reclaimable {
 public:
  Marker(std::shared_ptr<ExecOwners> o, std::uint64_t completed) : owners_(std::move(o)), completed_(completed) {}
  static void run(void* self) { Reclaimer::instance().push(static_cast<Marker*>(self)); }
  void reclaim() noexcept override {
    release_retired(owners_, completed_);
    delete this;
  }

 private:
  std::shared_ptr<ExecOwners> owners_;
  std::uint64_t completed_;
};

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

// Moves every current per-node version to the retired list (a whole update supersedes them).
void retire_all(ExecOwners& o, std::uint64_t launches) {
  // (a whole update allocates: it is not on the per-node path)
  for (auto& [rec, owners] : o.current)
    if (!owners.empty()) o.retired.push_back({launches, std::move(owners)});
}

void lock_source(Hierarchy& h) {
  if (h.editor.load(std::memory_order_acquire) == std::this_thread::get_id())
    throw UsageError("this thread has an edit of the graph open; commit or drop it before instantiating or updating");
}

}  // namespace

void release_retired_later(const std::shared_ptr<ExecOwners>& owners, std::uint64_t completed) noexcept {
  try {
    Reclaimer::instance().push(new Marker(owners, completed));
  } catch (...) {
    report_error("queueing the release of superseded executable owners", "out of memory (released later)");
  }
}

void release_retired(const std::shared_ptr<ExecOwners>& owners, std::uint64_t completed) noexcept {
  std::vector<ExecOwners::Retired> done;
  {
    std::lock_guard lock(owners->mu);
    auto& r = owners->retired;
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
  const detail::DriverTable& drv = *h_->drv;
  detail::lock_source(*h_);
  std::lock_guard lock(h_->mu);
  detail::ScopedContext scope(drv, ctx_.get());
  auto state = std::make_shared<detail::ExecState>(ctx_);
  state->drv = &drv;
  state->source = h_;
  state->owners = std::make_shared<detail::ExecOwners>();
  state->owners->reserve(h_->root().node_count);
  detail::ExecAccumulator* acc = detail::ExecAccumulator::create(drv);
  acc->owners() += Owners{state->owners};
  unsigned long long flags = 0;
  if (options.auto_free_on_launch) flags |= CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
  if (options.device_launch) flags |= CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH;
  if (options.use_node_priority) flags |= CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
  try {
    detail::with_accumulator_on(
        drv, h_->root().graph, acc,
        [&] {
          detail::call<detail::Entry::cuGraphInstantiateWithFlags>(drv, "instantiating a graph", &state->exec,
                                                                    h_->root().graph, flags);
        },
        [&] { state->acc = acc; });
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

const Context& GraphExec::context() const noexcept { return s_->ctx; }
const detail::DriverTable& GraphExec::table() const noexcept { return *s_->drv; }
CUgraphExec GraphExec::handle() const noexcept { return s_->exec; }
CUgraphExec GraphExec::get() const noexcept { return s_ ? s_->exec : nullptr; }

void GraphExec::launch(const Stream& stream) {
  if (!s_) throw UsageError("GraphExec::launch: the executable was moved from");
  detail::ExecState::Guard locked(*s_);
  detail::ExecOwners& o = *s_->owners;
  const detail::DriverTable& drv = *s_->drv;
  CUstream st = stream.get();
  detail::call<detail::Entry::cuGraphLaunch>(drv, "launching an executable graph", s_->exec, st);
  std::uint64_t n = ++o.launches;
  o.last_stream = st;
  if (o.retired.empty()) return;  // no cost per launch when nothing was superseded
  auto* marker = new detail::Marker(s_->owners, n);
  CUresult r = detail::raw<detail::Entry::cuLaunchHostFunc>(drv, st, &detail::Marker::run, static_cast<void*>(marker));
  if (r != CUDA_SUCCESS) {
    delete marker;
    report_error("queueing the release of superseded executable owners",
                 std::string(result_name(r)) + " (they are released after a later launch)");
    return;
  }
}

void GraphExec::upload(const Stream& stream) {
  if (!s_) throw UsageError("GraphExec::upload: the executable was moved from");
  detail::ExecState::Guard locked(*s_);
  detail::call<detail::Entry::cuGraphUpload>(*s_->drv, "uploading an executable graph", s_->exec, stream.get());
}

UpdateResult GraphExec::update(const Graph& graph) {
  if (!s_) throw UsageError("GraphExec::update: the executable was moved from");
  const auto& h = detail::GraphAccess::hierarchy(graph);
  detail::lock_source(*h);
  detail::ExecOwners& o = *s_->owners;
  std::scoped_lock lock(o.mu, h->mu);
  const detail::DriverTable& drv = *s_->drv;
  detail::ScopedContext scope(drv, s_->ctx.get());
  o.reserve(h->root().node_count);
  CUgraphExecUpdateResultInfo info{};
  CUresult r = CUDA_SUCCESS;
  detail::with_accumulator_on(
      drv, h->root().graph, s_->acc,
      [&] { r = detail::raw<detail::Entry::cuGraphExecUpdate>(drv, s_->exec, h->root().graph, &info); },
      [&] {
        if (r == CUDA_SUCCESS) detail::retire_all(o, o.launches);
      });
  if (r == CUDA_SUCCESS) {
    if (o.launches == 0) detail::release_retired_later(s_->owners, 0);
    return {};
  }
  if (r != CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE)
    detail::throw_call_error(drv, detail::Entry::cuGraphExecUpdate, r, "updating an executable graph");
  UpdateResult result;
  result.reason = detail::reason_of(info.result);
  if (info.errorNode)
    if (detail::NodeRecord* rec = detail::find_record(*h, info.errorNode))
      result.node = detail::NodeAccess::make<AnyKind>(detail::NodeRef{h, rec, rec->generation.load()});
  return result;
}

detail::NodeRecord* GraphExec::check(const detail::NodeRef& n, const char* what) const {
  if (!s_) throw UsageError("GraphExec: the executable was moved from");
  if (!n.valid()) throw UsageError(fmt::format("{} is no longer valid (removed, or its graph was destroyed)", what));
  const bool same_source = !s_->source.owner_before(n.hierarchy) && !n.hierarchy.owner_before(s_->source);
  if (!same_source || n.record->box != &n.hierarchy->boxes.front() || !n.record->alive)
    throw UsageError(fmt::format("{} is not a node of the graph this executable was instantiated from", what));
  return n.record;
}

void GraphExec::node_update(detail::NodeRecord* r, Owners&& owners, detail::FunctionRef<CUresult()> apply,
                            detail::Entry entry, const char* what) {
  detail::UnusedOwners guard(owners);  // a rejected update releases its owners (on the reclaimer)
  // The context is made current: the real driver crashed (SIGSEGV) in
  // cuGraphExecKernelNodeSetParams with no current context.
  detail::ExecState::Guard locked(*s_);
  detail::ExecOwners& o = *s_->owners;
  // Make room before the driver call, so that publishing afterwards cannot fail (the slot's
  // address stays valid until the next growth; the retired list gets room for one more).
  Owners& slot = o.slot(r);
  if (o.retired.size() == o.retired.capacity()) o.retired.reserve(o.retired.capacity() * 2 + 4);
  CUresult res = apply();
  if (res != CUDA_SUCCESS) detail::throw_call_error(*s_->drv, entry, res, what);
  bool release_now = false;
  if (!slot.empty()) {
    o.retired.push_back({o.launches, std::move(slot)});
    release_now = o.launches == 0;  // nothing launched: nobody can use the superseded owners
  }
  slot = std::move(owners);
  if (release_now) detail::release_retired_later(s_->owners, 0);
}

void GraphExec::update(const Node<EventRecordNode>& node, const Event& event) {
  detail::NodeRecord* rec = check(detail::NodeAccess::ref(node), "the event record node to update");
  CUgraphNode n = rec->node;
  CUevent e = event.get();
  node_update(
      rec, Owners{event}, [&] { return detail::raw<detail::Entry::cuGraphExecEventRecordNodeSetEvent>(table(), handle(), n, e); },
      detail::Entry::cuGraphExecEventRecordNodeSetEvent, "updating an event record node of an executable graph");
}

void GraphExec::update(const Node<EventWaitNode>& node, const Event& event) {
  detail::NodeRecord* rec = check(detail::NodeAccess::ref(node), "the event wait node to update");
  CUgraphNode n = rec->node;
  CUevent e = event.get();
  node_update(
      rec, Owners{event}, [&] { return detail::raw<detail::Entry::cuGraphExecEventWaitNodeSetEvent>(table(), handle(), n, e); },
      detail::Entry::cuGraphExecEventWaitNodeSetEvent, "updating an event wait node of an executable graph");
}

void GraphExec::update(const Node<ChildNode>& node, const Graph& graph) {
  detail::NodeRecord* rec = check(detail::NodeAccess::ref(node), "the child graph node to update");
  const auto& h = detail::GraphAccess::hierarchy(graph);
  detail::lock_source(*h);
  std::scoped_lock lock(s_->owners->mu, h->mu);
  detail::ScopedContext scope(*s_->drv, s_->ctx.get());
  // CUDA swaps the references: the executable drops the old child's and takes `graph`'s (fact 6d).
  detail::call<detail::Entry::cuGraphExecChildGraphNodeSetParams>(
      *s_->drv, "updating a child graph node of an executable graph", s_->exec, rec->node, h->root().graph);
}

void GraphExec::set_enabled(const detail::NodeRef& n, bool on) {
  detail::NodeRecord* rec = check(n, "the node to enable or disable");
  detail::ExecState::Guard locked(*s_);
  detail::call<detail::Entry::cuGraphNodeSetEnabled>(*s_->drv, on ? "enabling a node" : "disabling a node", s_->exec,
                                                     rec->node, on ? 1u : 0u);
}

bool GraphExec::get_enabled(const detail::NodeRef& n) const {
  detail::NodeRecord* rec = check(n, "the node to query");
  detail::ExecState::Guard locked(*s_);
  unsigned on = 0;
  detail::call<detail::Entry::cuGraphNodeGetEnabled>(*s_->drv, "querying whether a node is enabled", s_->exec,
                                                     rec->node, &on);
  return on != 0;
}

void GraphExec::reclaim(const Stream& stream) {
  if (!s_) throw UsageError("GraphExec::reclaim: the executable was moved from");
  detail::ExecOwners& o = *s_->owners;
  std::lock_guard lock(o.mu);
  if (o.launches == 0) {
    detail::release_retired_later(s_->owners, 0);
    return;
  }
  if (stream.get() != o.last_stream)
    throw UsageError("GraphExec::reclaim: pass the stream of the executable's last launch");
  if (o.retired.empty()) return;
  auto* marker = new detail::Marker(s_->owners, o.launches);
  detail::ScopedContext scope(*s_->drv, s_->ctx.get());
  CUresult r = detail::raw<detail::Entry::cuLaunchHostFunc>(*s_->drv, stream.get(), &detail::Marker::run,
                                                           static_cast<void*>(marker));
  if (r != CUDA_SUCCESS) {
    delete marker;
    detail::throw_call_error(*s_->drv, detail::Entry::cuLaunchHostFunc, r, "queueing the release of superseded owners");
  }
}

std::size_t GraphExec::live_node_versions() const noexcept {
  if (!s_) return 0;
  std::lock_guard lock(s_->owners->mu);
  std::size_t n = s_->owners->retired.size();
  for (auto& [rec, owners] : s_->owners->current) n += owners.empty() ? 0 : 1;
  return n;
}

}  // namespace tether
