// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The child graph node descriptor: a source graph -> CUgraphNodeParams (graph, cloned). The copy
// CUDA embeds carries the source's owners (CUDA copies their user-object references), so the
// version itself owns nothing; the embedded copy's metadata is imported after the add.
#pragma once

#include "desc.hpp"

namespace tether::detail {

/// A child graph node's parameters: CUDA clones `child` into the node.
class ChildDesc {
 public:
  static constexpr const char* noun = "a child graph node";
  explicit ChildDesc(CUgraph child) noexcept {
    params_.type = CU_GRAPH_NODE_TYPE_GRAPH;
    params_.graph.graph = child;
    params_.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE;
  }
  CUgraphNodeParams& params() noexcept { return params_; }
  Owners& owners() noexcept { return owners_.owners; }

 private:
  CUgraphNodeParams params_{};
  PendingOwners owners_;
};

}  // namespace tether::detail
