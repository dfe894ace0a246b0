// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// tether's stream capture against the raw driver, same process, same work (docs/performance.md,
// "Results — issue 14: capture"). Every launch is a 1x1x1 launch of a no-op kernel whose one
// argument is a buffer.
//
// capture: N launches captured on one stream (GLOBAL mode), from the begin to the end of the
//   capture. tether: `tether::capture(stream, ...)` around N `Stream::launch` with a SharedBuffer
//   (each captured node owns it). Raw, two floors: no ownership (cuStreamBeginCapture, N x
//   cuLaunchKernel, cuStreamEndCapture); and one user object per launch retained on the capturing
//   graph, the graph read per launch with cuStreamGetCaptureInfo (as any stream operation must,
//   not knowing who began the capture) — plus, for information, the same with the graph read once.
//   Destroying the graph is outside these times for all of them, and timed on its own ("destroy
//   until owners released": the graph destroyed, then waiting until every owner / user-object
//   destructor was released).
// capture-update loop: M iterations of { capture K launches, whole update of one executable,
//   launch }, then one synchronize; the graph of each iteration is destroyed in it. Raw:
//   cuStreamBeginCapture, K x cuLaunchKernel, cuStreamEndCapture, cuGraphExecUpdate, cuGraphLaunch,
//   cuGraphDestroy. tether: capture(), GraphExec::update_or_reinstantiate, GraphExec::launch.
//   Iterations alternate between two buffers, so each update changes every node.
// --long: the loop with K = 4 for many iterations (100 000 by default), printing the resident set
//   (/proc/self/statm) and the live attachments at intervals; fails if the attachments alive once
//   everything is released exceed those before the loop.
//
// Usage: capture_bench [--smoke] [--reps R] [--sizes 1000,10000] [--k K] [--iters M] [--long [L]]
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common.hpp"
#include "tether.hpp"

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

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Samples {
  std::map<std::string, std::vector<double>> ns;  // metric -> per-repetition total ns
  void add(const std::string& k, double v) { ns[k].push_back(v); }
};

struct Env {
  const detail::DriverTable* t;
  Context ctx;
  Stream stream;
  Kernel<float*> kernel;
  SharedBuffer<float> buf[2];
};

long rss_kib() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

// ---------------------------------------------------------------------------- raw driver floors

enum class Owning { none, per_launch, graph_once };

