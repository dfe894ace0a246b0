// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// 09 — stream work, no graph: Stream::memset, launch, memcpy and host take the same typed
// arguments as an edit's node creators and keep what they use until the stream has passed it.
// The program drops its buffers right after queuing the work; the results are still right, and
// the operands are released (on tether's reclaimer) only once the stream is done with them.
import tether;

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "twins.hpp"  // the simulator twins of kernels.cu: examples::register_twins()

int main(int, char** argv) try {
  examples::register_twins();
  tether::Runtime rt = tether::Runtime::open();
  tether::Context ctx = rt.context(0);
  tether::Stream stream = ctx.make_stream();
  std::string dir = argv[0];
  tether::Module mod = ctx.load_module(tether::Image::from_file(dir.substr(0, dir.rfind('/') + 1) + "kernels.fatbin"));
  auto scale = mod.kernel<float*, float, int>("scale");

  constexpr int n = 1 << 16;
  const tether::Launch launch{tether::Grid{n / 256}, tether::Block{256}};
  tether::SharedPinnedBuffer<float> out = ctx.alloc_pinned<float>(n).share();  // page-locked host memory
  auto good = std::make_shared<int>(-1);  // the host callback's state: how many elements were right
  // [queue]
  {
    tether::SharedBuffer<float> x = ctx.alloc<float>(n).share();
    tether::DeviceBuffer<float> y = ctx.alloc<float>(n);
    stream.memset(x, 1.0f);                                       // cuMemsetD32Async: x = 1
    stream.launch(scale, launch, x, 3.0f, n);                     // cuLaunchKernel:   x = 3
    stream.memcpy(tether::unowned(y), x);                         // y = x (y: not kept here ...)
    stream.launch(scale, launch, tether::unowned(y), 2.0f, n);    // y = 6
    stream.memcpy(out, std::move(y));                             // ... but by its last use
    stream.host([out, good] { *good = static_cast<int>(std::count(out.data(), out.data() + n, 6.0f)); });
    std::printf("queued 6 operations; x.use_count() = %ld (the program's and 3 operations'), "
                "the callback state's use_count() = %ld\n", x.use_count(), good.use_count());
  }  // x and y are dropped here: the stream still holds them
  // [queue]

  // [wait]
  stream.synchronize();  // hands the stream's owners to tether's reclaimer, then waits
  bool released = tether::wait_released(ctx, std::chrono::seconds(5));
  std::printf("after synchronize: %d of %d elements are 6; the callback state's use_count() = %ld (released: %s)\n",
              *good, n, good.use_count(), released ? "yes" : "no");
  // [wait]

  // [drop]
  auto state = std::make_shared<int>(0);
  {
    tether::Stream other = ctx.make_stream();
    other.host([state] { *state = 42; });
  }  // destroyed with its work queued: the work still runs, then its owners go
  ctx.synchronize();  // waits for every stream of the context, destroyed ones too
  tether::wait_released(ctx, std::chrono::seconds(5));
  std::printf("a dropped stream's callback ran (state = %d) and was released (use_count() = %ld)\n", *state,
              state.use_count());
  // [drop]
  return *state == 42 && state.use_count() == 1 && *good == n && good.use_count() == 1 && released ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
