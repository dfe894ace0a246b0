// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Simulator: streams (one worker thread each, executing in order), events, host functions,
// kernel launches, copies and sets (synchronous and asynchronous), stream capture.
#include "state.hpp"

namespace tether::sim::detail {

namespace {


struct Streams {
  std::mutex mu;
  std::unordered_set<Stream*> live;
  // Destroyed streams whose work has not finished: the real driver completes it, and
  // cuCtxSynchronize waits for it (a dropped tether::Stream is destroyed on the reclaimer, so its
  // work may still be queued when the application synchronizes the context).
  std::unordered_set<Stream*> draining;
  std::condition_variable drained;
};
struct Events {
  std::mutex mu;
  std::unordered_set<Event*> all;  // destroyed events are kept (flagged) so stale handles never crash
  std::size_t live = 0;
};
Streams& streams() { return immortal<Streams>(); }
Events& events() { return immortal<Events>(); }
std::atomic<std::uint64_t> g_capture_ids{0};

// Captures begun and not ended (guarded by the graph mutex); the count lets calls skip the lock
// when nothing captures.
std::vector<Capture*>& active_captures() { return immortal<std::vector<Capture*>>(); }
std::atomic<int> g_active{0};

void invalidate(Capture* c) {
  if (c->invalidated == CUDA_SUCCESS) c->invalidated = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

// Ends a capture: its streams leave it and recorded events stop marking it. A capture that failed
// (invalidated, unjoined, ended from the wrong thread, its stream destroyed) leaves no graph: the
// graph it made is destroyed, and so is an existing graph it captured into (capture_facts c3k,
// c3l); their references are returned in `released`.
void drop_capture(Capture* c, std::vector<std::pair<UserObj*, std::uint32_t>>& released, bool failed);

bool is_legacy(const Stream* s) { return s->legacy; }

Stream* make_stream(Ctx* ctx, unsigned flags, int priority) {
  Stream* s = new Stream;
  s->ctx = ctx;
  s->flags = flags;
  s->priority = priority;
  s->worker = std::thread([s] { s->run(); });
  s->worker.detach();
  std::lock_guard lock(streams().mu);
  streams().live.insert(s);
  return s;
}

}  // namespace

void Stream::push(std::function<void()> op) {
  std::lock_guard lock(mu);
  q.push_back(std::move(op));
  ++enqueued;
  cv.notify_all();
}

namespace {
thread_local Stream* t_worker = nullptr;  // trivially destructible: readable during thread exit
}  // namespace

Stream* worker_stream() { return t_worker; }

void Stream::run() {
  t_worker = this;
  std::unique_lock lock(mu);
  for (;;) {
    cv.wait(lock, [&] { return !q.empty() || stop; });
    if (q.empty() && stop) break;
    std::function<void()> op = std::move(q.front());
    q.pop_front();
    lock.unlock();
    op();
    op = nullptr;  // drop what the operation held (references of a launch) before completing
    lock.lock();
    ++completed;
    cv.notify_all();
  }
  lock.unlock();
  {
    std::lock_guard registry(streams().mu);
    streams().draining.erase(this);
    streams().drained.notify_all();
  }
  delete this;
}

void Stream::wait_idle() {
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return completed == enqueued; });
}

bool Stream::idle() {
  std::lock_guard lock(mu);
  return completed == enqueued;
}

namespace {
// A default stream of `c`: blocking, never destroyed. Caller holds streams().mu.
Stream* make_default_stream(Ctx* c, bool legacy) {
  Stream* s = new Stream;
  s->ctx = c;
  s->implicit = true;
  s->legacy = legacy;
  s->worker = std::thread([s] { s->run(); });
  s->worker.detach();
  streams().live.insert(s);
  return s;
}
}  // namespace

Stream* stream_of(CUstream h) {
  if (h == nullptr || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
    Ctx* c = current_ctx();
    if (!c) return nullptr;
    std::lock_guard lock(streams().mu);
    if (h == CU_STREAM_PER_THREAD) {
      Stream*& s = c->per_thread[std::this_thread::get_id()];
      if (!s) s = make_default_stream(c, false);
      return s;
    }
    if (!c->null_stream) c->null_stream = make_default_stream(c, true);
    return c->null_stream;
  }
  Stream* s = reinterpret_cast<Stream*>(h);
  std::lock_guard lock(streams().mu);
  return streams().live.count(s) ? s : nullptr;
}

std::vector<Stream*> all_streams() {
  std::lock_guard lock(streams().mu);
  return {streams().live.begin(), streams().live.end()};
}

void wait_destroyed_streams(Ctx* c) {
  std::unique_lock lock(streams().mu);
  streams().drained.wait(lock, [&] {
    for (Stream* s : streams().draining)
      if (!c || s->ctx == c) return false;
    return true;
  });
}

bool destroyed_streams_idle() {
  std::lock_guard lock(streams().mu);
  return streams().draining.empty();
}

Event* event_of(CUevent h) {
  Event* e = reinterpret_cast<Event*>(h);
  std::lock_guard lock(events().mu);
  return events().all.count(e) ? e : nullptr;
}

void event_complete(Event* e, std::uint64_t gen) {
  std::lock_guard lock(e->mu);
  if (gen > e->done) e->done = gen;
  e->when = Clock::now();
  e->cv.notify_all();
}

void event_wait(Event* e, std::uint64_t gen) {
  std::unique_lock lock(e->mu);
  e->cv.wait(lock, [&] { return e->done >= gen; });
}

// ----------------------------------------------------------------------------- execution

void run_kernel(const KernelP& k, bool node_priority) {
  Function* f = k.func;
  if (!f) return;
  if (f->module && f->module->unloaded) {
    record_violation(ViolationKind::unloaded_module_use, "",
                     fmt::format("kernel '{}' launched after its module or library was unloaded", f->name));
    return;
  }
  const Twin& twin = *f->twin;
  // Why only with several devices: with one, no memory can be another device's (and a launch
  // then costs no extra lookup).
  const bool several = device_count() > 1;
  std::vector<const void*> ptrs(twin.params.size());
  for (std::size_t i = 0; i < twin.params.size(); ++i) {
    ptrs[i] = k.args.data() + k.offsets[i];
    if (twin.params[i].pointer) {
      std::uintptr_t p = 0;
      std::memcpy(&p, ptrs[i], sizeof p);
      if (p != 0 && !check_operand(p, 1, false, "", fmt::format("kernel '{}' argument {}", f->name, i).c_str()))
        return;  // the kernel does not run: it would touch freed memory
      if (p == 0 || !several || !k.home) continue;
      const int dev = device_of(p);
      if (dev < 0 || dev == k.home->device || (k.home->peers.load() >> dev & 1u)) continue;
      record_violation(ViolationKind::peer_access, "",
                       fmt::format("kernel '{}' runs on device {} and its argument {} (0x{:x}) is memory of device {}, "
                                   "whose peer access from device {}'s context is not enabled",
                                   f->name, k.home->device, i, p, dev, k.home->device));
      return;  // the kernel does not run: on a GPU it faults
    }
  }
  LaunchInfo info{f->name, k.grid, k.block, k.shared};
  const std::array<unsigned, 3>& c = k.attrs.cluster;
  if (c[0] && c[1] && c[2]) {
    info.cluster = c;
    // Only whole clusters run. A grid that is no multiple of the cluster can reach a launch only
    // through a whole update from a node without a cluster, which keeps the executable's: on the
    // H200 a grid of 7 under a kept cluster of 2 ran 6 blocks (launch_attr_probe
    // cluster/update_kept_not_divisor).
    for (std::size_t i = 0; i < 3; ++i) info.grid[i] = k.grid[i] / c[i] * c[i];
  }
  info.cooperative = k.attrs.cooperative != 0;
  Stream* s = worker_stream();
  info.priority = node_priority ? k.attrs.priority : s ? s->priority : 0;
  try {
    twin.body(info, ptrs.data());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tether simulator: the twin of kernel '%s' threw: %s\n", f->name.c_str(), e.what());
  }
}

