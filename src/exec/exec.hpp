// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Executable graphs (docs/design/attachments.md, "Executables" and "Bounded reclamation").
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "../graph/edit.hpp"
#include "../resources/stream.hpp"

namespace tether::detail {

struct ExecState;
struct Topology;

/// What a launch of an executable does beyond the driver's launch, for owners that ask (NCCL's
/// communicators: refuse an aborted one, compare the ranks' sequences before the first launch,
/// watch the launch). Made from a scan of the executable's owners when it is instantiated or
/// wholly updated; shared by the launches.
class LaunchObserver {
 public:
  virtual ~LaunchObserver() = default;
  /// Before the launch, outside the executable's lock; throwing stops the launch.
  virtual void before_launch(const Stream& stream) = 0;
  /// After a launch on `stream` succeeded.
  virtual void after_launch(const Stream& stream) noexcept = 0;
};
/// Makes the observer of an executable whose owners' scan found `scan` (non-empty).
using LaunchObserverFactory = std::shared_ptr<LaunchObserver> (*)(const OwnerScan& scan);
/// Set by the layer whose owners ask (the first NCCL communicator); while it is null no
/// executable scans its owners, and a launch costs nothing more.
inline std::atomic<LaunchObserverFactory> launch_observer_factory{nullptr};

}  // namespace tether::detail

