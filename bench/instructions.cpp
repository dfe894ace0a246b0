// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// One operation of tether (or, with --raw, the raw driver calls a program without tether would
// make for the same work: the floor), on the fake driver entry points of bench/fake_driver.hpp, for
// counting under callgrind (bench/instructions.sh; docs/performance.md, "Deterministic counts").
// The whole sequence runs once as a warm-up (tether's pools, record storage and log reach their
// steady state), then again with the operation alone between CALLGRIND_ZERO_STATS and
// CALLGRIND_DUMP_STATS_AT (no-ops outside valgrind). Prints on stdout the driver calls the fakes
// counted on this thread during the operation and, for `--op build`, tether's metadata bytes per
// node (graph_bench's definition).
// Usage: instructions --op build|update_all|exec_update|capture|clone|capture_exclusive|param_set|whole_update|plan_update|whole_update_unplanned --n N [--args 1|3] [--raw]
//        instructions --check-fakes   (checks the fake driver's model, see check_fakes)
//   build:       N chained `e.after(prev).launch(k, Grid{1}, Block{1}, bufs...)` in one edit, committed
//   update_all:  one edit updating all N nodes to other buffers, committed
//   exec_update: N per-node GraphExec::update on a fresh executable (the first update of each node)
//   param_set: one GraphExec::set of a Param<SharedBuffer<float>> bound as the first argument of
//     all N nodes, on a fresh executable (floor: N x cuGraphExecKernelNodeSetParams)
//   whole_update: GraphExec::update from a second N-node chain (floor: one cuGraphExecUpdate)
//   whole_update_unplanned: the same, instantiated with InstantiateOptions::plan_updates = false
//   plan_update: GraphExec::plan_update of a second N-node chain (floor: asking the driver, one
//     cuGraphExecUpdate)
//   capture:     tether::capture of N Stream::launch(k, Grid{1}, Block{1}, bufs...), handles kept
//   capture_exclusive: the same with CaptureStreams::exclusive (tether adds each node itself)
//   clone:       Graph::clone of an N-node chain (clone + rekey)
// `--args 3` launches a kernel of three buffer arguments, each node owning three SharedBuffers.
#include <malloc.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_ZERO_STATS
#define CALLGRIND_DUMP_STATS_AT(x)
#endif

#include "fake_driver.hpp"
#include "tether.hpp"

// ---------------------------------------------------------------------------- live heap bytes
// As in graph_bench: C++ heap bytes alive (operator new/delete), here counted only while the
// metadata is measured and only outside the fakes (their graphs and user objects are the driver's
// memory). Outside that measurement the replacement costs a load and a branch per call.
static std::atomic<bool> g_count_heap{false};
static std::atomic<long long> g_live_bytes{0};
void* operator new(std::size_t n) {
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  if (g_count_heap.load(std::memory_order_relaxed) && fake_model::t_depth == 0)
    g_live_bytes.fetch_add(static_cast<long long>(malloc_usable_size(p)), std::memory_order_relaxed);
  return p;
}
void operator delete(void* p) noexcept {
  if (!p) return;
  if (g_count_heap.load(std::memory_order_relaxed) && fake_model::t_depth == 0)
    g_live_bytes.fetch_sub(static_cast<long long>(malloc_usable_size(p)), std::memory_order_relaxed);
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  operator delete(p);
}
// Aligned allocations (owner groups of over-aligned owners) are counted too.
void* operator new(std::size_t n, std::align_val_t a) {
  void* p = std::aligned_alloc(static_cast<std::size_t>(a), (n + static_cast<std::size_t>(a) - 1) & ~(static_cast<std::size_t>(a) - 1));
  if (!p) throw std::bad_alloc();
  if (g_count_heap.load(std::memory_order_relaxed) && fake_model::t_depth == 0)
    g_live_bytes.fetch_add(static_cast<long long>(malloc_usable_size(p)), std::memory_order_relaxed);
  return p;
}
void operator delete(void* p, std::align_val_t) noexcept { operator delete(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { operator delete(p); }

using namespace tether;
using detail::Entry;

namespace {

constexpr const char* kPtx = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry noop1(.param .u64 p0)
{
  ret;
}
.visible .entry noop3(.param .u64 p0, .param .u64 p1, .param .u64 p2)
{
  ret;
}
)";

enum class Op { build, update_all, exec_update, capture, clone, capture_exclusive, param_set, whole_update, plan_update, whole_update_unplanned };
constexpr const char* kOpNames[] = {"build", "update_all",        "exec_update", "capture",     "clone",
                                    "capture_exclusive", "param_set", "whole_update", "plan_update", "whole_update_unplanned"};
constexpr int kOps = static_cast<int>(std::size(kOpNames));

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "instructions: %s\nusage: instructions --op build|update_all|exec_update|capture|clone|capture_exclusive|param_set|whole_update|plan_update|whole_update_unplanned --n N "
               "[--args 1|3] [--raw]\n       instructions --check-fakes\n",
               why.c_str());
  std::exit(2);
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "FATAL instructions: %s\n", what);
    std::exit(1);
  }
}
void req(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "FATAL instructions: %s -> %s\n", what, std::string(result_name(r)).c_str());
    std::exit(1);
  }
}

