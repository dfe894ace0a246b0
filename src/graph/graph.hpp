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

/// A view of an embedded child graph (`GraphRef`, from `Edit::embed`) or of a conditional body
/// (`BodyRef`, from if_ / if_else / while_ / switch_). It shares ownership of the whole hierarchy,
/// so it keeps the root graph alive. A default-constructed view is empty (invalid). It becomes
/// invalid when CUDA destroys the graph it shows (its node removed); using an invalid or empty view
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
  /// The hierarchy of `g`; throws UsageError naming `call` if `g` is empty.
  static const std::shared_ptr<Hierarchy>& live(const Graph& g, std::string_view call);
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
[[noreturn]] void throw_empty_argument(std::string_view what, std::size_t index, std::string_view type);
[[noreturn]] void throw_zero_dimension(std::string_view what, const char* which, unsigned x, unsigned y, unsigned z);
[[noreturn]] void throw_empty_endpoint(std::string_view what, const char* end, std::string_view kind);
[[noreturn]] void throw_stale_inserter(std::string_view what);
// Why out of line: header mode under nvcc has no {fmt}, and the messages are built only on failure.
enum class SizeError { memset_unknown, memset_multiple, memcpy_overflow, memcpy_unknown, memcpy_source,
                       memcpy_destination, alloc_overflow };
[[noreturn]] void throw_size_error(std::string_view what, SizeError e, std::size_t a, std::size_t b);
/// Throws UsageError if a grid or block dimension is 0 (the driver would refuse it later).
inline void check_dims(std::string_view what, Grid g, Block b) {
  if (g.x == 0 || g.y == 0 || g.z == 0) throw_zero_dimension(what, "grid", g.x, g.y, g.z);
  if (b.x == 0 || b.y == 0 || b.z == 0) throw_zero_dimension(what, "block", b.x, b.y, b.z);
}
/// Throws UsageError if a buffer argument that would be retained (and passed as a pointer) is empty.
template <class P, class A>
void check_kernel_arg(std::string_view what, std::size_t index, const A& a) {
  if constexpr (KernelArg<P, const A&>::pointer_param &&
                (IsSharedBuffer<Bare<A>>::value || IsDeviceBuffer<Bare<A>>::value)) {
    if (!a) throw_empty_argument(what, index, IsSharedBuffer<Bare<A>>::value ? "SharedBuffer" : "DeviceBuffer");
  }
}
template <class... P, class... A, std::size_t... I>
void check_kernel_args(std::string_view what, std::index_sequence<I...>, const A&... a) {
  (check_kernel_arg<P>(what, I, a), ...);
}
/// The kernel arguments' checks of launch and of both updates: buffers not empty, dims not 0.
template <class... P, class... A>
void check_launch(std::string_view what, Grid g, Block b, const A&... a) {
  check_dims(what, g, b);
  check_kernel_args<P...>(what, std::index_sequence_for<A...>{}, a...);
}
/// Throws UsageError if a memset/memcpy end that tether would retain is empty.
template <class A>
void check_endpoint(std::string_view what, const char* end, const A& a) {
  if constexpr (!IsUnowned<Bare<A>>::value)
    if (!a) throw_empty_endpoint(what, end, endpoint_kind<A>());
}
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
  CallbackScope running;  // the reclaimer starts no blocking release meanwhile
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

/// The bytes an end point is known to span (0: unknown, an `unowned(p)` without a count).
template <class A>
std::size_t endpoint_bytes(A& a) {
  return endpoint_count(a) * sizeof(EndpointElem<A>);
}

template <class Dst, class T>
CUDA_MEMSET_NODE_PARAMS memset_params_of(std::string_view what, Dst& dst, const T& value) {
  check_endpoint(what, "destination", dst);
  const std::size_t bytes = endpoint_bytes(dst);
  if (bytes == 0)
    throw_size_error(what, SizeError::memset_unknown, 0, 0);
  if (bytes % sizeof(T) != 0)
    throw_size_error(what, SizeError::memset_multiple, bytes, sizeof(T));
  CUDA_MEMSET_NODE_PARAMS p{};
  p.dst = static_cast<CUdeviceptr>(detail::endpoint_address(dst));
  p.value = detail::memset_bits(value);
  p.elementSize = sizeof(T);
  p.width = bytes / sizeof(T);
  p.height = 1;
  return p;
}

