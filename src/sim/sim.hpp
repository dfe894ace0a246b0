// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The public face of the simulated CUDA driver: kernel twins, options, the violation log and
// fault injection. The simulator itself serves the same entry-point table as the real driver
// (see docs/simulator.md for what it models).
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "../driver/error.hpp"

TETHER_EXPORT namespace tether::sim {

/// Options of the simulated driver. They take effect when it is first opened
/// (`Runtime::simulated()`); the environment variable `TETHER_SIM_DEVICES` sets `devices` too.
struct Options {
  int devices = 1;                                      ///< number of simulated devices
  std::size_t memory_per_device = std::size_t{16} << 30;  ///< bytes cuMemAlloc may hand out per device
  /// The topology: pairs of device ordinals that cannot access each other's memory, in either
  /// direction (`cuDeviceCanAccessPeer` answers 0, `cuCtxEnablePeerAccess` fails with
  /// CUDA_ERROR_PEER_ACCESS_UNSUPPORTED). Empty by default: every pair can, as on an NVLink H200
  /// machine. The environment variable `TETHER_SIM_NO_PEER` ("0-1,2-3") adds pairs when the
  /// simulator opens, which refuses a malformed value or a device it does not have (UsageError).
  /// Since 0.7.
  std::vector<std::pair<int, int>> no_peer = {};
};

/// Sets the options of the simulator. Throws UsageError if the simulator is already open with
/// other options. Thread safety: call before opening the simulator.
void configure(const Options& options);

/// What a kernel twin is told about the launch it executes.
struct LaunchInfo {
  std::string_view kernel;       ///< the kernel's name
  std::array<unsigned, 3> grid;  ///< gridDim x, y, z
  std::array<unsigned, 3> block; ///< blockDim x, y, z
  unsigned shared_mem_bytes;     ///< dynamic shared memory requested (`sharedMemBytes`)
  /// The cluster dimensions in blocks (`CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION` of a graph kernel
  /// node); {1, 1, 1} when the launch has no cluster.
  std::array<unsigned, 3> cluster{1, 1, 1};
  /// Whether the launch is cooperative (`CU_LAUNCH_ATTRIBUTE_COOPERATIVE`): only then may the
  /// twin model a grid-wide barrier.
  bool cooperative = false;
  /// The priority the launch runs at: the node's `CU_LAUNCH_ATTRIBUTE_PRIORITY` when its
  /// executable was instantiated with `CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY`, otherwise
  /// the priority of the stream it runs on (`cuStreamCreateWithPriority`; 0 by default). Lower
  /// numbers are higher priorities, as on the driver.
  int priority = 0;
  /// Threads in the whole launch (grid * block), the usual loop bound of a twin.
  std::size_t threads() const noexcept {
    return std::size_t{grid[0]} * grid[1] * grid[2] * block[0] * block[1] * block[2];
  }
};

/// Size, kind and alignment of one kernel parameter, as the simulator reads it from
/// `kernelParams`. The alignment places the parameter in the device ABI's parameter buffer, which
/// `cuFuncGetParamInfo` reports: each parameter starts at the next multiple of its alignment.
struct ParamInfo {
  std::size_t size;   ///< sizeof the parameter
  bool pointer;       ///< a pointer: checked against live allocations when the launch executes
  /// alignof the parameter (`register_kernel` fills it); 0 stands for the largest power of two
  /// that divides `size`, at most 8 (a scalar's alignment).
  std::size_t align = 0;
};

/// The type-erased body of a twin: `args[i]` points at the value of parameter i.
using TwinBody = std::function<void(const LaunchInfo&, const void* const* args)>;

/// Registers (or replaces) the host twin of kernel `name` with an explicit parameter list.
/// Prefer `register_kernel<Args...>`. Thread safety: safe to call concurrently.
void register_kernel_erased(std::string name, std::vector<ParamInfo> params, TwinBody body);

namespace detail {
// The type-erased body that reads each parameter of `Args...` from `args` and calls `body` with
// the values, shared by both ways of registering a twin.
template <class... Args, class F>
TwinBody twin_body(F body) {
  static_assert((std::is_trivially_copyable_v<Args> && ...), "kernel parameters must be trivially copyable");
  return [body = std::move(body)](const LaunchInfo& info, const void* const* args) mutable {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      body(info, [&] {
        alignas(Args) std::byte raw[sizeof(Args)];
        std::memcpy(raw, args[I], sizeof(Args));
        return *std::launder(reinterpret_cast<Args*>(raw));
      }()...);
    }(std::index_sequence_for<Args...>{});
  };
}
}  // namespace detail

