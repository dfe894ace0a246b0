// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "capture.hpp"

#include "../resources/event.hpp"

#include <algorithm>
#include <array>
#include <span>
#include <vector>

namespace tether::detail {

// One capture begun by tether: a change set whose additions the driver made. Records are
// allocated in `h` (a hierarchy of its own, or an edit's) and staged in `ledger`; they stay
// pending, with no box, until the capture ends well: `Capture::end` publishes the ledger into the
// new graph, `Edit::capture` merges it into the edit's.
struct CaptureState {
  const DriverTable* drv = nullptr;
  ContextPtr ctx;
  CUstream origin = nullptr;
  std::uint64_t id = 0;
  CUgraph graph = nullptr;
  std::shared_ptr<Hierarchy> h;
  std::mutex mu;  // the ledger and lists below: stream operations may come from any thread
  Ledger ledger;
  std::size_t anonymous = 0;  // owners retained on the graph by no node (staged as kept when it ends)
  std::vector<CUstream> forked;  // forked by Capture::fork and not joined yet
  std::vector<CUevent> events;   // made by fork / join, destroyed when the capture is over
  // An edit's region for a conditional body: no host functions. Atomic: set just after the
  // capture is registered, and another thread's operation may already read it.
  std::atomic<bool> into_body{false};
  // Context::synchronize was called while this capture was active (cuCtxSynchronize invalidates
  // every capture, in every mode): the likely cause named when the capture turns out invalidated.
  std::atomic<bool> saw_ctx_synchronize{false};
  // CaptureStreams::exclusive: tether adds kernel, memset, memcpy and host nodes to the graph
  // itself. Fixed before the capture is registered.
  bool exclusive = false;
  // Held around every driver call of an exclusive capture that changes its graph (direct adds,
  // and the stream calls of its other operations, fork and join): CUDA does not make one graph
  // object safe for concurrent use, and two threads may issue onto two streams of one capture.
  std::mutex graph_mu;
  /// `graph_mu`, held, for an exclusive capture; nothing for a shared one.
  std::unique_lock<std::mutex> lock_graph() {
    return exclusive ? std::unique_lock<std::mutex>(graph_mu) : std::unique_lock<std::mutex>();
  }
};

namespace {

// Room for one more element, growing geometrically (reserve(size + 1) would copy on every push).
template <class V>
void room_for_one(V& v) {
  if (v.size() == v.capacity()) v.reserve(v.capacity() * 2 + 16);
}

constexpr std::size_t kBurstOps = 64;  // operations with owners per marker, outside capture

// Captures by id. Why ids: capture ids are unique and never reused (capture facts c10q), unlike
// graph and stream handles (c10r).
struct Captures {
  std::mutex mu;
  std::unordered_map<std::uint64_t, std::shared_ptr<CaptureState>> by_id;
};
Captures& captures() {
  static Captures* c = new Captures;  // immortal: streams may be used during static destruction
  return *c;
}

std::shared_ptr<CaptureState> find_capture(std::uint64_t id) {
  // A stream operation of a capture usually follows another of the same capture on this thread:
  // the last one found is kept (weakly: an ended capture must not be kept alive by a cache).
  thread_local std::uint64_t last_id = 0;
  thread_local std::weak_ptr<CaptureState> last;
  if (id == last_id)
    if (std::shared_ptr<CaptureState> s = last.lock()) return s;
  Captures& c = captures();
  std::shared_ptr<CaptureState> found;
  {
    std::lock_guard lock(c.mu);
    auto it = c.by_id.find(id);
    if (it != c.by_id.end()) found = it->second;
  }
  if (found) {
    last_id = id;
    last = found;
  }
  return found;
}

// The tether capture whose origin is stream `s`, or null. For error messages only: handles are reused, but not while their capture is registered.
std::shared_ptr<CaptureState> find_capture_of(CUstream s) {
  Captures& c = captures();
  std::lock_guard lock(c.mu);
  for (auto& [id, st] : c.by_id)
    if (st->origin == s) return st;
  return nullptr;
}

void unregister(std::uint64_t id) noexcept {
  Captures& c = captures();
  std::lock_guard lock(c.mu);
  c.by_id.erase(id);
}

// A failed marker keeps the burst for the next one (never released early); it is reported.
void report_marker_failure(const DriverTable& t, CUresult r) noexcept {
  if (r != CUDA_SUCCESS)
    report_failure(t, Entry::cuLaunchHostFunc, r,
                   "handing a stream's owners to a marker (they stay with the stream until the next marker or wait)");
}

// Outside capture: an operation's owners join the stream's burst (its lock held), and every
// kBurstOps operations with owners the burst goes to a marker behind them.
void join_burst_locked(const DriverTable& t, CUstream s, StreamBurst& burst, Owners&& owners) noexcept {
  burst.owners += std::move(owners);
  if (++burst.ops >= kBurstOps) report_marker_failure(t, flush_burst_locked(t, s, burst));
}

struct CaptureInfo {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;
  CUgraph graph = nullptr;
};

CaptureInfo capture_info(const DriverTable& t, CUstream s, const char* what) {
  CaptureInfo i;
  call<Entry::cuStreamGetCaptureInfo>(t, what, s, &i.status, &i.id, &i.graph, static_cast<const CUgraphNode**>(nullptr),
                                      static_cast<const CUgraphEdgeData**>(nullptr), static_cast<std::size_t*>(nullptr));
  return i;
}

// A capture dependency set, copied: the driver's array is valid only until the next call on the
// stream. Small sets (the common one is a single node) need no allocation.
struct Frontier {
  static constexpr std::size_t kInline = 8;
  std::array<CUgraphNode, kInline> inline_nodes{};
  std::vector<CUgraphNode> more;
  std::size_t n = 0;
  bool known = false;  // false: the query failed or was lossy; nothing is identified against it
  void assign(const CUgraphNode* d, std::size_t count) {
    n = count;
    if (count <= kInline) {
      std::copy_n(d, count, inline_nodes.begin());
    } else {
      more.assign(d, d + count);
    }
    known = true;
  }
  std::span<const CUgraphNode> nodes() const {
    return n <= kInline ? std::span<const CUgraphNode>(inline_nodes.data(), n) : std::span<const CUgraphNode>(more);
  }
  // The same set, in any order (the driver keeps insertion order, but nothing promises it).
  bool same_as(std::span<const CUgraphNode> other) const {
    if (other.size() != n) return false;
    std::span<const CUgraphNode> mine = nodes();
    for (CUgraphNode x : other)
      if (std::find(mine.begin(), mine.end(), x) == mine.end()) return false;
    return true;
  }
};

// capture_info, plus the stream's capture dependency set when it captures.
CaptureInfo capture_info_with_frontier(const DriverTable& t, CUstream s, const char* what, Frontier& f) {
  CaptureInfo i;
  const CUgraphNode* deps = nullptr;
  std::size_t n = 0;
  call<Entry::cuStreamGetCaptureInfo>(t, what, s, &i.status, &i.id, &i.graph, &deps,
                                      static_cast<const CUgraphEdgeData**>(nullptr), &n);
  if (i.status == CU_STREAM_CAPTURE_STATUS_ACTIVE && (deps || n == 0)) {
    try {
      f.assign(deps, n);
    } catch (...) {
      f.known = false;  // no memory for a large set: this operation's node stays anonymous
    }
  }
  return i;
}

// The dependencies of a captured node, into `out`; the first failed query's result otherwise.
// One call when there are fewer than `guess` (the driver fills at most the given count and says
// how many it wrote).
CUresult dependencies_of(const DriverTable& t, CUgraphNode node, std::vector<CUgraphNode>& out, std::size_t guess) {
  out.resize(guess);
  std::size_t n = guess;
  if (CUresult r = raw<Entry::cuGraphNodeGetDependencies>(t, node, out.data(), static_cast<CUgraphEdgeData*>(nullptr), &n);
      r != CUDA_SUCCESS)
    return r;
  if (n < guess) {
    out.resize(n);
    return CUDA_SUCCESS;
  }
  if (CUresult r = raw<Entry::cuGraphNodeGetDependencies>(t, node, static_cast<CUgraphNode*>(nullptr),
                                                          static_cast<CUgraphEdgeData*>(nullptr), &n);
      r != CUDA_SUCCESS)
    return r;
  out.resize(n);
  return n == 0 ? CUDA_SUCCESS
                : raw<Entry::cuGraphNodeGetDependencies>(t, node, out.data(), static_cast<CUgraphEdgeData*>(nullptr), &n);
}

constexpr const char* kIdentifying = "identifying a captured node (its owners stay with the captured graph, anonymously)";

// Which node the operation just issued onto a capturing stream made, exactly, or null when that
// cannot be proven. `before` is the stream's dependency set read just before the call, under the
// stream's lock, so no other tether thread issued onto the stream in between; other code may
// have (a raw driver call from another thread, another library). Every operation on the stream
// appends one node that depends on the set before it and makes the set that node alone, so the
// nodes added since `before` form a chain C1 -> ... -> Ck whose first depends exactly on
// `before` and whose last is the set now, and the operation's node is one of them.
// - k = 1 (nobody else issued): the set is one node whose dependencies are exactly `before`; that
//   is the operation's node. One query beyond the floor proves it.
// - k > 1: the chain is walked back (bounded); if exactly one node of it has the operation's node
//   type, that is the operation's node; if several do, which one is the operation's cannot be
//   told from the graph, and it stays anonymous (its owners stay with the graph; never a wrong
//   handle, which an update or a removal would turn into a change of another node).
// Anything else on the stream in between (a join of another branch, a dependency update) leaves
// the node anonymous.
// The stream's capture dependency set after an operation (the driver's array, valid until the next
// call on the stream); false, reported, if the driver did not answer.
bool deps_after(const DriverTable& t, CUstream s, const CUgraphNode*& deps, std::size_t& n) {
  CUstreamCaptureStatus status{};
  CUresult q = raw<Entry::cuStreamGetCaptureInfo>(t, s, &status, static_cast<cuuint64_t*>(nullptr),
                                                  static_cast<CUgraph*>(nullptr), &deps,
                                                  static_cast<const CUgraphEdgeData**>(nullptr), &n);
  if (q == CUDA_SUCCESS) return true;
  report_failure(t, Entry::cuStreamGetCaptureInfo, q, kIdentifying);
  return false;
}

// `c`'s type into `type`; false (reported) if the driver cannot say.
bool node_type(const DriverTable& t, CUgraphNode c, CUgraphNodeType& type) {
  if (CUresult r = raw<Entry::cuGraphNodeGetType>(t, c, &type); r != CUDA_SUCCESS) {
    report_failure(t, Entry::cuGraphNodeGetType, r, kIdentifying);
    return false;
  }
  return true;
}

// The only node of `want` among `nodes`; null if there is none, more than one, or a type is unknown.
CUgraphNode only_of_type(const DriverTable& t, std::span<const CUgraphNode> nodes, CUgraphNodeType want) {
  CUgraphNode found = nullptr;
  int matches = 0;
  for (CUgraphNode c : nodes) {
    CUgraphNodeType ty{};
    if (!node_type(t, c, ty)) return nullptr;
    if (ty == want) {
      found = c;
      ++matches;
    }
  }
  return matches == 1 ? found : nullptr;
}

CUgraphNode identify_captured(const DriverTable& t, CUstream s, const Frontier& before, CUgraphNodeType type) {
  if (!before.known) return nullptr;
  const CUgraphNode* deps = nullptr;
  std::size_t n = 0;
  if (!deps_after(t, s, deps, n) || n != 1 || !deps) return nullptr;
  constexpr std::size_t kMaxChain = 1024;
  thread_local std::vector<CUgraphNode> chain, preds;
  chain.clear();
  const std::span<const CUgraphNode> start = before.nodes();
  CUgraphNode cur = deps[0];
  for (;;) {
    if (chain.size() == kMaxChain || std::find(start.begin(), start.end(), cur) != start.end())
      return nullptr;  // too long, or walked past the start: the set was changed under the operation
    chain.push_back(cur);
    if (CUresult r = dependencies_of(t, cur, preds, before.n + 1); r != CUDA_SUCCESS) {
      report_failure(t, Entry::cuGraphNodeGetDependencies, r, kIdentifying);
      return nullptr;
    }
    if (before.same_as(preds)) break;  // cur is the chain's first node
    if (preds.size() != 1) return nullptr;
    cur = preds[0];
  }
  if (chain.size() == 1) return chain[0];
  return only_of_type(t, chain, type);
}

// capture_facts c3f2: CUDA accepts a host function captured into a conditional body and then
// refuses the whole graph at cuGraphInstantiate with a bare CUDA_ERROR_INVALID_VALUE.
[[noreturn]] void throw_host_in_body(std::string_view what) {
  throw UsageError(fmt::format("{}: a host function cannot be captured into a conditional body (this capture's "
                               "region goes into an if/while/switch body): CUDA does not run host nodes inside "
                               "conditional bodies and would refuse the graph only later, at instantiate, with "
                               "CUDA_ERROR_INVALID_VALUE; do the host work outside the conditional node (before or "
                               "after it)",
                               what));
}

// Every active capture notes a Context::synchronize (cuCtxSynchronize invalidates them all).
void note_ctx_synchronize() noexcept {
  Captures& c = captures();
  std::lock_guard lock(c.mu);
  for (auto& [id, st] : c.by_id) st->saw_ctx_synchronize.store(true);
}

// What an invalidation message adds when tether saw its likely cause.
std::string invalidation_cause(const CaptureState* st) {
  if (st && st->saw_ctx_synchronize.load())
    return "; likely cause: Context::synchronize (cuCtxSynchronize) was called while this capture was active, and "
           "it invalidates every capture in every mode (synchronize the streams that are not capturing instead)";
  return {};
}

[[noreturn]] void throw_op_error(const DriverTable& t, Entry e, CUresult r, const char* what, bool capturing,
                                 const CaptureState* st = nullptr) {
  if (r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
    throw_call_error(t, e, r,
                     fmt::format("{}: the stream's capture was invalidated earlier (an illegal call during the "
                                 "capture, see docs/capture.md){}; end it to release what it captured",
                                 what, invalidation_cause(st)));
  throw_call_error(t, e, r, capturing ? fmt::format("{} on a capturing stream", what) : std::string(what));
}

// Pending records of a capture that will not become a graph's: their handles go invalid.
void free_records(CaptureState& st) noexcept {
  std::lock_guard lock(st.mu);
  st.ledger.discard(*st.h);
}

void destroy_events(CaptureState& st) noexcept {
  for (CUevent e : st.events)
    if (CUresult r = raw<Entry::cuEventDestroy>(*st.drv, e); r != CUDA_SUCCESS)
      report_error("destroying a capture's fork/join event", result_name(r));
  st.events.clear();
}

// The capture is over (ended well or not): nothing finds it any more.
void retire_capture(CaptureState& st) noexcept {
  unregister(st.id);
  destroy_events(st);
}

// cuStreamEndCapture, and once more if a failed end left the stream capturing (a stream that
// stays in a capture would capture, or refuse, everything issued on it later). Returns the first
// failure, and the graph of whichever end succeeded in `*g`.
CUresult end_capture(const DriverTable& t, CUstream s, CUgraph* g) noexcept {
  *g = nullptr;
  CUresult r = raw<Entry::cuStreamEndCapture>(t, s, g);
  if (r == CUDA_SUCCESS) return r;
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  if (raw<Entry::cuStreamIsCapturing>(t, s, &st) == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_NONE) return r;
  CUgraph again = nullptr;
  if (raw<Entry::cuStreamEndCapture>(t, s, &again) == CUDA_SUCCESS && again)
    if (CUresult d = raw<Entry::cuGraphDestroy>(t, again); d != CUDA_SUCCESS)
      report_failure(t, Entry::cuGraphDestroy, d,
                     "destroying the graph of a capture whose first end failed (its owners are leaked)");
  return r;
}

// Ends a capture that will not become a graph, releasing what it captured exactly once: the
// driver destroys the graph of a failed end (with its user objects, capture facts c2f, c2g);
// the graph of a successful end is destroyed here.
void discard(CaptureState& st) noexcept {
  const DriverTable& t = *st.drv;
  CUgraph g = nullptr;
  CUresult r = CUDA_SUCCESS;
  try {
    ScopedContext scope(*st.ctx);
    r = end_capture(t, st.origin, &g);
  } catch (...) {
    r = end_capture(t, st.origin, &g);
  }
  if (r == CUDA_SUCCESS && g)
    if (CUresult d = raw<Entry::cuGraphDestroy>(t, g); d != CUDA_SUCCESS)
      report_failure(t, Entry::cuGraphDestroy, d, "destroying a discarded capture's graph (its owners are leaked)");
  free_records(st);
  retire_capture(st);
}

// Ends the capture. On success returns the captured graph (the caller owns it); on failure the
// capture is over, its records are gone and the error is thrown.
CUgraph finish(CaptureState& st, const char* what) {
  const DriverTable& t = *st.drv;
  CUgraph g = nullptr;
  CUresult r;
  try {
    ScopedContext scope(*st.ctx);
    r = end_capture(t, st.origin, &g);
  } catch (...) {
    discard(st);
    throw;
  }
  const std::size_t unjoined = st.forked.size();
  retire_capture(st);
  if (r == CUDA_SUCCESS && g) return g;
  free_records(st);
  if (r == CUDA_ERROR_STREAM_CAPTURE_UNJOINED)
    throw UsageError(fmt::format("{}: {} forked into the capture {} not joined back to its origin stream "
                                 "(Capture::join) before the end (CUDA_ERROR_STREAM_CAPTURE_UNJOINED); the capture is "
                                 "discarded and what it captured released",
                                 what, unjoined == 1 ? "a stream" : unjoined ? fmt::format("{} streams", unjoined) : "a stream",
                                 unjoined > 1 ? "were" : "was"));
  if (r == CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD)
    throw UsageError(fmt::format("{}: a GLOBAL or THREAD_LOCAL capture must end on the thread that began it "
                                 "(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD; use CaptureMode::relaxed to end it "
                                 "elsewhere); the capture is over and what it captured released",
                                 what));
  throw_call_error(t, Entry::cuStreamEndCapture, r,
                   r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
                       ? fmt::format("{}: ending a stream capture that an illegal call invalidated (in GLOBAL mode a "
                                     "synchronous allocation or free, an instantiation, an executable's destruction, "
                                     "or a wait for any stream or event, on any GLOBAL-mode thread; in every mode a "
                                     "wait for the capturing stream, or cuCtxSynchronize; see docs/capture.md){}; "
                                     "what it captured is released",
                                     what, invalidation_cause(&st))
                       : fmt::format("{}: ending a stream capture", what));
}

// Whether graph `g` (not its children) has a host node.
bool has_host_node(const DriverTable& t, CUgraph g) {
  std::size_t n = 0;
  call<Entry::cuGraphGetNodes>(t, "counting a captured region's nodes", g, static_cast<CUgraphNode*>(nullptr), &n);
  std::vector<CUgraphNode> nodes(n);
  if (n) call<Entry::cuGraphGetNodes>(t, "listing a captured region's nodes", g, nodes.data(), &n);
  for (CUgraphNode x : nodes) {
    CUgraphNodeType ty{};
    call<Entry::cuGraphNodeGetType>(t, "reading a captured node's type", x, &ty);
    if (ty == CU_GRAPH_NODE_TYPE_HOST) return true;
  }
  return false;
}

// Orders the capture's ledger as graph `g` (the captured graph) lists its nodes, with records for
// the nodes other code captured (no owners), and stages its anonymous owners. Allocates (new
// records); on failure the ledger is as it was (the caller discards it).
void order_captured(CaptureState& st, CUgraph g) {
  const DriverTable& t = *st.drv;
  std::size_t n = 0;
  call<Entry::cuGraphGetNodes>(t, "counting a captured graph's nodes", g, static_cast<CUgraphNode*>(nullptr), &n);
  std::lock_guard lock(st.mu);
  st.ledger.reserve(1);
  if (n != st.ledger.captured()) {
    // Other code captured nodes too: the graph's own order, with records for them.
    std::vector<CUgraphNode> nodes(n);
    if (n) call<Entry::cuGraphGetNodes>(t, "listing a captured graph's nodes", g, nodes.data(), &n);
    st.ledger.order_as(std::span<const CUgraphNode>(nodes.data(), n), *st.h, [&](CUgraphNode node) {
      CUgraphNodeType type{};
      call<Entry::cuGraphNodeGetType>(t, "reading a captured node's type", node, &type);
      return type;
    });
    st.ledger.reserve(1);
  }
  if (st.anonymous) st.ledger.stage_kept(std::exchange(st.anonymous, 0));
}

std::shared_ptr<CaptureState> begin(const Stream& stream, CaptureMode mode, CaptureStreams streams,
                                    std::shared_ptr<Hierarchy> into, const char* what) {
  const ContextState& cs = StreamAccess::state(stream, what);
  const DriverTable& t = *cs.table;
  auto st = std::make_shared<CaptureState>();
  st->drv = &t;
  st->ctx = StreamAccess::owner(stream);
  st->origin = stream.get();
  st->h = into ? std::move(into) : Hierarchy::for_capture(t);
  st->exclusive = streams == CaptureStreams::exclusive;
  ScopedContext scope(cs);
  if (capture_status(t, st->origin, what) != CU_STREAM_CAPTURE_STATUS_NONE)
    throw UsageError(fmt::format("{}: the stream already takes part in a stream capture", what));
  // A marker issued after the capture began would be captured: the stream's burst goes first.
  if (StreamBurst* b = StreamAccess::burst(stream)) flush_burst(cs, st->origin, *b);
  // capture_facts c10a: the driver refuses the legacy stream with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
  // whose text ("operation not permitted when stream is capturing") misleads; say what is wrong.
  if (st->origin == CU_STREAM_LEGACY || st->origin == nullptr)
    throw UsageError(fmt::format("{}: the legacy default stream (CU_STREAM_LEGACY, or stream 0) cannot be captured "
                                 "(cuStreamBeginCapture refuses it with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED); "
                                 "capture a stream made with Context::make_stream, or the per-thread default stream "
                                 "(CU_STREAM_PER_THREAD)",
                                 what));
  observe_context_synchronize(&note_ctx_synchronize);
  call<Entry::cuStreamBeginCapture>(t, fmt::format("{}: beginning a stream capture", what), st->origin,
                                    static_cast<CUstreamCaptureMode>(mode));
  try {
    CaptureInfo i = capture_info(t, st->origin, "reading a new capture's graph");
    st->id = i.id;
    st->graph = i.graph;
    Captures& c = captures();
    std::lock_guard lock(c.mu);
    c.by_id.emplace(st->id, st);
  } catch (...) {
    discard(*st);
    throw;
  }
  return st;
}

CUevent capture_event(CaptureState& st, const char* what) {
  room_for_one(st.events);
  CUevent e = nullptr;
  call<Entry::cuEventCreate>(*st.drv, fmt::format("{}: creating an event", what), &e,
                             static_cast<unsigned>(CU_EVENT_DISABLE_TIMING));
  st.events.push_back(e);
  return e;
}

}  // namespace

NodeRef submit(const Stream& s, const StreamOp& op, Owners&& owners, const char* what) {
  ReleaseIfUnused guard(owners);
  const ContextState& cs = StreamAccess::state(s, what);
  const DriverTable& t = *cs.table;
  StreamBurst* burst = StreamAccess::burst(s);
  if (!burst) [[unlikely]]
    throw UsageError(fmt::format("{}: this stream was adopted without memory for its owners; make it with "
                                 "Context::make_stream",
                                 what));
  ScopedContext scope(cs);
  // Why one lock around the whole operation, captured or not: a stream's capture dependency set
  // changes only through work on that stream, so while tether's threads issue onto it one at a
  // time, the set read before an operation is the one its node depends on (identification below).
  std::unique_lock lock(burst->mu);
  Frontier before;
  CaptureInfo info = capture_info_with_frontier(t, s.get(), what, before);
  Entry entry{};
  if (info.status == CU_STREAM_CAPTURE_STATUS_NONE) {
    // A host function is tether host work until a host function behind it runs (begin_host_work).
    const bool host = op.params->type == CU_GRAPH_NODE_TYPE_HOST;
    if (host) begin_host_work();
    if (CUresult r = op.issue(t, s.get(), false, &entry); r != CUDA_SUCCESS) {
      if (host) end_host_work();
      throw_op_error(t, entry, r, what, false);
    }
    if (host)
      if (CUresult r = raw<Entry::cuLaunchHostFunc>(t, s.get(), &end_host_work_fn, nullptr); r != CUDA_SUCCESS) {
        end_host_work();
        report_failure(t, Entry::cuLaunchHostFunc, r,
                       "queueing the end of a host function's host work (a blocking release may now wait for it)");
      }
    if (!owners.empty()) join_burst_locked(t, s.get(), *burst, std::move(owners));
    return {};
  }
  if (info.status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
    // The driver refuses both the operation and a retain on the invalidated capture's graph
    // (H200: cuGraphRetainUserObject INVALID_VALUE): let the operation say why, keeping nothing.
    CUresult r = op.issue(t, s.get(), true, &entry);
    if (r == CUDA_SUCCESS) r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;  // nothing of it can ever run
    // Why also by stream: an invalidated capture may not report its id (the H200 did not: the
    // lookup by id found nothing there).
    std::shared_ptr<CaptureState> cap = find_capture(info.id);
    if (!cap) cap = find_capture_of(s.get());
    throw_op_error(t, entry, r, what, true, cap.get());
  }
  // Captured: the owners are staged on the capturing graph before the call, so that the node
  // never exists without them.
  std::shared_ptr<CaptureState> cap = find_capture(info.id);
  if (cap && cap->into_body && op.params->type == CU_GRAPH_NODE_TYPE_HOST) [[unlikely]]
    throw_host_in_body(what);
  const std::size_t count = owners.size();
  Staged staged;
  if (!owners.empty()) staged = prepare(t, info.graph, std::move(owners));
  CUgraphNode node = nullptr;
  std::unique_lock<std::mutex> graph_lock = cap ? cap->lock_graph() : std::unique_lock<std::mutex>();
  if (graph_lock && op.direct && before.known) {
    // CaptureStreams::exclusive: the node is added where the stream call would have put it, and
    // is known exactly (docs/design/driver-facts.md, "Direct add into a capturing graph").
    const std::span<const CUgraphNode> deps = before.nodes();
    if (CUresult r = raw<Entry::cuGraphAddNode>(t, &node, info.graph, deps.data(),
                                                static_cast<const CUgraphEdgeData*>(nullptr), deps.size(),
                                                const_cast<CUgraphNodeParams*>(op.params));
        r != CUDA_SUCCESS) {
      rollback(t, staged);
      throw_op_error(t, Entry::cuGraphAddNode, r, what, true, cap.get());
    }
    if (CUresult r = raw<Entry::cuStreamUpdateCaptureDependencies>(
            t, s.get(), &node, static_cast<const CUgraphEdgeData*>(nullptr), std::size_t{1},
            static_cast<unsigned>(CU_STREAM_SET_CAPTURE_DEPENDENCIES));
        r != CUDA_SUCCESS) {
      // The node is in the capturing graph, which a capture cannot remove nodes from: its owners
      // stay with the graph, anonymously (the capture is invalidated: the only way this fails on
      // a node just added to the stream's own graph).
      graph_lock.unlock();
      lock.unlock();
      {
        std::lock_guard cap_lock(cap->mu);
        cap->anonymous += count;
      }
      throw_op_error(t, Entry::cuStreamUpdateCaptureDependencies, r, what, true, cap.get());
    }
  } else {
    if (CUresult r = op.issue(t, s.get(), true, &entry); r != CUDA_SUCCESS) {
      rollback(t, staged);
      throw_op_error(t, entry, r, what, true, cap ? cap.get() : find_capture_of(s.get()).get());
    }
    node = cap ? identify_captured(t, s.get(), before, op.params->type) : nullptr;
  }
  if (graph_lock) graph_lock.unlock();
  lock.unlock();
  if (cap) {
    std::lock_guard cap_lock(cap->mu);
    if (node) {
      try {
        cap->ledger.reserve(1);
        NodeRecord* rec = cap->h->allocate_record();
        rec->node = node;
        rec->type = op.params->type;
        rec->pending = true;
        cap->ledger.stage_captured(rec, staged);
        return NodeRef{cap->h, rec, rec->generation.load(std::memory_order_acquire)};
      } catch (...) {
        // No memory for the record: the owners stay on the graph anonymously (never dangling).
      }
    }
    cap->anonymous += count;
  }
  return {};
}

namespace {

// The nodes a foreign call appended to a capturing stream, walking back from the stream's
// dependency set after the call and stopping at its set before (`before`); the only one, or else
// the only kernel node among them, is its node (null otherwise, or when the walk meets more than
// kMaxWalk nodes). Why a walk and not identify_captured's chain: NCCL joins an event wait node
// with no dependencies of its own into its kernel's, so the new nodes are no chain.
CUgraphNode identify_foreign(const DriverTable& t, CUstream s, const Frontier& before, CUgraphNodeType& type) {
  if (!before.known) return nullptr;
  const CUgraphNode* deps = nullptr;
  std::size_t n = 0;
  if (!deps_after(t, s, deps, n)) return nullptr;
  constexpr std::size_t kMaxWalk = 64;
  const std::span<const CUgraphNode> start = before.nodes();
  std::vector<CUgraphNode> seen, todo(deps, deps + n), preds;
  while (!todo.empty()) {
    CUgraphNode c = todo.back();
    todo.pop_back();
    if (std::find(start.begin(), start.end(), c) != start.end() || std::find(seen.begin(), seen.end(), c) != seen.end())
      continue;
    if (seen.size() == kMaxWalk) return nullptr;
    seen.push_back(c);
    if (CUresult r = dependencies_of(t, c, preds, 4); r != CUDA_SUCCESS) {
      report_failure(t, Entry::cuGraphNodeGetDependencies, r, kIdentifying);
      return nullptr;
    }
    todo.insert(todo.end(), preds.begin(), preds.end());
  }
  if (seen.size() == 1) return node_type(t, seen[0], type) ? seen[0] : nullptr;
  type = CU_GRAPH_NODE_TYPE_KERNEL;
  return only_of_type(t, seen, CU_GRAPH_NODE_TYPE_KERNEL);
}

}  // namespace

void submit_foreign(std::span<ForeignPart> parts, FunctionRef<bool()> issue, FunctionRef<void()> raise, const char* what) {
  // Whatever is still in a part when this returns or throws goes to the reclaimer.
  struct Guard {
    std::span<ForeignPart> parts;
    ~Guard() {
      for (ForeignPart& p : parts)
        if (!p.owners.empty()) defer(std::move(p.owners));
    }
  } guard{parts};
  struct Streamed {
    ForeignPart* part;
    const ContextState* cs;
    StreamBurst* burst;
    CaptureInfo info;
    Frontier before;
    Staged staged;
    std::size_t count = 0;
    std::shared_ptr<CaptureState> cap;
  };
  // Most calls have one part (a collective) or a few (a group): no allocation for up to four.
  constexpr std::size_t kInline = 4;
  std::array<Streamed, kInline> inline_st{};
  std::vector<Streamed> heap_st;
  std::size_t count_st = 0;
  if (parts.size() > kInline) heap_st.reserve(parts.size());
  auto add = [&](Streamed x) {
    if (parts.size() > kInline)
      heap_st.push_back(std::move(x));
    else
      inline_st[count_st] = std::move(x);
    ++count_st;
  };
  for (ForeignPart& p : parts) {
    if (!p.stream) throw_empty(what, "Stream");
    const ContextState& cs = StreamAccess::state(*p.stream, what);
    StreamBurst* burst = StreamAccess::burst(*p.stream);
    if (!burst)
      throw UsageError(fmt::format("{}: this stream was adopted without memory for its owners; make it with "
                                   "Context::make_stream",
                                   what));
    add(Streamed{&p, &cs, burst, {}, {}, {}, 0, nullptr});
  }
  const std::span<Streamed> st = parts.size() > kInline ? std::span<Streamed>(heap_st)
                                                         : std::span<Streamed>(inline_st.data(), count_st);
  // Why each stream's lock for the whole call, taken in one order: as for submit, the capture
  // dependency set read before the call is the one the call appends to.
  std::sort(st.begin(), st.end(), [](const Streamed& a, const Streamed& b) { return a.burst < b.burst; });
  struct Locks {  // the bursts' locks, released in reverse order of taking
    std::span<Streamed> st;
    std::size_t taken = 0;
    ~Locks() { unlock_all(); }
    void unlock_all() noexcept {
      for (std::size_t i = taken; i-- > 0;)
        if (i == 0 || st[i].burst != st[i - 1].burst) st[i].burst->mu.unlock();
      taken = 0;
    }
  } locks{st};
  for (std::size_t i = 0; i < st.size(); ++i, locks.taken = i)
    if (i == 0 || st[i].burst != st[i - 1].burst) st[i].burst->mu.lock();
  bool invalidated = false;
  const DriverTable* invalid_table = nullptr;
  for (Streamed& x : st) {
    const DriverTable& t = *x.cs->table;
    ScopedContext scope(*x.cs);
    x.info = capture_info_with_frontier(t, x.part->stream->get(), what, x.before);
    if (x.info.status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
      invalidated = true;
      invalid_table = &t;
    }
  }
  if (invalidated)  // nothing is issued: the call could never run in that capture
    throw_call_error(*invalid_table, Entry::cuStreamGetCaptureInfo, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
                     fmt::format("{}: a stream's capture was invalidated earlier (an illegal call during the capture, "
                                 "see docs/capture.md); end it to release what it captured",
                                 what));
  try {
    for (Streamed& x : st) {
      if (x.info.status != CU_STREAM_CAPTURE_STATUS_ACTIVE) continue;
      ScopedContext scope(*x.cs);
      x.count = x.part->owners.size();
      x.cap = find_capture(x.info.id);
      if (!x.part->owners.empty()) x.staged = prepare(*x.cs->table, x.info.graph, std::move(x.part->owners));
    }
  } catch (...) {
    for (Streamed& x : st)
      if (x.staged) rollback(*x.cs->table, x.staged);
    throw;
  }
  // Exclusive captures serialise the driver calls that change their graphs (CaptureState::graph_mu).
  std::vector<CaptureState*> caps;
  for (Streamed& x : st)
    if (x.cap && x.cap->exclusive && std::find(caps.begin(), caps.end(), x.cap.get()) == caps.end())
      caps.push_back(x.cap.get());
  std::sort(caps.begin(), caps.end());
  std::vector<std::unique_lock<std::mutex>> graph_locks;
  for (CaptureState* c : caps) graph_locks.push_back(c->lock_graph());
  const bool ok = issue();
  for (Streamed& x : st) {
    const DriverTable& t = *x.cs->table;
    ScopedContext scope(*x.cs);
    if (x.info.status == CU_STREAM_CAPTURE_STATUS_NONE) {
      if (!x.part->owners.empty()) join_burst_locked(t, x.part->stream->get(), *x.burst, std::move(x.part->owners));
      continue;
    }
    x.part->captured = true;
    CUgraphNodeType type{};
    CUgraphNode node = ok && x.cap ? identify_foreign(t, x.part->stream->get(), x.before, type) : nullptr;
    if (!x.cap) continue;  // a capture other code began: the staged owners stay with its graph
    std::lock_guard cap_lock(x.cap->mu);
    if (node && x.staged) {
      try {
        x.cap->ledger.reserve(1);
        NodeRecord* rec = x.cap->h->allocate_record();
        rec->node = node;
        rec->type = type;
        rec->pending = true;
        x.cap->ledger.stage_captured(rec, x.staged);
        x.part->node = NodeRef{x.cap->h, rec, rec->generation.load(std::memory_order_acquire)};
        continue;
      } catch (...) {
        // No memory for the record: the owners stay on the graph anonymously (never dangling).
      }
    }
    x.cap->anonymous += x.count;
  }
  graph_locks.clear();
  locks.unlock_all();
  if (!ok) raise();
}

namespace {
void keep_on_capture(const Stream& s, Owners&& owners, const char* what) {
  ReleaseIfUnused guard(owners);
  const ContextState& cs = StreamAccess::state(s, what);
  const DriverTable& t = *cs.table;
  ScopedContext scope(cs);
  CaptureInfo info = capture_info(t, s.get(), what);
  const std::size_t count = owners.size();
  if (info.status == CU_STREAM_CAPTURE_STATUS_NONE) {
    StreamBurst* burst = StreamAccess::burst(s);
    if (!burst) return;  // released on the reclaimer by the guard (after the call it kept nothing)
    std::lock_guard lock(burst->mu);
    join_burst_locked(t, s.get(), *burst, std::move(owners));
    return;
  }
  Staged staged = prepare(t, info.graph, std::move(owners));
  (void)staged;  // the graph keeps it
  if (std::shared_ptr<CaptureState> cap = find_capture(info.id)) {
    std::lock_guard lock(cap->mu);
    cap->anonymous += count;
  }
}

}  // namespace

Capture CaptureAccess::begin_in(const Stream& stream, CaptureMode mode, CaptureStreams streams,
                                 const std::shared_ptr<Hierarchy>& h, bool into_body) {
  Capture c;
  c.s_ = begin(stream, mode, streams, h, "Edit::capture");
  c.s_->into_body = into_body;
  return c;
}

NodeRecord* CaptureAccess::end_into(Capture& c, Transaction& tx, Box& box, std::span<NodeRecord* const> deps,
                                    Owners&& owners, Box** made) {
  ReleaseIfUnused guard(owners);
  std::shared_ptr<CaptureState> st = std::move(c.s_);
  if (!st)
    throw UsageError("Edit::capture: the capture function ended, aborted or moved away its Capture; nothing was added");
  CUgraph g = finish(*st, "Edit::capture");
  const DriverTable& t = *st->drv;
  if (st->into_body) {
    // Host functions other code issued onto the stream (tether's own were refused as issued).
    bool host = false;
    try {
      host = has_host_node(t, g);
    } catch (...) {
      if (CUresult d = raw<Entry::cuGraphDestroy>(t, g); d != CUDA_SUCCESS)
        report_error("destroying a captured region that could not be added", result_name(d));
      free_records(*st);
      throw;
    }
    if (host) {
      if (CUresult d = raw<Entry::cuGraphDestroy>(t, g); d != CUDA_SUCCESS)
        report_error("destroying a captured region that could not be added", result_name(d));
      free_records(*st);
      throw_host_in_body("Edit::capture (a host function other code issued during the capture)");
    }
  }
  CUgraphNodeParams p{};
  p.type = CU_GRAPH_NODE_TYPE_GRAPH;
  p.graph.graph = g;
  p.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
  bool moved = false;
  try {
    order_captured(*st, g);
    tx.reserve(st->ledger.size() + 1);  // the child node's add and the merge below
    NodeRecord* rec = tx.add(box, deps, p, std::move(owners), "a captured region", [&](Hierarchy& h, NodeRecord* r) {
      moved = true;  // the node owns the graph now: undoing the add destroys it with its owners
      CUgraph child = nullptr;
      call<Entry::cuGraphChildGraphNodeGetGraph>(t, "finding a captured region's graph", r->node, &child);
      Box& b = h.add_box(child, &box, r, BoxKind::child);
      b.captured = true;  // inspect: a captured region, not an embedded copy
      *made = &b;
    });
    // The captured nodes are the edit's from here: a rollback retires them (and its undo of the
    // child node destroys them, and their versions, with the region's graph).
    std::lock_guard lock(st->mu);
    tx.merge(st->ledger, **made);
    return rec;
  } catch (...) {
    if (!moved)
      if (CUresult d = raw<Entry::cuGraphDestroy>(t, g); d != CUDA_SUCCESS)
        report_error("destroying a captured region that could not be added", result_name(d));
    free_records(*st);
    throw;
  }
}

}  // namespace tether::detail

namespace tether {

Capture::Capture() noexcept = default;
Capture::Capture(const Stream& stream, CaptureMode mode) : Capture(stream, mode, CaptureStreams::shared) {}
Capture::Capture(const Stream& stream, CaptureMode mode, CaptureStreams streams) {
  detail::check_calls_allowed("Capture");
  s_ = detail::begin(stream, mode, streams, nullptr, "Capture");
}
Capture::Capture(Capture&&) noexcept = default;
Capture& Capture::operator=(Capture&& other) noexcept {
  if (this != &other) {
    abort();
    s_ = std::move(other.s_);
  }
  return *this;
}
Capture::~Capture() { abort(); }

void Capture::abort() noexcept {
  if (std::shared_ptr<detail::CaptureState> st = std::move(s_)) detail::discard(*st);
}

namespace {
detail::CaptureState& live(const std::shared_ptr<detail::CaptureState>& s, const char* what) {
  detail::check_calls_allowed(what);
  if (!s) throw UsageError(fmt::format("{}: this Capture is moved from or empty (default-constructed, ended or aborted)", what));
  return *s;
}
}  // namespace

std::uint64_t Capture::id() const { return live(s_, "Capture::id").id; }

void Capture::fork(const Stream& other) {
  detail::CaptureState& st = live(s_, "Capture::fork");
  const detail::ContextState& cs = detail::StreamAccess::state(other, "Capture::fork");
  const detail::DriverTable& t = *st.drv;
  detail::ScopedContext scope(cs);
  if (other.get() == st.origin) throw UsageError("Capture::fork: the origin stream cannot fork into its own capture");
  // A stream joined back stays in the capture until it ends: forking it again is a new branch.
  detail::CaptureInfo i = detail::capture_info(t, other.get(), "Capture::fork");
  if (i.status != CU_STREAM_CAPTURE_STATUS_NONE && i.id != st.id)
    throw UsageError("Capture::fork: the stream already takes part in another stream capture");
  if (i.status == CU_STREAM_CAPTURE_STATUS_NONE)
    if (detail::StreamBurst* b = detail::StreamAccess::burst(other)) detail::flush_burst(cs, other.get(), *b);
  detail::room_for_one(st.forked);
  // The fork point is recorded on the origin: its event must be of the origin's context (a stream
  // of another device may fork; cuEventRecord refuses an event of another context).
  CUevent e = nullptr;
  {
    detail::ScopedContext origin(*st.ctx);
    e = detail::capture_event(st, "Capture::fork");
  }
  std::unique_lock<std::mutex> graph_lock = st.lock_graph();
  detail::call<detail::Entry::cuEventRecord>(t, "Capture::fork: recording the fork point on the origin stream", e,
                                             st.origin);
  detail::call<detail::Entry::cuStreamWaitEvent>(t, "Capture::fork: making the stream wait for the fork point",
                                                 other.get(), e, 0u);
  st.forked.push_back(other.get());
}

void Capture::join(const Stream& other) {
  detail::CaptureState& st = live(s_, "Capture::join");
  const detail::ContextState& cs = detail::StreamAccess::state(other, "Capture::join");
  const detail::DriverTable& t = *st.drv;
  detail::ScopedContext scope(cs);
  detail::CaptureInfo i = detail::capture_info(t, other.get(), "Capture::join");
  if (i.status == CU_STREAM_CAPTURE_STATUS_NONE || i.id != st.id)
    throw UsageError("Capture::join: the stream does not take part in this capture (fork it first)");
  if (other.get() == st.origin) throw UsageError("Capture::join: the origin stream cannot join itself");
  CUevent e = detail::capture_event(st, "Capture::join");
  std::unique_lock<std::mutex> graph_lock = st.lock_graph();
  detail::call<detail::Entry::cuEventRecord>(t, "Capture::join: recording the joined stream's work", e, other.get());
  detail::call<detail::Entry::cuStreamWaitEvent>(t, "Capture::join: making the origin wait for it", st.origin, e, 0u);
  std::erase(st.forked, other.get());
}

void Capture::keeping(Owners&& owners) {
  detail::ReleaseIfUnused guard(owners);
  detail::CaptureState& st = live(s_, "Capture::keeping");
  if (owners.empty()) return;
  {
    detail::ScopedContext scope(*st.ctx);
    if (detail::capture_status(*st.drv, st.origin, "Capture::keeping") == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
      detail::throw_call_error(*st.drv, detail::Entry::cuStreamIsCapturing, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
                               "Capture::keeping: the capture was invalidated (see docs/capture.md); its graph keeps "
                               "nothing more, and ending it releases what it captured");
  }
  const std::size_t count = owners.size();
  detail::Staged staged = detail::prepare(*st.drv, st.graph, std::move(owners));
  (void)staged;  // the captured graph keeps it
  std::lock_guard lock(st.mu);
  st.anonymous += count;
}

Graph Capture::end() {
  detail::check_calls_allowed("Capture::end");
  std::shared_ptr<detail::CaptureState> st = std::move(s_);
  if (!st) throw UsageError("Capture::end: this Capture is moved from or empty (default-constructed, ended or aborted)");
  CUgraph g = detail::finish(*st, "Capture::end");
  detail::Hierarchy& h = *st->h;
  try {
    h.adopt_root(g);  // from here the hierarchy owns the graph
  } catch (...) {
    h.root().graph = nullptr;
    detail::raw<detail::Entry::cuGraphDestroy>(*st->drv, g);
    detail::free_records(*st);
    throw;
  }
  try {
    detail::order_captured(*st, g);
  } catch (...) {
    detail::free_records(*st);
    throw;  // the graph goes with the hierarchy, and its owners with it
  }
  {
    std::lock_guard lock(st->mu);
    st->ledger.publish_into(h.root(), h);  // the hierarchy is not shared yet: no lock to publish under
  }
  return detail::GraphAccess::make_graph(detail::context_from(st->ctx), st->h);
}

// ------------------------------------------------------------------ Stream's event operations

void Stream::record(const Event& event) const {
  const detail::ContextState& cs = state("Stream::record");
  {
    detail::ScopedContext scope(cs);
    detail::call<detail::Entry::cuEventRecord>(*cs.table, "Stream::record: recording an event", event.get(), get());
  }
  detail::keep_on_capture(*this, Owners{event}, "Stream::record");
}

Node<EventRecordNode> Stream::record_external(const Event& event) const {
  const detail::ContextState& cs = state("Stream::record_external");
  Spec<EventRecordNode> spec(detail::What{"Stream::record_external"}, event);
  return detail::enqueue_as(*this, cs, spec, "Stream::record_external");
}

Node<EventWaitNode> Stream::wait_external(const Event& event) const {
  const detail::ContextState& cs = state("Stream::wait_external");
  Spec<EventWaitNode> spec(detail::What{"Stream::wait_external"}, event);
  return detail::enqueue_as(*this, cs, spec, "Stream::wait_external");
}

void Stream::wait(const Event& event) const {
  const detail::ContextState& cs = state("Stream::wait");
  {
    detail::ScopedContext scope(cs);
    detail::call<detail::Entry::cuStreamWaitEvent>(*cs.table, "Stream::wait: waiting for an event", get(), event.get(),
                                                   0u);
  }
  detail::keep_on_capture(*this, Owners{event}, "Stream::wait");
}

}  // namespace tether
