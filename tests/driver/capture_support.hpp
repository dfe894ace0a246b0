// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Helpers of the capture conformance cases (conformance_capture_*_test.cpp), ported from the probe
// behind the "Capture" section of docs/design/driver-facts.md (capture_facts):
// - Cap / capinfo(): cuStreamGetCaptureInfo with every output.
// - Tracker: the nodes a captured operation added to the capture graph, and whether the capture
//   dependency set is then exactly that node, which depends on the previous set.
// - counter_kernel(): a kernel cap_inc(u32*) that adds 1 to a device counter (an atomic add on the
//   GPU, its twin on the simulator), and Counter, a device word to read back.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "support/driver_fixture.hpp"

namespace tether_test {

/// What cuStreamGetCaptureInfo reported.
struct Cap {
  CUresult r = CUDA_ERROR_UNKNOWN;
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;
  CUgraph g = nullptr;
  std::vector<CUgraphNode> deps;
  std::vector<CUgraphEdgeData> edges;
  bool edges_null = true;
  std::size_t n = 0;
  bool active() const { return r == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_ACTIVE; }
};

inline Cap capinfo(CUstream s) {
  Cap c;
  const CUgraphNode* d = nullptr;
  const CUgraphEdgeData* e = nullptr;
  c.r = raw<Entry::cuStreamGetCaptureInfo>(table(), s, &c.st, &c.id, &c.g, &d, &e, &c.n);
  if (c.active()) {
    if (d) c.deps.assign(d, d + c.n);
    if (e) c.edges.assign(e, e + c.n);
    c.edges_null = e == nullptr;
  }
  return c;
}

inline CUstreamCaptureStatus capture_status(CUstream s) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  CHECK(raw<Entry::cuStreamIsCapturing>(table(), s, &st) == CUDA_SUCCESS);
  return st;
}

inline CUgraphNodeType node_type(CUgraphNode n) {
  CUgraphNodeType t = CU_GRAPH_NODE_TYPE_EMPTY;
  CHECK(raw<Entry::cuGraphNodeGetType>(table(), n, &t) == CUDA_SUCCESS);
  return t;
}

/// The dependencies of node n (cuGraphNodeGetDependencies).
inline std::vector<CUgraphNode> deps_of(CUgraphNode n) {
  std::size_t k = 0;
  CHECK(raw<Entry::cuGraphNodeGetDependencies>(table(), n, static_cast<CUgraphNode*>(nullptr),
                                               static_cast<CUgraphEdgeData*>(nullptr), &k) == CUDA_SUCCESS);
  std::vector<CUgraphNode> v(k);
  if (k) {
    CHECK(raw<Entry::cuGraphNodeGetDependencies>(table(), n, v.data(), static_cast<CUgraphEdgeData*>(nullptr),
                                                 &k) == CUDA_SUCCESS);
    v.resize(k);
  }
  return v;
}

inline bool same_set(std::vector<CUgraphNode> a, std::vector<CUgraphNode> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return a == b;
}

inline bool has(const std::vector<CUgraphNode>& v, CUgraphNode n) {
  return std::find(v.begin(), v.end(), n) != v.end();
}

/// One captured operation as the tracker saw it.
struct Step {
  CUresult op = CUDA_ERROR_UNKNOWN;
  Cap c;                            // capture info right after the operation
  std::vector<CUgraphNode> fresh;   // nodes the operation added to the graph
  std::vector<CUgraphNode> before;  // the stream's dependency set before the operation
  /// The one node added, or nullptr.
  CUgraphNode node() const { return fresh.size() == 1 ? fresh[0] : nullptr; }
  /// The dependency set is exactly the one new node.
  bool exact() const { return c.active() && fresh.size() == 1 && c.deps.size() == 1 && c.deps[0] == fresh[0]; }
  /// The new node depends on exactly the previous dependency set.
  bool chained() const { return node() != nullptr && same_set(deps_of(node()), before); }
  /// No node was added and the dependency set did not change.
  bool unchanged() const { return c.active() && fresh.empty() && same_set(c.deps, before); }
};

/// Observes the capture graph `g` across captured operations on one or more streams.
struct Tracker {
  CUgraph g;
  std::vector<CUgraphNode> seen;
  std::vector<std::pair<CUstream, std::vector<CUgraphNode>>> fronts;

