// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Compiled where nccl.h is found (meson.build): every type, value and prototype abi.hpp declares
// is compared with NCCL's own header at compile time, so a header that disagrees stops the build
// instead of calling NCCL through the wrong ABI. Nothing here runs.
#include <nccl.h>

#include "abi.hpp"

namespace tether::detail::nccl_abi {
namespace {

// Our spelling of a type -> nccl.h's.
template <class T>
struct Theirs {
  using type = T;
};
template <class T>
struct Theirs<T*> {
  using type = typename Theirs<T>::type*;
};
template <class T>
struct Theirs<const T> {
  using type = const typename Theirs<T>::type;
};
template <>
struct Theirs<Result> {
  using type = ncclResult_t;
};
template <>
struct Theirs<DataType> {
  using type = ncclDataType_t;
};
template <>
struct Theirs<RedOp> {
  using type = ncclRedOp_t;
};
template <>
struct Theirs<UniqueId> {
  using type = ncclUniqueId;
};

template <class F>
struct Prototype;
template <class R, class... A>
struct Prototype<R (*)(A...)> {
  using type = typename Theirs<R>::type (*)(typename Theirs<A>::type...);
};

#define TETHER_NCCL_CHECK(name, ret, params, since)                                                  \
  static_assert(std::is_same_v<Prototype<name##_fn>::type, decltype(&::name)>, #name " ABI mismatch"); \
  static_assert(since <= NCCL_VERSION_CODE, #name " is newer than this nccl.h");
TETHER_NCCL_ENTRIES(TETHER_NCCL_CHECK)
#undef TETHER_NCCL_CHECK

static_assert(std::is_same_v<Comm, ncclComm_t>);
static_assert(sizeof(UniqueId) == sizeof(ncclUniqueId) && kUniqueIdBytes == NCCL_UNIQUE_ID_BYTES);
static_assert(sizeof(Result) == sizeof(ncclResult_t) && sizeof(DataType) == sizeof(ncclDataType_t) &&
              sizeof(RedOp) == sizeof(ncclRedOp_t));
static_assert(static_cast<int>(Result::success) == ncclSuccess &&
              static_cast<int>(Result::unhandled_cuda_error) == ncclUnhandledCudaError &&
              static_cast<int>(Result::system_error) == ncclSystemError &&
              static_cast<int>(Result::internal_error) == ncclInternalError &&
              static_cast<int>(Result::invalid_argument) == ncclInvalidArgument &&
              static_cast<int>(Result::invalid_usage) == ncclInvalidUsage &&
              static_cast<int>(Result::remote_error) == ncclRemoteError &&
              static_cast<int>(Result::in_progress) == ncclInProgress);
static_assert(static_cast<int>(DataType::int8) == ncclInt8 && static_cast<int>(DataType::uint8) == ncclUint8 &&
              static_cast<int>(DataType::int32) == ncclInt32 && static_cast<int>(DataType::uint32) == ncclUint32 &&
              static_cast<int>(DataType::int64) == ncclInt64 && static_cast<int>(DataType::uint64) == ncclUint64 &&
              static_cast<int>(DataType::float16) == ncclFloat16 && static_cast<int>(DataType::float32) == ncclFloat32 &&
              static_cast<int>(DataType::float64) == ncclFloat64 && static_cast<int>(DataType::bfloat16) == ncclBfloat16 &&
              static_cast<int>(DataType::float8e4m3) == ncclFloat8e4m3 &&
              static_cast<int>(DataType::float8e5m2) == ncclFloat8e5m2);
static_assert(static_cast<int>(RedOp::sum) == ncclSum && static_cast<int>(RedOp::prod) == ncclProd &&
              static_cast<int>(RedOp::max) == ncclMax && static_cast<int>(RedOp::min) == ncclMin &&
              static_cast<int>(RedOp::avg) == ncclAvg);
static_assert(version_code(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH) == NCCL_VERSION_CODE);

}  // namespace
}  // namespace tether::detail::nccl_abi
