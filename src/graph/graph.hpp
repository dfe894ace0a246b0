// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The typed builder DSL (docs/dsl.md): Graph, GraphRef/BodyRef views, Edit transactions and their
// node creators. Every creator marshals its arguments into the raw insertion path (ops.hpp) and
// collects the owners of the new version into one bundle.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "../resources/context.hpp"
#include "../resources/event.hpp"
#include "../resources/module.hpp"
#include "args.hpp"
#include "node.hpp"
#include "ops.hpp"

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
class Condition {
 public:
  Condition() = default;
  std::uint64_t handle() const noexcept { return handle_; }

 private:
  template <class, bool>
  friend class Builder;
  std::uint64_t handle_ = 0;
  const detail::Box* box_ = nullptr;
};

/// A view of an embedded child graph (`GraphRef`, from `Edit::embed`) or of a conditional body
/// (`BodyRef`, from if_ / if_else / while_ / switch_). It shares ownership of the whole hierarchy,
/// so it keeps the root graph alive. It becomes invalid when CUDA destroys the graph it shows (its
/// node removed); using it then throws UsageError. Thread safety: as Graph.
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
  static BodyRef body_ref(BoxRef r, const Context& c) { return make_ref<true>(std::move(r), c); }
  template <bool InBody>
  static const BoxRef& ref(const BasicGraphRef<InBody>& g) noexcept {
    return g.ref_;
  }
  template <bool InBody>
  static const Context& ctx(const BasicGraphRef<InBody>& g) {
    return *g.ctx_;
  }
  static const std::shared_ptr<Hierarchy>& hierarchy(const Graph& g) noexcept;
};

/// Where a creator puts its node: transaction, graph, dependencies, extra owners.
struct Site {
  Transaction* tx;
  Box* box;
  std::span<NodeRecord* const> deps;
  Owners* keeping;
  const Context* ctx;
};

template <class T>
inline constexpr bool dependent_false = false;

std::span<NodeRecord* const> no_deps() noexcept;
[[noreturn]] void throw_finished_edit();
void check_not_body(const Box& box, const char* what);
CUcontext context_handle(const Context& c) noexcept;
Box* box_of(Transaction& tx, const BoxRef& ref, const char* what);
/// The dependencies (or the dependents) of `r` (cuGraphNodeGetDependencies / GetDependentNodes),
/// as records of its graph.
std::vector<NodeRecord*> neighbours(Transaction& tx, NodeRecord* r, bool dependencies);

template <class F>
void host_trampoline(void* p) {
  // Host callbacks run on a driver thread where CUDA calls fail: anything the callable drops that
  // needs the driver is deferred to the reclaimer. Exceptions cannot cross the driver.
  ForbidCuda forbid;
  try {
    (*static_cast<F*>(p))();
  } catch (...) {
    report_current_exception("running a host node's callable");
  }
}

template <class T>
unsigned memset_bits(const T& v) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4,
                "memset: the element type must be 1, 2 or 4 bytes wide (CUDA memset nodes set 8-, 16- or 32-bit values)");
  if constexpr (sizeof(T) == 1) {
    std::uint8_t b;
    std::memcpy(&b, &v, 1);
    return b;
  } else if constexpr (sizeof(T) == 2) {
    std::uint16_t b;
    std::memcpy(&b, &v, 2);
    return b;
  } else {
    std::uint32_t b;
    std::memcpy(&b, &v, 4);
    return b;
  }
}

template <class Tuple, class... A>
struct KernelArgsCheck;
template <class... P, class... A>
struct KernelArgsCheck<std::tuple<P...>, A...> {
  static_assert(sizeof...(P) == sizeof...(A),
                "launch/update: the number of arguments differs from the kernel's parameter list");
  static constexpr bool raw = ((KernelArg<P, A>::pointer_param && KernelArg<P, A>::raw_pointer) || ...);
  static_assert(!raw,
                "launch/update: a kernel pointer parameter takes SharedBuffer<T>, DeviceBuffer<T>&& (both kept "
                "alive with the node) or tether::unowned(p) (explicitly not kept alive); a raw pointer is rejected "
                "because nothing would keep its memory alive");
  static constexpr bool device_lvalue = ((KernelArg<P, A>::pointer_param && KernelArg<P, A>::device_lvalue) || ...);
  static_assert(!device_lvalue,
                "launch/update: a DeviceBuffer<T> is move-only: pass std::move(buffer) to hand it to the node, share() "
                "it, or pass tether::unowned(buffer)");
  static_assert((KernelArg<P, A>::ok && ...),
                "launch/update: an argument's type does not match the kernel's parameter type (pointer parameters "
                "take buffers of a matching element type; value parameters take values convertible to them)");
  static constexpr bool ok = true;
};

