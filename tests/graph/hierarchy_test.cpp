// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The graph hierarchy (src/graph/hierarchy, transaction, ops): invariants 5-8 and 10 (canonical
// boxes and the registry, box order, stable retired boxes, unregister before retire, the
// hierarchy's lock) and scenarios D (child graphs) and E (conditional bodies) of SCENARIOS.md.
// Runs on the driver TETHER_DRIVER selects; call counts and violations only on the simulator.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include "support/owner_probe.hpp"

namespace {

using namespace tether_test;
using tether::Owners;
using tether::detail::Registry;
namespace td = tether::detail;


// The index of `b` in `h.boxes` (-1 if it is not there).
long index_of(const Hierarchy& h, const Box* b) {
  for (std::size_t i = 0; i < h.boxes.size(); ++i)
    if (&h.boxes[i] == b) return static_cast<long>(i);
  return -1;
}

// Every box's parent precedes it (invariant 6).
bool parents_first(const Hierarchy& h) {
  for (std::size_t i = 0; i < h.boxes.size(); ++i) {
    const Box& b = h.boxes[i];
    if (i == 0) {
      if (b.parent || b.kind != td::BoxKind::root) return false;
      continue;
    }
    long p = index_of(h, b.parent);
    if (p < 0 || p >= static_cast<long>(i)) return false;
  }
  return true;
}

// Live (not retired) boxes of `h`.
std::vector<const Box*> live_boxes(const Hierarchy& h) {
  std::vector<const Box*> v;
  for (const Box& b : h.boxes)
    if (!b.retired.load()) v.push_back(&b);
  return v;
}

// A graph with one empty node holding a probe.
std::shared_ptr<Hierarchy> leaf(const AttachEnv& env, const std::shared_ptr<Tracker>& tr) {
  auto h = env.graph();
  edit(h, [&](Transaction& tx) { return td::add_empty(tx, h->root(), {}, Owners{Probe(tr)}); });
  return h;
}

// Embeds `source` into `box` of `h` with a probe on the child node; returns the node and the box.
std::pair<NodeRecord*, Box*> embed_into(const std::shared_ptr<Hierarchy>& h, Box& box, Hierarchy& source,
                                        Owners owners = {}) {
  Box* made = nullptr;
  NodeRecord* r =
      edit(h, [&](Transaction& tx) { return td::embed(tx, box, {}, source, std::move(owners), &made); });
  REQUIRE(made != nullptr);
  return {r, made};
}

// The boxes of `h` whose parent is `parent`.
std::vector<Box*> children_of(Hierarchy& h, const Box* parent) {
  std::vector<Box*> v;
  for (Box& b : h.boxes)
    if (b.parent == parent && !b.retired.load()) v.push_back(&b);
  return v;
}

// ------------------------------------------------------------------------------ invariant 5

TEST_CASE_FIXTURE(AttachEnv,
                  "invariant 5: every live tether graph has one canonical box and one registry entry") {
  auto tr = tracker();
  Registry& reg = Registry::instance();
  auto s = leaf(*this, tr);
  auto h = graph();
  CHECK(reg.size() == registry_before + 2);
  CHECK(reg.find(h->root().graph) == &h->root());
  CHECK(reg.find(s->root().graph) == &s->root());

  auto [child, made] = embed_into(h, h->root(), *s);
  CHECK(made->graph != s->root().graph);  // the embedded copy is a graph of its own
  CHECK(reg.find(made->graph) == made);
  CHECK(made->node_count == 1);
  for (NodeRecord* r = made->first; r; r = r->next) CHECK(reg.find(r->box->graph) == r->box);

  auto clone = td::clone_hierarchy(*h, nullptr);
  CHECK(reg.find(clone->root().graph) == &clone->root());

  std::vector<Box*> bodies;
  edit(h, [&](Transaction& tx) {
    CUgraphConditionalHandle c = td::make_conditional_handle(tx, h->root(), ctx.get(), 0, true);
    return td::add_conditional(tx, h->root(), {}, c, CU_GRAPH_COND_TYPE_IF, 2, ctx.get(), Owners{}, &bodies);
  });
  REQUIRE(bodies.size() == 2);
  for (Box* b : bodies) CHECK(reg.find(b->graph) == b);

  // One entry per live box, each naming its own box, and no raw graph twice.
  std::size_t boxes = 0;
  std::set<CUgraph> graphs;
  for (const Hierarchy* x : {s.get(), h.get(), clone.get()})
    for (const Box* b : live_boxes(*x)) {
      ++boxes;
      graphs.insert(b->graph);
      CHECK(reg.find(b->graph) == b);
    }
  CHECK(graphs.size() == boxes);
  CHECK(reg.size() == registry_before + boxes);

  h.reset();
  CHECK(reg.size() == registry_before + 3);  // s and the clone (root + embedded copy)
  clone.reset();
  s.reset();
  CHECK(reg.size() == registry_before);
  CHECK(tr->wait_destroyed(1));
}

// ------------------------------------------------------------------------------ invariant 6

TEST_CASE_FIXTURE(AttachEnv, "invariant 6: boxes stay parent-before-child through embed chains and clones") {
  auto tr = tracker();
  auto c = leaf(*this, tr);
  auto b = leaf(*this, tr);
  embed_into(b, b->root(), *c);
  auto a = leaf(*this, tr);
  embed_into(a, a->root(), *b);  // a: root, copy of b, copy of c (inside the copy of b)
  REQUIRE(a->boxes.size() == 3);
  CHECK(parents_first(*a));
  CHECK(a->boxes[2].parent == &a->boxes[1]);
  CHECK(a->boxes[1].parent == &a->boxes[0]);

  // A graph embedded later into the nested copy goes after it.
  auto d = leaf(*this, tr);
  auto [n, made] = embed_into(a, a->boxes[2], *d);
  CHECK(made->parent == &a->boxes[2]);
  CHECK(parents_first(*a));
  embed_into(a, a->boxes[1], *d);
  CHECK(parents_first(*a));
  CHECK(a->boxes.size() == 5);

  auto clone = td::clone_hierarchy(*a, nullptr);
  CHECK(clone->boxes.size() == 5);
  CHECK(parents_first(*clone));

  // Removing the middle box's node retires it and its descendants in one pass.
  NodeRecord* bnode = a->boxes[1].owner;
  edit(a, [&](Transaction& tx) { tx.remove(bnode); });
  CHECK(a->boxes[1].retired.load());
  CHECK(a->boxes[2].retired.load());
  CHECK(a->boxes[3].retired.load());
  CHECK(a->boxes[4].retired.load());
  CHECK(a->retired_boxes == 4);
  CHECK(parents_first(*a));
  a.reset();
  clone.reset();
  b.reset();
  c.reset();
  d.reset();
  CHECK(tr->wait_destroyed(4));
}

// ------------------------------------------------------------------------------ invariant 7

TEST_CASE_FIXTURE(AttachEnv, "invariant 7: retired boxes keep stable addresses until the hierarchy dies") {
  auto tr = tracker();
  auto s = leaf(*this, tr);
  auto h = graph();
  auto [child, made] = embed_into(h, h->root(), *s);
  BoxRef view{h, made};
  NodeRef inner = ref_of(h, made->first);
  CHECK(view.valid());
  edit(h, [&](Transaction& tx) { tx.remove(child); });
  CHECK_FALSE(view.valid());
  CHECK_FALSE(inner.valid());
  CHECK(made->retired.load());
  CHECK(made->graph == nullptr);
  CHECK(made->node_count == 0);
  CHECK(h->retired_boxes == 1);
  const long at = index_of(*h, made);
  CHECK(at == 1);
  // Many more boxes: the deque grows, the retired box stays where it was.
  for (int i = 0; i < 100; ++i) embed_into(h, h->root(), *s);
  CHECK(index_of(*h, made) == at);
  CHECK(&h->boxes[static_cast<std::size_t>(at)] == made);
  CHECK(view.box == made);
  CHECK_FALSE(view.valid());
  CHECK(made->hierarchy == h.get());
  h.reset();
  CHECK_FALSE(view.valid());
  CHECK(view.hierarchy.expired());  // views do not own: the hierarchy went with its last owner
  view = {};
  inner = {};
  s.reset();
  CHECK(tr->wait_destroyed(1));
}

// ------------------------------------------------------------------------------ invariant 8

namespace inv8 {
std::atomic<CUgraph> watch[3] = {};
std::atomic<int> still_registered{-1};
CUresult (*destroy_node)(CUgraphNode) = nullptr;

CUresult destroy_node_watched(CUgraphNode n) {
  int k = 0;
  for (auto& w : watch)
    if (CUgraph g = w.load(); g && Registry::instance().find(g)) ++k;
  still_registered.store(k);
  return destroy_node(n);
}

const td::DriverTable& table_watching_destroy() {
  static const td::DriverTable* w = [] {
    auto* c = new td::DriverTable(table());
    destroy_node = c->get<Entry::cuGraphDestroyNode>();
    c->set<Entry::cuGraphDestroyNode>(&destroy_node_watched);
    return c;
  }();
  return *w;
}
}  // namespace inv8

TEST_CASE_FIXTURE(AttachEnv,
                  "invariant 8: a raw graph handle is unregistered before its box is retired (and before the "
                  "driver destroys the graph)") {
  auto tr = tracker();
  const td::DriverTable& wt = inv8::table_watching_destroy();
  auto t2 = leaf(*this, tr);
  auto s = leaf(*this, tr);
  embed_into(s, s->root(), *t2);
  auto h = graph(&wt);

  SUBCASE("a child-graph node and the graph nested in it") {
    auto [child, made] = embed_into(h, h->root(), *s);
    std::vector<Box*> nested = children_of(*h, made);
    REQUIRE(nested.size() == 1);
    const CUgraph g1 = made->graph, g2 = nested[0]->graph;
    inv8::watch[0] = g1;
    inv8::watch[1] = g2;
    inv8::still_registered = -1;
    edit(h, [&](Transaction& tx) { tx.remove(child); });
    CHECK(inv8::still_registered.load() == 0);
    CHECK(Registry::instance().find(g1) == nullptr);
    CHECK(Registry::instance().find(g2) == nullptr);
    CHECK(made->retired.load());
    CHECK(nested[0]->retired.load());
  }
  SUBCASE("a conditional node's bodies") {
    std::vector<Box*> bodies;
    NodeRecord* cond = edit(h, [&](Transaction& tx) {
      CUgraphConditionalHandle c = td::make_conditional_handle(tx, h->root(), ctx.get(), 0, true);
      return td::add_conditional(tx, h->root(), {}, c, CU_GRAPH_COND_TYPE_SWITCH, 3, ctx.get(), Owners{},
                                 &bodies);
    });
    REQUIRE(bodies.size() == 3);
    for (int i = 0; i < 3; ++i) inv8::watch[i] = bodies[static_cast<std::size_t>(i)]->graph;
    inv8::still_registered = -1;
    edit(h, [&](Transaction& tx) { tx.remove(cond); });
    CHECK(inv8::still_registered.load() == 0);
    for (Box* b : bodies) CHECK(b->retired.load());
    for (auto& w : inv8::watch) CHECK(Registry::instance().find(w.load()) == nullptr);
  }
  SUBCASE("an added child-graph node undone by rollback") {
    Box* made = nullptr;
    {
      Transaction tx(h);
      td::embed(tx, h->root(), {}, *s, Owners{Probe(tr)}, &made);
      REQUIRE(made != nullptr);
      inv8::watch[0] = made->graph;
      inv8::still_registered = -1;
      tx.rollback();
    }
    CHECK(inv8::still_registered.load() == 0);
    CHECK(made->retired.load());
    CHECK(Registry::instance().find(inv8::watch[0].load()) == nullptr);
    CHECK(h->root().node_count == 0);
  }
  for (auto& w : inv8::watch) w = nullptr;
  h.reset();
  s.reset();
  t2.reset();
  CHECK(tr->wait_destroyed(tr->made()));
}

// ------------------------------------------------------------------------------ invariant 10

TEST_CASE_FIXTURE(AttachEnv, "invariant 10: graph mutations take the hierarchy's lock") {
  auto tr = tracker();
  auto h = graph();
  SUBCASE("a transaction holds Hierarchy::mu for its whole life") {
    auto try_lock_elsewhere = [&] {
      bool got = false;
      std::thread([&] {
        got = h->mu.try_lock();
        if (got) h->mu.unlock();
      }).join();
      return got;
    };
    CHECK(try_lock_elsewhere());
    {
      Transaction tx(h);
      CHECK_FALSE(try_lock_elsewhere());
      td::add_empty(tx, h->root(), {}, Owners{Probe(tr)});
      CHECK_FALSE(try_lock_elsewhere());
      tx.commit();
      CHECK(try_lock_elsewhere());
    }
    {
      Transaction tx(h);
      CHECK_FALSE(try_lock_elsewhere());
      tx.rollback();
      CHECK(try_lock_elsewhere());
    }
    {
      Transaction tx(h);
      CHECK_FALSE(try_lock_elsewhere());
    }  // rolled back by the destructor
    CHECK(try_lock_elsewhere());
  }
  SUBCASE("two threads running transactions on one hierarchy both succeed and the nodes add up") {
    constexpr int per_thread = 200;
    std::atomic<int> failures{0};
    auto work = [&] {
      if (raw<Entry::cuCtxSetCurrent>(t, drv.ctx) != CUDA_SUCCESS) failures.fetch_add(1);
      for (int i = 0; i < per_thread; ++i) {
        try {
          Transaction tx(h);
          NodeRecord* a = td::add_empty(tx, h->root(), {}, Owners{Probe(tr)});
          NodeRecord* deps[] = {a};
          td::add_empty(tx, h->root(), deps, Owners{});
          tx.commit();
        } catch (...) {
          failures.fetch_add(1);
        }
      }
    };
    std::thread t1(work), t2(work);
    t1.join();
    t2.join();
    CHECK(failures.load() == 0);
    CHECK(h->root().node_count == 4 * per_thread);
    CHECK(driver_nodes(h->root().graph) == 4 * per_thread);
    std::size_t linked = 0;
    h->root().for_each([&](NodeRecord*) { ++linked; });
    CHECK(linked == 4 * per_thread);
    CHECK(NodeAttachment::live() == live_before + 2 * per_thread);
  }
  h.reset();
  CHECK(tr->wait_destroyed(tr->made()));
}

// ------------------------------------------------------------------------------ D

TEST_CASE_FIXTURE(
    AttachEnv,
    "D1: a view of an embedded child graph is editable while its graph lives, and neither the view nor a node "
    "handle keeps the hierarchy alive once the parent handle and the source are dropped") {
  auto tr = tracker();
  auto s = leaf(*this, tr);
  auto p = leaf(*this, tr);
  auto [child, made] = embed_into(p, p->root(), *s, Owners{Probe(tr)});
  BoxRef view{p, made};
  NodeRef node = ref_of(p, made->first);
  tether::SharedBuffer<float> out = ctx.alloc<float>(64).share();
  zero(out);
  FillKernel k = load_fill();
  edit(view.lock(), [&](Transaction& tx) {
    return td::add_kernel(tx, *view.box, {}, fill_call(k.function(), out.data(), 8.0f, 64),
                          Owners{k, out, Probe(tr)}, "fill");
  });
  CHECK(view.box->node_count == 2);
  {
    Exec e(t, p->root().graph);
    e.run(stream);
  }
  CHECK(all_equal(read(out), 8.0f));
  const std::size_t live = Hierarchy::live();
  s.reset();
  CHECK(view.valid());  // the parent still owns the embedded copy
  p.reset();
  CHECK(Hierarchy::live() == live - 2);
  CHECK_FALSE(view.valid());
  CHECK_FALSE(node.valid());
  CHECK(view.lock() == nullptr);
  CHECK(tr->wait_destroyed(4));
  CHECK(tr->none_twice());
}

TEST_CASE_FIXTURE(AttachEnv, "D2: a grandchild view does not keep its ancestor chain alive") {
  auto tr = tracker();
  auto c = leaf(*this, tr);
  auto b = leaf(*this, tr);
  embed_into(b, b->root(), *c);
  auto a = leaf(*this, tr);
  embed_into(a, a->root(), *b);
  REQUIRE(a->boxes.size() == 3);
  BoxRef grandchild{a, &a->boxes[2]};
  REQUIRE(grandchild.valid());
  const Box* parent = grandchild.box->parent;
  REQUIRE(parent != nullptr);
  CHECK(parent->parent == &a->root());
  b.reset();
  c.reset();
  CHECK(grandchild.valid());  // a owns the copies of b and c
  a.reset();
  CHECK_FALSE(grandchild.valid());
  CHECK(tr->wait_destroyed(3));
  CHECK(tr->none_twice());
}

TEST_CASE_FIXTURE(
    AttachEnv,
    "D3: embedding imports the source's attachments, and removing a node inside the embedded copy "
    "releases that copy's reference, not the source's") {
  auto tr = tracker();
  auto s = leaf(*this, tr);
  NodeRecord* original = s->root().first;
  auto p = graph();
  auto [child, made] = embed_into(p, p->root(), *s);
  NodeRecord* copy = made->first;
  REQUIRE(copy != nullptr);
  CHECK(copy->current == original->current);  // the same version, a reference in each graph
  CHECK(copy->node != original->node);

  SUBCASE("removed from the copy: the source still holds it, then dropping the source releases it") {
    edit(p, [&](Transaction& tx) { tx.remove(copy); });
    CHECK(made->node_count == 0);
    CHECK(tr->destroyed_after_settle(0));
    CHECK(s->root().first == original);
    s.reset();  // the parent (with its embedded copy) is still alive
    CHECK(tr->wait_destroyed(1));
  }
  SUBCASE("removed from the source: the copy still holds it, then dropping the parent releases it") {
    edit(s, [&](Transaction& tx) { tx.remove(original); });
    CHECK(tr->destroyed_after_settle(0));
    CHECK(made->first == copy);
    p.reset();
    CHECK(tr->wait_destroyed(1));
  }
  p.reset();
  s.reset();
  CHECK(tr->destroyed_after_settle(1));
}

TEST_CASE_FIXTURE(
    AttachEnv,
    "D4: destroying a child-graph node releases every attachment nested in it exactly once, and D5: "
    "views of the embedded graphs and their nodes are invalidated without reaching the driver") {
  auto tr = tracker();
  auto inner = graph();
  edit(inner, [&](Transaction& tx) {
    td::add_empty(tx, inner->root(), {}, Owners{Probe(tr)});
    td::add_empty(tx, inner->root(), {}, Owners{Probe(tr), Probe(tr)});
  });
  auto s = graph();
  edit(s, [&](Transaction& tx) {
    td::add_empty(tx, s->root(), {}, Owners{Probe(tr)});
    td::embed(tx, s->root(), {}, *inner, Owners{Probe(tr)}, nullptr);
  });
  auto p = leaf(*this, tr);
  auto [child, made] = embed_into(p, p->root(), *s, Owners{Probe(tr)});
  std::vector<Box*> nested = children_of(*p, made);
  REQUIRE(nested.size() == 1);
  BoxRef made_view{p, made};
  BoxRef nested_view{p, nested[0]};
  NodeRef in_made = ref_of(p, made->first);
  NodeRef in_nested = ref_of(p, nested[0]->first);
  inner.reset();
  s.reset();  // only the embedded copies in p hold the nested attachments now
  CHECK(tr->destroyed_after_settle(0));

  edit(p, [&](Transaction& tx) { tx.remove(child); });
  // D4: the child node's own owner and the five nested ones, each once; p's own node stays.
  CHECK(tr->wait_destroyed(6));
  CHECK(tr->destroyed_after_settle(6));
  CHECK(tr->none_twice());
  CHECK(p->root().node_count == 1);

  // D5: every view of the embedded graphs is invalid, and using one throws before the driver.
  CHECK_FALSE(made_view.valid());
  CHECK_FALSE(nested_view.valid());
  CHECK_FALSE(in_made.valid());
  CHECK_FALSE(in_nested.valid());
  REQUIRE(tether::wait_reclaimed(std::chrono::milliseconds(wait_ms)));
  const std::uint64_t calls0 = sim ? tether::sim::call_count("*") : 0;
  auto rejected = tracker();
  {
    Transaction tx(p);
    CHECK_THROWS_AS(td::add_empty(tx, *made_view.box, {}, Owners{Probe(rejected)}), tether::UsageError);
    CHECK_THROWS_AS(td::add_empty(tx, *nested_view.box, {}, Owners{Probe(rejected)}), tether::UsageError);
    CHECK_THROWS_AS(tx.check_node(in_made, "a node of the embedded graph"), tether::UsageError);
    CHECK_THROWS_AS(tx.check_node(in_nested, "a node of the nested graph"), tether::UsageError);
    NodeRecord* stale[] = {in_made.record};
    CHECK_THROWS_AS(td::add_empty(tx, p->root(), stale, Owners{Probe(rejected)}), tether::UsageError);
    auto again = graph();
    CHECK_THROWS_AS(td::embed(tx, *made_view.box, {}, *again, Owners{Probe(rejected)}, nullptr),
                    tether::UsageError);
    again.reset();
    tx.commit();
  }
  // The rejected operations' owners die once each, where owners die.
  CHECK(rejected->wait_destroyed(4));
  CHECK(rejected->destroyed_after_settle(4));
  CHECK(rejected->outside_drain() == 0);
  if (sim) CHECK(tether::sim::call_count("*") == calls0 + 2);  // only creating and destroying `again`
  CHECK(p->root().node_count == 1);
  p.reset();  // the views do not keep the hierarchy: p's own node goes with it
  CHECK(tr->wait_destroyed(7));
  CHECK(tr->none_twice());
}

TEST_CASE_FIXTURE(
    AttachEnv,
    "D7: embedding a graph into itself or into a graph of its own hierarchy is rejected before the "
    "driver is called") {
  auto tr = tracker();
  auto s = leaf(*this, tr);
  auto h = leaf(*this, tr);
  auto [child, made] = embed_into(h, h->root(), *s);
  const std::uint64_t adds0 = sim ? tether::sim::call_count("cuGraphAddNode") : 0;
  const std::size_t boxes = h->boxes.size();
  auto rejected = tracker();
  {
    Transaction tx(h);
    CHECK_THROWS_AS(td::embed(tx, h->root(), {}, *h, Owners{Probe(rejected)}, nullptr), tether::UsageError);
    CHECK_THROWS_AS(td::embed(tx, *made, {}, *h, Owners{Probe(rejected)}, nullptr), tether::UsageError);
    tx.commit();
  }
  CHECK(rejected->wait_destroyed(2));
  CHECK(rejected->destroyed_after_settle(2));
  CHECK(rejected->outside_drain() == 0);
  if (sim) CHECK(tether::sim::call_count("cuGraphAddNode") == adds0);
  CHECK(h->boxes.size() == boxes);
  CHECK(h->root().node_count == 2);
  CHECK(made->node_count == 1);
  h.reset();
  s.reset();
  CHECK(tr->wait_destroyed(2));
}

// ------------------------------------------------------------------------------ E

TEST_CASE_FIXTURE(AttachEnv, "E1: a conditional body view is editable while its graph lives and invalid once the graph is gone") {
  auto tr = tracker();
  tether::SharedBuffer<float> out = ctx.alloc<float>(100).share();
  zero(out);
  auto h = graph();
  std::vector<Box*> bodies;
  NodeRecord* cond = edit(h, [&](Transaction& tx) {
    CUgraphConditionalHandle c = td::make_conditional_handle(tx, h->root(), ctx.get(), 1, true);
    return td::add_conditional(tx, h->root(), {}, c, CU_GRAPH_COND_TYPE_IF, 1, ctx.get(), Owners{Probe(tr)},
                               &bodies);
  });
  REQUIRE(bodies.size() == 1);
  BoxRef body{h, bodies[0]};
  NodeRef cond_ref = ref_of(h, cond);
  CHECK(body.box->kind == td::BoxKind::body);
  CHECK(body.box->owner == cond);
  REQUIRE(body.valid());
  {
    FillKernel k = load_fill();
    edit(body.lock(), [&](Transaction& tx) {
      return td::add_kernel(tx, *body.box, {}, fill_call(k.function(), out.data(), 7.0f, 100),
                            Owners{k, out, Probe(tr)}, "fill in body");
    });
  }
  CHECK(body.box->node_count == 1);
  CHECK(driver_nodes(body.box->graph) == 1);
  {
    Exec e(t, h->root().graph);
    e.run(stream);  // the condition defaults to 1: the body runs
  }
  CHECK(all_equal(read(out), 7.0f));
  CHECK(cond_ref.valid());
  CHECK(tr->destroyed_after_settle(0));
  h.reset();
  CHECK_FALSE(cond_ref.valid());
  CHECK_FALSE(body.valid());
  CHECK(tr->wait_destroyed(2));
  CHECK(wait_until([&] { return out.use_count() == 1; }));
}

TEST_CASE_FIXTURE(
    AttachEnv,
    "E2: destroying a conditional node releases every branch's attachments and invalidates every "
    "branch view and node") {
  auto tr = tracker();
  auto s = leaf(*this, tr);  // embedded into a branch
  auto h = leaf(*this, tr);
  std::vector<Box*> if_else, cases, loop;
  NodeRecord* c1 = nullptr;
  NodeRecord* c2 = nullptr;
  NodeRecord* c3 = nullptr;
  edit(h, [&](Transaction& tx) {
    CUgraphConditionalHandle a = td::make_conditional_handle(tx, h->root(), ctx.get(), 0, true);
    CUgraphConditionalHandle b = td::make_conditional_handle(tx, h->root(), ctx.get(), 0, true);
    CUgraphConditionalHandle w = td::make_conditional_handle(tx, h->root(), ctx.get(), 0, true);
    c1 = td::add_conditional(tx, h->root(), {}, a, CU_GRAPH_COND_TYPE_IF, 2, ctx.get(), Owners{Probe(tr)},
                             &if_else);
    c2 = td::add_conditional(tx, h->root(), {}, b, CU_GRAPH_COND_TYPE_SWITCH, 3, ctx.get(), Owners{Probe(tr)},
                             &cases);
    c3 = td::add_conditional(tx, h->root(), {}, w, CU_GRAPH_COND_TYPE_WHILE, 1, ctx.get(), Owners{}, &loop);
  });
  std::vector<Box*> branches;
  for (auto* v : {&if_else, &cases, &loop}) branches.insert(branches.end(), v->begin(), v->end());
  REQUIRE(branches.size() == 6);
  std::vector<BoxRef> views;
  std::vector<NodeRef> nodes;
  for (Box* b : branches) {
    NodeRecord* r = edit(h, [&](Transaction& tx) {
      return td::add_empty(tx, *b, {}, Owners{Probe(tr), Probe(tr)});
    });
    views.push_back(BoxRef{h, b});
    nodes.push_back(ref_of(h, r));
  }
  auto [embedded_node, embedded] = embed_into(h, *if_else[0], *s, Owners{Probe(tr)});
  views.push_back(BoxRef{h, embedded});
  nodes.push_back(ref_of(h, embedded->first));
  nodes.push_back(ref_of(h, embedded_node));
  s.reset();
  const int branch_owners =
      6 * 2 + 1 + 1 + 2;  // nodes, the embedded copy's, the child node's, the two conditionals'
  CHECK(tr->destroyed_after_settle(0));
  {
    Exec e(t, h->root().graph);  // all conditions are 0: nothing in the branches runs
    e.run(stream);
  }
  CHECK(tr->destroyed_after_settle(0));
  const std::size_t registry_full = Registry::instance().size();
  edit(h, [&](Transaction& tx) {
    tx.remove(c1);
    tx.remove(c2);
    tx.remove(c3);
  });
  CHECK(tr->wait_destroyed(branch_owners));
  CHECK(tr->destroyed_after_settle(branch_owners));
  CHECK(tr->none_twice());
  for (const BoxRef& v : views) CHECK_FALSE(v.valid());
  for (const NodeRef& n : nodes) CHECK_FALSE(n.valid());
  CHECK(Registry::instance().size() == registry_full - 7);
  CHECK(h->root().node_count == 1);
  {
    Transaction tx(h);
    for (const BoxRef& v : views)
      CHECK_THROWS_AS(td::add_empty(tx, *v.box, {}, Owners{}), tether::UsageError);
    for (const NodeRef& n : nodes)
      CHECK_THROWS_AS(tx.check_node(n, "a branch node"), tether::UsageError);
    tx.commit();
  }
  h.reset();
  views.clear();
  nodes.clear();
  CHECK(tr->wait_destroyed(branch_owners + 1));  // h's own node
}

TEST_CASE_FIXTURE(
    AttachEnv,
    "E3: cloning a graph with a conditional node reports the driver's refusal as a DriverError and "
    "changes nothing") {
  auto tr = tracker();
  auto h = leaf(*this, tr);
  std::vector<Box*> bodies;
  edit(h, [&](Transaction& tx) {
    CUgraphConditionalHandle c = td::make_conditional_handle(tx, h->root(), ctx.get(), 1, true);
    return td::add_conditional(tx, h->root(), {}, c, CU_GRAPH_COND_TYPE_IF, 1, ctx.get(), Owners{Probe(tr)},
                               &bodies);
  });
  edit(h, [&](Transaction& tx) { return td::add_empty(tx, *bodies[0], {}, Owners{Probe(tr)}); });
  const std::size_t registry = Registry::instance().size();
  const std::size_t boxes = h->boxes.size();
  const std::uint64_t live = NodeAttachment::live();
  const std::size_t graphs = sim ? tether::sim::stats().graphs : 0;
  std::unordered_map<const NodeRecord*, NodeRecord*> map;
  bool refused = false;
  try {
    td::clone_hierarchy(*h, &map);
  } catch (const tether::DriverError& e) {
    refused = true;
    CHECK(e.code() == tether::Errc::not_supported);
    CHECK(e.entry_point() == "cuGraphClone");
  }
  CHECK(refused);
  CHECK(map.empty());
  CHECK(Registry::instance().size() == registry);
  CHECK(h->boxes.size() == boxes);
  CHECK(h->root().node_count == 2);
  CHECK(bodies[0]->node_count == 1);
  CHECK(NodeAttachment::live() == live);
  if (sim) CHECK(tether::sim::stats().graphs == graphs);
  CHECK(tr->destroyed_after_settle(0));
  {
    Transaction tx(h);  // still usable
    td::add_empty(tx, h->root(), {}, Owners{});
    tx.commit();
  }
  h.reset();
  CHECK(tr->wait_destroyed(3));
}

}  // namespace

