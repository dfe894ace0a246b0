// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "buffer.hpp"

#include "../capture/capture.hpp"

#include <limits>

namespace tether::detail {

namespace {
std::atomic<std::size_t> g_buffer_bytes[2];
}  // namespace

std::size_t buffer_bytes(bool pinned) noexcept { return g_buffer_bytes[pinned].load(std::memory_order_relaxed); }

std::size_t count_buffer_bytes(bool pinned, std::size_t bytes, bool add) noexcept {
  if (add)
    g_buffer_bytes[pinned].fetch_add(bytes, std::memory_order_relaxed);
  else
    g_buffer_bytes[pinned].fetch_sub(bytes, std::memory_order_relaxed);
  return bytes;
}

void FreeDevice::operator()(CUdeviceptr p) const noexcept {
  count_buffer_bytes(false, bytes, false);
  if (custom) return custom(owner, p);
  if (pooled) return release_pooled(owner, pooled.release());  // stream-ordered: mem_pool.cpp
  release_with<Entry::cuMemFreeAsync>(owner, p, "freeing device memory");  // stream-ordered: context.cpp
}

void FreeHost::operator()(void* p) const noexcept {
  count_buffer_bytes(true, bytes, false);
  release_with<Entry::cuMemFreeHost>(owner, p, "freeing pinned host memory");
}

namespace {

std::size_t checked_bytes(std::size_t count, std::size_t elem_size, std::string_view type, const char* kind) {
  if (count == 0)
    throw UsageError(fmt::format("allocating 0 elements of {} ({}): a buffer cannot be empty", type, kind));
  if (count > std::numeric_limits<std::size_t>::max() / elem_size)
    throw UsageError(fmt::format("allocating {} elements of {} ({}): the size overflows", count, type, kind));
  return count * elem_size;
}

void check_fits(bool owned, std::size_t n, std::size_t have, const char* kind, const char* op) {
  check_calls_allowed(kind);
  if (!owned) throw_empty(fmt::format("{}::{}", kind, op), kind);
  if (n > have)
    throw UsageError(fmt::format("{}::{}: {} bytes do not fit in a buffer of {} bytes", kind, op, n, have));
}

}  // namespace

DeviceMemory::DeviceMemory(const Context& ctx, std::size_t count, std::size_t elem_size, std::string_view type) {
  check_calls_allowed("Context::alloc");
  std::size_t n = checked_bytes(count, elem_size, type, "device memory");
  const ContextPtr& s = state_of(ctx);
  ScopedContext scope(*s);
  RelaxedScope relaxed(*s->table);  // never invalidates a stream capture (capture facts c4)
  CUdeviceptr p = 0;
  call<Entry::cuMemAlloc>(
      *s->table,
      [&] { return fmt::format("allocating {} elements of {} ({} bytes) of device memory", count, type, n); }, &p,
      n);
  handle_ = UniqueHandle<CUdeviceptr, FreeDevice>(p, FreeDevice{s, {}, count_buffer_bytes(false, n, true), nullptr});
  bytes_ = n;
}

DeviceMemory::DeviceMemory(const Context& ctx, CUdeviceptr adopt, std::size_t bytes,
                           void (*custom)(const ContextPtr&, CUdeviceptr) noexcept) noexcept
    : handle_(adopt, FreeDevice{state_of(ctx), {}, adopt ? count_buffer_bytes(false, bytes, true) : 0, custom}),
      bytes_(adopt ? bytes : 0) {}

Context DeviceMemory::context(const char* kind) const {
  if (!handle_) throw_empty(fmt::format("{}::context", kind), kind);
  return context_from(handle_.deleter().owner);
}

void DeviceMemory::copy_from(const void* src, std::size_t n, const char* kind) const {
  check_fits(static_cast<bool>(handle_), n, bytes_, kind, "copy_from");
  if (n == 0) return;
  const ContextState& s = *handle_.deleter().owner;
  ScopedContext scope(s);
  call<Entry::cuMemcpyHtoD>(*s.table, [&] { return fmt::format("copying {} bytes from the host to a {}", n, kind); },
                            address(), src, n);
}

void DeviceMemory::copy_to(void* dst, std::size_t n, const char* kind) const {
  check_fits(static_cast<bool>(handle_), n, bytes_, kind, "copy_to");
  if (n == 0) return;
  const ContextState& s = *handle_.deleter().owner;
  ScopedContext scope(s);
  call<Entry::cuMemcpyDtoH>(*s.table, [&] { return fmt::format("copying {} bytes from a {} to the host", n, kind); },
                            dst, address(), n);
}

void DeviceMemory::fill_bytes(unsigned char value, const char* kind) const {
  check_calls_allowed(kind);
  if (!handle_) throw_empty(fmt::format("{}::fill_bytes", kind), kind);
  const ContextState& s = *handle_.deleter().owner;
  ScopedContext scope(s);
  call<Entry::cuMemsetD8>(*s.table, [&] { return fmt::format("setting the {} bytes of a {}", bytes_, kind); },
                          address(), value, bytes_);
}

void DeviceMemory::copy_async(const Stream& s, void* host, std::size_t n, bool to_host, const char* kind,
                              Owners&& keep) const {
  const char* op = to_host ? "copy_to" : "copy_from";
  check_fits(static_cast<bool>(handle_), n, bytes_, kind, op);
  const ContextState& bs = *handle_.deleter().owner;
  const std::string what = fmt::format("{}::{}", kind, op);
  const ContextState& ss = StreamAccess::state(s, what.c_str());
  if (ss.table != bs.table || ss.context != bs.context)
    throw UsageError(fmt::format("{}: the stream belongs to another context than the buffer; copy on a stream of the "
                                 "buffer's context",
                                 what));
  if (n == 0) return;
  CUgraphNodeParams p{};
  p.type = CU_GRAPH_NODE_TYPE_MEMCPY;
  p.memcpy.copyCtx = bs.context;
  CUDA_MEMCPY3D& c = p.memcpy.copyParams;
  if (to_host) {
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = address();
    c.dstMemoryType = CU_MEMORYTYPE_HOST;
    c.dstHost = host;
  } else {
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = host;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = address();
  }
  c.WidthInBytes = n;
  c.Height = 1;
  c.Depth = 1;
  // Why through submit: the stream work of Stream::memcpy, with its ownership (the burst, or the
  // captured node's version) and its capture handling.
  const CUdeviceptr dev = address();
  auto issue = [&](const DriverTable& t, CUstream stream, bool, Entry* entry) {
    if (to_host) {
      *entry = Entry::cuMemcpyDtoHAsync;
      return raw<Entry::cuMemcpyDtoHAsync>(t, host, dev, n, stream);
    }
    *entry = Entry::cuMemcpyHtoDAsync;
    return raw<Entry::cuMemcpyHtoDAsync>(t, dev, host, n, stream);
  };
  (void)submit(s, StreamOp{&p, issue}, std::move(keep), to_host ? "SharedBuffer::copy_to" : "SharedBuffer::copy_from");
}

HostMemory::HostMemory(const Context& ctx, std::size_t count, std::size_t elem_size, std::string_view type) {
  check_calls_allowed("Context::alloc_pinned");
  std::size_t n = checked_bytes(count, elem_size, type, "pinned host memory");
  const ContextPtr& s = state_of(ctx);
  ScopedContext scope(*s);
  RelaxedScope relaxed(*s->table);
  void* p = nullptr;
  call<Entry::cuMemAllocHost>(
      *s->table,
      [&] { return fmt::format("allocating {} elements of {} ({} bytes) of pinned host memory", count, type, n); }, &p,
      n);
  handle_ = UniqueHandle<void*, FreeHost>(p, FreeHost{s, count_buffer_bytes(true, n, true)});
  bytes_ = n;
}

HostMemory::HostMemory(const Context& ctx, void* adopt, std::size_t bytes) noexcept
    : handle_(adopt, FreeHost{state_of(ctx), adopt ? count_buffer_bytes(true, bytes, true) : 0}), bytes_(adopt ? bytes : 0) {}

Context HostMemory::context(const char* kind) const {
  if (!handle_) throw_empty(fmt::format("{}::context", kind), kind);
  return context_from(handle_.deleter().owner);
}

std::string buffer_label(std::string_view kind, std::string_view type, std::size_t size, std::string_view name) {
  std::string s;
  s.reserve(kind.size() + type.size() + name.size() + 28);
  s.append(kind).append("<").append(type).append(">[").append(std::to_string(size)).append("]");
  if (!name.empty()) s.append(" \"").append(name).append("\"");
  return s;
}

std::string checked_name(std::string name, bool owned, const char* kind) {
  if (!owned) throw_empty(fmt::format("{}::named", kind), kind);
  for (char c : name)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      throw UsageError(fmt::format("{}::named: the name \"{}\" has a control character (code {}); use printable "
                                   "characters",
                                   kind, name, static_cast<int>(static_cast<unsigned char>(c))));
  return name;
}

}  // namespace tether::detail