// One raw capture of n launches; returns the captured graph.
CUgraph raw_capture(Env& env, int n, Owning owning, float* arg) {
  const detail::DriverTable& t = *env.t;
  CUstream st = env.stream.get();
  CUfunction f = env.kernel.function();
  void* args[1] = {&arg};
  REQ(detail::raw<Entry::cuStreamBeginCapture>(t, st, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUgraph graph = nullptr;
  CUstreamCaptureStatus status{};
  if (owning == Owning::graph_once)
    REQ(detail::raw<Entry::cuStreamGetCaptureInfo>(t, st, &status, static_cast<cuuint64_t*>(nullptr), &graph,
                                                   static_cast<const CUgraphNode**>(nullptr),
                                                   static_cast<const CUgraphEdgeData**>(nullptr),
                                                   static_cast<std::size_t*>(nullptr)));
  for (int i = 0; i < n; ++i) {
    if (owning != Owning::none) {
      if (owning == Owning::per_launch)
        REQ(detail::raw<Entry::cuStreamGetCaptureInfo>(t, st, &status, static_cast<cuuint64_t*>(nullptr), &graph,
                                                       static_cast<const CUgraphNode**>(nullptr),
                                                       static_cast<const CUgraphEdgeData**>(nullptr),
                                                       static_cast<std::size_t*>(nullptr)));
      CUuserObject uo;
      REQ(detail::raw<Entry::cuUserObjectCreate>(t, &uo, static_cast<void*>(nullptr), &raw_dtor, 1u,
                                                 static_cast<unsigned>(CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)));
      REQ(detail::raw<Entry::cuGraphRetainUserObject>(t, graph, uo, 1u, static_cast<unsigned>(CU_GRAPH_USER_OBJECT_MOVE)));
    }
    REQ(detail::raw<Entry::cuLaunchKernel>(t, f, 1u, 1u, 1u, 1u, 1u, 1u, 0u, st, args, static_cast<void**>(nullptr)));
  }
  CUgraph g = nullptr;
  REQ(detail::raw<Entry::cuStreamEndCapture>(t, st, &g));
  return g;
}

void raw_capture_rep(Env& env, int n, Samples& s, bool record) {
  const detail::DriverTable& t = *env.t;
  auto R = [&](const std::string& k, std::int64_t t0, std::int64_t t1) {
    if (record) s.add(k, static_cast<double>(t1 - t0));
  };
  struct Variant {
    Owning owning;
    const char* name;
  };
  for (Variant v : {Variant{Owning::none, "no owners"}, Variant{Owning::per_launch, "user object per launch"},
                    Variant{Owning::graph_once, "user object per launch, graph read once"}}) {
    const long destroyed0 = g_raw_destroyed.load();
    std::int64_t t0 = now_ns();
    CUgraph g = raw_capture(env, n, v.owning, env.buf[0].data());
    R(std::string("capture: ") + v.name, t0, now_ns());
    t0 = now_ns();
    REQ(detail::raw<Entry::cuGraphDestroy>(t, g));
    if (v.owning != Owning::none) wait_for([&] { return g_raw_destroyed.load() >= destroyed0 + n; });
    R(std::string("destroy until owners released: ") + v.name, t0, now_ns());
  }
}

void raw_loop(Env& env, int k, int iters, Samples& s, bool record) {
  const detail::DriverTable& t = *env.t;
  CUstream st = env.stream.get();
  CUgraph g0 = raw_capture(env, k, Owning::none, env.buf[0].data());
  CUgraphExec e = nullptr;
  REQ(detail::raw<Entry::cuGraphInstantiateWithFlags>(t, &e, g0, 0ull));
  REQ(detail::raw<Entry::cuGraphDestroy>(t, g0));
  REQ(detail::raw<Entry::cuGraphLaunch>(t, e, st));
  REQ(detail::raw<Entry::cuStreamSynchronize>(t, st));
  std::int64_t t0 = now_ns();
  for (int i = 0; i < iters; ++i) {
    CUgraph g = raw_capture(env, k, Owning::none, env.buf[i & 1].data());
    CUgraphExecUpdateResultInfo info{};
    REQ(detail::raw<Entry::cuGraphExecUpdate>(t, e, g, &info));
    REQ(detail::raw<Entry::cuGraphLaunch>(t, e, st));
    REQ(detail::raw<Entry::cuGraphDestroy>(t, g));
  }
  REQ(detail::raw<Entry::cuStreamSynchronize>(t, st));
  if (record) s.add("capture-update loop", static_cast<double>(now_ns() - t0));
  REQ(detail::raw<Entry::cuGraphExecDestroy>(t, e));
}

// ---------------------------------------------------------------------------- tether

Graph tether_capture(Env& env, int n, const SharedBuffer<float>& b) {
  return capture(env.stream, [&] {
    for (int i = 0; i < n; ++i) env.stream.launch(env.kernel, Grid{1}, Block{1}, b);
  });
}

void tether_capture_rep(Env& env, int n, Samples& s, bool record) {
  const std::uint64_t live0 = detail::NodeAttachment::live();
  std::int64_t t0 = now_ns();
  std::optional<Graph> g(tether_capture(env, n, env.buf[0]));
  const std::int64_t t1 = now_ns();
  if (record) s.add("capture", static_cast<double>(t1 - t0));
  t0 = now_ns();
  g.reset();
  wait_for([&] { return detail::NodeAttachment::live() <= live0; });
  if (record) s.add("destroy until owners released", static_cast<double>(now_ns() - t0));
}

// The loop's step; fails loudly if the update was refused (the loop would measure instantiation).
void tether_step(Env& env, GraphExec& exec, int k, const SharedBuffer<float>& b) {
  Graph g = tether_capture(env, k, b);
  UpdateResult r = exec.update_or_reinstantiate(g);
  if (!r) {
    std::fprintf(stderr, "FATAL whole update refused: %s\n", std::string(to_string(r.reason)).c_str());
    std::exit(2);
  }
  exec.launch(env.stream);
}

void tether_loop(Env& env, int k, int iters, Samples& s, bool record) {
  GraphExec exec = tether_capture(env, k, env.buf[0]).instantiate();
  exec.launch(env.stream);
  env.stream.synchronize();
  std::int64_t t0 = now_ns();
  for (int i = 0; i < iters; ++i) tether_step(env, exec, k, env.buf[i & 1]);
  env.stream.synchronize();
  if (record) s.add("capture-update loop", static_cast<double>(now_ns() - t0));
}

// ---------------------------------------------------------------------------- output

struct Stats {
  double med, lo, hi;
};
Stats stats(const std::vector<double>& v, double div) {
  return {median(v) / div, *std::min_element(v.begin(), v.end()) / div, *std::max_element(v.begin(), v.end()) / div};
}

void row(const std::string& size, const std::string& op, const std::vector<double>& raw,
         const std::vector<double>& tet, double div, const char* unit) {
  Stats r = stats(raw, div), t = stats(tet, div);
  char rs[64], ts[64];
  std::snprintf(rs, sizeof rs, "%.1f..%.1f", r.lo, r.hi);
  std::snprintf(ts, sizeof ts, "%.1f..%.1f", t.lo, t.hi);
  std::printf("%-8s %-58s %12.1f %22s %12.1f %22s %7.3f  (%s)\n", size.c_str(), op.c_str(), r.med, rs, t.med, ts,
              t.med / r.med, unit);
}

int long_run(Env& env, long iterations) {
  constexpr int k = 4;
  const long interval = std::max(1L, iterations / 10);
  wait_released(env.ctx);
  const std::uint64_t live_base = detail::NodeAttachment::live();
  std::optional<GraphExec> exec(tether_capture(env, k, env.buf[0]).instantiate());
  exec->launch(env.stream);
  env.stream.synchronize();
  wait_released(env.ctx);
  const std::uint64_t live_before = detail::NodeAttachment::live();
  std::printf("LONG %ld iterations of capture (K = %d) + update_or_reinstantiate + launch; synchronize every %ld\n",
              iterations, k, interval);
  std::printf("LONG %-10s %12s %18s %12s %12s\n", "iteration", "RSS KiB", "live attachments", "graphs", "executables");
  std::printf("LONG %-10d %12ld %18llu %12zu %12zu\n", 0, rss_kib(), static_cast<unsigned long long>(live_before),
              live_graphs(), live_executables());
  long rss_first = 0, rss_last = 0;
  std::uint64_t live_first = 0, live_last = 0, live_max = 0;
  const std::int64_t t0 = now_ns();
  for (long i = 1; i <= iterations; ++i) {
    tether_step(env, *exec, k, env.buf[i & 1]);
    if (i % interval == 0 || i == iterations) {
      env.stream.synchronize();
      rss_last = rss_kib();
      live_last = detail::NodeAttachment::live();
      if (i == interval) rss_first = rss_last, live_first = live_last;
      live_max = std::max(live_max, live_last);
      std::printf("LONG %-10ld %12ld %18llu %12zu %12zu\n", i, rss_last, static_cast<unsigned long long>(live_last),
                  live_graphs(), live_executables());
      std::fflush(stdout);
    }
  }
  const double per = static_cast<double>(now_ns() - t0) / static_cast<double>(iterations);
  std::printf("LONG first interval: RSS %ld KiB, %llu live attachments; last: RSS %ld KiB, %llu live; max %llu live; "
              "%.0f ns per iteration\n",
              rss_first, static_cast<unsigned long long>(live_first), rss_last,
              static_cast<unsigned long long>(live_last), static_cast<unsigned long long>(live_max), per);
  // Bounded: once released, the executable keeps the last graph's K attachments and the K of the
  // graph it was instantiated from (an executable keeps its source graph, whose nodes per-node
  // updates name, whatever the whole updates since); dropping it returns to the count before.
  wait_released(env.ctx);
  const std::uint64_t live_after = detail::NodeAttachment::live();
  exec.reset();
  wait_released(env.ctx);
  const std::uint64_t live_end = detail::NodeAttachment::live();
  const bool bounded = live_after <= live_before + k && live_end <= live_base;
  std::printf("LONG once released: %llu live attachments with the executable (%llu before the loop), %llu without it "
              "(%llu before it was made): %s\n",
              static_cast<unsigned long long>(live_after), static_cast<unsigned long long>(live_before),
              static_cast<unsigned long long>(live_end), static_cast<unsigned long long>(live_base),
              bounded ? "bounded" : "GROWING");
  return bounded ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  bool smoke = false;
  int reps = 11, k = 100, iters = 200;
  long long_iterations = 0;
  std::vector<int> sizes{1000, 10000};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--smoke") {
      smoke = true;
      reps = 1;
      sizes = {50};
      k = 8;
      iters = 10;
      long_iterations = 500;
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (a == "--k" && i + 1 < argc) {
      k = std::atoi(argv[++i]);
    } else if (a == "--iters" && i + 1 < argc) {
      iters = std::atoi(argv[++i]);
    } else if (a == "--long") {
      long_iterations = i + 1 < argc && argv[i + 1][0] != '-' ? std::atol(argv[++i]) : 100000;
      sizes.clear();
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
  Env env{&detail::table_of(rt), ctx, ctx.make_stream(), mod.kernel<float*>("noop"),
          {ctx.alloc<float>(16).share(), ctx.alloc<float>(16).share()}};
  std::printf("INFO %s%s\n", rt.describe().c_str(), smoke ? "; smoke run" : "");
  if (!sizes.empty() || smoke) {
    std::printf("INFO %d repetitions (+1 warm-up discarded), raw and tether interleaved\n", reps);
    std::printf("%-8s %-58s %12s %22s %12s %22s %7s\n", "N", "operation (tether vs raw floor)", "raw ns", "raw min..max",
                "tether ns", "tether min..max", "ratio");
  }
  for (int n : sizes) {
    Samples raw, tet;
    for (int r = 0; r <= reps; ++r) {
      raw_capture_rep(env, n, raw, r > 0);
      tether_capture_rep(env, n, tet, r > 0);
    }
    const std::string sz = std::to_string(n);
    const double div = n;
    row(sz, "capture (owned args) vs raw, no owners", raw.ns["capture: no owners"], tet.ns["capture"], div, "ns per launch");
    row(sz, "capture (owned args) vs raw + user object per launch", raw.ns["capture: user object per launch"],
        tet.ns["capture"], div, "ns per launch");
    row(sz, "capture (owned args) vs raw + user object, graph read once",
        raw.ns["capture: user object per launch, graph read once"], tet.ns["capture"], div, "ns per launch");
    row(sz, "destroy until owners released vs raw, no owners", raw.ns["destroy until owners released: no owners"],
        tet.ns["destroy until owners released"], div, "ns per launch");
    row(sz, "destroy until owners released vs raw + user object", raw.ns["destroy until owners released: user object per launch"],
        tet.ns["destroy until owners released"], div, "ns per launch");
    std::fflush(stdout);
  }
  if (!sizes.empty() || smoke) {
    Samples raw, tet;
    for (int r = 0; r <= reps; ++r) {
      raw_loop(env, k, iters, raw, r > 0);
      tether_loop(env, k, iters, tet, r > 0);
    }
    const std::string sz = "K=" + std::to_string(k);
    const std::string op = "capture-update loop, " + std::to_string(iters) + " iterations";
    row(sz, op, raw.ns["capture-update loop"], tet.ns["capture-update loop"], iters, "ns per iteration");
    row(sz, op, raw.ns["capture-update loop"], tet.ns["capture-update loop"], static_cast<double>(iters) * k,
        "ns per captured launch");
    std::fflush(stdout);
  }
  if (!sizes.empty() || smoke) {
    // What the driver calls the floors are made of cost during a capture, per call.
    const detail::DriverTable& t = *env.t;
    const int calls = smoke ? 100 : 10000;
    CUstream st = env.stream.get();
    REQ(detail::raw<Entry::cuStreamBeginCapture>(t, st, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUstreamCaptureStatus status{};
    CUgraph graph = nullptr;
    const CUgraphNode* deps = nullptr;
    std::size_t ndeps = 0;
    std::int64_t t0 = now_ns();
    for (int i = 0; i < calls; ++i)
      REQ(detail::raw<Entry::cuStreamGetCaptureInfo>(t, st, &status, static_cast<cuuint64_t*>(nullptr), &graph, &deps,
                                                     static_cast<const CUgraphEdgeData**>(nullptr), &ndeps));
    std::int64_t t1 = now_ns();
    CUgraph g = nullptr;
    REQ(detail::raw<Entry::cuStreamEndCapture>(t, st, &g));
    REQ(detail::raw<Entry::cuGraphDestroy>(t, g));
    CUcontext cur = nullptr;
    std::int64_t t2 = now_ns();
    for (int i = 0; i < calls; ++i) REQ(detail::raw<Entry::cuCtxGetCurrent>(t, &cur));
    std::int64_t t3 = now_ns();
    std::printf("DRIVER cuStreamGetCaptureInfo during a capture: %.1f ns per call; cuCtxGetCurrent: %.1f ns per call\n",
                static_cast<double>(t1 - t0) / calls, static_cast<double>(t3 - t2) / calls);
  }
  int rc = 0;
  if (long_iterations > 0) rc = long_run(env, long_iterations);
  return rc;
}
