// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// A data-parallel step (a kernel, an all-reduce of S floats, a kernel) on every device of the
// machine, one rank per device as threads of this process (docs/performance.md, "Results — issue
// 24"). Four ways, same process, same communicator, same buffers:
//
//   tether stream:  Stream::launch, Communicator::all_reduce, Stream::launch, every iteration.
//   raw stream:     cuLaunchKernel, ncclAllReduce, cuLaunchKernel, every iteration.
//   tether graph:   the step captured once with tether (the graph owns the communicator and
//                   buffers), GraphExec::launch every iteration.
//   raw graph:      the same raw calls captured once (cuStreamBeginCapture ... cuGraphInstantiate),
//                   cuGraphLaunch every iteration.
//   raw graph + uo: the raw graph with as many user objects retained on it as tether's executable
//                   holds (one per node version and one for the executable's owners): what CUDA's
//                   per-launch reference keeping costs, apart from tether's own code.
//
// Each repetition runs M iterations and synchronizes once; a barrier starts the ranks together.
// The figure is rank 0's median over repetitions of the time per iteration; ratios are tether to
// raw, and graph to stream (what capturing the step saves).
//
// Usage: nccl_bench [--smoke] [--reps R] [--iters M] [--sizes 256,262144]
#include <algorithm>
#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common.hpp"
#include "nccl/library.hpp"
#include "tether.hpp"

using namespace tether;
using detail::Entry;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Figures {
  double tether_stream = 0, raw_stream = 0, tether_graph = 0, raw_graph = 0, raw_graph_uo = 0;
  std::size_t user_objects = 0;
};

}  // namespace

