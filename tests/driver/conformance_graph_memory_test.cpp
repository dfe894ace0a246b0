// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Driver conformance, graph memory nodes as the CUDA documentation describes them (not probed on
// the H200 yet; docs/simulator.md cites the rules): the address of an allocation node is fixed at
// node creation and stays valid for the executable after the definition is destroyed; the memory
// is allocated when the node runs and freed by a free node, cuMemFreeAsync or cuMemFree; a
// relaunch while the previous launch's allocation is unfreed fails with CUDA_ERROR_INVALID_VALUE
// unless the executable was instantiated with CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH.
#include <doctest/doctest.h>

#include "sim/sim.hpp"
#include "support/driver_fixture.hpp"
#include "tether.hpp"

using namespace tether::detail;
using namespace tether_test;
using tether::sim::ViolationKind;

namespace {

// gm_fill(float* x, float v, int n): x[i] = v for every thread i < n (nvcc's PTX of the fill kernel
// of tests/kernels, renamed so that its twin cannot replace another test's "fill").
constexpr const char* fill_ptx = R"PTX(
.version 8.0
.target sm_90
.address_size 64

.visible .entry gm_fill(
	.param .u64 gm_fill_param_0,
	.param .f32 gm_fill_param_1,
	.param .u32 gm_fill_param_2
)
{
	.reg .pred 	%p<2>;
	.reg .f32 	%f<2>;
	.reg .b32 	%r<6>;
	.reg .b64 	%rd<5>;

	ld.param.u64 	%rd1, [gm_fill_param_0];
	ld.param.f32 	%f1, [gm_fill_param_1];
	ld.param.u32 	%r2, [gm_fill_param_2];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r1, %r3, %r4, %r5;
	setp.ge.s32 	%p1, %r1, %r2;
	@%p1 bra 	$L__BB0_2;

	cvta.to.global.u64 	%rd2, %rd1;
	mul.wide.s32 	%rd3, %r1, 4;
	add.s64 	%rd4, %rd2, %rd3;
	st.global.f32 	[%rd4], %f1;

$L__BB0_2:
	ret;
}
)PTX";

constexpr int n = 256;
constexpr std::size_t bytes = n * sizeof(float);

struct Fill {
  CUmodule module = nullptr;
  CUfunction fn = nullptr;
  Fill() {
    tether::sim::register_kernel<float*, float, int>(
        "gm_fill", [](const tether::sim::LaunchInfo& l, float* x, float v, int count) {
          for (std::size_t i = 0; i < l.threads() && i < static_cast<std::size_t>(count); ++i) x[i] = v;
        });
    REQUIRE(raw<Entry::cuModuleLoadData>(table(), &module, static_cast<const void*>(fill_ptx)) == CUDA_SUCCESS);
    REQUIRE(raw<Entry::cuModuleGetFunction>(table(), &fn, module, "gm_fill") == CUDA_SUCCESS);
  }
  ~Fill() { CHECK(raw<Entry::cuModuleUnload>(table(), module) == CUDA_SUCCESS); }
  Fill(const Fill&) = delete;
  Fill& operator=(const Fill&) = delete;
};

CUDA_MEM_ALLOC_NODE_PARAMS alloc_params(CUdevice dev) {
  CUDA_MEM_ALLOC_NODE_PARAMS p{};
  p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.poolProps.location.id = dev;
  p.bytesize = bytes;
  return p;
}

// Adds fill(ptr, v, n) after `dep`.
CUgraphNode add_fill(CUgraph g, CUfunction f, CUdeviceptr ptr, float v, CUgraphNode dep) {
  float* x = reinterpret_cast<float*>(static_cast<std::uintptr_t>(ptr));
  int count = n;
  void* args[] = {&x, &v, &count};
  CUDA_KERNEL_NODE_PARAMS p{};
  p.func = f;
  p.gridDimX = p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = n;
  p.blockDimY = p.blockDimZ = 1;
  p.kernelParams = args;
  CUgraphNode node = nullptr;
  CHECK(raw<Entry::cuGraphAddKernelNode>(table(), &node, g, &dep, std::size_t{dep ? 1u : 0u}, &p) == CUDA_SUCCESS);
  return node;
}

