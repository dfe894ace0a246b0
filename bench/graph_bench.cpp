// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// tether against the raw driver, same process, same operations (docs/performance.md).
// For N nodes (chain: node i after node i-1; fan: every node after node 0), each a 1x1x1 launch of a
// no-op kernel whose one argument is an owned buffer, it times building, editing (update all, and
// an update-all edit rolled back), clone with rekey, embed, instantiate, launch + synchronize,
// per-node executable update, whole update and destruction until every owner is released, once
// through raw driver calls (the floor: cuGraphAddKernelNode + cuUserObjectCreate +
// cuGraphRetainUserObject(MOVE) per node, ...) and once through tether. It also measures the
// reclaim latency (driver runs the user-object destructor -> owner released) and tether's metadata
// bytes per node. Usage: graph_bench [--smoke] [--reps R] [--sizes 1000,10000]
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common.hpp"
#include "tether.hpp"

// ---------------------------------------------------------------------------- live heap bytes
// Counts C++ heap bytes alive (operator new/delete). The CUDA driver allocates with malloc, so on the
// real driver this sees tether's allocations only.
static std::atomic<long long> g_live_bytes{0};
void* operator new(std::size_t n) {
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  g_live_bytes.fetch_add(static_cast<long long>(malloc_usable_size(p)), std::memory_order_relaxed);
  return p;
}
void operator delete(void* p) noexcept {
  if (!p) return;
  g_live_bytes.fetch_sub(static_cast<long long>(malloc_usable_size(p)), std::memory_order_relaxed);
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept { operator delete(p); }
// Aligned allocations (owner groups of over-aligned owners) are counted too.
void* operator new(std::size_t n, std::align_val_t a) {
  const std::size_t al = static_cast<std::size_t>(a);
  void* p = std::aligned_alloc(al, (n + al - 1) & ~(al - 1));
  if (!p) throw std::bad_alloc();
  g_live_bytes.fetch_add(static_cast<long long>(malloc_usable_size(p)), std::memory_order_relaxed);
  return p;
}
void operator delete(void* p, std::align_val_t) noexcept { operator delete(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { operator delete(p); }

using namespace tether;
using detail::Entry;
using bench::Clock;

namespace {

using bench::die;
using bench::g_raw_destroyed;
using bench::kPtx;
using bench::now_ns;
using bench::raw_dtor;
using bench::wait_for;

struct Samples {
  std::map<std::string, std::vector<double>> ns;  // metric -> per-rep total ns
  std::vector<std::string> order;
  void add(const std::string& k, double v) {
    if (!ns.count(k)) order.push_back(k);
    ns[k].push_back(v);
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

enum Shape { chain, fan };

struct Env {
  const detail::DriverTable* t;
  Context ctx;
  Stream stream;
  Kernel<float*> kernel;
  SharedBuffer<float> a, b;
};

// ---------------------------------------------------------------------------- raw driver floor

void raw_rep(Env& env, int n, Shape shape, Samples& s, bool record) {
  const detail::DriverTable& t = *env.t;
  auto R = [&](const char* k, std::int64_t t0, std::int64_t t1) {
    if (record) s.add(k, static_cast<double>(t1 - t0));
  };
  CUfunction f = env.kernel.function();
  auto params = [&](float** arg, void** args) {
    CUDA_KERNEL_NODE_PARAMS p{};
    p.func = f;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = p.blockDimY = p.blockDimZ = 1;
    args[0] = arg;
    p.kernelParams = args;
    p.ctx = env.ctx.get();
    return p;
  };
  auto build = [&](CUgraph g, float* buffer, std::vector<CUgraphNode>& nodes, std::vector<CUuserObject>& uos) {
    float* arg = buffer;
    void* args[1];
    CUDA_KERNEL_NODE_PARAMS p = params(&arg, args);
    nodes.resize(static_cast<std::size_t>(n));
    uos.resize(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      const CUgraphNode* dep = i == 0 ? nullptr : shape == chain ? &nodes[static_cast<std::size_t>(i - 1)] : &nodes[0];
      REQ(detail::raw<Entry::cuGraphAddKernelNode>(t, &nodes[static_cast<std::size_t>(i)], g, dep, std::size_t{i ? 1u : 0u}, &p));
      REQ(detail::raw<Entry::cuUserObjectCreate>(t, &uos[static_cast<std::size_t>(i)], static_cast<void*>(nullptr), &raw_dtor, 1u,
                                                 static_cast<unsigned>(CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)));
      REQ(detail::raw<Entry::cuGraphRetainUserObject>(t, g, uos[static_cast<std::size_t>(i)], 1u,
                                                      static_cast<unsigned>(CU_GRAPH_USER_OBJECT_MOVE)));
    }
  };
  long destroyed0 = g_raw_destroyed.load();
  CUgraph g;
  REQ(detail::raw<Entry::cuGraphCreate>(t, &g, 0u));
  std::vector<CUgraphNode> nodes;
  std::vector<CUuserObject> uos;
  std::int64_t t0 = now_ns();
  build(g, env.a.data(), nodes, uos);
  R("build (owned args)", t0, now_ns());

  // Update every node, versioned: new parameters, a new user object, the old one released.
  {
    float* arg = env.b.data();
    void* args[1];
    CUDA_KERNEL_NODE_PARAMS p = params(&arg, args);
    t0 = now_ns();
    for (int i = 0; i < n; ++i) {
      auto k = static_cast<std::size_t>(i);
      REQ(detail::raw<Entry::cuGraphKernelNodeSetParams>(t, nodes[k], &p));
      CUuserObject u;
      REQ(detail::raw<Entry::cuUserObjectCreate>(t, &u, static_cast<void*>(nullptr), &raw_dtor, 1u,
                                                 static_cast<unsigned>(CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)));
      REQ(detail::raw<Entry::cuGraphRetainUserObject>(t, g, u, 1u, static_cast<unsigned>(CU_GRAPH_USER_OBJECT_MOVE)));
      REQ(detail::raw<Entry::cuGraphReleaseUserObject>(t, g, uos[k], 1u));
      uos[k] = u;
    }
    R("edit: update all", t0, now_ns());
  }
  CUgraph c;
  t0 = now_ns();
  REQ(detail::raw<Entry::cuGraphClone>(t, &c, g));
  for (int i = 0; i < n; ++i) {
    CUgraphNode x;
    REQ(detail::raw<Entry::cuGraphNodeFindInClone>(t, &x, nodes[static_cast<std::size_t>(i)], c));
  }
  R("clone + rekey", t0, now_ns());
  CUgraph parent;
  REQ(detail::raw<Entry::cuGraphCreate>(t, &parent, 0u));
  t0 = now_ns();
  {
    CUgraphNode child, x;
    CUgraph embedded;
    REQ(detail::raw<Entry::cuGraphAddChildGraphNode>(t, &child, parent, static_cast<const CUgraphNode*>(nullptr),
                                                     std::size_t{0}, g));
    REQ(detail::raw<Entry::cuGraphChildGraphNodeGetGraph>(t, child, &embedded));
    for (int i = 0; i < n; ++i)
      REQ(detail::raw<Entry::cuGraphNodeFindInClone>(t, &x, nodes[static_cast<std::size_t>(i)], embedded));
  }
  R("embed + rekey", t0, now_ns());
  CUgraphExec e;
  t0 = now_ns();
  REQ(detail::raw<Entry::cuGraphInstantiateWithFlags>(t, &e, g, 0ull));
  R("instantiate", t0, now_ns());
  CUstream st = env.stream.get();
  for (int w = 0; w < 2; ++w) {
    REQ(detail::raw<Entry::cuGraphLaunch>(t, e, st));
    REQ(detail::raw<Entry::cuStreamSynchronize>(t, st));
  }
  {
    std::vector<double> per;
    for (int l = 0; l < 10; ++l) {
      t0 = now_ns();
      REQ(detail::raw<Entry::cuGraphLaunch>(t, e, st));
      REQ(detail::raw<Entry::cuStreamSynchronize>(t, st));
      per.push_back(static_cast<double>(now_ns() - t0));
    }
    if (record) s.add("launch + sync (per launch)", median(per));
  }
  {
    float* arg = env.b.data();
    void* args[1];
    CUDA_KERNEL_NODE_PARAMS p = params(&arg, args);
    t0 = now_ns();
    for (int i = 0; i < n; ++i) REQ(detail::raw<Entry::cuGraphExecKernelNodeSetParams>(t, e, nodes[static_cast<std::size_t>(i)], &p));
    R("exec: per-node update (all)", t0, now_ns());
  }
  CUgraph g2;
  REQ(detail::raw<Entry::cuGraphCreate>(t, &g2, 0u));
  std::vector<CUgraphNode> nodes2;
  std::vector<CUuserObject> uos2;
  build(g2, env.b.data(), nodes2, uos2);
  {
    CUgraphExecUpdateResultInfo info{};
    t0 = now_ns();
    REQ(detail::raw<Entry::cuGraphExecUpdate>(t, e, g2, &info));
    R("exec: whole update", t0, now_ns());
  }
  REQ(detail::raw<Entry::cuGraphLaunch>(t, e, st));
  REQ(detail::raw<Entry::cuStreamSynchronize>(t, st));
  long expected = destroyed0 + 3L * n;  // built, updated, and g2's
  t0 = now_ns();
  REQ(detail::raw<Entry::cuGraphExecDestroy>(t, e));
  REQ(detail::raw<Entry::cuGraphDestroy>(t, parent));
  REQ(detail::raw<Entry::cuGraphDestroy>(t, c));
  REQ(detail::raw<Entry::cuGraphDestroy>(t, g));
  REQ(detail::raw<Entry::cuGraphDestroy>(t, g2));
  wait_for([&] { return g_raw_destroyed.load() >= expected; });
  R("destroy until owners released", t0, now_ns());
}

// ---------------------------------------------------------------------------- tether

void tether_rep(Env& env, int n, Shape shape, Samples& s, bool record) {
  auto R = [&](const char* k, std::int64_t t0, std::int64_t t1) {
    if (record) s.add(k, static_cast<double>(t1 - t0));
  };
  using KNode = Node<KernelNode<float*>>;
  const std::uint64_t live0 = detail::NodeAttachment::live();
  auto build = [&](Graph& g, const SharedBuffer<float>& buf, std::vector<KNode>& nodes) {
    nodes.resize(static_cast<std::size_t>(n));
    g.edit([&](Edit& e) {
      for (int i = 0; i < n; ++i) {
        auto k = static_cast<std::size_t>(i);
        if (i == 0)
          nodes[k] = e.launch(env.kernel, Grid{1}, Block{1}, buf);
        else
          nodes[k] = e.after(shape == chain ? nodes[k - 1] : nodes[0]).launch(env.kernel, Grid{1}, Block{1}, buf);
      }
    });
  };
  std::vector<KNode> nodes;
  std::optional<Graph> g(std::in_place, env.ctx);
  std::int64_t t0 = now_ns();
  build(*g, env.a, nodes);
  R("build (owned args)", t0, now_ns());
  t0 = now_ns();
  g->edit([&](Edit& e) {
    for (auto& nd : nodes) e.update(nd, Grid{1}, Block{1}, env.b);
  });
  R("edit: update all", t0, now_ns());
  t0 = now_ns();
  {
    Edit e = g->edit();
    for (auto& nd : nodes) e.update(nd, Grid{1}, Block{1}, env.a);
  }  // rolled back
  R("edit: update all, rolled back", t0, now_ns());
  t0 = now_ns();
  std::optional<Graph> c(g->clone());
  R("clone + rekey", t0, now_ns());
  std::optional<Graph> parent(std::in_place, env.ctx);
  t0 = now_ns();
  parent->edit([&](Edit& e) { e.embed(*g); });
  R("embed + rekey", t0, now_ns());
  t0 = now_ns();
  std::optional<GraphExec> exec(g->instantiate());
  R("instantiate", t0, now_ns());
  for (int w = 0; w < 2; ++w) {
    exec->launch(env.stream);
    env.stream.synchronize();
  }
  {
    std::vector<double> per;
    for (int l = 0; l < 10; ++l) {
      t0 = now_ns();
      exec->launch(env.stream);
      env.stream.synchronize();
      per.push_back(static_cast<double>(now_ns() - t0));
    }
    if (record) s.add("launch + sync (per launch)", median(per));
  }
  t0 = now_ns();
  for (auto& nd : nodes) exec->update(nd, Grid{1}, Block{1}, env.b);
  R("exec: per-node update (all)", t0, now_ns());
  Graph g2(env.ctx);
  std::vector<KNode> nodes2;
  build(g2, env.b, nodes2);
  t0 = now_ns();
  UpdateResult u = exec->update(g2);
  R("exec: whole update", t0, now_ns());
  if (!u) std::fprintf(stderr, "whole update failed: %s\n", std::string(to_string(u.reason)).c_str());
  exec->launch(env.stream);
  env.stream.synchronize();
  t0 = now_ns();
  nodes.clear();
  nodes2.clear();
  exec.reset();
  parent.reset();
  c.reset();
  g.reset();
  { Graph drop = std::move(g2); }
  wait_for([&] { return detail::NodeAttachment::live() <= live0 && detail::ExecAccumulator::live() == 0; });
  R("destroy until owners released", t0, now_ns());
}

// Reclaim latency: from the driver running an attachment's user-object destructor to its owners
// being released on the reclaimer.
struct Stamp {
  std::vector<std::int64_t>* released;
  int id;
  Stamp(std::vector<std::int64_t>* r, int i) : released(r), id(i) {}
  Stamp(Stamp&& o) noexcept : released(std::exchange(o.released, nullptr)), id(o.id) {}
  ~Stamp() {
    if (released) (*released)[static_cast<std::size_t>(id)] = now_ns();
  }
};
std::unordered_map<const detail::NodeAttachment*, int>* g_ids = nullptr;
std::vector<std::int64_t>* g_hooked = nullptr;
void on_destroy(detail::NodeAttachment* a) {
  auto it = g_ids->find(a);
  if (it != g_ids->end()) (*g_hooked)[static_cast<std::size_t>(it->second)] = now_ns();
}

void reclaim_latency(Env& env, int n, bool one_at_a_time, double& p50, double& p99) {
  std::vector<std::int64_t> released(static_cast<std::size_t>(n), 0), hooked(static_cast<std::size_t>(n), 0);
  std::unordered_map<const detail::NodeAttachment*, int> ids;
  g_ids = &ids;
  g_hooked = &hooked;
  // A burst: n attachments released by one cuGraphDestroy; or n graphs of one node, destroyed one
  // after another, each waited for (the latency of a single release).
  const int rounds = one_at_a_time ? n : 1;
  const int per_round = one_at_a_time ? 1 : n;
  for (int round = 0; round < rounds; ++round) {
    {
      Graph g(env.ctx);
      g.edit([&](Edit& e) {
        for (int i = 0; i < per_round; ++i) e.after().keeping(Owners{Stamp(&released, round * per_round + i)}).empty();
      });
      detail::attachment_destroy_hook.store(nullptr);
      ids.clear();
      int i = round * per_round;
      for (detail::NodeRecord* r = detail::GraphAccess::hierarchy(g)->root().first; r; r = r->next) ids[r->current] = i++;
      detail::attachment_destroy_hook.store(&on_destroy);
    }  // cuGraphDestroy runs the destructors; the reclaimer releases the stamps
    wait_for([&] {
      return std::all_of(released.begin() + round * per_round, released.begin() + (round + 1) * per_round,
                         [](std::int64_t v) { return v != 0; });
    });
    detail::attachment_destroy_hook.store(nullptr);
  }
  std::vector<double> lat;
  for (std::size_t i = 0; i < released.size(); ++i) lat.push_back(static_cast<double>(released[i] - hooked[i]) / 1000.0);
  std::sort(lat.begin(), lat.end());
  p50 = lat[lat.size() / 2];
  p99 = lat[std::min(lat.size() - 1, lat.size() * 99 / 100)];
}

// Heap bytes tether keeps per node after commit, owners excluded: every byte of the heap growth
// counts except the owner objects themselves (the Kernel and SharedBuffer handles a version stores,
// which live inside its attachment's one allocation). The attachment's own fields, the allocator's
// rounding of that allocation, the node record and its storage all count as metadata.
double metadata_bytes(Env& env, int n) {
  // Groups reused from tether's owner-group pool would not show as heap growth: empty it first.
  reclaim();
  wait_reclaimed(std::chrono::seconds(10));
  detail::group_pool_release();
  long long before = g_live_bytes.load();
  const long long owners_each = static_cast<long long>(sizeof(Kernel<float*>) + sizeof(SharedBuffer<float>));
  Graph g(env.ctx);
  g.edit([&](Edit& e) {
    for (int i = 0; i < n; ++i) e.launch(env.kernel, Grid{1}, Block{1}, env.a);
  });
  long long grown = g_live_bytes.load() - before;
  return static_cast<double>(grown - owners_each * n) / n;
}

}  // namespace

int main(int argc, char** argv) {
  bool smoke = false;
  int reps = 7;
  std::vector<int> sizes{1000, 10000};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--smoke") {
      smoke = true;
      reps = 1;
      sizes = {50};
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (a == "--sizes" && i + 1 < argc) {
      sizes.clear();
      for (char* tok = std::strtok(argv[++i], ","); tok; tok = std::strtok(nullptr, ",")) sizes.push_back(std::atoi(tok));
    }
  }
  sim::register_kernel<float*>("noop", [](const sim::LaunchInfo&, float*) {});
  Runtime rt = Runtime::open();
  Context ctx = rt.context(0);
  ctx.make_current();
  Module mod = ctx.load_module(Image::from_ptx(kPtx));
  Env env{&detail::table_of(rt), ctx, ctx.make_stream(), mod.kernel<float*>("noop"), ctx.alloc<float>(16).share(),
          ctx.alloc<float>(16).share()};
  std::printf("INFO %s; %d repetitions (+1 warm-up discarded)%s\n", rt.describe().c_str(), reps,
              smoke ? "; smoke run" : "");
  std::printf("%-6s %-5s %-32s %14s %22s %14s %22s %7s\n", "N", "shape", "operation", "raw ns/node",
              "raw min..max", "tether ns/node", "tether min..max", "ratio");
  for (int n : sizes) {
    for (Shape shape : {chain, fan}) {
      Samples raw, tet;
      raw_rep(env, n, shape, raw, false);
      tether_rep(env, n, shape, tet, false);
      for (int r = 0; r < reps; ++r) {
        raw_rep(env, n, shape, raw, true);
        tether_rep(env, n, shape, tet, true);
      }
      for (const std::string& k : tet.order) {
        bool per_launch = k.find("per launch") != std::string::npos;
        double div = per_launch ? 1.0 : n;
        auto stats = [&](const std::vector<double>& v) {
          return std::tuple{median(v) / div, *std::min_element(v.begin(), v.end()) / div,
                            *std::max_element(v.begin(), v.end()) / div};
        };
        auto [tm, tlo, thi] = stats(tet.ns[k]);
        char rawcol[64] = "-", rawspread[64] = "-", ratio[32] = "-";
        if (raw.ns.count(k)) {
          auto [rm, rlo, rhi] = stats(raw.ns[k]);
          std::snprintf(rawcol, sizeof rawcol, "%.1f", rm);
          std::snprintf(rawspread, sizeof rawspread, "%.1f..%.1f", rlo, rhi);
          std::snprintf(ratio, sizeof ratio, "%.3f", tm / rm);
        }
        char tspread[64];
        std::snprintf(tspread, sizeof tspread, "%.1f..%.1f", tlo, thi);
        std::printf("%-6d %-5s %-32s %14s %22s %14.1f %22s %7s%s\n", n, shape == chain ? "chain" : "fan", k.c_str(),
                    rawcol, rawspread, tm, tspread, ratio, per_launch ? "  (ns per launch)" : "");
      }
      std::fflush(stdout);
    }
  }
  {
    // What tether's per-call context check costs (one cuCtxGetCurrent per executable update, launch
    // and edit), next to the calls it guards.
    CUcontext cur = nullptr;
    const int calls = smoke ? 1000 : 200000;
    std::int64_t t0 = now_ns();
    for (int i = 0; i < calls; ++i) REQ(detail::raw<Entry::cuCtxGetCurrent>(*env.t, &cur));
    std::printf("DRIVER cuCtxGetCurrent: %.1f ns per call\n", static_cast<double>(now_ns() - t0) / calls);
  }
  {
    // The generic entry points tether uses (one add, one edit setter, one executable setter for
    // every kind) against the kernel-specific ones the raw floor uses, on the same 10 000-node chain.
    const int m = smoke ? 50 : 10000;
    const detail::DriverTable& t = *env.t;
    float* arg = env.a.data();
    void* args[1] = {&arg};
    CUDA_KERNEL_NODE_PARAMS p{};
    p.func = env.kernel.function();
    p.gridDimX = p.gridDimY = p.gridDimZ = p.blockDimX = p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = args;
    p.ctx = env.ctx.get();
    CUgraphNodeParams gp{};
    gp.type = CU_GRAPH_NODE_TYPE_KERNEL;
    std::memcpy(&gp.kernel, &p, sizeof p);
    for (int rep = 0; rep < 3; ++rep) {
      CUgraph g1, g2;
      REQ(detail::raw<Entry::cuGraphCreate>(t, &g1, 0u));
      REQ(detail::raw<Entry::cuGraphCreate>(t, &g2, 0u));
      std::vector<CUgraphNode> n1(static_cast<std::size_t>(m)), n2(static_cast<std::size_t>(m));
      std::int64_t t0 = now_ns();
      for (int i = 0; i < m; ++i)
        REQ(detail::raw<Entry::cuGraphAddKernelNode>(t, &n1[static_cast<std::size_t>(i)], g1, i ? &n1[static_cast<std::size_t>(i - 1)] : nullptr,
                                                     std::size_t{i ? 1u : 0u}, &p));
      std::int64_t t1 = now_ns();
      for (int i = 0; i < m; ++i)
        REQ(detail::raw<Entry::cuGraphAddNode>(t, &n2[static_cast<std::size_t>(i)], g2, i ? &n2[static_cast<std::size_t>(i - 1)] : nullptr,
                                               static_cast<const CUgraphEdgeData*>(nullptr), std::size_t{i ? 1u : 0u}, &gp));
      std::int64_t t2 = now_ns();
      for (int i = 0; i < m; ++i) REQ(detail::raw<Entry::cuGraphKernelNodeSetParams>(t, n1[static_cast<std::size_t>(i)], &p));
      std::int64_t t3 = now_ns();
      for (int i = 0; i < m; ++i) REQ(detail::raw<Entry::cuGraphNodeSetParams>(t, n2[static_cast<std::size_t>(i)], &gp));
      std::int64_t t4 = now_ns();
      CUgraphExec e1, e2;
      REQ(detail::raw<Entry::cuGraphInstantiateWithFlags>(t, &e1, g1, 0ull));
      REQ(detail::raw<Entry::cuGraphInstantiateWithFlags>(t, &e2, g2, 0ull));
      std::int64_t t5 = now_ns();
      for (int i = 0; i < m; ++i)
        REQ(detail::raw<Entry::cuGraphExecKernelNodeSetParams>(t, e1, n1[static_cast<std::size_t>(i)], &p));
      std::int64_t t6 = now_ns();
      for (int i = 0; i < m; ++i) REQ(detail::raw<Entry::cuGraphExecNodeSetParams>(t, e2, n2[static_cast<std::size_t>(i)], &gp));
      std::int64_t t7 = now_ns();
      std::printf("DRIVER entry points, %d kernel nodes, rep %d (ns per call): cuGraphAddKernelNode %.1f, cuGraphAddNode "
                  "%.1f; cuGraphKernelNodeSetParams %.1f, cuGraphNodeSetParams %.1f; cuGraphExecKernelNodeSetParams "
                  "%.1f, cuGraphExecNodeSetParams %.1f\n",
                  m, rep, static_cast<double>(t1 - t0) / m, static_cast<double>(t2 - t1) / m,
                  static_cast<double>(t3 - t2) / m, static_cast<double>(t4 - t3) / m, static_cast<double>(t6 - t5) / m,
                  static_cast<double>(t7 - t6) / m);
      REQ(detail::raw<Entry::cuGraphExecDestroy>(t, e1));
      REQ(detail::raw<Entry::cuGraphExecDestroy>(t, e2));
      REQ(detail::raw<Entry::cuGraphDestroy>(t, g1));
      REQ(detail::raw<Entry::cuGraphDestroy>(t, g2));
    }
  }
  double p50 = 0, p99 = 0;
  int single_n = smoke ? 20 : 2000;
  reclaim_latency(env, single_n, true, p50, p99);
  std::printf("RECLAIM latency, single releases (%d, each waited for; driver runs the destructor -> owners "
              "released): p50 %.1f us, p99 %.1f us\n",
              single_n, p50, p99);
  int burst_n = smoke ? 50 : 10000;
  reclaim_latency(env, burst_n, false, p50, p99);
  std::printf("RECLAIM latency, burst (%d attachments released by one cuGraphDestroy): p50 %.1f us, p99 %.1f us\n",
              burst_n, p50, p99);
  double meta = metadata_bytes(env, smoke ? 50 : 10000);
  std::printf("METADATA %.1f bytes per node after commit, owners excluded%s\n", meta,
              rt.kind() == DriverKind::simulated ? " (simulator: includes the simulator's own graph storage)" : "");
  return 0;
}
