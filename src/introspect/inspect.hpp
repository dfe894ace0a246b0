// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Introspection (docs/introspection.md): what a graph or an executable holds, as a value —
// its nodes, their dependencies, the owners of each current version, child graphs and
// conditional bodies, and for an executable the per-node versions it keeps and why — and the
// same as a Graphviz DOT picture.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "../exec/exec.hpp"
#include "../graph/graph.hpp"

TETHER_EXPORT namespace tether {

/// A node's kind, as the driver reports it (cuGraphNodeGetType).
enum class NodeKind : std::uint8_t {
  kernel,        ///< CU_GRAPH_NODE_TYPE_KERNEL
  memcpy,        ///< CU_GRAPH_NODE_TYPE_MEMCPY
  memset,        ///< CU_GRAPH_NODE_TYPE_MEMSET
  host,          ///< CU_GRAPH_NODE_TYPE_HOST
  child_graph,   ///< CU_GRAPH_NODE_TYPE_GRAPH
  empty,         ///< CU_GRAPH_NODE_TYPE_EMPTY
  event_record,  ///< CU_GRAPH_NODE_TYPE_EVENT_RECORD
  event_wait,    ///< CU_GRAPH_NODE_TYPE_WAIT_EVENT
  mem_alloc,     ///< CU_GRAPH_NODE_TYPE_MEM_ALLOC
  mem_free,      ///< CU_GRAPH_NODE_TYPE_MEM_FREE
  conditional,   ///< CU_GRAPH_NODE_TYPE_CONDITIONAL
  other,         ///< any other type (external semaphores, batch memory operations, ...)
};
/// "kernel", "memcpy", ..., "child_graph", "conditional", "other".
std::string_view to_string(NodeKind k) noexcept;

/// The kind of a conditional node (`NodeInfo::conditional`). Since 0.5.
enum class ConditionalKind : std::uint8_t {
  none,     ///< not a conditional node, or one tether did not make (the driver does not say)
  if_,      ///< CU_GRAPH_COND_TYPE_IF with one body (`Edit::if_`)
  if_else,  ///< CU_GRAPH_COND_TYPE_IF with two bodies (`Edit::if_else`)
  while_,   ///< CU_GRAPH_COND_TYPE_WHILE (`Edit::while_`)
  switch_,  ///< CU_GRAPH_COND_TYPE_SWITCH (`Edit::switch_`): one body per case
};
/// "none", "if", "if/else", "while", "switch". Since 0.5.
std::string_view to_string(ConditionalKind k) noexcept;

/// Where the graph of a child graph node came from (`NodeInfo::child`). Since 0.5.
enum class ChildKind : std::uint8_t {
  none,      ///< not a child graph node
  embedded,  ///< an embedded copy of a graph (`Edit::embed`, `Edit::replace`)
  captured,  ///< a captured region (`Edit::capture`): the graph a stream capture made
  other,     ///< a child graph node tether did not make (an adopted graph's, other code's captured work)
};
/// "none", "embedded", "captured", "other". Since 0.5.
std::string_view to_string(ChildKind k) noexcept;

/// One node of an inspected graph.
struct NodeInfo {
  Node<> node;             ///< a handle to it (non-owning, like every node handle)
  std::size_t index = 0;   ///< its position in `GraphInfo::nodes` (creation order; a capture's graph order)
  NodeKind kind = NodeKind::other;
  /// A kernel node's function name ("scale") where tether knows it (its version owns the kernel);
  /// otherwise empty.
  std::string label;
  /// The node's name, given with `Edit::name`; empty when it has none. Since 0.5.
  std::string name;
  /// A kernel node's launch dimensions, as the driver holds them (cuGraphKernelNodeGetParams): the
  /// grid in blocks and the block in threads. Empty for other kinds (and if the driver does not
  /// answer). Since 0.5.
  std::optional<Grid> grid;
  std::optional<Block> block;
  /// A conditional node's kind (if, if/else, while, switch; `graphs` lists its bodies, so a
  /// switch has `graphs.size()` cases); `none` for other kinds. Since 0.5.
  ConditionalKind conditional = ConditionalKind::none;
  /// A child graph node's origin: an embedded copy or a captured region; `none` for other kinds.
  /// Since 0.5.
  ChildKind child = ChildKind::none;
  /// Indices, in the same `GraphInfo::nodes`, of the nodes this one depends on (cuGraphGetEdges).
  std::vector<std::size_t> dependencies;
  /// The memory the node's current version keeps (its buffers and parameter buffers). Since 0.6.
  OwnedMemory memory;
  /// The owners of the node's current version, one label each ("SharedBuffer<float>[1024]",
  /// "kernel scale", "(lambda at 02_ownership.cpp:31:14)"); empty when that version owns nothing.
  std::vector<std::string> owners;
  /// False for a node tether did not make and keeps nothing for: work other code captured into a
  /// tether capture, and every node of an adopted graph (`Graph::adopt`).
  bool tracked = true;
  /// For a child graph or conditional node: the indices in `Inspection::graphs` of the graphs it
  /// owns (one child graph; one body per branch of a conditional). Empty for other kinds, and for
  /// conditional nodes tether did not make (the driver does not list their bodies).
  std::vector<std::size_t> graphs;
};

/// One graph of an inspected hierarchy: the root, an embedded child graph, or a conditional body.
struct GraphInfo {
  enum class Role : std::uint8_t { root, child, body };
  static constexpr std::size_t none = static_cast<std::size_t>(-1);
  Role role = Role::root;
  std::size_t parent = none;       ///< index in `Inspection::graphs` of the graph holding the owning node
  std::size_t parent_node = none;  ///< index of the owning node in that graph's `nodes`
  std::vector<NodeInfo> nodes;
  /// Owners the graph keeps without a node (`Graph::anonymous_owners`): stream-captured work
  /// tether could not attribute, and `Capture::keeping`.
  std::size_t anonymous_owners = 0;
};
/// "root", "child", "body".
std::string_view to_string(GraphInfo::Role r) noexcept;

/// A version of a node's parameters that an executable keeps alive, and why.
struct ExecVersion {
  enum class State : std::uint8_t {
    /// The version the executable was instantiated (or whole-updated) from: CUDA's copy of its
    /// user-object reference keeps it until the executable is destroyed or whole-updated, even
    /// after a per-node update superseded it.
    instantiated,
    /// The executable's own current version, set by a per-node update (`GraphExec::update(node, ...)`).
    updated,
    /// A per-node version superseded while a launch may still use it: released once launch
    /// `last_launch` is known complete (tether's marker behind the next launch, or `reclaim`).
    superseded,
  };
  State state = State::instantiated;
  std::size_t graph = 0;  ///< where the node is: `Inspection::graphs[graph].nodes[node]`
  std::size_t node = 0;
  std::vector<std::string> owners;  ///< one label per owner, as NodeInfo::owners
  OwnedMemory memory;               ///< the memory this version keeps. Since 0.6.
  std::uint64_t since_launch = 0;   ///< updated: the number of launches made before it was installed
  std::uint64_t last_launch = 0;    ///< superseded: the last launch that may use it
};
/// "instantiated", "updated", "superseded".
std::string_view to_string(ExecVersion::State s) noexcept;

/// What a graph, a view or an executable holds (`tether::inspect`): a snapshot, taken under the
/// graph's lock; a plain value that stays valid after the graph changes or goes (its node handles
/// then become invalid, like any).
struct Inspection {
  bool executable = false;          ///< made from a GraphExec
  /// `graphs[0]` is the inspected graph; below it every child graph and conditional body, each
  /// after its parent.
  std::vector<GraphInfo> graphs;
  // For an executable (else zero / empty):
  std::uint64_t launches = 0;       ///< launches made so far
  std::uint64_t completed = 0;      ///< launches tether knows have completed (its markers ran)
  /// The last whole update came from another graph than the one the executable was instantiated
  /// from: CUDA holds that graph's versions, which tether does not list per node.
  bool updated_from_other_graph = false;
  /// Versions the executable keeps, per node: instantiated, updated and superseded ones.
  std::vector<ExecVersion> versions;
  /// The memory every listed version keeps, each allocation once: for a graph, its nodes'
  /// current versions; for an executable, the versions it keeps (as `versions` lists them, plus
  /// those of the graph of its last whole update, if another). Since 0.6.
  OwnedMemory memory;

  /// Every node of every graph (`graphs[i].nodes` summed).
  std::size_t node_count() const noexcept;
  /// Every owner label of every current node version plus the anonymous owners (for an
  /// executable, the graph's own; `versions` counted separately).
  std::size_t owner_count() const noexcept;
};

/// Inspects `graph` (its root and everything below): nodes (cuGraphGetNodes where tether did not
/// record them), edges (cuGraphGetEdges), kinds, owners. Throws UsageError for an empty Graph or an
/// invalid view, inside a host callback, or when this thread has an edit of the graph open (the
/// snapshot would show uncommitted nodes); DriverError. Thread safety: waits for another thread's
/// edit of the graph to finish.
Inspection inspect(const Graph& graph);
/// Inspects the child graph or body `graph` and what is below it (`graphs[0]` is it).
Inspection inspect(const GraphRef& graph);
Inspection inspect(const BodyRef& graph);

/// The memory `graph`'s nodes' current versions keep (as `inspect(graph).memory`, without its
/// driver calls). Owners the graph keeps without a node (`Capture::keeping`, unattributed captured
/// work) are not counted. Throws UsageError for an empty graph, inside a host callback or while
/// this thread edits it. Since 0.6.
OwnedMemory owned_memory(const Graph& graph);
/// The memory an executable's versions keep (as `inspect(exec).memory`, without a driver call):
/// what dropping the executable can give back once no launch uses it, if nothing else keeps those
/// buffers. The driver's own memory for the executable (its copy of the nodes, its upload) is not
/// measurable per executable: no driver call reports it (`graph_memory` reports the graph memory
/// pool device-wide). Throws UsageError for an empty executable. Since 0.6.
OwnedMemory owned_memory(const GraphExec& exec);

/// The device's graph memory pool, which graph memory nodes (`Edit::alloc`, stream-ordered
/// allocations captured into graphs) use: the memory associated with graphs now and at most, and
/// what the pool reserves (cuDeviceGetGraphMemAttribute). On the H200 (driver 580) the driver
/// associates memory in 32 MiB granules and gives none back at a free or when an executable goes
/// (docs/design/driver-facts.md, GM1); the simulator does the same. Since 0.6.
struct GraphMemory {
  std::uint64_t used = 0;           ///< CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT
  std::uint64_t used_high = 0;      ///< CU_GRAPH_MEM_ATTR_USED_MEM_HIGH
  std::uint64_t reserved = 0;       ///< CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT
  std::uint64_t reserved_high = 0;  ///< CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH
};
/// `ctx`'s device's graph memory pool (four cuDeviceGetGraphMemAttribute calls). Throws
/// UsageError inside a host callback, DriverError. Since 0.6.
GraphMemory graph_memory(const Context& ctx);

/// What the process holds through tether now (`memory_report`). Since 0.6.
struct MemoryReport {
  std::size_t graphs = 0;             ///< graph hierarchies alive (`live_graphs`)
  std::size_t executables = 0;        ///< executables alive, also those only launches keep (`live_executables`)
  std::size_t node_versions = 0;      ///< node versions alive (their attachments, not yet reclaimed)
  std::size_t buffer_device_bytes = 0;  ///< device memory tether's buffers hold (whoever keeps them)
  std::size_t buffer_pinned_bytes = 0;  ///< page-locked host memory tether's buffers hold
  GraphMemory graph_memory;           ///< the device's graph memory pool (`graph_memory(ctx)`)
};
/// A process-wide report: counts of graphs, executables and node versions alive, the memory
/// tether's buffers hold, and `ctx`'s device's graph memory pool. Per graph and per executable,
/// `owned_memory` and `inspect` say which of those buffers each keeps. Throws as `graph_memory`.
/// Since 0.6.
MemoryReport memory_report(const Context& ctx);
/// "4.0 KiB device in 2 allocations" (", 1.0 KiB pinned" when there is any). Since 0.6.
std::string to_string(const OwnedMemory& m);
/// "3 graphs, 2 executables, 40 node versions; buffers hold 1.5 MiB device, 0 B pinned; graph
/// memory pool: 0 B used (high 64.0 KiB), ..." Since 0.6.
std::string to_string(const MemoryReport& r);
/// Inspects an executable: the graph it was (last) instantiated from, as `inspect(graph)`, and
/// the versions it keeps (`Inspection::versions`), with its launch counts. Throws as `inspect(graph)`,
/// and UsageError for an empty GraphExec.
Inspection inspect(const GraphExec& exec);

/// What `to_dot` draws.
struct DotOptions {
  bool owners = true;    ///< each node's owners, and each graph's anonymous owners
  bool versions = true;  ///< an executable's updated and superseded versions, beside their node
  bool instantiated = false;  ///< an executable's instantiated versions too (one per node: verbose)
  std::string title;     ///< the picture's label (default: none)
};
/// The inspection as a Graphviz DOT `digraph`: nodes by kind (shape and colour), dependencies as
/// edges, child graphs and conditional bodies as clusters tied to their owning node, owners as
/// annotations, anonymous owners on their graph, and an executable's versions beside their node.
/// Deterministic: names come from positions (g0n3), never from addresses. No driver call.
std::string to_dot(const Inspection& inspection, const DotOptions& options = {});
/// `to_dot(inspect(x), options)`.
std::string to_dot(const Graph& graph, const DotOptions& options = {});
std::string to_dot(const GraphExec& exec, const DotOptions& options = {});

/// The driver's own DOT picture of `graph` written to `path` (cuGraphDebugDotPrint): driver
/// handles and parameters, no owners. `flags` are CUgraphDebugDot_flags bits (default 1,
/// CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE). Throws UsageError for an empty Graph or inside a host
/// callback, DriverError (e.g. a path that cannot be written).
void debug_dot_print(const Graph& graph, const std::string& path, unsigned flags = 1u);

}  // namespace tether

