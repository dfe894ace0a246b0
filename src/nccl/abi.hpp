// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The part of NCCL's C ABI tether calls, declared here so that no tether header needs nccl.h (or
// the CUDA runtime headers it includes): both NCCLs fill one NcclTable, the real one from
// libnccl.so.2 (library.cpp) and the simulator's twin (sim/nccl.cpp). Where nccl.h is found at
// configure time, abi_check.cpp compares every type, value and prototype below with it.
// Internal: not exported.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "types.hpp"

struct ncclComm;  // nccl.h's opaque communicator: `typedef struct ncclComm* ncclComm_t;`

namespace tether::detail::nccl_abi {

using Comm = ::ncclComm*;

/// ncclResult_t, ncclDataType_t and ncclRedOp_t: the public enumerations (types.hpp), which have
/// NCCL's values (abi_check.cpp compares them with nccl.h).
using Result = nccl::Errc;
using DataType = nccl::DataType;
using RedOp = nccl::ReduceOp;

inline constexpr std::size_t kUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
/// ncclUniqueId, passed by value as NCCL passes it.
struct UniqueId {
  char internal[kUniqueIdBytes];
};

/// NCCL_VERSION(2, 28, 9) = 22809: major * 10000 + minor * 100 + patch (since 2.9).
constexpr int version_code(int major, int minor, int patch) noexcept { return major * 10000 + minor * 100 + patch; }

// The entry points: X(name, return type, parameter list, the first NCCL version that has it).
// Entries newer than the loaded library are stubs that fail with invalid_usage and a message
// naming the version (library.cpp).
#define TETHER_NCCL_ENTRIES(X)                                                                                       \
  X(ncclGetVersion, Result, (int* version), 20900)                                                                   \
  X(ncclGetUniqueId, Result, (UniqueId * id), 20900)                                                                 \
  X(ncclCommInitRank, Result, (Comm * comm, int nranks, UniqueId id, int rank), 20900)                               \
  X(ncclCommInitAll, Result, (Comm * comms, int ndev, const int* devlist), 20900)                                    \
  X(ncclCommDestroy, Result, (Comm comm), 20900)                                                                     \
  X(ncclCommAbort, Result, (Comm comm), 20900)                                                                       \
  X(ncclCommGetAsyncError, Result, (Comm comm, Result * error), 20900)                                               \
  X(ncclCommCount, Result, (Comm comm, int* count), 20900)                                                           \
  X(ncclCommCuDevice, Result, (Comm comm, int* device), 20900)                                                       \
  X(ncclCommUserRank, Result, (Comm comm, int* rank), 20900)                                                         \
  X(ncclGetErrorString, const char*, (Result result), 20900)                                                         \
  X(ncclGetLastError, const char*, (Comm comm), 21300)                                                               \
  X(ncclAllReduce, Result,                                                                                           \
    (const void* send, void* recv, std::size_t count, DataType type, RedOp op, Comm comm, CUstream stream), 20900)   \
  X(ncclBroadcast, Result,                                                                                           \
    (const void* send, void* recv, std::size_t count, DataType type, int root, Comm comm, CUstream stream), 20900)   \
  X(ncclReduce, Result,                                                                                              \
    (const void* send, void* recv, std::size_t count, DataType type, RedOp op, int root, Comm comm, CUstream stream), \
    20900)                                                                                                           \
  X(ncclAllGather, Result,                                                                                           \
    (const void* send, void* recv, std::size_t send_count, DataType type, Comm comm, CUstream stream), 20900)        \
  X(ncclReduceScatter, Result,                                                                                       \
    (const void* send, void* recv, std::size_t recv_count, DataType type, RedOp op, Comm comm, CUstream stream),     \
    20900)                                                                                                           \
  X(ncclSend, Result, (const void* send, std::size_t count, DataType type, int peer, Comm comm, CUstream stream),    \
    20900)                                                                                                           \
  X(ncclRecv, Result, (void* recv, std::size_t count, DataType type, int peer, Comm comm, CUstream stream), 20900)   \
  X(ncclGroupStart, Result, (), 20900)                                                                               \
  X(ncclGroupEnd, Result, (), 20900)                                                                                 \
  X(ncclCommRegister, Result, (Comm comm, void* buffer, std::size_t size, void** handle), 21900)                     \
  X(ncclCommDeregister, Result, (Comm comm, void* handle), 21900)                                                    \
  X(ncclMemAlloc, Result, (void** ptr, std::size_t size), 21900)                                                     \
  X(ncclMemFree, Result, (void* ptr), 21900)

// One function pointer type per entry: `ncclAllReduce_fn`.
#define TETHER_NCCL_FN(name, ret, params, since) using name##_fn = ret(*) params;
TETHER_NCCL_ENTRIES(TETHER_NCCL_FN)
#undef TETHER_NCCL_FN

}  // namespace tether::detail::nccl_abi
