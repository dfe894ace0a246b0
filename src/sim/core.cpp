// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Simulator core: call prologue (counts, faults, permission), violations, kernel twins,
// devices and contexts, memory, modules, user objects and the deferred-destructor thread.
#include <sys/mman.h>
#include <unistd.h>

#include "state.hpp"
#include "../driver/symbols.hpp"

namespace tether::sim::detail {

namespace {

struct Counters {
  std::array<std::atomic<std::uint64_t>, tether::detail::entry_count> calls{};
};

struct Fault {
  int entry;  // -1: any entry
  std::uint64_t remaining;
  CUresult result;
};

struct Faults {
  std::atomic<int> pending{0};
  std::mutex mu;
  std::vector<Fault> list;
  std::atomic<std::uint64_t> injected{0};
};

struct Violations {
  std::mutex mu;
  std::vector<Violation> list;
  std::atomic<ViolationMode> mode{ViolationMode::print};
  std::atomic<bool> mode_set{false};  // set_violation_mode was called: the environment does not override it
  std::uint64_t recorded = 0;         // every violation of the process (clear_violations keeps it)
  int expecting = 0;                  // live ExpectViolations scopes, on all threads
  bool noted = false;                 // the one-time line on how to change the mode was printed
};

struct Twins {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<const Twin>> by_name;
  // Twins of __global__ functions by the address of their host stub (tether::kernel(&fn)).
  std::unordered_map<const void*, std::shared_ptr<const Twin>> by_function;
};

// The simulator's counterpart of the CUDA runtime's registration of a program's kernels: one
// function per registered address, in no module (nothing unloads it, as nothing unloads the
// runtime's code before exit), under the objects' mutex. Why the attributes are kept apart: a
// replaced twin gets a new function, which shares them, as a module's functions of one name do.
struct Registered {
  std::unordered_map<const void*, Function*> functions;
  std::unordered_map<const void*, std::shared_ptr<FuncAttrs>> attrs;
};

struct Config {
  std::mutex mu;
  Options options;
  bool opened = false;
};

// Which device pairs cannot access each other's memory: one bit per peer, per device. Written once
// when the simulator opens (init_topology, before its table is handed out), read-only afterwards.
struct Topology {
  std::vector<std::uint64_t> no_peer;
};

struct Devices {
  std::once_flag once;
  std::vector<Ctx*> primary;  // one per device, immortal
};

// Device memory: one reserved address range; blocks are bump-allocated, never reused, and
// unmapped (PROT_NONE) when freed, so a stale pointer is always recognised as freed.
struct Memory {
  std::mutex mu;
  std::uintptr_t base = 0;
  std::size_t reserved = 0;
  std::size_t next = 0;
  struct Block {
    std::size_t size;
    std::size_t mapped;
    bool device;
    bool live;  // for a graph allocation: backed now
    int ordinal;
    bool graph = false;
    bool outstanding = false;  // graph allocation: made by an enqueued launch, not freed since
  };
  std::map<std::uintptr_t, Block> blocks;
  std::vector<std::size_t> used;  // per device
  // Graph allocations backed now, and the memory associated with graphs, per device
  // (cuDeviceGetGraphMemAttribute): as on the H200, in 32 MiB granules that grow to cover what is
  // backed at once and are not given back at a free or when the executable goes (GM1).
  std::vector<std::size_t> graph_used, graph_high;
  std::size_t live_device = 0;
  std::size_t live_host = 0;
};

struct Objects {
  std::mutex mu;
  std::unordered_set<UserObj*> user_objects;  // every user object ever created (zombies kept)
  std::atomic<std::size_t> live_user_objects{0};
  std::unordered_set<Module*> modules;
  std::unordered_set<Function*> functions;
  std::atomic<std::size_t> live_modules{0};
};

// The one thread that runs every host function of the process (ctx_block_probe 4l, T).
struct Callbacks {
  struct Job {
    CUhostFn fn;
    void* data;
    bool done = false;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Job*> q;
  std::uint64_t started = 0;
  std::uint64_t finished = 0;
  bool thread_started = false;
};

struct DeferredTask {
  Clock::time_point due;
  std::function<void()> fn;
};

struct Deferred {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<DeferredTask> q;
  std::size_t running = 0;
  bool started = false;
};

constexpr std::size_t kPage = 4096;

Counters& counters() { return immortal<Counters>(); }
Faults& faults() { return immortal<Faults>(); }
Violations& violations_state() { return immortal<Violations>(); }
Twins& twins() { return immortal<Twins>(); }
Registered& registered() { return immortal<Registered>(); }
Config& config() { return immortal<Config>(); }
Devices& devices() { return immortal<Devices>(); }
Topology& topology() { return immortal<Topology>(); }
Memory& memory() { return immortal<Memory>(); }
Objects& objects() { return immortal<Objects>(); }
Deferred& deferred() { return immortal<Deferred>(); }
Callbacks& callbacks() { return immortal<Callbacks>(); }
// Held by cuMemFree / cuMemFreeHost for their whole duration (including the wait for host
// functions) and passed through by the allocations: on the H200 a cuMemAlloc on another thread
// did not return while a cuMemFree waited for a blocked callback (block_probe "free" mode), nor
// did cuStreamCreate (the callback-blocking conformance case on the H200, 2026-12-01).
std::mutex& memory_gate_impl() { return immortal<std::mutex>(); }
}  // namespace
std::mutex& memory_gate() { return memory_gate_impl(); }
namespace {

bool allowed_in_destructor(Entry e) {
  return e == Entry::cuStreamQuery || e == Entry::cuUserObjectRelease || e == Entry::cuUserObjectRetain ||
         e == Entry::cuGetErrorName || e == Entry::cuGetErrorString;
}

// What the driver served inside a host function: cuStreamQuery, and cuUserObjectCreate,
// cuStreamGetCaptureInfo and cuGraphRetainUserObject (capture_facts c2i, c2j, also on a capture's
// graph while it captures). They are still recorded as violations: the CUDA documentation forbids
// any CUDA call there.
bool allowed_in_callback(Entry e) {
  return e == Entry::cuStreamQuery || e == Entry::cuUserObjectCreate || e == Entry::cuStreamGetCaptureInfo ||
         e == Entry::cuGraphRetainUserObject;
}

void init_devices() {
  Devices& d = devices();
  std::call_once(d.once, [&] {
    Config& c = config();
    std::lock_guard lock(c.mu);
    c.opened = true;
    if (const char* env = std::getenv("TETHER_SIM_DEVICES")) {
      int n = std::atoi(env);
      if (n >= 1 && n <= 64) c.options.devices = n;
    }
    for (int i = 0; i < c.options.devices; ++i) {
      Ctx* ctx = new Ctx;
      ctx->device = i;
      d.primary.push_back(ctx);
    }
    memory().used.assign(static_cast<std::size_t>(c.options.devices), 0);
    memory().graph_used.assign(static_cast<std::size_t>(c.options.devices), 0);
    memory().graph_high.assign(static_cast<std::size_t>(c.options.devices), 0);
  });
}

}  // namespace

namespace {
thread_local bool t_state_gone = false;  // trivially destructible: readable during thread exit
}  // namespace

ThreadState& ts() {
  // Why a fallback: driver calls can still come after this thread's thread-locals were destroyed
  // (owners released by the reclaimer's drain at process exit, on the main thread).
  if (t_state_gone) {
    static ThreadState* fallback = new ThreadState;
    return *fallback;
  }
  struct Holder {
    ThreadState state;
    ~Holder() { t_state_gone = true; }
  };
  thread_local Holder holder;
  return holder.state;
}

CUresult enter(Entry e) {
  counters().calls[tether::detail::index(e)].fetch_add(1, std::memory_order_relaxed);
  ThreadState& t = ts();
  if ((t.in_destructor || t.in_callback) && e != Entry::cuGetErrorName && e != Entry::cuGetErrorString) {
    bool dtor = t.in_destructor > 0;
    record_violation(dtor ? ViolationKind::call_in_destructor : ViolationKind::call_in_callback,
                     tether::detail::entry_name(e),
                     fmt::format("{} called from inside a {}", tether::detail::entry_name(e),
                                 dtor ? "user-object destructor" : "host function"));
    if (!(dtor && allowed_in_destructor(e)) && !(!dtor && allowed_in_callback(e)))
      return fail(CUDA_ERROR_NOT_PERMITTED, "the simulator, like the real driver, refuses CUDA calls from "
                                            "user-object destructors and host functions");
  }
  Faults& f = faults();
  if (f.pending.load(std::memory_order_acquire) > 0) {
    std::lock_guard lock(f.mu);
    int idx = static_cast<int>(tether::detail::index(e));
    for (auto it = f.list.begin(); it != f.list.end(); ++it) {
      if (it->entry != -1 && it->entry != idx) continue;
      if (--it->remaining == 0) {
        CUresult r = it->result;
        f.list.erase(it);
        f.pending.fetch_sub(1, std::memory_order_release);
        f.injected.fetch_add(1, std::memory_order_relaxed);
        return fail(r, fmt::format("fault injected by tether::sim::fail_call into {}", tether::detail::entry_name(e)));
      }
    }
  }
  // Why error-name lookups keep it: they describe the failed call the explanation belongs to.
  if (e != Entry::cuGetErrorName && e != Entry::cuGetErrorString) t.explain.clear();
  return CUDA_SUCCESS;
}

CUresult fail(CUresult r, std::string explanation) {
  ts().explain = std::move(explanation);
  return r;
}

namespace {

// "0-1,2-3" -> {{0, 1}, {2, 3}}; nullopt for anything else (spaces around the numbers are allowed).
std::optional<std::vector<std::pair<int, int>>> parse_pairs(std::string_view s) {
  std::vector<std::pair<int, int>> out;
  auto number = [](std::string_view t, int& v) {
    while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
    while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
    if (t.empty() || t.size() > 4) return false;
    v = 0;
    for (char ch : t) {
      if (ch < '0' || ch > '9') return false;
      v = v * 10 + (ch - '0');
    }
    return true;
  };
  while (!s.empty()) {
    std::size_t comma = s.find(',');
    std::string_view item = s.substr(0, comma);
    s = comma == std::string_view::npos ? std::string_view() : s.substr(comma + 1);
    std::size_t dash = item.find('-');
    int a = 0, b = 0;
    if (dash == std::string_view::npos || !number(item.substr(0, dash), a) || !number(item.substr(dash + 1), b))
      return std::nullopt;
    out.emplace_back(a, b);
    if (comma != std::string_view::npos && s.empty()) return std::nullopt;  // a trailing comma
  }
  return out;
}

// The topology, from Options::no_peer and TETHER_SIM_NO_PEER, when the simulator opens (fill_core,
// inside Runtime::simulated: a bad value is refused there, before any driver call). Throws UsageError.
void init_topology() {
  std::vector<std::pair<int, int>> pairs;
  {
    std::lock_guard lock(config().mu);
    pairs = config().options.no_peer;
  }
  if (const char* env = std::getenv("TETHER_SIM_NO_PEER"); env && *env) {
    auto more = parse_pairs(env);
    if (!more)
      throw UsageError(fmt::format("Runtime::simulated: TETHER_SIM_NO_PEER is '{}'; give the device pairs that cannot "
                                   "access each other's memory as ordinals joined by '-' and separated by ',' (for "
                                   "example 0-1,2-3), or unset it",
                                   env));
    pairs.insert(pairs.end(), more->begin(), more->end());
  }
  const int n = device_count();
  std::vector<std::uint64_t> masks(static_cast<std::size_t>(n), 0);
  for (auto [a, b] : pairs) {
    if (a < 0 || b < 0 || a >= n || b >= n || a == b)
      throw UsageError(fmt::format("Runtime::simulated: the topology names the pair {}-{}, but the simulator has {} "
                                   "device{} (ordinals 0 to {}) and a pair needs two different ones "
                                   "(tether::sim::Options::no_peer, TETHER_SIM_NO_PEER)",
                                   a, b, n, n == 1 ? "" : "s", n - 1));
    masks[static_cast<std::size_t>(a)] |= std::uint64_t{1} << b;
    masks[static_cast<std::size_t>(b)] |= std::uint64_t{1} << a;
  }
  topology().no_peer = std::move(masks);
}

}  // namespace

namespace {

// What each kind means for a program on the real driver, and what to do: the second half of the
// printed line, for a user who has not read docs/simulator.md.
std::string_view violation_hint(ViolationKind kind) noexcept {
  switch (kind) {
    case ViolationKind::use_after_free:
      return "on a GPU this reads, corrupts or frees again memory that was freed (the simulator did not do "
             "it); keep memory alive until the work that uses it has run: hand a buffer to its node "
             "(std::move or share()) rather than tether::unowned, or synchronize before freeing it";
    case ViolationKind::over_release:
      return "released more often than retained: on a GPU this frees an object that is still in use";
    case ViolationKind::call_in_destructor:
      return "the driver refuses CUDA calls inside a user-object destructor: release resources there without "
             "calling CUDA";
    case ViolationKind::call_in_callback:
      return "the CUDA documentation forbids CUDA calls inside a host function: make them from a host thread";
    case ViolationKind::double_node_destroy: return "the real driver crashes on this: destroy each node once";
    case ViolationKind::self_child: return "the real driver crashes on this: a graph cannot contain itself";
    case ViolationKind::destroyed_node_use:
      return "the real driver does not check node handles and may misbehave: stop using a node once it is "
             "destroyed";
    case ViolationKind::unloaded_module_use:
      return "the kernel did not run: keep its Module or library loaded until its launches have completed";
    case ViolationKind::destroyed_event_use:
      return "keep the event alive until the work that uses it has completed";
    case ViolationKind::null_argument: return "the real driver dereferences this NULL pointer and crashes";
    case ViolationKind::capture_into_capturing_graph:
      return "the real driver crashes on this: end the other capture into that graph first";
    case ViolationKind::concurrent_exec_destroy:
      return "the real driver double-frees: destroy the executables before their graph, not concurrently";
    case ViolationKind::no_current_context:
      return "the real driver crashes on this: make the executable's context current first (cuCtxSetCurrent)";
    case ViolationKind::peer_access:
      return "on a GPU the kernel faults with an illegal address: enable peer access from the kernel's context "
             "to the memory's device first (tether::Context::enable_peer_access, cuCtxEnablePeerAccess)";
    case ViolationKind::nccl_mismatch:
      return "real NCCL hangs or corrupts memory when ranks disagree: every rank must issue (and capture) the same "
             "collectives in the same order, and each send must match its receive";
  }
  return "";
}

}  // namespace

void record_violation(ViolationKind kind, std::string_view entry, std::string detail) {
  Violations& v = violations_state();
  // Why the line is built before the lock and written with one call: violations are recorded on
  // the stream and driver threads too, and one write keeps concurrent lines whole.
  std::string line =
      fmt::format("tether simulator: violation {} in {}: {}; {}\n", to_string(kind),
                  entry.empty() ? std::string_view("a launch") : entry, detail, violation_hint(kind));
  bool expected = false;
  bool note = false;
  const ViolationMode mode = v.mode.load();
  {
    std::lock_guard lock(v.mu);
    v.list.push_back(Violation{kind, std::string(entry), std::move(detail)});
    ++v.recorded;
    expected = v.expecting > 0;
    if (!expected && mode == ViolationMode::print && !v.noted) note = v.noted = true;
  }
  if (expected || mode == ViolationMode::quiet) return;
  if (note)
    line += "tether simulator: (each violation is printed once, when it happens, and logged in "
            "tether::sim::violations(); TETHER_SIM_VIOLATIONS=fatal aborts at the first, =quiet only logs)\n";
  if (mode == ViolationMode::fatal) line += "tether simulator: aborting (TETHER_SIM_VIOLATIONS=fatal)\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  if (mode == ViolationMode::fatal) std::abort();
}

void init_violation_mode() {
  const char* env = std::getenv("TETHER_SIM_VIOLATIONS");
  if (env == nullptr || *env == '\0') return;
  std::string_view s(env);
  ViolationMode m{};
  if (s == "print") m = ViolationMode::print;
  else if (s == "fatal") m = ViolationMode::fatal;
  else if (s == "quiet") m = ViolationMode::quiet;
  else
    throw UsageError(
        fmt::format("Runtime::simulated: TETHER_SIM_VIOLATIONS is '{}'; set it to print (the default: "
                    "print each violation on stderr), fatal (print it and abort) or quiet (only log "
                    "it), or unset it",
                    s));
  if (!violations_state().mode_set.load()) violations_state().mode.store(m);
}

// ----------------------------------------------------------------------------- devices, contexts

int device_count() {
  init_devices();
  return static_cast<int>(devices().primary.size());
}

Ctx* ctx_of(CUcontext c) {
  init_devices();
  for (Ctx* p : devices().primary)
    if (reinterpret_cast<CUcontext>(p) == c) return p;
  return nullptr;
}
CUcontext handle(Ctx* c) { return reinterpret_cast<CUcontext>(c); }
Ctx* current_ctx() { return ts().current; }

bool peer_supported(int dev, int peer) {
  if (dev == peer) return false;  // cuDeviceCanAccessPeer(dev, dev) is 0 on the real driver
  const std::vector<std::uint64_t>& no = topology().no_peer;
  return static_cast<std::size_t>(dev) >= no.size() || !((no[static_cast<std::size_t>(dev)] >> peer) & 1u);
}

std::uint64_t coresident_blocks(std::uint64_t threads, std::uint64_t shared) {
  std::uint64_t warps = (threads + 31) / 32;
  std::uint64_t by_threads = warps ? h200::threads_per_sm / (warps * 32) : 0;
  std::uint64_t by_shared = h200::shared_per_sm / (shared + h200::reserved_shared_per_block);
  std::uint64_t per_sm = std::min<std::uint64_t>({std::uint64_t{h200::blocks_per_sm}, by_threads, by_shared});
  return per_sm * h200::sms;
}

int clamp_priority(int priority) {
  return std::clamp(priority, h200::greatest_priority, h200::least_priority);
}

namespace {
// A parameter's alignment: the twin's, or a scalar's (the largest power of two dividing its size,
// at most 8) when the twin was registered without one.
std::size_t param_align(const ParamInfo& p) {
  if (p.align) return p.align;
  std::size_t a = 1;
  while (a < 8 && p.size % (a * 2) == 0) a *= 2;
  return a;
}
}  // namespace

namespace {

CUresult sim_cuInit(unsigned flags) {
  TETHER_SIM_ENTER(cuInit);
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  init_devices();
  return CUDA_SUCCESS;
}
CUresult sim_cuDriverGetVersion(int* v) {
  TETHER_SIM_ENTER(cuDriverGetVersion);
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = CUDA_VERSION;
  return CUDA_SUCCESS;
}
CUresult sim_cuGetErrorName(CUresult r, const char** s) {
  TETHER_SIM_ENTER(cuGetErrorName);
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  std::string_view n = result_name(static_cast<int>(r));
  if (n.rfind("CUDA_ERROR_", 0) == 0 && result_description(static_cast<int>(r)).empty()) {
    *s = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
  *s = n.data();  // names in the table are string literals
  return CUDA_SUCCESS;
}
CUresult sim_cuGetErrorString(CUresult r, const char** s) {
  TETHER_SIM_ENTER(cuGetErrorString);
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  std::string_view d = result_description(static_cast<int>(r));
  if (d.empty()) {
    *s = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
  *s = d.data();
  return CUDA_SUCCESS;
}
CUresult sim_cuDeviceGetCount(int* n) {
  TETHER_SIM_ENTER(cuDeviceGetCount);
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  *n = device_count();
  return CUDA_SUCCESS;
}
CUresult sim_cuDeviceGet(CUdevice* d, int ordinal) {
  TETHER_SIM_ENTER(cuDeviceGet);
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal < 0 || ordinal >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}
bool valid_device(CUdevice d) { return d >= 0 && d < device_count(); }
CUresult sim_cuDeviceGetName(char* name, int len, CUdevice d) {
  TETHER_SIM_ENTER(cuDeviceGetName);
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<std::size_t>(len), "tether simulated device %d", d);
  return CUDA_SUCCESS;
}
CUresult sim_cuDeviceGetAttribute(int* pi, CUdevice_attribute a, CUdevice d) {
  TETHER_SIM_ENTER(cuDeviceGetAttribute);
  if (!pi) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 132; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *pi = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *pi = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *pi = 64; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *pi = 1; break;
    // The H200's launch limits (launch_attr_probe info/*), which the launch-attribute rules use.
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *pi = h200::shared_per_block; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *pi = h200::shared_per_block_optin; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *pi = h200::shared_per_sm; break;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: *pi = h200::reserved_shared_per_block; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: *pi = h200::blocks_per_sm; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *pi = h200::threads_per_sm; break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE: *pi = 134217728; break;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE: *pi = 39321600; break;
    default: *pi = 0; break;
  }
  return CUDA_SUCCESS;
}
CUresult sim_cuDeviceTotalMem(std::size_t* bytes, CUdevice d) {
  TETHER_SIM_ENTER(cuDeviceTotalMem);
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard lock(config().mu);
  *bytes = config().options.memory_per_device;
  return CUDA_SUCCESS;
}
CUresult sim_cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice d) {
  TETHER_SIM_ENTER(cuDevicePrimaryCtxRetain);
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  Ctx* c = devices().primary[static_cast<std::size_t>(d)];
  std::lock_guard lock(memory().mu);
  ++c->primary_refs;
  *pctx = handle(c);
  return CUDA_SUCCESS;
}
CUresult sim_cuDevicePrimaryCtxRelease(CUdevice d) {
  TETHER_SIM_ENTER(cuDevicePrimaryCtxRelease);
  if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  Ctx* c = devices().primary[static_cast<std::size_t>(d)];
  std::lock_guard lock(memory().mu);
  if (c->primary_refs <= 0) {
    record_violation(ViolationKind::over_release, "cuDevicePrimaryCtxRelease",
                     fmt::format("primary context of device {} released more often than retained", d));
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  // Why the context stays usable at zero: the real driver resets it, but tether never relies on
  // that and keeping it keeps stale streams from crashing the simulator.
  if (--c->primary_refs == 0) {
    // What the reset does to peer access, modelled (not observed on a GPU): the context forgets
    // whom it enabled, and the others' mappings of its memory go with its allocations, so each
    // must enable access to the next context of this device again.
    c->peers.store(0);
    for (Ctx* other : devices().primary) other->peers.fetch_and(~(std::uint64_t{1} << d));
  }
  return CUDA_SUCCESS;
}
CUresult sim_cuCtxGetCurrent(CUcontext* pctx) {
  TETHER_SIM_ENTER(cuCtxGetCurrent);
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  *pctx = handle(ts().current);
  return CUDA_SUCCESS;
}
CUresult sim_cuCtxSetCurrent(CUcontext c) {
  TETHER_SIM_ENTER(cuCtxSetCurrent);
  if (c == nullptr) {
    ts().current = nullptr;
    return CUDA_SUCCESS;
  }
  Ctx* p = ctx_of(c);
  if (!p) return CUDA_ERROR_INVALID_CONTEXT;
  ts().current = p;
  return CUDA_SUCCESS;
}
CUresult sim_cuCtxPushCurrent(CUcontext c) {
  TETHER_SIM_ENTER(cuCtxPushCurrent);
  Ctx* p = ctx_of(c);
  if (!p) return CUDA_ERROR_INVALID_CONTEXT;
  ts().stack.push_back(ts().current);
  ts().current = p;
  return CUDA_SUCCESS;
}
CUresult sim_cuCtxPopCurrent(CUcontext* pctx) {
  TETHER_SIM_ENTER(cuCtxPopCurrent);
  ThreadState& t = ts();
  if (!t.current) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx) *pctx = handle(t.current);
  if (t.stack.empty()) {
    t.current = nullptr;
  } else {
    t.current = t.stack.back();
    t.stack.pop_back();
  }
  return CUDA_SUCCESS;
}
CUresult sim_cuCtxGetDevice(CUdevice* d) {
  TETHER_SIM_ENTER(cuCtxGetDevice);
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  if (!ts().current) return CUDA_ERROR_INVALID_CONTEXT;
  *d = ts().current->device;
  return CUDA_SUCCESS;
}
CUresult sim_cuCtxGetStreamPriorityRange(int* least, int* greatest) {
  TETHER_SIM_ENTER(cuCtxGetStreamPriorityRange);
  if (!ts().current) return fail(CUDA_ERROR_INVALID_CONTEXT, "no context is current on this thread");
  // Either pointer may be NULL, as on the H200 (launch_attr_probe prio/range).
  if (least) *least = h200::least_priority;
  if (greatest) *greatest = h200::greatest_priority;
  return CUDA_SUCCESS;
}

// ----------------------------------------------------------------------------- peer access

CUresult sim_cuDeviceCanAccessPeer(int* can, CUdevice dev, CUdevice peer) {
  TETHER_SIM_ENTER(cuDeviceCanAccessPeer);
  if (!can) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev) || !valid_device(peer)) return CUDA_ERROR_INVALID_DEVICE;
  *can = peer_supported(dev, peer) ? 1 : 0;
  return CUDA_SUCCESS;
}
CUresult sim_cuCtxEnablePeerAccess(CUcontext peer_ctx, unsigned flags) {
  TETHER_SIM_ENTER(cuCtxEnablePeerAccess);
  Ctx* c = current_ctx();
  if (!c) return fail(CUDA_ERROR_INVALID_CONTEXT, "cuCtxEnablePeerAccess needs a current context (the one that gains access)");
  if (flags != 0) return fail(CUDA_ERROR_INVALID_VALUE, "cuCtxEnablePeerAccess: Flags is reserved and must be 0");
  Ctx* p = ctx_of(peer_ctx);
  if (!p) return fail(CUDA_ERROR_INVALID_CONTEXT, "cuCtxEnablePeerAccess: the peer is not a context");
  // cuda.h says CUDA_ERROR_INVALID_CONTEXT "if the current context is peerContext"; the H200
  // answered CUDA_ERROR_PEER_ACCESS_UNSUPPORTED (a device cannot peer-access itself:
  // cuDeviceCanAccessPeer(d, d) is 0), as tests/multi checks on both drivers.
  if (p->device == c->device)
    return fail(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
                fmt::format("cuCtxEnablePeerAccess: the peer context is the current context (device {}; its memory "
                            "needs no peer access)",
                            c->device));
  if (!peer_supported(c->device, p->device))
    return fail(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
                fmt::format("device {} cannot access the memory of device {} (the simulator's topology: "
                            "tether::sim::Options::no_peer, TETHER_SIM_NO_PEER)",
                            c->device, p->device));
  const std::uint64_t bit = std::uint64_t{1} << p->device;
  if (c->peers.fetch_or(bit) & bit)
    return fail(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,
                fmt::format("device {}'s context already has access to device {}'s memory", c->device, p->device));
  return CUDA_SUCCESS;
}
CUresult sim_cuCtxDisablePeerAccess(CUcontext peer_ctx) {
  TETHER_SIM_ENTER(cuCtxDisablePeerAccess);
  Ctx* c = current_ctx();
  if (!c) return fail(CUDA_ERROR_INVALID_CONTEXT, "cuCtxDisablePeerAccess needs a current context");
  Ctx* p = ctx_of(peer_ctx);
  if (!p) return fail(CUDA_ERROR_INVALID_CONTEXT, "cuCtxDisablePeerAccess: the peer is not a context");
  const std::uint64_t bit = std::uint64_t{1} << p->device;
  if (!(c->peers.fetch_and(~bit) & bit))
    return fail(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED,
                fmt::format("device {}'s context has no access to device {}'s memory to disable", c->device,
                            p->device));
  return CUDA_SUCCESS;
}

