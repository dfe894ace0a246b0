// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// A diagnostic program, not a test: the scenarios behind "calls that block while a host callback
// runs" (docs/gpu-results.md records its runs on the H200). Each mode prints one line per step
// with a timestamp, so that a hang shows where it happened; `cuda-gdb -p` on a hung process gives
// the stacks. Modes:
//   scenario  tether, as a new user writes it: a host node waits for the application thread, which
//             updates the executable (host node, then a memcpy node with a fresh source buffer)
//             and launches it again on a second stream.
//   free      raw driver: thread R calls cuMemFree while a host callback blocks; meanwhile the
//             application thread calls cuCtxPushCurrent/PopCurrent, cuCtxGetCurrent,
//             cuCtxSetCurrent, cuMemAlloc and cuGraphExecHostNodeSetParams, each timed.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "tether.hpp"

namespace {

using Clock = std::chrono::steady_clock;
const Clock::time_point t0 = Clock::now();

double ms() { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }
void say(const char* what) {
  std::printf("%9.3f ms  %s\n", ms(), what);
  std::fflush(stdout);
}

std::atomic<int> entered{0};
std::atomic<int> go{0};

void wait_for_go() {
  entered = 1;
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!go.load() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!go.load()) say("host callback: gave up waiting after 20 s");
}

int scenario() {
  tether::Runtime rt = tether::Runtime::open();
  say(rt.describe().c_str());
  tether::Context ctx = rt.context(0);
  tether::Stream s1 = ctx.make_stream();
  tether::Stream s2 = ctx.make_stream();
  tether::SharedBuffer<float> src = ctx.alloc<float>(256).share();
  tether::SharedBuffer<float> dst = ctx.alloc<float>(256).share();
  tether::Graph g{ctx};
  tether::Node<tether::HostNode> h;
  tether::Node<tether::MemcpyNode> m;
  g.edit([&](tether::Edit& e) {
    h = e.host([] { wait_for_go(); });
    m = e.after(h).memcpy(dst, src);
  });
  tether::GraphExec exec = g.instantiate();
  say("launch on s1");
  exec.launch(s1);
  while (!entered.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  say("the host node runs and waits; updating the host node");
  exec.update(h, [] {});
  say("updating the memcpy node with a fresh source");
  tether::SharedBuffer<float> fresh = ctx.alloc<float>(256).share();
  exec.update(m, dst, fresh);
  say("launch on s2");
  exec.launch(s2);
  say("releasing the host node");
  go = 1;
  s1.synchronize();
  s2.synchronize();
  say("finished");
  return 0;
}

template <tether::detail::Entry E, class... A>
CUresult timed(const tether::detail::DriverTable& t, const char* name, A... a) {
  double start = ms();
  CUresult r = tether::detail::raw<E>(t, a...);
  std::printf("%9.3f ms  %s = %s after %.3f ms\n", ms(), name, tether::result_name(r).data(), ms() - start);
  std::fflush(stdout);
  return r;
}

void host_fn(void*) { wait_for_go(); }

int free_while_blocked() {
  using tether::detail::Entry;
  tether::Runtime rt = tether::Runtime::open();
  const tether::detail::DriverTable& t = tether::detail::table_of(rt);
  say(rt.describe().c_str());
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  tether::detail::raw<Entry::cuDeviceGet>(t, &dev, 0);
  tether::detail::raw<Entry::cuDevicePrimaryCtxRetain>(t, &ctx, dev);
  tether::detail::raw<Entry::cuCtxPushCurrent>(t, ctx);
  CUstream s = nullptr;
  tether::detail::raw<Entry::cuStreamCreate>(t, &s, 1u);
  CUdeviceptr victim = 0;
  tether::detail::raw<Entry::cuMemAlloc>(t, &victim, std::size_t{4096});
  // An executable with one host node, to probe its set-params later.
  CUgraph g = nullptr;
  tether::detail::raw<Entry::cuGraphCreate>(t, &g, 0u);
  CUgraphNode hn = nullptr;
  CUDA_HOST_NODE_PARAMS hp{&host_fn, nullptr};
  tether::detail::raw<Entry::cuGraphAddHostNode>(t, &hn, g, nullptr, std::size_t{0}, &hp);
  CUgraphExec e = nullptr;
  tether::detail::raw<Entry::cuGraphInstantiateWithFlags>(t, &e, g, 0ull);
  tether::detail::raw<Entry::cuGraphLaunch>(t, e, s);
  while (!entered.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  say("the callback blocks; thread R calls cuMemFree");
  std::thread r([&] {
    tether::detail::raw<Entry::cuCtxPushCurrent>(t, ctx);
    timed<Entry::cuMemFree>(t, "R: cuMemFree", victim);
    CUcontext popped = nullptr;
    tether::detail::raw<Entry::cuCtxPopCurrent>(t, &popped);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CUcontext popped = nullptr;
  timed<Entry::cuCtxPopCurrent>(t, "A: cuCtxPopCurrent (ctx was current)", &popped);
  CUcontext cur = nullptr;
  timed<Entry::cuCtxGetCurrent>(t, "A: cuCtxGetCurrent", &cur);
  timed<Entry::cuCtxPushCurrent>(t, "A: cuCtxPushCurrent", ctx);
  timed<Entry::cuCtxPopCurrent>(t, "A: cuCtxPopCurrent", &popped);
  timed<Entry::cuCtxSetCurrent>(t, "A: cuCtxSetCurrent", ctx);
  CUdeviceptr p = 0;
  timed<Entry::cuMemAlloc>(t, "A: cuMemAlloc", &p, std::size_t{4096});
  CUDA_HOST_NODE_PARAMS hp2{&host_fn, &p};
  timed<Entry::cuGraphExecHostNodeSetParams>(t, "A: cuGraphExecHostNodeSetParams", e, hn, &hp2);
  CUstream s2 = nullptr;
  timed<Entry::cuStreamCreate>(t, "A: cuStreamCreate", &s2, 1u);
  say("releasing the callback");
  go = 1;
  r.join();
  tether::detail::raw<Entry::cuStreamSynchronize>(t, s);
  say("finished");
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  std::string_view mode = argc > 1 ? argv[1] : "scenario";
  if (mode == "scenario") return scenario();
  if (mode == "free") return free_while_blocked();
  std::fprintf(stderr, "usage: block_probe scenario|free\n");
  return 2;
} catch (const std::exception& e) {
  std::fprintf(stderr, "block_probe: %s\n", e.what());
  return 1;
}
