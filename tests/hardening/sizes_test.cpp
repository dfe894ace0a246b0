// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Sizes, generated over the public API: every size-bearing call (allocations, memset and memcpy
// creators and updates, buffer copies, launch dimensions) at 0, 1, odd sizes, the exact boundary,
// one past it and overflow. Refusals are UsageErrors before any driver call; what is accepted is
// read back on the simulator.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "hardening/families.hpp"

using namespace tether;
using namespace tether_test;
using namespace hardening;

TEST_SUITE_BEGIN("hardening: sizes");

namespace {

struct Three {
  std::uint8_t b[3];
};  // an odd element size

constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();

template <class T>
std::vector<T> read_back(const SharedBuffer<T>& b) {
  std::vector<T> h(b.size());
  b.copy_to(h);
  return h;
}

}  // namespace

TEST_CASE_FIXTURE(Fixture, "allocations refuse 0 elements and sizes that overflow, and accept 1 element") {
  Graph g{ctx};
  auto in_edit = [&](auto fn) { return [&g, fn] { g.edit([&](Edit& e) { fn(e); }); }; };
  const Table zero = {
      {"ctx.alloc<float>(0)", [&] { (void)ctx.alloc<float>(0); }},
      {"ctx.alloc<std::uint8_t>(0)", [&] { (void)ctx.alloc<std::uint8_t>(0); }},
      {"ctx.alloc<Three>(0)", [&] { (void)ctx.alloc<Three>(0); }},
      {"ctx.alloc_pinned<float>(0)", [&] { (void)ctx.alloc_pinned<float>(0); }},
      {"ctx.alloc_pinned<double>(0)", [&] { (void)ctx.alloc_pinned<double>(0); }},
  };
  SUBCASE("0 elements") { each_throws(zero, {"0 elements"}, {}, "0 elements / "); }
  const Table zero_nodes = {
      {"e.alloc<float>(0)", in_edit([](Edit& e) { e.alloc<float>(0); })},
      {"e.after().alloc<double>(0)", in_edit([](Edit& e) { e.after().alloc<double>(0); })},
  };
  SUBCASE("0 elements of a graph allocation") { each_throws(zero_nodes, {}, {}, "0 elements / "); }
  const Table overflow = {
      {"ctx.alloc<float>(SIZE_MAX / 4 + 1)", [&] { (void)ctx.alloc<float>(kMax / sizeof(float) + 1); }},
      {"ctx.alloc<double>(SIZE_MAX / 8 + 1)", [&] { (void)ctx.alloc<double>(kMax / sizeof(double) + 1); }},
      {"ctx.alloc<Three>(SIZE_MAX / 3 + 1)", [&] { (void)ctx.alloc<Three>(kMax / sizeof(Three) + 1); }},
      {"ctx.alloc<double>(SIZE_MAX)", [&] { (void)ctx.alloc<double>(kMax); }},
      {"ctx.alloc_pinned<float>(SIZE_MAX / 4 + 1)", [&] { (void)ctx.alloc_pinned<float>(kMax / sizeof(float) + 1); }},
      {"ctx.alloc_pinned<Three>(SIZE_MAX / 3 + 1)", [&] { (void)ctx.alloc_pinned<Three>(kMax / sizeof(Three) + 1); }},
      {"e.alloc<double>(2^61 + 1)", in_edit([](Edit& e) { e.alloc<double>((std::size_t{1} << 61) + 1); })},
      {"e.alloc<float>(SIZE_MAX)", in_edit([](Edit& e) { e.alloc<float>(kMax); })},
  };
  SUBCASE("overflow") { each_throws(overflow, {"overflows"}, {}, "overflow / "); }
  const Table one = {
      {"ctx.alloc<float>(1)", [&] { CHECK(ctx.alloc<float>(1).size() == 1); }},
      {"ctx.alloc<Three>(1)", [&] { CHECK(ctx.alloc<Three>(1).bytes() == 3); }},
      {"ctx.alloc<std::uint8_t>(7)", [&] { CHECK(ctx.alloc<std::uint8_t>(7).bytes() == 7); }},
      {"ctx.alloc_pinned<float>(1)", [&] { CHECK(ctx.alloc_pinned<float>(1).size() == 1); }},
      {"e.alloc<float>(1)", in_edit([](Edit& e) {
         auto [n, mem] = e.alloc<float>(1);
         CHECK(mem.count == 1);
         e.after(n).free(mem);
       })},
  };
  SUBCASE("1 element") { each_ok(one, "1 element / "); }
  // The exact boundary does not overflow: whatever the driver says, it is not "overflows".
  SUBCASE("exact boundary") {
    try {
      (void)ctx.alloc<double>(kMax / sizeof(double));
      FAIL_CHECK("allocating SIZE_MAX / 8 doubles succeeded");
    } catch (const UsageError& e) {
      CHECK_MESSAGE(!contains(e.what(), "overflows"), "the exact boundary was refused as an overflow: " << std::string(e.what()));
    } catch (const DriverError&) {
      // CUDA_ERROR_OUT_OF_MEMORY: the driver was asked, as it should be
    }
    no_violations();
  }
}

