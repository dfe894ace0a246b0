// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The one ledger of node versions and graph changes (docs/design/attachments.md, "The ledger"):
// what an edit did to its graphs, or what the driver added to a capturing graph, kept as typed
// entries until the change set ends. Each entry knows how to publish itself (its record becomes
// the node's state, its staged version the node's current one, the version it supersedes is
// released) and how to discard itself (the driver change undone, the staged reference released).
// A transaction stages into its ledger and publishes it at commit; a capture stages the nodes the
// driver made into a ledger of its own, which `Capture::end` publishes into the new graph and
// `Edit::capture` merges into the edit's. Only a ledger sets a record's `pending` and `removing`
// flags and publishes it: a record's state has one owner.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "hierarchy.hpp"
#include "function_ref.hpp"
#include "kinds/desc.hpp"

#include <span>

namespace tether::detail {

/// Notes on `from`'s graph that an edge from it was removed, if `from` has dependencies of its own
/// (one cuGraphNodeGetDependencies; fact U1: the H200 then refuses whole updates from the graph).
void note_edge_removed(const DriverTable& drv, NodeRecord& from) noexcept;
/// The same for the edges into `to`, which its destruction removes (the H200 leaves the trace of
/// fact U1 then too): one cuGraphNodeGetDependencies, and one per dependency.
void note_incoming_edges(const DriverTable& drv, NodeRecord& to) noexcept;


class Ledger {
 public:
  Ledger() = default;
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;
  ~Ledger() = default;

  /// Makes room for `n` more entries, so that staging them cannot fail after the driver change
  /// they record. Throws std::bad_alloc (nothing changed).
  void reserve(std::size_t n) {
    if (size_ + n > chunks_.size() * kChunk) [[unlikely]]
      grow(size_ + n);
  }

  // Staging (each after `reserve`; none of them fails).

  /// A node this change set added with cuGraphAddNode (`r` pending, its node set), with its staged
  /// version. Discarding destroys the node and releases the version.
  void stage_add(NodeRecord* r, Staged staged) noexcept { push({Kind::add, r, nullptr, staged}); }
  /// A node the driver added to a capturing graph (`r` pending, its box set when the capture ends:
  /// `publish_into` or `merge`). Discarding only frees the record: the graph cannot lose nodes while it captures,
  /// and its destruction releases the staged version with it.
  void stage_captured(NodeRecord* r, Staged staged) noexcept {
    push({Kind::captured, r, nullptr, staged});
    ++captured_;
  }
  /// A node other code captured: no version (its record is untracked). Published like a captured
  /// node, discarded by freeing the record.
  void stage_foreign(NodeRecord* r) noexcept { push({Kind::foreign, r, nullptr, {}}); }
  /// `count` owners retained on the graph by no node (Capture::keeping, captured work that could
  /// not be identified): counted as the graph's anonymous owners when published.
  void stage_kept(std::size_t count) noexcept;
  /// New parameters of `r` (already applied; `undo` restores the previous ones), whose version is
  /// `staged` on the graph of `box`.
  void stage_update(NodeRecord* r, Staged staged, Undo undo, Box* box) noexcept {
    Change e{Kind::update, r, nullptr, staged};
    e.undo = undo;
    e.box = box;
    push(e);
  }
  /// `r` is removed when published (nothing to undo). Returns false, staging nothing, when its
  /// removal is staged already (one entry per node: removing every node of a graph stays linear).
  bool stage_remove(NodeRecord* r) noexcept {
    if (r->removing) return false;
    r->removing = true;
    push({Kind::remove, r, nullptr, {}});
    return true;
  }
  /// The edge from -> to was added (`added`) or removed; discarding reverses it.
  void stage_edge(NodeRecord* from, NodeRecord* to, bool added) noexcept {
    push({added ? Kind::connect : Kind::disconnect, from, to, {}});
  }
  /// `r`'s name is about to change; `before` is its previous one (none: it had no name). Throws
  /// std::bad_alloc (nothing staged); `forget_last` takes it back if the change then fails.
  void stage_name(NodeRecord* r, std::optional<std::string> before);
  /// Drops the last entry without discarding it (its change did not happen).
  void forget_last() noexcept;
  /// Discards the last entry (an add whose follow-up failed).
  void discard_last(Hierarchy& h) noexcept;

