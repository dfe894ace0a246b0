// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Update planning (docs/serving.md, "Update planning"): the agreement of `plan_update` with the
// driver's own verdict over a generated family of graph pairs (random graphs × every mutation,
// with and without use_node_priority), updates of edited source graphs, chains of whole updates,
// `update_or_reinstantiate` without a refused driver call, the listed disagreement, the messages.
#include <doctest/doctest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "support/dsl_fixture.hpp"

using namespace tether;
using namespace tether_test;

namespace {

enum class Kind { kernel, empty, host, memset, memcpy_dd, memcpy_dh, record, child, if_body, while_body, switch_body, alloc, free };

const char* name_of(Kind k) {
  switch (k) {
    case Kind::kernel: return "kernel";
    case Kind::empty: return "empty";
    case Kind::host: return "host";
    case Kind::memset: return "memset";
    case Kind::memcpy_dd: return "memcpy_dd";
    case Kind::memcpy_dh: return "memcpy_dh";
    case Kind::record: return "record";
    case Kind::child: return "child";
    case Kind::if_body: return "if";
    case Kind::while_body: return "while";
    case Kind::switch_body: return "switch";
    case Kind::alloc: return "alloc";
    case Kind::free: return "free";
  }
  return "?";
}

// One node of a generated graph. What a whole update may change freely (the scale, the grid, the
// memset value, the event) varies between the two graphs of a pair without changing the verdict.
struct Spec {
  explicit Spec(Kind k = Kind::empty, std::vector<int> d = {}) : kind(k), deps(std::move(d)) {}
  Spec& with(std::vector<Kind> chain) {
    inner = std::move(chain);
    return *this;
  }
  Spec& coop() {
    cooperative = true;
    return *this;
  }
  Spec& prio(int p) {
    priority = p;
    return *this;
  }
  Spec& scale(float v) {
    value = v;
    return *this;
  }
  Kind kind = Kind::empty;
  std::vector<int> deps;  // earlier nodes
  bool cooperative = false;
  int priority = 0;       // 0: not set
  float value = 2.0f;
  unsigned grid = 1;
  bool bytes = false;     // memset of bytes instead of floats
  bool other_event = false;
  std::vector<Kind> inner;  // child graph or body: a chain of these (kernel or empty)
  unsigned cases = 2;       // switch
};
using Shape = std::vector<Spec>;

std::string describe(const Shape& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    out += (i ? " " : "") + std::string(name_of(s[i].kind));
    if (!s[i].deps.empty()) {
      out += "<";
      for (std::size_t d = 0; d < s[i].deps.size(); ++d) out += (d ? "," : "") + std::to_string(s[i].deps[d]);
      out += ">";
    }
  }
  return out;
}

struct PlanFixture : DslFixture {
  SharedBuffer<float> x = buffer(4, 1.0f), y = buffer(4, 1.0f);
  SharedBuffer<std::uint8_t> b = ctx.alloc<std::uint8_t>(16).share();
  SharedPinnedBuffer<float> host = ctx.alloc_pinned<float>(4).share();
  Event ev1 = ctx.make_event(), ev2 = ctx.make_event();

  template <class E>
  Node<> add_inner(E& e, Kind k) {
    if (k == Kind::kernel) return e.launch(this->k.scale, Grid{1}, Block{4}, x, 1.0f, 4);
    return e.empty();
  }
  Graph build(const Shape& s) {
    Graph g{ctx};
    g.edit([&](Edit& e) {
      std::vector<Node<>> made;
      std::vector<BodyRef> bodies;
      std::vector<GraphRef> children;
      Unowned<float> memory;
      for (const Spec& n : s) {
        switch (n.kind) {
          case Kind::kernel: {
            Launch l{Grid{n.grid}, Block{4}};
            if (n.cooperative) l.cooperative();
            if (n.priority) l.priority(n.priority);
            made.push_back(e.launch(k.scale, l, x, n.value, 4));
            break;
          }
          case Kind::empty: made.push_back(e.empty()); break;
          case Kind::host: made.push_back(e.host([] {})); break;
          case Kind::memset:
            made.push_back(n.bytes ? Node<>(e.memset(b, std::uint8_t{7})) : Node<>(e.memset(y, n.value)));
            break;
          case Kind::memcpy_dd: made.push_back(e.memcpy(y, x)); break;
          case Kind::memcpy_dh: made.push_back(e.memcpy(host, x)); break;
          case Kind::record: made.push_back(e.record(n.other_event ? ev2 : ev1)); break;
          case Kind::child: {
            Graph c{ctx};
            c.edit([&](Edit& ce) {
              Node<> last;
              for (Kind k : n.inner) {
                Node<> m = add_inner(ce, k);
                if (last.valid()) ce.connect(last, m);
                last = m;
              }
            });
            made.push_back(e.embed(c).node);
            break;
          }
          case Kind::if_body: {
            IfResult r = e.if_(e.condition(0));
            made.push_back(r.node);
            bodies.push_back(r.then_);
            break;
          }
          case Kind::while_body: {
            WhileResult r = e.while_(e.condition(0));
            made.push_back(r.node);
            bodies.push_back(r.body);
            break;
          }
          case Kind::switch_body: {
            SwitchResult r = e.switch_(e.condition(0), n.cases);
            made.push_back(r.node);
            bodies.push_back(r.cases.front());
            break;
          }
          case Kind::alloc: {
            AllocResult<float> a = e.alloc<float>(256);
            memory = a.memory;
            made.push_back(a.node);
            break;
          }
          case Kind::free: made.push_back(e.free(memory)); break;
        }
      }
      for (std::size_t i = 0; i < s.size(); ++i)
        for (int d : s[i].deps) e.connect(made[static_cast<std::size_t>(d)], made[i]);
      // Bodies are filled in the same edit (their views are valid from the node's creation).
      std::size_t bi = 0;
      for (const Spec& n : s)
        if (n.kind == Kind::if_body || n.kind == Kind::while_body || n.kind == Kind::switch_body) {
          Node<> last;
          for (Kind k : n.inner) {
            Node<> m = k == Kind::kernel ? Node<>(e.in(bodies[bi]).launch(this->k.scale, Grid{1}, Block{4}, x, 1.0f, 4))
                                         : Node<>(e.in(bodies[bi]).empty());
            if (last.valid()) e.connect(last, m);
            last = m;
          }
          ++bi;
        }
    });
    return g;
  }
};