// ----------------------------------------------------------------------------- memory

CUresult need_ctx() {
  return current_ctx() ? CUDA_SUCCESS
                       : fail(CUDA_ERROR_INVALID_CONTEXT, "no context is current on this thread (cuCtxSetCurrent)");
}

CUresult sim_cuMemAlloc(CUdeviceptr* dptr, std::size_t bytes) {
  TETHER_SIM_ENTER(cuMemAlloc);
  if (!dptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = need_ctx()) return r;
  if (CUresult r = unsafe_call_guard("cuMemAlloc")) return r;
  { std::lock_guard gate(memory_gate()); }
  CUresult err = CUDA_SUCCESS;
  std::uintptr_t p = device_alloc(bytes, current_ctx()->device, err);
  if (err != CUDA_SUCCESS) return err;
  *dptr = static_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}
CUresult sim_cuMemFree(CUdeviceptr dptr) {
  TETHER_SIM_ENTER(cuMemFree);
  if (CUresult r = need_ctx()) return r;
  if (dptr == 0) return CUDA_SUCCESS;
  if (CUresult r = unsafe_call_guard("cuMemFree")) return r;
  std::lock_guard gate(memory_gate());
  wait_callbacks_idle();
  Memory& m = memory();
  std::uintptr_t p = static_cast<std::uintptr_t>(dptr);
  if (is_graph_block(p)) {
    // A graph allocation left live by its graph: freed outside it. Why the streams are drained
    // first: the launch that backs it may still be queued, and cuMemFree is synchronous.
    if (!graph_outstanding(p))
      return fail(CUDA_ERROR_INVALID_VALUE,
                  "cuMemFree of a graph allocation that no launch left allocated (not launched yet, freed by "
                  "its graph or freed already)");
    set_graph_outstanding(p, false);
    for (Stream* s : all_streams())
      if (s->ctx == current_ctx()) s->wait_idle();
    wait_destroyed_streams(current_ctx());
    graph_unmap(p);
    return CUDA_SUCCESS;
  }
  {
    std::lock_guard lock(m.mu);
    auto it = m.blocks.find(p);
    if (it == m.blocks.end() || !it->second.device) return CUDA_ERROR_INVALID_VALUE;
    if (!it->second.live) {
      record_violation(ViolationKind::use_after_free, "cuMemFree",
                       fmt::format("cuMemFree of device memory 0x{:x} that was already freed", dptr));
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  device_free_block(static_cast<std::uintptr_t>(dptr));
  pool_block_freed(static_cast<std::uintptr_t>(dptr));  // memory from a pool may be freed so too
  return CUDA_SUCCESS;
}
CUresult sim_cuMemAllocHost(void** pp, std::size_t bytes) {
  TETHER_SIM_ENTER(cuMemAllocHost);
  if (!pp || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = need_ctx()) return r;
  if (CUresult r = unsafe_call_guard("cuMemAllocHost")) return r;
  { std::lock_guard gate(memory_gate()); }
  std::size_t mapped = (bytes + kPage - 1) / kPage * kPage;
  void* p = std::aligned_alloc(kPage, mapped);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  Memory& m = memory();
  std::lock_guard lock(m.mu);
  m.blocks[reinterpret_cast<std::uintptr_t>(p)] = {bytes, mapped, false, true, current_ctx()->device};
  ++m.live_host;
  *pp = p;
  return CUDA_SUCCESS;
}
CUresult sim_cuMemFreeHost(void* p) {
  TETHER_SIM_ENTER(cuMemFreeHost);
  if (CUresult r = need_ctx()) return r;
  // Not observed on the H200: it blocks like cuMemFree here (the conservative assumption).
  std::lock_guard gate(memory_gate());
  wait_callbacks_idle();
  Memory& m = memory();
  std::lock_guard lock(m.mu);
  auto it = m.blocks.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == m.blocks.end() || it->second.device) return CUDA_ERROR_INVALID_VALUE;
  if (!it->second.live) {
    record_violation(ViolationKind::use_after_free, "cuMemFreeHost", "cuMemFreeHost of pinned memory already freed");
    return CUDA_ERROR_INVALID_VALUE;
  }
  // Why the block is kept (not returned to the heap): its address must never be handed out again,
  // so that a later use of the stale pointer is recognised as a use after free.
  it->second.live = false;
  --m.live_host;
  return CUDA_SUCCESS;
}
CUresult sim_cuMemGetInfo(std::size_t* free_bytes, std::size_t* total) {
  TETHER_SIM_ENTER(cuMemGetInfo);
  if (!free_bytes || !total) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = need_ctx()) return r;
  std::size_t cap;
  {
    std::lock_guard lock(config().mu);
    cap = config().options.memory_per_device;
  }
  std::lock_guard lock(memory().mu);
  std::size_t used = memory().used[static_cast<std::size_t>(current_ctx()->device)];
  *total = cap;
  *free_bytes = cap - std::min(cap, used);
  return CUDA_SUCCESS;
}
CUresult sim_cuDeviceGetGraphMemAttribute(CUdevice d, CUgraphMem_attribute attr, void* value) {
  TETHER_SIM_ENTER(cuDeviceGetGraphMemAttribute);
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  if (d < 0 || d >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  Memory& m = memory();
  std::lock_guard lock(m.mu);
  const auto dev = static_cast<std::size_t>(d);
  switch (attr) {  // associated memory only grows (no trim): current and highest agree
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT:
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
      *static_cast<cuuint64_t*>(value) = m.graph_high[dev];
      return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

// ----------------------------------------------------------------------------- modules

CUresult sim_cuModuleLoadData(CUmodule* mod, const void* image) {
  TETHER_SIM_ENTER(cuModuleLoadData);
  if (!mod || !image) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = need_ctx()) return r;
  wait_callbacks_idle();  // ctx_block_probe 4m
  Module* m = new Module;
  m->ctx = current_ctx();
  Objects& o = objects();
  std::lock_guard lock(o.mu);
  o.modules.insert(m);
  o.live_modules.fetch_add(1);
  *mod = reinterpret_cast<CUmodule>(m);
  return CUDA_SUCCESS;
}
Module* module_of(void* h, bool library) {
  Objects& o = objects();
  std::lock_guard lock(o.mu);
  Module* m = static_cast<Module*>(h);
  return o.modules.count(m) && m->library == library ? m : nullptr;
}
CUresult unload(void* h, bool library, const char* entry) {
  Module* m = module_of(h, library);
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  // Not observed on the H200: unloading blocks like loading (the conservative assumption).
  wait_callbacks_idle();
  std::lock_guard lock(objects().mu);
  if (m->unloaded) {
    record_violation(ViolationKind::over_release, entry, "module or library unloaded twice");
    return CUDA_ERROR_INVALID_HANDLE;
  }
  m->unloaded = true;
  objects().live_modules.fetch_sub(1);
  return CUDA_SUCCESS;
}
CUresult sim_cuModuleUnload(CUmodule m) {
  TETHER_SIM_ENTER(cuModuleUnload);
  return unload(m, false, "cuModuleUnload");
}
CUresult get_function(Function** out, void* h, bool library, const char* name) {
  if (!out || !name) return CUDA_ERROR_INVALID_VALUE;
  Module* m = module_of(h, library);
  if (!m || m->unloaded) return CUDA_ERROR_INVALID_HANDLE;
  std::shared_ptr<const Twin> twin = find_twin(name);
  if (!twin)
    return fail(CUDA_ERROR_NOT_FOUND,
                fmt::format("the simulator has no twin for kernel '{}'; register one with "
                            "tether::sim::register_kernel<ParamTypes...>(\"{}\", body) before getting the function",
                            name, name));
  std::lock_guard lock(objects().mu);
  // The same handle for the same kernel of a module, as on the H200 (launch_attr_probe
  // func/same_handle), unless the twin was replaced since: the old handle keeps running the twin it
  // was made with.
  Function*& cached = m->functions[name];
  if (cached && cached->twin == twin) {
    *out = cached;
    return CUDA_SUCCESS;
  }
  std::shared_ptr<FuncAttrs>& attrs = m->attrs[name];
  if (!attrs) attrs = std::make_shared<FuncAttrs>();
  Function* f = new Function{name, std::move(twin), m, attrs};
  cached = f;
  objects().functions.insert(f);
  *out = f;
  return CUDA_SUCCESS;
}
CUresult sim_cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  TETHER_SIM_ENTER(cuModuleGetFunction);
  Function* fn = nullptr;
  CUresult r = get_function(&fn, m, false, name);
  if (r == CUDA_SUCCESS) *f = reinterpret_cast<CUfunction>(fn);
  return r;
}
CUresult sim_cuLibraryLoadData(CUlibrary* lib, const void* code, CUjit_option*, void**, unsigned, CUlibraryOption*,
                               void**, unsigned) {
  TETHER_SIM_ENTER(cuLibraryLoadData);
  if (!lib || !code) return CUDA_ERROR_INVALID_VALUE;
  wait_callbacks_idle();  // as cuModuleLoadData (not observed for libraries)
  Module* m = new Module;
  m->library = true;
  std::lock_guard lock(objects().mu);
  objects().modules.insert(m);
  objects().live_modules.fetch_add(1);
  *lib = reinterpret_cast<CUlibrary>(m);
  return CUDA_SUCCESS;
}
CUresult sim_cuLibraryUnload(CUlibrary l) {
  TETHER_SIM_ENTER(cuLibraryUnload);
  return unload(l, true, "cuLibraryUnload");
}
CUresult sim_cuLibraryGetKernel(CUkernel* k, CUlibrary l, const char* name) {
  TETHER_SIM_ENTER(cuLibraryGetKernel);
  Function* fn = nullptr;
  CUresult r = get_function(&fn, l, true, name);
  if (r == CUDA_SUCCESS) *k = reinterpret_cast<CUkernel>(fn);
  return r;
}
CUresult sim_cuKernelGetFunction(CUfunction* f, CUkernel k) {
  TETHER_SIM_ENTER(cuKernelGetFunction);
  if (!f) return CUDA_ERROR_INVALID_VALUE;
  Function* fn = function_of(k);
  if (!fn) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = need_ctx()) return r;
  *f = reinterpret_cast<CUfunction>(fn);
  return CUDA_SUCCESS;
}
CUresult sim_cuFuncGetAttribute(int* pi, CUfunction_attribute a, CUfunction f) {
  TETHER_SIM_ENTER(cuFuncGetAttribute);
  if (!pi) return CUDA_ERROR_INVALID_VALUE;
  Function* fn = function_of(f);
  if (!fn) return CUDA_ERROR_INVALID_HANDLE;
  const FuncAttrs& x = *fn->attrs;
  switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    // A twin has no static shared memory, so all of the default limit is dynamic (as for the
    // probe's kernels on the H200: 49152).
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *pi = x.max_dynamic_shared.load(); break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: *pi = x.carveout.load(); break;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED: *pi = x.non_portable_cluster.load(); break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: *pi = x.cluster_policy.load(); break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH: *pi = x.required_cluster[0].load(); break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT: *pi = x.required_cluster[1].load(); break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH: *pi = x.required_cluster[2].load(); break;
    default:
      if (a < 0 || a >= CU_FUNC_ATTRIBUTE_MAX)
        return fail(CUDA_ERROR_INVALID_VALUE, fmt::format("{} is not a CUfunction_attribute", static_cast<int>(a)));
      *pi = 0;
      break;
  }
  return CUDA_SUCCESS;
}
CUresult sim_cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
  TETHER_SIM_ENTER(cuFuncSetAttribute);
  Function* fn = function_of(f);
  if (!fn) return CUDA_ERROR_INVALID_HANDLE;
  FuncAttrs& x = *fn->attrs;
  auto range = [](int v, int lo, int hi, const char* what) {
    return v >= lo && v <= hi ? CUDA_SUCCESS
                              : fail(CUDA_ERROR_INVALID_VALUE,
                                     fmt::format("{} must be between {} and {}; {} was given", what, lo, hi, v));
  };
  switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      // Up to the device's opt-in maximum (less the static shared memory, none for a twin).
      if (CUresult r = range(v, 0, h200::shared_per_block_optin, "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES"))
        return r;
      x.max_dynamic_shared = v;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
      if (CUresult r = range(v, -1, 100, "CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT")) return r;
      x.carveout = v;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
      if (CUresult r = range(v, 0, 1, "CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED")) return r;
      x.non_portable_cluster = v;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
      if (CUresult r = range(v, 0, 2, "CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE")) return r;
      x.cluster_policy = v;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
      // Stored and read back as on the H200; the simulator does not enforce a required cluster.
      if (CUresult r = range(v, 0, h200::max_cluster, "a required cluster dimension")) return r;
      x.required_cluster[static_cast<std::size_t>(a - CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH)] = v;
      return CUDA_SUCCESS;
    default:
      return fail(CUDA_ERROR_INVALID_VALUE, fmt::format("function attribute {} cannot be set (it is read-only or "
                                                        "not a CUfunction_attribute)",
                                                        static_cast<int>(a)));
  }
}
CUresult sim_cuFuncGetParamInfo(CUfunction f, std::size_t index, std::size_t* offset, std::size_t* size) {
  TETHER_SIM_ENTER(cuFuncGetParamInfo);
  // What the H200 answered (launch_attr_probe paraminfo/*): INVALID_VALUE (not INVALID_HANDLE) for
  // a NULL function, for a NULL offset and past the last parameter, leaving the outputs as they
  // were; the size is optional.
  Function* fn = function_of(f);
  if (!fn) return fail(CUDA_ERROR_INVALID_VALUE, "cuFuncGetParamInfo of a handle that is not a function");
  if (!offset) return fail(CUDA_ERROR_INVALID_VALUE, "cuFuncGetParamInfo needs paramOffset");
  const std::vector<ParamInfo>& ps = fn->twin->params;
  if (index >= ps.size())
    return fail(CUDA_ERROR_INVALID_VALUE,
                fmt::format("kernel '{}' has {} parameter(s) (its twin's list); there is no parameter {}", fn->name,
                            ps.size(), index));
  // The device ABI's parameter buffer: each parameter at the next multiple of its alignment.
  std::size_t at = 0;
  for (std::size_t i = 0;; ++i) {
    std::size_t align = param_align(ps[i]);
    at = (at + align - 1) / align * align;
    if (i == index) break;
    at += ps[i].size;
  }
  *offset = at;
  if (size) *size = ps[index].size;
  return CUDA_SUCCESS;
}