// The publish lock (hierarchy.hpp, PublishLock): a commit or rollback excludes every executable
// update that reads a node handle, and readers arriving all the time never keep a writer out.
TEST_CASE("the publish lock never lets a writer in beside a reader, and readers arriving all the time never starve it") {
  td::PublishLock lock;
  std::atomic<int> readers_inside{0};
  std::atomic<int> writers_inside{0};
  std::atomic<bool> overlap{false};
  std::atomic<bool> stop{false};
  std::atomic<long> reads{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 3; ++i)
    readers.emplace_back([&] {
      while (!stop.load()) {
        lock.lock_shared();
        readers_inside.fetch_add(1);
        if (writers_inside.load() != 0) overlap.store(true);
        reads.fetch_add(1);
        readers_inside.fetch_sub(1);
        lock.unlock_shared();
      }
    });
  int writes = 0;
  for (; writes < 200; ++writes) {
    lock.lock();  // returns although three readers keep taking the lock
    writers_inside.fetch_add(1);
    if (readers_inside.load() != 0) overlap.store(true);
    std::this_thread::yield();
    if (readers_inside.load() != 0) overlap.store(true);
    writers_inside.fetch_sub(1);
    lock.unlock();
  }
  stop.store(true);
  for (std::thread& t : readers) t.join();
  CHECK_FALSE(overlap.load());
  CHECK(writes == 200);
  CHECK(reads.load() > 0);
}
