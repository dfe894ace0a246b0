// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Typed device and pinned host buffers. The typed classes are thin: every driver call lives in the
// untyped cores (detail::DeviceMemory, detail::HostMemory) in buffer.cpp.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "context.hpp"
#include "stream.hpp"
#include "unique_handle.hpp"

namespace tether::detail {

// A stream-ordered free's record (mem_pool.cpp): the address, the context's internal stream to
// free it on and the pool to keep alive. Made with the allocation, so that the release itself
// allocates nothing; release_pooled consumes it.
struct PooledFree;
struct BufferMaker;  // makes DeviceBuffers of other allocators' memory (nccl.hpp)
struct DropPooledFree {
  void operator()(PooledFree* f) const noexcept;
};
/// cuMemFreeAsync of the memory `f` describes on its internal stream, with `owner`'s context
/// current, under the release rule (a non-blocking release); consumes `f`.
void release_pooled(const ContextPtr& owner, PooledFree* f) noexcept;

// cuMemFreeAsync on the reclaimer's per-thread stream with the buffer's context current, under
// the release rule (never cuMemFree: buffer.cpp says why); for memory from a pool
// (Stream::alloc_buffer, `pooled` set) the stream-ordered release_pooled instead.
// Memory of another allocator (NCCL's ncclMemAlloc) is freed by its own function, `custom`, which
// must not call the driver on the calling thread (it hands the free to a thread of its own).
struct FreeDevice {
  ContextPtr owner;
  mutable std::unique_ptr<PooledFree, DropPooledFree> pooled;
  std::size_t bytes = 0;  // counted in buffer_bytes while the memory lives
  void (*custom)(const ContextPtr& owner, CUdeviceptr p) noexcept = nullptr;
  void operator()(CUdeviceptr p) const noexcept;
};

// cuMemFreeHost with the buffer's context pushed, under the release rule.
struct FreeHost {
  ContextPtr owner;
  std::size_t bytes = 0;  // counted in buffer_bytes while the memory lives
  void operator()(void* p) const noexcept;
};

/// Device (`pinned` false) or page-locked host bytes held by tether's buffers in the process now.
std::size_t buffer_bytes(bool pinned) noexcept;
/// Counts `bytes` more (or, negative, fewer) held by tether's buffers. Returns `bytes`.
std::size_t count_buffer_bytes(bool pinned, std::size_t bytes, bool add) noexcept;

// `T` spelled as the compiler spells it, for error messages ("allocating 0 elements of float").
template <class T>
std::string_view type_name() noexcept {
  std::string_view f = __PRETTY_FUNCTION__;  // "... type_name() [T = float]" or "[with T = float; ...]"
  std::size_t b = f.find("T = ");
  if (b == std::string_view::npos) return "T";
  b += 4;
  std::size_t e = f.find_first_of(";]", b);
  return f.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b);
}

// "SharedBuffer<float>[64]", and ' "x"' after it for a named buffer. Why not inline operator+: an
// importer of the module that did not include <string> itself cannot see std::operator+ at the
// point where a buffer's label template is instantiated (in its translation unit), so the label is
// built out of line.
std::string buffer_label(std::string_view kind, std::string_view type, std::size_t size, std::string_view name = {});

// A buffer's user-given name (`named`): checked, and stored with its allocation.
std::string checked_name(std::string name, bool owned, const char* kind);

// One device allocation, untyped. Move-only; moved-from is empty with zero bytes.
class DeviceMemory {
 public:
  DeviceMemory() noexcept = default;
  // cuMemAlloc of count * elem_size bytes with ctx pushed. `type` names the element type in errors.
  DeviceMemory(const Context& ctx, std::size_t count, std::size_t elem_size, std::string_view type);
  // Adopts an allocation made in ctx; never calls the driver. `custom` frees it (null: cuMemFreeAsync).
  DeviceMemory(const Context& ctx, CUdeviceptr adopt, std::size_t bytes,
               void (*custom)(const ContextPtr&, CUdeviceptr) noexcept = nullptr) noexcept;
  // Adopts a pool allocation (mem_pool.cpp) freed in stream order as `pooled` says.
  DeviceMemory(ContextPtr owner, CUdeviceptr adopt, std::size_t bytes,
               std::unique_ptr<PooledFree, DropPooledFree> pooled) noexcept
      : handle_(adopt, FreeDevice{std::move(owner), std::move(pooled), adopt ? count_buffer_bytes(false, bytes, true) : 0, nullptr}),
        bytes_(adopt ? bytes : 0) {}
  DeviceMemory(DeviceMemory&& other) noexcept
      : handle_(std::move(other.handle_)), bytes_(std::exchange(other.bytes_, 0)), name_(std::exchange(other.name_, {})) {}
  DeviceMemory& operator=(DeviceMemory&& other) noexcept {
    handle_ = std::move(other.handle_);  // frees what this held first
    bytes_ = std::exchange(other.bytes_, 0);
    name_ = std::exchange(other.name_, {});
    return *this;
  }

