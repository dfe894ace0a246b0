// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "inspect.hpp"

namespace tether {

namespace detail {

NodeKind kind_of(CUgraphNodeType t) noexcept {
  switch (t) {
    case CU_GRAPH_NODE_TYPE_KERNEL: return NodeKind::kernel;
    case CU_GRAPH_NODE_TYPE_MEMCPY: return NodeKind::memcpy;
    case CU_GRAPH_NODE_TYPE_MEMSET: return NodeKind::memset;
    case CU_GRAPH_NODE_TYPE_HOST: return NodeKind::host;
    case CU_GRAPH_NODE_TYPE_GRAPH: return NodeKind::child_graph;
    case CU_GRAPH_NODE_TYPE_EMPTY: return NodeKind::empty;
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return NodeKind::event_record;
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return NodeKind::event_wait;
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: return NodeKind::mem_alloc;
    case CU_GRAPH_NODE_TYPE_MEM_FREE: return NodeKind::mem_free;
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: return NodeKind::conditional;
    default: return NodeKind::other;
  }
}

std::string a_kind(CUgraphNodeType t) {
  std::string_view k = to_string(kind_of(t));
  return std::string(std::string_view("aeiou").find(k.front()) == std::string_view::npos ? "a " : "an ") + std::string(k);
}

std::vector<std::pair<CUgraphNode, CUgraphNode>> driver_edges(const DriverTable& drv, const Box& box) {
  std::size_t n = 0;
  call<Entry::cuGraphGetEdges>(drv, "counting a graph's edges", box.graph, static_cast<CUgraphNode*>(nullptr),
                               static_cast<CUgraphNode*>(nullptr), static_cast<CUgraphEdgeData*>(nullptr), &n);
  std::vector<CUgraphNode> from(n), to(n);
  std::vector<CUgraphEdgeData> data(n);
  if (n) call<Entry::cuGraphGetEdges>(drv, "listing a graph's edges", box.graph, from.data(), to.data(), data.data(), &n);
  std::vector<std::pair<CUgraphNode, CUgraphNode>> e;
  e.reserve(n);
  for (std::size_t i = 0; i < n; ++i) e.emplace_back(from[i], to[i]);
  return e;
}

namespace {

Node<> handle(const std::shared_ptr<Hierarchy>& h, NodeRecord* r) {
  return NodeAccess::make<AnyKind>(NodeRef{h, r, r->generation.load(std::memory_order_acquire)});
}

// The records of `box` by driver node handle (a box's list is its nodes, committed).
std::unordered_map<CUgraphNode, NodeRecord*> by_node(const Box& box) {
  std::unordered_map<CUgraphNode, NodeRecord*> m;
  m.reserve(box.node_count);
  box.for_each([&](NodeRecord* r) { m.emplace(r->node, r); });
  return m;
}

// Locks the hierarchy of a view (or graph) for a query, with its context current. Throws
// UsageError for an invalid one, inside a host callback, or with an edit of it open on this thread.
struct Query {
  Query(const BoxRef& ref, const Context* ctx, std::string_view call)
      : h(checked(ref, call)), box(ref.box), guard(h->mu, call), scope(*h->drv, ctx->get()) {
    h->check_usable();
    if (box->retired.load(std::memory_order_acquire))
      throw UsageError(fmt::format("{}: this graph view is invalid (its node was removed, or its graph destroyed)", call));
  }
  static std::shared_ptr<Hierarchy> checked(const BoxRef& ref, std::string_view call) {
    check_calls_allowed(call);
    std::shared_ptr<Hierarchy> h = ref.lock();
    if (!h)
      throw UsageError(fmt::format("{}: this graph view is invalid or empty (default-constructed, its node removed, or "
                                   "its graph destroyed)",
                                   call));
    return h;
  }
  std::shared_ptr<Hierarchy> h;
  Box* box;
  HierarchyGuard guard;
  ScopedContext scope;
};

std::vector<Node<>> query_nodes(const BoxRef& ref, const Context* ctx, std::string_view call) {
  Query q(ref, ctx, call);
  std::vector<Node<>> out;
  out.reserve(q.box->node_count);
  q.box->for_each([&](NodeRecord* r) { out.push_back(handle(q.h, r)); });
  return out;
}

std::vector<Node<>> query_roots(const BoxRef& ref, const Context* ctx, std::string_view call) {
  Query q(ref, ctx, call);
  const DriverTable& drv = *q.h->drv;
  std::size_t n = 0;
  detail::call<Entry::cuGraphGetRootNodes>(drv, "counting a graph's root nodes", q.box->graph,
                                           static_cast<CUgraphNode*>(nullptr), &n);
  std::vector<CUgraphNode> roots(n);
  if (n) detail::call<Entry::cuGraphGetRootNodes>(drv, "listing a graph's root nodes", q.box->graph, roots.data(), &n);
  auto m = by_node(*q.box);
  std::vector<Node<>> out;
  out.reserve(n);
  for (CUgraphNode r : roots)
    if (auto it = m.find(r); it != m.end()) out.push_back(handle(q.h, it->second));
  return out;
}

std::vector<Edge> query_edges(const BoxRef& ref, const Context* ctx, std::string_view call) {
  Query q(ref, ctx, call);
  auto m = by_node(*q.box);
  std::vector<Edge> out;
  for (auto [f, t] : driver_edges(*q.h->drv, *q.box)) {
    auto a = m.find(f), b = m.find(t);
    if (a != m.end() && b != m.end()) out.push_back(Edge{handle(q.h, a->second), handle(q.h, b->second)});
  }
  return out;
}

// The record of `node` if it is a live node of `q.box` (else UsageError naming `call`).
NodeRecord* node_of(const Query& q, const Node<>& node, std::string_view call) {
  const NodeRef& n = NodeAccess::ref(node);
  if (!n.record || !same_hierarchy(n.hierarchy, q.h) || !n.current())
    throw UsageError(fmt::format("{}: the node handle is invalid, or not of this graph", call));
  if (n.record->box != q.box) throw UsageError(fmt::format("{}: the node is not in this graph (it is in another graph of its hierarchy)", call));
  return n.record;
}

GraphRef query_child(const BoxRef& ref, const Context* ctx, const Node<>& node, std::string_view call) {
  Query q(ref, ctx, call);
  NodeRecord* r = node_of(q, node, call);
  Box* b = r->type == CU_GRAPH_NODE_TYPE_GRAPH ? q.h->first_owned(r) : nullptr;
  if (!b)
    throw UsageError(fmt::format("{}: the node is {} node, not a child graph node", call, a_kind(r->type)));
  return GraphAccess::graph_ref(BoxRef{q.h, b}, *ctx);
}

std::vector<BodyRef> query_bodies(const BoxRef& ref, const Context* ctx, const Node<>& node, std::string_view call) {
  Query q(ref, ctx, call);
  NodeRecord* r = node_of(q, node, call);
  if (r->type != CU_GRAPH_NODE_TYPE_CONDITIONAL)
    throw UsageError(fmt::format("{}: the node is {} node, not a conditional node", call, a_kind(r->type)));
  std::vector<BodyRef> out;
  for (Box* b = q.h->first_owned(r); b; b = b->next_owned) out.push_back(GraphAccess::body_ref(BoxRef{q.h, b}, *ctx));
  return out;
}

}  // namespace

/// "0 B", "512 B", "4.0 KiB", "1.5 MiB", "2.0 GiB".
std::string byte_text(std::uint64_t n) {
  if (n < 1024) return fmt::format("{} B", n);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n) / 1024.0;
  std::size_t u = 0;
  while (v >= 1024.0 && u + 1 < std::size(units)) {
    v /= 1024.0;
    ++u;
  }
  return fmt::format("{:.1f} {}", v, units[u]);
}

Inspection inspect_boxes(const std::shared_ptr<Hierarchy>& h, Box& top,
                         std::unordered_map<const NodeRecord*, std::pair<std::size_t, std::size_t>>* where) {
  const DriverTable& drv = *h->drv;
  Inspection in;
  MemoryTally all;
  std::vector<Box*> boxes{&top};
  for (std::size_t gi = 0; gi < boxes.size(); ++gi) {
    Box& b = *boxes[gi];
    GraphInfo g;
    g.role = b.kind == BoxKind::root ? GraphInfo::Role::root : b.kind == BoxKind::child ? GraphInfo::Role::child
                                                                                        : GraphInfo::Role::body;
    g.anonymous_owners = b.anonymous_owners;
    std::unordered_map<CUgraphNode, std::size_t> index;
    index.reserve(b.node_count);
    b.for_each([&](NodeRecord* r) {
      NodeInfo n;
      n.node = handle(h, r);
      n.index = g.nodes.size();
      n.kind = kind_of(r->type);
      n.tracked = h->untracked.empty() || !h->untracked.count(r);
      if (!h->names.empty())
        if (auto it = h->names.find(r); it != h->names.end()) n.name = it->second;
      if (r->current) {
        r->current->describe(n.owners);
        groups_measure(r->current, all);
        n.memory = groups_memory(r->current);
      }
      if (n.kind == NodeKind::kernel) {
        // Best effort: a picture is still worth having if the driver does not answer.
        CUDA_KERNEL_NODE_PARAMS kp{};
        if (raw<Entry::cuGraphKernelNodeGetParams>(drv, r->node, &kp) == CUDA_SUCCESS) {
          n.grid = Grid{kp.gridDimX, kp.gridDimY, kp.gridDimZ};
          n.block = Block{kp.blockDimX, kp.blockDimY, kp.blockDimZ};
        }
      }
      if (n.kind == NodeKind::kernel)
        for (const std::string& o : n.owners)
          if (o.starts_with("kernel ")) {
            n.label = o.substr(7);
            break;
          }
      std::uint8_t cond_type = 0;
      bool captured = false;
      for (Box* c = owns_graphs(r->type) ? h->first_owned(r) : nullptr; c; c = c->next_owned) {
        if (c->retired.load(std::memory_order_acquire)) continue;
        n.graphs.push_back(boxes.size());
        boxes.push_back(c);
        cond_type = c->conditional_type;
        captured = c->captured;
      }
      if (n.kind == NodeKind::child_graph)
        n.child = !n.tracked ? ChildKind::other : captured ? ChildKind::captured : ChildKind::embedded;
      if (n.kind == NodeKind::conditional && !n.graphs.empty()) {
        switch (static_cast<CUgraphConditionalNodeType>(cond_type)) {
          case CU_GRAPH_COND_TYPE_IF:
            n.conditional = n.graphs.size() == 2 ? ConditionalKind::if_else : ConditionalKind::if_;
            break;
          case CU_GRAPH_COND_TYPE_WHILE: n.conditional = ConditionalKind::while_; break;
          case CU_GRAPH_COND_TYPE_SWITCH: n.conditional = ConditionalKind::switch_; break;
          default: break;
        }
      }
      index.emplace(r->node, n.index);
      if (where) (*where)[r] = {gi, n.index};
      g.nodes.push_back(std::move(n));
    });
    for (auto [f, t] : driver_edges(drv, b)) {
      auto a = index.find(f), z = index.find(t);
      if (a != index.end() && z != index.end()) g.nodes[z->second].dependencies.push_back(a->second);
    }
    for (NodeInfo& n : g.nodes) std::sort(n.dependencies.begin(), n.dependencies.end());
    in.graphs.push_back(std::move(g));
  }
  // Parents: each graph after the node that owns it.
  for (std::size_t gi = 0; gi < in.graphs.size(); ++gi)
    for (NodeInfo& n : in.graphs[gi].nodes)
      for (std::size_t c : n.graphs) {
        in.graphs[c].parent = gi;
        in.graphs[c].parent_node = n.index;
      }
  in.memory = all.value();
  return in;
}

std::string node_details(const NodeInfo& n) {
  std::string s;
  if (!n.name.empty()) s += fmt::format(" \"{}\"", n.name);
  if (n.grid && n.block)
    s += fmt::format(" <<<({},{},{}), ({},{},{})>>>", n.grid->x, n.grid->y, n.grid->z, n.block->x, n.block->y, n.block->z);
  if (n.conditional != ConditionalKind::none) {
    s += fmt::format(" {}", to_string(n.conditional));
    if (n.conditional == ConditionalKind::switch_)
      s += fmt::format(" ({} case{})", n.graphs.size(), n.graphs.size() == 1 ? "" : "s");
  }
  if (n.child != ChildKind::none) s += fmt::format(" ({})", to_string(n.child));
  return s;
}

std::string describe_node(const NodeRef& n) {
  std::shared_ptr<Hierarchy> h = n.hierarchy.lock();
  if (!h || !n.current()) return "Node(invalid)";
  CUgraphNodeType t = n.record->type;  // set before publication, immutable while the node lives
  if (!n.current()) return "Node(invalid)";
  return fmt::format("Node({})", to_string(kind_of(t)));
}

namespace {
Inspection inspect_ref(const BoxRef& ref, const Context* ctx, std::string_view call) {
  Query q(ref, ctx, call);
  return inspect_boxes(q.h, *q.box, nullptr);
}
}  // namespace

}  // namespace detail

