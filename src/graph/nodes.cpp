// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The out-of-line parts of the node-kind descriptors: launch attributes, the dynamic shared memory
// limit, and the kinds whose add registers graphs CUDA made inside the node (child, conditional).
#include "edit.hpp"

namespace tether::detail {

std::size_t launch_attrs(const Launch& l, std::span<LaunchAttr, 7> out) noexcept {
  std::size_t n = 0;
  const unsigned set = l.attributes();
  auto put = [&](CUlaunchAttributeID id, auto&& fill) {
    out[n] = LaunchAttr{id, {}};
    fill(out[n].value);
    ++n;
  };
  if (set & Launch::cooperative_bit)
    put(CU_LAUNCH_ATTRIBUTE_COOPERATIVE, [&](CUlaunchAttributeValue& v) { v.cooperative = l.is_cooperative() ? 1 : 0; });
  if (set & Launch::cluster_bit)
    put(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, [&](CUlaunchAttributeValue& v) {
      v.clusterDim.x = l.cluster_dims().x;
      v.clusterDim.y = l.cluster_dims().y;
      v.clusterDim.z = l.cluster_dims().z;
    });
  if (set & Launch::cluster_scheduling_bit)
    put(CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, [&](CUlaunchAttributeValue& v) {
      v.clusterSchedulingPolicyPreference = static_cast<CUclusterSchedulingPolicy>(l.scheduling());
    });
  if (set & Launch::preferred_cluster_bit)
    put(CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION, [&](CUlaunchAttributeValue& v) {
      v.preferredClusterDim.x = l.preferred_cluster_dims().x;
      v.preferredClusterDim.y = l.preferred_cluster_dims().y;
      v.preferredClusterDim.z = l.preferred_cluster_dims().z;
    });
  if (set & Launch::priority_bit)
    put(CU_LAUNCH_ATTRIBUTE_PRIORITY, [&](CUlaunchAttributeValue& v) { v.priority = l.node_priority(); });
  if (set & Launch::mem_sync_domain_bit)
    put(CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, [&](CUlaunchAttributeValue& v) { v.memSyncDomain = l.sync_domain(); });
  if (set & Launch::access_policy_bit)
    put(CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, [&](CUlaunchAttributeValue& v) {
      const AccessPolicy& w = l.policy_window();
      v.accessPolicyWindow.base_ptr = const_cast<void*>(w.base);
      v.accessPolicyWindow.num_bytes = w.bytes;
      v.accessPolicyWindow.hitRatio = w.hit_ratio;
      v.accessPolicyWindow.hitProp = w.hit;
      v.accessPolicyWindow.missProp = w.miss;
    });
  return n;
}

namespace {
// The attributes a Launch sets, once: their bit, the driver's id, the driver's name and the setter.
struct AttrName {
  unsigned bit;
  CUlaunchAttributeID id;
  const char* driver;
  const char* setter;
};
constexpr AttrName kAttrNames[] = {
    {Launch::cooperative_bit, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, "CU_LAUNCH_ATTRIBUTE_COOPERATIVE", "cooperative"},
    {Launch::cluster_bit, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, "CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION", "cluster"},
    {Launch::cluster_scheduling_bit, CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE,
     "CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE", "cluster_scheduling"},
    {Launch::priority_bit, CU_LAUNCH_ATTRIBUTE_PRIORITY, "CU_LAUNCH_ATTRIBUTE_PRIORITY", "priority"},
    {Launch::mem_sync_domain_bit, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, "CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN",
     "mem_sync_domain"},
    {Launch::preferred_cluster_bit, CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION,
     "CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION", "preferred_cluster"},
    {Launch::access_policy_bit, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, "CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW",
     "access_policy"},
};
}  // namespace

std::string launch_attr_name(CUlaunchAttributeID id) {
  for (const AttrName& a : kAttrNames)
    if (a.id == id) return fmt::format("{} (Launch::{})", a.driver, a.setter);
  return "a launch attribute";
}

CUresult set_launch_attrs(const DriverTable& drv, CUgraphNode node, const Launch& l, CUlaunchAttributeID* failed) noexcept {
  LaunchAttr attrs[7];
  const std::size_t n = launch_attrs(l, attrs);
  for (std::size_t i = 0; i < n; ++i) {
    CUresult r = raw<Entry::cuGraphKernelNodeSetAttribute>(drv, node, attrs[i].id, &attrs[i].value);
    if (r != CUDA_SUCCESS) {
      *failed = attrs[i].id;
      return r;
    }
  }
  return CUDA_SUCCESS;
}

void throw_attr_error(const DriverTable& drv, CUresult r, CUlaunchAttributeID id, std::string_view what) {
  throw_call_error(drv, Entry::cuGraphKernelNodeSetAttribute, r,
                   fmt::format("{}: setting {} on a kernel node", what, launch_attr_name(id)));
}

void throw_exec_attributes(std::string_view what, unsigned attributes) {
  const char* name = "an attribute";
  for (const AttrName& a : kAttrNames)
    if (attributes & a.bit) {
      name = a.setter;
      break;
    }
  throw UsageError(fmt::format("{}: the Launch sets {}, a node attribute, which an executable cannot change per node "
                               "(the driver has no call for it; only dimensions, dynamic shared memory and arguments "
                               "are updatable): change it with Edit::update in the graph, then update the executable "
                               "from the graph (GraphExec::update(graph) takes changed clusters, scheduling, memory "
                               "sync domains and access policies) or instantiate again (a changed cooperative, or "
                               "priority under use_node_priority, needs a new executable)",
                               what, name));
}

namespace {
// The limit tether raised each function's dynamic shared memory to: a launch asking for no more
// than that makes no driver call. Why a process-wide table and not a field of the Kernel: a
// function's attribute is the function's, whichever Kernel copy looked it up.
std::mutex g_shared_mu;
std::unordered_map<CUfunction, std::size_t> g_shared_limit;
}  // namespace

void raise_dynamic_shared(const DriverTable& drv, CUfunction f, std::string_view kernel, std::size_t bytes,
                          std::string_view what) {
  std::lock_guard lock(g_shared_mu);
  std::size_t& limit = g_shared_limit[f];
  if (bytes <= limit) return;
  const CUresult r = raw<Entry::cuFuncSetAttribute>(drv, f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                    static_cast<int>(bytes));
  if (r != CUDA_SUCCESS)
    throw_call_error(drv, Entry::cuFuncSetAttribute, r,
                     fmt::format("{}: raising kernel '{}''s dynamic shared memory limit to {} bytes "
                                 "(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES; the device's opt-in maximum is "
                                 "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)",
                                 what, kernel, bytes));
  limit = bytes;
}

void throw_no_kernel() {
  throw UsageError("update: this kernel node handle carries no kernel (it was not made by Edit::launch)");
}

void throw_other_kernel(std::string_view what, std::string_view spec_kernel, std::string_view node_kernel) {
  throw UsageError(fmt::format("{}: the spec launches kernel '{}', but the node runs kernel '{}'; a kernel node's "
                               "updates keep its kernel: add a node for the other kernel instead",
                               what, spec_kernel, node_kernel));
}

void SpecCore::throw_empty_spec(std::string_view what) {
  throw UsageError(fmt::format("{}: this spec is empty (moved from, or already given to an operation); a spec makes "
                               "one node version: make a new one",
                               what));
}

void throw_update_error(const DriverTable& drv, CUresult r, const char* noun) {
  throw_call_error(drv, Entry::cuGraphNodeSetParams, r, fmt::format("updating {}", noun));
}

}  // namespace tether::detail

