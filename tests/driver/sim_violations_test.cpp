// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The loud simulator (src/sim/sim.hpp): a violation is printed once on stderr when it is
// recorded, TETHER_SIM_VIOLATIONS=print|fatal|quiet chooses what happens, and
// tether::sim::ExpectViolations marks the violations a test provokes on purpose. Simulator only:
// the in-process cases use Runtime::simulated() whatever TETHER_DRIVER says, and the cases about
// the process (the default, fatal's abort, the environment's parsing) run sim_violation_program
// as a child with its stdout and stderr captured.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "sim/sim.hpp"
#include "support/messages.hpp"
#include "tether.hpp"

extern char** environ;

using tether::detail::Entry;
using tether::detail::raw;
using tether::sim::ViolationKind;
using tether::sim::ViolationMode;
using tether_test::contains;

namespace {

// ------------------------------------------------------------------------------- in-process

struct Sim {
  const tether::detail::DriverTable* t = nullptr;
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;
  CUfunction touch = nullptr;
};

constexpr const char* touch_ptx = R"PTX(
.version 8.0
.target sm_90
.address_size 64

.visible .entry violation_touch(.param .u64 violation_touch_p0)
{
  ret;
}
)PTX";

std::atomic<int> g_touch_runs{0};

// The simulator, device 0's primary context, a stream and a kernel whose twin counts its runs;
// made once, never torn down (like the driver).
const Sim& sim() {
  static const Sim s = [] {
    tether::sim::register_kernel<float*>(
        "violation_touch", [](const tether::sim::LaunchInfo&, float*) { g_touch_runs.fetch_add(1); });
    Sim r;
    tether::Runtime rt = tether::Runtime::simulated();
    r.t = &tether::detail::table_of(rt);
    CUdevice dev = 0;
    REQUIRE(raw<Entry::cuDeviceGet>(*r.t, &dev, 0) == CUDA_SUCCESS);
    REQUIRE(raw<Entry::cuDevicePrimaryCtxRetain>(*r.t, &r.ctx, dev) == CUDA_SUCCESS);
    REQUIRE(raw<Entry::cuCtxSetCurrent>(*r.t, r.ctx) == CUDA_SUCCESS);
    REQUIRE(raw<Entry::cuStreamCreate>(*r.t, &r.stream, static_cast<unsigned>(CU_STREAM_NON_BLOCKING)) ==
            CUDA_SUCCESS);
    CUmodule m = nullptr;
    REQUIRE(raw<Entry::cuModuleLoadData>(*r.t, &m, static_cast<const void*>(touch_ptx)) == CUDA_SUCCESS);
    REQUIRE(raw<Entry::cuModuleGetFunction>(*r.t, &r.touch, m, "violation_touch") == CUDA_SUCCESS);
    return r;
  }();
  REQUIRE(raw<Entry::cuCtxSetCurrent>(*s.t, s.ctx) == CUDA_SUCCESS);
  return s;
}

// One violation, recorded on the calling thread: an event destroyed twice.
void destroy_event_twice() {
  const Sim& s = sim();
  CUevent e = nullptr;
  REQUIRE(raw<Entry::cuEventCreate>(*s.t, &e, 0u) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuEventDestroy>(*s.t, e) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuEventDestroy>(*s.t, e) == CUDA_ERROR_INVALID_HANDLE);
}

// One violation, recorded on the stream's worker thread when the launch executes: a kernel whose
// pointer argument points into freed memory. Returns after the stream is synchronized.
void launch_on_freed_memory() {
  const Sim& s = sim();
  CUdeviceptr d = 0;
  REQUIRE(raw<Entry::cuMemAlloc>(*s.t, &d, std::size_t{256}) == CUDA_SUCCESS);
  REQUIRE(raw<Entry::cuMemFree>(*s.t, d) == CUDA_SUCCESS);
  g_touch_runs.store(0);
  void* args[] = {&d};
  CHECK(raw<Entry::cuLaunchKernel>(*s.t, s.touch, 1u, 1u, 1u, 1u, 1u, 1u, 0u, s.stream, args,
                                   static_cast<void**>(nullptr)) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuStreamSynchronize>(*s.t, s.stream) == CUDA_SUCCESS);
  CHECK(g_touch_runs.load() == 0);  // the simulator did not run it
}

