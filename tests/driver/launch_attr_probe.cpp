// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// A diagnostic program, not a test: what the driver does with launch attributes, dynamic shared
// memory, cooperative launches, node priorities and parameter information for a KERNEL NODE IN A
// GRAPH (docs/launch-attributes.md summarises its run on the H200; tests/driver/
// launch_attr_probe.txt is that run's raw output). It drives the driver through tether's
// entry-point table, so the same program runs on the simulator (TETHER_DRIVER=sim): a diff of the
// two outputs shows where the simulator's model departs from the hardware.
//
// Kernels: tests/kernels/kernels.cu (kernels.fatbin beside the executable; simulator twins in
// tests/support/kernels.hpp). cluster_dims reports the cluster it ran in and how many blocks ran,
// coop_sync whether a grid-wide barrier held, dyn_smem whether N floats of dynamic shared memory
// were usable.
//
// Output, one line per fact (as ../shared/reference/capture_facts.cpp):
//   FACT <id> VALUE <statement> :: <observations>
// plus INFO lines (setup) and SUB lines (the parent's verdict on a group that crashed or hung).
// Each group runs in a child process of its own (`--child GROUP`), so that a crash, a hang (20 s
// watchdog) or a sticky error costs one group. The parent never opens the driver.
//   launch_attr_probe              every group
//   launch_attr_probe --list       the groups
//   launch_attr_probe --child G    one group in this process (debugging)
#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "support/kernels.hpp"
#include "tether.hpp"

extern char** environ;

namespace {

using tether::detail::DriverTable;
using tether::detail::Entry;
using tether::detail::raw;

// ------------------------------------------------------------------------------------ output

std::string fmtv(const char* f, va_list ap) {
  char buf[4096];
  std::vsnprintf(buf, sizeof buf, f, ap);
  return buf;
}
std::string str(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string str(const char* f, ...) {
  va_list ap;
  va_start(ap, f);
  std::string s = fmtv(f, ap);
  va_end(ap);
  return s;
}
void fact(const char* id, const char* statement, const std::string& obs) {
  std::printf("FACT %-28s VALUE %s :: %s\n", id, statement, obs.c_str());
  std::fflush(stdout);
}
void info(const std::string& s) {
  std::printf("INFO %s\n", s.c_str());
  std::fflush(stdout);
}
std::string N(CUresult r) { return std::string(tether::result_name(static_cast<int>(r))); }

const char* update_name(CUgraphExecUpdateResult r) {
  switch (r) {
    case CU_GRAPH_EXEC_UPDATE_SUCCESS: return "SUCCESS";
    case CU_GRAPH_EXEC_UPDATE_ERROR: return "ERROR";
    case CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED: return "TOPOLOGY_CHANGED";
    case CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED: return "NODE_TYPE_CHANGED";
    case CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED: return "FUNCTION_CHANGED";
    case CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED: return "PARAMETERS_CHANGED";
    case CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED: return "NOT_SUPPORTED";
    case CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE: return "UNSUPPORTED_FUNCTION_CHANGE";
    case CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED: return "ATTRIBUTES_CHANGED";
  }
  return "?";
}

// ------------------------------------------------------------------------------------ driver

struct Dim {
  unsigned x = 1, y = 1, z = 1;
  unsigned count() const { return x * y * z; }
};

// The state of one group's process: device 0's primary context, the test module, one stream.
struct Probe {
  tether::Runtime rt = tether::Runtime::open();
  const DriverTable& t = tether::detail::table_of(rt);
  bool sim = rt.kind() == tether::DriverKind::simulated;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CUmodule mod = nullptr;
  CUstream stream = nullptr;
  CUfunction fill = nullptr, cluster = nullptr, coop = nullptr, smem = nullptr;
  CUfunction p_mix = nullptr, p_struct = nullptr, p_align = nullptr, p_none = nullptr;
  CUdeviceptr out = 0;      // 64 words for the kernels' reports
  CUdeviceptr counter = 0;  // coop_sync's counter
  CUdeviceptr data = 0;     // 1 MiB for fill and the access-policy window
  int sms = 0;

  Probe() {
    tether_test::register_test_twins();
    need(raw<Entry::cuDeviceGet>(t, &dev, 0), "cuDeviceGet");
    need(raw<Entry::cuDevicePrimaryCtxRetain>(t, &ctx, dev), "cuDevicePrimaryCtxRetain");
    need(raw<Entry::cuCtxSetCurrent>(t, ctx), "cuCtxSetCurrent");
    tether::Image img = tether::Image::from_file(tether_test::beside_executable("kernels.fatbin"));
    need(raw<Entry::cuModuleLoadData>(t, &mod, static_cast<const void*>(img.data())), "cuModuleLoadData");
    fill = fn("fill");
    cluster = fn("cluster_dims");
    coop = fn("coop_sync");
    smem = fn("dyn_smem");
    p_mix = fn("param_mix");
    p_struct = fn("param_struct");
    p_align = fn("param_align");
    p_none = fn("no_params");
    need(raw<Entry::cuStreamCreate>(t, &stream, static_cast<unsigned>(CU_STREAM_NON_BLOCKING)), "cuStreamCreate");
    need(raw<Entry::cuMemAlloc>(t, &out, std::size_t{256}), "cuMemAlloc");
    need(raw<Entry::cuMemAlloc>(t, &counter, std::size_t{256}), "cuMemAlloc");
    need(raw<Entry::cuMemAlloc>(t, &data, std::size_t{1} << 20), "cuMemAlloc");
    sms = dev_attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  }

  static void need(CUresult r, const char* what) {
    if (r != CUDA_SUCCESS) {
      std::printf("INFO setup failed: %s = %s\n", what, N(r).c_str());
      std::fflush(stdout);
      std::exit(3);
    }
  }
  CUfunction fn(const char* name) const {
    CUfunction f = nullptr;
    need(raw<Entry::cuModuleGetFunction>(t, &f, mod, name), name);
    return f;
  }
  int dev_attr(CUdevice_attribute a) const {
    int v = -1;
    raw<Entry::cuDeviceGetAttribute>(t, &v, a, dev);
    return v;
  }
  int func_attr(CUfunction f, CUfunction_attribute a) const {
    int v = -12345;
    CUresult r = raw<Entry::cuFuncGetAttribute>(t, &v, a, f);
    return r == CUDA_SUCCESS ? v : -12345;
  }
  CUresult set_func_attr(CUfunction f, CUfunction_attribute a, int v) const {
    return raw<Entry::cuFuncSetAttribute>(t, f, a, v);
  }

  // Kernel-node parameters; the argument arrays live in the Probe (one node's worth at a time).
  void* cl_args[1] = {&out};
  void* co_args[2] = {&counter, &out};
  int smem_n = 0;
  void* sm_args[2] = {&out, &smem_n};
  CUDA_KERNEL_NODE_PARAMS params(CUfunction f, Dim grid, Dim block, unsigned shared = 0) {
    CUDA_KERNEL_NODE_PARAMS p{};
    p.func = f;
    p.gridDimX = grid.x;
    p.gridDimY = grid.y;
    p.gridDimZ = grid.z;
    p.blockDimX = block.x;
    p.blockDimY = block.y;
    p.blockDimZ = block.z;
    p.sharedMemBytes = shared;
    p.kernelParams = f == cluster ? cl_args : f == coop ? co_args : sm_args;
    return p;
  }
  CUgraph graph() const {
    CUgraph g = nullptr;
    need(raw<Entry::cuGraphCreate>(t, &g, 0u), "cuGraphCreate");
    return g;
  }
  CUresult add(CUgraph g, const CUDA_KERNEL_NODE_PARAMS& p, CUgraphNode& n) const {
    return raw<Entry::cuGraphAddKernelNode>(t, &n, g, static_cast<const CUgraphNode*>(nullptr), std::size_t{0}, &p);
  }
  CUresult set(CUgraphNode n, CUlaunchAttributeID id, const CUlaunchAttributeValue& v) const {
    return raw<Entry::cuGraphKernelNodeSetAttribute>(t, n, id, &v);
  }
  CUresult get(CUgraphNode n, CUlaunchAttributeID id, CUlaunchAttributeValue& v) const {
    std::memset(&v, 0, sizeof v);
    return raw<Entry::cuGraphKernelNodeGetAttribute>(t, n, id, &v);
  }
  CUresult instantiate(CUgraphExec& e, CUgraph g, unsigned long long flags = 0) const {
    e = nullptr;
    return raw<Entry::cuGraphInstantiateWithFlags>(t, &e, g, flags);
  }
  void clear_out() const {
    raw<Entry::cuMemsetD32Async>(t, out, 0u, std::size_t{64}, stream);
    raw<Entry::cuMemsetD32Async>(t, counter, 0u, std::size_t{64}, stream);
  }
  std::vector<int> read_out() const {
    std::vector<int> v(64, 0);
    raw<Entry::cuMemcpyDtoH>(t, static_cast<void*>(v.data()), out, v.size() * sizeof(int));
    return v;
  }
  // Launches `e` once on the stream and says what happened and what the kernel reported.
  std::string launch(CUgraphExec e, CUfunction f) const {
    if (!e) return "launch=- (no exec)";
    clear_out();
    raw<Entry::cuStreamSynchronize>(t, stream);
    CUresult l = raw<Entry::cuGraphLaunch>(t, e, stream);
    CUresult s = raw<Entry::cuStreamSynchronize>(t, stream);
    std::string r = str("launch=%s sync=%s", N(l).c_str(), N(s).c_str());
    if (l != CUDA_SUCCESS || s != CUDA_SUCCESS) return r;
    std::vector<int> o = read_out();
    if (f == cluster)
      r += str(" ran_blocks=%d cluster=%d,%d,%d", o[4], o[0], o[1], o[2]);
    else if (f == coop)
      r += o[1] == 1 ? str(" barrier=held count=%d", o[0]) : o[1] == -1 ? " barrier=not_cooperative" : " barrier=?";
    else if (f == smem)
      r += str(" smem_checked=%d mismatches=%d", o[1], o[0]);
    return r;
  }
  // Instantiates `g` (flags) and launches it once; the exec is destroyed afterwards.
  std::string run(CUgraph g, CUfunction f, unsigned long long flags = 0) const {
    CUgraphExec e = nullptr;
    CUresult i = instantiate(e, g, flags);
    std::string r = "instantiate=" + N(i);
    if (i == CUDA_SUCCESS) {
      r += " " + launch(e, f);
      raw<Entry::cuGraphExecDestroy>(t, e);
    }
    return r;
  }
  // cuGraphExecUpdate(e, g): the result, the update result and whether errorNode is set.
  std::string update(CUgraphExec e, CUgraph g) const {
    CUgraphExecUpdateResultInfo ui{};
    CUresult r = raw<Entry::cuGraphExecUpdate>(t, e, g, &ui);
    return str("update=%s result=%s errorNode=%s", N(r).c_str(), update_name(ui.result),
               ui.errorNode ? "set" : "null");
  }
  void destroy(CUgraph g) const { raw<Entry::cuGraphDestroy>(t, g); }
  void destroy(CUgraphExec e) const {
    if (e) raw<Entry::cuGraphExecDestroy>(t, e);
  }
};

// ------------------------------------------------------------------------------ info group

void group_info(Probe& p) {
  int v = 0;
  raw<Entry::cuDriverGetVersion>(p.t, &v);
  char name[256] = {};
  raw<Entry::cuDeviceGetName>(p.t, name, static_cast<int>(sizeof name), p.dev);
  info(str("driver=%s cuDriverGetVersion=%d device0=%s cc=%d.%d sms=%d", p.rt.describe().c_str(), v, name,
           p.dev_attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
           p.dev_attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR), p.sms));
  fact("info/shared_memory", "device attributes for shared memory",
       str("MAX_SHARED_MEMORY_PER_BLOCK=%d MAX_SHARED_MEMORY_PER_BLOCK_OPTIN=%d MAX_SHARED_MEMORY_PER_MULTIPROCESSOR=%d "
           "RESERVED_SHARED_MEMORY_PER_BLOCK=%d",
           p.dev_attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK),
           p.dev_attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
           p.dev_attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
           p.dev_attr(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK)));
  fact("info/launch_limits", "device attributes for cooperative and cluster launches",
       str("COOPERATIVE_LAUNCH=%d CLUSTER_LAUNCH=%d MAX_BLOCKS_PER_MULTIPROCESSOR=%d MAX_THREADS_PER_MULTIPROCESSOR=%d "
           "MAX_ACCESS_POLICY_WINDOW_SIZE=%d MAX_PERSISTING_L2_CACHE_SIZE=%d",
           p.dev_attr(CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH), p.dev_attr(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH),
           p.dev_attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR),
           p.dev_attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR),
           p.dev_attr(CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE),
           p.dev_attr(CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE)));
}