namespace tether {

CUresult Spec<MemcpyNode>::enqueue(const detail::DriverTable& t, CUstream s, bool, detail::Entry* entry) const {
  using detail::Entry;
  using detail::raw;
  const CUDA_MEMCPY3D& c = params_.memcpy.copyParams;
  const bool src_host = c.srcMemoryType == CU_MEMORYTYPE_HOST, dst_host = c.dstMemoryType == CU_MEMORYTYPE_HOST;
  const bool src_dev = c.srcMemoryType == CU_MEMORYTYPE_DEVICE, dst_dev = c.dstMemoryType == CU_MEMORYTYPE_DEVICE;
  if (src_host && dst_dev) {
    *entry = Entry::cuMemcpyHtoDAsync;
    return raw<Entry::cuMemcpyHtoDAsync>(t, c.dstDevice, c.srcHost, c.WidthInBytes, s);
  }
  if (src_dev && dst_host) {
    *entry = Entry::cuMemcpyDtoHAsync;
    return raw<Entry::cuMemcpyDtoHAsync>(t, c.dstHost, c.srcDevice, c.WidthInBytes, s);
  }
  if (src_dev && dst_dev) {
    *entry = Entry::cuMemcpyDtoDAsync;
    return raw<Entry::cuMemcpyDtoDAsync>(t, c.dstDevice, c.srcDevice, c.WidthInBytes, s);
  }
  // Host to host, or an end of unknown kind: unified addressing tells the driver.
  const CUdeviceptr dst = dst_host ? static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(c.dstHost)) : c.dstDevice;
  const CUdeviceptr src = src_host ? static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(c.srcHost)) : c.srcDevice;
  *entry = Entry::cuMemcpyAsync;
  return raw<Entry::cuMemcpyAsync>(t, dst, src, c.WidthInBytes, s);
}

}  // namespace tether

namespace tether::detail {

NodeRecord* embed(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, Hierarchy& source, Owners&& owners,
                  Box** embedded) {
  ReleaseIfUnused guard(owners);
  if (&source == &tx.hierarchy())
    throw UsageError("a graph cannot embed itself or a graph of its own hierarchy (the driver crashes on a graph "
                     "that contains itself)");
  // Waits for an edit of the source on another thread to end; a cycle (that thread embedding this
  // graph the other way round) is refused by the lock instead of deadlocking.
  HierarchyGuard src_lock(source.mu, "Edit::embed");
  source.check_usable();
  const DriverTable& drv = *tx.hierarchy().drv;
  ChildDesc d(source.root().graph);
  Box* made = nullptr;
  NodeRecord* r = tx.add(box, deps, d.params(), std::move(owners), ChildDesc::noun, [&](Hierarchy& h, NodeRecord* rec) {
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
  call<Entry::cuGraphConditionalHandleCreate>(*tx.hierarchy().drv, "creating a conditional handle", &h, box.graph, ctx,
                                              default_value,
                                              assign_default ? static_cast<unsigned>(CU_GRAPH_COND_ASSIGN_DEFAULT) : 0u);
  return h;
}

NodeRecord* add_conditional(Transaction& tx, Box& box, std::span<NodeRecord* const> deps, ConditionalDesc& d,
                            Owners&& owners, std::vector<Box*>* bodies) {
  std::vector<Box*> made;
  made.reserve(d.size());
  NodeRecord* r = tx.add(box, deps, d.params(), std::move(owners), ConditionalDesc::noun, [&](Hierarchy& h, NodeRecord* rec) {
    for (unsigned i = 0; i < d.size(); ++i) {
      made.push_back(&h.add_box(d.body(i), &box, rec, BoxKind::body));
      made.back()->conditional_type = static_cast<std::uint8_t>(d.params().conditional.type);
    }
  });
  if (bodies) *bodies = std::move(made);
  return r;
}

}  // namespace tether::detail
