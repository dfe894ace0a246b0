// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The event record and event wait node descriptors: an Event -> CUgraphNodeParams (eventRecord /
// eventWait) and the event as the version's owner.
#pragma once

#include "../../resources/event.hpp"
#include "desc.hpp"

namespace tether::detail {

/// Saves and restores the event of an event record (`Record`) or wait node.
template <bool Record>
struct EventSaved {
  CUevent event;
  static CUresult restore(const DriverTable& drv, CUgraphNode node, const void* self) noexcept {
    CUevent e = static_cast<const EventSaved*>(self)->event;
    if constexpr (Record)
      return raw<Entry::cuGraphEventRecordNodeSetEvent>(drv, node, e);
    else
      return raw<Entry::cuGraphEventWaitNodeSetEvent>(drv, node, e);
  }
  static Undo save(const DriverTable& drv, CUgraphNode node, Arena& arena) {
    EventSaved s{};
    if constexpr (Record)
      call<Entry::cuGraphEventRecordNodeGetEvent>(drv, "reading an event record node", node, &s.event);
    else
      call<Entry::cuGraphEventWaitNodeGetEvent>(drv, "reading an event wait node", node, &s.event);
    return {&restore, keep_in(arena, s)};
  }
};

/// One event record (`Record`) or event wait node's parameters and owner (an Event is never empty).
template <bool Record>
class EventDesc {
 public:
  static constexpr const char* noun = Record ? "an event record node" : "an event wait node";
  explicit EventDesc(const Event& event) {
    params_.type = Record ? CU_GRAPH_NODE_TYPE_EVENT_RECORD : CU_GRAPH_NODE_TYPE_WAIT_EVENT;
    if constexpr (Record)
      params_.eventRecord.event = event.get();
    else
      params_.eventWait.event = event.get();
    owners_.owners = Owners{event};
  }
  CUgraphNodeParams& params() noexcept { return params_; }
  Owners& owners() noexcept { return owners_.owners; }
  Undo save(const DriverTable& drv, CUgraphNode node, Arena& arena) const { return EventSaved<Record>::save(drv, node, arena); }

 private:
  CUgraphNodeParams params_{};
  PendingOwners owners_;
};

}  // namespace tether::detail