namespace tether::detail {
std::string describe_node(const NodeRef& n);
/// The NodeKind of a driver node type (NodeKind::other for types tether does not name).
NodeKind kind_of(CUgraphNodeType t) noexcept;
/// "a kernel", "an empty", ...: the kind with its article, for messages.
std::string a_kind(CUgraphNodeType t);
/// cuGraphGetEdges of `box`, as pairs of driver handles (from, to). Throws DriverError.
std::vector<std::pair<CUgraphNode, CUgraphNode>> driver_edges(const DriverTable& drv, const Box& box);
/// What `to_string(NodeInfo)` writes after the kind and label: name, grid and block, conditional
/// kind, child origin (each where known).
std::string node_details(const NodeInfo& n);
}  // namespace tether::detail

TETHER_EXPORT namespace tether {
/// One line: `kernel scale "axpy" <<<(4,1,1), (256,1,1)>>> <- [0, 1] owns {kernel scale,
/// SharedBuffer<float>[1024] "x"}` (name, grid and block where known), `conditional while`,
/// `conditional switch (3 cases)`, `child_graph (captured)`.
std::string to_string(const NodeInfo& node);
/// One line per graph and per node, indented by depth; for an executable, its launches and versions.
std::string to_string(const Inspection& inspection);
/// "Node(kernel)", "Node(memset)", ... for a valid handle; "Node(invalid)" otherwise. Thread safety:
/// may be called concurrently with edits of the graph.
template <class K>
std::string to_string(const Node<K>& node) {
  return detail::describe_node(detail::NodeAccess::ref(node));
}
}  // namespace tether

#if TETHER_HAS_FMT
/// `fmt::format("{}", node)`: as `to_string(node)`.
template <class K>
struct fmt::formatter<tether::Node<K>> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(const tether::Node<K>& n, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(tether::to_string(n), ctx);
  }
};
/// `fmt::format("{}", info)`: as `to_string(info)`.
template <>
struct fmt::formatter<tether::NodeInfo> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(const tether::NodeInfo& n, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(tether::to_string(n), ctx);
  }
};
/// `fmt::format("{}", memory)`: as `to_string(memory)`.
template <>
struct fmt::formatter<tether::OwnedMemory> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(const tether::OwnedMemory& m, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(tether::to_string(m), ctx);
  }
};
/// `fmt::format("{}", report)`: as `to_string(report)`.
template <>
struct fmt::formatter<tether::MemoryReport> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(const tether::MemoryReport& r, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(tether::to_string(r), ctx);
  }
};
/// `fmt::format("{}", inspection)`: as `to_string(inspection)`.
template <>
struct fmt::formatter<tether::Inspection> : fmt::formatter<std::string_view> {
  template <class Ctx>
  auto format(const tether::Inspection& in, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(tether::to_string(in), ctx);
  }
};
#endif  // TETHER_HAS_FMT
