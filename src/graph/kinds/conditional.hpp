// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The conditional node descriptor (if, if/else, while, switch): a handle, a type and a number of
// bodies -> CUgraphNodeParams (conditional). The driver writes the bodies' graphs back into it.
#pragma once

#include "desc.hpp"

namespace tether::detail {

/// A conditional node's parameters; after the add, `body(i)` is body i's graph (owned by CUDA).
class ConditionalDesc {
 public:
  static constexpr const char* noun = "a conditional node";
  ConditionalDesc(CUgraphConditionalHandle handle, CUgraphConditionalNodeType type, unsigned size,
                  CUcontext ctx) noexcept {
    params_.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    params_.conditional.handle = handle;
    params_.conditional.type = type;
    params_.conditional.size = size;
    params_.conditional.ctx = ctx;
  }
  CUgraphNodeParams& params() noexcept { return params_; }
  Owners& owners() noexcept { return owners_.owners; }
  unsigned size() const noexcept { return params_.conditional.size; }
  CUgraph body(unsigned i) const noexcept { return params_.conditional.phGraph_out[i]; }

 private:
  CUgraphNodeParams params_{};
  PendingOwners owners_;
};

}  // namespace tether::detail
