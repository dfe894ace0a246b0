// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The long run of the randomized model checker (tests/reliability/model.hpp, issue 7) on the
// simulator: `model_check [operations] [seed] [per-sequence]` (default 1 000 000 operations, seed 1,
// 400 operations per sequence) runs seeded
// sequences of graph and executable operations against the reference model of who may use each
// owner, prints operations, sequences, owners, launches, failures and the seed, and exits non-zero
// on any mismatch or violation. docs/reliability.md records its result. Needs kernels.fatbin of the
// test suite (tests/ in the build folder, or next to the program).
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "reliability/model.hpp"
#include "support/kernels.hpp"
#include "tether.hpp"

namespace {

std::string fatbin() {
  for (const char* p : {"kernels.fatbin", "../tests/kernels.fatbin"}) {
    std::string f = tether_test::beside_executable(p);
    if (std::filesystem::exists(f)) return f;
  }
  return tether_test::beside_executable("kernels.fatbin");
}

}  // namespace

int main(int argc, char** argv) try {
  tether_model::Options o;
  o.operations = 1000000;
  o.seed = 1;
  o.per_sequence = 400;
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc)
      o.threads = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--lenient")
      o.lenient = true;
    else
      pos.push_back(a);
  }
  if (pos.size() > 0) o.operations = std::strtoull(pos[0].c_str(), nullptr, 10);
  if (pos.size() > 1) o.seed = std::strtoull(pos[1].c_str(), nullptr, 0);
  if (pos.size() > 2) o.per_sequence = std::strtoull(pos[2].c_str(), nullptr, 10);
  if (o.operations == 0 || o.per_sequence == 0 || pos.size() > 3 || o.threads == 0 || o.threads > 8) {
    std::fprintf(stderr,
                 "usage: model_check [operations] [seed] [operations per sequence] [--threads T (1-8)] "
                 "[--lenient]\n");
    return 2;
  }
  tether::Runtime rt = tether::Runtime::simulated();
  tether::Context ctx = rt.context(0);
  ctx.make_current();
  tether_test::register_test_twins();
  tether::Module m = ctx.load_module(tether::Image::from_file(fatbin()));
  tether_test::TestKernels k{m.kernel<float*, float, int>("fill"),
                             m.kernel<float*, float, int>("scale"),
                             m.kernel<float*, const float*, float, int>("axpy"),
                             m.kernel<unsigned long long, int*>("countdown"),
                             m.kernel<unsigned long long, unsigned>("set_condition"),
                             m.kernel<unsigned long long>("spin")};
  tether::Stream s = ctx.make_stream();

  auto t0 = std::chrono::steady_clock::now();
  std::uint64_t next_report = 100000;
  auto report = [&](const tether_model::Result& p) {
    if (p.operations >= next_report) {
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("  %llu operations, %llu sequences, %zu failures, %.0f s\n",
                  static_cast<unsigned long long>(p.operations), static_cast<unsigned long long>(p.sequences),
                  p.failures.size(), secs);
      std::fflush(stdout);
      next_report += 100000;
    }
  };
  tether_model::Result r = o.threads > 1 ? tether_model::run_threads(ctx, k, o, report)
                                         : tether_model::run(ctx, k, s, o, report);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "model_check: seed %llu, %llu thread(s): %llu operations in %llu sequences of up to %llu, %llu owners "
      "tracked, %llu "
      "launches, %llu liveness checks, %zu failures, %zu simulator violations left, %.1f s\n",
      static_cast<unsigned long long>(o.seed), static_cast<unsigned long long>(o.threads),
      static_cast<unsigned long long>(r.operations),
      static_cast<unsigned long long>(r.sequences), static_cast<unsigned long long>(o.per_sequence),
      static_cast<unsigned long long>(r.owners), static_cast<unsigned long long>(r.launches),
      static_cast<unsigned long long>(r.liveness_checks),
      r.failures.size(), tether::sim::violations().size(), secs);
  std::printf("operations and outcomes:\n");
  for (const auto& [what, n] : r.counts)
    std::printf("  %-48s %llu\n", what.c_str(), static_cast<unsigned long long>(n));
  // Failures by kind: the message after the operation number, numbers and hex values elided.
  std::map<std::string, std::size_t> kinds;
  for (const std::string& f : r.failures) {
    std::size_t at = f.find("): ");
    std::string m = at == std::string::npos ? f : f.substr(at + 3);
    if (m.rfind("op ", 0) == 0 && m.find(": ") != std::string::npos) m = m.substr(m.find(": ") + 2);
    if (m.rfind("shared executables: thread ", 0) == 0) m = "shared: " + m.substr(m.find(": ", 27) + 2);
    std::string k;
    for (std::size_t i = 0; i < m.size(); ++i) {
      if (m[i] == '0' && i + 1 < m.size() && m[i + 1] == 'x') {
        k += '#';
        i += 2;
        while (i < m.size() && std::isxdigit(static_cast<unsigned char>(m[i]))) ++i;
        --i;
      } else if (std::isdigit(static_cast<unsigned char>(m[i]))) {
        if (k.empty() || k.back() != '#') k += '#';
      } else {
        k += m[i];
      }
    }
    ++kinds[k.substr(0, 160)];
  }
  if (!kinds.empty()) std::printf("failures by kind:\n");
  for (const auto& [k, n] : kinds) std::printf("  %6zu  %s\n", n, k.c_str());
  for (std::size_t i = 0; i < r.failures.size() && i < 20; ++i) std::printf("  %s\n", r.failures[i].c_str());
  return r.failures.empty() && tether::sim::violations().empty() ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "model_check: %s\n", e.what());
  return 2;
}
