// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// fork: in a child made by fork() after the runtime was opened, calls that would reach the driver
// throw UsageError saying "fork" (the driver's state does not survive fork). Each member runs in
// its own child, which reports through its exit code; the parent waits a bounded time and kills a
// child that hangs (a lock held by another thread at fork time).
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "hardening/families.hpp"

using namespace tether;
using namespace tether_test;
using namespace hardening;

TEST_SUITE_BEGIN("hardening: fork");

namespace {

enum Verdict : int {
  ok = 0,             // UsageError containing "fork"
  no_exception = 10,  // returned normally
  other_usage = 11,   // UsageError without "fork"
  driver_error = 12,  // DriverError
  other_error = 13,   // anything else
  hung = 100,         // killed by the parent
  died = 101,         // crashed or exited otherwise
};

std::string describe(int v) {
  switch (v) {
    case ok: return "UsageError containing \"fork\"";
    case no_exception: return "no exception";
    case other_usage: return "a UsageError that does not contain \"fork\" (its text is on the child's stderr)";
    case driver_error: return "a DriverError (its text is on the child's stderr)";
    case other_error: return "another exception";
    case hung: return "the child hung and was killed";
    default: return "the child crashed or exited otherwise";
  }
}

/// Runs `fn` in a forked child: the verdict, waiting at most `limit`.
int in_child(const std::function<void()>& fn, std::chrono::milliseconds limit = 10s) {
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    int v = no_exception;
    try {
      fn();
    } catch (const UsageError& e) {
      v = contains(e.what(), "fork") ? ok : other_usage;
      if (v != ok) std::fprintf(stderr, "child: UsageError: %s\n", e.what());
    } catch (const DriverError& e) {
      std::fprintf(stderr, "child: DriverError: %s\n", e.what());
      v = driver_error;
    } catch (...) {
      v = other_error;
    }
    std::fflush(stderr);
    ::_exit(v);  // no destructors, no atexit: the child's tether state is not to be touched again
  }
  REQUIRE(pid > 0);
  auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  for (;;) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return hung;
    }
    std::this_thread::sleep_for(5ms);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : died;
}

}  // namespace

TEST_CASE_FIXTURE(Fixture, "in a child made by fork after the runtime was opened, driver calls throw UsageError saying fork") {
  SharedBuffer<float> x = buffer(4, 0.0f);
  Graph g{ctx};
  g.edit([&](Edit& e) { e.launch(k.fill, Grid{1}, Block{4}, x, 1.0f, 4); });
  GraphExec exec = g.instantiate();
  Stream s = ctx.make_stream();
  const Table members = {
      {"Graph::edit()", [&] { Edit e = g.edit(); }},
      {"GraphExec::launch(s)", [&] { exec.launch(s); }},
      {"Context::alloc<float>(1)", [&] { (void)ctx.alloc<float>(1); }},
      {"Stream::synchronize()", [&] { s.synchronize(); }},
  };
  for (const Member& m : members) {
    SUBCASE(m.first.c_str()) {
      int v = in_child(m.second);
      INFO("member: " << m.first << " -> " << describe(v));
      CHECK_MESSAGE(v == ok, "expected UsageError containing \"fork\", got " << describe(v));
    }
  }
  // The parent is unaffected.
  exec.launch(stream);
  stream.synchronize();
  CHECK(read(x) == std::vector<float>(4, 1.0f));
}
