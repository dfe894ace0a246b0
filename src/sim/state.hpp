// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Internal state of the simulated driver. Not part of the public API (not included by tether.hpp).
// The model follows docs/design/driver-facts.md; docs/simulator.md explains it.
#pragma once

#include "table.hpp"

#include <deque>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <variant>

#include "../driver/table.hpp"
#include "sim.hpp"

namespace tether::sim::detail {

using tether::detail::Entry;
using Clock = std::chrono::steady_clock;

// The simulator's state is created once and never destroyed: user objects may be released and
// streams may run during process exit, after static destructors (the release rule, docs/design/attachments.md).
template <class T>
T& immortal() {
  static T* p = new T();
  return *p;
}

// ----------------------------------------------------------------------------- call context

struct Ctx;
struct Stream;

// Why thread-local: CUDA's current context is per thread, and so is "this thread is inside a
// user-object destructor / host callback", where the real driver refuses most calls.
struct ThreadState {
  Ctx* current = nullptr;
  std::vector<Ctx*> stack;
  int in_destructor = 0;
  int in_callback = 0;
  CUstreamCaptureMode capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;  // cuThreadExchangeStreamCaptureMode
  std::string explain;  // simulator-only detail for the last failing call on this thread
};
ThreadState& ts();

// Prologue of every entry point: counts the call, applies injected faults, refuses calls from
// destructors and callbacks like the real driver (and records those as violations).
CUresult enter(Entry e);
#define TETHER_SIM_ENTER(name)                                                                  \
  do {                                                                                          \
    if (CUresult enter_result_ = ::tether::sim::detail::enter(::tether::detail::Entry::name);    \
        enter_result_ != CUDA_SUCCESS)                                                          \
      return enter_result_;                                                                     \
  } while (0)

// Logs a violation and, unless an ExpectViolations scope lives, prints it or aborts (ViolationMode).
void record_violation(ViolationKind kind, std::string_view entry, std::string detail);
// Reads TETHER_SIM_VIOLATIONS when the simulator starts (make_table); throws UsageError for a bad value.
void init_violation_mode();
// Sets the simulator's explanation of the error being returned (see DriverTable::explain).
CUresult fail(CUresult r, std::string explanation);

// ----------------------------------------------------------------------------- contexts, memory

struct Ctx {
  int device = 0;
  int primary_refs = 0;
  // The devices whose memory kernels of this context may use (cuCtxEnablePeerAccess), one bit per
  // ordinal (the simulator has at most 64 devices). Read by stream workers when a kernel runs.
  std::atomic<std::uint64_t> peers{0};
  Stream* null_stream = nullptr;  // the legacy default stream, created on first use
  // The per-thread default streams (CU_STREAM_PER_THREAD), one per thread that used it: a stream of
  // its own, which can capture where the legacy stream cannot (capture_facts c10a, c10b).
  std::unordered_map<std::thread::id, Stream*> per_thread;
};
Ctx* ctx_of(CUcontext c);
CUcontext handle(Ctx* c);
Ctx* current_ctx();  // nullptr when none is current
int device_count();
// Whether device `dev` can access the memory of device `peer` (the topology of Options::no_peer;
// false for the same device, as cuDeviceCanAccessPeer answers).
bool peer_supported(int dev, int peer);

// `reserved`: a graph allocation's address, not backed now (before its allocation node ran, or
// after it was freed); a use at execution is a use after free, naming it at creation is fine.
enum class Range { live, freed, reserved, unknown };
// Classifies [p, p+n) against the simulator's allocations. `device` restricts to device blocks.
Range classify(std::uintptr_t p, std::size_t n, bool device_only);
// Checks an operand of a copy/set/launch at execution time; records use_after_free if freed.
bool check_operand(std::uintptr_t p, std::size_t n, bool device_only, std::string_view entry, const char* what);
// The device whose memory (a cuMemAlloc block, a pool's or a graph allocation's) holds `p`; -1 for
// pinned host memory and addresses the simulator did not hand out.
int device_of(std::uintptr_t p);
std::uintptr_t device_alloc(std::size_t bytes, int device, CUresult& err);
// Held by a cuMemFree (or cuMemFreeHost) for its whole duration, waits for host callbacks
// included; allocations and stream creation pass through it.
std::mutex& memory_gate();
void device_free_block(std::uintptr_t p);

// Graph memory (alloc/free nodes). The address is reserved when the node is created and never
// handed out again; the memory is backed from the execution of the allocation node until a free
// node, cuMemFreeAsync or cuMemFree frees it. `outstanding` is the enqueue-order view: a launch
// made the allocation and nothing enqueued since frees it (cuGraphLaunch refuses a relaunch then).
std::uintptr_t graph_reserve(std::size_t bytes, int device, CUresult& err);
bool is_graph_block(std::uintptr_t p);
void graph_map(std::uintptr_t p);    // at the allocation node's execution
void graph_unmap(std::uintptr_t p);  // at the free's execution
bool graph_outstanding(std::uintptr_t p);
void set_graph_outstanding(std::uintptr_t p, bool on);

// Memory pools (pool.cpp). A pool allocation is an ordinary device block tagged with its pool,
// which only accounts for it. `pool_for_alloc` resolves a pool handle (null: the device's default
// pool, its current pool as the simulator never changes it); `pool_admit` refuses what would
// exceed the pool's maximum size; `pool_attach` tags a block made for it; `pool_block_freed` runs
// where the block is freed (a cuMemFreeAsync executing, a cuMemFree) and untags it.
CUmemoryPool pool_for_alloc(CUmemoryPool h, int device, CUresult& err);
int pool_device(CUmemoryPool h);
CUresult pool_admit(CUmemoryPool h, std::size_t bytes);
void pool_attach(CUmemoryPool h, std::uintptr_t block, std::size_t bytes);
void pool_block_freed(std::uintptr_t block);

// Host functions (graph host nodes, cuLaunchHostFunc) all run on one process-wide callback
// thread, one after another (ctx_block_probe 4l, T); a stream worker hands each over and waits.
void run_host_callback(CUhostFn fn, void* data);
// Returns once every host function running at the time of the call has returned: what cuMemFree
// and cuModuleLoadData do on the real driver (ctx_block_probe 4f, 4m).
void wait_callbacks_idle();

// Capture-mode rules (capture_facts c4): for a "potentially unsafe" call of this thread, the
// captures it invalidates; returns CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED if there was one.
CUresult unsafe_call_guard(std::string_view entry);
// An operation on the legacy default stream while a blocking stream of its context captures:
// CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, and (`invalidates`) that capture is invalidated, whatever
// the modes (capture_facts c4 @blocking rows, c10c). The H200 run of the c10c test showed that
// cuStreamIsCapturing and cuStreamGetCaptureInfo of the legacy stream leave the capture active
// (the probe had called all three in a row). Success for any other stream.
CUresult legacy_guard(struct Stream* s, std::string_view entry, bool invalidates);
// Invalidates an ongoing capture (its next captured operation and its end fail). Graph mutex held.
void invalidate_capture(struct Capture* c);
// Whether `g`, or a graph nested in `g`, is the graph of an ongoing capture (capture_facts c10n:
// such a graph cannot be destroyed). Graph mutex held.
bool graph_in_capture(const struct Graph* g);
// Whether destroying node `n` would change the graph of an ongoing capture: it belongs to that
// graph (capture_facts c3g-c3j, c5l-c5n) or owns it. Graph mutex held.
bool node_in_capture(const struct Node* n);

// ----------------------------------------------------------------------------- user objects

struct UserObj {
  std::atomic<std::uint32_t> refs{0};
  void* ptr = nullptr;
  CUhostFn destroy = nullptr;
  std::atomic<bool> destroyed{false};
};
// Drops n references; runs the destructor on this thread if the count reaches zero.
void uo_release(UserObj* u, std::uint32_t n, std::string_view entry);
UserObj* uo_of(CUuserObject o);

// References held by an executable (or one launch of it). When the last holder drops the set,
// the references are released: on the calling thread if the executable was never launched or
// uploaded, otherwise later on the driver's own thread (docs/design/driver-facts.md 4a2, 4e, 4f, 5a-5e).
struct RefEntry {
  UserObj* obj;
  std::uint32_t count;
  int top_node;  // index of the top-level exec node whose subtree holds it, -1 for the root graph
};
struct RefSet {
  std::vector<RefEntry> refs;
  std::shared_ptr<std::atomic<bool>> deferred;  // shared with the exec: set on first launch/upload
  ~RefSet();
};

// The driver-internal thread that runs deferred destructors one after another.
void post_deferred(std::function<void()> task);

// ----------------------------------------------------------------------------- the simulated device

// The simulated device is an H200 wherever the launch-attribute rules need a number
// (tests/driver/launch_attr_probe.txt, 2026-12-01; docs/launch-attributes.md).
namespace h200 {
inline constexpr int sms = 132;
inline constexpr int shared_per_block = 49152;           // MAX_SHARED_MEMORY_PER_BLOCK, the default limit
inline constexpr int shared_per_block_optin = 232448;    // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
inline constexpr int shared_per_sm = 233472;             // MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
inline constexpr int reserved_shared_per_block = 1024;   // RESERVED_SHARED_MEMORY_PER_BLOCK
inline constexpr int blocks_per_sm = 32;                 // MAX_BLOCKS_PER_MULTIPROCESSOR
inline constexpr int threads_per_sm = 2048;              // MAX_THREADS_PER_MULTIPROCESSOR
inline constexpr int portable_cluster = 8;               // larger clusters need NON_PORTABLE_CLUSTER_SIZE_ALLOWED
inline constexpr int max_cluster = 16;                   // the largest cluster cuGraphInstantiate accepts
inline constexpr int least_priority = 0;                 // cuCtxGetStreamPriorityRange
inline constexpr int greatest_priority = -5;
}  // namespace h200

// How many blocks of `threads` threads and `shared` bytes of dynamic shared memory can be resident
// at once: the simulated co-residency limit of a cooperative launch. The H200's occupancy
// calculator gave the same for the probe's kernels (32 per SM for 32 threads, 2 for 1024, 3 with
// 64 KiB); registers are not modelled (a twin has none).
std::uint64_t coresident_blocks(std::uint64_t threads, std::uint64_t shared);
// Clamps a stream or node priority into the device's range, as the driver does.
int clamp_priority(int priority);

// ----------------------------------------------------------------------------- modules

// The settable attributes of a function (cuFuncSetAttribute). One record per module and kernel
// name, shared by every handle of it: on the H200 a second cuModuleGetFunction returned the same
// handle, so an attribute set through one is seen through the other (launch_attr_probe
// func/same_handle).
struct FuncAttrs {
  std::atomic<int> max_dynamic_shared{h200::shared_per_block};
  std::atomic<int> carveout{-1};
  std::atomic<int> non_portable_cluster{0};
  std::atomic<int> cluster_policy{0};
  std::array<std::atomic<int>, 3> required_cluster{};
};

struct Twin {
  std::string name;
  std::vector<ParamInfo> params;
  TwinBody body;
};
struct Module {
  bool unloaded = false;
  bool library = false;
  Ctx* ctx = nullptr;  // the context it was loaded into (null for a library: context-independent)
  // By kernel name, under the objects' mutex: the attributes, and the handle lookups return.
  std::map<std::string, std::shared_ptr<FuncAttrs>, std::less<>> attrs;
  std::map<std::string, struct Function*, std::less<>> functions;
};
struct Function {
  std::string name;
  std::shared_ptr<const Twin> twin;
  Module* module = nullptr;
  std::shared_ptr<FuncAttrs> attrs;  // shared with every handle of the same kernel of the module
};
Function* function_of(CUfunction f);   // nullptr if not a simulator function
Function* function_of(CUkernel k);
std::shared_ptr<const Twin> find_twin(std::string_view name);
// A function of no module, never unloaded, running `body`: what the simulator's own libraries
// (its NCCL, sim/nccl.cpp) launch, as real libraries launch their own kernels.
CUfunction builtin_function(std::string name, std::vector<ParamInfo> params, TwinBody body);
// The NCCL twin's share of fault injection and call counting (sim/nccl.cpp), called by
// tether::sim::clear_faults and reset_call_counts.
void nccl_clear_faults() noexcept;
void nccl_reset_call_counts() noexcept;

// ----------------------------------------------------------------------------- events, streams

struct Event {
  unsigned flags = 0;
  Ctx* ctx = nullptr;  // the context current at cuEventCreate: streams of it alone may record it
  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t recorded = 0;  // generation of the latest record
  std::uint64_t done = 0;      // generation completed
  Clock::time_point when{};
  bool destroyed = false;
  // Capture: a record made while its stream was capturing marks a fork/join point.
  struct Capture* capture = nullptr;
  std::vector<struct Node*> capture_deps;
};
Event* event_of(CUevent e);  // nullptr if unknown
void event_complete(Event* e, std::uint64_t gen);
void event_wait(Event* e, std::uint64_t gen);

struct Capture {
  struct Graph* graph = nullptr;
  Ctx* ctx = nullptr;
  std::thread::id thread;  // the thread that began it (THREAD_LOCAL / GLOBAL rules, WRONG_THREAD)
  bool owns_graph = true;  // false: cuStreamBeginCaptureToGraph into an existing graph
  std::uint64_t id = 0;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  CUresult invalidated = CUDA_SUCCESS;
  Stream* origin = nullptr;
  std::vector<Stream*> streams;
};

struct Stream {
  Ctx* ctx = nullptr;
  unsigned flags = 0;
  int priority = 0;  // clamped (cuStreamCreateWithPriority); launches on it run at this priority
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> q;
  std::uint64_t enqueued = 0;
  std::uint64_t completed = 0;
  bool stop = false;
  bool implicit = false;  // a default stream (legacy or per-thread), not made by cuStreamCreate
  bool legacy = false;    // the legacy default stream (0, CU_STREAM_LEGACY)
  std::thread worker;
  // capture state (guarded by the simulator's graph mutex)
  Capture* capture = nullptr;
  std::vector<struct Node*> capture_deps;