// ----------------------------------------------------------------------------- user objects

CUresult sim_cuUserObjectCreate(CUuserObject* out, void* ptr, CUhostFn destroy, unsigned refs, unsigned flags) {
  TETHER_SIM_ENTER(cuUserObjectCreate);
  if (!out || !destroy || refs == 0 || flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC) return CUDA_ERROR_INVALID_VALUE;
  UserObj* u = new UserObj;
  u->refs.store(refs);
  u->ptr = ptr;
  u->destroy = destroy;
  {
    std::lock_guard lock(objects().mu);
    objects().user_objects.insert(u);
  }
  objects().live_user_objects.fetch_add(1);
  *out = reinterpret_cast<CUuserObject>(u);
  return CUDA_SUCCESS;
}
CUresult sim_cuUserObjectRetain(CUuserObject o, unsigned n) {
  TETHER_SIM_ENTER(cuUserObjectRetain);
  UserObj* u = uo_of(o);
  if (!u || n == 0) return CUDA_ERROR_INVALID_VALUE;
  if (u->destroyed.load()) {
    record_violation(ViolationKind::over_release, "cuUserObjectRetain", "retain of a user object already destroyed");
    return CUDA_ERROR_INVALID_VALUE;
  }
  u->refs.fetch_add(n);
  return CUDA_SUCCESS;
}
CUresult sim_cuUserObjectRelease(CUuserObject o, unsigned n) {
  TETHER_SIM_ENTER(cuUserObjectRelease);
  UserObj* u = uo_of(o);
  if (!u || n == 0) return CUDA_ERROR_INVALID_VALUE;
  uo_release(u, n, "cuUserObjectRelease");
  return CUDA_SUCCESS;
}

}  // namespace

