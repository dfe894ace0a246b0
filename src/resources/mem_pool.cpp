// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "mem_pool.hpp"

#include <limits>

#include "../capture/capture.hpp"

namespace tether::detail {

namespace {

// The internal stream of one context on which pool buffers are freed, and the event that orders
// it after each allocation. Why a stream of tether's own: the buffer's last owner goes long after
// the allocating stream may have been dropped, and a free on a stream nobody else sees is never
// captured into someone's graph. Why non-blocking: it must not wait for the legacy stream.
struct FreeStream {
  explicit FreeStream(ContextPtr o) noexcept : owner(std::move(o)) {}
  FreeStream(const FreeStream&) = delete;
  FreeStream& operator=(const FreeStream&) = delete;
  ~FreeStream() {
    // Frees still queued on the stream complete: the driver finishes a destroyed stream's work.
    if (order) release_with<Entry::cuEventDestroy>(owner, order, "destroying tether's pool-free ordering event");
    if (stream) release_with<Entry::cuStreamDestroy>(owner, stream, "destroying tether's pool-free stream");
  }

  ContextPtr owner;
  CUstream stream = nullptr;
  CUevent order = nullptr;
  std::mutex mu;  // serialises the record + wait pairs on `order`
};

// One FreeStream per context and driver while anything uses it (a MemPool of the context or a
// live pool buffer): weak, so that the registry never keeps a context retained.
struct FreeStreams {
  std::mutex mu;
  std::vector<std::pair<std::pair<const DriverTable*, CUcontext>, std::weak_ptr<FreeStream>>> entries;
};
FreeStreams& free_streams() {
  static FreeStreams* r = new FreeStreams;  // never destroyed: buffers may be dropped during exit
  return *r;
}

// The context's FreeStream, created if none lives; the context must be current. Throws DriverError.
std::shared_ptr<FreeStream> free_stream_of(const ContextPtr& owner) {
  FreeStreams& r = free_streams();
  std::lock_guard lock(r.mu);
  const std::pair key{owner->table, owner->context};
  for (auto& [k, w] : r.entries)
    if (k == key)
      if (std::shared_ptr<FreeStream> f = w.lock()) return f;
  std::erase_if(r.entries, [](const auto& e) { return e.second.expired(); });
  auto f = std::make_shared<FreeStream>(owner);
  RelaxedScope relaxed(*owner->table);  // never invalidates another thread's stream capture
  call<Entry::cuStreamCreate>(*owner->table, "creating tether's stream for stream-ordered frees of pool memory",
                              &f->stream, unsigned{CU_STREAM_NON_BLOCKING});
  call<Entry::cuEventCreate>(*owner->table, "creating tether's event ordering pool frees after their allocations",
                             &f->order, unsigned{CU_EVENT_DISABLE_TIMING});
  r.entries.emplace_back(key, f);
  return f;
}

}  // namespace

struct PoolState {
  PoolState(ContextPtr o, bool own) noexcept : owner(std::move(o)), owned(own) {}
  PoolState(const PoolState&) = delete;
  PoolState& operator=(const PoolState&) = delete;
  ~PoolState() {
    if (owned && pool) release_with<Entry::cuMemPoolDestroy>(owner, pool, "destroying a memory pool");
  }

