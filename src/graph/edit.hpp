// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Edits (docs/dsl.md): the node creators shared by edits and insertion points, insertion points,
// and the Edit transaction with its updates. Every creator and every update builds the node
// kind's descriptor (kinds/) and hands its parameters and owners to the transaction.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "capture_mode.hpp"
#include "graph.hpp"
#include "kinds/child.hpp"
#include "kinds/conditional.hpp"
#include "kinds/empty.hpp"
#include "kinds/event.hpp"
#include "kinds/host.hpp"
#include "kinds/kernel.hpp"
#include "kinds/memcpy.hpp"
#include "kinds/memory.hpp"
#include "kinds/memset.hpp"
#include "updates.hpp"

namespace tether::detail {

/// Where a creator puts its node: transaction, graph, dependencies, extra owners.
struct Site {
  Transaction* tx;
  Box* box;
  std::span<NodeRecord* const> deps;
  Owners* keeping;
  const Context* ctx;
};

std::span<NodeRecord* const> no_deps() noexcept;
[[noreturn]] void throw_finished_edit();
[[noreturn]] void throw_stale_inserter(std::string_view what);
void check_not_body(const Box& box, const char* what);
CUcontext context_handle(const Context& c) noexcept;
Box* box_of(Transaction& tx, const BoxRef& ref, const char* what);
/// The dependencies (or the dependents) of `r` (cuGraphNodeGetDependencies / GetDependentNodes),
/// as records of its graph.
std::vector<NodeRecord*> neighbours(Transaction& tx, NodeRecord* r, bool dependencies);

/// Embeds a copy of `source`'s root graph (a child graph node, clone mode) and imports its
/// metadata (rekey), so that the copy can later release its own versions. Rejects, before any
/// driver call, embedding a graph into itself or into a graph of its own hierarchy (the real driver
/// crashes or forbids it). Returns the node; `*embedded` receives the new box.
NodeRecord* embed(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, Hierarchy& source, Owners&& owners,
                  Box** embedded);
/// Adds a conditional node; `*bodies` receives the boxes of its bodies.
NodeRecord* add_conditional(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, ConditionalDesc& d,
                            Owners&& owners, std::vector<Box*>* bodies);
CUgraphConditionalHandle make_conditional_handle(Transaction& tx, Box& box, CUcontext ctx, unsigned default_value,
                                                 bool assign_default);

}  // namespace tether::detail

