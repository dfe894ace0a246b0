// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Simulator: memory pools (cuMemPoolCreate, the default pool of each device, attributes, trim).
// A pool only accounts: its allocations are ordinary simulated device blocks (never reused, so a
// stale pointer is still recognised), tagged with the pool. Used memory is the sum of the live
// allocations' sizes; reserved memory grows in 2 MiB granules and is given back when a free
// executes (down to the release threshold) and by cuMemPoolTrimTo — the real driver gives it back
// at the next synchronization instead, which no test can tell apart once it has synchronized.
#include "state.hpp"

namespace tether::sim::detail {

namespace {

constexpr std::uint64_t kGranule = std::uint64_t{2} << 20;

std::uint64_t round_up(std::uint64_t n) { return (n + kGranule - 1) / kGranule * kGranule; }

struct Pool {
  int device = 0;
  bool is_default = false;
  bool destroyed = false;
  std::uint64_t max_size = 0;  // 0: no limit of its own
  std::uint64_t threshold = 0;
  std::uint64_t used = 0, used_high = 0, reserved = 0, reserved_high = 0;
  int reuse_follow = 1, reuse_opportunistic = 1, reuse_internal = 1;
};

struct Pools {
  std::mutex mu;
  std::unordered_set<Pool*> all;  // destroyed pools are kept (flagged) so stale handles never crash
  std::vector<Pool*> defaults;    // per device, created on first use
  std::unordered_map<std::uintptr_t, std::pair<Pool*, std::size_t>> blocks;  // live pool allocations
  std::size_t live = 0;           // created and not destroyed (default pools excluded)
};
Pools& pools() { return immortal<Pools>(); }

Pool* lookup(CUmemoryPool h) {
  Pool* p = reinterpret_cast<Pool*>(h);
  return pools().all.contains(p) && !p->destroyed ? p : nullptr;
}

Pool* default_locked(int device) {
  Pools& ps = pools();
  if (ps.defaults.size() < static_cast<std::size_t>(device_count())) ps.defaults.resize(device_count(), nullptr);
  Pool*& d = ps.defaults[static_cast<std::size_t>(device)];
  if (!d) {
    d = new Pool;
    d->device = device;
    d->is_default = true;
    ps.all.insert(d);
  }
  return d;
}

// Gives back cached memory above `keep` (rounded down to a granule), never what live
// allocations use.
void shrink(Pool* p, std::uint64_t keep) {
  std::uint64_t target = std::max(round_up(p->used), keep / kGranule * kGranule);
  if (p->reserved > target) p->reserved = target;
}

CUresult sim_cuDeviceGetDefaultMemPool(CUmemoryPool* out, CUdevice dev) {
  TETHER_SIM_ENTER(cuDeviceGetDefaultMemPool);
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= device_count()) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard lock(pools().mu);
  *out = reinterpret_cast<CUmemoryPool>(default_locked(dev));
  return CUDA_SUCCESS;
}

CUresult sim_cuMemPoolCreate(CUmemoryPool* out, const CUmemPoolProps* props) {
  TETHER_SIM_ENTER(cuMemPoolCreate);
  if (!out || !props) return CUDA_ERROR_INVALID_VALUE;
  if (props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED || props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolCreate: the simulator models pinned device pools only");
  if (props->location.id < 0 || props->location.id >= device_count())
    return fail(CUDA_ERROR_INVALID_DEVICE, fmt::format("cuMemPoolCreate: no device {}", props->location.id));
  if (props->handleTypes != CU_MEM_HANDLE_TYPE_NONE)
    return fail(CUDA_ERROR_NOT_SUPPORTED, "cuMemPoolCreate: the simulator does not model exportable pools");
  { std::lock_guard gate(memory_gate()); }  // waits behind a cuMemFree blocked by a host callback
  auto* p = new Pool;
  p->device = props->location.id;
  p->max_size = props->maxSize ? round_up(props->maxSize) : 0;
  std::lock_guard lock(pools().mu);
  pools().all.insert(p);
  ++pools().live;
  *out = reinterpret_cast<CUmemoryPool>(p);
  return CUDA_SUCCESS;
}

CUresult sim_cuMemPoolDestroy(CUmemoryPool h) {
  TETHER_SIM_ENTER(cuMemPoolDestroy);
  std::lock_guard lock(pools().mu);
  Pool* p = lookup(h);
  if (!p) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolDestroy: not a live memory pool");
  if (p->is_default) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolDestroy: a device's default pool cannot be destroyed");
  // Outstanding allocations stay valid until freed (the driver releases the pool after them).
  p->destroyed = true;
  --pools().live;
  return CUDA_SUCCESS;
}

CUresult sim_cuMemPoolTrimTo(CUmemoryPool h, std::size_t keep) {
  TETHER_SIM_ENTER(cuMemPoolTrimTo);
  std::lock_guard lock(pools().mu);
  Pool* p = lookup(h);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  shrink(p, keep);
  return CUDA_SUCCESS;
}

CUresult sim_cuMemPoolSetAttribute(CUmemoryPool h, CUmemPool_attribute attr, void* value) {
  TETHER_SIM_ENTER(cuMemPoolSetAttribute);
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(pools().mu);
  Pool* p = lookup(h);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  auto u64 = [&] { return *static_cast<const cuuint64_t*>(value); };
  auto i32 = [&] { return *static_cast<const int*>(value); };
  switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: p->threshold = u64(); return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: p->reuse_follow = i32() != 0; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: p->reuse_opportunistic = i32() != 0; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: p->reuse_internal = i32() != 0; return CUDA_SUCCESS;
    // The high watermarks can only be reset (to the current value), as the driver documents.
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      if (u64() != 0) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolSetAttribute: RESERVED_MEM_HIGH can only be set to 0");
      p->reserved_high = p->reserved;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      if (u64() != 0) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolSetAttribute: USED_MEM_HIGH can only be set to 0");
      p->used_high = p->used;
      return CUDA_SUCCESS;
    default: return fail(CUDA_ERROR_INVALID_VALUE, "cuMemPoolSetAttribute: the attribute is read-only or unknown");
  }
}

CUresult sim_cuMemPoolGetAttribute(CUmemoryPool h, CUmemPool_attribute attr, void* value) {
  TETHER_SIM_ENTER(cuMemPoolGetAttribute);
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(pools().mu);
  Pool* p = lookup(h);
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  auto u64 = [&](std::uint64_t v) { *static_cast<cuuint64_t*>(value) = v; return CUDA_SUCCESS; };
  auto i32 = [&](int v) { *static_cast<int*>(value) = v; return CUDA_SUCCESS; };
  switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: return u64(p->threshold);
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: return u64(p->reserved);
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: return u64(p->reserved_high);
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: return u64(p->used);
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: return u64(p->used_high);
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: return i32(p->reuse_follow);
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: return i32(p->reuse_opportunistic);
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: return i32(p->reuse_internal);
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

}  // namespace

CUmemoryPool pool_for_alloc(CUmemoryPool h, int device, CUresult& err) {
  std::lock_guard lock(pools().mu);
  err = CUDA_SUCCESS;
  if (!h) return reinterpret_cast<CUmemoryPool>(default_locked(device));  // the device's current pool
  if (!lookup(h)) err = fail(CUDA_ERROR_INVALID_VALUE, "not a live memory pool");
  return h;
}

int pool_device(CUmemoryPool h) {
  std::lock_guard lock(pools().mu);
  return reinterpret_cast<Pool*>(h)->device;
}

CUresult pool_admit(CUmemoryPool h, std::size_t bytes) {
  std::lock_guard lock(pools().mu);
  Pool* p = reinterpret_cast<Pool*>(h);
  if (p->max_size && round_up(p->used + bytes) > p->max_size)
    return fail(CUDA_ERROR_OUT_OF_MEMORY,
                fmt::format("the pool's maximum size ({} bytes) leaves no room for {} bytes", p->max_size, bytes));
  return CUDA_SUCCESS;
}

void pool_attach(CUmemoryPool h, std::uintptr_t block, std::size_t bytes) {
  std::lock_guard lock(pools().mu);
  Pool* p = reinterpret_cast<Pool*>(h);
  p->used += bytes;
  p->used_high = std::max(p->used_high, p->used);
  p->reserved = std::max(p->reserved, round_up(p->used));
  p->reserved_high = std::max(p->reserved_high, p->reserved);
  pools().blocks[block] = {p, bytes};
}

void pool_block_freed(std::uintptr_t block) {
  std::lock_guard lock(pools().mu);
  auto it = pools().blocks.find(block);
  if (it == pools().blocks.end()) return;
  auto [p, bytes] = it->second;
  pools().blocks.erase(it);
  p->used -= bytes;
  shrink(p, p->threshold);
}

std::size_t live_pools() {
  std::lock_guard lock(pools().mu);
  return pools().live;
}

void fill_pool(tether::detail::DriverTable& t) {
  t.set<Entry::cuDeviceGetDefaultMemPool>(&sim_cuDeviceGetDefaultMemPool);
  t.set<Entry::cuMemPoolCreate>(&sim_cuMemPoolCreate);
  t.set<Entry::cuMemPoolDestroy>(&sim_cuMemPoolDestroy);
  t.set<Entry::cuMemPoolTrimTo>(&sim_cuMemPoolTrimTo);
  t.set<Entry::cuMemPoolSetAttribute>(&sim_cuMemPoolSetAttribute);
  t.set<Entry::cuMemPoolGetAttribute>(&sim_cuMemPoolGetAttribute);
}

}  // namespace tether::sim::detail
