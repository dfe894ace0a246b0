// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The library's half of tether::kernel(&fn, ctx), without nvcc: twins registered per function
// address, the kernel record built from them (detail::registered_kernel_info, which the nvcc-only
// header calls with the CUDA runtime's lookups), and the names of functions found by address.
// Host functions stand in for __global__ ones: on the simulator only the address and the twin
// matter. Both drivers; the tests that only one driver can answer say so and return on the other.
#include <doctest/doctest.h>

#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "driver/symbols.hpp"
#include "support/messages.hpp"
#include "tether.hpp"

using namespace std::chrono_literals;
using tether_test::contains;
using tether_test::message_of;

namespace {

// Stand-ins for __global__ functions (their bodies never run: twins do).
void host_axpy(float, const float*, float*, int) {}
void host_pair(int*, int) {}
void host_other(int*, int) {}

// A RuntimeLookup that counts its calls and fails each with cudaErrorInvalidDeviceFunction (98).
struct FakeRuntime {
  static inline int calls = 0;
  static int get_kernel(const void*, CUkernel*) { return ++calls, 98; }
  static int get_function(const void*, CUfunction*) { return ++calls, 98; }
  static int function_name(const void*, const char**) { return ++calls, 98; }
  static const char* error_name(int) { return "cudaErrorInvalidDeviceFunction"; }
  static const char* error_string(int) { return "invalid device function"; }
  static constexpr tether::detail::RuntimeLookup lookup{&get_kernel, &get_function, &function_name,
                                                        &error_name, &error_string};
};

template <class... Args>
tether::Kernel<Args...> kernel_of(void (*fn)(Args...), const tether::Context& ctx) {
  return tether::detail::KernelAccess::make<Args...>(tether::detail::registered_kernel_info(
      ctx, reinterpret_cast<const void*>(fn), tether::detail::declared_params<Args...>, FakeRuntime::lookup));
}

struct Env {
  tether::Runtime rt = tether::Runtime::open();
  bool sim = rt.kind() == tether::DriverKind::simulated;
  tether::Context ctx = rt.context(0);
  Env() {
    FakeRuntime::calls = 0;
    if (sim) tether::sim::clear_violations();
  }
  ~Env() {
    CHECK(tether::wait_reclaimed(5000ms));
    if (sim) CHECK(tether::sim::violations().empty());
  }
};

}  // namespace

TEST_CASE(
    "a kernel's name is its symbol without the parameter list, and a template's without its return type") {
  struct Case {
    const char* symbol;
    const char* name;
  };
  const Case cases[] = {
      {"_Z5saxpyfPKfPfi", "saxpy"},                           // saxpy(float, float const*, float*, int)
      {"_Z5scaleIfEvPT_S0_i", "scale<float>"},                // void scale<float>(float*, float, int)
      {"_ZN2ns1kEv", "ns::k"},                                // ns::k()
      {"_ZN12_GLOBAL__N_11kEi", "(anonymous namespace)::k"},  // a kernel in an unnamed namespace
      {"_ZN2ns5scaleIN12_GLOBAL__N_11XEEEvPT_", "ns::scale<(anonymous namespace)::X>"},
      {"saxpy", "saxpy"},                                // extern "C"
      {"_Znot_a_mangled_name", "_Znot_a_mangled_name"},  // left as it is
  };
  for (const Case& c : cases) {
    CAPTURE(c.symbol);
    CHECK(tether::detail::kernel_name_from_symbol(c.symbol) == c.name);
  }
}

TEST_CASE(
    "a function is named after its dynamic symbol where the dynamic linker knows it, otherwise by its "
    "address") {
  CHECK(tether::detail::function_label(reinterpret_cast<const void*>(&tether::driver_version_string)) ==
        "tether::driver_version_string");
  const std::string label = tether::detail::function_label(reinterpret_cast<const void*>(&host_pair));
  CHECK(label.rfind("kernel at 0x", 0) == 0);
  CHECK(tether::detail::dynamic_symbol_name(nullptr).empty());
}

TEST_CASE("register_kernel by function refuses a null function and an empty name, saying what to pass") {
  void (*none)(int*, int) = nullptr;
  CHECK(message_of(
            [&] { tether::sim::register_kernel(none, [](const tether::sim::LaunchInfo&, int*, int) {}); }) ==
        "tether::sim::register_kernel(fn, body): the function is null; pass the address of the __global__ "
        "function "
        "(&kernel)");
  CHECK(
      message_of([&] {
        tether::sim::register_kernel(&host_pair, "", [](const tether::sim::LaunchInfo&, int*, int) {});
      }) ==
      "tether::sim::register_kernel(fn, name, body): the name is empty; give the kernel's name, or register "
      "without one");
}

TEST_CASE("unregister_kernel by function removes that function's twin only") {
  tether::sim::register_kernel(&host_pair, "pair", [](const tether::sim::LaunchInfo&, int*, int) {});
  tether::sim::register_kernel(&host_other, "pair", [](const tether::sim::LaunchInfo&, int*, int) {});
  tether::sim::register_kernel<int*, int>("pair", [](const tether::sim::LaunchInfo&, int*, int) {});
  CHECK(tether::sim::unregister_kernel(&host_pair));
  CHECK_FALSE(tether::sim::unregister_kernel(&host_pair));
  CHECK(tether::sim::unregister_kernel(&host_other));
  CHECK(tether::sim::unregister_kernel("pair"));  // the twin registered by name was not touched
}

