// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "ledger.hpp"

namespace tether::detail {

namespace {

void mark_unusable(Hierarchy& h, const char* why, std::string_view detail) noexcept {
  if (!h.unusable) h.unusable = why;
  report_error(why, detail);
}

// A pending record that will never be published: its handles go invalid.
void drop_pending(Hierarchy& h, NodeRecord* r) noexcept {
  r->generation.fetch_add(1, std::memory_order_acq_rel);
  h.free_record(r);
}

// Applies a staged removal: the node, the graphs CUDA made inside it, its metadata (first,
// invariant 3) and then the graph's reference to its version.
void remove_now(Hierarchy& h, NodeRecord* r) noexcept {
  if (!r->alive) return;
  const DriverTable& drv = *h.drv;
  h.unregister_owned_by(r);  // before CUDA destroys (and may reuse) the embedded graphs' handles
  note_incoming_edges(drv, *r);
  CUresult res = raw<Entry::cuGraphDestroyNode>(drv, r->node);
  if (res != CUDA_SUCCESS) {
    try {
      h.reregister_owned_by(r);
      report_error("removing a node when committing an edit",
                   fmt::format("cuGraphDestroyNode failed with {}; the node stays in the graph with its owners",
                               result_name(res)));
    } catch (...) {
      mark_unusable(h, "a node removal failed and its graph views could not be restored", result_name(res));
    }
    return;
  }
  h.retire_owned_by(r);
  CUgraph g = r->box->graph;
  NodeAttachment* current = r->current;
  h.retire_record(r);
  release_from(drv, g, current, "releasing the owners of a removed node");
}

}  // namespace

void Ledger::grow(std::size_t entries) {
  chunks_.reserve((entries + kChunk - 1) / kChunk);
  while (chunks_.size() * kChunk < entries)
    chunks_.emplace_back(static_cast<Change*>(::operator new(sizeof(Change) * kChunk)));
}

void Ledger::stage_kept(std::size_t count) noexcept {
  Change e{Kind::kept, nullptr, nullptr, {}};
  e.aux = count;
  push(e);
}

void Ledger::stage_name(NodeRecord* r, std::optional<std::string> before) {
  names_before_.push_back(std::move(before));
  Change e{Kind::name, r, nullptr, {}};
  e.aux = names_before_.size() - 1;
  push(e);
}

void Ledger::forget_last() noexcept {
  Change& e = at(size_ - 1);
  if (e.kind == Kind::name) names_before_.pop_back();
  if (e.kind == Kind::remove) e.rec->removing = false;
  if (e.kind == Kind::captured) --captured_;
  --size_;
}

void Ledger::discard_last(Hierarchy& h) noexcept {
  discard_one(h, at(size_ - 1));
  forget_last();
}

void Ledger::order_as(std::span<const CUgraphNode> graph_nodes, Hierarchy& h,
                      FunctionRef<CUgraphNodeType(CUgraphNode)> type_of) {
  std::unordered_map<CUgraphNode, std::size_t> mine;  // node -> entry
  mine.reserve(size_);
  for (std::size_t i = 0; i < size_; ++i)
    if (at(i).kind == Kind::captured) mine.emplace(at(i).rec->node, i);
  std::vector<Change> ordered;
  ordered.reserve(graph_nodes.size() + 1);
  std::vector<bool> listed(size_);
  try {
    for (CUgraphNode node : graph_nodes) {
      if (auto it = mine.find(node); it != mine.end()) {
        ordered.push_back(at(it->second));
        listed[it->second] = true;
        continue;
      }
      const CUgraphNodeType type = type_of(node);
      NodeRecord* r = h.allocate_record();
      r->node = node;
      r->type = type;
      r->pending = true;
      ordered.push_back({Kind::foreign, r, nullptr, {}});
    }
    reserve(ordered.size() + 1 > size_ ? ordered.size() + 1 - size_ : 0);
  } catch (...) {
    for (Change& e : ordered)
      if (e.kind == Kind::foreign) drop_pending(h, e.rec);
    throw;
  }
  // From here nothing fails.
  std::size_t kept = 0;
  for (std::size_t i = 0; i < size_; ++i) {
    Change& e = at(i);
    if (e.kind == Kind::kept) kept += e.aux;
    if (e.kind == Kind::captured && !listed[i]) {
      drop_pending(h, e.rec);
      ++kept;
    }
  }
  size_ = 0;
  captured_ = 0;
  for (const Change& e : ordered) {
    push(e);
    captured_ += e.kind == Kind::captured;
  }
  if (kept) stage_kept(kept);
}

void Ledger::merge(Ledger& other, Box& box, Hierarchy& h) noexcept {
  const DriverTable& drv = *h.drv;
  other.for_each([&](Change e) {
    place(e, box);
    if (e.kind == Kind::captured || e.kind == Kind::foreign) {
      publish_one(h, drv, e);
      e.kind = Kind::merged;
    }
    push(e);  // room reserved by the caller
  });
  other.clear();
}

// Inlined into the loops that publish: one call per entry was measured at 20 instructions a node.
[[gnu::always_inline]] inline void Ledger::publish_one(Hierarchy& h, const DriverTable& drv, Change& e) noexcept {
  switch (e.kind) {
    case Kind::add:
    case Kind::captured:
    case Kind::foreign:
      e.rec->pending = false;
      if (e.rec->box->retired.load(std::memory_order_acquire)) {
        // Added to a child graph or body whose node a removal earlier in this commit destroyed:
        // CUDA destroyed the new node, and released its reference, with that graph. Its handles
        // must not stay valid (a driver call on the node would use a destroyed graph).
        drop_pending(h, e.rec);
        e.staged = {};
        break;
      }
      if (e.kind == Kind::foreign) h.untracked.insert(e.rec);
      h.publish(*e.rec->box, e.rec);
      detail::commit(drv, e.rec->current, e.staged);
      break;
    case Kind::merged: break;  // published by the merge
    case Kind::kept:
      if (e.box) e.box->anonymous_owners += e.aux;
      break;
    case Kind::update:
      if (e.rec->alive)
        detail::commit(drv, e.rec->current, e.staged);
      else if (e.staged && !e.box->retired.load(std::memory_order_acquire))
        // Removed earlier in this commit from a graph that lives on: the staged version was never
        // published, so nothing else would release it (if the graph itself went, CUDA did). Why
        // the box and not a lookup of the graph's handle: the driver reuses graph handles, so a
        // graph made meanwhile (on any thread) may carry the destroyed one's.
        detail::rollback(drv, e.staged);
      break;
    case Kind::remove:
      e.rec->removing = false;
      remove_now(h, e.rec);
      break;
    case Kind::connect:
    case Kind::disconnect:
    case Kind::name: break;
  }
}

void Ledger::discard_one(Hierarchy& h, Change& e) noexcept {
  const DriverTable& drv = *h.drv;
  switch (e.kind) {
    case Kind::add: {
      NodeRecord* r = e.rec;
      h.unregister_owned_by(r);
      CUresult res = raw<Entry::cuGraphDestroyNode>(drv, r->node);
      if (res != CUDA_SUCCESS) {
        // The node stays in the graph and may use its owners: keep the staged reference.
        mark_unusable(h, "undoing an added node failed (the node is still in the graph)", result_name(res));
        h.retire_owned_by(r);
      } else {
        h.retire_owned_by(r);
        detail::rollback(drv, e.staged);
      }
      drop_pending(h, r);
      break;
    }
    case Kind::captured:
    case Kind::foreign:
      // The capturing graph keeps the node and its version until the driver destroys the graph.
      if (e.rec->pending) drop_pending(h, e.rec);
      break;
    case Kind::merged:
      // Its graph goes with the undo of the node that holds it, and its version with the graph.
      h.retire_record(e.rec);
      break;
    case Kind::kept: break;
    case Kind::update: {
      CUresult res = e.undo.restore(drv, e.rec->node, e.undo.saved);
      if (res != CUDA_SUCCESS)
        // The node may still use the new owners: keep the staged reference (a leak, never a use after free).
        mark_unusable(h, "restoring a node's previous parameters failed", result_name(res));
      else
        detail::rollback(drv, e.staged);
      break;
    }
    case Kind::remove: e.rec->removing = false; break;
    case Kind::connect:
    case Kind::disconnect: {
      CUgraph g = e.rec->box->graph;
      const auto* no_data = static_cast<const CUgraphEdgeData*>(nullptr);
      CUresult res = e.kind == Kind::connect
                         ? raw<Entry::cuGraphRemoveDependencies>(drv, g, &e.rec->node, &e.other->node, no_data,
                                                                 std::size_t{1})
                         : raw<Entry::cuGraphAddDependencies>(drv, g, &e.rec->node, &e.other->node, no_data,
                                                              std::size_t{1});
      if (res != CUDA_SUCCESS) mark_unusable(h, "restoring an edge failed", result_name(res));
      else if (e.kind == Kind::connect) note_edge_removed(drv, *e.rec);
      break;
    }
    case Kind::name: {
      std::optional<std::string>& before = names_before_[e.aux];
      if (!before) {
        h.names.erase(e.rec);
        break;
      }
      try {
        h.names[e.rec] = std::move(*before);
      } catch (...) {
        h.names.erase(e.rec);  // out of memory: the node loses its name, nothing else
      }
      break;
    }
  }
}

void Ledger::publish(Hierarchy& h) noexcept {
  const DriverTable& drv = *h.drv;
  for_each([&](Change& e) { publish_one(h, drv, e); });
  clear();
}

void Ledger::publish_into(Box& box, Hierarchy& h) noexcept {
  const DriverTable& drv = *h.drv;
  for_each([&](Change& e) {  // placed and published in one pass
    place(e, box);
    publish_one(h, drv, e);
  });
  clear();
}

void Ledger::discard(Hierarchy& h) noexcept {
  for (std::size_t i = size_; i--;) discard_one(h, at(i));
  clear();
}

void Ledger::clear() noexcept {
  size_ = 0;
  captured_ = 0;
  names_before_.clear();
  arena_.clear();
}

void Ledger::trim(std::size_t entries) noexcept {
  const std::size_t keep = (entries + kChunk - 1) / kChunk;
  if (chunks_.size() > keep) chunks_.resize(keep);
}

}  // namespace tether::detail