int main(int argc, char** argv) {
  int reps = 9, iters = 200;
  std::vector<int> sizes{256, 262144};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--smoke") {
      reps = 2;
      iters = 3;
      sizes = {64};
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (a == "--iters" && i + 1 < argc) {
      iters = std::atoi(argv[++i]);
    } else if (a == "--sizes" && i + 1 < argc) {
      sizes.clear();
      for (char* s = std::strtok(argv[++i], ","); s; s = std::strtok(nullptr, ",")) sizes.push_back(std::atoi(s));
    }
  }
  sim::register_kernel<float*>("noop", [](const sim::LaunchInfo&, float*) {});
  Runtime rt = Runtime::open();
  const int ranks = rt.device_count();
  const detail::NcclTable& nt = detail::nccl_table(rt);
  std::printf("nccl_bench: %s, %s, %d rank(s), %d reps x %d iterations\n", rt.describe().c_str(),
              nccl::describe(rt).c_str(), ranks, reps, iters);
  nccl::UniqueId id = nccl::UniqueId::generate(rt);
  std::barrier sync(ranks);
  std::vector<Figures> results(sizes.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      Context ctx = rt.context(r);
      ctx.make_current();
      const detail::DriverTable& t = detail::table_of(rt);
      Stream s = ctx.make_stream();
      Module mod = ctx.load_module(Image::from_ptx(bench::kPtx));
      Kernel<float*> noop = mod.kernel<float*>("noop");
      nccl::Communicator comm = nccl::Communicator::create(ctx, id, ranks, r);
      for (std::size_t si = 0; si < sizes.size(); ++si) {
        const auto count = static_cast<std::size_t>(sizes[si]);
        SharedBuffer<float> g = ctx.alloc<float>(count).share();
        g.fill_bytes(0);
        void* raw_g = reinterpret_cast<void*>(static_cast<std::uintptr_t>(g.address()));
        void* args[] = {&raw_g};
        auto raw_step = [&] {
          REQ(t.get<Entry::cuLaunchKernel>()(noop.function(), 1, 1, 1, 32, 1, 1, 0, s.get(), args, nullptr));
          if (nt.ncclAllReduce(raw_g, raw_g, count, detail::nccl_abi::DataType::float32, detail::nccl_abi::RedOp::sum,
                               comm.get(), s.get()) != detail::nccl_abi::Result::success)
            std::exit(3);
          REQ(t.get<Entry::cuLaunchKernel>()(noop.function(), 1, 1, 1, 32, 1, 1, 0, s.get(), args, nullptr));
        };
        auto tether_step = [&] {
          s.launch(noop, Grid{1}, Block{32}, g);
          comm.all_reduce(s, g, g);
          s.launch(noop, Grid{1}, Block{32}, g);
        };
        // THREAD_LOCAL, as the raw capture: ranks are threads, and a GLOBAL capture on one would refuse
        // the other's instantiations.
        GraphExec tether_exec = tether::capture(s, CaptureMode::thread_local_, tether_step).instantiate();
        CUgraph raw_graph = nullptr, raw_graph_uo = nullptr;
        CUgraphExec raw_exec = nullptr, raw_exec_uo = nullptr;
        for (CUgraph* g : {&raw_graph, &raw_graph_uo}) {
          REQ(t.get<Entry::cuStreamBeginCapture>()(s.get(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
          raw_step();
          REQ(t.get<Entry::cuStreamEndCapture>()(s.get(), g));
        }
        // tether's executable holds one user object per node version (node_count of them, the
        // anonymous ones of its graph included in inspect's count) and its accumulator.
        const Inspection in = inspect(tether_exec);
        std::size_t uos = 1;
        for (const auto& gi : in.graphs) uos += gi.nodes.size() + (gi.anonymous_owners ? 1 : 0);
        for (std::size_t i = 0; i < uos; ++i) {
          CUuserObject uo = nullptr;
          REQ(t.get<Entry::cuUserObjectCreate>()(&uo, nullptr, &bench::raw_dtor, 1u,
                                                  static_cast<unsigned>(CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)));
          REQ(t.get<Entry::cuGraphRetainUserObject>()(raw_graph_uo, uo, 1u, static_cast<unsigned>(CU_GRAPH_USER_OBJECT_MOVE)));
        }
        REQ(t.get<Entry::cuGraphInstantiateWithFlags>()(&raw_exec, raw_graph, 0));
        REQ(t.get<Entry::cuGraphInstantiateWithFlags>()(&raw_exec_uo, raw_graph_uo, 0));
        auto time = [&](auto&& one) {
          std::vector<double> per;
          for (int rep = 0; rep < reps; ++rep) {
            sync.arrive_and_wait();
            const std::int64_t t0 = bench::now_ns();
            for (int i = 0; i < iters; ++i) one();
            s.synchronize();
            per.push_back(static_cast<double>(bench::now_ns() - t0) / iters);
          }
          return median(per);
        };
        tether_step();  // warm up every path once
        raw_step();
        tether_exec.launch(s);
        REQ(t.get<Entry::cuGraphLaunch>()(raw_exec, s.get()));
        REQ(t.get<Entry::cuGraphLaunch>()(raw_exec_uo, s.get()));
        s.synchronize();
        Figures fig;
        fig.user_objects = uos;
        fig.tether_stream = time(tether_step);
        fig.raw_stream = time(raw_step);
        fig.tether_graph = time([&] { tether_exec.launch(s); });
        fig.raw_graph = time([&] { REQ(t.get<Entry::cuGraphLaunch>()(raw_exec, s.get())); });
        fig.raw_graph_uo = time([&] { REQ(t.get<Entry::cuGraphLaunch>()(raw_exec_uo, s.get())); });
        for (CUgraphExec e : {raw_exec, raw_exec_uo}) REQ(t.get<Entry::cuGraphExecDestroy>()(e));
        for (CUgraph g : {raw_graph, raw_graph_uo}) REQ(t.get<Entry::cuGraphDestroy>()(g));
        if (r == 0) results[si] = fig;
        sync.arrive_and_wait();
      }
    });
  for (auto& th : threads) th.join();
  std::printf("%-10s %12s %12s %12s %12s %8s %8s %8s\n", "floats", "tether strm", "raw strm", "tether graph",
              "raw graph", "strm x", "graph x", "graph/strm");
  for (std::size_t si = 0; si < sizes.size(); ++si) {
    const Figures& f = results[si];
    std::printf("%-10d %9.0f ns %9.0f ns %9.0f ns %9.0f ns %8.2f %8.2f %8.2f\n", sizes[si], f.tether_stream, f.raw_stream,
                f.tether_graph, f.raw_graph, f.tether_stream / f.raw_stream, f.tether_graph / f.raw_graph,
                f.tether_graph / f.tether_stream);
    std::printf("%-10s raw graph + %zu user objects: %.0f ns (tether graph / that: %.2f)\n", "", f.user_objects,
                f.raw_graph_uo, f.tether_graph / f.raw_graph_uo);
    std::printf("RESULT size=%d tether_stream_ns=%.0f raw_stream_ns=%.0f tether_graph_ns=%.0f raw_graph_ns=%.0f "
                "raw_graph_uo_ns=%.0f user_objects=%zu\n",
                sizes[si], f.tether_stream, f.raw_stream, f.tether_graph, f.raw_graph, f.raw_graph_uo, f.user_objects);
  }
  tether::reclaim();
  return nccl::wait_closed() ? 0 : 1;
}
