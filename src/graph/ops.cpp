// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "ops.hpp"

namespace tether::detail {

namespace {
const DriverTable& drv_of(Transaction& tx) { return *tx.hierarchy().drv; }

// The update of a node kind whose parameters are one struct read by Get and written by Set:
// read the previous parameters (for the undo), then set the new ones.
template <Entry Get, Entry Set, class Params>
void update_params(Transaction& tx, NodeRecord* r, const Params& next, Owners&& owners, const char* reading,
                   std::string_view what) {
  UnusedOwners guard(owners);
  const DriverTable* drv = &drv_of(tx);
  Params prev{};
  call<Get>(*drv, reading, r->node, &prev);
  CUgraphNode node = r->node;
  tx.update(
      r, std::move(owners), [&] { return raw<Set>(*drv, node, &next); }, Set,
      [drv, node, prev] { return raw<Set>(*drv, node, &prev); }, Set, what);
}

// The add of a node kind created from one parameter struct and a context (memset, memcpy).
template <Entry Add, class Params>
NodeRecord* add_with_context(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, CUgraphNodeType type,
                             const Params& p, CUcontext ctx, Owners&& owners, std::string_view what) {
  const DriverTable& drv = drv_of(tx);
  return tx.add(
      box, deps, type, std::move(owners),
      [&](CUgraph g, const CUgraphNode* d, std::size_t n, CUgraphNode* out) { return raw<Add>(drv, out, g, d, n, &p, ctx); },
      Add, what);
}
}  // namespace

void KernelCall::reserve(std::size_t nbytes, std::size_t nargs) {
  heap_bytes_.reset(nbytes > kInlineBytes ? new std::byte[nbytes] : nullptr);
  heap_args_.reset(nargs > kInlineArgs ? new void*[nargs] : nullptr);
  nbytes_ = nbytes;
  nargs_ = nargs;
}

KernelCall KernelCall::copy(const CUDA_KERNEL_NODE_PARAMS& p, std::span<const std::size_t> sizes) {
  KernelCall k;
  k.params = p;
  auto aligned = [](std::size_t n) { return (n + 15) / 16 * 16; };
  std::size_t total = 0;
  for (std::size_t s : sizes) total = aligned(total) + s;
  k.reserve(total, sizes.size());
  std::size_t offset = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    offset = aligned(offset);
    std::memcpy(k.bytes() + offset, p.kernelParams[i], sizes[i]);
    k.args()[i] = k.bytes() + offset;
    offset += sizes[i];
  }
  k.params.kernelParams = sizes.empty() ? nullptr : k.args();
  k.params.extra = nullptr;
  return k;
}

void KernelCall::assign(const KernelCall& o) {
  params = o.params;
  if (o.nargs_ == 0 && o.nbytes_ == 0) {
    // Parameters that point at the caller's arguments (not a copy): nothing to rebase.
    reserve(0, 0);
    return;
  }
  reserve(o.nbytes_, o.nargs_);
  const std::byte* from = const_cast<KernelCall&>(o).bytes();
  if (o.nbytes_) std::memcpy(bytes(), from, o.nbytes_);
  for (std::size_t i = 0; i < o.nargs_; ++i)
    args()[i] = bytes() + (static_cast<const std::byte*>(const_cast<KernelCall&>(o).args()[i]) - from);
  params.kernelParams = args();
}

KernelCall read_kernel(const DriverTable& drv, CUgraphNode node, std::span<const std::size_t> sizes) {
  CUDA_KERNEL_NODE_PARAMS p{};
  call<Entry::cuGraphKernelNodeGetParams>(drv, "reading a kernel node's parameters", node, &p);
  return KernelCall::copy(p, sizes);
}

NodeRecord* add_kernel(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, const KernelCall& kc,
                       Owners&& owners, std::string_view what) {
  const DriverTable& drv = drv_of(tx);
  return tx.add(
      box, deps, CU_GRAPH_NODE_TYPE_KERNEL, std::move(owners),
      [&](CUgraph g, const CUgraphNode* d, std::size_t n, CUgraphNode* out) {
        return raw<Entry::cuGraphAddKernelNode>(drv, out, g, d, n, &kc.params);
      },
      Entry::cuGraphAddKernelNode, what);
}

void update_kernel(Transaction& tx, NodeRecord* r, const KernelCall& next, const KernelCall& previous,
                   Owners&& owners, std::string_view what) {
  UnusedOwners guard(owners);
  const DriverTable* drv = &drv_of(tx);
  CUgraphNode node = r->node;
  // The undo captures two words, so std::function does not allocate; the previous parameters
  // stay in the transaction.
  const std::size_t kept = tx.keep_kernel(node, previous);
  const Transaction* t = &tx;
  tx.update(
      r, std::move(owners), [&] { return raw<Entry::cuGraphKernelNodeSetParams>(*drv, node, &next.params); },
      Entry::cuGraphKernelNodeSetParams, [t, kept] { return t->restore_kernel(kept); },
      Entry::cuGraphKernelNodeSetParams, what);
}

