// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "topology.hpp"

#include "exec.hpp"
#include "../introspect/inspect.hpp"

namespace tether {

namespace detail {

namespace {

bool has_subgraphs(CUgraphNodeType t) noexcept {
  return t == CU_GRAPH_NODE_TYPE_GRAPH || t == CU_GRAPH_NODE_TYPE_CONDITIONAL;
}

class TopologyReader {
 public:
  TopologyReader(const Hierarchy& h, Topology& t) : h_(h), drv_(*h.drv), t_(t) {}

  // Reads `box` into t_.graphs[gi] (already made), then the graphs its nodes own, appended.
  void read(const Box& box, std::size_t gi) {
    std::vector<NodeRecord*> recs;
    recs.reserve(box.node_count);
    box.for_each([&](NodeRecord* r) { recs.push_back(r); });
    std::vector<TopoNode> nodes(recs.size());
    std::vector<std::uint32_t> deps = dependencies(box, recs, nodes);
    for (std::size_t i = 0; i < recs.size(); ++i) describe(*recs[i], nodes[i]);
    TopoGraph& g = t_.graphs[gi];
    g.nodes = std::move(nodes);
    g.deps = std::move(deps);
    g.recs = std::move(recs);
    g.edge_removed = box.edge_removed;
    // The sub-graphs of each node are consecutive; their own sub-graphs come after all of them.
    for (std::size_t i = 0; i < t_.graphs[gi].nodes.size(); ++i) {
      const NodeRecord* r = t_.graphs[gi].recs[i];
      if (!has_subgraphs(r->type)) continue;
      std::vector<const Box*> subs;
      for (const Box* b = h_.first_owned(r); b; b = b->next_owned)
        if (!b->retired.load(std::memory_order_relaxed)) subs.push_back(b);
      const auto at = static_cast<std::uint32_t>(t_.graphs.size());
      t_.graphs.resize(t_.graphs.size() + subs.size());
      TopoNode& n = t_.graphs[gi].nodes[i];
      n.sub_at = at;
      n.sub_n = static_cast<std::uint32_t>(subs.size());
      if (r->type == CU_GRAPH_NODE_TYPE_CONDITIONAL && !subs.empty()) n.cond_type = subs.front()->conditional_type;
      for (std::size_t k = 0; k < subs.size(); ++k) read(*subs[k], at + k);
    }
  }

 private:
  // Each node's dependencies as sorted positions (cuGraphGetEdges once for the graph).
  std::vector<std::uint32_t> dependencies(const Box& box, const std::vector<NodeRecord*>& recs,
                                          std::vector<TopoNode>& nodes) {
    if (recs.empty()) return {};
    // Positions by driver handle: an open-addressing table (a sorted index cost about 200
    // instructions per node more in bench/instructions).
    std::size_t cap = 16;
    while (cap < recs.size() * 2) cap *= 2;
    std::vector<std::pair<CUgraphNode, std::uint32_t>> table(cap, {nullptr, 0});
    auto slot = [&](CUgraphNode n) {
      auto h = static_cast<std::size_t>(reinterpret_cast<std::uintptr_t>(n) * 0x9E3779B97F4A7C15ull);
      std::size_t i = h >> 7;
      while (true) {
        i &= cap - 1;
        if (table[i].first == n || table[i].first == nullptr) return i;
        ++i;
      }
    };
    for (std::size_t i = 0; i < recs.size(); ++i) table[slot(recs[i]->node)] = {recs[i]->node, static_cast<std::uint32_t>(i)};
    auto position = [&](CUgraphNode n) -> std::int64_t {
      const auto& e = table[slot(n)];
      return e.first == n && n ? e.second : -1;
    };
    std::vector<std::pair<std::uint32_t, std::uint32_t>> to_from;
    for (auto [from, to] : driver_edges(drv_, box)) {
      const std::int64_t f = position(from), t = position(to);
      // Every node of a tether graph has a record; an edge to one without would be a bug of
      // tether's bookkeeping, not a reason to refuse the plan: it is left out.
      if (f >= 0 && t >= 0) to_from.emplace_back(static_cast<std::uint32_t>(t), static_cast<std::uint32_t>(f));
    }
    if (!std::is_sorted(to_from.begin(), to_from.end())) std::sort(to_from.begin(), to_from.end());
    std::vector<std::uint32_t> deps;
    deps.reserve(to_from.size());
    for (std::size_t k = 0; k < to_from.size(); ++k) {
      TopoNode& n = nodes[to_from[k].first];
      if (n.deps_n == 0) n.deps_at = static_cast<std::uint32_t>(deps.size());
      deps.push_back(to_from[k].second);
      ++n.deps_n;
    }
    return deps;
  }

