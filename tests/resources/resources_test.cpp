// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The RAII resource layer (src/resources/): contexts, streams, events, images, modules, typed
// kernels, device and pinned buffers, and the release rule every deleter follows. The tests run on
// the driver TETHER_DRIVER selects (the simulator in CI, the real driver on a GPU); the parts that
// need the simulator's statistics, fault injection or violation log are guarded by `sim`.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tether.hpp"

extern char** environ;

namespace {

using tether::detail::Entry;
using tether::detail::raw;
using namespace std::chrono_literals;

// ------------------------------------------------------------------------------------- helpers

bool contains(std::string_view hay, std::string_view needle) { return hay.find(needle) != std::string_view::npos; }

// Every report that reached the error hook while a test ran ("where: what").
std::mutex g_reports_mu;
std::vector<std::string> g_reports;

void capture_report(const tether::ErrorReport& r) noexcept {
  try {
    std::lock_guard lock(g_reports_mu);
    g_reports.push_back(std::string(r.where) + ": " + std::string(r.what));
  } catch (...) {
  }
}

std::vector<std::string> take_reports() {
  std::lock_guard lock(g_reports_mu);
  return std::exchange(g_reports, {});
}

const tether::detail::DriverTable& table(const tether::Runtime& rt) { return tether::detail::table_of(rt); }

CUcontext current_context(const tether::Runtime& rt) {
  CUcontext c = nullptr;
  REQUIRE(raw<Entry::cuCtxGetCurrent>(table(rt), &c) == CUDA_SUCCESS);
  return c;
}

void set_current_context(const tether::Runtime& rt, CUcontext c) {
  REQUIRE(raw<Entry::cuCtxSetCurrent>(table(rt), c) == CUDA_SUCCESS);
}

// Kernels of these tests. On a GPU the PTX runs; on the simulator the twins registered below do.
// fill(int* p, int v, int n) sets p[0..n) to v, one element per thread.
constexpr std::string_view test_ptx = R"PTX(
.version 7.0
.target sm_52
.address_size 64

.visible .entry tether_resources_fill(
  .param .u64 tether_resources_fill_p,
  .param .u32 tether_resources_fill_v,
  .param .u32 tether_resources_fill_n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [tether_resources_fill_p];
  ld.param.u32 %r1, [tether_resources_fill_v];
  ld.param.u32 %r2, [tether_resources_fill_n];
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mov.u32 %r5, %tid.x;
  mad.lo.s32 %r6, %r3, %r4, %r5;
  setp.ge.s32 %p1, %r6, %r2;
  @%p1 bra DONE;
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.s32 %rd3, %r6, 4;
  add.s64 %rd4, %rd2, %rd3;
  st.global.u32 [%rd4], %r1;
DONE:
  ret;
}
)PTX";

using FillKernel = tether::Kernel<int*, int, int>;

void register_twins() {
  static const bool once = [] {
    tether::sim::register_kernel<int*, int, int>(
        "tether_resources_fill", [](const tether::sim::LaunchInfo& info, int* p, int v, int n) {
          std::size_t end = std::min(info.threads(), static_cast<std::size_t>(n));
          for (std::size_t i = 0; i < end; ++i) p[i] = v;
        });
    return true;
  }();
  (void)once;
}

// Launches fill on `s` through the raw table (the graph layer, not this one, wraps launches).
void launch_fill(const FillKernel& k, const tether::Stream& s, int* p, int v, int n) {
  tether::Context ctx = k.module().context();
  tether::detail::ScopedContext scope(*tether::detail::state_of(ctx));
  void* params[] = {&p, &v, &n};
  unsigned blocks = static_cast<unsigned>((n + 255) / 256);
  REQUIRE(raw<Entry::cuLaunchKernel>(table(ctx.runtime()), k.function(), blocks, 1u, 1u, 256u, 1u, 1u, 0u, s.get(),
                                     params, nullptr) == CUDA_SUCCESS);
}

// Enqueues `fn(data)` on `s` as a host function (cuLaunchHostFunc).
void launch_host(const tether::Stream& s, CUhostFn fn, void* data) {
  tether::Context ctx = s.context();
  tether::detail::ScopedContext scope(*tether::detail::state_of(ctx));
  REQUIRE(raw<Entry::cuLaunchHostFunc>(table(ctx.runtime()), s.get(), fn, data) == CUDA_SUCCESS);
}

// The fixture of every test: device 0's context, the simulator's live-object counts before the
// test, and the error hook redirected. When the test ends, deferred releases are waited for and
// there must be no simulator violation and no unexpected error report.
struct Env {
  tether::Runtime rt = tether::Runtime::open();
  bool sim = rt.kind() == tether::DriverKind::simulated;
  tether::Context ctx = rt.context(0);
  tether::sim::Stats before{};
  tether::ErrorHook previous_hook = nullptr;

  Env() {
    register_twins();
    take_reports();
    previous_hook = tether::set_error_hook(&capture_report);
    if (sim) before = tether::sim::stats();
  }
  ~Env() {
    CHECK(tether::wait_reclaimed(5000ms));
    tether::set_error_hook(previous_hook);
    for (const std::string& r : take_reports()) FAIL_CHECK("unexpected error report: " << r);
    if (sim) {
      tether::sim::clear_faults();
      for (const tether::sim::Violation& v : tether::sim::violations())
        FAIL_CHECK("simulator violation " << tether::sim::to_string(v.kind) << " in " << v.entry_point << ": "
                                          << v.detail);
      tether::sim::clear_violations();
    }
  }

  // Why wait first: frees and unloads always run on the reclaimer (they can block while a host
  // callback runs), so counts are read once what is queued has been released.
  tether::sim::Stats now() const {
    (void)tether::wait_reclaimed(5000ms);
    return tether::sim::stats();
  }
  tether::Module load() const { return ctx.load_module(tether::Image::from_ptx(test_ptx)); }
};

// --------------------------------------------------------------- a child process, freshly exec'd
//
// Why exec and not just fork (tests/support/child.hpp): simulator options are process-wide and fixed
// once it is open, and the tests before this one opened it; a forked copy would inherit that. The
// child re-runs this executable on one test case, which reads TETHER_RESOURCES_CHILD.

struct ChildRun {
  int status = -1;
  std::string output;
};

