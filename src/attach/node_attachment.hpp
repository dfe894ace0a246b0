// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The layout behind `tether::Owners` (owners.hpp shows only a pointer to it): one group of owners,
// in one allocation with its values, and — when it is the first group of a bundle handed to a
// node version — that version's attachment (docs/design/attachments.md). Private to tether.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "owners.hpp"
#include "pool.hpp"
#include "reclaimer.hpp"

namespace tether::detail {

struct DriverTable;
struct ParamUse;

/// One group of owners of a bundle, and — heading a version's bundle — the attachment: the user
/// object whose single reference the graph holds points here, and the reclaimer releases the whole
/// bundle from here (a Job of kind `owners`). Why one type for both: a version then costs one
/// allocation (the owners with the attachment's fields in front), not a bundle plus an
/// attachment. Immutable after publication (invariant 1): nothing but its creator and the
/// reclaimer touches it. The values follow the fields, at `offset_` bytes from the group.
class NodeAttachment final : public Job {
 public:
  /// Makes the first group of `owners` (which must not be empty) the attachment of a new version:
  /// creates its user object (cuUserObjectCreate, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC, refcount 1,
  /// owned by the caller). Allocates nothing. On failure the owners go to the reclaimer and
  /// DriverError is thrown.
  static NodeAttachment* create(const DriverTable& drv, Owners&& owners);

  /// The user object that owns this attachment (null for a group that is not an attachment).
  CUuserObject user_object() const noexcept { return uo_; }
  /// Number of owners held by the whole bundle this group heads.
  std::size_t owner_count() const noexcept { return groups_owner_count(this); }
  /// Appends a label per owner of the whole bundle this group heads, the most recently added
  /// group first (`inspect`): the owner's own label where its type gives one (`tether_owner_label`,
  /// found by argument-dependent lookup: "SharedBuffer<float>[1024]", "kernel scale"), otherwise
  /// its type as the compiler spells it. Allocates; the bundle is immutable, so any thread may call it.
  void describe(std::vector<std::string>& out) const {
    for (const NodeAttachment* b = this; b; b = b->next_group_) b->ops_->describe(b->values(), out);
  }
  /// Releases this group and the rest of its bundle (what the reclaimer runs).
  void reclaim() noexcept;

  /// Attachments alive in the process (created and not yet reclaimed).
  static std::uint64_t live() noexcept;

 private:
  friend void* group_new(const GroupOps*, NodeAttachment*&);
  friend void group_abandon(NodeAttachment*) noexcept;
  friend NodeAttachment* group_link(NodeAttachment*, NodeAttachment*) noexcept;
  friend NodeAttachment* groups_join(NodeAttachment*, NodeAttachment*) noexcept;
  friend std::size_t groups_owner_count(const NodeAttachment*) noexcept;
  friend void groups_destroy(NodeAttachment*) noexcept;
  friend const ParamUse* param_use_of(const NodeAttachment*) noexcept;
  friend bool param_use_only(const NodeAttachment*) noexcept;
  friend void groups_measure(const NodeAttachment*, MemoryTally&);
  friend void groups_scan(const NodeAttachment*, OwnerScan&);
  NodeAttachment(const GroupOps* ops, std::uint16_t offset, bool overaligned) noexcept
      : Job(Kind::owners), overaligned_(overaligned), offset_(offset), ops_(ops) {}
  ~NodeAttachment() = default;
  static void on_destroy(void* self);  // CUhostFn signature; only queues (invariant 9)
  void* values() const noexcept {
    return const_cast<char*>(reinterpret_cast<const char*>(this)) + offset_;
  }
  /// Destroys this group only (its values, then its storage).
  void destroy_group() noexcept;

  // Why this order: the small fields fill the tail of Job (its link and kind), so a group's
  // header stays 40 bytes, as when it had a vtable.
  bool attached_ = false;     // heads a version (counted by live())
  bool overaligned_ = false;  // storage from the general allocator's aligned new
  std::uint16_t offset_ = 0;  // where the values start
  const GroupOps* ops_;
  NodeAttachment* next_group_ = nullptr;  // the rest of the bundle
  CUuserObject uo_ = nullptr;
};

}  // namespace tether::detail
