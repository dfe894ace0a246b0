// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Stream work with owned operands, and stream capture (docs/capture.md). A stream operation takes
// the same spec as an edit's node creator; `submit` then issues it on the stream by the kind's own
// stream call. Outside
// capture its owners join the stream's burst (released once the stream has passed them). During
// a capture they are staged on the capturing graph before the driver call (a user object retained
// there, as in an edit's prepare), and the node the call created is identified afterwards as the
// stream's capture dependency set, which the driver makes exactly that node for every kind
// (capture facts c1b-c1s): the record then describes it, and its version is that attachment.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "../graph/edit.hpp"

namespace tether::detail {

struct CaptureState;
struct CaptureAccess;

struct StreamAccess {
  static const ContextState& state(const Stream& s, const char* what) { return s.state(what); }
  static StreamBurst* burst(const Stream& s) noexcept { return s.handle_.deleter().burst.get(); }
  static const ContextPtr& owner(const Stream& s) noexcept { return s.handle_.deleter().owner; }
};

/// One stream operation for `submit`: its node's parameters (the kind a captured node must have)
/// and its stream call (`captured`: the stream captures).
struct StreamOp {
  const CUgraphNodeParams* params;
  FunctionRef<CUresult(const DriverTable&, CUstream, bool captured, Entry*)> issue;
  // The node `params` describe is what the stream call makes under capture, with nothing to set
  // after it exists: an exclusive capture adds it to the graph itself (CaptureStreams::exclusive).
  bool direct = false;
};

/// Issues one stream operation on `s`, keeping `owners` as the class comment of Stream says.
/// Returns the captured node's handle, or an empty one outside capture or where the node cannot
/// be identified. Throws UsageError (empty stream, inside a host callback), DriverError naming the
/// entry point; on failure the owners are released on the reclaimer and nothing stays on any
/// graph.
NodeRef submit(const Stream& s, const StreamOp& op, Owners&& owners, const char* what);

/// One stream of a foreign call (below): the stream, the owners the call's work on it uses, and,
/// after the call, the handle of the node it captured there (empty where none was identified).
struct ForeignPart {
  const Stream* stream = nullptr;
  Owners owners;
  NodeRef node;
  bool captured = false;  // set by the call: the stream was capturing
};

/// Issues a library call that queues work of its own choosing on the streams of `parts` (NCCL: a
/// collective, or a group's end, which launches on several streams at once), keeping each part's
/// owners as stream work keeps them: outside capture they join the stream's burst; in a capture
/// they are staged on the capturing graph before the call and attach to the node the call added
/// there — the only node it added, or its only kernel node (NCCL adds an external event wait, its
/// kernel and an event record) — or stay with the graph anonymously. `issue` makes the call and
/// returns whether it succeeded; on failure the owners are kept all the same (the library may
/// have queued work before failing: they go with the stream or the graph as above), and `raise`
/// is called, which must throw. Throws UsageError (an empty stream, one made without memory for
/// owners, inside a host callback), DriverError (a capture invalidated before the call).
void submit_foreign(std::span<ForeignPart> parts, FunctionRef<bool()> issue, FunctionRef<void()> raise, const char* what);

/// The one door of stream work: `spec` (consumed) issued on `s` by its kind's stream call.
template <class K>
Node<K> enqueue_as(const Stream& s, const ContextState& cs, Spec<K>& spec, const char* what) {
  static_assert(!std::is_same_v<K, EmptyNode>,
                "enqueue: stream work has no empty operation (on a stream, order joins work; use an Event to join "
                "streams)");
  SpecAccess::consume(spec, what);
  SpecAccess::prepare(spec, *cs.table, cs.context, what);
  auto issue = [&](const DriverTable& t, CUstream stream, bool captured, Entry* entry) {
    return SpecAccess::enqueue(spec, t, stream, captured, entry);
  };
  // Event nodes are not: a direct-added EVENT_RECORD node does not make its event a capture point
  // (docs/design/driver-facts.md, "Direct add into a capturing graph").
  constexpr bool direct_kind = std::is_same_v<K, MemsetNode> || std::is_same_v<K, MemcpyNode> ||
                               std::is_same_v<K, HostNode> || requires { typename K::kernel_tag; };
  const bool direct = direct_kind && !SpecAccess::has_after_add(spec);
  NodeRef r = submit(s, StreamOp{&SpecAccess::params(spec), issue, direct}, std::move(SpecAccess::owners(spec)), what);
  return NodeAccess::make<K>(std::move(r), SpecAccess::extra<K>(spec));
}

}  // namespace tether::detail

