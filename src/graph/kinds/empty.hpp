// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The empty node descriptor: no parameters, no owners (extra owners may come with `keeping`).
#pragma once

#include "desc.hpp"

namespace tether::detail {

/// An empty node's parameters.
class EmptyDesc {
 public:
  static constexpr const char* noun = "an empty node";
  EmptyDesc() noexcept { params_.type = CU_GRAPH_NODE_TYPE_EMPTY; }
  CUgraphNodeParams& params() noexcept { return params_; }
  Owners& owners() noexcept { return owners_.owners; }

 private:
  CUgraphNodeParams params_{};
  PendingOwners owners_;
};

}  // namespace tether::detail
