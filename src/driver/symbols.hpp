// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Names of `__global__` functions found by address (tether::kernel(&fn) and the simulator's twins
// registered per function). Private to the library: no public header includes it.
#pragma once

#include "../prelude.hpp"

namespace tether::detail {

// The bare name of a kernel from its (possibly mangled) symbol: "saxpy" from "_Z5saxpyfPKfPfi",
// "scale<float>" from "_Z5scaleIfEvPT_S0_i"; a symbol that is not mangled (extern "C") is
// returned as it is.
std::string kernel_name_from_symbol(std::string_view symbol);

// The bare name of the function at `fn` from the dynamic symbol table (dladdr), or "" where the
// dynamic linker does not know it (a program linked without -rdynamic, a local symbol).
std::string dynamic_symbol_name(const void* fn);

// dynamic_symbol_name(fn), or "kernel at 0x..." where it is empty.
std::string function_label(const void* fn);

}  // namespace tether::detail
