// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Every header tether's own headers use from outside tether, in one place.
// Why: modules/tether.cppm includes this file in its global module fragment and then the tether
// headers in the module purview; a standard header first seen in the purview would be attached to
// the module and break importers. Including the full set here keeps the two lists from drifting.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <concepts>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <limits>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <shared_mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

// Why optional: {fmt} 9 does not compile under nvcc's C++20 front end, so header mode for .cu
// files leaves out the fmt formatters (the only place tether's headers use fmt). Define
// TETHER_WITH_FMT before including tether.hpp to force them in with a newer fmt.
#if defined(__CUDACC__) && !defined(TETHER_WITH_FMT)
#define TETHER_HAS_FMT 0
#else
#define TETHER_HAS_FMT 1
#include <fmt/format.h>
#endif