// ------------------------------------------------------------------------- function attributes

void group_funcattr(Probe& p) {
  const int optin = p.dev_attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  fact("func/defaults", "cuFuncGetAttribute defaults of dyn_smem (no static shared memory)",
       str("MAX_DYNAMIC_SHARED_SIZE_BYTES=%d SHARED_SIZE_BYTES=%d MAX_THREADS_PER_BLOCK=%d "
           "PREFERRED_SHARED_MEMORY_CARVEOUT=%d NON_PORTABLE_CLUSTER_SIZE_ALLOWED=%d CLUSTER_SIZE_MUST_BE_SET=%d "
           "REQUIRED_CLUSTER_WIDTH=%d CLUSTER_SCHEDULING_POLICY_PREFERENCE=%d",
           p.func_attr(p.smem, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES),
           p.func_attr(p.smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
           p.func_attr(p.smem, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
           p.func_attr(p.smem, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT),
           p.func_attr(p.smem, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED),
           p.func_attr(p.smem, CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET),
           p.func_attr(p.smem, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH),
           p.func_attr(p.smem, CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE)));
  fact("func/defaults_other", "MAX_DYNAMIC_SHARED_SIZE_BYTES of other kernels by default",
       str("fill=%d cluster_dims=%d coop_sync=%d", p.func_attr(p.fill, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES),
           p.func_attr(p.cluster, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES),
           p.func_attr(p.coop, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)));
  auto try_set = [&](int v) {
    CUresult r = p.set_func_attr(p.smem, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, v);
    return str("set(%d)=%s reads=%d", v, N(r).c_str(), p.func_attr(p.smem, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES));
  };
  std::string s = try_set(optin);
  s += " | " + try_set(optin + 1);
  s += " | " + try_set(100 * 1024);
  s += " | " + try_set(0);
  s += " | " + try_set(-1);
  s += " | " + try_set(49152);
  fact("func/set_max_dynamic", "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) at the opt-in maximum, beyond, 100 KiB, 0, -1, 48 KiB", s);
  fact("func/set_read_only", "cuFuncSetAttribute of attributes that are not settable",
       str("MAX_THREADS_PER_BLOCK=%s SHARED_SIZE_BYTES=%s NUM_REGS=%s",
           N(p.set_func_attr(p.smem, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 64)).c_str(),
           N(p.set_func_attr(p.smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, 64)).c_str(),
           N(p.set_func_attr(p.smem, CU_FUNC_ATTRIBUTE_NUM_REGS, 64)).c_str()));
  fact("func/set_other", "cuFuncSetAttribute of the other settable attributes, and reads afterwards",
       str("CARVEOUT(50)=%s reads=%d CARVEOUT(101)=%s NON_PORTABLE(1)=%s reads=%d NON_PORTABLE(0)=%s "
           "SCHED_POLICY(1)=%s reads=%d REQUIRED_CLUSTER_WIDTH(2)=%s reads=%d",
           N(p.set_func_attr(p.smem, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 50)).c_str(),
           p.func_attr(p.smem, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT),
           N(p.set_func_attr(p.smem, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 101)).c_str(),
           N(p.set_func_attr(p.smem, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)).c_str(),
           p.func_attr(p.smem, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED),
           N(p.set_func_attr(p.smem, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 0)).c_str(),
           N(p.set_func_attr(p.smem, CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, 1)).c_str(),
           p.func_attr(p.smem, CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE),
           N(p.set_func_attr(p.smem, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, 2)).c_str(),
           p.func_attr(p.smem, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH)));
  // Is the attribute a property of the handle or of the module's function?
  CUfunction again = p.fn("dyn_smem");
  p.set_func_attr(p.smem, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536);
  fact("func/same_handle", "a second cuModuleGetFunction of the same name: same handle? sees the first's attribute?",
       str("same_handle=%d second_reads=%d", again == p.smem ? 1 : 0,
           p.func_attr(again, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)));
  p.set_func_attr(p.smem, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 49152);
  fact("func/bad_handle", "cuFuncGetAttribute / cuFuncSetAttribute with a NULL function; bad attribute number",
       str("get_null=%s set_null=%s get_attr99=%s set_attr99=%s",
           N(raw<Entry::cuFuncGetAttribute>(p.t, &p.smem_n, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                            static_cast<CUfunction>(nullptr)))
               .c_str(),
           N(p.set_func_attr(nullptr, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1024)).c_str(),
           N(raw<Entry::cuFuncGetAttribute>(p.t, &p.smem_n, static_cast<CUfunction_attribute>(99), p.smem)).c_str(),
           N(p.set_func_attr(p.smem, static_cast<CUfunction_attribute>(99), 1)).c_str()));
}

// ----------------------------------------------------------------------- dynamic shared memory

void group_smem(Probe& p) {
  const int optin = p.dev_attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  const unsigned sizes[] = {48u * 1024, 48u * 1024 + 1, 100u * 1024, static_cast<unsigned>(optin),
                            static_cast<unsigned>(optin) + 1};
  const char* names[] = {"48k", "48k+1", "100k", "optin", "optin+1"};
  for (int with_attr = 0; with_attr < 2; ++with_attr) {
    p.set_func_attr(p.smem, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, with_attr ? optin : 49152);
    for (int i = 0; i < 5; ++i) {
      // The floats the kernel checks: all the bytes asked for (at most the opt-in maximum's worth).
      p.smem_n = static_cast<int>(std::min(sizes[i], static_cast<unsigned>(optin)) / 4);
      CUgraph g = p.graph();
      CUgraphNode n = nullptr;
      CUresult a = p.add(g, p.params(p.smem, {1, 1, 1}, {256, 1, 1}, sizes[i]), n);
      std::string s = "add=" + N(a);
      if (a == CUDA_SUCCESS) s += " " + p.run(g, p.smem);
      p.destroy(g);
      std::string id = str("smem/%s/%s", with_attr ? "attr_optin" : "default", names[i]);
      fact(id.c_str(),
           with_attr ? "kernel node with this sharedMemBytes, MAX_DYNAMIC_SHARED_SIZE_BYTES = opt-in maximum"
                     : "kernel node with this sharedMemBytes, MAX_DYNAMIC_SHARED_SIZE_BYTES at its default",
           str("bytes=%u ", sizes[i]) + s);
    }
  }
  // When is the function's limit checked: add with the attribute raised, lower it, then go on.
  {
    p.set_func_attr(p.smem, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin);
    p.smem_n = 100 * 256;
    CUgraph g = p.graph();
    CUgraphNode n = nullptr;
    CUresult a = p.add(g, p.params(p.smem, {1, 1, 1}, {256, 1, 1}, 100 * 1024), n);
    CUgraphExec e1 = nullptr;
    CUresult i1 = p.instantiate(e1, g);
    p.set_func_attr(p.smem, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 49152);
    std::string l1 = p.launch(e1, p.smem);
    CUgraphExec e2 = nullptr;
    CUresult i2 = p.instantiate(e2, g);
    std::string l2 = p.launch(e2, p.smem);
    p.set_func_attr(p.smem, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin);
    std::string l3 = p.launch(e2, p.smem);
    CUgraphExec e3 = nullptr;
    CUresult i3 = p.instantiate(e3, g);
    fact("smem/limit_when_checked",
         "100 KiB node added with the attribute at the opt-in max; attribute lowered to 48 KiB; launch the exec made "
         "before, instantiate anew; raise it again",
         str("add=%s inst_before=%s launch_after_lowering={%s} inst_after_lowering=%s launch_that={%s} "
             "after_raising_again: launch_that={%s} inst=%s",
             N(a).c_str(), N(i1).c_str(), l1.c_str(), N(i2).c_str(), l2.c_str(), l3.c_str(), N(i3).c_str()));
    p.destroy(e1);
    p.destroy(e2);
    p.destroy(e3);
    p.destroy(g);
  }
  // cuGraphKernelNodeSetParams / cuGraphExecKernelNodeSetParams changing sharedMemBytes.
  for (int with_attr = 0; with_attr < 2; ++with_attr) {
    p.set_func_attr(p.smem, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, with_attr ? optin : 49152);
    p.smem_n = 256;
    CUgraph g = p.graph();
    CUgraphNode n = nullptr;
    p.add(g, p.params(p.smem, {1, 1, 1}, {256, 1, 1}, 1024), n);
    CUgraphExec e = nullptr;
    CUresult i = p.instantiate(e, g);
    std::string s = "inst=" + N(i);
    const unsigned to[] = {100u * 1024, static_cast<unsigned>(optin), static_cast<unsigned>(optin) + 1, 0u, 2048u};
    for (unsigned b : to) {
      p.smem_n = static_cast<int>(b / 4);
      CUDA_KERNEL_NODE_PARAMS kp = p.params(p.smem, {1, 1, 1}, {256, 1, 1}, b);
      CUresult r = raw<Entry::cuGraphExecKernelNodeSetParams>(p.t, e, n, &kp);
      s += str(" | exec_set(%u)=%s ", b, N(r).c_str()) + p.launch(e, p.smem);
    }
    fact(with_attr ? "smem/exec_set_params/attr_optin" : "smem/exec_set_params/default",
         "cuGraphExecKernelNodeSetParams changing sharedMemBytes of an exec node (made with 1 KiB), each followed by "
         "a launch",
         s);
    std::string gs;
    for (unsigned b : to) {
      p.smem_n = static_cast<int>(b / 4);
      CUDA_KERNEL_NODE_PARAMS kp = p.params(p.smem, {1, 1, 1}, {256, 1, 1}, b);
      CUresult r = raw<Entry::cuGraphKernelNodeSetParams>(p.t, n, &kp);
      CUDA_KERNEL_NODE_PARAMS back{};
      raw<Entry::cuGraphKernelNodeGetParams>(p.t, n, &back);
      gs += str(" | node_set(%u)=%s reads=%u", b, N(r).c_str(), back.sharedMemBytes);
    }
    fact(with_attr ? "smem/node_set_params/attr_optin" : "smem/node_set_params/default",
         "cuGraphKernelNodeSetParams changing sharedMemBytes of a graph node", gs.substr(3));
    // Whole update from a graph whose node has another sharedMemBytes.
    std::string us;
    for (unsigned b : {100u * 1024, static_cast<unsigned>(optin) + 1}) {
      CUgraph g2 = p.graph();
      CUgraphNode n2 = nullptr;
      p.smem_n = static_cast<int>(std::min(b, static_cast<unsigned>(optin)) / 4);
      CUresult a2 = p.add(g2, p.params(p.smem, {1, 1, 1}, {256, 1, 1}, b), n2);
      us += str(" | to %u: add=%s ", b, N(a2).c_str());
      if (a2 == CUDA_SUCCESS) us += p.update(e, g2) + " " + p.launch(e, p.smem);
      p.destroy(g2);
    }
    fact(with_attr ? "smem/exec_update/attr_optin" : "smem/exec_update/default",
         "cuGraphExecUpdate from a graph whose node asks for more dynamic shared memory", us.substr(3));
    p.destroy(e);
    p.destroy(g);
  }
  p.set_func_attr(p.smem, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 49152);
  // Stream launch for comparison.
  {
    p.smem_n = 100 * 256;
    void* args[2] = {&p.out, &p.smem_n};
    CUresult r = raw<Entry::cuLaunchKernel>(p.t, p.smem, 1u, 1u, 1u, 256u, 1u, 1u, 100u * 1024, p.stream, args,
                                            static_cast<void**>(nullptr));
    CUresult s = raw<Entry::cuStreamSynchronize>(p.t, p.stream);
    fact("smem/stream_launch_default", "cuLaunchKernel with 100 KiB at the attribute's default",
         str("launch=%s sync=%s", N(r).c_str(), N(s).c_str()));
  }
}

// ---------------------------------------------------------------------- one attribute at a time

struct AttrCase {
  const char* id;
  CUlaunchAttributeID attr;
  CUfunction Probe::* kernel;
  Dim grid, block;
  CUlaunchAttributeValue v1, v2;  // a value, and a changed value
};

std::string show(CUlaunchAttributeID id, const CUlaunchAttributeValue& v) {
  switch (id) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
      return str("{base=%s bytes=%zu hit=%.2f hitProp=%d missProp=%d}",
                 v.accessPolicyWindow.base_ptr ? "set" : "null", v.accessPolicyWindow.num_bytes,
                 static_cast<double>(v.accessPolicyWindow.hitRatio), static_cast<int>(v.accessPolicyWindow.hitProp),
                 static_cast<int>(v.accessPolicyWindow.missProp));
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE: return str("%d", v.cooperative);
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
      return str("%u,%u,%u", v.clusterDim.x, v.clusterDim.y, v.clusterDim.z);
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
      return str("%d", static_cast<int>(v.clusterSchedulingPolicyPreference));
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
      return str("%d", v.programmaticStreamSerializationAllowed);
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT:
      return str("{event=%s flags=%d atStart=%d}", v.programmaticEvent.event ? "set" : "null",
                 v.programmaticEvent.flags, v.programmaticEvent.triggerAtBlockStart);
    case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT:
      return str("{event=%s flags=%d}", v.launchCompletionEvent.event ? "set" : "null", v.launchCompletionEvent.flags);
    case CU_LAUNCH_ATTRIBUTE_PRIORITY: return str("%d", v.priority);
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
      return str("{default=%u remote=%u}", v.memSyncDomainMap.default_, v.memSyncDomainMap.remote);
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN: return str("%d", static_cast<int>(v.memSyncDomain));
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
      return str("%u,%u,%u", v.preferredClusterDim.x, v.preferredClusterDim.y, v.preferredClusterDim.z);
    case CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE:
      return str("{updatable=%d devNode=%s}", v.deviceUpdatableKernelNode.deviceUpdatable,
                 v.deviceUpdatableKernelNode.devNode ? "set" : "null");
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: return str("%u", v.sharedMemCarveout);
    case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING: return str("%u", v.nvlinkUtilCentricScheduling);
    default: {
      const unsigned char* b = reinterpret_cast<const unsigned char*>(&v);
      return str("bytes0-7=%02x%02x%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]);
    }
  }
}

void run_attr_case(Probe& p, const AttrCase& c) {
  CUfunction f = p.*(c.kernel);
  auto node_graph = [&](CUgraph& g, CUgraphNode& n, const CUlaunchAttributeValue* v, CUresult* set_result) {
    g = p.graph();
    p.add(g, p.params(f, c.grid, c.block), n);
    CUresult r = v ? p.set(n, c.attr, *v) : CUDA_SUCCESS;
    if (set_result) *set_result = r;
  };
  CUgraph g = nullptr;
  CUgraphNode n = nullptr;
  node_graph(g, n, nullptr, nullptr);
  CUlaunchAttributeValue got{};
  CUresult gd = p.get(n, c.attr, got);
  std::string dflt = str("get_unset=%s value=%s", N(gd).c_str(), show(c.attr, got).c_str());
  CUresult s1 = p.set(n, c.attr, c.v1);
  CUresult g1 = p.get(n, c.attr, got);
  std::string base = str("set(%s)=%s get=%s value=%s", show(c.attr, c.v1).c_str(), N(s1).c_str(), N(g1).c_str(),
                         show(c.attr, got).c_str());
  std::string id = std::string("attr/") + c.id;
  fact((id + "/set").c_str(), "cuGraphKernelNodeSetAttribute on a graph kernel node; GetAttribute before and after",
       dflt + " | " + base);
  fact((id + "/run").c_str(), "the graph instantiates, launches and computes (the kernel's report)",
       p.run(g, f));
  if (s1 != CUDA_SUCCESS) {
    p.destroy(g);
    return;
  }
  // Clone and copy.
  {
    CUgraph gc = nullptr;
    CUresult cr = raw<Entry::cuGraphClone>(p.t, &gc, g);
    std::string s = "clone=" + N(cr);
    if (cr == CUDA_SUCCESS) {
      CUgraphNode nc = nullptr;
      CUresult fr = raw<Entry::cuGraphNodeFindInClone>(p.t, &nc, n, gc);
      CUresult gr = p.get(nc, c.attr, got);
      s += str(" find=%s get=%s value=%s ", N(fr).c_str(), N(gr).c_str(), show(c.attr, got).c_str()) + p.run(gc, f);
      p.destroy(gc);
    }
    CUgraph g3 = nullptr;
    CUgraphNode n3 = nullptr;
    node_graph(g3, n3, nullptr, nullptr);
    CUresult cp = raw<Entry::cuGraphKernelNodeCopyAttributes>(p.t, n3, n);
    CUresult gr = p.get(n3, c.attr, got);
    s += str(" | copy_attributes(to a node without)=%s get=%s value=%s", N(cp).c_str(), N(gr).c_str(),
             show(c.attr, got).c_str());
    p.destroy(g3);
    fact((id + "/clone").c_str(), "cuGraphClone keeps the attribute; cuGraphKernelNodeCopyAttributes copies it", s);
  }
  // Whole exec updates: changed value, attribute absent in the source, attribute added by the source.
  {
    std::string s;
    CUgraphExec e = nullptr;
    p.instantiate(e, g);
    CUgraph g2 = nullptr;
    CUgraphNode n2 = nullptr;
    CUresult s2 = CUDA_SUCCESS;
    node_graph(g2, n2, &c.v2, &s2);
    s += str("to changed %s: set=%s ", show(c.attr, c.v2).c_str(), N(s2).c_str()) + p.update(e, g2) + " " +
         p.launch(e, f);
    p.destroy(e);
    CUgraph g4 = nullptr;
    CUgraphNode n4 = nullptr;
    node_graph(g4, n4, nullptr, nullptr);
    p.instantiate(e, g);
    s += " | to unset: " + p.update(e, g4) + " " + p.launch(e, f);
    p.destroy(e);
    p.instantiate(e, g4);
    s += " | unset exec to set: " + p.update(e, g) + " " + p.launch(e, f);
    p.destroy(e);
    p.instantiate(e, g);
    CUgraph g5 = nullptr;
    CUgraphNode n5 = nullptr;
    node_graph(g5, n5, &c.v1, nullptr);
    s += " | to equal: " + p.update(e, g5);
    p.destroy(e);
    p.destroy(g2);
    p.destroy(g4);
    p.destroy(g5);
    fact((id + "/exec_update").c_str(),
         "cuGraphExecUpdate of an exec whose node has the attribute from a graph whose node has another value / none; "
         "and of an exec without it from a graph with it; each then launched",
         s);
  }
  // Snapshot at instantiation, and the SetParams calls.
  {
    CUgraphExec e = nullptr;
    p.instantiate(e, g);
    CUresult sv = p.set(n, c.attr, c.v2);
    std::string s = str("node set to %s after instantiate (=%s), exec launch: ", show(c.attr, c.v2).c_str(), N(sv).c_str()) +
                    p.launch(e, f);
    p.set(n, c.attr, c.v1);
    p.destroy(e);
    fact((id + "/snapshot").c_str(), "an exec keeps the value its graph had at instantiation", s);
  }
  {
    CUDA_KERNEL_NODE_PARAMS kp = p.params(f, c.grid, c.block);
    CUresult r = raw<Entry::cuGraphKernelNodeSetParams>(p.t, n, &kp);
    CUresult gr = p.get(n, c.attr, got);
    std::string s = str("cuGraphKernelNodeSetParams=%s get=%s value=%s", N(r).c_str(), N(gr).c_str(),
                        show(c.attr, got).c_str());
    p.set(n, c.attr, c.v1);
    CUgraphNodeParams np{};
    np.type = CU_GRAPH_NODE_TYPE_KERNEL;
    np.kernel.func = kp.func;
    np.kernel.gridDimX = kp.gridDimX;
    np.kernel.gridDimY = kp.gridDimY;
    np.kernel.gridDimZ = kp.gridDimZ;
    np.kernel.blockDimX = kp.blockDimX;
    np.kernel.blockDimY = kp.blockDimY;
    np.kernel.blockDimZ = kp.blockDimZ;
    np.kernel.kernelParams = kp.kernelParams;
    r = raw<Entry::cuGraphNodeSetParams>(p.t, n, &np);
    gr = p.get(n, c.attr, got);
    s += str(" | cuGraphNodeSetParams=%s get=%s value=%s", N(r).c_str(), N(gr).c_str(), show(c.attr, got).c_str());
    p.set(n, c.attr, c.v1);
    CUgraphExec e = nullptr;
    p.instantiate(e, g);
    r = raw<Entry::cuGraphExecKernelNodeSetParams>(p.t, e, n, &kp);
    s += str(" | cuGraphExecKernelNodeSetParams=%s then ", N(r).c_str()) + p.launch(e, f);
    p.destroy(e);
    fact((id + "/set_params").c_str(), "the SetParams calls keep or reset the attribute (same kernel parameters)", s);
  }
  p.destroy(g);
}

std::vector<AttrCase> attr_cases(Probe& p, CUevent ev) {
  std::vector<AttrCase> v;
  auto add = [&](const char* id, CUlaunchAttributeID a, CUfunction Probe::* k, Dim grid, Dim block,
                 const std::function<void(CUlaunchAttributeValue&, int)>& make) {
    AttrCase c{id, a, k, grid, block, {}, {}};
    make(c.v1, 1);
    make(c.v2, 2);
    v.push_back(c);
  };
  const Dim g8{8, 1, 1}, b32{32, 1, 1};
  add("access_policy_window", CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &Probe::cluster, g8, b32,
      [&](CUlaunchAttributeValue& x, int k) {
        x.accessPolicyWindow.base_ptr = reinterpret_cast<void*>(static_cast<std::uintptr_t>(p.data));
        x.accessPolicyWindow.num_bytes = std::size_t{256} * 1024 * static_cast<std::size_t>(k);
        x.accessPolicyWindow.hitRatio = k == 1 ? 0.5f : 1.0f;
        x.accessPolicyWindow.hitProp = CU_ACCESS_PROPERTY_PERSISTING;
        x.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_STREAMING;
      });
  add("cooperative", CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &Probe::coop, {4, 1, 1}, b32,
      [](CUlaunchAttributeValue& x, int k) { x.cooperative = k == 1 ? 1 : 0; });
  add("cluster_dimension", CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, &Probe::cluster, g8, b32,
      [](CUlaunchAttributeValue& x, int k) {
        x.clusterDim.x = k == 1 ? 2 : 4;
        x.clusterDim.y = 1;
        x.clusterDim.z = 1;
      });
  add("cluster_scheduling_policy", CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, &Probe::cluster, g8, b32,
      [](CUlaunchAttributeValue& x, int k) {
        x.clusterSchedulingPolicyPreference =
            k == 1 ? CU_CLUSTER_SCHEDULING_POLICY_SPREAD : CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING;
      });
  add("programmatic_stream_serialization", CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, &Probe::cluster, g8,
      b32, [](CUlaunchAttributeValue& x, int k) { x.programmaticStreamSerializationAllowed = k == 1 ? 1 : 0; });
  add("programmatic_event", CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT, &Probe::cluster, g8, b32,
      [ev](CUlaunchAttributeValue& x, int k) {
        x.programmaticEvent.event = ev;
        x.programmaticEvent.flags = 0;
        x.programmaticEvent.triggerAtBlockStart = k == 1 ? 0 : 1;
      });
  add("priority", CU_LAUNCH_ATTRIBUTE_PRIORITY, &Probe::cluster, g8, b32, [&](CUlaunchAttributeValue& x, int k) {
    int least = 0, greatest = 0;
    raw<Entry::cuCtxGetStreamPriorityRange>(p.t, &least, &greatest);
    x.priority = k == 1 ? greatest : least;
  });
  add("mem_sync_domain_map", CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP, &Probe::cluster, g8, b32,
      [](CUlaunchAttributeValue& x, int k) {
        x.memSyncDomainMap.default_ = 0;
        x.memSyncDomainMap.remote = static_cast<unsigned char>(k == 1 ? 1 : 0);
      });
  add("mem_sync_domain", CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, &Probe::cluster, g8, b32,
      [](CUlaunchAttributeValue& x, int k) {
        x.memSyncDomain = k == 1 ? CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE : CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT;
      });
  add("preferred_cluster_dimension", CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION, &Probe::cluster, g8, b32,
      [](CUlaunchAttributeValue& x, int k) {
        x.preferredClusterDim.x = k == 1 ? 4 : 8;
        x.preferredClusterDim.y = 1;
        x.preferredClusterDim.z = 1;
      });
  add("launch_completion_event", CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT, &Probe::cluster, g8, b32,
      [ev](CUlaunchAttributeValue& x, int k) {
        x.launchCompletionEvent.event = ev;
        x.launchCompletionEvent.flags = k == 1 ? 0 : 0;
      });
  add("device_updatable_kernel_node", CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE, &Probe::cluster, g8, b32,
      [](CUlaunchAttributeValue& x, int k) { x.deviceUpdatableKernelNode.deviceUpdatable = k == 1 ? 1 : 0; });
  add("preferred_shared_memory_carveout", CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, &Probe::cluster, g8,
      b32, [](CUlaunchAttributeValue& x, int k) { x.sharedMemCarveout = k == 1 ? 50u : 100u; });
  add("nvlink_util_centric_scheduling", CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING, &Probe::cluster, g8, b32,
      [](CUlaunchAttributeValue& x, int k) { x.nvlinkUtilCentricScheduling = k == 1 ? 1u : 0u; });
  return v;
}

// Attribute ids that are not kernel-node attributes (or not attributes at all).
void group_attr_other_ids(Probe& p) {
  CUgraph g = p.graph();
  CUgraphNode n = nullptr;
  p.add(g, p.params(p.cluster, {8, 1, 1}, {32, 1, 1}), n);
  std::string s;
  for (int id : {0, 3, 15, 17, 99}) {
    CUlaunchAttributeValue v{};
    v.priority = 1;
    CUresult sr = p.set(n, static_cast<CUlaunchAttributeID>(id), v);
    CUresult gr = p.get(n, static_cast<CUlaunchAttributeID>(id), v);
    s += str(" | id %d: set=%s get=%s", id, N(sr).c_str(), N(gr).c_str());
  }
  fact("attr/other_ids", "Set/GetAttribute with IGNORE (0), SYNCHRONIZATION_POLICY (3, streams only), 15, MAX (17), 99",
       s.substr(3) + " | " + p.run(g, p.cluster));
  p.destroy(g);
}

// Misuse of the attribute calls, one per process: one of them crashed the driver (run 1).
void group_attr_bad(Probe& p, int which) {
  CUgraph g = p.graph();
  CUgraphNode n = nullptr, empty = nullptr;
  p.add(g, p.params(p.cluster, {8, 1, 1}, {32, 1, 1}), n);
  raw<Entry::cuGraphAddEmptyNode>(p.t, &empty, g, static_cast<const CUgraphNode*>(nullptr), std::size_t{0});
  CUlaunchAttributeValue v{};
  const CUgraphNode none = nullptr;
  const auto prio = CU_LAUNCH_ATTRIBUTE_PRIORITY;
  std::fflush(stdout);
  struct Case {
    const char* id;
    std::function<CUresult()> call;
  };
  const Case cases[] = {
      {"set_null_node", [&] { return raw<Entry::cuGraphKernelNodeSetAttribute>(p.t, none, prio, &v); }},
      {"get_null_node", [&] { return raw<Entry::cuGraphKernelNodeGetAttribute>(p.t, none, prio, &v); }},
      {"set_null_value",
       [&] {
         return raw<Entry::cuGraphKernelNodeSetAttribute>(p.t, n, prio, static_cast<const CUlaunchAttributeValue*>(nullptr));
       }},
      {"get_null_value",
       [&] { return raw<Entry::cuGraphKernelNodeGetAttribute>(p.t, n, prio, static_cast<CUlaunchAttributeValue*>(nullptr)); }},
      {"copy_null_dst", [&] { return raw<Entry::cuGraphKernelNodeCopyAttributes>(p.t, none, n); }},
      {"copy_null_src", [&] { return raw<Entry::cuGraphKernelNodeCopyAttributes>(p.t, n, none); }},
      {"set_on_empty_node", [&] { return raw<Entry::cuGraphKernelNodeSetAttribute>(p.t, empty, prio, &v); }},
      {"get_on_empty_node", [&] { return raw<Entry::cuGraphKernelNodeGetAttribute>(p.t, empty, prio, &v); }},
      {"copy_from_empty_node", [&] { return raw<Entry::cuGraphKernelNodeCopyAttributes>(p.t, n, empty); }},
      {"copy_to_empty_node", [&] { return raw<Entry::cuGraphKernelNodeCopyAttributes>(p.t, empty, n); }},
  };
  const Case& c = cases[which];
  std::printf("NOTE attr/bad/%s about to be called\n", c.id);
  std::fflush(stdout);
  CUresult r = c.call();
  fact((std::string("attr/bad/") + c.id).c_str(), "an attribute call with a NULL or non-kernel node or value",
       "result=" + N(r));
  p.destroy(g);
}
constexpr int attr_bad_cases = 10;

// CopyAttributes across graphs: cluster and priority copied; the destination's own carveout (the
// source has none) kept or reset? And into a node whose grid the source's cluster does not divide.
void group_attr_copy(Probe& p) {
  CUgraph g = p.graph();
  CUgraphNode n = nullptr;
  p.add(g, p.params(p.cluster, {8, 1, 1}, {32, 1, 1}), n);
  CUgraph g2 = p.graph();
  CUgraphNode n2 = nullptr;
  p.add(g2, p.params(p.cluster, {8, 1, 1}, {32, 1, 1}), n2);
  CUlaunchAttributeValue a{};
  a.clusterDim = {2, 1, 1};
  p.set(n, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, a);
  a = {};
  a.priority = -1;
  p.set(n, CU_LAUNCH_ATTRIBUTE_PRIORITY, a);
  CUlaunchAttributeValue b{};
  b.sharedMemCarveout = 25;
  p.set(n2, CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, b);
  CUresult cr = raw<Entry::cuGraphKernelNodeCopyAttributes>(p.t, n2, n);
  CUlaunchAttributeValue c1{}, c2{}, c3{};
  p.get(n2, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, c1);
  p.get(n2, CU_LAUNCH_ATTRIBUTE_PRIORITY, c2);
  p.get(n2, CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, c3);
  fact("attr/copy_all",
       "cuGraphKernelNodeCopyAttributes from a node of another graph: cluster and priority copied, the destination's "
       "own carveout (the source has none) kept or reset?",
       str("copy=%s dst_cluster=%u,%u,%u dst_priority=%d dst_carveout=%u ", N(cr).c_str(), c1.clusterDim.x,
           c1.clusterDim.y, c1.clusterDim.z, c2.priority, c3.sharedMemCarveout) +
           p.run(g2, p.cluster));
  CUgraph g7 = p.graph();
  CUgraphNode n7 = nullptr;
  p.add(g7, p.params(p.cluster, {7, 1, 1}, {32, 1, 1}), n7);
  CUresult c7 = raw<Entry::cuGraphKernelNodeCopyAttributes>(p.t, n7, n);
  p.get(n7, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, c1);
  fact("attr/copy_not_divisor", "cuGraphKernelNodeCopyAttributes of cluster 2 into a node of grid 7",
       str("copy=%s dst_cluster=%u,%u,%u ", N(c7).c_str(), c1.clusterDim.x, c1.clusterDim.y, c1.clusterDim.z) +
           p.run(g7, p.cluster));
  p.destroy(g);
  p.destroy(g2);
  p.destroy(g7);
}

void group_attrs(Probe& p, int first, int last) {
  CUevent ev = nullptr;
  raw<Entry::cuEventCreate>(p.t, &ev, static_cast<unsigned>(CU_EVENT_DISABLE_TIMING));
  std::vector<AttrCase> cases = attr_cases(p, ev);
  for (int i = first; i < last && i < static_cast<int>(cases.size()); ++i) run_attr_case(p, cases[static_cast<std::size_t>(i)]);
}

// ----------------------------------------------------------------------------------- clusters

void try_cluster(Probe& p, Dim grid, Dim cl, const char* what) {
  CUgraph g = p.graph();
  CUgraphNode n = nullptr;
  CUresult a = p.add(g, p.params(p.cluster, grid, {32, 1, 1}), n);
  CUlaunchAttributeValue v{};
  v.clusterDim = {cl.x, cl.y, cl.z};
  CUresult s = p.set(n, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, v);
  std::string r = str("grid=%u,%u,%u cluster=%u,%u,%u add=%s set=%s ", grid.x, grid.y, grid.z, cl.x, cl.y, cl.z,
                      N(a).c_str(), N(s).c_str()) +
                  p.run(g, p.cluster);
  p.destroy(g);
  fact((std::string("cluster/") + what).c_str(), "a kernel node with this cluster dimension", r);
}

// Each invalid size runs in a process of its own (a sticky error would spoil the others).
void group_cluster_sizes(Probe& p, int which) {
  switch (which) {
    case 0:
      try_cluster(p, {4, 4, 1}, {2, 2, 1}, "2x2");
      try_cluster(p, {16, 1, 1}, {8, 1, 1}, "8_portable_max");
      try_cluster(p, {8, 1, 1}, {1, 1, 1}, "one");
      try_cluster(p, {8, 2, 2}, {2, 2, 2}, "2x2x2");
      break;
    case 1: try_cluster(p, {8, 1, 1}, {3, 1, 1}, "not_divisor"); break;
    case 2: try_cluster(p, {8, 3, 1}, {2, 2, 1}, "not_divisor_y"); break;
    case 3: try_cluster(p, {16, 1, 1}, {16, 1, 1}, "16_without_non_portable"); break;
    case 4: try_cluster(p, {8, 1, 1}, {0, 0, 0}, "zero"); break;
    case 5: {
      CUresult np = p.set_func_attr(p.cluster, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
      info("cuFuncSetAttribute(cluster_dims, NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1) = " + N(np));
      try_cluster(p, {16, 1, 1}, {16, 1, 1}, "16_with_non_portable");
      break;
    }
    case 6:
      p.set_func_attr(p.cluster, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
      try_cluster(p, {32, 1, 1}, {32, 1, 1}, "32_with_non_portable");
      break;
    case 8: try_cluster(p, {8, 1, 1}, {2, 0, 1}, "partial_zero"); break;
    case 7: {
      CUgraph g = p.graph();
      CUgraphNode n = nullptr;
      CUresult a = p.add(g, p.params(p.cluster, {16, 1, 1}, {1024, 1, 1}), n);
      CUlaunchAttributeValue v{};
      v.clusterDim = {8, 1, 1};
      CUresult s = p.set(n, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, v);
      fact("cluster/8_of_1024_threads", "cluster 8 of 1024-thread blocks",
           str("add=%s set=%s ", N(a).c_str(), N(s).c_str()) + p.run(g, p.cluster));
      p.destroy(g);
      break;
    }
    default: break;
  }
}

void group_cluster_non_portable_cleared(Probe& p) {
  p.set_func_attr(p.cluster, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
  CUgraph g = p.graph();
  CUgraphNode n = nullptr;
  p.add(g, p.params(p.cluster, {16, 1, 1}, {32, 1, 1}), n);
  CUlaunchAttributeValue v{};
  v.clusterDim = {16, 1, 1};
  p.set(n, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, v);
  CUgraphExec e = nullptr;
  CUresult i = p.instantiate(e, g);
  p.set_func_attr(p.cluster, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 0);
  std::string l = p.launch(e, p.cluster);
  CUgraphExec e2 = nullptr;
  CUresult i2 = p.instantiate(e2, g);
  fact("cluster/16_non_portable_cleared_after_instantiate",
       "cluster 16 instantiated while non-portable sizes were allowed, then the function attribute cleared",
       str("inst=%s launch_after_clear={%s} inst_after_clear=%s", N(i).c_str(), l.c_str(), N(i2).c_str()));
  p.destroy(e);
  p.destroy(e2);
  p.destroy(g);
}

// Changing the grid under a cluster: graph node, exec node, and a whole update.
void group_cluster_grid_change(Probe& p) {
  CUgraph g = p.graph();
  CUgraphNode n = nullptr;
  p.add(g, p.params(p.cluster, {8, 1, 1}, {32, 1, 1}), n);
  CUlaunchAttributeValue v{};
  v.clusterDim = {2, 1, 1};
  p.set(n, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, v);
  CUgraphExec e = nullptr;
  p.instantiate(e, g);
  CUDA_KERNEL_NODE_PARAMS k7 = p.params(p.cluster, {7, 1, 1}, {32, 1, 1});
  CUresult x = raw<Entry::cuGraphExecKernelNodeSetParams>(p.t, e, n, &k7);
  std::string lx = p.launch(e, p.cluster);
  CUDA_KERNEL_NODE_PARAMS k6 = p.params(p.cluster, {6, 1, 1}, {32, 1, 1});
  CUresult x6 = raw<Entry::cuGraphExecKernelNodeSetParams>(p.t, e, n, &k6);
  std::string lx6 = p.launch(e, p.cluster);
  CUresult gs = raw<Entry::cuGraphKernelNodeSetParams>(p.t, n, &k7);
  CUlaunchAttributeValue back{};
  p.get(n, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, back);
  std::string ig = p.run(g, p.cluster);
  fact("cluster/grid_change",
       "cluster 2 on grid 8: exec set-params to grid 7, then 6; graph set-params to grid 7 (then instantiated)",
       str("exec_set(grid 7)=%s {%s} exec_set(grid 6)=%s {%s} | node_set(grid 7)=%s cluster_after=%u,%u,%u {%s}",
           N(x).c_str(), lx.c_str(), N(x6).c_str(), lx6.c_str(), N(gs).c_str(), back.clusterDim.x, back.clusterDim.y,
           back.clusterDim.z, ig.c_str()));
  p.destroy(e);
  p.destroy(g);
}

// A whole update from a source node without a cluster whose grid the executable's kept cluster
// does not divide.
void group_cluster_update_kept_not_divisor(Probe& p) {
  CUgraph g1 = p.graph();
  CUgraphNode n1 = nullptr;
  p.add(g1, p.params(p.cluster, {8, 1, 1}, {32, 1, 1}), n1);
  CUlaunchAttributeValue v{};
  v.clusterDim = {2, 1, 1};
  p.set(n1, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, v);
  CUgraphExec e = nullptr;
  p.instantiate(e, g1);
  CUgraph g2 = p.graph();
  CUgraphNode n2 = nullptr;
  p.add(g2, p.params(p.cluster, {7, 1, 1}, {32, 1, 1}), n2);
  std::string up = p.update(e, g2);
  std::string l = p.launch(e, p.cluster);
  CUgraph g3 = p.graph();
  CUgraphNode n3 = nullptr;
  p.add(g3, p.params(p.cluster, {6, 1, 1}, {32, 1, 1}), n3);
  std::string up3 = p.update(e, g3);
  std::string l3 = p.launch(e, p.cluster);
  fact("cluster/update_kept_not_divisor",
       "whole update of a cluster-2 exec (grid 8) from a node without a cluster of grid 7, then of grid 6",
       str("grid 7: %s {%s} | grid 6: %s {%s}", up.c_str(), l.c_str(), up3.c_str(), l3.c_str()));
  p.destroy(e);
  p.destroy(g1);
  p.destroy(g2);
  p.destroy(g3);
}

void group_cluster_update_bad(Probe& p) {
  CUgraph g1 = p.graph();
  CUgraphNode n1 = nullptr;
  p.add(g1, p.params(p.cluster, {8, 1, 1}, {32, 1, 1}), n1);
  CUlaunchAttributeValue v{};
  v.clusterDim = {2, 1, 1};
  p.set(n1, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, v);
  CUgraphExec e = nullptr;
  p.instantiate(e, g1);
  CUgraph g2 = p.graph();
  CUgraphNode n2 = nullptr;
  p.add(g2, p.params(p.cluster, {8, 1, 1}, {32, 1, 1}), n2);
  v.clusterDim = {3, 1, 1};
  CUresult s3 = p.set(n2, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, v);
  std::string up = p.update(e, g2);
  std::string l = p.launch(e, p.cluster);
  fact("cluster/update_to_not_divisor", "whole update of a cluster-2 exec (grid 8) from a graph whose node has cluster 3",
       str("set(cluster 3)=%s %s {%s}", N(s3).c_str(), up.c_str(), l.c_str()));
  p.destroy(e);
  p.destroy(g1);
  p.destroy(g2);
}

// ------------------------------------------------------------------------------- cooperative

// The stage at which a cooperative node of `grid` x `block` (dynamic shared memory `shared`) is
// refused: 0 accepted (launched and the barrier held), 1 add, 2 set, 3 instantiate, 4 launch,
// 5 sync, 6 ran but the barrier did not hold. `why` gets the result of the refusing call.
int coop_stage(Probe& p, unsigned grid, unsigned block, unsigned shared, std::string& why) {
  CUgraph g = p.graph();
  CUgraphNode n = nullptr;
  int stage = 0;
  CUresult a = p.add(g, p.params(p.coop, {grid, 1, 1}, {block, 1, 1}, shared), n);
  CUlaunchAttributeValue v{};
  v.cooperative = 1;
  CUresult s = a == CUDA_SUCCESS ? p.set(n, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, v) : CUDA_SUCCESS;
  CUgraphExec e = nullptr;
  auto refuse = [&](int at, const std::string& result) {
    stage = at;
    why = result;
  };
  if (a != CUDA_SUCCESS) {
    refuse(1, N(a));
  } else if (s != CUDA_SUCCESS) {
    refuse(2, N(s));
  } else if (CUresult i = p.instantiate(e, g); i != CUDA_SUCCESS) {
    refuse(3, N(i));
  } else {
    p.clear_out();
    raw<Entry::cuStreamSynchronize>(p.t, p.stream);
    CUresult l = raw<Entry::cuGraphLaunch>(p.t, e, p.stream);
    CUresult y = raw<Entry::cuStreamSynchronize>(p.t, p.stream);
    std::vector<int> o = p.read_out();
    if (l != CUDA_SUCCESS)
      refuse(4, N(l));
    else if (y != CUDA_SUCCESS)
      refuse(5, N(y));
    else if (o[1] != 1 || o[0] != static_cast<int>(grid))
      refuse(6, str("barrier=%d count=%d", o[1], o[0]));
  }
  p.destroy(e);
  p.destroy(g);
  return stage;
}

const char* stage_name(int s) {
  static const char* names[] = {"accepted", "add", "set_attribute", "instantiate", "launch", "sync", "barrier_failed"};
  return names[s];
}

void coop_limit(Probe& p, unsigned block, unsigned shared, const char* id) {
  std::string why;
  int huge = coop_stage(p, 1u << 20, block, shared, why);
  std::string s = str("grid 1048576: refused at %s (%s)", stage_name(huge), why.c_str());
  if (huge == 5) {  // an asynchronous (sticky) error: the context is lost, no bisection in this process
    fact(id, "largest cooperative grid accepted", s + " | no bisection after an asynchronous error");
    return;
  }
  // Bisection for the largest accepted grid.
  unsigned lo = 1, hi = 1u << 20;  // lo accepted (checked below), hi refused
  std::string w1;
  if (coop_stage(p, 1, block, shared, w1) != 0) {
    fact(id, "largest cooperative grid accepted", s + str(" | grid 1 refused too: %s", w1.c_str()));
    return;
  }
  while (hi - lo > 1) {
    unsigned mid = lo + (hi - lo) / 2;
    std::string w;
    if (coop_stage(p, mid, block, shared, w) == 0)
      lo = mid;
    else
      hi = mid;
  }
  std::string w;
  int st = coop_stage(p, hi, block, shared, w);
  s += str(" | largest accepted=%u (= %.2f per SM), first refused=%u at %s (%s)", lo,
           static_cast<double>(lo) / p.sms, hi, stage_name(st), w.c_str());
  if (!p.sim) {
    // The occupancy calculator, through libcuda directly (tether's table does not carry it).
    using Occ = CUresult (*)(int*, CUfunction, int, std::size_t);
    void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    auto occ = lib ? reinterpret_cast<Occ>(::dlsym(lib, "cuOccupancyMaxActiveBlocksPerMultiprocessor")) : nullptr;
    int per_sm = -1;
    if (occ) occ(&per_sm, p.coop, static_cast<int>(block), shared);
    s += str(" | occupancy calculator: %d per SM x %d SMs = %d", per_sm, p.sms, per_sm * p.sms);
  }
  fact(id, "largest cooperative grid accepted (bisection); where the first refused grid is refused", s);
}

void group_coop(Probe& p) {
  fact("coop/defaults", "COOPERATIVE read from a node that never set it; coop_sync launched without it",
       [&] {
         CUgraph g = p.graph();
         CUgraphNode n = nullptr;
         p.add(g, p.params(p.coop, {4, 1, 1}, {32, 1, 1}), n);
         CUlaunchAttributeValue v{};
         CUresult r = p.get(n, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, v);
         std::string s = str("get=%s value=%d ", N(r).c_str(), v.cooperative) + p.run(g, p.coop);
         p.destroy(g);
         return s;
       }());
  // Growing a cooperative exec node past the limit: exec set-params and whole update.
  {
    CUgraph g = p.graph();
    CUgraphNode n = nullptr;
    p.add(g, p.params(p.coop, {4, 1, 1}, {32, 1, 1}), n);
    CUlaunchAttributeValue v{};
    v.cooperative = 1;
    p.set(n, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, v);
    CUgraphExec e = nullptr;
    p.instantiate(e, g);
    CUDA_KERNEL_NODE_PARAMS big = p.params(p.coop, {100000, 1, 1}, {32, 1, 1});
    CUresult x = raw<Entry::cuGraphExecKernelNodeSetParams>(p.t, e, n, &big);
    std::string lx = p.launch(e, p.coop);
    CUgraph g2 = p.graph();
    CUgraphNode n2 = nullptr;
    p.add(g2, big, n2);
    p.set(n2, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, v);
    CUgraphExec e2 = nullptr;
    p.instantiate(e2, g);
    std::string up = p.update(e2, g2);
    std::string lup = p.launch(e2, p.coop);
    CUresult ns = raw<Entry::cuGraphKernelNodeSetParams>(p.t, n, &big);
    fact("coop/grow_past_limit", "a cooperative exec node of grid 4 grown to grid 100000: exec set-params, whole update, "
                                 "graph set-params",
         str("exec_set=%s {%s} | %s {%s} | node_set=%s", N(x).c_str(), lx.c_str(), up.c_str(), lup.c_str(),
             N(ns).c_str()));
    p.destroy(e);
    p.destroy(e2);
    p.destroy(g);
    p.destroy(g2);
  }
}

// ------------------------------------------------------------------------------- priorities

void group_priority(Probe& p) {
  int least = 99, greatest = 99;
  CUresult r = raw<Entry::cuCtxGetStreamPriorityRange>(p.t, &least, &greatest);
  fact("prio/range", "cuCtxGetStreamPriorityRange; with NULL arguments",
       str("result=%s least=%d greatest=%d null_least=%s null_both=%s", N(r).c_str(), least, greatest,
           N(raw<Entry::cuCtxGetStreamPriorityRange>(p.t, static_cast<int*>(nullptr), &greatest)).c_str(),
           N(raw<Entry::cuCtxGetStreamPriorityRange>(p.t, static_cast<int*>(nullptr), static_cast<int*>(nullptr)))
               .c_str()));
  {
    using GetPrio = CUresult (*)(CUstream, int*);
    void* lib = p.sim ? nullptr : ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    auto get_prio = lib ? reinterpret_cast<GetPrio>(::dlsym(lib, "cuStreamGetPriority")) : nullptr;
    std::string s;
    for (int prio : {greatest, least, greatest - 10, least + 10}) {
      CUstream st = nullptr;
      CUresult c = raw<Entry::cuStreamCreateWithPriority>(p.t, &st, static_cast<unsigned>(CU_STREAM_NON_BLOCKING), prio);
      int got = 12345;
      if (c == CUDA_SUCCESS && get_prio) get_prio(st, &got);
      s += str(" | create(%d)=%s", prio, N(c).c_str());
      if (get_prio) s += str(" reads=%d", got);
      if (c == CUDA_SUCCESS) raw<Entry::cuStreamDestroy>(p.t, st);
    }
    CUstream st = nullptr;
    s += str(" | flags=4: %s | flags=0: %s",
             N(raw<Entry::cuStreamCreateWithPriority>(p.t, &st, 4u, 0)).c_str(),
             N(raw<Entry::cuStreamCreateWithPriority>(p.t, &st, 0u, 0)).c_str());
    if (st) raw<Entry::cuStreamDestroy>(p.t, st);
    s += str(" | null out: %s", N(raw<Entry::cuStreamCreateWithPriority>(p.t, static_cast<CUstream*>(nullptr), 0u, 0)).c_str());
    fact("prio/stream_create", "cuStreamCreateWithPriority in range, beyond both ends (cuStreamGetPriority reads it "
                               "back on the real driver), bad flags, NULL",
         s.substr(3));
  }
  // Node priorities.
  {
    CUgraph g = p.graph();
    CUgraphNode n = nullptr;
    p.add(g, p.params(p.cluster, {8, 1, 1}, {32, 1, 1}), n);
    std::string s;
    for (int prio : {greatest, least, greatest - 10, least + 10}) {
      CUlaunchAttributeValue v{};
      v.priority = prio;
      CUresult sr = p.set(n, CU_LAUNCH_ATTRIBUTE_PRIORITY, v);
      CUresult gr = p.get(n, CU_LAUNCH_ATTRIBUTE_PRIORITY, v);
      s += str(" | set(%d)=%s get=%s reads=%d", prio, N(sr).c_str(), N(gr).c_str(), v.priority);
    }
    CUlaunchAttributeValue v{};
    v.priority = greatest;
    p.set(n, CU_LAUNCH_ATTRIBUTE_PRIORITY, v);
    CUgraphExec e = nullptr;
    CUresult i = p.instantiate(e, g, CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY);
    cuuint64_t flags = 0;
    CUresult fr = e ? raw<Entry::cuGraphExecGetFlags>(p.t, e, &flags) : CUDA_ERROR_INVALID_VALUE;
    s += str(" | instantiate(USE_NODE_PRIORITY)=%s get_flags=%s flags=%llu ", N(i).c_str(), N(fr).c_str(),
             static_cast<unsigned long long>(flags)) +
         p.launch(e, p.cluster);
    // Whole updates changing the priority, with and without the flag.
    CUgraph g2 = p.graph();
    CUgraphNode n2 = nullptr;
    p.add(g2, p.params(p.cluster, {8, 1, 1}, {32, 1, 1}), n2);
    v.priority = least;
    p.set(n2, CU_LAUNCH_ATTRIBUTE_PRIORITY, v);
    s += " | with flag, update to another priority: " + p.update(e, g2);
    CUgraph g3 = p.graph();
    CUgraphNode n3 = nullptr;
    p.add(g3, p.params(p.cluster, {8, 1, 1}, {32, 1, 1}), n3);
    v.priority = greatest - 10;  // clamps to the same value as `greatest`
    p.set(n3, CU_LAUNCH_ATTRIBUTE_PRIORITY, v);
    s += " | with flag, update to a priority that clamps to the same: " + p.update(e, g3);
    p.destroy(e);
    p.instantiate(e, g);
    s += " | without flag, update to another priority: " + p.update(e, g2);
    p.destroy(e);
    // A stream of each priority launching an exec with and without the flag.
    fact("prio/node", "per-node priority: Set/Get in range and beyond; USE_NODE_PRIORITY; updates of the priority",
         s.substr(3));
    p.destroy(g);
    p.destroy(g2);
    p.destroy(g3);
  }
  {
    CUgraph g = p.graph();
    CUgraphNode n = nullptr;
    p.add(g, p.params(p.cluster, {8, 1, 1}, {32, 1, 1}), n);
    CUgraphExec e = nullptr;
    CUresult i = p.instantiate(e, g, CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY);
    fact("prio/flag_without_attribute", "USE_NODE_PRIORITY with a node that never set a priority",
         "instantiate=" + N(i) + " " + p.launch(e, p.cluster));
    p.destroy(e);
    p.destroy(g);
  }
}

// A launch captured from a stream of the greatest priority: does the node carry the priority?
void group_priority_capture(Probe& p) {
  int least = 0, greatest = 0;
  raw<Entry::cuCtxGetStreamPriorityRange>(p.t, &least, &greatest);
  CUstream st = nullptr;
  CUresult c = raw<Entry::cuStreamCreateWithPriority>(p.t, &st, static_cast<unsigned>(CU_STREAM_NON_BLOCKING), greatest);
  if (c != CUDA_SUCCESS) {
    fact("prio/captured_launch", "a kernel launch captured from a stream of the greatest priority", "create=" + N(c));
    return;
  }
  CUresult b = raw<Entry::cuStreamBeginCapture>(p.t, st, CU_STREAM_CAPTURE_MODE_RELAXED);
  void* args[1] = {&p.out};
  CUresult l = raw<Entry::cuLaunchKernel>(p.t, p.cluster, 8u, 1u, 1u, 32u, 1u, 1u, 0u, st, args,
                                          static_cast<void**>(nullptr));
  CUgraph g = nullptr;
  CUresult e = raw<Entry::cuStreamEndCapture>(p.t, st, &g);
  std::string s = str("create=%s begin=%s launch=%s end=%s", N(c).c_str(), N(b).c_str(), N(l).c_str(), N(e).c_str());
  if (e == CUDA_SUCCESS && g) {
    CUgraphNode n = nullptr;
    std::size_t count = 1;
    raw<Entry::cuGraphGetNodes>(p.t, g, &n, &count);
    CUlaunchAttributeValue v{};
    CUresult gr = p.get(n, CU_LAUNCH_ATTRIBUTE_PRIORITY, v);
    s += str(" nodes=%zu get_priority=%s priority=%d (greatest=%d)", count, N(gr).c_str(), v.priority, greatest);
    p.destroy(g);
  }
  raw<Entry::cuStreamDestroy>(p.t, st);
  fact("prio/captured_launch", "a kernel launch captured from a stream of the greatest priority: the node's priority",
       s);
}

// ----------------------------------------------------------------------------- parameter info

void group_paraminfo(Probe& p) {
  auto list = [&](CUfunction f, const char* id, const char* what, int count) {
    std::string s;
    for (int i = 0; i <= count; ++i) {
      std::size_t off = 777, size = 777;
      CUresult r = raw<Entry::cuFuncGetParamInfo>(p.t, f, static_cast<std::size_t>(i), &off, &size);
      if (r == CUDA_SUCCESS)
        s += str(" | %d: offset=%zu size=%zu", i, off, size);
      else
        s += str(" | %d: %s offset=%s size=%s", i, N(r).c_str(), off == 777 ? "untouched" : "written",
                 size == 777 ? "untouched" : "written");
    }
    fact(id, what, s.substr(3));
  };
  list(p.fill, "paraminfo/float_ptr_float_int", "cuFuncGetParamInfo of fill(float*, float, int), and one past the end", 3);
  list(p.p_mix, "paraminfo/double_char_longlong", "cuFuncGetParamInfo of param_mix(double, char, long long)", 3);
  list(p.p_struct, "paraminfo/struct24", "cuFuncGetParamInfo of param_struct(Param24: double, int, float, long long)", 1);
  list(p.p_align, "paraminfo/char_short_int_char_double", "cuFuncGetParamInfo of param_align(char, short, int, char, double)", 5);
  list(p.p_none, "paraminfo/no_params", "cuFuncGetParamInfo of no_params()", 0);
  std::size_t off = 0, size = 0;
  fact("paraminfo/null_args", "cuFuncGetParamInfo with NULL offset, NULL size, NULL function; far index",
       str("null_offset=%s null_size=%s size_when_offset_null=%zu null_func=%s index_1000=%s",
           N(raw<Entry::cuFuncGetParamInfo>(p.t, p.fill, std::size_t{0}, static_cast<std::size_t*>(nullptr), &size))
               .c_str(),
           N(raw<Entry::cuFuncGetParamInfo>(p.t, p.fill, std::size_t{1}, &off, static_cast<std::size_t*>(nullptr)))
               .c_str(),
           size, N(raw<Entry::cuFuncGetParamInfo>(p.t, static_cast<CUfunction>(nullptr), std::size_t{0}, &off, &size)).c_str(),
           N(raw<Entry::cuFuncGetParamInfo>(p.t, p.fill, std::size_t{1000}, &off, &size)).c_str()));
}

// ------------------------------------------------------------------------------------ driver

struct Group {
  std::string name;  // empty: one of the per-attribute groups, named attr<k>
  std::function<void(Probe&)> run;
};

std::vector<Group> groups() {
  std::vector<Group> g = {
      {"info", group_info},
      {"funcattr", group_funcattr},
      {"paraminfo", group_paraminfo},
      {"smem", group_smem},
      {"priority", group_priority},
      {"prio_capture", group_priority_capture},
      {"cluster_ok", [](Probe& p) { group_cluster_sizes(p, 0); }},
      {"cluster_not_divisor", [](Probe& p) { group_cluster_sizes(p, 1); }},
      {"cluster_not_divisor_y", [](Probe& p) { group_cluster_sizes(p, 2); }},
      {"cluster_16", [](Probe& p) { group_cluster_sizes(p, 3); }},
      {"cluster_zero", [](Probe& p) { group_cluster_sizes(p, 4); }},
      {"cluster_16_non_portable", [](Probe& p) { group_cluster_sizes(p, 5); }},
      {"cluster_32_non_portable", [](Probe& p) { group_cluster_sizes(p, 6); }},
      {"cluster_8_of_1024", [](Probe& p) { group_cluster_sizes(p, 7); }},
      {"cluster_non_portable_cleared", group_cluster_non_portable_cleared},
      {"cluster_grid_change", group_cluster_grid_change},
      {"cluster_update_bad", group_cluster_update_bad},
      {"coop", group_coop},
      {"coop_limit32", [](Probe& p) { coop_limit(p, 32, 0, "coop/limit_block32"); }},
      {"coop_limit1024", [](Probe& p) { coop_limit(p, 1024, 0, "coop/limit_block1024"); }},
      {"coop_limit32_smem64k",
       [](Probe& p) {
         p.set_func_attr(p.coop, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 64 * 1024);
         coop_limit(p, 32, 64 * 1024, "coop/limit_block32_smem64k");
       }},
      {"attr_other", group_attr_other_ids},
      {"attr_copy", group_attr_copy},
      {"cluster_partial_zero", [](Probe& p) { group_cluster_sizes(p, 8); }},
      {"cluster_update_kept_not_divisor", group_cluster_update_kept_not_divisor},
  };
  for (int i = 0; i < attr_bad_cases; ++i) g.push_back({str("attr_bad%d", i), [i](Probe& p) { group_attr_bad(p, i); }});
  for (int i = 0; i < 14; ++i) g.push_back({"", [i](Probe& p) { group_attrs(p, i, i + 1); }});
  return g;
}

std::string group_name(const std::vector<Group>& gs, std::size_t i) {
  if (!gs[i].name.empty()) return gs[i].name;
  std::size_t first = 0;
  while (!gs[first].name.empty()) ++first;
  return str("attr%zu", i - first);
}

int run_child(const char* name) {
  std::vector<Group> gs = groups();
  for (std::size_t i = 0; i < gs.size(); ++i)
    if (group_name(gs, i) == name) {
      Probe p;
      gs[i].run(p);
      return 0;
    }
  std::fprintf(stderr, "launch_attr_probe: no group '%s'\n", name);
  return 2;
}

// Runs every group in a child process of its own, with a watchdog.
int run_all(const char* self) {
  std::vector<Group> gs = groups();
  int failed = 0;
  for (std::size_t i = 0; i < gs.size(); ++i) {
    std::string name = group_name(gs, i);
    std::fflush(stdout);
    pid_t pid = 0;
    char* argv[] = {const_cast<char*>(self), const_cast<char*>("--child"), name.data(), nullptr};
    if (::posix_spawn(&pid, self, nullptr, nullptr, argv, environ) != 0) {
      std::printf("SUB %s could not be started\n", name.c_str());
      ++failed;
      continue;
    }
    int status = 0;
    bool done = false;
    for (int waited = 0; waited < 20000 && !done; waited += 10) {
      if (::waitpid(pid, &status, WNOHANG) == pid) done = true;
      else ::usleep(10000);
    }
    if (!done) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      std::printf("SUB %s killed after 20 s (hung); its FACT lines so far are above\n", name.c_str());
      ++failed;
    } else if (WIFSIGNALED(status)) {
      std::printf("SUB %s killed by signal %d (%s); its FACT lines so far are above\n", name.c_str(), WTERMSIG(status),
                  ::strsignal(WTERMSIG(status)));
      ++failed;
    } else if (WEXITSTATUS(status) != 0) {
      std::printf("SUB %s exited with status %d\n", name.c_str(), WEXITSTATUS(status));
      ++failed;
    }
    std::fflush(stdout);
  }
  std::printf("SUMMARY groups=%zu failed=%d\n", gs.size(), failed);
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) try {
  std::string_view a = argc > 1 ? argv[1] : "";
  if (a == "--child" && argc > 2) return run_child(argv[2]);
  if (a == "--list") {
    std::vector<Group> gs = groups();
    for (std::size_t i = 0; i < gs.size(); ++i) std::printf("%s\n", group_name(gs, i).c_str());
    return 0;
  }
  if (!a.empty()) {
    std::fprintf(stderr, "usage: launch_attr_probe [--list | --child GROUP]\n");
    return 2;
  }
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 2;
  self[n] = 0;
  return run_all(self);
} catch (const std::exception& e) {
  std::printf("INFO launch_attr_probe: %s\n", e.what());
  return 1;
}
