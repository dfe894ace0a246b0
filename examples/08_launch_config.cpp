// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// 08 — launch configuration: a kernel node with 64 KiB of dynamic shared memory per block (above
// the 48 KiB default: tether raises the kernel's limit) and a launch attribute, clusters of two
// blocks, both observed by the kernel. An executable's update may change the dimensions and the
// shared memory but no attribute; beyond the device's opt-in maximum the driver refuses.
import tether;

#include <algorithm>
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
  auto reverse = mod.kernel<float*, int, unsigned*>("reverse_chunks");
  constexpr int n = 1 << 16;
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) want[i] = static_cast<float>(i);
  tether::SharedBuffer<float> x = ctx.alloc<float>(n).share();
  tether::SharedBuffer<unsigned> clusters = ctx.alloc<unsigned>(8).share();
  x.copy_from(want);
  bool ok = true, refused = false, limited = false;
  auto check = [&](const char* what, int chunk, unsigned cluster) {  // x against the host's reversal
    stream.synchronize();
    for (int b = 0; b < n / chunk; ++b)
      std::reverse(want.begin() + b * chunk, want.begin() + (b + 1) * chunk);
    std::vector<float> got(n);
    std::vector<unsigned> seen(n / chunk);
    x.copy_to(got);
    clusters.copy_to(seen);
    const bool good = got == want && std::count(seen.begin(), seen.end(), cluster) == n / chunk;
    std::printf("%s: %d chunks of %d floats reversed, clusters of %u blocks: %s\n", what, n / chunk, chunk,
                cluster, good ? "right" : "WRONG");
    ok = ok && good;
  };

  // [launch]
  constexpr int chunk = 16384;  // floats per block: 64 KiB of shared memory
  const tether::Launch big = tether::Launch{tether::Grid{n / chunk}, tether::Block{256}}
                                 .shared_memory(chunk * sizeof(float))  // sharedMemBytes, a kernel parameter
                                 .cluster(tether::Cluster{2});          // a node attribute
  tether::Graph g{ctx};
  tether::Node<tether::KernelNode<float*, int, unsigned*>> k;
  g.edit([&](tether::Edit& e) { k = e.launch(reverse, big, x, chunk, clusters); });
  tether::GraphExec exec = g.instantiate();
  exec.launch(stream);
  check("64 KiB a block", chunk, 2);
  // [launch]

  // [update]
  const tether::Launch half =
      tether::Launch{tether::Grid{8}, tether::Block{256}}.shared_memory(chunk / 2 * sizeof(float));
  exec.update(k, half, x, chunk / 2, clusters);  // dimensions and shared memory: the cluster stays
  exec.launch(stream);
  check("32 KiB a block", chunk / 2, 2);
  try {
    exec.update(k, tether::Launch{half}.cluster(tether::Cluster{4}), x, chunk / 2, clusters);
  } catch (const tether::UsageError& e) {
    std::printf("an executable's update with an attribute: UsageError\n  %s\n", e.what());
    refused = true;
  }
  // [update]

  // [limit]
  try {  // 256 KiB: beyond the H200's opt-in maximum of 227 KiB a block
    const tether::Launch too_big = tether::Launch{big}.shared_memory(256 << 10);
    g.edit([&](tether::Edit& e) { e.update(k, too_big, x, chunk, clusters); });
  } catch (const tether::DriverError& e) {
    std::printf("256 KiB a block: DriverError from %s, %s; the edit rolled back\n",
                std::string(e.entry_point()).c_str(), std::string(e.result_name()).c_str());
    limited = true;
  }
  // [limit]
  return ok && refused && limited ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
