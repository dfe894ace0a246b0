// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// examples::picture(name, graph_or_exec): when TETHER_EXAMPLES_DOT_DIR is set, writes
// tether::to_dot of it to $TETHER_EXAMPLES_DOT_DIR/<name>.dot; otherwise does nothing. The
// tutorial's pictures (docs/tutorial/img/) are made this way by tools/pictures.py, which runs the
// examples on the simulator and renders each file with Graphviz. Include after twins.hpp.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace examples {

template <class GraphOrExec>
void picture(const std::string& name, const GraphOrExec& g, const tether::DotOptions& options = {}) {
  const char* dir = std::getenv("TETHER_EXAMPLES_DOT_DIR");
  if (!dir || !*dir) return;
  std::string dot = tether::to_dot(g, options);
  if (std::FILE* f = std::fopen((std::string(dir) + "/" + name + ".dot").c_str(), "w")) {
    std::fwrite(dot.data(), 1, dot.size(), f);
    std::fclose(f);
  }
}

}  // namespace examples
