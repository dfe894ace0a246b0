// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Driver conformance, "Direct add into a capturing graph" (docs/design/driver-facts.md): what a
// library relies on when, during a stream capture, it adds a node itself instead of issuing the
// stream call: read the stream's capture state (cuStreamGetCaptureInfo: graph, dependency set,
// edge data), add the node there (cuGraphAddNode), retain a user object on the graph
// (cuGraphRetainUserObject) and make the node the stream's dependency set
// (cuStreamUpdateCaptureDependencies SET). The CUDA documentation permits every operation except
// destroy and node removal on the graph of an ongoing capture (cuStreamGetCaptureInfo, graph_out).
//
// Where a case asserts a value the H200 has not shown yet, the CHECK carries a comment saying what
// the documentation says, one expected value per CHECK, so that an H200 run can correct it.
//
// Not in the suite, on purpose: which of these calls need a current context (some crash the real
// driver without one: tests/driver/context_probe.cpp, a separate program), and two threads using
// two streams of one capture at once (graph objects are not thread-safe: undefined behaviour).
#include <doctest/doctest.h>

#include <array>
#include <cstring>
#include <thread>

#include "capture_support.hpp"
#include "conformance_threads.hpp"
#include "sim/sim.hpp"
#include "support/driver_fixture.hpp"
#include "tether.hpp"

using namespace tether::detail;
using namespace tether_test;

namespace {

CUresult update_deps(CUstream s, CUgraphNode* nodes, std::size_t n, unsigned flags) {
  return raw<Entry::cuStreamUpdateCaptureDependencies>(
      table(), s, nodes, static_cast<const CUgraphEdgeData*>(nullptr), n, flags);
}

CUresult begin(CUstream s, CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL) {
  return raw<Entry::cuStreamBeginCapture>(table(), s, mode);
}

/// What one direct add did.
struct Added {
  Cap before;                            // the capture state it read
  CUresult add = CUDA_ERROR_UNKNOWN;     // cuGraphAddNode
  CUresult update = CUDA_ERROR_UNKNOWN;  // cuStreamUpdateCaptureDependencies(SET, node)
  CUgraphNode node = nullptr;
  bool ok() const { return add == CUDA_SUCCESS && update == CUDA_SUCCESS && node != nullptr; }
};

/// The direct add as tether does it: the capture's graph, dependencies and edge data from
/// cuStreamGetCaptureInfo, cuGraphAddNode there, then the set made that node. When `retain` is
/// given, its only reference moves into the capture graph between the two.
Added direct_add(CUstream s, CUgraphNodeParams& p, CUuserObject retain = nullptr) {
  Added a;
  a.before = capinfo(s);
  if (!a.before.active()) return a;
  a.add = raw<Entry::cuGraphAddNode>(table(), &a.node, a.before.g, a.before.deps.data(),
                                     a.before.edges_null ? nullptr : a.before.edges.data(), a.before.n, &p);
  if (a.add != CUDA_SUCCESS) return a;
  if (retain)
    CHECK(raw<Entry::cuGraphRetainUserObject>(table(), a.before.g, retain, 1u,
                                              static_cast<unsigned>(CU_GRAPH_USER_OBJECT_MOVE)) ==
          CUDA_SUCCESS);
  a.update = update_deps(s, &a.node, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES);
  return a;
}

/// Kernel-node parameters for a 1x1x1 launch of f(args) in the shared context.
CUgraphNodeParams kernel_node(CUfunction f, void** args) {
  CUgraphNodeParams p{};
  p.type = CU_GRAPH_NODE_TYPE_KERNEL;
  p.kernel.func = f;
  p.kernel.gridDimX = p.kernel.gridDimY = p.kernel.gridDimZ = 1;
  p.kernel.blockDimX = p.kernel.blockDimY = p.kernel.blockDimZ = 1;
  p.kernel.kernelParams = args;
  p.kernel.ctx = driver().ctx;
  return p;
}

/// cap_inc(counter) as a node; the argument array lives as long as this object.
struct IncNode {
  CUdeviceptr arg;
  void* args[1];
  CUgraphNodeParams p;
  explicit IncNode(const Counter& c) : arg(c.p), args{&arg}, p(kernel_node(counter_kernel(), args)) {}
};

CUgraphNodeParams memset_node(CUdeviceptr dst, unsigned value, std::size_t n) {
  CUgraphNodeParams p{};
  p.type = CU_GRAPH_NODE_TYPE_MEMSET;
  p.memset.dst = dst;
  p.memset.value = value;
  p.memset.elementSize = 4;
  p.memset.width = n;
  p.memset.height = 1;
  p.memset.ctx = driver().ctx;
  return p;
}

CUgraphNodeParams memcpy_node(CUmemorytype dt, void* dh, CUdeviceptr dd, CUmemorytype st, const void* sh,
                              CUdeviceptr sd, std::size_t n) {
  CUgraphNodeParams p{};
  p.type = CU_GRAPH_NODE_TYPE_MEMCPY;
  p.memcpy.copyCtx = driver().ctx;
  CUDA_MEMCPY3D& c = p.memcpy.copyParams;
  c.srcMemoryType = st;
  c.srcHost = sh;
  c.srcDevice = sd;
  c.dstMemoryType = dt;
  c.dstHost = dh;
  c.dstDevice = dd;
  c.WidthInBytes = n;
  c.Height = 1;
  c.Depth = 1;
  return p;
}

struct Device {
  CUdeviceptr p = 0;
  explicit Device(std::size_t n) { REQUIRE(raw<Entry::cuMemAlloc>(table(), &p, n) == CUDA_SUCCESS); }
  ~Device() { CHECK(raw<Entry::cuMemFree>(table(), p) == CUDA_SUCCESS); }
  unsigned word() const {
    unsigned v = 0;
    CHECK(raw<Entry::cuMemcpyDtoH>(table(), &v, p, sizeof v) == CUDA_SUCCESS);
    return v;
  }
};

struct Pinned {
  void* p = nullptr;
  explicit Pinned(std::size_t n) { REQUIRE(raw<Entry::cuMemAllocHost>(table(), &p, n) == CUDA_SUCCESS); }
  ~Pinned() { CHECK(raw<Entry::cuMemFreeHost>(table(), p) == CUDA_SUCCESS); }
};

CUDA_KERNEL_NODE_PARAMS kernel_of(CUgraphNode n) {
  CUDA_KERNEL_NODE_PARAMS kp{};
  CHECK(raw<Entry::cuGraphKernelNodeGetParams>(table(), n, &kp) == CUDA_SUCCESS);
  return kp;
}
std::uint64_t arg0(const CUDA_KERNEL_NODE_PARAMS& kp) {
  std::uint64_t v = 0;
  if (kp.kernelParams && kp.kernelParams[0]) std::memcpy(&v, kp.kernelParams[0], sizeof v);
  return v;
}
CUDA_MEMSET_NODE_PARAMS memset_of(CUgraphNode n) {
  CUDA_MEMSET_NODE_PARAMS m{};
  CHECK(raw<Entry::cuGraphMemsetNodeGetParams>(table(), n, &m) == CUDA_SUCCESS);
  return m;
}
CUDA_MEMCPY3D memcpy_of(CUgraphNode n) {
  CUDA_MEMCPY3D m{};
  CHECK(raw<Entry::cuGraphMemcpyNodeGetParams>(table(), n, &m) == CUDA_SUCCESS);
  return m;
}
CUevent record_event_of(CUgraphNode n) {
  CUevent e = nullptr;
  CHECK(raw<Entry::cuGraphEventRecordNodeGetEvent>(table(), n, &e) == CUDA_SUCCESS);
  return e;
}
CUevent wait_event_of(CUgraphNode n) {
  CUevent e = nullptr;
  CHECK(raw<Entry::cuGraphEventWaitNodeGetEvent>(table(), n, &e) == CUDA_SUCCESS);
  return e;
}

/// The one node the stream call `op()` added, which is the stream's set afterwards.
template <class Op>
CUgraphNode stream_node(Tracker& T, CUstream s, Op op) {
  T.seed(s);
  Step st = T.after(s, op());
  CHECK(st.op == CUDA_SUCCESS);
  CHECK(st.exact());
  return st.node();
}

const char* mode_name(CUstreamCaptureMode m) {
  switch (m) {
    case CU_STREAM_CAPTURE_MODE_GLOBAL:
      return "GLOBAL";
    case CU_STREAM_CAPTURE_MODE_THREAD_LOCAL:
      return "THREAD_LOCAL";
    case CU_STREAM_CAPTURE_MODE_RELAXED:
      return "RELAXED";
  }
  return "?";
}

}  // namespace

