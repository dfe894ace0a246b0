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

}  // namespace tether::detail

TETHER_EXPORT namespace tether {

/// A host node's spec (`tether::host(fn)`): the callable (move-only allowed), owned with its
/// captured state by the version, run on a driver thread where CUDA calls are not allowed;
/// exceptions it throws are reported through the error hook. Stream work issues
/// cuLaunchHostFunc. Since 0.5.
template <>
class Spec<HostNode> : public detail::SpecKeeping<Spec<HostNode>> {
 public:
  static constexpr const char* noun = "a host node";
  static constexpr CUgraphNodeType type = CU_GRAPH_NODE_TYPE_HOST;
  static constexpr const char* to_update = "the host node to update";

  /// What `tether::host` and the one-line spellings build. Throws std::bad_alloc.
  template <class F>
  Spec(detail::What, F&& fn) : SpecKeeping(CU_GRAPH_NODE_TYPE_HOST) {
    static_assert(std::is_invocable_v<std::remove_cvref_t<F>&>, "host: the callable must be invocable with no arguments");
    static_assert(std::is_move_constructible_v<std::remove_cvref_t<F>>, "host: the callable must be movable");
    auto& stored = owners_.owners.adopt(std::forward<F>(fn));
    params_.host.fn = &detail::host_trampoline<std::remove_cvref_t<F>>;
    params_.host.userData = static_cast<void*>(&stored);
  }


 private:
  friend struct detail::SpecAccess;
  detail::Undo save(const detail::DriverTable& drv, CUgraphNode node, detail::Arena& arena) const {
    return detail::HostSaved::save(drv, node, arena, "reading a host node's parameters");
  }
  CUresult enqueue(const detail::DriverTable& t, CUstream s, bool, detail::Entry* entry) const {
    *entry = detail::Entry::cuLaunchHostFunc;
    return detail::raw<detail::Entry::cuLaunchHostFunc>(t, s, params_.host.fn, params_.host.userData);
  }
};

/// A host node's spec running `fn()` (see Spec<HostNode>). Constrained to callables, so that with
/// `using namespace tether` an application's own `host(...)` functions are still found. Since 0.5.
template <class F>
  requires(std::is_invocable_v<std::remove_cvref_t<F>&> && std::is_move_constructible_v<std::remove_cvref_t<F>>)
Spec<HostNode> host(F&& fn) {
  return Spec<HostNode>(detail::What{"tether::host"}, std::forward<F>(fn));
}

}  // namespace tether
