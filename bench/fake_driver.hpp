// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Fake driver entry points for measuring tether's own CPU cost (bench/overhead, bench/instructions;
// docs/performance.md). The simulator's table is opened as usual, then the entry points on the
// measured paths are replaced by fakes of trivial cost that still keep a small, consistent model of
// what the driver would hold:
// - a graph keeps its nodes (type and dependencies, in creation order) and the user-object
//   references it holds; an executable copies its source's references; a clone copies nodes and
//   references, and finds a node's copy by its index;
// - a stream capture keeps its graph and its dependency set: a captured cuLaunchKernel appends a
//   kernel node after the set and makes it the set, cuGraphAddNode into the capturing graph adds a
//   node like any other add, cuStreamUpdateCaptureDependencies sets (or extends) the set, and
//   cuStreamGetCaptureInfo reports it; so identifying a captured node by reading the graph and
//   adding it directly both see a truthful graph;
// - a user object is a small struct with an atomic reference count whose destructor runs when the
//   count reaches zero (synchronously, inside the releasing call).
// Every other entry point still goes to the simulator, through a guard: while `strict(true)` is in
// force, calling one aborts the program naming it (a measured path that reaches an un-faked entry
// point would otherwise measure the simulator, or fail obscurely on a fake handle).
//
// The fakes count their own calls, per entry point, on a thread that `counting(true)` marks (the
// measuring thread), so the driver calls per node are exact. Their names share the namespace
// `fake_entry::` (bench/instructions.sh excludes everything under them from tether's counts with
// callgrind's --toggle-collect='fake_entry::*', switching it back on only inside tether's own
// user-object destructors); helpers live elsewhere, because a fake that called another function of
// that namespace would toggle collection back on.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

#include "tether.hpp"

namespace fake_model {

using tether::detail::Entry;
using tether::detail::entry_count;

// ------------------------------------------------------------------------------ call accounting
inline thread_local bool t_counting = false;  // this thread's calls are counted
inline thread_local int t_depth = 0;          // fakes active on this thread (nesting is refused)
inline std::array<std::uint64_t, entry_count> g_calls{};
inline std::atomic<bool> g_strict{false};

// Entered by every fake: counts the call and marks the thread as inside the driver.
struct Enter {
  explicit Enter(Entry e) {
    // A fake inside a fake (a destructor callback calling the driver) would break the exclusion of
    // fake cost under callgrind; the CUDA rules forbid it too (user-object destructors may not call
    // CUDA), so it is an error.
    if (t_depth++ != 0) {
      std::fprintf(stderr, "FATAL fake driver: %s entered inside another fake entry point\n",
                   std::string(tether::detail::entry_name(e)).c_str());
      std::abort();
    }
    if (t_counting) ++g_calls[tether::detail::index(e)];
  }
  ~Enter() { --t_depth; }
  Enter(const Enter&) = delete;
  Enter& operator=(const Enter&) = delete;
};

inline void reset_calls() {
  g_calls.fill(0);
}
inline std::uint64_t total_calls() {
  std::uint64_t s = 0;
  for (std::uint64_t c : g_calls) s += c;
  return s;
}
/// Counts this thread's calls into the fakes from now on (or stops).
inline void counting(bool on) {
  t_counting = on;
}
/// Makes a call to an un-faked entry point fatal (or lets it reach the simulator again).
inline void strict(bool on) {
  g_strict.store(on, std::memory_order_relaxed);
}

// ------------------------------------------------------------------------------ the model
struct UserObject {
  void* ptr;
  CUhostFn destroy;
  // Atomic: executables and graphs are destroyed on tether's reclaimer, concurrently with the
  // measuring thread.
  std::atomic<unsigned> refs;
  std::size_t slot = 0;  // where the graph that retained it last keeps it: most releases are O(1)
};

struct Graph;
struct Node {
  Graph* graph;
  std::size_t index;  // creation order in its graph; the same index in a clone
  CUgraphNodeType type;
  bool alive = true;
  std::size_t ndeps = 0;
  CUgraphNode dep0 = nullptr;     // the first dependency (chains need no allocation)
  std::vector<CUgraphNode> more;  // the others
  CUgraphNode dep(std::size_t i) const { return i == 0 ? dep0 : more[i - 1]; }
};

struct Graph {
  static constexpr std::size_t kChunk = 512;
  std::vector<std::unique_ptr<Node[]>> chunks;  // node storage, stable addresses
  std::vector<Node*> nodes;                     // every node ever added, by index
  std::size_t alive = 0;
  std::vector<UserObject*> held;  // one entry per reference the graph holds
  const Graph* origin = nullptr;  // the graph this one was cloned from
  bool exec = false;

