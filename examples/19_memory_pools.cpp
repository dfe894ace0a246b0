// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// 19 — memory pools: a pool of one's own with a size limit and a release threshold, owned buffers
// allocated from it in stream order and dropped while queued work still uses them (freed after
// that work, with cuMemFreeAsync, never with a blocking cuMemFree), what the pool reports, and
// the two refusals: a pool that is full, a stream that captures.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "twins.hpp"  // examples::register_twins(): what the simulator runs for each kernel of kernels.cu

import tether;

int main(int, char** argv) try {
  examples::register_twins();
  tether::Context ctx = tether::Runtime::open().context(0);
  tether::Stream stream = ctx.make_stream();
  std::string dir = argv[0];
  tether::Module mod = ctx.load_module(tether::Image::from_file(dir.substr(0, dir.rfind('/') + 1) + "kernels.fatbin"));
  auto scale = mod.kernel<float*, float, int>("scale");
  constexpr int n = 1 << 20;  // 4 MiB of floats
  constexpr std::uint64_t MiB = 1 << 20;
  const tether::Launch launch{tether::Grid{n / 256}, tether::Block{256}};
  auto mib = [&](std::uint64_t bytes) { return static_cast<unsigned long long>(bytes / MiB); };

  // [pool]
  tether::MemPool pool = tether::MemPool::create(ctx, {.max_bytes = 64 * MiB, .release_threshold = 32 * MiB});
  tether::MemPool def = tether::MemPool::device_default(ctx);  // what alloc_buffer<T>(n) uses
  std::printf("a pool of at most 64 MiB that keeps up to %llu MiB for reuse; the default pool is one handle: %s\n",
              mib(pool.release_threshold()), def == tether::MemPool::device_default(ctx) ? "yes" : "no");
  // [pool]

  // [alloc]
  tether::SharedPinnedBuffer<float> out = ctx.alloc_pinned<float>(n).share();
  {
    tether::SharedBuffer<float> x = stream.alloc_buffer<float>(n, pool).share();  // cuMemAllocFromPoolAsync
    stream.memset(x, 1.0f);  // ordered after the allocation: the same stream
    stream.launch(scale, launch, x, 3.0f, n);
    stream.memcpy(out, x);
    std::printf("queued 3 operations on a pool buffer; the pool uses %llu MiB\n", mib(pool.used_bytes()));
  }  // the program's handle goes; the stream's operations still own the buffer
  stream.synchronize();
  (void)tether::wait_released(ctx, std::chrono::seconds(5));  // the last owner went: cuMemFreeAsync queued
  ctx.synchronize();  // ... on tether's free stream, which has now run it
  int good = 0;
  for (float v : out.span()) good += v == 3.0f;
  std::printf("%d of %d elements are 3; the pool uses %llu MiB and keeps %llu MiB reserved\n", good, n,
              mib(pool.used_bytes()), mib(pool.reserved_bytes()));
  pool.trim_to(0);
  std::printf("after trim_to(0) it keeps %llu MiB\n", mib(pool.reserved_bytes()));
  // [alloc]

  // [callback]
  auto held = std::make_shared<tether::DeviceBuffer<float>>(stream.alloc_buffer<float>(n));  // the default pool
  stream.host([held] { held->reset(); });  // dropped inside a host callback: the free goes to the reclaimer
  stream.synchronize();
  std::printf("a buffer dropped inside a host callback: %s\n", *held ? "still owned" : "empty, its free queued");
  // [callback]

  // [refusals]
  try {
    (void)stream.alloc_buffer<float>(32 * MiB, pool);  // 128 MiB: more than the pool may hold
  } catch (const tether::DriverError& e) {
    std::printf("128 MiB from the pool: %s from %s\n", std::string(e.result_name()).c_str(),
                std::string(e.entry_point()).c_str());
  }
  std::string refused;
  tether::Graph g = tether::capture(stream, [&] {
    try {
      (void)stream.alloc_buffer<float>(n, pool);
    } catch (const tether::UsageError& e) {
      refused = e.what();
    }
  });
  std::printf("while capturing: %s\n", refused.substr(0, refused.find(';')).c_str());
  // [refusals]
  return good == n ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