// The measured window. Everything between ZERO and DUMP on this thread is the operation; the
// fakes count calls only in it.
void begin_window() {
  fake_model::reset_calls();
  fake_model::counting(true);
  CALLGRIND_ZERO_STATS;
}
void end_window() {
  CALLGRIND_DUMP_STATS_AT("instructions-measured");
  fake_model::counting(false);
}

void noop_dtor(void*) {}

// Nothing of one repetition may still be released while the next one runs.
void settle() {
  reclaim();
  check(wait_reclaimed(std::chrono::seconds(30)), "releases did not finish within 30 s");
}

struct Env {
  Context ctx;
  Module mod;
  std::vector<SharedBuffer<float>> a, b;  // three each: the node's buffers, and the update's
  Stream stream;
  Kernel<float*> k1;
  Kernel<float*, float*, float*> k3;
  const detail::DriverTable* t = nullptr;
  explicit Env(Runtime& rt)
      : ctx(rt.context(0)),
        mod((ctx.make_current(), ctx.load_module(Image::from_ptx(kPtx)))),
        stream(ctx.make_stream()),
        k1(mod.kernel<float*>("noop1")),
        k3(mod.kernel<float*, float*, float*>("noop3")) {
    for (int i = 0; i < 3; ++i) {
      a.push_back(ctx.alloc<float>(16).share());
      b.push_back(ctx.alloc<float>(16).share());
    }
  }
};

// The kernel and the arguments of one node: one or three owned buffers.
template <int A>
struct Args;
template <>
struct Args<1> {
  using K = Kernel<float*>;
  using NodeT = Node<KernelNode<float*>>;
  static K kernel(Env& env) { return env.k1; }
  template <class F>
  static decltype(auto) with(std::vector<SharedBuffer<float>>& v, F&& f) {
    return f(v[0]);
  }
};
template <>
struct Args<3> {
  using K = Kernel<float*, float*, float*>;
  using NodeT = Node<KernelNode<float*, float*, float*>>;
  static K kernel(Env& env) { return env.k3; }
  template <class F>
  static decltype(auto) with(std::vector<SharedBuffer<float>>& v, F&& f) {
    return f(v[0], v[1], v[2]);
  }
};

template <int A>
void build_chain(Env& env, typename Args<A>::K& k, Graph& g, std::vector<typename Args<A>::NodeT>& nodes) {
  g.edit([&](Edit& e) {
    for (std::size_t i = 0; i < nodes.size(); ++i)
      Args<A>::with(env.a, [&](auto&... bufs) {
        nodes[i] = i ? e.after(nodes[i - 1]).launch(k, Grid{1}, Block{1}, bufs...)
                     : e.launch(k, Grid{1}, Block{1}, bufs...);
      });
  });
}

