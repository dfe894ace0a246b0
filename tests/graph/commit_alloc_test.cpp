// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Invariant 4, second half: Transaction::commit() neither fails nor allocates. Its own executable
// because it replaces the global operator new/delete, which affects the whole program.
//
// What is counted: allocations on the committing thread while commit() runs, excluding those the
// driver itself makes inside the calls commit makes (the simulator is C++ and allocates; the real
// driver uses malloc, which is not counted anyway). The calls go through a copy of the driver table
// whose wrappers mark "inside the driver"; a user-object destructor that runs inside such a call is
// tether's code again (it must only enqueue), so the attachment destroy hook turns counting back on.
#include <doctest/doctest.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "support/owner_probe.hpp"

namespace {

thread_local bool t_counting = false;
thread_local int t_in_driver = 0;
thread_local bool t_in_destructor = false;
thread_local bool t_failing = false;  // every allocation on this thread fails (bad_alloc)
std::atomic<std::size_t> g_counted{0};

void* counted_alloc(std::size_t n, std::size_t align) {
  if (t_counting && (t_in_driver == 0 || t_in_destructor)) g_counted.fetch_add(1, std::memory_order_relaxed);
  if (t_failing) return nullptr;
  if (n == 0) n = 1;
  void* p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align)
                                              : std::malloc(n);
  return p;
}

}  // namespace