// Redirects this process's stderr (file descriptor 2) into a temporary file while it lives.
class StderrCapture {
 public:
  StderrCapture() {
    std::fflush(stderr);
    file_ = std::tmpfile();
    REQUIRE(file_ != nullptr);
    saved_ = ::dup(2);
    REQUIRE(saved_ >= 0);
    REQUIRE(::dup2(::fileno(file_), 2) >= 0);
  }
  ~StderrCapture() {
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    std::fclose(file_);
  }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;

  /// Everything written to stderr since the capture began.
  std::string text() const {
    std::fflush(stderr);
    std::string s;
    std::array<char, 4096> buf{};
    off_t at = 0;
    for (ssize_t n; (n = ::pread(::fileno(file_), buf.data(), buf.size(), at)) > 0; at += n)
      s.append(buf.data(), static_cast<std::size_t>(n));
    return s;
  }

 private:
  std::FILE* file_ = nullptr;
  int saved_ = -1;
};

// Sets the violation mode while it lives (CI runs the tests with TETHER_SIM_VIOLATIONS=fatal).
class ModeScope {
 public:
  explicit ModeScope(ViolationMode m) : saved_(tether::sim::violation_mode()) {
    tether::sim::set_violation_mode(m);
  }
  ~ModeScope() { tether::sim::set_violation_mode(saved_); }
  ModeScope(const ModeScope&) = delete;
  ModeScope& operator=(const ModeScope&) = delete;

 private:
  ViolationMode saved_;
};

// Lines of `text` that contain `part`.
std::size_t lines_with(const std::string& text, std::string_view part) {
  std::size_t n = 0;
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    if (std::string_view(text).substr(begin, end - begin).find(part) != std::string_view::npos) ++n;
    begin = end + 1;
  }
  return n;
}

// Clears the log before and after a test, so that one test's violations do not leak into the next.
struct CleanLog {
  CleanLog() {
    (void)sim();
    tether::sim::clear_violations();
  }
  ~CleanLog() { tether::sim::clear_violations(); }
};

// ------------------------------------------------------------------------------ child process

struct Child {
  int exit_code = -1;  // -1 when it was killed by a signal
  int signal = 0;
  std::string out;
  std::string err;
};

std::string read_file(const std::string& path) {
  std::string s;
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    std::array<char, 4096> buf{};
    for (std::size_t n; (n = std::fread(buf.data(), 1, buf.size(), f)) > 0;) s.append(buf.data(), n);
    std::fclose(f);
  }
  return s;
}

// sim_violation_program: named by the test's environment (meson), else next to this executable.
std::string program_path() {
  if (const char* p = std::getenv("TETHER_SIM_VIOLATION_PROGRAM"); p && *p) return p;
  std::array<char, 4096> buf{};
  ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  REQUIRE(n > 0);
  std::string self(buf.data(), static_cast<std::size_t>(n));
  return self.substr(0, self.rfind('/') + 1) + "sim_violation_program";
}