template <class Dst, class T>
CUDA_MEMSET_NODE_PARAMS memset_params_of(Dst& dst, const T& value) {
  CUDA_MEMSET_NODE_PARAMS p{};
  p.dst = static_cast<CUdeviceptr>(detail::endpoint_address(dst));
  p.value = detail::memset_bits(value);
  p.elementSize = sizeof(T);
  p.width = detail::endpoint_count(dst) * sizeof(detail::EndpointElem<Dst>) / sizeof(T);
  p.height = 1;
  if (p.width == 0) throw UsageError("memset: the destination is empty or its element count is unknown");
  return p;
}

template <class Dst, class Src>
CUDA_MEMCPY3D memcpy_params_of(Dst& dst, Src& src, std::size_t count) {
  std::size_t bytes = (count ? count : detail::endpoint_count(src)) * sizeof(detail::EndpointElem<Src>);
  if (bytes == 0) throw UsageError("memcpy: nothing to copy (the source's element count is unknown; pass a count)");
  std::size_t cap = detail::endpoint_count(dst) * sizeof(detail::EndpointElem<Dst>);
  if (cap && cap < bytes) throw UsageError("memcpy: the destination is smaller than what is copied");
  CUDA_MEMCPY3D c{};
  c.srcMemoryType = detail::endpoint_type<Src&>();
  c.dstMemoryType = detail::endpoint_type<Dst&>();
  std::uintptr_t sa = detail::endpoint_address(src), da = detail::endpoint_address(dst);
  if (c.srcMemoryType == CU_MEMORYTYPE_HOST)
    c.srcHost = reinterpret_cast<const void*>(sa);
  else
    c.srcDevice = static_cast<CUdeviceptr>(sa);
  if (c.dstMemoryType == CU_MEMORYTYPE_HOST)
    c.dstHost = reinterpret_cast<void*>(da);
  else
    c.dstDevice = static_cast<CUdeviceptr>(da);
  c.WidthInBytes = bytes;
  c.Height = 1;
  c.Depth = 1;
  return c;
}

template <class K, class T>
auto make_kernel_params(const K& k, Grid g, Block b, T& ptrs) {
  CUDA_KERNEL_NODE_PARAMS p{};
  p.func = k.function();
  p.gridDimX = g.x;
  p.gridDimY = g.y;
  p.gridDimZ = g.z;
  p.blockDimX = b.x;
  p.blockDimY = b.y;
  p.blockDimZ = b.z;
  p.kernelParams = ptrs.empty() ? nullptr : ptrs.data();
  p.ctx = k.context_handle();
  return p;
}

}  // namespace tether::detail