TEST_CASE_FIXTURE(
    Env,
    "on the simulator the kernel of a function runs the twin registered for its address, and the "
    "CUDA runtime is never called") {
  if (!sim) return;
  tether::sim::register_kernel(
      &host_axpy, [](const tether::sim::LaunchInfo& info, float a, const float* x, float* y, int n) {
        for (std::size_t i = 0; i < info.threads() && i < static_cast<std::size_t>(n); ++i) y[i] += a * x[i];
      });
  tether::Kernel<float, const float*, float*, int> k = kernel_of(&host_axpy, ctx);
  CHECK(FakeRuntime::calls == 0);
  CHECK(k.name().rfind("kernel at 0x", 0) == 0);  // registered without a name, in a program without -rdynamic
  CHECK(k.context() == ctx);
  constexpr int n = 64;
  std::vector<float> x(n, 1.0f), y(n, 2.0f);
  tether::SharedBuffer<float> dx = ctx.alloc<float>(n).share(), dy = ctx.alloc<float>(n).share();
  dx.copy_from(std::span<const float>(x));
  dy.copy_from(std::span<const float>(y));
  tether::Stream s = ctx.make_stream();
  s.launch(k, tether::Launch{tether::Grid{1}, tether::Block{n}}, 4.0f, dx, dy, n);
  s.synchronize();
  dy.copy_to(std::span<float>(y));
  CHECK(y == std::vector<float>(n, 6.0f));
  CHECK(tether::sim::unregister_kernel(&host_axpy));
  CHECK(contains(message_of([&] { (void)kernel_of(&host_axpy, ctx); }),
                 "): the simulator has no twin for this function; register one with "
                 "tether::sim::register_kernel(&kernel, body)"));
  CHECK(FakeRuntime::calls == 0);
}

TEST_CASE_FIXTURE(Env,
                  "on the simulator a twin registered by function with another parameter list than the "
                  "declaration is reported as Module::kernel reports a mismatch") {
  if (!sim) return;
  tether::sim::register_kernel_erased(
      reinterpret_cast<const void*>(&host_pair), "pair",
      {tether::sim::ParamInfo{sizeof(int*), true, alignof(int*)}, tether::sim::ParamInfo{8, false, 8}},
      [](const tether::sim::LaunchInfo&, const void* const*) {});
  CHECK(message_of([&] { (void)kernel_of(&host_pair, ctx); }) ==
        "tether::kernel(pair): parameter 1 is declared as 'int' (4 bytes) but the compiled kernel's "
        "parameter 1 takes "
        "8 bytes");
  tether::sim::register_kernel_erased(reinterpret_cast<const void*>(&host_pair), "pair",
                                      {tether::sim::ParamInfo{sizeof(int*), true, alignof(int*)}},
                                      [](const tether::sim::LaunchInfo&, const void* const*) {});
  CHECK(message_of([&] { (void)kernel_of(&host_pair, ctx); }) ==
        "tether::kernel(pair): Kernel<int *, int> declares 2 parameters but the compiled kernel takes 1");
  CHECK(tether::sim::unregister_kernel(&host_pair));
}

TEST_CASE_FIXTURE(Env,
                  "on the real driver a lookup the CUDA runtime refuses is reported with the runtime's error "
                  "and what to check") {
  if (sim) return;
  const std::string what = message_of([&] { (void)kernel_of(&host_pair, ctx); });
  CHECK(contains(what, "tether::kernel(kernel at 0x"));
  CHECK(
      contains(what,
               "): the CUDA runtime's cudaGetKernel failed with cudaErrorInvalidDeviceFunction (98: invalid "
               "device function); is the function a __global__ function of a .cu file compiled by nvcc for "
               "this GPU (-arch), in this program?"));
  CHECK(FakeRuntime::calls == 1);
}

TEST_CASE_FIXTURE(Env, "on the simulator a failed cuKernelGetFunction is a DriverError naming the kernel, and a "
                       "later lookup succeeds") {
  if (!sim) return;
  tether::sim::register_kernel(&host_pair, "pair", [](const tether::sim::LaunchInfo&, int*, int) {});
  tether::sim::fail_call("cuKernelGetFunction", 1);
  std::string what;
  try {
    (void)kernel_of(&host_pair, ctx);
  } catch (const tether::DriverError& e) {
    CHECK(e.entry_point() == "cuKernelGetFunction");
    CHECK(e.code() == tether::Errc::out_of_memory);
    what = e.what();
  }
  tether::sim::clear_faults();
  CHECK(contains(what, "while getting the function of kernel 'pair'"));
  CHECK(kernel_of(&host_pair, ctx).name() == "pair");
  CHECK(FakeRuntime::calls == 0);
  CHECK(tether::sim::unregister_kernel(&host_pair));
}