// Runs sim_violation_program `scenario` with TETHER_SIM_VIOLATIONS set to `mode` (unset when
// `mode` is null) and everything else of this process's environment.
Child run_program(const char* scenario, const char* mode) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "TETHER_SIM_VIOLATIONS=", 22) != 0) env_strings.emplace_back(*e);
  if (mode != nullptr) env_strings.push_back(std::string("TETHER_SIM_VIOLATIONS=") + mode);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  char out_path[] = "/tmp/tether-sim-violation-out-XXXXXX";
  char err_path[] = "/tmp/tether-sim-violation-err-XXXXXX";
  int out_fd = ::mkstemp(out_path);
  int err_fd = ::mkstemp(err_path);
  REQUIRE(out_fd >= 0);
  REQUIRE(err_fd >= 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, err_fd, 2);
  std::string path = program_path();
  std::string arg(scenario);
  char* argv[] = {path.data(), arg.data(), nullptr};
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, path.c_str(), &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(out_fd);
  ::close(err_fd);
  Child c;
  REQUIRE_MESSAGE(rc == 0, "cannot run " << path << ": " << std::strerror(rc));
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  if (WIFEXITED(status)) c.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) c.signal = WTERMSIG(status);
  c.out = read_file(out_path);
  c.err = read_file(err_path);
  ::unlink(out_path);
  ::unlink(err_path);
  return c;
}

constexpr std::string_view uaf_line =
    "tether simulator: violation use_after_free in a launch: kernel 'scale' argument 0 uses";

}  // namespace

TEST_SUITE_BEGIN("simulator only");

// ----------------------------------------------------------------------------- in-process cases

TEST_CASE("in print mode a violation is printed on stderr once, when it is recorded, and logged") {
  CleanLog clean;
  ModeScope mode(ViolationMode::print);
  StderrCapture err;
  destroy_event_twice();
  const std::string at_record = err.text();  // printed by the call that recorded it
  CHECK(lines_with(at_record,
                   "tether simulator: violation destroyed_event_use in cuEventDestroy: event destroyed "
                   "twice; keep the event alive") == 1);
  auto vs = tether::sim::violations();
  REQUIRE(vs.size() == 1);
  CHECK(vs[0].kind == ViolationKind::destroyed_event_use);
  CHECK(vs[0].entry_point == "cuEventDestroy");
  // Reading the log, clearing it and further calls print nothing more.
  (void)tether::sim::violations();
  tether::sim::clear_violations();
  CUevent e = nullptr;
  CHECK(raw<Entry::cuEventCreate>(*sim().t, &e, 0u) == CUDA_SUCCESS);
  CHECK(raw<Entry::cuEventDestroy>(*sim().t, e) == CUDA_SUCCESS);
  CHECK(err.text() == at_record);
}

TEST_CASE("each of two violations is printed once, whether recorded on the caller's thread or a stream's") {
  CleanLog clean;
  ModeScope mode(ViolationMode::print);
  StderrCapture err;
  destroy_event_twice();
  launch_on_freed_memory();
  const std::string text = err.text();
  CHECK(lines_with(text, "tether simulator: violation ") == 2);
  CHECK(lines_with(text, "violation destroyed_event_use in cuEventDestroy") == 1);
  CHECK(lines_with(text, "violation use_after_free in a launch: kernel 'violation_touch' argument 0") == 1);
  CHECK(tether::sim::violations().size() == 2);
}

TEST_CASE("quiet mode prints nothing and still logs the violation") {
  CleanLog clean;
  ModeScope mode(ViolationMode::quiet);
  StderrCapture err;
  destroy_event_twice();
  launch_on_freed_memory();
  CHECK(err.text().empty());
  CHECK(tether::sim::violations().size() == 2);
}

TEST_CASE("the violation modes have names, and set_violations_fatal switches between fatal and print") {
  ModeScope restore(tether::sim::violation_mode());
  for (auto [m, name] : {std::pair{ViolationMode::print, "print"}, std::pair{ViolationMode::fatal, "fatal"},
                         std::pair{ViolationMode::quiet, "quiet"}}) {
    CAPTURE(name);
    CHECK(tether::sim::to_string(m) == name);
    tether::sim::set_violation_mode(m);
    CHECK(tether::sim::violation_mode() == m);
  }
  tether::sim::set_violations_fatal(true);
  CHECK(tether::sim::violation_mode() == ViolationMode::fatal);
  tether::sim::set_violations_fatal(false);
  CHECK(tether::sim::violation_mode() == ViolationMode::print);
}