TETHER_EXPORT namespace tether {

/// The node creators shared by edits and insertion points (CRTP). Each creates one node in the
/// current transaction after the site's dependencies, retains the owners of its version, and
/// returns a typed handle valid at once (as a dependency) and published at commit. Each throws
/// UsageError for invalid handles or views (before any driver call) and DriverError when the
/// driver refuses (that operation leaves nothing behind). Thread safety: an edit belongs to the
/// thread that opened it.
template <class Derived, bool InBody>
class Builder {
 public:
  /// A kernel node (cuGraphAddKernelNode) launching `k` with `args`, checked at compile time
  /// against `k`'s parameter list. Keeps `k` (so its module), and every buffer argument, alive.
  template <class... P, class... A>
  Node<KernelNode<P...>> launch(const Kernel<P...>& k, Grid grid, Block block, A&&... args) {
    static_assert(detail::KernelArgsCheck<std::tuple<P...>, A&&...>::ok);
    detail::Site s = site();
    std::tuple<P...> values{detail::kernel_value<P>(args)...};
    std::array<void*, sizeof...(P)> ptrs = std::apply([](auto&... v) { return std::array<void*, sizeof...(P)>{&v...}; }, values);
    detail::KernelCall call;
    call.params = detail::make_kernel_params(k, grid, block, ptrs);
    Owners owners = std::apply([&](auto&&... o) { return Owners{k, std::move(o)...}; },
                               std::tuple_cat(detail::kernel_owner<P>(std::forward<A>(args))...));
    owners += take_keeping(s);
    detail::NodeRecord* r =
        detail::add_kernel(*s.tx, *s.box, s.deps, call, std::move(owners), "a kernel node");
    static_cast<Derived&>(*this).created();
    return detail::NodeAccess::make<KernelNode<P...>>(detail::NodeRef{s.tx->shared(), r, r->generation.load()},
                                                      detail::NodeExtra<KernelNode<P...>>{k});
  }

  /// A host node (cuGraphAddHostNode) running `fn()` on every launch. `fn` may be move-only; it is
  /// kept (with its captured state) as long as any consumer of this version may run it. It runs on
  /// a driver thread where CUDA calls are not allowed; exceptions it throws are reported through
  /// the error hook.
  template <class F>
  Node<HostNode> host(F&& fn) {
    static_assert(std::is_invocable_v<std::remove_cvref_t<F>&>, "host: the callable must be invocable with no arguments");
    static_assert(std::is_move_constructible_v<std::remove_cvref_t<F>>, "host: the callable must be movable");
    detail::Site s = site();
    Owners owners;
    auto& stored = owners.adopt(std::forward<F>(fn));
    owners += take_keeping(s);
    detail::NodeRecord* r = detail::add_host(*s.tx, *s.box, s.deps, &detail::host_trampoline<std::remove_cvref_t<F>>,
                                             static_cast<void*>(&stored), std::move(owners));
    return made<HostNode>(s, r);
  }

  /// A memset node (cuGraphAddMemsetNode) setting every element of `dst` to `value`. `dst` is a
  /// SharedBuffer<T> or DeviceBuffer<T>&& (kept alive) or tether::unowned(p, count).
  template <class Dst, class T>
  Node<MemsetNode> memset(Dst&& dst, const T& value) {
    static_assert(detail::Endpoint<Dst&&>::ok && !detail::Endpoint<Dst&&>::pinned,
                  "memset: the destination is a SharedBuffer<T>, a DeviceBuffer<T>&& or tether::unowned(p, count)");
    detail::Site s = site();
    CUDA_MEMSET_NODE_PARAMS p = memset_params(dst, value);
    Owners owners = std::apply([](auto&&... o) { return Owners(std::move(o)...); },
                               detail::endpoint_owner(std::forward<Dst>(dst)));
    owners += take_keeping(s);
    detail::NodeRecord* r = detail::add_memset(*s.tx, *s.box, s.deps, p, detail::context_handle(*s.ctx), std::move(owners));
    return made<MemsetNode>(s, r);
  }

  /// A memcpy node (cuGraphAddMemcpyNode) copying `count` elements (default: all of `src`) from
  /// `src` to `dst`. Each end is a device buffer, a pinned host buffer (shared, or moved in: kept
  /// alive) or tether::unowned(p, count). Throws UsageError if `dst` is too small.
  template <class Dst, class Src>
  Node<MemcpyNode> memcpy(Dst&& dst, Src&& src, std::size_t count = 0) {
    static_assert(detail::Endpoint<Dst&&>::ok && detail::Endpoint<Src&&>::ok,
                  "memcpy: each end is a SharedBuffer/DeviceBuffer&&, a SharedPinnedBuffer/PinnedBuffer&& or "
                  "tether::unowned(p, count)");
    detail::Site s = site();
    CUDA_MEMCPY3D c = memcpy_params(dst, src, count);
    Owners owners = std::apply([](auto&&... o) { return Owners(std::move(o)...); },
                               std::tuple_cat(detail::endpoint_owner(std::forward<Dst>(dst)),
                                              detail::endpoint_owner(std::forward<Src>(src))));
    owners += take_keeping(s);
    detail::NodeRecord* r = detail::add_memcpy(*s.tx, *s.box, s.deps, c, detail::context_handle(*s.ctx), std::move(owners));
    return made<MemcpyNode>(s, r);
  }

  /// An event record node (cuGraphAddEventRecordNode); keeps `event` alive.
  Node<EventRecordNode> record(const Event& event) { return event_node<EventRecordNode>(event, true); }
  /// An event wait node (cuGraphAddEventWaitNode); keeps `event` alive.
  Node<EventWaitNode> wait(const Event& event) { return event_node<EventWaitNode>(event, false); }

  /// An empty node (cuGraphAddEmptyNode), e.g. to join dependencies.
  Node<EmptyNode> empty() {
    detail::Site s = site();
    detail::NodeRecord* r = detail::add_empty(*s.tx, *s.box, s.deps, take_keeping(s));
    return made<EmptyNode>(s, r);
  }

  /// A child graph node (cuGraphAddChildGraphNode) embedding a copy of `graph`; the copy carries
  /// `graph`'s owners (CUDA copies their references) and imports its metadata, so it can release
  /// its own versions later. Embedding a graph into itself or into its own hierarchy is rejected
  /// with UsageError before any driver call (the driver crashes).
  EmbedResult embed(const Graph& graph);

  /// A conditional handle for if_/if_else/while_/switch_ nodes of this graph
  /// (cuGraphConditionalHandleCreate). With `reset_each_launch`, the value is set to
  /// `default_value` at the start of every launch (CU_GRAPH_COND_ASSIGN_DEFAULT).
  Condition condition(unsigned default_value = 0, bool reset_each_launch = true) {
    detail::Site s = site();
    Condition c;
    c.handle_ = detail::make_conditional_handle(*s.tx, *s.box, detail::context_handle(*s.ctx), default_value,
                                                reset_each_launch);
    c.box_ = s.box;
    return c;
  }

  /// An if node: its body runs when the condition is non-zero (cuGraphAddNode, CONDITIONAL).
  IfResult if_(const Condition& c) {
    auto [n, b] = conditional(c, CU_GRAPH_COND_TYPE_IF, 1);
    return {n, b[0]};
  }
  /// An if/else node: `then_` runs when the condition is non-zero, `else_` otherwise.
  IfElseResult if_else(const Condition& c) {
    auto [n, b] = conditional(c, CU_GRAPH_COND_TYPE_IF, 2);
    return {n, b[0], b[1]};
  }
  /// A while node: its body runs as long as the condition is non-zero.
  WhileResult while_(const Condition& c) {
    auto [n, b] = conditional(c, CU_GRAPH_COND_TYPE_WHILE, 1);
    return {n, b[0]};
  }
  /// A switch node with `cases` bodies: body i runs when the condition equals i.
  SwitchResult switch_(const Condition& c, unsigned cases) {
    if (cases == 0) throw UsageError("switch_: a switch node needs at least one case");
    auto [n, b] = conditional(c, CU_GRAPH_COND_TYPE_SWITCH, cases);
    return {n, std::move(b)};
  }

  /// A memory allocation node (cuGraphAddMemAllocNode) for `count` elements of T on the graph's
  /// device; the memory is valid from this node to the matching free node. Not available in
  /// conditional bodies.
  template <class T>
  AllocResult<T> alloc(std::size_t count) {
    if constexpr (InBody) {
      static_assert(detail::dependent_false<T>,
                    "alloc: memory allocation nodes cannot be added to a conditional body (CUDA forbids them there)");
      return {};
    } else {
      detail::Site s = site();
      detail::check_not_body(*s.box, "alloc");
      if (count == 0) throw UsageError("alloc: allocating 0 elements");
      CUDA_MEM_ALLOC_NODE_PARAMS p{};
      p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
      p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      p.poolProps.location.id = s.ctx->device();
      p.bytesize = count * sizeof(T);
      detail::NodeRecord* r = detail::add_mem_alloc(*s.tx, *s.box, s.deps, p, take_keeping(s));
      return {made<MemAllocNode>(s, r), Unowned<T>{reinterpret_cast<T*>(static_cast<std::uintptr_t>(p.dptr)), count}};
    }
  }

  /// A memory free node (cuGraphAddMemFreeNode) for memory from alloc(). Not available in
  /// conditional bodies.
  template <class T>
  Node<MemFreeNode> free(const Unowned<T>& memory) {
    if constexpr (InBody) {
      static_assert(detail::dependent_false<T>,
                    "free: memory free nodes cannot be added to a conditional body (CUDA forbids them there)");
      return {};
    } else {
      detail::Site s = site();
      detail::check_not_body(*s.box, "free");
      detail::NodeRecord* r = detail::add_mem_free(
          *s.tx, *s.box, s.deps, static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(memory.ptr)), take_keeping(s));
      return made<MemFreeNode>(s, r);
    }
  }

 protected:
  detail::Site site() { return static_cast<Derived&>(*this).site(); }
  static Owners take_keeping(detail::Site& s) { return s.keeping ? std::move(*s.keeping) : Owners{}; }
  template <class K>
  Node<K> made(const detail::Site& s, detail::NodeRecord* r) {
    static_cast<Derived&>(*this).created();
    return detail::NodeAccess::make<K>(detail::NodeRef{s.tx->shared(), r, r->generation.load()});
  }

  template <class Dst, class T>
  static CUDA_MEMSET_NODE_PARAMS memset_params(Dst& dst, const T& value) {
    return detail::memset_params_of(dst, value);
  }
  template <class Dst, class Src>
  static CUDA_MEMCPY3D memcpy_params(Dst& dst, Src& src, std::size_t count) {
    return detail::memcpy_params_of(dst, src, count);
  }

  template <class K>
  Node<K> event_node(const Event& event, bool rec) {
    detail::Site s = site();
    Owners owners{event};
    owners += take_keeping(s);
    detail::NodeRecord* r = detail::add_event(*s.tx, *s.box, s.deps, event.get(), rec, std::move(owners));
    return made<K>(s, r);
  }

  std::pair<Node<ConditionalNode>, std::vector<BodyRef>> conditional(const Condition& c, CUgraphConditionalNodeType type,
                                                                      unsigned size) {
    detail::Site s = site();
    if (!c.box_ || c.box_ != s.box)
      throw UsageError("a conditional node must be added to the graph whose edit made its Condition");
    std::vector<detail::Box*> bodies;
    detail::NodeRecord* r = detail::add_conditional(*s.tx, *s.box, s.deps, c.handle_, type, size,
                                                    detail::context_handle(*s.ctx), take_keeping(s), &bodies);
    std::vector<BodyRef> refs;
    for (detail::Box* b : bodies) refs.push_back(detail::GraphAccess::body_ref({s.tx->shared(), b}, *s.ctx));
    return {made<ConditionalNode>(s, r), std::move(refs)};
  }
};