  void push(std::function<void()> op);
  void wait_idle();
  bool idle();
  void run();
};
// The stream whose worker is the calling thread (nullptr on any other thread).
Stream* worker_stream();
// Resolves a stream handle (0 / CU_STREAM_LEGACY / CU_STREAM_PER_THREAD: the context's default
// stream); nullptr if invalid.
Stream* stream_of(CUstream s);
std::vector<Stream*> all_streams();
/// Waits until the destroyed streams of `c` (every context: null) have finished their work.
void wait_destroyed_streams(Ctx* c);
/// Whether no destroyed stream has work left.
bool destroyed_streams_idle();

// ----------------------------------------------------------------------------- graphs

struct Graph;
struct ExecGraph;

// The launch attributes of a kernel node (cuGraphKernelNodeSetAttribute), with the values a node
// that never set one reads back on the H200. Attributes the driver refuses on graph kernel nodes,
// and those the simulator cannot model, are not stored (docs/launch-attributes.md).
struct LaunchAttrs {
  CUaccessPolicyWindow access_policy{};
  int cooperative = 0;
  std::array<unsigned, 3> cluster{0, 0, 0};  // {0,0,0}: no cluster
  CUclusterSchedulingPolicy cluster_policy = CU_CLUSTER_SCHEDULING_POLICY_DEFAULT;
  int priority = 0;            // clamped: what GetAttribute reads
  int priority_requested = 0;  // as set: what cuGraphExecUpdate compares under USE_NODE_PRIORITY
  CUlaunchMemSyncDomainMap sync_domain_map{0, 1};
  CUlaunchMemSyncDomain sync_domain = CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT;
  unsigned carveout = 0;
  unsigned nvlink_centric = 0;
};

struct KernelP {
  Function* func = nullptr;
  std::array<unsigned, 3> grid{}, block{};
  unsigned shared = 0;
  std::vector<std::byte> args;
  std::vector<std::size_t> offsets;
  CUkernel kern = nullptr;
  CUcontext ctx = nullptr;
  // The context the kernel runs in, whose peer access decides which devices' memory it may use: the
  // function's module's, else `ctx`, else the launching stream's (a stream launch) or the context
  // current when the node was made (kernel_home).
  Ctx* home = nullptr;
  LaunchAttrs attrs;
};
struct MemcpyP {
  CUDA_MEMCPY3D copy{};
  CUcontext ctx = nullptr;
};
struct MemsetP {
  CUDA_MEMSET_NODE_PARAMS p{};
  CUcontext ctx = nullptr;
};
struct HostP {
  CUhostFn fn = nullptr;
  void* data = nullptr;
};
struct ChildP {
  Graph* graph = nullptr;  // the embedded graph, owned by the node
};
struct RecordP {
  Event* event = nullptr;
};
struct WaitP {
  Event* event = nullptr;
};
struct AllocP {
  CUDA_MEM_ALLOC_NODE_PARAMS p{};
};
struct FreeP {
  CUdeviceptr dptr = 0;
};
struct CondP {
  // The driver-owned array phGraph_out is pointed at (the caller's pointer is overwritten).
  std::shared_ptr<std::vector<CUgraph>> out_array;
  CUgraphConditionalHandle handle = 0;
  CUgraphConditionalNodeType type = CU_GRAPH_COND_TYPE_IF;
  unsigned size = 1;
  std::vector<Graph*> bodies;  // owned by the node
  CUcontext ctx = nullptr;
};
struct EmptyP {};
using Params = std::variant<EmptyP, KernelP, MemcpyP, MemsetP, HostP, ChildP, RecordP, WaitP, AllocP, FreeP, CondP>;

struct Node {
  Graph* graph = nullptr;
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  Params params;
  std::vector<Node*> deps;        // incoming edges, in insertion order
  std::vector<Node*> dependents;  // outgoing edges
  bool destroyed = false;
  std::uint64_t serial = 0;       // creation order within the graph
  // Made by a captured stream operation (not by cuGraphAddNode into the capturing graph): only
  // such nodes make a stream unjoined at the end (H200, "Direct add into a capturing graph").
  bool stream_captured = false;
};

struct CondHandle {
  std::atomic<unsigned> value{0};
  unsigned default_value = 0;
  unsigned flags = 0;
  Graph* graph = nullptr;  // null once its graph is destroyed (executables still use the state)
};

struct Graph {
  std::vector<Node*> nodes;    // live nodes in creation order
  std::vector<Node*> zombies;  // destroyed nodes, kept so stale handles never crash the simulator
  std::map<UserObj*, std::uint32_t> refs;
  Node* owner = nullptr;       // the child/conditional node that owns this graph
  std::uint64_t next_serial = 0;
  std::unordered_map<const Node*, Node*> clone_map;  // original node -> node here (FindInClone)
  std::vector<CUgraphConditionalHandle> handles;     // conditional handles created on this graph
  // The sequence id of the captures into this graph: a second capture into the same existing graph
  // reported the first one's id (capture_facts c3c). 0 until the first capture.
  std::uint64_t capture_id = 0;
  // An edge from a node that has dependencies of its own was removed (cuGraphRemoveDependencies,
  // or cuGraphDestroyNode of its target):
  // the H200 then refused a whole update from this graph even where its topology is the
  // executable's (fact U1, tests/exec/plan_test.cpp); an edge from a root node removed did not.
  const Node* removed_edge_from = nullptr;
  // A graph owned by a node (embedded or conditional body) that a failed capture into it destroyed:
  // its handle is dead and it is empty; the node keeps the object until it goes (discard_capture_target).
  bool discarded = false;
  // Live executables made of this graph while it had conditional nodes. The H200 refuses to instantiate a graph with conditional
  // nodes while an executable of it lives: NOT_SUPPORTED, "Graphs with conditional nodes cannot
  // be instantiated more than once" (its error log; capture tests). Shared, so an executable that
  // outlives the graph (or a graph object reused for another handle) never miscounts.
  std::shared_ptr<std::atomic<int>> live_execs = std::make_shared<std::atomic<int>>(0);
  // Executables made of this graph that cuGraphExecDestroy is destroying right now. On the H200 a
  // cuGraphDestroy of the source graph concurrent with cuGraphExecDestroy of an executable made
  // from it double-frees inside libcuda (ASan, hardening tests): a violation here.
  std::shared_ptr<std::atomic<int>> destroying_execs = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::atomic<int>> destroying = std::make_shared<std::atomic<int>>(0);  // its cuGraphDestroy runs
};

// The simulator's big lock for graphs, nodes, execs and captures. Never held while a
// user-object destructor runs (destructors may call back into the driver).
std::recursive_mutex& graph_mutex();
Graph* graph_of(CUgraph g);        // nullptr if not a live graph
Node* node_of(CUgraphNode n);      // nullptr if unknown (never created or its graph is gone)
CUgraph handle(Graph* g);
CUgraphNode handle(Node* n);
CondHandle* cond_of(CUgraphConditionalHandle h);

// Node creation shared by the cuGraphAdd*Node entry points and stream capture. Validates deps.
CUresult add_node(CUgraphNode* out, Graph* g, const CUgraphNode* deps, std::size_t ndeps, CUgraphNodeType type,
                  Params params, std::string_view entry);
CUresult make_kernel_params(const CUDA_KERNEL_NODE_PARAMS& in, KernelP& out);
// KernelP::home for a kernel of `k.func` with `k.ctx`; `fallback` where neither says (a stream
// launch: the stream's context; a node: the current one).
Ctx* kernel_home(const KernelP& k, Ctx* fallback);
/// Sets one launch attribute on a kernel's parameters as cuGraphKernelNodeSetAttribute does (the
/// H200's refusals included); the caller holds the graph mutex if `k` belongs to a node.
CUresult set_kernel_attr(KernelP* k, CUlaunchAttributeID id, const CUlaunchAttributeValue* v);
// The rules the H200 applies to a kernel node's attributes against its grid, block and dynamic
// shared memory, where it applies them: cuGraphKernelNodeSetAttribute and the SetParams calls.
// A cluster must divide the grid and have at most 8 blocks unless the function allows
// non-portable sizes; a cooperative node must fit the co-residency limit.
CUresult check_kernel_attrs(const KernelP& k);
// The rules cuGraphInstantiate applies: no cluster larger than 16 blocks, and none larger than 8
// unless the function allows non-portable sizes now.
CUresult check_kernel_instantiable(const KernelP& k);
CUresult make_memcpy_params(const CUDA_MEMCPY3D& in, CUcontext ctx, MemcpyP& out);
CUresult make_memset_params(const CUDA_MEMSET_NODE_PARAMS& in, CUcontext ctx, MemsetP& out);
Graph* new_graph();
// Deep copy (nodes, edges, nested graphs, references); fills clone_map of every copied graph.
Graph* clone_graph(Graph* src, Node* owner);
bool contains_conditional(const Graph* g);
// Destroys a graph and every nested graph; collects the references it held into `released`.
void destroy_graph(Graph* g, std::vector<std::pair<UserObj*, std::uint32_t>>& released);
// What an invalidated or failed capture into an existing graph does to that graph: destroys it
// (capture_facts c3k, c3l), or, for a graph owned by a node, empties it and kills its handle.
void discard_capture_target(Graph* g, std::vector<std::pair<UserObj*, std::uint32_t>>& released);
// Whether `g` or a graph nested in it was discarded by a failed capture (it cannot be instantiated,
// cloned or embedded).
bool contains_discarded(const Graph* g);
void release_collected(std::vector<std::pair<UserObj*, std::uint32_t>>& released, std::string_view entry);
// References of a graph and its nested graphs (for instantiate and exec updates).
void collect_refs(const Graph* g, int top_node, std::vector<RefEntry>& out);

// ----------------------------------------------------------------------------- executables

struct ExecNode {
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  Params params;                                       // child/cond graph pointers unused here
  std::vector<std::shared_ptr<const ExecGraph>> subs;  // child graph / conditional bodies
  std::vector<int> deps;
  bool enabled = true;
};
struct ExecGraph {
  std::vector<std::shared_ptr<const ExecNode>> nodes;  // creation order
  std::vector<int> order;                              // a topological order
  std::vector<CUgraphConditionalHandle> handles;       // reset at launch (CU_GRAPH_COND_ASSIGN_DEFAULT)
};

// How one launch of an executable runs its kernels.
struct RunOptions {
  bool node_priority = false;  // CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY
};

// Executes one launch of a graph on the calling (stream worker) thread.
void execute(const ExecGraph& eg, const RunOptions& options);
// Executes an enqueued kernel launch / copy / set on the calling thread (shared with graphs). A
// kernel runs at its node's priority when `node_priority`, else at its stream's.
void run_kernel(const KernelP& k, bool node_priority = false);
// CUDA_ERROR_INVALID_CONTEXT and a no_current_context violation when no context is current: every
// call on a kernel node without one crashed the real driver (docs/design/driver-facts.md).
CUresult kernel_node_needs_ctx(std::string_view entry);
void run_memcpy(const CUDA_MEMCPY3D& c, std::string_view entry);
void run_memset(const CUDA_MEMSET_NODE_PARAMS& m, std::string_view entry);

}  // namespace tether::sim::detail