std::string_view to_string(NodeKind k) noexcept {
  switch (k) {
    case NodeKind::kernel: return "kernel";
    case NodeKind::memcpy: return "memcpy";
    case NodeKind::memset: return "memset";
    case NodeKind::host: return "host";
    case NodeKind::child_graph: return "child_graph";
    case NodeKind::empty: return "empty";
    case NodeKind::event_record: return "event_record";
    case NodeKind::event_wait: return "event_wait";
    case NodeKind::mem_alloc: return "mem_alloc";
    case NodeKind::mem_free: return "mem_free";
    case NodeKind::conditional: return "conditional";
    case NodeKind::other: return "other";
  }
  return "other";
}

std::string_view to_string(ConditionalKind k) noexcept {
  switch (k) {
    case ConditionalKind::none: return "none";
    case ConditionalKind::if_: return "if";
    case ConditionalKind::if_else: return "if/else";
    case ConditionalKind::while_: return "while";
    case ConditionalKind::switch_: return "switch";
  }
  return "none";
}

std::string_view to_string(ChildKind k) noexcept {
  switch (k) {
    case ChildKind::none: return "none";
    case ChildKind::embedded: return "embedded";
    case ChildKind::captured: return "captured";
    case ChildKind::other: return "other";
  }
  return "none";
}

