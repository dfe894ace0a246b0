// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "symbols.hpp"

#include <cxxabi.h>
#include <dlfcn.h>

#include <cstdlib>

namespace tether::detail {

namespace {

// Strips the parameter list and, for a template specialization, the return type that the
// demangler writes: "void ns::scale<float>(float*, float, int)" -> "ns::scale<float>". Why depth
// counts both brackets: "(anonymous namespace)" and template arguments may hold spaces and parens.
std::string bare(std::string_view d) {
  if (d.empty() || d.back() != ')') return std::string(d);
  std::size_t open = std::string_view::npos;
  int depth = 0;
  for (std::size_t i = d.size(); i-- > 0;) {
    if (d[i] == ')') ++depth;
    if (d[i] == '(' && --depth == 0) {
      open = i;
      break;
    }
  }
  if (open == std::string_view::npos || open == 0) return std::string(d);
  std::string_view head = d.substr(0, open);
  std::size_t start = 0;
  depth = 0;
  for (std::size_t i = 0; i < head.size(); ++i) {
    char c = head[i];
    if (c == '<' || c == '(') ++depth;
    if ((c == '>' || c == ')') && depth > 0) --depth;
    if (c == ' ' && depth == 0) start = i + 1;
  }
  return std::string(head.substr(start));
}

// Drops the demangler's ABI tags ("f[abi:cxx11]"): they are not part of the name as written.
std::string without_abi_tags(std::string name) {
  for (std::size_t at = name.find("[abi:"); at != std::string::npos; at = name.find("[abi:", at)) {
    std::size_t end = name.find(']', at);
    if (end == std::string::npos) break;
    name.erase(at, end + 1 - at);
  }
  return name;
}

}  // namespace

std::string kernel_name_from_symbol(std::string_view symbol) {
  if (symbol.size() < 2 || symbol.substr(0, 2) != "_Z") return std::string(symbol);
  std::string s(symbol);
  int status = 0;
  char* d = abi::__cxa_demangle(s.c_str(), nullptr, nullptr, &status);
  if (status != 0 || !d) return s;
  std::string name;
  try {
    name = without_abi_tags(bare(d));
  } catch (...) {
    std::free(d);
    throw;
  }
  std::free(d);
  return name;
}

std::string dynamic_symbol_name(const void* fn) {
  Dl_info info{};
  // Only an exact match names the function: a nearby symbol would name another one.
  if (!fn || ::dladdr(fn, &info) == 0 || !info.dli_sname || info.dli_saddr != fn) return {};
  return kernel_name_from_symbol(info.dli_sname);
}

std::string function_label(const void* fn) {
  std::string name = dynamic_symbol_name(fn);
  return name.empty() ? fmt::format("kernel at {}", fn) : name;
}

}  // namespace tether::detail
