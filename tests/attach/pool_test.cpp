// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The owner-group pool (src/attach/pool.hpp): groups freed on one thread are reused by another,
// what it keeps is bounded, thread exit hands a cache back, and owners still die exactly once.
// Under AddressSanitizer the pool is off (every group comes from the general allocator), so the
// reuse checks only assert where the pool is on.
#include <doctest/doctest.h>

#include <set>
#include <thread>
#include <vector>

#include "tether.hpp"

namespace {

namespace td = tether::detail;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kPoolOn = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kPoolOn = false;
#else
constexpr bool kPoolOn = true;
#endif
#else
constexpr bool kPoolOn = true;
#endif

struct Counted {
  static inline std::atomic<int> alive{0};
  Counted() { ++alive; }
  Counted(Counted&&) noexcept { ++alive; }
  ~Counted() { --alive; }
};

}  // namespace

TEST_CASE("a group freed on another thread is reused by the next allocation of its size class") {
  td::group_pool_release();
  std::vector<void*> freed;
  for (int i = 0; i < 64; ++i) freed.push_back(td::group_allocate(72));
  std::thread([&] {
    for (void* p : freed) td::group_free(p, 72);
  }).join();
  std::set<void*> before(freed.begin(), freed.end());
  std::vector<void*> again;
  for (int i = 0; i < 64; ++i) again.push_back(td::group_allocate(70));  // the class of 72 (57..72 bytes)
  int reused = 0;
  for (void* p : again) reused += before.count(p) ? 1 : 0;
  if (kPoolOn)
    CHECK(reused == 64);
  else
    CHECK(td::group_pool_retained() == 0);
  for (void* p : again) td::group_free(p, 70);
  td::group_pool_release();
  CHECK(td::group_pool_retained() == 0);
}

TEST_CASE("the pool keeps at most about one MiB per size class and frees the rest") {
  td::group_pool_release();
  constexpr std::size_t bytes = 264, n = 10000;  // 2.6 MiB of one class (264 = 16 * 16 + 8)
  std::vector<void*> blocks;
  for (std::size_t i = 0; i < n; ++i) blocks.push_back(td::group_allocate(bytes));
  for (void* p : blocks) td::group_free(p, bytes);
  const std::size_t kept = td::group_pool_retained();
  if (kPoolOn) {
    // The block that crosses the limit is still kept; the next one is not.
    CHECK(kept * bytes < (std::size_t{1} << 20) + bytes);
    CHECK(kept * bytes >= (std::size_t{1} << 20));
  } else {
    CHECK(kept == 0);
  }
  td::group_pool_release();
  CHECK(td::group_pool_retained() == 0);
}

TEST_CASE("a thread that ends hands the groups in its cache back to the pool") {
  td::group_pool_release();
  std::vector<void*> blocks;
  for (int i = 0; i < 32; ++i) blocks.push_back(td::group_allocate(48));
  for (void* p : blocks) td::group_free(p, 48);
  std::thread([] {
    // Takes the whole shared stack into this thread's cache, uses one group, and exits.
    void* p = td::group_allocate(48);
    td::group_free(p, 48);
  }).join();
  if (kPoolOn) CHECK(td::group_pool_retained() == 32);
  td::group_pool_release();
}

TEST_CASE("owners in pooled groups are destroyed exactly once, whichever thread frees the group") {
  td::group_pool_release();
  const int alive0 = Counted::alive.load();
  {
    std::vector<tether::Owners> bundles;
    for (int i = 0; i < 200; ++i) bundles.emplace_back(Counted{}, Counted{});
    CHECK(Counted::alive.load() == alive0 + 400);
    std::thread([&] { bundles.clear(); }).join();
    CHECK(Counted::alive.load() == alive0);
    for (int i = 0; i < 200; ++i) bundles.emplace_back(Counted{});
    CHECK(Counted::alive.load() == alive0 + 200);
  }
  CHECK(Counted::alive.load() == alive0);
  td::group_pool_release();
}
