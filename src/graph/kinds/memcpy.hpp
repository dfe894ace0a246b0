// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The memcpy node descriptor: two end points and an element count -> CUgraphNodeParams (memcpy)
// and the owners of both ends.
#pragma once

#include "desc.hpp"

namespace tether::detail {

/// Saves and restores a memcpy node's parameters (cuGraphMemcpyNodeGetParams / SetParams).
struct MemcpySaved {
  CUDA_MEMCPY3D params;
  static CUresult restore(const DriverTable& drv, CUgraphNode node, const void* self) noexcept {
    return raw<Entry::cuGraphMemcpyNodeSetParams>(drv, node, &static_cast<const MemcpySaved*>(self)->params);
  }
  static Undo save(const DriverTable& drv, CUgraphNode node, Arena& arena) {
    MemcpySaved s{};
    call<Entry::cuGraphMemcpyNodeGetParams>(drv, "reading a memcpy node's parameters", node, &s.params);
    return {&restore, keep_in(arena, s)};
  }
};

/// One memcpy node's parameters and owners: `count` elements of the source (0: all of it).
/// Throws UsageError for empty ends, an unknown or overflowing size, or ends too small.
class MemcpyDesc {
 public:
  static constexpr const char* noun = "a memcpy node";
  template <class Dst, class Src>
  MemcpyDesc(std::string_view what, CUcontext ctx, Dst&& dst, Src&& src, std::size_t count) {
    check_endpoint(what, "destination", dst);
    check_endpoint(what, "source", src);
    constexpr std::size_t elem = sizeof(EndpointElem<Src>);
    const std::size_t have = endpoint_bytes(src), cap = endpoint_bytes(dst);
    if (count > std::numeric_limits<std::size_t>::max() / elem) throw_size_error(what, SizeError::memcpy_overflow, count, elem);
    const std::size_t bytes = count ? count * elem : have;
    if (bytes == 0) throw_size_error(what, SizeError::memcpy_unknown, 0, 0);
    if (have && have < bytes) throw_size_error(what, SizeError::memcpy_source, have, bytes);
    if (cap && cap < bytes) throw_size_error(what, SizeError::memcpy_destination, cap, bytes);
    params_.type = CU_GRAPH_NODE_TYPE_MEMCPY;
    params_.memcpy.copyCtx = ctx;
    CUDA_MEMCPY3D& c = params_.memcpy.copyParams;
    c.srcMemoryType = endpoint_type<Src&>();
    c.dstMemoryType = endpoint_type<Dst&>();
    const std::uintptr_t sa = endpoint_address(src), da = endpoint_address(dst);
    if (c.srcMemoryType == CU_MEMORYTYPE_HOST)
      c.srcHost = reinterpret_cast<const void*>(sa);
    else
      c.srcDevice = static_cast<CUdeviceptr>(sa);
    if (c.dstMemoryType == CU_MEMORYTYPE_HOST)
      c.dstHost = reinterpret_cast<void*>(da);
    else
      c.dstDevice = static_cast<CUdeviceptr>(da);
    c.WidthInBytes = bytes;
    c.Height = 1;
    c.Depth = 1;
    owners_.owners = owners_of(std::tuple_cat(endpoint_ref(std::forward<Dst>(dst)), endpoint_ref(std::forward<Src>(src))));
  }
  CUgraphNodeParams& params() noexcept { return params_; }
  Owners& owners() noexcept { return owners_.owners; }
  Undo save(const DriverTable& drv, CUgraphNode node, Arena& arena) const { return MemcpySaved::save(drv, node, arena); }

 private:
  CUgraphNodeParams params_{};
  PendingOwners owners_;
};

}  // namespace tether::detail
