// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The user-facing graph types (docs/dsl.md): Graph, the GraphRef/BodyRef views, conditional
// handles and the results of the creators that make more than a node. Edits are in edit.hpp.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "../resources/context.hpp"
#include "../resources/event.hpp"
#include "../resources/module.hpp"
#include "args.hpp"
#include "launch.hpp"
#include "node.hpp"
#include "transaction.hpp"

namespace tether::detail {
struct GraphAccess;
}  // namespace tether::detail

TETHER_EXPORT namespace tether {

class Graph;
template <bool InBody>
class BasicGraphRef;
/// A view of an embedded child graph (see BasicGraphRef).
using GraphRef = BasicGraphRef<false>;
/// A view of a conditional body (see BasicGraphRef): its edits are BodyEdits.
using BodyRef = BasicGraphRef<true>;
class GraphExec;
struct InstantiateOptions;
template <bool InBody>
class BasicEdit;
template <bool InBody>
class BasicInserter;

/// An edit of a graph or of an embedded child graph (see BasicEdit).
using Edit = BasicEdit<false>;
/// An edit of a conditional body: like Edit, without memory allocation nodes (CUDA forbids them
/// in bodies).
using BodyEdit = BasicEdit<true>;

/// A conditional handle (`cuGraphConditionalHandleCreate`) made by `Edit::condition()`: the value
/// a kernel sets (`cudaGraphSetConditional(handle, v)` in device code,
/// `tether::sim::set_conditional` in a simulator twin) decides which body of an if / while / switch
/// node runs. Pass `handle()` to the kernel as a `unsigned long long` (CUgraphConditionalHandle).
/// A default-constructed Condition is empty (`handle() == 0`); using it throws UsageError.
class Condition {
 public:
  Condition() = default;
  std::uint64_t handle() const noexcept { return handle_; }

 private:
  template <class, bool>
  friend class Builder;
  std::uint64_t handle_ = 0;
  // Why the hierarchy as well as the box: a box address identifies a graph only while its
  // hierarchy lives; a Condition of a destroyed graph must not match a new graph allocated at
  // the same address.
  std::weak_ptr<const detail::Hierarchy> hierarchy_;
  const detail::Box* box_ = nullptr;
};

/// A dependency of a graph (`nodes()` / `edges()` of Graph and its views): `to` runs after `from`.
struct Edge {
  Node<> from;
  Node<> to;
  friend bool operator==(const Edge& a, const Edge& b) noexcept { return a.from == b.from && a.to == b.to; }
};

/// A view of an embedded child graph (`GraphRef`, from `Edit::embed`) or of a conditional body
/// (`BodyRef`, from if_ / if_else / while_ / switch_). Non-owning, like every `...Ref` and node
/// handle of tether: it does not keep the graph alive. A default-constructed view is empty
/// (invalid). It becomes invalid when its root Graph (and every executable made from it) is gone,
/// or when CUDA destroys the graph it shows (its node removed); using an invalid or empty view
/// throws UsageError. Thread safety: as Graph.
template <bool InBody>
class BasicGraphRef {
 public:
  BasicGraphRef() = default;
  /// Whether the graph still exists.
  bool valid() const noexcept { return ref_.valid(); }
  /// Opens a transaction on this graph (locks the whole hierarchy). Throws UsageError if invalid.
  BasicEdit<InBody> edit() const;
  /// Runs `fn(edit&)` in a transaction: commit on return, rollback if it throws.
  template <class F>
  void edit(F&& fn) const;
  /// Number of nodes (committed). Throws UsageError if invalid.
  std::size_t node_count() const;
  /// The driver's graph handle (owned by CUDA through the parent node). Throws UsageError if invalid.
  CUgraph get() const;
  /// The nodes of this graph (committed, top level), in creation order; for a captured graph, in
  /// the driver's order (cuGraphGetNodes). Throws UsageError if invalid, inside a host callback or
  /// while this thread has an edit of the graph open; DriverError.
  std::vector<Node<>> nodes() const;
  /// The nodes that depend on none (cuGraphGetRootNodes). Throws as `nodes()`.
  std::vector<Node<>> roots() const;
  /// Every dependency (cuGraphGetEdges), in the driver's order. Throws as `nodes()`.
  std::vector<Edge> edges() const;
  /// A view of the graph embedded in `node`, a child graph node of this graph
  /// (cuGraphChildGraphNodeGetGraph's graph, which CUDA owns through the node). Throws UsageError
  /// if `node` is invalid, not in this graph, or not a child graph node.
  GraphRef child(const Node<>& node) const;
  /// Views of the bodies of `node`, a conditional node of this graph made by tether (one per
  /// branch: if, if/else, while, switch cases). Throws UsageError as `child`.
  std::vector<BodyRef> bodies(const Node<>& node) const;

  /// Whether both show the same graph (compares identity: no lock, no driver call).
  friend bool operator==(const BasicGraphRef& a, const BasicGraphRef& b) noexcept {
    return a.ref_.box == b.ref_.box && !a.ref_.hierarchy.owner_before(b.ref_.hierarchy) &&
           !b.ref_.hierarchy.owner_before(a.ref_.hierarchy);
  }

 private:
  friend struct detail::GraphAccess;
  detail::BoxRef ref_;
  std::optional<Context> ctx_;
};

/// Results of the creators that make more than a node.
struct EmbedResult {
  Node<ChildNode> node;
  GraphRef graph;  ///< the embedded copy
};
struct IfResult {
  Node<ConditionalNode> node;
  BodyRef then_;
};
struct IfElseResult {
  Node<ConditionalNode> node;
  BodyRef then_;
  BodyRef else_;
};
struct WhileResult {
  Node<ConditionalNode> node;
  BodyRef body;
};
struct SwitchResult {
  Node<ConditionalNode> node;
  std::vector<BodyRef> cases;
};
struct CaptureResult {
  Node<ChildNode> node;  ///< the child graph node holding the captured region
  GraphRef graph;        ///< the captured graph, embedded in that node
};
template <class T>
struct AllocResult {
  Node<MemAllocNode> node;
  Unowned<T> memory;  ///< valid while the graph's allocation lives (between alloc and free)
};

}  // namespace tether

