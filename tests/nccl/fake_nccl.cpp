// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// A library that looks like an NCCL of the version FAKE_NCCL_VERSION says (21000 when unset) but
// exports only ncclGetVersion: the loader must refuse it as too old, or, for a version that should
// have every entry point, as missing one.
#include <cstdlib>

// The loader calls ncclGetVersion through tether's ABI type, whose result is tether::nccl::Errc
// (ncclResult_t's values). Built as C++ with UBSan's function check, this definition must have that
// very type, or the call is reported as one through a pointer of the wrong function type.
namespace tether::nccl {
enum class Errc : int;
}

extern "C" __attribute__((visibility("default"))) tether::nccl::Errc ncclGetVersion(int* version) {
  const char* v = std::getenv("FAKE_NCCL_VERSION");
  *version = v ? std::atoi(v) : 21000;
  return static_cast<tether::nccl::Errc>(0);  // ncclSuccess
}
