// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Kernels of the program's own __global__ functions (tether::kernel(&fn, ctx), src/cuda/kernel.hpp),
// made in kernels.cu by nvcc and used here, in header mode, by clang. Both drivers: on a GPU the
// CUDA runtime finds the code nvcc embedded in this program; on the simulator the twins registered
// per function run, and nothing calls the runtime (here it could not: there is no driver for it).
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <type_traits>
#include <vector>

#include "support/messages.hpp"
#include "tether.hpp"
#include "cuda/test_kernels.hpp"

using namespace std::chrono_literals;
using tether_test::contains;
using tether_test::message_of;

namespace {

// Device 0's context and a stream; the twins registered once. At the end every deferred release
// has run and, on the simulator, nothing was misused.
struct Env {
  tether::Runtime rt = tether::Runtime::open();
  bool sim = rt.kind() == tether::DriverKind::simulated;
  tether::Context ctx = rt.context(0);
  tether::Stream stream = ctx.make_stream();

  Env() {
    static const bool once = (tether_cuda::register_twins(), true);
    (void)once;
    if (sim) tether::sim::clear_violations();
  }
  ~Env() {
    CHECK(tether::wait_reclaimed(5000ms));
    if (sim) CHECK(tether::sim::violations().empty());
  }
};

constexpr int n = 1000;
const tether::Launch launch{tether::Grid{(n + 127) / 128}, tether::Block{128}};

std::vector<float> iota(float from) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = from + static_cast<float>(i);
  return v;
}

template <class T>
tether::SharedBuffer<T> buffer(const tether::Context& ctx, const std::vector<T>& h) {
  tether::SharedBuffer<T> b = ctx.alloc<T>(h.size()).share();
  b.copy_from(std::span<const T>(h));
  return b;
}

template <class T>
std::vector<T> read(const tether::SharedBuffer<T>& b) {
  std::vector<T> h(b.size());
  b.copy_to(std::span<T>(h));
  return h;
}

// y[i] + a * x[i] for every i, as the kernel computes it.
bool is_saxpy(const std::vector<float>& got, float a, const std::vector<float>& x,
              const std::vector<float>& y) {
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != y[i] + a * x[i]) return false;
  return got.size() == x.size();
}

}  // namespace

TEST_CASE_FIXTURE(
    Env,
    "tether::kernel(&saxpy, ctx) gives a Kernel typed by the function's own parameters, which runs "
    "in a graph") {
  tether::Kernel<float, const float*, float*, int> k = tether_cuda::saxpy(ctx);
  static_assert(std::is_same_v<decltype(k)::params, std::tuple<float, const float*, float*, int>>);
  CHECK(k.arity == 4);
  CHECK(k.name() == "saxpy");
  CHECK(k.context() == ctx);
  CHECK(k.context_handle() == ctx.get());
  CHECK(k.function() != nullptr);
  const std::vector<float> x = iota(1), y = iota(-5);
  tether::SharedBuffer<float> dx = buffer(ctx, x), dy = buffer(ctx, y);
  tether::Graph g{ctx};
  g.edit([&](tether::Edit& e) { e.launch(k, launch, 2.0f, dx, dy, n); });
  tether::GraphExec exec = g.instantiate();
  exec.launch(stream);
  stream.synchronize();
  CHECK(is_saxpy(read(dy), 2.0f, x, y));
}

TEST_CASE_FIXTURE(Env,
                  "tether::kernel of a function template's specializations gives one typed Kernel per "
                  "specialization") {
  tether::Kernel<float*, float, int> f = tether_cuda::scale_float(ctx);
  tether::Kernel<double*, double, int> d = tether_cuda::scale_double(ctx);
  CHECK(f.name() == "scale<float>");
  CHECK(d.name() == "scale<double>");
  CHECK(f.function() != d.function());
  CHECK(f == tether_cuda::scale_float(ctx));  // the same function again
  tether::SharedBuffer<float> xf = buffer(ctx, iota(1));
  tether::SharedBuffer<double> xd = buffer(ctx, std::vector<double>(n, 3.0));
  tether::Graph g{ctx};
  g.edit([&](tether::Edit& e) {
    auto first = e.launch(f, launch, xf, 3.0f, n);
    e.after(first).launch(d, launch, xd, 0.5, n);
  });
  g.instantiate().launch(stream);
  stream.synchronize();
  const std::vector<float> got_f = read(xf);
  const std::vector<double> got_d = read(xd);
  CHECK(got_f.front() == 3.0f);
  CHECK(got_f.back() == 3.0f * static_cast<float>(n));
  CHECK(got_d.front() == 1.5);
  CHECK(got_d.back() == 1.5);
}