namespace {

struct Span {
  std::uintptr_t base;
  bool device;
};

// Resolves one side of a 3D copy to an address and whether it is device memory.
bool side(CUmemorytype type, const void* host, CUdeviceptr dev, Span& out) {
  switch (type) {
    case CU_MEMORYTYPE_HOST: out = {reinterpret_cast<std::uintptr_t>(host), false}; return true;
    case CU_MEMORYTYPE_DEVICE: out = {static_cast<std::uintptr_t>(dev), true}; return true;
    case CU_MEMORYTYPE_UNIFIED: {
      std::uintptr_t p = static_cast<std::uintptr_t>(dev);
      out = {p, classify(p, 1, true) != Range::unknown};
      return true;
    }
    default: return false;
  }
}

std::size_t extent(std::size_t width, std::size_t height, std::size_t depth, std::size_t pitch, std::size_t rows) {
  if (height * depth <= 1) return width;
  std::size_t p = pitch ? pitch : width;
  std::size_t r = rows ? rows : height;
  return ((depth - 1) * r + (height - 1)) * p + width;
}

}  // namespace

void run_memcpy(const CUDA_MEMCPY3D& c, std::string_view entry) {
  Span s{}, d{};
  if (!side(c.srcMemoryType, c.srcHost, c.srcDevice, s) || !side(c.dstMemoryType, c.dstHost, c.dstDevice, d)) return;
  std::size_t sp = c.srcPitch ? c.srcPitch : c.WidthInBytes, dp = c.dstPitch ? c.dstPitch : c.WidthInBytes;
  std::size_t sh = c.srcHeight ? c.srcHeight : c.Height, dh = c.dstHeight ? c.dstHeight : c.Height;
  std::size_t h = c.Height ? c.Height : 1, depth = c.Depth ? c.Depth : 1;
  std::uintptr_t s0 = s.base + (c.srcZ * sh + c.srcY) * sp + c.srcXInBytes;
  std::uintptr_t d0 = d.base + (c.dstZ * dh + c.dstY) * dp + c.dstXInBytes;
  if (!check_operand(s0, extent(c.WidthInBytes, h, depth, sp, sh), s.device, entry, "copy source") ||
      !check_operand(d0, extent(c.WidthInBytes, h, depth, dp, dh), d.device, entry, "copy destination"))
    return;
  for (std::size_t z = 0; z < depth; ++z)
    for (std::size_t y = 0; y < h; ++y)
      std::memmove(reinterpret_cast<void*>(d0 + (z * dh + y) * dp), reinterpret_cast<const void*>(s0 + (z * sh + y) * sp),
                   c.WidthInBytes);
}

void run_memset(const CUDA_MEMSET_NODE_PARAMS& m, std::string_view entry) {
  std::size_t rows = m.height ? m.height : 1;
  std::size_t row_bytes = m.width * m.elementSize;
  std::size_t pitch = m.pitch ? m.pitch : row_bytes;
  if (!check_operand(static_cast<std::uintptr_t>(m.dst), (rows - 1) * pitch + row_bytes, true, entry, "memset destination"))
    return;
  for (std::size_t y = 0; y < rows; ++y) {
    auto* row = reinterpret_cast<unsigned char*>(static_cast<std::uintptr_t>(m.dst) + y * pitch);
    for (std::size_t x = 0; x < m.width; ++x) {
      switch (m.elementSize) {
        case 1: row[x] = static_cast<unsigned char>(m.value); break;
        case 2: {
          auto v = static_cast<std::uint16_t>(m.value);
          std::memcpy(row + 2 * x, &v, 2);
          break;
        }
        default: std::memcpy(row + 4 * x, &m.value, 4); break;
      }
    }
  }
}

namespace {

// ----------------------------------------------------------------------------- validation helpers

CUresult need_ctx() {
  return current_ctx() ? CUDA_SUCCESS : fail(CUDA_ERROR_INVALID_CONTEXT, "no context is current on this thread");
}

// A device range given to a copy or set must lie in one allocation.
CUresult check_device(CUdeviceptr p, std::size_t n, std::string_view entry) {
  switch (classify(static_cast<std::uintptr_t>(p), n == 0 ? 1 : n, true)) {
    case Range::live:
    case Range::reserved: return CUDA_SUCCESS;  // graph memory: backed by the time the stream gets there
    case Range::freed:
      record_violation(ViolationKind::use_after_free, entry,
                       fmt::format("{} on device memory 0x{:x} that was freed", entry, p));
      return CUDA_ERROR_INVALID_VALUE;
    case Range::unknown: break;
  }
  return fail(CUDA_ERROR_INVALID_VALUE, fmt::format("0x{:x}+{} is not inside one device allocation", p, n));
}
CUresult check_host(const void* p, std::size_t n, std::string_view entry) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  if (classify(reinterpret_cast<std::uintptr_t>(p), n == 0 ? 1 : n, false) == Range::freed) {
    record_violation(ViolationKind::use_after_free, entry, fmt::format("{} on pinned memory that was freed", entry));
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUDA_MEMCPY3D linear_copy(CUmemorytype dt, void* dh, CUdeviceptr dd, CUmemorytype st, const void* sh, CUdeviceptr sd,
                          std::size_t n) {
  CUDA_MEMCPY3D c{};
  c.srcMemoryType = st;
  c.srcHost = sh;
  c.srcDevice = sd;
  c.dstMemoryType = dt;
  c.dstHost = dh;
  c.dstDevice = dd;
  c.WidthInBytes = n;
  c.Height = 1;
  c.Depth = 1;
  return c;
}

CUDA_MEMSET_NODE_PARAMS linear_set(CUdeviceptr dst, unsigned value, unsigned esize, std::size_t n) {
  CUDA_MEMSET_NODE_PARAMS m{};
  m.dst = dst;
  m.value = value;
  m.elementSize = esize;
  m.width = n;
  m.height = 1;
  return m;
}

// Either captures an operation into the stream's capture graph or runs it on the stream.
// `make` builds the node's type and parameters; `op` is what the stream executes.
CUresult enqueue(Stream* s, std::string_view entry, CUgraphNodeType type, const std::function<Params()>& make,
                 std::function<void()> op) {
  if (CUresult r = legacy_guard(s, entry, true)) return r;
  {
    std::lock_guard lock(graph_mutex());
    if (Capture* c = s->capture) {
      if (c->invalidated != CUDA_SUCCESS) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
      CUgraphNode n = nullptr;
      std::vector<CUgraphNode> deps;
      for (Node* d : s->capture_deps) deps.push_back(handle(d));
      CUresult r = add_node(&n, c->graph, deps.data(), deps.size(), type, make(), entry);
      if (r != CUDA_SUCCESS) {
        c->invalidated = r;
        return r;
      }
      s->capture_deps = {node_of(n)};
      s->capture_deps.front()->stream_captured = true;
      return CUDA_SUCCESS;
    }
  }
  s->push(std::move(op));
  return CUDA_SUCCESS;
}

// Synchronous operations are ordered after the legacy default stream, like the real driver's, and
// so are legacy-stream operations for the capture rules (capture_facts c4 memcpy_htod@blocking).
CUresult sync_default(std::string_view entry) {
  // stream_of(nullptr) is the current context's default stream, or nullptr without a context.
  Stream* s = stream_of(nullptr);
  if (!s) return CUDA_SUCCESS;
  if (CUresult r = legacy_guard(s, entry, true)) return r;
  s->wait_idle();
  return CUDA_SUCCESS;
}

bool capturing(Stream* s) {
  std::lock_guard lock(graph_mutex());
  return s->capture != nullptr;
}

// Synchronizing or querying a stream that takes part in a capture invalidates it in every mode;
// any other stream is a "potentially unsafe" call (capture_facts c4 stream_* rows).
CUresult stream_guard(Stream* s, std::string_view entry) {
  if (g_active.load() == 0) return CUDA_SUCCESS;
  if (CUresult r = legacy_guard(s, entry, true)) return r;
  {
    std::lock_guard lock(graph_mutex());
    if (s->capture) {
      invalidate(s->capture);
      return fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                  fmt::format("{} of a stream that is capturing (the capture is invalidated)", entry));
    }
  }
  return unsafe_call_guard(entry);
}

// The same for events: one recorded in an ongoing capture gives CUDA_ERROR_CAPTURED_EVENT and
// invalidates it in every mode (capture_facts c4 event_*_captured rows).
CUresult event_guard(Event* e, std::string_view entry) {
  if (g_active.load() == 0) return CUDA_SUCCESS;
  {
    std::lock_guard lock(graph_mutex());
    if (e->capture) {
      invalidate(e->capture);
      return fail(CUDA_ERROR_CAPTURED_EVENT,
                  fmt::format("{} of an event recorded in an ongoing capture (the capture is invalidated)", entry));
    }
  }
  return unsafe_call_guard(entry);
}

// ----------------------------------------------------------------------------- copies and sets

CUresult sim_cuMemcpy(CUdeviceptr dst, CUdeviceptr src, std::size_t n) {
  TETHER_SIM_ENTER(cuMemcpy);
  if (CUresult r = need_ctx()) return r;
  CUDA_MEMCPY3D c = linear_copy(CU_MEMORYTYPE_UNIFIED, nullptr, dst, CU_MEMORYTYPE_UNIFIED, nullptr, src, n);
  if (CUresult r = sync_default("cuMemcpy")) return r;
  run_memcpy(c, "cuMemcpy");
  return CUDA_SUCCESS;
}
CUresult sim_cuMemcpyHtoD(CUdeviceptr dst, const void* src, std::size_t n) {
  TETHER_SIM_ENTER(cuMemcpyHtoD);
  if (CUresult r = need_ctx()) return r;
  if (CUresult r = check_device(dst, n, "cuMemcpyHtoD")) return r;
  if (CUresult r = check_host(src, n, "cuMemcpyHtoD")) return r;
  if (CUresult r = sync_default("cuMemcpyHtoD")) return r;
  run_memcpy(linear_copy(CU_MEMORYTYPE_DEVICE, nullptr, dst, CU_MEMORYTYPE_HOST, src, 0, n), "cuMemcpyHtoD");
  return CUDA_SUCCESS;
}
CUresult sim_cuMemcpyDtoH(void* dst, CUdeviceptr src, std::size_t n) {
  TETHER_SIM_ENTER(cuMemcpyDtoH);
  if (CUresult r = need_ctx()) return r;
  if (CUresult r = check_device(src, n, "cuMemcpyDtoH")) return r;
  if (CUresult r = check_host(dst, n, "cuMemcpyDtoH")) return r;
  if (CUresult r = sync_default("cuMemcpyDtoH")) return r;
  run_memcpy(linear_copy(CU_MEMORYTYPE_HOST, dst, 0, CU_MEMORYTYPE_DEVICE, nullptr, src, n), "cuMemcpyDtoH");
  return CUDA_SUCCESS;
}
CUresult sim_cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, std::size_t n) {
  TETHER_SIM_ENTER(cuMemcpyDtoD);
  if (CUresult r = need_ctx()) return r;
  if (CUresult r = check_device(dst, n, "cuMemcpyDtoD")) return r;
  if (CUresult r = check_device(src, n, "cuMemcpyDtoD")) return r;
  if (CUresult r = sync_default("cuMemcpyDtoD")) return r;
  run_memcpy(linear_copy(CU_MEMORYTYPE_DEVICE, nullptr, dst, CU_MEMORYTYPE_DEVICE, nullptr, src, n), "cuMemcpyDtoD");
  return CUDA_SUCCESS;
}

