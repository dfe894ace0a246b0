// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Simulator: executable graphs. Instantiate (a snapshot of parameters and references), launch
// (serialised per executable, executed on the stream's worker), upload, whole and per-node
// updates, enable/disable, destruction with the observed destructor timing.
#include "state.hpp"

namespace tether::sim::detail {

namespace {


struct Completion {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  void finish() {
    std::lock_guard lock(mu);
    done = true;
    cv.notify_all();
  }
  void wait() {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return done; });
  }
};

struct Exec {
  Ctx* ctx = nullptr;
  unsigned long long flags = 0;
  std::mutex mu;
  std::shared_ptr<const ExecGraph> graph;
  std::unordered_map<const Node*, int> index;  // top-level source nodes (instantiated or update source)
  std::shared_ptr<std::atomic<bool>> deferred = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<RefSet> refs;
  std::shared_ptr<Completion> last;
  // Graph memory: allocations its graph does not free (left allocated by each launch) and
  // allocations of other graphs its free nodes free.
  std::vector<std::uintptr_t> unfreed_allocs;
  std::vector<std::uintptr_t> foreign_frees;
  std::shared_ptr<std::atomic<int>> source_execs;  // its source graph's count of live executables
  std::shared_ptr<std::atomic<int>> source_destroying;  // its source graph's Graph::destroying_execs
  std::shared_ptr<std::atomic<int>> source_graph_destroying;  // its source graph's Graph::destroying
  ~Exec() {
    if (source_execs) source_execs->fetch_sub(1);
  }
};

bool has_conditional(const Graph* g) {
  for (const Node* n : g->nodes) {
    if (std::holds_alternative<CondP>(n->params)) return true;
    if (auto* c = std::get_if<ChildP>(&n->params))
      if (has_conditional(c->graph)) return true;
  }
  return false;
}

void gather_memory(const Graph* g, std::vector<std::uintptr_t>& allocs, std::vector<std::uintptr_t>& frees) {
  for (const Node* n : g->nodes) {
    if (auto* a = std::get_if<AllocP>(&n->params)) allocs.push_back(static_cast<std::uintptr_t>(a->p.dptr));
    if (auto* f = std::get_if<FreeP>(&n->params)) frees.push_back(static_cast<std::uintptr_t>(f->dptr));
    if (auto* c = std::get_if<ChildP>(&n->params)) gather_memory(c->graph, allocs, frees);
  }
}

void set_memory(Exec* e, const Graph* g) {
  std::vector<std::uintptr_t> allocs, frees;
  gather_memory(g, allocs, frees);
  e->unfreed_allocs.clear();
  e->foreign_frees.clear();
  for (std::uintptr_t a : allocs)
    if (std::find(frees.begin(), frees.end(), a) == frees.end()) e->unfreed_allocs.push_back(a);
  for (std::uintptr_t f : frees)
    if (std::find(allocs.begin(), allocs.end(), f) == allocs.end()) e->foreign_frees.push_back(f);
}

struct Execs {
  std::mutex mu;
  std::unordered_set<Exec*> live;
};
Execs& execs() { return immortal<Execs>(); }

Exec* exec_of(CUgraphExec h) {
  Exec* e = reinterpret_cast<Exec*>(h);
  std::lock_guard lock(execs().mu);
  return e && execs().live.count(e) ? e : nullptr;
}

void gather_handles(const Graph* g, std::vector<CUgraphConditionalHandle>& out) {
  out.insert(out.end(), g->handles.begin(), g->handles.end());
  for (const Node* n : g->nodes) {
    if (auto* c = std::get_if<ChildP>(&n->params)) gather_handles(c->graph, out);
    if (auto* c = std::get_if<CondP>(&n->params))
      for (const Graph* b : c->bodies) gather_handles(b, out);
  }
}

std::shared_ptr<const ExecGraph> build(const Graph* g) {
  if (g->discarded) return nullptr;
  auto eg = std::make_shared<ExecGraph>();
  std::unordered_map<const Node*, int> idx;
  for (std::size_t i = 0; i < g->nodes.size(); ++i) idx[g->nodes[i]] = static_cast<int>(i);
  for (const Node* n : g->nodes) {
    auto en = std::make_shared<ExecNode>();
    en->type = n->type;
    en->params = n->params;
    for (const Node* d : n->deps) en->deps.push_back(idx.at(d));
    if (auto* c = std::get_if<ChildP>(&n->params)) {
      auto sub = build(c->graph);
      if (!sub) return nullptr;
      en->subs.push_back(std::move(sub));
    }
    if (auto* c = std::get_if<CondP>(&n->params))
      for (const Graph* b : c->bodies) {
        auto sub = build(b);
        if (!sub) return nullptr;
        en->subs.push_back(std::move(sub));
      }
    eg->nodes.push_back(std::move(en));
  }
  // Kahn's algorithm; a cycle makes the graph uninstantiable.
  std::vector<int> indeg(eg->nodes.size());
  std::vector<std::vector<int>> out(eg->nodes.size());
  for (std::size_t i = 0; i < eg->nodes.size(); ++i)
    for (int d : eg->nodes[i]->deps) ++indeg[i], out[static_cast<std::size_t>(d)].push_back(static_cast<int>(i));
  std::deque<int> ready;
  for (std::size_t i = 0; i < indeg.size(); ++i)
    if (!indeg[i]) ready.push_back(static_cast<int>(i));
  while (!ready.empty()) {
    int i = ready.front();
    ready.pop_front();
    eg->order.push_back(i);
    for (int j : out[static_cast<std::size_t>(i)])
      if (--indeg[static_cast<std::size_t>(j)] == 0) ready.push_back(j);
  }
  if (eg->order.size() != eg->nodes.size()) return nullptr;
  return eg;
}

