// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// 02 — ownership: nodes keep what they use. The program drops its module, kernel and buffer right
// after building, and hands a host node the state its callable works on; a clone and an executable
// keep their own versions; a per-node executable update leaves the graph alone; node handles own
// nothing, yet stay usable while an executable made from the graph lives; owners (the host node's
// state too) are released only when the last consumer is gone.
import tether;

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "twins.hpp"  // the simulator twins of kernels.cu: examples::register_twins()

int main(int, char** argv) try {
  examples::register_twins();
  tether::Runtime rt = tether::Runtime::open();
  tether::Context ctx = rt.context(0);
  tether::Stream stream = ctx.make_stream();
  constexpr int n = 256;
  const tether::Launch launch{tether::Grid{1}, tether::Block{n}};
  // [build]
  tether::Graph g{ctx};
  tether::Node<tether::KernelNode<float*, float, int>> k;  // a handle: owns nothing
  tether::Unowned<float> peek;                            // only to read results: not retained
  auto runs = std::make_shared<std::atomic<int>>(0);      // state for a host node...
  std::weak_ptr<std::atomic<int>> watch = runs;           // ...watched without keeping it alive
  {
    std::string dir = argv[0];
    tether::Module mod = ctx.load_module(tether::Image::from_file(dir.substr(0, dir.rfind('/') + 1) + "kernels.fatbin"));
    auto scale = mod.kernel<float*, float, int>("scale");
    tether::DeviceBuffer<float> x = ctx.alloc<float>(n);
    std::vector<float> ones(n, 1.0f);
    x.copy_from(ones);
    peek = tether::unowned(x);
    g.edit([&](tether::Edit& e) {
      k = e.launch(scale, launch, std::move(x), 2.0f, n);  // the node owns x now
      e.after(k).host([runs = std::move(runs)] { runs->fetch_add(1); });  // and this one the state
    });
  }  // module, kernel and the program's handle to x are gone; the graph keeps them
  // [build]

  // [consumers]
  tether::Graph copy = g.clone();          // keeps its own references to the same owners
  tether::GraphExec exec = g.instantiate();
  g.reset();                               // the executable keeps the graph's definition:
  std::printf("graph dropped; its node handle is %s\n", k.valid() ? "still valid" : "invalid");
  exec.update(k, launch, peek, 5.0f, n);   // so its nodes stay updatable (executable only; unowned)
  exec.launch(stream);                     // x *= 5
  stream.synchronize();
  tether::GraphExec from_copy = copy.instantiate();
  from_copy.launch(stream);                // the clone still has factor 2: x *= 2
  stream.synchronize();
  // [consumers]

  tether::SharedBuffer<float> out = ctx.alloc<float>(n).share();
  tether::Graph reader{ctx};
  reader.edit([&](tether::Edit& e) { e.memcpy(out, peek); });
  tether::GraphExec copier = reader.instantiate();
  copier.launch(stream);
  stream.synchronize();
  std::vector<float> h(n);
  out.copy_to(h);
  std::printf("x[0] = %g (1 * 5 * 2); the host node ran %d times\n", h[0], watch.lock()->load());

  // [release]
  // Drop everything: the owners go on the reclaimer once CUDA lets go of the last reference.
  for (tether::GraphExec* e : {&exec, &from_copy, &copier}) e->reset();
  copy.reset();
  reader.reset();
  std::printf("executable dropped; the node handle is %s\n", k.valid() ? "still valid" : "invalid");
  bool released = tether::wait_released(ctx, std::chrono::seconds(5));
  std::printf("owners released: %s; the host node's state: %s\n", released ? "yes" : "not yet",
              watch.expired() ? "released" : "alive");
  // [release]
  return h[0] == 10.0f && !k.valid() && watch.expired() ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