  ContextPtr owner;
  CUmemoryPool pool = nullptr;
  bool owned;
  std::shared_ptr<FreeStream> frees;  // kept with the pool, so that its buffers never recreate it
};

struct PooledFree {
  CUdeviceptr address = 0;
  std::shared_ptr<FreeStream> frees;
  std::shared_ptr<const PoolState> pool;  // null for the device's current pool (cuMemAllocAsync)
};

void DropPooledFree::operator()(PooledFree* f) const noexcept { delete f; }

// Why it deletes the record itself: the release rule carries one handle; the record is deleted
// once the free is issued or failed for good, and kept for the deferred retry when the driver
// answers NOT_PERMITTED (the release is then deferred). Where the release rule gives up before
// calling (a forked child, no context), the record is leaked with the memory.
CUresult pooled_free_call(const DriverTable& t, PooledFree* f) noexcept {
  CUresult r = raw<Entry::cuMemFreeAsync>(t, f->address, f->frees->stream);
  if (r != CUDA_ERROR_NOT_PERMITTED) delete f;  // may destroy the stream and pool (release rule)
  return r;
}

namespace {

const char* source_name(const MemPool* pool) noexcept {
  return pool && !pool->is_device_default() ? "a memory pool" : "the device's default pool";
}

}  // namespace

void release_pooled(const ContextPtr& owner, PooledFree* f) noexcept {
  release_with<Entry::cuMemFreeAsync>(owner, f, "freeing pool memory in stream order");
}

DeviceMemory stream_alloc(const Stream& s, const MemPool* pool, std::size_t count, std::size_t elem_size,
                          std::string_view type) {
  const ContextState& cs = StreamAccess::state(s, "Stream::alloc_buffer");
  const ContextPtr& owner = StreamAccess::owner(s);
  const PoolState* ps = nullptr;
  if (pool) {
    ps = &pool->state("Stream::alloc_buffer");
    if (ps->owner->table != cs.table || ps->owner->context != cs.context)
      throw UsageError(fmt::format("Stream::alloc_buffer: the pool belongs to device {}'s context, the stream to "
                                   "device {}'s{}; allocate from a pool of the stream's context",
                                   ps->owner->device, cs.device,
                                   ps->owner->table != cs.table ? " of another driver" : ""));
  }
  if (count == 0)
    throw UsageError(fmt::format("Stream::alloc_buffer: allocating 0 elements of {}: a buffer cannot be empty", type));
  if (count > std::numeric_limits<std::size_t>::max() / elem_size)
    throw UsageError(fmt::format("Stream::alloc_buffer: allocating {} elements of {}: the size overflows", count, type));
  const std::size_t n = count * elem_size;
  auto record = std::make_unique<PooledFree>();  // first: nothing may fail after the allocation but the driver
  ScopedContext scope(cs);
  if (capture_status(*cs.table, s.get(), "Stream::alloc_buffer") != CU_STREAM_CAPTURE_STATUS_NONE)
    throw UsageError("Stream::alloc_buffer: the stream is capturing; a captured allocation is a graph allocation, "
                     "made on every launch of the graph, not an owned buffer. Use alloc_async (its memory "
                     "allocation node), or allocate before the capture begins");
  record->frees = ps ? ps->frees : free_stream_of(owner);
  record->pool = pool ? pool->state_ : nullptr;
  auto what = [&] {
    return fmt::format("Stream::alloc_buffer: allocating {} elements of {} ({} bytes) from {}", count, type, n,
                       source_name(pool));
  };
  CUdeviceptr p = 0;
  if (ps)
    call<Entry::cuMemAllocFromPoolAsync>(*cs.table, what, &p, n, ps->pool, s.get());
  else
    call<Entry::cuMemAllocAsync>(*cs.table, what, &p, n, s.get());
  // Orders the free stream after the allocation: a free queued there later cannot overtake it.
  FreeStream& fs = *record->frees;
  CUresult r;
  Entry failed = Entry::cuEventRecord;
  {
    std::lock_guard lock(fs.mu);
    r = raw<Entry::cuEventRecord>(*cs.table, fs.order, s.get());
    if (r == CUDA_SUCCESS) {
      failed = Entry::cuStreamWaitEvent;
      r = raw<Entry::cuStreamWaitEvent>(*cs.table, fs.stream, fs.order, 0u);
    }
  }
  if (r != CUDA_SUCCESS) {
    // Freed on the allocating stream, where it is ordered after the allocation.
    if (CUresult f = raw<Entry::cuMemFreeAsync>(*cs.table, p, s.get()); f != CUDA_SUCCESS)
      report_failure(*cs.table, Entry::cuMemFreeAsync, f,
                     "freeing a pool allocation whose free could not be ordered (it is leaked)");
    throw_call_error(*cs.table, failed, r, "Stream::alloc_buffer: ordering tether's free stream after the allocation");
  }
  record->address = p;
  return DeviceMemory(owner, p, n, std::unique_ptr<PooledFree, DropPooledFree>(record.release()));
}

}  // namespace tether::detail