  CUdeviceptr address() const noexcept { return handle_.get(); }
  std::size_t bytes() const noexcept { return bytes_; }
  explicit operator bool() const noexcept { return static_cast<bool>(handle_); }
  Context context(const char* kind) const;

  void copy_from(const void* src, std::size_t n, const char* kind) const;  // cuMemcpyHtoD
  void copy_to(void* dst, std::size_t n, const char* kind) const;          // cuMemcpyDtoH
  void fill_bytes(unsigned char value, const char* kind) const;            // cuMemsetD8
  // cuMemcpyDtoHAsync (to_host) or cuMemcpyHtoDAsync of the first `n` bytes on `s`, keeping
  // `keep` (the typed buffer) until the stream has passed it, or with the captured node.
  void copy_async(const Stream& s, void* host, std::size_t n, bool to_host, const char* kind, Owners&& keep) const;

  const std::string& name() const noexcept { return name_; }
  void set_name(std::string name, const char* kind) { name_ = checked_name(std::move(name), bool(handle_), kind); }

  CUdeviceptr release() noexcept {
    if (handle_) count_buffer_bytes(false, handle_.deleter().bytes, false);  // no longer tether's
    bytes_ = 0;
    name_.clear();
    return handle_.release();
  }
  void reset() noexcept {
    handle_.reset();
    bytes_ = 0;
    name_.clear();
  }
  void swap(DeviceMemory& other) noexcept {
    handle_.swap(other.handle_);
    std::swap(bytes_, other.bytes_);
    name_.swap(other.name_);
  }

 private:
  UniqueHandle<CUdeviceptr, FreeDevice> handle_;
  std::size_t bytes_ = 0;
  std::string name_;  // `named`; immutable once the memory is shared
};

// One page-locked host allocation, untyped. Move-only; moved-from is empty with zero bytes.
class HostMemory {
 public:
  HostMemory() noexcept = default;
  // cuMemAllocHost of count * elem_size bytes with ctx pushed.
  HostMemory(const Context& ctx, std::size_t count, std::size_t elem_size, std::string_view type);
  // Adopts an allocation made in ctx; never calls the driver.
  HostMemory(const Context& ctx, void* adopt, std::size_t bytes) noexcept;
  HostMemory(HostMemory&& other) noexcept
      : handle_(std::move(other.handle_)), bytes_(std::exchange(other.bytes_, 0)), name_(std::exchange(other.name_, {})) {}
  HostMemory& operator=(HostMemory&& other) noexcept {
    handle_ = std::move(other.handle_);  // frees what this held first
    bytes_ = std::exchange(other.bytes_, 0);
    name_ = std::exchange(other.name_, {});
    return *this;
  }

  void* data() const noexcept { return handle_.get(); }
  std::size_t bytes() const noexcept { return bytes_; }
  explicit operator bool() const noexcept { return static_cast<bool>(handle_); }
  Context context(const char* kind) const;

  const std::string& name() const noexcept { return name_; }
  void set_name(std::string name, const char* kind) { name_ = checked_name(std::move(name), bool(handle_), kind); }

  void* release() noexcept {
    if (handle_) count_buffer_bytes(true, handle_.deleter().bytes, false);  // no longer tether's
    bytes_ = 0;
    name_.clear();
    return handle_.release();
  }
  void reset() noexcept {
    handle_.reset();
    bytes_ = 0;
    name_.clear();
  }
  void swap(HostMemory& other) noexcept {
    handle_.swap(other.handle_);
    std::swap(bytes_, other.bytes_);
    name_.swap(other.name_);
  }