std::string_view to_string(GraphInfo::Role r) noexcept {
  switch (r) {
    case GraphInfo::Role::root: return "root";
    case GraphInfo::Role::child: return "child";
    case GraphInfo::Role::body: return "body";
  }
  return "root";
}

std::string_view to_string(ExecVersion::State s) noexcept {
  switch (s) {
    case ExecVersion::State::instantiated: return "instantiated";
    case ExecVersion::State::updated: return "updated";
    case ExecVersion::State::superseded: return "superseded";
  }
  return "instantiated";
}

std::size_t Inspection::node_count() const noexcept {
  std::size_t n = 0;
  for (const GraphInfo& g : graphs) n += g.nodes.size();
  return n;
}

std::size_t Inspection::owner_count() const noexcept {
  std::size_t n = 0;
  for (const GraphInfo& g : graphs) {
    n += g.anonymous_owners;
    for (const NodeInfo& x : g.nodes) n += x.owners.size();
  }
  return n;
}

namespace {
std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}
}  // namespace

std::string to_string(const NodeInfo& n) {
  std::string s(to_string(n.kind));
  if (!n.label.empty()) s += " " + n.label;
  s += detail::node_details(n);
  if (!n.dependencies.empty()) {
    s += " <- [";
    for (std::size_t i = 0; i < n.dependencies.size(); ++i) s += (i ? ", " : "") + std::to_string(n.dependencies[i]);
    s += "]";
  }
  if (!n.owners.empty()) s += " owns {" + join(n.owners) + "}";
  if (!n.tracked) s += " (not made by tether: owns nothing)";
  return s;
}

