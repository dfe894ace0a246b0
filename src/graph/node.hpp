// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "../resources/module.hpp"
#include "hierarchy.hpp"

TETHER_EXPORT namespace tether {

/// Node kinds: tags that type `Node<Kind>` handles, one per `CUgraphNodeType` tether builds.
struct AnyKind {};                 ///< a node of any kind (`Node<>`)
template <class... Args>
struct KernelNode {                ///< CU_GRAPH_NODE_TYPE_KERNEL, launching a `Kernel<Args...>`
  using kernel_tag = void;
};
struct MemcpyNode {};              ///< CU_GRAPH_NODE_TYPE_MEMCPY
struct MemsetNode {};              ///< CU_GRAPH_NODE_TYPE_MEMSET
struct HostNode {};                ///< CU_GRAPH_NODE_TYPE_HOST
struct EventRecordNode {};         ///< CU_GRAPH_NODE_TYPE_EVENT_RECORD
struct EventWaitNode {};           ///< CU_GRAPH_NODE_TYPE_WAIT_EVENT
struct EmptyNode {};               ///< CU_GRAPH_NODE_TYPE_EMPTY
struct ChildNode {};               ///< CU_GRAPH_NODE_TYPE_GRAPH (an embedded copy of a graph)
struct ConditionalNode {};         ///< CU_GRAPH_NODE_TYPE_CONDITIONAL (if, if/else, while, switch)
struct MemAllocNode {};            ///< CU_GRAPH_NODE_TYPE_MEM_ALLOC
struct MemFreeNode {};             ///< CU_GRAPH_NODE_TYPE_MEM_FREE

template <class Kind = AnyKind>
class Node;

}  // namespace tether

namespace tether::detail {
// What a typed handle carries besides the node: a kernel node's handle points at its kernel's
// record without owning it, so that an update (which names no kernel) can take a reference to it
// without reading the node's version (a cache miss per update). Valid while the node is (its
// versions own the kernel), which every update checks first.
template <class K>
struct NodeExtra {};
template <class... P>
struct NodeExtra<KernelNode<P...>> {
  const KernelInfo* kernel = nullptr;
};

struct NodeAccess {
  template <class K>
  static const NodeRef& ref(const Node<K>& n) noexcept {
    return n.ref_;
  }
  template <class K>
  static const NodeExtra<K>& extra(const Node<K>& n) noexcept {
    return n.extra_;
  }
  template <class K>
  static Node<K> make(NodeRef r, NodeExtra<K> extra = {}) noexcept {
    Node<K> n;
    n.ref_ = std::move(r);
    n.extra_ = extra;
    return n;
  }
};
}  // namespace tether::detail

TETHER_EXPORT namespace tether {

/// A typed handle to one node of a graph (or of an embedded child graph or conditional body).
/// Cheap to copy (one weak reference count) and non-owning: it never keeps the graph, or the
/// owners of its nodes, alive. A handle becomes invalid when its node is removed, when the edit
/// that created it is rolled back, when its graph is gone (the Graph and every executable made
/// from it), or when CUDA destroys the graph it lives in (its child-graph or conditional node was
/// removed); using an invalid handle throws UsageError and never reaches the driver (the driver
/// does not check node handles: a second cuGraphDestroyNode crashes it).
///
/// Thread safety: `valid()` may be called concurrently with edits of the graph.
template <class Kind>
class Node {
 public:
  /// An invalid handle.
  Node() noexcept = default;

  /// Any typed handle converts to `Node<>`.
  template <class K>
    requires(std::is_same_v<Kind, AnyKind> && !std::is_same_v<K, AnyKind>)
  Node(const Node<K>& other) noexcept  // NOLINT(google-explicit-constructor)
      : ref_(detail::NodeAccess::ref(other)) {}

  /// Whether the node still exists (see the class comment).
  bool valid() const noexcept { return ref_.valid(); }

  /// The driver's node handle. Throws UsageError if the handle is invalid.
  CUgraphNode get() const {
    std::shared_ptr<detail::Hierarchy> h = ref_.hierarchy.lock();
    if (!h || !ref_.current())
      throw UsageError("Node::get: this node handle is invalid (default-constructed, removed, rolled back, or its "
                       "graph was destroyed)");
    return ref_.record->node;
  }

  /// Whether both refer to the same node (identity: no lock, no driver call; two invalid handles
  /// are equal only if they referred to the same node). `std::hash<Node<K>>` agrees with it.
  template <class K>
  friend bool operator==(const Node& a, const Node<K>& b) noexcept {
    const detail::NodeRef& r = detail::NodeAccess::ref(b);
    // The hierarchy too: a record address is unique only while its hierarchy lives.
    return a.ref_.record == r.record && a.ref_.generation == r.generation &&
           !a.ref_.hierarchy.owner_before(r.hierarchy) && !r.hierarchy.owner_before(a.ref_.hierarchy);
  }

 private:
  friend struct detail::NodeAccess;
  detail::NodeRef ref_;
  [[no_unique_address]] detail::NodeExtra<Kind> extra_;
};

}  // namespace tether

/// Node handles as keys of unordered containers: hashes what `==` compares (the node's record and
/// generation), so it stays stable when the node is removed.
template <class K>
struct std::hash<tether::Node<K>> {
  std::size_t operator()(const tether::Node<K>& n) const noexcept {
    const tether::detail::NodeRef& r = tether::detail::NodeAccess::ref(n);
    return std::hash<const void*>{}(r.record) ^ (static_cast<std::size_t>(r.generation) * 0x9E3779B97F4A7C15ull);
  }
};
