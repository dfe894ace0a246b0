// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Public access to the driver table: raw driver calls through the driver tether loaded (the real
// one or the simulator), for code that mixes them with tether objects.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "table.hpp"

TETHER_EXPORT namespace tether {

/// The CUDA driver's entry points as tether loaded them (`Runtime::driver()`): one member per entry
/// point of tether's table, a function pointer named and typed as <cuda.h> declares the function,
/// so raw driver code calls them as it would call the driver:
/// `api.cuMemsetD32Async(buffer.address(), 7u, buffer.size(), stream.get())`.
///
/// Calls go to the driver the Runtime uses: with the simulator (`TETHER_DRIVER=sim`) they run on
/// the simulator, against the same contexts, streams, graphs and memory as tether's own calls, so
/// code that mixes raw calls with tether objects (their `.get()` handles) runs without a GPU too.
/// The table holds the entry points tether itself calls (docs/api.md lists which driver calls
/// each tether function makes) plus a few it only exposes; an entry the driver lacks, or provides
/// only in an older version, is a stub that returns CUDA_ERROR_NOT_SUPPORTED (`provides` says
/// which). Nothing here makes a context current: call `Context::make_current()` first where the
/// driver needs one (most calls that take no stream, graph or context argument).
///
/// Spelling: <cuda.h> maps some names to versioned symbols with macros (`cuMemAlloc` ->
/// `cuMemAlloc_v2`), and the members are declared under the names those macros give, so the
/// unversioned spelling works wherever <cuda.h> is included (always in header mode). An importer
/// of the module that does not include <cuda.h> sees no macros and writes the versioned name.
///
/// Tether does not see raw calls: memory, streams or graph nodes they create are not owned by
/// tether objects (adopt them where tether offers it: `Stream::from_native_handle`,
/// `DeviceBuffer::from_native_handle`, `Graph::adopt`), and destroying a handle a tether object
/// owns behind its back is undefined, as with any owner. Thread safety: the members are plain
/// function pointers, set once and never changed; the driver's own rules apply to the calls.
/// Since 0.5.
struct DriverApi {
#define TETHER_ENTRY(name, ver) decltype(&::name) name = nullptr;
#include "entry_points.inc"
#undef TETHER_ENTRY

  /// Whether the driver provides the entry point `name`, spelled without a version suffix
  /// ("cuGraphCreate", "cuMemAlloc"): false for a name tether's table does not have, and for a stub
  /// (the driver lacks the entry, or is older than the version tether calls).
  bool provides(std::string_view name) const noexcept;

  /// The table these entry points came from (tether's internals).
  const detail::DriverTable* table = nullptr;
};

}  // namespace tether
