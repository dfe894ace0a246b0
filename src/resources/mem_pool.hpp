// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Memory pools (cuMemPoolCreate, a device's default pool) and owned stream-ordered allocations
// (Stream::alloc_buffer): docs/memory.md. A buffer from a pool is an ordinary DeviceBuffer whose
// deleter frees it with cuMemFreeAsync on an internal stream of its context, never cuMemFree.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "buffer.hpp"
#include "context.hpp"
#include "stream.hpp"

namespace tether::detail {

// A pool handle and whether tether destroys it (cuMemPoolDestroy, under the release rule, when
// the last MemPool copy and the last buffer from the pool are gone). Defined in mem_pool.cpp.
struct PoolState;

/// The untyped core of Stream::alloc_buffer: `count * elem_size` bytes with cuMemAllocAsync
/// (`pool` null) or cuMemAllocFromPoolAsync on `s`, owned, freed in stream order. Throws
/// UsageError (empty stream or pool, 0 or overflowing count, a capturing stream, a pool of another
/// context), DriverError naming the entry point and the size.
DeviceMemory stream_alloc(const Stream& s, const MemPool* pool, std::size_t count, std::size_t elem_size,
                          std::string_view type);

}  // namespace tether::detail

TETHER_EXPORT namespace tether {

/// How `MemPool::create` makes a pool (`CUmemPoolProps` and attributes set right after).
struct MemPoolOptions {
  /// The most the pool may reserve (`CUmemPoolProps::maxSize`), rounded up by the driver to its
  /// granularity; an allocation beyond it fails with CUDA_ERROR_OUT_OF_MEMORY. 0: no limit of
  /// the pool's own (the device's memory limits it).
  std::size_t max_bytes = 0;
  /// `CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`: how much freed memory the pool keeps reserved for
  /// reuse instead of returning it to the device at the next synchronization. 0 (the driver's
  /// default): it returns everything it can.
  std::uint64_t release_threshold = 0;
};

/// A shared reference to a CUDA memory pool of one device: either one tether created
/// (`MemPool::create`: `cuMemPoolCreate`, pinned device memory; `cuMemPoolDestroy`, under the
/// release rule, when the last copy *and* the last buffer allocated from it are gone: buffers
/// keep their pool alive) or the device's default pool (`MemPool::device_default`:
/// `cuDeviceGetDefaultMemPool`; never destroyed, the pool `Stream::alloc_buffer(n)` and
/// `cuMemAllocAsync` use). Allocate from it with `Stream::alloc_buffer<T>(n, pool)`.
///
/// Copying shares the pool. A default-constructed or moved-from MemPool is empty: `get()` is
/// null, `operator bool` false, and every other member throws UsageError. The pool keeps its
/// context alive; every driver call runs with that context current. Thread safety: all members
/// are safe to call concurrently on the same or different copies; the last copy may be dropped on
/// any thread (inside a host callback the destroy is deferred to tether's reclaimer) and never
/// throws. No member may be called inside a host callback (UsageError).
class MemPool {
 public:
  /// What `inspect` shows for a pool a node owns.
  friend std::string tether_owner_label(const MemPool&) { return "MemPool"; }

  /// An empty pool reference.
  MemPool() noexcept = default;

  /// Creates a pool of pinned memory on the context's device (`cuMemPoolCreate`, then
  /// `cuMemPoolSetAttribute(RELEASE_THRESHOLD)` when `options` sets one; context current). Throws
  /// UsageError inside a host callback, DriverError (for example CUDA_ERROR_NOT_SUPPORTED where
  /// the device has no memory pools); nothing is left behind on failure.
  static MemPool create(const Context& ctx, const MemPoolOptions& options = {});

  /// The device's default pool (`cuDeviceGetDefaultMemPool`): the same driver handle every time;
  /// tether never destroys it. Throws UsageError inside a host callback, DriverError.
  static MemPool device_default(const Context& ctx);

  /// The driver handle (null when empty). Valid while this MemPool, or a buffer from the pool,
  /// lives.
  CUmemoryPool get() const noexcept;
  /// Whether this is a device's default pool (false when empty).
  bool is_device_default() const noexcept;
  /// The context whose device the pool belongs to. Throws UsageError when empty.
  Context context() const;

  /// `CU_MEMPOOL_ATTR_RELEASE_THRESHOLD` (`cuMemPoolGetAttribute`). Throws UsageError when
  /// empty, DriverError.
  std::uint64_t release_threshold() const;
  /// Sets `CU_MEMPOOL_ATTR_RELEASE_THRESHOLD` (`cuMemPoolSetAttribute`): the pool keeps up to
  /// `bytes` of freed memory reserved across synchronizations (`UINT64_MAX`: all of it). Throws
  /// UsageError when empty, DriverError.
  void set_release_threshold(std::uint64_t bytes) const;
  /// Returns reserved memory that no allocation uses to the device until at most
  /// `min_bytes_to_keep` stay reserved (`cuMemPoolTrimTo`). Throws UsageError when empty,
  /// DriverError.
  void trim_to(std::size_t min_bytes_to_keep) const;

  /// Bytes of the pool's live allocations (`CU_MEMPOOL_ATTR_USED_MEM_CURRENT`): memory from the
  /// pool whose stream-ordered free has not yet executed. Throws UsageError when empty, DriverError.
  std::uint64_t used_bytes() const;
  /// The peak of `used_bytes` since creation or `reset_peaks` (`CU_MEMPOOL_ATTR_USED_MEM_HIGH`).
  std::uint64_t used_peak() const;
  /// Bytes of device memory the pool holds, used or kept for reuse
  /// (`CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT`). Throws UsageError when empty, DriverError.
  std::uint64_t reserved_bytes() const;
  /// The peak of `reserved_bytes` since creation or `reset_peaks`
  /// (`CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH`).
  std::uint64_t reserved_peak() const;
  /// Resets both peaks to the current values (`cuMemPoolSetAttribute` of `USED_MEM_HIGH` and
  /// `RESERVED_MEM_HIGH` to 0). Throws UsageError when empty, DriverError.
  void reset_peaks() const;

  /// Drops this reference (the pool is destroyed if it was the last owner) and leaves it empty.
  void reset() noexcept { state_.reset(); }
  /// Exchanges the pools of two references.
  void swap(MemPool& other) noexcept { state_.swap(other.state_); }
  /// Whether a pool is referenced.
  explicit operator bool() const noexcept { return state_ != nullptr; }
  /// Whether both refer to the same pool of the same driver (two empty references are equal).
  friend bool operator==(const MemPool& a, const MemPool& b) noexcept { return a.same_as(b); }

 private:
  friend detail::DeviceMemory detail::stream_alloc(const Stream&, const MemPool*, std::size_t, std::size_t,
                                                   std::string_view);
  explicit MemPool(std::shared_ptr<const detail::PoolState> s) noexcept : state_(std::move(s)) {}
  const detail::PoolState& state(const char* what) const;
  bool same_as(const MemPool& other) const noexcept;

  std::shared_ptr<const detail::PoolState> state_;
};

}  // namespace tether

// Why outside the export block: out-of-line definitions of members Stream already exports.
namespace tether {

template <class T>
DeviceBuffer<T> Stream::alloc_buffer(std::size_t count) const {
  return DeviceBuffer<T>(detail::stream_alloc(*this, nullptr, count, sizeof(T), detail::type_name<T>()));
}

template <class T>
DeviceBuffer<T> Stream::alloc_buffer(std::size_t count, const MemPool& pool) const {
  return DeviceBuffer<T>(detail::stream_alloc(*this, &pool, count, sizeof(T), detail::type_name<T>()));
}

}  // namespace tether