std::string to_string(const Inspection& in) {
  std::string s;
  std::vector<std::size_t> depth(in.graphs.size(), 0);
  for (std::size_t gi = 0; gi < in.graphs.size(); ++gi) {
    const GraphInfo& g = in.graphs[gi];
    if (g.parent != GraphInfo::none) depth[gi] = depth[g.parent] + 1;
    std::string pad(2 * depth[gi], ' ');
    s += fmt::format("{}graph {} ({}", pad, gi, to_string(g.role));
    if (g.parent != GraphInfo::none) s += fmt::format(" of graph {} node {}", g.parent, g.parent_node);
    s += fmt::format("): {} node{}", g.nodes.size(), g.nodes.size() == 1 ? "" : "s");
    if (g.anonymous_owners) s += fmt::format(", {} anonymous owner{}", g.anonymous_owners, g.anonymous_owners == 1 ? "" : "s");
    s += "\n";
    for (const NodeInfo& n : g.nodes) s += fmt::format("{}  [{}] {}\n", pad, n.index, to_string(n));
  }
  if (in.executable) {
    s += fmt::format("executable: {} launch{}, {} known complete{}\n", in.launches, in.launches == 1 ? "" : "es",
                     in.completed, in.updated_from_other_graph ? "; last whole update from another graph" : "");
    for (const ExecVersion& v : in.versions) {
      s += fmt::format("  graph {} node {}: {}", v.graph, v.node, to_string(v.state));
      if (v.state == ExecVersion::State::updated) s += fmt::format(" after launch {}", v.since_launch);
      if (v.state == ExecVersion::State::superseded) s += fmt::format(", kept until launch {} completes", v.last_launch);
      s += v.owners.empty() ? std::string(", owns nothing") : " owns {" + join(v.owners) + "}";
      s += "\n";
    }
  }
  return s;
}