/// Registers the host twin of kernel `name`, whose parameters are `Args...` (as in the kernel's
/// signature). When a launch of `name` executes on the simulator, `body(info, args...)` runs on
/// the stream's worker thread with the real argument values; pointer arguments are simulated
/// device addresses the twin may read and write. The real driver ignores twins.
///
///     tether::sim::register_kernel<float*, float, int>("scale",
///         [](const tether::sim::LaunchInfo&, float* x, float a, int n) {
///           for (int i = 0; i < n; ++i) x[i] *= a;
///         });
template <class... Args, class F>
  requires std::invocable<F&, const LaunchInfo&, Args...>
void register_kernel(std::string name, F body) {
  std::vector<ParamInfo> params{ParamInfo{sizeof(Args), std::is_pointer_v<Args>, alignof(Args)}...};
  register_kernel_erased(std::move(name), std::move(params), detail::twin_body<Args...>(std::move(body)));
}

/// Removes the twin of `name`; returns whether there was one.
bool unregister_kernel(std::string_view name);

/// Registers (or replaces) the twin of the function at `fn` with an explicit parameter list: the
/// type-erased form of `register_kernel(&kernel, ...)`, which computes `params` from the
/// function's type. `name` is what the simulator calls the kernel (`Kernel::name`,
/// `LaunchInfo::kernel`, messages); an empty `name` stands for the function's symbol name where
/// the dynamic linker can find it (see `register_kernel(&kernel, body)`). Throws UsageError for a
/// null `fn`. Thread safety: safe to call concurrently.
void register_kernel_erased(const void* fn, std::string name, std::vector<ParamInfo> params, TwinBody body);

/// Removes the twin registered for the function at `fn`; returns whether there was one.
/// Thread safety: safe to call concurrently.
bool unregister_kernel_erased(const void* fn) noexcept;

namespace detail {
// Why a function pointer becomes `const void*`: it is the key the CUDA runtime's own lookup
// (cudaGetKernel) takes, and what `tether::kernel(&fn)` passes to the library.
template <class... Args>
const void* function_key(void (*fn)(Args...)) noexcept {
  return reinterpret_cast<const void*>(fn);
}
}  // namespace detail

/// Registers (or replaces) the twin of the `__global__` function `fn`, found by its address: what
/// the simulator runs for a kernel that `tether::kernel(&fn, ctx)` (a `.cu` file compiled by nvcc)
/// looks up, instead of a kernel looked up by name in a loaded module. The parameter list is
/// `fn`'s own, so the twin cannot disagree with the kernel; `body(info, args...)` runs like the
/// body of `register_kernel<Args...>(name, body)`. The kernel is named after `fn`'s symbol where
/// the dynamic linker can find it (a function of a shared library, or of a program linked with
/// `-rdynamic`), otherwise "kernel at 0x...": give the name with the overload below. The address
/// of a `__global__` function is that of the host stub nvcc made for it in the translation unit
/// that instantiates it (a template's stub is local to each such unit), so register a twin, and
/// look its kernel up, where the kernel is defined. The real driver ignores twins.
///
///     // kernels.cu
///     __global__ void saxpy(float a, const float* x, float* y, int n);
///     tether::sim::register_kernel(&saxpy, [](const tether::sim::LaunchInfo&, float a,
///                                             const float* x, float* y, int n) {
///       for (int i = 0; i < n; ++i) y[i] += a * x[i];
///     });
///
/// Throws UsageError for a null `fn`. Thread safety: safe to call concurrently.
template <class... Args, class F>
  requires std::invocable<F&, const LaunchInfo&, Args...>
void register_kernel(void (*fn)(Args...), F body) {
  register_kernel_erased(detail::function_key(fn), std::string(),
                         std::vector<ParamInfo>{ParamInfo{sizeof(Args), std::is_pointer_v<Args>, alignof(Args)}...},
                         detail::twin_body<Args...>(std::move(body)));
}

/// Registers (or replaces) the twin of the `__global__` function `fn`, as above, under the name
/// `name` (what `Kernel::name`, `LaunchInfo::kernel` and messages show on the simulator; the real
/// driver's name is the CUDA runtime's, `cudaFuncGetName`). Throws UsageError for a null `fn` or
/// an empty `name`. Thread safety: safe to call concurrently.
template <class... Args, class F>
  requires std::invocable<F&, const LaunchInfo&, Args...>
