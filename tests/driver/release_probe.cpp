// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// A diagnostic program for the real driver, not a test (docs/gpu-results.md records its runs):
// which release and allocation calls block, or wait behind one another, while a host callback
// runs. Standalone on purpose (only <cuda.h>, the driver loaded with dlopen) so that it can be
// built once and run anywhere. Each case runs in its own child process (a hang, or a driver left
// in a bad state, stays there): set up, block a cuLaunchHostFunc callback on stream s, make the
// case's call(s) on other threads, release the callback after 1500 ms if a call has not returned,
// and print one line:  CASE <id> <what> :: <call>=<result> in <ms> ms [HUNG until released] ...
//   release_probe            every case
//   release_probe --case ID  one case, in this process
#include <cuda.h>
#include <dlfcn.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

#define ENTRY(name) decltype(&::name) p_##name = nullptr;
#define ENTRIES(X)                                                                                              \
  X(cuInit) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) X(cuStreamCreate) X(cuStreamDestroy) \
  X(cuStreamSynchronize) X(cuLaunchHostFunc) X(cuMemAlloc) X(cuMemFree) X(cuMemAllocAsync) X(cuMemFreeAsync)   \
  X(cuMemAllocFromPoolAsync) X(cuMemPoolCreate) X(cuMemPoolDestroy) X(cuMemPoolTrimTo)                         \
  X(cuDeviceGetDefaultMemPool) X(cuMemAllocHost) X(cuMemFreeHost) X(cuModuleLoadData) X(cuModuleUnload)        \
  X(cuEventCreate) X(cuEventDestroy) X(cuMemsetD8Async) X(cuGetErrorName) X(cuMemGetInfo)                    \
  X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuStreamIsCapturing) X(cuThreadExchangeStreamCaptureMode)
ENTRIES(ENTRY)
#undef ENTRY

bool load() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) return false;
  // Why dlsym of the versioned names: <cuda.h> maps cuMemAlloc to cuMemAlloc_v2 and so on; the
  // macros below expand to those names, as a program linked with -lcuda would bind them.
#define STR2(x) #x
#define STR(x) STR2(x)
#define LOAD(name) p_##name = reinterpret_cast<decltype(p_##name)>(dlsym(lib, STR(name)));
  ENTRIES(LOAD)
#undef LOAD
  return p_cuInit && p_cuMemFreeAsync;
}

const char* name_of(CUresult r) {
  const char* s = "?";
  if (p_cuGetErrorName) p_cuGetErrorName(r, &s);
  return s;
}

std::atomic<int> entered{0};
std::atomic<int> go{0};
void CUDA_CB blocker(void*) {
  entered = 1;
  while (!go.load()) std::this_thread::sleep_for(std::chrono::microseconds(200));
}

struct Env {
  CUcontext ctx = nullptr;
  CUstream s = nullptr, s2 = nullptr, s3 = nullptr;
  CUdeviceptr plain = 0, pooled = 0, from_pool = 0;
  CUmemoryPool pool = nullptr, default_pool = nullptr;
  void* pinned = nullptr;
  CUmodule mod = nullptr;
  CUevent ev = nullptr;
};

const char* const k_ptx =
    ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry noop()\n{\n ret;\n}\n";

bool setup(Env& e) {
  CUdevice dev = 0;
  if (p_cuInit(0) || p_cuDeviceGet(&dev, 0) || p_cuDevicePrimaryCtxRetain(&e.ctx, dev) || p_cuCtxSetCurrent(e.ctx))
    return false;
  p_cuStreamCreate(&e.s, CU_STREAM_NON_BLOCKING);
  p_cuStreamCreate(&e.s2, CU_STREAM_NON_BLOCKING);
  p_cuStreamCreate(&e.s3, CU_STREAM_NON_BLOCKING);
  p_cuMemAlloc(&e.plain, 1 << 20);
  p_cuMemAllocAsync(&e.pooled, 1 << 20, e.s2);
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = dev;
  p_cuMemPoolCreate(&e.pool, &props);
  p_cuMemAllocFromPoolAsync(&e.from_pool, 1 << 20, e.pool, e.s2);
  p_cuDeviceGetDefaultMemPool(&e.default_pool, dev);
  p_cuStreamSynchronize(e.s2);
  p_cuMemAllocHost(&e.pinned, 1 << 20);
  p_cuModuleLoadData(&e.mod, k_ptx);
  p_cuEventCreate(&e.ev, 0);
  return true;
}

