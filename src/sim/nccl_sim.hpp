// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The test API of the simulator's NCCL twin: the in-process NCCL 2.28.9 that serves tether's NCCL
// table when the driver is simulated (docs/simulator.md, "NCCL"). Fault injection, call counts,
// asynchronous errors and a snapshot of the twin's live objects, as sim.hpp offers for the driver.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"

struct ncclComm;  // nccl.h's opaque communicator: `typedef struct ncclComm* ncclComm_t;`

TETHER_EXPORT namespace tether::sim {
  /// Fails the `nth` call (1 = the next one) of the NCCL entry point `entry` from now on with the
  /// `ncclResult_t` `nccl_result` (2, ncclSystemError, by default), without doing anything else: a
  /// failed ncclGroupStart or ncclGroupEnd leaves the group depth as it was. `entry` is an NCCL name
  /// such as "ncclAllReduce", or "*" for any entry point that returns an ncclResult_t. Several faults
  /// can be pending; `clear_faults()` drops them with the driver's. Throws UsageError for an unknown
  /// name, for ncclGetErrorString and ncclGetLastError (they return text and cannot fail), for
  /// nth == 0 and for a result outside 1..7. Thread safety: safe to call concurrently.
  void fail_nccl_call(std::string_view entry, std::uint64_t nth, int nccl_result = 2);

  /// Calls of the NCCL entry point `entry` ("*": of all of them) since the last
  /// `reset_call_counts()`, failed and faulted calls included. Throws UsageError for an unknown name.
  /// Thread safety: safe to call concurrently.
  std::uint64_t nccl_call_count(std::string_view entry);

  /// Gives the communicator `comm` the asynchronous error `nccl_result` (1..7), as a network or proxy
  /// failure does on real NCCL: from now on ncclCommGetAsyncError reports it, every call that checks
  /// the communicator's readiness (collectives, ncclCommCount, ncclCommCuDevice, ncclCommUserRank,
  /// ncclCommDestroy) returns it, and ncclCommDestroy refuses to destroy it (use ncclCommAbort).
  /// Operations already waiting for peers keep waiting, as on NCCL. 0 clears the error. Throws
  /// UsageError for a handle that is not a live communicator of the twin or a result outside 0..7.
  /// Thread safety: safe to call concurrently.
  void inject_nccl_async_error(::ncclComm * comm, int nccl_result);

  /// Live objects of the NCCL twin, for leak checks and for tests that watch a destroy wait.
  struct NcclStats {
    std::size_t communicators =
        0;                    ///< communicators made and not yet freed (destroyed ones wait for their clique)
    std::size_t cliques = 0;  ///< groups of communicators made together (one unique id, one ncclCommInitAll)
    std::size_t persistent_refs = 0;  ///< captured launches whose CUDA graph (or executable) still lives
    std::size_t destroys_waiting =
        0;                          ///< last destroys of a clique waiting for its graphs and launches to go
    std::size_t registrations = 0;  ///< ncclCommRegister ranges not deregistered
    std::size_t allocations = 0;    ///< ncclMemAlloc blocks not freed
    std::size_t launches_in_flight = 0;  ///< NCCL kernels launched (or running in a graph) and not finished
  };

  /// A snapshot of the twin's live objects. Thread safety: safe to call concurrently.
  NcclStats nccl_stats();

}  // namespace tether::sim
