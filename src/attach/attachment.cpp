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

void report_release(const char* what, CUresult r) noexcept {
  try {
    report_error(what, fmt::format("cuGraphReleaseUserObject failed with {}; the graph keeps the reference until it "
                                   "is destroyed",
                                   result_name(r)));
  } catch (...) {
    report_error(what, "cuGraphReleaseUserObject failed");
  }
}
}  // namespace

void release_on_reclaimer(Owners&& owners) noexcept {
  if (owners.empty()) return;
  try {
    Reclaimer::instance().ensure_started();
  } catch (...) {
    report_error("handing unused owners to the reclaimer", "the reclaimer thread cannot start: released on this thread");
    owners.reset();
    return;
  }
  Reclaimer::instance().push(OwnersAccess::release(owners));
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
    Reclaimer::instance().push(a);
    throw_call_error(drv, Entry::cuUserObjectCreate, r, "creating the user object of a node attachment");
  }
  return a;
}

void NodeAttachment::on_destroy(void* self) {
  // Runs inside a driver call or on a driver thread: queue only (no lock, no allocation, no throw).
  auto* a = static_cast<NodeAttachment*>(self);
  if (auto hook = attachment_destroy_hook.load(std::memory_order_relaxed)) hook(a);
  Reclaimer::instance().push(a);
}

void NodeAttachment::reclaim() noexcept {
  if (attached_) g_attachments_reclaimed.fetch_add(1, std::memory_order_relaxed);
  destroy_groups(this);  // `this` heads the bundle
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
      report_error("releasing the user object of an attachment whose retain failed",
                   std::string(result_name(rr)) + " (the attachment is leaked)");
    throw_call_error(drv, Entry::cuGraphRetainUserObject, r, "moving a node attachment's reference onto its graph");
  }
  return {graph, a};
}

void rollback(const DriverTable& drv, Staged& staged) noexcept {
  if (!staged) return;
  CUresult r = raw<Entry::cuGraphReleaseUserObject>(drv, staged.graph, staged.attachment->user_object(), 1u);
  if (r != CUDA_SUCCESS) report_release("rolling back a staged node attachment", r);
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
  if (r != CUDA_SUCCESS) report_release(what, r);
}

ExecAccumulator* ExecAccumulator::create(const DriverTable& drv) {
  Reclaimer::instance().ensure_started();
  auto* a = new ExecAccumulator();
  g_live_accumulators.fetch_add(1, std::memory_order_relaxed);
  CUresult r = raw<Entry::cuUserObjectCreate>(drv, &a->uo_, static_cast<void*>(a), &ExecAccumulator::on_destroy, 1u,
                                              static_cast<unsigned>(CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
  if (r != CUDA_SUCCESS) {
    Reclaimer::instance().push(a);
    throw_call_error(drv, Entry::cuUserObjectCreate, r, "creating an executable's owner accumulator");
  }
  return a;
}

ExecAccumulator::~ExecAccumulator() { g_live_accumulators.fetch_sub(1, std::memory_order_relaxed); }
void ExecAccumulator::on_destroy(void* self) { Reclaimer::instance().push(static_cast<ExecAccumulator*>(self)); }
void ExecAccumulator::reclaim() noexcept { delete this; }
std::uint64_t ExecAccumulator::live() noexcept { return g_live_accumulators.load(std::memory_order_relaxed); }

}  // namespace tether::detail
