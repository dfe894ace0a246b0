// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "transaction.hpp"

#include "param.hpp"
#include "kinds/kernel.hpp"

namespace tether::detail {

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
  t->ledger_.trim(kKeptLog);
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
  ledger_.reserve(1);  // so that staging the operation cannot fail after the driver call
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
  ledger_.stage_add(rec, st);
  if (after) {
    try {
      after(*h_, rec);
    } catch (...) {
      ledger_.discard_last(*h_);
      throw;
    }
  }
  return rec;
}

void Transaction::update(NodeRecord* r, Owners&& owners, ApplyFn apply, Undo undo) {
  ReleaseIfUnused guard(owners);
  if (capturing_) [[unlikely]]
    throw_capturing();
  ledger_.reserve(1);
  Staged st = prepare(*h_->drv, r->box->graph, std::move(owners));
  try {
    apply();
  } catch (...) {
    detail::rollback(*h_->drv, st);
    throw;
  }
  ledger_.stage_update(r, st, undo, r->box);
}

namespace {

// The undo of a parameter set in an edit: the node's previous version's driver parameters.
CUresult restore_param(const DriverTable& drv, CUgraphNode node, const void* saved) noexcept {
  void* args[kMaxParamArgs];
  const CUDA_KERNEL_NODE_PARAMS p = static_cast<const ParamUse*>(saved)->params(args);
  return raw<Entry::cuGraphKernelNodeSetParams>(drv, node, &p);
}

// The undo of a launch parameter's set whose Launch sets attributes: the previous version's
// driver parameters and the node's previous values of those attributes.
struct LaunchSetSaved {
  const ParamUse* prev;
  unsigned nattrs;
  LaunchAttr attrs[7];
};
CUresult restore_launch_set(const DriverTable& drv, CUgraphNode node, const void* saved) noexcept {
  const auto* s = static_cast<const LaunchSetSaved*>(saved);
  CUresult r = restore_param(drv, node, s->prev);
  for (unsigned i = 0; i < s->nattrs && r == CUDA_SUCCESS; ++i)
    r = raw<Entry::cuGraphKernelNodeSetAttribute>(drv, node, s->attrs[i].id, &s->attrs[i].value);
  return r;
}

}  // namespace

std::size_t Transaction::set_param(const ParamValue& v, bool count_only) {
  if (capturing_) [[unlikely]]
    throw_capturing();
  // The newest version of each node: staged by this transaction, else published.
  std::unordered_map<const NodeRecord*, const NodeAttachment*> staged;
  ledger_.each_staged([&](NodeRecord* r, NodeAttachment* a) { staged[r] = a; });
  struct Site {
    NodeRecord* rec;
    const ParamUse* use;
  };
  std::vector<Site> sites;
  auto note = [&](NodeRecord* r, const NodeAttachment* a) {
    if (r->removing) return;
    if (const ParamUse* u = param_use_of(a); u && u->uses(v.state)) sites.push_back({r, u});
  };
  for (Box& b : h_->boxes)
    if (!b.retired.load(std::memory_order_relaxed))
      for (NodeRecord* r = b.first; r; r = r->next) {
        auto it = staged.find(r);
        note(r, it == staged.end() ? r->current : it->second);
        if (it != staged.end()) staged.erase(it);
      }
  for (const auto& [r, a] : staged)  // nodes this transaction added, not in their graph's list yet
    if (r->pending) note(const_cast<NodeRecord*>(r), a);
  if (count_only || sites.empty()) return sites.size();
  const DriverTable& drv = *h_->drv;
  // A launch parameter's Launch may set attributes: the graph's nodes take them (as an
  // Edit::update's Launch), and their undo needs the values they replace.
  const Launch* attributed = nullptr;
  if (v.state->launch()) {
    check_launch_set(v, "Edit::set", false);
    for (const Site& x : sites) raise_for_launch_set(drv, *x.use, v, "Edit::set");
    if (static_cast<const Launch*>(v.bytes)->attributes()) attributed = static_cast<const Launch*>(v.bytes);
  }
  std::size_t done = 0;
  try {
    for (; done < sites.size(); ++done) {
      Owners next;
      const ParamUse& made = next.adopt(sites[done].use->with(v));
      NodeRecord* r = sites[done].rec;
      Undo undo{&restore_param, sites[done].use};
      if (attributed) {
        auto* saved = static_cast<LaunchSetSaved*>(arena().allocate(sizeof(LaunchSetSaved), alignof(LaunchSetSaved)));
        saved->prev = sites[done].use;
        saved->nattrs = static_cast<unsigned>(launch_attrs(*attributed, saved->attrs));
        for (unsigned i = 0; i < saved->nattrs; ++i)
          call<Entry::cuGraphKernelNodeGetAttribute>(drv, "reading a kernel node's attribute before a launch parameter's set",
                                                     r->node, saved->attrs[i].id, &saved->attrs[i].value);
        undo = Undo{&restore_launch_set, saved};
      }
      auto refused = [&](Entry e, CUresult res, std::string_view detail) {
        throw_call_error(drv, e, res,
                         fmt::format("setting parameter '{}' on kernel node {} of the {} bound to it in a graph "
                                     "(kernel {}{}); no node changed",
                                     v.state->name(), done + 1, sites.size(), made.core->kernel, detail));
      };
      update(r, std::move(next), [&] {
        void* args[kMaxParamArgs];
        const CUDA_KERNEL_NODE_PARAMS p = made.params(args);
        if (CUresult res = raw<Entry::cuGraphKernelNodeSetParams>(drv, r->node, &p); res != CUDA_SUCCESS)
          refused(Entry::cuGraphKernelNodeSetParams, res, "");
        if (!attributed) return;
        CUlaunchAttributeID failed{};
        if (CUresult res = set_launch_attrs(drv, r->node, *attributed, &failed); res != CUDA_SUCCESS) {
          // The contract of an update's apply: the node is as it was when it throws.
          if (CUresult back = undo.restore(drv, r->node, undo.saved); back != CUDA_SUCCESS)
            report_failure(drv, Entry::cuGraphKernelNodeSetAttribute, back,
                           "putting a kernel node back after a refused attribute of a launch parameter's set");
          refused(Entry::cuGraphKernelNodeSetAttribute, res, ", setting " + launch_attr_name(failed));
        }
      }, undo);
    }
  } catch (...) {
    // All or nothing: the sets staged before the refused one are undone now.
    for (std::size_t i = 0; i < done; ++i) ledger_.discard_last(*h_);
    throw;
  }
  return sites.size();
}