/// An insertion point inside an edit (`e.after(a, b)`, `e.in(view)`): the next node created through
/// it depends on the given nodes and keeps the extra owners given with `keeping`. Use it right away.
template <bool InBody>
class BasicInserter : public Builder<BasicInserter<InBody>, InBody> {
 public:
  /// Extra owners kept with the next node created here (as part of its version).
  BasicInserter&& keeping(Owners&& owners) && {
    keeping_ += std::move(owners);
    return std::move(*this);
  }

 private:
  template <class, bool>
  friend class Builder;
  template <bool>
  friend class BasicEdit;
  BasicInserter(detail::Transaction* tx, detail::Box* box, const Context* ctx) : tx_(tx), box_(box), ctx_(ctx) {}
  void add_dep(detail::NodeRecord* r) {
    // Most insertion points name a few nodes: no allocation for up to four.
    if (count_ < inline_.size())
      inline_[count_] = r;
    else {
      if (more_.empty()) more_.assign(inline_.begin(), inline_.end());
      more_.push_back(r);
    }
    ++count_;
  }
  std::span<detail::NodeRecord* const> deps() const noexcept {
    return more_.empty() ? std::span<detail::NodeRecord* const>(inline_.data(), count_)
                         : std::span<detail::NodeRecord* const>(more_);
  }
  detail::Site site() {
    if (!tx_->active()) detail::throw_finished_edit();
    return {tx_, box_, deps(), &keeping_, ctx_};
  }
  void created() noexcept {}

