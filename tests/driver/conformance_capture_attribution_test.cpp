// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Driver conformance, capture_facts c1a-c1y8 and c10o: which node each captured operation becomes
// and what the capture dependency set is afterwards (the attribution a library relies on to attach
// owners to captured work), forks and joins through events, and the event waits a capture refuses.
#include <doctest/doctest.h>

#include <array>
#include <cstring>

#include "capture_support.hpp"
#include "sim/sim.hpp"
#include "support/driver_fixture.hpp"
#include "tether.hpp"

using namespace tether::detail;
using namespace tether_test;

namespace {

// Host memory pinned with cuMemAllocHost, freed at the end of the scope.
struct Pinned {
  void* p = nullptr;
  explicit Pinned(std::size_t n) {
    REQUIRE(raw<Entry::cuMemAllocHost>(table(), &p, n) == CUDA_SUCCESS);
    std::memset(p, 0, n);
  }
  ~Pinned() { CHECK(raw<Entry::cuMemFreeHost>(table(), p) == CUDA_SUCCESS); }
};

struct Device {
  CUdeviceptr p = 0;
  explicit Device(std::size_t n) { REQUIRE(raw<Entry::cuMemAlloc>(table(), &p, n) == CUDA_SUCCESS); }
  ~Device() { CHECK(raw<Entry::cuMemFree>(table(), p) == CUDA_SUCCESS); }
};

// The step made exactly one node of `type`, which depends on the previous dependency set, and the
// set is now that node.
void check_attributed(const Step& st, CUgraphNodeType type) {
  CHECK(st.op == CUDA_SUCCESS);
  CHECK(st.c.st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  REQUIRE(st.exact());
  CHECK(node_type(st.node()) == type);
  CHECK(st.chained());
  CHECK(st.c.edges.size() == 1);  // default edge data (all zero)
  if (st.c.edges.size() == 1) {
    CHECK(st.c.edges[0].type == 0);
    CHECK(st.c.edges[0].from_port == 0);
  }
}

CUDA_MEMCPY3D copy_params(CUgraphNode n) {
  CUDA_MEMCPY3D m{};
  CHECK(raw<Entry::cuGraphMemcpyNodeGetParams>(table(), n, &m) == CUDA_SUCCESS);
  return m;
}

CUDA_MEMSET_NODE_PARAMS set_params(CUgraphNode n) {
  CUDA_MEMSET_NODE_PARAMS m{};
  CHECK(raw<Entry::cuGraphMemsetNodeGetParams>(table(), n, &m) == CUDA_SUCCESS);
  return m;
}

std::uint64_t kernel_arg0(CUgraphNode n, CUfunction* func = nullptr) {
  CUDA_KERNEL_NODE_PARAMS kp{};
  CHECK(raw<Entry::cuGraphKernelNodeGetParams>(table(), n, &kp) == CUDA_SUCCESS);
  if (func) *func = kp.func;
  std::uint64_t v = 0;
  if (kp.kernelParams && kp.kernelParams[0]) std::memcpy(&v, kp.kernelParams[0], sizeof v);
  return v;
}

}  // namespace

TEST_SUITE_BEGIN("driver conformance");

TEST_CASE_FIXTURE(DriverFixture,
                  "c1a c1b c1y5 c1c c1d c1e c1f c1y1 c1y2 c1g c1r: after each captured kernel launch (cuLaunchKernel, "
                  "cuLaunchKernelEx), copy of every direction (pinned and pageable host memory, cuMemcpyAsync through "
                  "unified addresses) and memset of 8, 16 and 32 bits, the capture dependency set is exactly the "
                  "one new node of that type, which depends on the previous set") {
  Device da(4096), db(4096);
  Pinned pin(4096);
  std::vector<unsigned char> pageable(4096, 0);
  CUstream s = new_stream();
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  Cap c0 = capinfo(s);  // c1a
  CHECK(c0.r == CUDA_SUCCESS);
  CHECK(c0.st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  REQUIRE(c0.g != nullptr);
  CHECK(c0.n == 0);
  CHECK(c0.edges_null);
  CHECK(node_count(c0.g) == 0);
  Tracker T(c0.g);
  T.seed(s);

  Step st = T.after(s, launch_kernel(noop, s, 0x1234));  // c1b
  check_attributed(st, CU_GRAPH_NODE_TYPE_KERNEL);
  CUfunction f = nullptr;
  CHECK(kernel_arg0(st.node(), &f) == 0x1234);
  CHECK(f == noop);
  {  // c1y5
    CUlaunchConfig cfg{};
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = s;
    std::uint64_t a = 42;
    void* args[] = {&a};
    st = T.after(s, raw<Entry::cuLaunchKernelEx>(t, &cfg, other, args, static_cast<void**>(nullptr)));
    check_attributed(st, CU_GRAPH_NODE_TYPE_KERNEL);
    CHECK(kernel_arg0(st.node(), &f) == 42);
    CHECK(f == other);
  }
  st = T.after(s, raw<Entry::cuMemcpyHtoDAsync>(t, da.p, pin.p, std::size_t{256}, s));  // c1c
  check_attributed(st, CU_GRAPH_NODE_TYPE_MEMCPY);
  CHECK(copy_params(st.node()).srcMemoryType == CU_MEMORYTYPE_HOST);
  CHECK(copy_params(st.node()).dstMemoryType == CU_MEMORYTYPE_DEVICE);
  CHECK(copy_params(st.node()).WidthInBytes == 256);
  st = T.after(s, raw<Entry::cuMemcpyDtoDAsync>(t, db.p, da.p, std::size_t{256}, s));  // c1d
  check_attributed(st, CU_GRAPH_NODE_TYPE_MEMCPY);
  CHECK(copy_params(st.node()).srcMemoryType == CU_MEMORYTYPE_DEVICE);
  CHECK(copy_params(st.node()).dstMemoryType == CU_MEMORYTYPE_DEVICE);
  st = T.after(s, raw<Entry::cuMemcpyAsync>(t, db.p, da.p, std::size_t{256}, s));  // c1e
  check_attributed(st, CU_GRAPH_NODE_TYPE_MEMCPY);
  CHECK(copy_params(st.node()).srcMemoryType == CU_MEMORYTYPE_UNIFIED);
  CHECK(copy_params(st.node()).dstMemoryType == CU_MEMORYTYPE_UNIFIED);
  st = T.after(s, raw<Entry::cuMemcpyDtoHAsync>(t, pin.p, db.p, std::size_t{256}, s));  // c1f
  check_attributed(st, CU_GRAPH_NODE_TYPE_MEMCPY);
  CHECK(copy_params(st.node()).srcMemoryType == CU_MEMORYTYPE_DEVICE);
  CHECK(copy_params(st.node()).dstMemoryType == CU_MEMORYTYPE_HOST);
  st = T.after(s, raw<Entry::cuMemcpyHtoDAsync>(t, da.p, static_cast<const void*>(pageable.data()), std::size_t{256},
                                                s));  // c1y1
  check_attributed(st, CU_GRAPH_NODE_TYPE_MEMCPY);
  CHECK(copy_params(st.node()).srcMemoryType == CU_MEMORYTYPE_HOST);
  st = T.after(s, raw<Entry::cuMemcpyAsync>(t, da.p, static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(
                                                         pageable.data())),
                                            std::size_t{256}, s));  // c1y2
  check_attributed(st, CU_GRAPH_NODE_TYPE_MEMCPY);
  CHECK(copy_params(st.node()).srcMemoryType == CU_MEMORYTYPE_UNIFIED);
  st = T.after(s, raw<Entry::cuMemsetD32Async>(t, da.p, 7u, std::size_t{64}, s));  // c1g
  check_attributed(st, CU_GRAPH_NODE_TYPE_MEMSET);
  CHECK(set_params(st.node()).dst == da.p);
  CHECK(set_params(st.node()).value == 7);
  CHECK(set_params(st.node()).elementSize == 4);
  CHECK(set_params(st.node()).width == 64);
  st = T.after(s, raw<Entry::cuMemsetD16Async>(t, db.p, static_cast<unsigned short>(3), std::size_t{32}, s));
  check_attributed(st, CU_GRAPH_NODE_TYPE_MEMSET);
  CHECK(set_params(st.node()).elementSize == 2);
  CHECK(set_params(st.node()).width == 32);
  st = T.after(s, raw<Entry::cuMemsetD8Async>(t, db.p, static_cast<unsigned char>(5), std::size_t{16}, s));
  check_attributed(st, CU_GRAPH_NODE_TYPE_MEMSET);
  CHECK(set_params(st.node()).elementSize == 1);
  CHECK(set_params(st.node()).value == 5);

  CUgraph g = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_SUCCESS);
  CHECK(g == c0.g);
  CHECK(node_count(g) == 11);
  CUgraphExec e = instantiate(g);
  launch_on(e, s);
  sync_on(s);
  destroy_exec(e);
  destroy_graph(g);
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c1h c7a: a captured cuLaunchHostFunc becomes one HOST node, the dependency set is that node, "
                  "cuGraphHostNodeGetParams returns the fn and userData passed, and the callback does not run at "
                  "capture") {
  HostRec h;
  CUstream s = new_stream();
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
  Cap c = capinfo(s);
  Tracker T(c.g);
  T.seed(s);
  Step st = T.after(s, raw<Entry::cuLaunchHostFunc>(t, s, &host_record, static_cast<void*>(&h)));
  check_attributed(st, CU_GRAPH_NODE_TYPE_HOST);
  CUDA_HOST_NODE_PARAMS hp{};
  CHECK(raw<Entry::cuGraphHostNodeGetParams>(t, st.node(), &hp) == CUDA_SUCCESS);
  CHECK(static_cast<bool>(hp.fn == &host_record));
  CHECK(hp.userData == static_cast<void*>(&h));
  CUgraph g = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_SUCCESS);
  sleep_ms(settle_ms);
  CHECK(h.calls.load() == 0);
  destroy_graph(g);
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c1i c1y7 c1j c1k c1l c1m c1n c1u c1v: a plain event record makes no node and leaves the set as it "
                  "is; a wait on a non-capturing stream forks it into the capture (same id, graph and set); a kernel "
                  "there depends on the set at the fork; a wait of the origin on the fork's event joins (set = both "
                  "branches, no node); the end returns the same graph and both streams stop capturing") {
  CUstream s = new_stream();
  CUstream s2 = new_stream();
  CUevent ef = make_event(), ej = make_event();
  CUevent timed = nullptr;
  REQUIRE(raw<Entry::cuEventCreate>(t, &timed, 0u) == CUDA_SUCCESS);
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  Cap c0 = capinfo(s);
  Tracker T(c0.g);
  T.seed(s);
  Step k0 = T.after(s, launch_kernel(noop, s));
  REQUIRE(k0.exact());
  Step st = T.after(s, raw<Entry::cuEventRecord>(t, ef, s));  // c1i
  CHECK(st.op == CUDA_SUCCESS);
  CHECK(st.unchanged());
  st = T.after(s, raw<Entry::cuEventRecord>(t, timed, s));  // c1y7
  CHECK(st.op == CUDA_SUCCESS);
  CHECK(st.unchanged());

  CHECK(capture_status(s2) == CU_STREAM_CAPTURE_STATUS_NONE);
  Step sj = T.after(s2, raw<Entry::cuStreamWaitEvent>(t, s2, ef, 0u));  // c1j
  CHECK(sj.op == CUDA_SUCCESS);
  CHECK(sj.fresh.empty());
  CHECK(sj.c.st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CHECK(sj.c.id == c0.id);
  CHECK(sj.c.g == c0.g);
  CHECK(same_set(sj.c.deps, {k0.node()}));
  sj = T.after(s2, launch_kernel(other, s2));  // c1k
  check_attributed(sj, CU_GRAPH_NODE_TYPE_KERNEL);
  CHECK(same_set(deps_of(sj.node()), {k0.node()}));
  CUgraphNode branch = sj.node();
  sj = T.after(s2, raw<Entry::cuEventRecord>(t, ej, s2));  // c1l
  CHECK(sj.unchanged());
  st = T.after(s, raw<Entry::cuStreamWaitEvent>(t, s, ej, 0u));  // c1m
  CHECK(st.op == CUDA_SUCCESS);
  CHECK(st.fresh.empty());
  CHECK(same_set(st.c.deps, {k0.node(), branch}));
  st = T.after(s, launch_kernel(noop, s));  // c1n
  check_attributed(st, CU_GRAPH_NODE_TYPE_KERNEL);
  CHECK(same_set(deps_of(st.node()), {k0.node(), branch}));

  Cap c2 = capinfo(s2);  // c1u: the joined fork still takes part, with its own set
  CHECK(c2.st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CHECK(same_set(c2.deps, {branch}));
  CUgraph g = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_SUCCESS);  // c1v
  CHECK(g == c0.g);
  CHECK(node_count(g) == 3);
  CHECK(capture_status(s) == CU_STREAM_CAPTURE_STATUS_NONE);
  CHECK(capture_status(s2) == CU_STREAM_CAPTURE_STATUS_NONE);
  CUgraphExec e = instantiate(g);
  launch_on(e, s);
  sync_on(s);
  destroy_exec(e);
  destroy_graph(g);
  destroy_event(ef);
  destroy_event(ej);
  destroy_event(timed);
  destroy_stream(s);
  destroy_stream(s2);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c1o c1p: cuEventRecordWithFlags(CU_EVENT_RECORD_EXTERNAL) and cuStreamWaitEvent(CU_EVENT_WAIT_"
                  "EXTERNAL) on an event recorded outside the capture become EVENT_RECORD and WAIT_EVENT nodes naming "
                  "the event, each the whole dependency set afterwards") {
  CUstream s = new_stream();
  CUevent ex = make_event(), done = make_event();
  REQUIRE(raw<Entry::cuEventRecord>(t, done, stream) == CUDA_SUCCESS);
  sync();
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
  Cap c = capinfo(s);
  Tracker T(c.g);
  T.seed(s);
  Step st = T.after(s, raw<Entry::cuEventRecordWithFlags>(t, ex, s, static_cast<unsigned>(CU_EVENT_RECORD_EXTERNAL)));
  check_attributed(st, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
  CUevent got = nullptr;
  CHECK(raw<Entry::cuGraphEventRecordNodeGetEvent>(t, st.node(), &got) == CUDA_SUCCESS);
  CHECK(got == ex);
  st = T.after(s, raw<Entry::cuStreamWaitEvent>(t, s, done, static_cast<unsigned>(CU_EVENT_WAIT_EXTERNAL)));
  check_attributed(st, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
  got = nullptr;
  CHECK(raw<Entry::cuGraphEventWaitNodeGetEvent>(t, st.node(), &got) == CUDA_SUCCESS);
  CHECK(got == done);
  CUgraph g = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_SUCCESS);
  CHECK(node_count(g) == 3);
  CUgraphExec e = instantiate(g);
  launch_on(e, s);
  sync_on(s);
  destroy_exec(e);
  destroy_graph(g);
  destroy_event(ex);
  destroy_event(done);
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c1q c1r c1s: captured cuMemAllocAsync becomes a MEM_ALLOC node whose dptr is the pointer returned, "
                  "a memset on it a MEMSET node, cuMemFreeAsync a MEM_FREE node of that pointer, each the whole "
                  "dependency set afterwards, and the graph runs") {
  CUstream s = new_stream();
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
  Cap c = capinfo(s);
  Tracker T(c.g);
  T.seed(s);
  CUdeviceptr dp = 0;
  Step st = T.after(s, raw<Entry::cuMemAllocAsync>(t, &dp, std::size_t{1} << 20, s));
  check_attributed(st, CU_GRAPH_NODE_TYPE_MEM_ALLOC);
  REQUIRE(dp != 0);
  CUDA_MEM_ALLOC_NODE_PARAMS ap{};
  CHECK(raw<Entry::cuGraphMemAllocNodeGetParams>(t, st.node(), &ap) == CUDA_SUCCESS);
  CHECK(ap.dptr == dp);
  CHECK(ap.bytesize == (std::size_t{1} << 20));
  st = T.after(s, raw<Entry::cuMemsetD32Async>(t, dp, 1u, std::size_t{256}, s));
  check_attributed(st, CU_GRAPH_NODE_TYPE_MEMSET);
  st = T.after(s, raw<Entry::cuMemFreeAsync>(t, dp, s));
  check_attributed(st, CU_GRAPH_NODE_TYPE_MEM_FREE);
  CUdeviceptr fp = 0;
  CHECK(raw<Entry::cuGraphMemFreeNodeGetParams>(t, st.node(), &fp) == CUDA_SUCCESS);
  CHECK(fp == dp);
  CUgraph g = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_SUCCESS);
  CUgraphExec e = instantiate(g);
  launch_on(e, s);
  sync_on(s);
  destroy_exec(e);
  destroy_graph(g);
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c10o: a captured cuLaunchKernel copies the argument values at the call: changing the host variable "
                  "afterwards does not change the node") {
  CUstream s = new_stream();
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  std::uint64_t v = 5;
  void* args[] = {&v};
  CHECK(raw<Entry::cuLaunchKernel>(t, noop, 1u, 1u, 1u, 1u, 1u, 1u, 0u, s, args, static_cast<void**>(nullptr)) ==
        CUDA_SUCCESS);
  v = 9;
  Cap c = capinfo(s);
  REQUIRE(c.deps.size() == 1);
  CHECK(kernel_arg0(c.deps[0]) == 5);
  CUgraph g = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_SUCCESS);
  destroy_graph(g);
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c1t c1x: cuStreamGetCaptureInfo answers with only the status or without edge data; on a stream that "
                  "is not capturing it writes the status NONE and leaves every other output as it was") {
  CUstream s = new_stream();
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  const CUgraphNode* d = nullptr;
  std::size_t n = 0;
  CHECK(raw<Entry::cuStreamGetCaptureInfo>(t, s, &st, static_cast<cuuint64_t*>(nullptr), static_cast<CUgraph*>(nullptr),
                                           &d, static_cast<const CUgraphEdgeData**>(nullptr), &n) == CUDA_SUCCESS);
  CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CHECK(n == 1);
  CHECK(d != nullptr);
  CHECK(raw<Entry::cuStreamGetCaptureInfo>(t, s, &st, static_cast<cuuint64_t*>(nullptr), static_cast<CUgraph*>(nullptr),
                                           static_cast<const CUgraphNode**>(nullptr),
                                           static_cast<const CUgraphEdgeData**>(nullptr),
                                           static_cast<std::size_t*>(nullptr)) == CUDA_SUCCESS);
  CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CUgraph g = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_SUCCESS);
  destroy_graph(g);

  cuuint64_t id = 777;
  CUgraph garbage_graph = reinterpret_cast<CUgraph>(std::uintptr_t{0x10});
  CUgraph gout = garbage_graph;
  const CUgraphNode* garbage_deps = reinterpret_cast<const CUgraphNode*>(std::uintptr_t{0x10});
  const CUgraphNode* dout = garbage_deps;
  n = 777;
  st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  CHECK(raw<Entry::cuStreamGetCaptureInfo>(t, s, &st, &id, &gout, &dout, static_cast<const CUgraphEdgeData**>(nullptr),
                                           &n) == CUDA_SUCCESS);
  CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE);
  CHECK(id == 777);
  CHECK(gout == garbage_graph);
  CHECK(dout == garbage_deps);
  CHECK(n == 777);
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c1y3: a captured cuStreamWaitEvent on an event recorded outside the capture, without "
                  "CU_EVENT_WAIT_EXTERNAL, is STREAM_CAPTURE_ISOLATION and invalidates the capture") {
  CUstream s = new_stream();
  CUevent done = make_event();
  REQUIRE(raw<Entry::cuEventRecord>(t, done, stream) == CUDA_SUCCESS);
  sync();
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuStreamWaitEvent>(t, s, done, 0u) == CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
  CHECK(capture_status(s) == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  CHECK(launch_kernel(noop, s) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CUgraph g = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CHECK(g == nullptr);
  destroy_event(done);
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "c1y8: a stream of one capture waiting on an event recorded in another capture is "
                  "STREAM_CAPTURE_MERGE, and both captures are invalidated") {
  CUstream sa = new_stream();
  CUstream sb = new_stream();
  CUevent ev = make_event();
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, sa, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  REQUIRE(launch_kernel(noop, sa) == CUDA_SUCCESS);
  REQUIRE(raw<Entry::cuEventRecord>(t, ev, sa) == CUDA_SUCCESS);
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, sb, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  REQUIRE(launch_kernel(noop, sb) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuStreamWaitEvent>(t, sb, ev, 0u) == CUDA_ERROR_STREAM_CAPTURE_MERGE);
  CHECK(capture_status(sa) == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  CHECK(capture_status(sb) == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  CUgraph g = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, sb, &g) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CHECK(g == nullptr);
  CHECK(raw<Entry::cuStreamEndCapture>(t, sa, &g) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CHECK(g == nullptr);
  destroy_event(ev);
  destroy_stream(sa);
  destroy_stream(sb);
  finish();
}

TEST_SUITE_END();