std::shared_ptr<RefSet> make_refs(const Graph* g, const std::shared_ptr<std::atomic<bool>>& deferred) {
  auto rs = std::make_shared<RefSet>();
  rs->deferred = deferred;
  collect_refs(g, -1, rs->refs);
  for (const RefEntry& e : rs->refs) e.obj->refs.fetch_add(e.count);
  return rs;
}

void run_conditional(const ExecNode& n, const RunOptions& o) {
  const auto& c = std::get<CondP>(n.params);
  CondHandle* h = nullptr;
  {
    std::lock_guard<std::recursive_mutex> lock(graph_mutex());
    h = cond_of(c.handle);
  }
  if (!h) return;
  switch (c.type) {
    case CU_GRAPH_COND_TYPE_IF:
      if (h->value.load())
        execute(*n.subs[0], o);
      else if (n.subs.size() > 1)
        execute(*n.subs[1], o);
      break;
    case CU_GRAPH_COND_TYPE_WHILE:
      while (h->value.load()) execute(*n.subs[0], o);
      break;
    case CU_GRAPH_COND_TYPE_SWITCH: {
      unsigned v = h->value.load();
      if (v < n.subs.size()) execute(*n.subs[v], o);
      break;
    }
    default: break;
  }
}

}  // namespace

void execute(const ExecGraph& eg, const RunOptions& o) {
  for (int i : eg.order) {
    const ExecNode& n = *eg.nodes[static_cast<std::size_t>(i)];
    if (!n.enabled) continue;
    switch (n.type) {
      case CU_GRAPH_NODE_TYPE_KERNEL: run_kernel(std::get<KernelP>(n.params), o.node_priority); break;
      case CU_GRAPH_NODE_TYPE_MEMCPY: run_memcpy(std::get<MemcpyP>(n.params).copy, "cuGraphLaunch"); break;
      case CU_GRAPH_NODE_TYPE_MEMSET: run_memset(std::get<MemsetP>(n.params).p, "cuGraphLaunch"); break;
      case CU_GRAPH_NODE_TYPE_HOST: {
        const HostP& h = std::get<HostP>(n.params);
        run_host_callback(h.fn, h.data);
        break;
      }
      case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
        graph_map(static_cast<std::uintptr_t>(std::get<AllocP>(n.params).p.dptr));
        break;
      case CU_GRAPH_NODE_TYPE_MEM_FREE: graph_unmap(static_cast<std::uintptr_t>(std::get<FreeP>(n.params).dptr)); break;
      case CU_GRAPH_NODE_TYPE_EVENT_RECORD: {
        Event* e = std::get<RecordP>(n.params).event;
        if (e->destroyed) record_violation(ViolationKind::destroyed_event_use, "", "a launch recorded a destroyed event");
        std::uint64_t gen;
        {
          std::lock_guard lock(e->mu);
          gen = ++e->recorded;
        }
        event_complete(e, gen);
        break;
      }
      case CU_GRAPH_NODE_TYPE_WAIT_EVENT: {
        Event* e = std::get<WaitP>(n.params).event;
        if (e->destroyed) record_violation(ViolationKind::destroyed_event_use, "", "a launch waited on a destroyed event");
        std::uint64_t gen;
        {
          std::lock_guard lock(e->mu);
          gen = e->recorded;
        }
        event_wait(e, gen);
        break;
      }
      case CU_GRAPH_NODE_TYPE_GRAPH: execute(*n.subs[0], o); break;
      case CU_GRAPH_NODE_TYPE_CONDITIONAL: run_conditional(n, o); break;
      default: break;
    }
  }
}

