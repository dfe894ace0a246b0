// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// 20 — a decode loop, as a serving stack writes one: an executable per batch size in a budgeted
// cache (built on first use by a capture), a step parameter bound to every layer's kernel and set
// with one call per step, the capture–update path for a step whose topology changes (one more
// layer), and the memory report at the end.
import tether;

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
  std::string dir = argv[0];
  tether::Module mod = ctx.load_module(tether::Image::from_file(dir.substr(0, dir.rfind('/') + 1) + "kernels.fatbin"));
  auto add_scaled = mod.kernel<float*, const float*, float, int>("add_scaled");  // y += a * x

  constexpr int width = 256, layers = 8;
  std::vector<tether::SharedBuffer<float>> weights;  // layer l's weights are all l + 1
  for (int l = 0; l <= layers; ++l) {
    weights.push_back(ctx.alloc<float>(4 * width).share());
    weights.back().copy_from(std::vector<float>(4 * width, static_cast<float>(l + 1)));
  }
  tether::SharedPinnedBuffer<float> out = ctx.alloc_pinned<float>(4 * width).share();
  // [capture]
  tether::Param<float> step(0.0f, "step");  // bound to every layer's kernel below
  auto capture_step = [&](int batch, int depth) {
    const int n = batch * width;
    return tether::capture(stream, [&] {
      tether::SharedBuffer<float> h = ctx.alloc<float>(n).share();  // the step's activations
      stream.memset(h, 0.0f);
      for (int l = 0; l < depth; ++l)
        stream.launch(add_scaled, tether::Grid{static_cast<unsigned>(n / 256)}, tether::Block{256}, h, weights[l],
                      step, n);  // h += step * w_l
      stream.memcpy(out, h, static_cast<std::size_t>(n));
    });
  };
  int depth = layers;
  tether::ExecCache<int> cache([&](int batch) { return capture_step(batch, depth).instantiate(); },
                               tether::ExecCacheLimits{.max_count = 2});  // bytes: what each keeps
  cache.prewarm({1, 2});
  // [capture]

  // [loop]
  const int batches[] = {1, 1, 2, 2, 4, 4, 2, 2};
  bool right = true;
  for (int i = 0; i < 8; ++i) {
    const int batch = batches[i];
    std::shared_ptr<tether::GraphExec> exec = cache.get(batch);
    std::string how = "set";
    if (i == 6) {  // from step 6 on the model has one more layer: a new topology
      depth = layers + 1;
      step.set_value(static_cast<float>(i));  // what the captured nodes take
      tether::UpdateResult r = exec->update_or_reinstantiate(capture_step(batch, depth));
      how = r.reinstantiated ? "reinstantiated (" + std::string(tether::to_string(r.reason)) + ")" : "updated";
      cache.erase(4);  // other batch sizes are built again, with the new depth, on their next use
    } else {
      exec->set(step, static_cast<float>(i));  // one driver call per layer
    }
    exec->launch(stream);
    stream.synchronize();
    const float want = static_cast<float>(i) * static_cast<float>(depth * (depth + 1) / 2);
    right = right && out.data()[0] == want && out.data()[batch * width - 1] == want;
    std::printf("step %d: batch %d, %d layers, %-32s out[0] = %g\n", i, batch, depth, how.c_str(), out.data()[0]);
  }
  // [loop]

  // [report]
  tether::ExecCacheStats s = cache.stats();
  std::printf("cache: %zu executables, %llu hits, %llu misses, %llu evictions, %zu bytes counted at build\n", s.count,
              static_cast<unsigned long long>(s.hits), static_cast<unsigned long long>(s.misses),
              static_cast<unsigned long long>(s.evictions), s.bytes);
  std::printf("batch 2 keeps %s\n", tether::to_string(tether::owned_memory(*cache.get(2))).c_str());
  tether::wait_released(ctx);  // what no consumer can use any more is gone before the report
  std::printf("process: %s\n", tether::to_string(tether::memory_report(ctx)).c_str());
  // [report]
  return right && s.evictions == 1 && s.misses == 3 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
