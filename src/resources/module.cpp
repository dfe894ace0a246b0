// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "module.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <fstream>
#include <iterator>

namespace tether {

namespace detail {
void UnloadModule::operator()(CUmodule m) const noexcept {
  release_with<Entry::cuModuleUnload>(owner, m, "unloading a module");
}

std::string kernel_label(std::string_view name) {
  std::string s = "kernel ";
  s.append(name);
  return s;
}
}  // namespace detail

namespace {

// Why one extra NUL after the image: PTX handed to cuModuleLoadData must be NUL-terminated, and a
// binary image does not mind the byte after its end.
std::shared_ptr<const std::vector<std::byte>> terminated(const std::byte* p, std::size_t n) {
  auto v = std::make_shared<std::vector<std::byte>>();
  v->reserve(n + 1);
  v->assign(p, p + n);
  v->push_back(std::byte{0});
  return v;
}

}  // namespace

Image Image::from_file(std::string_view path) {
  std::string p(path);
  // Why stat first: an ifstream opens a directory and then throws std::ios_base::failure, without
  // the path, from its first read.
  struct ::stat st {};
  if (::stat(p.c_str(), &st) != 0) {
    int err = errno;
    throw UsageError(
        fmt::format("Image::from_file: cannot open '{}': {}", p, err ? std::strerror(err) : "unknown error"));
  }
  if (S_ISDIR(st.st_mode)) throw UsageError(fmt::format("Image::from_file: '{}' is a directory, not a module image", p));
  if (!S_ISREG(st.st_mode)) throw UsageError(fmt::format("Image::from_file: '{}' is not a regular file", p));
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    int err = errno;
    throw UsageError(
        fmt::format("Image::from_file: cannot open '{}': {}", p, err ? std::strerror(err) : "unknown error"));
  }
  std::vector<char> bytes;
  try {
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure& e) {
    throw UsageError(fmt::format("Image::from_file: cannot read '{}': {}", p, e.what()));
  }
  if (in.bad()) throw UsageError(fmt::format("Image::from_file: cannot read '{}'", p));
  if (bytes.empty()) throw UsageError(fmt::format("Image::from_file: '{}' is empty", p));
  std::size_t n = bytes.size();
  return Image(terminated(reinterpret_cast<const std::byte*>(bytes.data()), n), n);
}

Image Image::from_bytes(std::span<const std::byte> bytes) {
  if (bytes.empty()) throw UsageError("Image::from_bytes: the image is empty");
  return Image(terminated(bytes.data(), bytes.size()), bytes.size());
}

Image Image::from_ptx(std::string_view ptx) {
  if (!ptx.empty() && ptx.back() == '\0') ptx.remove_suffix(1);
  if (ptx.empty()) throw UsageError("Image::from_ptx: the PTX text is empty");
  return Image(terminated(reinterpret_cast<const std::byte*>(ptx.data()), ptx.size()), ptx.size() + 1);
}

Context Module::context() const noexcept { return detail::context_from(handle_->deleter().owner); }

CUfunction Module::function(std::string_view name) const {
  detail::check_calls_allowed("Module::function");
  const detail::ContextState& s = *handle_->deleter().owner;
  std::string n(name);  // the driver wants a NUL-terminated name
  detail::ScopedContext scope(s);
  CUfunction f = nullptr;
  detail::call<detail::Entry::cuModuleGetFunction>(
      *s.table, [&] { return fmt::format("getting kernel '{}' from a module", n); }, &f, get(), n.c_str());
  return f;
}

namespace {

[[noreturn]] void signature_mismatch(std::string_view name, std::span<const detail::DeclaredParam> declared,
                                     std::size_t compiled, std::size_t index, std::size_t compiled_size) {
  if (compiled != declared.size()) {
    std::string list;
    for (const detail::DeclaredParam& d : declared) list += (list.empty() ? "" : ", ") + std::string(d.type);
    throw UsageError(fmt::format("Module::kernel(\"{}\"): Kernel<{}> declares {} parameter{} but the compiled kernel "
                                 "takes {}",
                                 name, list, declared.size(), declared.size() == 1 ? "" : "s", compiled));
  }
  auto bytes = [](std::size_t n) { return fmt::format("{} byte{}", n, n == 1 ? "" : "s"); };
  throw UsageError(fmt::format("Module::kernel(\"{}\"): parameter {} is declared as '{}' ({}) but the compiled "
                               "kernel's parameter {} takes {}",
                               name, index, declared[index].type, bytes(declared[index].size), index,
                               bytes(compiled_size)));
}

// Compares the declared parameter list with what cuFuncGetParamInfo says about the compiled
// kernel (the context is current). Why it counts to the end even after a size mismatch: a wrong
// count is the more useful report. Allocates nothing unless it throws; declared.size() + 1 calls.
void check_signature(const detail::DriverTable& t, CUfunction f, std::string_view name,
                     std::span<const detail::DeclaredParam> declared) {
  using detail::Entry;
  if (t.state[detail::index(Entry::cuFuncGetParamInfo)] != detail::EntryState::resolved) return;
  constexpr std::size_t none = static_cast<std::size_t>(-1);
  // The driver's parameter buffer holds at most 32764 bytes, so no kernel has more parameters.
  constexpr std::size_t most = 32764;
  std::size_t bad = none, bad_size = 0, count = 0;
  for (; count <= most; ++count) {
    std::size_t offset = 0, size = 0;
    CUresult r = detail::raw<Entry::cuFuncGetParamInfo>(t, f, count, &offset, &size);
    if (r == CUDA_ERROR_INVALID_VALUE) break;                 // past the last parameter (as on the H200)
    if (r == CUDA_ERROR_NOT_SUPPORTED && count == 0) return;  // this driver cannot describe parameters
    if (r != CUDA_SUCCESS)
      detail::throw_call_error(t, Entry::cuFuncGetParamInfo, r,
                               fmt::format("checking the parameters of kernel '{}'", name));
    if (count < declared.size() && bad == none && size != declared[count].size) {
      bad = count;
      bad_size = size;
    }
  }
  if (count > most) return;  // not a driver answer to trust
  if (count != declared.size() || bad != none) signature_mismatch(name, declared, count, bad, bad_size);
}

}  // namespace

std::shared_ptr<const detail::KernelInfo> Module::kernel_info(std::string_view name,
                                                              std::span<const detail::DeclaredParam> declared) const {
  detail::check_calls_allowed("Module::kernel");
  CUfunction f = function(name);
  {
    const detail::ContextState& s = *handle_->deleter().owner;
    detail::ScopedContext scope(s);
    check_signature(*s.table, f, name, declared);
  }
  return std::make_shared<const detail::KernelInfo>(*this, f, std::string(name), handle_->deleter().owner->context);
}

}  // namespace tether
