// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// A library that looks like an NCCL of the version FAKE_NCCL_VERSION says (21000 when unset) but
// exports only ncclGetVersion: the loader must refuse it as too old, or, for a version that should
// have every entry point, as missing one.
#include <cstdlib>

extern "C" __attribute__((visibility("default"))) int ncclGetVersion(int* version) {
  const char* v = std::getenv("FAKE_NCCL_VERSION");
  *version = v ? std::atoi(v) : 21000;
  return 0;
}
