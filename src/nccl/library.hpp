// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// NCCL's table for a runtime, and the helpers every NCCL call of tether uses. Internal.
#pragma once

#include "nccl.hpp"
#include "table.hpp"

namespace tether::detail {

/// The NCCL `rt` uses: the real library (loaded once) with the real driver, the twin with the
/// simulator. Throws nccl::Unavailable.
const NcclTable& nccl_table(const Runtime& rt);
/// Loads NCCL from the first of `paths` that dlopen opens, and resolves every entry point.
/// Throws nccl::Unavailable (missing_library naming every path tried, missing_entry, too_old).
std::unique_ptr<NcclTable> load_nccl(std::initializer_list<const char*> paths);
/// "2.28.9" from 22809.
std::string nccl_version_string(int code);
/// Throws nccl::Unavailable (too_old) if `t` lacks `e` (`what` names tether's call).
void check_provided(const NcclTable& t, NcclEntry e, std::string_view what);
/// Throws nccl::Error for `e` failing with `r`, with NCCL's last error text and `context`.
[[noreturn]] void throw_nccl_error(const NcclTable& t, NcclEntry e, nccl_abi::Result r, std::string context);

}  // namespace tether::detail