// A random graph of 2..6 nodes: kinds drawn from those every graph may hold, edges to earlier nodes.
Shape random_shape(std::mt19937& rng) {
  const Kind kinds[] = {Kind::kernel,    Kind::kernel, Kind::empty, Kind::host,    Kind::memset,     Kind::memcpy_dd,
                        Kind::memcpy_dh, Kind::record, Kind::child, Kind::if_body, Kind::while_body, Kind::switch_body};
  std::uniform_int_distribution<int> count(2, 6), kind(0, static_cast<int>(std::size(kinds)) - 1), coin(0, 2);
  Shape s(static_cast<std::size_t>(count(rng)));
  for (std::size_t i = 0; i < s.size(); ++i) {
    s[i].kind = kinds[kind(rng)];
    for (std::size_t d = 0; d < i; ++d)
      if (coin(rng) == 0) s[i].deps.push_back(static_cast<int>(d));
    if (s[i].kind == Kind::child || s[i].kind == Kind::if_body || s[i].kind == Kind::while_body ||
        s[i].kind == Kind::switch_body)
      s[i].inner = coin(rng) ? std::vector<Kind>{Kind::kernel, Kind::empty} : std::vector<Kind>{Kind::kernel};
  }
  return s;
}

// A change of one graph of a pair: the name, and the new shape (empty optional: not applicable).
struct Mutation {
  const char* name;
  bool (*apply)(Shape&);
};

int first_of(const Shape& s, bool (*pred)(const Spec&)) {
  for (std::size_t i = 0; i < s.size(); ++i)
    if (pred(s[i])) return static_cast<int>(i);
  return -1;
}
bool is_kernel(const Spec& n) { return n.kind == Kind::kernel; }
bool has_inner(const Spec& n) { return !n.inner.empty(); }
bool is_conditional(const Spec& n) { return n.kind == Kind::if_body || n.kind == Kind::while_body; }

// Where `n` is in `g`: "node 3", "node 1 of the child graph of node 2", "node 0 of body 1 of node 4".
std::string where(const Graph& g, const Node<>& n) {
  if (!n.valid()) return "no node";
  std::vector<Node<>> root = g.nodes();
  for (std::size_t i = 0; i < root.size(); ++i)
    if (root[i] == n) return fmt::format("node {}", i);
  for (std::size_t i = 0; i < root.size(); ++i) {
    try {
      std::vector<Node<>> in = g.child(root[i]).nodes();
      for (std::size_t k = 0; k < in.size(); ++k)
        if (in[k] == n) return fmt::format("node {} of the child graph of node {}", k, i);
    } catch (const UsageError&) {
    }
    try {
      std::vector<BodyRef> bodies = g.bodies(root[i]);
      for (std::size_t b = 0; b < bodies.size(); ++b) {
        std::vector<Node<>> in = bodies[b].nodes();
        for (std::size_t k = 0; k < in.size(); ++k)
          if (in[k] == n) return fmt::format("node {} of body {} of node {}", k, b, i);
      }
    } catch (const UsageError&) {
    }
  }
  return "a node not found";
}