namespace {

CUresult need_ctx() {
  return current_ctx() ? CUDA_SUCCESS : fail(CUDA_ERROR_INVALID_CONTEXT, "no context is current on this thread");
}

// The kernel nodes' attributes that cuGraphInstantiate checks (clusters against the function's
// attributes now), and host nodes inside conditional bodies, which are accepted when they are added
// and refused here (capture_facts c3f2: a host function captured into a body); the first node
// refused, or nullptr. `in_body`: g is (inside) a conditional body.
const Node* uninstantiable(const Graph* g, CUresult& r, bool in_body = false) {
  for (const Node* n : g->nodes) {
    if (auto* k = std::get_if<KernelP>(&n->params))
      if ((r = check_kernel_instantiable(*k)) != CUDA_SUCCESS) return n;
    if (in_body && n->type == CU_GRAPH_NODE_TYPE_HOST) {
      r = fail(CUDA_ERROR_INVALID_VALUE, "a conditional body contains a host node");
      return n;
    }
    std::vector<const Graph*> subs;
    if (auto* c = std::get_if<ChildP>(&n->params)) subs.push_back(c->graph);
    if (auto* c = std::get_if<CondP>(&n->params)) subs.assign(c->bodies.begin(), c->bodies.end());
    bool body = in_body || n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL;
    for (const Graph* sub : subs)
      if (uninstantiable(sub, r, body)) return n;
  }
  return nullptr;
}

CUresult instantiate(CUgraphExec* out, CUgraph h, unsigned long long flags, CUgraphNode* err_node) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = need_ctx()) return r;
  constexpr unsigned long long known = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
                                       CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD | CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH |
                                       CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
  if (flags & ~known) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = unsafe_call_guard("cuGraphInstantiate")) return r;
  std::lock_guard<std::recursive_mutex> lock(graph_mutex());
  Graph* g = graph_of(h);
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  if (contains_discarded(g))
    return fail(CUDA_ERROR_INVALID_VALUE,
                "the graph contains a child or conditional body graph that a failed stream capture into it destroyed");
  auto eg = build(g);
  if (!eg) {
    if (err_node) *err_node = nullptr;
    return fail(CUDA_ERROR_INVALID_VALUE, "the graph has a cycle");
  }
  CUresult refused = CUDA_SUCCESS;
  if (const Node* bad = uninstantiable(g, refused)) {
    if (err_node) *err_node = handle(const_cast<Node*>(bad));
    return refused;  // the explanation is the check's
  }
  const bool conditional = has_conditional(g);
  if (conditional && g->live_execs->load() > 0)
    return fail(CUDA_ERROR_NOT_SUPPORTED,
                "Graphs with conditional nodes cannot be instantiated more than once (the H200's words): an "
                "executable of this graph still exists; destroy it first, or update it");
  auto e = new Exec;
  e->ctx = current_ctx();
  e->flags = flags;
  e->source_destroying = g->destroying_execs;
  e->source_graph_destroying = g->destroying;
  if (conditional) {
    // Only executables made while the graph had conditional nodes count: that is the case the H200
    // showed (one made before a conditional node was added was not tried there).
    e->source_execs = g->live_execs;
    e->source_execs->fetch_add(1);
  }
  auto handles = std::make_shared<ExecGraph>(*eg);
  gather_handles(g, handles->handles);
  e->graph = std::move(handles);
  for (std::size_t i = 0; i < g->nodes.size(); ++i) e->index[g->nodes[i]] = static_cast<int>(i);
  e->refs = make_refs(g, e->deferred);
  set_memory(e, g);
  {
    std::lock_guard l(execs().mu);
    execs().live.insert(e);
  }
  *out = reinterpret_cast<CUgraphExec>(e);
  return CUDA_SUCCESS;
}

CUresult sim_cuGraphInstantiateWithFlags(CUgraphExec* out, CUgraph h, unsigned long long flags) {
  TETHER_SIM_ENTER(cuGraphInstantiateWithFlags);
  return instantiate(out, h, flags, nullptr);
}

CUresult launch(Exec* e, Stream* s, bool upload_only) {
  std::shared_ptr<const ExecGraph> graph;
  std::shared_ptr<RefSet> refs;
  std::shared_ptr<Completion> prev, mine = std::make_shared<Completion>();
  RunOptions options{(e->flags & CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY) != 0};
  std::vector<std::uintptr_t> auto_free;
  {
    std::lock_guard lock(e->mu);
    if (!upload_only) {
      // cuGraphLaunch's documented rule: an allocation the previous launch left allocated must be
      // freed first, unless the executable frees it itself (AUTO_FREE_ON_LAUNCH).
      for (std::uintptr_t p : e->unfreed_allocs)
        if (graph_outstanding(p)) {
          if (!(e->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH))
            return fail(CUDA_ERROR_INVALID_VALUE,
                        fmt::format("graph allocation 0x{:x} made by the previous launch is not freed; free it "
                                    "(cuMemFreeAsync, cuMemFree) or instantiate with "
                                    "CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH",
                                    p));
          auto_free.push_back(p);
        }
      for (std::uintptr_t p : e->unfreed_allocs) set_graph_outstanding(p, true);
      for (std::uintptr_t p : e->foreign_frees) set_graph_outstanding(p, false);
    }
    e->deferred->store(true);
    if (upload_only) return CUDA_SUCCESS;
    graph = e->graph;
    refs = e->refs;
    prev = e->last;
    e->last = mine;
  }
  s->push([graph = std::move(graph), refs = std::move(refs), prev = std::move(prev), mine,
           auto_free = std::move(auto_free), options] {
    // Launches of one executable run in order, even across streams (docs/design/driver-facts.md R4).
    if (prev) prev->wait();
    for (std::uintptr_t p : auto_free) graph_unmap(p);
    {
      std::lock_guard<std::recursive_mutex> lock(graph_mutex());
      for (CUgraphConditionalHandle h : graph->handles)
        if (CondHandle* c = cond_of(h); c && (c->flags & CU_GRAPH_COND_ASSIGN_DEFAULT)) c->value = c->default_value;
    }
    execute(*graph, options);
    mine->finish();
  });
  return CUDA_SUCCESS;
}

