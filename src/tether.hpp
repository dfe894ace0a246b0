// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The whole public API in header mode (for translation units that cannot import modules, such as
// .cu files compiled by nvcc). `import tether;` exports exactly the same entities.
#pragma once

#include "config.hpp"
#include "prelude.hpp"
#include "driver/error.hpp"
#include "driver/table.hpp"
#include "runtime/runtime.hpp"
#include "resources/unique_handle.hpp"
#include "resources/context.hpp"
#include "resources/stream.hpp"
#include "resources/event.hpp"
#include "resources/module.hpp"
#include "resources/buffer.hpp"
#include "sim/sim.hpp"
#include "sim/nccl_sim.hpp"
#include "attach/pool.hpp"
#include "attach/owners.hpp"
#include "attach/reclaimer.hpp"
#include "attach/attachment.hpp"
#include "graph/hierarchy.hpp"
#include "graph/transaction.hpp"
#include "graph/node.hpp"
#include "graph/args.hpp"
#include "graph/param.hpp"
#include "graph/launch.hpp"
#include "graph/graph.hpp"
#include "graph/edit.hpp"
#include "exec/exec.hpp"
#include "exec/exec_cache.hpp"
#include "graph/capture_mode.hpp"
#include "capture/capture.hpp"
#include "nccl/nccl.hpp"
#include "resources/mem_pool.hpp"
#include "introspect/inspect.hpp"
#if defined(__CUDACC__)
#include "cuda/kernel.hpp"  // tether::kernel(&fn, ctx): only where nvcc compiles (and the CUDA runtime links)
#endif