CUresult async_copy(CUDA_MEMCPY3D c, CUstream hs, std::string_view entry) {
  Stream* s = stream_of(hs);
  if (!s) return current_ctx() ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_CONTEXT;
  return enqueue(
      s, entry, CU_GRAPH_NODE_TYPE_MEMCPY, [&] { return Params{MemcpyP{c, handle(s->ctx)}}; },
      [c, entry] { run_memcpy(c, entry); });
}
CUresult sim_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, std::size_t n, CUstream s) {
  TETHER_SIM_ENTER(cuMemcpyAsync);
  if (CUresult r = need_ctx()) return r;
  return async_copy(linear_copy(CU_MEMORYTYPE_UNIFIED, nullptr, dst, CU_MEMORYTYPE_UNIFIED, nullptr, src, n), s,
                    "cuMemcpyAsync");
}
CUresult sim_cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, std::size_t n, CUstream s) {
  TETHER_SIM_ENTER(cuMemcpyHtoDAsync);
  if (CUresult r = need_ctx()) return r;
  if (CUresult r = check_device(dst, n, "cuMemcpyHtoDAsync")) return r;
  if (CUresult r = check_host(src, n, "cuMemcpyHtoDAsync")) return r;
  return async_copy(linear_copy(CU_MEMORYTYPE_DEVICE, nullptr, dst, CU_MEMORYTYPE_HOST, src, 0, n), s,
                    "cuMemcpyHtoDAsync");
}
CUresult sim_cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, std::size_t n, CUstream s) {
  TETHER_SIM_ENTER(cuMemcpyDtoHAsync);
  if (CUresult r = need_ctx()) return r;
  if (CUresult r = check_device(src, n, "cuMemcpyDtoHAsync")) return r;
  if (CUresult r = check_host(dst, n, "cuMemcpyDtoHAsync")) return r;
  return async_copy(linear_copy(CU_MEMORYTYPE_HOST, dst, 0, CU_MEMORYTYPE_DEVICE, nullptr, src, n), s,
                    "cuMemcpyDtoHAsync");
}
CUresult sim_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, std::size_t n, CUstream s) {
  TETHER_SIM_ENTER(cuMemcpyDtoDAsync);
  if (CUresult r = need_ctx()) return r;
  if (CUresult r = check_device(dst, n, "cuMemcpyDtoDAsync")) return r;
  if (CUresult r = check_device(src, n, "cuMemcpyDtoDAsync")) return r;
  return async_copy(linear_copy(CU_MEMORYTYPE_DEVICE, nullptr, dst, CU_MEMORYTYPE_DEVICE, nullptr, src, n), s,
                    "cuMemcpyDtoDAsync");
}

CUresult set(CUdeviceptr dst, unsigned value, unsigned esize, std::size_t n, CUstream hs, bool async,
             std::string_view entry) {
  if (CUresult r = need_ctx()) return r;
  if (CUresult r = check_device(dst, n * esize, entry)) return r;
  CUDA_MEMSET_NODE_PARAMS m = linear_set(dst, value, esize, n);
  if (!async) {
    if (CUresult r = sync_default(entry)) return r;
    run_memset(m, entry);
    return CUDA_SUCCESS;
  }
  Stream* s = stream_of(hs);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  return enqueue(
      s, entry, CU_GRAPH_NODE_TYPE_MEMSET, [&] { return Params{MemsetP{m, handle(s->ctx)}}; },
      [m, entry] { run_memset(m, entry); });
}
CUresult sim_cuMemsetD8(CUdeviceptr d, unsigned char v, std::size_t n) {
  TETHER_SIM_ENTER(cuMemsetD8);
  return set(d, v, 1, n, nullptr, false, "cuMemsetD8");
}
CUresult sim_cuMemsetD32(CUdeviceptr d, unsigned v, std::size_t n) {
  TETHER_SIM_ENTER(cuMemsetD32);
  return set(d, v, 4, n, nullptr, false, "cuMemsetD32");
}
CUresult sim_cuMemsetD8Async(CUdeviceptr d, unsigned char v, std::size_t n, CUstream s) {
  TETHER_SIM_ENTER(cuMemsetD8Async);
  return set(d, v, 1, n, s, true, "cuMemsetD8Async");
}
CUresult sim_cuMemsetD16Async(CUdeviceptr d, unsigned short v, std::size_t n, CUstream s) {
  TETHER_SIM_ENTER(cuMemsetD16Async);
  return set(d, v, 2, n, s, true, "cuMemsetD16Async");
}
CUresult sim_cuMemsetD32Async(CUdeviceptr d, unsigned v, std::size_t n, CUstream s) {
  TETHER_SIM_ENTER(cuMemsetD32Async);
  return set(d, v, 4, n, s, true, "cuMemsetD32Async");
}