CUresult sim_cuGraphInstantiateWithParams(CUgraphExec* out, CUgraph h, CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
  TETHER_SIM_ENTER(cuGraphInstantiateWithParams);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  p->hErrNode_out = nullptr;
  CUresult r = instantiate(out, h, p->flags, &p->hErrNode_out);
  p->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
  if (r == CUDA_SUCCESS && (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)) {
    Stream* s = stream_of(p->hUploadStream);
    if (s) launch(exec_of(*out), s, true);
  }
  return r;
}

CUresult sim_cuGraphExecDestroy(CUgraphExec h) {
  TETHER_SIM_ENTER(cuGraphExecDestroy);
  Exec* e = exec_of(h);
  if (!e) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = unsafe_call_guard("cuGraphExecDestroy")) return r;
  {
    std::lock_guard lock(execs().mu);
    execs().live.erase(e);
  }
  // The destruction takes a while on the real driver; a cuGraphDestroy of the source graph in
  // that window is the race the H200 double-freed on (Graph::destroying_execs).
  std::shared_ptr<std::atomic<int>> destroying = e->source_destroying;
  if (destroying) destroying->fetch_add(1);
  if (e->source_graph_destroying && e->source_graph_destroying->load() > 0)
    record_violation(ViolationKind::concurrent_exec_destroy, "cuGraphExecDestroy",
                     "cuGraphExecDestroy of an executable while another thread's cuGraphDestroy destroys the graph it "
                     "was made from (the real driver double-frees inside libcuda)");
  std::this_thread::sleep_for(std::chrono::microseconds(50));
  struct Done {
    std::shared_ptr<std::atomic<int>>& d;
    ~Done() {
      if (d) d->fetch_sub(1);
    }
  } done{destroying};
  std::shared_ptr<RefSet> refs;
  {
    std::lock_guard lock(e->mu);
    refs = std::move(e->refs);
  }
  delete e;
  // Dropping the last holder releases the references: here, synchronously, if the executable was
  // never launched or uploaded (4e); otherwise on the driver thread after pending launches (4a2, 5a).
  refs.reset();
  return CUDA_SUCCESS;
}

CUresult sim_cuGraphLaunch(CUgraphExec h, CUstream hs) {
  TETHER_SIM_ENTER(cuGraphLaunch);
  Exec* e = exec_of(h);
  if (!e) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = stream_of(hs);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = legacy_guard(s, "cuGraphLaunch", true)) return r;
  {
    std::lock_guard<std::recursive_mutex> lock(graph_mutex());
    if (Capture* c = s->capture) {
      if (c->invalidated != CUDA_SUCCESS) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
      // capture_facts c8a: refused, and the capture is invalidated.
      invalidate_capture(c);
      return fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                  "cuGraphLaunch into a capturing stream (the driver does not capture graph launches; the capture "
                  "is invalidated)");
    }
  }
  return launch(e, s, false);
}

CUresult sim_cuGraphUpload(CUgraphExec h, CUstream hs) {
  TETHER_SIM_ENTER(cuGraphUpload);
  Exec* e = exec_of(h);
  if (!e) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = stream_of(hs);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  return launch(e, s, true);
}

CUresult sim_cuGraphExecGetFlags(CUgraphExec h, cuuint64_t* flags) {
  TETHER_SIM_ENTER(cuGraphExecGetFlags);
  Exec* e = exec_of(h);
  if (!e || !flags) return CUDA_ERROR_INVALID_VALUE;
  // The H200 does not report USE_NODE_PRIORITY among the flags (launch_attr_probe prio/node).
  *flags = e->flags & ~static_cast<unsigned long long>(CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY);
  return CUDA_SUCCESS;
}

// ----------------------------------------------------------------------------- whole update

struct Mismatch {
  CUgraphExecUpdateResult result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
  const Node* node = nullptr;
};

// The attribute changes a whole update refuses (ATTRIBUTES_CHANGED on the H200): the cooperative
// flag, NVLINK_UTIL_CENTRIC_SCHEDULING, and the requested priority under USE_NODE_PRIORITY. (A
// source node without a cluster keeps the executable's, even one its grid is no multiple of: see
// run_kernel.)
bool attributes_changed(const KernelP& exec, const KernelP& src, bool node_priority) {
  const LaunchAttrs& a = exec.attrs;
  const LaunchAttrs& b = src.attrs;
  if (a.cooperative != b.cooperative || a.nvlink_centric != b.nvlink_centric) return true;
  return node_priority && a.priority_requested != b.priority_requested;
}

