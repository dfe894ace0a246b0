// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// 21 — a data-parallel training step on N ranks, one per GPU (gradient kernel, all-reduce, update),
// captured once and replayed; the ranks meet through an NCCL id in a file. With no arguments, one
// rank per device as threads; `21_data_parallel RANK RANKS FILE` is one rank per process.
import tether;

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "twins.hpp"  // the simulator twins of kernels.cu: examples::register_twins()
constexpr int n = 1024, steps = 3;
constexpr float lr = 0.1f;
// [id]
// Rank 0 makes the id and writes it as hex, the others read it: any channel of 128 bytes will do.
tether::nccl::UniqueId exchange(const tether::Runtime& rt, int rank, const std::string& file) {
  if (rank == 0) {
    tether::nccl::UniqueId id = tether::nccl::UniqueId::generate(rt);
    std::ofstream(file + ".tmp") << id.to_hex() << std::flush;
    return std::rename((file + ".tmp").c_str(), file.c_str()), id;  // whole or absent, never half written
  }
  std::string hex;  // then wait for the file
  while (!(std::ifstream(file) >> hex)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return tether::nccl::UniqueId::from_hex(hex);
}
// [id]
bool run_rank(const tether::Runtime& rt, const std::string& dir, int rank, int ranks, const std::string& file) try {
  tether::Context ctx = rt.context(rank);
  tether::Stream stream = ctx.make_stream();
  tether::Module mod = ctx.load_module(tether::Image::from_file(dir + "kernels.fatbin"));
  auto scale = mod.kernel<float*, float, int>("scale");  // x *= a; add_scaled: y += a * x
  auto add_scaled = mod.kernel<float*, const float*, float, int>("add_scaled");
  tether::SharedBuffer<float> w = ctx.alloc<float>(n).share();  // the weights, the same on every rank
  w.copy_from(std::vector<float>(n, 1.0f));
  tether::GraphExec step;
  // [capture]
  {
    tether::nccl::Communicator comm = tether::nccl::Communicator::create(ctx, exchange(rt, rank, file), ranks, rank);
    tether::SharedBuffer<float> g = ctx.alloc<float>(n).share();  // this rank's gradient
    const tether::Launch launch{tether::Grid{n / 256}, tether::Block{256}};
    step = tether::capture(stream, tether::CaptureMode::thread_local_, [&] {  // ranks may be threads
             stream.memcpy(g, w);
             stream.launch(scale, launch, g, static_cast<float>(rank + 1), n);  // g = (rank + 1) * w
             comm.all_reduce(stream, g, g);                                     // g = the sum over ranks
             stream.launch(add_scaled, launch, w, g, -lr / ranks, n);           // w -= lr * mean(g)
           }).instantiate();
  }  // the communicator, g and the graph are dropped: the executable keeps what its nodes use
  // [capture]
  std::vector<float> h(n);
  float want = 1.0f;
  bool right = true;
  // [loop]
  for (int i = 1; i <= steps; ++i) {
    step.launch(stream);
    w.copy_to(h, stream);
    stream.synchronize();
    want *= 1.0f - lr * static_cast<float>(ranks + 1) / 2.0f;
    const bool close = std::fabs(h[0] - want) <= 1e-6f && std::fabs(h[n - 1] - want) <= 1e-6f;
    right = right && close;
    if (rank == 0) std::printf("step %d: w[0] = %.6f (%s)\n", i, h[0], close ? "as expected" : "WRONG");
  }
  step = tether::GraphExec{};  // its communicator goes now, destroyed by NCCL on a thread of its own
  tether::wait_released(ctx);  // (here, so that the count printed at the end is 0)
  // [loop]
  return right;
} catch (const std::exception& e) {  // in a thread of its own: an exception would end the process
  return std::fprintf(stderr, "rank %d: %s\n", rank, e.what()) < 0;
}

int main(int argc, char** argv) try {
  examples::simulate_devices(2);  // the simulator's stand-in for a machine with two GPUs
  examples::register_twins();
  tether::Runtime rt = tether::Runtime::open();
  const std::string dir = std::string(argv[0]).substr(0, std::string(argv[0]).rfind('/') + 1);
  if (argc == 4) return run_rank(rt, dir, std::atoi(argv[1]), std::atoi(argv[2]), argv[3]) ? 0 : 1;
  // [threads]
  const int ranks = rt.device_count();
  const std::string file = "/tmp/tether-nccl-id-" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  std::printf("%s, %d rank(s), one per device\n", tether::nccl::describe(rt).c_str(), ranks);
  std::vector<int> ok(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) threads.emplace_back([&, r] { ok[static_cast<std::size_t>(r)] = run_rank(rt, dir, r, ranks, file); });
  for (auto& t : threads) t.join();
  std::remove(file.c_str());
  const bool closed = tether::nccl::wait_closed();  // every communicator destroyed by NCCL
  std::printf("communicators alive: %zu\n", tether::nccl::communicator_counts().alive);
  // [threads]
  return closed && std::count(ok.begin(), ok.end(), 0) == 0 ? 0 : 1;
} catch (const std::exception& e) {
  return std::fprintf(stderr, "%s\n", e.what()), 1;
}