NodeRecord* add_empty(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, Owners&& owners) {
  const DriverTable& drv = drv_of(tx);
  return tx.add(
      box, deps, CU_GRAPH_NODE_TYPE_EMPTY, std::move(owners),
      [&](CUgraph g, const CUgraphNode* d, std::size_t n, CUgraphNode* out) {
        return raw<Entry::cuGraphAddEmptyNode>(drv, out, g, d, n);
      },
      Entry::cuGraphAddEmptyNode, "an empty node");
}

NodeRecord* add_host(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, CUhostFn fn, void* data,
                     Owners&& owners) {
  const DriverTable& drv = drv_of(tx);
  CUDA_HOST_NODE_PARAMS p{fn, data};
  return tx.add(
      box, deps, CU_GRAPH_NODE_TYPE_HOST, std::move(owners),
      [&](CUgraph g, const CUgraphNode* d, std::size_t n, CUgraphNode* out) {
        return raw<Entry::cuGraphAddHostNode>(drv, out, g, d, n, &p);
      },
      Entry::cuGraphAddHostNode, "a host node");
}

void update_host(Transaction& tx, NodeRecord* r, CUhostFn fn, void* data, Owners&& owners) {
  update_params<Entry::cuGraphHostNodeGetParams, Entry::cuGraphHostNodeSetParams>(
      tx, r, CUDA_HOST_NODE_PARAMS{fn, data}, std::move(owners), "reading a host node's parameters", "a host node");
}

NodeRecord* add_memset(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, const CUDA_MEMSET_NODE_PARAMS& p,
                       CUcontext ctx, Owners&& owners) {
  return add_with_context<Entry::cuGraphAddMemsetNode>(tx, box, deps, CU_GRAPH_NODE_TYPE_MEMSET, p, ctx,
                                                       std::move(owners), "a memset node");
}

void update_memset(Transaction& tx, NodeRecord* r, const CUDA_MEMSET_NODE_PARAMS& p, Owners&& owners) {
  update_params<Entry::cuGraphMemsetNodeGetParams, Entry::cuGraphMemsetNodeSetParams>(
      tx, r, p, std::move(owners), "reading a memset node's parameters", "a memset node");
}

NodeRecord* add_memcpy(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, const CUDA_MEMCPY3D& p,
                       CUcontext ctx, Owners&& owners) {
  return add_with_context<Entry::cuGraphAddMemcpyNode>(tx, box, deps, CU_GRAPH_NODE_TYPE_MEMCPY, p, ctx,
                                                       std::move(owners), "a memcpy node");
}

void update_memcpy(Transaction& tx, NodeRecord* r, const CUDA_MEMCPY3D& p, Owners&& owners) {
  update_params<Entry::cuGraphMemcpyNodeGetParams, Entry::cuGraphMemcpyNodeSetParams>(
      tx, r, p, std::move(owners), "reading a memcpy node's parameters", "a memcpy node");
}

NodeRecord* add_event(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, CUevent event, bool record,
                      Owners&& owners) {
  const DriverTable& drv = drv_of(tx);
  return tx.add(
      box, deps, record ? CU_GRAPH_NODE_TYPE_EVENT_RECORD : CU_GRAPH_NODE_TYPE_WAIT_EVENT, std::move(owners),
      [&](CUgraph g, const CUgraphNode* d, std::size_t n, CUgraphNode* out) {
        return record ? raw<Entry::cuGraphAddEventRecordNode>(drv, out, g, d, n, event)
                      : raw<Entry::cuGraphAddEventWaitNode>(drv, out, g, d, n, event);
      },
      record ? Entry::cuGraphAddEventRecordNode : Entry::cuGraphAddEventWaitNode,
      record ? "an event record node" : "an event wait node");
}

void update_event(Transaction& tx, NodeRecord* r, CUevent event, Owners&& owners) {
  UnusedOwners guard(owners);
  const DriverTable* drv = &drv_of(tx);
  bool record = r->type == CU_GRAPH_NODE_TYPE_EVENT_RECORD;
  CUevent prev = nullptr;
  if (record)
    call<Entry::cuGraphEventRecordNodeGetEvent>(*drv, "reading an event record node", r->node, &prev);
  else
    call<Entry::cuGraphEventWaitNodeGetEvent>(*drv, "reading an event wait node", r->node, &prev);
  CUgraphNode node = r->node;
  auto set = [drv, node, record](CUevent e) {
    return record ? raw<Entry::cuGraphEventRecordNodeSetEvent>(*drv, node, e)
                  : raw<Entry::cuGraphEventWaitNodeSetEvent>(*drv, node, e);
  };
  Entry entry = record ? Entry::cuGraphEventRecordNodeSetEvent : Entry::cuGraphEventWaitNodeSetEvent;
  tx.update(
      r, std::move(owners), [&] { return set(event); }, entry, [set, prev] { return set(prev); }, entry,
      record ? "an event record node" : "an event wait node");
}