UserObj* uo_of(CUuserObject o) {
  UserObj* u = reinterpret_cast<UserObj*>(o);
  if (!u) return nullptr;
  std::lock_guard lock(objects().mu);
  return objects().user_objects.count(u) ? u : nullptr;
}

void uo_release(UserObj* u, std::uint32_t n, std::string_view entry) {
  if (u->destroyed.load()) {
    record_violation(ViolationKind::over_release, entry, "release of a user object whose destructor already ran");
    return;
  }
  // The driver's arithmetic as observed (2f, 2f2, 11z): 32-bit counts that wrap, and the destructor
  // runs when a release takes the count exactly to zero.
  std::uint32_t before = u->refs.fetch_sub(n);
  if (before < n)
    record_violation(ViolationKind::over_release, entry,
                     fmt::format("user object released {} time(s) with only {} reference(s) left", n, before));
  if (before == n && !u->destroyed.exchange(true)) {
    objects().live_user_objects.fetch_sub(1);
    ThreadState& t = ts();
    ++t.in_destructor;
    u->destroy(u->ptr);
    --t.in_destructor;
  }
}

RefSet::~RefSet() {
  if (refs.empty()) return;
  auto release = [refs = std::move(refs)] {
    for (const RefEntry& e : refs) uo_release(e.obj, e.count, "cuGraphExecDestroy");
  };
  if (deferred && deferred->load())
    post_deferred(std::move(release));
  else
    release();
}

