// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The empty node descriptor: no parameters, no owners (extra owners may come with `keeping`).
#pragma once

#include "desc.hpp"

TETHER_EXPORT namespace tether {

/// An empty node's spec (`tether::empty()`): no parameters and no owners of its own (`keeping`
/// adds some), e.g. to join dependencies. Stream work has no empty operation. Since 0.5.
template <>
class Spec<EmptyNode> : public detail::SpecKeeping<Spec<EmptyNode>> {
 public:
  static constexpr const char* noun = "an empty node";
  static constexpr CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  explicit Spec(detail::What) noexcept : SpecKeeping(CU_GRAPH_NODE_TYPE_EMPTY) {}
};

/// An empty node's spec. Since 0.5.
inline Spec<EmptyNode> empty() noexcept { return Spec<EmptyNode>(detail::What{"tether::empty"}); }

}  // namespace tether
