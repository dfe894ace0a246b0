// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// tether's own CPU cost per operation, the driver excluded (docs/performance.md). The simulator's
// table is opened and the entry points on the measured paths are replaced by trivial fakes (a node
// handle is a counter, a user object a small struct with a reference count, every set-params call
// succeeds), so what remains is tether's work: marshalling, owners, attachments, metadata, the
// transaction log, handles. The same loop run with raw calls into the fakes gives the fakes' own
// cost, which is subtracted. Runs anywhere (no GPU); a profiler pointed at it sees only tether.
// Usage: overhead [--smoke] [--n N] [--reps R] [--only build|update|exec]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tether.hpp"

using namespace tether;
using detail::Entry;
using Clock = std::chrono::steady_clock;

namespace {

// ------------------------------------------------------------------------------ the fake driver
struct FakeUserObject {
  void* ptr;
  CUhostFn destroy;
  // Atomic: executables are destroyed on tether's reclaimer, concurrently with the measuring thread.
  std::atomic<unsigned> refs;
  std::size_t slot = 0;  // where the (one) graph holding it keeps it: releases are O(1)
};
struct FakeGraph {
  std::vector<FakeUserObject*> held;  // one entry per reference the graph holds
};
std::uintptr_t g_next_node = 0x1000;
float* g_arg = nullptr;
void* g_args[1] = {&g_arg};

void drop(FakeUserObject* u, unsigned n) {
  if (u->refs.fetch_sub(n, std::memory_order_acq_rel) == n) {
    u->destroy(u->ptr);
    delete u;
  }
}

CUresult fake_graph_create(CUgraph* g, unsigned) {
  *g = reinterpret_cast<CUgraph>(new FakeGraph);
  return CUDA_SUCCESS;
}
CUresult fake_graph_destroy(CUgraph g) {
  auto* f = reinterpret_cast<FakeGraph*>(g);
  for (FakeUserObject* u : f->held) drop(u, 1);
  delete f;
  return CUDA_SUCCESS;
}
CUresult fake_add_kernel(CUgraphNode* out, CUgraph, const CUgraphNode*, std::size_t, const CUDA_KERNEL_NODE_PARAMS*) {
  *out = reinterpret_cast<CUgraphNode>(g_next_node += 16);
  return CUDA_SUCCESS;
}
// tether adds through the generic entry point, updates with the generic setters: fakes of the
// same triviality as the per-kind ones the raw side calls.
CUresult fake_add_node(CUgraphNode* out, CUgraph, const CUgraphNode*, const CUgraphEdgeData*, std::size_t,
                       CUgraphNodeParams*) {
  *out = reinterpret_cast<CUgraphNode>(g_next_node += 16);
  return CUDA_SUCCESS;
}
CUresult fake_node_set(CUgraphNode, CUgraphNodeParams*) { return CUDA_SUCCESS; }
CUresult fake_exec_node_set(CUgraphExec, CUgraphNode, CUgraphNodeParams*) { return CUDA_SUCCESS; }
CUresult fake_destroy_node(CUgraphNode) { return CUDA_SUCCESS; }
CUresult fake_kernel_set(CUgraphNode, const CUDA_KERNEL_NODE_PARAMS*) { return CUDA_SUCCESS; }
CUresult fake_kernel_get(CUgraphNode, CUDA_KERNEL_NODE_PARAMS* p) {
  *p = {};
  p->gridDimX = p->gridDimY = p->gridDimZ = 1;
  p->blockDimX = p->blockDimY = p->blockDimZ = 1;
  p->kernelParams = g_args;
  return CUDA_SUCCESS;
}
CUresult fake_uo_create(CUuserObject* out, void* ptr, CUhostFn destroy, unsigned initial, unsigned) {
  *out = reinterpret_cast<CUuserObject>(new FakeUserObject{ptr, destroy, initial});
  return CUDA_SUCCESS;
}
CUresult fake_uo_release(CUuserObject u, unsigned n) {
  drop(reinterpret_cast<FakeUserObject*>(u), n);
  return CUDA_SUCCESS;
}
CUresult fake_graph_retain(CUgraph g, CUuserObject u, unsigned n, unsigned flags) {
  auto* f = reinterpret_cast<FakeUserObject*>(u);
  if (!(flags & CU_GRAPH_USER_OBJECT_MOVE)) f->refs += n;
  auto& held = reinterpret_cast<FakeGraph*>(g)->held;
  for (unsigned i = 0; i < n; ++i) {
    f->slot = held.size();
    held.push_back(f);
  }
  return CUDA_SUCCESS;
}
CUresult fake_graph_release(CUgraph g, CUuserObject u, unsigned n) {
  auto& held = reinterpret_cast<FakeGraph*>(g)->held;
  auto* f = reinterpret_cast<FakeUserObject*>(u);
  for (unsigned i = 0; i < n; ++i) {
    if (f->slot >= held.size() || held[f->slot] != f) return CUDA_ERROR_INVALID_VALUE;
    held[f->slot] = held.back();
    held[f->slot]->slot = f->slot;
    held.pop_back();
  }
  drop(f, n);
  return CUDA_SUCCESS;
}
struct FakeExec {
  CUgraph source;
};
CUresult fake_instantiate(CUgraphExec* e, CUgraph g, unsigned long long) {
  // CUDA copies the source's references into the executable: the fake keeps them by holding
  // a reference to each user object the source holds.
  auto* f = new FakeGraph;
  for (FakeUserObject* u : reinterpret_cast<FakeGraph*>(g)->held) {
    ++u->refs;
    f->held.push_back(u);
  }
  *e = reinterpret_cast<CUgraphExec>(f);
  return CUDA_SUCCESS;
}
CUresult fake_exec_destroy(CUgraphExec e) { return fake_graph_destroy(reinterpret_cast<CUgraph>(e)); }
CUresult fake_exec_kernel_set(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS*) { return CUDA_SUCCESS; }
// The context made current at the start stays current (the real query costs about 8 ns on the
// H200, graph_bench's DRIVER line; the simulator's costs more and is not what is measured here).
CUcontext g_current = nullptr;
CUresult fake_ctx_get_current(CUcontext* c) {
  *c = g_current;
  return CUDA_SUCCESS;
}

// Why: the fake cuCtxGetCurrent says a context is current everywhere, so the simulator's
// cuMemFreeAsync (which needs one for the per-thread stream) would refuse tether's releases on
// the reclaimer; the measured operations never free, so the simulator's cuMemFree stands in.
decltype(std::declval<detail::DriverTable>().get<detail::Entry::cuMemFree>()) g_sim_free = nullptr;
CUresult fake_free_async(CUdeviceptr p, CUstream) { return g_sim_free(p); }

void install_fakes(detail::DriverTable& t) {
  g_sim_free = t.get<Entry::cuMemFree>();
  t.set<Entry::cuMemFreeAsync>(&fake_free_async);
  t.set<Entry::cuGraphCreate>(&fake_graph_create);
  t.set<Entry::cuGraphDestroy>(&fake_graph_destroy);
  t.set<Entry::cuGraphAddKernelNode>(&fake_add_kernel);
  t.set<Entry::cuGraphAddNode>(&fake_add_node);
  t.set<Entry::cuGraphNodeSetParams>(&fake_node_set);
  t.set<Entry::cuGraphExecNodeSetParams>(&fake_exec_node_set);
  t.set<Entry::cuGraphDestroyNode>(&fake_destroy_node);
  t.set<Entry::cuGraphKernelNodeSetParams>(&fake_kernel_set);
  t.set<Entry::cuGraphKernelNodeGetParams>(&fake_kernel_get);
  t.set<Entry::cuUserObjectCreate>(&fake_uo_create);
  t.set<Entry::cuUserObjectRelease>(&fake_uo_release);
  t.set<Entry::cuGraphRetainUserObject>(&fake_graph_retain);
  t.set<Entry::cuGraphReleaseUserObject>(&fake_graph_release);
  t.set<Entry::cuGraphInstantiateWithFlags>(&fake_instantiate);
  t.set<Entry::cuGraphExecDestroy>(&fake_exec_destroy);
  t.set<Entry::cuGraphExecKernelNodeSetParams>(&fake_exec_kernel_set);
  t.set<Entry::cuCtxGetCurrent>(&fake_ctx_get_current);
}

void noop_dtor(void*) {}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int n = 10000, reps = 15;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--smoke") {
      n = 100;
      reps = 2;
    } else if (a == "--n" && i + 1 < argc) {
      n = std::atoi(argv[++i]);
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    }
  }
  ::setenv("TETHER_DRIVER", "sim", 1);
  sim::register_kernel<float*>("noop", [](const sim::LaunchInfo&, float*) {});
  Runtime rt = Runtime::open();
  Context ctx = rt.context(0);
  ctx.make_current();
  Module mod = ctx.load_module(Image::from_ptx(".version 8.0\n.target sm_90\n.address_size 64\n"
                                               ".visible .entry noop(.param .u64 p)\n{\n ret;\n}\n"));
  Kernel<float*> kernel = mod.kernel<float*>("noop");
  SharedBuffer<float> a = ctx.alloc<float>(16).share(), b = ctx.alloc<float>(16).share();
  g_arg = a.data();
  g_current = ctx.get();
  auto& table = const_cast<detail::DriverTable&>(detail::table_of(rt));
  install_fakes(table);
  const detail::DriverTable& t = table;

  using KNode = Node<KernelNode<float*>>;
  std::vector<double> raw_build, tet_build, raw_update, tet_update, raw_exec, tet_exec;
  for (int rep = 0; rep < reps; ++rep) {
    // Raw: the floor's calls into the fakes (add + user object + move onto the graph).
    {
      CUgraph g;
      detail::raw<Entry::cuGraphCreate>(t, &g, 0u);
      std::vector<CUgraphNode> nodes(static_cast<std::size_t>(n));
      std::vector<CUuserObject> uos(static_cast<std::size_t>(n));
      CUDA_KERNEL_NODE_PARAMS p{};
      float* arg = a.data();
      void* args[1] = {&arg};
      p.func = kernel.function();
      p.kernelParams = args;
      std::int64_t t0 = now_ns();
      for (int i = 0; i < n; ++i) {
        auto k = static_cast<std::size_t>(i);
        detail::raw<Entry::cuGraphAddKernelNode>(t, &nodes[k], g, i ? &nodes[k - 1] : nullptr, std::size_t{i ? 1u : 0u}, &p);
        detail::raw<Entry::cuUserObjectCreate>(t, &uos[k], static_cast<void*>(nullptr), &noop_dtor, 1u, 1u);
        detail::raw<Entry::cuGraphRetainUserObject>(t, g, uos[k], 1u, 1u);
      }
      raw_build.push_back(static_cast<double>(now_ns() - t0) / n);
      t0 = now_ns();
      for (int i = 0; i < n; ++i) {
        auto k = static_cast<std::size_t>(i);
        detail::raw<Entry::cuGraphKernelNodeSetParams>(t, nodes[k], &p);
        CUuserObject u;
        detail::raw<Entry::cuUserObjectCreate>(t, &u, static_cast<void*>(nullptr), &noop_dtor, 1u, 1u);
        detail::raw<Entry::cuGraphRetainUserObject>(t, g, u, 1u, 1u);
        detail::raw<Entry::cuGraphReleaseUserObject>(t, g, uos[k], 1u);
        uos[k] = u;
      }
      raw_update.push_back(static_cast<double>(now_ns() - t0) / n);
      CUgraphExec e;
      detail::raw<Entry::cuGraphInstantiateWithFlags>(t, &e, g, 0ull);
      t0 = now_ns();
      for (int i = 0; i < n; ++i)
        detail::raw<Entry::cuGraphExecKernelNodeSetParams>(t, e, nodes[static_cast<std::size_t>(i)], &p);
      raw_exec.push_back(static_cast<double>(now_ns() - t0) / n);
      detail::raw<Entry::cuGraphExecDestroy>(t, e);
      detail::raw<Entry::cuGraphDestroy>(t, g);
    }
    // tether, same work.
    {
      Graph g(ctx);
      std::vector<KNode> nodes(static_cast<std::size_t>(n));
      std::int64_t t0 = now_ns();
      g.edit([&](Edit& e) {
        for (int i = 0; i < n; ++i) {
          auto k = static_cast<std::size_t>(i);
          nodes[k] = i ? e.after(nodes[k - 1]).launch(kernel, Grid{1}, Block{1}, a) : e.launch(kernel, Grid{1}, Block{1}, a);
        }
      });
      tet_build.push_back(static_cast<double>(now_ns() - t0) / n);
      if (only != "build") {
        t0 = now_ns();
        g.edit([&](Edit& e) {
          for (auto& nd : nodes) e.update(nd, Grid{1}, Block{1}, b);
        });
        tet_update.push_back(static_cast<double>(now_ns() - t0) / n);
        GraphExec x = g.instantiate();
        t0 = now_ns();
        for (auto& nd : nodes) x.update(nd, Grid{1}, Block{1}, a);
        tet_exec.push_back(static_cast<double>(now_ns() - t0) / n);
      }
    }
    // Nothing of this repetition may still be released while the next one is timed.
    reclaim();
    wait_reclaimed(std::chrono::seconds(10));
  }
  std::printf("OVERHEAD tether's own CPU cost, driver calls replaced by fakes; N = %d, %d repetitions (median)\n", n,
              reps);
  auto line = [](const char* what, const std::vector<double>& raw, const std::vector<double>& tet) {
    if (tet.empty()) return;
    double r = median(raw), x = median(tet);
    std::printf("%-34s fakes %7.1f ns/node   tether %7.1f ns/node   tether's own %7.1f ns/node\n", what, r, x, x - r);
  };
  line("build (owned args), committed", raw_build, tet_build);
  line("edit: update all, committed", raw_update, tet_update);
  line("exec: per-node update", raw_exec, tet_exec);
  return 0;
}