void post_deferred(std::function<void()> task) {
  // Why a minimum delay: the real driver ran deferred destructors 44-300 us after the call that
  // dropped the reference (docs/design/driver-facts.md 4g, 5d), never before it returned; without the delay this
  // thread could win that race, and code relying on "not before return" would pass here only.
  // 1 ms keeps that true on a loaded machine under a sanitizer.
  constexpr auto min_latency = std::chrono::milliseconds(1);
  Deferred& d = deferred();
  std::lock_guard lock(d.mu);
  d.q.push_back(DeferredTask{Clock::now() + min_latency, std::move(task)});
  if (!d.started) {
    d.started = true;
    std::thread([&d] {
      std::unique_lock lk(d.mu);
      for (;;) {
        d.cv.wait(lk, [&] { return !d.q.empty(); });
        Clock::time_point due = d.q.front().due;
        if (Clock::now() < due) {
          d.cv.wait_until(lk, due);
          continue;
        }
        std::function<void()> task = std::move(d.q.front().fn);
        d.q.pop_front();
        ++d.running;
        lk.unlock();
        task();
        task = nullptr;
        lk.lock();
        --d.running;
        d.cv.notify_all();
      }
    }).detach();
  }
  d.cv.notify_all();
}

void run_host_callback(CUhostFn fn, void* data) {
  Callbacks& c = callbacks();
  Callbacks::Job job{fn, data};
  std::unique_lock lk(c.mu);
  c.q.push_back(&job);
  if (!c.thread_started) {
    c.thread_started = true;
    std::thread([&c] {
      std::unique_lock l(c.mu);
      for (;;) {
        c.cv.wait(l, [&] { return !c.q.empty(); });
        Callbacks::Job* j = c.q.front();
        c.q.pop_front();
        ++c.started;
        l.unlock();
        ++ts().in_callback;
        j->fn(j->data);
        --ts().in_callback;
        l.lock();
        ++c.finished;
        j->done = true;
        c.cv.notify_all();
      }
    }).detach();
  }
  c.cv.notify_all();
  c.cv.wait(lk, [&] { return job.done; });
}