TETHER_EXPORT namespace tether {

/// Issues `spec` on `stream` as stream work, by its kind's stream call chosen at compile time
/// (kernel: cuLaunchKernel / cuLaunchKernelEx; memset: cuMemsetD8/16/32Async; memcpy:
/// cuMemcpy*Async; host: cuLaunchHostFunc; record / wait: cuEventRecordWithFlags /
/// cuStreamWaitEvent with the EXTERNAL flags inside a capture), keeping the spec's owners as the
/// class comment of Stream says. Inside a capture it returns the captured node's handle (empty
/// where the node cannot be identified, see docs/capture.md); outside one an empty handle. The
/// spec is consumed, also on failure (its owners are then released on the reclaimer). Throws
/// UsageError (empty spec or stream, inside a host callback, a host function in a conditional
/// body's capture), DriverError naming the entry point. Thread safety: as Stream's operations.
/// `s.launch(...)`, `s.memset(...)` and friends are one-line spellings of it. Since 0.5.
template <class K>
Node<K> enqueue(const Stream& stream, Spec<K>&& spec) {
  const detail::ContextState& cs = detail::StreamAccess::state(stream, "tether::enqueue");
  return detail::enqueue_as(stream, cs, spec, "tether::enqueue");
}
/// A spec is used once: pass `std::move(spec)`.
template <class K>
Node<K> enqueue(const Stream&, Spec<K>&) {
  static_assert(detail::dependent_false<K>, "enqueue: a spec makes one node version: pass std::move(spec)");
  return {};
}

/// A stream capture in progress (`cuStreamBeginCapture` on construction, `cuStreamEndCapture` in
/// `end`), scoped: dropping a Capture that was not ended ends the capture and discards what it
/// captured, releasing its owners exactly once. Every tether stream operation on a stream of the
/// capture (the origin and the streams `fork` brought in) attaches its owners to the node it
/// captured; work other code issues on those streams (raw driver calls, libraries) is captured
/// as unowned nodes, and `keeping` attaches owners for it to the captured graph. The Stream must
/// outlive the Capture.
///
/// Empty state: default-constructed, moved from, ended or aborted: `operator bool` is false and
/// every member but `abort` throws UsageError. Thread safety: `fork`, `join`, `keeping` and `end`
/// belong to one thread at a time; stream operations of the capture may come from any thread
/// (tether serialises its bookkeeping). Not usable inside a host callback (UsageError).
class Capture {
 public:
  /// An empty capture.
  Capture() noexcept;
  /// Begins capturing `stream` in `mode` (cuStreamBeginCapture), after handing the stream's
  /// pending owners to a marker (which must not be captured). Throws UsageError for an empty
  /// stream, DriverError (CUDA_ERROR_ILLEGAL_STATE if the stream already captures).
  explicit Capture(const Stream& stream, CaptureMode mode = CaptureMode::global);
  /// The same, saying who may issue onto the capture's streams (CaptureStreams::exclusive: only
  /// tether operations of this capture, which then add their nodes to the graph directly).
  /// Since 0.5.
  Capture(const Stream& stream, CaptureMode mode, CaptureStreams streams);
  Capture(Capture&&) noexcept;
  Capture& operator=(Capture&&) noexcept;
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;
  /// Aborts the capture if it was not ended (see `abort`).
  ~Capture();

  /// Whether a capture is in progress.
  explicit operator bool() const noexcept { return s_ != nullptr; }

  /// Brings `other` into the capture: it waits for the origin's work so far (an event recorded on
  /// the origin, cuEventRecord + cuStreamWaitEvent), and what it does next is captured too. Join
  /// it back before `end`. Throws UsageError for an empty stream or one already in a capture,
  /// DriverError.
  void fork(const Stream& other);
  /// The origin waits for `other`'s captured work (the reverse of `fork`). Throws UsageError for
  /// a stream that is not in this capture, DriverError.
  void join(const Stream& other);
  /// Keeps `owners` for as long as the captured graph (and every clone and executable of it) may
  /// run: for work tether did not issue. They are anonymous owners of the graph
  /// (`Graph::anonymous_owners`). Throws DriverError (the owners are then released).
  void keeping(Owners&& owners);

  /// Ends the capture (cuStreamEndCapture) and returns the captured graph: an ordinary tether
  /// Graph whose nodes tether issued carry their owners (their handles, returned by the stream
  /// operations, become valid), while other nodes are unowned. Leaves this object empty whatever
  /// happens. Throws UsageError if a forked stream was not joined (the driver refuses with
  /// CUDA_ERROR_STREAM_CAPTURE_UNJOINED) or if called on another thread than the one that began a
  /// GLOBAL or THREAD_LOCAL capture (STREAM_CAPTURE_WRONG_THREAD); DriverError if the capture was
  /// invalidated (STREAM_CAPTURE_INVALIDATED, naming the cause tether knows of). On every failure
  /// the capture is over and everything it captured is released once.
  Graph end();
  /// Ends the capture and discards its graph (owners released once); nothing if empty.
  void abort() noexcept;

  /// The driver's capture id (unique in the process). Throws UsageError if empty.
  std::uint64_t id() const;

 private:
  friend struct detail::CaptureAccess;
  std::shared_ptr<detail::CaptureState> s_;
};

/// Captures the stream work `fn` issues on `stream` (and on streams it forks) into a new Graph:
/// `fn(Capture&)` or `fn()`, with the capture's streams declared (`streams`; see
/// CaptureStreams). Ends the capture when `fn` returns; aborts it (releasing what it captured)
/// and rethrows if `fn` throws. Throws what Capture and Capture::end throw. Since 0.5.
template <class F>
Graph capture(const Stream& stream, CaptureMode mode, CaptureStreams streams, F&& fn) {
  Capture c(stream, mode, streams);
  if constexpr (std::is_invocable_v<F&, Capture&>)
    fn(c);
  else
    fn();
  return c.end();
}
/// `capture(stream, mode, CaptureStreams::shared, fn)`.
template <class F>
Graph capture(const Stream& stream, CaptureMode mode, F&& fn) {
  return capture(stream, mode, CaptureStreams::shared, std::forward<F>(fn));
}
/// `capture(stream, CaptureMode::global, fn)`.
template <class F>
Graph capture(const Stream& stream, F&& fn) {
  return capture(stream, CaptureMode::global, std::forward<F>(fn));
}

}  // namespace tether