  detail::Transaction* tx_;
  detail::Box* box_;
  std::array<detail::NodeRecord*, 4> inline_{};
  std::size_t count_ = 0;
  std::vector<detail::NodeRecord*> more_;
  Owners keeping_;
  const Context* ctx_;  // the edit's: an insertion point is used while its edit is open
};

/// A transaction over one graph (and its embedded graphs and bodies): `g.edit()` opens it and
/// locks the graph's hierarchy (edits of other graphs are independent; edits of the same
/// hierarchy wait for each other). All changes become visible together at `commit()`: node
/// handles, the metadata, and the release of superseded versions. Dropped without `commit()`,
/// every driver change of the edit is undone in reverse order (added nodes and edges removed,
/// replaced parameters restored), so the graph, its metadata and every owner are as before.
/// Removals are applied at commit. See docs/dsl.md for what happens when the driver fails.
///
/// Not copyable or movable; it belongs to the thread that opened it.
template <bool InBody>
class BasicEdit : public Builder<BasicEdit<InBody>, InBody> {
 public:
  ~BasicEdit() = default;  // the transaction rolls back if not committed
  BasicEdit(const BasicEdit&) = delete;
  BasicEdit& operator=(const BasicEdit&) = delete;

  /// An insertion point after `nodes` (all of one graph: this one, or an embedded graph or body
  /// of it). Throws UsageError for invalid handles or nodes of another hierarchy.
  template <class... K>
  BasicInserter<InBody> after(const Node<K>&... nodes) {
    BasicInserter<InBody> at(tx(), box_, &ctx_);
    (at.add_dep(check(nodes, "a dependency")), ...);
    if (at.count_) at.box_ = at.deps().front()->box;
    return at;
  }
  /// An insertion point at the top of an embedded graph of this hierarchy, in this transaction.
  BasicInserter<false> in(const GraphRef& view) {
    return BasicInserter<false>(tx(), detail::box_of(*tx(), detail::GraphAccess::ref(view), "in"), &ctx_);
  }
  /// An insertion point at the top of a conditional body of this hierarchy, in this transaction.
  BasicInserter<true> in(const BodyRef& view) {
    return BasicInserter<true>(tx(), detail::box_of(*tx(), detail::GraphAccess::ref(view), "in"), &ctx_);
  }