// One repetition of tether's sequence for `op`; the operation itself is measured if `measure`.
template <int A>
void run_tether(Env& env, Op op, int n, bool measure) {
  using K = typename Args<A>::K;
  using N = typename Args<A>::NodeT;
  K k = Args<A>::kernel(env);
  auto in = [&](auto&& body) {
    if (measure) begin_window();
    body();
    if (measure) end_window();
  };
  const auto count = static_cast<std::size_t>(n);
  std::vector<N> nodes(count);
  switch (op) {
    case Op::build: {
      Graph g(env.ctx);
      in([&] { build_chain<A>(env, k, g, nodes); });
      check(g.node_count() == count, "build: the graph does not have N nodes");
      break;
    }
    case Op::update_all: {
      Graph g(env.ctx);
      build_chain<A>(env, k, g, nodes);
      in([&] {
        g.edit([&](Edit& e) {
          for (N& nd : nodes)
            Args<A>::with(env.b, [&](auto&... bufs) { e.update(nd, Grid{1}, Block{1}, bufs...); });
        });
      });
      break;
    }
    case Op::exec_update: {
      Graph g(env.ctx);
      build_chain<A>(env, k, g, nodes);
      GraphExec x = g.instantiate();
      in([&] {
        for (N& nd : nodes)
          Args<A>::with(env.b, [&](auto&... bufs) { x.update(nd, Grid{1}, Block{1}, bufs...); });
      });
      break;
    }
    case Op::param_set: {
      Param<SharedBuffer<float>> p(env.a[0], "p");
      Graph g(env.ctx);
      g.edit([&](Edit& e) {
        for (std::size_t i = 0; i < count; ++i) {
          auto add = [&](auto&& at) {
            if constexpr (A == 1)
              return at.launch(k, Grid{1}, Block{1}, p);
            else
              return at.launch(k, Grid{1}, Block{1}, p, env.a[1], env.a[2]);
          };
          nodes[i] = i ? add(e.after(nodes[i - 1])) : add(e.after());
        }
      });
      GraphExec x = g.instantiate();
      std::size_t set = 0;
      in([&] { set = x.set(p, env.b[0]); });
      check(set == count, "param_set: the set did not reach N nodes");
      break;
    }
    case Op::whole_update:
    case Op::whole_update_unplanned:
    case Op::plan_update: {
      Graph g(env.ctx), g2(env.ctx);
      build_chain<A>(env, k, g, nodes);
      std::vector<N> second(count);
      build_chain<A>(env, k, g2, second);
      InstantiateOptions o;
      o.plan_updates = op != Op::whole_update_unplanned;
      GraphExec x = g.instantiate(o);
      bool ok = false;
      if (op != Op::plan_update)
        in([&] { ok = static_cast<bool>(x.update(g2)); });
      else
        in([&] { ok = static_cast<bool>(x.plan_update(g2)); });
      check(ok, "whole_update/plan_update: the update of an identical chain was refused");
      break;
    }
    case Op::capture:
    case Op::capture_exclusive: {
      Graph g;
      const CaptureStreams streams = op == Op::capture ? CaptureStreams::shared : CaptureStreams::exclusive;
      in([&] {
        g = capture(env.stream, CaptureMode::global, streams, [&] {
          for (N& nd : nodes)
            Args<A>::with(env.a,
                          [&](auto&... bufs) { nd = env.stream.launch(k, Grid{1}, Block{1}, bufs...); });
        });
      });
      check(g.node_count() == count, "capture: the captured graph does not have N nodes");
      for (N& nd : nodes)
        check(nd.valid(), "capture: a captured launch's node was not identified (no valid handle)");
      break;
    }
    case Op::clone: {
      Graph g(env.ctx);
      build_chain<A>(env, k, g, nodes);
      Graph c;
      in([&] { c = g.clone(); });
      check(c.node_count() == count, "clone: the clone does not have N nodes");
      break;
    }
  }
  nodes.clear();
  settle();
}

