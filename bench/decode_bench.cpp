// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The per-step host cost of a decode loop (docs/performance.md, "Results — issue 23: dynamic
// parameters"), tether against the raw driver, same process, same work: an executable of L kernel
// nodes `k(buf, step, n)` whose `step` changes every step, then a launch.
//
//   raw:        L x cuGraphExecKernelNodeSetParams (the parameters rebuilt from the application's
//               own copy of each node's arguments), cuGraphLaunch.
//   param:      GraphExec::set(step, i) — every bound node, one driver call each — GraphExec::launch.
//   per-node:   L x GraphExec::update(node, launch, buf, step, n) (the way without a parameter),
//               GraphExec::launch.
//
// Each repetition runs M steps and synchronizes once; the figure is the median over repetitions
// of the time per step. Ratios are to the raw loop.
//
// Usage: decode_bench [--smoke] [--reps R] [--steps M] [--sizes 10,50,200]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common.hpp"
#include "tether.hpp"

using namespace tether;
using detail::Entry;

namespace {

constexpr const char* kStepPtx = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry step_kernel(.param .u64 p0, .param .f32 p1, .param .u32 p2)
{
  ret;
}
)";

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) bench::die(what, r);
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 9, steps = 200;
  std::vector<int> sizes{10, 50, 200};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--smoke") {
      reps = 2;
      steps = 5;
      sizes = {3};
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (a == "--steps" && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else if (a == "--sizes" && i + 1 < argc) {
      sizes.clear();
      for (char* s = std::strtok(argv[++i], ","); s; s = std::strtok(nullptr, ",")) sizes.push_back(std::atoi(s));
    }
  }
  sim::register_kernel<float*, float, int>("step_kernel", [](const sim::LaunchInfo&, float*, float, int) {});
  Runtime rt = Runtime::open();
  Context ctx = rt.context(0);
  ctx.make_current();
  Stream stream = ctx.make_stream();
  const detail::DriverTable& t = detail::table_of(rt);
  Module mod = ctx.load_module(Image::from_ptx(kStepPtx));
  Kernel<float*, float, int> k = mod.kernel<float*, float, int>("step_kernel");
  SharedBuffer<float> buf = ctx.alloc<float>(64).share();
  CUfunction f = nullptr;
  check(detail::raw<Entry::cuModuleGetFunction>(t, &f, mod.get(), "step_kernel"), "cuModuleGetFunction");
  std::printf("decode_bench: %s, %d repetitions of %d steps\n", rt.kind() == DriverKind::simulated ? "simulator" : "GPU",
              reps, steps);

  for (int L : sizes) {
    // tether: one graph, every node binding `step`.
    Param<float> step(0.0f, "step");
    Graph g{ctx};
    std::vector<Node<KernelNode<float*, float, int>>> nodes;
    g.edit([&](Edit& e) {
      Node<KernelNode<float*, float, int>> prev;
      for (int i = 0; i < L; ++i) {
        prev = i ? e.after(prev).launch(k, Grid{1}, Block{1}, buf, step, 64) : e.launch(k, Grid{1}, Block{1}, buf, step, 64);
        nodes.push_back(prev);
      }
    });
    GraphExec exec = g.instantiate();
    GraphExec exec2 = g.instantiate();
    // raw: the same chain built on the driver, with the application's copy of the arguments.
    CUgraph rg = nullptr;
    check(detail::raw<Entry::cuGraphCreate>(t, &rg, 0u), "cuGraphCreate");
    CUdeviceptr dptr = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(buf.data()));
    float stepf = 0.0f;
    int n = 64;
    void* args[3] = {&dptr, &stepf, &n};
    CUDA_KERNEL_NODE_PARAMS p{};
    p.func = f;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = args;
    std::vector<CUgraphNode> rn(static_cast<std::size_t>(L));
    for (int i = 0; i < L; ++i)
      check(detail::raw<Entry::cuGraphAddKernelNode>(t, &rn[static_cast<std::size_t>(i)], rg, i ? &rn[static_cast<std::size_t>(i - 1)] : nullptr,
                                                    static_cast<std::size_t>(i ? 1 : 0), &p),
            "cuGraphAddKernelNode");
    CUgraphExec rx = nullptr;
    check(detail::raw<Entry::cuGraphInstantiateWithFlags>(t, &rx, rg, 0ull), "cuGraphInstantiateWithFlags");

    std::vector<double> raw_ns, param_ns, node_ns;
    for (int r = 0; r < reps; ++r) {
      std::int64_t t0 = bench::now_ns();
      for (int s = 0; s < steps; ++s) {
        stepf = static_cast<float>(s);
        for (int i = 0; i < L; ++i)
          check(detail::raw<Entry::cuGraphExecKernelNodeSetParams>(t, rx, rn[static_cast<std::size_t>(i)], &p),
                "cuGraphExecKernelNodeSetParams");
        check(detail::raw<Entry::cuGraphLaunch>(t, rx, stream.get()), "cuGraphLaunch");
      }
      stream.synchronize();
      raw_ns.push_back(static_cast<double>(bench::now_ns() - t0) / steps);

      t0 = bench::now_ns();
      for (int s = 0; s < steps; ++s) {
        exec.set(step, static_cast<float>(s));
        exec.launch(stream);
      }
      stream.synchronize();
      param_ns.push_back(static_cast<double>(bench::now_ns() - t0) / steps);

      t0 = bench::now_ns();
      for (int s = 0; s < steps; ++s) {
        for (const auto& node : nodes) exec2.update(node, Grid{1}, Block{1}, buf, static_cast<float>(s), 64);
        exec2.launch(stream);
      }
      stream.synchronize();
      node_ns.push_back(static_cast<double>(bench::now_ns() - t0) / steps);
    }
    const double raw = median(raw_ns), par = median(param_ns), per = median(node_ns);
    std::printf("RESULT nodes=%d raw_ns_per_step=%.0f param_ns_per_step=%.0f per_node_ns_per_step=%.0f "
                "param_ratio=%.2f per_node_ratio=%.2f\n",
                L, raw, par, per, par / raw, per / raw);
    check(detail::raw<Entry::cuGraphExecDestroy>(t, rx), "cuGraphExecDestroy");
    check(detail::raw<Entry::cuGraphDestroy>(t, rg), "cuGraphDestroy");
  }
  return 0;
}