double since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// Runs `call` on a new thread (context current there), waits up to 1500 ms, releases the
// callback if it has not returned, and describes the outcome.
template <class F>
std::string timed(Env& e, const char* name, F call, bool release_if_hung = true) {
  std::atomic<int> done{0};
  CUresult r = CUDA_SUCCESS;
  Clock::time_point t0 = Clock::now();
  double took = 0;
  std::thread th([&] {
    p_cuCtxSetCurrent(e.ctx);
    r = call();
    took = since(t0);
    done = 1;
  });
  while (!done.load() && since(t0) < 1500) std::this_thread::sleep_for(std::chrono::microseconds(200));
  bool hung = !done.load();
  if (hung && release_if_hung) go = 1;
  th.join();
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s=%s in %.3f ms%s", name, name_of(r), took,
                hung ? " [HUNG until the callback was released]" : "");
  return buf;
}

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
  if (CUresult r = p_cuLaunchHostFunc(e.s, &blocker, nullptr)) {
    std::printf("CASE %s cuLaunchHostFunc=%s\n", id.c_str(), name_of(r));
    return 1;
  }
  while (!entered.load()) std::this_thread::sleep_for(std::chrono::microseconds(200));
  std::string out;
  std::string what;
  CUdeviceptr p = 0;
  if (id == "A1") {
    what = "cuMemAllocAsync (default pool) on an idle stream";
    out = timed(e, "cuMemAllocAsync", [&] { return p_cuMemAllocAsync(&p, 1 << 20, e.s2); });
  } else if (id == "A2") {
    what = "cuMemFreeAsync of default-pool memory on an idle stream";
    out = timed(e, "cuMemFreeAsync", [&] { return p_cuMemFreeAsync(e.pooled, e.s2); });
    out += "; then " + timed(e, "cuStreamSynchronize(that stream)", [&] { return p_cuStreamSynchronize(e.s2); });
  } else if (id == "A3") {
    what = "cuMemFree (synchronous) of default-pool memory";
    out = timed(e, "cuMemFree(pool memory)", [&] { return p_cuMemFree(e.pooled); });
  } else if (id == "A4") {
    what = "cuMemFreeAsync of cuMemAlloc memory on an idle stream";
    out = timed(e, "cuMemFreeAsync(cuMemAlloc memory)", [&] { return p_cuMemFreeAsync(e.plain, e.s2); });
    out += "; then " + timed(e, "cuStreamSynchronize(that stream)", [&] { return p_cuStreamSynchronize(e.s2); });
  } else if (id == "A5") {
    what = "cuMemAllocFromPoolAsync (explicit pool) on an idle stream";
    out = timed(e, "cuMemAllocFromPoolAsync", [&] { return p_cuMemAllocFromPoolAsync(&p, 1 << 20, e.pool, e.s2); });
  } else if (id == "A6") {
    what = "cuMemFreeAsync of explicit-pool memory on an idle stream";
    out = timed(e, "cuMemFreeAsync", [&] { return p_cuMemFreeAsync(e.from_pool, e.s2); });
    out += "; then " + timed(e, "cuStreamSynchronize(that stream)", [&] { return p_cuStreamSynchronize(e.s2); });
  } else if (id == "A7") {
    what = "cuMemPoolTrimTo(default pool, 0) after a freed allocation";
    p_cuMemFreeAsync(e.pooled, e.s3);
    out = timed(e, "cuMemPoolTrimTo", [&] { return p_cuMemPoolTrimTo(e.default_pool, 0); });
  } else if (id == "A8") {
    what = "cuMemPoolDestroy of an explicit pool whose allocation was freed";
    p_cuMemFreeAsync(e.from_pool, e.s3);
    out = timed(e, "cuMemPoolDestroy", [&] { return p_cuMemPoolDestroy(e.pool); });
  } else if (id == "A9") {
    what = "cuMemPoolCreate";
    out = timed(e, "cuMemPoolCreate", [&] {
      CUmemPoolProps props{};
      props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
      props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      CUmemoryPool q = nullptr;
      return p_cuMemPoolCreate(&q, &props);
    });
  } else if (id == "A10") {
    what = "cuMemFreeHost of pinned memory";
    out = timed(e, "cuMemFreeHost", [&] { return p_cuMemFreeHost(e.pinned); });
  } else if (id == "A11") {
    what = "cuMemAllocHost";
    out = timed(e, "cuMemAllocHost", [&] {
      void* q = nullptr;
      return p_cuMemAllocHost(&q, 1 << 20);
    });
  } else if (id == "A12") {
    what = "cuModuleUnload";
    out = timed(e, "cuModuleUnload", [&] { return p_cuModuleUnload(e.mod); });
  } else if (id == "A13") {
    what = "cuEventDestroy";
    out = timed(e, "cuEventDestroy", [&] { return p_cuEventDestroy(e.ev); });
  } else if (id == "A14") {
    what = "cuStreamDestroy of an idle stream";
    out = timed(e, "cuStreamDestroy", [&] { return p_cuStreamDestroy(e.s3); });
  } else if (id == "A15") {
    what = "cuMemsetD8Async on an idle stream, then cuStreamSynchronize of it";
    out = timed(e, "cuMemsetD8Async", [&] { return p_cuMemsetD8Async(e.plain, 0, 16, e.s2); });
    out += "; then " + timed(e, "cuStreamSynchronize(that stream)", [&] { return p_cuStreamSynchronize(e.s2); });
  } else if (id == "B6" || id == "B7") {
    // Thread R waits in cuMemFreeHost (B6) or cuModuleUnload (B7); then cuMemAlloc on another.
    std::thread r([&] {
      p_cuCtxSetCurrent(e.ctx);
      if (id == "B6") p_cuMemFreeHost(e.pinned);
      else p_cuModuleUnload(e.mod);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    what = id == "B6" ? "while another thread waits in cuMemFreeHost: cuMemAlloc"
                      : "while another thread waits in cuModuleUnload: cuMemAlloc";
    out = timed(e, "cuMemAlloc", [&] { return p_cuMemAlloc(&p, 1 << 20); });
    go = 1;
    r.join();
  } else if (id == "D1" || id == "D2") {
    // Another thread captures stream s3 in GLOBAL mode; this thread (GLOBAL in D1, RELAXED in D2)
    // frees cuMemAlloc memory with cuMemFreeAsync on the idle s2: is that capture still alive?
    what = id == "D1" ? "cuMemFreeAsync on an idle stream while another thread captures (both GLOBAL)"
                      : "cuMemFreeAsync on an idle stream while another thread captures (freeing thread RELAXED)";
    std::atomic<int> begun{0}, freed{0};
    CUresult begin = CUDA_SUCCESS, end = CUDA_SUCCESS;
    std::thread c([&] {
      p_cuCtxSetCurrent(e.ctx);
      begin = p_cuStreamBeginCapture(e.s3, CU_STREAM_CAPTURE_MODE_GLOBAL);
      begun = 1;
      while (!freed.load()) std::this_thread::sleep_for(std::chrono::microseconds(200));
      CUgraph g = nullptr;
      end = p_cuStreamEndCapture(e.s3, &g);
    });
    while (!begun.load()) std::this_thread::sleep_for(std::chrono::microseconds(200));
    out = timed(e, "cuMemFreeAsync", [&] {
      if (id == "D2") {
        CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
        p_cuThreadExchangeStreamCaptureMode(&m);
      }
      return p_cuMemFreeAsync(e.plain, e.s2);
    });
    freed = 1;
    c.join();
    out += std::string("; capture begin=") + name_of(begin) + " end=" + name_of(end);
  } else if (id == "E1") {
    what = "cuMemFreeAsync of 1 GiB of cuMemAlloc memory returns it to the device (cuMemGetInfo)";
    go = 1;
    p_cuStreamSynchronize(e.s);
    size_t f0 = 0, f1 = 0, f2 = 0, total = 0;
    CUdeviceptr big = 0;
    p_cuMemGetInfo(&f0, &total);
    CUresult a = p_cuMemAlloc(&big, std::size_t{1} << 30);
    p_cuMemGetInfo(&f1, &total);
    CUresult fr = p_cuMemFreeAsync(big, e.s2);
    CUresult sy = p_cuStreamSynchronize(e.s2);
    p_cuMemGetInfo(&f2, &total);
    char buf[256];
    std::snprintf(buf, sizeof buf, "alloc=%s free_async=%s sync=%s; free MiB before=%zu after alloc=%zu after free+sync=%zu",
                  name_of(a), name_of(fr), name_of(sy), f0 >> 20, f1 >> 20, f2 >> 20);
    out = buf;
  } else if (id[0] == 'B') {
    // Thread R waits in cuMemFree for the callback; then the probed call on another thread.
    std::thread r([&] {
      p_cuCtxSetCurrent(e.ctx);
      p_cuMemFree(e.plain);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (id == "B1") {
      what = "while another thread waits in cuMemFree: cuMemAllocAsync";
      out = timed(e, "cuMemAllocAsync", [&] { return p_cuMemAllocAsync(&p, 1 << 20, e.s2); });
    } else if (id == "B2") {
      what = "while another thread waits in cuMemFree: cuMemFreeAsync of pool memory";
      out = timed(e, "cuMemFreeAsync", [&] { return p_cuMemFreeAsync(e.pooled, e.s2); });
    } else if (id == "B3") {
      what = "while another thread waits in cuMemFree: cuMemAlloc (control)";
      out = timed(e, "cuMemAlloc", [&] { return p_cuMemAlloc(&p, 1 << 20); });
    } else if (id == "B4") {
      what = "while another thread waits in cuMemFree: cuMemAllocFromPoolAsync";
      out = timed(e, "cuMemAllocFromPoolAsync", [&] { return p_cuMemAllocFromPoolAsync(&p, 1 << 20, e.pool, e.s2); });
    } else if (id == "B5") {
      what = "while another thread waits in cuMemFree: cuMemAllocHost";
      out = timed(e, "cuMemAllocHost", [&] {
        void* q = nullptr;
        return p_cuMemAllocHost(&q, 1 << 20);
      });
    }
    go = 1;
    r.join();
  } else if (id == "C1") {
    what = "cuMemFreeAsync of pool memory, then cuMemAlloc on another thread (no cuMemFree in flight)";
    out = timed(e, "cuMemFreeAsync", [&] { return p_cuMemFreeAsync(e.pooled, e.s2); });
    out += "; then " + timed(e, "cuMemAlloc", [&] { return p_cuMemAlloc(&p, 1 << 20); });
  }
  go = 1;
  p_cuStreamSynchronize(e.s);
  std::printf("CASE %-4s %s :: %s\n", id.c_str(), what.c_str(), out.c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::strcmp(argv[1], "--case") == 0) return run_case(argv[2]);
  const char* ids[] = {"A1", "A2", "A3", "A4", "A5", "A6", "A7", "A8", "A9", "A10", "A11", "A12", "A13", "A14",
                       "A15", "B1", "B2", "B3", "B4", "B5", "B6", "B7", "C1", "D1", "D2", "E1"};
  int failed = 0;
  for (const char* id : ids) {
    char* args[] = {argv[0], const_cast<char*>("--case"), const_cast<char*>(id), nullptr};
    pid_t pid = 0;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, args, environ) != 0) return 1;
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      std::printf("CASE %-4s child ended with status %d\n", id, st);
      ++failed;
    }
  }
  return failed ? 1 : 0;
}