// The floor: the raw calls into the same fakes (one user object per node, owning nothing).
template <int A>
void run_raw(Env& env, Op op, int n, bool measure) {
  const detail::DriverTable& t = *env.t;
  auto in = [&](auto&& body) {
    if (measure) begin_window();
    body();
    if (measure) end_window();
  };
  typename Args<A>::K k = Args<A>::kernel(env);
  float* argv[3] = {env.a[0].data(), env.a[1].data(), env.a[2].data()};
  void* args[3] = {&argv[0], &argv[1], &argv[2]};
  CUDA_KERNEL_NODE_PARAMS p{};
  p.func = k.function();
  p.gridDimX = p.gridDimY = p.gridDimZ = p.blockDimX = p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = args;
  const auto count = static_cast<std::size_t>(n);
  std::vector<CUgraphNode> nodes(count);
  std::vector<CUuserObject> uos(count);
  const unsigned move = CU_GRAPH_USER_OBJECT_MOVE, nosync = CU_USER_OBJECT_NO_DESTRUCTOR_SYNC;
  auto add_all = [&](CUgraph g) {
    for (std::size_t i = 0; i < count; ++i) {
      req(detail::raw<Entry::cuGraphAddKernelNode>(t, &nodes[i], g, i ? &nodes[i - 1] : nullptr,
                                                   std::size_t{i ? 1u : 0u}, &p),
          "cuGraphAddKernelNode");
      req(detail::raw<Entry::cuUserObjectCreate>(t, &uos[i], static_cast<void*>(nullptr), &noop_dtor, 1u,
                                                 nosync),
          "cuUserObjectCreate");
      req(detail::raw<Entry::cuGraphRetainUserObject>(t, g, uos[i], 1u, move), "cuGraphRetainUserObject");
    }
  };
  CUgraph g = nullptr;
  if (op != Op::capture) req(detail::raw<Entry::cuGraphCreate>(t, &g, 0u), "cuGraphCreate");
  switch (op) {
    case Op::build:
      in([&] { add_all(g); });
      break;
    case Op::update_all:
      add_all(g);
      in([&] {
        for (std::size_t i = 0; i < count; ++i) {
          req(detail::raw<Entry::cuGraphKernelNodeSetParams>(t, nodes[i], &p), "cuGraphKernelNodeSetParams");
          CUuserObject u;
          req(detail::raw<Entry::cuUserObjectCreate>(t, &u, static_cast<void*>(nullptr), &noop_dtor, 1u,
                                                     nosync),
              "cuUserObjectCreate");
          req(detail::raw<Entry::cuGraphRetainUserObject>(t, g, u, 1u, move), "cuGraphRetainUserObject");
          req(detail::raw<Entry::cuGraphReleaseUserObject>(t, g, uos[i], 1u), "cuGraphReleaseUserObject");
          uos[i] = u;
        }
      });
      break;
    case Op::exec_update:
    case Op::param_set: {
      add_all(g);
      CUgraphExec x;
      req(detail::raw<Entry::cuGraphInstantiateWithFlags>(t, &x, g, 0ull), "cuGraphInstantiateWithFlags");
      in([&] {
        for (std::size_t i = 0; i < count; ++i)
          req(detail::raw<Entry::cuGraphExecKernelNodeSetParams>(t, x, nodes[i], &p),
              "cuGraphExecKernelNodeSetParams");
      });
      req(detail::raw<Entry::cuGraphExecDestroy>(t, x), "cuGraphExecDestroy");
      break;
    }
    case Op::whole_update:
    case Op::whole_update_unplanned:
    case Op::plan_update: {
      add_all(g);
      CUgraph g2 = nullptr;
      req(detail::raw<Entry::cuGraphCreate>(t, &g2, 0u), "cuGraphCreate");
      add_all(g2);
      CUgraphExec x;
      req(detail::raw<Entry::cuGraphInstantiateWithFlags>(t, &x, g, 0ull), "cuGraphInstantiateWithFlags");
      in([&] {
        CUgraphExecUpdateResultInfo info{};
        req(detail::raw<Entry::cuGraphExecUpdate>(t, x, g2, &info), "cuGraphExecUpdate");
      });
      req(detail::raw<Entry::cuGraphExecDestroy>(t, x), "cuGraphExecDestroy");
      req(detail::raw<Entry::cuGraphDestroy>(t, g2), "cuGraphDestroy");
      break;
    }
    case Op::capture:
    case Op::capture_exclusive: {
      // As capture_bench's floor with one user object per launch: a stream operation does not
      // know who began the capture, so it asks for the capturing graph.
      CUstream s = env.stream.get();
      in([&] {
        req(detail::raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL),
            "cuStreamBeginCapture");
        for (std::size_t i = 0; i < count; ++i) {
          CUstreamCaptureStatus status{};
          CUgraph cg = nullptr;
          req(detail::raw<Entry::cuStreamGetCaptureInfo>(t, s, &status, static_cast<cuuint64_t*>(nullptr),
                                                         &cg, static_cast<const CUgraphNode**>(nullptr),
                                                         static_cast<const CUgraphEdgeData**>(nullptr),
                                                         static_cast<std::size_t*>(nullptr)),
              "cuStreamGetCaptureInfo");
          CUuserObject u;
          req(detail::raw<Entry::cuUserObjectCreate>(t, &u, static_cast<void*>(nullptr), &noop_dtor, 1u,
                                                     nosync),
              "cuUserObjectCreate");
          req(detail::raw<Entry::cuGraphRetainUserObject>(t, cg, u, 1u, move), "cuGraphRetainUserObject");
          req(detail::raw<Entry::cuLaunchKernel>(t, p.func, 1u, 1u, 1u, 1u, 1u, 1u, 0u, s, args,
                                                 static_cast<void**>(nullptr)),
              "cuLaunchKernel");
        }
        req(detail::raw<Entry::cuStreamEndCapture>(t, s, &g), "cuStreamEndCapture");
      });
      break;
    }
    case Op::clone: {
      add_all(g);
      CUgraph c = nullptr;
      in([&] {
        req(detail::raw<Entry::cuGraphClone>(t, &c, g), "cuGraphClone");
        for (std::size_t i = 0; i < count; ++i) {
          CUgraphNode copy;
          req(detail::raw<Entry::cuGraphNodeFindInClone>(t, &copy, nodes[i], c), "cuGraphNodeFindInClone");
        }
      });
      req(detail::raw<Entry::cuGraphDestroy>(t, c), "cuGraphDestroy");
      break;
    }
  }
  req(detail::raw<Entry::cuGraphDestroy>(t, g), "cuGraphDestroy");
}

