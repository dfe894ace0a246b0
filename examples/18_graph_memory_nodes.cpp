// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// 18 — port of NVIDIA's graphMemoryNodes sample (554 lines in the original; this port: 99): -(x^2) of
// 8M floats in memory the work allocates and frees: in two streams, captured, built node by node; the
// result left allocated and freed by its owner, in stream order, by another graph. Checked like the original.
import tether;

#include <cstdio>
#include <string>

#include "twins.hpp"  // the simulator twins of kernels.cu: examples::register_twins()

int main(int, char** argv) try {
  examples::register_twins();
  tether::Context ctx = tether::Runtime::open().context(0);
  tether::Stream stream = ctx.make_stream(), s2 = ctx.make_stream();
  tether::Event negate_done = ctx.make_event(), square_freed = ctx.make_event();
  std::string dir = argv[0];
  tether::Module mod = ctx.load_module(tether::Image::from_file(dir.substr(0, dir.rfind('/') + 1) + "kernels.fatbin"));
  auto square_array = mod.kernel<const float*, float*, int>("square_array");
  auto negate_array = mod.kernel<const float*, float*, int>("negate_array");
  auto validate_close = mod.kernel<const float*, const float*, int, int*>("validate_close");
  constexpr int n = 8'000'000, threads = 512;
  const tether::Launch launch{tether::Grid{(n + threads - 1) / threads}, tether::Block{threads}};
  auto pinned = [&] { return ctx.alloc_pinned<float>(n).share(); };  // page-locked: the device reads it too
  tether::SharedPinnedBuffer<float> input = pinned(), out = pinned(), want = pinned();
  auto randomize = [seed = 2022u](const tether::SharedPinnedBuffer<float>& b) mutable {  // values in (0, 1)
    for (float& v : b.span()) v = ((seed = seed * 1664525u + 1013904223u) >> 8 | 1) / 16777216.0f;
  };
  randomize(input), randomize(out);
  for (int i = 0; i < n; ++i) want.data()[i] = -(input.data()[i] * input.data()[i]);
  const tether::Unowned<float> expected = tether::unowned(want.data(), n);  // for the check on the device
  tether::SharedPinnedBuffer<int> failed = ctx.alloc_pinned<int>(1).share();  // the original's managed flag
  int failures = 0, &flag = failed.data()[0] = 0;  // flag: set by validate_close and by the host's check
  auto check = [&](const char* what) {  // then refills the output: a run that writes nothing fails
    stream.synchronize();
    for (int i = 0; i < n; ++i)  // the original's tolerance
      flag |= (out.data()[i] / want.data()[i] - 1) * (out.data()[i] / want.data()[i] - 1) > 1e-6f;
    std::printf("%-46s %s\n", what, flag ? "FAILED" : "PASSED"), failures += flag, flag = 0, randomize(out);
  };
  auto negate_squares = [&] {  // outside capture or captured alike
    tether::Unowned<float> in = stream.alloc_async<float>(n).memory, sq = stream.alloc_async<float>(n).memory;
    stream.memcpy(in, input);
    stream.launch(square_array, launch, in, sq, n);
    stream.free_async(in);
    tether::Unowned<float> neg = stream.alloc_async<float>(n).memory;  // may get in's address back
    stream.launch(negate_array, launch, sq, neg, n);
    stream.record(negate_done);
    stream.memcpy(out, neg);
    stream.free_async(neg);
    s2.wait(negate_done);  // s2 frees the squares meanwhile: memory allocated on one stream, freed on another
    s2.free_async(sq);
    s2.record(square_freed);
    stream.wait(square_freed);  // joins s2 back
  };
  negate_squares();
  check("(1) in a stream:");
  tether::capture(stream, negate_squares).instantiate().launch(stream);  // dropped at once: the launch keeps it
  check("(2) in a stream-captured graph:");
  tether::Unowned<float> result;
  auto build = [&](bool free_result) {
    tether::Graph g{ctx};
    g.edit([&](tether::Edit& e) {
      tether::AllocResult<float> in = e.alloc<float>(n), sq = e.after(in.node).alloc<float>(n);
      auto copy_in = e.after(sq.node).memcpy(in.memory, input);
      auto squared = e.after(copy_in).launch(square_array, launch, in.memory, sq.memory, n);
      tether::AllocResult<float> neg = e.after(e.after(squared).free(in.memory)).alloc<float>(n);
      auto negated = e.after(neg.node).launch(negate_array, launch, sq.memory, neg.memory, n);
      e.after(negated).free(sq.memory);
      auto copy_out = e.after(negated).memcpy(out, neg.memory);
      if (free_result) e.after(copy_out).free(neg.memory);
      result = neg.memory;
    });
    return g;
  };
  build(true).instantiate().launch(stream);
  check("(3) in a graph built node by node:");
  tether::GraphExec exec = build(false).instantiate();  // each launch leaves the result allocated
  exec.launch(stream);
  auto owner = tether::DeviceBuffer<float>::from_native_handle(ctx, reinterpret_cast<unsigned long long>(result.ptr), n);
  stream.launch(validate_close, launch, std::move(owner), expected, n, tether::unowned(&flag, 1));  // owns it
  check("(4) freed by its owner, outside any stream:");  // cuMemFree, once the stream passed the launch
  tether::wait_released(ctx);  // the free is done: the executable may launch again
  exec.launch(stream);
  stream.launch(validate_close, launch, result, expected, n, tether::unowned(&flag, 1));
  stream.free_async(result);
  check("(5) freed outside the graph, in stream order:");
  tether::Graph frees{ctx};
  frees.edit([&](tether::Edit& e) { e.free(result); });
  exec.launch(stream);
  stream.launch(validate_close, launch, result, expected, n, tether::unowned(&flag, 1));
  frees.instantiate().launch(stream);
  check("(6) freed in a different graph:");
  return failures == 0 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