namespace tether::detail {

struct GraphAccess {
  template <bool InBody>
  static BasicGraphRef<InBody> make_ref(BoxRef r, const Context& c) {
    BasicGraphRef<InBody> g;
    g.ref_ = std::move(r);
    g.ctx_ = c;
    return g;
  }
  static GraphRef graph_ref(BoxRef r, const Context& c) { return make_ref<false>(std::move(r), c); }
  /// A Graph owning the hierarchy `h` (a captured graph).
  static Graph make_graph(Context c, std::shared_ptr<Hierarchy> h);
  static BodyRef body_ref(BoxRef r, const Context& c) { return make_ref<true>(std::move(r), c); }
  template <bool InBody>
  static const BoxRef& ref(const BasicGraphRef<InBody>& g) noexcept {
    return g.ref_;
  }
  template <bool InBody>
  static const Context& ctx(const BasicGraphRef<InBody>& g) {
    return *g.ctx_;
  }
  /// The view's context, or null for an empty view.
  template <bool InBody>
  static const Context* ctx_ptr(const BasicGraphRef<InBody>& g) noexcept {
    return g.ctx_ ? &*g.ctx_ : nullptr;
  }
  static const std::shared_ptr<Hierarchy>& hierarchy(const Graph& g) noexcept;
  /// The hierarchy of `g`; throws UsageError naming `call` if `g` is empty.
  static const std::shared_ptr<Hierarchy>& live(const Graph& g, std::string_view call);
};

}  // namespace tether::detail