// The fake driver's model answers as the driver would, for both ways of learning a captured node:
// the stream operation followed by reading the graph (identification), and the direct add at the
// capture's dependencies followed by cuStreamUpdateCaptureDependencies(SET). Also clone and
// instantiate. Exits 1 naming the first check that fails.
void check_fakes(Env& env) {
  const detail::DriverTable& t = *env.t;
  CUstream s = env.stream.get();
  CUstreamCaptureStatus status{};
  cuuint64_t id = 0;
  CUgraph cg = nullptr;
  const CUgraphNode* deps = nullptr;
  const CUgraphEdgeData* edges = nullptr;
  std::size_t n = 0;
  auto info = [&] {
    req(detail::raw<Entry::cuStreamGetCaptureInfo>(t, s, &status, &id, &cg, &deps, &edges, &n),
        "cuStreamGetCaptureInfo");
  };
  info();
  check(status == CU_STREAM_CAPTURE_STATUS_NONE, "a stream that never began a capture reports a capture");
  req(detail::raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
  check(detail::raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) != CUDA_SUCCESS,
        "a second cuStreamBeginCapture on a capturing stream succeeded");
  req(detail::raw<Entry::cuStreamIsCapturing>(t, s, &status), "cuStreamIsCapturing");
  check(status == CU_STREAM_CAPTURE_STATUS_ACTIVE, "cuStreamIsCapturing does not report the capture");
  info();
  check(status == CU_STREAM_CAPTURE_STATUS_ACTIVE && cg && id && n == 0, "a new capture's info is wrong");
  const CUgraph graph = cg;
  float* arg = env.a[0].data();
  void* args[1] = {&arg};
  // 1. A captured launch: a kernel node after the (empty) set, which becomes the set.
  req(detail::raw<Entry::cuLaunchKernel>(t, env.k1.function(), 1u, 1u, 1u, 1u, 1u, 1u, 0u, s, args,
                                         static_cast<void**>(nullptr)),
      "cuLaunchKernel");
  info();
  check(n == 1 && deps && cg == graph, "a captured launch did not make the set its node");
  const CUgraphNode first = deps[0];
  CUgraphNode preds[4] = {};
  std::size_t np = 4;
  req(detail::raw<Entry::cuGraphNodeGetDependencies>(t, first, preds, static_cast<CUgraphEdgeData*>(nullptr),
                                                     &np),
      "cuGraphNodeGetDependencies");
  check(np == 0, "the first captured node has dependencies");
  // 2. The direct add at the capture's dependencies, then SET.
  CUgraphNodeParams p{};
  p.type = CU_GRAPH_NODE_TYPE_KERNEL;
  CUgraphNode added = nullptr;
  req(detail::raw<Entry::cuGraphAddNode>(t, &added, cg, deps, static_cast<const CUgraphEdgeData*>(nullptr), n,
                                         &p),
      "cuGraphAddNode into the capturing graph");
  info();
  check(n == 1 && deps[0] == first, "cuGraphAddNode into the capturing graph changed the capture's set");
  req(detail::raw<Entry::cuStreamUpdateCaptureDependencies>(
          t, s, &added, static_cast<const CUgraphEdgeData*>(nullptr), std::size_t{1},
          static_cast<unsigned>(CU_STREAM_SET_CAPTURE_DEPENDENCIES)),
      "cuStreamUpdateCaptureDependencies(SET)");
  info();
  check(n == 1 && deps[0] == added,
        "cuStreamUpdateCaptureDependencies(SET) did not make the set the added node");
  // 3. Another launch depends on the added node only.
  req(detail::raw<Entry::cuLaunchKernel>(t, env.k1.function(), 1u, 1u, 1u, 1u, 1u, 1u, 0u, s, args,
                                         static_cast<void**>(nullptr)),
      "cuLaunchKernel");
  info();
  const CUgraphNode third = deps[0];
  np = 4;
  req(detail::raw<Entry::cuGraphNodeGetDependencies>(t, third, preds, static_cast<CUgraphEdgeData*>(nullptr),
                                                     &np),
      "cuGraphNodeGetDependencies");
  check(np == 1 && preds[0] == added && preds[1] == nullptr,
        "a launch after SET does not depend on the set alone");
  np = 0;
  req(detail::raw<Entry::cuGraphNodeGetDependencies>(t, third, static_cast<CUgraphNode*>(nullptr),
                                                     static_cast<CUgraphEdgeData*>(nullptr), &np),
      "cuGraphNodeGetDependencies (count)");
  check(np == 1, "the dependency count is wrong");
  // ADD extends the set.
  req(detail::raw<Entry::cuStreamUpdateCaptureDependencies>(
          t, s, const_cast<CUgraphNode*>(&first), static_cast<const CUgraphEdgeData*>(nullptr),
          std::size_t{1}, static_cast<unsigned>(CU_STREAM_ADD_CAPTURE_DEPENDENCIES)),
      "cuStreamUpdateCaptureDependencies(ADD)");
  info();
  check(n == 2 && deps[0] == third && deps[1] == first,
        "cuStreamUpdateCaptureDependencies(ADD) did not extend the set");
  CUgraph ended = nullptr;
  req(detail::raw<Entry::cuStreamEndCapture>(t, s, &ended), "cuStreamEndCapture");
  check(ended == graph, "cuStreamEndCapture returned another graph");
  info();
  check(status == CU_STREAM_CAPTURE_STATUS_NONE, "the stream still captures after cuStreamEndCapture");
  CUgraphNode all[3] = {};
  std::size_t nn = 0;
  req(detail::raw<Entry::cuGraphGetNodes>(t, ended, static_cast<CUgraphNode*>(nullptr), &nn),
      "cuGraphGetNodes (count)");
  check(nn == 3, "the captured graph does not have 3 nodes");
  req(detail::raw<Entry::cuGraphGetNodes>(t, ended, all, &nn), "cuGraphGetNodes");
  check(all[0] == first && all[1] == added && all[2] == third, "cuGraphGetNodes is not in creation order");
  for (CUgraphNode x : all) {
    CUgraphNodeType ty{};
    req(detail::raw<Entry::cuGraphNodeGetType>(t, x, &ty), "cuGraphNodeGetType");
    check(ty == CU_GRAPH_NODE_TYPE_KERNEL, "a captured node is not a kernel node");
  }
  // 4. Clone: nodes found by index, dependencies mapped; user objects shared by reference.
  static int destroyed = 0;
  CUuserObject u = nullptr;
  req(detail::raw<Entry::cuUserObjectCreate>(
          t, &u, static_cast<void*>(nullptr), [](void*) { ++destroyed; }, 1u,
          static_cast<unsigned>(CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)),
      "cuUserObjectCreate");
  req(detail::raw<Entry::cuGraphRetainUserObject>(t, ended, u, 1u,
                                                  static_cast<unsigned>(CU_GRAPH_USER_OBJECT_MOVE)),
      "cuGraphRetainUserObject");
  CUgraph clone = nullptr;
  req(detail::raw<Entry::cuGraphClone>(t, &clone, ended), "cuGraphClone");
  CUgraphNode third_copy = nullptr, added_copy = nullptr;
  req(detail::raw<Entry::cuGraphNodeFindInClone>(t, &third_copy, third, clone), "cuGraphNodeFindInClone");
  req(detail::raw<Entry::cuGraphNodeFindInClone>(t, &added_copy, added, clone), "cuGraphNodeFindInClone");
  check(third_copy != third, "a clone's node is the original's");
  np = 4;
  req(detail::raw<Entry::cuGraphNodeGetDependencies>(t, third_copy, preds,
                                                     static_cast<CUgraphEdgeData*>(nullptr), &np),
      "cuGraphNodeGetDependencies in a clone");
  check(np == 1 && preds[0] == added_copy, "a clone's dependencies are not the copies'");
  CUgraphNode wrong = nullptr;
  check(detail::raw<Entry::cuGraphNodeFindInClone>(t, &wrong, third_copy, clone) != CUDA_SUCCESS,
        "cuGraphNodeFindInClone found a node that is not from the clone's original");
  CUgraphExec x = nullptr;
  req(detail::raw<Entry::cuGraphInstantiateWithFlags>(t, &x, clone, 0ull), "cuGraphInstantiateWithFlags");
  req(detail::raw<Entry::cuGraphDestroy>(t, ended), "cuGraphDestroy");
  req(detail::raw<Entry::cuGraphDestroy>(t, clone), "cuGraphDestroy");
  check(destroyed == 0, "a user object died while an executable of a clone still held it");
  req(detail::raw<Entry::cuGraphExecDestroy>(t, x), "cuGraphExecDestroy");
  check(destroyed == 1, "a user object did not die with the last graph holding it");
  // 5. Adding after a node of another graph is refused.
  CUgraph other = nullptr;
  req(detail::raw<Entry::cuGraphCreate>(t, &other, 0u), "cuGraphCreate");
  CUgraphNode in_other = nullptr;
  req(detail::raw<Entry::cuGraphAddNode>(t, &in_other, other, static_cast<const CUgraphNode*>(nullptr),
                                         static_cast<const CUgraphEdgeData*>(nullptr), std::size_t{0}, &p),
      "cuGraphAddNode");
  CUgraph third_graph = nullptr;
  req(detail::raw<Entry::cuGraphCreate>(t, &third_graph, 0u), "cuGraphCreate");
  CUgraphNode bad = nullptr;
  check(detail::raw<Entry::cuGraphAddNode>(t, &bad, third_graph, &in_other,
                                           static_cast<const CUgraphEdgeData*>(nullptr), std::size_t{1},
                                           &p) != CUDA_SUCCESS,
        "cuGraphAddNode accepted a dependency from another graph");
  req(detail::raw<Entry::cuGraphDestroy>(t, other), "cuGraphDestroy");
  req(detail::raw<Entry::cuGraphDestroy>(t, third_graph), "cuGraphDestroy");
  std::printf("FAKES the fake driver's graph and capture model is consistent\n");
}

