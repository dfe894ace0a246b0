// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "inspect.hpp"

namespace tether {

namespace {

// A DOT double-quoted string's contents: quotes and backslashes escaped, newlines as DOT's
// left-justified line break.
std::string quoted(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\l";
      continue;
    }
    out += c;
  }
  return out;
}

struct Style {
  const char* shape;
  const char* fill;
};
Style style_of(NodeKind k) noexcept {
  switch (k) {
    case NodeKind::kernel: return {"box", "#d6e4ff"};
    case NodeKind::memcpy: return {"box", "#d9f2d9"};
    case NodeKind::memset: return {"box", "#e8f5c8"};
    case NodeKind::host: return {"box", "#fff0c2"};
    case NodeKind::child_graph: return {"box3d", "#ececec"};
    case NodeKind::empty: return {"ellipse", "#ffffff"};
    case NodeKind::event_record:
    case NodeKind::event_wait: return {"cds", "#f3e0f7"};
    case NodeKind::mem_alloc:
    case NodeKind::mem_free: return {"parallelogram", "#e3f1f7"};
    case NodeKind::conditional: return {"diamond", "#fde0e0"};
    case NodeKind::other: return {"box", "#f4f4f4"};
  }
  return {"box", "#ffffff"};
}

std::string node_id(std::size_t g, std::size_t n) { return fmt::format("g{}n{}", g, n); }