NodeRecord* add_mem_alloc(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, CUDA_MEM_ALLOC_NODE_PARAMS& p,
                          Owners&& owners) {
  const DriverTable& drv = drv_of(tx);
  return tx.add(
      box, deps, CU_GRAPH_NODE_TYPE_MEM_ALLOC, std::move(owners),
      [&](CUgraph g, const CUgraphNode* d, std::size_t n, CUgraphNode* out) {
        return raw<Entry::cuGraphAddMemAllocNode>(drv, out, g, d, n, &p);
      },
      Entry::cuGraphAddMemAllocNode, "a memory allocation node");
}

NodeRecord* add_mem_free(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, CUdeviceptr dptr,
                         Owners&& owners) {
  const DriverTable& drv = drv_of(tx);
  return tx.add(
      box, deps, CU_GRAPH_NODE_TYPE_MEM_FREE, std::move(owners),
      [&](CUgraph g, const CUgraphNode* d, std::size_t n, CUgraphNode* out) {
        return raw<Entry::cuGraphAddMemFreeNode>(drv, out, g, d, n, dptr);
      },
      Entry::cuGraphAddMemFreeNode, "a memory free node");
}

NodeRecord* embed(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, Hierarchy& source, Owners&& owners,
                  Box** embedded) {
  UnusedOwners guard(owners);
  if (&source == &tx.hierarchy())
    throw UsageError("a graph cannot embed itself or a graph of its own hierarchy (the driver crashes on a graph "
                     "that contains itself)");
  // Lock the source without risking a lock-order deadlock with a thread embedding the other way.
  std::unique_lock src_lock(source.mu, std::defer_lock);
  for (int i = 0; !src_lock.try_lock(); ++i) {
    if (i > 20000) throw UsageError("cannot embed a graph that another thread keeps editing");
    std::this_thread::yield();
  }
  source.check_usable();
  const DriverTable& drv = drv_of(tx);
  CUgraph child = source.root().graph;
  Box* made = nullptr;
  NodeRecord* r = tx.add(
      box, deps, CU_GRAPH_NODE_TYPE_GRAPH, std::move(owners),
      [&](CUgraph g, const CUgraphNode* d, std::size_t n, CUgraphNode* out) {
        return raw<Entry::cuGraphAddChildGraphNode>(drv, out, g, d, n, child);
      },
      Entry::cuGraphAddChildGraphNode, "a child graph node",
      [&](Hierarchy& h, NodeRecord* rec) {
        CUgraph copy = nullptr;
        call<Entry::cuGraphChildGraphNodeGetGraph>(drv, "finding the embedded copy of a graph", rec->node, &copy);
        made = &h.add_box(copy, &box, rec, BoxKind::child);
        rekey(h, *made, source.root(), nullptr);
      });
  if (embedded) *embedded = made;
  return r;
}

CUgraphConditionalHandle make_conditional_handle(Transaction& tx, Box& box, CUcontext ctx, unsigned default_value,
                                                 bool assign_default) {
  CUgraphConditionalHandle h = 0;
  call<Entry::cuGraphConditionalHandleCreate>(drv_of(tx), "creating a conditional handle", &h, box.graph, ctx,
                                              default_value,
                                              assign_default ? static_cast<unsigned>(CU_GRAPH_COND_ASSIGN_DEFAULT) : 0u);
  return h;
}

NodeRecord* add_conditional(Transaction& tx, Box& box, std::span<NodeRecord* const> deps,
                            CUgraphConditionalHandle handle, CUgraphConditionalNodeType type, unsigned size,
                            CUcontext ctx, Owners&& owners, std::vector<Box*>* bodies) {
  const DriverTable& drv = drv_of(tx);
  CUgraphNodeParams p{};
  p.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  p.conditional.handle = handle;
  p.conditional.type = type;
  p.conditional.size = size;
  p.conditional.ctx = ctx;
  std::vector<Box*> made;
  made.reserve(size);
  NodeRecord* r = tx.add(
      box, deps, CU_GRAPH_NODE_TYPE_CONDITIONAL, std::move(owners),
      [&](CUgraph g, const CUgraphNode* d, std::size_t n, CUgraphNode* out) {
        return raw<Entry::cuGraphAddNode>(drv, out, g, d, static_cast<const CUgraphEdgeData*>(nullptr), n, &p);
      },
      Entry::cuGraphAddNode, "a conditional node",
      [&](Hierarchy& h, NodeRecord* rec) {
        for (unsigned i = 0; i < size; ++i) made.push_back(&h.add_box(p.conditional.phGraph_out[i], &box, rec, BoxKind::body));
      });
  if (bodies) *bodies = std::move(made);
  return r;
}

}  // namespace tether::detail
