// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Simulator: graph definitions. Nodes of every kind, edges, parameters, clone and
// cuGraphNodeFindInClone, child graphs (clone and move), conditional bodies, user-object
// references held by graphs.
#include <fstream>

#include "state.hpp"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TETHER_SIM_ASAN
#endif
#elif defined(__SANITIZE_ADDRESS__)
#define TETHER_SIM_ASAN
#endif
#ifdef TETHER_SIM_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace tether::sim::detail {

namespace {


struct Registry {
  std::unordered_set<Graph*> graphs;
  std::unordered_set<Node*> nodes;  // nodes (live and destroyed) of live graphs
  std::unordered_map<CUgraphConditionalHandle, CondHandle*> conds;
  std::uint64_t next_cond = 0x1000;
};
Registry& reg() { return immortal<Registry>(); }

// Why graphs and nodes come from free lists: the driver hands the handle value of a destroyed graph
// (and of the nodes that went with it) to the next one it makes, every time (capture_facts c10r:
// 19 of 19 cycles). A map keyed by a handle that outlives its object must fail in tests too, so
// the most recently freed storage is reused first. Destroyed nodes of a live graph are not freed
// (they stay as zombies, so that a stale node handle is recognised), nor are user objects.
template <class T>
class Pool {
 public:
  T* make() {
    if (free_.empty()) return new T;
    void* p = free_.back();
    free_.pop_back();
    unpoison(p);
    return new (p) T;
  }
  void drop(T* x) {
    x->~T();
    poison(x);
    free_.push_back(x);
  }

 private:
  // Under AddressSanitizer a freed object stays poisoned until it is handed out again, so a stale
  // pointer inside the simulator is still reported.
  static void poison([[maybe_unused]] void* p) {
#ifdef TETHER_SIM_ASAN
    __asan_poison_memory_region(p, sizeof(T));
#endif
  }
  static void unpoison([[maybe_unused]] void* p) {
#ifdef TETHER_SIM_ASAN
    __asan_unpoison_memory_region(p, sizeof(T));
#endif
  }
  std::vector<void*> free_;
};
Pool<Graph>& graph_pool() { return immortal<Pool<Graph>>(); }
Pool<Node>& node_pool() { return immortal<Pool<Node>>(); }
Node* new_node() { return node_pool().make(); }
void free_node(Node* n) { node_pool().drop(n); }

using Released = std::vector<std::pair<UserObj*, std::uint32_t>>;

}  // namespace

std::recursive_mutex& graph_mutex() { return immortal<std::recursive_mutex>(); }

Graph* graph_of(CUgraph h) {
  Graph* g = reinterpret_cast<Graph*>(h);
  return g && reg().graphs.count(g) ? g : nullptr;
}
Node* node_of(CUgraphNode h) {
  Node* n = reinterpret_cast<Node*>(h);
  return n && reg().nodes.count(n) ? n : nullptr;
}
CUgraph handle(Graph* g) { return reinterpret_cast<CUgraph>(g); }
CUgraphNode handle(Node* n) { return reinterpret_cast<CUgraphNode>(n); }
CondHandle* cond_of(CUgraphConditionalHandle h) {
  auto it = reg().conds.find(h);
  return it == reg().conds.end() ? nullptr : it->second;
}

Graph* new_graph() {
  Graph* g = graph_pool().make();
  reg().graphs.insert(g);
  return g;
}

void release_collected(Released& released, std::string_view entry) {
  for (auto& [u, n] : released) uo_release(u, n, entry);
  released.clear();
}

namespace {

std::vector<Graph*> nested(const Node* n) {
  if (auto* c = std::get_if<ChildP>(&n->params)) return {c->graph};
  if (auto* c = std::get_if<CondP>(&n->params)) return c->bodies;
  return {};
}

bool is_ancestor(const Graph* maybe, const Graph* g) {
  for (const Graph* x = g; x; x = x->owner ? x->owner->graph : nullptr)
    if (x == maybe) return true;
  return false;
}

bool in_conditional_body(const Graph* g) {
  for (const Graph* x = g; x && x->owner; x = x->owner->graph)
    if (x->owner->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) return true;
  return false;
}

// Destroys a node's nested graphs (child graph / conditional bodies). Graph memory is not freed:
// its address stays reserved, and what a launch left allocated stays allocated until freed
// (cuMemFreeAsync, cuMemFree), as on the driver.
void drop_node_payload(Node* n, Released& released) {
  for (Graph* sub : nested(n)) destroy_graph(sub, released);
}

void unlink(Node* n) {
  for (Node* d : n->deps) std::erase(d->dependents, n);
  for (Node* d : n->dependents) std::erase(d->deps, n);
  n->deps.clear();
  n->dependents.clear();
}

}  // namespace

namespace {

// Frees the nodes of `g` and everything they own, and hands its references to `released`.
void empty_graph(Graph* g, Released& released) {
  for (Node* n : g->nodes) drop_node_payload(n, released);
  for (Node* n : g->nodes) reg().nodes.erase(n), free_node(n);
  for (Node* n : g->zombies) reg().nodes.erase(n), free_node(n);
  g->nodes.clear();
  g->zombies.clear();
  for (auto& [u, c] : g->refs) released.emplace_back(u, c);
  g->refs.clear();
  // Why the handles' state is kept: executables made from the graph (and their launches in flight)
  // go on using it after the graph is destroyed, as on the real driver (docs/design/driver-facts.md 8b launches an
  // executable whose graph is gone). It is only detached, so that no new node can use the handle.
  for (CUgraphConditionalHandle h : g->handles)
    if (CondHandle* c = cond_of(h)) c->graph = nullptr;
  g->handles.clear();
  g->clone_map.clear();
}

}  // namespace

void destroy_graph(Graph* g, Released& released) {
  empty_graph(g, released);
  reg().graphs.erase(g);
  graph_pool().drop(g);
}

void discard_capture_target(Graph* g, Released& released) {
  if (!g->owner) {
    destroy_graph(g, released);
    return;
  }
  // Not observed: a failed capture into the embedded graph of a child node or into a conditional
  // body. Modelled conservatively, as the root case as far as the node allows: the graph is emptied,
  // its references released and its handle dead (INVALID_VALUE everywhere), and the owning node
  // keeps the empty object, so that a graph containing it is refused by instantiate, clone and
  // embedding (contains_discarded) instead of running with a body that is gone.
  empty_graph(g, released);
  reg().graphs.erase(g);
  g->discarded = true;
}

bool contains_discarded(const Graph* g) {
  if (g->discarded) return true;
  for (const Node* n : g->nodes)
    for (const Graph* sub : nested(n))
      if (contains_discarded(sub)) return true;
  return false;
}

bool contains_conditional(const Graph* g) {
  for (const Node* n : g->nodes) {
    if (n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) return true;
    for (const Graph* sub : nested(n))
      if (contains_conditional(sub)) return true;
  }
  return false;
}

void collect_refs(const Graph* g, int top_node, std::vector<RefEntry>& out) {
  for (auto& [u, c] : g->refs) out.push_back({u, c, top_node});
  for (std::size_t i = 0; i < g->nodes.size(); ++i) {
    const Node* n = g->nodes[i];
    int top = top_node >= 0 ? top_node : static_cast<int>(i);
    for (const Graph* sub : nested(n)) collect_refs(sub, top, out);
  }
}

Graph* clone_graph(Graph* src, Node* owner) {
  Graph* g = new_graph();
  g->owner = owner;
  std::unordered_map<const Node*, Node*> map;
  for (Node* n : src->nodes) {
    Node* c = new_node();
    c->graph = g;
    c->type = n->type;
    c->params = n->params;
    c->serial = g->next_serial++;
    reg().nodes.insert(c);
    g->nodes.push_back(c);
    map[n] = c;
    g->clone_map[n] = c;
    if (auto* cp = std::get_if<ChildP>(&c->params)) cp->graph = clone_graph(cp->graph, c);
    if (auto* cp = std::get_if<CondP>(&c->params))
      for (Graph*& b : cp->bodies) b = clone_graph(b, c);
  }
  for (Node* n : src->nodes)
    for (Node* d : n->deps) {
      map[n]->deps.push_back(map[d]);
      map[d]->dependents.push_back(map[n]);
    }
  // References are copied with their counts: the copy holds its own.
  for (auto& [u, cnt] : src->refs) {
    g->refs[u] += cnt;
    u->refs.fetch_add(cnt);
  }
  return g;
}

Ctx* kernel_home(const KernelP& k, Ctx* fallback) {
  // A function of a module runs in the module's context (the driver ignores `ctx` when `func` is
  // set); a library kernel or a program's registered kernel in the context the node names.
  if (k.func && k.func->module && k.func->module->ctx) return k.func->module->ctx;
  if (Ctx* c = k.ctx ? ctx_of(k.ctx) : nullptr) return c;
  return fallback;
}

