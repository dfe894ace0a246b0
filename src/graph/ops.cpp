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
      [drv, node, prev] { return raw<Set>(*drv, node, &prev); }, what);
}

// The add of a node kind whose add call takes fixed arguments after the dependencies
// (cuGraphAdd*Node(out, graph, deps, ndeps, args...)).
template <Entry Add, class... A>
NodeRecord* add_node(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, CUgraphNodeType type,
                     Owners&& owners, std::string_view what, const A&... args) {
  const DriverTable& drv = drv_of(tx);
  return tx.add(
      box, deps, type, std::move(owners),
      [&](CUgraph g, const CUgraphNode* d, std::size_t n, CUgraphNode* out) { return raw<Add>(drv, out, g, d, n, args...); },
      Add, what);
}
}  // namespace

KernelCall read_kernel(const DriverTable& drv, CUgraphNode node, std::span<const std::size_t> sizes) {
  CUDA_KERNEL_NODE_PARAMS p{};
  call<Entry::cuGraphKernelNodeGetParams>(drv, "reading a kernel node's parameters", node, &p);
  return KernelCall::copy(p, sizes);
}

NodeRecord* add_kernel(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, const KernelCall& kc,
                       Owners&& owners, std::string_view what) {
  return add_node<Entry::cuGraphAddKernelNode>(tx, box, deps, CU_GRAPH_NODE_TYPE_KERNEL, std::move(owners), what,
                                               &kc.params);
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
      Entry::cuGraphKernelNodeSetParams, [t, kept] { return t->restore_kernel(kept); }, what);
}

NodeRecord* add_empty(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, Owners&& owners) {
  return add_node<Entry::cuGraphAddEmptyNode>(tx, box, deps, CU_GRAPH_NODE_TYPE_EMPTY, std::move(owners),
                                              "an empty node");
}

NodeRecord* add_host(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, CUhostFn fn, void* data,
                     Owners&& owners) {
  CUDA_HOST_NODE_PARAMS p{fn, data};
  return add_node<Entry::cuGraphAddHostNode>(tx, box, deps, CU_GRAPH_NODE_TYPE_HOST, std::move(owners), "a host node",
                                             &p);
}

void update_host(Transaction& tx, NodeRecord* r, CUhostFn fn, void* data, Owners&& owners) {
  update_params<Entry::cuGraphHostNodeGetParams, Entry::cuGraphHostNodeSetParams>(
      tx, r, CUDA_HOST_NODE_PARAMS{fn, data}, std::move(owners), "reading a host node's parameters", "a host node");
}

NodeRecord* add_memset(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, const CUDA_MEMSET_NODE_PARAMS& p,
                       CUcontext ctx, Owners&& owners) {
  return add_node<Entry::cuGraphAddMemsetNode>(tx, box, deps, CU_GRAPH_NODE_TYPE_MEMSET, std::move(owners),
                                               "a memset node", &p, ctx);
}

void update_memset(Transaction& tx, NodeRecord* r, const CUDA_MEMSET_NODE_PARAMS& p, Owners&& owners) {
  update_params<Entry::cuGraphMemsetNodeGetParams, Entry::cuGraphMemsetNodeSetParams>(
      tx, r, p, std::move(owners), "reading a memset node's parameters", "a memset node");
}

NodeRecord* add_memcpy(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, const CUDA_MEMCPY3D& p,
                       CUcontext ctx, Owners&& owners) {
  return add_node<Entry::cuGraphAddMemcpyNode>(tx, box, deps, CU_GRAPH_NODE_TYPE_MEMCPY, std::move(owners),
                                               "a memcpy node", &p, ctx);
}

void update_memcpy(Transaction& tx, NodeRecord* r, const CUDA_MEMCPY3D& p, Owners&& owners) {
  update_params<Entry::cuGraphMemcpyNodeGetParams, Entry::cuGraphMemcpyNodeSetParams>(
      tx, r, p, std::move(owners), "reading a memcpy node's parameters", "a memcpy node");
}

NodeRecord* add_event(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, CUevent event, bool record,
                      Owners&& owners) {
  if (record)
    return add_node<Entry::cuGraphAddEventRecordNode>(tx, box, deps, CU_GRAPH_NODE_TYPE_EVENT_RECORD,
                                                      std::move(owners), "an event record node", event);
  return add_node<Entry::cuGraphAddEventWaitNode>(tx, box, deps, CU_GRAPH_NODE_TYPE_WAIT_EVENT, std::move(owners),
                                                  "an event wait node", event);
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
      r, std::move(owners), [&] { return set(event); }, entry, [set, prev] { return set(prev); },
      record ? "an event record node" : "an event wait node");
}

NodeRecord* add_mem_alloc(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, CUDA_MEM_ALLOC_NODE_PARAMS& p,
                          Owners&& owners) {
  CUDA_MEM_ALLOC_NODE_PARAMS* params = &p;  // the driver writes the allocation's address back
  return add_node<Entry::cuGraphAddMemAllocNode>(tx, box, deps, CU_GRAPH_NODE_TYPE_MEM_ALLOC, std::move(owners),
                                                 "a memory allocation node", params);
}

NodeRecord* add_mem_free(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, CUdeviceptr dptr,
                         Owners&& owners) {
  return add_node<Entry::cuGraphAddMemFreeNode>(tx, box, deps, CU_GRAPH_NODE_TYPE_MEM_FREE, std::move(owners),
                                                "a memory free node", dptr);
}

NodeRecord* embed(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, Hierarchy& source, Owners&& owners,
                  Box** embedded) {
  UnusedOwners guard(owners);
  if (&source == &tx.hierarchy())
    throw UsageError("a graph cannot embed itself or a graph of its own hierarchy (the driver crashes on a graph "
                     "that contains itself)");
  // Waits for an edit of the source on another thread to end; a cycle (that thread embedding this
  // graph the other way round) is refused by the lock instead of deadlocking.
  HierarchyGuard src_lock(source.mu, "Edit::embed");
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