TETHER_EXPORT namespace tether {

/// The node creators shared by edits and insertion points (CRTP). Each creates one node in the
/// current transaction after the site's dependencies (cuGraphAddNode), retains the owners of its
/// version, and returns a typed handle valid at once (as a dependency) and published at commit.
/// Each throws UsageError for invalid handles, views or arguments (before any driver call) and
/// DriverError when the driver refuses (that operation leaves nothing behind). Thread safety: an
/// edit belongs to the thread that opened it.
template <class Derived, bool InBody>
class Builder {
 public:
  /// A node made from `spec` (`e.add(tether::memset(buf, 0.0f))`, `e.after(n).add(...)`,
  /// `e.in(body).add(...)`): created after the site's dependencies (cuGraphAddNode; a kernel's
  /// launch attributes then with cuGraphKernelNodeSetAttribute), its version keeping the spec's
  /// owners (and the site's `keeping`). The spec is consumed, also when the add fails (its owners
  /// are then released on the reclaimer). Throws UsageError for an empty spec, DriverError. The
  /// one door of every creator below; since 0.5.
  template <class K>
  Node<K> add(Spec<K>&& spec) {
    detail::Site s = site("Edit::add");
    return add_spec(s, spec, "Edit::add");
  }
  /// A spec is used once: pass `std::move(spec)`.
  template <class K>
  Node<K> add(Spec<K>&) {
    static_assert(detail::dependent_false<K>, "Edit::add: a spec makes one node version: pass std::move(spec)");
    return {};
  }

  /// A kernel node launching `k` with `launch` (dimensions, dynamic shared memory, attributes)
  /// and `args`, checked at compile time against `k`'s parameter list (count, types, no
  /// narrowing). Keeps `k` (so its module), and every buffer argument, alive. Attributes are set
  /// with cuGraphKernelNodeSetAttribute; dynamic shared memory beyond 48 KiB raises the kernel's
  /// limit (cuFuncSetAttribute, see Launch::shared_memory). `add(tether::kernel(k, launch, args...))`.
  template <class... P, class... A>
  Node<KernelNode<P...>> launch(const Kernel<P...>& k, const Launch& launch, A&&... args) {
    return launch_with(k, launch, std::forward<A>(args)...);
  }
  /// A kernel node whose launch configuration is dynamic parameter `launch`: made with its current
  /// Launch, and bound to it (`set(launch, l)` here or in an executable changes the node's grid,
  /// block and dynamic shared memory). Otherwise as above; UsageError for an empty parameter.
  template <class... P, class... A>
  Node<KernelNode<P...>> launch(const Kernel<P...>& k, const Param<Launch>& launch, A&&... args) {
    return launch_with(k, launch, std::forward<A>(args)...);
  }
  /// Shorthand for `launch(k, Launch{grid, block}, args...)`.
  template <class... P, class... A>
  Node<KernelNode<P...>> launch(const Kernel<P...>& k, Grid grid, Block block, A&&... args) {
    return launch(k, Launch{grid, block}, std::forward<A>(args)...);
  }

  /// A host node running `fn()` on every launch. `fn` may be move-only; it is kept (with its
  /// captured state) as long as any consumer of this version may run it. It runs on a driver
  /// thread where CUDA calls are not allowed; exceptions it throws are reported through the error
  /// hook. `add(tether::host(fn))`.
  template <class F>
  Node<HostNode> host(F&& fn) {
    detail::Site s = site("Edit::host");
    Spec<HostNode> spec(detail::What{"Edit::host"}, std::forward<F>(fn));
    return add_spec(s, spec, "Edit::host");
  }

  /// A memset node setting every element of `dst` to `value`. `dst` is a SharedBuffer<T> or
  /// DeviceBuffer<T>&& (kept alive) or tether::unowned(p, count). `add(tether::memset(dst, value))`.
  template <class Dst, class T>
  Node<MemsetNode> memset(Dst&& dst, const T& value) {
    static_assert(detail::Endpoint<Dst&&>::ok && !detail::Endpoint<Dst&&>::pinned,
                  "memset: the destination is a SharedBuffer<T>, a DeviceBuffer<T>&& or tether::unowned(p, count)");
    detail::Site s = site("Edit::memset");
    Spec<MemsetNode> spec(detail::What{"Edit::memset"}, std::forward<Dst>(dst), value);
    return add_spec(s, spec, "Edit::memset");
  }

  /// A memcpy node copying `count` elements (default: all of `src`) from `src` to `dst`. Each end
  /// is a device buffer, a pinned host buffer (shared, or moved in: kept alive) or
  /// tether::unowned(p, count). Throws UsageError if `dst` is too small.
  /// `add(tether::memcpy(dst, src, count))`.
  template <class Dst, class Src>
  Node<MemcpyNode> memcpy(Dst&& dst, Src&& src, std::size_t count = 0) {
    static_assert(detail::Endpoint<Dst&&>::ok && detail::Endpoint<Src&&>::ok,
                  "memcpy: each end is a SharedBuffer/DeviceBuffer&&, a SharedPinnedBuffer/PinnedBuffer&& or "
                  "tether::unowned(p, count)");
    detail::Site s = site("Edit::memcpy");
    Spec<MemcpyNode> spec(detail::What{"Edit::memcpy"}, std::forward<Dst>(dst), std::forward<Src>(src), count);
    return add_spec(s, spec, "Edit::memcpy");
  }

  /// An event record node; keeps `event` alive. `add(tether::record(event))`.
  Node<EventRecordNode> record(const Event& event) {
    detail::Site s = site("Edit::record");
    Spec<EventRecordNode> spec(detail::What{"Edit::record"}, event);
    return add_spec(s, spec, "Edit::record");
  }
  /// An event wait node; keeps `event` alive. `add(tether::wait(event))`.
  Node<EventWaitNode> wait(const Event& event) {
    detail::Site s = site("Edit::wait");
    Spec<EventWaitNode> spec(detail::What{"Edit::wait"}, event);
    return add_spec(s, spec, "Edit::wait");
  }

  /// An empty node, e.g. to join dependencies. `add(tether::empty())`.
  Node<EmptyNode> empty() {
    detail::Site s = site("Edit::empty");
    Spec<EmptyNode> spec(detail::What{"Edit::empty"});
    return add_spec(s, spec, "Edit::empty");
  }

  /// A child graph node embedding a copy of `graph`; the copy carries `graph`'s owners (CUDA
  /// copies their references) and imports its metadata, so it can release its own versions later.
  /// Embedding a graph into itself or into its own hierarchy is rejected with UsageError before
  /// any driver call (the driver crashes).
  EmbedResult embed(const Graph& graph);

  /// Captures the stream work `fn` issues on `stream` (`fn(Capture&)` or `fn()`; see Capture)
  /// into a new graph and adds it here as a child graph node after the site's dependencies, in
  /// this transaction: it commits with the edit and rolls back with it. The capture goes into a
  /// fresh graph, moved into the node (CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE), never into this
  /// graph itself: a failed capture into an existing graph destroys it (docs/capture.md). The
  /// captured nodes' handles (returned by the stream operations) are valid at once and belong to
  /// the returned child graph. While `fn` runs, this edit's creators and updates throw UsageError.
  /// If `fn` throws or the capture fails, nothing is added and everything captured is released
  /// once. Throws what Capture and Capture::end throw, DriverError from the add (a graph with
  /// conditional nodes cannot be a child graph). `streams` says who may issue onto the capture's
  /// streams meanwhile (CaptureStreams::exclusive: only this capture's tether operations, which
  /// then add their nodes directly; since 0.5).
  template <class F>
  CaptureResult capture(const Stream& stream, F&& fn, CaptureMode mode = CaptureMode::global,
                        CaptureStreams streams = CaptureStreams::shared);

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

  /// An if node: its body runs when the condition is non-zero.
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

  /// A memory allocation node for `count` elements of T on the graph's device; the memory is
  /// valid from this node to the matching free node. Not available in conditional bodies.
  template <class T>
  AllocResult<T> alloc(std::size_t count) {
    if constexpr (InBody) {
      static_assert(detail::dependent_false<T>,
                    "alloc: memory allocation nodes cannot be added to a conditional body (CUDA forbids them there)");
      return {};
    } else {
      detail::Site s = site("Edit::alloc");
      detail::check_not_body(*s.box, "alloc");
      detail::MemAllocDesc d("Edit::alloc", s.ctx->device(), count, sizeof(T));
      detail::NodeRecord* r = add(s, d);
      return {made<MemAllocNode>(s, r), Unowned<T>{reinterpret_cast<T*>(static_cast<std::uintptr_t>(d.address())), count}};
    }
  }

  /// A memory free node for memory from alloc(). Not available in conditional bodies.
  template <class T>
  Node<MemFreeNode> free(const Unowned<T>& memory) {
    if constexpr (InBody) {
      static_assert(detail::dependent_false<T>,
                    "free: memory free nodes cannot be added to a conditional body (CUDA forbids them there)");
      return {};
    } else {
      detail::Site s = site("Edit::free");
      detail::check_not_body(*s.box, "free");
      detail::MemFreeDesc d(static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(memory.ptr)));
      return made<MemFreeNode>(s, add(s, d));
    }
  }

 protected:
  detail::Site site(std::string_view what) { return static_cast<Derived&>(*this).site(what); }
  // Both launch spellings: `config` is a Launch or a Param<Launch>.
  template <class... P, class L, class... A>
  Node<KernelNode<P...>> launch_with(const Kernel<P...>& k, const L& config, A&&... args) {
    static_assert(detail::KernelArgsCheck<std::tuple<P...>, A&&...>::ok);
    detail::Site s = site("Edit::launch");
    Spec<KernelNode<P...>> spec(detail::What{"Edit::launch"}, *detail::KernelAccess::info(k), k, config,
                                std::forward<A>(args)...);
    return add_spec(s, spec, "Edit::launch");
  }
  static Owners take_keeping(detail::Site& s) { return s.keeping ? std::move(*s.keeping) : Owners{}; }
  /// The one add path: the spec's parameters and owners (plus the site's extra owners).
  template <class K>
  static Node<K> add_spec(detail::Site& s, Spec<K>& spec, std::string_view what) {
    using detail::SpecAccess;
    SpecAccess::consume(spec, what);
    const detail::DriverTable& drv = *s.tx->hierarchy().drv;
    SpecAccess::prepare(spec, drv, detail::context_handle(*s.ctx), what);
    auto after = [&](detail::Hierarchy&, detail::NodeRecord* rec) { SpecAccess::after_add(spec, drv, rec->node, what); };
    detail::NodeRecord* r =
        add(s, SpecAccess::params(spec), SpecAccess::owners(spec), Spec<K>::noun,
            SpecAccess::has_after_add(spec) ? detail::Transaction::AfterAdd(after) : detail::Transaction::AfterAdd());
    return detail::NodeAccess::make<K>(detail::NodeRef{s.tx->shared(), r, r->generation.load()}, SpecAccess::extra<K>(spec));
  }
  /// The parameters and owners of a node (plus the site's extra owners) to the transaction.
  static detail::NodeRecord* add(detail::Site& s, CUgraphNodeParams& p, Owners& version, const char* noun,
                                 detail::Transaction::AfterAdd after = {}) {
    Owners owners = std::move(version);
    if (s.keeping) owners += std::move(*s.keeping);
    return s.tx->add(*s.box, s.deps, p, std::move(owners), noun, after);
  }
  template <class D>
  static detail::NodeRecord* add(detail::Site& s, D& d) {
    return add(s, d.params(), d.owners(), D::noun);
  }
  template <class K>
  static Node<K> made(const detail::Site& s, detail::NodeRecord* r) {
    return detail::NodeAccess::make<K>(detail::NodeRef{s.tx->shared(), r, r->generation.load()});
  }

  std::pair<Node<ConditionalNode>, std::vector<BodyRef>> conditional(const Condition& c, CUgraphConditionalNodeType type,
                                                                      unsigned size) {
    detail::Site s = site("a conditional node");
    if (!c.box_) throw UsageError("a conditional node needs a Condition made by Edit::condition(); this Condition is empty");
    const std::shared_ptr<detail::Hierarchy>& h = s.tx->shared();
    const bool same_hierarchy = !c.hierarchy_.owner_before(h) && !h.owner_before(c.hierarchy_);
    if (!same_hierarchy || c.box_ != s.box)
      throw UsageError("a conditional node must be added to the graph whose edit made its Condition");
    detail::ConditionalDesc d(c.handle_, type, size, detail::context_handle(*s.ctx));
    std::vector<detail::Box*> bodies;
    detail::NodeRecord* r = detail::add_conditional(*s.tx, *s.box, s.deps, d, take_keeping(s), &bodies);
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
  /// Extra owners kept with the next node created here, as part of its first version only: an
  /// update makes a version of its own, which keeps only what that update is given.
  BasicInserter keeping(Owners&& owners) && {
    keeping_ += std::move(owners);
    return std::move(*this);
  }
  /// Moves the insertion point; the moved-from one is stale (creating through it throws
  /// UsageError, as after its edit ended).
  BasicInserter(BasicInserter&& o) noexcept
      : tx_(std::exchange(o.tx_, nullptr)), serial_(o.serial_), box_(o.box_), inline_(o.inline_), count_(o.count_),
        more_(std::move(o.more_)), keeping_(std::move(o.keeping_)), ctx_(o.ctx_) {}
  BasicInserter& operator=(BasicInserter&& o) noexcept {
    if (this != &o) {
      tx_ = std::exchange(o.tx_, nullptr);
      serial_ = o.serial_;
      box_ = o.box_;
      inline_ = o.inline_;
      count_ = o.count_;
      more_ = std::move(o.more_);
      keeping_ = std::move(o.keeping_);
      ctx_ = o.ctx_;
    }
    return *this;
  }

 private:
  template <class, bool>
  friend class Builder;
  template <bool>
  friend class BasicEdit;
  BasicInserter(detail::Transaction* tx, detail::Box* box, const Context* ctx)
      : tx_(tx), serial_(tx->serial()), box_(box), ctx_(ctx) {}
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
    if (!tx_ || tx_->serial() != serial_) detail::throw_stale_inserter(what);
    tx_->check_thread(what);
    return {tx_, box_, deps(), &keeping_, ctx_};
  }

  // Why a plain pointer and a serial: edits take their transactions from a pool whose
  // transactions are never freed (Transaction::lease), so the insertion point can always tell
  // that its edit ended (the serial changed) instead of reading freed memory, without the two
  // atomic operations of a shared_ptr copy. Null once moved from.
  detail::Transaction* tx_;
  std::uint64_t serial_;
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
class BasicEdit : public Builder<BasicEdit<InBody>, InBody>, public NodeUpdates<BasicEdit<InBody>> {
 public:
  using NodeUpdates<BasicEdit<InBody>>::update;
  /// Rolls back what was not committed (cuGraphDestroyNode, the previous parameters restored...).
  ~BasicEdit() {
    if (tx_->active()) tx_->rollback();
  }
  BasicEdit(const BasicEdit&) = delete;
  BasicEdit& operator=(const BasicEdit&) = delete;

  /// An insertion point after `nodes` (all of one graph: this one, or an embedded graph or body
  /// of it). Throws UsageError for invalid handles or nodes of another hierarchy.
  template <class... K>
  BasicInserter<InBody> after(const Node<K>&... nodes) {
    detail::Transaction* t = tx("Edit::after");
    BasicInserter<InBody> at(t, box_, &ctx_);
    (at.add_dep(t->check_node(detail::NodeAccess::ref(nodes), "a dependency")), ...);
    if (at.count_) at.box_ = at.deps().front()->box;
    return at;
  }
  /// Sets dynamic parameter `param` to `value` in every kernel node of this graph (and of its
  /// embedded graphs and bodies) whose newest version — staged by this edit, else published —
  /// binds it: one cuGraphKernelNodeSetParams per node, from the argument image tether keeps with
  /// each version, as an update of each node (undone on rollback; the new versions, which keep
  /// what the old ones kept but the parameter's value, and a `Param<SharedBuffer<U>>`'s new
  /// buffer, become current at commit). All or nothing within the edit: if the driver refuses one
  /// node, the sets before it are undone and DriverError names the parameter, the node's position
  /// and its kernel. Executables made before are not changed (use `GraphExec::set`), nor is
  /// `param.value()`. Returns the number of nodes set. Throws UsageError for an empty parameter or
  /// buffer value, a closed edit, inside a host callback. Since 0.6.
  template <class T>
  std::size_t set(const Param<T>& param, const std::type_identity_t<T>& value) {
    detail::Transaction* t = tx("Edit::set");
    const void* address = nullptr;
    return t->set_param(detail::ParamAccess::value(param, value, "Edit::set", address), false);
  }
  /// How many kernel nodes `set(param, v)` would set now. Throws UsageError for an empty
  /// parameter or a closed edit. Since 0.6.
  template <class T>
  std::size_t bound_nodes(const Param<T>& param) {
    detail::Transaction* t = tx("Edit::bound_nodes");
    return t->set_param(detail::ParamValue{detail::ParamAccess::state(param, "Edit::bound_nodes"), nullptr, nullptr, 0, 0}, true);
  }
  /// An insertion point at the top of an embedded graph of this hierarchy, in this transaction.
  BasicInserter<false> in(const GraphRef& view) {
    detail::Transaction* t = tx("Edit::in");
    return BasicInserter<false>(t, detail::box_of(*t, detail::GraphAccess::ref(view), "Edit::in"), &ctx_);
  }
  /// An insertion point at the top of a conditional body of this hierarchy, in this transaction.
  BasicInserter<true> in(const BodyRef& view) {
    detail::Transaction* t = tx("Edit::in");
    return BasicInserter<true>(t, detail::box_of(*t, detail::GraphAccess::ref(view), "Edit::in"), &ctx_);
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
  /// Names `node` (a node of this graph, or of an embedded graph or body of it, committed or
  /// added by this edit): `inspect` (NodeInfo::name) and `to_dot` show the name. An empty name
  /// removes it. Like every change of an edit, the name is visible after commit and undone by a
  /// rollback; clones and embedded copies made afterwards carry it. No driver call. Returns `node`,
  /// for `auto axpy = e.name(e.launch(...), "axpy");`. Throws UsageError for an invalid handle, a
  /// node of another graph, or a name with a control character (newline, tab, ...). Since 0.5.
  template <class K>
  Node<K> name(const Node<K>& node, std::string name) {
    tx("Edit::name")->name(check(node, "Edit::name: the node to name"), std::move(name), "Edit::name");
    return node;
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
  friend class NodeUpdates<BasicEdit<InBody>>;
  static constexpr detail::UpdateNames update_names{"Edit::update", "Edit::update(memset)", "Edit::update(memcpy)"};
  friend class Graph;
  template <bool>
  friend class BasicGraphRef;
  BasicEdit(std::shared_ptr<detail::Hierarchy> h, detail::Box* box, const Context& ctx)
      : tx_(open(std::move(h), box)), box_(box), ctx_(ctx), scope_(*tx_->hierarchy().drv, detail::context_handle(ctx)) {}
  static detail::Transaction* open(std::shared_ptr<detail::Hierarchy> h, detail::Box* box) {
    detail::check_calls_allowed("Graph::edit");
    detail::Transaction* tx = detail::Transaction::lease(std::move(h));
    if (box->retired.load()) [[unlikely]] {
      detail::Transaction::give_back(tx);
      throw UsageError("edit: the graph view is invalid (CUDA destroyed the graph)");
    }
    return tx;
  }
  // The edit's transaction, given back to the pool when the edit goes (also when a later member
  // of the edit fails to construct).
  struct Lease {
    explicit Lease(detail::Transaction* p) noexcept : t(p) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { detail::Transaction::give_back(t); }
    detail::Transaction* t;
    detail::Transaction* operator->() const noexcept { return t; }
    detail::Transaction* get() const noexcept { return t; }
  };
  detail::Transaction* tx(std::string_view what = "Edit") {
    detail::check_calls_allowed(what);
    if (!tx_->active()) detail::throw_finished_edit();
    tx_->check_thread(what);
    return tx_.get();
  }
  detail::Site site(std::string_view what) { return {tx(what), box_, detail::no_deps(), nullptr, &ctx_}; }
  template <class K>
  detail::NodeRecord* check(const Node<K>& n, const char* what) {
    return tx(what)->check_node(detail::NodeAccess::ref(n), what);
  }

  // The one update path (NodeUpdates): once the node is checked, `make()` gives the spec whose
  // owners become the node's next version; the previous parameters are saved for the undo.
  template <class K, class Make>
  void update_made(const Node<K>& node, Make&& make) {
    using detail::SpecAccess;
    detail::Transaction* t = tx("Edit::update");
    detail::NodeRecord* rec = t->check_node(detail::NodeAccess::ref(node), Spec<K>::to_update);
    auto&& spec = make();
    SpecAccess::consume(spec, "Edit::update");
    const detail::DriverTable& drv = *t->hierarchy().drv;
    SpecAccess::prepare(spec, drv, detail::context_handle(ctx_), "Edit::update");
    detail::Undo undo = SpecAccess::save(spec, drv, rec->node, t->arena());
    t->update(rec, std::move(SpecAccess::owners(spec)), [&] {
      SpecAccess::apply(spec, drv, rec->node, undo, "Edit::update", Spec<K>::noun);
    }, undo);
  }

  Lease tx_;
  detail::Box* box_;
  Context ctx_;
  detail::ScopedContext scope_;  // the graph's context is current while the edit is open
};

// ---------------------------------------------------------------------------- definitions

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
  detail::Hierarchy& source = *detail::GraphAccess::live(graph, "Edit::embed");
  detail::Box* made_box = nullptr;
  detail::NodeRecord* r = detail::embed(*s.tx, *s.box, s.deps, source, take_keeping(s), &made_box);
  return {made<ChildNode>(s, r), detail::GraphAccess::graph_ref({s.tx->shared(), made_box}, *s.ctx)};
}

}  // namespace tether
