// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The memory allocation and free node descriptors: a byte size on a device -> CUgraphNodeParams
// (alloc; the driver writes the address back), and an address -> CUgraphNodeParams (free).
#pragma once

#include "desc.hpp"

namespace tether::detail {

/// A memory allocation node's parameters: `count` elements of `elem` bytes on `device`. Throws
/// UsageError for 0 elements or an overflowing size. After the add, `address()` is the memory.
class MemAllocDesc {
 public:
  static constexpr const char* noun = "a memory allocation node";
  MemAllocDesc(std::string_view what, int device, std::size_t count, std::size_t elem) {
    if (count == 0) throw_size_error(what, SizeError::alloc_empty, 0, elem);
    if (count > std::numeric_limits<std::size_t>::max() / elem)
      throw_size_error(what, SizeError::alloc_overflow, count, elem);
    params_.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
    CUDA_MEM_ALLOC_NODE_PARAMS_v2& p = params_.alloc;
    p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.poolProps.location.id = device;
    p.bytesize = count * elem;
  }
  CUgraphNodeParams& params() noexcept { return params_; }
  Owners& owners() noexcept { return owners_.owners; }
  CUdeviceptr address() const noexcept { return params_.alloc.dptr; }

 private:
  CUgraphNodeParams params_{};
  PendingOwners owners_;
};

/// A memory free node's parameters.
class MemFreeDesc {
 public:
  static constexpr const char* noun = "a memory free node";
  explicit MemFreeDesc(CUdeviceptr address) noexcept {
    params_.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
    params_.free.dptr = address;
  }
  CUgraphNodeParams& params() noexcept { return params_; }
  Owners& owners() noexcept { return owners_.owners; }

 private:
  CUgraphNodeParams params_{};
  PendingOwners owners_;
};

}  // namespace tether::detail