CUresult make_kernel_params(const CUDA_KERNEL_NODE_PARAMS& in, KernelP& out) {
  if (!in.func && !in.kern) return fail(CUDA_ERROR_INVALID_HANDLE, "kernel node without func or kern");
  Function* f = in.func ? function_of(in.func) : function_of(in.kern);
  if (!f) return fail(CUDA_ERROR_INVALID_HANDLE, "the kernel handle is not a function of this driver");
  if (in.gridDimX == 0 || in.gridDimY == 0 || in.gridDimZ == 0 || in.blockDimX == 0 || in.blockDimY == 0 ||
      in.blockDimZ == 0)
    return fail(CUDA_ERROR_INVALID_VALUE, "a grid or block dimension is zero");
  if (in.blockDimX * in.blockDimY * in.blockDimZ > 1024)
    return fail(CUDA_ERROR_INVALID_VALUE, "more than 1024 threads per block");
  const Twin& twin = *f->twin;
  if (in.extra) return fail(CUDA_ERROR_NOT_SUPPORTED, "the simulator does not support 'extra' kernel parameters");
  // Checked against the function's limit when the node (or launch) is made, not later: on the
  // H200 lowering the limit afterwards did not stop the node from instantiating or launching
  // (launch_attr_probe smem/limit_when_checked).
  if (int limit = f->attrs->max_dynamic_shared.load(); in.sharedMemBytes > static_cast<unsigned>(limit))
    return fail(CUDA_ERROR_INVALID_VALUE,
                fmt::format("kernel '{}' asks for {} bytes of dynamic shared memory; its function allows {} "
                            "(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, which cuFuncSetAttribute raises up "
                            "to the device's opt-in maximum of {})",
                            f->name, in.sharedMemBytes, limit, h200::shared_per_block_optin));
  if (!twin.params.empty() && !in.kernelParams)
    return fail(CUDA_ERROR_INVALID_VALUE, fmt::format("kernel '{}' takes {} parameter(s) but kernelParams is NULL",
                                                      f->name, twin.params.size()));
  out.func = f;
  out.grid = {in.gridDimX, in.gridDimY, in.gridDimZ};
  out.block = {in.blockDimX, in.blockDimY, in.blockDimZ};
  out.shared = in.sharedMemBytes;
  out.kern = in.kern;
  out.ctx = in.ctx;
  out.home = kernel_home(out, current_ctx());
  out.args.clear();
  out.offsets.clear();
  for (std::size_t i = 0; i < twin.params.size(); ++i) {
    std::size_t sz = twin.params[i].size;
    std::size_t off = (out.args.size() + 7) / 8 * 8;
    out.args.resize(off + sz);
    if (!in.kernelParams[i]) return fail(CUDA_ERROR_INVALID_VALUE, fmt::format("kernelParams[{}] is NULL", i));
    std::memcpy(out.args.data() + off, in.kernelParams[i], sz);
    out.offsets.push_back(off);
  }
  return CUDA_SUCCESS;
}

namespace {

CUresult check_cluster(const KernelP& k) {
  const std::array<unsigned, 3>& c = k.attrs.cluster;
  if ((c[0] | c[1] | c[2]) == 0) return CUDA_SUCCESS;  // {0,0,0}: no cluster (accepted on the H200)
  static constexpr const char* axis[] = {"x", "y", "z"};
  for (std::size_t i = 0; i < 3; ++i) {
    if (c[i] == 0)
      return fail(CUDA_ERROR_INVALID_CLUSTER_SIZE, fmt::format("cluster dimension {} is 0 while another is not", axis[i]));
    if (k.grid[i] % c[i] != 0)
      return fail(CUDA_ERROR_INVALID_CLUSTER_SIZE,
                  fmt::format("the cluster's {} dimension ({}) does not divide the grid's ({})", axis[i], c[i], k.grid[i]));
  }
  unsigned blocks = c[0] * c[1] * c[2];
  if (blocks > static_cast<unsigned>(h200::portable_cluster) && !k.func->attrs->non_portable_cluster.load())
    return fail(CUDA_ERROR_INVALID_CLUSTER_SIZE,
                fmt::format("a cluster of {} blocks is larger than the portable {}; kernel '{}' allows it after "
                            "cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)",
                            blocks, h200::portable_cluster, k.func->name));
  return CUDA_SUCCESS;
}

CUresult check_cooperative(const KernelP& k) {
  if (!k.attrs.cooperative) return CUDA_SUCCESS;
  std::uint64_t blocks = std::uint64_t{k.grid[0]} * k.grid[1] * k.grid[2];
  std::uint64_t threads = std::uint64_t{k.block[0]} * k.block[1] * k.block[2];
  std::uint64_t limit = coresident_blocks(threads, k.shared);
  if (blocks <= limit) return CUDA_SUCCESS;
  return fail(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
              fmt::format("a cooperative launch of {} blocks of {} threads with {} bytes of dynamic shared memory; at "
                          "most {} such blocks can be resident at once on the simulated H200 ({} SMs)",
                          blocks, threads, k.shared, limit, h200::sms));
}

}  // namespace

CUresult check_kernel_attrs(const KernelP& k) {
  if (CUresult r = check_cluster(k)) return r;
  return check_cooperative(k);
}

CUresult check_kernel_instantiable(const KernelP& k) {
  const std::array<unsigned, 3>& c = k.attrs.cluster;
  unsigned blocks = c[0] * c[1] * c[2];
  if (blocks > static_cast<unsigned>(h200::max_cluster))
    return fail(CUDA_ERROR_INVALID_CLUSTER_SIZE,
                fmt::format("kernel '{}' has a cluster of {} blocks; the H200 runs clusters of at most {}", k.func->name,
                            blocks, h200::max_cluster));
  // Checked against the function's attribute now: on the H200 a 16-block cluster instantiated while
  // non-portable sizes were allowed, and not after they were disallowed again.
  if (blocks > static_cast<unsigned>(h200::portable_cluster) && !k.func->attrs->non_portable_cluster.load())
    return fail(CUDA_ERROR_INVALID_CLUSTER_SIZE,
                fmt::format("kernel '{}' has a cluster of {} blocks, larger than the portable {}, and its function "
                            "does not allow non-portable sizes (CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED)",
                            k.func->name, blocks, h200::portable_cluster));
  return CUDA_SUCCESS;
}

namespace {

bool valid_side(CUmemorytype t, const void* host, CUdeviceptr dev, std::size_t n) {
  switch (t) {
    case CU_MEMORYTYPE_HOST: return host != nullptr;
    case CU_MEMORYTYPE_DEVICE: return classify(static_cast<std::uintptr_t>(dev), n ? n : 1, true) != Range::unknown;
    case CU_MEMORYTYPE_UNIFIED: return dev != 0;
    default: return false;
  }
}

}  // namespace

