// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// tether's own CPU cost per operation, the driver excluded (docs/performance.md). The simulator's
// table is opened and the entry points on the measured paths are replaced by trivial fakes
// (bench/fake_driver.hpp: a graph keeps its nodes and references in vectors, a user object is a
// small struct with a reference count, every set-params call succeeds), so what remains is
// tether's work: marshalling, owners, attachments, metadata, the transaction log, handles. The same
// loop run with raw calls into the fakes gives the fakes' own cost, which is subtracted. Runs
// anywhere (no GPU); a profiler pointed at it sees only tether.
// Usage: overhead [--smoke] [--n N] [--reps R] [--only build|update|exec]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fake_driver.hpp"
#include "tether.hpp"

using namespace tether;
using detail::Entry;
using Clock = std::chrono::steady_clock;

namespace {

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
  fake_model::g_arg = a.data();
  auto& table = const_cast<detail::DriverTable&>(detail::table_of(rt));
  fake_model::install(table, ctx.get());
  fake_model::strict(true);  // every driver call below must reach a fake
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
  fake_model::strict(false);  // the buffers are freed by the simulator at exit
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
