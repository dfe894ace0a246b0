// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The empty node descriptor: no parameters, no owners (extra owners may come with `keeping`).
#pragma once

#include "desc.hpp"

namespace tether::detail {

/// An empty node's parameters.
class EmptyDesc : public DescBase {
 public:
  static constexpr const char* noun = "an empty node";
  EmptyDesc() noexcept : DescBase(CU_GRAPH_NODE_TYPE_EMPTY) {}
};

}  // namespace tether::detail