TETHER_EXPORT namespace tether {

/// A CUDA graph definition whose nodes own their resources (a root `CUgraph`, cuGraphCreate).
/// Move-only; `clone()` makes an independent copy. The Graph owns its definition; views and node
/// handles do not (they become invalid when it goes), while an executable made from it keeps the
/// definition for its per-node updates. When the last of these goes the graph is destroyed
/// (cuGraphDestroy); owners are released when the last consumer — clone, executable, in-flight
/// launch — is gone.
///
/// Empty state: a default-constructed Graph, a moved-from one, or one after `reset()`, is empty
/// (`operator bool` is false). On an empty Graph `edit`, `clone`, `find`, `instantiate`, `ref`,
/// `node_count`, `nodes`, `roots`, `edges`, `child`, `bodies` and `anonymous_owners` throw
/// UsageError ("... this Graph is moved from or empty"), as do `inspect`, `to_dot` and passing it
/// to `embed`, `replace` or an executable's `update`; `get()` returns null. `context()` stays valid
/// on a moved-from or reset Graph, and throws UsageError on a default-constructed one (it never had
/// a context). Assign a graph to an empty one to use it (`g = tether::Graph(ctx);`), so a Graph can
/// be a member of a class that makes its graph later.
///
/// Host callables: a callable that captures its own graph's executable keeps that graph alive
/// forever (a reference cycle through the graph's owners; node handles and views do not, being
/// non-owning); `tether::live_graphs()` counts the graphs alive, and TETHER_REPORT_LEAKS=1 reports
/// the ones left at exit.
///
/// Thread safety: edits of one graph serialise on its lock; distinct graphs are independent; a
/// thread that holds an edit and would wait for another graph whose holder waits for this one gets
/// UsageError instead of a deadlock. No member may be called inside a host callback (UsageError).
class Graph {
 public:
  /// An empty Graph holding no graph and no context (see "Empty state"); no driver call. Since 0.5.
  Graph() noexcept = default;
  /// An empty graph in `ctx` (cuGraphCreate). Throws DriverError, UsageError inside a host callback.
  explicit Graph(const Context& ctx);
  Graph(Graph&&) noexcept = default;
  Graph& operator=(Graph&&) noexcept = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  /// Whether this Graph holds a graph (false once moved from or reset).
  explicit operator bool() const noexcept { return h_ != nullptr; }
  /// Drops this handle's graph now, as destruction does: the graph is destroyed once no view or
  /// node handle shares it, and its owners are released when the last consumer is gone.
  void reset() noexcept {
    origin_.reset();
    h_.reset();
  }

  /// Opens a transaction (see BasicEdit). Throws UsageError if this thread already has an edit of
  /// this graph open, if waiting for another thread's edit would deadlock, if an earlier rollback
  /// failed and left the graph unusable, or if the Graph is empty.
  Edit edit() const;
  /// Runs `fn(Edit&)` in a transaction: commit when it returns, rollback (and rethrow) if it throws.
  template <class F>
  void edit(F&& fn) const;

  /// An independent copy (cuGraphClone) that keeps every owner alive on its own; its metadata is
  /// re-keyed with cuGraphNodeFindInClone. Throws DriverError (CUDA_ERROR_NOT_SUPPORTED for graphs
  /// with conditional nodes, which the driver refuses to clone); the source is unchanged.
  Graph clone() const;
  /// In a clone: the node corresponding to `node` of the source graph (as it was at clone time).
  /// Throws UsageError if `node` is not from this clone's source or no longer valid.
  template <class K>
  Node<K> find(const Node<K>& node) const {
    return detail::NodeAccess::make<K>(find_ref(detail::NodeAccess::ref(node)), detail::NodeAccess::extra(node));
  }

  /// An executable graph made from this graph's current versions (cuGraphInstantiateWithFlags,
  /// with the executable's owner accumulator retained on this graph for the call; RELAXED capture
  /// mode, so it never invalidates a stream capture). Defined in src/exec/. Throws DriverError, or
  /// UsageError if this thread has an edit of the graph open, or if the graph has conditional
  /// nodes and an executable made of it while it had them still exists (CUDA instantiates such a
  /// graph once at a time: update that executable instead; one dropped inside a host callback is
  /// destroyed on the reclaimer, and `wait_reclaimed()` waits for that).
  GraphExec instantiate(const InstantiateOptions& options) const;
  GraphExec instantiate() const;

  /// A view of this graph (non-owning). Throws UsageError if empty.
  GraphRef ref() const;
  /// Number of nodes (committed, top level). Throws UsageError if empty.
  std::size_t node_count() const;
  /// The driver's graph handle (null when empty).
  CUgraph get() const noexcept;
  /// The nodes of this graph (committed, top level), in creation order; for a captured graph, in
  /// the driver's order (cuGraphGetNodes). Throws UsageError if empty, inside a host callback or
  /// while this thread has an edit of the graph open; DriverError.
  std::vector<Node<>> nodes() const;
  /// The nodes that depend on none (cuGraphGetRootNodes). Throws as `nodes()`.
  std::vector<Node<>> roots() const;
  /// Every dependency (cuGraphGetEdges), in the driver's order. Throws as `nodes()`.
  std::vector<Edge> edges() const;
  /// A view of the graph embedded in `node`, a child graph node of this graph
  /// (cuGraphChildGraphNodeGetGraph's graph, which CUDA owns through the node). Throws UsageError
  /// if `node` is invalid, not in this graph, or not a child graph node.
  GraphRef child(const Node<>& node) const;
  /// Views of the bodies of `node`, a conditional node of this graph made by tether (one per
  /// branch: if, if/else, while, switch cases). Throws UsageError as `child`.
  std::vector<BodyRef> bodies(const Node<>& node) const;
  /// Takes ownership of `graph`, a graph other code made in `ctx` (cuGraphCreate, a stream capture, a
  /// library), as a tether Graph: it is destroyed with the Graph (cuGraphDestroy). Its nodes, and
  /// those of its child graphs, get untyped handles (`nodes()`, `inspect`) and own nothing
  /// (`NodeInfo::tracked` is false); nodes added by later edits own their resources as usual.
  /// The caller must not use or destroy `graph` itself afterwards. Throws UsageError for a null
  /// graph, for a graph a tether Graph already holds (or a graph inside one), or inside a host
  /// callback; DriverError (listing its nodes). On failure the caller still owns `graph`.
  static Graph adopt(const Context& ctx, CUgraph graph);
  /// Number of owners the root graph keeps without a node: stream-captured work whose node tether
  /// could not identify, and `Capture::keeping`. They are released with the graph (and with the
  /// last clone or executable of it). Clones count the same. Throws UsageError if empty.
  std::size_t anonymous_owners() const;
  /// The context the graph was made in (also after a move or `reset()`). Throws UsageError for a
  /// default-constructed Graph, which has none.
  const Context& context() const {
    if (!ctx_) [[unlikely]]
      detail::throw_empty("Graph::context", "Graph");
    return *ctx_;
  }

 private:
  friend struct detail::GraphAccess;
  template <class, bool>
  friend class Builder;
  Graph(Context ctx, std::shared_ptr<detail::Hierarchy> h) : ctx_(std::move(ctx)), h_(std::move(h)) {}
  /// The context, for members that checked `live` first (a live Graph always has one).
  const Context& ctx() const noexcept { return *ctx_; }
  detail::NodeRef find_ref(const detail::NodeRef& source) const;
  /// The hierarchy; throws UsageError naming `call` when empty.
  const std::shared_ptr<detail::Hierarchy>& live(std::string_view call) const {
    if (!h_) [[unlikely]]
      detail::throw_empty(call, "Graph");
    return h_;
  }

  // Why optional: a default-constructed Graph has no context, and a Context is never empty. A
  // moved-from Graph keeps its copy (moving a Context copies it).
  std::optional<Context> ctx_;
  std::shared_ptr<detail::Hierarchy> h_;
  struct Origin;
  std::shared_ptr<const Origin> origin_;
};

}  // namespace tether

inline const std::shared_ptr<tether::detail::Hierarchy>& tether::detail::GraphAccess::hierarchy(
    const Graph& g) noexcept {
  return g.h_;
}
inline const std::shared_ptr<tether::detail::Hierarchy>& tether::detail::GraphAccess::live(const Graph& g,
                                                                                         std::string_view call) {
  return g.live(call);
}
inline tether::Graph tether::detail::GraphAccess::make_graph(Context c, std::shared_ptr<Hierarchy> h) {
  return Graph(std::move(c), std::move(h));
}

/// Views as keys of unordered containers: hashes what `==` compares (the graph's box).
template <bool InBody>
struct std::hash<tether::BasicGraphRef<InBody>> {
  std::size_t operator()(const tether::BasicGraphRef<InBody>& g) const noexcept {
    return std::hash<const void*>{}(tether::detail::GraphAccess::ref(g).box);
  }
};