CUresult launch_fill(CUfunction f, CUdeviceptr ptr, float v, CUstream s) {
  float* x = reinterpret_cast<float*>(static_cast<std::uintptr_t>(ptr));
  int count = n;
  void* args[] = {&x, &v, &count};
  return raw<Entry::cuLaunchKernel>(table(), f, 1u, 1u, 1u, static_cast<unsigned>(n), 1u, 1u, 0u, s, args,
                                    static_cast<void**>(nullptr));
}

bool all_equal(const float* h, float v) {
  for (int i = 0; i < n; ++i)
    if (h[i] != v) return false;
  return true;
}

}  // namespace

TEST_SUITE_BEGIN("driver conformance");

TEST_CASE_FIXTURE(DriverFixture,
                  "graph memory: a definition destroyed right after instantiate leaves its allocation to the "
                  "executable; each of two launches allocates it, a kernel fills it, a copy node reads it back and "
                  "the free node frees it") {
  Fill fill;
  float* host = nullptr;
  REQUIRE(raw<Entry::cuMemAllocHost>(t, reinterpret_cast<void**>(&host), bytes) == CUDA_SUCCESS);
  CUgraph g = new_graph();
  CUDA_MEM_ALLOC_NODE_PARAMS ap = alloc_params(drv.device);
  CUgraphNode an = nullptr;
  REQUIRE(raw<Entry::cuGraphAddMemAllocNode>(t, &an, g, static_cast<const CUgraphNode*>(nullptr), std::size_t{0},
                                             &ap) == CUDA_SUCCESS);
  REQUIRE(ap.dptr != 0);
  CUgraphNode kn = add_fill(g, fill.fn, ap.dptr, 3.0f, an);
  CUDA_MEMCPY3D c{};
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  c.srcDevice = ap.dptr;
  c.dstMemoryType = CU_MEMORYTYPE_HOST;
  c.dstHost = host;
  c.WidthInBytes = bytes;
  c.Height = 1;
  c.Depth = 1;
  CUgraphNode cn = nullptr;
  REQUIRE(raw<Entry::cuGraphAddMemcpyNode>(t, &cn, g, &kn, std::size_t{1}, &c, ctx) == CUDA_SUCCESS);
  CUgraphNode fn = nullptr;
  REQUIRE(raw<Entry::cuGraphAddMemFreeNode>(t, &fn, g, &cn, std::size_t{1}, ap.dptr) == CUDA_SUCCESS);
  CUgraphExec e = instantiate(g);
  destroy_graph(g);
  for (int round = 0; round < 2; ++round) {
    CAPTURE(round);
    std::memset(host, 0, bytes);
    launch(e);
    sync();
    CHECK(all_equal(host, 3.0f));
  }
  if (sim) {
    // Between launches the memory is not allocated: a kernel touching it is a use after free.
    {
      tether::sim::ExpectViolations expected;  // use_after_free, found when the launch runs
      CHECK(launch_fill(fill.fn, ap.dptr, 1.0f, stream) == CUDA_SUCCESS);
      sync();
    }
    expect_violations(ViolationKind::use_after_free);
  }
  destroy_exec(e);
  CHECK(raw<Entry::cuMemFreeHost>(t, host) == CUDA_SUCCESS);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "graph memory: an allocation the graph leaves allocated is usable by stream work after the launch; "
                  "a relaunch before it is freed fails with CUDA_ERROR_INVALID_VALUE, and after cuMemFreeAsync (or "
                  "cuMemFree) the relaunch allocates it again") {
  Fill fill;
  float host[n];
  CUgraph g = new_graph();
  CUDA_MEM_ALLOC_NODE_PARAMS ap = alloc_params(drv.device);
  CUgraphNode an = nullptr;
  REQUIRE(raw<Entry::cuGraphAddMemAllocNode>(t, &an, g, static_cast<const CUgraphNode*>(nullptr), std::size_t{0},
                                             &ap) == CUDA_SUCCESS);
  add_fill(g, fill.fn, ap.dptr, 4.0f, an);
  CUgraphExec e = instantiate(g);
  destroy_graph(g);

  launch(e);
  sync();
  CHECK(raw<Entry::cuMemcpyDtoH>(t, host, ap.dptr, bytes) == CUDA_SUCCESS);
  CHECK(all_equal(host, 4.0f));
  CHECK(raw<Entry::cuGraphLaunch>(t, e, stream) == CUDA_ERROR_INVALID_VALUE);  // still allocated

  CHECK(raw<Entry::cuMemFreeAsync>(t, ap.dptr, stream) == CUDA_SUCCESS);
  launch(e);  // ordered after the free on the same stream
  sync();
  std::memset(host, 0, bytes);
  CHECK(raw<Entry::cuMemcpyDtoH>(t, host, ap.dptr, bytes) == CUDA_SUCCESS);
  CHECK(all_equal(host, 4.0f));

  CHECK(raw<Entry::cuMemFree>(t, ap.dptr) == CUDA_SUCCESS);  // synchronous free outside the graph
  launch(e);
  sync();
  CHECK(raw<Entry::cuMemFreeAsync>(t, ap.dptr, stream) == CUDA_SUCCESS);
  sync();
  if (sim) {
    {
      tether::sim::ExpectViolations expected;  // use_after_free, found when the launch runs
      CHECK(launch_fill(fill.fn, ap.dptr, 1.0f, stream) == CUDA_SUCCESS);
      sync();
    }
    expect_violations(ViolationKind::use_after_free);
  }
  destroy_exec(e);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "graph memory: with CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH a relaunch frees the previous "
                  "launch's unfreed allocation itself and succeeds") {
  Fill fill;
  float host[n];
  CUgraph g = new_graph();
  CUDA_MEM_ALLOC_NODE_PARAMS ap = alloc_params(drv.device);
  CUgraphNode an = nullptr;
  REQUIRE(raw<Entry::cuGraphAddMemAllocNode>(t, &an, g, static_cast<const CUgraphNode*>(nullptr), std::size_t{0},
                                             &ap) == CUDA_SUCCESS);
  add_fill(g, fill.fn, ap.dptr, 6.0f, an);
  CUgraphExec e = nullptr;
  REQUIRE(raw<Entry::cuGraphInstantiateWithFlags>(
              t, &e, g, static_cast<unsigned long long>(CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)) ==
          CUDA_SUCCESS);
  destroy_graph(g);
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    CHECK(raw<Entry::cuGraphLaunch>(t, e, stream) == CUDA_SUCCESS);
    sync();
    std::memset(host, 0, bytes);
    CHECK(raw<Entry::cuMemcpyDtoH>(t, host, ap.dptr, bytes) == CUDA_SUCCESS);
    CHECK(all_equal(host, 6.0f));
  }
  CHECK(raw<Entry::cuMemFreeAsync>(t, ap.dptr, stream) == CUDA_SUCCESS);
  sync();
  destroy_exec(e);
  finish();
}