// ----------------------------------------------------------------------------- stream-ordered allocation

// cuMemAllocAsync (`pool` null: the device's current pool) and cuMemAllocFromPoolAsync.
CUresult alloc_async(CUdeviceptr* dptr, std::size_t bytes, CUmemoryPool pool, CUstream hs, std::string_view entry) {
  if (!dptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = need_ctx()) return r;
  Stream* s = stream_of(hs);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  CUresult err = CUDA_SUCCESS;
  CUmemoryPool from = pool_for_alloc(pool, s->ctx->device, err);
  if (err != CUDA_SUCCESS) return err;
  const int device = pool_device(from);
  // Captured: a graph allocation (reserved now, backed when its node runs), owned by the graph and
  // not by the pool, whose properties (its device) become the node's. Otherwise a simplification:
  // the memory is backed from the call, not from the point the stream reaches it.
  bool captured = capturing(s);
  if (!captured)
    if (CUresult r = pool_admit(from, bytes)) return r;
  std::uintptr_t p = captured ? graph_reserve(bytes, device, err) : device_alloc(bytes, device, err);
  if (err != CUDA_SUCCESS)
    return fail(err, fmt::format("{}: {} bytes do not fit in the device's memory", entry, bytes));
  CUDA_MEM_ALLOC_NODE_PARAMS a{};
  a.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  a.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  a.poolProps.location.id = device;
  a.bytesize = bytes;
  a.dptr = static_cast<CUdeviceptr>(p);
  CUresult r = enqueue(
      s, entry, CU_GRAPH_NODE_TYPE_MEM_ALLOC, [&] { return Params{AllocP{a}}; }, [] {});
  if (r != CUDA_SUCCESS) {
    if (!captured) device_free_block(p);
    return r;
  }
  if (!captured) pool_attach(from, p, bytes);
  *dptr = static_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}
CUresult sim_cuMemAllocAsync(CUdeviceptr* dptr, std::size_t bytes, CUstream hs) {
  TETHER_SIM_ENTER(cuMemAllocAsync);
  return alloc_async(dptr, bytes, nullptr, hs, "cuMemAllocAsync");
}
CUresult sim_cuMemAllocFromPoolAsync(CUdeviceptr* dptr, std::size_t bytes, CUmemoryPool pool, CUstream hs) {
  TETHER_SIM_ENTER(cuMemAllocFromPoolAsync);
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  return alloc_async(dptr, bytes, pool, hs, "cuMemAllocFromPoolAsync");
}
CUresult sim_cuMemFreeAsync(CUdeviceptr dptr, CUstream hs) {
  TETHER_SIM_ENTER(cuMemFreeAsync);
  if (CUresult r = need_ctx()) return r;
  if (dptr == 0) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = stream_of(hs);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  std::uintptr_t p = static_cast<std::uintptr_t>(dptr);
  if (is_graph_block(p)) {
    if (capturing(s))
      return enqueue(
          s, "cuMemFreeAsync", CU_GRAPH_NODE_TYPE_MEM_FREE, [&] { return Params{FreeP{dptr}}; }, [] {});
    // A graph allocation left allocated by a launch, freed outside the graph (in stream order).
    if (!graph_outstanding(p))
      return fail(CUDA_ERROR_INVALID_VALUE,
                  "cuMemFreeAsync of a graph allocation that no launch left allocated (not launched yet, freed "
                  "by its graph or freed already)");
    set_graph_outstanding(p, false);
    s->push([p] { graph_unmap(p); });
    return CUDA_SUCCESS;
  }
  if (classify(p, 1, true) != Range::live) return CUDA_ERROR_INVALID_VALUE;
  // release_probe D1 (H200): outside capture, a cuMemFreeAsync of cuMemAlloc memory from a thread
  // in GLOBAL mode invalidates another thread's GLOBAL capture, like cuMemFree (D2: not in RELAXED).
  if (!capturing(s)) {
    if (CUresult r = unsafe_call_guard("cuMemFreeAsync")) return r;
    // On a stream with nothing queued the free takes effect at once (what a later query or
    // synchronize sees is the same; release_probe E1), so releases need no wait to be counted.
    if (s->idle()) {
      device_free_block(p);
      pool_block_freed(p);
      return CUDA_SUCCESS;
    }
  }
  return enqueue(
      s, "cuMemFreeAsync", CU_GRAPH_NODE_TYPE_MEM_FREE, [&] { return Params{FreeP{dptr}}; },
      [dptr] {
        device_free_block(static_cast<std::uintptr_t>(dptr));
        pool_block_freed(static_cast<std::uintptr_t>(dptr));
      });
}
CUresult sim_cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  TETHER_SIM_ENTER(cuThreadExchangeStreamCaptureMode);
  if (!mode) return CUDA_ERROR_INVALID_VALUE;
  // Why any value is taken: the driver accepted mode 3 (capture_facts c10t); unknown modes are
  // treated as GLOBAL by the rules.
  std::swap(ts().capture_mode, *mode);
  return CUDA_SUCCESS;
}

// ----------------------------------------------------------------------------- streams