Inspection inspect(const Graph& graph) {
  const auto& h = detail::GraphAccess::live(graph, "tether::inspect");
  return detail::inspect_ref(detail::BoxRef{h, h->root_box}, &graph.context(), "tether::inspect");
}
Inspection inspect(const GraphRef& graph) {
  return detail::inspect_ref(detail::GraphAccess::ref(graph), detail::GraphAccess::ctx_ptr(graph), "tether::inspect");
}
Inspection inspect(const BodyRef& graph) {
  return detail::inspect_ref(detail::GraphAccess::ref(graph), detail::GraphAccess::ctx_ptr(graph), "tether::inspect");
}

OwnedMemory owned_memory(const Graph& graph) {
  detail::check_calls_allowed("tether::owned_memory");
  const auto& h = detail::GraphAccess::live(graph, "tether::owned_memory");
  detail::HierarchyGuard lock(h->mu, "tether::owned_memory");
  detail::MemoryTally t;
  for (const detail::Box& b : h->boxes)
    if (!b.retired.load(std::memory_order_relaxed))
      for (const detail::NodeRecord* r = b.first; r; r = r->next) detail::groups_measure(r->current, t);
  return t.value();
}

GraphMemory graph_memory(const Context& ctx) {
  detail::check_calls_allowed("tether::graph_memory");
  const detail::DriverTable& drv = *detail::state_of(ctx)->table;
  GraphMemory m;
  const CUdevice dev = ctx.device();
  auto get = [&](CUgraphMem_attribute a, std::uint64_t& out, const char* what) {
    cuuint64_t v = 0;
    detail::call<detail::Entry::cuDeviceGetGraphMemAttribute>(drv, what, dev, a, static_cast<void*>(&v));
    out = v;
  };
  get(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, m.used, "reading the graph memory pool's used bytes");
  get(CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, m.used_high, "reading the graph memory pool's highest used bytes");
  get(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, m.reserved, "reading the graph memory pool's reserved bytes");
  get(CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH, m.reserved_high, "reading the graph memory pool's highest reserved bytes");
  return m;
}

MemoryReport memory_report(const Context& ctx) {
  MemoryReport r;
  r.graph_memory = graph_memory(ctx);
  r.graphs = live_graphs();
  r.executables = live_executables();
  r.node_versions = static_cast<std::size_t>(detail::NodeAttachment::live());
  r.buffer_device_bytes = detail::buffer_bytes(false);
  r.buffer_pinned_bytes = detail::buffer_bytes(true);
  return r;
}

