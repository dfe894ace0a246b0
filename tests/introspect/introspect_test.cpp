// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Introspection (docs/introspection.md): inspect, to_dot, node enumeration, views from nodes,
// identity and hashing of handles, adopting raw graphs and the driver's own DOT. Runs on both
// drivers.
#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "support/dsl_fixture.hpp"
#include "support/messages.hpp"

using namespace tether;
using namespace tether_test;
using detail::Entry;

TEST_SUITE_BEGIN("introspect");

namespace {


std::size_t count(const std::string& s, std::string_view part) {
  std::size_t n = 0;
  for (std::size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
  return n;
}

// A graph with every structure the pictures show: a memset feeding a kernel, a host node, an
// embedded child graph (itself a kernel), a while loop whose body scales, and a captured region.
struct Rich {
  Graph g;
  Node<MemsetNode> fill;
  Node<KernelNode<float*, float, int>> kernel;
  Node<ChildNode> child;
  GraphRef child_graph;
  Node<ConditionalNode> loop;
  BodyRef body;
  CaptureResult captured;
};

Rich rich(DslFixture& f, const SharedBuffer<float>& x, const std::shared_ptr<std::atomic<int>>& counter) {
  Rich r{Graph{f.ctx}, {}, {}, {}, {}, {}, {}, {}};
  Graph inner{f.ctx};
  inner.edit([&](Edit& e) { e.launch(f.k.scale, Grid{1}, Block{64}, x, 1.0f, 64); });
  DeviceBuffer<int> count_down = f.ctx.alloc<int>(1);
  Stream side = f.ctx.make_stream();
  r.g.edit([&](Edit& e) {
    r.fill = e.memset(x, 1.0f);
    r.kernel = e.after(r.fill).launch(f.k.scale, Grid{1}, Block{64}, x, 2.0f, 64);
    e.after(r.kernel).host([counter] { counter->fetch_add(1); });
    EmbedResult em = e.after(r.kernel).embed(inner);
    r.child = em.node;
    r.child_graph = em.graph;
    Condition c = e.condition(0, true);
    WhileResult w = e.after(r.kernel).while_(c);
    r.loop = w.node;
    r.body = w.body;
    e.in(w.body).launch(f.k.scale, Grid{1}, Block{64}, x, 1.0f, 64);
    r.captured = e.after(r.kernel).capture(side, [&](Capture&) { side.memset(x, 3.0f); });
  });
  return r;
}

}  // namespace

TEST_CASE_FIXTURE(DslFixture, "inspect lists every node with its kind, dependencies and owners, and every child graph, "
                              "conditional body and captured region below it") {
  SharedBuffer<float> x = buffer(64, 0.0f);
  auto counter = std::make_shared<std::atomic<int>>(0);
  Rich r = rich(*this, x, counter);
  Inspection in = inspect(r.g);
  CHECK_FALSE(in.executable);
  REQUIRE(in.graphs.size() == 4);  // root, the embedded copy, the while body, the captured region
  const GraphInfo& root = in.graphs[0];
  CHECK(root.role == GraphInfo::Role::root);
  REQUIRE(root.nodes.size() == 6);
  CHECK(root.nodes[0].kind == NodeKind::memset);
  CHECK(root.nodes[0].owners == std::vector<std::string>{"SharedBuffer<float>[64]"});
  CHECK(root.nodes[0].dependencies.empty());
  CHECK(root.nodes[1].kind == NodeKind::kernel);
  CHECK(root.nodes[1].label == "scale");
  CHECK(root.nodes[1].owners == std::vector<std::string>{"kernel scale", "SharedBuffer<float>[64]"});
  CHECK(root.nodes[1].dependencies == std::vector<std::size_t>{0});
  CHECK(root.nodes[1].node == Node<>(r.kernel));
  CHECK(root.nodes[2].kind == NodeKind::host);
  REQUIRE(root.nodes[2].owners.size() == 1);
  CHECK(contains(root.nodes[2].owners[0], "lambda at introspect_test.cpp:"));
  CHECK(root.nodes[3].kind == NodeKind::child_graph);
  CHECK(root.nodes[4].kind == NodeKind::conditional);
  CHECK(root.nodes[5].kind == NodeKind::child_graph);  // the captured region
  for (std::size_t i = 2; i < 6; ++i) CHECK(root.nodes[i].dependencies == std::vector<std::size_t>{1});
  for (const NodeInfo& n : root.nodes) CHECK(n.tracked);
  // The graphs below, each tied to its node.
  REQUIRE(root.nodes[3].graphs.size() == 1);
  const GraphInfo& child = in.graphs[root.nodes[3].graphs[0]];
  CHECK(child.role == GraphInfo::Role::child);
  CHECK(child.parent == 0);
  CHECK(child.parent_node == 3);
  REQUIRE(child.nodes.size() == 1);
  CHECK(child.nodes[0].owners == std::vector<std::string>{"kernel scale", "SharedBuffer<float>[64]"});
  REQUIRE(root.nodes[4].graphs.size() == 1);
  const GraphInfo& body = in.graphs[root.nodes[4].graphs[0]];
  CHECK(body.role == GraphInfo::Role::body);
  CHECK(body.parent_node == 4);
  REQUIRE(body.nodes.size() == 1);
  CHECK(body.nodes[0].label == "scale");
  REQUIRE(root.nodes[5].graphs.size() == 1);
  const GraphInfo& region = in.graphs[root.nodes[5].graphs[0]];
  REQUIRE(region.nodes.size() == 1);
  CHECK(region.nodes[0].kind == NodeKind::memset);
  CHECK(region.nodes[0].owners == std::vector<std::string>{"SharedBuffer<float>[64]"});
  CHECK(in.node_count() == 9);
  CHECK(in.owner_count() == 9);  // 1 + 2 + 1 (root), 2 (child), 2 (body), 1 (region)
  // A view inspects its own graph and what is below it.
  Inspection of_body = inspect(r.body);
  REQUIRE(of_body.graphs.size() == 1);
  CHECK(of_body.graphs[0].role == GraphInfo::Role::body);
  CHECK(to_string(of_body.graphs[0].nodes[0]) == "kernel scale <<<(1,1,1), (64,1,1)>>> owns {kernel scale, SharedBuffer<float>[64]}");
  CHECK(fmt::format("{}", of_body.graphs[0].nodes[0]) == to_string(of_body.graphs[0].nodes[0]));
  std::string text = fmt::format("{}", in);
  CHECK(contains(text, "graph 0 (root): 6 nodes\n"));
  CHECK(contains(text, "  graph 1 (child of graph 0 node 3): 1 node\n"));
  CHECK(contains(text, "  [1] kernel scale <<<(1,1,1), (64,1,1)>>> <- [0] owns {kernel scale, SharedBuffer<float>[64]}\n"));
}

TEST_CASE_FIXTURE(DslFixture, "inspect of an executable shows the instantiated version, the executable's own update and a "
                              "superseded version with the launch it waits for, and the superseded one goes once that "
                              "launch is known complete") {
  SharedBuffer<float> x = buffer(64, 1.0f), y = buffer(64, 1.0f), z = buffer(64, 1.0f);
  Graph g{ctx};
  Node<KernelNode<float*, float, int>> n;
  g.edit([&](Edit& e) { n = e.launch(k.scale, Grid{1}, Block{64}, x, 2.0f, 64); });
  GraphExec exec = g.instantiate();
  exec.update(n, Grid{1}, Block{64}, y, 3.0f, 64);  // the executable's own version, before any launch
  exec.launch(stream);
  exec.update(n, Grid{1}, Block{64}, z, 4.0f, 64);  // supersedes y's version, which launch 1 may use
  Inspection in = inspect(exec);
  CHECK(in.executable);
  CHECK(in.launches == 1);
  REQUIRE(in.versions.size() == 3);
  CHECK(in.versions[0].state == ExecVersion::State::instantiated);
  CHECK(in.versions[0].owners == std::vector<std::string>{"kernel scale", "SharedBuffer<float>[64]"});
  CHECK(in.versions[1].state == ExecVersion::State::updated);
  CHECK(in.versions[1].since_launch == 1);
  CHECK(in.versions[2].state == ExecVersion::State::superseded);
  CHECK(in.versions[2].last_launch == 1);
  for (const ExecVersion& v : in.versions) {
    CHECK(v.graph == 0);
    CHECK(v.node == 0);
  }
  std::string dot = to_dot(exec);
  CHECK(contains(dot, "executable: 1 launch, 0 known complete"));
  CHECK(contains(dot, "superseded: kept until launch 1 completes"));
  CHECK(contains(dot, "executable's version, updated after launch 1"));
  CHECK_FALSE(contains(dot, "instantiated version"));  // only with DotOptions::instantiated
  DotOptions all;
  all.instantiated = true;
  CHECK(contains(to_dot(exec, all), "instantiated version (CUDA keeps it with the executable)"));
  CHECK(contains(to_string(in), "graph 0 node 0: superseded, kept until launch 1 completes owns {kernel scale, "
                                "SharedBuffer<float>[64]}"));
  stream.synchronize();
  exec.reclaim(stream);
  CHECK(eventually([&] {
    Inspection now = inspect(exec);
    return now.completed == 1 && now.versions.size() == 2;
  }));
  // A whole update from the same graph: the graph's current version becomes the instantiated one.
  UpdateResult u = exec.update(g);
  CHECK(u);
  Inspection after = inspect(exec);
  CHECK_FALSE(after.updated_from_other_graph);
  REQUIRE_FALSE(after.versions.empty());
  CHECK(after.versions[0].state == ExecVersion::State::instantiated);
}

TEST_CASE_FIXTURE(DslFixture, "to_dot draws nodes by kind, dependencies, clusters for child graphs and bodies, owners and "
                              "anonymous owners, deterministically and without addresses") {
  SharedBuffer<float> x = buffer(64, 0.0f);
  auto counter = std::make_shared<std::atomic<int>>(0);
  Rich r = rich(*this, x, counter);
  DotOptions o;
  o.title = "a \"rich\" graph";
  std::string dot = to_dot(r.g, o);
  CHECK(dot.starts_with("digraph tether {\n"));
  CHECK(dot.ends_with("}\n"));
  CHECK(contains(dot, "label=\"a \\\"rich\\\" graph\\l\""));
  CHECK(contains(dot, "g0n1 [shape=box, fillcolor=\"#d6e4ff\", label=\"1: kernel scale\\lgrid (1,1,1) block (64,1,1)\\lowns "
                      "kernel scale\\lowns SharedBuffer<float>[64]\\l\"];"));
  CHECK(contains(dot, "g0n0 -> g0n1;"));
  CHECK(count(dot, "subgraph cluster_g") == 3);
  CHECK(contains(dot, "label=\"child graph of node 3\""));
  CHECK(contains(dot, "label=\"while body of node 4\""));
  CHECK(contains(dot, "label=\"captured region of node 5\""));
  CHECK(contains(dot, "g0n4 -> g2n0 [lhead=cluster_g2"));
  CHECK(contains(dot, "shape=diamond"));
  CHECK_FALSE(contains(dot, "0x"));
  CHECK(to_dot(r.g, o) == dot);
  DotOptions bare;
  bare.owners = false;
  CHECK_FALSE(contains(to_dot(r.g, bare), "owns "));
  // Anonymous owners appear on their graph.
  Stream s = ctx.make_stream();
  Graph captured = capture(s, [&](Capture& c) {
    s.memset(x, 2.0f);
    c.keeping(Owners{x});
  });
  CHECK(inspect(captured).graphs[0].anonymous_owners == 1);
  CHECK(contains(to_dot(captured), "1 owner without a node"));
}

TEST_CASE_FIXTURE(DslFixture, "nodes, roots and edges enumerate a graph and its views, and child and bodies give views "
                              "that compare equal to the ones the edit returned") {
  SharedBuffer<float> x = buffer(64, 0.0f);
  auto counter = std::make_shared<std::atomic<int>>(0);
  Rich r = rich(*this, x, counter);
  std::vector<Node<>> nodes = r.g.nodes();
  REQUIRE(nodes.size() == 6);
  CHECK(nodes[0] == Node<>(r.fill));
  CHECK(r.g.roots() == std::vector<Node<>>{Node<>(r.fill)});
  std::vector<Edge> edges = r.g.edges();
  CHECK(edges.size() == 5);
  CHECK(std::find(edges.begin(), edges.end(), Edge{r.fill, r.kernel}) != edges.end());
  GraphRef child = r.g.child(r.child);
  CHECK(child == r.child_graph);
  CHECK(child.nodes().size() == 1);
  std::vector<BodyRef> bodies = r.g.bodies(r.loop);
  REQUIRE(bodies.size() == 1);
  CHECK(bodies[0] == r.body);
  CHECK(bodies[0].nodes().size() == 1);
  CHECK(r.g.child(r.captured.node) == r.captured.graph);
  // Handles and views key unordered containers.
  std::unordered_set<Node<>> set(nodes.begin(), nodes.end());
  CHECK(set.size() == 6);
  CHECK(set.count(Node<>(r.kernel)) == 1);
  std::unordered_map<GraphRef, int> views{{child, 1}};
  CHECK(views.at(r.child_graph) == 1);
  CHECK(std::hash<Node<KernelNode<float*, float, int>>>{}(r.kernel) == std::hash<Node<>>{}(Node<>(r.kernel)));
  CHECK(to_string(r.kernel) == "Node(kernel)");
  CHECK(fmt::format("{}", r.loop) == "Node(conditional)");
  // Bad input names what was wrong.
  CHECK(contains(message_of([&] { (void)r.g.child(r.kernel); }), "Graph::child: the node is a kernel node, not a child "
                                                                  "graph node"));
  CHECK(contains(message_of([&] { (void)r.g.bodies(r.child); }), "not a conditional node"));
  CHECK(contains(message_of([&] { (void)child.child(r.child); }), "the node is not in this graph"));
  Graph other{ctx};
  CHECK(contains(message_of([&] { (void)other.child(r.child); }), "invalid, or not of this graph"));
  CHECK(contains(message_of([&] { (void)r.g.child(Node<>{}); }), "invalid, or not of this graph"));
  // A removed node's handle stops matching, and its hash stays what it was.
  std::size_t before = std::hash<Node<>>{}(nodes[2]);
  r.g.edit([&](Edit& e) { e.remove(nodes[2]); });
  CHECK(std::hash<Node<>>{}(nodes[2]) == before);
  CHECK(r.g.nodes().size() == 5);
  CHECK(to_string(nodes[2]) == "Node(invalid)");
}

TEST_CASE_FIXTURE(DslFixture, "Graph::adopt takes a raw graph other code made, child graphs included: its nodes own "
                              "nothing, later edits own theirs, and the graph is destroyed with the Graph") {
  const detail::DriverTable& t = table();
  CUgraph raw = nullptr, inner = nullptr;
  detail::call<Entry::cuGraphCreate>(t, "create", &raw, 0u);
  detail::call<Entry::cuGraphCreate>(t, "create", &inner, 0u);
  CUgraphNode a = nullptr, b = nullptr, c = nullptr;
  detail::call<Entry::cuGraphAddEmptyNode>(t, "empty", &a, inner, static_cast<const CUgraphNode*>(nullptr), std::size_t{0});
  detail::call<Entry::cuGraphAddEmptyNode>(t, "empty", &b, raw, static_cast<const CUgraphNode*>(nullptr), std::size_t{0});
  detail::call<Entry::cuGraphAddChildGraphNode>(t, "child", &c, raw, &b, std::size_t{1}, inner);
  detail::call<Entry::cuGraphDestroy>(t, "destroy", inner);  // the node holds its own copy
  CHECK(contains(message_of([&] { (void)Graph::adopt(ctx, nullptr); }), "Graph::adopt: the graph is null"));
  std::size_t graphs = live_graphs();
  {
    Graph g = Graph::adopt(ctx, raw);
    CHECK(live_graphs() == graphs + 1);
    CHECK(g.get() == raw);
    CHECK(contains(message_of([&] { (void)Graph::adopt(ctx, raw); }), "already held by a tether Graph"));
    Inspection in = inspect(g);
    REQUIRE(in.graphs.size() == 2);
    REQUIRE(in.graphs[0].nodes.size() == 2);
    CHECK_FALSE(in.graphs[0].nodes[0].tracked);
    CHECK(in.graphs[0].nodes[1].kind == NodeKind::child_graph);
    CHECK(in.graphs[0].nodes[1].dependencies == std::vector<std::size_t>{0});
    CHECK(in.graphs[1].nodes.size() == 1);
    CHECK(contains(to_string(in.graphs[0].nodes[0]), "(not made by tether: owns nothing)"));
    CHECK(contains(to_dot(in), "(not made by tether)"));
    CHECK(contains(message_of([&] { (void)Graph::adopt(ctx, g.child(g.nodes()[1]).get()); }), "already held"));
    // Later edits own what they use, and the adopted nodes take part in dependencies.
    SharedBuffer<float> x = buffer(64, 1.0f);
    std::vector<Node<>> nodes = g.nodes();
    g.edit([&](Edit& e) { e.after(nodes[1]).launch(k.scale, Grid{1}, Block{64}, x, 5.0f, 64); });
    Inspection now = inspect(g);
    REQUIRE(now.graphs[0].nodes.size() == 3);
    CHECK(now.graphs[0].nodes[2].tracked);
    CHECK(now.graphs[0].nodes[2].dependencies == std::vector<std::size_t>{1});
    GraphExec exec = g.instantiate();
    exec.launch(stream);
    stream.synchronize();
    CHECK(read(x) == std::vector<float>(64, 5.0f));
    // A clone keeps the adopted nodes untracked.
    Graph copy = g.clone();
    CHECK_FALSE(inspect(copy).graphs[0].nodes[0].tracked);
  }
  CHECK(eventually([&] { return live_graphs() == graphs; }));
}

TEST_CASE_FIXTURE(DslFixture, "work other code captures into a tether capture is listed as untracked, beside tether's "
                              "own captured nodes") {
  SharedBuffer<float> x = buffer(64, 0.0f);
  Stream s = ctx.make_stream();
  Graph g = capture(s, [&](Capture&) {
    s.memset(x, 1.0f);
    detail::call<Entry::cuMemsetD32Async>(table(), "raw memset", x.address(), 0u, std::size_t{64}, s.get());
  });
  Inspection in = inspect(g);
  REQUIRE(in.graphs[0].nodes.size() == 2);
  std::size_t tracked = 0;
  for (const NodeInfo& n : in.graphs[0].nodes) tracked += n.tracked ? 1 : 0;
  CHECK(tracked == 1);
}

TEST_CASE_FIXTURE(DslFixture, "debug_dot_print writes the driver's own DOT picture, and a path it cannot write is a "
                              "DriverError naming cuGraphDebugDotPrint and the path") {
  Graph g{ctx};
  SharedBuffer<float> x = buffer(64, 0.0f);
  g.edit([&](Edit& e) { e.launch(k.scale, Grid{1}, Block{64}, x, 2.0f, 64); });
  std::string path = "/tmp/tether_introspect_" + std::to_string(::getpid()) + ".dot";
  debug_dot_print(g, path);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(contains(text.str(), "digraph"));
  std::remove(path.c_str());
  std::string m = message_of([&] { debug_dot_print(g, "/nonexistent-dir/x.dot"); });
  CHECK(contains(m, "cuGraphDebugDotPrint"));
  CHECK(contains(m, "/nonexistent-dir/x.dot"));
}

TEST_CASE_FIXTURE(DslFixture, "inspect and the queries refuse empty objects, an open edit of the same graph and host "
                              "callbacks, saying which") {
  Graph empty{ctx};
  Graph moved = std::move(empty);
  CHECK(contains(message_of([&] { (void)inspect(empty); }), "tether::inspect: this Graph is moved from or empty"));
  CHECK(contains(message_of([&] { (void)empty.nodes(); }), "Graph::nodes: this Graph is moved from or empty"));
  CHECK(contains(message_of([&] { (void)to_dot(empty); }), "moved from or empty"));
  GraphExec none = moved.instantiate();
  GraphExec taken = std::move(none);
  CHECK(contains(message_of([&] { (void)inspect(none); }), "tether::inspect: this GraphExec is moved from or empty"));
  CHECK(contains(message_of([&] { (void)inspect(GraphRef{}); }), "this graph view is invalid or empty"));
  CHECK(contains(message_of([&] { (void)GraphRef{}.edges(); }), "GraphRef::edges"));
  std::string in_edit;
  moved.edit([&](Edit&) { in_edit = message_of([&] { (void)inspect(moved); }); });
  CHECK(contains(in_edit, "tether::inspect"));
  auto from_callback = std::make_shared<std::string>();
  Graph g{ctx};
  g.edit([&](Edit& e) {
    e.host([from_callback, &moved] { *from_callback = message_of([&] { (void)inspect(moved); }); });
  });
  GraphExec exec = g.instantiate();
  exec.launch(stream);
  stream.synchronize();
  CHECK(contains(*from_callback, "tether::inspect"));
  CHECK(contains(*from_callback, "host callback"));
}

// ------------------------------------------------------------------ names and node details (0.5)

TEST_CASE_FIXTURE(DslFixture, "names given to buffers and to nodes in an edit are shown by inspect, to_string and to_dot") {
  SharedBuffer<float> x = ctx.alloc<float>(64).named("x").share();
  SharedBuffer<float> y = ctx.alloc<float>(64).share();
  Graph g{ctx};
  Node<KernelNode<float*, const float*, float, int>> axpy;
  g.edit([&](Edit& e) {
    Node<MemsetNode> zero = e.name(e.memset(y, 0.0f), "zero y");
    axpy = e.name(e.after(zero).launch(k.axpy, Grid{2}, Block{32}, y, x, 2.0f, 64), "axpy");
  });
  Inspection in = inspect(g);
  REQUIRE(in.graphs[0].nodes.size() == 2);
  const NodeInfo& zero = in.graphs[0].nodes[0];
  const NodeInfo& kernel = in.graphs[0].nodes[1];
  CHECK(zero.name == "zero y");
  CHECK(zero.owners == std::vector<std::string>{"SharedBuffer<float>[64]"});
  CHECK(kernel.name == "axpy");
  CHECK(kernel.node == Node<>(axpy));
  CHECK(kernel.owners == std::vector<std::string>{"kernel axpy", "SharedBuffer<float>[64]", "SharedBuffer<float>[64] \"x\""});
  CHECK(to_string(kernel) == "kernel axpy \"axpy\" <<<(2,1,1), (32,1,1)>>> <- [0] owns {kernel axpy, "
                             "SharedBuffer<float>[64], SharedBuffer<float>[64] \"x\"}");
  std::string dot = to_dot(g);
  CHECK(contains(dot, "label=\"1: kernel axpy \\\"axpy\\\"\\lgrid (2,1,1) block (32,1,1)\\lowns kernel axpy\\lowns "
                      "SharedBuffer<float>[64]\\lowns SharedBuffer<float>[64] \\\"x\\\"\\l\""));
  CHECK(contains(dot, "label=\"0: memset \\\"zero y\\\"\\l"));
  CHECK(to_dot(g) == dot);
  // A clone carries the names; renaming the source afterwards leaves the clone's.
  Graph copy = g.clone();
  g.edit([&](Edit& e) { e.name(axpy, "renamed"); });
  CHECK(inspect(copy).graphs[0].nodes[1].name == "axpy");
  CHECK(inspect(g).graphs[0].nodes[1].name == "renamed");
  // An empty name removes it.
  g.edit([&](Edit& e) { e.name(axpy, ""); });
  CHECK(inspect(g).graphs[0].nodes[1].name.empty());
  CHECK_FALSE(contains(to_string(inspect(g)), "\"renamed\""));
}

TEST_CASE_FIXTURE(DslFixture, "node names are part of the edit's transaction: a rollback restores the names before it and "
                              "drops those of the nodes it removes") {
  SharedBuffer<float> x = buffer(8, 0.0f);
  Graph g{ctx};
  Node<EmptyNode> a;
  g.edit([&](Edit& e) { a = e.name(e.empty(), "first"); });
  struct Abort {};
  const std::vector<std::pair<std::string, std::function<void(Edit&)>>> rolled_back = {
      {"renamed", [&](Edit& e) { e.name(a, "second"); }},
      {"renamed twice", [&](Edit& e) {
         e.name(a, "second");
         e.name(a, "third");
       }},
      {"name removed", [&](Edit& e) { e.name(a, ""); }},
      {"a new named node", [&](Edit& e) { e.name(e.after(a).memset(x, 1.0f), "new"); }},
  };
  for (const auto& [what, change] : rolled_back) {
    SUBCASE(what.c_str()) {
      CHECK_THROWS_AS(g.edit([&](Edit& e) {
        change(e);
        throw Abort{};
      }),
                      Abort);
      Inspection in = inspect(g);
      REQUIRE(in.graphs[0].nodes.size() == 1);
      CHECK(in.graphs[0].nodes[0].name == "first");
      // The record the rolled-back node used is recycled without its name.
      g.edit([&](Edit& e) { e.after(a).empty(); });
      Inspection after = inspect(g);
      REQUIRE(after.graphs[0].nodes.size() == 2);
      CHECK(after.graphs[0].nodes[1].name.empty());
    }
  }
  SUBCASE("a committed removal drops the name with the node") {
    g.edit([&](Edit& e) { e.remove(a); });
    g.edit([&](Edit& e) { e.empty(); });
    Inspection in = inspect(g);
    REQUIRE(in.graphs[0].nodes.size() == 1);
    CHECK(in.graphs[0].nodes[0].name.empty());
  }
}

TEST_CASE_FIXTURE(DslFixture, "Edit::name refuses invalid handles, nodes of another graph and names with control "
                              "characters, saying which, and changes nothing") {
  Graph g{ctx}, other{ctx};
  Node<EmptyNode> mine, theirs;
  g.edit([&](Edit& e) { mine = e.name(e.empty(), "kept"); });
  other.edit([&](Edit& e) { theirs = e.empty(); });
  const std::vector<std::tuple<std::string, std::function<void(Edit&)>, std::vector<std::string_view>>> refused = {
      {"default handle", [&](Edit& e) { e.name(Node<>{}, "x"); }, {"Edit::name: the node to name", "no longer valid"}},
      {"node of another graph", [&](Edit& e) { e.name(theirs, "x"); }, {"Edit::name: the node to name", "another graph"}},
      {"newline", [&](Edit& e) { e.name(mine, "a\nb"); }, {"Edit::name", "control character (code 10)"}},
      {"tab", [&](Edit& e) { e.name(mine, "a\tb"); }, {"Edit::name", "control character (code 9)"}},
  };
  for (const auto& [what, call, needles] : refused) {
    SUBCASE(what.c_str()) {
      std::string m = message_of([&] { g.edit([&](Edit& e) { call(e); }); });
      for (std::string_view n : needles) CHECK_MESSAGE(contains(m, n), m);
      Inspection in = inspect(g);
      REQUIRE(in.graphs[0].nodes.size() == 1);
      CHECK(in.graphs[0].nodes[0].name == "kept");
    }
  }
}

TEST_CASE_FIXTURE(DslFixture, "inspect and to_dot show each conditional's kind with its number of bodies, and label the "
                              "bodies by their role") {
  struct Shape {
    std::string name;
    std::function<Node<ConditionalNode>(Edit&, Condition&)> make;
    ConditionalKind kind;
    std::size_t bodies;
    std::string text;                  // in to_string(NodeInfo)
    std::vector<std::string> clusters; // cluster labels in to_dot
  };
  const std::vector<Shape> shapes = {
      {"if", [](Edit& e, Condition& c) { return e.if_(c).node; }, ConditionalKind::if_, 1, "conditional if",
       {"then body of node 0"}},
      {"if/else", [](Edit& e, Condition& c) { return e.if_else(c).node; }, ConditionalKind::if_else, 2,
       "conditional if/else", {"then body of node 0", "else body of node 0"}},
      {"while", [](Edit& e, Condition& c) { return e.while_(c).node; }, ConditionalKind::while_, 1, "conditional while",
       {"while body of node 0"}},
      {"switch of 3", [](Edit& e, Condition& c) { return e.switch_(c, 3).node; }, ConditionalKind::switch_, 3,
       "conditional switch (3 cases)", {"case 0 of node 0", "case 1 of node 0", "case 2 of node 0"}},
      {"switch of 1", [](Edit& e, Condition& c) { return e.switch_(c, 1).node; }, ConditionalKind::switch_, 1,
       "conditional switch (1 case)", {"case 0 of node 0"}},
  };
  for (const Shape& s : shapes) {
    SUBCASE(s.name.c_str()) {
      Graph g{ctx};
      g.edit([&](Edit& e) {
        Condition c = e.condition(0, true);
        s.make(e, c);
      });
      Inspection in = inspect(g);
      REQUIRE(in.graphs[0].nodes.size() == 1);
      const NodeInfo& n = in.graphs[0].nodes[0];
      CHECK(n.kind == NodeKind::conditional);
      CHECK(n.conditional == s.kind);
      CHECK(n.graphs.size() == s.bodies);
      CHECK(n.child == ChildKind::none);
      CHECK_FALSE(n.grid.has_value());
      CHECK(to_string(n) == s.text);
      std::string dot = to_dot(g);
      for (const std::string& c : s.clusters) CHECK_MESSAGE(contains(dot, "label=\"" + c + "\""), c);
      CHECK(count(dot, "subgraph cluster_g") == s.bodies);
    }
  }
  CHECK(to_string(ConditionalKind::none) == "none");
  CHECK(to_string(ChildKind::captured) == "captured");
}

TEST_CASE_FIXTURE(DslFixture, "inspect tells a captured region from an embedded copy, also in a clone and an embedded "
                              "copy of the graph, and gives every kernel node its grid and block") {
  SharedBuffer<float> x = buffer(256, 0.0f);
  auto counter = std::make_shared<std::atomic<int>>(0);
  Rich r = rich(*this, x, counter);
  auto check = [](const Inspection& in) {
    const GraphInfo& root = in.graphs[0];
    REQUIRE(root.nodes.size() == 6);
    CHECK(root.nodes[3].child == ChildKind::embedded);
    CHECK(to_string(root.nodes[3]) == "child_graph (embedded) <- [1]");
    CHECK(root.nodes[5].child == ChildKind::captured);
    CHECK(to_string(root.nodes[5]) == "child_graph (captured) <- [1]");
    CHECK(root.nodes[4].conditional == ConditionalKind::while_);
    for (const NodeInfo& n : root.nodes) {
      if (n.kind != NodeKind::child_graph) CHECK(n.child == ChildKind::none);
      CHECK(n.grid.has_value() == (n.kind == NodeKind::kernel));
      CHECK(n.block.has_value() == (n.kind == NodeKind::kernel));
    }
    REQUIRE(root.nodes[1].grid);
    CHECK(root.nodes[1].grid->x == 1);
    CHECK(root.nodes[1].block->x == 64);
    CHECK(root.nodes[1].block->y == 1);
  };
  check(inspect(r.g));
  std::string dot = to_dot(r.g);
  CHECK(contains(dot, "3: child_graph (embedded copy)\\l"));
  CHECK(contains(dot, "5: child_graph (captured region)\\l"));
  CHECK(contains(dot, "4: conditional while\\l"));
  // 3-D dimensions, read back from the driver.
  Graph g{ctx};
  g.edit([&](Edit& e) { e.launch(k.fill, Grid{2, 3, 1}, Block{4, 2, 2}, x, 1.0f, 256); });
  NodeInfo n = inspect(g).graphs[0].nodes[0];
  REQUIRE(n.grid);
  CHECK((n.grid->x == 2 && n.grid->y == 3 && n.grid->z == 1));
  CHECK((n.block->x == 4 && n.block->y == 2 && n.block->z == 2));
  // An embedded copy of a graph holding a captured region keeps the region's origin.
  Graph region{ctx};
  Stream side = ctx.make_stream();
  region.edit([&](Edit& e) { e.capture(side, [&](Capture&) { side.memset(x, 1.0f); }); });
  Graph outer{ctx};
  outer.edit([&](Edit& e) { e.embed(region); });
  Inspection o = inspect(outer);
  REQUIRE(o.graphs.size() == 3);
  CHECK(o.graphs[0].nodes[0].child == ChildKind::embedded);
  CHECK(o.graphs[1].nodes[0].child == ChildKind::captured);
  Graph copy = region.clone();
  CHECK(inspect(copy).graphs[0].nodes[0].child == ChildKind::captured);
}
