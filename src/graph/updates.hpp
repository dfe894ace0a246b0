// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The updates an edit and an executable share (CRTP): the one generic door, `update(node, spec)`,
// and its one-line spellings per kind, which build the kind's spec once the node is known to be
// valid and hand it to the derived class's `update_made`.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "kinds/event.hpp"
#include "kinds/host.hpp"
#include "kinds/kernel.hpp"
#include "kinds/memcpy.hpp"
#include "kinds/memset.hpp"
#include "launch.hpp"
#include "node.hpp"

namespace tether::detail {

[[noreturn]] void throw_no_kernel();
[[noreturn]] void throw_other_kernel(std::string_view what, std::string_view spec_kernel, std::string_view node_kernel);

/// The kernel a checked kernel node runs (its versions keep it), as a new reference to its record
/// (what an update's version keeps). Throws UsageError for a handle that carries none.
template <class... P>
std::shared_ptr<const KernelInfo> kernel_of(const Node<KernelNode<P...>>& node) {
  const KernelInfo* info = NodeAccess::extra(node).kernel;
  if (!info) throw_no_kernel();
  return info->shared_from_this();
}

template <class T>
struct IsSpec : std::false_type {};
template <class K>
struct IsSpec<Spec<K>> : std::true_type {};

/// Whether one of NodeUpdates' overloads takes a node of kind `K` with arguments `A...` (by shape
/// only: their own checks then say what is wrong), so that the catch-all that explains a mismatch
/// never competes with them.
template <class K, class... A>
consteval bool update_accepts() {
  constexpr std::size_t n = sizeof...(A);
  using First = std::remove_cvref_t<std::tuple_element_t<0, std::tuple<A..., void>>>;
  if constexpr (n == 1 && std::is_same_v<First, Spec<K>>)
    return true;
  else if constexpr (requires { typename K::kernel_tag; })
    return n >= 1 && (std::is_same_v<First, Launch> || std::is_same_v<First, Param<Launch>> || std::is_same_v<First, Grid>);
  else if constexpr (std::is_same_v<K, MemsetNode>)
    return n == 2;
  else if constexpr (std::is_same_v<K, MemcpyNode>)
    return n == 2 || n == 3;
  else if constexpr (std::is_same_v<K, HostNode>)
    return n == 1 && !IsSpec<First>::value;
  else if constexpr (std::is_same_v<K, EventRecordNode> || std::is_same_v<K, EventWaitNode>)
    return n == 1 && std::is_convertible_v<First, const Event&>;
  else
    return false;
}

/// The names an update's checks give in their messages, per consumer.
struct UpdateNames {
  const char* update;  // "Edit::update"
  const char* memset;  // "Edit::update(memset)"
  const char* memcpy;  // "Edit::update(memcpy)"
};

}  // namespace tether::detail

