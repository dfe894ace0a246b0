// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The update overloads an edit and an executable share (CRTP): one per node kind, each building
// that kind's descriptor in the derived class's `do_update`.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "launch.hpp"
#include "node.hpp"

TETHER_EXPORT namespace tether {

/// Per-kind updates of a node, shared by `Edit` (the graph's node: cuGraphNodeSetParams, undone
/// on rollback, published at commit) and `GraphExec` (the executable's node only:
/// cuGraphExecNodeSetParams). Each checks its arguments as the matching creator does, and the new
/// version keeps exactly what it is given (plus, for kernels, the node's kernel); `keeping(o)` on
/// the derived class adds extra owners to one update's version.
template <class Derived>
class NodeUpdates {
 public:
  /// A kernel node's launch configuration and arguments, checked at compile time like
  /// `launch()`. In an edit, the Launch's attributes are set (cuGraphKernelNodeSetAttribute) and
  /// the others kept; an executable refuses a Launch that sets any (UsageError).
  template <class... P, class... A>
  void update(const Node<KernelNode<P...>>& node, const Launch& launch, A&&... args) {
    self().do_update(nullptr, node, launch, std::forward<A>(args)...);
  }
  /// Shorthand for `update(node, Launch{grid, block}, args...)`.
  template <class... P, class... A>
  void update(const Node<KernelNode<P...>>& node, Grid grid, Block block, A&&... args) {
    self().do_update(nullptr, node, Launch{grid, block}, std::forward<A>(args)...);
  }
  /// A memset node's destination and value.
  template <class Dst, class T>
  void update(const Node<MemsetNode>& node, Dst&& dst, const T& value) {
    self().do_update(nullptr, node, std::forward<Dst>(dst), value);
  }
  /// A memcpy node's ends (and element count, default: all of `src`).
  template <class Dst, class Src>
  void update(const Node<MemcpyNode>& node, Dst&& dst, Src&& src, std::size_t count = 0) {
    self().do_update(nullptr, node, std::forward<Dst>(dst), std::forward<Src>(src), count);
  }
  /// A host node's callable.
  template <class F>
  void update(const Node<HostNode>& node, F&& fn) {
    self().do_update(nullptr, node, std::forward<F>(fn));
  }
  /// The event of an event record node.
  void update(const Node<EventRecordNode>& node, const Event& event) { self().do_update(nullptr, node, event); }
  /// The event of an event wait node.
  void update(const Node<EventWaitNode>& node, const Event& event) { self().do_update(nullptr, node, event); }

 private:
  Derived& self() noexcept { return static_cast<Derived&>(*this); }
};

}  // namespace tether
