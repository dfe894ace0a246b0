// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// A diagnostic program for the real driver, not a test (docs/design/driver-facts.md, "Direct add
// into a capturing graph", says what it is for): which graph, user-object and capture calls work on
// a thread with no current context. Some calls crash the process there
// (cuGraphExecKernelNodeSetParams, ctx_block_probe 8a), so this is not a conformance case: each
// case runs in its own child process, and the parent reports a crash as the case's outcome.
// Standalone on purpose (only <cuda.h>, the driver loaded with dlopen), like release_probe.cpp.
//
// Each case: the main thread (primary context current) prepares; a fresh thread calls
// cuCtxSetCurrent(NULL), checks that cuCtxGetCurrent reports none, makes the probed call and ends;
// then the main thread checks that the call did what it should (the node's type, a launch that runs
// it, the capture going on), and prints one line:
//   CASE <id> <what> :: ctx_on_thread=<null|set> <call>=<result> [then ...]
//   context_probe            every case, each in a child ("killed by signal 11" = the call crashed)
//   context_probe --case ID  one case, in this process
#include <cuda.h>
#include <dlfcn.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

extern char** environ;

namespace {

#define ENTRY(name) decltype(&::name) p_##name = nullptr;
#define ENTRIES(X)                                                                                           \
  X(cuInit)                                                                                                  \
  X(cuDeviceGet)                                                                                             \
  X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) X(cuCtxGetCurrent) X(cuStreamCreate) X(cuStreamSynchronize) \
      X(cuModuleLoadData) X(cuModuleGetFunction) X(cuMemAlloc) X(cuMemcpyDtoH) X(cuMemsetD32)                \
          X(cuGraphCreate) X(cuGraphDestroy) X(cuGraphAddNode) X(cuGraphNodeSetParams) X(cuGraphNodeGetType) \
              X(cuGraphInstantiateWithFlags) X(cuGraphLaunch) X(cuGraphExecDestroy)                          \
                  X(cuGraphExecNodeSetParams) X(cuGraphExecKernelNodeSetParams)                              \
                      X(cuGraphExecMemsetNodeSetParams) X(cuUserObjectCreate) X(cuUserObjectRelease)         \
                          X(cuGraphRetainUserObject) X(cuStreamBeginCapture) X(cuStreamEndCapture)           \
                              X(cuStreamGetCaptureInfo) X(cuStreamUpdateCaptureDependencies)                 \
                                  X(cuLaunchKernel) X(cuGetErrorName)
ENTRIES(ENTRY)
#undef ENTRY

bool load() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) return false;
  // Why the macros: <cuda.h> maps names such as cuStreamGetCaptureInfo to their current versions
  // (cuStreamGetCaptureInfo_v3); STR expands them as a program linked with -lcuda would bind them.
#define STR2(x) #x
#define STR(x) STR2(x)
#define LOAD(name) p_##name = reinterpret_cast<decltype(p_##name)>(dlsym(lib, STR(name)));
  ENTRIES(LOAD)
#undef LOAD
  return p_cuInit && p_cuGraphAddNode && p_cuStreamUpdateCaptureDependencies;
}

const char* name_of(CUresult r) {
  const char* s = "?";
  if (p_cuGetErrorName) p_cuGetErrorName(r, &s);
  return s;
}

// inc(u32* p): adds 1 to *p.
const char* const k_ptx = R"PTX(
.version 8.0
.target sm_90
.address_size 64
.visible .entry inc(.param .u64 inc_p0)
{
  .reg .b32 %r<2>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [inc_p0];
  atom.add.u32 %r1, [%rd1], 1;
  ret;
}
)PTX";

struct Env {
  CUcontext ctx = nullptr;
  CUstream s = nullptr;
  CUfunction inc = nullptr;
  CUdeviceptr counter = 0;
  CUdeviceptr buf = 0;
  CUdeviceptr arg = 0;
  void* args[1] = {nullptr};
};

bool setup(Env& e) {
  CUdevice dev = 0;
  CUmodule mod = nullptr;
  if (p_cuInit(0) || p_cuDeviceGet(&dev, 0) || p_cuDevicePrimaryCtxRetain(&e.ctx, dev) ||
      p_cuCtxSetCurrent(e.ctx) || p_cuStreamCreate(&e.s, CU_STREAM_NON_BLOCKING) ||
      p_cuModuleLoadData(&mod, k_ptx) || p_cuModuleGetFunction(&e.inc, mod, "inc") ||
      p_cuMemAlloc(&e.counter, 4) || p_cuMemAlloc(&e.buf, 4096) || p_cuMemsetD32(e.counter, 0, 1) ||
      p_cuMemsetD32(e.buf, 0, 1024))
    return false;
  e.arg = e.counter;
  e.args[0] = &e.arg;
  return true;
}