namespace tether::detail {

/// What an edit's capture hands to the transaction: the captured graph and its records.
struct CapturedRegion {
  CUgraph graph = nullptr;
  std::shared_ptr<CaptureState> state;
};

struct CaptureAccess {
  /// Begins a capture whose records are allocated in `h` (an edit's hierarchy).
  /// `into_body`: the region goes into a conditional body (directly or through child graphs),
  /// where CUDA refuses host nodes at instantiation; the capture refuses them at once instead.
  static Capture begin_in(const Stream& stream, CaptureMode mode, CaptureStreams streams, const std::shared_ptr<Hierarchy>& h,
                          bool into_body);
  /// Ends an edit's capture and adds its graph to `box` after `deps` as a child graph node
  /// (ownership moved: no copy), publishing the records into its new box. Returns the node and
  /// sets `*made` to the box. On failure everything captured is released and nothing is added.
  static NodeRecord* end_into(Capture& c, Transaction& tx, Box& box, std::span<NodeRecord* const> deps,
                              Owners&& owners, Box** made);
};

/// Marks an edit as capturing for a scope: its creators and updates throw UsageError meanwhile.
class EditCapturing {
 public:
  explicit EditCapturing(Transaction& tx) : tx_(tx) { tx.set_capturing(true); }
  ~EditCapturing() { tx_.set_capturing(false); }
  EditCapturing(const EditCapturing&) = delete;
  EditCapturing& operator=(const EditCapturing&) = delete;

 private:
  Transaction& tx_;
};

}  // namespace tether::detail

template <class Derived, bool InBody>
template <class F>
tether::CaptureResult tether::Builder<Derived, InBody>::capture(const Stream& stream, F&& fn, CaptureMode mode,
                                                              CaptureStreams streams) {
  detail::Site s = site("Edit::capture");
  bool into_body = InBody;
  for (const detail::Box* b = s.box; b && !into_body; b = b->parent) into_body = b->kind == detail::BoxKind::body;
  Capture c = detail::CaptureAccess::begin_in(stream, mode, streams, s.tx->shared(), into_body);
  {
    detail::EditCapturing capturing(*s.tx);
    if constexpr (std::is_invocable_v<F&, Capture&>)
      fn(c);
    else
      fn();
  }
  detail::Box* made_box = nullptr;
  detail::NodeRecord* r = detail::CaptureAccess::end_into(c, *s.tx, *s.box, s.deps, take_keeping(s), &made_box);
  return {made<ChildNode>(s, r), detail::GraphAccess::graph_ref({s.tx->shared(), made_box}, *s.ctx)};
}

// ------------------------------------------------------------------ definitions of Stream's work
// Why outside the export block: out-of-line member definitions redeclare exported entities.

