// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The named module `tether`: a table of contents over the headers in src/, which stay the source
// of truth (header mode includes them directly). Exports are marked at the declaration with
// TETHER_EXPORT; tether::detail is reachable but not exported.
module;
#include "prelude.hpp"

export module tether;

#define TETHER_EXPORT export
// Why extern "C++": the entities stay attached to the global module, so the ordinary objects in
// src/ that implement them (compiled in header mode) link with importers of the module.
extern "C++" {
#include "tether.hpp"
}

// The driver's handle and value types that tether's raw accessors return (Graph::get(),
// Node::get(), GraphExec::get(), Stream::get(), ...), so that an importer can name them without
// including <cuda.h> itself.
export using ::CUcontext;
export using ::CUdevice;
export using ::CUdeviceptr;
export using ::CUevent;
export using ::CUfunction;
export using ::CUaccessProperty;
export using ::CUgraph;
export using ::CUgraphConditionalHandle;
export using ::CUgraphExec;
export using ::CUgraphNode;
export using ::CUgraphNodeType;
export using ::CUkernel;
export using ::CUlaunchMemSyncDomain;
export using ::CUlibrary;
export using ::CUmemoryPool;
export using ::CUmodule;
export using ::CUresult;
export using ::CUstream;
export using ::CUuserObject;
// NCCL's communicator handle (`ncclComm_t` is `ncclComm*`), which nccl::Communicator::get returns.
export using ::ncclComm;