CUresult create_stream(CUstream* out, unsigned flags, int priority) {
  if (!out || (flags & ~unsigned{CU_STREAM_NON_BLOCKING})) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = need_ctx()) return r;
  { std::lock_guard gate(memory_gate()); }  // waits behind a cuMemFree blocked by a host callback
  *out = reinterpret_cast<CUstream>(make_stream(current_ctx(), flags, priority));
  return CUDA_SUCCESS;
}
CUresult sim_cuStreamCreate(CUstream* out, unsigned flags) {
  TETHER_SIM_ENTER(cuStreamCreate);
  return create_stream(out, flags, 0);
}
CUresult sim_cuStreamCreateWithPriority(CUstream* out, unsigned flags, int priority) {
  TETHER_SIM_ENTER(cuStreamCreateWithPriority);
  // Out-of-range priorities are clamped, not refused (launch_attr_probe prio/stream_create).
  return create_stream(out, flags, clamp_priority(priority));
}
CUresult sim_cuStreamDestroy(CUstream h) {
  TETHER_SIM_ENTER(cuStreamDestroy);
  if (h == nullptr || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) return CUDA_ERROR_INVALID_HANDLE;
  Stream* s = stream_of(h);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  std::vector<std::pair<UserObj*, std::uint32_t>> released;
  {
    // Destroying a capturing stream ends its capture (capture_facts c10w: a synchronous allocation
    // afterwards succeeds); a joined stream just leaves it.
    std::lock_guard glock(graph_mutex());
    if (Capture* c = s->capture) {
      if (c->origin == s) {
        drop_capture(c, released, true);
      } else {
        std::erase(c->streams, s);
        s->capture = nullptr;
        s->capture_deps.clear();
      }
    }
  }
  release_collected(released, "cuStreamDestroy");
  {
    std::lock_guard lock(streams().mu);
    streams().live.erase(s);
    streams().draining.insert(s);
  }
  // Pending work still completes (as on the real driver); the worker then frees the stream.
  std::lock_guard lock(s->mu);
  s->stop = true;
  s->cv.notify_all();
  return CUDA_SUCCESS;
}
CUresult sim_cuStreamSynchronize(CUstream h) {
  TETHER_SIM_ENTER(cuStreamSynchronize);
  Stream* s = stream_of(h);
  if (!s) return current_ctx() ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult r = stream_guard(s, "cuStreamSynchronize")) return r;
  s->wait_idle();
  return CUDA_SUCCESS;
}
CUresult sim_cuCtxSynchronize() {
  TETHER_SIM_ENTER(cuCtxSynchronize);
  Ctx* c = current_ctx();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  if (g_active.load() > 0) {
    // Invalidates every capture of the context in every mode (capture_facts c4 ctx_sync rows).
    bool any = false;
    {
      std::lock_guard lock(graph_mutex());
      for (Capture* cap : active_captures())
        if (cap->ctx == c) invalidate(cap), any = true;
    }
    if (any)
      return fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                  "cuCtxSynchronize while a stream of the context captures (the capture is invalidated)");
    if (CUresult r = unsafe_call_guard("cuCtxSynchronize")) return r;
  }
  for (Stream* s : all_streams())
    if (s->ctx == c) s->wait_idle();
  wait_destroyed_streams(c);
  return CUDA_SUCCESS;
}
CUresult sim_cuStreamQuery(CUstream h) {
  TETHER_SIM_ENTER(cuStreamQuery);
  Stream* s = stream_of(h);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (!ts().in_destructor && !ts().in_callback)
    if (CUresult r = stream_guard(s, "cuStreamQuery")) return r;
  return s->idle() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult sim_cuLaunchHostFunc(CUstream h, CUhostFn fn, void* data) {
  TETHER_SIM_ENTER(cuLaunchHostFunc);
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = stream_of(h);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  return enqueue(
      s, "cuLaunchHostFunc", CU_GRAPH_NODE_TYPE_HOST, [&] { return Params{HostP{fn, data}}; },
      [fn, data] { run_host_callback(fn, data); });
}
CUresult sim_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                            unsigned shared, CUstream h, void** params, void** extra) {
  TETHER_SIM_ENTER(cuLaunchKernel);
  if (CUresult r = need_ctx()) return r;
  CUDA_KERNEL_NODE_PARAMS in{};
  in.func = f;
  in.gridDimX = gx;
  in.gridDimY = gy;
  in.gridDimZ = gz;
  in.blockDimX = bx;
  in.blockDimY = by;
  in.blockDimZ = bz;
  in.sharedMemBytes = shared;
  in.kernelParams = params;
  in.extra = extra;
  KernelP k;
  if (CUresult r = make_kernel_params(in, k)) return r;
  Stream* s = stream_of(h);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  k.home = kernel_home(k, s->ctx);  // a launch runs in its stream's context
  // A captured launch's node carries the stream's priority as its priority attribute
  // (launch_attr_probe prio/captured_launch); an uncaptured launch runs at the stream's anyway.
  k.attrs.priority = k.attrs.priority_requested = s->priority;
  return enqueue(
      s, "cuLaunchKernel", CU_GRAPH_NODE_TYPE_KERNEL, [&] { return Params{k}; }, [k] { run_kernel(k); });
}

CUresult sim_cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  TETHER_SIM_ENTER(cuLaunchKernelEx);
  if (!config) return CUDA_ERROR_INVALID_VALUE;
  if (config->numAttrs && !config->attrs) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = need_ctx()) return r;
  CUDA_KERNEL_NODE_PARAMS in{};
  in.func = f;
  in.gridDimX = config->gridDimX;
  in.gridDimY = config->gridDimY;
  in.gridDimZ = config->gridDimZ;
  in.blockDimX = config->blockDimX;
  in.blockDimY = config->blockDimY;
  in.blockDimZ = config->blockDimZ;
  in.sharedMemBytes = config->sharedMemBytes;
  in.kernelParams = params;
  in.extra = extra;
  KernelP k;
  if (CUresult r = make_kernel_params(in, k)) return r;
  Stream* s = stream_of(config->hStream);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  k.home = kernel_home(k, s->ctx);  // a launch runs in its stream's context
  k.attrs.priority = k.attrs.priority_requested = s->priority;
  // The attributes are checked as cuGraphKernelNodeSetAttribute checks them (the same refusals).
  for (unsigned i = 0; i < config->numAttrs; ++i)
    if (CUresult r = set_kernel_attr(&k, config->attrs[i].id, &config->attrs[i].value)) return r;
  return enqueue(
      s, "cuLaunchKernelEx", CU_GRAPH_NODE_TYPE_KERNEL, [&] { return Params{k}; }, [k] { run_kernel(k); });
}

// ----------------------------------------------------------------------------- events

CUresult sim_cuEventCreate(CUevent* out, unsigned flags) {
  TETHER_SIM_ENTER(cuEventCreate);
  if (!out || (flags & ~unsigned{CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS}))
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = need_ctx()) return r;
  Event* e = new Event;
  e->flags = flags;
  e->ctx = current_ctx();
  std::lock_guard lock(events().mu);
  events().all.insert(e);
  ++events().live;
  *out = reinterpret_cast<CUevent>(e);
  return CUDA_SUCCESS;
}
CUresult sim_cuEventDestroy(CUevent h) {
  TETHER_SIM_ENTER(cuEventDestroy);
  Event* e = event_of(h);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard lock(events().mu);
  if (e->destroyed) {
    record_violation(ViolationKind::destroyed_event_use, "cuEventDestroy", "event destroyed twice");
    return CUDA_ERROR_INVALID_HANDLE;
  }
  e->destroyed = true;
  --events().live;
  return CUDA_SUCCESS;
}
Event* live_event(CUevent h, std::string_view entry) {
  Event* e = event_of(h);
  if (e && e->destroyed) {
    record_violation(ViolationKind::destroyed_event_use, entry, fmt::format("{} on a destroyed event", entry));
    return nullptr;
  }
  return e;
}
// Adds a node of `type` after the stream's capture dependency set, which becomes that node.
CUresult capture_node(Stream* s, CUgraphNodeType type, Params params, std::string_view entry) {
  Capture* c = s->capture;
  CUgraphNode n = nullptr;
  std::vector<CUgraphNode> deps;
  for (Node* d : s->capture_deps) deps.push_back(handle(d));
  CUresult r = add_node(&n, c->graph, deps.data(), deps.size(), type, std::move(params), entry);
  if (r != CUDA_SUCCESS) return r;
  s->capture_deps = {node_of(n)};
  s->capture_deps.front()->stream_captured = true;
  return CUDA_SUCCESS;
}

