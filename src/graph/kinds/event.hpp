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

/// An event record (`Record`) or event wait node's spec: the event as parameter and owner.
template <bool Record, class Derived>
class EventSpec : public SpecKeeping<Derived> {
  using Base = SpecKeeping<Derived>;
  using Base::owners_;
  using Base::params_;

 public:
  static constexpr const char* noun = Record ? "an event record node" : "an event wait node";
  static constexpr CUgraphNodeType type = Record ? CU_GRAPH_NODE_TYPE_EVENT_RECORD : CU_GRAPH_NODE_TYPE_WAIT_EVENT;
  static constexpr const char* to_update = Record ? "the event record node to update" : "the event wait node to update";
  /// An Event is never empty: nothing to check.
  EventSpec(What, const Event& event) : Base(type) {
    if constexpr (Record)
      params_.eventRecord.event = event.get();
    else
      params_.eventWait.event = event.get();
    owners_.owners = Owners{event};
  }

 protected:
  friend struct SpecAccess;
  Undo save(const DriverTable& drv, CUgraphNode node, Arena& arena) const { return EventSaved<Record>::save(drv, node, arena); }
  // The EXTERNAL flags are for captures only: outside one the H200 refuses
  // CU_EVENT_RECORD_EXTERNAL with CUDA_ERROR_ILLEGAL_STATE.
  CUresult enqueue(const DriverTable& t, CUstream s, bool captured, Entry* entry) const {
    if constexpr (Record) {
      *entry = Entry::cuEventRecordWithFlags;
      return raw<Entry::cuEventRecordWithFlags>(t, params_.eventRecord.event, s,
                                                captured ? static_cast<unsigned>(CU_EVENT_RECORD_EXTERNAL) : 0u);
    } else {
      *entry = Entry::cuStreamWaitEvent;
      return raw<Entry::cuStreamWaitEvent>(t, s, params_.eventWait.event,
                                           captured ? static_cast<unsigned>(CU_EVENT_WAIT_EXTERNAL) : 0u);
    }
  }
};

}  // namespace tether::detail

TETHER_EXPORT namespace tether {

/// An event record node's spec (`tether::record(event)`): keeps the event alive. Stream work
/// records it with CU_EVENT_RECORD_EXTERNAL inside a capture (a node other work can wait for),
/// plainly outside one (cuEventRecordWithFlags). Since 0.5.
template <>
class Spec<EventRecordNode> : public detail::EventSpec<true, Spec<EventRecordNode>> {
 public:
  using EventSpec::EventSpec;
};

/// An event wait node's spec (`tether::wait(event)`): keeps the event alive. Stream work waits with
/// CU_EVENT_WAIT_EXTERNAL inside a capture (a node, for an event recorded outside the graph),
/// plainly outside one (cuStreamWaitEvent). Since 0.5.
template <>
class Spec<EventWaitNode> : public detail::EventSpec<false, Spec<EventWaitNode>> {
 public:
  using EventSpec::EventSpec;
};

/// An event record node's spec for `event`. Since 0.5.
inline Spec<EventRecordNode> record(const Event& event) { return {detail::What{"tether::record"}, event}; }
/// An event wait node's spec for `event`. Since 0.5.
inline Spec<EventWaitNode> wait(const Event& event) { return {detail::What{"tether::wait"}, event}; }

}  // namespace tether