const Mutation kMutations[] = {
    {"identical", [](Shape&) { return true; }},
    {"free parameters (scale, grid, memset value, event)",
     [](Shape& s) {
       for (Spec& n : s) {
         n.value = 5.0f;
         n.grid = 2;
         n.other_event = true;
       }
       return true;
     }},
    {"one node more", [](Shape& s) { s.push_back(Spec(Kind::empty, {0})); return true; }},
    {"one node fewer",
     [](Shape& s) {
       if (s.size() < 2) return false;
       s.pop_back();
       return true;
     }},
    {"a node of another kind",
     [](Shape& s) {
       int i = static_cast<int>(s.size()) - 1;
       if (s[static_cast<std::size_t>(i)].kind == Kind::empty) return false;
       s[static_cast<std::size_t>(i)].kind = Kind::empty;
       s[static_cast<std::size_t>(i)].inner.clear();
       return true;
     }},
    {"an edge more",
     [](Shape& s) {
       for (std::size_t i = s.size(); i-- > 1;)
         for (int d = 0; d < static_cast<int>(i); ++d)
           if (std::find(s[i].deps.begin(), s[i].deps.end(), d) == s[i].deps.end()) {
             s[i].deps.push_back(d);
             return true;
           }
       return false;
     }},
    {"an edge fewer",
     [](Shape& s) {
       for (std::size_t i = s.size(); i-- > 0;)
         if (!s[i].deps.empty()) {
           s[i].deps.pop_back();
           return true;
         }
       return false;
     }},
    {"an edge moved",
     [](Shape& s) {
       for (std::size_t i = s.size(); i-- > 0;)
         for (std::size_t k = 0; k < s[i].deps.size(); ++k)
           for (int d = 0; d < static_cast<int>(i); ++d)
             if (std::find(s[i].deps.begin(), s[i].deps.end(), d) == s[i].deps.end()) {
               s[i].deps[k] = d;
               return true;
             }
       return false;
     }},
    {"a kernel made cooperative",
     [](Shape& s) {
       int i = first_of(s, is_kernel);
       if (i < 0) return false;
       s[static_cast<std::size_t>(i)].cooperative = true;
       return true;
     }},
    {"a kernel's priority changed",
     [](Shape& s) {
       int i = first_of(s, is_kernel);
       if (i < 0) return false;
       s[static_cast<std::size_t>(i)].priority = -2;
       return true;
     }},
    {"a node of a child graph or body changed kind",
     [](Shape& s) {
       int i = first_of(s, has_inner);
       if (i < 0) return false;
       Kind& k = s[static_cast<std::size_t>(i)].inner.back();
       k = k == Kind::kernel ? Kind::empty : Kind::kernel;
       return true;
     }},
    {"a child graph or body with one node more",
     [](Shape& s) {
       int i = first_of(s, has_inner);
       if (i < 0) return false;
       s[static_cast<std::size_t>(i)].inner.push_back(Kind::empty);
       return true;
     }},
    {"a switch with one case more",
     [](Shape& s) {
       int i = first_of(s, [](const Spec& n) { return n.kind == Kind::switch_body; });
       if (i < 0) return false;
       ++s[static_cast<std::size_t>(i)].cases;
       return true;
     }},
    {"a conditional node of another type",
     [](Shape& s) {
       int i = first_of(s, is_conditional);
       if (i < 0) return false;
       Spec& n = s[static_cast<std::size_t>(i)];
       n.kind = n.kind == Kind::if_body ? Kind::while_body : Kind::if_body;
       return true;
     }},
    {"a copy to host memory instead of device memory",
     [](Shape& s) {
       int i = first_of(s, [](const Spec& n) { return n.kind == Kind::memcpy_dd; });
       if (i < 0) return false;
       s[static_cast<std::size_t>(i)].kind = Kind::memcpy_dh;
       return true;
     }},
    {"a memset of bytes instead of floats",
     [](Shape& s) {
       int i = first_of(s, [](const Spec& n) { return n.kind == Kind::memset; });
       if (i < 0) return false;
       s[static_cast<std::size_t>(i)].bytes = true;
       return true;
     }},
    {"two changes: a node of another kind and one node more",
     [](Shape& s) {
       if (s[0].kind == Kind::empty || s[0].kind == Kind::alloc) return false;
       s[0].kind = Kind::empty;
       s[0].inner.clear();
       s.push_back(Spec(Kind::empty, {}));
       return true;
     }},
    {"two changes: an edge more and a kernel made cooperative",
     [](Shape& s) {
       int i = first_of(s, is_kernel);
       if (i < 0 || s.size() < 2) return false;
       s[static_cast<std::size_t>(i)].cooperative = true;
       std::size_t last = s.size() - 1;
       if (std::find(s[last].deps.begin(), s[last].deps.end(), 0) != s[last].deps.end()) return false;
       s[last].deps.push_back(0);
       return true;
     }},
};