void register_kernel(void (*fn)(Args...), std::string name, F body) {
  if (name.empty())
    throw UsageError("tether::sim::register_kernel(fn, name, body): the name is empty; give the kernel's name, or "
                     "register without one");
  register_kernel_erased(detail::function_key(fn), std::move(name),
                         std::vector<ParamInfo>{ParamInfo{sizeof(Args), std::is_pointer_v<Args>, alignof(Args)}...},
                         detail::twin_body<Args...>(std::move(body)));
}

/// Removes the twin registered for the function `fn`; returns whether there was one. A kernel
/// already looked up keeps running the twin it was made with. Thread safety: safe to call
/// concurrently.
template <class... Args>
bool unregister_kernel(void (*fn)(Args...)) noexcept {
  return unregister_kernel_erased(detail::function_key(fn));
}

/// Sets the value of a conditional handle from inside a twin (what `cudaGraphSetConditional`
/// does in device code). `handle` is the `CUgraphConditionalHandle` value.
void set_conditional(std::uint64_t handle, unsigned value);

/// Kinds of driver misuse the simulator detects. Each is a bug in the caller (for tether: a
/// lifetime bug); the real driver would crash, corrupt memory or silently misbehave.
enum class ViolationKind {
  use_after_free,        ///< a launch or copy touched freed device or pinned memory
  over_release,          ///< a user object or graph reference was released more often than retained
  call_in_destructor,    ///< a CUDA call was made from inside a user-object destructor
  call_in_callback,      ///< a CUDA call was made from inside a host function/host node
  double_node_destroy,   ///< cuGraphDestroyNode on a destroyed node (crashes the real driver)
  self_child,            ///< a graph added as its own child (crashes the real driver)
  destroyed_node_use,    ///< a destroyed node handle was used (the real driver does not check)
  unloaded_module_use,   ///< a launch used a function whose module or library was unloaded
  destroyed_event_use,   ///< an event record/wait node or operation used a destroyed event
  null_argument,         ///< a NULL pointer the real driver dereferences unchecked (it crashes)
  /// cuStreamBeginCaptureToGraph into a graph that an ongoing capture captures into (the real
  /// driver crashes)
  capture_into_capturing_graph,
  /// cuGraphDestroy of a graph while cuGraphExecDestroy of an executable made from it runs on
  /// another thread (the real driver double-frees: H200, ASan)
  concurrent_exec_destroy,
  /// cuGraphExecKernelNodeSetParams, or cuGraphExecNodeSetParams of a kernel node, on a thread with
  /// no current context (the real driver crashes: ctx_block_probe 8a, H200)
  no_current_context,
  /// a kernel on one device used memory of another device whose peer access was not enabled from
  /// its context (cuCtxEnablePeerAccess; the real GPU faults with an illegal address). Since 0.7.
  peer_access,
  /// the ranks of an NCCL communicator issued different collectives at the same position, or a
  /// send and its receive disagree (real NCCL hangs or corrupts memory); the simulator's NCCL
  /// completes the operation without moving data. Since 0.7.
  nccl_mismatch,
};

/// "use_after_free", ...
std::string_view to_string(ViolationKind kind) noexcept;

/// One detected violation.
struct Violation {
  ViolationKind kind;
  std::string entry_point;  ///< the entry point in which it was detected ("" for launches)
  std::string detail;       ///< what exactly happened
};

/// Every violation since the last `clear_violations()`, oldest first, whatever the
/// `ViolationMode` (expected ones included). Thread safety: safe to call concurrently.
std::vector<Violation> violations();
/// Forgets the recorded violations (what was printed stays printed). Thread safety: safe to call
/// concurrently.
void clear_violations();