  Node* add(CUgraphNodeType type, const CUgraphNode* deps, std::size_t n) {
    const std::size_t i = nodes.size();
    if (i % kChunk == 0) chunks.push_back(std::make_unique<Node[]>(kChunk));
    Node* x = &chunks.back()[i % kChunk];
    x->graph = this;
    x->index = i;
    x->type = type;
    x->ndeps = n;
    if (n) x->dep0 = deps[0];
    if (n > 1) x->more.assign(deps + 1, deps + n);
    nodes.push_back(x);
    ++alive;
    return x;
  }
  void hold(UserObject* u) {
    u->slot = held.size();
    held.push_back(u);
  }
  bool unhold(UserObject* u) {
    std::size_t s = u->slot;
    if (s >= held.size() || held[s] != u) {  // retained by several graphs since: search
      s = 0;
      while (s < held.size() && held[s] != u) ++s;
      if (s == held.size()) return false;
    }
    held[s] = held.back();
    held[s]->slot = s;
    held.pop_back();
    return true;
  }
};

inline Graph* graph_of(CUgraph g) {
  return reinterpret_cast<Graph*>(g);
}
inline Graph* graph_of(CUgraphExec e) {
  return reinterpret_cast<Graph*>(e);
}
inline Node* node_of(CUgraphNode n) {
  return reinterpret_cast<Node*>(n);
}
inline CUgraphNode handle(Node* n) {
  return reinterpret_cast<CUgraphNode>(n);
}
inline CUgraph handle(Graph* g) {
  return reinterpret_cast<CUgraph>(g);
}

inline void drop(UserObject* u, unsigned n) {
  if (u->refs.fetch_sub(n, std::memory_order_acq_rel) == n) {
    u->destroy(u->ptr);
    delete u;
  }
}
inline void destroy_graph(Graph* g) {
  for (UserObject* u : g->held) drop(u, 1);
  delete g;
}
inline bool deps_in(const Graph* g, const CUgraphNode* deps, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (!deps[i] || node_of(deps[i])->graph != g || !node_of(deps[i])->alive) return false;
  return true;
}
// The driver's convention for list queries: with no array, the count; with one, up to *n entries
// (the rest of the array nulled) and the count written.
inline void fill_list(CUgraphNode* out, std::size_t* n, std::size_t have, auto&& at) {
  if (!out) {
    *n = have;
    return;
  }
  const std::size_t k = have < *n ? have : *n;
  for (std::size_t i = 0; i < k; ++i) out[i] = at(i);
  for (std::size_t i = k; i < *n; ++i) out[i] = nullptr;
  *n = k;
}

// One stream capture (the benchmarks capture one stream at a time: a linear search is enough).
struct Capture {
  CUstream stream;
  Graph* graph;
  std::uint64_t id;
  std::vector<CUgraphNode> deps;           // the capture dependency set
  std::vector<CUgraphEdgeData> edge_data;  // its edges' data: all default
};
inline std::vector<Capture> g_captures;
inline std::uint64_t g_next_capture_id = 1;
inline Capture* capture_of(CUstream s) {
  for (Capture& c : g_captures)
    if (c.stream == s) return &c;
  return nullptr;
}

// What the fakes answer for kernel parameters read back (tether's undo snapshot of an update): every
// argument slot points at one pointer-sized value.
inline float* g_arg = nullptr;
inline std::array<void*, 16> g_args = [] {
  std::array<void*, 16> a{};
  for (void*& p : a) p = &g_arg;
  return a;
}();
// The context made current at the start stays current (the real query costs about 8 ns on the
// H200, graph_bench's DRIVER line; the simulator's costs more and is not what is measured here).
inline CUcontext g_current = nullptr;
// Why: the fake cuCtxGetCurrent says a context is current everywhere, so tether does not make one
// current on the reclaimer, and the simulator's cuMemFreeAsync (which needs one for the per-thread
// stream) would refuse tether's releases there; the measured operations never free, so the
// simulator's cuMemFree stands in, with the context made current in the simulator first.
inline decltype(std::declval<tether::detail::DriverTable>().get<Entry::cuMemFree>()) g_sim_free = nullptr;
inline decltype(std::declval<tether::detail::DriverTable>().get<Entry::cuCtxSetCurrent>()) g_sim_set_current =
    nullptr;

// The guard in front of an un-faked (simulator) entry point.
template <Entry E, class F = typename tether::detail::EntryTraits<E>::type>
struct Guard;
template <Entry E, class... A>
struct Guard<E, CUresult (*)(A...)> {
  static inline CUresult (*orig)(A...) = nullptr;
  static CUresult fn(A... a) {
    if (g_strict.load(std::memory_order_relaxed)) {
      std::fprintf(stderr,
                   "FATAL fake driver: %s is not faked, and a measured path called it (add a fake to "
                   "bench/fake_driver.hpp)\n",
                   std::string(tether::detail::entry_name(E)).c_str());
      std::abort();
    }
    return orig(a...);
  }
};

}  // namespace fake_model