CUgraphNodeParams kernel_params(Env& e, bool with_ctx) {
  CUgraphNodeParams p{};
  p.type = CU_GRAPH_NODE_TYPE_KERNEL;
  p.kernel.func = e.inc;
  p.kernel.gridDimX = p.kernel.gridDimY = p.kernel.gridDimZ = 1;
  p.kernel.blockDimX = p.kernel.blockDimY = p.kernel.blockDimZ = 1;
  p.kernel.kernelParams = e.args;
  p.kernel.ctx = with_ctx ? e.ctx : nullptr;
  return p;
}

CUgraphNodeParams memset_params(Env& e, unsigned value, bool with_ctx) {
  CUgraphNodeParams p{};
  p.type = CU_GRAPH_NODE_TYPE_MEMSET;
  p.memset.dst = e.buf;
  p.memset.value = value;
  p.memset.elementSize = 4;
  p.memset.width = 16;
  p.memset.height = 1;
  p.memset.ctx = with_ctx ? e.ctx : nullptr;
  return p;
}

// Runs `call` on a fresh thread with no context current; describes the thread's context and the result.
template <class F>
std::string without_context(const char* name, F call) {
  CUresult r = CUDA_ERROR_UNKNOWN, set = CUDA_ERROR_UNKNOWN, get = CUDA_ERROR_UNKNOWN;
  CUcontext cur = reinterpret_cast<CUcontext>(1);
  std::thread th([&] {
    set = p_cuCtxSetCurrent(nullptr);
    get = p_cuCtxGetCurrent(&cur);
    r = call();
  });
  th.join();
  char buf[256];
  std::snprintf(buf, sizeof buf, "ctx_on_thread=%s(set=%s,get=%s) %s=%s", cur ? "set" : "null", name_of(set),
                name_of(get), name, name_of(r));
  return buf;
}

unsigned read_word(CUdeviceptr p) {
  unsigned v = 0;
  p_cuMemcpyDtoH(&v, p, 4);
  return v;
}

// Instantiates, launches and synchronizes g (main thread); describes the outcome and the counter.
std::string run_graph(Env& e, CUgraph g) {
  CUgraphExec x = nullptr;
  CUresult i = p_cuGraphInstantiateWithFlags(&x, g, 0);
  CUresult l = i == CUDA_SUCCESS ? p_cuGraphLaunch(x, e.s) : i;
  CUresult s = p_cuStreamSynchronize(e.s);
  if (x) p_cuGraphExecDestroy(x);
  char buf[200];
  std::snprintf(buf, sizeof buf, "instantiate=%s launch=%s sync=%s counter=%u buf[0]=%u", name_of(i),
                name_of(l), name_of(s), read_word(e.counter), read_word(e.buf));
  return buf;
}

void CUDA_CB nothing(void*) {}