  /// Changes a kernel node's arguments and launch dimensions (cuGraphKernelNodeSetParams); the
  /// same compile-time checks as launch(). The new arguments' owners become the node's version at
  /// commit; the previous version is released after that (executables keep theirs).
  template <class... P, class... A>
  void update(const Node<KernelNode<P...>>& node, Grid grid, Block block, A&&... args);
  /// Changes a memset node's destination and value (cuGraphMemsetNodeSetParams).
  template <class Dst, class T>
  void update(const Node<MemsetNode>& node, Dst&& dst, const T& value);
  /// Changes a memcpy node's ends (cuGraphMemcpyNodeSetParams).
  template <class Dst, class Src>
  void update(const Node<MemcpyNode>& node, Dst&& dst, Src&& src, std::size_t count = 0);
  /// Replaces a host node's callable (cuGraphHostNodeSetParams).
  template <class F>
  void update(const Node<HostNode>& node, F&& fn);
  /// Changes the event of an event record node (cuGraphEventRecordNodeSetEvent).
  void update(const Node<EventRecordNode>& node, const Event& event);
  /// Changes the event of an event wait node (cuGraphEventWaitNodeSetEvent).
  void update(const Node<EventWaitNode>& node, const Event& event);
  /// Any other combination does not compile: update takes the parameters of the node's own kind.
  template <class K, class... A>
  void update(const Node<K>&, const A&...) {
    static_assert(detail::dependent_false<K>,
                  "update: the parameters do not match the node's kind (kernel: grid, block, arguments; memset: "
                  "destination, value; memcpy: destination, source; host: callable; event record/wait: event)");
  }

  /// Replaces a child graph node by one embedding a copy of `graph`, with the same dependencies and
  /// dependents (the driver cannot swap a definition's child graph in place): a new node is
  /// embedded after the old node's dependencies and connected to its dependents, and the old node
  /// is removed at commit. Views of the old embedded graph and its nodes become invalid at commit;
  /// the returned node and view are the new ones. Rolled back like every other operation.
  EmbedResult replace(const Node<ChildNode>& node, const Graph& graph) {
    detail::NodeRecord* old = check(node, "the child graph node to replace");
    std::vector<detail::NodeRecord*> deps = detail::neighbours(*tx(), old, true);
    std::vector<detail::NodeRecord*> dependents = detail::neighbours(*tx(), old, false);
    BasicInserter<InBody> at(tx(), old->box, &ctx_);
    for (detail::NodeRecord* d : deps) at.add_dep(d);
    EmbedResult made = at.embed(graph);
    detail::NodeRecord* fresh = detail::NodeAccess::ref(made.node).record;
    for (detail::NodeRecord* d : dependents) tx()->connect(fresh, d);
    tx()->remove(old);
    return made;
  }

  /// Removes `node` at commit (cuGraphDestroyNode). Removing it twice in one edit is harmless;
  /// a removed or invalid handle throws UsageError (the driver is never asked twice).
  template <class K>
  void remove(const Node<K>& node) {
    tx()->remove(check(node, "the node to remove"));
  }
  /// Adds the edge from -> to (cuGraphAddDependencies), undone on rollback.
  template <class A, class B>
  void connect(const Node<A>& from, const Node<B>& to) {
    tx()->connect(check(from, "the edge's source"), check(to, "the edge's target"));
  }
  /// Removes the edge from -> to (cuGraphRemoveDependencies), undone on rollback.
  template <class A, class B>
  void disconnect(const Node<A>& from, const Node<B>& to) {
    tx()->disconnect(check(from, "the edge's source"), check(to, "the edge's target"));
  }

  /// Publishes every change of the edit. Throws UsageError if the edit already ended.
  void commit() {
    if (!tx_->active()) detail::throw_finished_edit();
    tx_->commit();
  }
  /// Undoes every change now (what dropping the edit does).
  void rollback() noexcept { tx_->rollback(); }

