// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Driver conformance: launch attributes of graph kernel nodes, dynamic shared memory, cooperative
// launches, priorities and parameter information, as the H200 showed them
// (tests/driver/launch_attr_probe.txt; docs/launch-attributes.md has the table). Every case runs on
// both drivers; the kernels (tests/kernels/kernels.cu) report what the launch gave them, and on the
// simulator their twins (tests/support/kernels.hpp) report what the simulator told them, so the
// same assertions check the hardware and the model. Simulator-only cases (what a twin is told,
// attributes the simulator refuses) are at the end.
#include <doctest/doctest.h>

#include <cstring>
#include <mutex>

#include "sim/sim.hpp"
#include "support/driver_fixture.hpp"
#include "support/kernels.hpp"
#include "tether.hpp"

using namespace tether::detail;
using namespace tether_test;

namespace {

constexpr int optin = 232448;  // the H200's MAX_SHARED_MEMORY_PER_BLOCK_OPTIN

// The test module's kernels, loaded once per process (kernels.fatbin beside the executable).
struct AttrKernels {
  CUmodule module = nullptr;
  CUfunction fill = nullptr, cluster = nullptr, coop = nullptr, smem = nullptr;
  CUfunction p_mix = nullptr, p_struct = nullptr, p_align = nullptr, p_none = nullptr;
};

const AttrKernels& attr_kernels() {
  static const AttrKernels k = [] {
    register_test_twins();
    AttrKernels a;
    tether::Image img = tether::Image::from_file(beside_executable("kernels.fatbin"));
    require_ok(raw<Entry::cuModuleLoadData>(table(), &a.module, static_cast<const void*>(img.data())),
               "cuModuleLoadData(kernels.fatbin)");
    auto fn = [&](const char* name) {
      CUfunction f = nullptr;
      require_ok(raw<Entry::cuModuleGetFunction>(table(), &f, a.module, name), name);
      return f;
    };
    a.fill = fn("fill");
    a.cluster = fn("cluster_dims");
    a.coop = fn("coop_sync");
    a.smem = fn("dyn_smem");
    a.p_mix = fn("param_mix");
    a.p_struct = fn("param_struct");
    a.p_align = fn("param_align");
    a.p_none = fn("no_params");
    return a;
  }();
  return k;
}

struct Dim {
  unsigned x = 1, y = 1, z = 1;
};

class AttrFixture : public DriverFixture {
 public:
  AttrFixture() : k(attr_kernels()) {
    REQUIRE(raw<Entry::cuMemAlloc>(t, &out, std::size_t{256}) == CUDA_SUCCESS);
    REQUIRE(raw<Entry::cuMemAlloc>(t, &counter, std::size_t{256}) == CUDA_SUCCESS);
  }
  ~AttrFixture() {
    // Function attributes are per process: leave them as every test expects to find them.
    set_func(k.smem, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 49152);
    set_func(k.coop, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 49152);
    set_func(k.cluster, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 0);
    raw<Entry::cuMemFree>(t, out);
    raw<Entry::cuMemFree>(t, counter);
  }

 protected:
  const AttrKernels& k;
  CUdeviceptr out = 0;
  CUdeviceptr counter = 0;
  int smem_n = 0;
  void* cl_args[1] = {&out};
  void* co_args[2] = {&counter, &out};
  void* sm_args[2] = {&out, &smem_n};