// The bases: every kind at least once (hand-made), then random graphs.
std::vector<Shape> bases(std::size_t random_count) {
  std::vector<Shape> out;
  out.push_back({Spec(Kind::kernel), Spec(Kind::memcpy_dd, {0}), Spec(Kind::memset, {1}), Spec(Kind::host, {2})});
  out.push_back({Spec(Kind::record), Spec(Kind::child, {0}).with({Kind::kernel, Kind::empty}),
                 Spec(Kind::if_body, {1}).with({Kind::kernel}),
                 Spec(Kind::while_body, {}).with({Kind::empty, Kind::kernel})});
  out.push_back({Spec(Kind::kernel), Spec(Kind::kernel, {0}), Spec(Kind::memcpy_dh, {1}), Spec(Kind::empty, {0, 2})});
  out.push_back({Spec(Kind::alloc), Spec(Kind::kernel, {0}), Spec(Kind::free, {1})});
  out.push_back({Spec(Kind::switch_body).with({Kind::kernel}), Spec(Kind::empty, {0})});
  std::mt19937 rng(20261203);
  for (std::size_t i = 0; i < random_count; ++i) out.push_back(random_shape(rng));
  return out;
}

// What a pair's plan and driver verdict say together.
enum class Agreement {
  exact,         // the same reason and node
  edges,         // both refuse an edge change, for another reason or node (listed: the driver's pairing)
  conservative,  // the plan refuses an edge change the driver accepts (listed: the driver's pairing)
  wrong,         // anything else: a bug of the plan or of the simulator
};

bool edge_mutation(std::string_view m) { return m.find("edge") != std::string_view::npos; }

Agreement classify(const UpdatePlan& plan, const UpdateResult& real, std::string_view mutation) {
  if (plan.reason == real.reason && (real ? true : plan.node == real.node)) return Agreement::exact;
  // The driver pairs the nodes of graphs whose edges differ by structure, not by creation order
  // alone (docs/serving.md, "Update planning"): it then names another node, or finds nodes of
  // different kinds paired, or (an edge moved between two nodes of one kind) no difference.
  if (edge_mutation(mutation) && plan.reason == UpdateResult::Reason::topology_changed)
    return real ? Agreement::conservative : Agreement::edges;
  return Agreement::wrong;
}

struct Tally {
  int pairs = 0, refused = 0;
  int counts[4] = {0, 0, 0, 0};
  std::vector<std::string> wrong, listed;
};

}  // namespace

TEST_CASE_FIXTURE(PlanFixture, "plan_update agrees with the driver's verdict and node over a generated family of graph pairs") {
  Tally t;
  for (const Shape& base : bases(40)) {
    for (const Mutation& m : kMutations) {
      Shape changed = base;
      if (!m.apply(changed)) continue;
      for (bool priority : {false, true}) {
        Graph a = build(base);
        InstantiateOptions o;
        o.use_node_priority = priority;
        GraphExec exec = a.instantiate(o);
        Graph b = build(changed);
        UpdatePlan plan = exec.plan_update(b);
        UpdateResult real = exec.update(b);
        ++t.pairs;
        if (!real) ++t.refused;
        const Agreement ag = classify(plan, real, m.name);
        ++t.counts[static_cast<int>(ag)];
        if (ag != Agreement::exact) {
          std::string line = fmt::format("[{}] -> {} (node priority {}): plan \"{}\" ({}), driver {} ({})",
                                         describe(base), m.name, priority, to_string(plan), where(b, plan.node),
                                         to_string(real.reason), where(b, real.node));
          (ag == Agreement::wrong ? t.wrong : t.listed).push_back(std::move(line));
        }
        // The executable still launches whatever the verdict.
        exec.launch(stream);
        stream.synchronize();
      }
    }
  }
  std::printf("plan_update agreement (%s): %d pairs, %d refused by the driver; exact %d, edge changes refused "
              "for another reason or node %d, edge changes the plan refuses and the driver accepts %d, wrong %d\n",
              simulated ? "simulator" : "GPU", t.pairs, t.refused, t.counts[0], t.counts[1], t.counts[2], t.counts[3]);
  for (const std::string& d : t.listed) std::printf("  listed: %s\n", d.c_str());
  for (const std::string& d : t.wrong) std::printf("  WRONG: %s\n", d.c_str());
  CHECK(t.pairs > 500);
  CHECK(t.refused > t.pairs / 3);  // the family exercises the rules, not only accepted updates
  CHECK_MESSAGE(t.wrong.empty(), t.wrong.size() << " disagreements, first: " << (t.wrong.empty() ? "" : t.wrong[0]));
  // The simulator pairs by creation order, as the plan does: there every verdict is exact.
  if (simulated) CHECK(t.counts[0] == t.pairs);
}

