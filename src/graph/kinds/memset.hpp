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

using MemsetSaved = ParamsSaved<CUDA_MEMSET_NODE_PARAMS, Entry::cuGraphMemsetNodeGetParams, Entry::cuGraphMemsetNodeSetParams>;

}  // namespace tether::detail

TETHER_EXPORT namespace tether {

/// A memset node's spec (`tether::memset(dst, value)`): every element of `dst` set to `value`
/// (1, 2 or 4 bytes), and the destination as the version's owner when it is kept. Throws
/// UsageError for an empty destination, one of unknown size, or one that is not a whole number of
/// values. Stream work issues cuMemsetD8Async, D16Async or D32Async. Since 0.5.
template <>
class Spec<MemsetNode> : public detail::SpecKeeping<Spec<MemsetNode>> {
 public:
  static constexpr const char* noun = "a memset node";
  static constexpr CUgraphNodeType type = CU_GRAPH_NODE_TYPE_MEMSET;
  static constexpr const char* to_update = "the memset node to update";

  /// What `tether::memset` and the one-line spellings build.
  template <class Dst, class T>
  Spec(detail::What what, Dst&& dst, const T& value) : SpecKeeping(CU_GRAPH_NODE_TYPE_MEMSET) {
    detail::check_endpoint(what.text, "destination", dst);
    const std::size_t bytes = detail::endpoint_bytes(dst);
    if (bytes == 0) detail::throw_size_error(what.text, detail::SizeError::memset_unknown, 0, 0);
    if (bytes % sizeof(T) != 0) detail::throw_size_error(what.text, detail::SizeError::memset_multiple, bytes, sizeof(T));
    CUDA_MEMSET_NODE_PARAMS_v2& p = params_.memset;
    p.dst = static_cast<CUdeviceptr>(detail::endpoint_address(dst));
    p.value = detail::memset_bits(value);
    p.elementSize = sizeof(T);
    p.width = bytes / sizeof(T);
    p.height = 1;
    owners_.owners = detail::owners_of(detail::endpoint_ref(std::forward<Dst>(dst)));
  }


 private:
  friend struct detail::SpecAccess;
  void prepare(const detail::DriverTable&, CUcontext ctx, std::string_view) noexcept { params_.memset.ctx = ctx; }
  detail::Undo save(const detail::DriverTable& drv, CUgraphNode node, detail::Arena& arena) const {
    return detail::MemsetSaved::save(drv, node, arena, "reading a memset node's parameters");
  }
  CUresult enqueue(const detail::DriverTable& t, CUstream s, bool, detail::Entry* entry) const {
    using detail::Entry;
    const CUDA_MEMSET_NODE_PARAMS_v2& m = params_.memset;
    switch (m.elementSize) {
      case 1:
        *entry = Entry::cuMemsetD8Async;
        return detail::raw<Entry::cuMemsetD8Async>(t, m.dst, static_cast<unsigned char>(m.value), m.width, s);
      case 2:
        *entry = Entry::cuMemsetD16Async;
        return detail::raw<Entry::cuMemsetD16Async>(t, m.dst, static_cast<unsigned short>(m.value), m.width, s);
      default:
        *entry = Entry::cuMemsetD32Async;
        return detail::raw<Entry::cuMemsetD32Async>(t, m.dst, m.value, m.width, s);
    }
  }
};

/// A memset node's spec: every element of `dst` set to `value`. `dst` is a SharedBuffer<T> or
/// DeviceBuffer<T>&& (kept alive) or tether::unowned(p, count). Since 0.5.
/// Constrained (see tether::memcpy).
template <class Dst, class T>
  requires(detail::Endpoint<Dst&&>::ok && !detail::Endpoint<Dst&&>::pinned)
Spec<MemsetNode> memset(Dst&& dst, const T& value) {
  return Spec<MemsetNode>(detail::What{"tether::memset"}, std::forward<Dst>(dst), value);
}

}  // namespace tether
