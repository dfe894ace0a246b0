// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// 04 — node updates: an update in an edit gives the graph's node a new version (new buffer, new
// factor) while an executable made before keeps running the old one; a new executable runs the
// new one; a whole update brings the first executable up to date; an update the driver refuses
// (the graph's topology changed) is a value, and the executable keeps running as it was.
import tether;

#include <cstdio>
#include <string>
#include <vector>

#include "twins.hpp"  // examples::register_twins(): what the simulator runs for each kernel of kernels.cu

int main(int, char** argv) try {
  examples::register_twins();
  tether::Runtime rt = tether::Runtime::open();
  tether::Context ctx = rt.context(0);
  tether::Stream stream = ctx.make_stream();
  std::string dir = argv[0];  // kernels.fatbin sits next to the program
  tether::Module mod = ctx.load_module(tether::Image::from_file(dir.substr(0, dir.rfind('/') + 1) + "kernels.fatbin"));
  auto scale = mod.kernel<float*, float, int>("scale");
  constexpr int n = 256;
  const tether::Launch launch{tether::Grid{1}, tether::Block{n}};
  const std::vector<float> ones(n, 1.0f);
  tether::SharedBuffer<float> x = ctx.alloc<float>(n).share(), y = ctx.alloc<float>(n).share();
  x.copy_from(ones);
  y.copy_from(ones);
  auto show = [&](const char* what) {  // runs what was launched, prints x and y
    stream.synchronize();
    std::vector<float> hx(n), hy(n);
    x.copy_to(hx);
    y.copy_to(hy);
    std::printf("%-52s x = %g, y = %g\n", what, hx[0], hy[0]);
    return std::vector<float>{hx[0], hx[n - 1], hy[0], hy[n - 1]};
  };

  // [first]
  tether::Graph g{ctx};
  tether::Node<tether::KernelNode<float*, float, int>> k;
  int host_runs = 0;
  g.edit([&](tether::Edit& e) {
    k = e.launch(scale, launch, x, 2.0f, n);
    e.after(k).host([&host_runs] { ++host_runs; });  // runs after the kernel at every launch
  });
  tether::GraphExec exec = g.instantiate();
  exec.launch(stream);
  show("first launch (the node scales x by 2):");
  // [first]

  // [update]
  g.edit([&](tether::Edit& e) { e.update(k, launch, y, 3.0f, n); });  // the node's next version
  exec.launch(stream);                                                 // the executable's version
  show("the graph's node scales y by 3; the executable x by 2:");
  tether::GraphExec fresh = g.instantiate();
  fresh.launch(stream);
  show("a new executable runs the node's new version:");
  // [update]

  // [whole]
  tether::UpdateResult r = exec.update(g);  // cuGraphExecUpdate: a verdict, not an exception
  std::printf("whole update of the first executable: %s\n", std::string(tether::to_string(r.reason)).c_str());
  exec.launch(stream);
  show("the first executable now runs it too:");
  // [whole]

  // [refused]
  g.edit([&](tether::Edit& e) { e.after(k).launch(scale, launch, x, 10.0f, n); });  // one node more
  r = exec.update(g);
  std::printf("after adding a node, a whole update: %s\n", std::string(tether::to_string(r.reason)).c_str());
  exec.launch(stream);
  std::vector<float> last = show("the executable is unchanged and still runs:");
  // [refused]

  std::printf("the host node ran %d times\n", host_runs);
  const bool ok = r.reason == tether::UpdateResult::Reason::topology_changed && host_runs == 5 &&
                  last == std::vector<float>{4.0f, 4.0f, 27.0f, 27.0f};
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