namespace {

/// The three places a memset's destination and value are given, as members named `name / site`.
/// `make_dst` makes the destination (a fresh one per call); `after` checks what ran.
struct MemsetSites {
  Fixture& f;
  Graph& g;                   // has a memset node
  Node<MemsetNode>& node;     // of g
  GraphExec& exec;            // of g

  template <class MakeDst, class V>
  Table throwing(const std::string& name, MakeDst make_dst, V value) {
    return {
        {name + " / Edit::memset", [=, this] { g.edit([&](Edit& e) { e.memset(make_dst(), value); }); }},
        {name + " / Inserter::memset", [=, this] { g.edit([&](Edit& e) { e.after(node).memset(make_dst(), value); }); }},
        {name + " / Edit::update(memset_node)", [=, this] { g.edit([&](Edit& e) { e.update(node, make_dst(), value); }); }},
        {name + " / GraphExec::update(memset_node)", [=, this] { exec.update(node, make_dst(), value); }},
    };
  }

  /// Accepted: each site sets a fresh buffer of `count` T (first filled with 0xAB bytes) and the
  /// result must equal `expected`.
  template <class T, class V>
  Table working(const std::string& name, std::size_t count, V value, std::vector<T> expected, bool as_unowned = false) {
    auto fresh = [this, count] {
      SharedBuffer<T> b = f.ctx.template alloc<T>(count).share();
      b.fill_bytes(0xAB);
      return b;
    };
    auto check = [expected](const SharedBuffer<T>& b) { CHECK(read_back(b) == expected); };
    auto dst = [](SharedBuffer<T>& b) { return unowned(b.data(), b.size()); };
    return {
        {name + " / Edit::memset", [=, this] {
           SharedBuffer<T> b = fresh();
           Graph one{f.ctx};
           if (as_unowned)
             one.edit([&](Edit& e) { e.memset(dst(b), value); });
           else
             one.edit([&](Edit& e) { e.memset(b, value); });
           one.instantiate().launch(f.stream);
           f.stream.synchronize();
           check(b);
         }},
        {name + " / Edit::update(memset_node)", [=, this] {
           SharedBuffer<T> b = fresh();
           if (as_unowned)
             g.edit([&](Edit& e) { e.update(node, dst(b), value); });
           else
             g.edit([&](Edit& e) { e.update(node, b, value); });
           g.instantiate().launch(f.stream);
           f.stream.synchronize();
           check(b);
         }},
        {name + " / GraphExec::update(memset_node)", [=, this] {
           SharedBuffer<T> b = fresh();
           if (as_unowned)
             exec.update(node, dst(b), value);
           else
             exec.update(node, b, value);
           exec.launch(f.stream);
           f.stream.synchronize();
           check(b);
         }},
    };
  }
};

Table operator+(Table a, const Table& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE_FIXTURE(Fixture, "a memset destination must be a positive multiple of the value's size, at every creator and update") {
  SharedBuffer<float> base = buffer(8, 0.0f);
  Graph g{ctx};
  Node<MemsetNode> node;
  g.edit([&](Edit& e) { node = e.memset(base, 1.0f); });
  GraphExec exec = g.instantiate();
  MemsetSites s{*this, g, node, exec};
  const Context c = ctx;
  auto u16 = [c](std::size_t n) { return [c, n] { return c.alloc<std::uint16_t>(n).share(); }; };
  auto u8 = [c](std::size_t n) { return [c, n] { return c.alloc<std::uint8_t>(n).share(); }; };
  // Raw device memory that outlives the test case's members (unowned ends are not kept alive).
  SharedBuffer<std::uint8_t> raw = ctx.alloc<std::uint8_t>(64).share();
  std::uint8_t* p = raw.data();

  SUBCASE("uint16_t[3] with a uint32_t value") {
    each_throws(s.throwing("uint16_t[3], uint32_t value", u16(3), std::uint32_t{7}), {"6 bytes", "multiple"});
  }
  SUBCASE("uint8_t[7] with a 4-byte value") {
    each_throws(s.throwing("uint8_t[7], float value", u8(7), 1.0f) +
                    s.throwing("uint8_t[7], uint16_t value", u8(7), std::uint16_t{1}),
                {});
  }
  SUBCASE("uint8_t[3] with a 4-byte value") {
    each_throws(s.throwing("uint8_t[3], uint32_t value", u8(3), std::uint32_t{1}), {"3 bytes"}, {"empty or count unknown"});
  }
  SUBCASE("uint8_t[1] with a 2-byte value") {
    each_throws(s.throwing("uint8_t[1], uint16_t value", u8(1), std::uint16_t{1}), {"multiple"});
  }
  SUBCASE("unowned(p) without a count") {
    each_throws(s.throwing("unowned(p)", [p] { return unowned(p); }, std::uint8_t{1}) +
                    s.throwing("unowned(p, 0)", [p] { return unowned(p, 0); }, std::uint8_t{1}),
                {"unknown"});
  }
  SUBCASE("accepted sizes") {
    each_ok(s.working<std::uint16_t>("uint16_t[3], uint16_t value", 3, std::uint16_t{0x1234}, {0x1234, 0x1234, 0x1234}) +
            s.working<std::uint8_t>("uint8_t[7], uint8_t value", 7, std::uint8_t{5}, std::vector<std::uint8_t>(7, 5)) +
            s.working<std::uint8_t>("uint8_t[1], uint8_t value", 1, std::uint8_t{9}, {9}) +
            s.working<std::uint32_t>("uint32_t[1], uint32_t value", 1, std::uint32_t{0xDEADBEEF}, {0xDEADBEEF}) +
            s.working<std::uint16_t>("uint16_t[4], uint32_t value (exact multiple)", 4, std::uint32_t{0x00020001},
                                     {1, 2, 1, 2}) +
            s.working<std::uint8_t>("unowned(p, 5), uint8_t value", 5, std::uint8_t{3}, std::vector<std::uint8_t>(5, 3), true));
  }
}

namespace {

/// The three places a memcpy's ends and count are given, as members named `name / site`.
struct MemcpySites {
  Fixture& f;
  Graph& g;                 // has a memcpy node
  Node<MemcpyNode>& node;   // of g
  GraphExec& exec;          // of g

  template <class MakeDst, class MakeSrc>
  Table sites(const std::string& name, MakeDst make_dst, MakeSrc make_src, std::size_t count) {
    // The node of `exec` copies device to device; the driver refuses an executable update that
    // changes where an end lives or how it is named ("the memory operands' mappings changed":
    // INVALID_VALUE, seen on the H200 for pinned ends and for unowned ones, which tether names
    // CU_MEMORYTYPE_UNIFIED), so the executable site takes device buffers only.
    constexpr bool pinned_end = !tether::detail::Endpoint<decltype(make_dst())>::device ||
                                !tether::detail::Endpoint<decltype(make_src())>::device;
    Table t = {
        {name + " / Edit::memcpy", [=, this] {
           Graph one{f.ctx};
           one.edit([&](Edit& e) { e.memcpy(make_dst(), make_src(), count); });
         }},
        {name + " / Inserter::memcpy",
         [=, this] { g.edit([&](Edit& e) { e.after(node).memcpy(make_dst(), make_src(), count); }); }},
        {name + " / Edit::update(memcpy_node)",
         [=, this] { g.edit([&](Edit& e) { e.update(node, make_dst(), make_src(), count); }); }},
    };
    if constexpr (!pinned_end)
      t.push_back({name + " / GraphExec::update(memcpy_node)", [=, this] { exec.update(node, make_dst(), make_src(), count); }});
    return t;
  }
};

}  // namespace

TEST_CASE_FIXTURE(Fixture, "a memcpy count counts source elements and must fit both ends, at every creator and update and for every kind of end") {
  SharedBuffer<float> a = buffer(8, 1.0f), b = buffer(8, 0.0f);
  Graph g{ctx};
  Node<MemcpyNode> node;
  g.edit([&](Edit& e) { node = e.memcpy(b, a); });
  GraphExec exec = g.instantiate();
  MemcpySites s{*this, g, node, exec};
  const Context c = ctx;
  // Raw device memory for unowned ends (outlives every member).
  SharedBuffer<float> raw = buffer(64, 2.0f);
  float* p = raw.data();

  // Every kind of end, made with n floats.
  auto shared = [c](std::size_t n) { return [c, n] { return c.alloc<float>(n).share(); }; };
  auto device = [c](std::size_t n) { return [c, n] { return c.alloc<float>(n); }; };
  auto pinned_shared = [c](std::size_t n) { return [c, n] { return c.alloc_pinned<float>(n).share(); }; };
  auto pinned = [c](std::size_t n) { return [c, n] { return c.alloc_pinned<float>(n); }; };
  auto raw_n = [p](std::size_t n) { return [p, n] { return unowned(p, n); }; };
  auto raw_bytes = [c](std::size_t n) { return [c, n] { return c.alloc<std::uint8_t>(n).share(); }; };

  // (destination, source) kinds, each at: exact fit, one past for the destination, one past for
  // the source (count larger than the source).
  auto family = [&](const std::string& ends, auto dst, auto src) {
    struct Out {
      Table ok, dst_short, src_short;
    } o;
    o.ok = s.sites(ends + ": 4 <- 4, count 0", dst(4), src(4), 0) + s.sites(ends + ": 4 <- 4, count 4", dst(4), src(4), 4) +
           s.sites(ends + ": 3 <- 4, count 3 (exact fit)", dst(3), src(4), 3) +
           s.sites(ends + ": 1 <- 1, count 0", dst(1), src(1), 0) + s.sites(ends + ": 5 <- 3, count 1", dst(5), src(3), 1);
    o.dst_short = s.sites(ends + ": 3 <- 4, count 0", dst(3), src(4), 0) +
                  s.sites(ends + ": 3 <- 4, count 4 (one past)", dst(3), src(4), 4);
    o.src_short = s.sites(ends + ": 8 <- 4, count 5 (one past)", dst(8), src(4), 5) +
                  s.sites(ends + ": 8 <- 1, count 2", dst(8), src(1), 2);
    return o;
  };
  struct Ends {
    Table ok, dst_short, src_short;
  } all;
  auto add = [&](auto o) {
    all.ok = all.ok + o.ok;
    all.dst_short = all.dst_short + o.dst_short;
    all.src_short = all.src_short + o.src_short;
  };
  add(family("SharedBuffer <- SharedBuffer", shared, shared));
  add(family("DeviceBuffer&& <- DeviceBuffer&&", device, device));
  add(family("SharedBuffer <- SharedPinnedBuffer", shared, pinned_shared));
  add(family("SharedPinnedBuffer <- SharedBuffer", pinned_shared, shared));
  add(family("PinnedBuffer&& <- DeviceBuffer&&", pinned, device));
  add(family("DeviceBuffer&& <- PinnedBuffer&&", device, pinned));
  add(family("unowned(p, n) <- SharedBuffer", raw_n, shared));
  add(family("SharedBuffer <- unowned(p, n)", shared, raw_n));

  SUBCASE("what fits is accepted") { each_ok(all.ok); }
  SUBCASE("a destination shorter than the copy") { each_throws(all.dst_short, {"destination"}); }
  SUBCASE("a source shorter than the count") { each_throws(all.src_short, {"source"}); }
  SUBCASE("other element types count source elements") {
    each_ok(s.sites("uint8_t[16] <- float[4], count 0", raw_bytes(16), shared(4), 0) +
            s.sites("uint8_t[16] <- float[4], count 4", raw_bytes(16), shared(4), 4));
    each_throws(s.sites("uint8_t[15] <- float[4], count 0", raw_bytes(15), shared(4), 0), {"destination"});
  }
  SUBCASE("a count that overflows the byte size") {
    each_throws(s.sites("SharedBuffer <- SharedBuffer, count SIZE_MAX / 4 + 1", shared(8), shared(8), kMax / sizeof(float) + 1) +
                    s.sites("SharedBuffer <- SharedBuffer, count SIZE_MAX", shared(8), shared(8), kMax),
                {"source"});
  }
  SUBCASE("an unknown source size") {
    each_throws(s.sites("SharedBuffer <- unowned(p), count 0", shared(4), [p] { return unowned(p); }, 0), {"count"});
    each_ok(s.sites("SharedBuffer <- unowned(p), count 4", shared(4), [p] { return unowned(p); }, 4));
  }
}

TEST_CASE_FIXTURE(Fixture, "an accepted memcpy copies exactly the counted source elements, at every creator and update") {
  const std::vector<float> values = {1, 2, 3, 4};
  auto make_src = [&] {
    SharedBuffer<float> src = ctx.alloc<float>(4).share();
    src.copy_from(values);
    return src;
  };
  auto make_dst = [&](std::size_t n) {
    SharedBuffer<float> d = ctx.alloc<float>(n).share();
    d.copy_from(std::vector<float>(n, -1.0f));
    return d;
  };
  SharedBuffer<float> a = buffer(8, 1.0f), b = buffer(8, 0.0f);
  Graph g{ctx};
  Node<MemcpyNode> node;
  g.edit([&](Edit& e) { node = e.memcpy(b, a); });
  GraphExec exec = g.instantiate();
  struct Shape {
    std::string name;
    std::size_t dst, count;
    std::vector<float> expected;
  };
  const std::vector<Shape> shapes = {
      {"3 <- 4, count 3 (exact fit)", 3, 3, {1, 2, 3}},
      {"4 <- 4, count 0 (all)", 4, 0, {1, 2, 3, 4}},
      {"6 <- 4, count 0 (all)", 6, 0, {1, 2, 3, 4, -1, -1}},
      {"4 <- 4, count 1", 4, 1, {1, -1, -1, -1}},
  };
  Table members;
  for (const Shape& sh : shapes) {
    members.push_back({sh.name + " / Edit::memcpy", [&, sh] {
                         SharedBuffer<float> d = make_dst(sh.dst), src = make_src();
                         Graph one{ctx};
                         one.edit([&](Edit& e) { e.memcpy(d, src, sh.count); });
                         one.instantiate().launch(stream);
                         stream.synchronize();
                         CHECK(read(d) == sh.expected);
                       }});
    members.push_back({sh.name + " / Edit::update(memcpy_node)", [&, sh] {
                         SharedBuffer<float> d = make_dst(sh.dst), src = make_src();
                         g.edit([&](Edit& e) { e.update(node, d, src, sh.count); });
                         g.instantiate().launch(stream);
                         stream.synchronize();
                         CHECK(read(d) == sh.expected);
                       }});
    members.push_back({sh.name + " / GraphExec::update(memcpy_node)", [&, sh] {
                         SharedBuffer<float> d = make_dst(sh.dst), src = make_src();
                         exec.update(node, d, src, sh.count);
                         exec.launch(stream);
                         stream.synchronize();
                         CHECK(read(d) == sh.expected);
                       }});
  }
  members.push_back({"pinned 4 <- device 4 / Edit::memcpy", [&] {
                       SharedPinnedBuffer<float> h = ctx.alloc_pinned<float>(4).share();
                       SharedBuffer<float> src = make_src();
                       Graph one{ctx};
                       one.edit([&](Edit& e) { e.memcpy(h, src); });
                       one.instantiate().launch(stream);
                       stream.synchronize();
                       CHECK(std::vector<float>(h.span().begin(), h.span().end()) == values);
                     }});
  each_ok(members);
}

TEST_CASE_FIXTURE(Fixture, "buffer copy_from and copy_to refuse more elements than the buffer and accept an exact fit and 0 elements") {
  const std::vector<float> four = {1, 2, 3, 4}, five = {1, 2, 3, 4, 5};
  auto families = [&](const std::string& type, auto make) {
    Table too_many = {
        {type + " copy_from(5) into 4", [=] { make().copy_from(five); }},
        {type + " copy_to(5) from 4", [=] {
           std::vector<float> h(5);
           make().copy_to(h);
         }},
        {type + " copy_from(SIZE_MAX / 4 elements)", [=] {
           // The span is never read: the size check comes first.
           make().copy_from(std::span<const float>(four.data(), kMax / sizeof(float)));
         }},
    };
    Table fits = {
        {type + " copy_from(4) then copy_to(4)", [=] {
           auto b = make();
           b.copy_from(four);
           std::vector<float> h(4);
           b.copy_to(h);
           CHECK(h == four);
         }},
        {type + " copy_from(1) then copy_to(1)", [=] {
           auto b = make();
           b.copy_from(std::vector<float>{9});
           std::vector<float> h(1);
           b.copy_to(h);
           CHECK(h == std::vector<float>{9});
         }},
        {type + " copy_from(0) and copy_to(0)", [=] {
           auto b = make();
           b.copy_from(std::span<const float>{});
           b.copy_to(std::span<float>{});
         }},
    };
    return std::pair{too_many, fits};
  };
  const Context c = ctx;
  auto [d_many, d_fits] = families("DeviceBuffer", [c] { return c.alloc<float>(4); });
  auto [s_many, s_fits] = families("SharedBuffer", [c] { return c.alloc<float>(4).share(); });
  SUBCASE("too many elements") { each_throws(d_many + s_many, {"do not fit"}); }
  SUBCASE("what fits") { each_ok(d_fits + s_fits); }
}

TEST_CASE_FIXTURE(Fixture, "a launch or kernel update with a 0 grid or block dimension throws UsageError naming grid or block") {
  SharedBuffer<float> x = buffer(4, 0.0f);
  Graph g{ctx};
  Scale kernel;
  g.edit([&](Edit& e) { kernel = e.launch(k.fill, Grid{1}, Block{4}, x, 1.0f, 4); });
  GraphExec exec = g.instantiate();
  auto sites = [&](const std::string& name, Grid grid, Block block) -> Table {
    return {
        {name + " / Edit::launch", [=, &g, this] { g.edit([&](Edit& e) { e.launch(k.fill, grid, block, x, 1.0f, 4); }); }},
        {name + " / Inserter::launch",
         [=, &g, &kernel, this] { g.edit([&](Edit& e) { e.after(kernel).launch(k.fill, grid, block, x, 1.0f, 4); }); }},
        {name + " / Edit::update(kernel_node)",
         [=, &g, &kernel] { g.edit([&](Edit& e) { e.update(kernel, grid, block, x, 1.0f, 4); }); }},
        {name + " / GraphExec::update(kernel_node)", [=, &exec, &kernel] { exec.update(kernel, grid, block, x, 1.0f, 4); }},
    };
  };
  SUBCASE("grid") {
    each_throws(sites("Grid{0}", Grid{0}, Block{1}) + sites("Grid{1, 0, 1}", Grid{1, 0, 1}, Block{1}) +
                    sites("Grid{1, 1, 0}", Grid{1, 1, 0}, Block{1}),
                {"grid", "0"});
  }
  SUBCASE("block") {
    each_throws(sites("Block{0}", Grid{1}, Block{0}) + sites("Block{1, 0, 1}", Grid{1}, Block{1, 0, 1}) +
                    sites("Block{1, 1, 0}", Grid{1}, Block{1, 1, 0}),
                {"block", "0"});
  }
  SUBCASE("accepted") { each_ok(sites("Grid{1}, Block{1}", Grid{1}, Block{1}) + sites("Grid{3, 1, 1}, Block{2, 1, 1}", Grid{3}, Block{2})); }
  CHECK(g.node_count() >= 1);
}

TEST_CASE_FIXTURE(Fixture, "an executable's memcpy update that moves an end between device and pinned host memory is refused by the driver, on both drivers") {
  SharedBuffer<float> a = buffer(8, 1.0f), b = buffer(8, 0.0f);
  Graph g{ctx};
  Node<MemcpyNode> node;
  g.edit([&](Edit& e) { node = e.memcpy(b, a); });
  GraphExec exec = g.instantiate();
  SharedPinnedBuffer<float> host = ctx.alloc_pinned<float>(8).share();
  CHECK_THROWS_WITH_AS(exec.update(node, b, host), doctest::Contains("cuGraphExecNodeSetParams"), DriverError);
  CHECK_NOTHROW(exec.update(node, b, buffer(8, 2.0f)));
  exec.launch(stream);
  stream.synchronize();
  CHECK(read(b) == std::vector<float>(8, 2.0f));
}