  void describe(const NodeRecord& r, TopoNode& n) {
    n.type = r.type;
    switch (static_cast<CUgraphNodeType>(r.type)) {
      case CU_GRAPH_NODE_TYPE_KERNEL: {
        CUkernelNodeAttrValue v{};
        call<Entry::cuGraphKernelNodeGetAttribute>(drv_, "reading a kernel node's COOPERATIVE attribute (planning updates)",
                                                   r.node, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &v);
        n.cooperative = v.cooperative != 0 ? 1 : 0;
        if (t_.priorities) {
          CUkernelNodeAttrValue p{};
          call<Entry::cuGraphKernelNodeGetAttribute>(drv_, "reading a kernel node's PRIORITY attribute (planning updates)",
                                                     r.node, CU_LAUNCH_ATTRIBUTE_PRIORITY, &p);
          n.priority = p.priority;
        }
        break;
      }
      case CU_GRAPH_NODE_TYPE_MEMCPY: {
        CUDA_MEMCPY3D c{};
        call<Entry::cuGraphMemcpyNodeGetParams>(drv_, "reading a memcpy node (planning updates)", r.node, &c);
        n.src_memory = static_cast<std::uint8_t>(c.srcMemoryType);
        n.dst_memory = static_cast<std::uint8_t>(c.dstMemoryType);
        break;
      }
      default: break;
    }
  }

  const Hierarchy& h_;
  const DriverTable& drv_;
  Topology& t_;
};

std::string_view memory_name(std::uint8_t t) noexcept {
  switch (t) {
    case CU_MEMORYTYPE_HOST: return "host";
    case CU_MEMORYTYPE_DEVICE: return "device";
    case CU_MEMORYTYPE_ARRAY: return "array";
    case CU_MEMORYTYPE_UNIFIED: return "unified";
    default: return "unknown";
  }
}

std::string_view conditional_name(std::uint8_t t) noexcept {
  switch (t) {
    case CU_GRAPH_COND_TYPE_IF: return "if";
    case CU_GRAPH_COND_TYPE_WHILE: return "while";
    case CU_GRAPH_COND_TYPE_SWITCH: return "switch";
    default: return "unknown";
  }
}

std::string positions(const std::vector<std::uint32_t>& deps, const TopoNode& n) {
  std::string s = "{";
  for (std::uint32_t k = 0; k < n.deps_n; ++k) s += fmt::format("{}{}", k ? ", " : "", deps[n.deps_at + k]);
  return s + "}";
}

// One refusal: where (the graph and node of the candidate topology) and why.
struct Refusal {
  UpdateResult::Reason reason = UpdateResult::Reason::success;
  std::uint32_t graph = 0;
  std::uint32_t node = 0;
  bool has_node = false;
  std::string rule;
};

class Planner {
 public:
  Planner(const Topology& exec, const Topology& graph) : a_(exec), b_(graph) {}

