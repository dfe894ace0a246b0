// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Runs a function in a forked child and returns what it printed. Why: driver selection is
// process-wide (a loaded driver is never unloaded), so each selection case needs a fresh process.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <string>

namespace tether_test {

struct ChildResult {
  int status = -1;     // exit status of the child, or -1 if it did not exit normally
  std::string output;  // what the function returned
  std::string err;     // what the child wrote to stderr
};

inline ChildResult run_in_child(const std::function<std::string()>& fn) {
  int out[2], err[2];
  if (::pipe(out) != 0 || ::pipe(err) != 0) return {};
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(out[0]);
    ::close(err[0]);
    ::dup2(err[1], 2);
    std::string s;
    try {
      s = fn();
    } catch (...) {
      s = "uncaught exception";
    }
    (void)!::write(out[1], s.data(), s.size());
    std::fflush(nullptr);
    ::_exit(0);
  }
  ::close(out[1]);
  ::close(err[1]);
  ChildResult r;
  auto slurp = [](int fd, std::string& into) {
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) into.append(buf, static_cast<std::size_t>(n));
    ::close(fd);
  };
  slurp(out[0], r.output);
  slurp(err[0], r.err);
  int st = 0;
  ::waitpid(pid, &st, 0);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

}  // namespace tether_test
