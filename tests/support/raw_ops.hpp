// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Transaction-level helpers for the tests of the transaction, hierarchy and attachment layers:
// each adds or updates one node from raw driver parameters through the library's single add
// path (Transaction::add, cuGraphAddNode) and update path (Transaction::update), without the
// typed DSL. Test code only: the library's node kinds are the descriptors in src/graph/kinds/.
#pragma once

#include "tether.hpp"

namespace tether::detail {

/// A self-contained copy of a kernel node's parameters (argument values copied inline, up to 16
/// arguments and 256 bytes), trivially copyable so that an undo can keep it in a transaction's
/// arena.
struct KernelCall {
  CUDA_KERNEL_NODE_PARAMS params{};
  std::size_t n = 0;
  std::size_t offsets[16]{};
  alignas(16) std::byte bytes[256]{};
  mutable void* ptrs[16]{};

  static KernelCall copy(const CUDA_KERNEL_NODE_PARAMS& p, std::span<const std::size_t> sizes) {
    KernelCall k;
    k.params = p;
    k.n = sizes.size();
    std::size_t at = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      at = (at + 15) / 16 * 16;
      std::memcpy(k.bytes + at, p.kernelParams[i], sizes[i]);
      k.offsets[i] = at;
      at += sizes[i];
    }
    return k;
  }
  /// The parameters, pointing at this object's copies of the values.
  const CUDA_KERNEL_NODE_PARAMS* get() const {
    auto* self = const_cast<KernelCall*>(this);
    for (std::size_t i = 0; i < n; ++i) ptrs[i] = self->bytes + offsets[i];
    self->params.kernelParams = n ? ptrs : nullptr;
    self->params.extra = nullptr;
    return &params;
  }
};

namespace raw_ops_detail {
inline CUgraphNodeParams kernel_node(const KernelCall& kc) {
  CUgraphNodeParams p{};
  p.type = CU_GRAPH_NODE_TYPE_KERNEL;
  std::memcpy(&p.kernel, kc.get(), sizeof(CUDA_KERNEL_NODE_PARAMS));
  return p;
}
template <class T>
Undo keep(Transaction& tx, const T& v, CUresult (*restore)(const DriverTable&, CUgraphNode, const void*)) {
  return {restore, keep_in(tx.arena(), v)};
}
inline void set(Transaction& tx, NodeRecord* r, CUgraphNodeParams& p, std::string_view what) {
  const DriverTable& drv = *tx.hierarchy().drv;
  if (CUresult res = raw<Entry::cuGraphNodeSetParams>(drv, r->node, &p); res != CUDA_SUCCESS)
    throw_call_error(drv, Entry::cuGraphNodeSetParams, res, std::string("updating ") + std::string(what));
}
}  // namespace raw_ops_detail

inline NodeRecord* add_kernel(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, const KernelCall& call,
                              Owners&& owners, std::string_view what) {
  CUgraphNodeParams p = raw_ops_detail::kernel_node(call);
  return tx.add(box, deps, p, std::move(owners), what);
}
inline void update_kernel(Transaction& tx, NodeRecord* r, const KernelCall& next, const KernelCall& previous,
                          Owners&& owners, std::string_view what) {
  ReleaseIfUnused guard(owners);
  Undo undo = raw_ops_detail::keep(tx, previous, [](const DriverTable& drv, CUgraphNode node, const void* s) {
    return raw<Entry::cuGraphKernelNodeSetParams>(drv, node, static_cast<const KernelCall*>(s)->get());
  });
  CUgraphNodeParams p = raw_ops_detail::kernel_node(next);
  tx.update(r, std::move(owners), [&] { raw_ops_detail::set(tx, r, p, what); }, undo);
}
inline NodeRecord* add_empty(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, Owners&& owners) {
  Spec<EmptyNode> d(What{"raw empty node"});
  return tx.add(box, deps, SpecAccess::params(d), std::move(owners), Spec<EmptyNode>::noun);
}
inline NodeRecord* add_host(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, CUhostFn fn, void* data,
                            Owners&& owners) {
  CUgraphNodeParams p{};
  p.type = CU_GRAPH_NODE_TYPE_HOST;
  p.host = {fn, data};
  return tx.add(box, deps, p, std::move(owners), "a host node");
}
inline void update_host(Transaction& tx, NodeRecord* r, CUhostFn fn, void* data, Owners&& owners) {
  ReleaseIfUnused guard(owners);
  Undo undo = HostSaved::save(*tx.hierarchy().drv, r->node, tx.arena(), "reading a host node");
  CUgraphNodeParams p{};
  p.type = CU_GRAPH_NODE_TYPE_HOST;
  p.host = {fn, data};
  tx.update(r, std::move(owners), [&] { raw_ops_detail::set(tx, r, p, "a host node"); }, undo);
}
inline NodeRecord* add_memset(Transaction& tx, Box& box, std::span<NodeRecord* const> deps,
                              const CUDA_MEMSET_NODE_PARAMS& m, CUcontext ctx, Owners&& owners) {
  CUgraphNodeParams p{};
  p.type = CU_GRAPH_NODE_TYPE_MEMSET;
  p.memset = {m.dst, m.pitch, m.value, m.elementSize, m.width, m.height, ctx};
  return tx.add(box, deps, p, std::move(owners), "a memset node");
}
inline NodeRecord* add_memcpy(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, const CUDA_MEMCPY3D& c,
                              CUcontext ctx, Owners&& owners) {
  CUgraphNodeParams p{};
  p.type = CU_GRAPH_NODE_TYPE_MEMCPY;
  p.memcpy.copyCtx = ctx;
  p.memcpy.copyParams = c;
  return tx.add(box, deps, p, std::move(owners), "a memcpy node");
}
inline NodeRecord* add_event(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, CUevent event, bool record,
                             Owners&& owners) {
  CUgraphNodeParams p{};
  p.type = record ? CU_GRAPH_NODE_TYPE_EVENT_RECORD : CU_GRAPH_NODE_TYPE_WAIT_EVENT;
  if (record)
    p.eventRecord.event = event;
  else
    p.eventWait.event = event;
  return tx.add(box, deps, p, std::move(owners), record ? "an event record node" : "an event wait node");
}
inline NodeRecord* add_conditional(Transaction& tx, Box& box, std::span<NodeRecord* const> deps,
                                   CUgraphConditionalHandle handle, CUgraphConditionalNodeType type, unsigned size,
                                   CUcontext ctx, Owners&& owners, std::vector<Box*>* bodies) {
  ConditionalDesc d(handle, type, size, ctx);
  return add_conditional(tx, box, deps, d, std::move(owners), bodies);
}

}  // namespace tether::detail