  // The first rule `graph` breaks in graphs ga (executable) and gb (candidate); success if none.
  Refusal compare(std::uint32_t ga, std::uint32_t gb) const {
    const TopoGraph& x = a_.graphs[ga];
    const TopoGraph& y = b_.graphs[gb];
    using R = UpdateResult::Reason;
    if (x.nodes.size() != y.nodes.size())
      return {R::topology_changed, gb, 0, false,
              fmt::format("the executable's graph has {} nodes and the graph {} (a whole update pairs the nodes in "
                          "creation order and needs as many)",
                          x.nodes.size(), y.nodes.size())};
    for (std::uint32_t i = 0; i < y.nodes.size(); ++i) {
      const TopoNode& p = x.nodes[i];
      const TopoNode& q = y.nodes[i];
      auto refuse = [&](R r, std::string rule) { return Refusal{r, gb, i, true, std::move(rule)}; };
      const auto pt = static_cast<CUgraphNodeType>(p.type), qt = static_cast<CUgraphNodeType>(q.type);
      if (pt != qt)
        return refuse(R::node_type_changed,
                      fmt::format("node {} is {} node in the executable and {} node in the graph (a whole update "
                                  "cannot change a node's kind)",
                                  i, a_kind(pt), a_kind(qt)));
      if (!std::equal(x.deps.begin() + p.deps_at, x.deps.begin() + p.deps_at + p.deps_n, y.deps.begin() + q.deps_at,
                      y.deps.begin() + q.deps_at + q.deps_n))
        return refuse(R::topology_changed,
                      fmt::format("node {} ({}) depends on nodes {} in the executable and {} in the graph (a whole "
                                  "update cannot change the edges)",
                                  i, to_string(kind_of(qt)), positions(x.deps, p), positions(y.deps, q)));
    }
    if (y.edge_removed)
      return {R::topology_changed, gb, 0, false,
              "an edge from a node with dependencies was removed from the graph (Edit::disconnect, or the rollback "
              "of an Edit::connect); the driver then refuses a whole update from it although its topology is the "
              "executable's (driver fact U1): make the graph again, or instantiate it"};
    // Then, the topology being the same, each node's own rules (on the H200 a changed edge is
    // reported before a changed attribute of an earlier node).
    for (std::uint32_t i = 0; i < y.nodes.size(); ++i) {
      const TopoNode& p = x.nodes[i];
      const TopoNode& q = y.nodes[i];
      auto refuse = [&](R r, std::string rule) { return Refusal{r, gb, i, true, std::move(rule)}; };
      const auto qt = static_cast<CUgraphNodeType>(q.type);
      if (qt == CU_GRAPH_NODE_TYPE_KERNEL) {
        if (p.cooperative != q.cooperative)
          return refuse(R::attributes_changed,
                        fmt::format("node {} (kernel) is {}cooperative in the executable and {}cooperative in the "
                                    "graph (CUDA keeps CU_LAUNCH_ATTRIBUTE_COOPERATIVE fixed in a whole update)",
                                    i, p.cooperative ? "" : "not ", q.cooperative ? "" : "not "));
        if (a_.priorities && p.priority != q.priority)
          return refuse(R::attributes_changed,
                        fmt::format("node {} (kernel) has priority {} in the executable and {} in the graph (under "
                                    "use_node_priority CUDA keeps CU_LAUNCH_ATTRIBUTE_PRIORITY fixed in a whole "
                                    "update)",
                                    i, p.priority, q.priority));
      }
      if (qt == CU_GRAPH_NODE_TYPE_GRAPH && p.sub_n == 1 && q.sub_n == 1) {
        Refusal r = compare(p.sub_at, q.sub_at);
        if (r.reason != R::success) return within(std::move(r), fmt::format("in the child graph of node {}: ", i));
      }
      if (qt == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
        if (p.cond_type != q.cond_type)
          return refuse(R::not_supported,
                        fmt::format("node {} is a conditional node of type {} in the executable and of type {} in the "
                                    "graph (a whole update cannot change a conditional node's type)",
                                    i, conditional_name(p.cond_type), conditional_name(q.cond_type)));
        if (p.sub_n != q.sub_n)
          return refuse(R::not_supported,
                        fmt::format("node {} is a conditional node with {} bodies in the executable and {} in the "
                                    "graph (a whole update cannot change a conditional node's size)",
                                    i, p.sub_n, q.sub_n));
        for (std::uint32_t k = 0; k < q.sub_n; ++k) {
          Refusal r = compare(p.sub_at + k, q.sub_at + k);
          if (r.reason != R::success)
            return within(std::move(r), fmt::format("in body {} of conditional node {}: ", k, i));
        }
      }
      if (qt == CU_GRAPH_NODE_TYPE_MEMCPY && (p.src_memory != q.src_memory || p.dst_memory != q.dst_memory))
        return refuse(R::parameters_changed,
                      fmt::format("node {} (memcpy) copies {} to {} memory in the executable and {} to {} in the "
                                  "graph (a whole update cannot change a copy's memory types)",
                                  i, memory_name(p.src_memory), memory_name(p.dst_memory), memory_name(q.src_memory),
                                  memory_name(q.dst_memory)));
    }
    return {};
  }

 private:
  // A refusal inside the graphs of a node: the driver names the offending node itself (on the
  // H200, also inside a child graph or body), and none for a node-count difference there too.
  static Refusal within(Refusal r, std::string_view prefix) {
    r.rule = std::string(prefix) + r.rule;
    return r;
  }
  const Topology& a_;
  const Topology& b_;
};

Node<> handle_of(const std::shared_ptr<Hierarchy>& h, NodeRecord* r) {
  return NodeAccess::make<AnyKind>(NodeRef{h, r, r->generation.load(std::memory_order_acquire)});
}

}  // namespace

std::shared_ptr<Topology> read_topology(const Hierarchy& h, bool priorities) {
  auto t = std::make_shared<Topology>();
  t->priorities = priorities;
  t->graphs.resize(1);
  TopologyReader(h, *t).read(*h.root_box, 0);
  return t;
}

UpdatePlan plan(const Topology& exec, const Topology& graph, const std::shared_ptr<Hierarchy>& h) {
  Refusal r = Planner(exec, graph).compare(0, 0);
  UpdatePlan p;
  p.reason = r.reason;
  p.rule = std::move(r.rule);
  if (r.reason == UpdateResult::Reason::success || !r.has_node) return p;
  p.position = r.node;
  p.node = handle_of(h, graph.graphs[r.graph].recs[r.node]);
  return p;
}

}  // namespace detail

std::string to_string(const UpdatePlan& plan) {
  if (plan) return "accepted";
  return fmt::format("{}: {}", to_string(plan.reason), plan.rule);
}

}  // namespace tether