// The rules in the order the H200 reports them: the node count, then every node's type and
// dependencies, then each node's own rules. The offending node is named also inside a child graph
// or body (the H200 does); a node-count difference names none, there too. Nodes are paired
// by creation order: the H200 pairs them by structure instead where edges differ (it accepted an
// edge moved between two nodes of one kind; plan_test's agreement family lists those cases).
Mismatch compare(const ExecGraph& eg, const Graph* g, bool node_priority) {
  if (eg.nodes.size() != g->nodes.size()) return {CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, nullptr};
  std::unordered_map<const Node*, int> idx;
  for (std::size_t i = 0; i < g->nodes.size(); ++i) idx[g->nodes[i]] = static_cast<int>(i);
  for (std::size_t i = 0; i < g->nodes.size(); ++i) {
    const ExecNode& a = *eg.nodes[i];
    const Node* b = g->nodes[i];
    if (a.type != b->type) return {CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED, b};
    std::vector<int> deps;
    for (const Node* d : b->deps) deps.push_back(idx.at(d));
    std::vector<int> ad = a.deps;
    std::sort(deps.begin(), deps.end());
    std::sort(ad.begin(), ad.end());
    if (ad != deps) return {CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, b};
  }
  if (g->removed_edge_from) return {CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, g->removed_edge_from};
  for (std::size_t i = 0; i < g->nodes.size(); ++i) {
    const ExecNode& a = *eg.nodes[i];
    const Node* b = g->nodes[i];
    if (auto* k = std::get_if<KernelP>(&b->params))
      if (attributes_changed(std::get<KernelP>(a.params), *k, node_priority))
        return {CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED, b};
    if (auto* c = std::get_if<ChildP>(&b->params)) {
      Mismatch m = compare(*a.subs[0], c->graph, node_priority);
      if (m.result != CU_GRAPH_EXEC_UPDATE_SUCCESS) return m;
    }
    if (auto* c = std::get_if<CondP>(&b->params)) {
      const auto& ac = std::get<CondP>(a.params);
      // Another type or size: NOT_SUPPORTED on the H200 (plan_test's family).
      if (ac.type != c->type || ac.size != c->size) return {CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED, b};
      for (std::size_t k = 0; k < c->bodies.size(); ++k) {
        Mismatch m = compare(*a.subs[k], c->bodies[k], node_priority);
        if (m.result != CU_GRAPH_EXEC_UPDATE_SUCCESS) return m;
      }
    }
    // No rule for allocation and free nodes: the H200 accepted a whole update from a graph whose
    // allocation has another address, and the executable then used the new graph's allocation
    // (fact GM2, tests/exec/plan_test.cpp).
    // "Changing either the source or destination memory type ... is not supported" (the
    // cuGraphExecUpdate documentation; plan_test's family confirms PARAMETERS_CHANGED on the H200).
    if (auto* x = std::get_if<MemcpyP>(&b->params)) {
      const CUDA_MEMCPY3D& was = std::get<MemcpyP>(a.params).copy;
      if (was.srcMemoryType != x->copy.srcMemoryType || was.dstMemoryType != x->copy.dstMemoryType)
        return {CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED, b};
    }
  }
  return {};
}

// Carries what an update keeps from the executable into a newly built graph: the enable/disable
// state of its nodes, and the cluster of a kernel node whose source node has none (on the H200 an
// update from a node without a cluster kept the executable's, launch_attr_probe
// attr/cluster_dimension/exec_update).
std::shared_ptr<ExecGraph> carry_state(const ExecGraph& old, const ExecGraph& fresh) {
  auto eg = std::make_shared<ExecGraph>(fresh);
  eg->handles = old.handles;
  for (std::size_t i = 0; i < eg->nodes.size() && i < old.nodes.size(); ++i) {
    const ExecNode& was = *old.nodes[i];
    std::shared_ptr<ExecNode> n;
    auto edit = [&]() -> ExecNode& {
      if (!n) n = std::make_shared<ExecNode>(*eg->nodes[i]);
      return *n;
    };
    if (!was.enabled) edit().enabled = false;
    if (auto* k = std::get_if<KernelP>(&eg->nodes[i]->params)) {
      const std::array<unsigned, 3>& keep = std::get<KernelP>(was.params).attrs.cluster;
      if ((k->attrs.cluster[0] | k->attrs.cluster[1] | k->attrs.cluster[2]) == 0 && (keep[0] | keep[1] | keep[2]))
        std::get<KernelP>(edit().params).attrs.cluster = keep;
    }
    for (std::size_t s = 0; s < eg->nodes[i]->subs.size() && s < was.subs.size(); ++s) {
      auto sub = carry_state(*was.subs[s], *eg->nodes[i]->subs[s]);
      sub->handles = eg->nodes[i]->subs[s]->handles;
      edit().subs[s] = std::move(sub);
    }
    if (n) eg->nodes[i] = std::move(n);
  }
  return eg;
}

CUresult sim_cuGraphExecUpdate(CUgraphExec h, CUgraph hg, CUgraphExecUpdateResultInfo* info) {
  TETHER_SIM_ENTER(cuGraphExecUpdate);
  if (info) *info = CUgraphExecUpdateResultInfo{CU_GRAPH_EXEC_UPDATE_SUCCESS, nullptr, nullptr};
  Exec* e = exec_of(h);
  if (!e) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<RefSet> old;
  {
    std::lock_guard<std::recursive_mutex> glock(graph_mutex());
    Graph* g = graph_of(hg);
    if (!g) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard lock(e->mu);
    Mismatch m = compare(*e->graph, g, (e->flags & CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY) != 0);
    if (m.result != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
      if (info) {
        info->result = m.result;
        info->errorNode = handle(const_cast<Node*>(m.node));
      }
      return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    }
    auto fresh = build(g);
    if (!fresh) return CUDA_ERROR_INVALID_VALUE;
    e->graph = carry_state(*e->graph, *fresh);
    for (std::size_t i = 0; i < g->nodes.size(); ++i) e->index[g->nodes[i]] = static_cast<int>(i);
    // The new references are taken before the old ones go, so objects held by both survive (7b).
    old = std::exchange(e->refs, make_refs(g, e->deferred));
  }
  old.reset();  // released now, or after in-flight launches that still hold them (7d)
  return CUDA_SUCCESS;
}