TEST_CASE_FIXTURE(Env,
                  "a kernel of the program's own function belongs to no Module, and Kernel::module says so") {
  tether::Kernel<float, const float*, float*, int> k = tether_cuda::saxpy(ctx);
  CHECK_FALSE(k.has_module());
  CHECK(
      message_of([&] { (void)k.module(); }) ==
      "Kernel::module: kernel 'saxpy' belongs to no Module: it is the program's own __global__ function "
      "(tether::kernel(&fn, ctx)), whose code the CUDA runtime keeps loaded; ask has_module() first, or use "
      "context() for its context");
}

TEST_CASE_FIXTURE(Env,
                  "a kernel node keeps the context of a kernel of the program's own function after every "
                  "handle but the graph's is gone") {
  const std::vector<float> x = iota(0), y = iota(1);
  tether::SharedBuffer<float> dy = buffer(ctx, y);
  std::optional<tether::Graph> g;
  {
    tether::Context own = tether::Runtime::open().context(0);
    tether::Kernel<float, const float*, float*, int> k = tether_cuda::saxpy(own);
    g.emplace(own);
    g->edit([&](tether::Edit& e) { e.launch(k, launch, -1.0f, buffer(own, x), dy, n); });
  }
  CHECK(contains(tether::to_dot(*g), "kernel saxpy"));
  tether::GraphExec exec = g->instantiate();
  g.reset();
  exec.launch(stream);
  stream.synchronize();
  CHECK(is_saxpy(read(dy), -1.0f, x, y));
}

TEST_CASE_FIXTURE(Env, "Stream::launch runs a kernel of the program's own function as it runs a module's") {
  const std::vector<float> x = iota(2), y = iota(3);
  tether::SharedBuffer<float> dy = buffer(ctx, y);
  stream.launch(tether_cuda::saxpy(ctx), launch, 0.25f, buffer(ctx, x), dy, n);
  stream.synchronize();
  CHECK(is_saxpy(read(dy), 0.25f, x, y));
}

TEST_CASE_FIXTURE(Env,
                  "tether::kernel(&saxpy) without a context takes the primary context of device 0 of "
                  "Runtime::open()") {
  tether::Kernel<float, const float*, float*, int> k = tether_cuda::saxpy_in_default_context();
  CHECK(k.context() == rt.context(0));
  CHECK(k == tether_cuda::saxpy(ctx));
}

TEST_CASE_FIXTURE(Env, "tether::kernel refuses a null function before any lookup") {
  CHECK(message_of([&] { (void)tether_cuda::null_kernel(ctx); }) ==
        "tether::kernel: the function is null; pass the address of a __global__ function (&saxpy)");
}

TEST_CASE_FIXTURE(
    Env,
    "a function without a twin is refused on the simulator, saying how to register one, and runs "
    "its compiled code on a GPU") {
  if (sim) {
    const std::string what = message_of([&] { (void)tether_cuda::count_calls(ctx); });
    CHECK(contains(what, "tether::kernel(kernel at 0x"));
    CHECK(contains(what,
                   "): the simulator has no twin for this function; register one with "
                   "tether::sim::register_kernel(&kernel, body) before tether::kernel looks it up"));
    return;
  }
  tether::Kernel<int*> k = tether_cuda::count_calls(ctx);
  CHECK(k.name() == "count_calls");
  tether::SharedBuffer<int> counter = buffer(ctx, std::vector<int>{41});
  stream.launch(k, tether::Launch{tether::Grid{1}, tether::Block{32}}, counter);
  stream.synchronize();
  CHECK(read(counter).front() == 42);
}

TEST_CASE_FIXTURE(Env,
                  "on the simulator a Kernel keeps the twin it was made with when the function's twin is "
                  "replaced, and a new lookup gets the new one") {
  if (!sim) return;
  tether::Kernel<float, const float*, float*, int> before = tether_cuda::saxpy(ctx);
  tether_cuda::replace_saxpy_twin();
  tether::Kernel<float, const float*, float*, int> after = tether_cuda::saxpy(ctx);
  CHECK_FALSE(before == after);
  const std::vector<float> x = iota(1), y = iota(1);
  tether::SharedBuffer<float> old_y = buffer(ctx, y), new_y = buffer(ctx, y);
  stream.launch(before, launch, 2.0f, buffer(ctx, x), old_y, n);
  stream.launch(after, launch, 7.0f, buffer(ctx, x), new_y, n);
  stream.synchronize();
  tether_cuda::register_twins();
  CHECK(is_saxpy(read(old_y), 2.0f, x, y));
  CHECK(read(new_y) == std::vector<float>(n, 7.0f));
}
