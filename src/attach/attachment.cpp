// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "attachment.hpp"

namespace tether::detail {

namespace {
// Created and reclaimed counted apart, on their own cache lines: the builder's thread and the
// reclaimer then never write the same line (live = created - reclaimed).
alignas(64) std::atomic<std::uint64_t> g_attachments_created{0};
alignas(64) std::atomic<std::uint64_t> g_attachments_reclaimed{0};
std::atomic<std::uint64_t> g_live_accumulators{0};

void report_release(const DriverTable& drv, const char* what, CUresult r) noexcept {
  // The graph keeps the reference until it is destroyed: nothing is lost but the early release.
  report_failure(drv, Entry::cuGraphReleaseUserObject, r, what);
}
}  // namespace

// ------------------------------------------------------------------------------ owner groups

void* group_new(const GroupOps* ops, NodeAttachment*& group) {
  // The values follow the fields, aligned; groups of up to 16-byte alignment come from the pool.
  const std::size_t align = ops->align;
  const std::size_t offset = (sizeof(NodeAttachment) + align - 1) & ~(align - 1);  // align: a power of two
  const std::size_t total = offset + ops->bytes;
  const bool over = align > 16;
  void* storage = over ? ::operator new(total, std::align_val_t(align)) : group_allocate(total);
  group = ::new (storage) NodeAttachment(ops, static_cast<std::uint16_t>(offset), over);
  return static_cast<char*>(storage) + offset;
}

void NodeAttachment::destroy_group() noexcept {
  ops_->destroy(values());
  group_abandon(this);
}

void group_abandon(NodeAttachment* g) noexcept {
  // Sized free (the pool needs the size class back): the values' size is in the ops table.
  const std::size_t total = g->offset_ + g->ops_->bytes;
  const bool over = g->overaligned_;
  const std::size_t align = g->ops_->align;
  g->~NodeAttachment();
  if (over)
    ::operator delete(static_cast<void*>(g), total, std::align_val_t(align));
  else
    group_free(g, total);
}

NodeAttachment* group_link(NodeAttachment* group, NodeAttachment* rest) noexcept {
  group->next_group_ = rest;
  return group;
}

NodeAttachment* groups_join(NodeAttachment* more, NodeAttachment* head) noexcept {
  NodeAttachment* tail = more;
  while (tail->next_group_) tail = tail->next_group_;
  tail->next_group_ = head;
  return more;
}

std::size_t groups_owner_count(const NodeAttachment* head) noexcept {
  std::size_t n = 0;
  for (const NodeAttachment* b = head; b; b = b->next_group_) n += b->ops_->count;
  return n;
}

void groups_measure(const NodeAttachment* head, MemoryTally& t) {
  for (const NodeAttachment* b = head; b; b = b->next_group_) b->ops_->measure(b->values(), t);
}

void groups_scan(const NodeAttachment* head, OwnerScan& s) {
  for (const NodeAttachment* b = head; b; b = b->next_group_) b->ops_->scan(b->values(), s);
}

OwnedMemory groups_memory(const NodeAttachment* head) {
  MemoryTally t;
  groups_measure(head, t);
  return t.value();
}

void MemoryTally::add(std::uintptr_t base, std::size_t bytes, bool pinned) {
  if (!base || !seen_.insert(base).second) return;
  (pinned ? pinned_bytes : device_bytes) += bytes;
  ++allocations;
}

void groups_destroy(NodeAttachment* head) noexcept {
  while (head) {
    NodeAttachment* next = head->next_group_;
    head->destroy_group();
    head = next;
  }
}

void defer(Owners&& owners) noexcept {
  if (owners.empty()) return;
  try {
    Reclaimer::instance().ensure_started();
  } catch (...) {
    report_error("handing unused owners to the reclaimer", "the reclaimer thread cannot start: released on this thread");
    owners.reset();
    return;
  }
  defer(static_cast<Job*>(OwnersAccess::release(owners)));
}

NodeAttachment* NodeAttachment::create(const DriverTable& drv, Owners&& owners) {
  Reclaimer::instance().ensure_started();
  NodeAttachment* a = OwnersAccess::release(owners);
  a->attached_ = true;
  g_attachments_created.fetch_add(1, std::memory_order_relaxed);
  CUresult r = raw<Entry::cuUserObjectCreate>(drv, &a->uo_, static_cast<void*>(a), &NodeAttachment::on_destroy, 1u,
                                              static_cast<unsigned>(CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  if (r != CUDA_SUCCESS) {
    // No user object exists, so nothing else can reach the attachment; its owners still die on the
    // reclaimer like every other owner.
    defer(a);
    throw_call_error(drv, Entry::cuUserObjectCreate, r, "creating the user object of a node attachment");
  }
  return a;
}

void NodeAttachment::on_destroy(void* self) {
  // Runs inside a driver call or on a driver thread: queue only (no lock, no allocation, no throw).
  // No role scope here: it would be the per-version path's costliest part (callgrind: ~20
  // instructions a version), and nothing but the hook and defer runs here. The accumulator's
  // destructor (one per executable) sets it.
  auto* a = static_cast<NodeAttachment*>(self);
  if (auto hook = attachment_destroy_hook.load(std::memory_order_relaxed)) hook(a);
  defer(a);
}

void NodeAttachment::reclaim() noexcept {
  if (attached_) g_attachments_reclaimed.fetch_add(1, std::memory_order_relaxed);
  groups_destroy(this);  // `this` heads the bundle
}

std::uint64_t NodeAttachment::live() noexcept {
  // Reclaimed first: read the other way round, a release between the reads could underflow.
  std::uint64_t reclaimed = g_attachments_reclaimed.load(std::memory_order_acquire);
  return g_attachments_created.load(std::memory_order_acquire) - reclaimed;
}

Staged prepare(const DriverTable& drv, CUgraph graph, Owners&& owners) {
  // A version without owners has no attachment, but commit still needs the graph to release the
  // previous version from.
  if (owners.empty()) return {graph, nullptr};
  NodeAttachment* a = NodeAttachment::create(drv, std::move(owners));
  CUresult r = raw<Entry::cuGraphRetainUserObject>(drv, graph, a->user_object(), 1u,
                                                   static_cast<unsigned>(CU_GRAPH_USER_OBJECT_MOVE));
  if (r != CUDA_SUCCESS) {
    // The reference is still ours: release it, and the destructor queues the attachment.
    CUresult rr = raw<Entry::cuUserObjectRelease>(drv, a->user_object(), 1u);
    if (rr != CUDA_SUCCESS)
      report_failure(drv, Entry::cuUserObjectRelease, rr,
                     "releasing the user object of an attachment whose retain failed (the attachment is leaked)");
    throw_call_error(drv, Entry::cuGraphRetainUserObject, r, "moving a node attachment's reference onto its graph");
  }
  return {graph, a};
}

void rollback(const DriverTable& drv, Staged& staged) noexcept {
  if (!staged) return;
  CUresult r = raw<Entry::cuGraphReleaseUserObject>(drv, staged.graph, staged.attachment->user_object(), 1u);
  if (r != CUDA_SUCCESS) report_release(drv, "rolling back a staged node attachment", r);
  staged = {};
}

void commit(const DriverTable& drv, NodeAttachment*& slot, Staged& staged) noexcept {
  NodeAttachment* previous = slot;
  CUgraph graph = staged.graph;
  slot = staged.attachment;  // publish first (invariant 3)
  staged = {};
  if (previous) release_from(drv, graph, previous, "releasing the previous version of a node");
}

void release_from(const DriverTable& drv, CUgraph graph, NodeAttachment* attachment, const char* what) noexcept {
  if (!attachment) return;
  CUresult r = raw<Entry::cuGraphReleaseUserObject>(drv, graph, attachment->user_object(), 1u);
  if (r != CUDA_SUCCESS) report_release(drv, what, r);
}

ExecAccumulator* ExecAccumulator::create(const DriverTable& drv) {
  Reclaimer::instance().ensure_started();
  auto* a = new ExecAccumulator();
  g_live_accumulators.fetch_add(1, std::memory_order_relaxed);
  CUresult r = raw<Entry::cuUserObjectCreate>(drv, &a->uo_, static_cast<void*>(a), &ExecAccumulator::on_destroy, 1u,
                                              static_cast<unsigned>(CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  if (r != CUDA_SUCCESS) {
    defer(a);
    throw_call_error(drv, Entry::cuUserObjectCreate, r, "creating an executable's owner accumulator");
  }
  return a;
}

ExecAccumulator::~ExecAccumulator() { g_live_accumulators.fetch_sub(1, std::memory_order_relaxed); }
void ExecAccumulator::on_destroy(void* self) {
  ThreadRoleScope role(ThreadRole::user_object_destructor);
  defer(static_cast<ExecAccumulator*>(self));
}
void ExecAccumulator::reclaim() noexcept { delete this; }
std::uint64_t ExecAccumulator::live() noexcept { return g_live_accumulators.load(std::memory_order_relaxed); }

}  // namespace tether::detail

namespace tether::detail {
// The header of a group stays the size it had with a vtable: the one-allocation-per-version cost
// (docs/performance.md) is measured in bytes as well as instructions.
static_assert(sizeof(void*) != 8 || sizeof(NodeAttachment) == 40, "an owner group's header grew");
}  // namespace tether::detail
