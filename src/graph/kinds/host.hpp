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
  ForbidCuda forbid;
  CallbackScope running;  // the reclaimer starts no blocking release meanwhile
  try {
    (*static_cast<F*>(p))();
  } catch (...) {
    report_current_exception("running a host node's callable");
  }
}

/// Saves and restores a host node's parameters (cuGraphHostNodeGetParams / SetParams).
struct HostSaved {
  CUDA_HOST_NODE_PARAMS params;
  static CUresult restore(const DriverTable& drv, CUgraphNode node, const void* self) noexcept {
    return raw<Entry::cuGraphHostNodeSetParams>(drv, node, &static_cast<const HostSaved*>(self)->params);
  }
  static Undo save(const DriverTable& drv, CUgraphNode node, Arena& arena) {
    HostSaved s{};
    call<Entry::cuGraphHostNodeGetParams>(drv, "reading a host node's parameters", node, &s.params);
    return {&restore, keep_in(arena, s)};
  }
};

/// One host node's parameters and owners.
class HostDesc {
 public:
  static constexpr const char* noun = "a host node";
  template <class F>
  explicit HostDesc(F&& fn) {
    static_assert(std::is_invocable_v<std::remove_cvref_t<F>&>, "host: the callable must be invocable with no arguments");
    static_assert(std::is_move_constructible_v<std::remove_cvref_t<F>>, "host: the callable must be movable");
    auto& stored = owners_.owners.adopt(std::forward<F>(fn));
    params_.type = CU_GRAPH_NODE_TYPE_HOST;
    params_.host.fn = &host_trampoline<std::remove_cvref_t<F>>;
    params_.host.userData = static_cast<void*>(&stored);
  }
  CUgraphNodeParams& params() noexcept { return params_; }
  Owners& owners() noexcept { return owners_.owners; }
  Undo save(const DriverTable& drv, CUgraphNode node, Arena& arena) const { return HostSaved::save(drv, node, arena); }

 private:
  CUgraphNodeParams params_{};
  PendingOwners owners_;
};

}  // namespace tether::detail
