// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "hierarchy.hpp"

namespace tether::detail {

// ----------------------------------------------------------------------------- boxes

void Box::link(NodeRecord* r) noexcept {
  r->box = this;
  r->prev = last;
  r->next = nullptr;
  (last ? last->next : first) = r;
  last = r;
  ++node_count;
}

void Box::link_sub(Box* c) noexcept {
  c->prev_sub = nullptr;
  c->next_sub = first_sub;
  if (first_sub) first_sub->prev_sub = c;
  first_sub = c;
}

void Box::unlink_sub(Box* c) noexcept {
  (c->prev_sub ? c->prev_sub->next_sub : first_sub) = c->next_sub;
  if (c->next_sub) c->next_sub->prev_sub = c->prev_sub;
  c->prev_sub = c->next_sub = nullptr;
}

void Box::unlink(NodeRecord* r) noexcept {
  (r->prev ? r->prev->next : first) = r->next;
  (r->next ? r->next->prev : last) = r->prev;
  r->prev = r->next = nullptr;
  --node_count;
}

// ----------------------------------------------------------------------------- registry

Registry& Registry::instance() noexcept {
  static Registry* r = new Registry();  // never destroyed: hierarchies may die during exit
  return *r;
}
void Registry::add(CUgraph g, Box* b) {
  std::lock_guard lock(mu_);
  map_[g] = b;
}
void Registry::remove(CUgraph g) noexcept {
  std::lock_guard lock(mu_);
  map_.erase(g);
}
Box* Registry::find(CUgraph g) const noexcept {
  std::lock_guard lock(mu_);
  auto it = map_.find(g);
  return it == map_.end() ? nullptr : it->second;
}
std::size_t Registry::size() const noexcept {
  std::lock_guard lock(mu_);
  return map_.size();
}

// ----------------------------------------------------------------------------- lock

namespace {
// Which lock each blocked thread waits for: the wait-for graph the cycle check follows. Never
// destroyed: hierarchies may be locked during exit.
std::mutex& wait_mu() {
  static std::mutex* m = new std::mutex;
  return *m;
}
std::unordered_map<std::thread::id, const HierarchyLock*>& waiting() {
  static auto* w = new std::unordered_map<std::thread::id, const HierarchyLock*>;
  return *w;
}
std::atomic<std::size_t> g_live_hierarchies{0};
}  // namespace

bool HierarchyLock::try_lock() noexcept {
  bool expected = false;
  if (!locked_.compare_exchange_strong(expected, true, std::memory_order_acquire, std::memory_order_relaxed))
    return false;
  holder_.store(std::this_thread::get_id(), std::memory_order_release);
  return true;
}

void HierarchyLock::unlock() noexcept {
  holder_.store(std::thread::id(), std::memory_order_release);
  locked_.store(false, std::memory_order_release);
  locked_.notify_all();
}

void HierarchyLock::lock(std::string_view what) {
  if (held_here())
    throw UsageError(fmt::format("{}: this thread already has an edit of this graph open (or holds its lock); "
                                 "commit or drop that edit first, or edit the child graph or body through it with "
                                 "e.in(view)",
                                 what));
  if (try_lock()) return;
  const std::thread::id self = std::this_thread::get_id();
  {
    // Why the check is sound under wait_mu: a thread registers what it waits for under it, and a
    // lock's holder is set before its new holder deregisters, so a chain that leads back to this
    // thread is a real cycle.
    std::lock_guard g(wait_mu());
    const HierarchyLock* cur = this;
    for (int hops = 0; hops < 256; ++hops) {
      std::thread::id h = cur->holder();
      if (h == std::thread::id()) break;
      if (h == self)
        throw UsageError(fmt::format(
            "{}: waiting for this graph would deadlock: the thread that holds it (an open edit, or a call in progress) "
            "is itself waiting for a graph whose edit this thread has open; commit or drop this thread's edit first",
            what));
      auto it = waiting().find(h);
      if (it == waiting().end()) break;
      cur = it->second;
    }
    waiting()[self] = this;
  }
  struct Deregister {
    std::thread::id self;
    ~Deregister() {
      std::lock_guard g(wait_mu());
      waiting().erase(self);
    }
  } deregister{self};
  while (!try_lock()) locked_.wait(true, std::memory_order_acquire);
}

// ----------------------------------------------------------------------------- hierarchy

Hierarchy::Hierarchy() noexcept { g_live_hierarchies.fetch_add(1, std::memory_order_relaxed); }
std::size_t Hierarchy::live() noexcept { return g_live_hierarchies.load(std::memory_order_relaxed); }

std::shared_ptr<Hierarchy> Hierarchy::adopt(const DriverTable& drv, CUgraph root) {
  std::shared_ptr<Hierarchy> h;
  try {
    h = std::make_shared<Hierarchy>();
  } catch (...) {
    raw<Entry::cuGraphDestroy>(drv, root);
    throw;
  }
  h->drv = &drv;
  Box& b = h->boxes.emplace_back();
  b.hierarchy = h.get();
  b.graph = root;
  b.kind = BoxKind::root;
  h->root_box = &b;
  Registry::instance().add(root, &b);  // on failure ~Hierarchy destroys the root
  return h;
}

namespace {
// TETHER_REPORT_LEAKS=1: graphs still alive at exit are reported (a host callable that captures
// its own graph's node, view or executable keeps that graph alive through its own owners).
void report_leaks_at_exit() {
  const char* v = std::getenv("TETHER_REPORT_LEAKS");
  if (!v || !*v || std::string_view(v) == "0") return;
  if (std::size_t n = Hierarchy::live())
    std::fprintf(stderr,
                 "tether: %zu graph hierarch%s still alive at exit (a graph, clone, view or node handle not "
                 "dropped, or a host callable that captures its own graph's node, view or executable)\n",
                 n, n == 1 ? "y" : "ies");
}
}  // namespace

std::shared_ptr<Hierarchy> Hierarchy::for_capture(const DriverTable& drv) {
  auto h = std::make_shared<Hierarchy>();
  h->drv = &drv;
  Box& b = h->boxes.emplace_back();
  b.hierarchy = h.get();
  b.kind = BoxKind::root;
  h->root_box = &b;
  return h;
}

void Hierarchy::adopt_root(CUgraph root) {
  root_box->graph = root;
  Registry::instance().add(root, root_box);  // on failure ~Hierarchy destroys the root
}

std::shared_ptr<Hierarchy> Hierarchy::create(const DriverTable& drv) {
  static const bool registered = [] { return std::atexit(&report_leaks_at_exit) == 0; }();
  (void)registered;
  CUgraph g = nullptr;
  call<Entry::cuGraphCreate>(drv, "creating a graph", &g, 0u);
  return adopt(drv, g);
}

std::mutex& graph_destroy_mutex() noexcept {
  static std::mutex mu;
  return mu;
}

// A graph's destruction the driver refused where the graph died (a Job of kind destroy_graph).
struct GraphDestroyJob final : Job {
  GraphDestroyJob(const DriverTable* t, CUgraph g) noexcept : Job(Kind::destroy_graph), drv(t), root(g) {}
  const DriverTable* drv;
  CUgraph root;
};

void run_graph_destroy_job(Job& j) noexcept {
  auto& job = static_cast<GraphDestroyJob&>(j);
  {
    std::lock_guard serial(graph_destroy_mutex());
    CUresult r = raw<Entry::cuGraphDestroy>(*job.drv, job.root);
    if (r != CUDA_SUCCESS) report_failure(*job.drv, Entry::cuGraphDestroy, r, "destroying a graph on the reclaimer");
  }
  delete &job;
}

Hierarchy::~Hierarchy() {
  g_live_hierarchies.fetch_sub(1, std::memory_order_relaxed);
  for (Box& b : boxes)
    if (!b.retired.load() && b.graph) Registry::instance().remove(b.graph);
  if (boxes.empty() || !boxes.front().graph) return;
  CUgraph root = boxes.front().graph;
  const DriverTable* d = drv;
  // Destroying the root destroys every embedded graph and body with it; the references CUDA drops
  // run user-object destructors here, which only queue attachments for the reclaimer.
  CUresult r = CUDA_ERROR_NOT_PERMITTED;
  if (!cuda_forbidden_here()) {
    std::lock_guard serial(graph_destroy_mutex());
    r = raw<Entry::cuGraphDestroy>(*d, root);
  }
  if (r == CUDA_ERROR_NOT_PERMITTED)
    defer_new<GraphDestroyJob>("deferring a graph's destruction to the reclaimer (it is leaked)", d, root);
  else if (r != CUDA_SUCCESS)
    report_failure(*d, Entry::cuGraphDestroy, r, "destroying a graph (its owners are leaked)");
}

Box& Hierarchy::add_box(CUgraph g, Box* parent, NodeRecord* owner, BoxKind kind) {
  Box& b = boxes.emplace_back();
  b.hierarchy = this;
  b.graph = g;
  b.parent = parent;
  b.owner = owner;
  b.kind = kind;
  try {
    Registry::instance().add(g, &b);
  } catch (...) {
    boxes.pop_back();
    throw;
  }
  try {
    index_owned(b);
  } catch (...) {
    Registry::instance().remove(g);
    boxes.pop_back();
    throw;
  }
  return b;
}

void Hierarchy::index_owned(Box& b) {
  auto [it, inserted] = owned.try_emplace(b.owner, &b);
  if (!inserted) {
    Box* tail = it->second;
    while (tail->next_owned) tail = tail->next_owned;
    tail->next_owned = &b;  // keeps the bodies in order (then before else, case i before i + 1)
  }
  if (b.parent) b.parent->link_sub(&b);
}

NodeRecord* Hierarchy::allocate_record() {
  if (NodeRecord* r = free_records) {
    free_records = r->next;
    r->next = nullptr;
    return r;
  }
  return records.make(publish_mu);
}

void PublishLock::lock_shared() noexcept {
  for (;;) {
    // seq_cst on both sides: the reader's increment and the writer's flag are ordered against each
    // other's load, so at least one of them sees the other (no reader inside that a writer missed).
    readers_.fetch_add(1, std::memory_order_seq_cst);
    if (!writing_.load(std::memory_order_seq_cst)) [[likely]]
      return;
    unlock_shared();
    writing_.wait(true, std::memory_order_acquire);
  }
}

void PublishLock::lock() {
  writer_.lock();
  writing_.store(true, std::memory_order_seq_cst);
  for (std::uint32_t r; (r = readers_.load(std::memory_order_seq_cst)) != 0;) readers_.wait(r, std::memory_order_seq_cst);
}

void RecordStore::grow(PublishLock& publishing) {
  const std::uint32_t next = size_ == 0 ? 16 : std::min<std::uint32_t>(size_ * 4, 256);
  chunks_.reserve(chunks_.size() + 1);  // so that nothing below can fail once the chunk exists
  ranges_.reserve(ranges_.size() + 1);
  auto chunk = std::make_unique<NodeRecord[]>(next);
  const Range range{reinterpret_cast<std::uintptr_t>(chunk.get()), std::uintptr_t{next} * sizeof(NodeRecord),
                    first_ + used_};
  {
    std::lock_guard lock(publishing);
    ranges_.insert(after(range.begin), range);
  }
  chunk_ = chunk.get();
  chunks_.push_back(std::move(chunk));
  first_ = range.first;
  used_ = 0;
  size_ = next;
}

std::vector<RecordStore::Range>::const_iterator RecordStore::after(std::uintptr_t a) const noexcept {
  return std::upper_bound(ranges_.begin(), ranges_.end(), a, [](std::uintptr_t x, const Range& g) { return x < g.begin; });
}

std::uint32_t RecordStore::search(std::uintptr_t a, std::uint32_t& hint) const noexcept {
  auto it = after(a);
  --it;  // the record is in some chunk: the last that begins at or below it
  hint = static_cast<std::uint32_t>(it - ranges_.begin());
  return it->first + static_cast<std::uint32_t>((a - it->begin) / sizeof(NodeRecord));
}

// Why 48: graph_bench counts metadata bytes per node against a 96-byte budget (docs/performance.md).
static_assert(sizeof(NodeRecord) <= 48, "a node record grew beyond 48 bytes");

void Hierarchy::free_record(NodeRecord* r) noexcept {
  // The record may be recycled for a node that owns other graphs: no stale index entry.
  if (owns_graphs(r->type)) owned.erase(r);
  if (!untracked.empty()) untracked.erase(r);
  if (!names.empty()) names.erase(r);
  r->node = nullptr;
  r->box = nullptr;
  r->current = nullptr;
  r->prev = nullptr;
  r->alive = false;
  r->pending = false;
  r->removing = false;
  r->next = free_records;
  free_records = r;
}

void Hierarchy::publish(Box& box, NodeRecord* r) noexcept {
  r->alive = true;
  box.link(r);
  if (r->type == CU_GRAPH_NODE_TYPE_CONDITIONAL && &box == root_box) root_conditionals.fetch_add(1);
}

void Hierarchy::retire_record(NodeRecord* r) noexcept {
  if (!r->alive) return;
  if (r->type == CU_GRAPH_NODE_TYPE_CONDITIONAL && r->box == root_box) root_conditionals.fetch_sub(1);
  r->box->unlink(r);
  r->generation.fetch_add(1, std::memory_order_acq_rel);  // every handle to it is now invalid
  free_record(r);
}

namespace {
// Calls f(box) for `b` and every live box below it, children before their parents.
template <class F>
void visit_below(Box& b, F& f) {
  for (Box* c = b.first_sub; c;) {
    Box* next = c->next_sub;  // f may unlink c
    visit_below(*c, f);
    c = next;
  }
  f(b);
}
// Calls f(box) for every live box owned by `owner` and every box nested below those (also below
// nodes not published yet), children before their parents. Linear in the boxes visited (the
// `owned` index and the parent links), not in the size of the hierarchy.
template <class F>
void visit_owned(Hierarchy& h, const NodeRecord* owner, F& f) {
  auto it = h.owned.find(owner);
  if (it == h.owned.end()) return;
  for (Box* b = it->second; b;) {
    Box* next = b->next_owned;
    if (!b->retired.load(std::memory_order_relaxed)) visit_below(*b, f);
    b = next;
  }
}
}  // namespace

void Hierarchy::retire_owned_by(NodeRecord* owner) noexcept {
  if (!owns_graphs(owner->type)) return;
  auto retire = [&](Box& b) {
    Registry::instance().remove(b.graph);  // first: CUDA may hand the value out again (invariant 8)
    while (NodeRecord* r = b.first) {
      // CUDA released these nodes' references with the graph; only the metadata goes.
      if (owns_graphs(r->type)) owned.erase(r);
      b.unlink(r);
      r->generation.fetch_add(1, std::memory_order_acq_rel);
      free_record(r);
    }
    b.graph = nullptr;
    b.retired.store(true, std::memory_order_release);
    if (b.parent) b.parent->unlink_sub(&b);
    ++retired_boxes;
  };
  visit_owned(*this, owner, retire);
  owned.erase(owner);  // the record may be recycled for a node that owns other graphs
}

void Hierarchy::check_usable() const {
  if (unusable) throw UsageError(std::string("this graph is unusable: ") + unusable);
}

void Hierarchy::unregister_owned_by(const NodeRecord* owner) noexcept {
  if (!owns_graphs(owner->type)) return;
  auto f = [](Box& b) { Registry::instance().remove(b.graph); };
  visit_owned(*this, owner, f);
}

void Hierarchy::reregister_owned_by(const NodeRecord* owner) {
  if (!owns_graphs(owner->type)) return;
  auto f = [](Box& b) { Registry::instance().add(b.graph, &b); };
  visit_owned(*this, owner, f);
}

// ----------------------------------------------------------------------------- rekey

namespace {
bool below(const Box* b, const Box* top) {
  for (; b; b = b->parent)
    if (b == top) return true;
  return false;
}
}  // namespace

void rekey(Hierarchy& dst, Box& copy_root_box, const Box& src,
           std::unordered_map<const NodeRecord*, NodeRecord*>* map, RecordPairs* pairs) {
  const DriverTable& drv = *dst.drv;
  // Only nodes that own embedded graphs need looking up here; hashing every node would cost more
  // than the driver's own lookup (docs/performance.md).
  std::unordered_map<const NodeRecord*, NodeRecord*> owners;
  std::vector<std::pair<const Box*, Box*>> boxmap{{&src, &copy_root_box}};
  const std::size_t boxes_before = dst.boxes.size();
  std::vector<CUgraph> registered;
  try {
    for (const Box& sb : src.hierarchy->boxes) {
      if (sb.retired.load() || !below(&sb, &src)) continue;
      Box* db = nullptr;
      if (&sb == &src) {
        db = &copy_root_box;
      } else {
        if (sb.kind == BoxKind::body)
          throw UsageError("a graph with conditional nodes cannot be copied (CUDA refuses to clone it)");
        NodeRecord* owner_copy = owners.at(sb.owner);
        Box* parent_copy = nullptr;
        for (auto& [s, d] : boxmap)
          if (s == sb.parent) parent_copy = d;
        CUgraph g = nullptr;
        call<Entry::cuGraphChildGraphNodeGetGraph>(drv, "finding an embedded graph in a copy", owner_copy->node, &g);
        // Not registered yet: the copy is published only once every lookup succeeded.
        db = &dst.boxes.emplace_back();
        db->hierarchy = &dst;
        db->graph = g;
        db->parent = parent_copy;
        db->owner = owner_copy;
        db->kind = BoxKind::child;
        db->captured = sb.captured;
        boxmap.emplace_back(&sb, db);
      }
      for (NodeRecord* r = sb.first; r; r = r->next) {
        CUgraphNode n = nullptr;
        call<Entry::cuGraphNodeFindInClone>(drv, "finding a node in a copied graph", &n, r->node, db->graph);
        NodeRecord* c = dst.allocate_record();
        c->node = n;
        c->type = r->type;
        dst.publish(*db, c);
        c->current = r->current;
        if (r->type == CU_GRAPH_NODE_TYPE_GRAPH || r->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) owners[r] = c;
        if (!src.hierarchy->untracked.empty() && src.hierarchy->untracked.count(r)) dst.untracked.insert(c);
        if (!src.hierarchy->names.empty())
          if (auto it = src.hierarchy->names.find(r); it != src.hierarchy->names.end()) dst.names[c] = it->second;
        if (map) (*map)[r] = c;
        if (pairs) pairs->emplace_back(r, c);
      }
    }
    for (std::size_t i = boxes_before; i < dst.boxes.size(); ++i) {
      dst.index_owned(dst.boxes[i]);
      Registry::instance().add(dst.boxes[i].graph, &dst.boxes[i]);
      registered.push_back(dst.boxes[i].graph);
    }
  } catch (...) {
    for (CUgraph g : registered) Registry::instance().remove(g);
    for (std::size_t i = boxes_before; i < dst.boxes.size(); ++i) dst.owned.erase(dst.boxes[i].owner);
    copy_root_box.first_sub = nullptr;  // it was empty: its only subs were made here
    // Every record made here is in the copy's root box (empty before: a fresh clone or embedded
    // copy) or in a box added here.
    auto drop_records = [&](Box& b) {
      while (NodeRecord* c = b.first) {
        b.unlink(c);
        dst.free_record(c);
      }
    };
    drop_records(copy_root_box);
    for (std::size_t i = boxes_before; i < dst.boxes.size(); ++i) drop_records(dst.boxes[i]);
    while (dst.boxes.size() > boxes_before) dst.boxes.pop_back();
    if (map) map->clear();
    if (pairs) pairs->clear();
    throw;
  }
}

std::shared_ptr<Hierarchy> clone_hierarchy(Hierarchy& src, std::unordered_map<const NodeRecord*, NodeRecord*>* map,
                                           RecordPairs* pairs) {
  HierarchyGuard lock(src.mu, "Graph::clone");
  src.check_usable();
  CUgraph c = nullptr;
  call<Entry::cuGraphClone>(*src.drv, "cloning a graph", &c, src.root().graph);
  std::shared_ptr<Hierarchy> h = Hierarchy::adopt(*src.drv, c);  // destroys c if anything below throws
  if (pairs) pairs->reserve(src.root().node_count);
  rekey(*h, h->root(), src.root(), map, pairs);
  h->root().anonymous_owners = src.root().anonymous_owners;  // cuGraphClone copied their references too
  return h;
}

std::string describe(const Hierarchy& h) {
  std::string s;
  for (const Box& b : h.boxes) {
    if (b.retired.load()) continue;  // the graveyard is not metadata: nothing refers to its nodes
    s += fmt::format("box {} kind={} nodes={}\n", static_cast<const void*>(&b), static_cast<int>(b.kind), b.node_count);
    b.for_each([&](NodeRecord* r) {
      s += fmt::format("  node {} type={} attachment={}\n", static_cast<const void*>(r->node), static_cast<int>(r->type),
                       static_cast<const void*>(r->current));
    });
  }
  return s;
}

}  // namespace tether::detail
