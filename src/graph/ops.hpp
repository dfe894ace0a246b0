// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The one insertion path of every node kind, on raw driver parameters: each function runs one
// operation of a Transaction (prepare -> driver call -> logged undo). The typed DSL marshals its
// descriptors into these.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "transaction.hpp"

namespace tether::detail {

/// Reads a kernel node's parameters back from the driver (cuGraphKernelNodeGetParams).
KernelCall read_kernel(const DriverTable& drv, CUgraphNode node, std::span<const std::size_t> sizes);

NodeRecord* add_kernel(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, const KernelCall& call,
                       Owners&& owners, std::string_view what);
void update_kernel(Transaction& tx, NodeRecord* r, const KernelCall& next, const KernelCall& previous,
                   Owners&& owners, std::string_view what);

NodeRecord* add_empty(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, Owners&& owners);

NodeRecord* add_host(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, CUhostFn fn, void* data,
                     Owners&& owners);
void update_host(Transaction& tx, NodeRecord* r, CUhostFn fn, void* data, Owners&& owners);

NodeRecord* add_memset(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, const CUDA_MEMSET_NODE_PARAMS& p,
                       CUcontext ctx, Owners&& owners);
void update_memset(Transaction& tx, NodeRecord* r, const CUDA_MEMSET_NODE_PARAMS& p, Owners&& owners);

NodeRecord* add_memcpy(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, const CUDA_MEMCPY3D& p,
                       CUcontext ctx, Owners&& owners);
void update_memcpy(Transaction& tx, NodeRecord* r, const CUDA_MEMCPY3D& p, Owners&& owners);

NodeRecord* add_event(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, CUevent event, bool record,
                      Owners&& owners);
void update_event(Transaction& tx, NodeRecord* r, CUevent event, Owners&& owners);

NodeRecord* add_mem_alloc(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, CUDA_MEM_ALLOC_NODE_PARAMS& p,
                          Owners&& owners);
NodeRecord* add_mem_free(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, CUdeviceptr dptr,
                         Owners&& owners);

/// Embeds a copy of `source`'s root graph (cuGraphAddChildGraphNode, clone mode) and imports its
/// metadata (rekey), so that the copy can later release its own versions. Rejects, before any
/// driver call, embedding a graph into itself or into a graph of its own hierarchy (the real driver
/// crashes or forbids it). Returns the node; `*embedded` receives the new box.
NodeRecord* embed(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, Hierarchy& source, Owners&& owners,
                  Box** embedded);

/// Adds a conditional node (if, if/else, while, switch) with `size` bodies; `*bodies` receives their
/// boxes. `handle` comes from make_conditional_handle on the root of the same graph.
NodeRecord* add_conditional(Transaction& tx, Box& box, std::span<NodeRecord* const> deps,
                            CUgraphConditionalHandle handle, CUgraphConditionalNodeType type, unsigned size,
                            CUcontext ctx, Owners&& owners, std::vector<Box*>* bodies);
CUgraphConditionalHandle make_conditional_handle(Transaction& tx, Box& box, CUcontext ctx, unsigned default_value,
                                                 bool assign_default);

}  // namespace tether::detail
