// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Node attachments (docs/design/attachments.md). One immutable attachment
// per parameter version of a node (detail::NodeAttachment, owners.hpp: the first group of the
// version's owner bundle), owned by its own CUDA user object whose single reference is moved onto
// the graph; CUDA copies that reference into clones, embedded copies and executables and holds it
// for in-flight launches. The user-object destructor only queues the attachment for the reclaimer.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "../driver/table.hpp"
#include "node_attachment.hpp"
#include "owners.hpp"
#include "reclaimer.hpp"

namespace tether::detail {

/// Hands `owners` to the reclaimer (they are released there, like every other owner): defers them
/// as one job of kind `owners`. Allocates nothing and never throws; only if the reclaimer thread
/// cannot be started are they released here.
void defer(Owners&& owners) noexcept;

/// The one guard of owners on their way to an attachment: whatever is still in the guarded bundle
/// when the guard goes is deferred to the reclaimer (defer(Owners&&)), never released on the
/// caller's thread. Either it guards a caller's bundle (`ReleaseIfUnused guard(owners);` at the
/// top of an operation that may fail before the owners reach an attachment), or, default-
/// constructed, its own (`owners`: a node descriptor's). Neither copyable nor movable: it points at
/// the bundle it guards.
class ReleaseIfUnused {
 public:
  /// Guards its own bundle, `owners`.
  ReleaseIfUnused() noexcept : guarded_(&owners) {}
  /// Guards `guarded` (which must outlive the guard).
  explicit ReleaseIfUnused(Owners& guarded) noexcept : guarded_(&guarded) {}
  ~ReleaseIfUnused() {
    if (!guarded_->empty()) defer(std::move(*guarded_));
  }
  ReleaseIfUnused(const ReleaseIfUnused&) = delete;
  ReleaseIfUnused& operator=(const ReleaseIfUnused&) = delete;

  /// The guard's own bundle (empty, and unused, when it guards a caller's).
  Owners owners;

 private:
  Owners* guarded_;
};

/// Test hook: called (if set) inside the user-object destructor of every attachment, on whatever
/// thread the driver runs it, before the attachment is queued. Must not block, lock or allocate.
inline std::atomic<void (*)(NodeAttachment*)> attachment_destroy_hook{nullptr};

/// A reference to an attachment staged on a graph by prepare() and not yet published.
struct Staged {
  CUgraph graph = nullptr;
  NodeAttachment* attachment = nullptr;
  explicit operator bool() const noexcept { return attachment != nullptr; }
};

/// Prepare (the fallible part, done before the driver mutation): creates the attachment and its
/// user object and moves the reference onto `graph` (cuGraphRetainUserObject, MOVE). For an empty
/// bundle it returns a Staged without attachment (false, nothing to roll back) that still names
/// `graph`, so that commit can release the previous version. On failure
/// nothing is left behind: a user object whose retain failed is released (never deleted directly),
/// so its attachment reaches the reclaimer through the ordinary path. Throws DriverError.
Staged prepare(const DriverTable& drv, CUgraph graph, Owners&& owners);

/// Rollback of a prepare whose driver mutation failed or was undone: releases the staged reference
/// (cuGraphReleaseUserObject). Never throws; a failing release is reported through the error hook
/// and leaves the reference on the graph (released when the graph is destroyed).
void rollback(const DriverTable& drv, Staged& staged) noexcept;

/// Commit: publishes `staged` into `slot` (the metadata, invariant 3: before any release) and then
/// releases the graph's reference to the previous version. Cannot fail and does not allocate
/// (invariant 4); a failing release is reported through the error hook.
void commit(const DriverTable& drv, NodeAttachment*& slot, Staged& staged) noexcept;

/// Releases the graph's reference to `attachment` (a removed node's current version).
void release_from(const DriverTable& drv, CUgraph graph, NodeAttachment* attachment, const char* what) noexcept;

/// Owner accumulator of an executable graph (docs/design/attachments.md): CUDA cannot retain a user
/// object on a CUgraphExec, so it is retained on the source graph just before instantiate / whole
/// update (CUDA then propagates it into the executable) and released from the source right after,
/// on every path. Owners of per-node executable updates are added to it.
class ExecAccumulator final : public Job {
 public:
  /// Creates the accumulator and its user object (refcount 1, the caller's).
  static ExecAccumulator* create(const DriverTable& drv);
  CUuserObject user_object() const noexcept { return uo_; }
  /// Deletes it (what the reclaimer runs for a job of kind `accumulator`).
  void reclaim() noexcept;
  /// Owners kept until the executable (and every launch of it) is gone. Serialised by the
  /// executable's lock.
  Owners& owners() noexcept { return owners_; }
  static std::uint64_t live() noexcept;

 private:
  ExecAccumulator() noexcept : Job(Kind::accumulator) {}
  ~ExecAccumulator();
  static void on_destroy(void* self);
  Owners owners_;
  CUuserObject uo_ = nullptr;
};

/// Runs `propagate()` (cuGraphInstantiate or cuGraphExecUpdate) with `acc`'s reference moved onto
/// `source` for the duration (invariant 11), then releases it from the source on every path
/// (invariant 12) — after `publish()` on success (invariant 14). If the retain fails the caller's
/// reference is still owned by the caller. Throws what `propagate` throws, or DriverError.
template <class Propagate, class Publish>
void with_accumulator_on(const DriverTable& drv, CUgraph source, ExecAccumulator* acc, Propagate&& propagate,
                         Publish&& publish) {
  // Retain a second reference on the graph (flags 0), so that the caller's own reference keeps the
  // accumulator alive whatever happens below.
  call<Entry::cuGraphRetainUserObject>(drv, "retaining an executable's owner accumulator on its source graph",
                                       source, acc->user_object(), 1u, 0u);
  struct ReleaseFromSource {
    const DriverTable& drv;
    CUgraph source;
    ExecAccumulator* acc;
    ~ReleaseFromSource() {
      CUresult r = raw<Entry::cuGraphReleaseUserObject>(drv, source, acc->user_object(), 1u);
      if (r != CUDA_SUCCESS)
        report_failure(drv, Entry::cuGraphReleaseUserObject, r,
                       "releasing an executable's owner accumulator from its source graph (the reference stays "
                       "until the graph is destroyed)");
    }
  } guard{drv, source, acc};
  propagate();
  publish();
}

}  // namespace tether::detail