CUresult record_event(CUevent h, CUstream hs, unsigned flags, std::string_view entry) {
  if (flags & ~unsigned{CU_EVENT_RECORD_EXTERNAL}) return CUDA_ERROR_INVALID_VALUE;
  Event* e = live_event(h, entry);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  Stream* s = stream_of(hs);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  // cuda.h: "hEvent and hStream must be from the same context otherwise CUDA_ERROR_INVALID_HANDLE
  // is returned" (a wait, in contrast, may be on a stream of any context or device).
  if (e->ctx && e->ctx != s->ctx)
    return fail(CUDA_ERROR_INVALID_HANDLE,
                fmt::format("{}: the event was created in device {}'s context and the stream belongs to device {}'s; "
                            "record an event on a stream of its own context (any stream may wait for it)",
                            entry, e->ctx->device, s->ctx->device));
  if (CUresult r = legacy_guard(s, entry, true)) return r;
  {
    std::lock_guard lock(graph_mutex());
    if (Capture* c = s->capture) {
      if (c->invalidated != CUDA_SUCCESS) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
      // capture_facts c1o: an external record is captured as an event record node.
      if (flags & CU_EVENT_RECORD_EXTERNAL)
        return capture_node(s, CU_GRAPH_NODE_TYPE_EVENT_RECORD, Params{RecordP{e}}, entry);
      // capture_facts c1i, c1l, c1y7: a plain record makes no node and leaves the dependency set as
      // it is; it marks a point other streams can fork from or join.
      e->capture = c;
      e->capture_deps = s->capture_deps;
      return CUDA_SUCCESS;
    }
    // The issue-21 H200 run: CU_EVENT_RECORD_EXTERNAL on a stream that is not capturing is
    // refused with CUDA_ERROR_ILLEGAL_STATE (the simulator accepted it, and tether sent it).
    if (flags & CU_EVENT_RECORD_EXTERNAL)
      return fail(CUDA_ERROR_ILLEGAL_STATE,
                  fmt::format("{} with CU_EVENT_RECORD_EXTERNAL on a stream that is not capturing", entry));
    // Recorded outside any capture now: a wait on it no longer forks or joins one.
    e->capture = nullptr;
    e->capture_deps.clear();
  }
  std::uint64_t gen;
  {
    std::lock_guard lock(e->mu);
    gen = ++e->recorded;
  }
  s->push([e, gen] { event_complete(e, gen); });
  return CUDA_SUCCESS;
}
CUresult sim_cuEventRecord(CUevent h, CUstream hs) {
  TETHER_SIM_ENTER(cuEventRecord);
  return record_event(h, hs, 0, "cuEventRecord");
}
CUresult sim_cuEventRecordWithFlags(CUevent h, CUstream hs, unsigned flags) {
  TETHER_SIM_ENTER(cuEventRecordWithFlags);
  return record_event(h, hs, flags, "cuEventRecordWithFlags");
}
CUresult sim_cuStreamWaitEvent(CUstream hs, CUevent h, unsigned flags) {
  TETHER_SIM_ENTER(cuStreamWaitEvent);
  if (flags & ~unsigned{CU_EVENT_WAIT_EXTERNAL}) return CUDA_ERROR_INVALID_VALUE;
  Event* e = live_event(h, "cuStreamWaitEvent");
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  Stream* s = stream_of(hs);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = legacy_guard(s, "cuStreamWaitEvent", true)) return r;
  {
    std::lock_guard lock(graph_mutex());
    Capture* mine = s->capture;
    if (mine && mine->invalidated != CUDA_SUCCESS) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (mine && (flags & CU_EVENT_WAIT_EXTERNAL)) {
      // capture_facts c1p: an external wait is captured as an event wait node. (Observed for an
      // event recorded outside the capture; for one recorded in it the flag's documented meaning,
      // a node, is followed too.)
      return capture_node(s, CU_GRAPH_NODE_TYPE_WAIT_EVENT, Params{WaitP{e}}, "cuStreamWaitEvent");
    }
    if (Capture* c = e->capture) {
      if (mine && mine != c) {
        // capture_facts c1y8: merging two captures is refused and invalidates both.
        invalidate(mine);
        invalidate(c);
        return fail(CUDA_ERROR_STREAM_CAPTURE_MERGE,
                    "cuStreamWaitEvent of a stream in one capture on an event recorded in another capture (both "
                    "captures are invalidated)");
      }
      if (!mine) {
        // capture_facts c1j: a fork; the stream joins the capture with the event's dependency set.
        s->capture = c;
        s->capture_deps.clear();
        c->streams.push_back(s);
      }
      // capture_facts c1m: a join adds the event's set to the stream's (no node).
      for (Node* d : e->capture_deps)
        if (std::find(s->capture_deps.begin(), s->capture_deps.end(), d) == s->capture_deps.end())
          s->capture_deps.push_back(d);
      return CUDA_SUCCESS;
    }
    if (mine) {
      // capture_facts c1y3: an event recorded outside the capture cannot be waited on without
      // CU_EVENT_WAIT_EXTERNAL; the capture is invalidated.
      invalidate(mine);
      return fail(CUDA_ERROR_STREAM_CAPTURE_ISOLATION,
                  "a capturing stream waited on an event recorded outside the capture without CU_EVENT_WAIT_EXTERNAL "
                  "(the capture is invalidated)");
    }
  }
  std::uint64_t gen;
  {
    std::lock_guard lock(e->mu);
    gen = e->recorded;
  }
  s->push([e, gen] { event_wait(e, gen); });
  return CUDA_SUCCESS;
}
CUresult sim_cuEventQuery(CUevent h) {
  TETHER_SIM_ENTER(cuEventQuery);
  Event* e = live_event(h, "cuEventQuery");
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = event_guard(e, "cuEventQuery")) return r;
  std::lock_guard lock(e->mu);
  return e->done >= e->recorded ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult sim_cuEventSynchronize(CUevent h) {
  TETHER_SIM_ENTER(cuEventSynchronize);
  Event* e = live_event(h, "cuEventSynchronize");
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = event_guard(e, "cuEventSynchronize")) return r;
  std::uint64_t gen;
  {
    std::lock_guard lock(e->mu);
    gen = e->recorded;
  }
  event_wait(e, gen);
  return CUDA_SUCCESS;
}
CUresult sim_cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
  TETHER_SIM_ENTER(cuEventElapsedTime);
  if (!ms) return CUDA_ERROR_INVALID_VALUE;
  Event* x = live_event(a, "cuEventElapsedTime");
  Event* y = live_event(b, "cuEventElapsedTime");
  if (!x || !y) return CUDA_ERROR_INVALID_HANDLE;
  if ((x->flags | y->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  // Why two shapes: the same event twice is allowed (0 ms), and locking one mutex twice deadlocks.
  std::unique_lock<std::mutex> lx(x->mu, std::defer_lock), ly;
  if (x == y) {
    lx.lock();
  } else {
    ly = std::unique_lock<std::mutex>(y->mu, std::defer_lock);
    std::lock(lx, ly);
  }
  if (x->recorded == 0 || y->recorded == 0) return CUDA_ERROR_INVALID_HANDLE;
  if (x->done < x->recorded || y->done < y->recorded) return CUDA_ERROR_NOT_READY;
  *ms = std::chrono::duration<float, std::milli>(y->when - x->when).count();
  return CUDA_SUCCESS;
}

// ----------------------------------------------------------------------------- capture

CUresult begin_capture(Stream* s, Graph* g, bool owns, const CUgraphNode* deps, std::size_t n,
                       CUstreamCaptureMode mode) {
  std::lock_guard lock(graph_mutex());
  if (s->capture) return CUDA_ERROR_ILLEGAL_STATE;
  if (g) {
    for (std::size_t i = 0; i < n; ++i) {
      Node* d = node_of(deps[i]);
      if (!d || d->destroyed || d->graph != g) return CUDA_ERROR_INVALID_VALUE;
    }
    for (Capture* other : active_captures())
      if (other->graph == g) {
        // The probe's two cases that did this (two streams capturing into one existing graph, and
        // a capture into the graph of another ongoing capture) crashed the H200's driver
        // (capture_facts ctg_two_streams, x_ctg_into_capture_graph).
        record_violation(ViolationKind::capture_into_capturing_graph, "cuStreamBeginCaptureToGraph",
                         "a capture into a graph that an ongoing capture is capturing into (the real driver crashes)");
        return fail(CUDA_ERROR_ILLEGAL_STATE, "the graph is the graph of an ongoing stream capture");
      }
  }
  Capture* c = new Capture;
  c->graph = g ? g : new_graph();
  c->owns_graph = owns;
  if (c->graph->capture_id == 0) c->graph->capture_id = ++g_capture_ids;
  c->id = c->graph->capture_id;
  c->mode = mode;
  c->ctx = s->ctx;
  c->thread = std::this_thread::get_id();
  c->origin = s;
  c->streams.push_back(s);
  s->capture = c;
  s->capture_deps.clear();
  for (std::size_t i = 0; i < n; ++i) s->capture_deps.push_back(node_of(deps[i]));
  active_captures().push_back(c);
  g_active.fetch_add(1);
  return CUDA_SUCCESS;
}
CUresult sim_cuStreamBeginCapture(CUstream h, CUstreamCaptureMode mode) {
  TETHER_SIM_ENTER(cuStreamBeginCapture);
  // capture_facts c10a (the legacy stream cannot capture), c10b (the per-thread stream can).
  if (h == nullptr || h == CU_STREAM_LEGACY) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  Stream* s = stream_of(h);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  return begin_capture(s, nullptr, true, nullptr, 0, mode);
}
CUresult sim_cuStreamBeginCaptureToGraph(CUstream h, CUgraph hg, const CUgraphNode* deps, const CUgraphEdgeData* edges,
                                         std::size_t n, CUstreamCaptureMode mode) {
  TETHER_SIM_ENTER(cuStreamBeginCaptureToGraph);
  if (h == nullptr || h == CU_STREAM_LEGACY) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  Stream* s = stream_of(h);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (edges)
    for (std::size_t i = 0; i < n; ++i)
      if (edges[i].from_port || edges[i].to_port || edges[i].type)
        return fail(CUDA_ERROR_NOT_SUPPORTED, "the simulator models default edges only");
  std::lock_guard lock(graph_mutex());
  Graph* g = graph_of(hg);
  if (!g || (n && !deps)) return CUDA_ERROR_INVALID_VALUE;
  return begin_capture(s, g, false, deps, n, mode);
}

// capture_facts c2g, c3l: every stream forked into the capture must be joined back into the origin
// before the end: its dependency set (its last captured work) must be upstream of, or be, the
// origin's. Nodes added explicitly and never joined do not count (c5e), nor does a set that only
// nodes added with cuGraphAddNode make up: the H200 ended such a capture with CUDA_SUCCESS.
bool unjoined(const Capture* c) {
  std::unordered_set<const Node*> upstream;
  std::vector<const Node*> todo(c->origin->capture_deps.begin(), c->origin->capture_deps.end());
  while (!todo.empty()) {
    const Node* n = todo.back();
    todo.pop_back();
    if (upstream.insert(n).second) todo.insert(todo.end(), n->deps.begin(), n->deps.end());
  }
  for (const Stream* x : c->streams)
    if (x != c->origin)
      for (const Node* d : x->capture_deps)
        if (d->stream_captured && !upstream.count(d)) return true;
  return false;
}

CUresult sim_cuStreamEndCapture(CUstream h, CUgraph* out) {
  TETHER_SIM_ENTER(cuStreamEndCapture);
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = stream_of(h);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = legacy_guard(s, "cuStreamEndCapture", true)) return r;
  std::vector<std::pair<UserObj*, std::uint32_t>> released;
  CUresult result = CUDA_SUCCESS;
  {
    std::lock_guard lock(graph_mutex());
    Capture* c = s->capture;
    if (!c) return CUDA_ERROR_ILLEGAL_STATE;
    if (c->origin != s) {
      invalidate(c);  // capture_facts c10f: the origin's capture is invalidated
      return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    }
    Graph* g = c->graph;
    if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && c->thread != std::this_thread::get_id()) {
      // capture_facts c10h, c10i: refused, and the capture is over (status NONE afterwards).
      result = fail(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,
                    "cuStreamEndCapture from another thread than the one that began a GLOBAL or THREAD_LOCAL capture");
    } else if (c->invalidated != CUDA_SUCCESS) {
      result = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (unjoined(c)) {
      result = fail(CUDA_ERROR_STREAM_CAPTURE_UNJOINED,
                    "a stream forked into the capture was not joined back into the stream that began it");
    }
    drop_capture(c, released, result != CUDA_SUCCESS);
    *out = result == CUDA_SUCCESS ? handle(g) : nullptr;
  }
  // Destructors of the references a failed capture held run here, on the calling thread, after
  // the graph lock is released (capture_facts c2f, c2g, c3k).
  release_collected(released, "cuStreamEndCapture");
  return result;
}
CUresult sim_cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus* st) {
  TETHER_SIM_ENTER(cuStreamIsCapturing);
  if (!st) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = stream_of(h);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  // H200: IMPLICIT, and the capture stays active (only the query of c10c invalidates it).
  if (CUresult r = legacy_guard(s, "cuStreamIsCapturing", false)) return r;
  std::lock_guard lock(graph_mutex());
  *st = !s->capture                                 ? CU_STREAM_CAPTURE_STATUS_NONE
        : s->capture->invalidated != CUDA_SUCCESS ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                                    : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  return CUDA_SUCCESS;
}
CUresult sim_cuStreamGetCaptureInfo(CUstream h, CUstreamCaptureStatus* st, cuuint64_t* id, CUgraph* graph,
                                    const CUgraphNode** deps, const CUgraphEdgeData** edges, std::size_t* n) {
  TETHER_SIM_ENTER(cuStreamGetCaptureInfo);
  if (!st) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = stream_of(h);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = legacy_guard(s, "cuStreamGetCaptureInfo", false)) return r;  // as cuStreamIsCapturing
  std::lock_guard lock(graph_mutex());
  Capture* c = s->capture;
  if (!c) {
    // capture_facts c1x: only the status is written; the other outputs keep what they held.
    *st = CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
  }
  bool active = c->invalidated == CUDA_SUCCESS;
  *st = active ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_INVALIDATED;
  if (id) *id = c->id;
  // capture_facts c2f, c2k: an invalidated capture reports no graph (the graph lives on until the
  // end); no dependencies either (not observed).
  if (graph) *graph = active ? handle(c->graph) : nullptr;
  // Why thread-local arrays: the driver's arrays stay valid until the next capture call on the stream.
  thread_local std::vector<CUgraphNode> dep_handles;
  thread_local std::vector<CUgraphEdgeData> edge_data;
  dep_handles.clear();
  if (active)
    for (Node* d : s->capture_deps) dep_handles.push_back(handle(d));
  edge_data.assign(dep_handles.size(), CUgraphEdgeData{});
  if (deps) *deps = dep_handles.empty() ? nullptr : dep_handles.data();
  if (edges) *edges = edge_data.empty() ? nullptr : edge_data.data();
  if (n) *n = dep_handles.size();
  return CUDA_SUCCESS;
}
CUresult sim_cuStreamUpdateCaptureDependencies(CUstream h, CUgraphNode* deps, const CUgraphEdgeData* edges,
                                               std::size_t n, unsigned flags) {
  TETHER_SIM_ENTER(cuStreamUpdateCaptureDependencies);
  if (flags > CU_STREAM_SET_CAPTURE_DEPENDENCIES || (n && !deps)) return CUDA_ERROR_INVALID_VALUE;  // c5f
  if (edges)
    for (std::size_t i = 0; i < n; ++i)
      if (edges[i].from_port || edges[i].to_port || edges[i].type)
        return fail(CUDA_ERROR_NOT_SUPPORTED,
                    "the simulator models default edges only (programmatic capture dependencies are not modelled)");
  Stream* s = stream_of(h);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = legacy_guard(s, "cuStreamUpdateCaptureDependencies", true)) return r;
  std::lock_guard lock(graph_mutex());
  if (!s->capture) return CUDA_ERROR_ILLEGAL_STATE;  // c5h
  // An invalidated capture is still a capture: like its stream operations, the update answers
  // STREAM_CAPTURE_INVALIDATED (the reading of "Direct add into a capturing graph" in
  // docs/design/driver-facts.md; the documentation lists only ILLEGAL_STATE, for no capture).
  if (s->capture->invalidated != CUDA_SUCCESS) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  // c5b-c5d: SET replaces the set, ADD (and flags 0) adds to it.
  std::vector<Node*> next = flags == CU_STREAM_SET_CAPTURE_DEPENDENCIES ? std::vector<Node*>{} : s->capture_deps;
  for (std::size_t i = 0; i < n; ++i) {
    Node* d = node_of(deps[i]);
    // c5g: a node of another graph is refused; the capture goes on.
    if (!d || d->destroyed || d->graph != s->capture->graph) return CUDA_ERROR_INVALID_VALUE;
    if (std::find(next.begin(), next.end(), d) == next.end()) next.push_back(d);
  }
  s->capture_deps = std::move(next);
  return CUDA_SUCCESS;
}