ChildRun run_case_in_fresh_process(const char* test_case) {
  std::string filter = std::string("--test-case=") + test_case;
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  env_strings.emplace_back("TETHER_RESOURCES_CHILD=1");
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string self = "/proc/self/exe", arg0 = "unit_tests", no_skip = "--no-skip=true";
  char* argv[] = {arg0.data(), filter.data(), no_skip.data(), nullptr};

  int out[2];
  if (::pipe(out) != 0) return {};
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {  // only async-signal-safe calls until exec: everything was prepared above
    ::close(out[0]);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    ::execve(self.c_str(), argv, envp.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ChildRun r;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) r.output.append(buf, static_cast<std::size_t>(n));
  ::close(out[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// A counting deleter for UniqueHandle's own tests.
struct CountingDelete {
  std::vector<int>* destroyed = nullptr;
  void operator()(int h) const noexcept { destroyed->push_back(h); }
};

}  // namespace

// ================================================================================== UniqueHandle

TEST_CASE("UniqueHandle destroys its handle exactly once, on reset, on move assignment and at scope end") {
  using H = tether::detail::UniqueHandle<int, CountingDelete>;
  std::vector<int> destroyed;
  {
    H a(1, CountingDelete{&destroyed});
    CHECK(static_cast<bool>(a));
    CHECK(a.get() == 1);

    H b(std::move(a));
    CHECK_FALSE(static_cast<bool>(a));  // NOLINT(bugprone-use-after-move): moved-from is empty
    CHECK(a.get() == 0);
    CHECK(b.get() == 1);

    H c(2, CountingDelete{&destroyed});
    c = std::move(b);  // destroys 2 first: a live handle is never overwritten
    CHECK(destroyed == std::vector<int>{2});
    CHECK(c.get() == 1);

    c.reset(3);
    CHECK(destroyed == std::vector<int>{2, 1});
    H d(4, CountingDelete{&destroyed});
    c.swap(d);
    CHECK(c.get() == 4);
    CHECK(d.get() == 3);
    CHECK(d.release() == 3);  // the caller owns 3 now: never destroyed
    CHECK_FALSE(static_cast<bool>(d));
    H& alias = c;
    c = std::move(alias);  // self-move keeps the handle
    CHECK(c.get() == 4);
  }
  CHECK(destroyed == std::vector<int>{2, 1, 4});
  static_assert(!std::is_copy_constructible_v<H>);
  static_assert(std::is_nothrow_move_constructible_v<H> && std::is_nothrow_move_assignable_v<H>);
}

// ======================================================================================= Context

TEST_CASE_FIXTURE(Env, "a context is a shared reference to its device's primary context") {
  tether::Context again = tether::Context::primary(rt, 0);
  CHECK(again == ctx);
  CHECK(ctx.get() != nullptr);
  CHECK(ctx.device() == 0);
  CHECK(ctx.runtime() == rt);
  tether::Context copy = ctx;
  tether::Context moved = std::move(copy);
  CHECK(moved == ctx);
  CHECK(copy.get() == ctx.get());  // NOLINT(bugprone-use-after-move): a Context is never empty
  ctx.synchronize();

  CUcontext saved = current_context(rt);
  set_current_context(rt, nullptr);
  ctx.make_current();
  CHECK(current_context(rt) == ctx.get());
  set_current_context(rt, saved);

  try {
    (void)rt.context(rt.device_count());
    FAIL("an ordinal out of range must throw");
  } catch (const tether::UsageError& e) {
    CHECK(contains(e.what(), "device ordinal " + std::to_string(rt.device_count())));
  }
  CHECK_THROWS_AS((void)rt.context(-1), tether::UsageError);
}

TEST_CASE_FIXTURE(Env, "context members make the context current on a thread that has none and leave it current") {
  CUcontext saved = current_context(rt);
  set_current_context(rt, nullptr);
  {
    tether::Stream s = ctx.make_stream();
    CHECK(current_context(rt) == ctx.get());  // set, not pushed: nothing to pop later
    set_current_context(rt, nullptr);
    tether::Event e = ctx.make_event();
    tether::DeviceBuffer<int> b = ctx.alloc<int>(64);
    tether::PinnedBuffer<int> p = ctx.alloc_pinned<int>(64);
    tether::Module m = load();
    CHECK(current_context(rt) == ctx.get());
    b.fill_bytes(0);
    b.copy_to(p.span());
    e.record(s);
    s.synchronize();
    e.synchronize();
    ctx.synchronize();
    CHECK(s.query());
    CHECK(e.query());
    CHECK(m.function("tether_resources_fill") != nullptr);
    CHECK(current_context(rt) == ctx.get());
  }
  CHECK(current_context(rt) == ctx.get());
  set_current_context(rt, saved);
}

// ======================================================================================== Stream

TEST_CASE_FIXTURE(Env, "a stream is created, synchronized, queried and destroyed") {
  {
    tether::Stream s = ctx.make_stream();
    tether::Stream blocking = ctx.make_stream(tether::StreamFlags::default_);
    CHECK(static_cast<bool>(s));
    CHECK(s.get() != nullptr);
    CHECK(s.context() == ctx);
    if (sim) CHECK(now().streams == before.streams + 2);

    // A host function that waits for a flag keeps the stream busy: query says "not done".
    std::atomic<bool> go{false};
    launch_host(s, [](void* flag) {
      while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::sleep_for(1ms);
    }, &go);
    CHECK_FALSE(s.query());
    go = true;
    s.synchronize();
    CHECK(s.query());
    blocking.synchronize();
  }
  if (sim) CHECK(now().streams == before.streams);
}

TEST_CASE_FIXTURE(Env, "moving a stream empties the source and move assignment destroys the stream it replaces") {
  tether::Stream a = ctx.make_stream();
  CUstream raw_a = a.get();
  tether::Stream b = std::move(a);
  CHECK_FALSE(static_cast<bool>(a));  // NOLINT(bugprone-use-after-move)
  CHECK(a.get() == nullptr);
  CHECK(b.get() == raw_a);
  CHECK_THROWS_AS(a.synchronize(), tether::UsageError);
  CHECK_THROWS_AS((void)a.query(), tether::UsageError);
  CHECK_THROWS_AS((void)a.context(), tether::UsageError);

  tether::Stream c = ctx.make_stream();
  if (sim) CHECK(now().streams == before.streams + 2);
  c = std::move(b);
  if (sim) CHECK(now().streams == before.streams + 1);
  CHECK(c.get() == raw_a);

  // release / from_native_handle hand ownership out and back.
  CUstream released = c.release();
  CHECK_FALSE(static_cast<bool>(c));
  tether::Stream adopted = tether::Stream::from_native_handle(ctx, released);
  CHECK(adopted.get() == raw_a);
  tether::Stream other;
  other.swap(adopted);
  CHECK(other.get() == raw_a);
  other.reset();
  CHECK_FALSE(static_cast<bool>(other));
  if (sim) CHECK(now().streams == before.streams);
}

// ========================================================================================= Event

TEST_CASE_FIXTURE(Env, "an event records on a stream, completes, and measures the time between two records") {
  {
    tether::Stream s = ctx.make_stream();
    tether::Event start = ctx.make_event();
    tether::Event end = ctx.make_event(tether::EventFlags::blocking_sync);
    CHECK(start.get() != nullptr);
    CHECK(start.context() == ctx);
    if (sim) CHECK(now().events == before.events + 2);
    start.record(s);
    end.record(s);
    end.synchronize();
    CHECK(start.query());
    CHECK(end.query());
    CHECK(tether::Event::elapsed_ms(start, end) >= 0.0f);
    CHECK(tether::Event::elapsed_ms(start, start) == 0.0f);  // one event twice (the simulator deadlocked)

    tether::Event untimed = ctx.make_event(tether::EventFlags::disable_timing | tether::EventFlags::blocking_sync);
    untimed.record(s);
    untimed.synchronize();
    CHECK_THROWS_AS((void)tether::Event::elapsed_ms(start, untimed), tether::DriverError);
    CHECK_THROWS_AS(start.record(tether::Stream{}), tether::UsageError);
  }
  if (sim) CHECK(now().events == before.events);
}

TEST_CASE_FIXTURE(Env, "copies of an event share it and the last copy destroys it") {
  std::optional<tether::Event> a = ctx.make_event();
  tether::Event b = *a;
  CHECK(b == *a);
  CHECK(b.get() == a->get());
  tether::Event c = ctx.make_event();
  CHECK_FALSE(c == b);
  if (sim) CHECK(now().events == before.events + 2);
  c = b;  // drops c's own event: it was the last reference
  if (sim) CHECK(now().events == before.events + 1);
  a.reset();
  if (sim) CHECK(now().events == before.events + 1);  // b and c still share it
  tether::Stream s = ctx.make_stream();
  c.record(s);
  b.synchronize();
}

// ================================================================================ Image, Module

TEST_CASE("an image keeps PTX NUL-terminated, copies bytes and reads files") {
  tether::Image ptx = tether::Image::from_ptx("abc");
  CHECK(ptx.size() == 4);
  CHECK(ptx.data()[3] == std::byte{0});
  CHECK(tether::Image::from_ptx(std::string_view("abc\0", 4)).size() == 4);  // not a second NUL

  const std::byte raw_bytes[] = {std::byte{0x7f}, std::byte{'E'}, std::byte{'L'}, std::byte{'F'}};
  tether::Image bin = tether::Image::from_bytes(raw_bytes);
  CHECK(bin.size() == 4);
  CHECK(std::memcmp(bin.data(), raw_bytes, 4) == 0);
  CHECK(bin.data()[4] == std::byte{0});  // the guard NUL, not counted

  auto path = std::filesystem::temp_directory_path() / ("tether_resources_test_" + std::to_string(::getpid()) + ".ptx");
  {
    std::ofstream f(path, std::ios::binary);
    f << test_ptx;
  }
  tether::Image file = tether::Image::from_file(path.string());
  std::filesystem::remove(path);
  CHECK(file.size() == test_ptx.size());
  CHECK(std::string_view(reinterpret_cast<const char*>(file.data()), file.size()) == test_ptx);
  tether::Image copy = file;
  CHECK(copy.data() == file.data());  // shared immutable storage

  CHECK_THROWS_AS((void)tether::Image::from_ptx(""), tether::UsageError);
  CHECK_THROWS_AS((void)tether::Image::from_bytes({}), tether::UsageError);
}

TEST_CASE("reading a missing image file throws UsageError naming the path") {
  const std::string missing = "/nonexistent/tether/kernels.fatbin";
  try {
    (void)tether::Image::from_file(missing);
    FAIL("from_file of a missing path must throw");
  } catch (const tether::UsageError& e) {
    CHECK(contains(e.what(), missing));
  }
}

TEST_CASE_FIXTURE(Env, "a module loads an image, gives typed kernels and unloads with its last reference") {
  {
    tether::Module m = load();
    CHECK(m.get() != nullptr);
    CHECK(m.context() == ctx);
    if (sim) CHECK(now().modules == before.modules + 1);
    CHECK(m.function("tether_resources_fill") != nullptr);

    FillKernel k = m.kernel<int*, int, int>("tether_resources_fill");
    static_assert(FillKernel::arity == 3);
    static_assert(std::is_same_v<FillKernel::params, std::tuple<int*, int, int>>);
    CHECK(k.name() == "tether_resources_fill");
    CHECK(k.module() == m);
    CHECK(k.function() != nullptr);
    FillKernel k2 = k;
    CHECK(k2 == k);

    tether::Module shared = m;
    CHECK(shared == m);
    tether::Module other = load();
    CHECK_FALSE(other == m);
    if (sim) CHECK(now().modules == before.modules + 2);
  }
  if (sim) CHECK(now().modules == before.modules);
}

TEST_CASE_FIXTURE(Env, "a kernel keeps its module loaded after the module is dropped") {
  std::optional<tether::Module> m = load();
  std::optional<FillKernel> k = m->kernel<int*, int, int>("tether_resources_fill");
  m.reset();
  if (sim) CHECK(now().modules == before.modules + 1);

  // The kernel still runs: its code is still loaded.
  tether::Stream s = ctx.make_stream();
  tether::DeviceBuffer<int> out = ctx.alloc<int>(1000);
  out.fill_bytes(0);
  launch_fill(*k, s, out.data(), 7, 1000);
  s.synchronize();
  std::vector<int> host(1000);
  out.copy_to(host);
  CHECK(host == std::vector<int>(1000, 7));

  k.reset();
  if (sim) CHECK(now().modules == before.modules);
}

TEST_CASE_FIXTURE(Env, "getting a kernel the module lacks throws DriverError naming the kernel") {
  tether::Module m = load();
  try {
    (void)m.kernel<int>("tether_no_such_kernel");
    FAIL("an unknown kernel must throw");
  } catch (const tether::DriverError& e) {
    CHECK(e.entry_point() == "cuModuleGetFunction");
    CHECK(contains(e.context(), "getting kernel 'tether_no_such_kernel' from a module"));
    CHECK(e.code() == tether::Errc::not_found);
  }
}

namespace {

// What Module::kernel<Args...>(name) throws as a UsageError ("" and a failed check if nothing).
template <class... Args>
std::string kernel_usage_error(const tether::Module& m, std::string_view name) {
  try {
    (void)m.kernel<Args...>(name);
  } catch (const tether::UsageError& e) {
    return e.what();
  }
  FAIL_CHECK("Module::kernel did not throw UsageError");
  return {};
}

// A kernel whose twin the simulator-only case below registers with another signature than the
// device code's (int*, int).
constexpr std::string_view twin_mismatch_ptx = R"PTX(
.version 7.0
.target sm_52
.address_size 64

.visible .entry tether_resources_pair(
  .param .u64 tether_resources_pair_p,
  .param .u32 tether_resources_pair_v)
{
  ret;
}
)PTX";

}  // namespace

TEST_CASE_FIXTURE(Env, "Module::kernel refuses a declaration with fewer or more parameters than the compiled kernel "
                       "takes, naming the kernel and both counts") {
  tether::Module m = load();
  std::string fewer = kernel_usage_error<int*, int>(m, "tether_resources_fill");
  CHECK(fewer == "Module::kernel(\"tether_resources_fill\"): Kernel<int *, int> declares 2 parameters but the "
                 "compiled kernel takes 3");
  std::string more = kernel_usage_error<int*, int, int, int>(m, "tether_resources_fill");
  CHECK(more == "Module::kernel(\"tether_resources_fill\"): Kernel<int *, int, int, int> declares 4 parameters but "
                "the compiled kernel takes 3");
  std::string none = kernel_usage_error<>(m, "tether_resources_fill");
  CHECK(none == "Module::kernel(\"tether_resources_fill\"): Kernel<> declares 0 parameters but the compiled kernel "
                "takes 3");
}

TEST_CASE_FIXTURE(Env, "Module::kernel refuses a declaration whose parameter size differs from the compiled kernel's, "
                       "naming the first such parameter, its declared type and both sizes") {
  tether::Module m = load();
  std::string what = kernel_usage_error<int*, int, double>(m, "tether_resources_fill");
  CHECK(what == "Module::kernel(\"tether_resources_fill\"): parameter 2 is declared as 'double' (8 bytes) but the "
                "compiled kernel's parameter 2 takes 4 bytes");
  what = kernel_usage_error<int*, char, long long>(m, "tether_resources_fill");
  CHECK(what == "Module::kernel(\"tether_resources_fill\"): parameter 1 is declared as 'char' (1 byte) but the "
                "compiled kernel's parameter 1 takes 4 bytes");
}

TEST_CASE_FIXTURE(Env, "Module::kernel accepts the compiled kernel's own signature, and one of the same sizes, which "
                       "it cannot tell apart") {
  tether::Module m = load();
  FillKernel k = m.kernel<int*, int, int>("tether_resources_fill");
  CHECK(k.function() != nullptr);
  tether::Kernel<float*, float, unsigned> same_sizes = m.kernel<float*, float, unsigned>("tether_resources_fill");
  CHECK(same_sizes.function() == k.function());
}

TEST_CASE_FIXTURE(Env, "on the simulator Module::kernel checks the declaration against the twin's registered "
                       "parameters, so a twin registered with another signature is reported") {
  if (!sim) return;
  tether::sim::register_kernel<int*, long long>("tether_resources_pair",
                                                [](const tether::sim::LaunchInfo&, int*, long long) {});
  tether::Module m = ctx.load_module(tether::Image::from_ptx(twin_mismatch_ptx));
  std::string what = kernel_usage_error<int*, int>(m, "tether_resources_pair");
  CHECK(what == "Module::kernel(\"tether_resources_pair\"): parameter 1 is declared as 'int' (4 bytes) but the "
                "compiled kernel's parameter 1 takes 8 bytes");
  tether::sim::register_kernel<int*, int>("tether_resources_pair", [](const tether::sim::LaunchInfo&, int*, int) {});
  CHECK(m.kernel<int*, int>("tether_resources_pair").name() == "tether_resources_pair");
  tether::sim::unregister_kernel("tether_resources_pair");
}

// ======================================================================================= buffers

TEST_CASE_FIXTURE(Env, "a device buffer round-trips its contents through copy_from, copy_to and fill_bytes") {
  tether::DeviceBuffer<int> b = ctx.alloc<int>(1000);
  if (sim) CHECK(now().device_allocations == before.device_allocations + 1);
  CHECK(b.size() == 1000);
  CHECK(b.bytes() == 4000);
  CHECK(b.address() != 0);
  CHECK(reinterpret_cast<std::uintptr_t>(b.data()) == b.address());
  CHECK(b.context() == ctx);

  std::vector<int> in(1000);
  std::iota(in.begin(), in.end(), -500);
  b.copy_from(in);
  std::vector<int> out(1000, 0);
  b.copy_to(out);
  CHECK(out == in);

  b.fill_bytes(0xAB);
  b.copy_to(out);
  int pattern = 0;
  std::memset(&pattern, 0xAB, sizeof pattern);
  CHECK(out == std::vector<int>(1000, pattern));

  // Partial copies touch only the start.
  std::vector<int> head{1, 2, 3};
  b.copy_from(head);
  std::vector<int> first(4);
  b.copy_to(first);
  CHECK(first == std::vector<int>{1, 2, 3, pattern});

  std::vector<int> too_big(1001);
  CHECK_THROWS_AS(b.copy_from(too_big), tether::UsageError);
  CHECK_THROWS_AS(b.copy_to(too_big), tether::UsageError);
}

TEST_CASE_FIXTURE(Env, "moving a device buffer empties the source and move assignment frees the buffer it replaces") {
  tether::DeviceBuffer<float> a = ctx.alloc<float>(16);
  CUdeviceptr addr = a.address();
  tether::DeviceBuffer<float> b = std::move(a);
  CHECK_FALSE(static_cast<bool>(a));  // NOLINT(bugprone-use-after-move)
  CHECK(a.size() == 0);
  CHECK(a.address() == 0);
  CHECK(a.data() == nullptr);
  CHECK(b.address() == addr);
  CHECK(b.size() == 16);
  CHECK_THROWS_AS(a.fill_bytes(0), tether::UsageError);
  CHECK_THROWS_AS((void)a.context(), tether::UsageError);
  std::vector<float> one(1);
  CHECK_THROWS_AS(a.copy_from(one), tether::UsageError);

  tether::DeviceBuffer<float> c = ctx.alloc<float>(32);
  if (sim) CHECK(now().device_allocations == before.device_allocations + 2);
  c = std::move(b);
  if (sim) CHECK(now().device_allocations == before.device_allocations + 1);
  CHECK(c.address() == addr);
  CHECK(c.size() == 16);

  // release / from_native_handle hand ownership out and back; swap and reset.
  CUdeviceptr released = c.release();
  CHECK_FALSE(static_cast<bool>(c));
  tether::DeviceBuffer<float> adopted = tether::DeviceBuffer<float>::from_native_handle(ctx, released, 16);
  CHECK(adopted.size() == 16);
  tether::DeviceBuffer<float> other;
  other.swap(adopted);
  CHECK(other.address() == addr);
  CHECK_FALSE(static_cast<bool>(adopted));
  other.reset();
  CHECK(other.size() == 0);
  if (sim) CHECK(now().device_allocations == before.device_allocations);
}

TEST_CASE_FIXTURE(Env, "a shared buffer frees its allocation when the last copy goes") {
  tether::DeviceBuffer<double> unique = ctx.alloc<double>(8);
  CUdeviceptr addr = unique.address();
  std::optional<tether::SharedBuffer<double>> a = std::move(unique).share();
  CHECK_FALSE(static_cast<bool>(unique));  // NOLINT(bugprone-use-after-move)
  CHECK(a->address() == addr);
  CHECK(a->size() == 8);
  CHECK(a->bytes() == 64);
  CHECK(a->use_count() == 1);
  CHECK(a->context() == ctx);

  tether::SharedBuffer<double> b = *a;
  CHECK(a->use_count() == 2);
  CHECK(b == *a);
  std::vector<double> in{1, 2, 3, 4, 5, 6, 7, 8}, out(8);
  b.copy_from(in);
  a->copy_to(out);
  CHECK(out == in);
  a->fill_bytes(0);
  b.copy_to(out);
  CHECK(out == std::vector<double>(8, 0.0));

  a.reset();
  CHECK(b.use_count() == 1);
  if (sim) CHECK(now().device_allocations == before.device_allocations + 1);
  tether::SharedBuffer<double> c = std::move(b);
  CHECK_FALSE(static_cast<bool>(b));  // NOLINT(bugprone-use-after-move)
  CHECK(b.size() == 0);
  CHECK(b.data() == nullptr);
  CHECK_THROWS_AS((void)b.context(), tether::UsageError);
  c = tether::SharedBuffer<double>{};
  if (sim) CHECK(now().device_allocations == before.device_allocations);
}

TEST_CASE_FIXTURE(Env, "a pinned buffer is host memory that device buffers copy to and from") {
  {
    tether::PinnedBuffer<int> p = ctx.alloc_pinned<int>(256);
    if (sim) CHECK(now().host_allocations == before.host_allocations + 1);
    CHECK(p.size() == 256);
    CHECK(p.bytes() == 1024);
    CHECK(p.data() != nullptr);
    CHECK(p.span().size() == 256);
    CHECK(p.context() == ctx);
    std::iota(p.span().begin(), p.span().end(), 0);

    tether::DeviceBuffer<int> d = ctx.alloc<int>(256);
    d.copy_from(std::as_const(p).span());
    tether::PinnedBuffer<int> q = ctx.alloc_pinned<int>(256);
    d.copy_to(q.span());
    CHECK(std::equal(p.span().begin(), p.span().end(), q.span().begin()));

    // Moves, move assignment, release and adoption.
    int* addr = p.data();
    tether::PinnedBuffer<int> moved = std::move(p);
    CHECK_FALSE(static_cast<bool>(p));  // NOLINT(bugprone-use-after-move)
    CHECK(p.size() == 0);
    CHECK(moved.data() == addr);
    q = std::move(moved);  // frees q's own memory
    if (sim) CHECK(now().host_allocations == before.host_allocations + 1);
    int* raw_p = q.release();
    tether::PinnedBuffer<int> adopted = tether::PinnedBuffer<int>::from_native_handle(ctx, raw_p, 256);
    CHECK(adopted.data() == addr);

    // Sharing.
    tether::SharedPinnedBuffer<int> s = std::move(adopted).share();
    CHECK_FALSE(static_cast<bool>(adopted));  // NOLINT(bugprone-use-after-move)
    tether::SharedPinnedBuffer<int> s2 = s;
    CHECK(s.use_count() == 2);
    CHECK(s2.data() == addr);
    CHECK(s2.span()[255] == 255);
    CHECK(s2.context() == ctx);
    CHECK_THROWS_AS((void)tether::SharedPinnedBuffer<int>{}.context(), tether::UsageError);
  }
  if (sim) CHECK(now().host_allocations == before.host_allocations);
}

TEST_CASE_FIXTURE(Env, "allocating zero elements throws UsageError and allocates nothing") {
  try {
    (void)ctx.alloc<float>(0);
    FAIL("allocating 0 elements must throw");
  } catch (const tether::UsageError& e) {
    CHECK(contains(e.what(), "allocating 0 elements of float"));
  }
  CHECK_THROWS_AS((void)ctx.alloc_pinned<int>(0), tether::UsageError);
  CHECK_THROWS_AS((void)ctx.alloc<double>(std::numeric_limits<std::size_t>::max() / 4), tether::UsageError);
  if (sim) {
    CHECK(now().device_allocations == before.device_allocations);
    CHECK(now().host_allocations == before.host_allocations);
  }
}

TEST_CASE_FIXTURE(Env, "an allocation the driver refuses throws DriverError naming cuMemAlloc") {
  try {
    (void)ctx.alloc<std::byte>(std::size_t{1} << 50);  // a pebibyte: more than any device has
    FAIL("a pebibyte allocation must fail");
  } catch (const tether::DriverError& e) {
    CHECK(e.entry_point() == "cuMemAlloc");
    CHECK(e.code() == tether::Errc::out_of_memory);
    CHECK(contains(e.what(), "cuMemAlloc"));
    CHECK(contains(e.context(), "device memory"));
  }
  if (sim) CHECK(now().device_allocations == before.device_allocations);
}

TEST_CASE_FIXTURE(Env, "an injected failure of a creating call throws DriverError naming the entry point") {
  if (!sim) return;  // fault injection is the simulator's
  auto expect = [&](const char* entry, auto&& make) {
    tether::sim::fail_call(entry, 1);
    try {
      make();
      FAIL_CHECK(entry << " did not fail");
    } catch (const tether::DriverError& e) {
      CHECK(e.entry_point() == entry);
      CHECK(contains(e.what(), entry));
    }
  };
  expect("cuMemAlloc", [&] { (void)ctx.alloc<int>(4); });
  expect("cuMemAllocHost", [&] { (void)ctx.alloc_pinned<int>(4); });
  expect("cuStreamCreate", [&] { (void)ctx.make_stream(); });
  expect("cuEventCreate", [&] { (void)ctx.make_event(); });
  expect("cuModuleLoadData", [&] { (void)load(); });
  // The context is set only when it is not already current on the calling thread.
  auto none_current = [&] {
    CHECK(tether::detail::raw<tether::detail::Entry::cuCtxSetCurrent>(tether::detail::table_of(rt), CUcontext{}) ==
          CUDA_SUCCESS);
  };
  none_current();
  expect("cuCtxSetCurrent", [&] { (void)ctx.alloc<int>(4); });
  expect("cuCtxGetCurrent", [&] { (void)ctx.alloc<int>(4); });
  tether::sim::Stats after = now();
  CHECK(after.device_allocations == before.device_allocations);
  CHECK(after.host_allocations == before.host_allocations);
  CHECK(after.streams == before.streams);
  CHECK(after.events == before.events);
  CHECK(after.modules == before.modules);
}

TEST_CASE_FIXTURE(Env, "a release the driver fails is reported through the error hook and never thrown") {
  if (!sim) return;  // fault injection is the simulator's
  tether::DeviceBuffer<int> b = ctx.alloc<int>(4);
  tether::sim::fail_call("cuMemFreeAsync", 1, tether::Errc::invalid_value);
  CHECK_NOTHROW(b.reset());
  REQUIRE(tether::wait_reclaimed(5000ms));  // the free runs on the reclaimer
  std::vector<std::string> reports = take_reports();
  REQUIRE(reports.size() == 1);
  CHECK(contains(reports[0], "freeing device memory: cuMemFreeAsync failed with CUDA_ERROR_INVALID_VALUE"));
  CHECK_FALSE(static_cast<bool>(b));
  // The simulator still holds the block the failed free left behind; nothing else leaked.
  CHECK(now().device_allocations == before.device_allocations + 1);

  tether::sim::fail_call("cuStreamDestroy", 1, tether::Errc::invalid_handle);
  { tether::Stream s = ctx.make_stream(); }
  reports = take_reports();
  REQUIRE(reports.size() == 1);
  CHECK(contains(reports[0], "destroying a stream: cuStreamDestroy failed"));
}

// ============================================================================ the release rule

namespace {

// What a host callback drops: one of every resource of this layer.
struct Dropped {
  tether::DeviceBuffer<int> buffer;
  tether::SharedBuffer<int> shared;
  tether::PinnedBuffer<int> pinned;
  tether::Stream stream;
  tether::Event event;
  tether::Module module;
  FillKernel kernel;
  tether::Context context;
  bool forbid = true;
};

std::atomic<int> g_dropped_forbidden{0};  // callbacks that dropped their resources in the host_callback role

void drop_in_callback(void* data) {
  auto* d = static_cast<Dropped*>(data);
  if (d->forbid) {
    tether::detail::ThreadRoleScope role(tether::detail::ThreadRole::host_callback);  // what tether's own host callbacks do
    if (tether::detail::cuda_forbidden_here()) g_dropped_forbidden.fetch_add(1);
    delete d;
  } else {
    delete d;
  }
}

Dropped* make_dropped(const Env& env, bool forbid) {
  tether::Module m = env.load();
  FillKernel k = m.kernel<int*, int, int>("tether_resources_fill");
  return new Dropped{env.ctx.alloc<int>(64),
                     env.ctx.alloc<int>(64).share(),
                     env.ctx.alloc_pinned<int>(64),
                     env.ctx.make_stream(),
                     env.ctx.make_event(),
                     std::move(m),
                     std::move(k),
                     env.ctx,
                     forbid};
}

}  // namespace

TEST_CASE_FIXTURE(Env, "resources dropped inside a host callback are released later by the reclaimer") {
  tether::Stream s = ctx.make_stream();
  int forbidden_before = g_dropped_forbidden.load();
  launch_host(s, &drop_in_callback, make_dropped(*this, true));
  s.synchronize();
  CHECK(g_dropped_forbidden.load() == forbidden_before + 1);
  REQUIRE(tether::wait_reclaimed(5000ms));
  if (sim) {
    tether::sim::Stats after = now();
    CHECK(after.device_allocations == before.device_allocations);
    CHECK(after.host_allocations == before.host_allocations);
    CHECK(after.streams == before.streams + 1);  // only s
    CHECK(after.events == before.events);
    CHECK(after.modules == before.modules);
    CHECK(tether::sim::violations().empty());
  }
}

TEST_CASE_FIXTURE(Env, "a release the driver refuses with CUDA_ERROR_NOT_PERMITTED is deferred to the reclaimer") {
  if (!sim) return;  // the simulator records the refused calls; the real driver's refusal is not documented
  tether::Stream s = ctx.make_stream();
  {
    tether::sim::ExpectViolations expected;  // the deleters' tries inside the callback (call_in_callback)
    launch_host(s, &drop_in_callback, make_dropped(*this, false));
    s.synchronize();
  }
  REQUIRE(tether::wait_reclaimed(5000ms));
  tether::sim::Stats after = now();
  CHECK(after.device_allocations == before.device_allocations);
  CHECK(after.host_allocations == before.host_allocations);
  CHECK(after.streams == before.streams + 1);
  CHECK(after.events == before.events);
  CHECK(after.modules == before.modules);
  // Without ForbidCuda the stream and event deleters tried once (cuCtxGetCurrent, refused) and
  // then deferred; frees and unloads go to the reclaimer without trying.
  std::vector<tether::sim::Violation> v = tether::sim::violations();
  CHECK_FALSE(v.empty());
  for (const tether::sim::Violation& x : v) {
    CHECK(x.kind == tether::sim::ViolationKind::call_in_callback);
    CHECK(x.entry_point == "cuCtxGetCurrent");
  }
  tether::sim::clear_violations();
}

TEST_CASE_FIXTURE(Env, "resources dropped on a thread with no current context are released in their own context") {
  Dropped* d = make_dropped(*this, false);
  std::thread([d, this] {
    CHECK(current_context(rt) == nullptr);
    delete d;
    CHECK(current_context(rt) == nullptr);
  }).join();
  if (sim) {
    tether::sim::Stats after = now();
    CHECK(after.device_allocations == before.device_allocations);
    CHECK(after.host_allocations == before.host_allocations);
    CHECK(after.streams == before.streams);
    CHECK(after.events == before.events);
    CHECK(after.modules == before.modules);
  }
}

TEST_CASE_FIXTURE(Env, "a resource keeps its context alive after every Context copy is gone") {
  std::optional<tether::Context> own = rt.context(0);
  tether::DeviceBuffer<int> b = own->alloc<int>(8);
  tether::Stream s = own->make_stream();
  own.reset();
  std::vector<int> in{1, 2, 3, 4, 5, 6, 7, 8}, out(8);
  b.copy_from(in);
  b.copy_to(out);
  CHECK(out == in);
  s.synchronize();
  CHECK(b.context() == s.context());
}

// ====================================================================== two devices, two contexts

namespace {
constexpr const char* two_contexts_case =
    "child process body: deleters run in their own context while another device's context is current";
}

TEST_CASE("deleters run in their own context while another device's context (or none) is current") {
  tether::Runtime rt = tether::Runtime::open();
  if (rt.kind() != tether::DriverKind::simulated && rt.device_count() < 2) {
    MESSAGE("skipped: the real driver sees only one device");
    return;
  }
  ChildRun r = run_case_in_fresh_process(two_contexts_case);
  INFO("child output:\n" << r.output);
  CHECK(r.status == 0);
  CHECK(contains(r.output, "Status: SUCCESS!"));
}

TEST_CASE("child process body: deleters run in their own context while another device's context is current" *
          doctest::skip()) {
  if (!std::getenv("TETHER_RESOURCES_CHILD")) return;  // only in the process the case above starts
  tether::sim::configure({.devices = 2});  // a fresh process: the simulator is not open yet
  tether::Runtime rt = tether::Runtime::open();
  REQUIRE(rt.device_count() >= 2);
  const bool sim = rt.kind() == tether::DriverKind::simulated;
  register_twins();
  tether::ErrorHook previous = tether::set_error_hook(&capture_report);

  tether::Context ctx0 = rt.context(0);
  tether::Context ctx1 = rt.context(1);
  CHECK_FALSE(ctx0 == ctx1);
  CHECK(ctx1.device() == 1);

  // Bytes of device memory in use on the device of `ctx` (the simulator counts them exactly).
  auto used_on = [&](const tether::Context& ctx) {
    tether::detail::ScopedContext scope(*tether::detail::state_of(ctx));
    std::size_t free_bytes = 0, total = 0;
    REQUIRE(raw<Entry::cuMemGetInfo>(table(rt), &free_bytes, &total) == CUDA_SUCCESS);
    return total - free_bytes;
  };

  auto exercise = [&](CUcontext current) {
    set_current_context(rt, current);
    std::size_t used0 = sim ? used_on(ctx0) : 0, used1 = sim ? used_on(ctx1) : 0;
    set_current_context(rt, current);
    // A tether call on a thread with no current context leaves its own context current there;
    // with another context current it pushes and pops.
    if (!current) current = ctx0.get();
    {
      tether::DeviceBuffer<int> b = ctx0.alloc<int>(1024);
      CHECK(current_context(rt) == current);
      if (sim) {
        CHECK(used_on(ctx0) == used0 + 4096);  // allocated on device 0, whatever was current
        CHECK(used_on(ctx1) == used1);
      }
      std::vector<int> in(1024, 5), out(1024);
      b.copy_from(in);
      b.copy_to(out);
      CHECK(out == in);
      tether::PinnedBuffer<int> p = ctx0.alloc_pinned<int>(16);
      tether::Stream s = ctx0.make_stream();
      tether::Event e = ctx0.make_event();
      tether::Module m = ctx0.load_module(tether::Image::from_ptx(test_ptx));
      FillKernel k = m.kernel<int*, int, int>("tether_resources_fill");
      launch_fill(k, s, b.data(), 9, 1024);
      e.record(s);
      e.synchronize();
      b.copy_to(out);
      CHECK(out == std::vector<int>(1024, 9));
      CHECK(current_context(rt) == current);
    }
    CHECK(current_context(rt) == current);  // every deleter restored the caller's context
    CHECK(tether::wait_reclaimed(5000ms));     // frees run on the reclaimer
    if (sim) CHECK(used_on(ctx0) == used0);
    // Dropped on another thread where device 1's context is current.
    tether::DeviceBuffer<int> b = ctx0.alloc<int>(256);
    std::thread([&, b = std::move(b)]() mutable {
      set_current_context(rt, ctx1.get());
      b.reset();
      CHECK(current_context(rt) == ctx1.get());
    }).join();
    CHECK(tether::wait_reclaimed(5000ms));
    if (sim) CHECK(used_on(ctx0) == used0);
  };

  exercise(ctx1.get());
  exercise(nullptr);

  CHECK(tether::wait_reclaimed(5000ms));
  tether::set_error_hook(previous);
  for (const std::string& r : take_reports()) FAIL_CHECK("unexpected error report: " << r);
  if (sim) {
    tether::sim::Stats st = tether::sim::stats();
    CHECK(st.device_allocations == 0);
    CHECK(st.host_allocations == 0);
    CHECK(st.streams == 0);
    CHECK(st.events == 0);
    CHECK(st.modules == 0);
    for (const tether::sim::Violation& v : tether::sim::violations())
      FAIL_CHECK("simulator violation " << tether::sim::to_string(v.kind) << ": " << v.detail);
  }
}

// ========================================================================= stream-ordered copies

namespace {

// Holds a stream back until `open()`: a host function that waits on the callback thread (at most
// 10 s, so that a broken test cannot hang). Work queued behind it stays queued until then.
struct Gate {
  std::shared_ptr<std::atomic<bool>> opened = std::make_shared<std::atomic<bool>>(false);
  explicit Gate(const tether::Stream& s) {
    s.host([o = opened] {
      auto until = std::chrono::steady_clock::now() + 10s;
      while (!o->load() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
    });
  }
  void open() const { opened->store(true); }
};

}  // namespace

TEST_CASE_FIXTURE(Env, "a synchronous copy_to does not wait for a non-blocking stream, and copy_to(dst, stream) is "
                       "ordered after the stream's queued work") {
  FillKernel fill = load().kernel<int*, int, int>("tether_resources_fill");
  tether::SharedBuffer<int> x = ctx.alloc<int>(256).share();
  x.fill_bytes(0);
  tether::PinnedBuffer<int> pinned = ctx.alloc_pinned<int>(256);
  std::fill(pinned.span().begin(), pinned.span().end(), -1);
  tether::Stream s = ctx.make_stream();
  Gate gate(s);
  launch_fill(fill, s, x.data(), 7, 256);  // queued behind the gate
  x.copy_to(pinned.span(), s);             // queued behind the launch (pinned: returns at once)
  // The trap the documentation warns about: the launch has not run, and the synchronous copy
  // does not wait for it.
  std::vector<int> stale(256, -1);
  x.copy_to(stale);
  CHECK(stale == std::vector<int>(256, 0));
  CHECK(std::all_of(pinned.span().begin(), pinned.span().end(), [](int v) { return v == -1; }));
  gate.open();
  s.synchronize();
  CHECK(std::all_of(pinned.span().begin(), pinned.span().end(), [](int v) { return v == 7; }));
  // Pageable memory, without a gate: the stream copy still reads what the launch wrote.
  launch_fill(fill, s, x.data(), 9, 256);
  std::vector<int> h(256, 0);
  x.copy_to(h, s);
  s.synchronize();
  CHECK(h == std::vector<int>(256, 9));
  // copy_from(src, stream) is ordered before later work: the kernel then overwrites the start.
  std::vector<int> ones(256, 1);
  x.copy_from(ones, s);
  launch_fill(fill, s, x.data(), 5, 128);
  x.copy_to(h, s);
  s.synchronize();
  CHECK(std::count(h.begin(), h.end(), 5) == 128);
  CHECK(std::count(h.begin(), h.end(), 1) == 128);
}

TEST_CASE_FIXTURE(Env, "a stream-ordered copy keeps its buffers alive until the stream has run it") {
  tether::Stream s = ctx.make_stream();
  const std::size_t allocations = sim ? now().device_allocations : 0;
  const std::size_t host_allocations = sim ? now().host_allocations : 0;
  tether::SharedPinnedBuffer<int> out = ctx.alloc_pinned<int>(64).share();
  std::fill(out.span().begin(), out.span().end(), 0);
  {
    tether::SharedBuffer<int> x = ctx.alloc<int>(64).share();
    std::vector<int> in(64);
    std::iota(in.begin(), in.end(), 100);
    x.copy_from(in);
    Gate gate(s);
    x.copy_to(out, s);
    x = tether::SharedBuffer<int>{};  // the last handle of the caller goes: the copy keeps it
    out = tether::SharedPinnedBuffer<int>{};
    if (sim) {
      CHECK(now().device_allocations == allocations + 1);
      CHECK(now().host_allocations == host_allocations + 1);
    }
    gate.open();
    s.synchronize();
  }
  if (sim) {
    CHECK(now().device_allocations == allocations);
    CHECK(now().host_allocations == host_allocations);
  }
  // The data reached the pinned buffer before it went: checked with one that stays.
  tether::SharedPinnedBuffer<int> kept = ctx.alloc_pinned<int>(4).share();
  tether::SharedBuffer<int> y = ctx.alloc<int>(4).share();
  std::vector<int> four{1, 2, 3, 4};
  y.copy_from(four);
  y.copy_to(kept, s);
  s.synchronize();
  CHECK(std::vector<int>(kept.span().begin(), kept.span().end()) == four);
  // And the other way round: from a pinned buffer, which is kept as well.
  std::vector<int> back{9, 8, 7, 6};
  std::copy(back.begin(), back.end(), kept.span().begin());
  y.copy_from(kept, s);
  std::vector<int> h(4);
  y.copy_to(h, s);
  s.synchronize();
  CHECK(h == back);
}

TEST_CASE_FIXTURE(Env, "stream-ordered copies check sizes, empty buffers and empty streams before any driver call, "
                       "saying what is wrong") {
  tether::SharedBuffer<float> x = ctx.alloc<float>(4).share();
  tether::Stream s = ctx.make_stream();
  tether::Stream none;
  std::vector<float> five(5), four(4, 2.0f), three(3, 0.0f), zero;
  auto message = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const tether::UsageError& e) {
      return e.what();
    }
    return "(no UsageError)";
  };
  // Boundaries: 0 elements queue nothing, 4 fit, a shorter span copies the start, 5 do not fit.
  x.copy_from(four, s);
  x.copy_to(std::span<float>(zero), s);
  x.copy_from(std::span<const float>(zero), s);
  x.copy_to(three, s);
  s.synchronize();
  CHECK(three == std::vector<float>(3, 2.0f));
  CHECK(message([&] { x.copy_to(five, s); }) == "SharedBuffer::copy_to: 20 bytes do not fit in a buffer of 16 bytes");
  CHECK(message([&] { x.copy_from(five, s); }) == "SharedBuffer::copy_from: 20 bytes do not fit in a buffer of 16 bytes");
  tether::SharedPinnedBuffer<float> big = ctx.alloc_pinned<float>(5).share();
  CHECK(contains(message([&] { x.copy_to(big, s); }), "20 bytes do not fit in a buffer of 16 bytes"));
  // Empty operands.
  tether::SharedBuffer<float> empty;
  CHECK(message([&] { empty.copy_to(four, s); }) ==
        "SharedBuffer::copy_to: this SharedBuffer is moved from or empty (default-constructed, moved from, released or "
        "reset)");
  CHECK(contains(message([&] { empty.copy_to(std::span<float>(zero), s); }), "this SharedBuffer is moved from or empty"));
  CHECK(message([&] { x.copy_to(four, none); }) ==
        "SharedBuffer::copy_to: this Stream is moved from or empty (default-constructed, moved from, released or reset)");
  CHECK(contains(message([&] { x.copy_from(four, none); }), "SharedBuffer::copy_from: this Stream is moved from or empty"));
  CHECK(contains(message([&] { x.copy_to(tether::SharedPinnedBuffer<float>{}, s); }),
                 "SharedBuffer::copy_to (the pinned destination): this SharedPinnedBuffer is moved from or empty"));
  CHECK(contains(message([&] { x.copy_from(tether::SharedPinnedBuffer<float>{}, s); }),
                 "SharedBuffer::copy_from (the pinned source): this SharedPinnedBuffer is moved from or empty"));
  // Nothing was queued by the refused calls: the buffer still holds what the good copy wrote.
  std::vector<float> h(4);
  x.copy_to(h);
  CHECK(h == four);
}

TEST_CASE_FIXTURE(Env, "a stream-ordered copy inside a capture becomes a memcpy node that owns the buffer") {
  tether::SharedBuffer<int> x = ctx.alloc<int>(16).share();
  tether::SharedPinnedBuffer<int> out = ctx.alloc_pinned<int>(16).share();
  std::vector<int> in(16, 42);
  x.copy_from(in);
  tether::Stream s = ctx.make_stream();
  tether::Graph g = tether::capture(s, [&](tether::Capture&) { x.copy_to(out, s); });
  tether::Inspection info = tether::inspect(g);
  REQUIRE(info.graphs[0].nodes.size() == 1);
  CHECK(info.graphs[0].nodes[0].kind == tether::NodeKind::memcpy);
  CHECK(info.graphs[0].nodes[0].owners == std::vector<std::string>{"SharedBuffer<int>[16]", "SharedPinnedBuffer<int>[16]"});
  std::fill(out.span().begin(), out.span().end(), 0);
  tether::GraphExec exec = g.instantiate();
  exec.launch(s);
  s.synchronize();
  CHECK(std::vector<int>(out.span().begin(), out.span().end()) == in);
}

// =================================================================================== buffer names

TEST_CASE_FIXTURE(Env, "every buffer type carries its name through moves, share() and inspect's owner label, and loses "
                       "it on reset and release") {
  SUBCASE("DeviceBuffer and SharedBuffer") {
    tether::DeviceBuffer<float> b = ctx.alloc<float>(8).named("x");
    CHECK(b.name() == "x");
    CHECK(tether_owner_label(b) == "DeviceBuffer<float>[8] \"x\"");
    tether::DeviceBuffer<float> moved = std::move(b);
    CHECK(moved.name() == "x");
    CHECK(b.name().empty());  // NOLINT(bugprone-use-after-move)
    moved.named("renamed");
    CHECK(moved.name() == "renamed");
    tether::SharedBuffer<float> s = std::move(moved).named("y").share();
    CHECK(s.name() == "y");
    CHECK(tether_owner_label(s) == "SharedBuffer<float>[8] \"y\"");
    tether::SharedBuffer<float> copy = s;
    CHECK(copy.name() == "y");
    CHECK(tether::SharedBuffer<float>{}.name().empty());
    tether::DeviceBuffer<float> r = ctx.alloc<float>(2).named("r");
    r.named("");
    CHECK(r.name().empty());
    CHECK(tether_owner_label(r) == "DeviceBuffer<float>[2]");
    r.named("r");
    r.reset();
    CHECK(r.name().empty());
    tether::DeviceBuffer<float> rel = ctx.alloc<float>(2).named("rel");
    std::size_t n = rel.size();
    CUdeviceptr p = rel.release();
    CHECK(rel.name().empty());
    auto adopted = tether::DeviceBuffer<float>::from_native_handle(ctx, p, n);
    CHECK(adopted.name().empty());
  }
  SUBCASE("PinnedBuffer and SharedPinnedBuffer") {
    tether::PinnedBuffer<int> b = ctx.alloc_pinned<int>(3).named("host");
    CHECK(b.name() == "host");
    CHECK(tether_owner_label(b) == "PinnedBuffer<int>[3] \"host\"");
    tether::SharedPinnedBuffer<int> s = std::move(b).share();
    CHECK(s.name() == "host");
    CHECK(tether_owner_label(s) == "SharedPinnedBuffer<int>[3] \"host\"");
    tether::PinnedBuffer<int> r = ctx.alloc_pinned<int>(1).named("r");
    r.reset();
    CHECK(r.name().empty());
  }
  SUBCASE("refusals name the call and the problem") {
    tether::DeviceBuffer<float> empty;
    try {
      empty.named("x");
      FAIL("no UsageError");
    } catch (const tether::UsageError& e) {
      CHECK(std::string(e.what()) == "DeviceBuffer::named: this DeviceBuffer is moved from or empty (default-constructed, "
                                     "moved from, released or reset)");
    }
    tether::PinnedBuffer<float> empty_pinned;
    CHECK_THROWS_WITH_AS(empty_pinned.named("x"), doctest::Contains("PinnedBuffer::named: this PinnedBuffer is moved"),
                         tether::UsageError);
    tether::DeviceBuffer<float> b = ctx.alloc<float>(1).named("kept");
    try {
      b.named("two\nlines");
      FAIL("no UsageError");
    } catch (const tether::UsageError& e) {
      CHECK(contains(e.what(), "DeviceBuffer::named: the name \"two"));
      CHECK(contains(e.what(), "has a control character (code 10)"));
    }
    CHECK(b.name() == "kept");
  }
}

// ============================================================================= raw driver access

TEST_CASE_FIXTURE(Env, "Runtime::driver gives the loaded driver's entry points, which run on the simulator too and "
                       "work on tether's objects") {
  const tether::DriverApi& api = rt.driver();
  CHECK(&api == &rt.driver());
  CHECK(&api == &tether::Runtime::open().driver());
  CHECK(api.table == &table(rt));
  CHECK(api.provides("cuMemsetD32Async"));
  CHECK(api.provides("cuStreamGetCaptureInfo"));
  CHECK_FALSE(api.provides("cuNoSuchEntryPoint"));
  CHECK(reinterpret_cast<void*>(api.cuMemsetD32Async) == reinterpret_cast<void*>(table(rt).get<Entry::cuMemsetD32Async>()));
  int version = 0;
  REQUIRE(api.cuDriverGetVersion(&version) == CUDA_SUCCESS);
  CHECK(version == rt.driver_version());

  // A raw memset on a tether stream, ordered with tether's own stream-ordered copy.
  tether::SharedBuffer<unsigned> x = ctx.alloc<unsigned>(100).share();
  tether::Stream s = ctx.make_stream();
  REQUIRE(api.cuMemsetD32Async(x.address(), 0xC0FFEEu, x.size(), s.get()) == CUDA_SUCCESS);
  std::vector<unsigned> h(100);
  x.copy_to(h, s);
  s.synchronize();
  CHECK(h == std::vector<unsigned>(100, 0xC0FFEEu));

  // cuStreamGetCaptureInfo sees tether's capture, with its id.
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;
  {
    tether::Capture c(s);
    REQUIRE(api.cuStreamGetCaptureInfo(s.get(), &status, &id, nullptr, nullptr, nullptr, nullptr) == CUDA_SUCCESS);
    CHECK(status == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CHECK(id == c.id());
    // Raw work captured into tether's capture is an untracked node of the graph it ends in.
    REQUIRE(api.cuMemsetD32Async(x.address(), 1u, x.size(), s.get()) == CUDA_SUCCESS);
    tether::Graph g = c.end();
    tether::Inspection in = tether::inspect(g);
    REQUIRE(in.graphs[0].nodes.size() == 1);
    CHECK(in.graphs[0].nodes[0].kind == tether::NodeKind::memset);
    CHECK_FALSE(in.graphs[0].nodes[0].tracked);
  }
  REQUIRE(api.cuStreamGetCaptureInfo(s.get(), &status, &id, nullptr, nullptr, nullptr, nullptr) == CUDA_SUCCESS);
  CHECK(status == CU_STREAM_CAPTURE_STATUS_NONE);
  CHECK(tether::DriverApi{}.provides("cuMemsetD32Async") == false);
}