TETHER_EXPORT namespace tether {

struct Inspection;
Inspection inspect(const GraphExec& exec);
OwnedMemory owned_memory(const GraphExec& exec);

/// Options of `Graph::instantiate` (cuGraphInstantiateWithFlags flags).
struct InstantiateOptions {
  bool auto_free_on_launch = false;  ///< CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH
  bool device_launch = false;        ///< CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH
  bool use_node_priority = false;    ///< CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY
  /// Keep the topology `GraphExec::plan_update` compares with (read at instantiation and at every
  /// whole update: tether's records and one cuGraphGetEdges per graph, one
  /// cuGraphKernelNodeGetAttribute per kernel node, one cuGraphMemcpyNodeGetParams per memcpy
  /// node; docs/serving.md, "Update planning", for the cost). false saves that cost: `plan_update`
  /// then throws UsageError and `update_or_reinstantiate` asks the driver. Since 0.6.
  bool plan_updates = true;
  const Stream* upload = nullptr;    ///< upload on this stream right after instantiating (cuGraphUpload)
};

/// The outcome of a whole-graph update (`GraphExec::update(graph)`): success, or the driver's
/// reason and the offending node of the source graph (where the driver names one).
struct UpdateResult {
  enum class Reason {
    success,                     ///< CU_GRAPH_EXEC_UPDATE_SUCCESS
    error,                       ///< CU_GRAPH_EXEC_UPDATE_ERROR (unspecified)
    topology_changed,            ///< node count or edges differ
    node_type_changed,           ///< a node's type differs
    function_changed,            ///< a kernel's function changed in an unsupported way
    parameters_changed,          ///< parameters changed in an unsupported way
    not_supported,               ///< something about the node is not supported
    unsupported_function_change, ///< the function change is not supported
    attributes_changed,          ///< node attributes changed
  };
  Reason reason = Reason::success;
  Node<> node;  ///< the offending node of the source graph, if the driver named one
  /// Set by `GraphExec::update_or_reinstantiate` when the update was refused and the executable
  /// was instantiated again from the graph (`reason` then says why the update was refused).
  bool reinstantiated = false;
  /// Set by `GraphExec::update_or_reinstantiate` when its plan (`plan_update`) foresaw the
  /// refusal: cuGraphExecUpdate was not called. `rule` then says which rule refused it. Since 0.6.
  bool planned = false;
  /// The rule that refused the update, in words (from the plan; empty where the driver refused
  /// an update the plan accepted, or for `update`). Since 0.6.
  std::string rule;
  /// Whether the update succeeded.
  explicit operator bool() const noexcept { return reason == Reason::success; }
};

/// "success", "topology_changed", ...
std::string_view to_string(UpdateResult::Reason r) noexcept;

/// What `GraphExec::plan_update(graph)` foresees of a whole update from `graph`, without calling
/// cuGraphExecUpdate: accepted, or the driver's reason, the node it would name and the rule, in
/// words. The rules and their limits: docs/serving.md, "Update planning". A plain value; the node
/// handles are non-owning, as every node handle. Since 0.6.
struct UpdatePlan {
  /// The result cuGraphExecUpdate is expected to give (`success`: it would be accepted).
  UpdateResult::Reason reason = UpdateResult::Reason::success;
  /// The node of `graph` the driver would name (`errorNode`): the offending node, also inside a
  /// child graph or a conditional body (as the H200 names it); empty for a node-count difference
  /// (as the driver names none) and for fact U1 (docs/serving.md). The H200 may name another node
  /// for an edge difference (its pairing: docs/serving.md, "Agreement").
  Node<> node;
  /// `node`'s position (creation order, from 0) in its own graph; 0 where there is none.
  std::size_t position = 0;
  /// The rule that refuses the update, with what the executable has and what `graph` has, e.g.
  /// "node 2 (kernel) is cooperative in the executable and not in the graph (CUDA keeps
  /// CU_LAUNCH_ATTRIBUTE_COOPERATIVE fixed in a whole update)". Empty when accepted.
  std::string rule;
  /// Whether the update is expected to be accepted.
  explicit operator bool() const noexcept { return reason == UpdateResult::Reason::success; }
};

/// "accepted", or the reason followed by the rule ("topology_changed: node 3 (kernel) depends on
/// ..."). Since 0.6.
std::string to_string(const UpdatePlan& plan);

/// Executables alive in the process (GraphExec objects and those launches in flight keep).
std::size_t live_executables() noexcept;
/// Graph hierarchies alive in the process: every Graph and clone, and every graph an executable
/// keeps (views and node handles keep none). A count that does not fall back shows a leak, e.g. a
/// host callable that captures its own graph's executable (a reference cycle through the graph's
/// owners).
std::size_t live_graphs() noexcept;

/// Waits until everything whose last consumer is gone has been released, or `timeout` passes;
/// returns whether it was. Unlike `wait_reclaimed`, it also waits for the user objects the driver
/// releases later, on its own thread (docs/design/driver-facts.md 4g: up to a few hundred microseconds after the
/// last launch): it sends a sentinel through that same path (a one-node executable in `ctx`,
/// launched on a stream of its own and destroyed) and returns once the sentinel and everything
/// queued before it were released. Launches still in flight keep what they use. Runs in RELAXED
/// capture mode, so it does not invalidate another thread's capture. Throws UsageError inside a
/// host callback or on the reclaimer (an owner's destructor), DriverError if the sentinel cannot
/// be made.
bool wait_released(const Context& ctx, std::chrono::milliseconds timeout = std::chrono::seconds(10));

/// An executable graph (CUgraphExec) made by `Graph::instantiate`. It keeps every owner its
/// launches may use: the versions it was instantiated (or whole-updated) from, through CUDA's copy
/// of their user-object references, and the versions of per-node updates, which are released as
/// soon as no launch can still use them (bounded reclamation). Destroying it never waits for
/// launches in flight: their owners stay alive until they complete. Move-only.
///
/// Bound: a version superseded by a per-node update (or a whole update) before any launch used it
/// is released at once (on the reclaimer). A superseded version some launch may use is released
/// when that launch has completed, by a host function tether enqueues behind the next launch (or
/// by `reclaim(stream)`). So per node at most one current version plus one per launch not yet
/// known complete is alive, whatever the number of updates, streams or threads.
///
/// Empty state: default-constructed, moved from, or after `reset()`: `operator bool` is false,
/// `get()` null, `live_node_versions()` 0, every other member throws UsageError ("... this
/// GraphExec is moved from or empty"). Assign an executable to an empty one to use it
/// (`exec = graph.instantiate();`), so a GraphExec can be a member of a class that instantiates
/// later.
///
/// Thread safety: launches, updates and enable/disable of one executable are serialised by tether
/// (the driver does not allow them concurrently on one executable); different executables are
/// independent. No member may be called inside a host callback (UsageError): an application whose
/// host node waits for it updates and launches from its own thread, and tether then makes no
/// driver call there that waits for that callback.
class GraphExec : public NodeUpdates<GraphExec> {
 public:
  using NodeUpdates<GraphExec>::update;
  /// An empty executable (see "Empty state"); no driver call. Since 0.5.
  GraphExec() noexcept = default;
  GraphExec(GraphExec&&) noexcept;
  GraphExec& operator=(GraphExec&&) noexcept;
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  /// cuGraphExecDestroy, on tether's reclaimer (a destroy in GLOBAL capture mode would invalidate
  /// another thread's stream capture); never blocks on launches in flight. An executable of a
  /// graph with conditional nodes is destroyed here, in RELAXED capture mode (so that the graph,
  /// which CUDA instantiates once at a time, can be instantiated again at once), except inside a
  /// host callback or an owner's destructor.
  ~GraphExec();

  /// Whether this object holds an executable (false once moved from or reset).
  explicit operator bool() const noexcept { return s_ != nullptr; }
  /// Drops the executable now, as destruction does.
  void reset() noexcept;

  /// Launches the executable on `stream` (cuGraphLaunch). Launches of one executable run one
  /// after another, even on different streams. Throws UsageError for an empty stream (it never
  /// silently means the legacy default stream), DriverError. An executable holding NCCL
  /// collectives also throws UsageError when a communicator of them was aborted, or when the
  /// ranks' sequences differ (`nccl::CommunicatorOptions::check_sequences`, first launch only), and
  /// its launches are watched (`nccl::CommunicatorOptions::watchdog`): docs/multi-gpu.md.
  void launch(const Stream& stream);
  /// Uploads the executable to the device (cuGraphUpload). Throws like `launch`.
  void upload(const Stream& stream);

  /// Whole-graph update from `graph` (cuGraphExecUpdate), which must have this executable's
  /// topology. Returns the driver's verdict as a value: on failure the executable, its owners and
  /// its per-node updates are unchanged and it still launches. On success the executable holds
  /// `graph`'s versions; owners of earlier per-node updates are released once no launch uses them.
  /// Throws DriverError for other failures, UsageError for an invalid graph.
  UpdateResult update(const Graph& graph);

  /// Plans a whole update from `graph` without making it: whether cuGraphExecUpdate would accept
  /// it and, if not, the first node and the rule that refuses it (`UpdatePlan`). Compares the
  /// topology this executable was made from — taken at instantiation and at every whole update:
  /// the nodes of every graph of the hierarchy in creation order, their kinds, dependencies, child
  /// graphs and conditional bodies, each kernel node's COOPERATIVE attribute (and PRIORITY under
  /// `use_node_priority`), each conditional node's type and size, each memcpy node's memory types
  /// — with `graph`'s now, read from tether's records and the driver (cuGraphGetEdges per graph,
  /// cuGraphKernelNodeGetAttribute per kernel node, cuGraphMemcpyNodeGetParams per memcpy node),
  /// and refuses a graph an edge was removed from as the driver does (fact U1). Changes nothing.
  /// Where the edges differ the driver pairs nodes by structure: it may refuse for another reason
  /// or node, and accepts an edge moved between nodes of one kind, which the plan refuses. What
  /// it cannot see (docs/serving.md, "Update planning"): a requested priority outside the device's
  /// range (the driver reads back the clamped value), NVLINK_UTIL_CENTRIC_SCHEDULING set by other
  /// code (not readable), device-updatable kernel nodes, a kernel's context or dynamic-parallelism
  /// use. Throws UsageError for an empty executable or graph, for an executable instantiated with
  /// `plan_updates = false`, inside a host callback; DriverError if a read fails. Thread safety:
  /// as `update` (it takes `graph`'s lock, then this executable's). Since 0.6.
  UpdatePlan plan_update(const Graph& graph) const;

  /// The capture–update loop's step: a whole update from `graph` (as `update`), or, where it
  /// would be refused (the topology or a node's kind changed, ...), a new executable
  /// instantiated from `graph` with this one's options (`upload` aside) that replaces this one.
  /// The replaced executable is destroyed as usual: launches in flight keep its owners. Returns
  /// the update's verdict; `reinstantiated` says whether it was replaced (then `reason` is why).
  /// It plans first (`plan_update`, under the same lock as the update; not with
  /// `InstantiateOptions::plan_updates = false`, then the driver decides): a refusal the plan
  /// foresees makes no cuGraphExecUpdate call (`planned` and `rule` say so); an update the plan
  /// accepts is made, and if the driver still refuses it, the executable is replaced all the same.
  /// Per-node updates afterwards take nodes of the graph this executable was last instantiated
  /// from. Needs exclusive access to this object (it may be assigned). Throws like `update` and
  /// `Graph::instantiate`; if the instantiation throws, this executable is unchanged — except for
  /// a graph with conditional nodes that this executable was instantiated from: CUDA instantiates
  /// such a graph once at a time, so this executable is destroyed first (launches in flight keep
  /// its owners), and is empty if the instantiation then throws.
  UpdateResult update_or_reinstantiate(const Graph& graph);

  /// Per-node updates (NodeUpdates): they change this executable only (not the graph), through
  /// cuGraphExecNodeSetParams; `node` must be a node of the graph this executable was instantiated
  /// from. The new owners are kept until superseded and no launch can use them. A rejected update
  /// throws DriverError and releases its owners; the executable keeps running its previous version.
  /// A kernel update's Launch may change dimensions and dynamic shared memory but no attribute.
  /// Per-node update of a child graph node with a copy of `graph` (cuGraphExecChildGraphNodeSetParams,
  /// same topology required): the executable drops the old child's references and takes `graph`'s.
  void update(const Node<ChildNode>& node, const Graph& graph);

  /// Sets dynamic parameter `param` to `value` in every kernel node of this executable whose
  /// running version binds it (made with `param` as an argument, and not per-node updated since
  /// without it): one cuGraphExecKernelNodeSetParams per such node, from the argument image tether
  /// keeps with each version (nothing is read back from the driver). All or nothing: if the
  /// driver refuses one node, the nodes set before it are put back, none of the new versions is
  /// kept, and DriverError names the parameter, the node's position and its kernel. Each node's
  /// new version keeps what the old one kept but the parameter's value, and a
  /// `Param<SharedBuffer<U>>`'s new buffer; the versions superseded are released as a per-node
  /// update's are (once no launch can use them). Changes neither the source graph nor
  /// `param.value()`. Returns the number of nodes set (0: none binds it; no driver call). The
  /// driver updates only the top graph's nodes one by one: if nodes inside embedded graphs or
  /// conditional bodies bind `param`, UsageError says so and nothing changes. After a whole
  /// update from another graph, nodes are paired with that graph's in creation order of the root
  /// graphs' nodes (as the driver pairs them where the edges are equal); UsageError if the source
  /// gained or lost nodes since, or if that graph's edges differ from the executable's (the driver
  /// then pairs by structure: docs/serving.md). Throws UsageError for an empty parameter or buffer
  /// value, like every member for an empty executable, and inside a host callback. Since 0.6.
  template <class T>
  std::size_t set(const Param<T>& param, const std::type_identity_t<T>& value) {
    const void* address = nullptr;
    return set_param(detail::ParamAccess::value(param, value, "GraphExec::set", address));
  }
  /// How many kernel nodes of this executable's top graph `set(param, v)` would set now. Throws UsageError
  /// for an empty parameter or executable. Since 0.6.
  template <class T>
  std::size_t bound_nodes(const Param<T>& param) const {
    return bound_param(detail::ParamAccess::state(param, "GraphExec::bound_nodes"));
  }

  /// Enables or disables a kernel, memcpy or memset node in this executable (cuGraphNodeSetEnabled).
  template <class K>
    requires(std::is_same_v<K, MemcpyNode> || std::is_same_v<K, MemsetNode> || requires { typename K::kernel_tag; })
  void enable(const Node<K>& node, bool on) {
    set_enabled(detail::NodeAccess::ref(node), on);
  }
  /// Whether a kernel, memcpy or memset node is enabled (cuGraphNodeGetEnabled).
  template <class K>
    requires(std::is_same_v<K, MemcpyNode> || std::is_same_v<K, MemsetNode> || requires { typename K::kernel_tag; })
  bool enabled(const Node<K>& node) const {
    return get_enabled(detail::NodeAccess::ref(node));
  }

  /// Releases superseded per-node owners that no launch can use any more: at once if nothing was
  /// launched since they were superseded, otherwise after the last launch, through a host function
  /// on `stream`, which must be the stream of the last launch (UsageError otherwise).
  void reclaim(const Stream& stream);

  /// Bundles of per-node owners alive (current and superseded): for tests of bounded reclamation.
  std::size_t live_node_versions() const noexcept;
  /// The driver's handle (null when empty).
  CUgraphExec get() const noexcept;

 private:
  friend class Graph;
  friend Inspection inspect(const GraphExec& exec);
  friend OwnedMemory owned_memory(const GraphExec& exec);
  friend class NodeUpdates<GraphExec>;
  static constexpr detail::UpdateNames update_names{"GraphExec::update", "GraphExec::update(memset)",
                                                     "GraphExec::update(memcpy)"};
  explicit GraphExec(std::shared_ptr<detail::ExecState> s) noexcept : s_(std::move(s)) {}
  detail::ExecState& live(std::string_view call) const;
  // The one per-node update path: checks `n` once under its graph's publish lock, then
  // `build(record)` makes the driver call (throwing on failure) and returns the version's owners,
  // which replace the node's executable version.
  void node_update(const detail::NodeRef& n, const char* node_what, detail::FunctionRef<Owners(detail::NodeRecord*)> build);
  detail::NodeRecord* checked_record(const detail::NodeRef& n, const char* what) const;
  [[noreturn]] static void throw_node_error(const char* what, bool valid);
  void set_node(detail::NodeRecord* r, CUgraphNodeParams& p, const char* noun);
  // NodeUpdates' door: the spec `make()` gives, once the node is checked (under the lock).
  template <class K, class Make>
  void update_made(const Node<K>& node, Make&& make) {
    using detail::SpecAccess;
    live("GraphExec::update");
    node_update(detail::NodeAccess::ref(node), Spec<K>::to_update, [&](detail::NodeRecord* r) {
      auto&& spec = make();
      SpecAccess::consume(spec, "GraphExec::update");
      SpecAccess::check_exec(spec, "GraphExec::update");
      SpecAccess::prepare(spec, table(), detail::context_handle(context()), "GraphExec::update");
      set_node(r, SpecAccess::params(spec), Spec<K>::noun);
      return std::move(SpecAccess::owners(spec));
    });
  }
  UpdateResult update_locked(const std::shared_ptr<detail::Hierarchy>& h, std::shared_ptr<detail::Topology> topo);
  void launch_locked(detail::ExecState& st, const Stream& stream);
  std::size_t set_param(const detail::ParamValue& v);
  std::size_t bound_param(const detail::ParamStateBase* p) const;
  void set_enabled(const detail::NodeRef& n, bool on);
  bool get_enabled(const detail::NodeRef& n) const;
  const Context& context() const noexcept;
  const detail::DriverTable& table() const noexcept;
  CUgraphExec handle() const noexcept;

  std::shared_ptr<detail::ExecState> s_;
};

}  // namespace tether

#if TETHER_HAS_FMT
/// `fmt::format("{}", result)`: "success", or "topology_changed" / "node_type_changed (node 0x...)".
template <>
struct fmt::formatter<tether::UpdateResult> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(const tether::UpdateResult& r, Ctx& ctx) const {
    std::string s(tether::to_string(r.reason));
    if (r.node.valid()) s += fmt::format(" (node {})", static_cast<const void*>(r.node.get()));
    return fmt::formatter<std::string_view>::format(s, ctx);
  }
};
/// `fmt::format("{}", plan)`: as `to_string(plan)`.
template <>
struct fmt::formatter<tether::UpdatePlan> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(const tether::UpdatePlan& p, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(tether::to_string(p), ctx);
  }
};
#endif  // TETHER_HAS_FMT