 private:
  UniqueHandle<void*, FreeHost> handle_;
  std::size_t bytes_ = 0;
  std::string name_;  // `named`; immutable once the memory is shared
};

template <class T>
T* device_pointer(CUdeviceptr p) noexcept {
  return reinterpret_cast<T*>(static_cast<std::uintptr_t>(p));
}

}  // namespace tether::detail

TETHER_EXPORT namespace tether {

template <class T>
class SharedBuffer;
template <class T>
class SharedPinnedBuffer;

/// Synchronous copies (`copy_from(span)`, `copy_to(span)`): they return once the copy is done as
/// far as the host is concerned (`copy_to`'s data is in `dst`; `copy_from`'s `src` may be reused),
/// and they are ordered after work on the legacy default stream only. They do NOT wait for work
/// queued on other streams, and `Context::make_stream()` makes non-blocking streams: after
/// `exec.launch(stream)`, `x.copy_to(h)` may read the buffer before the launch wrote it (stale
/// data, no error), and `x.copy_from(h)` may overwrite it while queued work still reads it. Call
/// `stream.synchronize()` first, or use the stream-ordered overloads of SharedBuffer.
///
/// An owned device allocation of `size()` elements of `T` (`cuMemAlloc` through
/// `Context::alloc<T>(n)`; freed with `cuMemFreeAsync` when dropped (since 0.5; docs/design/attachments.md, "Blocking driver calls"); or stream-ordered
/// from a memory pool through `Stream::alloc_buffer<T>(n[, pool])`, freed with `cuMemFreeAsync`
/// instead, see docs/memory.md). Move-only; a
/// moved-from or default-constructed buffer is empty (size 0, null address). `std::move(b).share()`
/// turns it into a SharedBuffer. The buffer keeps its context alive; every driver call runs with
/// that context pushed. Thread safety: concurrent const members are safe; everything else needs
/// exclusive access. The destructor may run on any thread and never throws or blocks: the free
/// (`cuMemFreeAsync` on the reclaimer's per-thread stream) always runs on tether's reclaimer,
/// whose RELAXED capture mode keeps other threads' captures intact (so the memory is returned to
/// the driver shortly after the last owner goes, not inside `reset`). Unlike `cuMemFree`, the free
/// does not wait for work on other streams: work that uses the memory through `unowned` must be
/// finished before the last owner goes; a pool buffer's `cuMemFreeAsync` is queued at once (on
/// the reclaimer inside a host callback).
/// A DeviceBuffer has no stream-ordered copy: nothing could keep a uniquely owned buffer alive
/// until the stream reached the copy; share it (`std::move(b).share()`) and copy the SharedBuffer.
/// Names: `named("x")` gives the buffer a name that `inspect` and `to_dot` show in its owner label
/// (`DeviceBuffer<float>[1024] "x"`); it moves with the allocation and is kept by `share()`.
template <class T>
class DeviceBuffer {
  static_assert(std::is_trivially_copyable_v<T>,
                "DeviceBuffer<T> needs a trivially copyable T: device memory is copied byte by byte, so T's "
                "constructors, assignments and destructor would never run");

 public:
  /// What `inspect` shows for a buffer a node owns: "DeviceBuffer<float>[1024]", with ` "x"` after
  /// it for a buffer named "x".
  friend std::string tether_owner_label(const DeviceBuffer& b) {
    return detail::buffer_label("DeviceBuffer", detail::type_name<T>(), b.size(), b.name());
  }
  /// What a memory measurement counts for it (`inspect`, `owned_memory`): its device bytes.
  friend void tether_owner_memory(const DeviceBuffer& b, detail::MemoryTally& t) {
    t.add(static_cast<std::uintptr_t>(b.mem_.address()), b.mem_.bytes(), false);
  }
  using value_type = T;

  /// An empty buffer.
  DeviceBuffer() noexcept = default;

  /// Takes ownership of `n` elements at `address`, allocated with `cuMemAlloc` in `ctx` (they
  /// will be freed with `cuMemFreeAsync`, like `Context::alloc`'s). Never calls the driver.
  static DeviceBuffer from_native_handle(const Context& ctx, CUdeviceptr address, std::size_t n) noexcept {
    return DeviceBuffer(detail::DeviceMemory(ctx, address, n * sizeof(T)));
  }

  /// The device address as a typed pointer (what kernel parameters of type `T*` take). Not
  /// dereferenceable on the host. Null when empty.
  T* data() noexcept { return detail::device_pointer<T>(mem_.address()); }
  /// The device address as a pointer to const.
  const T* data() const noexcept { return detail::device_pointer<const T>(mem_.address()); }
  /// The device address (0 when empty).
  CUdeviceptr address() const noexcept { return mem_.address(); }
  /// The number of elements (0 when empty).
  std::size_t size() const noexcept { return mem_.bytes() / sizeof(T); }
  /// The number of bytes (0 when empty).
  std::size_t bytes() const noexcept { return mem_.bytes(); }

  /// Copies `src` to the start of the buffer (`cuMemcpyHtoD`, synchronous, context pushed; see
  /// "Synchronous copies" above: it does not wait for non-blocking streams). Nothing happens for an
  /// empty `src`. Throws UsageError if the buffer is empty or `src` has more elements than it,
  /// DriverError.
  void copy_from(std::span<const T> src) { mem_.copy_from(src.data(), src.size_bytes(), "DeviceBuffer"); }
  /// Copies the first `dst.size()` elements of the buffer to `dst` (`cuMemcpyDtoH`, synchronous,
  /// context pushed; it does not wait for non-blocking streams: see "Synchronous copies" above).
  /// Throws UsageError if the buffer is empty or `dst` has more elements than it, DriverError.
  void copy_to(std::span<T> dst) const { mem_.copy_to(dst.data(), dst.size_bytes(), "DeviceBuffer"); }
  /// Refused at compile time: see the class comment (share the buffer, then copy on the stream).
  template <class S>
    requires std::is_same_v<S, Stream>
  void copy_from(std::span<const T>, const S&) {
    static_assert(!std::is_same_v<S, S>,
                  "DeviceBuffer::copy_from(span, stream): a stream-ordered copy keeps its buffer alive until the "
                  "stream has run it, which a uniquely owned DeviceBuffer cannot allow: share it "
                  "(auto x = std::move(buffer).share();) and call x.copy_from(span, stream)");
  }
  /// Refused at compile time: see the class comment (share the buffer, then copy on the stream).
  template <class S>
    requires std::is_same_v<S, Stream>
  void copy_to(std::span<T>, const S&) const {
    static_assert(!std::is_same_v<S, S>,
                  "DeviceBuffer::copy_to(span, stream): a stream-ordered copy keeps its buffer alive until the "
                  "stream has run it, which a uniquely owned DeviceBuffer cannot allow: share it "
                  "(auto x = std::move(buffer).share();) and call x.copy_to(span, stream)");
  }
  /// Sets every byte of the buffer to `value` (`cuMemsetD8`, context pushed). Throws UsageError
  /// when empty, DriverError.
  void fill_bytes(unsigned char value) { mem_.fill_bytes(value, "DeviceBuffer"); }

  /// The context the memory belongs to. Throws UsageError when empty.
  Context context() const { return mem_.context("DeviceBuffer"); }

  /// Names the buffer (shown by `inspect` and `to_dot`; an empty name removes it) and returns it,
  /// for `auto x = ctx.alloc<float>(n).named("x");`. The name moves with the allocation, is kept
  /// by `share()` (and fixed from then on), and is dropped by `reset` and `release`. Throws
  /// UsageError when empty or for a name with a control character (newline, tab, ...). Since 0.5.
  DeviceBuffer& named(std::string name) & {
    mem_.set_name(std::move(name), "DeviceBuffer");
    return *this;
  }
  DeviceBuffer&& named(std::string name) && {
    mem_.set_name(std::move(name), "DeviceBuffer");
    return std::move(*this);
  }
  /// The buffer's name (empty when it has none, or when the buffer is empty). Since 0.5.
  std::string_view name() const noexcept { return mem_.name(); }

  /// Turns the buffer into shared ownership of the same allocation; this buffer is left empty.
  /// Throws std::bad_alloc (the buffer is then unchanged).
  SharedBuffer<T> share() &&;

  /// Gives up ownership: returns the address (the caller must free it: `cuMemFree`, or
  /// `cuMemFreeAsync` for a pool buffer) and leaves the buffer empty.
  CUdeviceptr release() noexcept { return mem_.release(); }
  /// Frees the memory now (under the release rule) and leaves the buffer empty.
  void reset() noexcept { mem_.reset(); }
  /// Exchanges the allocations of two buffers.
  void swap(DeviceBuffer& other) noexcept { mem_.swap(other.mem_); }
  /// Whether an allocation is owned.
  explicit operator bool() const noexcept { return static_cast<bool>(mem_); }

 private:
  friend class Context;
  friend class Stream;  // alloc_buffer (mem_pool.hpp)
  friend struct detail::BufferMaker;
  explicit DeviceBuffer(detail::DeviceMemory m) noexcept : mem_(std::move(m)) {}

  detail::DeviceMemory mem_;
};

/// Shared ownership of one device allocation of `T` (from `std::move(device_buffer).share()`):
/// the memory is freed (`cuMemFreeAsync`, as DeviceBuffer's) when the last copy goes. Graph nodes retain
/// buffers as SharedBuffers. A handle with pointer semantics: const members may write the device
/// memory. A moved-from or default-constructed SharedBuffer is empty. Thread safety: all members
/// are safe to call concurrently on different copies (like `std::shared_ptr`); the last copy may
/// be dropped on any thread and never throws.
template <class T>
class SharedBuffer {
 public:
  /// What `inspect` shows for a buffer a node owns: "SharedBuffer<float>[1024]", with ` "x"` after
  /// it for a buffer named "x".
  friend std::string tether_owner_label(const SharedBuffer& b) {
    return detail::buffer_label("SharedBuffer", detail::type_name<T>(), b.size(), b.name());
  }
  /// What a memory measurement counts for it: its device bytes, once however many copies.
  friend void tether_owner_memory(const SharedBuffer& b, detail::MemoryTally& t) {
    if (b.mem_) t.add(static_cast<std::uintptr_t>(b.mem_->address()), b.mem_->bytes(), false);
  }
  using value_type = T;

  /// An empty shared buffer.
  SharedBuffer() noexcept = default;

  /// The device address as a typed pointer (null when empty).
  T* data() const noexcept { return mem_ ? detail::device_pointer<T>(mem_->address()) : nullptr; }
  /// The device address (0 when empty).
  CUdeviceptr address() const noexcept { return mem_ ? mem_->address() : 0; }
  /// The number of elements (0 when empty).
  std::size_t size() const noexcept { return bytes() / sizeof(T); }
  /// The number of bytes (0 when empty).
  std::size_t bytes() const noexcept { return mem_ ? mem_->bytes() : 0; }

  /// Copies `src` to the start of the buffer (`cuMemcpyHtoD`, synchronous; it does not wait for
  /// non-blocking streams: see "Synchronous copies" above DeviceBuffer). Throws like DeviceBuffer's.
  void copy_from(std::span<const T> src) const { memory().copy_from(src.data(), src.size_bytes(), "SharedBuffer"); }
  /// Copies the start of the buffer to `dst` (`cuMemcpyDtoH`, synchronous; it does not wait for
  /// non-blocking streams: after `exec.launch(stream)` synchronize first, or use
  /// `copy_to(dst, stream)`). Throws like DeviceBuffer's.
  void copy_to(std::span<T> dst) const { memory().copy_to(dst.data(), dst.size_bytes(), "SharedBuffer"); }

  /// Stream-ordered copy of `src` to the start of the buffer (`cuMemcpyHtoDAsync` on `stream`): it
  /// runs after the work queued on `stream` before it and before the work queued after it. The
  /// buffer is kept alive until the stream has run the copy (stream work owns its operands, as
  /// `Stream::memcpy`); `src` is not owned: it must stay valid and unchanged until then (for
  /// pageable memory the driver may copy it before returning; for pinned memory it reads it when
  /// the stream gets there). Inside a stream capture the copy becomes a memcpy node of the captured
  /// graph, which keeps the buffer, and `src` is read at every launch of that graph. Nothing is
  /// queued for an empty `src`. Throws UsageError (naming this call) for an empty buffer or stream,
  /// a `src` with more elements than the buffer, a stream of another context, or inside a host
  /// callback, all before any driver call; DriverError. Since 0.5.
  void copy_from(std::span<const T> src, const Stream& stream) const {
    memory().copy_async(stream, const_cast<T*>(src.data()), src.size_bytes(), false, "SharedBuffer", keep());
  }
  /// Stream-ordered copy of the first `dst.size()` elements of the buffer to `dst`
  /// (`cuMemcpyDtoHAsync` on `stream`): `exec.launch(stream); x.copy_to(h, stream);
  /// stream.synchronize();` reads what the launch wrote. `dst` holds the data once the stream has
  /// passed the copy (synchronize the stream, or an event recorded after it); until then it must
  /// stay valid and must not be read. The buffer is kept alive until then. Captures and errors as
  /// `copy_from(src, stream)`. Since 0.5.
  void copy_to(std::span<T> dst, const Stream& stream) const {
    memory().copy_async(stream, dst.data(), dst.size_bytes(), true, "SharedBuffer", keep());
  }
  /// Stream-ordered copy of the first `src.size()` elements of a pinned buffer to the start of this
  /// one (`cuMemcpyHtoDAsync`), keeping both buffers alive until the stream has run it: the fully
  /// owned form of `copy_from(span, stream)`. Throws as that, and UsageError for an empty `src`.
  /// Since 0.5.
  void copy_from(const SharedPinnedBuffer<T>& src, const Stream& stream) const;
  /// Stream-ordered copy of the first `dst.size()` elements of this buffer into a pinned buffer
  /// (`cuMemcpyDtoHAsync`), keeping both alive until the stream has run it. Throws as
  /// `copy_to(span, stream)`, and UsageError for an empty `dst`. Since 0.5.
  void copy_to(const SharedPinnedBuffer<T>& dst, const Stream& stream) const;
  /// Sets every byte to `value` (`cuMemsetD8`). Throws UsageError when empty, DriverError.
  void fill_bytes(unsigned char value) const { memory().fill_bytes(value, "SharedBuffer"); }
  /// The context the memory belongs to. Throws UsageError when empty.
  Context context() const { return memory().context("SharedBuffer"); }
  /// The buffer's name, given before it was shared (`DeviceBuffer::named`); empty when it has none
  /// or the SharedBuffer is empty. Since 0.5.
  std::string_view name() const noexcept { return mem_ ? std::string_view(mem_->name()) : std::string_view(); }

  /// The number of SharedBuffers sharing the allocation (0 when empty); approximate under
  /// concurrent copies, like `std::shared_ptr::use_count`.
  long use_count() const noexcept { return mem_.use_count(); }
  /// Whether an allocation is shared.
  explicit operator bool() const noexcept { return mem_ != nullptr; }
  /// Whether both share the same allocation.
  friend bool operator==(const SharedBuffer& a, const SharedBuffer& b) noexcept { return a.mem_ == b.mem_; }

 private:
  friend class DeviceBuffer<T>;
  explicit SharedBuffer(std::shared_ptr<const detail::DeviceMemory> m) noexcept : mem_(std::move(m)) {}
  const detail::DeviceMemory& memory() const noexcept {
    static const detail::DeviceMemory empty;
    return mem_ ? *mem_ : empty;
  }
  // What a stream-ordered copy keeps: this buffer (nothing for an empty one, which is refused).
  Owners keep() const { return mem_ ? Owners{*this} : Owners{}; }

  std::shared_ptr<const detail::DeviceMemory> mem_;
};

/// An owned page-locked host allocation of `size()` elements of `T` (`cuMemAllocHost` through
/// `Context::alloc_pinned<T>(n)`; `cuMemFreeHost`, context pushed, when dropped). The host can read
/// and write it directly (`span()`); asynchronous copies from and to it overlap with device work.
/// The contents start indeterminate. Move-only; a moved-from or default-constructed buffer is
/// empty. `std::move(b).share()` turns it into a SharedPinnedBuffer. Thread safety: as
/// DeviceBuffer; the destructor may run on any thread and never throws.
template <class T>
class PinnedBuffer {
  static_assert(std::is_trivially_copyable_v<T>,
                "PinnedBuffer<T> needs a trivially copyable T: pinned memory is handed out raw and copied byte by "
                "byte, so T's constructors and destructor would never run");

 public:
  /// What `inspect` shows for a buffer a node owns: "PinnedBuffer<float>[1024]", with ` "x"` after
  /// it for a buffer named "x".
  friend std::string tether_owner_label(const PinnedBuffer& b) {
    return detail::buffer_label("PinnedBuffer", detail::type_name<T>(), b.size(), b.name());
  }
  /// What a memory measurement counts for it: its page-locked host bytes.
  friend void tether_owner_memory(const PinnedBuffer& b, detail::MemoryTally& t) {
    t.add(reinterpret_cast<std::uintptr_t>(b.mem_.data()), b.mem_.bytes(), true);
  }
  using value_type = T;

  /// An empty buffer.
  PinnedBuffer() noexcept = default;

  /// Takes ownership of `n` elements at `p`, allocated with `cuMemAllocHost` in `ctx` (they will
  /// be freed with `cuMemFreeHost`). Never calls the driver.
  static PinnedBuffer from_native_handle(const Context& ctx, T* p, std::size_t n) noexcept {
    return PinnedBuffer(detail::HostMemory(ctx, static_cast<void*>(p), n * sizeof(T)));
  }

  /// The first element (null when empty).
  T* data() noexcept { return static_cast<T*>(mem_.data()); }
  /// The first element, read-only.
  const T* data() const noexcept { return static_cast<const T*>(mem_.data()); }
  /// The number of elements (0 when empty).
  std::size_t size() const noexcept { return mem_.bytes() / sizeof(T); }
  /// The number of bytes (0 when empty).
  std::size_t bytes() const noexcept { return mem_.bytes(); }
  /// The elements.
  std::span<T> span() noexcept { return {data(), size()}; }
  /// The elements, read-only.
  std::span<const T> span() const noexcept { return {data(), size()}; }
  /// The context the memory belongs to. Throws UsageError when empty.
  Context context() const { return mem_.context("PinnedBuffer"); }

  /// Names the buffer, as `DeviceBuffer::named` (shown by `inspect` and `to_dot`, kept by
  /// `share()`). Throws UsageError when empty or for a name with a control character. Since 0.5.
  PinnedBuffer& named(std::string name) & {
    mem_.set_name(std::move(name), "PinnedBuffer");
    return *this;
  }
  PinnedBuffer&& named(std::string name) && {
    mem_.set_name(std::move(name), "PinnedBuffer");
    return std::move(*this);
  }
  /// The buffer's name (empty when it has none, or when the buffer is empty). Since 0.5.
  std::string_view name() const noexcept { return mem_.name(); }

  /// Turns the buffer into shared ownership of the same allocation; this buffer is left empty.
  /// Throws std::bad_alloc (the buffer is then unchanged).
  SharedPinnedBuffer<T> share() &&;

  /// Gives up ownership: returns the memory (the caller must free it) and leaves the buffer empty.
  T* release() noexcept { return static_cast<T*>(mem_.release()); }
  /// Frees the memory now (under the release rule) and leaves the buffer empty.
  void reset() noexcept { mem_.reset(); }
  /// Exchanges the allocations of two buffers.
  void swap(PinnedBuffer& other) noexcept { mem_.swap(other.mem_); }
  /// Whether an allocation is owned.
  explicit operator bool() const noexcept { return static_cast<bool>(mem_); }

 private:
  friend class Context;
  explicit PinnedBuffer(detail::HostMemory m) noexcept : mem_(std::move(m)) {}

  detail::HostMemory mem_;
};

/// Shared ownership of one page-locked host allocation of `T` (from
/// `std::move(pinned_buffer).share()`): freed (`cuMemFreeHost`, context pushed) when the last copy
/// goes. A handle with pointer semantics: const members give mutable access to the elements. A
/// moved-from or default-constructed one is empty. Thread safety: as SharedBuffer.
template <class T>
class SharedPinnedBuffer {
 public:
  /// What `inspect` shows for a buffer a node owns: "SharedPinnedBuffer<float>[1024]", with ` "x"`
  /// after it for a buffer named "x".
  friend std::string tether_owner_label(const SharedPinnedBuffer& b) {
    return detail::buffer_label("SharedPinnedBuffer", detail::type_name<T>(), b.size(), b.name());
  }
  /// What a memory measurement counts for it: its page-locked host bytes, once however many copies.
  friend void tether_owner_memory(const SharedPinnedBuffer& b, detail::MemoryTally& t) {
    if (b.mem_) t.add(reinterpret_cast<std::uintptr_t>(b.mem_->data()), b.mem_->bytes(), true);
  }
  using value_type = T;

  /// An empty shared buffer.
  SharedPinnedBuffer() noexcept = default;

  /// The first element (null when empty).
  T* data() const noexcept { return mem_ ? static_cast<T*>(mem_->data()) : nullptr; }
  /// The number of elements (0 when empty).
  std::size_t size() const noexcept { return bytes() / sizeof(T); }
  /// The number of bytes (0 when empty).
  std::size_t bytes() const noexcept { return mem_ ? mem_->bytes() : 0; }
  /// The elements.
  std::span<T> span() const noexcept { return {data(), size()}; }
  /// The context the memory belongs to. Throws UsageError when empty.
  Context context() const {
    if (!mem_) detail::throw_empty("SharedPinnedBuffer");
    return mem_->context("SharedPinnedBuffer");
  }
  /// The buffer's name, given before it was shared (`PinnedBuffer::named`); empty when it has none
  /// or the SharedPinnedBuffer is empty. Since 0.5.
  std::string_view name() const noexcept { return mem_ ? std::string_view(mem_->name()) : std::string_view(); }

  /// The number of SharedPinnedBuffers sharing the allocation (0 when empty).
  long use_count() const noexcept { return mem_.use_count(); }
  /// Whether an allocation is shared.
  explicit operator bool() const noexcept { return mem_ != nullptr; }
  /// Whether both share the same allocation.
  friend bool operator==(const SharedPinnedBuffer& a, const SharedPinnedBuffer& b) noexcept { return a.mem_ == b.mem_; }

 private:
  friend class PinnedBuffer<T>;
  explicit SharedPinnedBuffer(std::shared_ptr<const detail::HostMemory> m) noexcept : mem_(std::move(m)) {}

  std::shared_ptr<const detail::HostMemory> mem_;
};

}  // namespace tether