void wait_callbacks_idle() {
  Callbacks& c = callbacks();
  std::unique_lock lk(c.mu);
  std::uint64_t target = c.started;
  c.cv.wait(lk, [&] { return c.finished >= target; });
}

// ----------------------------------------------------------------------------- memory helpers

std::uintptr_t device_alloc(std::size_t bytes, int device, CUresult& err) {
  Memory& m = memory();
  std::lock_guard lock(m.mu);
  std::size_t cap;
  {
    std::lock_guard c(config().mu);
    cap = config().options.memory_per_device;
  }
  if (m.used[static_cast<std::size_t>(device)] + bytes > cap) {
    err = CUDA_ERROR_OUT_OF_MEMORY;
    return 0;
  }
  if (!m.base) {
    // Why so large a reservation: addresses are never reused, so the range must outlast every
    // allocation a long test makes; only touched pages cost memory.
    for (std::size_t sz = std::size_t{1} << 40; sz >= (std::size_t{1} << 32); sz >>= 1) {
      void* p = ::mmap(nullptr, sz, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p != MAP_FAILED) {
        m.base = reinterpret_cast<std::uintptr_t>(p);
        m.reserved = sz;
        break;
      }
    }
    if (!m.base) {
      err = CUDA_ERROR_OUT_OF_MEMORY;
      return 0;
    }
  }
  std::size_t mapped = (bytes + kPage - 1) / kPage * kPage;
  if (m.next + mapped + kPage > m.reserved) {
    err = CUDA_ERROR_OUT_OF_MEMORY;
    return 0;
  }
  std::uintptr_t p = m.base + m.next;
  m.next += mapped + kPage;  // one guard page between blocks
  if (::mprotect(reinterpret_cast<void*>(p), mapped, PROT_READ | PROT_WRITE) != 0) {
    err = CUDA_ERROR_OUT_OF_MEMORY;
    return 0;
  }
  m.blocks[p] = {bytes, mapped, true, true, device};
  m.used[static_cast<std::size_t>(device)] += bytes;
  ++m.live_device;
  err = CUDA_SUCCESS;
  return p;
}

void device_free_block(std::uintptr_t p) {
  Memory& m = memory();
  std::lock_guard lock(m.mu);
  auto it = m.blocks.find(p);
  if (it == m.blocks.end() || !it->second.live) return;
  it->second.live = false;
  m.used[static_cast<std::size_t>(it->second.ordinal)] -= it->second.size;
  if (it->second.graph) m.graph_used[static_cast<std::size_t>(it->second.ordinal)] -= it->second.size;
  --m.live_device;
  ::madvise(reinterpret_cast<void*>(p), it->second.mapped, MADV_DONTNEED);
  ::mprotect(reinterpret_cast<void*>(p), it->second.mapped, PROT_NONE);
}