std::string to_string(const OwnedMemory& m) {
  std::string s = fmt::format("{} device", detail::byte_text(m.device_bytes));
  if (m.pinned_bytes) s += fmt::format(", {} pinned", detail::byte_text(m.pinned_bytes));
  s += fmt::format(" in {} allocation{}", m.allocations, m.allocations == 1 ? "" : "s");
  return s;
}

std::string to_string(const MemoryReport& r) {
  return fmt::format(
      "{} graph{}, {} executable{}, {} node version{}; buffers hold {} device, {} pinned; graph memory pool: {} "
      "used (high {}), {} reserved (high {})",
      r.graphs, r.graphs == 1 ? "" : "s", r.executables, r.executables == 1 ? "" : "s", r.node_versions,
      r.node_versions == 1 ? "" : "s", detail::byte_text(r.buffer_device_bytes), detail::byte_text(r.buffer_pinned_bytes),
      detail::byte_text(r.graph_memory.used), detail::byte_text(r.graph_memory.used_high),
      detail::byte_text(r.graph_memory.reserved), detail::byte_text(r.graph_memory.reserved_high));
}

std::string to_dot(const Graph& graph, const DotOptions& options) { return to_dot(inspect(graph), options); }
std::string to_dot(const GraphExec& exec, const DotOptions& options) { return to_dot(inspect(exec), options); }

void debug_dot_print(const Graph& graph, const std::string& path, unsigned flags) {
  const auto& h = detail::GraphAccess::live(graph, "tether::debug_dot_print");
  detail::Query q(detail::BoxRef{h, h->root_box}, &graph.context(), "tether::debug_dot_print");
  detail::call<detail::Entry::cuGraphDebugDotPrint>(*h->drv, fmt::format("writing the driver's DOT picture to {}", path),
                                                    q.box->graph, path.c_str(), flags);
}

// ------------------------------------------------------------------ Graph and view queries

namespace {
detail::BoxRef root_ref(const Graph& g, std::string_view call) {
  const auto& h = detail::GraphAccess::live(g, call);
  return detail::BoxRef{h, h->root_box};
}
}  // namespace

std::vector<Node<>> Graph::nodes() const {
  return detail::query_nodes(root_ref(*this, "Graph::nodes"), ctx_ ? &*ctx_ : nullptr, "Graph::nodes");
}
std::vector<Node<>> Graph::roots() const {
  return detail::query_roots(root_ref(*this, "Graph::roots"), ctx_ ? &*ctx_ : nullptr, "Graph::roots");
}
std::vector<Edge> Graph::edges() const {
  return detail::query_edges(root_ref(*this, "Graph::edges"), ctx_ ? &*ctx_ : nullptr, "Graph::edges");
}
GraphRef Graph::child(const Node<>& node) const {
  return detail::query_child(root_ref(*this, "Graph::child"), ctx_ ? &*ctx_ : nullptr, node, "Graph::child");
}
std::vector<BodyRef> Graph::bodies(const Node<>& node) const {
  return detail::query_bodies(root_ref(*this, "Graph::bodies"), ctx_ ? &*ctx_ : nullptr, node, "Graph::bodies");
}

template <bool InBody>
std::vector<Node<>> BasicGraphRef<InBody>::nodes() const {
  return detail::query_nodes(ref_, ctx_ ? &*ctx_ : nullptr, "GraphRef::nodes");
}
template <bool InBody>
std::vector<Node<>> BasicGraphRef<InBody>::roots() const {
  return detail::query_roots(ref_, ctx_ ? &*ctx_ : nullptr, "GraphRef::roots");
}
template <bool InBody>
std::vector<Edge> BasicGraphRef<InBody>::edges() const {
  return detail::query_edges(ref_, ctx_ ? &*ctx_ : nullptr, "GraphRef::edges");
}
template <bool InBody>
GraphRef BasicGraphRef<InBody>::child(const Node<>& node) const {
  return detail::query_child(ref_, ctx_ ? &*ctx_ : nullptr, node, "GraphRef::child");
}
template <bool InBody>
std::vector<BodyRef> BasicGraphRef<InBody>::bodies(const Node<>& node) const {
  return detail::query_bodies(ref_, ctx_ ? &*ctx_ : nullptr, node, "GraphRef::bodies");
}
// Member by member: graph.cpp instantiates the class itself.
#define TETHER_VIEW_QUERIES(B)                                                      \
  template std::vector<Node<>> BasicGraphRef<B>::nodes() const;                     \
  template std::vector<Node<>> BasicGraphRef<B>::roots() const;                     \
  template std::vector<Edge> BasicGraphRef<B>::edges() const;                       \
  template GraphRef BasicGraphRef<B>::child(const Node<>& node) const;              \
  template std::vector<BodyRef> BasicGraphRef<B>::bodies(const Node<>& node) const;