void drop_capture(Capture* c, std::vector<std::pair<UserObj*, std::uint32_t>>& released, bool failed) {
  for (Stream* x : c->streams) {
    x->capture = nullptr;
    x->capture_deps.clear();
  }
  {
    // Events recorded during the capture no longer mark capture points.
    std::lock_guard el(events().mu);
    for (Event* e : events().all)
      if (e->capture == c) e->capture = nullptr, e->capture_deps.clear();
  }
  if (std::erase(active_captures(), c) > 0) g_active.fetch_sub(1);
  if (failed) {
    if (c->owns_graph)
      destroy_graph(c->graph, released);
    else
      discard_capture_target(c->graph, released);
  }
  delete c;
}

}  // namespace

void invalidate_capture(Capture* c) { invalidate(c); }

bool graph_in_capture(const Graph* g) {
  if (g_active.load() == 0) return false;
  for (const Capture* c : active_captures())
    for (const Graph* x = c->graph; x; x = x->owner ? x->owner->graph : nullptr)
      if (x == g) return true;
  return false;
}

bool node_in_capture(const Node* n) {
  if (g_active.load() == 0) return false;
  for (const Capture* c : active_captures())
    for (const Graph* x = c->graph; x; x = x->owner ? x->owner->graph : nullptr)
      if (x == n->graph || x->owner == n) return true;
  return false;
}