TEST_SUITE_BEGIN("driver conformance");

TEST_CASE_FIXTURE(
    DriverFixture,
    "direct add: in every capture mode a kernel node added with cuGraphAddNode at the capture's "
    "dependencies and made the set with cuStreamUpdateCaptureDependencies(SET) is the set, the next "
    "captured node depends on exactly it, the ended graph holds it with exactly those edges and runs "
    "it, and a user object retained on the capture graph is held until the executable goes") {
  for (CUstreamCaptureMode mode :
       {CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, CU_STREAM_CAPTURE_MODE_RELAXED}) {
    INFO(mode_name(mode));
    Obj o;
    Counter k;
    IncNode inc(k);
    CUstream s = new_stream();
    REQUIRE(begin(s, mode) == CUDA_SUCCESS);
    Cap c0 = capinfo(s);
    Tracker T(c0.g);
    CUgraphNode K1 = stream_node(T, s, [&] { return k.inc(s); });
    Added x = direct_add(s, inc.p, make_uo(o));
    REQUIRE(x.ok());
    CHECK(x.before.g == c0.g);
    CHECK(same_set(x.before.deps, {K1}));
    Cap c1 = capinfo(s);
    CHECK(c1.st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CHECK(c1.id == c0.id);
    CHECK(same_set(c1.deps, {x.node}));
    CUgraphNode K2 = stream_node(T, s, [&] { return k.inc(s); });
    CHECK(same_set(deps_of(K2), {x.node}));
    CUgraph g = nullptr;
    CHECK(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_SUCCESS);
    CHECK(g == c0.g);
    std::vector<CUgraphNode> nodes = nodes_of(g);
    CHECK(nodes.size() == 3);
    CHECK(has(nodes, x.node));
    CHECK(node_type(x.node) == CU_GRAPH_NODE_TYPE_KERNEL);
    CHECK(same_set(deps_of(x.node), {K1}));
    CHECK(deps_of(K1).empty());
    CUDA_KERNEL_NODE_PARAMS kp = kernel_of(x.node);
    CHECK(kp.func == counter_kernel());
    CHECK(arg0(kp) == k.p);
    CUgraphExec e = instantiate(g);
    destroy_graph(g);
    CHECK(still_alive(o));
    launch_on(e, s);
    launch_on(e, s);
    sync_on(s);
    CHECK(k.read() == 6);
    destroy_exec(e);
    CHECK(ran_once(o));
    destroy_stream(s);
  }
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "direct add: a kernel, memset, device-to-device and pinned host-to-device memcpy, host function, "
    "external event record and external event wait node added with cuGraphAddNode has the type and "
    "the parameters (read back) of the node the stream call makes under capture, and each runs") {
  Counter k;
  IncNode inc(k);
  Device da(4096), db(4096), dc(4096), dd(4096);
  Pinned pin(4096);
  std::memset(pin.p, 0x2a, 4096);
  HostRec h;
  CUevent ex = make_event(), done = make_event();
  REQUIRE(raw<Entry::cuEventRecord>(t, done, stream) == CUDA_SUCCESS);
  sync();
  CUstream s = new_stream();
  REQUIRE(begin(s) == CUDA_SUCCESS);
  Tracker T(capinfo(s).g);

  CUgraphNode S = stream_node(T, s, [&] { return k.inc(s); });  // kernel
  Added D = direct_add(s, inc.p);
  REQUIRE(D.ok());
  CHECK(node_type(D.node) == node_type(S));
  CHECK(same_set(deps_of(D.node), {S}));
  CHECK(kernel_of(D.node).func == kernel_of(S).func);
  CHECK(arg0(kernel_of(D.node)) == arg0(kernel_of(S)));
  CHECK(kernel_of(D.node).gridDimX == kernel_of(S).gridDimX);
  CHECK(kernel_of(D.node).blockDimX == kernel_of(S).blockDimX);

  S = stream_node(T, s,
                  [&] { return raw<Entry::cuMemsetD32Async>(t, da.p, 7u, std::size_t{64}, s); });  // memset
  CHECK(same_set(deps_of(S), {D.node}));
  CUgraphNodeParams ms = memset_node(dc.p, 7u, 64);
  D = direct_add(s, ms);
  REQUIRE(D.ok());
  CHECK(node_type(D.node) == CU_GRAPH_NODE_TYPE_MEMSET);
  CHECK(node_type(S) == CU_GRAPH_NODE_TYPE_MEMSET);
  CHECK(memset_of(S).dst == da.p);
  CHECK(memset_of(D.node).dst == dc.p);
  CHECK(memset_of(D.node).value == memset_of(S).value);
  CHECK(memset_of(D.node).elementSize == memset_of(S).elementSize);
  CHECK(memset_of(D.node).width == memset_of(S).width);
  CHECK(memset_of(D.node).height == memset_of(S).height);

  S = stream_node(T, s, [&] {
    return raw<Entry::cuMemcpyHtoDAsync>(t, db.p, pin.p, std::size_t{256}, s);
  });  // host to device
  CUgraphNodeParams h2d = memcpy_node(CU_MEMORYTYPE_DEVICE, nullptr, dd.p, CU_MEMORYTYPE_HOST, pin.p, 0, 256);
  D = direct_add(s, h2d);
  REQUIRE(D.ok());
  CHECK(node_type(D.node) == CU_GRAPH_NODE_TYPE_MEMCPY);
  CHECK(node_type(S) == CU_GRAPH_NODE_TYPE_MEMCPY);
  CHECK(memcpy_of(D.node).srcMemoryType == memcpy_of(S).srcMemoryType);
  CHECK(memcpy_of(D.node).dstMemoryType == memcpy_of(S).dstMemoryType);
  CHECK(memcpy_of(D.node).srcHost == memcpy_of(S).srcHost);
  CHECK(memcpy_of(D.node).WidthInBytes == memcpy_of(S).WidthInBytes);
  CHECK(memcpy_of(D.node).Height == memcpy_of(S).Height);
  CHECK(memcpy_of(D.node).Depth == memcpy_of(S).Depth);
  CHECK(memcpy_of(D.node).dstDevice == dd.p);

  // device to device: dd (just copied from pinned memory) to da, after the memset of da above
  S = stream_node(T, s, [&] { return raw<Entry::cuMemcpyDtoDAsync>(t, db.p, dd.p, std::size_t{256}, s); });
  CUgraphNodeParams d2d =
      memcpy_node(CU_MEMORYTYPE_DEVICE, nullptr, da.p, CU_MEMORYTYPE_DEVICE, nullptr, dd.p, 256);
  D = direct_add(s, d2d);
  REQUIRE(D.ok());
  CHECK(node_type(D.node) == CU_GRAPH_NODE_TYPE_MEMCPY);
  CHECK(memcpy_of(D.node).srcMemoryType == memcpy_of(S).srcMemoryType);
  CHECK(memcpy_of(D.node).dstMemoryType == memcpy_of(S).dstMemoryType);
  CHECK(memcpy_of(D.node).srcDevice == memcpy_of(S).srcDevice);
  CHECK(memcpy_of(D.node).WidthInBytes == memcpy_of(S).WidthInBytes);

  S = stream_node(T, s, [&] {
    return raw<Entry::cuLaunchHostFunc>(t, s, &host_record, static_cast<void*>(&h));
  });  // host function
  CUgraphNodeParams hp{};
  hp.type = CU_GRAPH_NODE_TYPE_HOST;
  hp.host.fn = &host_record;
  hp.host.userData = &h;
  D = direct_add(s, hp);
  REQUIRE(D.ok());
  CHECK(node_type(D.node) == node_type(S));
  CUDA_HOST_NODE_PARAMS hs{}, hd{};
  CHECK(raw<Entry::cuGraphHostNodeGetParams>(t, S, &hs) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuGraphHostNodeGetParams>(t, D.node, &hd) == CUDA_SUCCESS);
  CHECK(static_cast<bool>(hd.fn == hs.fn));
  CHECK(hd.userData == hs.userData);

  // capture_facts c1o, c1p: the stream calls with the EXTERNAL flags make these node types.
  S = stream_node(T, s, [&] {
    return raw<Entry::cuEventRecordWithFlags>(t, ex, s, static_cast<unsigned>(CU_EVENT_RECORD_EXTERNAL));
  });
  CUgraphNodeParams er{};
  er.type = CU_GRAPH_NODE_TYPE_EVENT_RECORD;
  er.eventRecord.event = ex;
  D = direct_add(s, er);
  REQUIRE(D.ok());
  CHECK(node_type(S) == CU_GRAPH_NODE_TYPE_EVENT_RECORD);
  CHECK(node_type(D.node) == CU_GRAPH_NODE_TYPE_EVENT_RECORD);
  CHECK(record_event_of(D.node) == record_event_of(S));
  S = stream_node(T, s, [&] {
    return raw<Entry::cuStreamWaitEvent>(t, s, done, static_cast<unsigned>(CU_EVENT_WAIT_EXTERNAL));
  });
  CUgraphNodeParams ew{};
  ew.type = CU_GRAPH_NODE_TYPE_WAIT_EVENT;
  ew.eventWait.event = done;
  D = direct_add(s, ew);
  REQUIRE(D.ok());
  CHECK(node_type(S) == CU_GRAPH_NODE_TYPE_WAIT_EVENT);
  CHECK(node_type(D.node) == CU_GRAPH_NODE_TYPE_WAIT_EVENT);
  CHECK(wait_event_of(D.node) == wait_event_of(S));

  CUgraph g = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_SUCCESS);
  CHECK(node_count(g) == 14);
  CUgraphExec e = instantiate(g);
  launch_on(e, s);
  sync_on(s);
  CHECK(k.read() == 2);
  CHECK(dc.word() == 7u);
  CHECK(dd.word() == 0x2a2a2a2au);
  CHECK(da.word() == 0x2a2a2a2au);
  CHECK(h.calls.load() == 2);
  CHECK(raw<Entry::cuEventQuery>(t, ex) == CUDA_SUCCESS);
  destroy_exec(e);
  destroy_graph(g);
  destroy_event(ex);
  destroy_event(done);
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "direct add: an EVENT_RECORD node added with cuGraphAddNode does not make its event a capture "
    "point as a captured cuEventRecord does: a cuStreamWaitEvent of another stream on it does not "
    "fork that stream into the capture") {
  CUstream s = new_stream();
  CUstream s2 = new_stream();
  CUevent e = make_event();
  REQUIRE(begin(s) == CUDA_SUCCESS);
  REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
  CUgraphNodeParams er{};
  er.type = CU_GRAPH_NODE_TYPE_EVENT_RECORD;
  er.eventRecord.event = e;
  Added D = direct_add(s, er);
  REQUIRE(D.ok());
  // Not observed yet (needs the H200): the documentation ties forks to events recorded by a
  // capturing stream (cuEventRecord during capture); a graph node records only when it runs.
  CHECK(raw<Entry::cuStreamWaitEvent>(t, s2, e, 0u) == CUDA_SUCCESS);
  CHECK(capture_status(s2) == CU_STREAM_CAPTURE_STATUS_NONE);
  CUgraph g = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_SUCCESS);
  CHECK(node_count(g) == 2);
  destroy_graph(g);
  destroy_event(e);
  destroy_stream(s2);
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "direct add: a MEM_ALLOC node added with cuGraphAddNode to a capturing graph is allowed and "
    "reports its address in alloc.dptr, like the node of a captured cuMemAllocAsync; captured work "
    "may use that address, a direct-added MEM_FREE node frees it, and the graph runs") {
  CUstream s = new_stream();
  REQUIRE(begin(s) == CUDA_SUCCESS);
  Tracker T(capinfo(s).g);
  constexpr std::size_t bytes = std::size_t{1} << 20;
  CUdeviceptr sp = 0;
  CUgraphNode S = stream_node(T, s, [&] { return raw<Entry::cuMemAllocAsync>(t, &sp, bytes, s); });
  CUgraphNodeParams ap{};
  ap.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  ap.alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  ap.alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  ap.alloc.poolProps.location.id = drv.device;
  ap.alloc.bytesize = bytes;
  Added D = direct_add(s, ap);
  REQUIRE(D.ok());
  CHECK(node_type(D.node) == CU_GRAPH_NODE_TYPE_MEM_ALLOC);
  CUdeviceptr dp = ap.alloc.dptr;
  CHECK(dp != 0);
  CHECK(dp != sp);
  CUDA_MEM_ALLOC_NODE_PARAMS as{}, ad{};
  CHECK(raw<Entry::cuGraphMemAllocNodeGetParams>(t, S, &as) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuGraphMemAllocNodeGetParams>(t, D.node, &ad) == CUDA_SUCCESS);
  CHECK(as.dptr == sp);
  CHECK(ad.dptr == dp);
  CHECK(ad.bytesize == as.bytesize);
  CHECK(ad.poolProps.allocType == as.poolProps.allocType);
  CHECK(ad.poolProps.location.type == as.poolProps.location.type);
  CHECK(ad.poolProps.location.id == as.poolProps.location.id);

  stream_node(T, s, [&] { return raw<Entry::cuMemsetD32Async>(t, dp, 3u, std::size_t{256}, s); });
  stream_node(T, s, [&] { return raw<Entry::cuMemcpyDtoDAsync>(t, sp, dp, std::size_t{1024}, s); });
  CUgraphNode F = stream_node(T, s, [&] { return raw<Entry::cuMemFreeAsync>(t, sp, s); });
  CUgraphNodeParams fp{};
  fp.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
  fp.free.dptr = dp;
  D = direct_add(s, fp);
  REQUIRE(D.ok());
  CHECK(node_type(D.node) == node_type(F));
  CUdeviceptr fs = 0, fd = 0;
  CHECK(raw<Entry::cuGraphMemFreeNodeGetParams>(t, F, &fs) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuGraphMemFreeNodeGetParams>(t, D.node, &fd) == CUDA_SUCCESS);
  CHECK(fs == sp);
  CHECK(fd == dp);
  CUgraph g = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_SUCCESS);
  CHECK(node_count(g) == 6);
  CUgraphExec e = instantiate(g);
  launch_on(e, s);
  sync_on(s);
  launch_on(e, s);  // everything the launch allocated it freed: a second launch is allowed
  sync_on(s);
  destroy_exec(e);
  destroy_graph(g);
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "direct add: into a capture begun with cuStreamBeginCaptureToGraph into an existing graph the "
    "added node depends on the given dependencies and becomes the set, the end returns the target "
    "with it, and the target runs it") {
  Counter k;
  IncNode inc(k);
  Obj o;
  CUgraph g0 = new_graph();
  CUgraphNode A = k.add(g0);
  CUstream s = new_stream();
  REQUIRE(raw<Entry::cuStreamBeginCaptureToGraph>(t, s, g0, &A, static_cast<const CUgraphEdgeData*>(nullptr),
                                                  std::size_t{1},
                                                  CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  Added x = direct_add(s, inc.p, make_uo(o));
  REQUIRE(x.ok());
  CHECK(x.before.g == g0);
  CHECK(same_set(deps_of(x.node), {A}));
  CHECK(same_set(capinfo(s).deps, {x.node}));
  Tracker T(g0);
  CUgraphNode K = stream_node(T, s, [&] { return k.inc(s); });
  CHECK(same_set(deps_of(K), {x.node}));
  CUgraph out = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &out) == CUDA_SUCCESS);
  CHECK(out == g0);
  CHECK(node_count(g0) == 3);
  CUgraphExec e = instantiate(g0);
  launch_on(e, s);
  sync_on(s);
  CHECK(k.read() == 3);
  destroy_graph(g0);
  CHECK(still_alive(o));
  destroy_exec(e);
  CHECK(ran_once(o));
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "direct add: into a capture into a conditional node's body graph (cuStreamBeginCaptureToGraph, no "
    "dependencies) the added node is a root of the body and the set, the next captured node depends "
    "on it, and the body runs both once per launch; a user object retained on the body is held by "
    "the outer executable") {
  Counter body;
  IncNode inc(body);
  Obj o;
  CUgraph g = new_graph();
  CondNode c = add_cond(g, CU_GRAPH_COND_TYPE_IF, 1);
  REQUIRE(c.add_result == CUDA_SUCCESS);
  CUstream s = new_stream();
  REQUIRE(raw<Entry::cuStreamBeginCaptureToGraph>(t, s, c.body, static_cast<const CUgraphNode*>(nullptr),
                                                  static_cast<const CUgraphEdgeData*>(nullptr),
                                                  std::size_t{0},
                                                  CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  Added x = direct_add(s, inc.p, make_uo(o));
  REQUIRE(x.ok());
  CHECK(x.before.g == c.body);
  CHECK(x.before.n == 0);
  CHECK(deps_of(x.node).empty());
  Tracker T(c.body);
  CUgraphNode K = stream_node(T, s, [&] { return body.inc(s); });
  CHECK(same_set(deps_of(K), {x.node}));
  CUgraph out = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &out) == CUDA_SUCCESS);
  CHECK(out == c.body);
  CHECK(node_count(c.body) == 2);
  CUgraphExec e = instantiate(g);
  launch_on(e, s);
  launch_on(e, s);
  sync_on(s);
  CHECK(body.read() == 4);
  destroy_graph(g);
  CHECK(still_alive(o));
  destroy_exec(e);
  CHECK(ran_once(o));
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "direct add: after a direct add on stream A, cuEventRecord on A and cuStreamWaitEvent on B fork B "
    "into the capture with the added node as its set; a direct add on B depends on it; joining B back "
    "into A makes A's set both branches and the end succeeds; a branch B of direct-added nodes only, "
    "never joined back, does not fail the end (H200): the graph keeps the branch and its owners") {
  Counter k;
  IncNode inc(k);
  CUstream a = new_stream();
  CUstream b = new_stream();
  CUevent fork = make_event(), join = make_event();
  {
    REQUIRE(begin(a) == CUDA_SUCCESS);
    REQUIRE(k.inc(a) == CUDA_SUCCESS);
    Added x = direct_add(a, inc.p);
    REQUIRE(x.ok());
    CHECK(raw<Entry::cuEventRecord>(t, fork, a) == CUDA_SUCCESS);
    CHECK(raw<Entry::cuStreamWaitEvent>(t, b, fork, 0u) == CUDA_SUCCESS);
    Cap cb = capinfo(b);
    CHECK(cb.st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CHECK(cb.id == x.before.id);
    CHECK(same_set(cb.deps, {x.node}));
    Added y = direct_add(b, inc.p);  // B's branch
    REQUIRE(y.ok());
    CHECK(same_set(deps_of(y.node), {x.node}));
    Added z = direct_add(a, inc.p);  // A goes on concurrently with B's branch
    REQUIRE(z.ok());
    CHECK(same_set(deps_of(z.node), {x.node}));
    CHECK(raw<Entry::cuEventRecord>(t, join, b) == CUDA_SUCCESS);
    CHECK(raw<Entry::cuStreamWaitEvent>(t, a, join, 0u) == CUDA_SUCCESS);
    CHECK(same_set(capinfo(a).deps, {z.node, y.node}));
    Tracker T(x.before.g);
    CUgraphNode K = stream_node(T, a, [&] { return k.inc(a); });
    CHECK(same_set(deps_of(K), {z.node, y.node}));
    CUgraph g = nullptr;
    CHECK(raw<Entry::cuStreamEndCapture>(t, a, &g) == CUDA_SUCCESS);
    CHECK(node_count(g) == 5);
    CHECK(capture_status(b) == CU_STREAM_CAPTURE_STATUS_NONE);
    CUgraphExec e = instantiate(g);
    launch_on(e, a);
    sync_on(a);
    CHECK(k.read() == 5);
    destroy_exec(e);
    destroy_graph(g);
  }
  {
    Obj o;
    REQUIRE(begin(a) == CUDA_SUCCESS);
    REQUIRE(k.inc(a) == CUDA_SUCCESS);
    CHECK(raw<Entry::cuEventRecord>(t, fork, a) == CUDA_SUCCESS);
    CHECK(raw<Entry::cuStreamWaitEvent>(t, b, fork, 0u) == CUDA_SUCCESS);
    Added y = direct_add(b, inc.p, make_uo(o));
    REQUIRE(y.ok());
    CUgraph g = nullptr;
    // H200: the driver's unjoined check looks at stream work only; a branch whose set is a
    // direct-added node ends with the capture, the node in the graph with its user object.
    CHECK(raw<Entry::cuStreamEndCapture>(t, a, &g) == CUDA_SUCCESS);
    REQUIRE(g != nullptr);
    CHECK(node_count(g) == 2);
    CHECK(o.count.load() == 0);
    CHECK(capture_status(a) == CU_STREAM_CAPTURE_STATUS_NONE);
    CHECK(capture_status(b) == CU_STREAM_CAPTURE_STATUS_NONE);
    destroy_graph(g);
    CHECK(o.count.load() == 1);
    CHECK(ran_once(o));
  }
  destroy_event(fork);
  destroy_event(join);
  destroy_stream(a);
  destroy_stream(b);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "direct add: in an ordinary capture cuStreamGetCaptureInfo's edge data is meaningless for an empty "
    "set and all-default for each dependency, also after a direct add, and cuGraphAddNode accepts it; a "
    "programmatic edge set with cuStreamUpdateCaptureDependencies is reported with the set (the "
    "simulator refuses non-default edges)") {
  CUstream s = new_stream();
  REQUIRE(begin(s) == CUDA_SUCCESS);
  Cap c0 = capinfo(s);
  CHECK(c0.n == 0);
  // For an empty set the edge pointer means nothing: null on a fresh capture thread (c1a), a
  // non-null pointer after earlier queries on the same thread (H200, 2026-12-02). Only n counts.
  REQUIRE(launch_kernel(noop, s) == CUDA_SUCCESS);
  std::uint64_t arg = 0;
  void* args[] = {&arg};
  CUgraphNodeParams kp = kernel_node(noop, args);
  Added x = direct_add(s, kp);  // passes the (default) edge data it read
  REQUIRE(x.ok());
  CHECK_FALSE(x.before.edges_null);
  REQUIRE(x.before.edges.size() == 1);
  CHECK(x.before.edges[0].type == CU_GRAPH_DEPENDENCY_TYPE_DEFAULT);
  CHECK(x.before.edges[0].from_port == 0);
  CHECK(x.before.edges[0].to_port == 0);
  Cap c1 = capinfo(s);
  CHECK_FALSE(c1.edges_null);
  REQUIRE(c1.edges.size() == 1);
  CHECK(c1.edges[0].type == CU_GRAPH_DEPENDENCY_TYPE_DEFAULT);
  CHECK(c1.edges[0].from_port == 0);

  CUgraphEdgeData pe{};
  pe.from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC;
  pe.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
  CUresult up = raw<Entry::cuStreamUpdateCaptureDependencies>(
      t, s, &x.node, &pe, std::size_t{1}, static_cast<unsigned>(CU_STREAM_SET_CAPTURE_DEPENDENCIES));
  if (sim) {
    CHECK(up == CUDA_ERROR_NOT_SUPPORTED);  // docs/simulator.md: only default edges are modelled
  } else {
    CHECK(up == CUDA_SUCCESS);  // capture_facts c10p
    Cap c2 = capinfo(s);
    REQUIRE(c2.edges.size() == 1);
    CHECK(c2.edges[0].type == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC);
    CHECK(c2.edges[0].from_port == CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC);
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    const CUgraphNode* d = nullptr;
    std::size_t n = 0;
    CHECK(raw<Entry::cuStreamGetCaptureInfo>(t, s, &st, static_cast<cuuint64_t*>(nullptr),
                                             static_cast<CUgraph*>(nullptr), &d,
                                             static_cast<const CUgraphEdgeData**>(nullptr),
                                             &n) == CUDA_ERROR_LOSSY_QUERY);  // capture_facts c10p
    // A direct add of a kernel passes the programmatic edge on (the documentation: programmatic
    // edges join kernel nodes); not observed yet (needs the H200).
    Added y = direct_add(s, kp);
    CHECK(y.add == CUDA_SUCCESS);
    CHECK(y.update == CUDA_SUCCESS);
    if (y.node) {
      std::size_t m = 1;
      CUgraphNode dep = nullptr;
      CUgraphEdgeData ed{};
      CHECK(raw<Entry::cuGraphNodeGetDependencies>(t, y.node, &dep, &ed, &m) == CUDA_SUCCESS);
      CHECK(m == 1);
      CHECK(dep == x.node);
      CHECK(ed.type == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC);
    }
  }
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

TEST_CASE_FIXTURE(
    DriverFixture,
    "direct add: after an invalidation cuStreamGetCaptureInfo reports INVALIDATED and no graph; "
    "cuGraphAddNode and cuGraphRetainUserObject on the graph handle read before still succeed, "
    "cuStreamUpdateCaptureDependencies is STREAM_CAPTURE_INVALIDATED, and cuStreamEndCapture fails, "
    "destroys the graph with the added node and releases each retained object once, inside the call") {
  Counter k;
  IncNode inc(k);
  Obj a, b;
  CUstream s = new_stream();
  REQUIRE(begin(s) == CUDA_SUCCESS);
  Added x = direct_add(s, inc.p, make_uo(a));
  REQUIRE(x.ok());
  CUgraph g = x.before.g;
  CHECK(raw<Entry::cuStreamSynchronize>(t, s) == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);  // capture_facts c2f
  Cap ci = capinfo(s);
  CHECK(ci.r == CUDA_SUCCESS);
  CHECK(ci.st == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  CHECK(ci.g == nullptr);  // capture_facts c2k: info_graph=null
  CUgraphNode X2 = nullptr;
  // capture_facts c2k: the handle read before the invalidation still works (retain, GetNodes); an
  // add there is the same reading (needs the H200 to confirm).
  CHECK(raw<Entry::cuGraphAddNode>(t, &X2, g, &x.node, static_cast<const CUgraphEdgeData*>(nullptr),
                                   std::size_t{1}, &inc.p) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuGraphRetainUserObject>(t, g, make_uo(b), 1u,
                                            static_cast<unsigned>(CU_GRAPH_USER_OBJECT_MOVE)) ==
        CUDA_SUCCESS);  // capture_facts c2k
  CHECK(node_count(g) == 2);
  // The documentation lists only ILLEGAL_STATE ("not capturing"); an invalidated capture is still a
  // capture, and its stream operations answer STREAM_CAPTURE_INVALIDATED (needs the H200 to confirm).
  if (X2)
    CHECK(update_deps(s, &X2, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES) ==
          CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CHECK(k.inc(s) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CHECK(still_alive(a));
  CUgraph out = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &out) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CHECK(out == nullptr);
  std::size_t left = 0;  // the graph is gone: destroyed graph handles are checked (11x1), as after c3k
  CHECK(raw<Entry::cuGraphGetNodes>(t, g, static_cast<CUgraphNode*>(nullptr), &left) ==
        CUDA_ERROR_INVALID_VALUE);
  CHECK(a.count.load() == 1);  // capture_facts c2f: inside the failed end, on this thread
  CHECK(b.count.load() == 1);
  CHECK(ran_once(a));
  CHECK(ran_once(b));
  CHECK(capture_status(s) == CU_STREAM_CAPTURE_STATUS_NONE);
  CHECK(k.read() == 0);
  destroy_stream(s);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "direct add: cuStreamUpdateCaptureDependencies after a direct add refuses a node of another graph "
    "with INVALID_VALUE and leaves the set, ADD appends to the set, SET with no nodes makes the next "
    "node a root, and on a stream that is not capturing it is ILLEGAL_STATE") {
  CUgraph foreign = new_graph();
  CUgraphNode F = add_kernel(foreign, noop, 0);
  std::uint64_t arg = 0;
  void* args[] = {&arg};
  CUgraphNodeParams kp = kernel_node(noop, args);
  CUstream s = new_stream();
  REQUIRE(begin(s) == CUDA_SUCCESS);
  Added x = direct_add(s, kp);
  REQUIRE(x.ok());
  CHECK(update_deps(s, &F, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES) == CUDA_ERROR_INVALID_VALUE);  // c5g
  CHECK(capture_status(s) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CHECK(same_set(capinfo(s).deps, {x.node}));
  CUgraphNode Y = nullptr;
  CHECK(raw<Entry::cuGraphAddNode>(t, &Y, x.before.g, static_cast<const CUgraphNode*>(nullptr),
                                   static_cast<const CUgraphEdgeData*>(nullptr), std::size_t{0},
                                   &kp) == CUDA_SUCCESS);
  CHECK(update_deps(s, &Y, 1, CU_STREAM_ADD_CAPTURE_DEPENDENCIES) == CUDA_SUCCESS);  // c5c
  CHECK(same_set(capinfo(s).deps, {x.node, Y}));
  Added z = direct_add(s, kp);
  REQUIRE(z.ok());
  CHECK(same_set(deps_of(z.node), {x.node, Y}));
  CHECK(update_deps(s, nullptr, 0, CU_STREAM_SET_CAPTURE_DEPENDENCIES) == CUDA_SUCCESS);  // c5i
  CHECK(capinfo(s).n == 0);
  Added r = direct_add(s, kp);
  REQUIRE(r.ok());
  CHECK(deps_of(r.node).empty());
  CUgraph g = nullptr;
  CHECK(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_SUCCESS);
  CHECK(node_count(g) == 4);
  CHECK(update_deps(s, &r.node, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES) == CUDA_ERROR_ILLEGAL_STATE);  // c5h
  CUgraphExec e = instantiate(g);
  launch_on(e, s);
  sync_on(s);
  destroy_exec(e);
  destroy_graph(g);
  destroy_graph(foreign);
  destroy_stream(s);
  finish();
}

// What is NOT covered here, on purpose: two threads using two streams of the *same* capture at
// once (one direct-adding while the other issues a stream call). Both modify one graph, and the
// CUDA documentation says graph objects are not thread-safe (cuStreamGetCaptureInfo: "Graph objects
// are not threadsafe"), so such a test would assert undefined behaviour; a library must serialise
// the operations of one capture itself.
TEST_CASE_FIXTURE(
    DriverFixture,
    "direct add: two threads, each capturing its own stream in THREAD_LOCAL mode into its own graph, "
    "direct-add 200 kernel nodes each at the same time; each graph is one chain of its thread's nodes "
    "and runs them") {
  constexpr int per_thread = 200;
  Counter k1, k2;
  CUstream s1 = new_stream(), s2 = new_stream();
  CUgraph g1 = nullptr, g2 = nullptr;
  std::atomic<int> ready{0};
  auto run = [&](CUstream s, const Counter& k, CUgraph* out) -> CUresult {
    IncNode inc(k);
    CUresult r = raw<Entry::cuStreamBeginCapture>(table(), s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    if (r != CUDA_SUCCESS) return r;
    ready.fetch_add(1);
    while (ready.load() < 2) std::this_thread::yield();
    for (int i = 0; i < per_thread; ++i) {
      Cap c = capinfo(s);
      if (!c.active()) return c.r == CUDA_SUCCESS ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : c.r;
      CUgraphNode n = nullptr;
      r = raw<Entry::cuGraphAddNode>(table(), &n, c.g, c.deps.data(), c.edges_null ? nullptr : c.edges.data(),
                                     c.n, &inc.p);
      if (r != CUDA_SUCCESS) return r;
      r = update_deps(s, &n, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES);
      if (r != CUDA_SUCCESS) return r;
    }
    return raw<Entry::cuStreamEndCapture>(table(), s, out);
  };
  {
    Call c1(ctx, [&] { return run(s1, k1, &g1); });
    Call c2(ctx, [&] { return run(s2, k2, &g2); });
    REQUIRE(c1.returned_within(wait_ms * 3));
    REQUIRE(c2.returned_within(wait_ms * 3));
    CHECK(c1.result() == CUDA_SUCCESS);
    CHECK(c2.result() == CUDA_SUCCESS);
  }
  REQUIRE(g1 != nullptr);
  REQUIRE(g2 != nullptr);
  for (CUgraph g : {g1, g2}) {
    std::vector<CUgraphNode> nodes = nodes_of(g);
    CHECK(nodes.size() == static_cast<std::size_t>(per_thread));
    std::size_t roots = 0, chained = 0;
    for (CUgraphNode n : nodes) {
      std::vector<CUgraphNode> d = deps_of(n);
      roots += d.empty() ? 1 : 0;
      chained += d.size() == 1 && has(nodes, d[0]) ? 1 : 0;
    }
    CHECK(roots == 1);
    CHECK(chained == static_cast<std::size_t>(per_thread - 1));
  }
  CUgraphExec e1 = instantiate(g1), e2 = instantiate(g2);
  launch_on(e1, s1);
  launch_on(e2, s2);
  sync_on(s1);
  sync_on(s2);
  CHECK(k1.read() == static_cast<unsigned>(per_thread));
  CHECK(k2.read() == static_cast<unsigned>(per_thread));
  destroy_exec(e1);
  destroy_exec(e2);
  destroy_graph(g1);
  destroy_graph(g2);
  destroy_stream(s1);
  destroy_stream(s2);
  finish();
}

TEST_CASE_FIXTURE(
    DriverFixture,
    "the simulator refuses cuGraphExecKernelNodeSetParams, and cuGraphExecNodeSetParams of a kernel "
    "node, on a thread with no current context (the first crashed the real driver) with "
    "INVALID_CONTEXT and records no_current_context (simulator only)") {
  if (!sim) return;  // the real driver's answer: tests/driver/context_probe.cpp (it may crash)
  CUgraph g = new_graph();
  CUgraphNode n = add_kernel(g, noop, 1);
  CUgraphExec e = instantiate(g);
  std::uint64_t arg = 2;
  void* args[] = {&arg};
  CUDA_KERNEL_NODE_PARAMS kp = kernel_params(noop, args);
  CUgraphNodeParams np = kernel_node(noop, args);
  CUresult classic = CUDA_ERROR_UNKNOWN, generic = CUDA_ERROR_UNKNOWN, cleared = CUDA_ERROR_UNKNOWN;
  CUcontext cur = ctx;
  {
    tether::sim::ExpectViolations expected;  // no_current_context, twice
    std::thread th([&] {
      cleared = raw<Entry::cuCtxSetCurrent>(table(), static_cast<CUcontext>(nullptr));
      CHECK(raw<Entry::cuCtxGetCurrent>(table(), &cur) == CUDA_SUCCESS);
      classic = raw<Entry::cuGraphExecKernelNodeSetParams>(table(), e, n, &kp);
      generic = raw<Entry::cuGraphExecNodeSetParams>(table(), e, n, &np);
    });
    th.join();
    CHECK(expected.absorbed() == 2);
  }
  CHECK(cleared == CUDA_SUCCESS);
  CHECK(cur == nullptr);
  CHECK(classic == CUDA_ERROR_INVALID_CONTEXT);
  CHECK(generic == CUDA_ERROR_INVALID_CONTEXT);
  std::vector<tether::sim::Violation> vs = tether::sim::violations();
  REQUIRE(vs.size() == 2);
  CHECK(vs[0].kind == tether::sim::ViolationKind::no_current_context);
  CHECK(vs[0].entry_point == "cuGraphExecKernelNodeSetParams");
  CHECK(vs[1].entry_point == "cuGraphExecNodeSetParams");
  CHECK(vs[1].detail.find("with no context current on the calling thread (the real driver crashes)") !=
        std::string::npos);
  CHECK(tether::sim::to_string(tether::sim::ViolationKind::no_current_context) == "no_current_context");
  tether::sim::clear_violations();
  CHECK(raw<Entry::cuGraphExecKernelNodeSetParams>(t, e, n, &kp) == CUDA_SUCCESS);  // with the context: fine
  destroy_exec(e);
  destroy_graph(g);
  finish();
}

TEST_SUITE_END();