TETHER_EXPORT namespace tether {

/// Per-node updates, shared by `Edit` (the graph's node: cuGraphNodeSetParams, undone on rollback,
/// published at commit) and `GraphExec` (the executable's node only: cuGraphExecNodeSetParams).
/// `update(node, spec)` is the one door: the spec's version (its owners, plus for kernels the
/// node's kernel) replaces the node's. The other overloads are one-line spellings of it that build
/// the kind's spec from the arguments (checked as the matching creator checks them) first, so that
/// whatever fails next, the arguments are released on the reclaimer; a kernel update without a
/// spec takes the kernel the node runs, so its spec is built once the node is known to be valid.
template <class Derived>
class NodeUpdates {
 public:
  /// The node's next version from `spec`, which is consumed (also when the update fails: its
  /// owners are then released on the reclaimer). A kernel spec must launch the kernel the node
  /// runs. Throws UsageError for an empty spec, an invalid node, another kernel; DriverError.
  /// Since 0.5.
  template <class K>
    requires requires { Spec<K>::to_update; }
  void update(const Node<K>& node, Spec<K>&& spec) {
    self().update_made(node, [&]() -> Spec<K>& {
      detail::SpecAccess::check_live(spec, Derived::update_names.update);
      if constexpr (requires { typename K::kernel_tag; }) {
        const detail::KernelInfo* runs = detail::NodeAccess::extra(node).kernel;
        if (!runs) detail::throw_no_kernel();
        if (const detail::KernelInfo* k = detail::SpecAccess::kernel(spec); k != runs)
          detail::throw_other_kernel(Derived::update_names.update, k->name, runs->name);
      }
      return spec;
    });
  }
  /// A spec is used once: pass `std::move(spec)`.
  template <class K>
  void update(const Node<K>&, Spec<K>&) {
    static_assert(detail::dependent_false<K>, "update: a spec makes one node version: pass std::move(spec)");
  }

  /// A kernel node's launch configuration and arguments, checked at compile time like
  /// `launch()`; the node keeps its kernel. In an edit, the Launch's attributes are set
  /// (cuGraphKernelNodeSetAttribute) and the others kept; an executable refuses a Launch that sets
  /// any (UsageError).
  template <class... P, class... A>
  void update(const Node<KernelNode<P...>>& node, const Launch& launch, A&&... args) {
    update_with(node, launch, std::forward<A>(args)...);
  }
  /// The same with dynamic parameter `launch` as the launch configuration: the node's new version
  /// takes its current Launch and binds it (a version made without it is unbound). An executable
  /// refuses a launch parameter whose Launch sets attributes, as above.
  template <class... P, class... A>
  void update(const Node<KernelNode<P...>>& node, const Param<Launch>& launch, A&&... args) {
    update_with(node, launch, std::forward<A>(args)...);
  }
  /// Shorthand for `update(node, Launch{grid, block}, args...)`.
  template <class... P, class... A>
  void update(const Node<KernelNode<P...>>& node, Grid grid, Block block, A&&... args) {
    update(node, Launch{grid, block}, std::forward<A>(args)...);
  }
  /// A memset node's destination and value: `update(node, tether::memset(dst, value))`.
  template <class Dst, class T>
  void update(const Node<MemsetNode>& node, Dst&& dst, const T& value) {
    static_assert(detail::Endpoint<Dst&&>::ok && !detail::Endpoint<Dst&&>::pinned,
                  "update(memset): the destination is a SharedBuffer<T>, a DeviceBuffer<T>&& or tether::unowned(p, count)");
    Spec<MemsetNode> spec(detail::What{Derived::update_names.memset}, std::forward<Dst>(dst), value);
    self().update_made(node, [&]() -> Spec<MemsetNode>& { return spec; });
  }
  /// A memcpy node's ends (and element count, default: all of `src`):
  /// `update(node, tether::memcpy(dst, src, count))`.
  template <class Dst, class Src>
  void update(const Node<MemcpyNode>& node, Dst&& dst, Src&& src, std::size_t count = 0) {
    static_assert(detail::Endpoint<Dst&&>::ok && detail::Endpoint<Src&&>::ok,
                  "update(memcpy): each end is a shared or moved-in buffer, or tether::unowned(p, count)");
    Spec<MemcpyNode> spec(detail::What{Derived::update_names.memcpy}, std::forward<Dst>(dst), std::forward<Src>(src), count);
    self().update_made(node, [&]() -> Spec<MemcpyNode>& { return spec; });
  }
  /// A host node's callable: `update(node, tether::host(fn))`.
  template <class F>
    requires(!detail::IsSpec<std::remove_cvref_t<F>>::value)
  void update(const Node<HostNode>& node, F&& fn) {
    Spec<HostNode> spec(detail::What{Derived::update_names.update}, std::forward<F>(fn));
    self().update_made(node, [&]() -> Spec<HostNode>& { return spec; });
  }
  /// The event of an event record node: `update(node, tether::record(event))`.
  void update(const Node<EventRecordNode>& node, const Event& event) {
    Spec<EventRecordNode> spec(detail::What{Derived::update_names.update}, event);
    self().update_made(node, [&]() -> Spec<EventRecordNode>& { return spec; });
  }
  /// The event of an event wait node: `update(node, tether::wait(event))`.
  void update(const Node<EventWaitNode>& node, const Event& event) {
    Spec<EventWaitNode> spec(detail::What{Derived::update_names.update}, event);
    self().update_made(node, [&]() -> Spec<EventWaitNode>& { return spec; });
  }

  /// Any other combination does not compile: update takes the parameters of the node's own kind.
  template <class K, class... A>
    requires(!detail::update_accepts<K, A...>())
  void update(const Node<K>&, const A&...) {
    static_assert(detail::dependent_false<K>,
                  "update: the parameters do not match the node's kind (a Spec of the node's kind; or kernel: launch "
                  "configuration, a Param<Launch>, or grid, block, then arguments; memset: destination, value; memcpy: destination, "
                  "source; host: callable; event record/wait: event)");
  }

 private:
  Derived& self() noexcept { return static_cast<Derived&>(*this); }
  // Both launch spellings of a kernel update: `config` is a Launch or a Param<Launch>.
  template <class... P, class L, class... A>
  void update_with(const Node<KernelNode<P...>>& node, const L& config, A&&... args) {
    static_assert(detail::KernelArgsCheck<std::tuple<P...>, A&&...>::ok);
    self().update_made(node, [&] {
      // The kernel is the one the node already runs: its versions keep it (the node was checked).
      std::shared_ptr<const detail::KernelInfo> kernel = detail::kernel_of(node);
      const detail::KernelInfo& info = *kernel;
      return Spec<KernelNode<P...>>(detail::What{Derived::update_names.update}, info, std::move(kernel), config,
                                    std::forward<A>(args)...);
    });
  }
};

}  // namespace tether