  /// How many nodes the driver added for this ledger (its captured entries).
  std::size_t captured() const noexcept { return captured_; }
  /// Puts a capture's entries in the order of `graph_nodes` (the captured graph's own node list):
  /// a node the ledger has no entry for is another library's, staged as foreign with a record made
  /// in `h` and typed by `type_of`; a captured entry the list lacks (none can exist: a capturing
  /// graph refuses node destruction) is dropped and its version counted with the kept owners.
  /// Throws what `type_of` throws and std::bad_alloc, leaving the ledger as it was.
  void order_as(std::span<const CUgraphNode> graph_nodes, Hierarchy& h,
                FunctionRef<CUgraphNodeType(CUgraphNode)> type_of);
  /// Moves `other`'s entries (a capture's, whose graph `box` holds) to the end of this ledger, in order, and
  /// publishes its nodes into their box at once: an edit's view of the region it captured lists
  /// them while the edit is open, as it lists nothing else the edit added. They stay this
  /// ledger's: discarding it retires them (the region's graph, and their versions with it, go with
  /// the undo of the node that holds it). `other` is empty afterwards. Call
  /// `reserve(other.size())` first; never fails then. The caller holds `h`'s lock.
  void merge(Ledger& other, Box& box, Hierarchy& h) noexcept;

  /// Publishes every entry in order: records become their boxes' nodes, staged versions become
  /// current (and the versions they supersede are released), removals are applied. Never throws;
  /// a removal the driver refuses is reported through the error hook and leaves the node in place.
  /// The caller holds `h`'s lock and its publish lock, or `h` is not shared yet. Empty afterwards.
  void publish(Hierarchy& h) noexcept;
  /// Publishes a capture's ledger into `box`, the graph the capture became.
  void publish_into(Box& box, Hierarchy& h) noexcept;
  /// Discards every entry in reverse order. An undo the driver refuses keeps the references the
  /// graph may still use (a leak, never a use after free), is reported and marks `h` unusable.
  /// Empty afterwards.
  void discard(Hierarchy& h) noexcept;

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  /// Calls `f(record, version)` for every staged version, in staging order (an added, captured
  /// or updated node's: the last call for a record names its newest version).
  template <class F>
  void each_staged(F&& f) {
    for_each([&](Change& e) {
      if ((e.kind == Kind::add || e.kind == Kind::captured || e.kind == Kind::update) && e.staged.attachment)
        f(e.rec, e.staged.attachment);
    });
  }
  /// Memory for the previous parameters of updated nodes, kept until the ledger is published or
  /// discarded (the undo records point into it).
  Arena& arena() noexcept { return arena_; }
  /// Frees the entries' storage beyond room for `entries` (a pooled ledger keeps the rest).
  void trim(std::size_t entries) noexcept;

 private:
  enum class Kind : std::uint8_t { add, captured, foreign, merged, kept, update, remove, connect, disconnect, name };
  // Trivially copyable: the ledger grows by memcpy.
  struct Change {
    Kind kind;
    NodeRecord* rec = nullptr;
    NodeRecord* other = nullptr;  // edges: the target
    Staged staged{};
    Undo undo{};         // updates
    Box* box = nullptr;  // updates: the graph the version was staged on (boxes outlive their graphs);
                         // kept: the graph that keeps the owners
    std::size_t aux = 0;  // kept: the owner count; name: the index of the previous name
  };
  static_assert(std::is_trivially_copyable_v<Change>, "the ledger grows by memcpy");

  // Why chunks and not a std::vector: growing never copies the entries (a vector of this
  // non-trivial type copies them one by one, measured at 14 instructions per captured node), and
  // a pooled ledger keeps its chunks between change sets.
  static constexpr std::size_t kChunk = 256;
  // Why raw storage: value-initialising a chunk (make_unique<Change[]>) zeroes 18 KiB that every
  // push overwrites whole. A Change is an implicit-lifetime type, so the storage holds Changes
  // once written.
  struct FreeChunk {
    void operator()(Change* p) const noexcept { ::operator delete(static_cast<void*>(p)); }
  };
  using Chunk = std::unique_ptr<Change[], FreeChunk>;
  Change& at(std::size_t i) noexcept { return chunks_[i / kChunk][i % kChunk]; }
  void push(const Change& e) noexcept { at(size_++) = e; }  // room reserved
  template <class F>
  void for_each(F&& f) noexcept {
    for (std::size_t c = 0, left = size_; left; ++c) {
      const std::size_t n = std::min(left, kChunk);
      Change* chunk = chunks_[c].get();
      for (std::size_t i = 0; i < n; ++i) f(chunk[i]);
      left -= n;
    }
  }
  void grow(std::size_t entries);
  void publish_one(Hierarchy& h, const DriverTable& drv, Change& e) noexcept;
  // A capture's entry learns the graph the capture became: its record's box, or for kept
  // owners the graph that keeps them.
  static void place(Change& e, Box& box) noexcept {
    if (e.kind == Kind::captured || e.kind == Kind::foreign) e.rec->box = &box;
    if (e.kind == Kind::kept) e.box = &box;
  }
  void discard_one(Hierarchy& h, Change& e) noexcept;
  void clear() noexcept;

  std::vector<Chunk> chunks_;
  std::size_t size_ = 0;
  std::size_t captured_ = 0;  // captured entries
  // Names replaced by the name entries, with their previous value (none: the node had no name).
  std::vector<std::optional<std::string>> names_before_;
  Arena arena_;
};

}  // namespace tether::detail