// -------------------------------------------------------------------------------- the entry points
namespace fake_entry {

using fake_model::Enter;
using fake_model::Entry;
using fake_model::graph_of;
using fake_model::handle;
using fake_model::node_of;

inline CUresult graph_create(CUgraph* g, unsigned) {
  Enter e(Entry::cuGraphCreate);
  *g = handle(new fake_model::Graph);
  return CUDA_SUCCESS;
}
inline CUresult graph_destroy(CUgraph g) {
  Enter e(Entry::cuGraphDestroy);
  fake_model::destroy_graph(graph_of(g));
  return CUDA_SUCCESS;
}
inline CUresult add_kernel_node(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, std::size_t n,
                                const CUDA_KERNEL_NODE_PARAMS*) {
  Enter e(Entry::cuGraphAddKernelNode);
  if (!fake_model::deps_in(graph_of(g), deps, n)) return CUDA_ERROR_INVALID_VALUE;
  *out = handle(graph_of(g)->add(CU_GRAPH_NODE_TYPE_KERNEL, deps, n));
  return CUDA_SUCCESS;
}
// tether adds through the generic entry point, also into a capturing graph (at the capture's
// dependencies): the node is the same kind of node either way.
inline CUresult add_node(CUgraphNode* out, CUgraph g, const CUgraphNode* deps, const CUgraphEdgeData*,
                         std::size_t n, CUgraphNodeParams* p) {
  Enter e(Entry::cuGraphAddNode);
  if (!fake_model::deps_in(graph_of(g), deps, n)) return CUDA_ERROR_INVALID_VALUE;
  *out = handle(graph_of(g)->add(p->type, deps, n));
  return CUDA_SUCCESS;
}
inline CUresult destroy_node(CUgraphNode n) {
  Enter e(Entry::cuGraphDestroyNode);
  fake_model::Node* x = node_of(n);
  if (!x->alive) return CUDA_ERROR_INVALID_VALUE;
  x->alive = false;
  --x->graph->alive;
  return CUDA_SUCCESS;
}
inline CUresult node_get_type(CUgraphNode n, CUgraphNodeType* t) {
  Enter e(Entry::cuGraphNodeGetType);
  *t = node_of(n)->type;
  return CUDA_SUCCESS;
}
inline CUresult node_get_dependencies(CUgraphNode n, CUgraphNode* deps, CUgraphEdgeData* edges,
                                      std::size_t* count) {
  Enter e(Entry::cuGraphNodeGetDependencies);
  const fake_model::Node* x = node_of(n);
  const std::size_t want = *count;
  fake_model::fill_list(deps, count, x->ndeps, [x](std::size_t i) { return x->dep(i); });
  if (deps && edges)
    for (std::size_t i = 0; i < want; ++i) edges[i] = CUgraphEdgeData{};
  return CUDA_SUCCESS;
}
inline CUresult graph_get_nodes(CUgraph g, CUgraphNode* out, std::size_t* count) {
  Enter e(Entry::cuGraphGetNodes);
  const fake_model::Graph* f = graph_of(g);
  if (f->alive == f->nodes.size()) {
    fake_model::fill_list(out, count, f->alive, [f](std::size_t i) { return handle(f->nodes[i]); });
    return CUDA_SUCCESS;
  }
  std::vector<CUgraphNode> live;  // after removals only (no measured path removes)
  for (fake_model::Node* x : f->nodes)
    if (x->alive) live.push_back(handle(x));
  fake_model::fill_list(out, count, live.size(), [&live](std::size_t i) { return live[i]; });
  return CUDA_SUCCESS;
}
inline CUresult node_set_params(CUgraphNode, CUgraphNodeParams*) {
  Enter e(Entry::cuGraphNodeSetParams);
  return CUDA_SUCCESS;
}
inline CUresult kernel_node_set_params(CUgraphNode, const CUDA_KERNEL_NODE_PARAMS*) {
  Enter e(Entry::cuGraphKernelNodeSetParams);
  return CUDA_SUCCESS;
}
inline CUresult kernel_node_get_params(CUgraphNode, CUDA_KERNEL_NODE_PARAMS* p) {
  Enter e(Entry::cuGraphKernelNodeGetParams);
  *p = {};
  p->gridDimX = p->gridDimY = p->gridDimZ = 1;
  p->blockDimX = p->blockDimY = p->blockDimZ = 1;
  p->kernelParams = fake_model::g_args.data();
  return CUDA_SUCCESS;
}
inline CUresult graph_clone(CUgraph* out, CUgraph g) {
  Enter e(Entry::cuGraphClone);
  const fake_model::Graph* src = graph_of(g);
  auto* c = new fake_model::Graph;
  c->origin = src;
  c->nodes.reserve(src->nodes.size());
  std::vector<CUgraphNode> deps;
  for (const fake_model::Node* x : src->nodes) {
    deps.clear();
    for (std::size_t i = 0; i < x->ndeps; ++i) deps.push_back(handle(c->nodes[node_of(x->dep(i))->index]));
    fake_model::Node* y = c->add(x->type, deps.data(), deps.size());
    if (!x->alive) {
      y->alive = false;
      --c->alive;
    }
  }
  // A clone holds references of its own to the user objects the original holds (driver fact 3a).
  c->held.reserve(src->held.size());
  for (fake_model::UserObject* u : src->held) {
    u->refs.fetch_add(1, std::memory_order_relaxed);
    c->held.push_back(u);
  }
  *out = handle(c);
  return CUDA_SUCCESS;
}
inline CUresult node_find_in_clone(CUgraphNode* out, CUgraphNode original, CUgraph clone) {
  Enter e(Entry::cuGraphNodeFindInClone);
  const fake_model::Graph* c = graph_of(clone);
  const fake_model::Node* x = node_of(original);
  if (c->origin != x->graph || x->index >= c->nodes.size()) return CUDA_ERROR_INVALID_VALUE;
  *out = handle(c->nodes[x->index]);
  return CUDA_SUCCESS;
}
inline CUresult user_object_create(CUuserObject* out, void* ptr, CUhostFn destroy, unsigned initial,
                                   unsigned) {
  Enter e(Entry::cuUserObjectCreate);
  *out = reinterpret_cast<CUuserObject>(new fake_model::UserObject{ptr, destroy, initial});
  return CUDA_SUCCESS;
}
inline CUresult user_object_release(CUuserObject u, unsigned n) {
  Enter e(Entry::cuUserObjectRelease);
  fake_model::drop(reinterpret_cast<fake_model::UserObject*>(u), n);
  return CUDA_SUCCESS;
}
inline CUresult graph_retain_user_object(CUgraph g, CUuserObject u, unsigned n, unsigned flags) {
  Enter e(Entry::cuGraphRetainUserObject);
  auto* f = reinterpret_cast<fake_model::UserObject*>(u);
  if (!(flags & CU_GRAPH_USER_OBJECT_MOVE)) f->refs.fetch_add(n, std::memory_order_relaxed);
  for (unsigned i = 0; i < n; ++i) graph_of(g)->hold(f);
  return CUDA_SUCCESS;
}
inline CUresult graph_release_user_object(CUgraph g, CUuserObject u, unsigned n) {
  Enter e(Entry::cuGraphReleaseUserObject);
  auto* f = reinterpret_cast<fake_model::UserObject*>(u);
  for (unsigned i = 0; i < n; ++i)
    if (!graph_of(g)->unhold(f)) return CUDA_ERROR_INVALID_VALUE;
  fake_model::drop(f, n);
  return CUDA_SUCCESS;
}
inline CUresult instantiate(CUgraphExec* out, CUgraph g, unsigned long long) {
  Enter e(Entry::cuGraphInstantiateWithFlags);
  // CUDA copies the source's references into the executable: the fake holds a reference to each
  // user object the source holds.
  auto* x = new fake_model::Graph;
  x->exec = true;
  x->origin = graph_of(g);
  x->held.reserve(graph_of(g)->held.size());
  for (fake_model::UserObject* u : graph_of(g)->held) {
    u->refs.fetch_add(1, std::memory_order_relaxed);
    x->held.push_back(u);
  }
  *out = reinterpret_cast<CUgraphExec>(x);
  return CUDA_SUCCESS;
}
inline CUresult exec_destroy(CUgraphExec x) {
  Enter e(Entry::cuGraphExecDestroy);
  fake_model::destroy_graph(graph_of(x));
  return CUDA_SUCCESS;
}
// A whole update the fake always accepts: the executable takes the source's references and
// drops its own, as CUDA does.
inline CUresult exec_update(CUgraphExec x, CUgraph g, CUgraphExecUpdateResultInfo* info) {
  Enter e(Entry::cuGraphExecUpdate);
  if (info) *info = CUgraphExecUpdateResultInfo{CU_GRAPH_EXEC_UPDATE_SUCCESS, nullptr, nullptr};
  fake_model::Graph* ex = graph_of(x);
  std::vector<fake_model::UserObject*> old = std::move(ex->held);
  ex->held.clear();
  ex->held.reserve(graph_of(g)->held.size());
  for (fake_model::UserObject* u : graph_of(g)->held) {
    u->refs.fetch_add(1, std::memory_order_relaxed);
    ex->held.push_back(u);
  }
  for (fake_model::UserObject* u : old) fake_model::drop(u, 1);
  ex->origin = graph_of(g);
  return CUDA_SUCCESS;
}
// Every edge of the graph's live nodes, in creation order of the dependent nodes.
inline CUresult graph_get_edges(CUgraph g, CUgraphNode* from, CUgraphNode* to, CUgraphEdgeData* data,
                                std::size_t* count) {
  Enter e(Entry::cuGraphGetEdges);
  const fake_model::Graph* f = graph_of(g);
  std::size_t have = 0;
  for (const fake_model::Node* x : f->nodes)
    if (x->alive) have += x->ndeps;
  if (!from) {
    *count = have;
    return CUDA_SUCCESS;
  }
  std::size_t k = 0;
  for (const fake_model::Node* x : f->nodes)
    for (std::size_t i = 0; x->alive && i < x->ndeps && k < *count; ++i, ++k) {
      from[k] = x->dep(i);
      to[k] = handle(const_cast<fake_model::Node*>(x));
      if (data) data[k] = CUgraphEdgeData{};
    }
  *count = k;
  return CUDA_SUCCESS;
}
// No attribute was ever set on a fake node: every one reads its default (zero).
inline CUresult kernel_node_get_attribute(CUgraphNode, CUkernelNodeAttrID, CUkernelNodeAttrValue* v) {
  Enter e(Entry::cuGraphKernelNodeGetAttribute);
  *v = CUkernelNodeAttrValue{};
  return CUDA_SUCCESS;
}
inline CUresult exec_node_set_params(CUgraphExec, CUgraphNode, CUgraphNodeParams*) {
  Enter e(Entry::cuGraphExecNodeSetParams);
  return CUDA_SUCCESS;
}
inline CUresult exec_kernel_node_set_params(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS*) {
  Enter e(Entry::cuGraphExecKernelNodeSetParams);
  return CUDA_SUCCESS;
}
inline CUresult ctx_get_current(CUcontext* c) {
  Enter e(Entry::cuCtxGetCurrent);
  *c = fake_model::g_current;
  return CUDA_SUCCESS;
}
inline CUresult mem_free_async(CUdeviceptr p, CUstream) {
  Enter e(Entry::cuMemFreeAsync);
  if (CUresult r = fake_model::g_sim_set_current(fake_model::g_current); r != CUDA_SUCCESS) return r;
  return fake_model::g_sim_free(p);
}

// Stream capture.
inline CUresult stream_begin_capture(CUstream s, CUstreamCaptureMode) {
  Enter e(Entry::cuStreamBeginCapture);
  if (fake_model::capture_of(s)) return CUDA_ERROR_ILLEGAL_STATE;
  fake_model::g_captures.push_back({s, new fake_model::Graph, fake_model::g_next_capture_id++, {}, {}});
  return CUDA_SUCCESS;
}
inline CUresult stream_end_capture(CUstream s, CUgraph* out) {
  Enter e(Entry::cuStreamEndCapture);
  fake_model::Capture* c = fake_model::capture_of(s);
  if (!c) return CUDA_ERROR_ILLEGAL_STATE;
  *out = handle(c->graph);
  *c = std::move(fake_model::g_captures.back());
  fake_model::g_captures.pop_back();
  return CUDA_SUCCESS;
}
inline CUresult stream_is_capturing(CUstream s, CUstreamCaptureStatus* status) {
  Enter e(Entry::cuStreamIsCapturing);
  *status = fake_model::capture_of(s) ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
inline CUresult stream_get_capture_info(CUstream s, CUstreamCaptureStatus* status, cuuint64_t* id,
                                        CUgraph* graph, const CUgraphNode** deps,
                                        const CUgraphEdgeData** edges, std::size_t* n) {
  Enter e(Entry::cuStreamGetCaptureInfo);
  fake_model::Capture* c = fake_model::capture_of(s);
  *status = c ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  if (!c) return CUDA_SUCCESS;  // the other outputs are left as they are, as the driver does
  if (id) *id = c->id;
  if (graph) *graph = handle(c->graph);
  if (deps) *deps = c->deps.data();
  if (edges) {  // every edge is a default (zeroed) edge
    c->edge_data.resize(c->deps.size());
    *edges = c->edge_data.data();
  }
  if (n) *n = c->deps.size();
  return CUDA_SUCCESS;
}
inline CUresult stream_update_capture_dependencies(CUstream s, CUgraphNode* deps, const CUgraphEdgeData*,
                                                   std::size_t n, unsigned flags) {
  Enter e(Entry::cuStreamUpdateCaptureDependencies);
  fake_model::Capture* c = fake_model::capture_of(s);
  if (!c) return CUDA_ERROR_ILLEGAL_STATE;
  if (!fake_model::deps_in(c->graph, deps, n)) return CUDA_ERROR_INVALID_VALUE;
  if (flags == CU_STREAM_SET_CAPTURE_DEPENDENCIES)
    c->deps.assign(deps, deps + n);
  else if (flags == CU_STREAM_ADD_CAPTURE_DEPENDENCIES)
    c->deps.insert(c->deps.end(), deps, deps + n);
  else
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}
inline CUresult thread_exchange_capture_mode(CUstreamCaptureMode* mode) {
  Enter e(Entry::cuThreadExchangeStreamCaptureMode);
  static thread_local CUstreamCaptureMode current = CU_STREAM_CAPTURE_MODE_GLOBAL;
  std::swap(current, *mode);
  return CUDA_SUCCESS;
}
inline CUresult launch_kernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, CUstream s, void**, void**) {
  Enter e(Entry::cuLaunchKernel);
  if (fake_model::Capture* c = fake_model::capture_of(s)) {
    fake_model::Node* x = c->graph->add(CU_GRAPH_NODE_TYPE_KERNEL, c->deps.data(), c->deps.size());
    c->deps.assign(1, handle(x));
  }
  return CUDA_SUCCESS;  // outside capture: nothing runs
}

}  // namespace fake_entry