TEST_CASE_FIXTURE(PlanFixture, "plan_update compares with the topology the executable was made from, not with its source graph as edited since") {
  Graph g{ctx};
  Node<KernelNode<float*, float, int>> kern;
  Node<EmptyNode> mid, added;
  Node<ChildNode> child;
  Graph inner{ctx};
  inner.edit([&](Edit& e) { e.launch(k.scale, Grid{1}, Block{4}, y, 1.0f, 4); });
  g.edit([&](Edit& e) {
    kern = e.launch(k.scale, Grid{1}, Block{4}, x, 2.0f, 4);
    mid = e.after(kern).empty();
    child = e.embed(inner).node;
  });
  GraphExec exec = g.instantiate();
  CHECK(static_cast<bool>(exec.plan_update(g)));
  // Each edit, then the plan and the driver on the edited graph: the executable keeps the topology
  // it was made from until an update succeeds.
  struct Step {
    std::string what;
    std::function<void(Edit&)> edit;
    UpdateResult::Reason expected;
  };
  const std::vector<Step> steps = {
      {"the kernel's scale and grid changed", [&](Edit& e) { e.update(kern, Grid{2}, Block{4}, x, 9.0f, 4); },
       UpdateResult::Reason::success},
      {"the kernel made cooperative",
       [&](Edit& e) { e.update(kern, Launch{Grid{1}, Block{4}}.cooperative(), x, 9.0f, 4); },
       UpdateResult::Reason::attributes_changed},
      {"the kernel not cooperative again",
       [&](Edit& e) { e.update(kern, Launch{Grid{1}, Block{4}}.cooperative(false), x, 9.0f, 4); },
       UpdateResult::Reason::success},
      {"a node added", [&](Edit& e) { added = e.empty(); }, UpdateResult::Reason::topology_changed},
      {"the node removed again", [&](Edit& e) { e.remove(added); }, UpdateResult::Reason::success},
      {"the child graph replaced by one of another kind of node",
       [&](Edit& e) {
         Graph other{ctx};
         other.edit([&](Edit& o) { o.empty(); });
         child = e.replace(child, other).node;
       },
       UpdateResult::Reason::node_type_changed},
      {"an edge more", [&](Edit& e) { e.connect(mid, child); }, UpdateResult::Reason::topology_changed},
      // Fact U1: from then on the driver refuses updates from this graph, and so does the plan.
      {"the edge removed again", [&](Edit& e) { e.disconnect(mid, child); }, UpdateResult::Reason::topology_changed},
  };
  for (const Step& s : steps) {
    CAPTURE(s.what);
    g.edit([&](Edit& e) { s.edit(e); });
    UpdatePlan p = exec.plan_update(g);
    CHECK(p.reason == s.expected);
    UpdateResult r = exec.update(g);
    CHECK(r.reason == s.expected);
    // For topology the H200 names a node of its own pairing (docs/serving.md, "Agreement").
    if (!r && r.reason != UpdateResult::Reason::topology_changed) CHECK(p.node == r.node);
    exec.launch(stream);
    stream.synchronize();
  }
}

TEST_CASE_FIXTURE(PlanFixture, "after a whole update from another graph, plan_update compares with that graph's topology") {
  const Shape two = {Spec(Kind::kernel), Spec(Kind::empty, {0})};
  const Shape three = {Spec(Kind::kernel), Spec(Kind::empty, {0}), Spec(Kind::host, {1})};
  Graph a = build(two);
  GraphExec exec = a.instantiate();
  Graph b = build(three);
  CHECK(exec.plan_update(b).reason == UpdateResult::Reason::topology_changed);
  UpdateResult refused = exec.update(b);
  CHECK(refused.reason == UpdateResult::Reason::topology_changed);
  // A refused update keeps the executable's topology: a graph like `a` still plans as accepted.
  Graph a2 = build(two);
  CHECK(static_cast<bool>(exec.plan_update(a2)));
  CHECK(static_cast<bool>(exec.update(a2)));
  // Accepted: the executable now runs a2's versions and compares with a2's topology, even once a2
  // was edited or dropped.
  a2.edit([&](Edit& e) { e.empty(); });
  CHECK(exec.plan_update(a2).reason == UpdateResult::Reason::topology_changed);
  a2.reset();
  CHECK(static_cast<bool>(exec.plan_update(build(two))));
  exec.launch(stream);
  stream.synchronize();
}

TEST_CASE_FIXTURE(PlanFixture, "update_or_reinstantiate makes no cuGraphExecUpdate call for a refusal its plan foresees") {
  Graph a = build({Spec(Kind::kernel), Spec(Kind::empty, {0})});
  GraphExec exec = a.instantiate();
  Graph b = build({Spec(Kind::kernel), Spec(Kind::host, {0})});
  if (simulated) sim::reset_call_counts();
  UpdateResult r = exec.update_or_reinstantiate(b);
  CHECK_FALSE(static_cast<bool>(r));
  CHECK(r.reinstantiated);
  CHECK(r.planned);
  CHECK(r.reason == UpdateResult::Reason::node_type_changed);
  CHECK(r.node == b.nodes()[1]);
  CHECK(r.rule == "node 1 is an empty node in the executable and a host node in the graph (a whole update cannot "
                  "change a node's kind)");
  if (simulated) {
    CHECK(sim::call_count("cuGraphExecUpdate") == 0);
    CHECK(sim::call_count("cuGraphInstantiateWithFlags") == 1);
  }
  // The new executable was made from b and plans against b's topology.
  CHECK(static_cast<bool>(exec.plan_update(build({Spec(Kind::kernel), Spec(Kind::host, {0})}))));
  // An accepted plan: one cuGraphExecUpdate, no instantiation.
  if (simulated) sim::reset_call_counts();
  UpdateResult ok = exec.update_or_reinstantiate(build({Spec(Kind::kernel).scale(7.0f), Spec(Kind::host, {0})}));
  CHECK(static_cast<bool>(ok));
  CHECK_FALSE(ok.reinstantiated);
  CHECK_FALSE(ok.planned);
  CHECK(ok.rule.empty());
  if (simulated) {
    CHECK(sim::call_count("cuGraphExecUpdate") == 1);
    CHECK(sim::call_count("cuGraphInstantiateWithFlags") == 0);
  }
  exec.launch(stream);
  stream.synchronize();
  CHECK(read(x) == std::vector<float>(4, 7.0f));
}

