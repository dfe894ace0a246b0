// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// NCCL's enumerations, with NCCL's values: the public API's and the ABI's (abi.hpp) one
// definition.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"

TETHER_EXPORT namespace tether::nccl {

/// NCCL's results (`ncclResult_t`, the same values) as a scoped enum usable with
/// `std::error_code`: `error.code() == nccl::Errc::invalid_usage`.
enum class Errc : int {
  success = 0,
  unhandled_cuda_error = 1,
  system_error = 2,
  internal_error = 3,
  invalid_argument = 4,
  invalid_usage = 5,
  remote_error = 6,
  in_progress = 7,
};

/// NCCL's element types (`ncclDataType_t`, the same values).
enum class DataType : int {
  int8 = 0,
  uint8 = 1,
  int32 = 2,
  uint32 = 3,
  int64 = 4,
  uint64 = 5,
  float16 = 6,
  float32 = 7,
  float64 = 8,
  bfloat16 = 9,
  float8e4m3 = 10,
  float8e5m2 = 11,
};
/// NCCL's built-in reductions (`ncclRedOp_t`, the same values). `avg` divides the sum by the
/// number of ranks (integer division for integer types).
enum class ReduceOp : int { sum = 0, prod = 1, max = 2, min = 3, avg = 4 };
}  // namespace tether::nccl

template <>
struct std::is_error_code_enum<tether::nccl::Errc> : std::true_type {};
