// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Storage of owner groups (NodeAttachment, owners.hpp). Why a pool: a node version is created on
// the caller's thread and freed in bulk on the reclaimer thread, a pattern under which the general
// allocator spends a few hundred instructions per allocation (docs/performance.md). Freed groups go
// onto a lock-free stack per size class; an allocating thread takes the whole stack into its own
// cache in one exchange (so there is no ABA problem) and pops from there without atomics. About
// 1 MiB per size class (classes 16 bytes apart, up to 504 bytes) is kept; the rest goes back to the
// general allocator. Under
// AddressSanitizer the pool is off, so that a use after release is still caught.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"

namespace tether::detail {

/// Storage for an owner group of `bytes` bytes (alignment 16 at most). Throws std::bad_alloc.
void* group_allocate(std::size_t bytes);
/// Returns storage from group_allocate(bytes). Never throws, never blocks; callable on any thread.
void group_free(void* p, std::size_t bytes) noexcept;

/// Frees every group the pool holds (shared, and this thread's cache) back to the general
/// allocator: for measurements of heap bytes and for tests.
void group_pool_release() noexcept;
/// Groups waiting in the shared pool (approximate under concurrency), for tests.
std::size_t group_pool_retained() noexcept;

}  // namespace tether::detail
