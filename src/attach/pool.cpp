// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
#include "pool.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define TETHER_POOL_OFF 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TETHER_POOL_OFF 1
#endif
#endif

namespace tether::detail {

namespace {

constexpr std::size_t kGranule = 16;
constexpr std::size_t kMaxPooled = 504;  // larger groups use the general allocator directly
constexpr std::size_t kClasses = (kMaxPooled - 8) / kGranule + 1;
[[maybe_unused]] constexpr std::size_t kPoolBytesPerClass = std::size_t{1} << 20;

struct FreeBlock {
  FreeBlock* next;
};

struct Shared {
  alignas(64) std::atomic<FreeBlock*> head{nullptr};
  std::atomic<std::size_t> pooled{0};  // approximate: only bounds what is retained
};

Shared* shared_classes() noexcept {
  // Why never destroyed: the reclaimer frees groups during static destruction.
  static Shared* s = new Shared[kClasses];
  return s;
}

void push_list(Shared& s, FreeBlock* first, FreeBlock* last) noexcept {
  FreeBlock* h = s.head.load(std::memory_order_relaxed);
  do {
    last->next = h;  // never dereferences h: another thread may own it already
  } while (!s.head.compare_exchange_weak(h, first, std::memory_order_release, std::memory_order_relaxed));
}

// Set when the thread's cache is gone (thread exit): the pool is bypassed from then on.
thread_local bool t_cache_gone = false;

struct LocalCache {
  FreeBlock* head[kClasses] = {};
  ~LocalCache() {
    // A thread that ends hands its cached blocks back, for other threads to use.
    for (std::size_t c = 0; c < kClasses; ++c) {
      if (!head[c]) continue;
      FreeBlock* last = head[c];
      std::size_t n = 1;
      for (; last->next; last = last->next) ++n;
      Shared& s = shared_classes()[c];
      s.pooled.fetch_add(n, std::memory_order_relaxed);
      push_list(s, head[c], last);
      head[c] = nullptr;
    }
    t_cache_gone = true;
  }
};

thread_local LocalCache t_cache;

// Class c holds blocks of 16c + 8 bytes: with glibc's 8-byte chunk header these are exactly the
// usable sizes of its 16-byte-granular chunks, so rounding a group up to its class wastes no heap.
[[maybe_unused]] std::size_t class_of(std::size_t bytes) noexcept { return bytes <= 8 ? 0 : (bytes - 8 + kGranule - 1) / kGranule; }
[[maybe_unused]] std::size_t class_bytes(std::size_t c) noexcept { return c * kGranule + 8; }

}  // namespace

void* group_allocate(std::size_t bytes) {
#ifndef TETHER_POOL_OFF
  if (bytes <= kMaxPooled && !t_cache_gone) {
    std::size_t c = class_of(bytes);
    LocalCache& local = t_cache;
    if (!local.head[c]) {
      Shared& s = shared_classes()[c];
      if (FreeBlock* taken = s.head.exchange(nullptr, std::memory_order_acquire)) {
        // Not counted block by block: a walk would pull every block from the freeing thread's
        // cache one dependent load at a time. A push racing with this reset is forgotten by the
        // count, which only makes the cap approximate.
        s.pooled.store(0, std::memory_order_relaxed);
        local.head[c] = taken;
      }
    }
    if (FreeBlock* b = local.head[c]) {
      local.head[c] = b->next;
      // Blocks were last written by the reclaimer's thread: fetch the next one's line for writing
      // now, so that the next allocation does not wait for it.
      if (b->next) __builtin_prefetch(b->next, 1, 3);
      return b;
    }
    return ::operator new(class_bytes(c));
  }
#endif
  return ::operator new(bytes);
}

void group_free(void* p, std::size_t bytes) noexcept {
#ifndef TETHER_POOL_OFF
  if (bytes <= kMaxPooled) {
    std::size_t c = class_of(bytes);
    Shared& s = shared_classes()[c];
    if (s.pooled.load(std::memory_order_relaxed) * class_bytes(c) < kPoolBytesPerClass) {
      s.pooled.fetch_add(1, std::memory_order_relaxed);
      auto* b = static_cast<FreeBlock*>(p);
      push_list(s, b, b);
      return;
    }
    ::operator delete(p, class_bytes(c));
    return;
  }
#endif
  ::operator delete(p, bytes);
}

void group_pool_release() noexcept {
#ifndef TETHER_POOL_OFF
  auto free_list = [](FreeBlock* b, std::size_t c) {
    while (b) {
      FreeBlock* next = b->next;
      ::operator delete(b, class_bytes(c));
      b = next;
    }
  };
  for (std::size_t c = 0; c < kClasses; ++c) {
    Shared& s = shared_classes()[c];
    free_list(s.head.exchange(nullptr, std::memory_order_acquire), c);
    s.pooled.store(0, std::memory_order_relaxed);
    if (!t_cache_gone) free_list(std::exchange(t_cache.head[c], nullptr), c);
  }
#endif
}

std::size_t group_pool_retained() noexcept {
  std::size_t n = 0;
  for (std::size_t c = 0; c < kClasses; ++c) n += shared_classes()[c].pooled.load(std::memory_order_relaxed);
  return n;
}

}  // namespace tether::detail