void Transaction::remove(NodeRecord* r) {
  if (capturing_) [[unlikely]]
    throw_capturing();
  ledger_.reserve(1);
  ledger_.stage_remove(r);
}

void Transaction::connect(NodeRecord* from, NodeRecord* to) { change_edge(from, to, true); }
void Transaction::disconnect(NodeRecord* from, NodeRecord* to) { change_edge(from, to, false); }

void note_edge_removed(const DriverTable& drv, NodeRecord& from) noexcept {
  std::size_t n = 0;
  CUresult r = raw<Entry::cuGraphNodeGetDependencies>(drv, from.node, static_cast<CUgraphNode*>(nullptr),
                                                     static_cast<CUgraphEdgeData*>(nullptr), &n);
  if (r != CUDA_SUCCESS)
    report_error("counting a node's dependencies after an edge from it was removed",
                 std::string(result_name(r)) + " (assumed it has some: plan_update refuses updates from this graph)");
  // Unknown: assume the worst, the plan then refuses rather than accepts.
  if (r != CUDA_SUCCESS || n > 0) from.box->edge_removed = true;
}

void note_incoming_edges(const DriverTable& drv, NodeRecord& to) noexcept {
  if (to.box->edge_removed) return;
  std::size_t n = 0;
  auto* no_data = static_cast<CUgraphEdgeData*>(nullptr);
  CUresult r = raw<Entry::cuGraphNodeGetDependencies>(drv, to.node, static_cast<CUgraphNode*>(nullptr), no_data, &n);
  std::vector<CUgraphNode> deps;
  if (r == CUDA_SUCCESS && n > 0) {
    try {
      deps.resize(n);
      r = raw<Entry::cuGraphNodeGetDependencies>(drv, to.node, deps.data(), no_data, &n);
    } catch (...) {
      r = CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  for (std::size_t i = 0; r == CUDA_SUCCESS && i < n && !to.box->edge_removed; ++i) {
    std::size_t m = 0;
    r = raw<Entry::cuGraphNodeGetDependencies>(drv, deps[i], static_cast<CUgraphNode*>(nullptr), no_data, &m);
    if (r == CUDA_SUCCESS && m > 0) to.box->edge_removed = true;
  }
  if (r != CUDA_SUCCESS) {
    report_error("counting the dependencies of a removed node's dependencies",
                 std::string(result_name(r)) + " (assumed some: plan_update refuses updates from this graph)");
    to.box->edge_removed = true;
  }
}

void Transaction::change_edge(NodeRecord* from, NodeRecord* to, bool add) {
  if (capturing_) [[unlikely]]
    throw_capturing();
  if (from->box != to->box)
    throw UsageError(fmt::format("cannot {} nodes of different graphs", add ? "connect" : "disconnect"));
  ledger_.reserve(1);
  const DriverTable& drv = *h_->drv;
  CUgraph g = from->box->graph;
  const auto* no_data = static_cast<const CUgraphEdgeData*>(nullptr);
  if (add) {
    call<Entry::cuGraphAddDependencies>(drv, "adding an edge", g, &from->node, &to->node, no_data, std::size_t{1});
  } else {
    // Counted first, so that a failure leaves the graph unchanged (fact U1 needs it after removal).
    std::size_t deps = 0;
    call<Entry::cuGraphNodeGetDependencies>(drv, "counting a node's dependencies", from->node,
                                            static_cast<CUgraphNode*>(nullptr), static_cast<CUgraphEdgeData*>(nullptr),
                                            &deps);
    call<Entry::cuGraphRemoveDependencies>(drv, "removing an edge", g, &from->node, &to->node, no_data, std::size_t{1});
    if (deps > 0) from->box->edge_removed = true;
  }
  ledger_.stage_edge(from, to, add);
}

void Transaction::name(NodeRecord* r, std::string name, std::string_view what) {
  for (char c : name)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      throw UsageError(fmt::format("{}: the name \"{}\" has a control character (code {}); use printable characters",
                                   what, name, static_cast<int>(static_cast<unsigned char>(c))));
  auto it = h_->names.find(r);
  ledger_.reserve(1);
  ledger_.stage_name(r, it == h_->names.end() ? std::nullopt : std::optional<std::string>(it->second));
  try {
    if (name.empty())
      h_->names.erase(r);
    else
      h_->names[r] = std::move(name);
  } catch (...) {
    ledger_.forget_last();
    throw;
  }
}

void Transaction::commit() noexcept {
  if (done_) return;
  {
    std::unique_lock publishing(h_->publish_mu);
    ledger_.publish(*h_);
  }
  finish();
}

void Transaction::rollback() noexcept {
  if (done_) return;
  {
    std::unique_lock publishing(h_->publish_mu);
    ledger_.discard(*h_);
  }
  finish();
}

}  // namespace tether::detail