TEST_CASE_FIXTURE(PlanFixture, "every refusal names its node, the rule and what the executable and the graph each have") {
  struct Case {
    std::string what;
    Shape exec, graph;
    bool node_priority;
    UpdateResult::Reason reason;
    std::string at;  // where the named node is (`where`)
    std::size_t position;
    std::string rule;
  };
  using R = UpdateResult::Reason;
  const std::vector<Kind> k1 = {Kind::kernel}, k2 = {Kind::kernel, Kind::empty};
  const std::vector<Case> cases = {
      {"node count", {Spec(Kind::empty)}, {Spec(Kind::empty), Spec(Kind::empty)}, false, R::topology_changed,
       "no node", 0,
       "the executable's graph has 1 nodes and the graph 2 (a whole update pairs the nodes in creation order and needs "
       "as many)"},
      {"kind", {Spec(Kind::empty), Spec(Kind::kernel)}, {Spec(Kind::empty), Spec(Kind::memset)}, false,
       R::node_type_changed, "node 1", 1,
       "node 1 is a kernel node in the executable and a memset node in the graph (a whole update cannot change a "
       "node's kind)"},
      {"edges", {Spec(Kind::empty), Spec(Kind::empty), Spec(Kind::empty, {0})},
       {Spec(Kind::empty), Spec(Kind::empty), Spec(Kind::empty, {0, 1})}, false, R::topology_changed, "node 2", 2,
       "node 2 (empty) depends on nodes {0} in the executable and {0, 1} in the graph (a whole update cannot change "
       "the edges)"},
      {"cooperative", {Spec(Kind::kernel)}, {Spec(Kind::kernel).coop()}, false, R::attributes_changed, "node 0", 0,
       "node 0 (kernel) is not cooperative in the executable and cooperative in the graph (CUDA keeps "
       "CU_LAUNCH_ATTRIBUTE_COOPERATIVE fixed in a whole update)"},
      {"priority", {Spec(Kind::kernel).prio(-1)}, {Spec(Kind::kernel).prio(-3)}, true, R::attributes_changed, "node 0",
       0,
       "node 0 (kernel) has priority -1 in the executable and -3 in the graph (under use_node_priority CUDA keeps "
       "CU_LAUNCH_ATTRIBUTE_PRIORITY fixed in a whole update)"},
      {"the node count inside a child graph", {Spec(Kind::empty), Spec(Kind::child).with(k1)},
       {Spec(Kind::empty), Spec(Kind::child).with(k2)}, false, R::topology_changed, "no node", 0,
       "in the child graph of node 1: the executable's graph has 1 nodes and the graph 2 (a whole update pairs the "
       "nodes in creation order and needs as many)"},
      {"a kind inside a body", {Spec(Kind::while_body).with(k2)},
       {Spec(Kind::while_body).with({Kind::kernel, Kind::kernel})}, false, R::node_type_changed,
       "node 1 of body 0 of node 0", 1,
       "in body 0 of conditional node 0: node 1 is an empty node in the executable and a kernel node in the graph (a "
       "whole update cannot change a node's kind)"},
      {"a kind inside a child graph", {Spec(Kind::empty), Spec(Kind::child).with(k2)},
       {Spec(Kind::empty), Spec(Kind::child).with({Kind::empty, Kind::empty})}, false, R::node_type_changed,
       "node 0 of the child graph of node 1", 0,
       "in the child graph of node 1: node 0 is a kernel node in the executable and an empty node in the graph (a "
       "whole update cannot change a node's kind)"},
      {"conditional type", {Spec(Kind::if_body).with(k1)}, {Spec(Kind::while_body).with(k1)}, false,
       R::not_supported, "node 0", 0,
       "node 0 is a conditional node of type if in the executable and of type while in the graph (a whole update "
       "cannot change a conditional node's type)"},
      {"switch size", {Spec(Kind::switch_body).with(k1)}, {[&] {
         Spec sw(Kind::switch_body);
         sw.with(k1).cases = 3;
         return sw;
       }()},
       false, R::not_supported, "node 0", 0,
       "node 0 is a conditional node with 2 bodies in the executable and 3 in the graph (a whole update cannot change "
       "a conditional node's size)"},
      {"memory types", {Spec(Kind::memcpy_dd)}, {Spec(Kind::memcpy_dh)}, false, R::parameters_changed, "node 0", 0,
       "node 0 (memcpy) copies device to device memory in the executable and device to host in the graph (a whole "
       "update cannot change a copy's memory types)"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    InstantiateOptions o;
    o.use_node_priority = c.node_priority;
    GraphExec exec = build(c.exec).instantiate(o);
    Graph g = build(c.graph);
    UpdatePlan p = exec.plan_update(g);
    CHECK(p.reason == c.reason);
    CHECK(p.rule == c.rule);
    CHECK(to_string(p) == std::string(to_string(c.reason)) + ": " + c.rule);
    CHECK(fmt::format("{}", p) == to_string(p));
    CHECK(where(g, p.node) == c.at);
    CHECK(p.position == c.position);
    UpdateResult r = exec.update(g);
    CHECK(r.reason == c.reason);
    // For an edge the H200 names a node of its own pairing, here none (docs/serving.md, "Agreement").
    if (c.what != "edges") CHECK(where(g, r.node) == c.at);
  }
  CHECK(to_string(UpdatePlan{}) == "accepted");
}

TEST_CASE_FIXTURE(PlanFixture, "the listed disagreement: priorities that clamp to the same value are refused by the driver and accepted by the plan") {
  // The driver compares the requested priorities but reads back the clamped ones (docs/serving.md,
  // "Update planning"): -15 and -5 both read -5 on the H200.
  InstantiateOptions o;
  o.use_node_priority = true;
  GraphExec exec = build({Spec(Kind::kernel).prio(-15)}).instantiate(o);
  Graph g = build({Spec(Kind::kernel).prio(-5)});
  CHECK(static_cast<bool>(exec.plan_update(g)));
  CHECK(exec.update(g).reason == UpdateResult::Reason::attributes_changed);
  // update_or_reinstantiate still ends with a working executable of g.
  UpdateResult r = exec.update_or_reinstantiate(g);
  CHECK(r.reinstantiated);
  CHECK_FALSE(r.planned);
  CHECK(r.reason == UpdateResult::Reason::attributes_changed);
  exec.launch(stream);
  stream.synchronize();
}

TEST_CASE_FIXTURE(PlanFixture, "plan_update refuses an empty executable or graph and changes nothing") {
  GraphExec empty;
  Graph g = build({Spec(Kind::empty)});
  CHECK_THROWS_WITH_AS((void)empty.plan_update(g), doctest::Contains("GraphExec::plan_update"), UsageError);
  CHECK_THROWS_WITH_AS((void)empty.plan_update(g), doctest::Contains("moved from or empty"), UsageError);
  GraphExec exec = g.instantiate();
  Graph none;
  CHECK_THROWS_WITH_AS((void)exec.plan_update(none), doctest::Contains("GraphExec::plan_update"), UsageError);
  if (simulated) sim::reset_call_counts();
  CHECK(static_cast<bool>(exec.plan_update(g)));
  if (simulated) CHECK(sim::call_count("cuGraphExecUpdate") == 0);
}

TEST_CASE_FIXTURE(PlanFixture, "GM2: a whole update from a graph whose allocation node has another address is accepted, and the executable then uses the new graph's allocation") {
  // The kernel writes through the allocation, a copy brings the result out: after the update the
  // executable must write where the new graph's kernel points, into memory it allocated.
  auto make = [&](float v) {
    Graph g{ctx};
    g.edit([&](Edit& e) {
      AllocResult<float> a = e.alloc<float>(4);
      auto fill = e.after(a.node).launch(k.fill, Grid{1}, Block{4}, a.memory, v, 4);
      auto copy = e.after(fill).memcpy(x, a.memory);
      e.after(copy).free(a.memory);
    });
    return g;
  };
  Graph a = make(1.0f);
  GraphExec exec = a.instantiate();
  exec.launch(stream);
  stream.synchronize();
  CHECK(read(x) == std::vector<float>(4, 1.0f));
  Graph b = make(2.0f);
  CHECK(static_cast<bool>(exec.plan_update(b)));
  REQUIRE(static_cast<bool>(exec.update(b)));
  exec.launch(stream);
  stream.synchronize();
  CHECK(read(x) == std::vector<float>(4, 2.0f));
}

TEST_CASE_FIXTURE(PlanFixture, "an executable instantiated with plan_updates = false keeps no topology: plan_update refuses, update_or_reinstantiate asks the driver") {
  InstantiateOptions o;
  o.plan_updates = false;
  GraphExec exec = build({Spec(Kind::kernel), Spec(Kind::empty, {0})}).instantiate(o);
  Graph other = build({Spec(Kind::kernel), Spec(Kind::host, {0})});
  CHECK_THROWS_WITH_AS((void)exec.plan_update(other), doctest::Contains("plan_updates = false"), UsageError);
  if (simulated) sim::reset_call_counts();
  UpdateResult r = exec.update_or_reinstantiate(other);
  CHECK(r.reinstantiated);
  CHECK_FALSE(r.planned);
  CHECK(r.rule.empty());
  CHECK(r.reason == UpdateResult::Reason::node_type_changed);
  if (simulated) CHECK(sim::call_count("cuGraphExecUpdate") == 1);
  // The executable made again keeps the option.
  CHECK_THROWS_WITH_AS((void)exec.plan_update(other), doctest::Contains("plan_updates = false"), UsageError);
  CHECK(static_cast<bool>(exec.update(build({Spec(Kind::kernel), Spec(Kind::host, {0})}))));
  exec.launch(stream);
  stream.synchronize();
}

TEST_CASE_FIXTURE(PlanFixture, "U1: after an edge from a node with dependencies was removed, the driver refuses whole updates from the graph, and so does the plan") {
  Node<EmptyNode> a, b, c;
  auto three = [&] {
    Graph g{ctx};
    g.edit([&](Edit& e) {
      a = e.empty();
      b = e.after(a).empty();
      c = e.empty();
    });
    return g;
  };
  struct Probe {
    std::string what;
    bool other_graph;
    std::function<void(Graph&)> edits;
    bool accepted;
  };
  const std::vector<Probe> probes = {
      {"an edge from b (which depends on a) added and removed", false,
       [&](Graph& g) {
         g.edit([&](Edit& e) { e.connect(b, c); });
         g.edit([&](Edit& e) { e.disconnect(b, c); });
       },
       false},
      {"the same in another graph", true,
       [&](Graph& g) {
         g.edit([&](Edit& e) { e.connect(b, c); });
         g.edit([&](Edit& e) { e.disconnect(b, c); });
       },
       false},
      {"an edge from b added in an edit rolled back", false,
       [&](Graph& g) {
         Edit e = g.edit();
         e.connect(b, c);
         e.rollback();
       },
       false},
      {"an edge from the root a added and removed", false,
       [&](Graph& g) {
         g.edit([&](Edit& e) { e.connect(a, c); });
         g.edit([&](Edit& e) { e.disconnect(a, c); });
       },
       true},
      {"a node after b added and removed (its edge from b goes with it)", false,
       [&](Graph& g) {
         Node<EmptyNode> d;
         g.edit([&](Edit& e) { d = e.after(b).empty(); });
         g.edit([&](Edit& e) { e.remove(d); });
       },
       false},
      {"a root node added and removed", false,
       [&](Graph& g) {
         Node<EmptyNode> d;
         g.edit([&](Edit& e) { d = e.empty(); });
         g.edit([&](Edit& e) { e.remove(d); });
       },
       true},
      {"a node after the root a added and removed", false,
       [&](Graph& g) {
         Node<EmptyNode> d;
         g.edit([&](Edit& e) { d = e.after(a).empty(); });
         g.edit([&](Edit& e) { e.remove(d); });
       },
       true},
  };
  for (const Probe& p : probes) {
    CAPTURE(p.what);
    Graph g = three();
    GraphExec exec = g.instantiate();
    Graph other = p.other_graph ? three() : Graph{};
    Graph& target = p.other_graph ? other : g;
    p.edits(target);
    UpdatePlan plan = exec.plan_update(target);
    CHECK(static_cast<bool>(plan) == p.accepted);
    if (!p.accepted) CHECK(plan.rule.find("driver fact U1") != std::string::npos);
    UpdateResult r = exec.update(target);
    CHECK(static_cast<bool>(r) == p.accepted);
    if (!p.accepted) CHECK(r.reason == UpdateResult::Reason::topology_changed);
    // A graph made again is accepted.
    CHECK(static_cast<bool>(exec.update(three())));
  }
}

TEST_CASE_FIXTURE(PlanFixture, "after a whole update the H200 accepts from a graph with an edge moved between nodes of one kind, parameter sets refuse to guess the pairing") {
  Param<float> scale(2.0f, "scale");
  auto make = [&](int from) {
    Graph g{ctx};
    g.edit([&](Edit& e) {
      auto k0 = e.launch(k.scale, Grid{1}, Block{4}, x, scale, 4);
      auto k1 = e.launch(k.scale, Grid{1}, Block{4}, y, scale, 4);
      auto last = e.empty();
      e.connect(from == 0 ? Node<>(k0) : Node<>(k1), last);
    });
    return g;
  };
  Graph a = make(1);
  GraphExec exec = a.instantiate();
  Graph b = make(0);
  UpdatePlan plan = exec.plan_update(b);
  CHECK(plan.reason == UpdateResult::Reason::topology_changed);
  UpdateResult r = exec.update(b);
  if (simulated) {
    // The simulator pairs by creation order, as the plan does.
    CHECK(r.reason == UpdateResult::Reason::topology_changed);
    CHECK(exec.set(scale, 3.0f) == 2);
  } else {
    // The H200 pairs by structure and accepts (plan_test's family lists it): tether cannot know
    // which of b's nodes runs in place of which of a's.
    REQUIRE(static_cast<bool>(r));
    CHECK_THROWS_WITH_AS((void)exec.set(scale, 3.0f), doctest::Contains("pairing the nodes by structure"), UsageError);
  }
  exec.launch(stream);
  stream.synchronize();
}