std::uintptr_t graph_reserve(std::size_t bytes, int device, CUresult& err) {
  std::uintptr_t p = device_alloc(bytes, device, err);
  if (err != CUDA_SUCCESS) return 0;
  device_free_block(p);  // the address stays reserved (never reused), unbacked until the node runs
  Memory& m = memory();
  std::lock_guard lock(m.mu);
  m.blocks[p].graph = true;
  return p;
}

bool is_graph_block(std::uintptr_t p) {
  Memory& m = memory();
  std::lock_guard lock(m.mu);
  auto it = m.blocks.find(p);
  return it != m.blocks.end() && it->second.graph;
}

void graph_map(std::uintptr_t p) {
  Memory& m = memory();
  std::lock_guard lock(m.mu);
  auto it = m.blocks.find(p);
  if (it == m.blocks.end() || !it->second.graph || it->second.live) return;
  if (::mprotect(reinterpret_cast<void*>(p), it->second.mapped, PROT_READ | PROT_WRITE) != 0) return;
  it->second.live = true;
  const auto dev = static_cast<std::size_t>(it->second.ordinal);
  m.used[dev] += it->second.size;
  m.graph_used[dev] += it->second.size;
  constexpr std::size_t granule = std::size_t{32} << 20;
  m.graph_high[dev] = std::max(m.graph_high[dev], (m.graph_used[dev] + granule - 1) / granule * granule);
  ++m.live_device;
}

void graph_unmap(std::uintptr_t p) {
  if (is_graph_block(p)) device_free_block(p);
}

bool graph_outstanding(std::uintptr_t p) {
  Memory& m = memory();
  std::lock_guard lock(m.mu);
  auto it = m.blocks.find(p);
  return it != m.blocks.end() && it->second.graph && it->second.outstanding;
}

void set_graph_outstanding(std::uintptr_t p, bool on) {
  Memory& m = memory();
  std::lock_guard lock(m.mu);
  auto it = m.blocks.find(p);
  if (it != m.blocks.end() && it->second.graph) it->second.outstanding = on;
}

Range classify(std::uintptr_t p, std::size_t n, bool device_only) {
  Memory& m = memory();
  std::lock_guard lock(m.mu);
  auto it = m.blocks.upper_bound(p);
  if (it == m.blocks.begin()) return Range::unknown;
  --it;
  const Memory::Block& b = it->second;
  if (device_only && !b.device) return Range::unknown;
  if (p < it->first || p + n > it->first + b.size) {
    // Within the block's pages but past its size is still unknown (an overrun).
    return p < it->first + b.mapped && !b.live ? (b.graph ? Range::reserved : Range::freed) : Range::unknown;
  }
  return b.live ? Range::live : b.graph ? Range::reserved : Range::freed;
}

int device_of(std::uintptr_t p) {
  Memory& m = memory();
  std::lock_guard lock(m.mu);
  auto it = m.blocks.upper_bound(p);
  if (it == m.blocks.begin()) return -1;
  --it;
  const Memory::Block& b = it->second;
  return b.device && p < it->first + b.mapped ? b.ordinal : -1;
}

bool check_operand(std::uintptr_t p, std::size_t n, bool device_only, std::string_view entry, const char* what) {
  Range r = classify(p, n == 0 ? 1 : n, device_only);
  if (r == Range::reserved) {
    record_violation(ViolationKind::use_after_free, entry,
                     fmt::format("{} uses {} bytes at 0x{:x}, a graph allocation that is not allocated now (its "
                                 "allocation node has not run, or it was freed)",
                                 what, n, p));
    return false;
  }
  if (r == Range::freed) {
    record_violation(ViolationKind::use_after_free, entry,
                     fmt::format("{} uses {} bytes at 0x{:x}, which were freed", what, n, p));
    return false;
  }
  return true;
}

// ----------------------------------------------------------------------------- twins, functions

std::shared_ptr<const Twin> find_twin(std::string_view name) {
  Twins& t = twins();
  std::lock_guard lock(t.mu);
  auto it = t.by_name.find(std::string(name));
  return it == t.by_name.end() ? nullptr : it->second;
}

// What tether::kernel(&fn, ctx) gets on the simulator instead of the CUDA runtime's cudaGetKernel:
// the kernel of the twin registered for `fn` (and its name in *name), or nullptr if there is none.
CUkernel registered_kernel(const void* fn, std::string* name) {
  std::shared_ptr<const Twin> twin;
  {
    Twins& t = twins();
    std::lock_guard lock(t.mu);
    auto it = t.by_function.find(fn);
    if (it == t.by_function.end()) return nullptr;
    twin = it->second;
  }
  Registered& r = registered();
  std::lock_guard lock(objects().mu);
  Function*& cached = r.functions[fn];
  if (!cached || cached->twin != twin) {  // a replaced twin: the old handle keeps running the old one
    std::shared_ptr<FuncAttrs>& attrs = r.attrs[fn];
    if (!attrs) attrs = std::make_shared<FuncAttrs>();
    cached = new Function{twin->name, twin, nullptr, attrs};
    objects().functions.insert(cached);
  }
  *name = cached->name;
  return reinterpret_cast<CUkernel>(cached);
}

CUfunction builtin_function(std::string name, std::vector<ParamInfo> params, TwinBody body) {
  auto twin = std::make_shared<const Twin>(Twin{name, std::move(params), std::move(body)});
  auto* f = new Function{std::move(name), std::move(twin), nullptr, std::make_shared<FuncAttrs>()};
  std::lock_guard lock(objects().mu);
  objects().functions.insert(f);
  return reinterpret_cast<CUfunction>(f);
}

Function* function_of(CUfunction f) {
  Function* p = reinterpret_cast<Function*>(f);
  if (!p) return nullptr;
  std::lock_guard lock(objects().mu);
  return objects().functions.count(p) ? p : nullptr;
}
Function* function_of(CUkernel k) { return function_of(reinterpret_cast<CUfunction>(k)); }

// ----------------------------------------------------------------------------- table

void fill_core(tether::detail::DriverTable& t) {
  using tether::detail::Entry;
  init_topology();
  t.set<Entry::cuInit>(&sim_cuInit);
  t.set<Entry::cuDriverGetVersion>(&sim_cuDriverGetVersion);
  t.set<Entry::cuGetErrorName>(&sim_cuGetErrorName);
  t.set<Entry::cuGetErrorString>(&sim_cuGetErrorString);
  t.set<Entry::cuDeviceGet>(&sim_cuDeviceGet);
  t.set<Entry::cuDeviceGetCount>(&sim_cuDeviceGetCount);
  t.set<Entry::cuDeviceGetName>(&sim_cuDeviceGetName);
  t.set<Entry::cuDeviceGetAttribute>(&sim_cuDeviceGetAttribute);
  t.set<Entry::cuDeviceTotalMem>(&sim_cuDeviceTotalMem);
  t.set<Entry::cuDevicePrimaryCtxRetain>(&sim_cuDevicePrimaryCtxRetain);
  t.set<Entry::cuDevicePrimaryCtxRelease>(&sim_cuDevicePrimaryCtxRelease);
  t.set<Entry::cuCtxGetCurrent>(&sim_cuCtxGetCurrent);
  t.set<Entry::cuCtxSetCurrent>(&sim_cuCtxSetCurrent);
  t.set<Entry::cuCtxPushCurrent>(&sim_cuCtxPushCurrent);
  t.set<Entry::cuCtxPopCurrent>(&sim_cuCtxPopCurrent);
  t.set<Entry::cuCtxGetDevice>(&sim_cuCtxGetDevice);
  t.set<Entry::cuMemAlloc>(&sim_cuMemAlloc);
  t.set<Entry::cuMemFree>(&sim_cuMemFree);
  t.set<Entry::cuMemAllocHost>(&sim_cuMemAllocHost);
  t.set<Entry::cuMemFreeHost>(&sim_cuMemFreeHost);
  t.set<Entry::cuMemGetInfo>(&sim_cuMemGetInfo);
  t.set<Entry::cuDeviceGetGraphMemAttribute>(&sim_cuDeviceGetGraphMemAttribute);
  t.set<Entry::cuModuleLoadData>(&sim_cuModuleLoadData);
  t.set<Entry::cuModuleUnload>(&sim_cuModuleUnload);
  t.set<Entry::cuModuleGetFunction>(&sim_cuModuleGetFunction);
  t.set<Entry::cuLibraryLoadData>(&sim_cuLibraryLoadData);
  t.set<Entry::cuLibraryUnload>(&sim_cuLibraryUnload);
  t.set<Entry::cuLibraryGetKernel>(&sim_cuLibraryGetKernel);
  t.set<Entry::cuKernelGetFunction>(&sim_cuKernelGetFunction);
  t.set<Entry::cuFuncGetAttribute>(&sim_cuFuncGetAttribute);
  t.set<Entry::cuFuncSetAttribute>(&sim_cuFuncSetAttribute);
  t.set<Entry::cuFuncGetParamInfo>(&sim_cuFuncGetParamInfo);
  t.set<Entry::cuCtxGetStreamPriorityRange>(&sim_cuCtxGetStreamPriorityRange);
  t.set<Entry::cuDeviceCanAccessPeer>(&sim_cuDeviceCanAccessPeer);
  t.set<Entry::cuCtxEnablePeerAccess>(&sim_cuCtxEnablePeerAccess);
  t.set<Entry::cuCtxDisablePeerAccess>(&sim_cuCtxDisablePeerAccess);
  t.set<Entry::cuUserObjectCreate>(&sim_cuUserObjectCreate);
  t.set<Entry::cuUserObjectRetain>(&sim_cuUserObjectRetain);
  t.set<Entry::cuUserObjectRelease>(&sim_cuUserObjectRelease);
}