/// What the simulator does when it records a violation, besides logging it for `violations()`.
/// The starting mode comes from the environment variable `TETHER_SIM_VIOLATIONS` (`print`,
/// `fatal` or `quiet`; unset or empty means `print`), read when the simulator starts
/// (`Runtime::simulated()`, which throws UsageError for any other value). CI runs with `fatal`.
enum class ViolationMode {
  /// One line on stderr per violation, when it is recorded: "tether simulator: violation <kind>
  /// in <entry point>: <detail>; <what it means and what to do>" ("in a launch" for what a launch
  /// found when it executed). The first printed line is followed, once per process, by a line on
  /// how to change the mode. The default.
  print,
  /// The same line, then `std::abort()`: a test run that provokes an unexpected violation fails
  /// loudly, at the violation.
  fatal,
  /// Nothing on stderr: the violation is only logged.
  quiet,
};
/// "print", "fatal" or "quiet".
std::string_view to_string(ViolationMode mode) noexcept;
/// The current mode. Thread safety: safe to call concurrently.
ViolationMode violation_mode() noexcept;
/// Sets the mode for the rest of the process; a mode set before the simulator starts is not
/// replaced by `TETHER_SIM_VIOLATIONS` (an invalid value is still refused). Thread safety: safe
/// to call concurrently; violations being recorded on other threads meanwhile may see either mode.
void set_violation_mode(ViolationMode mode) noexcept;
/// Kept from 0.1: `set_violation_mode(fatal ? ViolationMode::fatal : ViolationMode::print)`.
void set_violations_fatal(bool fatal);

/// Declares that violations are expected while it lives, for a test that provokes them on
/// purpose: wrap the provoking step, narrowly, in one. A violation recorded while at least one
/// scope lives, on any thread, is logged as always (`violations()`) but neither printed nor fatal,
/// whatever the `ViolationMode`. Why process-wide and not per thread: the simulator detects many
/// violations on its own threads (a launch's pointer arguments are checked on the stream's worker
/// thread when the launch executes, deferred user-object destructors run on a driver thread), not
/// on the thread that made the call. So asynchronous work must have executed before the scope
/// ends (synchronize the stream inside it): a violation recorded after the last scope ended is
/// unexpected, and printed or fatal.
///
///     {
///       tether::sim::ExpectViolations expected;
///       exec.launch(stream);   // launches a kernel whose tether::unowned buffer was freed
///       stream.synchronize();  // the violation is recorded on the stream's thread before this returns
///       CHECK(expected.absorbed() == 1);
///     }
///
/// Scopes nest and may live on several threads at once; each counts every violation recorded
/// while it lives. Neither copyable nor movable (like std::lock_guard), so it has no moved-from
/// state. Makes no driver call and works before the simulator starts; on the real driver it
/// absorbs nothing, so a test that uses it runs on both drivers. Thread safety: constructing,
/// destroying and `absorbed()` are safe concurrently with anything.
class ExpectViolations {
 public:
  ExpectViolations() noexcept;
  ~ExpectViolations();
  ExpectViolations(const ExpectViolations&) = delete;
  ExpectViolations& operator=(const ExpectViolations&) = delete;

  /// The number of violations recorded (on any thread) since this scope began: all of them were
  /// expected, so none was printed or fatal.
  std::size_t absorbed() const noexcept;

 private:
  std::uint64_t start_;  // violations recorded in the process before this scope began
};

/// Fails the `nth` call (1 = the next one) of `entry_point` from now on with `result`, without
/// doing anything else. `entry_point` is an unversioned driver name such as
/// "cuGraphAddKernelNode", or "*" for any entry point. Several faults can be pending. Throws
/// UsageError for an unknown entry point or nth == 0.
void fail_call(std::string_view entry_point, std::uint64_t nth, Errc result = Errc::out_of_memory);
/// Drops every pending fault.
void clear_faults();
/// Number of faults injected (calls failed on purpose) since start.
std::uint64_t injected_faults();

/// Calls of `entry_point` ("*" for all) since the last `reset_call_counts()`.
std::uint64_t call_count(std::string_view entry_point);
/// Sets every call counter to zero.
void reset_call_counts();

/// Live objects in the simulator, for leak checks in tests.
struct Stats {
  std::size_t device_allocations = 0;  ///< cuMemAlloc blocks not freed
  std::size_t host_allocations = 0;    ///< cuMemAllocHost blocks not freed
  std::size_t user_objects = 0;        ///< user objects whose destructor has not run
  std::size_t graphs = 0;              ///< graphs (root, clones and embedded/body graphs)
  std::size_t execs = 0;               ///< executable graphs
  std::size_t streams = 0;             ///< streams created and not destroyed
  std::size_t events = 0;              ///< events created and not destroyed
  std::size_t modules = 0;             ///< modules and libraries loaded
  std::size_t mem_pools = 0;           ///< memory pools created and not destroyed (default pools excluded)
};
/// A snapshot of the live objects.
Stats stats();

/// Blocks until every stream is idle and every deferred user-object destructor has run, or the
/// timeout passes; returns whether everything finished.
bool quiesce(std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace tether::sim