// Why outside the export block: out-of-line definitions of members the classes already export.
namespace tether {

template <class T>
SharedBuffer<T> DeviceBuffer<T>::share() && {
  return SharedBuffer<T>(std::make_shared<const detail::DeviceMemory>(std::move(mem_)));
}

template <class T>
SharedPinnedBuffer<T> PinnedBuffer<T>::share() && {
  return SharedPinnedBuffer<T>(std::make_shared<const detail::HostMemory>(std::move(mem_)));
}

template <class T>
void SharedBuffer<T>::copy_from(const SharedPinnedBuffer<T>& src, const Stream& stream) const {
  if (!src) detail::throw_empty("SharedBuffer::copy_from (the pinned source)", "SharedPinnedBuffer");
  memory().copy_async(stream, src.data(), src.bytes(), false, "SharedBuffer", Owners{*this, src});
}

template <class T>
void SharedBuffer<T>::copy_to(const SharedPinnedBuffer<T>& dst, const Stream& stream) const {
  if (!dst) detail::throw_empty("SharedBuffer::copy_to (the pinned destination)", "SharedPinnedBuffer");
  memory().copy_async(stream, dst.data(), dst.bytes(), true, "SharedBuffer", Owners{*this, dst});
}

template <class T>
DeviceBuffer<T> Context::alloc(std::size_t n) const {
  return DeviceBuffer<T>(detail::DeviceMemory(*this, n, sizeof(T), detail::type_name<T>()));
}

template <class T>
PinnedBuffer<T> Context::alloc_pinned(std::size_t n) const {
  return PinnedBuffer<T>(detail::HostMemory(*this, n, sizeof(T), detail::type_name<T>()));
}

}  // namespace tether