int run_case(const std::string& id) {
  if (!load()) {
    std::printf("CASE %s cannot load libcuda.so.1\n", id.c_str());
    return 1;
  }
  Env e;
  if (!setup(e)) {
    std::printf("CASE %s setup failed\n", id.c_str());
    return 1;
  }
  std::string what, out;
  CUgraph g = nullptr;
  p_cuGraphCreate(&g, 0);
  CUgraphNode n = nullptr;
  if (id == "G1" || id == "G2") {
    bool ctx_field = id == "G1";
    what = ctx_field ? "cuGraphAddNode(kernel, params' ctx field set)"
                     : "cuGraphAddNode(kernel, ctx field NULL)";
    CUgraphNodeParams p = kernel_params(e, ctx_field);
    out = without_context("cuGraphAddNode", [&] { return p_cuGraphAddNode(&n, g, nullptr, nullptr, 0, &p); });
    out += "; then " + run_graph(e, g);
  } else if (id == "G3" || id == "G4") {
    bool ctx_field = id == "G3";
    what = ctx_field ? "cuGraphAddNode(memset, params' ctx field set)"
                     : "cuGraphAddNode(memset, ctx field NULL)";
    CUgraphNodeParams p = memset_params(e, 5, ctx_field);
    out = without_context("cuGraphAddNode", [&] { return p_cuGraphAddNode(&n, g, nullptr, nullptr, 0, &p); });
    out += "; then " + run_graph(e, g);
  } else if (id == "S1" || id == "S2") {
    bool kernel = id == "S1";
    what = kernel ? "cuGraphNodeSetParams(kernel node, ctx field set)"
                  : "cuGraphNodeSetParams(memset node, ctx set)";
    CUgraphNodeParams p = kernel ? kernel_params(e, true) : memset_params(e, 5, true);
    p_cuGraphAddNode(&n, g, nullptr, nullptr, 0, &p);
    CUgraphNodeParams q = kernel ? kernel_params(e, true) : memset_params(e, 9, true);
    out = without_context("cuGraphNodeSetParams", [&] { return p_cuGraphNodeSetParams(n, &q); });
    out += "; then " + run_graph(e, g);
  } else if (id == "E1" || id == "E2" || id == "E3" || id == "E4") {
    bool kernel = id == "E1" || id == "E3";
    bool generic = id == "E1" || id == "E2";
    what = std::string(generic  ? "cuGraphExecNodeSetParams"
                       : kernel ? "cuGraphExecKernelNodeSetParams"
                                : "cuGraphExecMemsetNodeSetParams(ctx arg set)") +
           (kernel ? " of a kernel node" : " of a memset node") + " (executable never launched)";
    CUgraphNodeParams p = kernel ? kernel_params(e, true) : memset_params(e, 5, true);
    p_cuGraphAddNode(&n, g, nullptr, nullptr, 0, &p);
    CUgraphExec x = nullptr;
    CUresult i = p_cuGraphInstantiateWithFlags(&x, g, 0);
    CUgraphNodeParams q = kernel ? kernel_params(e, true) : memset_params(e, 9, true);
    CUDA_KERNEL_NODE_PARAMS kp{};
    std::memcpy(&kp, &q.kernel, sizeof kp);
    CUDA_MEMSET_NODE_PARAMS mp{q.memset.dst,         q.memset.pitch, q.memset.value,
                               q.memset.elementSize, q.memset.width, q.memset.height};
    out = std::string("instantiate=") + name_of(i) + " " +
          without_context(generic ? "cuGraphExecNodeSetParams" : "cuGraphExec*NodeSetParams", [&] {
            if (generic) return p_cuGraphExecNodeSetParams(x, n, &q);
            return kernel ? p_cuGraphExecKernelNodeSetParams(x, n, &kp)
                          : p_cuGraphExecMemsetNodeSetParams(x, n, &mp, e.ctx);
          });
    CUresult l = p_cuGraphLaunch(x, e.s);
    CUresult s = p_cuStreamSynchronize(e.s);
    char buf[160];
    std::snprintf(buf, sizeof buf, "; then launch=%s sync=%s counter=%u buf[0]=%u (9 = the update applied)",
                  name_of(l), name_of(s), read_word(e.counter), read_word(e.buf));
    out += buf;
    p_cuGraphExecDestroy(x);
  } else if (id == "U1") {
    what = "cuUserObjectCreate";
    CUuserObject o = nullptr;
    out = without_context("cuUserObjectCreate", [&] {
      return p_cuUserObjectCreate(&o, nullptr, &nothing, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
    });
    if (o) out += std::string("; then release on main=") + name_of(p_cuUserObjectRelease(o, 1));
  } else if (id == "U2" || id == "U3") {
    bool retain = id == "U2";
    what = retain ? "cuGraphRetainUserObject(MOVE) on a graph" : "cuUserObjectRelease";
    CUuserObject o = nullptr;
    CUresult c = p_cuUserObjectCreate(&o, nullptr, &nothing, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
    out = std::string("create on main=") + name_of(c) + " " +
          without_context(retain ? "cuGraphRetainUserObject" : "cuUserObjectRelease", [&] {
            return retain ? p_cuGraphRetainUserObject(g, o, 1, CU_GRAPH_USER_OBJECT_MOVE)
                          : p_cuUserObjectRelease(o, 1);
          });
  } else if (id == "C1" || id == "C2" || id == "C3") {
    // The main thread captures s (RELAXED, so that its own checks cannot invalidate the capture);
    // the fresh thread makes the capture call(s).
    what = id == "C1" ? "cuStreamUpdateCaptureDependencies(SET, a node added by the main thread)"
           : id == "C2"
               ? "cuStreamGetCaptureInfo"
               : "the whole direct add: cuStreamGetCaptureInfo, cuGraphAddNode(kernel, ctx field set), "
                 "cuUserObjectCreate, cuGraphRetainUserObject(MOVE), cuStreamUpdateCaptureDependencies(SET)";
    CUresult b = p_cuStreamBeginCapture(e.s, CU_STREAM_CAPTURE_MODE_RELAXED);
    CUresult k = p_cuLaunchKernel(e.inc, 1, 1, 1, 1, 1, 1, 0, e.s, e.args, nullptr);
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CUgraph cg = nullptr;
    const CUgraphNode* deps = nullptr;
    std::size_t nd = 0;
    p_cuStreamGetCaptureInfo(e.s, &st, nullptr, &cg, &deps, nullptr, &nd);
    CUgraphNode first = nd ? deps[0] : nullptr;
    CUgraphNodeParams p = kernel_params(e, true);
    if (id == "C1") p_cuGraphAddNode(&n, cg, &first, nullptr, 1, &p);
    out = std::string("begin=") + name_of(b) + " launch=" + name_of(k) + " ";
    std::size_t seen = 0;
    out += without_context(
        id == "C1"   ? "update"
        : id == "C2" ? "info"
                     : "sequence",
        [&]() -> CUresult {
          if (id == "C1")
            return p_cuStreamUpdateCaptureDependencies(e.s, &n, nullptr, 1,
                                                       CU_STREAM_SET_CAPTURE_DEPENDENCIES);
          CUstreamCaptureStatus s2 = CU_STREAM_CAPTURE_STATUS_NONE;
          CUgraph g2 = nullptr;
          const CUgraphNode* d2 = nullptr;
          const CUgraphEdgeData* ed = nullptr;
          std::size_t n2 = 0;
          CUresult r = p_cuStreamGetCaptureInfo(e.s, &s2, nullptr, &g2, &d2, &ed, &n2);
          seen = n2;
          if (r || id == "C2") return r;
          if ((r = p_cuGraphAddNode(&n, g2, d2, ed, n2, &p))) return r;
          CUuserObject o = nullptr;
          if ((r = p_cuUserObjectCreate(&o, nullptr, &nothing, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)))
            return r;
          if ((r = p_cuGraphRetainUserObject(g2, o, 1, CU_GRAPH_USER_OBJECT_MOVE))) return r;
          return p_cuStreamUpdateCaptureDependencies(e.s, &n, nullptr, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES);
        });
    p_cuStreamGetCaptureInfo(e.s, &st, nullptr, nullptr, &deps, nullptr, &nd);
    bool is_set = nd == 1 && n && deps[0] == n;
    CUresult k2 = p_cuLaunchKernel(e.inc, 1, 1, 1, 1, 1, 1, 0, e.s, e.args, nullptr);
    CUgraph out_g = nullptr;
    CUresult end = p_cuStreamEndCapture(e.s, &out_g);
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "; deps_seen_on_thread=%zu then status=%d set_is_added_node=%d launch=%s end=%s; ", seen,
                  static_cast<int>(st), is_set ? 1 : 0, name_of(k2), name_of(end));
    out += buf;
    if (out_g) {
      out += run_graph(e, out_g);
      p_cuGraphDestroy(out_g);
    }
  } else {
    std::printf("CASE %s unknown\n", id.c_str());
    return 1;
  }
  std::printf("CASE %-3s %s :: %s\n", id.c_str(), what.c_str(), out.c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::strcmp(argv[1], "--case") == 0) return run_case(argv[2]);
  const char* ids[] = {"G1", "G2", "G3", "G4", "S1", "S2", "E1", "E2",
                       "E3", "E4", "U1", "U2", "U3", "C1", "C2", "C3"};
  int failed = 0;
  for (const char* id : ids) {
    char* args[] = {argv[0], const_cast<char*>("--case"), const_cast<char*>(id), nullptr};
    pid_t pid = 0;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, args, environ) != 0) return 1;
    int st = 0;
    waitpid(pid, &st, 0);
    if (WIFSIGNALED(st)) {
      std::printf("CASE %-3s killed by signal %d (%s)\n", id, WTERMSIG(st), strsignal(WTERMSIG(st)));
      std::fflush(stdout);
      ++failed;
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      std::printf("CASE %-3s child ended with status %d\n", id, st);
      ++failed;
    }
  }
  return failed ? 1 : 0;
}
