// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// What a whole update compares (docs/serving.md, "Update planning"): the topology of a graph
// hierarchy as the driver pairs it, taken when an executable is made or whole-updated, and again
// of the candidate graph when an update is planned.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "../graph/hierarchy.hpp"

namespace tether {
struct UpdatePlan;
}

namespace tether::detail {

/// One node, as much of it as the rules of cuGraphExecUpdate look at.
struct TopoNode {
  NodeTypeByte type;
  std::uint8_t cooperative = 0;   // kernel: CU_LAUNCH_ATTRIBUTE_COOPERATIVE
  std::uint8_t cond_type = 0;     // conditional: CUgraphConditionalNodeType
  std::uint8_t src_memory = 0;    // memcpy: CUmemorytype of the source and destination
  std::uint8_t dst_memory = 0;
  int priority = 0;               // kernel, read only under USE_NODE_PRIORITY (clamped by the driver)
  std::uint32_t deps_at = 0;      // dependencies: TopoGraph::deps[deps_at, deps_at + deps_n), sorted
  std::uint32_t deps_n = 0;
  std::uint32_t sub_at = 0;       // child graph (1) or bodies: Topology::graphs[sub_at, sub_at + sub_n)
  std::uint32_t sub_n = 0;
};

/// One graph of a hierarchy: its nodes in creation order (the driver's pairing order).
struct TopoGraph {
  std::vector<TopoNode> nodes;
  std::vector<std::uint32_t> deps;
  // The records of the nodes, for the plan's node handles: valid only while the hierarchy the
  // topology was read from is locked (cleared when an executable keeps the topology).
  std::vector<NodeRecord*> recs;
  bool edge_removed = false;  // Box::edge_removed (fact U1)
};

/// A hierarchy's topology; graphs[0] is the root, a node's sub-graphs follow their parent.
struct Topology {
  std::vector<TopoGraph> graphs;
  bool priorities = false;  // read under USE_NODE_PRIORITY
  /// Drops the record pointers (the topology outlives the lock it was read under).
  void forget_records() noexcept {
    for (TopoGraph& g : graphs) g.recs = {};
  }
};

/// Reads the topology of `h` (locked by the caller, its context current): tether's records for
/// the nodes, their order, kinds, child graphs and bodies; the driver for the edges
/// (cuGraphGetEdges, per graph), each kernel node's COOPERATIVE attribute (and PRIORITY when
/// `priorities`), each memcpy node's memory types.
/// Throws DriverError, std::bad_alloc.
std::shared_ptr<Topology> read_topology(const Hierarchy& h, bool priorities);

/// Whether a whole update of an executable whose topology is `exec` from the graph whose topology
/// is `graph` (read from `h`, still locked) would be accepted, and if not, the first node and rule
/// (the rules of cuGraphExecUpdate, in the order the simulator checks them).
UpdatePlan plan(const Topology& exec, const Topology& graph, const std::shared_ptr<Hierarchy>& h);

}  // namespace tether::detail