TETHER_VIEW_QUERIES(false)
TETHER_VIEW_QUERIES(true)
#undef TETHER_VIEW_QUERIES

// ------------------------------------------------------------------------------ adopt

namespace {
// What adopting a graph needs to know of it, read before anything is built, so that a failing
// driver call leaves the caller's graph untouched.
struct RawGraph {
  struct Child;
  CUgraph graph = nullptr;
  std::vector<std::pair<CUgraphNode, CUgraphNodeType>> nodes;
  std::vector<Child> children;  // node index -> its embedded graph
};
struct RawGraph::Child {
  std::size_t node;
  RawGraph graph;
};

RawGraph read_raw(const detail::DriverTable& drv, CUgraph g, int depth) {
  if (depth > 64) throw UsageError("Graph::adopt: child graphs nested deeper than 64 levels");
  RawGraph out;
  out.graph = g;
  std::size_t n = 0;
  detail::call<detail::Entry::cuGraphGetNodes>(drv, "counting an adopted graph's nodes", g, static_cast<CUgraphNode*>(nullptr), &n);
  std::vector<CUgraphNode> nodes(n);
  if (n) detail::call<detail::Entry::cuGraphGetNodes>(drv, "listing an adopted graph's nodes", g, nodes.data(), &n);
  for (std::size_t i = 0; i < n; ++i) {
    CUgraphNodeType t{};
    detail::call<detail::Entry::cuGraphNodeGetType>(drv, "reading an adopted node's type", nodes[i], &t);
    out.nodes.emplace_back(nodes[i], t);
    if (t == CU_GRAPH_NODE_TYPE_GRAPH) {
      CUgraph c = nullptr;
      detail::call<detail::Entry::cuGraphChildGraphNodeGetGraph>(drv, "finding an adopted node's child graph", nodes[i], &c);
      out.children.push_back(RawGraph::Child{i, read_raw(drv, c, depth + 1)});
    }
  }
  return out;
}

void build(detail::Hierarchy& h, detail::Box& box, const RawGraph& raw) {
  std::vector<detail::NodeRecord*> recs;
  for (auto [node, type] : raw.nodes) {
    detail::NodeRecord* r = h.allocate_record();
    r->node = node;
    r->type = type;
    r->box = &box;
    h.untracked.insert(r);
    h.publish(box, r);
    recs.push_back(r);
  }
  for (const RawGraph::Child& child : raw.children) {
    detail::Box& c = h.add_box(child.graph.graph, &box, recs[child.node], detail::BoxKind::child);
    build(h, c, child.graph);
  }
}
}  // namespace

Graph Graph::adopt(const Context& ctx, CUgraph graph) {
  detail::check_calls_allowed("Graph::adopt");
  if (!graph) throw UsageError("Graph::adopt: the graph is null");
  if (detail::Registry::instance().find(graph))
    throw UsageError("Graph::adopt: this graph is already held by a tether Graph (or is embedded in one): adopt only "
                     "graphs other code made");
  const detail::DriverTable& drv = detail::table_of(ctx.runtime());
  RawGraph raw;
  {
    detail::ScopedContext scope(drv, ctx.get());
    raw = read_raw(drv, graph, 0);
  }
  // From here the hierarchy owns the graph (it destroys it if building fails: out of memory only).
  std::shared_ptr<detail::Hierarchy> h = detail::Hierarchy::adopt(drv, graph);
  {
    detail::HierarchyGuard lock(h->mu, "Graph::adopt");
    build(*h, h->root(), raw);
  }
  return Graph(ctx, std::move(h));
}

}  // namespace tether
