// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "transaction.hpp"

namespace tether::detail {

namespace {

void mark_unusable(Hierarchy& h, const char* why, std::string_view detail) noexcept {
  if (!h.unusable) h.unusable = why;
  report_error(why, detail);
}

}  // namespace

Transaction::Transaction(std::shared_ptr<Hierarchy> h) { open(std::move(h)); }

void Transaction::open(std::shared_ptr<Hierarchy> h) {
  h->mu.lock("Graph::edit");
  if (h->unusable) {
    h->mu.unlock();
    h->check_usable();
  }
  h_ = std::move(h);
  thread_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  capturing_ = false;
  done_ = false;
}

namespace {
// Why never destroyed: an insertion point may outlive static destruction's order (and reads a
// pooled transaction's serial); the transactions in it are never freed either.
std::mutex& pool_mutex() noexcept {
  static std::mutex* m = new std::mutex;
  return *m;
}
std::vector<Transaction*>& pool() noexcept {
  static std::vector<Transaction*>* v = new std::vector<Transaction*>;
  return *v;
}
// A log that grew past this many entries is not kept in the pool (one large edit would otherwise
// keep its memory for the life of the process).
constexpr std::size_t kKeptLog = 4096;
}  // namespace

Transaction* Transaction::lease(std::shared_ptr<Hierarchy> h) {
  Transaction* t = nullptr;
  {
    std::lock_guard lock(pool_mutex());
    if (!pool().empty()) {
      t = pool().back();
      pool().pop_back();
    }
  }
  if (!t) t = new Transaction();
  try {
    t->open(std::move(h));
  } catch (...) {
    give_back(t);
    throw;
  }
  return t;
}

void Transaction::give_back(Transaction* t) noexcept {
  if (!t->done_) t->rollback();
  t->h_.reset();  // outside the pool's lock: the last reference may destroy the graph
  if (t->ops_.capacity() > kKeptLog) std::vector<Op>().swap(t->ops_);
  std::lock_guard lock(pool_mutex());
  try {
    pool().push_back(t);
  } catch (...) {
    // Out of memory: the transaction is not reused, and not freed either (an insertion point may
    // still read its serial).
  }
}

void Transaction::throw_wrong_thread(std::string_view what) {
  throw UsageError(fmt::format("{}: this edit was opened on another thread; an edit belongs to the thread that "
                               "opened it (dropping it elsewhere rolls it back)",
                               what));
}

void Transaction::throw_capturing() {
  throw UsageError("this edit is capturing (Edit::capture): its creators and updates cannot be used until the capture "
                   "function returns; issue the work on the captured stream instead");
}

void Transaction::finish() noexcept {
  ops_.clear();
  names_before_.clear();
  arena_.clear();
  done_ = true;
  serial_.fetch_add(1, std::memory_order_release);  // every insertion point of this edit is stale now
  h_->mu.unlock();  // from any thread: an edit dropped elsewhere rolls back and unlocks there
}

Transaction::~Transaction() {
  if (!done_) rollback();
}

NodeRecord* Transaction::check_node(const NodeRef& n, const char* what) const {
  // Compared by ownership first: the record may be read only while its hierarchy lives, and
  // this transaction keeps only its own alive.
  if (!n.record || !same_hierarchy(n.hierarchy, h_)) {
    if (n.valid())
      throw UsageError(fmt::format("{} belongs to another graph than the one being edited", what));
    throw UsageError(fmt::format("{} is no longer valid: it was removed, its edit was rolled back, or its graph was "
                                 "destroyed",
                                 what));
  }
  NodeRecord* r = n.record;
  if (r->generation.load(std::memory_order_acquire) != n.generation)
    throw UsageError(fmt::format("{} is no longer valid: it was removed, its edit was rolled back, or CUDA destroyed "
                                 "the graph it belonged to",
                                 what));
  if (!r->alive && !r->pending) throw UsageError(fmt::format("{} is not a node of this graph", what));
  return r;
}

NodeRecord* Transaction::add(Box& box, std::span<NodeRecord* const> deps, CUgraphNodeParams& params, Owners&& owners,
                             std::string_view what, AfterAdd after) {
  ReleaseIfUnused guard(owners);
  if (capturing_) [[unlikely]]
    throw_capturing();
  if (box.hierarchy != h_.get() || box.retired.load()) [[unlikely]]
    throw UsageError(fmt::format("cannot add {}: the graph view is invalid or belongs to another graph", what));
  // Most nodes have a few dependencies: keep them on the stack.
  CUgraphNode inline_deps[8];
  std::unique_ptr<CUgraphNode[]> heap_deps;
  CUgraphNode* d = inline_deps;
  if (deps.size() > std::size(inline_deps)) {
    heap_deps.reset(new CUgraphNode[deps.size()]);
    d = heap_deps.get();
  }
  for (std::size_t i = 0; i < deps.size(); ++i) {
    if (deps[i]->box != &box) [[unlikely]]
      throw UsageError(fmt::format("cannot add {}: a dependency is a node of another graph", what));
    d[i] = deps[i]->node;
  }
  reserve_one();  // so that logging the operation cannot fail after the driver call
  NodeRecord* rec = h_->allocate_record();
  Staged st;
  try {
    st = prepare(*h_->drv, box.graph, std::move(owners));
  } catch (...) {
    h_->free_record(rec);
    throw;
  }
  CUgraphNode node = nullptr;
  CUresult r = raw<Entry::cuGraphAddNode>(*h_->drv, &node, box.graph, d, static_cast<const CUgraphEdgeData*>(nullptr),
                                          deps.size(), &params);
  if (r != CUDA_SUCCESS) [[unlikely]] {
    detail::rollback(*h_->drv, st);
    h_->free_record(rec);
    throw_call_error(*h_->drv, Entry::cuGraphAddNode, r, fmt::format("adding {}", what));
  }
  rec->node = node;
  rec->type = params.type;
  rec->box = &box;
  rec->pending = true;
  ops_.push_back(Op{Kind::add, rec, nullptr, st, {}});
  if (after) {
    try {
      after(*h_, rec);
    } catch (...) {
      undo_one(ops_.back());
      ops_.pop_back();
      throw;
    }
  }
  return rec;
}

void Transaction::update(NodeRecord* r, Owners&& owners, ApplyFn apply, Undo undo) {
  ReleaseIfUnused guard(owners);
  if (capturing_) [[unlikely]]
    throw_capturing();
  reserve_one();
  Staged st = prepare(*h_->drv, r->box->graph, std::move(owners));
  try {
    apply();
  } catch (...) {
    detail::rollback(*h_->drv, st);
    throw;
  }
  ops_.push_back(Op{Kind::update, r, nullptr, st, undo, r->box});  // cannot throw: room was made above
}

void Transaction::reserve_one() {
  // Geometric growth: reserving size + 1 each time would copy the log on every operation.
  if (ops_.size() == ops_.capacity()) ops_.reserve(ops_.capacity() * 2 + 16);
}

void Transaction::remove(NodeRecord* r) {
  if (capturing_) [[unlikely]]
    throw_capturing();
  // A flag, not a search of the log: removing every node of a large graph in one edit stays linear.
  if (r->removing) return;
  reserve_one();
  ops_.push_back(Op{Kind::remove, r, nullptr, {}, {}});
  r->removing = true;
}

void Transaction::connect(NodeRecord* from, NodeRecord* to) { change_edge(from, to, true); }
void Transaction::disconnect(NodeRecord* from, NodeRecord* to) { change_edge(from, to, false); }

void Transaction::change_edge(NodeRecord* from, NodeRecord* to, bool add) {
  if (capturing_) [[unlikely]]
    throw_capturing();
  if (from->box != to->box)
    throw UsageError(fmt::format("cannot {} nodes of different graphs", add ? "connect" : "disconnect"));
  reserve_one();
  const DriverTable& drv = *h_->drv;
  CUgraph g = from->box->graph;
  const auto* no_data = static_cast<const CUgraphEdgeData*>(nullptr);
  if (add)
    call<Entry::cuGraphAddDependencies>(drv, "adding an edge", g, &from->node, &to->node, no_data, std::size_t{1});
  else
    call<Entry::cuGraphRemoveDependencies>(drv, "removing an edge", g, &from->node, &to->node, no_data, std::size_t{1});
  ops_.push_back(Op{add ? Kind::connect : Kind::disconnect, from, to, {}, {}});
}

void Transaction::remove_now(NodeRecord* r) noexcept {
  if (!r->alive) return;
  const DriverTable& drv = *h_->drv;
  h_->unregister_owned_by(r);  // before CUDA destroys (and may reuse) the embedded graphs' handles
  CUresult res = raw<Entry::cuGraphDestroyNode>(drv, r->node);
  if (res != CUDA_SUCCESS) {
    try {
      h_->reregister_owned_by(r);
      report_error("removing a node when committing an edit",
                   fmt::format("cuGraphDestroyNode failed with {}; the node stays in the graph with its owners",
                               result_name(res)));
    } catch (...) {
      mark_unusable(*h_, "a node removal failed and its graph views could not be restored", result_name(res));
    }
    return;
  }
  h_->retire_owned_by(r);
  CUgraph g = r->box->graph;
  NodeAttachment* current = r->current;
  h_->retire_record(r);  // metadata first (invariant 3) ...
  release_from(drv, g, current, "releasing the owners of a removed node");  // ... then the reference
}

void Transaction::name(NodeRecord* r, std::string name, std::string_view what) {
  for (char c : name)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      throw UsageError(fmt::format("{}: the name \"{}\" has a control character (code {}); use printable characters",
                                   what, name, static_cast<int>(static_cast<unsigned char>(c))));
  auto it = h_->names.find(r);
  names_before_.emplace_back(r, it == h_->names.end() ? std::nullopt : std::optional<std::string>(it->second));
  try {
    if (name.empty())
      h_->names.erase(r);
    else
      h_->names[r] = std::move(name);
  } catch (...) {
    names_before_.pop_back();
    throw;
  }
}

void Transaction::commit() noexcept {
  if (done_) return;
  const DriverTable& drv = *h_->drv;
  std::unique_lock publishing(h_->publish_mu);
  for (Op& op : ops_) {
    switch (op.kind) {
      case Kind::add:
        op.rec->pending = false;
        if (op.rec->box->retired.load(std::memory_order_acquire)) {
          // Added to a child graph or body whose node a removal earlier in this commit destroyed:
          // CUDA destroyed the new node, and released its reference, with that graph. Its handles
          // must not stay valid (a driver call on the node would use a destroyed graph).
          op.rec->generation.fetch_add(1, std::memory_order_acq_rel);
          h_->free_record(op.rec);
          op.staged = {};
          break;
        }
        h_->publish(*op.rec->box, op.rec);
        detail::commit(drv, op.rec->current, op.staged);
        break;
      case Kind::update:
        if (op.rec->alive)
          detail::commit(drv, op.rec->current, op.staged);
        else if (op.staged && !op.box->retired.load(std::memory_order_acquire))
          // Removed earlier in this commit from a graph that lives on: the staged version was never
          // published, so nothing else would release it (if the graph itself went, CUDA did). Why
          // the box and not a lookup of the graph's handle: the driver reuses graph handles, so a
          // graph made meanwhile (on any thread) may carry the destroyed one's.
          detail::rollback(drv, op.staged);
        break;
      case Kind::remove:
        op.rec->removing = false;
        remove_now(op.rec);
        break;
      case Kind::connect:
      case Kind::disconnect: break;
    }
  }
  publishing.unlock();
  finish();
}

void Transaction::undo_one(Op& op) noexcept {
  const DriverTable& drv = *h_->drv;
  switch (op.kind) {
    case Kind::add: {
      NodeRecord* r = op.rec;
      h_->unregister_owned_by(r);
      CUresult res = raw<Entry::cuGraphDestroyNode>(drv, r->node);
      if (res != CUDA_SUCCESS) {
        // The node stays in the graph and may use its owners: keep the staged reference.
        mark_unusable(*h_, "undoing an added node failed (the node is still in the graph)", result_name(res));
        h_->retire_owned_by(r);
      } else {
        h_->retire_owned_by(r);
        detail::rollback(drv, op.staged);
      }
      r->generation.fetch_add(1, std::memory_order_acq_rel);
      h_->free_record(r);
      break;
    }
    case Kind::update: {
      CUresult res = op.undo.restore(drv, op.rec->node, op.undo.saved);
      if (res != CUDA_SUCCESS)
        // The node may still use the new owners: keep the staged reference (a leak, never a use after free).
        mark_unusable(*h_, "restoring a node's previous parameters failed", result_name(res));
      else
        detail::rollback(drv, op.staged);
      break;
    }
    case Kind::remove: op.rec->removing = false; break;
    case Kind::connect:
    case Kind::disconnect: {
      CUgraph g = op.rec->box->graph;
      CUresult res =
          op.kind == Kind::connect
              ? raw<Entry::cuGraphRemoveDependencies>(drv, g, &op.rec->node, &op.other->node,
                                                      static_cast<const CUgraphEdgeData*>(nullptr), std::size_t{1})
              : raw<Entry::cuGraphAddDependencies>(drv, g, &op.rec->node, &op.other->node,
                                                   static_cast<const CUgraphEdgeData*>(nullptr), std::size_t{1});
      if (res != CUDA_SUCCESS) mark_unusable(*h_, "restoring an edge failed", result_name(res));
      break;
    }
  }
}

void Transaction::rollback() noexcept {
  if (done_) return;
  {
    std::unique_lock publishing(h_->publish_mu);
    // Names first: an added node's record is freed (and its name dropped) by its undo below.
    for (auto it = names_before_.rbegin(); it != names_before_.rend(); ++it) {
      if (!it->second) {
        h_->names.erase(it->first);
        continue;
      }
      try {
        h_->names[it->first] = std::move(*it->second);
      } catch (...) {
        h_->names.erase(it->first);  // out of memory: the node loses its name, nothing else
      }
    }
    for (auto it = ops_.rbegin(); it != ops_.rend(); ++it) undo_one(*it);
  }
  finish();
}

}  // namespace tether::detail