  CUresult set_func(CUfunction f, CUfunction_attribute a, int v) const { return raw<Entry::cuFuncSetAttribute>(t, f, a, v); }
  int func_attr(CUfunction f, CUfunction_attribute a) const {
    int v = -1;
    CHECK(raw<Entry::cuFuncGetAttribute>(t, &v, a, f) == CUDA_SUCCESS);
    return v;
  }
  CUDA_KERNEL_NODE_PARAMS params(CUfunction f, Dim grid, Dim block = {32, 1, 1}, unsigned shared = 0) {
    CUDA_KERNEL_NODE_PARAMS p{};
    p.func = f;
    p.gridDimX = grid.x;
    p.gridDimY = grid.y;
    p.gridDimZ = grid.z;
    p.blockDimX = block.x;
    p.blockDimY = block.y;
    p.blockDimZ = block.z;
    p.sharedMemBytes = shared;
    p.kernelParams = f == k.cluster ? cl_args : f == k.coop ? co_args : sm_args;
    return p;
  }
  CUresult add(CUgraph g, const CUDA_KERNEL_NODE_PARAMS& p, CUgraphNode& n) const {
    return raw<Entry::cuGraphAddKernelNode>(t, &n, g, static_cast<const CUgraphNode*>(nullptr), std::size_t{0}, &p);
  }
  // A graph of one kernel node; checks that the node was added.
  CUgraph one_node(const CUDA_KERNEL_NODE_PARAMS& p, CUgraphNode& n) const {
    CUgraph g = new_graph();
    REQUIRE(add(g, p, n) == CUDA_SUCCESS);
    return g;
  }
  CUresult set(CUgraphNode n, CUlaunchAttributeID id, const CUlaunchAttributeValue& v) const {
    return raw<Entry::cuGraphKernelNodeSetAttribute>(t, n, id, &v);
  }
  CUresult get(CUgraphNode n, CUlaunchAttributeID id, CUlaunchAttributeValue& v) const {
    std::memset(&v, 0, sizeof v);
    return raw<Entry::cuGraphKernelNodeGetAttribute>(t, n, id, &v);
  }
  static CUlaunchAttributeValue cluster_value(unsigned x, unsigned y = 1, unsigned z = 1) {
    CUlaunchAttributeValue v{};
    v.clusterDim.x = x;
    v.clusterDim.y = y;
    v.clusterDim.z = z;
    return v;
  }
  static CUlaunchAttributeValue cooperative_value(int on) {
    CUlaunchAttributeValue v{};
    v.cooperative = on;
    return v;
  }
  static CUlaunchAttributeValue priority_value(int p) {
    CUlaunchAttributeValue v{};
    v.priority = p;
    return v;
  }
  std::array<unsigned, 3> cluster_of(CUgraphNode n) const {
    CUlaunchAttributeValue v{};
    CHECK(get(n, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, v) == CUDA_SUCCESS);
    return {v.clusterDim.x, v.clusterDim.y, v.clusterDim.z};
  }
  // Launches `e` once and returns the kernel's report (out[0..8)), zeroed before the launch.
  std::vector<int> report(CUgraphExec e) const {
    CHECK(raw<Entry::cuMemsetD32Async>(t, out, 0u, std::size_t{64}, stream) == CUDA_SUCCESS);
    CHECK(raw<Entry::cuMemsetD32Async>(t, counter, 0u, std::size_t{64}, stream) == CUDA_SUCCESS);
    launch(e);
    sync();
    std::vector<int> v(8, -99);
    CHECK(raw<Entry::cuMemcpyDtoH>(t, static_cast<void*>(v.data()), out, v.size() * sizeof(int)) == CUDA_SUCCESS);
    return v;
  }
  // cluster_dims' report: the cluster it ran in and the blocks that ran.
  struct Clustered {
    std::array<int, 3> cluster;
    int blocks;
  };
  Clustered clustered(CUgraphExec e) const {
    std::vector<int> v = report(e);
    return {{v[0], v[1], v[2]}, v[4]};
  }
  Clustered run_clustered(CUgraph g) const {
    CUgraphExec e = instantiate(g);
    Clustered c = clustered(e);
    destroy_exec(e);
    return c;
  }
  CUgraphExecUpdateResultInfo update(CUgraphExec e, CUgraph g, CUresult& r) const {
    CUgraphExecUpdateResultInfo info{};
    r = raw<Entry::cuGraphExecUpdate>(t, e, g, &info);
    return info;
  }
};

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_SUITE_BEGIN("driver conformance");

// ------------------------------------------------------------------------ dynamic shared memory

TEST_CASE_FIXTURE(AttrFixture,
                  "la1: a kernel may use 48 KiB of dynamic shared memory by default and up to the opt-in maximum of "
                  "232448 bytes once cuFuncSetAttribute allows it, and no more") {
  int dev_optin = 0;
  CHECK(raw<Entry::cuDeviceGetAttribute>(t, &dev_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                         drv.device) == CUDA_SUCCESS);
  CHECK(dev_optin == optin);
  CHECK(func_attr(k.smem, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) == 49152);
  CHECK(set_func(k.smem, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin + 1) == CUDA_ERROR_INVALID_VALUE);
  CHECK(set_func(k.smem, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, -1) == CUDA_ERROR_INVALID_VALUE);
  CHECK(func_attr(k.smem, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) == 49152);
  CHECK(set_func(k.smem, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin) == CUDA_SUCCESS);
  CHECK(func_attr(k.smem, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) == optin);
  // The attribute belongs to the module's kernel, not to one handle of it.
  CUfunction again = nullptr;
  CHECK(raw<Entry::cuModuleGetFunction>(t, &again, k.module, "dyn_smem") == CUDA_SUCCESS);
  CHECK(func_attr(again, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) == optin);
  // Read-only attributes and unknown functions.
  CHECK(set_func(k.smem, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 64) == CUDA_ERROR_INVALID_VALUE);
  CHECK(set_func(nullptr, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1024) == CUDA_ERROR_INVALID_HANDLE);
  finish();
}

TEST_CASE_FIXTURE(AttrFixture,
                  "la2: cuGraphAddKernelNode refuses more dynamic shared memory than the function allows with "
                  "INVALID_VALUE, and a node within the limit can use every byte it asked for") {
  CUgraph g = new_graph();
  CUgraphNode n = nullptr;
  smem_n = 49152 / 4;
  CHECK(add(g, params(k.smem, {1}, {256}, 49153), n) == CUDA_ERROR_INVALID_VALUE);
  CHECK(add(g, params(k.smem, {1}, {256}, 100 * 1024), n) == CUDA_ERROR_INVALID_VALUE);
  REQUIRE(set_func(k.smem, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin) == CUDA_SUCCESS);
  CHECK(add(g, params(k.smem, {1}, {256}, optin + 1), n) == CUDA_ERROR_INVALID_VALUE);
  CHECK(node_count(g) == 0);
  smem_n = optin / 4;
  REQUIRE(add(g, params(k.smem, {1}, {256}, optin), n) == CUDA_SUCCESS);
  CUgraphExec e = instantiate(g);
  std::vector<int> r = report(e);
  CHECK(r[1] == optin / 4);  // floats written and read back
  CHECK(r[0] == 0);          // mismatches
  destroy_exec(e);
  destroy_graph(g);
  finish();
}

TEST_CASE_FIXTURE(AttrFixture,
                  "la3: the dynamic shared memory limit is checked when the node is made: lowering it afterwards "
                  "does not stop the graph from instantiating or its executables from launching") {
  REQUIRE(set_func(k.smem, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin) == CUDA_SUCCESS);
  smem_n = 100 * 256;
  CUgraphNode n = nullptr;
  CUgraph g = one_node(params(k.smem, {1}, {256}, 100 * 1024), n);
  CUgraphExec before = instantiate(g);
  REQUIRE(set_func(k.smem, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 49152) == CUDA_SUCCESS);
  std::vector<int> r = report(before);
  CHECK(r[1] == 100 * 256);
  CHECK(r[0] == 0);
  CUgraphExec after = instantiate(g);
  r = report(after);
  CHECK(r[1] == 100 * 256);
  CHECK(r[0] == 0);
  destroy_exec(before);
  destroy_exec(after);
  destroy_graph(g);
  finish();
}

TEST_CASE_FIXTURE(AttrFixture,
                  "la4: the SetParams calls and cuLaunchKernel refuse dynamic shared memory beyond the function's "
                  "limit with INVALID_VALUE and leave the node as it was") {
  smem_n = 256;
  CUgraphNode n = nullptr;
  CUgraph g = one_node(params(k.smem, {1}, {256}, 1024), n);
  CUgraphExec e = instantiate(g);
  CUDA_KERNEL_NODE_PARAMS big = params(k.smem, {1}, {256}, 100 * 1024);
  CHECK(raw<Entry::cuGraphKernelNodeSetParams>(t, n, &big) == CUDA_ERROR_INVALID_VALUE);
  CUDA_KERNEL_NODE_PARAMS back{};
  CHECK(raw<Entry::cuGraphKernelNodeGetParams>(t, n, &back) == CUDA_SUCCESS);
  CHECK(back.sharedMemBytes == 1024);
  CHECK(raw<Entry::cuGraphExecKernelNodeSetParams>(t, e, n, &big) == CUDA_ERROR_INVALID_VALUE);
  std::vector<int> r = report(e);  // still the 1 KiB launch
  CHECK(r[1] == 256);
  CHECK(r[0] == 0);
  void* args[2] = {&out, &smem_n};
  CHECK(raw<Entry::cuLaunchKernel>(t, k.smem, 1u, 1u, 1u, 256u, 1u, 1u, 100u * 1024, stream, args,
                                   static_cast<void**>(nullptr)) == CUDA_ERROR_INVALID_VALUE);
  // Raised, the same calls succeed, and the executable then uses the new size.
  REQUIRE(set_func(k.smem, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin) == CUDA_SUCCESS);
  smem_n = 100 * 256;
  big = params(k.smem, {1}, {256}, 100 * 1024);
  CHECK(raw<Entry::cuGraphExecKernelNodeSetParams>(t, e, n, &big) == CUDA_SUCCESS);
  r = report(e);
  CHECK(r[1] == 100 * 256);
  CHECK(r[0] == 0);
  destroy_exec(e);
  destroy_graph(g);
  finish();
}

// ------------------------------------------------------------------------------ parameter info

TEST_CASE_FIXTURE(AttrFixture,
                  "la5: cuFuncGetParamInfo gives each parameter's offset in the device ABI's buffer and its size, and "
                  "INVALID_VALUE past the last parameter, leaving the outputs untouched") {
  struct Expect {
    CUfunction f;
    std::vector<std::pair<std::size_t, std::size_t>> layout;  // offset, size
  };
  const Expect cases[] = {
      {k.fill, {{0, 8}, {8, 4}, {12, 4}}},                         // (float*, float, int)
      {k.p_mix, {{0, 8}, {8, 1}, {16, 8}}},                        // (double, char, long long)
      {k.p_struct, {{0, 24}}},                                     // (Param24)
      {k.p_align, {{0, 1}, {2, 2}, {4, 4}, {8, 1}, {16, 8}}},      // (char, short, int, char, double)
      {k.p_none, {}},                                              // ()
  };
  for (const Expect& c : cases) {
    for (std::size_t i = 0; i < c.layout.size(); ++i) {
      std::size_t off = 777, size = 777;
      CAPTURE(i);
      CHECK(raw<Entry::cuFuncGetParamInfo>(t, c.f, i, &off, &size) == CUDA_SUCCESS);
      CHECK(off == c.layout[i].first);
      CHECK(size == c.layout[i].second);
    }
    std::size_t off = 777, size = 777;
    CHECK(raw<Entry::cuFuncGetParamInfo>(t, c.f, c.layout.size(), &off, &size) == CUDA_ERROR_INVALID_VALUE);
    CHECK(off == 777);
    CHECK(size == 777);
  }
  std::size_t off = 0, size = 0;
  CHECK(raw<Entry::cuFuncGetParamInfo>(t, k.fill, std::size_t{1}, &off, static_cast<std::size_t*>(nullptr)) ==
        CUDA_SUCCESS);  // the size is optional
  CHECK(off == 8);
  CHECK(raw<Entry::cuFuncGetParamInfo>(t, k.fill, std::size_t{0}, static_cast<std::size_t*>(nullptr), &size) ==
        CUDA_ERROR_INVALID_VALUE);  // the offset is not
  CHECK(raw<Entry::cuFuncGetParamInfo>(t, static_cast<CUfunction>(nullptr), std::size_t{0}, &off, &size) ==
        CUDA_ERROR_INVALID_VALUE);
  finish();
}

// ------------------------------------------------------------------------------------ clusters

TEST_CASE_FIXTURE(AttrFixture,
                  "la6: a cluster dimension set on a kernel node is read back, the kernel runs in clusters of that "
                  "shape, and a node that never set one reads 0,0,0 and runs without clusters") {
  CUgraphNode n = nullptr;
  CUgraph g = one_node(params(k.cluster, {4, 4, 1}), n);
  CHECK(cluster_of(n) == std::array<unsigned, 3>{0, 0, 0});
  Clustered c = run_clustered(g);
  CHECK(c.cluster == std::array<int, 3>{1, 1, 1});
  CHECK(c.blocks == 16);
  CHECK(set(n, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, cluster_value(2, 2)) == CUDA_SUCCESS);
  CHECK(cluster_of(n) == std::array<unsigned, 3>{2, 2, 1});
  c = run_clustered(g);
  CHECK(c.cluster == std::array<int, 3>{2, 2, 1});
  CHECK(c.blocks == 16);
  // {0,0,0} is accepted and means no cluster.
  CHECK(set(n, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, cluster_value(0, 0, 0)) == CUDA_SUCCESS);
  c = run_clustered(g);
  CHECK(c.cluster == std::array<int, 3>{1, 1, 1});
  destroy_graph(g);
  finish();
}

TEST_CASE_FIXTURE(AttrFixture,
                  "la7: cuGraphKernelNodeSetAttribute refuses with INVALID_CLUSTER_SIZE a cluster that does not "
                  "divide the grid, or of more than 8 blocks while the function does not allow non-portable sizes") {
  CUgraphNode n = nullptr;
  CUgraph g = one_node(params(k.cluster, {8, 3, 1}), n);
  CHECK(set(n, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, cluster_value(3)) == CUDA_ERROR_INVALID_CLUSTER_SIZE);
  CHECK(set(n, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, cluster_value(2, 2)) == CUDA_ERROR_INVALID_CLUSTER_SIZE);
  CHECK(cluster_of(n) == std::array<unsigned, 3>{0, 0, 0});
  Clustered c = run_clustered(g);
  CHECK(c.cluster == std::array<int, 3>{1, 1, 1});
  CHECK(c.blocks == 24);
  destroy_graph(g);

  g = one_node(params(k.cluster, {16}), n);
  CHECK(func_attr(k.cluster, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED) == 0);
  CHECK(set(n, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, cluster_value(16)) == CUDA_ERROR_INVALID_CLUSTER_SIZE);
  CHECK(set(n, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, cluster_value(8)) == CUDA_SUCCESS);
  c = run_clustered(g);
  CHECK(c.cluster == std::array<int, 3>{8, 1, 1});
  CHECK(c.blocks == 16);
  destroy_graph(g);
  finish();
}

TEST_CASE_FIXTURE(AttrFixture,
                  "la8: a 16-block cluster needs non-portable sizes allowed when it is set and when it is "
                  "instantiated; cuGraphInstantiate refuses 32 blocks with INVALID_CLUSTER_SIZE") {
  REQUIRE(set_func(k.cluster, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1) == CUDA_SUCCESS);
  CUgraphNode n = nullptr;
  CUgraph g = one_node(params(k.cluster, {16}), n);
  CHECK(set(n, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, cluster_value(16)) == CUDA_SUCCESS);
  CUgraphExec e = instantiate(g);
  // Disallowed again: the executable made before still runs 16-block clusters; a new one is refused.
  REQUIRE(set_func(k.cluster, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 0) == CUDA_SUCCESS);
  Clustered c = clustered(e);
  CHECK(c.cluster == std::array<int, 3>{16, 1, 1});
  CHECK(c.blocks == 16);
  CUgraphExec refused = nullptr;
  CHECK(raw<Entry::cuGraphInstantiateWithFlags>(t, &refused, g, 0ull) == CUDA_ERROR_INVALID_CLUSTER_SIZE);
  destroy_exec(e);
  destroy_graph(g);

  REQUIRE(set_func(k.cluster, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1) == CUDA_SUCCESS);
  g = one_node(params(k.cluster, {32}), n);
  CHECK(set(n, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, cluster_value(32)) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuGraphInstantiateWithFlags>(t, &refused, g, 0ull) == CUDA_ERROR_INVALID_CLUSTER_SIZE);
  destroy_graph(g);
  finish();
}

TEST_CASE_FIXTURE(AttrFixture,
                  "la9: a node's cluster is copied by cuGraphClone and cuGraphKernelNodeCopyAttributes, kept by the "
                  "SetParams calls, and snapshotted by cuGraphInstantiate") {
  CUgraphNode n = nullptr;
  CUgraph g = one_node(params(k.cluster, {8}), n);
  REQUIRE(set(n, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, cluster_value(2)) == CUDA_SUCCESS);
  CUgraph clone = nullptr;
  REQUIRE(raw<Entry::cuGraphClone>(t, &clone, g) == CUDA_SUCCESS);
  CUgraphNode in_clone = nullptr;
  REQUIRE(raw<Entry::cuGraphNodeFindInClone>(t, &in_clone, n, clone) == CUDA_SUCCESS);
  CHECK(cluster_of(in_clone) == std::array<unsigned, 3>{2, 1, 1});
  CHECK(run_clustered(clone).cluster == std::array<int, 3>{2, 1, 1});
  CUgraphNode other = nullptr;
  CUgraph g2 = one_node(params(k.cluster, {8}), other);
  CHECK(raw<Entry::cuGraphKernelNodeCopyAttributes>(t, other, n) == CUDA_SUCCESS);
  CHECK(cluster_of(other) == std::array<unsigned, 3>{2, 1, 1});

  CUDA_KERNEL_NODE_PARAMS same = params(k.cluster, {8});
  CHECK(raw<Entry::cuGraphKernelNodeSetParams>(t, n, &same) == CUDA_SUCCESS);
  CHECK(cluster_of(n) == std::array<unsigned, 3>{2, 1, 1});
  CUgraphExec e = instantiate(g);
  CHECK(raw<Entry::cuGraphExecKernelNodeSetParams>(t, e, n, &same) == CUDA_SUCCESS);
  CHECK(clustered(e).cluster == std::array<int, 3>{2, 1, 1});
  // The executable keeps the value its graph had when it was made.
  REQUIRE(set(n, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, cluster_value(4)) == CUDA_SUCCESS);
  CHECK(clustered(e).cluster == std::array<int, 3>{2, 1, 1});
  destroy_exec(e);
  destroy_graph(g);
  destroy_graph(g2);
  destroy_graph(clone);
  finish();
}

TEST_CASE_FIXTURE(AttrFixture,
                  "la10: the SetParams calls refuse a grid the node's cluster does not divide with "
                  "INVALID_CLUSTER_SIZE and keep the node as it was") {
  CUgraphNode n = nullptr;
  CUgraph g = one_node(params(k.cluster, {8}), n);
  REQUIRE(set(n, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, cluster_value(2)) == CUDA_SUCCESS);
  CUgraphExec e = instantiate(g);
  CUDA_KERNEL_NODE_PARAMS seven = params(k.cluster, {7});
  CHECK(raw<Entry::cuGraphExecKernelNodeSetParams>(t, e, n, &seven) == CUDA_ERROR_INVALID_CLUSTER_SIZE);
  Clustered c = clustered(e);
  CHECK(c.blocks == 8);
  CHECK(c.cluster == std::array<int, 3>{2, 1, 1});
  CUDA_KERNEL_NODE_PARAMS six = params(k.cluster, {6});
  CHECK(raw<Entry::cuGraphExecKernelNodeSetParams>(t, e, n, &six) == CUDA_SUCCESS);
  c = clustered(e);
  CHECK(c.blocks == 6);
  CHECK(c.cluster == std::array<int, 3>{2, 1, 1});
  CHECK(raw<Entry::cuGraphKernelNodeSetParams>(t, n, &seven) == CUDA_ERROR_INVALID_CLUSTER_SIZE);
  CUDA_KERNEL_NODE_PARAMS back{};
  CHECK(raw<Entry::cuGraphKernelNodeGetParams>(t, n, &back) == CUDA_SUCCESS);
  CHECK(back.gridDimX == 8);
  destroy_exec(e);
  destroy_graph(g);
  finish();
}

TEST_CASE_FIXTURE(AttrFixture,
                  "la11: cuGraphExecUpdate takes a changed cluster dimension, and keeps the executable's cluster when "
                  "the source node has none") {
  CUgraphNode n1 = nullptr, n2 = nullptr, n0 = nullptr;
  CUgraph g1 = one_node(params(k.cluster, {8}), n1);
  REQUIRE(set(n1, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, cluster_value(2)) == CUDA_SUCCESS);
  CUgraph g2 = one_node(params(k.cluster, {8}), n2);
  REQUIRE(set(n2, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, cluster_value(4)) == CUDA_SUCCESS);
  CUgraph none = one_node(params(k.cluster, {8}), n0);
  CUgraphExec e = instantiate(g1);
  CUresult r = CUDA_SUCCESS;
  CUgraphExecUpdateResultInfo info = update(e, g2, r);
  CHECK(r == CUDA_SUCCESS);
  CHECK(info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS);
  CHECK(clustered(e).cluster == std::array<int, 3>{4, 1, 1});
  info = update(e, none, r);
  CHECK(r == CUDA_SUCCESS);
  CHECK(clustered(e).cluster == std::array<int, 3>{4, 1, 1});
  destroy_exec(e);
  // An executable without a cluster takes the source's.
  e = instantiate(none);
  info = update(e, g1, r);
  CHECK(r == CUDA_SUCCESS);
  CHECK(clustered(e).cluster == std::array<int, 3>{2, 1, 1});
  destroy_exec(e);
  destroy_graph(g1);
  destroy_graph(g2);
  destroy_graph(none);
  finish();
}

TEST_CASE_FIXTURE(AttrFixture,
                  "la11b: cuGraphKernelNodeCopyAttributes copies the whole set, the destination's own attributes "
                  "included, and refuses with INVALID_VALUE a cluster the destination's grid is no multiple of") {
  CUgraphNode src = nullptr, dst = nullptr, seven = nullptr;
  CUgraph g1 = one_node(params(k.cluster, {8}), src);
  REQUIRE(set(src, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, cluster_value(2)) == CUDA_SUCCESS);
  REQUIRE(set(src, CU_LAUNCH_ATTRIBUTE_PRIORITY, priority_value(-1)) == CUDA_SUCCESS);
  CUgraph g2 = one_node(params(k.cluster, {8}), dst);
  CUlaunchAttributeValue carve{};
  carve.sharedMemCarveout = 25;
  REQUIRE(set(dst, CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, carve) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuGraphKernelNodeCopyAttributes>(t, dst, src) == CUDA_SUCCESS);
  CUlaunchAttributeValue v{};
  CHECK(cluster_of(dst) == std::array<unsigned, 3>{2, 1, 1});
  CHECK(get(dst, CU_LAUNCH_ATTRIBUTE_PRIORITY, v) == CUDA_SUCCESS);
  CHECK(v.priority == -1);
  CHECK(get(dst, CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, v) == CUDA_SUCCESS);
  CHECK(v.sharedMemCarveout == 0);
  CHECK(run_clustered(g2).cluster == std::array<int, 3>{2, 1, 1});
  CUgraph g3 = one_node(params(k.cluster, {7}), seven);
  CHECK(raw<Entry::cuGraphKernelNodeCopyAttributes>(t, seven, src) == CUDA_ERROR_INVALID_VALUE);
  CHECK(cluster_of(seven) == std::array<unsigned, 3>{0, 0, 0});
  destroy_graph(g1);
  destroy_graph(g2);
  destroy_graph(g3);
  finish();
}

TEST_CASE_FIXTURE(AttrFixture,
                  "la11c: a whole update from a node without a cluster keeps the executable's cluster even when the "
                  "new grid is no multiple of it, and then only whole clusters run (grid 7 in clusters of 2 runs 6 "
                  "blocks)") {
  CUgraphNode n = nullptr, n7 = nullptr;
  CUgraph g = one_node(params(k.cluster, {8}), n);
  REQUIRE(set(n, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, cluster_value(2)) == CUDA_SUCCESS);
  CUgraph g7 = one_node(params(k.cluster, {7}), n7);
  CUgraphExec e = instantiate(g);
  CUresult r = CUDA_SUCCESS;
  CUgraphExecUpdateResultInfo info = update(e, g7, r);
  CHECK(r == CUDA_SUCCESS);
  CHECK(info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS);
  Clustered c = clustered(e);
  CHECK(c.cluster == std::array<int, 3>{2, 1, 1});
  CHECK(c.blocks == 6);
  destroy_exec(e);
  destroy_graph(g);
  destroy_graph(g7);
  finish();
}

// --------------------------------------------------------------------------------- cooperative

TEST_CASE_FIXTURE(AttrFixture,
                  "la12: a cooperative kernel node's grid-wide barrier holds, and without the attribute the kernel "
                  "sees a grid that cannot synchronise") {
  CUgraphNode n = nullptr;
  CUgraph g = one_node(params(k.coop, {4}), n);
  CUlaunchAttributeValue v{};
  CHECK(get(n, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, v) == CUDA_SUCCESS);
  CHECK(v.cooperative == 0);
  CUgraphExec plain = instantiate(g);
  std::vector<int> r = report(plain);
  CHECK(r[1] == -1);
  CHECK(set(n, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, cooperative_value(1)) == CUDA_SUCCESS);
  CHECK(get(n, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, v) == CUDA_SUCCESS);
  CHECK(v.cooperative == 1);
  CUgraphExec coop = instantiate(g);
  r = report(coop);
  CHECK(r[1] == 1);
  CHECK(r[0] == 4);
  destroy_exec(plain);
  destroy_exec(coop);
  destroy_graph(g);
  finish();
}

TEST_CASE_FIXTURE(AttrFixture,
                  "la13: cuGraphKernelNodeSetAttribute refuses a cooperative grid larger than can be co-resident "
                  "(132 SMs x 32 blocks of 32 threads, x 2 of 1024, x 3 with 64 KiB) with "
                  "COOPERATIVE_LAUNCH_TOO_LARGE") {
  struct Case {
    unsigned block;
    unsigned shared;
    unsigned fits;
  };
  REQUIRE(set_func(k.coop, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 64 * 1024) == CUDA_SUCCESS);
  for (Case c : {Case{32, 0, 4224}, Case{1024, 0, 264}, Case{32, 64 * 1024, 396}}) {
    CAPTURE(c.block);
    CAPTURE(c.shared);
    CUgraphNode n = nullptr;
    CUgraph g = one_node(params(k.coop, {c.fits + 1}, {c.block}, c.shared), n);
    CHECK(set(n, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, cooperative_value(1)) == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
    destroy_graph(g);
    g = one_node(params(k.coop, {c.fits}, {c.block}, c.shared), n);
    CHECK(set(n, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, cooperative_value(1)) == CUDA_SUCCESS);
    CUgraphExec e = instantiate(g);
    std::vector<int> r = report(e);
    CHECK(r[1] == 1);
    CHECK(r[0] == static_cast<int>(c.fits));
    destroy_exec(e);
    destroy_graph(g);
  }
  finish();
}

TEST_CASE_FIXTURE(AttrFixture,
                  "la14: growing a cooperative node past co-residency is refused by both SetParams calls with "
                  "COOPERATIVE_LAUNCH_TOO_LARGE, and cuGraphExecUpdate refuses a change of the cooperative attribute "
                  "with ATTRIBUTES_CHANGED naming the source node") {
  CUgraphNode n = nullptr;
  CUgraph g = one_node(params(k.coop, {4}), n);
  REQUIRE(set(n, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, cooperative_value(1)) == CUDA_SUCCESS);
  CUgraphExec e = instantiate(g);
  CUDA_KERNEL_NODE_PARAMS big = params(k.coop, {100000});
  CHECK(raw<Entry::cuGraphExecKernelNodeSetParams>(t, e, n, &big) == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
  CHECK(raw<Entry::cuGraphKernelNodeSetParams>(t, n, &big) == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
  std::vector<int> r = report(e);
  CHECK(r[1] == 1);
  CHECK(r[0] == 4);
  CUgraphNode plain = nullptr;
  CUgraph g2 = one_node(params(k.coop, {4}), plain);
  CUresult res = CUDA_SUCCESS;
  CUgraphExecUpdateResultInfo info = update(e, g2, res);
  CHECK(res == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  CHECK(info.result == CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED);
  CHECK(info.errorNode == plain);
  r = report(e);  // the failed update left the executable cooperative
  CHECK(r[1] == 1);
  destroy_exec(e);
  e = instantiate(g2);
  info = update(e, g, res);
  CHECK(res == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  CHECK(info.result == CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED);
  destroy_exec(e);
  destroy_graph(g);
  destroy_graph(g2);
  finish();
}

// ---------------------------------------------------------------------------------- priorities

TEST_CASE_FIXTURE(AttrFixture,
                  "la15: stream priorities range from 0 (least) to -5 (greatest); cuStreamCreateWithPriority clamps "
                  "into that range, and a launch captured from such a stream gives its node the stream's priority") {
  int least = 99, greatest = 99;
  CHECK(raw<Entry::cuCtxGetStreamPriorityRange>(t, &least, &greatest) == CUDA_SUCCESS);
  CHECK(least == 0);
  CHECK(greatest == -5);
  CHECK(raw<Entry::cuCtxGetStreamPriorityRange>(t, static_cast<int*>(nullptr), static_cast<int*>(nullptr)) ==
        CUDA_SUCCESS);
  CUstream bad = nullptr;
  CHECK(raw<Entry::cuStreamCreateWithPriority>(t, &bad, 4u, 0) == CUDA_ERROR_INVALID_VALUE);
  CHECK(raw<Entry::cuStreamCreateWithPriority>(t, static_cast<CUstream*>(nullptr), 0u, 0) == CUDA_ERROR_INVALID_VALUE);
  for (int asked : {-15, -3}) {
    CAPTURE(asked);
    CUstream s = nullptr;
    REQUIRE(raw<Entry::cuStreamCreateWithPriority>(t, &s, static_cast<unsigned>(CU_STREAM_NON_BLOCKING), asked) ==
            CUDA_SUCCESS);
    REQUIRE(raw<Entry::cuStreamBeginCapture>(t, s, CU_STREAM_CAPTURE_MODE_RELAXED) == CUDA_SUCCESS);
    CHECK(raw<Entry::cuLaunchKernel>(t, k.cluster, 8u, 1u, 1u, 32u, 1u, 1u, 0u, s, cl_args,
                                     static_cast<void**>(nullptr)) == CUDA_SUCCESS);
    CUgraph g = nullptr;
    REQUIRE(raw<Entry::cuStreamEndCapture>(t, s, &g) == CUDA_SUCCESS);
    std::vector<CUgraphNode> nodes = nodes_of(g);
    REQUIRE(nodes.size() == 1);
    CUlaunchAttributeValue v{};
    CHECK(get(nodes[0], CU_LAUNCH_ATTRIBUTE_PRIORITY, v) == CUDA_SUCCESS);
    CHECK(v.priority == std::max(asked, -5));
    destroy_graph(g);
    destroy_stream(s);
  }
  finish();
}

TEST_CASE_FIXTURE(AttrFixture,
                  "la16: a node's priority reads back clamped; USE_NODE_PRIORITY is accepted but cuGraphExecGetFlags "
                  "does not report it; only under it does cuGraphExecUpdate refuse a changed priority, comparing the "
                  "values as set") {
  CUgraphNode n = nullptr;
  CUgraph g = one_node(params(k.cluster, {8}), n);
  CUlaunchAttributeValue v{};
  CHECK(get(n, CU_LAUNCH_ATTRIBUTE_PRIORITY, v) == CUDA_SUCCESS);
  CHECK(v.priority == 0);
  for (auto [asked, reads] : {std::pair{-15, -5}, std::pair{10, 0}, std::pair{-5, -5}}) {
    CHECK(set(n, CU_LAUNCH_ATTRIBUTE_PRIORITY, priority_value(asked)) == CUDA_SUCCESS);
    CHECK(get(n, CU_LAUNCH_ATTRIBUTE_PRIORITY, v) == CUDA_SUCCESS);
    CHECK(v.priority == reads);
  }
  CUgraphExec e = nullptr;
  REQUIRE(raw<Entry::cuGraphInstantiateWithFlags>(t, &e, g, static_cast<unsigned long long>(
                                                               CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)) ==
          CUDA_SUCCESS);
  cuuint64_t flags = 99;
  CHECK(raw<Entry::cuGraphExecGetFlags>(t, e, &flags) == CUDA_SUCCESS);
  CHECK(flags == 0);
  CHECK(clustered(e).blocks == 8);
  CUgraphNode n2 = nullptr, n3 = nullptr;
  CUgraph other = one_node(params(k.cluster, {8}), n2);
  REQUIRE(set(n2, CU_LAUNCH_ATTRIBUTE_PRIORITY, priority_value(0)) == CUDA_SUCCESS);
  CUgraph clamps_same = one_node(params(k.cluster, {8}), n3);
  REQUIRE(set(n3, CU_LAUNCH_ATTRIBUTE_PRIORITY, priority_value(-15)) == CUDA_SUCCESS);  // reads -5, as the exec's
  CUresult r = CUDA_SUCCESS;
  CUgraphExecUpdateResultInfo info = update(e, other, r);
  CHECK(r == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  CHECK(info.result == CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED);
  CHECK(info.errorNode == n2);
  info = update(e, clamps_same, r);
  CHECK(r == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  CHECK(info.result == CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED);
  destroy_exec(e);
  e = instantiate(g);
  info = update(e, other, r);
  CHECK(r == CUDA_SUCCESS);
  CHECK(info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS);
  destroy_exec(e);
  destroy_graph(g);
  destroy_graph(other);
  destroy_graph(clamps_same);
  finish();
}

// ------------------------------------------------------------------------ the other attributes

TEST_CASE_FIXTURE(AttrFixture,
                  "la17: the access policy window, cluster scheduling policy, memory sync domain and map, and shared "
                  "memory carveout are stored on a kernel node, read back, cloned, copied, kept by SetParams, and "
                  "taken by a whole update") {
  CUgraphNode n = nullptr;
  CUgraph g = one_node(params(k.cluster, {8}), n);
  CUlaunchAttributeValue v{};
  // What a node that never set them reads.
  CHECK(get(n, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP, v) == CUDA_SUCCESS);
  CHECK(v.memSyncDomainMap.default_ == 0);
  CHECK(v.memSyncDomainMap.remote == 1);
  CHECK(get(n, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, v) == CUDA_SUCCESS);
  CHECK(v.accessPolicyWindow.base_ptr == nullptr);
  CHECK(v.accessPolicyWindow.num_bytes == 0);
  CHECK(get(n, CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, v) == CUDA_SUCCESS);
  CHECK(v.sharedMemCarveout == 0);

  CUlaunchAttributeValue apw{};
  apw.accessPolicyWindow.base_ptr = reinterpret_cast<void*>(static_cast<std::uintptr_t>(out));
  apw.accessPolicyWindow.num_bytes = 256;
  apw.accessPolicyWindow.hitRatio = 0.5f;
  apw.accessPolicyWindow.hitProp = CU_ACCESS_PROPERTY_PERSISTING;
  apw.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_STREAMING;
  CUlaunchAttributeValue policy{};
  policy.clusterSchedulingPolicyPreference = CU_CLUSTER_SCHEDULING_POLICY_SPREAD;
  CUlaunchAttributeValue domain{};
  domain.memSyncDomain = CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE;
  CUlaunchAttributeValue map{};
  map.memSyncDomainMap.default_ = 1;
  map.memSyncDomainMap.remote = 0;
  CUlaunchAttributeValue carve{};
  carve.sharedMemCarveout = 50;
  CHECK(set(n, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, apw) == CUDA_SUCCESS);
  CHECK(set(n, CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, policy) == CUDA_SUCCESS);
  CHECK(set(n, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, domain) == CUDA_SUCCESS);
  CHECK(set(n, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP, map) == CUDA_SUCCESS);
  CHECK(set(n, CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, carve) == CUDA_SUCCESS);
  CUDA_KERNEL_NODE_PARAMS same = params(k.cluster, {8});
  CHECK(raw<Entry::cuGraphKernelNodeSetParams>(t, n, &same) == CUDA_SUCCESS);
  CUgraph clone = nullptr;
  REQUIRE(raw<Entry::cuGraphClone>(t, &clone, g) == CUDA_SUCCESS);
  CUgraphNode in_clone = nullptr;
  REQUIRE(raw<Entry::cuGraphNodeFindInClone>(t, &in_clone, n, clone) == CUDA_SUCCESS);
  CUgraphNode copied = nullptr;
  CUgraph g2 = one_node(params(k.cluster, {8}), copied);
  CHECK(raw<Entry::cuGraphKernelNodeCopyAttributes>(t, copied, n) == CUDA_SUCCESS);
  for (CUgraphNode x : {n, in_clone, copied}) {
    CHECK(get(x, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, v) == CUDA_SUCCESS);
    CHECK(v.accessPolicyWindow.num_bytes == 256);
    CHECK(v.accessPolicyWindow.hitProp == CU_ACCESS_PROPERTY_PERSISTING);
    CHECK(get(x, CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, v) == CUDA_SUCCESS);
    CHECK(v.clusterSchedulingPolicyPreference == CU_CLUSTER_SCHEDULING_POLICY_SPREAD);
    CHECK(get(x, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, v) == CUDA_SUCCESS);
    CHECK(v.memSyncDomain == CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE);
    CHECK(get(x, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP, v) == CUDA_SUCCESS);
    CHECK(v.memSyncDomainMap.default_ == 1);
    CHECK(get(x, CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, v) == CUDA_SUCCESS);
    CHECK(v.sharedMemCarveout == 50);
  }
  // A whole update between executables that differ only in these attributes succeeds and runs.
  CUgraphExec e = instantiate(g);
  CUgraphNode plain = nullptr;
  CUgraph g3 = one_node(params(k.cluster, {8}), plain);
  CUresult r = CUDA_SUCCESS;
  CUgraphExecUpdateResultInfo info = update(e, g3, r);
  CHECK(r == CUDA_SUCCESS);
  CHECK(info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS);
  CHECK(clustered(e).blocks == 8);
  destroy_exec(e);
  destroy_graph(g);
  destroy_graph(g2);
  destroy_graph(g3);
  destroy_graph(clone);
  finish();
}

TEST_CASE_FIXTURE(AttrFixture,
                  "la18: graph kernel nodes refuse with INVALID_VALUE the attributes of stream launches (programmatic "
                  "serialization and events, launch completion events), the preferred cluster dimension, and ids that "
                  "are no kernel-node attribute") {
  CUgraphNode n = nullptr;
  CUgraph g = one_node(params(k.cluster, {8}), n);
  CUevent ev = nullptr;
  REQUIRE(raw<Entry::cuEventCreate>(t, &ev, static_cast<unsigned>(CU_EVENT_DISABLE_TIMING)) == CUDA_SUCCESS);
  CUlaunchAttributeValue v{};
  v.programmaticStreamSerializationAllowed = 1;
  CHECK(set(n, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, v) == CUDA_ERROR_INVALID_VALUE);
  v = {};
  v.programmaticEvent.event = ev;
  CHECK(set(n, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT, v) == CUDA_ERROR_INVALID_VALUE);
  v = {};
  v.launchCompletionEvent.event = ev;
  CHECK(set(n, CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT, v) == CUDA_ERROR_INVALID_VALUE);
  CHECK(set(n, CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION, cluster_value(4)) == CUDA_ERROR_INVALID_VALUE);
  // Why 31 and not the probe's 99: an id must be a value of the enum's range (UBSan checks the load);
  // 31 is one no attribute has.
  for (int id : {0, 3, 6, 7, 11, 12, 15, 17, 31}) {
    CAPTURE(id);
    CHECK(get(n, static_cast<CUlaunchAttributeID>(id), v) == CUDA_ERROR_INVALID_VALUE);
  }
  for (int id : {0, 3, 15, 17, 31}) {
    CAPTURE(id);
    v = priority_value(1);
    CHECK(set(n, static_cast<CUlaunchAttributeID>(id), v) == CUDA_ERROR_INVALID_VALUE);
  }
  CHECK(run_clustered(g).blocks == 8);
  CHECK(raw<Entry::cuEventDestroy>(t, ev) == CUDA_SUCCESS);
  destroy_graph(g);
  finish();
}

TEST_CASE_FIXTURE(AttrFixture,
                  "la19: NVLINK_UTIL_CENTRIC_SCHEDULING is taken by SetAttribute but GetAttribute refuses it with "
                  "INVALID_VALUE, and cuGraphExecUpdate refuses a change of it with ATTRIBUTES_CHANGED") {
  CUgraphNode n = nullptr, n2 = nullptr;
  CUgraph g = one_node(params(k.cluster, {8}), n);
  CUlaunchAttributeValue v{};
  v.nvlinkUtilCentricScheduling = 1;
  CHECK(set(n, CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING, v) == CUDA_SUCCESS);
  CHECK(get(n, CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING, v) == CUDA_ERROR_INVALID_VALUE);
  CUgraph plain = one_node(params(k.cluster, {8}), n2);
  CUgraphExec e = instantiate(g);
  CHECK(clustered(e).blocks == 8);
  CUresult r = CUDA_SUCCESS;
  CUgraphExecUpdateResultInfo info = update(e, plain, r);
  CHECK(r == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  CHECK(info.result == CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED);
  CHECK(info.errorNode == n2);
  destroy_exec(e);
  destroy_graph(g);
  destroy_graph(plain);
  finish();
}

// ------------------------------------------------------------------------------ simulator only

namespace {

// What the twin of la_seen(u64) was told by its last launch.
struct Seen {
  std::mutex mu;
  tether::sim::LaunchInfo info{};
  int runs = 0;
};
Seen g_seen;

constexpr const char* seen_ptx = R"PTX(
.version 8.0
.target sm_90
.address_size 64

.visible .entry la_seen(.param .u64 la_seen_p0)
{
  ret;
}
)PTX";

CUfunction seen_function() {
  static CUfunction f = [] {
    tether::sim::register_kernel<std::uint64_t>("la_seen", [](const tether::sim::LaunchInfo& info, std::uint64_t) {
      std::lock_guard lock(g_seen.mu);
      g_seen.info = info;
      ++g_seen.runs;
    });
    CUmodule m = nullptr;
    require_ok(raw<Entry::cuModuleLoadData>(table(), &m, static_cast<const void*>(seen_ptx)), "cuModuleLoadData");
    CUfunction fn = nullptr;
    require_ok(raw<Entry::cuModuleGetFunction>(table(), &fn, m, "la_seen"), "cuModuleGetFunction");
    return fn;
  }();
  return f;
}

tether::sim::LaunchInfo last_seen() {
  std::lock_guard lock(g_seen.mu);
  return g_seen.info;
}

}  // namespace

TEST_SUITE_END();
TEST_SUITE_BEGIN("simulator");

TEST_CASE_FIXTURE(AttrFixture,
                  "a twin is told its launch's cluster, cooperativeness, dynamic shared memory and priority: the "
                  "node's under USE_NODE_PRIORITY, otherwise the stream's") {
  if (!sim) return;
  CUfunction f = seen_function();
  std::uint64_t arg = 0;
  void* args[1] = {&arg};
  CUDA_KERNEL_NODE_PARAMS p{};
  p.func = f;
  p.gridDimX = 8;
  p.gridDimY = p.gridDimZ = 1;
  p.blockDimX = 32;
  p.blockDimY = p.blockDimZ = 1;
  p.sharedMemBytes = 4096;
  p.kernelParams = args;
  CUgraphNode n = nullptr;
  CUgraph g = one_node(p, n);
  CUstream high = nullptr;
  REQUIRE(raw<Entry::cuStreamCreateWithPriority>(t, &high, static_cast<unsigned>(CU_STREAM_NON_BLOCKING), -4) ==
          CUDA_SUCCESS);
  // A plain node on the default-priority stream.
  CUgraphExec e = instantiate(g);
  launch(e);
  sync();
  tether::sim::LaunchInfo seen = last_seen();
  CHECK(seen.cluster == std::array<unsigned, 3>{1, 1, 1});
  CHECK_FALSE(seen.cooperative);
  CHECK(seen.shared_mem_bytes == 4096);
  CHECK(seen.priority == 0);
  launch_on(e, high);
  sync_on(high);
  CHECK(last_seen().priority == -4);
  destroy_exec(e);
  // Cluster, cooperative and a node priority, without and with USE_NODE_PRIORITY.
  REQUIRE(set(n, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, cluster_value(4)) == CUDA_SUCCESS);
  REQUIRE(set(n, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, cooperative_value(1)) == CUDA_SUCCESS);
  REQUIRE(set(n, CU_LAUNCH_ATTRIBUTE_PRIORITY, priority_value(-2)) == CUDA_SUCCESS);
  e = instantiate(g);
  launch_on(e, high);
  sync_on(high);
  seen = last_seen();
  CHECK(seen.cluster == std::array<unsigned, 3>{4, 1, 1});
  CHECK(seen.cooperative);
  CHECK(seen.priority == -4);
  destroy_exec(e);
  REQUIRE(raw<Entry::cuGraphInstantiateWithFlags>(t, &e, g, static_cast<unsigned long long>(
                                                               CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)) ==
          CUDA_SUCCESS);
  launch_on(e, high);
  sync_on(high);
  CHECK(last_seen().priority == -2);
  destroy_exec(e);
  // A stream launch runs at its stream's priority.
  CHECK(raw<Entry::cuLaunchKernel>(t, f, 1u, 1u, 1u, 1u, 1u, 1u, 0u, high, args, static_cast<void**>(nullptr)) ==
        CUDA_SUCCESS);
  sync_on(high);
  seen = last_seen();
  CHECK(seen.priority == -4);
  CHECK(seen.cluster == std::array<unsigned, 3>{1, 1, 1});
  destroy_stream(high);
  destroy_graph(g);
  finish();
}

TEST_CASE_FIXTURE(AttrFixture,
                  "the simulator refuses a device-updatable kernel node with NOT_SUPPORTED and says why in the "
                  "DriverError") {
  if (!sim) return;
  CUgraphNode n = nullptr;
  CUgraph g = one_node(params(k.cluster, {8}), n);
  CUlaunchAttributeValue v{};
  v.deviceUpdatableKernelNode.deviceUpdatable = 1;
  std::string what;
  try {
    call<Entry::cuGraphKernelNodeSetAttribute>(t, "making a kernel node device-updatable", n,
                                               CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE,
                                               static_cast<const CUlaunchAttributeValue*>(&v));
    FAIL_CHECK("no DriverError was thrown");
  } catch (const tether::DriverError& e) {
    what = e.what();
  }
  CAPTURE(what);
  CHECK(contains(what, "cuGraphKernelNodeSetAttribute"));
  CHECK(contains(what, "CUDA_ERROR_NOT_SUPPORTED"));
  CHECK(contains(what, "simulator: the simulator does not model device-updatable kernel nodes"));
  CHECK(get(n, CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE, v) == CUDA_SUCCESS);
  CHECK(v.deviceUpdatableKernelNode.deviceUpdatable == 0);
  destroy_graph(g);
  finish();
}

TEST_CASE_FIXTURE(AttrFixture,
                  "a NULL value to cuGraphKernelNodeSetAttribute or GetAttribute, which crashes the real driver, is "
                  "refused by the simulator with INVALID_VALUE and recorded as null_argument") {
  if (!sim) return;
  CUgraphNode n = nullptr;
  CUgraph g = one_node(params(k.cluster, {8}), n);
  {
    tether::sim::ExpectViolations expected;  // null_argument, twice
    CHECK(raw<Entry::cuGraphKernelNodeSetAttribute>(t, n, CU_LAUNCH_ATTRIBUTE_PRIORITY,
                                                    static_cast<const CUlaunchAttributeValue*>(nullptr)) ==
          CUDA_ERROR_INVALID_VALUE);
    CHECK(raw<Entry::cuGraphKernelNodeGetAttribute>(t, n, CU_LAUNCH_ATTRIBUTE_PRIORITY,
                                                    static_cast<CUlaunchAttributeValue*>(nullptr)) ==
          CUDA_ERROR_INVALID_VALUE);
    CHECK(expected.absorbed() == 2);
  }
  std::vector<tether::sim::Violation> vs = tether::sim::violations();
  REQUIRE(vs.size() == 2);
  CHECK(vs[0].kind == tether::sim::ViolationKind::null_argument);
  CHECK(vs[0].entry_point == "cuGraphKernelNodeSetAttribute");
  CHECK(contains(vs[1].detail, "cuGraphKernelNodeGetAttribute with a NULL value (the real driver crashes)"));
  tether::sim::clear_violations();
  destroy_graph(g);
  finish();
}

TEST_CASE_FIXTURE(AttrFixture,
                  "the simulator explains why it refuses a cluster: the dimension that does not divide the grid, or "
                  "the attribute that allows non-portable sizes") {
  if (!sim) return;
  CUgraphNode n = nullptr;
  CUgraph g = one_node(params(k.cluster, {8}), n);
  auto why = [&](const CUlaunchAttributeValue& v) {
    try {
      call<Entry::cuGraphKernelNodeSetAttribute>(t, "setting a cluster", n, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
                                                 static_cast<const CUlaunchAttributeValue*>(&v));
    } catch (const tether::DriverError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  std::string a = why(cluster_value(3));
  CAPTURE(a);
  CHECK(contains(a, "CUDA_ERROR_INVALID_CLUSTER_SIZE"));
  CHECK(contains(a, "the cluster's x dimension (3) does not divide the grid's (8)"));
  destroy_graph(g);
  g = one_node(params(k.cluster, {16}), n);
  std::string b = why(cluster_value(16));
  CAPTURE(b);
  CHECK(contains(b, "a cluster of 16 blocks is larger than the portable 8"));
  CHECK(contains(b, "CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED"));
  destroy_graph(g);
  finish();
}

TEST_SUITE_END();
