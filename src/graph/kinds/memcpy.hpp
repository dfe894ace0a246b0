// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The memcpy node descriptor: two end points and an element count -> CUgraphNodeParams (memcpy)
// and the owners of both ends.
#pragma once

#include "desc.hpp"

namespace tether::detail {

using MemcpySaved = ParamsSaved<CUDA_MEMCPY3D, Entry::cuGraphMemcpyNodeGetParams, Entry::cuGraphMemcpyNodeSetParams>;

}  // namespace tether::detail

TETHER_EXPORT namespace tether {

/// A memcpy node's spec (`tether::memcpy(dst, src, count)`): `count` elements of the source (0: all
/// of it), and both kept ends as the version's owners. Throws UsageError for empty ends, an unknown
/// or overflowing size, or ends too small. Stream work issues cuMemcpyHtoDAsync, DtoHAsync,
/// DtoDAsync or (host to host, or an end of unknown kind) cuMemcpyAsync, chosen from the ends'
/// types. Since 0.5.
template <>
class Spec<MemcpyNode> : public detail::SpecKeeping<Spec<MemcpyNode>> {
 public:
  static constexpr const char* noun = "a memcpy node";
  static constexpr CUgraphNodeType type = CU_GRAPH_NODE_TYPE_MEMCPY;
  static constexpr const char* to_update = "the memcpy node to update";

  /// What `tether::memcpy` and the one-line spellings build.
  template <class Dst, class Src>
  Spec(detail::What what, Dst&& dst, Src&& src, std::size_t count) : SpecKeeping(CU_GRAPH_NODE_TYPE_MEMCPY) {
    using detail::SizeError;
    detail::check_endpoint(what.text, "destination", dst);
    detail::check_endpoint(what.text, "source", src);
    constexpr std::size_t elem = sizeof(detail::EndpointElem<Src>);
    const std::size_t have = detail::endpoint_bytes(src), cap = detail::endpoint_bytes(dst);
    if (count > std::numeric_limits<std::size_t>::max() / elem)
      detail::throw_size_error(what.text, SizeError::memcpy_overflow, count, elem);
    const std::size_t bytes = count ? count * elem : have;
    if (bytes == 0) detail::throw_size_error(what.text, SizeError::memcpy_unknown, 0, 0);
    if (have && have < bytes) detail::throw_size_error(what.text, SizeError::memcpy_source, have, bytes);
    if (cap && cap < bytes) detail::throw_size_error(what.text, SizeError::memcpy_destination, cap, bytes);
    CUDA_MEMCPY3D& c = params_.memcpy.copyParams;
    c.srcMemoryType = detail::endpoint_type<Src&>();
    c.dstMemoryType = detail::endpoint_type<Dst&>();
    const std::uintptr_t sa = detail::endpoint_address(src), da = detail::endpoint_address(dst);
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
    owners_.owners = detail::owners_of(
        std::tuple_cat(detail::endpoint_ref(std::forward<Dst>(dst)), detail::endpoint_ref(std::forward<Src>(src))));
  }


 private:
  friend struct detail::SpecAccess;
  void prepare(const detail::DriverTable&, CUcontext ctx, std::string_view) noexcept { params_.memcpy.copyCtx = ctx; }
  detail::Undo save(const detail::DriverTable& drv, CUgraphNode node, detail::Arena& arena) const {
    return detail::MemcpySaved::save(drv, node, arena, "reading a memcpy node's parameters");
  }
  CUresult enqueue(const detail::DriverTable& t, CUstream s, bool, detail::Entry* entry) const;
};

/// A memcpy node's spec: `count` elements (default: all of `src`) from `src` to `dst`. Each end is
/// a device buffer, a pinned host buffer (shared, or moved in: kept alive) or
/// tether::unowned(p, count). Since 0.5.
/// Constrained rather than checked by a static_assert: with `using namespace tether`, a call of
/// the C library's memcpy on raw pointers must still find that one.
template <class Dst, class Src>
  requires(detail::Endpoint<Dst&&>::ok && detail::Endpoint<Src&&>::ok)
Spec<MemcpyNode> memcpy(Dst&& dst, Src&& src, std::size_t count = 0) {
  return Spec<MemcpyNode>(detail::What{"tether::memcpy"}, std::forward<Dst>(dst), std::forward<Src>(src), count);
}

}  // namespace tether