template <class Dst, class Src>
CUDA_MEMCPY3D memcpy_params_of(std::string_view what, Dst& dst, Src& src, std::size_t count) {
  check_endpoint(what, "destination", dst);
  check_endpoint(what, "source", src);
  constexpr std::size_t elem = sizeof(detail::EndpointElem<Src>);
  const std::size_t have = endpoint_bytes(src), cap = endpoint_bytes(dst);
  if (count > std::numeric_limits<std::size_t>::max() / elem)
    throw_size_error(what, SizeError::memcpy_overflow, count, elem);
  const std::size_t bytes = count ? count * elem : have;
  if (bytes == 0)
    throw_size_error(what, SizeError::memcpy_unknown, 0, 0);
  if (have && have < bytes)
    throw_size_error(what, SizeError::memcpy_source, have, bytes);
  if (cap && cap < bytes)
    throw_size_error(what, SizeError::memcpy_destination, cap, bytes);
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
    detail::Site s = site("Edit::launch");
    detail::check_launch<P...>("Edit::launch", grid, block, args...);
    std::tuple<P...> values{detail::kernel_value<P>(args)...};
    std::array<void*, sizeof...(P)> ptrs = std::apply([](auto&... v) { return std::array<void*, sizeof...(P)>{&v...}; }, values);
    detail::KernelCall call;
    call.params = detail::make_kernel_params(k, grid, block, ptrs);
    Owners owners = std::apply([&](auto&&... o) { return Owners{k, std::move(o)...}; },
                               std::tuple_cat(detail::kernel_owner<P>(std::forward<A>(args))...));
    owners += take_keeping(s);
    detail::NodeRecord* r =
        detail::add_kernel(*s.tx, *s.box, s.deps, call, std::move(owners), "a kernel node");
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
    detail::Site s = site("Edit::host");
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
    detail::Site s = site("Edit::memset");
    CUDA_MEMSET_NODE_PARAMS p = detail::memset_params_of("Edit::memset", dst, value);
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
    detail::Site s = site("Edit::memcpy");
    CUDA_MEMCPY3D c = detail::memcpy_params_of("Edit::memcpy", dst, src, count);
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
    detail::Site s = site("Edit::empty");
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
    detail::Site s = site("Edit::condition");
    Condition c;
    c.handle_ = detail::make_conditional_handle(*s.tx, *s.box, detail::context_handle(*s.ctx), default_value,
                                                reset_each_launch);
    c.hierarchy_ = s.tx->shared();
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
      detail::Site s = site("Edit::alloc");
      detail::check_not_body(*s.box, "alloc");
      if (count == 0) throw UsageError("Edit::alloc: allocating 0 elements: a graph allocation cannot be empty");
      if (count > std::numeric_limits<std::size_t>::max() / sizeof(T))
        detail::throw_size_error("Edit::alloc", detail::SizeError::alloc_overflow, count, sizeof(T));
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
      detail::Site s = site("Edit::free");
      detail::check_not_body(*s.box, "free");
      detail::NodeRecord* r = detail::add_mem_free(
          *s.tx, *s.box, s.deps, static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(memory.ptr)), take_keeping(s));
      return made<MemFreeNode>(s, r);
    }
  }

 protected:
  detail::Site site(std::string_view what) { return static_cast<Derived&>(*this).site(what); }
  static Owners take_keeping(detail::Site& s) { return s.keeping ? std::move(*s.keeping) : Owners{}; }
  template <class K>
  Node<K> made(const detail::Site& s, detail::NodeRecord* r) {
    return detail::NodeAccess::make<K>(detail::NodeRef{s.tx->shared(), r, r->generation.load()});
  }

  template <class K>
  Node<K> event_node(const Event& event, bool rec) {
    detail::Site s = site(rec ? "Edit::record" : "Edit::wait");
    Owners owners{event};
    owners += take_keeping(s);
    detail::NodeRecord* r = detail::add_event(*s.tx, *s.box, s.deps, event.get(), rec, std::move(owners));
    return made<K>(s, r);
  }

  std::pair<Node<ConditionalNode>, std::vector<BodyRef>> conditional(const Condition& c, CUgraphConditionalNodeType type,
                                                                      unsigned size) {
    detail::Site s = site("a conditional node");
    if (!c.box_) throw UsageError("a conditional node needs a Condition made by Edit::condition(); this Condition is empty");
    const std::shared_ptr<detail::Hierarchy>& h = s.tx->shared();
    const bool same_hierarchy = !c.hierarchy_.owner_before(h) && !h.owner_before(c.hierarchy_);
    if (!same_hierarchy || c.box_ != s.box)
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
/// it depends on the given nodes and keeps the extra owners given with `keeping`. Use it while its
/// edit is open: after the edit ended (committed or rolled back), creating a node through it
/// throws UsageError (it never adds to another edit). Move-only; `keeping` returns it by value, so
/// `auto&& at = e.after(n).keeping(o);` holds a real object, not a dangling reference.
template <bool InBody>
class BasicInserter : public Builder<BasicInserter<InBody>, InBody> {
 public:
  /// Extra owners kept with the next node created here (as part of its version).
  BasicInserter keeping(Owners&& owners) && {
    keeping_ += std::move(owners);
    return std::move(*this);
  }

 private:
  template <class, bool>
  friend class Builder;
  template <bool>
  friend class BasicEdit;
  BasicInserter(std::shared_ptr<detail::Transaction> tx, detail::Box* box, const Context* ctx)
      : tx_(std::move(tx)), box_(box), ctx_(ctx) {}
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
  detail::Site site(std::string_view what) {
    detail::check_calls_allowed(what);
    if (!tx_ || !tx_->active())
      detail::throw_stale_inserter(what);
    tx_->check_thread(what);
    return {tx_.get(), box_, deps(), &keeping_, ctx_};
  }

  // Why shared: the insertion point can then tell that its edit ended (the transaction object
  // outlives the edit while an insertion point refers to it) instead of reading freed memory.
  std::shared_ptr<detail::Transaction> tx_;
  detail::Box* box_;
  std::array<detail::NodeRecord*, 4> inline_{};
  std::size_t count_ = 0;
  std::vector<detail::NodeRecord*> more_;
  Owners keeping_;
  const Context* ctx_;  // the edit's; read only while the edit is open (checked in site())
};

/// A transaction over one graph (and its embedded graphs and bodies): `g.edit()` opens it and
/// locks the graph's hierarchy (edits of other graphs are independent; edits of the same
/// hierarchy wait for each other). All changes become visible together at `commit()`: node
/// handles, the metadata, and the release of superseded versions. Dropped without `commit()`,
/// every driver change of the edit is undone in reverse order (added nodes and edges removed,
/// replaced parameters restored), so the graph, its metadata and every owner are as before.
/// Removals are applied at commit. See docs/dsl.md for what happens when the driver fails.
///
/// Not copyable or movable; it belongs to the thread that opened it: using it on another thread
/// throws UsageError. Dropping it on another thread is defined: the rollback runs there.
template <bool InBody>
class BasicEdit : public Builder<BasicEdit<InBody>, InBody> {
 public:
  /// Rolls back what was not committed (cuGraphDestroyNode, the previous parameters restored...).
  ~BasicEdit() {
    if (tx_ && tx_->active()) tx_->rollback();
  }
  BasicEdit(const BasicEdit&) = delete;
  BasicEdit& operator=(const BasicEdit&) = delete;

  /// An insertion point after `nodes` (all of one graph: this one, or an embedded graph or body
  /// of it). Throws UsageError for invalid handles or nodes of another hierarchy.
  template <class... K>
  BasicInserter<InBody> after(const Node<K>&... nodes) {
    tx("Edit::after");
    BasicInserter<InBody> at(tx_, box_, &ctx_);
    (at.add_dep(check(nodes, "a dependency")), ...);
    if (at.count_) at.box_ = at.deps().front()->box;
    return at;
  }
  /// An insertion point at the top of an embedded graph of this hierarchy, in this transaction.
  BasicInserter<false> in(const GraphRef& view) {
    return BasicInserter<false>(tx_, detail::box_of(*tx("Edit::in"), detail::GraphAccess::ref(view), "Edit::in"), &ctx_);
  }
  /// An insertion point at the top of a conditional body of this hierarchy, in this transaction.
  BasicInserter<true> in(const BodyRef& view) {
    return BasicInserter<true>(tx_, detail::box_of(*tx("Edit::in"), detail::GraphAccess::ref(view), "Edit::in"), &ctx_);
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
    detail::GraphAccess::live(graph, "Edit::replace");
    detail::NodeRecord* old = check(node, "the child graph node to replace");
    std::vector<detail::NodeRecord*> deps = detail::neighbours(*tx(), old, true);
    std::vector<detail::NodeRecord*> dependents = detail::neighbours(*tx(), old, false);
    BasicInserter<InBody> at(tx_, old->box, &ctx_);
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

  /// Publishes every change of the edit. Throws UsageError if the edit already ended, or on
  /// another thread than the one that opened it.
  void commit() { tx("Edit::commit")->commit(); }
  /// Undoes every change now (what dropping the edit does); from any thread.
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
      : tx_(open(std::move(h), box)), box_(box), ctx_(ctx), scope_(*tx_->hierarchy().drv, detail::context_handle(ctx)) {}
  static std::shared_ptr<detail::Transaction> open(std::shared_ptr<detail::Hierarchy> h, detail::Box* box) {
    detail::check_calls_allowed("Graph::edit");
    auto tx = std::make_shared<detail::Transaction>(std::move(h));
    if (box->retired.load()) throw UsageError("edit: the graph view is invalid (CUDA destroyed the graph)");
    return tx;
  }
  detail::Transaction* tx(std::string_view what = "Edit") {
    detail::check_calls_allowed(what);
    if (!tx_->active()) detail::throw_finished_edit();
    tx_->check_thread(what);
    return tx_.get();
  }
  detail::Site site(std::string_view what) { return {tx(what), box_, detail::no_deps(), nullptr, &ctx_}; }
  template <class K>
  detail::NodeRecord* check(const Node<K>& n, const char* what) {
    const detail::NodeRef& r = detail::NodeAccess::ref(n);
    tx(what)->check_node(r.record, r.generation, what);
    return r.record;
  }

  std::shared_ptr<detail::Transaction> tx_;
  detail::Box* box_;
  Context ctx_;
  detail::ScopedContext scope_;  // the graph's context is current while the edit is open
};

/// A CUDA graph definition whose nodes own their resources (a root `CUgraph`, cuGraphCreate).
/// Move-only; `clone()` makes an independent copy. Destroying it (the last of it and of every
/// handle and view into it) destroys the graph (cuGraphDestroy); owners are released when the
/// last consumer — clone, executable, in-flight launch — is gone.
///
/// Empty state: a moved-from Graph, or one after `reset()`, is empty (`operator bool` is false).
/// On an empty Graph `edit`, `clone`, `find`, `instantiate`, `ref` and `node_count` throw
/// UsageError ("... this Graph is moved from or empty"), as does passing it to `embed`, `replace`
/// or an executable's `update`; `get()` returns null; `context()` stays valid.
///
/// Host callables: a callable that captures its own graph's node handle, view or executable keeps
/// that graph alive forever (a reference cycle through the graph's owners); `tether::live_graphs()`
/// counts the graphs alive, and TETHER_REPORT_LEAKS=1 reports the ones left at exit.
///
/// Thread safety: edits of one graph serialise on its lock; distinct graphs are independent; a
/// thread that holds an edit and would wait for another graph whose holder waits for this one gets
/// UsageError instead of a deadlock. No member may be called inside a host callback (UsageError).
class Graph {
 public:
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
  /// with the executable's owner accumulator retained on this graph for the call). Defined in
  /// src/exec/. Throws DriverError, or UsageError if this thread has an edit of the graph open.
  GraphExec instantiate(const InstantiateOptions& options) const;
  GraphExec instantiate() const;

  /// A view of this graph (shares ownership). Throws UsageError if empty.
  GraphRef ref() const;
  /// Number of nodes (committed, top level). Throws UsageError if empty.
  std::size_t node_count() const;
  /// The driver's graph handle (null when empty).
  CUgraph get() const noexcept;
  /// The context the graph was made in.
  const Context& context() const noexcept { return ctx_; }

 private:
  friend struct detail::GraphAccess;
  template <class, bool>
  friend class Builder;
  Graph(Context ctx, std::shared_ptr<detail::Hierarchy> h) : ctx_(std::move(ctx)), h_(std::move(h)) {}
  detail::NodeRef find_ref(const detail::NodeRef& source) const;
  /// The hierarchy; throws UsageError naming `call` when empty.
  const std::shared_ptr<detail::Hierarchy>& live(std::string_view call) const {
    if (!h_) [[unlikely]]
      detail::throw_empty(call, "Graph");
    return h_;
  }

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
inline const std::shared_ptr<tether::detail::Hierarchy>& tether::detail::GraphAccess::live(const Graph& g,
                                                                                         std::string_view call) {
  return g.live(call);
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
  detail::Site s = site("Edit::embed");
  detail::Hierarchy& source = *graph.live("Edit::embed");
  detail::Box* made_box = nullptr;
  detail::NodeRecord* r = detail::embed(*s.tx, *s.box, s.deps, source, take_keeping(s), &made_box);
  return {made<ChildNode>(s, r), detail::GraphAccess::graph_ref({s.tx->shared(), made_box}, *s.ctx)};
}

template <bool InBody>
template <class... P, class... A>
void BasicEdit<InBody>::update(const Node<KernelNode<P...>>& node, Grid grid, Block block, A&&... args) {
  static_assert(detail::KernelArgsCheck<std::tuple<P...>, A&&...>::ok);
  detail::NodeRecord* rec = check(node, "the kernel node to update");
  detail::check_launch<P...>("Edit::update", grid, block, args...);
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
  CUDA_MEMSET_NODE_PARAMS p = detail::memset_params_of("Edit::update(memset)", dst, value);
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
  CUDA_MEMCPY3D c = detail::memcpy_params_of("Edit::update(memcpy)", dst, src, count);
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
