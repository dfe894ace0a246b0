// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The one thing the runtime needs of the simulator: its driver table. Why a header of its own: the
// runtime must not see the simulator's internals (state.hpp).
#pragma once

#include <memory>

#include "../driver/table.hpp"

namespace tether::sim {
/// Fills a driver table with the simulator's entry points. Reads TETHER_SIM_VIOLATIONS when the
/// simulator starts; throws UsageError for a bad value.
std::unique_ptr<tether::detail::DriverTable> make_table();
}  // namespace tether::sim