std::string plural(std::size_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

class DotWriter {
 public:
  DotWriter(const Inspection& in, const DotOptions& o) : in_(in), o_(o) {}

  std::string write() {
    out_ += "digraph tether {\n";
    out_ += "  graph [fontname=\"Helvetica\", fontsize=11, compound=true, newrank=true";
    std::string title = o_.title;
    if (in_.executable) {
      std::string summary = fmt::format("executable: {}, {} known complete", plural(in_.launches, "launch", "launches"),
                                        in_.completed);
      title = title.empty() ? summary : title + "\n" + summary;
    }
    if (!title.empty()) out_ += fmt::format(", labelloc=t, label=\"{}\\l\"", quoted(title));
    out_ += "];\n";
    out_ += "  node [fontname=\"Helvetica\", fontsize=10, style=\"filled,rounded\"];\n";
    out_ += "  edge [fontname=\"Helvetica\", fontsize=9];\n";
    if (!in_.graphs.empty()) graph(0, "  ");
    for (const std::string& e : edges_) out_ += "  " + e + "\n";
    out_ += "}\n";
    return std::move(out_);
  }

 private:
  // Writes graph `gi`'s nodes (and, nested, the clusters of the graphs below them) at `pad`.
  void graph(std::size_t gi, const std::string& pad) {
    const GraphInfo& g = in_.graphs[gi];
    if (g.nodes.empty()) out_ += fmt::format("{}g{}empty [label=\"(no nodes)\", shape=plaintext, style=\"\"];\n", pad, gi);
    if (o_.owners && g.anonymous_owners)
      out_ += fmt::format("{}g{}anon [shape=note, style=filled, fillcolor=\"#fffbe6\", label=\"{} without a node\\l(captured "
                          "work, Capture::keeping)\\l\"];\n",
                          pad, gi, plural(g.anonymous_owners, "owner", "owners"));
    for (const NodeInfo& n : g.nodes) {
      node(gi, n, pad);
      for (std::size_t d : n.dependencies) edges_.push_back(fmt::format("{} -> {};", node_id(gi, d), node_id(gi, n.index)));
      versions(gi, n.index, pad);
      for (std::size_t c : n.graphs) cluster(gi, n, c, pad);
    }
  }

  void node(std::size_t gi, const NodeInfo& n, const std::string& pad) {
    Style s = style_of(n.kind);
    std::string label = fmt::format("{}: {}", n.index, to_string(n.kind));
    if (!n.label.empty()) label += " " + n.label;
    if (!n.name.empty()) label += fmt::format(" \"{}\"", n.name);
    if (n.conditional == ConditionalKind::switch_)
      label += fmt::format(" switch ({} case{})", n.graphs.size(), n.graphs.size() == 1 ? "" : "s");
    else if (n.conditional != ConditionalKind::none)
      label += fmt::format(" {}", to_string(n.conditional));
    if (n.child == ChildKind::captured) label += " (captured region)";
    if (n.child == ChildKind::embedded) label += " (embedded copy)";
    label += "\n";
    if (n.grid && n.block)
      label += fmt::format("grid ({},{},{}) block ({},{},{})\n", n.grid->x, n.grid->y, n.grid->z, n.block->x, n.block->y,
                           n.block->z);
    if (o_.owners)
      for (const std::string& o : n.owners) label += "owns " + o + "\n";
    if (!n.tracked) label += "(not made by tether)\n";
    out_ += fmt::format("{}{} [shape={}, fillcolor=\"{}\"{}, label=\"{}\"];\n", pad, node_id(gi, n.index), s.shape, s.fill,
                        n.tracked ? "" : ", style=\"filled,dashed\", color=\"#888888\"", quoted(label));
  }

  // An executable's versions of node (gi, ni), as notes tied to it.
  void versions(std::size_t gi, std::size_t ni, const std::string& pad) {
    if (!in_.executable || !o_.versions) return;
    std::size_t k = 0;
    for (const ExecVersion& v : in_.versions) {
      if (v.graph != gi || v.node != ni) continue;
      if (v.state == ExecVersion::State::instantiated && !o_.instantiated) continue;
      std::string label;
      const char* fill = "#ffffff";
      switch (v.state) {
        case ExecVersion::State::instantiated:
          label = "instantiated version (CUDA keeps it with the executable)\n";
          fill = "#f4f4f4";
          break;
        case ExecVersion::State::updated:
          label = fmt::format("executable's version, updated after launch {}\n", v.since_launch);
          fill = "#e6f7e6";
          break;
        case ExecVersion::State::superseded:
          label = fmt::format("superseded: kept until launch {} completes\n", v.last_launch);
          fill = "#fbe3e4";
          break;
      }
      if (o_.owners)
        for (const std::string& o : v.owners) label += "owns " + o + "\n";
      if (v.owners.empty()) label += "owns nothing\n";
      std::string id = fmt::format("{}v{}", node_id(gi, ni), k++);
      out_ += fmt::format("{}{} [shape=note, style=filled, fillcolor=\"{}\", label=\"{}\"];\n", pad, id, fill, quoted(label));
      edges_.push_back(fmt::format("{} -> {} [style=dotted, arrowhead=none];", node_id(gi, ni), id));
    }
  }

  void cluster(std::size_t gi, const NodeInfo& owner, std::size_t c, const std::string& pad) {
    const GraphInfo& g = in_.graphs[c];
    std::string label = g.role == GraphInfo::Role::body ? fmt::format("{} of node {}", body_name(owner, c), owner.index)
                        : owner.child == ChildKind::captured ? fmt::format("captured region of node {}", owner.index)
                                                             : fmt::format("child graph of node {}", owner.index);
    out_ += fmt::format("{}subgraph cluster_g{} {{\n", pad, c);
    out_ += fmt::format("{}  label=\"{}\"; style=\"rounded,dashed\"; color=\"#777777\";\n", pad, quoted(label));
    graph(c, pad + "  ");
    out_ += pad + "}\n";
    std::string first = g.nodes.empty() ? fmt::format("g{}empty", c) : node_id(c, 0);
    edges_.push_back(fmt::format("{} -> {} [lhead=cluster_g{}, style=dashed, arrowhead=odot, color=\"#777777\"];",
                                 node_id(gi, owner.index), first, c));
  }

  static std::size_t body_index(const NodeInfo& owner, std::size_t c) {
    for (std::size_t i = 0; i < owner.graphs.size(); ++i)
      if (owner.graphs[i] == c) return i;
    return 0;
  }
  // "then body", "else body", "while body", "case 2"; "body 1" for a conditional of unknown kind.
  static std::string body_name(const NodeInfo& owner, std::size_t c) {
    const std::size_t i = body_index(owner, c);
    switch (owner.conditional) {
      case ConditionalKind::if_: return "then body";
      case ConditionalKind::if_else: return i == 0 ? "then body" : "else body";
      case ConditionalKind::while_: return "while body";
      case ConditionalKind::switch_: return fmt::format("case {}", i);
      case ConditionalKind::none: break;
    }
    return fmt::format("body {}", i);
  }

  const Inspection& in_;
  const DotOptions& o_;
  std::string out_;
  std::vector<std::string> edges_;  // after every node, so that clusters hold only their own nodes
};

}  // namespace

std::string to_dot(const Inspection& inspection, const DotOptions& options) {
  return DotWriter(inspection, options).write();
}

}  // namespace tether
