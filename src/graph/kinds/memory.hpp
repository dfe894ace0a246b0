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
class MemAllocDesc : public DescBase {
 public:
  static constexpr const char* noun = "a memory allocation node";
  MemAllocDesc(std::string_view what, int device, std::size_t count, std::size_t elem)
      : DescBase(CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
    if (count == 0) throw_size_error(what, SizeError::alloc_empty, 0, elem);
    if (count > std::numeric_limits<std::size_t>::max() / elem)
      throw_size_error(what, SizeError::alloc_overflow, count, elem);
    CUDA_MEM_ALLOC_NODE_PARAMS_v2& p = params_.alloc;
    p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.poolProps.location.id = device;
    p.bytesize = count * elem;
  }
  CUdeviceptr address() const noexcept { return params_.alloc.dptr; }
};

/// A memory free node's parameters.
class MemFreeDesc : public DescBase {
 public:
  static constexpr const char* noun = "a memory free node";
  explicit MemFreeDesc(CUdeviceptr address) noexcept : DescBase(CU_GRAPH_NODE_TYPE_MEM_FREE) {
    params_.free.dptr = address;
  }
};

}  // namespace tether::detail