CUresult legacy_guard(Stream* s, std::string_view entry, bool invalidates) {
  if (g_active.load() == 0 || !is_legacy(s)) return CUDA_SUCCESS;
  bool hit = false;
  {
    std::lock_guard lock(graph_mutex());
    for (Capture* c : active_captures()) {
      if (c->ctx != s->ctx) continue;
      for (const Stream* x : c->streams)
        if (!(x->flags & CU_STREAM_NON_BLOCKING)) {
          if (invalidates) invalidate(c);
          hit = true;
          break;
        }
    }
  }
  if (!hit) return CUDA_SUCCESS;
  return fail(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
              fmt::format("{} on the legacy default stream while a blocking stream (created without "
                          "CU_STREAM_NON_BLOCKING) captures: the legacy stream would wait for it{}",
                          entry, invalidates ? " (the capture is invalidated)" : ""));
}

CUresult unsafe_call_guard(std::string_view entry) {
  if (g_active.load() == 0) return CUDA_SUCCESS;
  CUstreamCaptureMode mine = ts().capture_mode;
  if (mine == CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_SUCCESS;
  std::lock_guard lock(graph_mutex());
  bool hit = false;
  const std::thread::id me = std::this_thread::get_id();
  for (Capture* c : active_captures()) {
    if (c->mode == CU_STREAM_CAPTURE_MODE_RELAXED) continue;
    // The thread's own capture in GLOBAL or THREAD_LOCAL mode; another thread's GLOBAL capture
    // when this thread is GLOBAL (the CUDA documentation's rule, as capture_facts c4 observed).
    bool own = c->thread == me;
    bool global = c->mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL && mine != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    if (own || global) invalidate(c), hit = true;
  }
  if (!hit) return CUDA_SUCCESS;
  return fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
              fmt::format("{} is not permitted while a stream captures in GLOBAL mode (or this thread's own "
                          "THREAD_LOCAL capture); the capture is invalidated. A thread may allow it with "
                          "cuThreadExchangeStreamCaptureMode(CU_STREAM_CAPTURE_MODE_RELAXED)",
                          entry));
}

void fill_stream(tether::detail::DriverTable& t) {
  using tether::detail::Entry;
  t.set<Entry::cuMemcpy>(&sim_cuMemcpy);
  t.set<Entry::cuMemcpyHtoD>(&sim_cuMemcpyHtoD);
  t.set<Entry::cuMemcpyDtoH>(&sim_cuMemcpyDtoH);
  t.set<Entry::cuMemcpyDtoD>(&sim_cuMemcpyDtoD);
  t.set<Entry::cuMemcpyAsync>(&sim_cuMemcpyAsync);
  t.set<Entry::cuMemcpyHtoDAsync>(&sim_cuMemcpyHtoDAsync);
  t.set<Entry::cuMemcpyDtoHAsync>(&sim_cuMemcpyDtoHAsync);
  t.set<Entry::cuMemcpyDtoDAsync>(&sim_cuMemcpyDtoDAsync);
  t.set<Entry::cuMemsetD8>(&sim_cuMemsetD8);
  t.set<Entry::cuMemsetD32>(&sim_cuMemsetD32);
  t.set<Entry::cuMemsetD8Async>(&sim_cuMemsetD8Async);
  t.set<Entry::cuMemsetD16Async>(&sim_cuMemsetD16Async);
  t.set<Entry::cuMemsetD32Async>(&sim_cuMemsetD32Async);
  t.set<Entry::cuMemAllocAsync>(&sim_cuMemAllocAsync);
  t.set<Entry::cuMemFreeAsync>(&sim_cuMemFreeAsync);
  t.set<Entry::cuMemAllocFromPoolAsync>(&sim_cuMemAllocFromPoolAsync);
  t.set<Entry::cuThreadExchangeStreamCaptureMode>(&sim_cuThreadExchangeStreamCaptureMode);
  t.set<Entry::cuStreamCreate>(&sim_cuStreamCreate);
  t.set<Entry::cuStreamCreateWithPriority>(&sim_cuStreamCreateWithPriority);
  t.set<Entry::cuStreamDestroy>(&sim_cuStreamDestroy);
  t.set<Entry::cuStreamSynchronize>(&sim_cuStreamSynchronize);
  t.set<Entry::cuStreamQuery>(&sim_cuStreamQuery);
  t.set<Entry::cuCtxSynchronize>(&sim_cuCtxSynchronize);
  t.set<Entry::cuStreamWaitEvent>(&sim_cuStreamWaitEvent);
  t.set<Entry::cuLaunchHostFunc>(&sim_cuLaunchHostFunc);
  t.set<Entry::cuLaunchKernel>(&sim_cuLaunchKernel);
  t.set<Entry::cuLaunchKernelEx>(&sim_cuLaunchKernelEx);
  t.set<Entry::cuEventCreate>(&sim_cuEventCreate);
  t.set<Entry::cuEventDestroy>(&sim_cuEventDestroy);
  t.set<Entry::cuEventRecord>(&sim_cuEventRecord);
  t.set<Entry::cuEventRecordWithFlags>(&sim_cuEventRecordWithFlags);
  t.set<Entry::cuEventQuery>(&sim_cuEventQuery);
  t.set<Entry::cuEventSynchronize>(&sim_cuEventSynchronize);
  t.set<Entry::cuEventElapsedTime>(&sim_cuEventElapsedTime);
  t.set<Entry::cuStreamBeginCapture>(&sim_cuStreamBeginCapture);
  t.set<Entry::cuStreamBeginCaptureToGraph>(&sim_cuStreamBeginCaptureToGraph);
  t.set<Entry::cuStreamEndCapture>(&sim_cuStreamEndCapture);
  t.set<Entry::cuStreamIsCapturing>(&sim_cuStreamIsCapturing);
  t.set<Entry::cuStreamGetCaptureInfo>(&sim_cuStreamGetCaptureInfo);
  t.set<Entry::cuStreamUpdateCaptureDependencies>(&sim_cuStreamUpdateCaptureDependencies);
}

std::size_t live_streams() {
  std::lock_guard lock(streams().mu);
  std::size_t n = 0;
  for (Stream* s : streams().live) n += s->ctx && !s->implicit;
  return n;
}
std::size_t live_events() {
  std::lock_guard lock(events().mu);
  return events().live;
}

}  // namespace tether::sim::detail