CUresult make_memcpy_params(const CUDA_MEMCPY3D& in, CUcontext ctx, MemcpyP& out) {
  if (in.WidthInBytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (in.srcMemoryType == CU_MEMORYTYPE_ARRAY || in.dstMemoryType == CU_MEMORYTYPE_ARRAY)
    return fail(CUDA_ERROR_NOT_SUPPORTED, "the simulator does not model CUDA arrays");
  if (!valid_side(in.srcMemoryType, in.srcHost, in.srcDevice, in.WidthInBytes) ||
      !valid_side(in.dstMemoryType, in.dstHost, in.dstDevice, in.WidthInBytes))
    return fail(CUDA_ERROR_INVALID_VALUE, "a memcpy operand is not a valid host pointer or device allocation");
  out.copy = in;
  out.ctx = ctx;
  return CUDA_SUCCESS;
}

CUresult make_memset_params(const CUDA_MEMSET_NODE_PARAMS& in, CUcontext ctx, MemsetP& out) {
  if (in.elementSize != 1 && in.elementSize != 2 && in.elementSize != 4) return CUDA_ERROR_INVALID_VALUE;
  if (in.width == 0 || in.dst == 0) return CUDA_ERROR_INVALID_VALUE;
  if (classify(static_cast<std::uintptr_t>(in.dst), in.width * in.elementSize, true) == Range::unknown)
    return fail(CUDA_ERROR_INVALID_VALUE, "the memset destination is not inside one device allocation");
  out.p = in;
  out.ctx = ctx;
  return CUDA_SUCCESS;
}

CUresult add_node(CUgraphNode* out, Graph* g, const CUgraphNode* deps, std::size_t ndeps, CUgraphNodeType type,
                  Params params, std::string_view entry) {
  if (!out || !g) return CUDA_ERROR_INVALID_VALUE;
  if (ndeps && !deps) return CUDA_ERROR_INVALID_VALUE;
  std::vector<Node*> ds;
  for (std::size_t i = 0; i < ndeps; ++i) {
    Node* d = node_of(deps[i]);
    if (!d) return fail(CUDA_ERROR_INVALID_VALUE, fmt::format("dependency {} is not a node", i));
    if (d->destroyed) {
      record_violation(ViolationKind::destroyed_node_use, entry, "a destroyed node used as a dependency");
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (d->graph != g) return fail(CUDA_ERROR_INVALID_VALUE, "a dependency belongs to another graph");
    if (std::find(ds.begin(), ds.end(), d) != ds.end()) return fail(CUDA_ERROR_INVALID_VALUE, "duplicate dependency");
    ds.push_back(d);
  }
  if ((type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || type == CU_GRAPH_NODE_TYPE_MEM_FREE) && in_conditional_body(g))
    return fail(CUDA_ERROR_INVALID_VALUE, "memory allocation nodes are not allowed in conditional bodies");
  Node* n = new_node();
  n->graph = g;
  n->type = type;
  n->params = std::move(params);
  n->serial = g->next_serial++;
  n->deps = ds;
  for (Node* d : ds) d->dependents.push_back(n);
  g->nodes.push_back(n);
  reg().nodes.insert(n);
  if (auto* c = std::get_if<ChildP>(&n->params)) c->graph->owner = n;
  if (auto* c = std::get_if<CondP>(&n->params))
    for (Graph* b : c->bodies) b->owner = n;
  *out = handle(n);
  return CUDA_SUCCESS;
}

namespace {

using Lock = std::lock_guard<std::recursive_mutex>;

// Resolves a node handle for a parameter call; destroyed nodes are accepted like the real driver
// does (docs/design/driver-facts.md 11w1, 11w2) but recorded as a violation.
Node* param_node(CUgraphNode h, std::string_view entry) {
  Node* n = node_of(h);
  if (n && n->destroyed)
    record_violation(ViolationKind::destroyed_node_use, entry, fmt::format("{} on a destroyed node", entry));
  return n;
}

template <class P>
P* params_of(Node* n) {
  return n ? std::get_if<P>(&n->params) : nullptr;
}

CUresult discarded_refusal() {
  return fail(CUDA_ERROR_INVALID_VALUE,
              "the graph contains a child or conditional body graph that a failed stream capture into it destroyed");
}

// ----------------------------------------------------------------------------- graphs

CUresult sim_cuGraphCreate(CUgraph* out, unsigned flags) {
  TETHER_SIM_ENTER(cuGraphCreate);
  if (!out || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(graph_mutex());
  *out = handle(new_graph());
  return CUDA_SUCCESS;
}

CUresult sim_cuGraphDestroy(CUgraph h) {
  TETHER_SIM_ENTER(cuGraphDestroy);
  Released released;
  // The destruction takes a while on the real driver: an executable of this graph destroyed by
  // another thread in that window is the H200's double free (Graph::destroying_execs).
  std::shared_ptr<std::atomic<int>> window;
  {
    Lock lock(graph_mutex());
    if (Graph* g = graph_of(h)) window = g->destroying;
  }
  if (window) window->fetch_add(1);
  std::this_thread::sleep_for(std::chrono::microseconds(50));
  struct Close {
    std::shared_ptr<std::atomic<int>>& w;
    ~Close() {
      if (w) w->fetch_sub(1);
    }
  } close{window};
  {
    Lock lock(graph_mutex());
    Graph* g = graph_of(h);
    if (!g) return CUDA_ERROR_INVALID_VALUE;
    if (g->owner) return fail(CUDA_ERROR_INVALID_VALUE, "the graph belongs to a child-graph or conditional node");
    // capture_facts c10n: refused, and the capture goes on into the same graph. Not observed for a
    // graph that only contains the capture's graph; refused too, since it would destroy it.
    if (graph_in_capture(g))
      return fail(CUDA_ERROR_ILLEGAL_STATE,
                  "cuGraphDestroy of a graph that an ongoing stream capture is capturing into");
    if (g->destroying_execs->load() > 0)
      record_violation(ViolationKind::concurrent_exec_destroy, "cuGraphDestroy",
                       "cuGraphDestroy of a graph while another thread's cuGraphExecDestroy destroys an executable "
                       "made from it (the real driver double-frees inside libcuda)");
    destroy_graph(g, released);
  }
  // Destructors run here, on the calling thread, after the graph lock is released (2b2).
  release_collected(released, "cuGraphDestroy");
  return CUDA_SUCCESS;
}

CUresult sim_cuGraphClone(CUgraph* out, CUgraph h) {
  TETHER_SIM_ENTER(cuGraphClone);
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(graph_mutex());
  Graph* g = graph_of(h);
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  if (contains_discarded(g)) return discarded_refusal();
  if (contains_conditional(g)) return fail(CUDA_ERROR_NOT_SUPPORTED, "graphs with conditional nodes cannot be cloned");
  *out = handle(clone_graph(g, nullptr));
  return CUDA_SUCCESS;
}

CUresult sim_cuGraphNodeFindInClone(CUgraphNode* out, CUgraphNode orig, CUgraph hclone) {
  TETHER_SIM_ENTER(cuGraphNodeFindInClone);
  if (!out || !orig) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(graph_mutex());
  Graph* c = graph_of(hclone);
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  auto it = c->clone_map.find(reinterpret_cast<const Node*>(orig));
  if (it == c->clone_map.end() || it->second->destroyed) return CUDA_ERROR_INVALID_VALUE;
  *out = handle(it->second);
  return CUDA_SUCCESS;
}

// ----------------------------------------------------------------------------- node creation

CUresult add_child(CUgraphNode* out, Graph* g, const CUgraphNode* deps, std::size_t n, CUgraph hchild, bool move,
                   std::string_view entry) {
  Graph* child = graph_of(hchild);
  if (!child) return CUDA_ERROR_INVALID_VALUE;
  if (child == g || is_ancestor(child, g)) {
    record_violation(ViolationKind::self_child, entry, "a graph added as a child of itself or of its own descendant");
    return fail(CUDA_ERROR_INVALID_VALUE, "a graph cannot contain itself (the real driver crashes)");
  }
  if (move) {
    if (child->owner) return fail(CUDA_ERROR_INVALID_VALUE, "the graph to move is already owned by a node");
    return add_node(out, g, deps, n, CU_GRAPH_NODE_TYPE_GRAPH, Params{ChildP{child}}, entry);
  }
  if (contains_discarded(child)) return discarded_refusal();
  if (contains_conditional(child))
    return fail(CUDA_ERROR_NOT_SUPPORTED, "a graph with conditional nodes cannot be embedded by copy");
  Graph* copy = clone_graph(child, nullptr);
  CUresult r = add_node(out, g, deps, n, CU_GRAPH_NODE_TYPE_GRAPH, Params{ChildP{copy}}, entry);
  if (r != CUDA_SUCCESS) {
    Released released;
    destroy_graph(copy, released);
    // The copy's references were added above; dropping them cannot reach zero (the child holds its own).
    for (auto& [u, c] : released) u->refs.fetch_sub(c);
  }
  return r;
}

CUresult sim_cuGraphAddKernelNode(CUgraphNode* out, CUgraph h, const CUgraphNode* deps, std::size_t n,
                                  const CUDA_KERNEL_NODE_PARAMS* p) {
  TETHER_SIM_ENTER(cuGraphAddKernelNode);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(graph_mutex());
  Graph* g = graph_of(h);
  if (!g || !out) return CUDA_ERROR_INVALID_VALUE;
  KernelP k;
  if (CUresult r = make_kernel_params(*p, k)) return r;
  return add_node(out, g, deps, n, CU_GRAPH_NODE_TYPE_KERNEL, Params{std::move(k)}, "cuGraphAddKernelNode");
}
CUresult sim_cuGraphAddMemcpyNode(CUgraphNode* out, CUgraph h, const CUgraphNode* deps, std::size_t n,
                                  const CUDA_MEMCPY3D* p, CUcontext ctx) {
  TETHER_SIM_ENTER(cuGraphAddMemcpyNode);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(graph_mutex());
  Graph* g = graph_of(h);
  if (!g || !out) return CUDA_ERROR_INVALID_VALUE;
  MemcpyP m;
  if (CUresult r = make_memcpy_params(*p, ctx, m)) return r;
  return add_node(out, g, deps, n, CU_GRAPH_NODE_TYPE_MEMCPY, Params{m}, "cuGraphAddMemcpyNode");
}
CUresult sim_cuGraphAddMemsetNode(CUgraphNode* out, CUgraph h, const CUgraphNode* deps, std::size_t n,
                                  const CUDA_MEMSET_NODE_PARAMS* p, CUcontext ctx) {
  TETHER_SIM_ENTER(cuGraphAddMemsetNode);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(graph_mutex());
  Graph* g = graph_of(h);
  if (!g || !out) return CUDA_ERROR_INVALID_VALUE;
  MemsetP m;
  if (CUresult r = make_memset_params(*p, ctx, m)) return r;
  return add_node(out, g, deps, n, CU_GRAPH_NODE_TYPE_MEMSET, Params{m}, "cuGraphAddMemsetNode");
}
CUresult sim_cuGraphAddHostNode(CUgraphNode* out, CUgraph h, const CUgraphNode* deps, std::size_t n,
                                const CUDA_HOST_NODE_PARAMS* p) {
  TETHER_SIM_ENTER(cuGraphAddHostNode);
  if (!p || !p->fn) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(graph_mutex());
  Graph* g = graph_of(h);
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  return add_node(out, g, deps, n, CU_GRAPH_NODE_TYPE_HOST, Params{HostP{p->fn, p->userData}}, "cuGraphAddHostNode");
}
CUresult sim_cuGraphAddChildGraphNode(CUgraphNode* out, CUgraph h, const CUgraphNode* deps, std::size_t n,
                                      CUgraph child) {
  TETHER_SIM_ENTER(cuGraphAddChildGraphNode);
  Lock lock(graph_mutex());
  Graph* g = graph_of(h);
  if (!g || !out) return CUDA_ERROR_INVALID_VALUE;
  return add_child(out, g, deps, n, child, false, "cuGraphAddChildGraphNode");
}
CUresult sim_cuGraphAddEmptyNode(CUgraphNode* out, CUgraph h, const CUgraphNode* deps, std::size_t n) {
  TETHER_SIM_ENTER(cuGraphAddEmptyNode);
  Lock lock(graph_mutex());
  Graph* g = graph_of(h);
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  return add_node(out, g, deps, n, CU_GRAPH_NODE_TYPE_EMPTY, Params{EmptyP{}}, "cuGraphAddEmptyNode");
}
CUresult add_event_node(CUgraphNode* out, CUgraph h, const CUgraphNode* deps, std::size_t n, CUevent e, bool record,
                        std::string_view entry) {
  Lock lock(graph_mutex());
  Graph* g = graph_of(h);
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  Event* ev = event_of(e);
  if (!ev) return CUDA_ERROR_INVALID_HANDLE;
  if (ev->destroyed) {
    record_violation(ViolationKind::destroyed_event_use, entry, "an event node made with a destroyed event");
    return CUDA_ERROR_INVALID_HANDLE;
  }
  return record ? add_node(out, g, deps, n, CU_GRAPH_NODE_TYPE_EVENT_RECORD, Params{RecordP{ev}}, entry)
                : add_node(out, g, deps, n, CU_GRAPH_NODE_TYPE_WAIT_EVENT, Params{WaitP{ev}}, entry);
}
CUresult sim_cuGraphAddEventRecordNode(CUgraphNode* out, CUgraph h, const CUgraphNode* deps, std::size_t n,
                                       CUevent e) {
  TETHER_SIM_ENTER(cuGraphAddEventRecordNode);
  return add_event_node(out, h, deps, n, e, true, "cuGraphAddEventRecordNode");
}
CUresult sim_cuGraphAddEventWaitNode(CUgraphNode* out, CUgraph h, const CUgraphNode* deps, std::size_t n, CUevent e) {
  TETHER_SIM_ENTER(cuGraphAddEventWaitNode);
  return add_event_node(out, h, deps, n, e, false, "cuGraphAddEventWaitNode");
}
CUresult add_alloc(CUgraphNode* out, Graph* g, const CUgraphNode* deps, std::size_t n, CUDA_MEM_ALLOC_NODE_PARAMS* p,
                   std::string_view entry) {
  if (!p || p->bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  if (p->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED || p->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return fail(CUDA_ERROR_INVALID_VALUE, "graph allocations must be pinned device memory");
  int dev = p->poolProps.location.id;
  if (dev < 0 || dev >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  CUresult err = CUDA_SUCCESS;
  // The address is fixed now; the memory is backed when the node executes.
  std::uintptr_t ptr = graph_reserve(p->bytesize, dev, err);
  if (err != CUDA_SUCCESS) return err;
  AllocP a;
  a.p = *p;
  a.p.dptr = static_cast<CUdeviceptr>(ptr);
  CUresult r = add_node(out, g, deps, n, CU_GRAPH_NODE_TYPE_MEM_ALLOC, Params{a}, entry);
  if (r != CUDA_SUCCESS) return r;
  p->dptr = static_cast<CUdeviceptr>(ptr);
  return CUDA_SUCCESS;
}
CUresult sim_cuGraphAddMemAllocNode(CUgraphNode* out, CUgraph h, const CUgraphNode* deps, std::size_t n,
                                    CUDA_MEM_ALLOC_NODE_PARAMS* p) {
  TETHER_SIM_ENTER(cuGraphAddMemAllocNode);
  Lock lock(graph_mutex());
  Graph* g = graph_of(h);
  if (!g || !out) return CUDA_ERROR_INVALID_VALUE;
  return add_alloc(out, g, deps, n, p, "cuGraphAddMemAllocNode");
}
CUresult sim_cuGraphAddMemFreeNode(CUgraphNode* out, CUgraph h, const CUgraphNode* deps, std::size_t n,
                                   CUdeviceptr dptr) {
  TETHER_SIM_ENTER(cuGraphAddMemFreeNode);
  Lock lock(graph_mutex());
  Graph* g = graph_of(h);
  if (!g || !out || dptr == 0) return CUDA_ERROR_INVALID_VALUE;
  return add_node(out, g, deps, n, CU_GRAPH_NODE_TYPE_MEM_FREE, Params{FreeP{dptr}}, "cuGraphAddMemFreeNode");
}

CUresult add_conditional(CUgraphNode* out, Graph* g, const CUgraphNode* deps, std::size_t n,
                         CUDA_CONDITIONAL_NODE_PARAMS& c, std::string_view entry) {
  CondHandle* h = cond_of(c.handle);
  if (!h) return CUDA_ERROR_INVALID_VALUE;
  if (!is_ancestor(h->graph, g)) return fail(CUDA_ERROR_INVALID_VALUE, "the conditional handle belongs to another graph");
  bool ok = (c.type == CU_GRAPH_COND_TYPE_IF && (c.size == 1 || c.size == 2)) ||
            (c.type == CU_GRAPH_COND_TYPE_WHILE && c.size == 1) || (c.type == CU_GRAPH_COND_TYPE_SWITCH && c.size >= 1);
  if (!ok) return fail(CUDA_ERROR_INVALID_VALUE, "invalid conditional type or size");
  if (c.ctx && !ctx_of(c.ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  CondP p;
  p.handle = c.handle;
  p.type = c.type;
  p.size = c.size;
  p.ctx = c.ctx;
  for (unsigned i = 0; i < c.size; ++i) p.bodies.push_back(new_graph());
  std::vector<Graph*> bodies = p.bodies;
  CUresult r = add_node(out, g, deps, n, CU_GRAPH_NODE_TYPE_CONDITIONAL, Params{std::move(p)}, entry);
  if (r != CUDA_SUCCESS) {
    Released none;
    for (Graph* b : bodies) destroy_graph(b, none);
    return r;
  }
  auto* cp = std::get_if<CondP>(&node_of(*out)->params);
  cp->out_array = std::make_shared<std::vector<CUgraph>>();
  for (Graph* b : bodies) cp->out_array->push_back(handle(b));
  c.phGraph_out = cp->out_array->data();
  return CUDA_SUCCESS;
}

CUresult sim_cuGraphAddNode(CUgraphNode* out, CUgraph h, const CUgraphNode* deps, const CUgraphEdgeData* edges,
                            std::size_t n, CUgraphNodeParams* p) {
  TETHER_SIM_ENTER(cuGraphAddNode);
  if (!p || !out) return CUDA_ERROR_INVALID_VALUE;
  if (edges)
    for (std::size_t i = 0; i < n; ++i)
      if (edges[i].from_port || edges[i].to_port || edges[i].type)
        return fail(CUDA_ERROR_NOT_SUPPORTED, "the simulator models default edges only");
  Lock lock(graph_mutex());
  Graph* g = graph_of(h);
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  constexpr const char* entry = "cuGraphAddNode";
  switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
      if (CUresult r = kernel_node_needs_ctx(entry)) return r;
      CUDA_KERNEL_NODE_PARAMS k{};
      std::memcpy(&k, &p->kernel, sizeof k);
      KernelP kp;
      if (CUresult r = make_kernel_params(k, kp)) return r;
      return add_node(out, g, deps, n, p->type, Params{std::move(kp)}, entry);
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY: {
      MemcpyP m;
      if (CUresult r = make_memcpy_params(p->memcpy.copyParams, p->memcpy.copyCtx, m)) return r;
      return add_node(out, g, deps, n, p->type, Params{m}, entry);
    }
    case CU_GRAPH_NODE_TYPE_MEMSET: {
      CUDA_MEMSET_NODE_PARAMS in{p->memset.dst, p->memset.pitch, p->memset.value, p->memset.elementSize,
                                 p->memset.width, p->memset.height};
      MemsetP m;
      if (CUresult r = make_memset_params(in, p->memset.ctx, m)) return r;
      return add_node(out, g, deps, n, p->type, Params{m}, entry);
    }
    case CU_GRAPH_NODE_TYPE_HOST:
      if (!p->host.fn) return CUDA_ERROR_INVALID_VALUE;
      return add_node(out, g, deps, n, p->type, Params{HostP{p->host.fn, p->host.userData}}, entry);
    case CU_GRAPH_NODE_TYPE_GRAPH:
      if (p->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE &&
          p->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE)
        return CUDA_ERROR_INVALID_VALUE;
      return add_child(out, g, deps, n, p->graph.graph, p->graph.ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE,
                       entry);
    case CU_GRAPH_NODE_TYPE_EMPTY: return add_node(out, g, deps, n, p->type, Params{EmptyP{}}, entry);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: {
      CUevent e = p->type == CU_GRAPH_NODE_TYPE_EVENT_RECORD ? p->eventRecord.event : p->eventWait.event;
      return add_event_node(out, h, deps, n, e, p->type == CU_GRAPH_NODE_TYPE_EVENT_RECORD, entry);
    }
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
      CUDA_MEM_ALLOC_NODE_PARAMS a{};
      a.poolProps = p->alloc.poolProps;
      a.accessDescs = p->alloc.accessDescs;
      a.accessDescCount = p->alloc.accessDescCount;
      a.bytesize = p->alloc.bytesize;
      CUresult r = add_alloc(out, g, deps, n, &a, entry);
      if (r == CUDA_SUCCESS) p->alloc.dptr = a.dptr;
      return r;
    }
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
      if (!p->free.dptr) return CUDA_ERROR_INVALID_VALUE;
      return add_node(out, g, deps, n, p->type, Params{FreeP{p->free.dptr}}, entry);
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: return add_conditional(out, g, deps, n, p->conditional, entry);
    default: return fail(CUDA_ERROR_NOT_SUPPORTED, "the simulator does not model this node type");
  }
}

CUresult sim_cuGraphConditionalHandleCreate(CUgraphConditionalHandle* out, CUgraph h, CUcontext ctx, unsigned def,
                                            unsigned flags) {
  TETHER_SIM_ENTER(cuGraphConditionalHandleCreate);
  if (!out || (flags & ~unsigned{CU_GRAPH_COND_ASSIGN_DEFAULT})) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(graph_mutex());
  Graph* g = graph_of(h);
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  if (!ctx_of(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  CondHandle* c = new CondHandle;
  c->value = def;
  c->default_value = def;
  c->flags = flags;
  c->graph = g;
  CUgraphConditionalHandle id = reg().next_cond++;
  reg().conds[id] = c;
  g->handles.push_back(id);
  *out = id;
  return CUDA_SUCCESS;
}

// ----------------------------------------------------------------------------- node queries and params

CUresult sim_cuGraphDestroyNode(CUgraphNode h) {
  TETHER_SIM_ENTER(cuGraphDestroyNode);
  Released released;
  {
    Lock lock(graph_mutex());
    Node* n = node_of(h);
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    if (n->destroyed) {
      record_violation(ViolationKind::double_node_destroy, "cuGraphDestroyNode",
                       "cuGraphDestroyNode on a node that was already destroyed (the real driver crashes)");
      return fail(CUDA_ERROR_INVALID_VALUE, "the node was already destroyed");
    }
    // capture_facts c3g-c3j, c5l-c5n: refused for every node of the graph being captured into,
    // whether a dependency of the capture or not, and nothing changes. Not observed for the node
    // owning that graph (a child or conditional node); refused too, since it would destroy it.
    if (node_in_capture(n))
      return fail(CUDA_ERROR_ILLEGAL_STATE,
                  "cuGraphDestroyNode of a node of (or owning) the graph an ongoing stream capture is capturing into");
    // Its incoming edges go with it: fact U1 as for cuGraphRemoveDependencies.
    for (const Node* d : n->deps)
      if (!d->deps.empty() && !n->graph->removed_edge_from) n->graph->removed_edge_from = d;
    unlink(n);
    drop_node_payload(n, released);
    n->params = EmptyP{};
    n->destroyed = true;
    Graph* g = n->graph;
    std::erase(g->nodes, n);
    g->zombies.push_back(n);
  }
  release_collected(released, "cuGraphDestroyNode");
  return CUDA_SUCCESS;
}

CUresult sim_cuGraphNodeGetType(CUgraphNode h, CUgraphNodeType* t) {
  TETHER_SIM_ENTER(cuGraphNodeGetType);
  if (!t) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(graph_mutex());
  Node* n = param_node(h, "cuGraphNodeGetType");
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  *t = n->type;
  return CUDA_SUCCESS;
}

CUresult sim_cuGraphKernelNodeGetParams(CUgraphNode h, CUDA_KERNEL_NODE_PARAMS* p) {
  TETHER_SIM_ENTER(cuGraphKernelNodeGetParams);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(graph_mutex());
  auto* k = params_of<KernelP>(param_node(h, "cuGraphKernelNodeGetParams"));
  if (!k) return CUDA_ERROR_INVALID_VALUE;
  // Why thread-local: the returned kernelParams array must outlive the call; it stays valid until
  // this thread's next call, which is what callers of the real driver can rely on at most.
  thread_local std::vector<void*> argv;
  argv.clear();
  for (std::size_t off : k->offsets) argv.push_back(k->args.data() + off);
  *p = CUDA_KERNEL_NODE_PARAMS{};
  p->func = reinterpret_cast<CUfunction>(k->func);
  p->gridDimX = k->grid[0];
  p->gridDimY = k->grid[1];
  p->gridDimZ = k->grid[2];
  p->blockDimX = k->block[0];
  p->blockDimY = k->block[1];
  p->blockDimZ = k->block[2];
  p->sharedMemBytes = k->shared;
  p->kernelParams = argv.data();
  p->kern = k->kern;
  p->ctx = k->ctx;
  return CUDA_SUCCESS;
}
CUresult sim_cuGraphKernelNodeSetParams(CUgraphNode h, const CUDA_KERNEL_NODE_PARAMS* p) {
  TETHER_SIM_ENTER(cuGraphKernelNodeSetParams);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(graph_mutex());
  auto* k = params_of<KernelP>(param_node(h, "cuGraphKernelNodeSetParams"));
  Node* n = node_of(h);
  if (n && n->destroyed) return CUDA_SUCCESS;  // the real driver returns success and does nothing useful
  if (!k) return CUDA_ERROR_INVALID_VALUE;
  KernelP next;
  if (CUresult r = make_kernel_params(*p, next)) return r;
  // The node keeps its attributes, which must still fit the new launch (launch_attr_probe
  // attr/*/set_params, cluster/grid_change, coop/grow_past_limit).
  next.attrs = k->attrs;
  if (CUresult r = check_kernel_attrs(next)) return r;
  *k = std::move(next);
  return CUDA_SUCCESS;
}
CUresult sim_cuGraphMemcpyNodeGetParams(CUgraphNode h, CUDA_MEMCPY3D* p) {
  TETHER_SIM_ENTER(cuGraphMemcpyNodeGetParams);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(graph_mutex());
  auto* m = params_of<MemcpyP>(param_node(h, "cuGraphMemcpyNodeGetParams"));
  if (!m) return CUDA_ERROR_INVALID_VALUE;
  *p = m->copy;
  return CUDA_SUCCESS;
}
CUresult sim_cuGraphMemcpyNodeSetParams(CUgraphNode h, const CUDA_MEMCPY3D* p) {
  TETHER_SIM_ENTER(cuGraphMemcpyNodeSetParams);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(graph_mutex());
  auto* m = params_of<MemcpyP>(param_node(h, "cuGraphMemcpyNodeSetParams"));
  if (!m) return CUDA_ERROR_INVALID_VALUE;
  MemcpyP next;
  if (CUresult r = make_memcpy_params(*p, m->ctx, next)) return r;
  *m = next;
  return CUDA_SUCCESS;
}
CUresult sim_cuGraphMemsetNodeGetParams(CUgraphNode h, CUDA_MEMSET_NODE_PARAMS* p) {
  TETHER_SIM_ENTER(cuGraphMemsetNodeGetParams);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(graph_mutex());
  auto* m = params_of<MemsetP>(param_node(h, "cuGraphMemsetNodeGetParams"));
  if (!m) return CUDA_ERROR_INVALID_VALUE;
  *p = m->p;
  return CUDA_SUCCESS;
}
CUresult sim_cuGraphMemsetNodeSetParams(CUgraphNode h, const CUDA_MEMSET_NODE_PARAMS* p) {
  TETHER_SIM_ENTER(cuGraphMemsetNodeSetParams);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(graph_mutex());
  auto* m = params_of<MemsetP>(param_node(h, "cuGraphMemsetNodeSetParams"));
  if (!m) return CUDA_ERROR_INVALID_VALUE;
  MemsetP next;
  if (CUresult r = make_memset_params(*p, m->ctx, next)) return r;
  *m = next;
  return CUDA_SUCCESS;
}
CUresult sim_cuGraphHostNodeGetParams(CUgraphNode h, CUDA_HOST_NODE_PARAMS* p) {
  TETHER_SIM_ENTER(cuGraphHostNodeGetParams);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(graph_mutex());
  auto* m = params_of<HostP>(param_node(h, "cuGraphHostNodeGetParams"));
  if (!m) return CUDA_ERROR_INVALID_VALUE;
  p->fn = m->fn;
  p->userData = m->data;
  return CUDA_SUCCESS;
}
CUresult sim_cuGraphHostNodeSetParams(CUgraphNode h, const CUDA_HOST_NODE_PARAMS* p) {
  TETHER_SIM_ENTER(cuGraphHostNodeSetParams);
  if (!p || !p->fn) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(graph_mutex());
  auto* m = params_of<HostP>(param_node(h, "cuGraphHostNodeSetParams"));
  if (!m) return CUDA_ERROR_INVALID_VALUE;
  *m = HostP{p->fn, p->userData};
  return CUDA_SUCCESS;
}
CUresult sim_cuGraphChildGraphNodeGetGraph(CUgraphNode h, CUgraph* out) {
  TETHER_SIM_ENTER(cuGraphChildGraphNodeGetGraph);
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(graph_mutex());
  auto* c = params_of<ChildP>(param_node(h, "cuGraphChildGraphNodeGetGraph"));
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  *out = handle(c->graph);
  return CUDA_SUCCESS;
}
template <class P>
CUresult get_event(CUgraphNode h, CUevent* out, std::string_view entry) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(graph_mutex());
  auto* e = params_of<P>(param_node(h, entry));
  if (!e) return CUDA_ERROR_INVALID_VALUE;
  *out = reinterpret_cast<CUevent>(e->event);
  return CUDA_SUCCESS;
}
template <class P>
CUresult set_event(CUgraphNode h, CUevent ev, std::string_view entry) {
  Lock lock(graph_mutex());
  auto* e = params_of<P>(param_node(h, entry));
  if (!e) return CUDA_ERROR_INVALID_VALUE;
  Event* x = event_of(ev);
  if (!x || x->destroyed) return CUDA_ERROR_INVALID_HANDLE;
  e->event = x;
  return CUDA_SUCCESS;
}
CUresult sim_cuGraphEventRecordNodeGetEvent(CUgraphNode h, CUevent* e) {
  TETHER_SIM_ENTER(cuGraphEventRecordNodeGetEvent);
  return get_event<RecordP>(h, e, "cuGraphEventRecordNodeGetEvent");
}
CUresult sim_cuGraphEventRecordNodeSetEvent(CUgraphNode h, CUevent e) {
  TETHER_SIM_ENTER(cuGraphEventRecordNodeSetEvent);
  return set_event<RecordP>(h, e, "cuGraphEventRecordNodeSetEvent");
}
CUresult sim_cuGraphEventWaitNodeGetEvent(CUgraphNode h, CUevent* e) {
  TETHER_SIM_ENTER(cuGraphEventWaitNodeGetEvent);
  return get_event<WaitP>(h, e, "cuGraphEventWaitNodeGetEvent");
}
CUresult sim_cuGraphEventWaitNodeSetEvent(CUgraphNode h, CUevent e) {
  TETHER_SIM_ENTER(cuGraphEventWaitNodeSetEvent);
  return set_event<WaitP>(h, e, "cuGraphEventWaitNodeSetEvent");
}
CUresult sim_cuGraphMemAllocNodeGetParams(CUgraphNode h, CUDA_MEM_ALLOC_NODE_PARAMS* out) {
  TETHER_SIM_ENTER(cuGraphMemAllocNodeGetParams);
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(graph_mutex());
  auto* a = params_of<AllocP>(param_node(h, "cuGraphMemAllocNodeGetParams"));
  if (!a) return CUDA_ERROR_INVALID_VALUE;
  *out = a->p;
  return CUDA_SUCCESS;
}
CUresult sim_cuGraphMemFreeNodeGetParams(CUgraphNode h, CUdeviceptr* out) {
  TETHER_SIM_ENTER(cuGraphMemFreeNodeGetParams);
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(graph_mutex());
  auto* f = params_of<FreeP>(param_node(h, "cuGraphMemFreeNodeGetParams"));
  if (!f) return CUDA_ERROR_INVALID_VALUE;
  *out = f->dptr;
  return CUDA_SUCCESS;
}

CUresult sim_cuGraphNodeSetParams(CUgraphNode h, CUgraphNodeParams* p) {
  TETHER_SIM_ENTER(cuGraphNodeSetParams);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  Released released;
  CUresult result = CUDA_SUCCESS;
  {
    Lock lock(graph_mutex());
    Node* n = param_node(h, "cuGraphNodeSetParams");
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    if (n->destroyed) return CUDA_SUCCESS;
    if (p->type != n->type) return fail(CUDA_ERROR_INVALID_VALUE, "the parameters are of another node type");
    switch (p->type) {
      case CU_GRAPH_NODE_TYPE_KERNEL: {
        if (CUresult r = kernel_node_needs_ctx("cuGraphNodeSetParams")) return r;
        CUDA_KERNEL_NODE_PARAMS k{};
        std::memcpy(&k, &p->kernel, sizeof k);
        KernelP next;
        if (CUresult r = make_kernel_params(k, next)) return r;
        next.attrs = std::get<KernelP>(n->params).attrs;  // kept, as by cuGraphKernelNodeSetParams
        if (CUresult r = check_kernel_attrs(next)) return r;
        n->params = std::move(next);
        break;
      }
      case CU_GRAPH_NODE_TYPE_MEMCPY: {
        MemcpyP next;
        if (CUresult r = make_memcpy_params(p->memcpy.copyParams, p->memcpy.copyCtx, next)) return r;
        n->params = next;
        break;
      }
      case CU_GRAPH_NODE_TYPE_MEMSET: {
        CUDA_MEMSET_NODE_PARAMS in{p->memset.dst, p->memset.pitch, p->memset.value, p->memset.elementSize,
                                   p->memset.width, p->memset.height};
        MemsetP next;
        if (CUresult r = make_memset_params(in, p->memset.ctx, next)) return r;
        n->params = next;
        break;
      }
      case CU_GRAPH_NODE_TYPE_HOST:
        if (!p->host.fn) return CUDA_ERROR_INVALID_VALUE;
        n->params = HostP{p->host.fn, p->host.userData};
        break;
      case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
      case CU_GRAPH_NODE_TYPE_WAIT_EVENT: {
        Event* e = event_of(p->type == CU_GRAPH_NODE_TYPE_EVENT_RECORD ? p->eventRecord.event : p->eventWait.event);
        if (!e || e->destroyed) return CUDA_ERROR_INVALID_HANDLE;
        if (p->type == CU_GRAPH_NODE_TYPE_EVENT_RECORD)
          n->params = RecordP{e};
        else
          n->params = WaitP{e};
        break;
      }
      case CU_GRAPH_NODE_TYPE_GRAPH: {
        // Replaces the embedded graph by a copy of the new one; the old copy and its references go.
        Graph* child = graph_of(p->graph.graph);
        if (!child || p->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE) return CUDA_ERROR_INVALID_VALUE;
        if (child == n->graph || is_ancestor(child, n->graph)) {
          record_violation(ViolationKind::self_child, "cuGraphNodeSetParams", "a graph set as a child of itself");
          return CUDA_ERROR_INVALID_VALUE;
        }
        if (contains_discarded(child)) return discarded_refusal();
        if (contains_conditional(child)) return CUDA_ERROR_NOT_SUPPORTED;
        auto& cp = std::get<ChildP>(n->params);
        Graph* old = cp.graph;
        // Not observed; refused since it would destroy the graph an ongoing capture captures into.
        if (graph_in_capture(old))
          return fail(CUDA_ERROR_ILLEGAL_STATE,
                      "the embedded graph is being captured into by an ongoing stream capture");
        cp.graph = clone_graph(child, n);
        destroy_graph(old, released);
        break;
      }
      default: result = fail(CUDA_ERROR_NOT_SUPPORTED, "parameters of this node type cannot be changed");
    }
  }
  release_collected(released, "cuGraphNodeSetParams");
  return result;
}

// ----------------------------------------------------------------------------- launch attributes

// Why these are refused with INVALID_VALUE: the H200 driver refuses them on graph kernel nodes
// (launch_attr_probe attr/*/set, attr/other_ids).
CUresult refused_attribute(CUlaunchAttributeID id) {
  switch (id) {
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT:
    case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT:
      return fail(CUDA_ERROR_INVALID_VALUE,
                  fmt::format("launch attribute {} applies to stream launches only; the H200 driver refuses it on "
                              "graph kernel nodes",
                              static_cast<int>(id)));
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
      return fail(CUDA_ERROR_INVALID_VALUE, "the H200 driver (compute capability 9.0) refuses a preferred cluster "
                                            "dimension on graph kernel nodes");
    default:
      return fail(CUDA_ERROR_INVALID_VALUE,
                  fmt::format("{} is not a kernel-node launch attribute", static_cast<int>(id)));
  }
}

// A NULL attribute value crashed the H200's driver in both Set and GetAttribute (launch_attr_probe
// attr/bad/set_null_value, get_null_value): refused here, and recorded.
CUresult null_value(std::string_view entry) {
  record_violation(ViolationKind::null_argument, entry,
                   fmt::format("{} with a NULL value (the real driver crashes)", entry));
  return fail(CUDA_ERROR_INVALID_VALUE, fmt::format("{} with a NULL value; the real driver crashes", entry));
}

// The node's kernel parameters for an attribute call; a destroyed or non-kernel node is refused
// (the real driver crashed on one of these misuses in launch_attr_probe attr_other).
KernelP* attr_node(CUgraphNode h, std::string_view entry) {
  return params_of<KernelP>(param_node(h, entry));
}

CUresult sim_cuGraphKernelNodeGetAttribute(CUgraphNode h, CUkernelNodeAttrID id, CUkernelNodeAttrValue* v) {
  TETHER_SIM_ENTER(cuGraphKernelNodeGetAttribute);
  if (!v) return null_value("cuGraphKernelNodeGetAttribute");
  Lock lock(graph_mutex());
  KernelP* k = attr_node(h, "cuGraphKernelNodeGetAttribute");
  if (!k) return fail(CUDA_ERROR_INVALID_VALUE, "the node is not a kernel node");
  const LaunchAttrs& a = k->attrs;
  switch (id) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: v->accessPolicyWindow = a.access_policy; break;
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE: v->cooperative = a.cooperative; break;
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
      v->clusterDim.x = a.cluster[0];
      v->clusterDim.y = a.cluster[1];
      v->clusterDim.z = a.cluster[2];
      break;
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: v->clusterSchedulingPolicyPreference = a.cluster_policy; break;
    case CU_LAUNCH_ATTRIBUTE_PRIORITY: v->priority = a.priority; break;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP: v->memSyncDomainMap = a.sync_domain_map; break;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN: v->memSyncDomain = a.sync_domain; break;
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: v->sharedMemCarveout = a.carveout; break;
    case CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE:
      // Never set here (the simulator refuses it), so it reads as on a node that never set it.
      v->deviceUpdatableKernelNode.deviceUpdatable = 0;
      v->deviceUpdatableKernelNode.devNode = nullptr;
      break;
    case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
      return fail(CUDA_ERROR_INVALID_VALUE, "the H200 driver stores NVLINK_UTIL_CENTRIC_SCHEDULING on a kernel node "
                                            "but refuses to read it back");
    default: return refused_attribute(id);
  }
  return CUDA_SUCCESS;
}

}  // namespace

CUresult set_kernel_attr(KernelP* k, CUlaunchAttributeID id, const CUlaunchAttributeValue* v) {
  LaunchAttrs& a = k->attrs;
  switch (id) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: a.access_policy = v->accessPolicyWindow; break;
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE: {
      // Checked against co-residency here, where the H200 refuses a grid that is too large.
      KernelP next = *k;
      next.attrs.cooperative = v->cooperative;
      if (CUresult r = check_cooperative(next)) return r;
      a.cooperative = v->cooperative;
      break;
    }
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: {
      KernelP next = *k;
      next.attrs.cluster = {v->clusterDim.x, v->clusterDim.y, v->clusterDim.z};
      if (CUresult r = check_cluster(next)) return r;
      a.cluster = next.attrs.cluster;
      break;
    }
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: a.cluster_policy = v->clusterSchedulingPolicyPreference; break;
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
      // Read back clamped into the device's range; an update compares the value as given.
      a.priority_requested = v->priority;
      a.priority = clamp_priority(v->priority);
      break;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP: a.sync_domain_map = v->memSyncDomainMap; break;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN: a.sync_domain = v->memSyncDomain; break;
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: a.carveout = v->sharedMemCarveout; break;
    case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING: a.nvlink_centric = v->nvlinkUtilCentricScheduling; break;
    case CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE:
      if (v->deviceUpdatableKernelNode.deviceUpdatable == 0) break;  // the state every node has here
      return fail(CUDA_ERROR_NOT_SUPPORTED,
                  "the simulator does not model device-updatable kernel nodes (updates from device code through "
                  "the devNode handle); the H200 accepts the attribute, then refuses cuGraphClone, "
                  "cuGraphKernelNodeCopyAttributes and cuGraphExecUpdate of such a node with NOT_SUPPORTED");
    default: return refused_attribute(id);
  }
  return CUDA_SUCCESS;
}

namespace {

CUresult sim_cuGraphKernelNodeSetAttribute(CUgraphNode h, CUkernelNodeAttrID id, const CUkernelNodeAttrValue* v) {
  TETHER_SIM_ENTER(cuGraphKernelNodeSetAttribute);
  if (!v) return null_value("cuGraphKernelNodeSetAttribute");
  Lock lock(graph_mutex());
  KernelP* k = attr_node(h, "cuGraphKernelNodeSetAttribute");
  if (!k) return fail(CUDA_ERROR_INVALID_VALUE, "the node is not a kernel node");
  return set_kernel_attr(k, id, v);
}

CUresult sim_cuGraphKernelNodeCopyAttributes(CUgraphNode dst, CUgraphNode src) {
  TETHER_SIM_ENTER(cuGraphKernelNodeCopyAttributes);
  Lock lock(graph_mutex());
  KernelP* to = attr_node(dst, "cuGraphKernelNodeCopyAttributes");
  KernelP* from = attr_node(src, "cuGraphKernelNodeCopyAttributes");
  if (!to || !from) return fail(CUDA_ERROR_INVALID_VALUE, "both nodes must be kernel nodes");
  // The whole set is copied: the destination's own attributes go (launch_attr_probe attr/copy_all).
  // A set that does not fit the destination's launch is refused with INVALID_VALUE, not with the
  // SetAttribute error (attr/copy_not_divisor).
  KernelP next = *to;
  next.attrs = from->attrs;
  if (CUresult r = check_kernel_attrs(next))
    return fail(CUDA_ERROR_INVALID_VALUE, fmt::format("the copied attributes do not fit the destination node ({}: {})",
                                                      result_name(static_cast<int>(r)), ts().explain));
  to->attrs = from->attrs;
  return CUDA_SUCCESS;
}

// ----------------------------------------------------------------------------- topology

CUresult list(const std::vector<Node*>& src, CUgraphNode* out, std::size_t* n) {
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  if (!out) {
    *n = src.size();
    return CUDA_SUCCESS;
  }
  std::size_t k = std::min(*n, src.size());
  for (std::size_t i = 0; i < k; ++i) out[i] = handle(src[i]);
  for (std::size_t i = k; i < *n; ++i) out[i] = nullptr;
  *n = k;
  return CUDA_SUCCESS;
}
CUresult sim_cuGraphGetNodes(CUgraph h, CUgraphNode* out, std::size_t* n) {
  TETHER_SIM_ENTER(cuGraphGetNodes);
  Lock lock(graph_mutex());
  Graph* g = graph_of(h);
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  return list(g->nodes, out, n);
}
CUresult sim_cuGraphGetRootNodes(CUgraph h, CUgraphNode* out, std::size_t* n) {
  TETHER_SIM_ENTER(cuGraphGetRootNodes);
  Lock lock(graph_mutex());
  Graph* g = graph_of(h);
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  std::vector<Node*> roots;
  for (Node* x : g->nodes)
    if (x->deps.empty()) roots.push_back(x);
  return list(roots, out, n);
}
CUresult sim_cuGraphGetEdges(CUgraph h, CUgraphNode* from, CUgraphNode* to, CUgraphEdgeData* data, std::size_t* n) {
  TETHER_SIM_ENTER(cuGraphGetEdges);
  if (!n || (!from != !to)) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(graph_mutex());
  Graph* g = graph_of(h);
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::pair<Node*, Node*>> edges;
  for (Node* x : g->nodes)
    for (Node* d : x->deps) edges.emplace_back(d, x);
  if (!from) {
    *n = edges.size();
    return CUDA_SUCCESS;
  }
  std::size_t k = std::min(*n, edges.size());
  for (std::size_t i = 0; i < k; ++i) {
    from[i] = handle(edges[i].first);
    to[i] = handle(edges[i].second);
    if (data) data[i] = CUgraphEdgeData{};
  }
  *n = k;
  return CUDA_SUCCESS;
}
CUresult neighbours(CUgraphNode h, bool deps, CUgraphNode* out, CUgraphEdgeData* data, std::size_t* n,
                    std::string_view entry) {
  Lock lock(graph_mutex());
  Node* x = param_node(h, entry);
  if (!x) return CUDA_ERROR_INVALID_VALUE;
  const std::vector<Node*>& src = deps ? x->deps : x->dependents;
  CUresult r = list(src, out, n);
  if (r == CUDA_SUCCESS && out && data)
    for (std::size_t i = 0; i < *n; ++i) data[i] = CUgraphEdgeData{};
  return r;
}
CUresult sim_cuGraphNodeGetDependencies(CUgraphNode h, CUgraphNode* out, CUgraphEdgeData* data, std::size_t* n) {
  TETHER_SIM_ENTER(cuGraphNodeGetDependencies);
  return neighbours(h, true, out, data, n, "cuGraphNodeGetDependencies");
}
CUresult sim_cuGraphNodeGetDependentNodes(CUgraphNode h, CUgraphNode* out, CUgraphEdgeData* data, std::size_t* n) {
  TETHER_SIM_ENTER(cuGraphNodeGetDependentNodes);
  return neighbours(h, false, out, data, n, "cuGraphNodeGetDependentNodes");
}
CUresult edges_args(Graph*& g, CUgraph h, const CUgraphNode* from, const CUgraphNode* to, std::size_t n,
                    std::vector<std::pair<Node*, Node*>>& out) {
  g = graph_of(h);
  if (!g || (n && (!from || !to))) return CUDA_ERROR_INVALID_VALUE;
  for (std::size_t i = 0; i < n; ++i) {
    Node* a = node_of(from[i]);
    Node* b = node_of(to[i]);
    if (!a || !b || a->destroyed || b->destroyed || a->graph != g || b->graph != g || a == b)
      return CUDA_ERROR_INVALID_VALUE;
    out.emplace_back(a, b);
  }
  return CUDA_SUCCESS;
}
CUresult sim_cuGraphAddDependencies(CUgraph h, const CUgraphNode* from, const CUgraphNode* to,
                                    const CUgraphEdgeData* data, std::size_t n) {
  TETHER_SIM_ENTER(cuGraphAddDependencies);
  Lock lock(graph_mutex());
  Graph* g = nullptr;
  std::vector<std::pair<Node*, Node*>> es;
  if (CUresult r = edges_args(g, h, from, to, n, es)) return r;
  if (data)
    for (std::size_t i = 0; i < n; ++i)
      if (data[i].from_port || data[i].to_port || data[i].type) return CUDA_ERROR_NOT_SUPPORTED;
  for (std::size_t i = 0; i < es.size(); ++i) {
    auto [a, b] = es[i];
    if (std::find(b->deps.begin(), b->deps.end(), a) != b->deps.end()) return CUDA_ERROR_INVALID_VALUE;
    for (std::size_t j = 0; j < i; ++j)
      if (es[j] == es[i]) return CUDA_ERROR_INVALID_VALUE;
  }
  for (auto [a, b] : es) {
    b->deps.push_back(a);
    a->dependents.push_back(b);
  }
  return CUDA_SUCCESS;
}
CUresult sim_cuGraphRemoveDependencies(CUgraph h, const CUgraphNode* from, const CUgraphNode* to,
                                       const CUgraphEdgeData*, std::size_t n) {
  TETHER_SIM_ENTER(cuGraphRemoveDependencies);
  Lock lock(graph_mutex());
  Graph* g = nullptr;
  std::vector<std::pair<Node*, Node*>> es;
  if (CUresult r = edges_args(g, h, from, to, n, es)) return r;
  for (auto [a, b] : es)
    if (std::find(b->deps.begin(), b->deps.end(), a) == b->deps.end()) return CUDA_ERROR_INVALID_VALUE;
  for (auto [a, b] : es) {
    std::erase(b->deps, a);
    std::erase(a->dependents, b);
    if (!a->deps.empty() && !g->removed_edge_from) g->removed_edge_from = a;
  }
  return CUDA_SUCCESS;
}

CUresult sim_cuGraphDebugDotPrint(CUgraph h, const char* path, unsigned) {
  TETHER_SIM_ENTER(cuGraphDebugDotPrint);
  if (!path) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(graph_mutex());
  Graph* g = graph_of(h);
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  std::ofstream out(path);
  if (!out) return CUDA_ERROR_OPERATING_SYSTEM;
  out << "digraph tether_sim {\n";
  for (Node* n : g->nodes) out << "  n" << n->serial << " [label=\"" << static_cast<int>(n->type) << "\"];\n";
  for (Node* n : g->nodes)
    for (Node* d : n->deps) out << "  n" << d->serial << " -> n" << n->serial << ";\n";
  out << "}\n";
  return CUDA_SUCCESS;
}

// ----------------------------------------------------------------------------- user objects on graphs

CUresult sim_cuGraphRetainUserObject(CUgraph h, CUuserObject o, unsigned n, unsigned flags) {
  TETHER_SIM_ENTER(cuGraphRetainUserObject);
  if (n == 0 || (flags != 0 && flags != CU_GRAPH_USER_OBJECT_MOVE)) return CUDA_ERROR_INVALID_VALUE;
  UserObj* u = uo_of(o);
  if (!u) return CUDA_ERROR_INVALID_VALUE;
  Lock lock(graph_mutex());
  Graph* g = graph_of(h);
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  if (u->destroyed.load()) {
    record_violation(ViolationKind::over_release, "cuGraphRetainUserObject", "retain of a destroyed user object");
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (flags == 0) u->refs.fetch_add(n);
  g->refs[u] += n;
  return CUDA_SUCCESS;
}

CUresult sim_cuGraphReleaseUserObject(CUgraph h, CUuserObject o, unsigned n) {
  TETHER_SIM_ENTER(cuGraphReleaseUserObject);
  if (n == 0) return CUDA_ERROR_INVALID_VALUE;
  UserObj* u = uo_of(o);
  if (!u) return CUDA_ERROR_INVALID_VALUE;
  {
    Lock lock(graph_mutex());
    Graph* g = graph_of(h);
    if (!g) return CUDA_ERROR_INVALID_VALUE;
    auto it = g->refs.find(u);
    std::uint32_t held = it == g->refs.end() ? 0 : it->second;
    if (held < n)
      record_violation(ViolationKind::over_release, "cuGraphReleaseUserObject",
                       fmt::format("released {} reference(s) from a graph that holds {} (the real driver silently "
                                   "consumes someone else's)",
                                   n, held));
    // The graph's count wraps like the driver's (2f2: the destructor then runs at cuGraphDestroy).
    std::uint32_t left = held - n;
    if (left == 0)
      g->refs.erase(u);
    else
      g->refs[u] = left;
  }
  // Like the real driver, the release is applied to the object whatever the graph held (11z);
  // reaching zero runs the destructor here, on the calling thread.
  uo_release(u, n, "cuGraphReleaseUserObject");
  return CUDA_SUCCESS;
}

}  // namespace

void fill_graph(tether::detail::DriverTable& t) {
  using tether::detail::Entry;
  t.set<Entry::cuGraphCreate>(&sim_cuGraphCreate);
  t.set<Entry::cuGraphDestroy>(&sim_cuGraphDestroy);
  t.set<Entry::cuGraphClone>(&sim_cuGraphClone);
  t.set<Entry::cuGraphNodeFindInClone>(&sim_cuGraphNodeFindInClone);
  t.set<Entry::cuGraphAddNode>(&sim_cuGraphAddNode);
  t.set<Entry::cuGraphAddKernelNode>(&sim_cuGraphAddKernelNode);
  t.set<Entry::cuGraphAddMemcpyNode>(&sim_cuGraphAddMemcpyNode);
  t.set<Entry::cuGraphAddMemsetNode>(&sim_cuGraphAddMemsetNode);
  t.set<Entry::cuGraphAddHostNode>(&sim_cuGraphAddHostNode);
  t.set<Entry::cuGraphAddChildGraphNode>(&sim_cuGraphAddChildGraphNode);
  t.set<Entry::cuGraphAddEmptyNode>(&sim_cuGraphAddEmptyNode);
  t.set<Entry::cuGraphAddEventRecordNode>(&sim_cuGraphAddEventRecordNode);
  t.set<Entry::cuGraphAddEventWaitNode>(&sim_cuGraphAddEventWaitNode);
  t.set<Entry::cuGraphAddMemAllocNode>(&sim_cuGraphAddMemAllocNode);
  t.set<Entry::cuGraphAddMemFreeNode>(&sim_cuGraphAddMemFreeNode);
  t.set<Entry::cuGraphDestroyNode>(&sim_cuGraphDestroyNode);
  t.set<Entry::cuGraphNodeGetType>(&sim_cuGraphNodeGetType);
  t.set<Entry::cuGraphNodeSetParams>(&sim_cuGraphNodeSetParams);
  t.set<Entry::cuGraphKernelNodeGetParams>(&sim_cuGraphKernelNodeGetParams);
  t.set<Entry::cuGraphKernelNodeSetParams>(&sim_cuGraphKernelNodeSetParams);
  t.set<Entry::cuGraphKernelNodeGetAttribute>(&sim_cuGraphKernelNodeGetAttribute);
  t.set<Entry::cuGraphKernelNodeSetAttribute>(&sim_cuGraphKernelNodeSetAttribute);
  t.set<Entry::cuGraphKernelNodeCopyAttributes>(&sim_cuGraphKernelNodeCopyAttributes);
  t.set<Entry::cuGraphMemcpyNodeGetParams>(&sim_cuGraphMemcpyNodeGetParams);
  t.set<Entry::cuGraphMemcpyNodeSetParams>(&sim_cuGraphMemcpyNodeSetParams);
  t.set<Entry::cuGraphMemsetNodeGetParams>(&sim_cuGraphMemsetNodeGetParams);
  t.set<Entry::cuGraphMemsetNodeSetParams>(&sim_cuGraphMemsetNodeSetParams);
  t.set<Entry::cuGraphHostNodeGetParams>(&sim_cuGraphHostNodeGetParams);
  t.set<Entry::cuGraphHostNodeSetParams>(&sim_cuGraphHostNodeSetParams);
  t.set<Entry::cuGraphChildGraphNodeGetGraph>(&sim_cuGraphChildGraphNodeGetGraph);
  t.set<Entry::cuGraphEventRecordNodeGetEvent>(&sim_cuGraphEventRecordNodeGetEvent);
  t.set<Entry::cuGraphEventRecordNodeSetEvent>(&sim_cuGraphEventRecordNodeSetEvent);
  t.set<Entry::cuGraphEventWaitNodeGetEvent>(&sim_cuGraphEventWaitNodeGetEvent);
  t.set<Entry::cuGraphEventWaitNodeSetEvent>(&sim_cuGraphEventWaitNodeSetEvent);
  t.set<Entry::cuGraphMemAllocNodeGetParams>(&sim_cuGraphMemAllocNodeGetParams);
  t.set<Entry::cuGraphMemFreeNodeGetParams>(&sim_cuGraphMemFreeNodeGetParams);
  t.set<Entry::cuGraphGetNodes>(&sim_cuGraphGetNodes);
  t.set<Entry::cuGraphGetRootNodes>(&sim_cuGraphGetRootNodes);
  t.set<Entry::cuGraphGetEdges>(&sim_cuGraphGetEdges);
  t.set<Entry::cuGraphNodeGetDependencies>(&sim_cuGraphNodeGetDependencies);
  t.set<Entry::cuGraphNodeGetDependentNodes>(&sim_cuGraphNodeGetDependentNodes);
  t.set<Entry::cuGraphAddDependencies>(&sim_cuGraphAddDependencies);
  t.set<Entry::cuGraphRemoveDependencies>(&sim_cuGraphRemoveDependencies);
  t.set<Entry::cuGraphConditionalHandleCreate>(&sim_cuGraphConditionalHandleCreate);
  t.set<Entry::cuGraphDebugDotPrint>(&sim_cuGraphDebugDotPrint);
  t.set<Entry::cuGraphRetainUserObject>(&sim_cuGraphRetainUserObject);
  t.set<Entry::cuGraphReleaseUserObject>(&sim_cuGraphReleaseUserObject);
}

std::size_t live_graphs() {
  std::lock_guard<std::recursive_mutex> lock(graph_mutex());
  return reg().graphs.size();
}

}  // namespace tether::sim::detail
