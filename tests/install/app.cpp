// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The consumer program of the install test (run.sh), built against an installed tether in every
// way docs/install.md describes: header mode, or `import tether;` when TETHER_CONSUMER_IMPORT is 1.
// TETHER_CONSUMER_HOW names the way in its output. It builds a graph whose memset node owns its
// buffer, runs it, updates the memset in the graph and whole-updates the executable, runs it again.
// In import mode nothing is included before `import tether;`, and after it only headers that declare
// no std::string operator, so that a tether template needing one fails to build here.
#if TETHER_CONSUMER_IMPORT
import tether;
#else
#include <tether/tether.hpp>

#include <string>
#endif

#include <cstdio>
#include <exception>
#include <vector>

#ifndef TETHER_CONSUMER_HOW
#define TETHER_CONSUMER_HOW "unnamed"
#endif

int main() try {
  tether::Runtime rt = tether::Runtime::open();
  tether::Context ctx = rt.context(0);
  tether::Stream stream = ctx.make_stream();
  constexpr int n = 256;
  tether::SharedBuffer<float> x = ctx.alloc<float>(n).share();
  int ran = 0;
  tether::Graph g{ctx};
  tether::Node<tether::MemsetNode> fill;
  g.edit([&](tether::Edit& e) {
    fill = e.memset(x, 7.0f);
    e.after(fill).host([&ran] { ++ran; });
  });
  tether::GraphExec exec = g.instantiate();
  exec.launch(stream);
  stream.synchronize();
  std::vector<float> first(n);
  x.copy_to(first);

  g.edit([&](tether::Edit& e) { e.update(fill, x, 9.0f); });
  const tether::UpdateResult r = exec.update(g);
#if TETHER_CONSUMER_IMPORT
  const auto verdict = tether::to_string(r.reason);  // a std::string_view
#else
  const std::string verdict = fmt::format("{}", r);  // the header's {fmt} formatter: links libfmt
#endif
  exec.launch(stream);
  stream.synchronize();
  std::vector<float> second(n);
  x.copy_to(second);
  std::printf("%s: x = %g then %g (update: %.*s), host node ran %d times\n", TETHER_CONSUMER_HOW,
              first[n - 1], second[n - 1], static_cast<int>(verdict.size()), verdict.data(), ran);
  return first[0] == 7.0f && second[0] == 9.0f && ran == 2 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s: %s\n", TETHER_CONSUMER_HOW, e.what());
  return 1;
}
