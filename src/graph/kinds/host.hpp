// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The host node descriptor: a callable -> CUgraphNodeParams (host) pointing at the callable, which
// the version owns (with its captured state).
#pragma once

#include "../../resources/context.hpp"
#include "desc.hpp"

namespace tether::detail {

template <class F>
void host_trampoline(void* p) {
  // Host callbacks run on a driver thread where CUDA calls fail: anything the callable drops that
  // needs the driver is deferred to the reclaimer. Exceptions cannot cross the driver.
  ThreadRoleScope role(ThreadRole::host_callback);  // counted: the reclaimer starts no blocking release meanwhile
  try {
    (*static_cast<F*>(p))();
  } catch (...) {
    report_current_exception("running a host node's callable");
  }
}

using HostSaved = ParamsSaved<CUDA_HOST_NODE_PARAMS, Entry::cuGraphHostNodeGetParams, Entry::cuGraphHostNodeSetParams>;

/// One host node's parameters and owners.
class HostDesc : public DescBase {
 public:
  static constexpr const char* noun = "a host node";
  template <class F>
  explicit HostDesc(F&& fn) : DescBase(CU_GRAPH_NODE_TYPE_HOST) {
    static_assert(std::is_invocable_v<std::remove_cvref_t<F>&>, "host: the callable must be invocable with no arguments");
    static_assert(std::is_move_constructible_v<std::remove_cvref_t<F>>, "host: the callable must be movable");
    auto& stored = owners_.owners.adopt(std::forward<F>(fn));
    params_.host.fn = &host_trampoline<std::remove_cvref_t<F>>;
    params_.host.userData = static_cast<void*>(&stored);
  }
  Undo save(const DriverTable& drv, CUgraphNode node, Arena& arena) const { return HostSaved::save(drv, node, arena, "reading a host node's parameters"); }
};

}  // namespace tether::detail