// graph_bench's "metadata per node": heap bytes tether keeps per node after commit, owners
// excluded (the Kernel and SharedBuffer handles a version stores); the owner-group pool emptied
// first so that every group shows as heap growth. Unchained nodes, as graph_bench builds them.
template <int A>
double metadata_bytes(Env& env, int n) {
  typename Args<A>::K k = Args<A>::kernel(env);
  settle();
  detail::group_pool_release();
  g_live_bytes.store(0);
  g_count_heap.store(true);
  Graph g(env.ctx);  // counted, as in graph_bench (a fixed cost: a few bytes per node at N = 1 000)
  g.edit([&](Edit& e) {
    for (int i = 0; i < n; ++i)
      Args<A>::with(env.a, [&](auto&... bufs) { e.launch(k, Grid{1}, Block{1}, bufs...); });
  });
  g_count_heap.store(false);
  const long long owners_each = static_cast<long long>(sizeof(k) + A * sizeof(SharedBuffer<float>));
  return static_cast<double>(g_live_bytes.load() - owners_each * n) / n;
}

template <int A>
void run(Env& env, Op op, int n, bool raw) {
  // The whole sequence once to warm up, then measured.
  for (bool measure : {false, true})
    raw ? run_raw<A>(env, op, n, measure) : run_tether<A>(env, op, n, measure);
  std::printf("CALLS op=%s mode=%s n=%d args=%d total=%llu", kOpNames[static_cast<int>(op)],
              raw ? "raw" : "tether", n, A, static_cast<unsigned long long>(fake_model::total_calls()));
  for (std::size_t i = 0; i < detail::entry_count; ++i)
    if (fake_model::g_calls[i])
      std::printf(" %s=%llu", std::string(detail::entry_names[i]).c_str(),
                  static_cast<unsigned long long>(fake_model::g_calls[i]));
  std::printf("\n");
  if (op == Op::build && !raw)
    std::printf("METADATA n=%d args=%d bytes_per_node=%.1f\n", n, A, metadata_bytes<A>(env, n));
}

}  // namespace