std::size_t live_modules() { return objects().live_modules.load(); }
std::size_t live_user_objects() { return objects().live_user_objects.load(); }
std::pair<std::size_t, std::size_t> live_allocations() {
  std::lock_guard lock(memory().mu);
  return {memory().live_device, memory().live_host};
}
bool deferred_idle() {
  Deferred& d = deferred();
  std::lock_guard lock(d.mu);
  return d.q.empty() && d.running == 0;
}

}  // namespace tether::sim::detail

// ============================================================================= public API

namespace tether::sim {

using namespace detail;

void configure(const Options& options) {
  if (options.devices < 1) throw UsageError("tether::sim::configure: devices must be at least 1");
  for (auto [a, b] : options.no_peer)
    if (a < 0 || b < 0 || a == b)
      throw UsageError(fmt::format("tether::sim::configure: no_peer names the pair {}-{}; a pair is two different "
                                   "device ordinals",
                                   a, b));
  Config& c = config();
  std::lock_guard lock(c.mu);
  if (c.opened && (c.options.devices != options.devices || c.options.memory_per_device != options.memory_per_device ||
                   c.options.no_peer != options.no_peer))
    throw UsageError("tether::sim::configure: the simulator is already open with other options");
  c.options = options;
}

void register_kernel_erased(std::string name, std::vector<ParamInfo> params, TwinBody body) {
  if (name.empty()) throw UsageError("tether::sim::register_kernel: the kernel name is empty");
  auto twin = std::make_shared<const Twin>(Twin{name, std::move(params), std::move(body)});
  Twins& t = twins();
  std::lock_guard lock(t.mu);
  t.by_name[std::move(name)] = std::move(twin);
}

bool unregister_kernel(std::string_view name) {
  Twins& t = twins();
  std::lock_guard lock(t.mu);
  return t.by_name.erase(std::string(name)) > 0;
}

void register_kernel_erased(const void* fn, std::string name, std::vector<ParamInfo> params, TwinBody body) {
  if (!fn)
    throw UsageError("tether::sim::register_kernel(fn, body): the function is null; pass the address of the "
                     "__global__ function (&kernel)");
  if (name.empty()) name = tether::detail::function_label(fn);
  auto twin = std::make_shared<const Twin>(Twin{std::move(name), std::move(params), std::move(body)});
  Twins& t = twins();
  std::lock_guard lock(t.mu);
  t.by_function[fn] = std::move(twin);
}

bool unregister_kernel_erased(const void* fn) noexcept {
  Twins& t = twins();
  std::lock_guard lock(t.mu);
  return t.by_function.erase(fn) > 0;
}

std::string_view to_string(ViolationKind kind) noexcept {
  switch (kind) {
    case ViolationKind::use_after_free: return "use_after_free";
    case ViolationKind::over_release: return "over_release";
    case ViolationKind::call_in_destructor: return "call_in_destructor";
    case ViolationKind::call_in_callback: return "call_in_callback";
    case ViolationKind::double_node_destroy: return "double_node_destroy";
    case ViolationKind::self_child: return "self_child";
    case ViolationKind::destroyed_node_use: return "destroyed_node_use";
    case ViolationKind::unloaded_module_use: return "unloaded_module_use";
    case ViolationKind::destroyed_event_use: return "destroyed_event_use";
    case ViolationKind::null_argument: return "null_argument";
    case ViolationKind::capture_into_capturing_graph: return "capture_into_capturing_graph";
    case ViolationKind::concurrent_exec_destroy: return "concurrent_exec_destroy";
    case ViolationKind::no_current_context: return "no_current_context";
    case ViolationKind::peer_access: return "peer_access";
    case ViolationKind::nccl_mismatch: return "nccl_mismatch";
  }
  return "unknown";
}

std::vector<Violation> violations() {
  Violations& v = violations_state();
  std::lock_guard lock(v.mu);
  return v.list;
}
void clear_violations() {
  Violations& v = violations_state();
  std::lock_guard lock(v.mu);
  v.list.clear();
}
std::string_view to_string(ViolationMode mode) noexcept {
  switch (mode) {
    case ViolationMode::print: return "print";
    case ViolationMode::fatal: return "fatal";
    case ViolationMode::quiet: return "quiet";
  }
  return "unknown";
}
ViolationMode violation_mode() noexcept { return violations_state().mode.load(); }
void set_violation_mode(ViolationMode mode) noexcept {
  Violations& v = violations_state();
  v.mode_set.store(true);
  v.mode.store(mode);
}
void set_violations_fatal(bool fatal) {
  set_violation_mode(fatal ? ViolationMode::fatal : ViolationMode::print);
}

ExpectViolations::ExpectViolations() noexcept {
  Violations& v = violations_state();
  std::lock_guard lock(v.mu);
  ++v.expecting;
  start_ = v.recorded;
}
ExpectViolations::~ExpectViolations() {
  Violations& v = violations_state();
  std::lock_guard lock(v.mu);
  --v.expecting;
}
std::size_t ExpectViolations::absorbed() const noexcept {
  Violations& v = violations_state();
  std::lock_guard lock(v.mu);
  return static_cast<std::size_t>(v.recorded - start_);
}

void fail_call(std::string_view entry_point, std::uint64_t nth, Errc result) {
  if (nth == 0) throw UsageError("tether::sim::fail_call: nth counts from 1");
  int idx = -1;
  if (entry_point != "*") {
    auto e = tether::detail::find_entry(entry_point);
    if (!e) throw UsageError(fmt::format("tether::sim::fail_call: '{}' is not an entry point tether uses", entry_point));
    idx = static_cast<int>(tether::detail::index(*e));
  }
  Faults& f = faults();
  std::lock_guard lock(f.mu);
  f.list.push_back(Fault{idx, nth, static_cast<CUresult>(result)});
  f.pending.fetch_add(1, std::memory_order_release);
}
void clear_faults() {
  {
    Faults& f = faults();
    std::lock_guard lock(f.mu);
    f.pending.fetch_sub(static_cast<int>(f.list.size()));
    f.list.clear();
  }
  nccl_clear_faults();
}
std::uint64_t injected_faults() { return faults().injected.load(); }

std::uint64_t call_count(std::string_view entry_point) {
  Counters& c = counters();
  if (entry_point == "*") {
    std::uint64_t n = 0;
    for (auto& x : c.calls) n += x.load(std::memory_order_relaxed);
    return n;
  }
  auto e = tether::detail::find_entry(entry_point);
  if (!e) throw UsageError(fmt::format("tether::sim::call_count: '{}' is not an entry point tether uses", entry_point));
  return c.calls[tether::detail::index(*e)].load(std::memory_order_relaxed);
}
void reset_call_counts() {
  nccl_reset_call_counts();
  for (auto& x : counters().calls) x.store(0, std::memory_order_relaxed);
}

}  // namespace tether::sim