TEST_CASE(
    "ExpectViolations counts what it absorbs; nested scopes each count the violations of their lifetime") {
  CleanLog clean;
  ModeScope mode(ViolationMode::print);
  StderrCapture err;
  {
    tether::sim::ExpectViolations outer;
    CHECK(outer.absorbed() == 0);
    destroy_event_twice();
    CHECK(outer.absorbed() == 1);
    {
      tether::sim::ExpectViolations inner;
      CHECK(inner.absorbed() == 0);
      destroy_event_twice();
      launch_on_freed_memory();
      CHECK(inner.absorbed() == 2);
      CHECK(outer.absorbed() == 3);
    }
    destroy_event_twice();  // the outer scope still lives
    CHECK(outer.absorbed() == 4);
  }
  CHECK(err.text().empty());
  CHECK(tether::sim::violations().size() == 4);  // expected violations are logged as always
}

TEST_CASE(
    "under fatal, a violation inside ExpectViolations neither prints nor aborts; clear_violations keeps the "
    "count") {
  CleanLog clean;
  ModeScope mode(ViolationMode::fatal);
  StderrCapture err;
  tether::sim::ExpectViolations expected;
  launch_on_freed_memory();
  tether::sim::clear_violations();
  destroy_event_twice();
  CHECK(expected.absorbed() == 2);
  CHECK(err.text().empty());
  REQUIRE(tether::sim::violations().size() == 1);
  CHECK(tether::sim::violations()[0].kind == ViolationKind::destroyed_event_use);
}

TEST_CASE(
    "a scope that lives on another thread absorbs a violation recorded on this thread and on a stream's") {
  CleanLog clean;
  ModeScope mode(ViolationMode::print);
  StderrCapture err;
  std::promise<void> ready;
  std::promise<void> done;
  std::size_t absorbed = 0;
  std::thread other([&, done_f = done.get_future()]() mutable {
    tether::sim::ExpectViolations expected;
    ready.set_value();
    done_f.wait();
    absorbed = expected.absorbed();
  });
  ready.get_future().wait();
  {
    // Why a guard: a failed REQUIRE below must still release and join the other thread.
    struct Release {
      std::promise<void>& done;
      std::thread& other;
      ~Release() {
        done.set_value();
        other.join();
      }
    } release{done, other};
    destroy_event_twice();     // this thread
    launch_on_freed_memory();  // the stream's worker thread
  }
  CHECK(absorbed == 2);
  CHECK(err.text().empty());
}

TEST_CASE("a violation recorded after the last ExpectViolations ended is printed again") {
  CleanLog clean;
  ModeScope mode(ViolationMode::print);
  StderrCapture err;
  {
    tether::sim::ExpectViolations expected;
    destroy_event_twice();
    CHECK(expected.absorbed() == 1);
  }
  CHECK(err.text().empty());
  launch_on_freed_memory();
  CHECK(lines_with(err.text(),
                   "tether simulator: violation use_after_free in a launch: kernel 'violation_touch'") == 1);
}

// ---------------------------------------------------------------------------- child processes

TEST_CASE(
    "by default the newcomer's unowned buffer freed before the launch prints the use-after-free line, once") {
  Child c = run_program("unowned", nullptr);
  CHECK(c.exit_code == 0);
  CHECK(contains(c.out, "twin runs: 0\n"));  // the simulator did not run the kernel
  CHECK(contains(c.out, "violations logged: 1\n"));
  CHECK_MESSAGE(lines_with(c.err, uaf_line) == 1, "stderr:\n" << c.err);
  CHECK(lines_with(c.err, "tether simulator: violation ") == 1);
  // The line says what it means and what to do.
  CHECK(contains(c.err,
                 "which were freed; on a GPU this reads, corrupts or frees again memory that was freed"));
  CHECK(contains(c.err, "hand a buffer to its node (std::move or share()) rather than tether::unowned"));
  // The first printed violation also says how to change the mode.
  CHECK(contains(c.err, "TETHER_SIM_VIOLATIONS=fatal aborts at the first"));
}