int main(int argc, char** argv) {
  int n = 0, nargs = 1;
  bool raw = false, check_only = false;
  Op op{};
  bool have_op = false;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--op" && i + 1 < argc) {
      std::string v = argv[++i];
      for (int o = 0; o < kOps; ++o)
        if (v == kOpNames[o]) {
          op = static_cast<Op>(o);
          have_op = true;
        }
      if (!have_op) usage("unknown operation '" + v + "'");
    } else if (s == "--n" && i + 1 < argc) {
      n = std::atoi(argv[++i]);
    } else if (s == "--args" && i + 1 < argc) {
      nargs = std::atoi(argv[++i]);
    } else if (s == "--raw") {
      raw = true;
    } else if (s == "--check-fakes") {
      check_only = true;
    } else {
      usage("unknown argument '" + s + "'");
    }
  }
  if (!check_only && !have_op) usage("--op is required");
  if (!check_only && n < 1) usage("--n must be a positive number of nodes");
  if (nargs != 1 && nargs != 3) usage("--args must be 1 or 3");

  ::setenv("TETHER_DRIVER", "sim", 1);
  sim::register_kernel<float*>("noop1", [](const sim::LaunchInfo&, float*) {});
  sim::register_kernel<float*, float*, float*>("noop3",
                                               [](const sim::LaunchInfo&, float*, float*, float*) {});
  Runtime rt = Runtime::open();
  Env env(rt);
  fake_model::g_arg = env.a[0].data();
  auto& table = const_cast<detail::DriverTable&>(detail::table_of(rt));
  env.t = &table;
  fake_model::install(table, env.ctx.get());
  fake_model::strict(true);  // from here every driver call must reach a fake
  if (check_only)
    check_fakes(env);
  else
    nargs == 1 ? run<1>(env, op, n, raw) : run<3>(env, op, n, raw);
  fake_model::strict(false);  // the buffers, the stream and the module go back to the simulator
  std::fflush(stdout);
  return 0;
}