// The replaced allocation functions (all of them: the library may use any form).
void* operator new(std::size_t n) {
  if (void* p = counted_alloc(n, 0)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  if (void* p = counted_alloc(n, 0)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return counted_alloc(n, 0);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  return counted_alloc(n, 0);
}
void* operator new(std::size_t n, std::align_val_t a) {
  if (void* p = counted_alloc(n, static_cast<std::size_t>(a))) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) {
  if (void* p = counted_alloc(n, static_cast<std::size_t>(a))) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_alloc(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_alloc(n, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}

namespace {

using namespace tether_test;
using tether::Owners;
namespace td = tether::detail;

// A copy of the driver table whose every entry marks the calling thread as inside the driver.
template <Entry E, class F = typename td::EntryTraits<E>::type>
struct InDriver;
template <Entry E, class... A>
struct InDriver<E, CUresult (*)(A...)> {
  static inline CUresult (*original)(A...) = nullptr;
  static CUresult fn(A... a) {
    ++t_in_driver;
    CUresult r = original(a...);
    --t_in_driver;
    t_in_destructor = false;  // a destructor that ran inside has returned
    return r;
  }
  static void install(td::DriverTable& t) {
    original = t.get<E>();
    t.set<E>(&fn);
  }
};

const td::DriverTable& marking_table() {
  static const td::DriverTable* w = [] {
    auto* c = new td::DriverTable(table());
#define TETHER_ENTRY(name, ver) InDriver<Entry::name>::install(*c);
#include "driver/entry_points.inc"
#undef TETHER_ENTRY
    return c;
  }();
  return *w;
}

void count_inside_destructor(NodeAttachment*) {
  t_in_destructor = t_in_driver > 0;
}

// Counts the allocations `f()` makes on this thread (as described in the file comment).
template <class F>
std::size_t allocations_in(F&& f) {
  g_counted.store(0);
  t_counting = true;
  f();
  t_counting = false;
  t_in_destructor = false;
  return g_counted.load();
}

// The last report, copied without allocating.
char g_report[2048];
std::atomic<std::size_t> g_report_len{0};
void keep_report(const tether::ErrorReport& r) noexcept {
  std::size_t n = std::min(r.what.size(), sizeof g_report);
  std::memcpy(g_report, r.what.data(), n);
  g_report_len = n;
}

TEST_CASE("reporting a failed driver call formats its message without allocating, even when allocation fails") {
  // A copy of the table without the simulator's explanation (the one part that allocates, and is
  // left out when it cannot).
  static td::DriverTable quiet = table();
  quiet.explain = nullptr;
  struct Case {
    Entry entry;
    CUresult result;
    const char* what;
  };
  const Case cases[] = {
      {Entry::cuMemFreeHost, CUDA_ERROR_INVALID_VALUE, "freeing pinned host memory"},
      {Entry::cuGraphReleaseUserObject, CUDA_ERROR_NOT_PERMITTED, "releasing the previous version of a node"},
      {Entry::cuStreamDestroy, CUDA_ERROR_INVALID_HANDLE, "destroying a stream"},
  };
  tether::ErrorHook previous = tether::set_error_hook(&keep_report);
  for (const Case& c : cases) {
    CAPTURE(c.what);
    std::string expected;
    try {
      td::throw_call_error(quiet, c.entry, c.result, c.what);
    } catch (const tether::DriverError& e) {
      expected = e.what();
    }
    REQUIRE(!expected.empty());
    for (bool failing : {false, true}) {
      CAPTURE(failing);
      g_report_len = 0;
      std::size_t n = allocations_in([&] {
        t_failing = failing;
        td::report_failure(quiet, c.entry, c.result, c.what);
        t_failing = false;
      });
      CHECK(n == 0);
      CHECK(std::string_view(g_report, g_report_len.load()) == expected);
    }
    // On the simulator's own table its explanation may allocate; when that fails, the report goes
    // without it, and nothing throws.
    g_report_len = 0;
    t_failing = true;
    td::report_failure(table(), c.entry, c.result, c.what);
    t_failing = false;
    CHECK(std::string_view(g_report, g_report_len.load()).starts_with(expected.substr(0, expected.find(" while "))));
  }
  // A message longer than the buffer is cut, and says so.
  char small[40];
  std::string_view cut = td::format_call_error(small, quiet, Entry::cuStreamDestroy, CUDA_ERROR_INVALID_HANDLE,
                                               "destroying a stream");
  CHECK(cut.size() == sizeof small);
  CHECK(cut.starts_with("cuStreamDestroy failed with CUDA_ERR"));
  CHECK(cut.ends_with("..."));
  tether::set_error_hook(previous);
}

TEST_CASE("invariant 4: the allocation counter of this executable counts allocations") {
  std::size_t n = allocations_in([] {
    auto p = std::make_unique<int>(1);
    std::vector<int> v(10);
    (void)p;
  });
  CHECK(n == 2);
}

TEST_CASE_FIXTURE(
    AttachEnv,
    "invariant 4: Transaction::commit() is allocation-free for adds, updates, removals, edges and "
    "child-graph removals") {
  DestroyHook hook(&count_inside_destructor);
  const td::DriverTable& mt = marking_table();
  auto tr = tracker();
  FillKernel k = load_fill();
  tether::SharedBuffer<float> buf = ctx.alloc<float>(256).share();
  auto source = graph(&mt);
  edit(source, [&](Transaction& tx) { return td::add_empty(tx, source->root(), {}, Owners{Probe(tr)}); });
  auto h = graph(&mt);
  NodeRecord* kern = nullptr;
  NodeRecord* doomed = nullptr;
  NodeRecord* child = nullptr;
  NodeRecord* a = nullptr;
  NodeRecord* b = nullptr;
  NodeRecord* twice = nullptr;
  edit(h, [&](Transaction& tx) {
    kern = td::add_kernel(tx, h->root(), {}, fill_call(k.function(), buf.data(), 1.0f, 256),
                          Owners{k, buf, Probe(tr)}, "fill");
    doomed = td::add_empty(tx, h->root(), {}, Owners{Probe(tr)});
    child = td::embed(tx, h->root(), {}, *source, Owners{Probe(tr)}, nullptr);
    a = td::add_empty(tx, h->root(), {}, Owners{});
    b = td::add_empty(tx, h->root(), {}, Owners{});
    twice = td::add_host(tx, h->root(), {}, &host_nothing, nullptr, Owners{Probe(tr)});
  });
  auto c = host_callable([p = Probe(tr)] {});

  std::size_t allocations = 0;
  {
    Transaction tx(h);
    // Every kind of operation, prepared (and allocated) before commit.
    td::update_kernel(tx, kern, fill_call(k.function(), buf.data(), 2.0f, 256),
                      fill_call(k.function(), buf.data(), 1.0f, 256), Owners{k, buf, Probe(tr)}, "fill");
    td::add_host(tx, h->root(), {}, c.fn, c.data, Owners{std::move(c.owner), Probe(tr)});
    NodeRecord* deps[] = {a};
    td::add_empty(tx, h->root(), deps, Owners{});
    tx.connect(a, b);
    tx.disconnect(a, b);
    tx.connect(b, a);
    tx.remove(doomed);
    tx.remove(child);
    tx.remove(twice);  // removed, then updated: the staged version is released at commit
    td::update_host(tx, twice, &host_nothing, nullptr, Owners{Probe(tr)});
    allocations = allocations_in([&] { tx.commit(); });
  }
  CHECK(allocations == 0);
  // It did all that: the superseded kernel version, the removed nodes (two versions of one) and
  // the child node's owner are released (at commit, the graph never having been launched).
  CHECK(tr->wait_destroyed(5));
  CHECK(h->root().node_count == 5);
  CHECK(driver_nodes(h->root().graph) == 5);
  h.reset();
  source.reset();
  CHECK(tr->wait_destroyed(tr->made()));
}

TEST_CASE_FIXTURE(AttachEnv, "invariant 4: Transaction::rollback() is allocation-free as well") {
  const td::DriverTable& mt = marking_table();
  DestroyHook hook(&count_inside_destructor);
  auto tr = tracker();
  auto source = graph(&mt);
  auto h = graph(&mt);
  NodeRecord* a = edit(h, [&](Transaction& tx) { return td::add_empty(tx, h->root(), {}, Owners{}); });
  std::size_t allocations = 0;
  {
    Transaction tx(h);
    NodeRecord* deps[] = {a};
    td::add_empty(tx, h->root(), deps, Owners{Probe(tr)});
    NodeRecord* n = td::add_empty(tx, h->root(), {}, Owners{Probe(tr)});
    tx.connect(a, n);
    td::embed(tx, h->root(), {}, *source, Owners{Probe(tr)}, nullptr);
    allocations = allocations_in([&] { tx.rollback(); });
  }
  CHECK(allocations == 0);
  CHECK(tr->wait_destroyed(3));
  CHECK(h->root().node_count == 1);
  h.reset();
}

}  // namespace