TEST_CASE("an empty TETHER_SIM_VIOLATIONS is the default, print") {
  Child c = run_program("unowned", "");
  CHECK(c.exit_code == 0);
  CHECK_MESSAGE(lines_with(c.err, uaf_line) == 1, "stderr:\n" << c.err);
}

TEST_CASE(
    "TETHER_SIM_VIOLATIONS chooses print, fatal (the line, then abort) or quiet for the newcomer's case") {
  struct Want {
    const char* mode;
    bool aborts;
    std::size_t lines;
  };
  for (Want w : {Want{"print", false, 1}, Want{"fatal", true, 1}, Want{"quiet", false, 0}}) {
    CAPTURE(w.mode);
    Child c = run_program("unowned", w.mode);
    INFO("stderr:\n" << c.err);
    CHECK(lines_with(c.err, uaf_line) == w.lines);
    if (w.aborts) {
      CHECK(c.signal == SIGABRT);
      CHECK(contains(c.err, "tether simulator: aborting (TETHER_SIM_VIOLATIONS=fatal)"));
      CHECK_FALSE(contains(c.out, "twin runs:"));  // it stopped at the violation
    } else {
      CHECK(c.exit_code == 0);
      CHECK(contains(c.out, "violations logged: 1\n"));
      CHECK_FALSE(contains(c.err, "aborting"));
    }
    if (w.lines == 0) CHECK_FALSE(contains(c.err, "tether simulator"));
  }
}

TEST_CASE("two violations in a child print two lines, each once") {
  Child c = run_program("unowned-twice", "print");
  CHECK(c.exit_code == 0);
  CHECK(contains(c.out, "violations logged: 2\n"));
  CHECK_MESSAGE(lines_with(c.err, uaf_line) == 2, "stderr:\n" << c.err);
  CHECK(lines_with(c.err, "TETHER_SIM_VIOLATIONS=fatal aborts at the first") == 1);  // the note, once
}

TEST_CASE(
    "ExpectViolations keeps TETHER_SIM_VIOLATIONS=fatal from aborting on the violation a program expects") {
  Child c = run_program("expected", "fatal");
  CHECK_MESSAGE(c.exit_code == 0, "stderr:\n" << c.err);
  CHECK(contains(c.out, "violations logged: 1\n"));
  CHECK(contains(c.out, "absorbed: 1\n"));
  CHECK_FALSE(contains(c.err, "tether simulator"));
}

TEST_CASE("a mode set before the simulator starts is not replaced by TETHER_SIM_VIOLATIONS") {
  Child c = run_program("set-quiet", "fatal");
  CHECK_MESSAGE(c.exit_code == 0, "stderr:\n" << c.err);
  CHECK(contains(c.out, "violations logged: 1\n"));
  CHECK_FALSE(contains(c.err, "tether simulator"));
}

TEST_CASE(
    "an unknown TETHER_SIM_VIOLATIONS is refused when the simulator starts, naming the value and the "
    "choices") {
  for (const char* bad : {"loud", "FATAL", "1", "print "}) {
    CAPTURE(bad);
    Child c = run_program("start", bad);
    CHECK(c.exit_code == 3);
    CHECK_FALSE(contains(c.out, "tether simulator"));  // the simulator did not start
    CHECK_MESSAGE(
        contains(c.err, std::string("exception: Runtime::simulated: TETHER_SIM_VIOLATIONS is '") + bad +
                            "'; set it to print (the default: print each violation on stderr), fatal "
                            "(print it and abort) or quiet (only log it), or unset it"),
        "stderr:\n"
            << c.err);
  }
  for (const char* good : {"print", "fatal", "quiet"}) {
    CAPTURE(good);
    Child c = run_program("start", good);
    CHECK(c.exit_code == 0);
    CHECK(contains(c.out, "simulated driver"));
  }
}

TEST_SUITE_END();