 private:
  template <class, bool>
  friend class Builder;
  template <bool>
  friend class BasicInserter;
  friend class Graph;
  template <bool>
  friend class BasicGraphRef;
  BasicEdit(std::shared_ptr<detail::Hierarchy> h, detail::Box* box, const Context& ctx)
      : tx_(std::make_unique<detail::Transaction>(std::move(h))), box_(box), ctx_(ctx), scope_(*tx_->hierarchy().drv, detail::context_handle(ctx)) {
    if (box_->retired.load()) throw UsageError("edit: the graph view is invalid (CUDA destroyed the graph)");
  }
  detail::Transaction* tx() {
    if (!tx_->active()) detail::throw_finished_edit();
    return tx_.get();
  }
  detail::Site site() { return {tx(), box_, detail::no_deps(), nullptr, &ctx_}; }
  void created() noexcept {}
  template <class K>
  detail::NodeRecord* check(const Node<K>& n, const char* what) {
    const detail::NodeRef& r = detail::NodeAccess::ref(n);
    tx()->check_node(r.record, r.generation, what);
    return r.record;
  }

  std::unique_ptr<detail::Transaction> tx_;
  detail::Box* box_;
  Context ctx_;
  detail::ScopedContext scope_;  // the graph's context is current while the edit is open
};

/// A CUDA graph definition whose nodes own their resources (a root `CUgraph`, cuGraphCreate).
/// Move-only; `clone()` makes an independent copy. Destroying it (the last of it and of every
/// handle and view into it) destroys the graph (cuGraphDestroy); owners are released when the
/// last consumer — clone, executable, in-flight launch — is gone. Thread safety: edits of one
/// graph serialise on its lock; distinct graphs are independent.
class Graph {
 public:
  /// An empty graph in `ctx` (cuGraphCreate). Throws DriverError.
  explicit Graph(const Context& ctx);
  Graph(Graph&&) noexcept = default;
  Graph& operator=(Graph&&) noexcept = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  /// Opens a transaction (see BasicEdit). Throws UsageError if this thread already has an edit of
  /// this graph open, or if an earlier rollback failed and left the graph unusable.
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
  /// with the executable's owner accumulator retained on this graph for the call). Defined in
  /// src/exec/. Throws DriverError, or UsageError if this thread has an edit of the graph open.
  GraphExec instantiate(const InstantiateOptions& options) const;
  GraphExec instantiate() const;

  /// A view of this graph (shares ownership).
  GraphRef ref() const;
  /// Number of nodes (committed, top level).
  std::size_t node_count() const;
  /// The driver's graph handle.
  CUgraph get() const noexcept;
  /// The context the graph was made in.
  const Context& context() const noexcept { return ctx_; }

 private:
  friend struct detail::GraphAccess;
  template <class, bool>
  friend class Builder;
  Graph(Context ctx, std::shared_ptr<detail::Hierarchy> h) : ctx_(std::move(ctx)), h_(std::move(h)) {}
  detail::NodeRef find_ref(const detail::NodeRef& source) const;

  Context ctx_;
  std::shared_ptr<detail::Hierarchy> h_;
  struct Origin;
  std::shared_ptr<const Origin> origin_;
};

// ---------------------------------------------------------------------------- definitions

}  // namespace tether

inline const std::shared_ptr<tether::detail::Hierarchy>& tether::detail::GraphAccess::hierarchy(
    const Graph& g) noexcept {
  return g.h_;
}