// ----------------------------------------------------------------------------- per-node updates

// Finds the top-level exec node of `hnode` and replaces it with `update(copy)`.
template <class F>
CUresult update_node(CUgraphExec h, CUgraphNode hnode, CUgraphNodeType type, F&& update) {
  Exec* e = exec_of(h);
  if (!e) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(e->mu);
  auto it = e->index.find(reinterpret_cast<const Node*>(hnode));
  if (it == e->index.end())
    return fail(CUDA_ERROR_INVALID_VALUE, "the node is not part of the graph this executable was made from");
  std::size_t i = static_cast<std::size_t>(it->second);
  if (e->graph->nodes[i]->type != type) return fail(CUDA_ERROR_INVALID_VALUE, "the node is of another type");
  auto n = std::make_shared<ExecNode>(*e->graph->nodes[i]);
  if (CUresult r = update(*n, static_cast<int>(i), *e)) return r;
  auto eg = std::make_shared<ExecGraph>(*e->graph);
  eg->nodes[i] = std::move(n);
  e->graph = std::move(eg);
  return CUDA_SUCCESS;
}

// An executable's kernel node keeps its attributes through a parameter change, and they must still
// fit it (INVALID_CLUSTER_SIZE, COOPERATIVE_LAUNCH_TOO_LARGE on the H200).
CUresult set_exec_kernel(ExecNode& x, const CUDA_KERNEL_NODE_PARAMS& in) {
  KernelP k;
  if (CUresult r = make_kernel_params(in, k)) return r;
  k.attrs = std::get<KernelP>(x.params).attrs;
  if (CUresult r = check_kernel_attrs(k)) return r;
  x.params = std::move(k);
  return CUDA_SUCCESS;
}

}  // namespace

// Every call on a kernel node with no context current on the calling thread crashed the H200's
// driver: the executable updates (ctx_block_probe 8a; context_probe E1, E3), cuGraphAddNode and
// cuGraphNodeSetParams (context_probe G1, G2, S1). Refused here, and recorded.
CUresult kernel_node_needs_ctx(std::string_view entry) {
  if (current_ctx()) return CUDA_SUCCESS;
  record_violation(ViolationKind::no_current_context, entry,
                   fmt::format("{} of a kernel node with no context current on the calling thread (the real driver "
                               "crashes)",
                               entry));
  return CUDA_ERROR_INVALID_CONTEXT;
}

namespace {

CUresult sim_cuGraphExecKernelNodeSetParams(CUgraphExec h, CUgraphNode n, const CUDA_KERNEL_NODE_PARAMS* p) {
  TETHER_SIM_ENTER(cuGraphExecKernelNodeSetParams);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = kernel_node_needs_ctx("cuGraphExecKernelNodeSetParams")) return r;
  return update_node(h, n, CU_GRAPH_NODE_TYPE_KERNEL,
                     [&](ExecNode& x, int, Exec&) { return set_exec_kernel(x, *p); });
}
// Whether one end of a copy is device memory (a unified address is resolved as the driver does).
bool device_end(CUmemorytype t, CUdeviceptr d) {
  return t == CU_MEMORYTYPE_DEVICE ||
         (t == CU_MEMORYTYPE_UNIFIED && classify(static_cast<std::uintptr_t>(d), 1, true) != Range::unknown);
}
// An executable's memcpy node keeps where its ends live and how they are named: the driver refuses
// an update whose "memory operands' mappings changed" with INVALID_VALUE (seen on the H200 for
// device <-> pinned, and for a device end given as CU_MEMORYTYPE_UNIFIED instead of DEVICE).
CUresult set_exec_memcpy(ExecNode& x, const CUDA_MEMCPY3D& in, CUcontext ctx) {
  const CUDA_MEMCPY3D& old = std::get<MemcpyP>(x.params).copy;
  if (old.srcMemoryType != in.srcMemoryType || old.dstMemoryType != in.dstMemoryType ||
      device_end(old.srcMemoryType, old.srcDevice) != device_end(in.srcMemoryType, in.srcDevice) ||
      device_end(old.dstMemoryType, old.dstDevice) != device_end(in.dstMemoryType, in.dstDevice))
    return fail(CUDA_ERROR_INVALID_VALUE, "an executable's memcpy update may not move an end between host and "
                                          "device memory (the memory operands' mappings changed)");
  MemcpyP m;
  if (CUresult r = make_memcpy_params(in, ctx, m)) return r;
  x.params = m;
  return CUDA_SUCCESS;
}