TEST_CASE_FIXTURE(DriverFixture,
                  "graph memory: cuMemAllocAsync and cuMemFreeAsync captured around a kernel become allocation and "
                  "free nodes whose memory the executable allocates at each launch, after the captured graph was "
                  "destroyed") {
  Fill fill;
  float* host = nullptr;
  REQUIRE(raw<Entry::cuMemAllocHost>(t, reinterpret_cast<void**>(&host), bytes) == CUDA_SUCCESS);
  CUstream s = new_stream();
  REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  CUdeviceptr d = 0;
  REQUIRE(raw<Entry::cuMemAllocAsync>(t, &d, bytes, s) == CUDA_SUCCESS);
  CHECK(launch_fill(fill.fn, d, 8.0f, s) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuMemcpyDtoHAsync>(t, host, d, bytes, s) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuMemFreeAsync>(t, d, s) == CUDA_SUCCESS);
  CUgraph g = nullptr;
  REQUIRE(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_SUCCESS);
  CHECK(node_count(g) == 4);
  CUgraphExec e = instantiate(g);
  destroy_graph(g);
  for (int round = 0; round < 2; ++round) {
    CAPTURE(round);
    std::memset(host, 0, bytes);
    launch_on(e, s);
    sync_on(s);
    CHECK(all_equal(host, 8.0f));
  }
  destroy_exec(e);
  destroy_stream(s);
  CHECK(raw<Entry::cuMemFreeHost>(t, host) == CUDA_SUCCESS);
  finish();
}

TEST_SUITE_END();
