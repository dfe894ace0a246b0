// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "edit.hpp"

namespace tether {

namespace detail {

std::span<NodeRecord* const> no_deps() noexcept { return {}; }

void throw_finished_edit() { throw UsageError("this edit was already committed or rolled back"); }

void throw_empty_argument(std::string_view what, std::size_t index, std::string_view type) {
  throw UsageError(fmt::format("{}: argument {} ({}) is moved from or empty: the kernel would receive a null "
                               "pointer; pass nullptr or tether::unowned(p) for a pointer tether must not keep",
                               what, index, type));
}

void throw_empty_endpoint(std::string_view what, const char* end, std::string_view kind) {
  throw UsageError(fmt::format("{}: the {} ({}) is moved from or empty", what, end, kind));
}

void throw_stale_inserter(std::string_view what) {
  throw UsageError(fmt::format("{}: this insertion point belongs to an edit that has ended (committed or rolled back); "
                               "make insertion points from an open edit and use them right away",
                               what));
}

void throw_size_error(std::string_view what, SizeError e, std::size_t a, std::size_t b) {
  switch (e) {
    case SizeError::memset_unknown:
      throw UsageError(fmt::format("{}: the destination's size is unknown; pass tether::unowned(p, count)", what));
    case SizeError::memset_multiple:
      throw UsageError(fmt::format("{}: the destination has {} bytes, which is not a multiple of the {}-byte value (a "
                                   "memset node sets whole {}-byte elements; use a value of the element's width)",
                                   what, a, b, b));
    case SizeError::memcpy_overflow:
      throw UsageError(fmt::format("{}: copying {} source elements of {} bytes overflows", what, a, b));
    case SizeError::memcpy_unknown:
      throw UsageError(fmt::format("{}: nothing to copy: the source's element count is unknown; pass a count", what));
    case SizeError::memcpy_source:
      throw UsageError(fmt::format("{}: the source has {} bytes, fewer than the {} bytes copied", what, a, b));
    case SizeError::memcpy_destination:
      throw UsageError(fmt::format("{}: the destination has {} bytes, fewer than the {} bytes copied", what, a, b));
    case SizeError::alloc_empty:
      throw UsageError(fmt::format("{}: allocating 0 elements: a graph allocation cannot be empty", what));
    case SizeError::alloc_overflow:
      throw UsageError(fmt::format("{}: allocating {} elements of {} bytes: the size overflows", what, a, b));
    case SizeError::shared_memory:
      throw UsageError(fmt::format("{}: {} bytes of dynamic shared memory do not fit the driver's 32-bit field", what, a));
  }
  throw UsageError(std::string(what));
}

void throw_zero_dimension(std::string_view what, const char* which, unsigned x, unsigned y, unsigned z) {
  throw UsageError(fmt::format("{}: the {} dimensions ({}, {}, {}) contain a 0; every dimension is at least 1", what,
                               which, x, y, z));
}

void check_not_body(const Box& box, const char* what) {
  for (const Box* b = &box; b; b = b->parent)
    if (b->kind == BoxKind::body)
      throw UsageError(fmt::format("{}: memory allocation nodes cannot be added to a conditional body (CUDA forbids "
                                   "them there)",
                                   what));
}

CUcontext context_handle(const Context& c) noexcept { return c.get(); }

Box* box_of(Transaction& tx, const BoxRef& ref, const char* what) {
  // Compared by ownership before anything is read: the edit keeps only its own hierarchy alive.
  if (ref.box && same_hierarchy(ref.hierarchy, tx.shared())) {
    if (ref.box->retired.load(std::memory_order_acquire))
      throw UsageError(fmt::format("{}: the graph view is invalid (CUDA destroyed the embedded graph or body)", what));
    return ref.box;
  }
  if (ref.valid())
    throw UsageError(fmt::format("{}: the graph view belongs to another graph than the one being edited", what));
  throw UsageError(fmt::format("{}: the graph view is invalid (empty, its graph is gone, or CUDA destroyed the embedded "
                               "graph or body)",
                               what));
}

std::vector<NodeRecord*> neighbours(Transaction& tx, NodeRecord* r, bool dependencies) {
  const DriverTable& drv = *tx.hierarchy().drv;
  auto query = [&](CUgraphNode* out, std::size_t* n) {
    if (dependencies)
      call<Entry::cuGraphNodeGetDependencies>(drv, "reading a node's dependencies", r->node, out,
                                              static_cast<CUgraphEdgeData*>(nullptr), n);
    else
      call<Entry::cuGraphNodeGetDependentNodes>(drv, "reading a node's dependents", r->node, out,
                                                static_cast<CUgraphEdgeData*>(nullptr), n);
  };
  std::size_t n = 0;
  query(nullptr, &n);
  std::vector<CUgraphNode> handles(n);
  if (n) query(handles.data(), &n);
  handles.resize(n);
  std::vector<NodeRecord*> out;
  for (CUgraphNode h : handles)
    for (NodeRecord* x = r->box->first; x; x = x->next)
      if (x->node == h) {
        out.push_back(x);
        break;
      }
  if (out.size() != handles.size())
    throw UsageError("replace: the node has edges to nodes added in this edit; commit them first");
  return out;
}

namespace {
std::size_t count_nodes(const BoxRef& ref, const char* what) {
  check_calls_allowed(what);
  std::shared_ptr<Hierarchy> h = ref.lock();
  if (!h)
    throw UsageError(fmt::format("{}: the graph view is invalid (empty, its graph is gone, or CUDA destroyed the graph)",
                                 what));
  // Inside this thread's own edit the lock is already held (and would deadlock).
  if (h->mu.held_here()) return ref.box->node_count;
  HierarchyGuard lock(h->mu, what);
  return ref.box->node_count;
}
CUgraph graph_of(const BoxRef& ref) {
  std::shared_ptr<Hierarchy> h = ref.lock();
  if (!h)
    throw UsageError("GraphRef::get: the graph view is invalid (empty, its graph is gone, or CUDA destroyed the graph it "
                     "showed)");
  return ref.box->graph;
}
}  // namespace

}  // namespace detail

struct Graph::Origin {
  std::weak_ptr<detail::Hierarchy> source;
  detail::RecordPairs pairs;                 // source record -> copy record, in copy order
  std::vector<std::uint32_t> generations;    // of each copy record at clone time
  // Built on the first find(): cloning pays no hashing per node.
  std::once_flag once;
  std::unordered_map<const detail::NodeRecord*, std::size_t> index;
};

template <bool InBody>
BasicEdit<InBody> BasicGraphRef<InBody>::edit() const {
  detail::check_calls_allowed("GraphRef::edit");
  std::shared_ptr<detail::Hierarchy> h = ref_.lock();
  if (!h)
    throw UsageError("GraphRef::edit: the graph view is invalid (empty, its graph is gone, or CUDA destroyed the embedded "
                     "graph or body)");
  return BasicEdit<InBody>(std::move(h), ref_.box, *ctx_);
}
template <bool InBody>
std::size_t BasicGraphRef<InBody>::node_count() const {
  return detail::count_nodes(ref_, "GraphRef::node_count");
}
template <bool InBody>
CUgraph BasicGraphRef<InBody>::get() const {
  return detail::graph_of(ref_);
}
template class BasicGraphRef<false>;
template class BasicGraphRef<true>;

Graph::Graph(const Context& ctx) : ctx_(ctx) {
  detail::check_calls_allowed("Graph::Graph");
  h_ = detail::Hierarchy::create(detail::table_of(ctx.runtime()));
}

Edit Graph::edit() const {
  const auto& h = live("Graph::edit");
  return Edit(h, &h->root(), ctx());
}

Graph Graph::clone() const {
  detail::check_calls_allowed("Graph::clone");
  const auto& live_h = live("Graph::clone");
  auto origin = std::make_shared<Origin>();
  std::shared_ptr<detail::Hierarchy> h = detail::clone_hierarchy(*live_h, nullptr, &origin->pairs);
  origin->source = h_;
  origin->generations.reserve(origin->pairs.size());
  for (auto& [src, copy] : origin->pairs) origin->generations.push_back(copy->generation.load());
  Graph g(ctx(), std::move(h));
  g.origin_ = std::move(origin);
  return g;
}

detail::NodeRef Graph::find_ref(const detail::NodeRef& source) const {
  live("Graph::find");
  if (!origin_) throw UsageError("find: this graph is not a clone");
  std::shared_ptr<detail::Hierarchy> src = origin_->source.lock();
  if (!src || !detail::same_hierarchy(source.hierarchy, src)) {
    if (!source.valid()) throw UsageError("find: the source node is no longer valid");
    throw UsageError("find: the node is not from this clone's source");
  }
  if (!source.current()) throw UsageError("find: the source node is no longer valid");
  Origin& o = const_cast<Origin&>(*origin_);
  std::call_once(o.once, [&] {
    o.index.reserve(o.pairs.size());
    for (std::size_t i = 0; i < o.pairs.size(); ++i) o.index.emplace(o.pairs[i].first, i);
  });
  auto it = o.index.find(source.record);
  if (it == o.index.end()) throw UsageError("find: the node was added to the source after the clone was made");
  return detail::NodeRef{h_, o.pairs[it->second].second, o.generations[it->second]};
}

GraphRef Graph::ref() const {
  const auto& h = live("Graph::ref");
  return detail::GraphAccess::graph_ref({h, &h->root()}, ctx());
}
std::size_t Graph::node_count() const {
  const auto& h = live("Graph::node_count");
  return detail::count_nodes({h, &h->root()}, "Graph::node_count");
}
CUgraph Graph::get() const noexcept { return h_ ? h_->root().graph : nullptr; }
std::size_t Graph::anonymous_owners() const {
  const auto& h = live("Graph::anonymous_owners");
  detail::HierarchyGuard lock(h->mu, "Graph::anonymous_owners");
  return h->root().anonymous_owners;
}

}  // namespace tether