namespace fake_model {

/// Replaces the entry points on the measured paths with the fakes, and puts a guard in front of
/// every other one (see `strict`). `current` is what cuCtxGetCurrent reports from now on.
inline void install(tether::detail::DriverTable& t, CUcontext current) {
  using namespace fake_entry;
  g_current = current;
  g_sim_free = t.get<Entry::cuMemFree>();
  g_sim_set_current = t.get<Entry::cuCtxSetCurrent>();
  const std::array<void*, entry_count> before = t.fn;
  t.set<Entry::cuMemFreeAsync>(&mem_free_async);
  t.set<Entry::cuGraphCreate>(&graph_create);
  t.set<Entry::cuGraphDestroy>(&graph_destroy);
  t.set<Entry::cuGraphAddKernelNode>(&add_kernel_node);
  t.set<Entry::cuGraphAddNode>(&add_node);
  t.set<Entry::cuGraphDestroyNode>(&destroy_node);
  t.set<Entry::cuGraphNodeGetType>(&node_get_type);
  t.set<Entry::cuGraphNodeGetDependencies>(&node_get_dependencies);
  t.set<Entry::cuGraphGetNodes>(&graph_get_nodes);
  t.set<Entry::cuGraphNodeSetParams>(&node_set_params);
  t.set<Entry::cuGraphKernelNodeSetParams>(&kernel_node_set_params);
  t.set<Entry::cuGraphKernelNodeGetParams>(&kernel_node_get_params);
  t.set<Entry::cuGraphClone>(&graph_clone);
  t.set<Entry::cuGraphNodeFindInClone>(&node_find_in_clone);
  t.set<Entry::cuUserObjectCreate>(&user_object_create);
  t.set<Entry::cuUserObjectRelease>(&user_object_release);
  t.set<Entry::cuGraphRetainUserObject>(&graph_retain_user_object);
  t.set<Entry::cuGraphReleaseUserObject>(&graph_release_user_object);
  t.set<Entry::cuGraphInstantiateWithFlags>(&instantiate);
  t.set<Entry::cuGraphExecDestroy>(&exec_destroy);
  t.set<Entry::cuGraphExecNodeSetParams>(&exec_node_set_params);
  t.set<Entry::cuGraphExecUpdate>(&exec_update);
  t.set<Entry::cuGraphGetEdges>(&graph_get_edges);
  t.set<Entry::cuGraphKernelNodeGetAttribute>(&kernel_node_get_attribute);
  t.set<Entry::cuGraphExecKernelNodeSetParams>(&exec_kernel_node_set_params);
  t.set<Entry::cuCtxGetCurrent>(&ctx_get_current);
  t.set<Entry::cuStreamBeginCapture>(&stream_begin_capture);
  t.set<Entry::cuStreamEndCapture>(&stream_end_capture);
  t.set<Entry::cuStreamIsCapturing>(&stream_is_capturing);
  t.set<Entry::cuStreamGetCaptureInfo>(&stream_get_capture_info);
  t.set<Entry::cuStreamUpdateCaptureDependencies>(&stream_update_capture_dependencies);
  t.set<Entry::cuLaunchKernel>(&launch_kernel);
  t.set<Entry::cuThreadExchangeStreamCaptureMode>(&thread_exchange_capture_mode);
  // Everything not replaced above keeps the simulator's function, behind a guard.
#define TETHER_ENTRY(name, ver)                                                                 \
  if (t.fn[tether::detail::index(Entry::name)] == before[tether::detail::index(Entry::name)]) { \
    Guard<Entry::name>::orig = t.get<Entry::name>();                                            \
    t.set<Entry::name>(&Guard<Entry::name>::fn, t.state[tether::detail::index(Entry::name)]);   \
  }
#include "driver/entry_points.inc"
#undef TETHER_ENTRY
}

}  // namespace fake_model
