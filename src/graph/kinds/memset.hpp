// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The memset node descriptor: a destination end point and a 1-, 2- or 4-byte value ->
// CUgraphNodeParams (memset) and the destination's owner.
#pragma once

#include "desc.hpp"

namespace tether::detail {

template <class T>
unsigned memset_bits(const T& v) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4,
                "memset: the element type must be 1, 2 or 4 bytes wide (CUDA memset nodes set 8-, 16- or 32-bit values)");
  if constexpr (sizeof(T) == 1) {
    std::uint8_t b;
    std::memcpy(&b, &v, 1);
    return b;
  } else if constexpr (sizeof(T) == 2) {
    std::uint16_t b;
    std::memcpy(&b, &v, 2);
    return b;
  } else {
    std::uint32_t b;
    std::memcpy(&b, &v, 4);
    return b;
  }
}

/// Saves and restores a memset node's parameters (cuGraphMemsetNodeGetParams / SetParams).
struct MemsetSaved {
  CUDA_MEMSET_NODE_PARAMS params;
  static CUresult restore(const DriverTable& drv, CUgraphNode node, const void* self) noexcept {
    return raw<Entry::cuGraphMemsetNodeSetParams>(drv, node, &static_cast<const MemsetSaved*>(self)->params);
  }
  static Undo save(const DriverTable& drv, CUgraphNode node, Arena& arena) {
    MemsetSaved s{};
    call<Entry::cuGraphMemsetNodeGetParams>(drv, "reading a memset node's parameters", node, &s.params);
    return {&restore, keep_in(arena, s)};
  }
};

/// One memset node's parameters and owners. Throws UsageError for an empty destination, one of
/// unknown size, or one that is not a whole number of values.
class MemsetDesc {
 public:
  static constexpr const char* noun = "a memset node";
  template <class Dst, class T>
  MemsetDesc(std::string_view what, CUcontext ctx, Dst&& dst, const T& value) {
    check_endpoint(what, "destination", dst);
    const std::size_t bytes = endpoint_bytes(dst);
    if (bytes == 0) throw_size_error(what, SizeError::memset_unknown, 0, 0);
    if (bytes % sizeof(T) != 0) throw_size_error(what, SizeError::memset_multiple, bytes, sizeof(T));
    params_.type = CU_GRAPH_NODE_TYPE_MEMSET;
    CUDA_MEMSET_NODE_PARAMS_v2& p = params_.memset;
    p.dst = static_cast<CUdeviceptr>(endpoint_address(dst));
    p.value = memset_bits(value);
    p.elementSize = sizeof(T);
    p.width = bytes / sizeof(T);
    p.height = 1;
    p.ctx = ctx;
    owners_.owners = owners_of(endpoint_ref(std::forward<Dst>(dst)));
  }
  CUgraphNodeParams& params() noexcept { return params_; }
  Owners& owners() noexcept { return owners_.owners; }
  Undo save(const DriverTable& drv, CUgraphNode node, Arena& arena) const { return MemsetSaved::save(drv, node, arena); }

 private:
  CUgraphNodeParams params_{};
  PendingOwners owners_;
};

}  // namespace tether::detail