namespace tether {

namespace {

std::uint64_t get_u64(const detail::PoolState& s, CUmemPool_attribute a, const char* what) {
  detail::ScopedContext scope(*s.owner);
  cuuint64_t v = 0;
  detail::call<detail::Entry::cuMemPoolGetAttribute>(*s.owner->table, what, s.pool, a, static_cast<void*>(&v));
  return v;
}

void set_u64(const detail::PoolState& s, CUmemPool_attribute a, std::uint64_t value, const char* what) {
  detail::ScopedContext scope(*s.owner);
  cuuint64_t v = value;
  detail::call<detail::Entry::cuMemPoolSetAttribute>(*s.owner->table, what, s.pool, a, static_cast<void*>(&v));
}

}  // namespace

MemPool MemPool::create(const Context& ctx, const MemPoolOptions& options) {
  detail::check_calls_allowed("MemPool::create");
  const detail::ContextPtr& owner = detail::state_of(ctx);
  // Why the state first: if anything after cuMemPoolCreate fails, its destructor destroys the pool.
  auto s = std::make_shared<detail::PoolState>(owner, true);
  detail::ScopedContext scope(*owner);
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = owner->device;
  props.maxSize = options.max_bytes;
  {
    detail::RelaxedScope relaxed(*owner->table);
    detail::call<detail::Entry::cuMemPoolCreate>(
        *owner->table,
        [&] {
          return fmt::format("MemPool::create: creating a memory pool on device {} (max_bytes {})", owner->device,
                             options.max_bytes);
        },
        &s->pool, static_cast<const CUmemPoolProps*>(&props));
  }
  s->frees = detail::free_stream_of(owner);
  if (options.release_threshold)
    set_u64(*s, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, options.release_threshold,
            "MemPool::create: setting the new pool's release threshold");
  return MemPool(std::move(s));
}

MemPool MemPool::device_default(const Context& ctx) {
  detail::check_calls_allowed("MemPool::device_default");
  const detail::ContextPtr& owner = detail::state_of(ctx);
  auto s = std::make_shared<detail::PoolState>(owner, false);
  detail::ScopedContext scope(*owner);
  detail::call<detail::Entry::cuDeviceGetDefaultMemPool>(
      *owner->table, [&] { return fmt::format("MemPool::device_default: getting device {}'s default pool", owner->device); },
      &s->pool, owner->device);
  s->frees = detail::free_stream_of(owner);
  return MemPool(std::move(s));
}

const detail::PoolState& MemPool::state(const char* what) const {
  detail::check_calls_allowed(what);
  if (!state_) detail::throw_empty(what, "MemPool");
  return *state_;
}

bool MemPool::same_as(const MemPool& other) const noexcept {
  if (!state_ || !other.state_) return !state_ && !other.state_;
  return state_->owner->table == other.state_->owner->table && state_->pool == other.state_->pool;
}

CUmemoryPool MemPool::get() const noexcept { return state_ ? state_->pool : nullptr; }
bool MemPool::is_device_default() const noexcept { return state_ && !state_->owned; }

Context MemPool::context() const {
  if (!state_) detail::throw_empty("MemPool::context", "MemPool");
  return detail::context_from(state_->owner);
}

std::uint64_t MemPool::release_threshold() const {
  return get_u64(state("MemPool::release_threshold"), CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                 "MemPool::release_threshold: reading the pool's release threshold");
}

void MemPool::set_release_threshold(std::uint64_t bytes) const {
  set_u64(state("MemPool::set_release_threshold"), CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, bytes,
          "MemPool::set_release_threshold: setting the pool's release threshold");
}

void MemPool::trim_to(std::size_t min_bytes_to_keep) const {
  const detail::PoolState& s = state("MemPool::trim_to");
  detail::ScopedContext scope(*s.owner);
  detail::call<detail::Entry::cuMemPoolTrimTo>(
      *s.owner->table, [&] { return fmt::format("MemPool::trim_to: trimming the pool to {} bytes", min_bytes_to_keep); },
      s.pool, min_bytes_to_keep);
}

std::uint64_t MemPool::used_bytes() const {
  return get_u64(state("MemPool::used_bytes"), CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
                 "MemPool::used_bytes: reading the pool's used memory");
}
std::uint64_t MemPool::used_peak() const {
  return get_u64(state("MemPool::used_peak"), CU_MEMPOOL_ATTR_USED_MEM_HIGH,
                 "MemPool::used_peak: reading the pool's peak of used memory");
}
std::uint64_t MemPool::reserved_bytes() const {
  return get_u64(state("MemPool::reserved_bytes"), CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
                 "MemPool::reserved_bytes: reading the pool's reserved memory");
}
std::uint64_t MemPool::reserved_peak() const {
  return get_u64(state("MemPool::reserved_peak"), CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
                 "MemPool::reserved_peak: reading the pool's peak of reserved memory");
}

void MemPool::reset_peaks() const {
  const detail::PoolState& s = state("MemPool::reset_peaks");
  set_u64(s, CU_MEMPOOL_ATTR_USED_MEM_HIGH, 0, "MemPool::reset_peaks: resetting the pool's peak of used memory");
  set_u64(s, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, 0, "MemPool::reset_peaks: resetting the pool's peak of reserved memory");
}

}  // namespace tether