template <class... P, class L, class... A>
tether::Node<tether::KernelNode<P...>> tether::Stream::launch_with(const Kernel<P...>& k, const L& config,
                                                                   A&&... args) const {
  static_assert(detail::KernelArgsCheck<std::tuple<P...>, A&&...>::ok);
  const detail::ContextState& cs = state("Stream::launch");
  Spec<KernelNode<P...>> spec(detail::What{"Stream::launch"}, *detail::KernelAccess::info(k), k, config,
                              std::forward<A>(args)...);
  return detail::enqueue_as(*this, cs, spec, "Stream::launch");
}

template <class... P, class... A>
tether::Node<tether::KernelNode<P...>> tether::Stream::launch(const Kernel<P...>& k, const Launch& l,
                                                              A&&... args) const {
  return launch_with(k, l, std::forward<A>(args)...);
}

template <class... P, class... A>
tether::Node<tether::KernelNode<P...>> tether::Stream::launch(const Kernel<P...>& k, const Param<Launch>& l,
                                                              A&&... args) const {
  return launch_with(k, l, std::forward<A>(args)...);
}

template <class... P, class... A>
tether::Node<tether::KernelNode<P...>> tether::Stream::launch(const Kernel<P...>& k, Grid grid, Block block,
                                                              A&&... args) const {
  return launch(k, Launch{grid, block}, std::forward<A>(args)...);
}

template <class Dst, class Src>
tether::Node<tether::MemcpyNode> tether::Stream::memcpy(Dst&& dst, Src&& src, std::size_t count) const {
  static_assert(detail::Endpoint<Dst&&>::ok && detail::Endpoint<Src&&>::ok,
                "memcpy: each end is a SharedBuffer/DeviceBuffer&&, a SharedPinnedBuffer/PinnedBuffer&& or "
                "tether::unowned(p, count)");
  const detail::ContextState& cs = state("Stream::memcpy");
  Spec<MemcpyNode> spec(detail::What{"Stream::memcpy"}, std::forward<Dst>(dst), std::forward<Src>(src), count);
  return detail::enqueue_as(*this, cs, spec, "Stream::memcpy");
}

template <class Dst, class T>
tether::Node<tether::MemsetNode> tether::Stream::memset(Dst&& dst, const T& value) const {
  static_assert(detail::Endpoint<Dst&&>::ok && !detail::Endpoint<Dst&&>::pinned,
                "memset: the destination is a SharedBuffer<T>, a DeviceBuffer<T>&& or tether::unowned(p, count)");
  const detail::ContextState& cs = state("Stream::memset");
  Spec<MemsetNode> spec(detail::What{"Stream::memset"}, std::forward<Dst>(dst), value);
  return detail::enqueue_as(*this, cs, spec, "Stream::memset");
}

template <class F>
tether::Node<tether::HostNode> tether::Stream::host(F&& fn) const {
  const detail::ContextState& cs = state("Stream::host");
  Spec<HostNode> spec(detail::What{"Stream::host"}, std::forward<F>(fn));
  return detail::enqueue_as(*this, cs, spec, "Stream::host");
}

template <class T>
tether::AllocResult<T> tether::Stream::alloc_async(std::size_t count) const {
  const detail::ContextState& cs = state("Stream::alloc_async");
  detail::MemAllocDesc d("Stream::alloc_async", cs.device, count, sizeof(T));
  CUdeviceptr p = 0;
  auto issue = [&](const detail::DriverTable& t, CUstream s, bool, detail::Entry* entry) {
    *entry = detail::Entry::cuMemAllocAsync;
    return detail::raw<detail::Entry::cuMemAllocAsync>(t, &p, d.params().alloc.bytesize, s);
  };
  detail::NodeRef r = detail::submit(*this, {&d.params(), issue}, std::move(d.owners()), "Stream::alloc_async");
  return {detail::NodeAccess::make<MemAllocNode>(std::move(r)),
          Unowned<T>{reinterpret_cast<T*>(static_cast<std::uintptr_t>(p)), count}};
}

template <class T>
tether::Node<tether::MemFreeNode> tether::Stream::free_async(const Unowned<T>& memory) const {
  (void)state("Stream::free_async");
  detail::MemFreeDesc d(static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(memory.ptr)));
  auto issue = [&](const detail::DriverTable& t, CUstream s, bool, detail::Entry* entry) {
    *entry = detail::Entry::cuMemFreeAsync;
    return detail::raw<detail::Entry::cuMemFreeAsync>(t, d.params().free.dptr, s);
  };
  return detail::NodeAccess::make<MemFreeNode>(
      detail::submit(*this, {&d.params(), issue}, std::move(d.owners()), "Stream::free_async"));
}
