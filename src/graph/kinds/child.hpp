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
class ChildDesc : public DescBase {
 public:
  static constexpr const char* noun = "a child graph node";
  explicit ChildDesc(CUgraph child) noexcept : DescBase(CU_GRAPH_NODE_TYPE_GRAPH) {
    params_.graph.graph = child;
    params_.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE;
  }
};

}  // namespace tether::detail