  explicit Tracker(CUgraph graph) : g(graph), seen(nodes_of(graph)) {}
  std::vector<CUgraphNode>& front(CUstream s) {
    for (auto& p : fronts)
      if (p.first == s) return p.second;
    fronts.emplace_back(s, std::vector<CUgraphNode>{});
    return fronts.back().second;
  }
  /// Takes the stream's current dependency set and the graph's nodes as the starting point.
  void seed(CUstream s) {
    front(s) = capinfo(s).deps;
    seen = nodes_of(g);
  }
  /// Records what the operation that returned `op` on stream s did.
  Step after(CUstream s, CUresult op) {
    Step st;
    st.op = op;
    st.c = capinfo(s);
    st.before = front(s);
    std::vector<CUgraphNode> now = nodes_of(g);
    for (CUgraphNode n : now)
      if (!has(seen, n)) st.fresh.push_back(n);
    seen = now;
    if (st.c.active()) front(s) = st.c.deps;
    return st;
  }
};

/// Launches f(arg) with a 1x1x1 grid on s.
inline CUresult launch_kernel(CUfunction f, CUstream s, std::uint64_t arg = 0) {
  void* args[] = {&arg};
  return raw<Entry::cuLaunchKernel>(table(), f, 1u, 1u, 1u, 1u, 1u, 1u, 0u, s, args, static_cast<void**>(nullptr));
}

inline CUevent make_event() {
  CUevent e = nullptr;
  REQUIRE(raw<Entry::cuEventCreate>(table(), &e, static_cast<unsigned>(CU_EVENT_DISABLE_TIMING)) == CUDA_SUCCESS);
  return e;
}
inline void destroy_event(CUevent e) {
  CHECK(raw<Entry::cuEventDestroy>(table(), e) == CUDA_SUCCESS);
}

/// cap_inc(u32* p): adds 1 to *p (one thread).
inline constexpr const char* counter_ptx = R"PTX(
.version 8.0
.target sm_90
.address_size 64

.visible .entry cap_inc(.param .u64 cap_inc_p0)
{
  .reg .b32 %r<2>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [cap_inc_p0];
  atom.add.u32 %r1, [%rd1], 1;
  ret;
}
)PTX";

/// The counter kernel (its module is loaded once per process, never unloaded).
inline CUfunction counter_kernel() {
  static const CUfunction f = [] {
    tether::sim::register_kernel<unsigned*>("cap_inc", [](const tether::sim::LaunchInfo&, unsigned* p) { ++*p; });
    CUmodule m = nullptr;
    require_ok(raw<Entry::cuModuleLoadData>(table(), &m, static_cast<const void*>(counter_ptx)),
               "cuModuleLoadData(cap_inc)");
    CUfunction k = nullptr;
    require_ok(raw<Entry::cuModuleGetFunction>(table(), &k, m, "cap_inc"), "cuModuleGetFunction(cap_inc)");
    return k;
  }();
  return f;
}

/// A 32-bit device counter, zeroed at construction, freed at destruction.
struct Counter {
  CUdeviceptr p = 0;
  Counter() {
    REQUIRE(raw<Entry::cuMemAlloc>(table(), &p, std::size_t{4}) == CUDA_SUCCESS);
    REQUIRE(raw<Entry::cuMemsetD32>(table(), p, 0u, std::size_t{1}) == CUDA_SUCCESS);
  }
  ~Counter() { CHECK(raw<Entry::cuMemFree>(table(), p) == CUDA_SUCCESS); }
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;
  unsigned read() const {
    unsigned v = 0;
    CHECK(raw<Entry::cuMemcpyDtoH>(table(), &v, p, sizeof v) == CUDA_SUCCESS);
    return v;
  }
  /// Captures or enqueues cap_inc(p) on s.
  CUresult inc(CUstream s) const {
    CUdeviceptr arg = p;
    void* args[] = {&arg};
    return raw<Entry::cuLaunchKernel>(table(), counter_kernel(), 1u, 1u, 1u, 1u, 1u, 1u, 0u, s, args,
                                      static_cast<void**>(nullptr));
  }
  /// Adds a cap_inc(p) node to g after deps.
  CUgraphNode add(CUgraph g, const CUgraphNode* deps = nullptr, std::size_t ndeps = 0) const {
    CUdeviceptr arg = p;
    void* args[] = {&arg};
    CUDA_KERNEL_NODE_PARAMS kp = kernel_params(counter_kernel(), args);
    CUgraphNode n = nullptr;
    CHECK(raw<Entry::cuGraphAddKernelNode>(table(), &n, g, deps, ndeps, &kp) == CUDA_SUCCESS);
    return n;
  }
};

}  // namespace tether_test
