// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The one table of NCCL entry points, as the driver has its DriverTable: filled from libnccl.so.2
// (library.cpp) or by the simulator's NCCL twin (sim/nccl.cpp). Every NCCL call tether makes goes
// through it. Internal: not exported.
#pragma once

#include "abi.hpp"

namespace tether::detail {

enum class NcclEntry : std::uint8_t {
#define TETHER_NCCL_X(name, ret, params, since) name,
  TETHER_NCCL_ENTRIES(TETHER_NCCL_X)
#undef TETHER_NCCL_X
};

inline constexpr std::size_t nccl_entry_count = 0
#define TETHER_NCCL_X(name, ret, params, since) +1
    TETHER_NCCL_ENTRIES(TETHER_NCCL_X)
#undef TETHER_NCCL_X
    ;

inline constexpr std::array<std::string_view, nccl_entry_count> nccl_entry_names = {
#define TETHER_NCCL_X(name, ret, params, since) std::string_view(#name),
    TETHER_NCCL_ENTRIES(TETHER_NCCL_X)
#undef TETHER_NCCL_X
};

inline constexpr std::array<int, nccl_entry_count> nccl_entry_since = {
#define TETHER_NCCL_X(name, ret, params, since) since,
    TETHER_NCCL_ENTRIES(TETHER_NCCL_X)
#undef TETHER_NCCL_X
};

constexpr std::string_view nccl_entry_name(NcclEntry e) noexcept { return nccl_entry_names[static_cast<std::size_t>(e)]; }

/// The entry points of one NCCL. An entry the library lacks (older than `since`) is a stub that
/// returns invalid_usage; `provided` says which are real.
struct NcclTable {
#define TETHER_NCCL_X(name, ret, params, since) nccl_abi::name##_fn name = nullptr;
  TETHER_NCCL_ENTRIES(TETHER_NCCL_X)
#undef TETHER_NCCL_X
  std::array<bool, nccl_entry_count> provided{};
  bool simulated = false;
  std::string origin;  // the library's path, or "tether simulator"
  int version = 0;     // ncclGetVersion's code (22809 for 2.28.9)
};

/// The simulator's NCCL twin (sim/nccl.cpp): built on first use, never destroyed.
const NcclTable& simulated_nccl_table();

}  // namespace tether::detail