TETHER_EXPORT namespace tether {

template <class F>
void Graph::edit(F&& fn) const {
  Edit e = edit();
  std::forward<F>(fn)(e);
  e.commit();
}
template <bool InBody>
template <class F>
void BasicGraphRef<InBody>::edit(F&& fn) const {
  BasicEdit<InBody> e = edit();
  std::forward<F>(fn)(e);
  e.commit();
}

template <class Derived, bool InBody>
EmbedResult Builder<Derived, InBody>::embed(const Graph& graph) {
  detail::Site s = site();
  detail::Box* made_box = nullptr;
  detail::NodeRecord* r = detail::embed(*s.tx, *s.box, s.deps, *graph.h_, take_keeping(s), &made_box);
  return {made<ChildNode>(s, r), detail::GraphAccess::graph_ref({s.tx->shared(), made_box}, *s.ctx)};
}

template <bool InBody>
template <class... P, class... A>
void BasicEdit<InBody>::update(const Node<KernelNode<P...>>& node, Grid grid, Block block, A&&... args) {
  static_assert(detail::KernelArgsCheck<std::tuple<P...>, A&&...>::ok);
  detail::NodeRecord* rec = check(node, "the kernel node to update");
  // The kernel itself is not in the node handle: it is the function the node already runs.
  constexpr std::array<std::size_t, sizeof...(P)> sizes{sizeof(P)...};
  detail::KernelCall previous = detail::read_kernel(*tx()->hierarchy().drv, rec->node, sizes);
  std::tuple<P...> values{detail::kernel_value<P>(args)...};
  std::array<void*, sizeof...(P)> ptrs = std::apply([](auto&... v) { return std::array<void*, sizeof...(P)>{&v...}; }, values);
  detail::KernelCall next;
  next.params = previous.params;
  next.params.gridDimX = grid.x;
  next.params.gridDimY = grid.y;
  next.params.gridDimZ = grid.z;
  next.params.blockDimX = block.x;
  next.params.blockDimY = block.y;
  next.params.blockDimZ = block.z;
  next.params.kernelParams = ptrs.empty() ? nullptr : ptrs.data();
  // Each version stands alone: it keeps the kernel (so its module) as well as its arguments,
  // because the previous version is released at commit.
  const auto& kernel = detail::NodeAccess::extra(node).kernel;
  if (!kernel) throw UsageError("update: this kernel node handle does not carry its kernel");
  Owners owners = std::apply([&](auto&&... o) { return Owners{*kernel, std::move(o)...}; },
                             std::tuple_cat(detail::kernel_owner<P>(std::forward<A>(args))...));
  detail::update_kernel(*tx(), rec, next, previous, std::move(owners), "a kernel node");
}

template <bool InBody>
template <class Dst, class T>
void BasicEdit<InBody>::update(const Node<MemsetNode>& node, Dst&& dst, const T& value) {
  static_assert(detail::Endpoint<Dst&&>::ok && !detail::Endpoint<Dst&&>::pinned,
                "update(memset): the destination is a SharedBuffer<T>, a DeviceBuffer<T>&& or tether::unowned(p, count)");
  detail::NodeRecord* rec = check(node, "the memset node to update");
  CUDA_MEMSET_NODE_PARAMS p = this->memset_params(dst, value);
  Owners owners = std::apply([](auto&&... o) { return Owners(std::move(o)...); },
                             detail::endpoint_owner(std::forward<Dst>(dst)));
  detail::update_memset(*tx(), rec, p, std::move(owners));
}

template <bool InBody>
template <class Dst, class Src>
void BasicEdit<InBody>::update(const Node<MemcpyNode>& node, Dst&& dst, Src&& src, std::size_t count) {
  static_assert(detail::Endpoint<Dst&&>::ok && detail::Endpoint<Src&&>::ok,
                "update(memcpy): each end is a shared or moved-in buffer, or tether::unowned(p, count)");
  detail::NodeRecord* rec = check(node, "the memcpy node to update");
  CUDA_MEMCPY3D c = this->memcpy_params(dst, src, count);
  Owners owners = std::apply([](auto&&... o) { return Owners(std::move(o)...); },
                             std::tuple_cat(detail::endpoint_owner(std::forward<Dst>(dst)),
                                            detail::endpoint_owner(std::forward<Src>(src))));
  detail::update_memcpy(*tx(), rec, c, std::move(owners));
}

template <bool InBody>
template <class F>
void BasicEdit<InBody>::update(const Node<HostNode>& node, F&& fn) {
  static_assert(std::is_invocable_v<std::remove_cvref_t<F>&>, "update(host): the callable must be invocable with no arguments");
  detail::NodeRecord* rec = check(node, "the host node to update");
  Owners owners;
  auto& stored = owners.adopt(std::forward<F>(fn));
  detail::update_host(*tx(), rec, &detail::host_trampoline<std::remove_cvref_t<F>>, static_cast<void*>(&stored),
                      std::move(owners));
}

template <bool InBody>
void BasicEdit<InBody>::update(const Node<EventRecordNode>& node, const Event& event) {
  detail::update_event(*tx(), check(node, "the event record node to update"), event.get(), Owners{event});
}
template <bool InBody>
void BasicEdit<InBody>::update(const Node<EventWaitNode>& node, const Event& event) {
  detail::update_event(*tx(), check(node, "the event wait node to update"), event.get(), Owners{event});
}

}  // namespace tether