CUresult sim_cuGraphExecMemcpyNodeSetParams(CUgraphExec h, CUgraphNode n, const CUDA_MEMCPY3D* p, CUcontext ctx) {
  TETHER_SIM_ENTER(cuGraphExecMemcpyNodeSetParams);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return update_node(h, n, CU_GRAPH_NODE_TYPE_MEMCPY,
                     [&](ExecNode& x, int, Exec&) { return set_exec_memcpy(x, *p, ctx); });
}
CUresult sim_cuGraphExecMemsetNodeSetParams(CUgraphExec h, CUgraphNode n, const CUDA_MEMSET_NODE_PARAMS* p,
                                            CUcontext ctx) {
  TETHER_SIM_ENTER(cuGraphExecMemsetNodeSetParams);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  return update_node(h, n, CU_GRAPH_NODE_TYPE_MEMSET, [&](ExecNode& x, int, Exec&) {
    MemsetP m;
    if (CUresult r = make_memset_params(*p, ctx, m)) return r;
    x.params = m;
    return CUDA_SUCCESS;
  });
}
CUresult sim_cuGraphExecHostNodeSetParams(CUgraphExec h, CUgraphNode n, const CUDA_HOST_NODE_PARAMS* p) {
  TETHER_SIM_ENTER(cuGraphExecHostNodeSetParams);
  if (!p || !p->fn) return CUDA_ERROR_INVALID_VALUE;
  return update_node(h, n, CU_GRAPH_NODE_TYPE_HOST, [&](ExecNode& x, int, Exec&) {
    x.params = HostP{p->fn, p->userData};
    return CUDA_SUCCESS;
  });
}
template <class P>
CUresult exec_set_event(CUgraphExec h, CUgraphNode n, CUevent ev, CUgraphNodeType type) {
  Event* e = event_of(ev);
  if (!e || e->destroyed) return CUDA_ERROR_INVALID_HANDLE;
  return update_node(h, n, type, [&](ExecNode& x, int, Exec&) {
    x.params = P{e};
    return CUDA_SUCCESS;
  });
}
CUresult sim_cuGraphExecEventRecordNodeSetEvent(CUgraphExec h, CUgraphNode n, CUevent e) {
  TETHER_SIM_ENTER(cuGraphExecEventRecordNodeSetEvent);
  return exec_set_event<RecordP>(h, n, e, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}
CUresult sim_cuGraphExecEventWaitNodeSetEvent(CUgraphExec h, CUgraphNode n, CUevent e) {
  TETHER_SIM_ENTER(cuGraphExecEventWaitNodeSetEvent);
  return exec_set_event<WaitP>(h, n, e, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

CUresult sim_cuGraphExecChildGraphNodeSetParams(CUgraphExec h, CUgraphNode n, CUgraph child) {
  TETHER_SIM_ENTER(cuGraphExecChildGraphNodeSetParams);
  std::shared_ptr<RefSet> old;
  CUresult r;
  {
    std::lock_guard<std::recursive_mutex> glock(graph_mutex());
    Graph* g = graph_of(child);
    if (!g) return CUDA_ERROR_INVALID_VALUE;
    r = update_node(h, n, CU_GRAPH_NODE_TYPE_GRAPH, [&](ExecNode& x, int top, Exec& e) {
      if (compare(*x.subs[0], g, (e.flags & CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY) != 0).result !=
          CU_GRAPH_EXEC_UPDATE_SUCCESS)
        return fail(CUDA_ERROR_INVALID_VALUE, "the new child graph's topology differs from the instantiated one");
      auto sub = build(g);
      if (!sub) return CUDA_ERROR_INVALID_VALUE;
      x.subs[0] = std::move(sub);
      // Swap the child's references: the exec drops the old child's and holds the new one's (6d).
      auto rs = std::make_shared<RefSet>();
      rs->deferred = e.deferred;
      for (const RefEntry& re : e.refs->refs)
        if (re.top_node != top) rs->refs.push_back(re), re.obj->refs.fetch_add(re.count);
      std::vector<RefEntry> fresh;
      collect_refs(g, top, fresh);
      for (const RefEntry& re : fresh) rs->refs.push_back(re), re.obj->refs.fetch_add(re.count);
      old = std::exchange(e.refs, rs);
      return CUDA_SUCCESS;
    });
  }
  old.reset();
  return r;
}

CUresult sim_cuGraphExecNodeSetParams(CUgraphExec h, CUgraphNode n, CUgraphNodeParams* p) {
  TETHER_SIM_ENTER(cuGraphExecNodeSetParams);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
      if (CUresult r = kernel_node_needs_ctx("cuGraphExecNodeSetParams")) return r;
      CUDA_KERNEL_NODE_PARAMS k{};
      std::memcpy(&k, &p->kernel, sizeof k);
      return update_node(h, n, p->type, [&](ExecNode& x, int, Exec&) { return set_exec_kernel(x, k); });
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY:
      return update_node(h, n, p->type, [&](ExecNode& x, int, Exec&) {
        return set_exec_memcpy(x, p->memcpy.copyParams, p->memcpy.copyCtx);
      });
    case CU_GRAPH_NODE_TYPE_MEMSET:
      return update_node(h, n, p->type, [&](ExecNode& x, int, Exec&) {
        CUDA_MEMSET_NODE_PARAMS in{p->memset.dst, p->memset.pitch, p->memset.value, p->memset.elementSize,
                                   p->memset.width, p->memset.height};
        MemsetP m;
        if (CUresult r = make_memset_params(in, p->memset.ctx, m)) return r;
        x.params = m;
        return CUDA_SUCCESS;
      });
    case CU_GRAPH_NODE_TYPE_HOST:
      if (!p->host.fn) return CUDA_ERROR_INVALID_VALUE;
      return update_node(h, n, p->type, [&](ExecNode& x, int, Exec&) {
        x.params = HostP{p->host.fn, p->host.userData};
        return CUDA_SUCCESS;
      });
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return exec_set_event<RecordP>(h, n, p->eventRecord.event, p->type);
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return exec_set_event<WaitP>(h, n, p->eventWait.event, p->type);
    default: return fail(CUDA_ERROR_NOT_SUPPORTED, "this node type cannot be updated in an executable graph");
  }
}

CUresult sim_cuGraphNodeSetEnabled(CUgraphExec h, CUgraphNode n, unsigned on) {
  TETHER_SIM_ENTER(cuGraphNodeSetEnabled);
  Exec* e = exec_of(h);
  if (!e) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(e->mu);
  auto it = e->index.find(reinterpret_cast<const Node*>(n));
  if (it == e->index.end()) return CUDA_ERROR_INVALID_VALUE;
  std::size_t i = static_cast<std::size_t>(it->second);
  CUgraphNodeType t = e->graph->nodes[i]->type;
  if (t != CU_GRAPH_NODE_TYPE_KERNEL && t != CU_GRAPH_NODE_TYPE_MEMCPY && t != CU_GRAPH_NODE_TYPE_MEMSET)
    return fail(CUDA_ERROR_INVALID_VALUE, "only kernel, memcpy and memset nodes can be disabled");
  auto x = std::make_shared<ExecNode>(*e->graph->nodes[i]);
  x->enabled = on != 0;
  auto eg = std::make_shared<ExecGraph>(*e->graph);
  eg->nodes[i] = std::move(x);
  e->graph = std::move(eg);
  return CUDA_SUCCESS;
}
CUresult sim_cuGraphNodeGetEnabled(CUgraphExec h, CUgraphNode n, unsigned* on) {
  TETHER_SIM_ENTER(cuGraphNodeGetEnabled);
  if (!on) return CUDA_ERROR_INVALID_VALUE;
  Exec* e = exec_of(h);
  if (!e) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(e->mu);
  auto it = e->index.find(reinterpret_cast<const Node*>(n));
  if (it == e->index.end()) return CUDA_ERROR_INVALID_VALUE;
  const ExecNode& x = *e->graph->nodes[static_cast<std::size_t>(it->second)];
  if (x.type != CU_GRAPH_NODE_TYPE_KERNEL && x.type != CU_GRAPH_NODE_TYPE_MEMCPY && x.type != CU_GRAPH_NODE_TYPE_MEMSET)
    return CUDA_ERROR_INVALID_VALUE;
  *on = x.enabled ? 1 : 0;
  return CUDA_SUCCESS;
}

}  // namespace

void fill_exec(tether::detail::DriverTable& t) {
  using tether::detail::Entry;
  t.set<Entry::cuGraphInstantiateWithFlags>(&sim_cuGraphInstantiateWithFlags);
  t.set<Entry::cuGraphInstantiateWithParams>(&sim_cuGraphInstantiateWithParams);
  t.set<Entry::cuGraphExecDestroy>(&sim_cuGraphExecDestroy);
  t.set<Entry::cuGraphLaunch>(&sim_cuGraphLaunch);
  t.set<Entry::cuGraphUpload>(&sim_cuGraphUpload);
  t.set<Entry::cuGraphExecUpdate>(&sim_cuGraphExecUpdate);
  t.set<Entry::cuGraphExecGetFlags>(&sim_cuGraphExecGetFlags);
  t.set<Entry::cuGraphExecNodeSetParams>(&sim_cuGraphExecNodeSetParams);
  t.set<Entry::cuGraphExecKernelNodeSetParams>(&sim_cuGraphExecKernelNodeSetParams);
  t.set<Entry::cuGraphExecMemcpyNodeSetParams>(&sim_cuGraphExecMemcpyNodeSetParams);
  t.set<Entry::cuGraphExecMemsetNodeSetParams>(&sim_cuGraphExecMemsetNodeSetParams);
  t.set<Entry::cuGraphExecHostNodeSetParams>(&sim_cuGraphExecHostNodeSetParams);
  t.set<Entry::cuGraphExecChildGraphNodeSetParams>(&sim_cuGraphExecChildGraphNodeSetParams);
  t.set<Entry::cuGraphExecEventRecordNodeSetEvent>(&sim_cuGraphExecEventRecordNodeSetEvent);
  t.set<Entry::cuGraphExecEventWaitNodeSetEvent>(&sim_cuGraphExecEventWaitNodeSetEvent);
  t.set<Entry::cuGraphNodeSetEnabled>(&sim_cuGraphNodeSetEnabled);
  t.set<Entry::cuGraphNodeGetEnabled>(&sim_cuGraphNodeGetEnabled);
}

std::size_t live_execs() {
  std::lock_guard lock(execs().mu);
  return execs().live.size();
}

}  // namespace tether::sim::detail
