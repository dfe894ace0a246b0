// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
import tether;
// The module-only test, part 1 (part 2, with {fmt} and standard headers, is module_only_std_test.cpp).
//
// This file imports tether and includes nothing else of the standard library, so every template of
// tether it instantiates — each node creator with each owner adapter, each update, stream work,
// capture, introspection, owner labels — is compiled exactly as an importer that included nothing
// sees it. A template whose body needs a standard declaration the importer cannot see (a
// std::operator+ found by argument-dependent lookup, say) fails to compile here. Why this test
// cannot include standard headers, even after the import: clang 19 makes a declaration a later
// textual include brings visible at the point of instantiation (the end of the file), which hides
// exactly these bugs (tried: `import tether;` then `#include <string>`, in either place, compiled a
// `SharedBuffer` memset that fails without it; docs/modules.md). doctest's header includes no
// standard header (only <ciso646>), so it may come after the import.
//
// What an importer that includes nothing cannot use is the standard library's own free functions and
// operators (std::move, `==` of strings, iterators of a returned std::vector): the helpers below
// stand in for them. Runs on the driver TETHER_DRIVER selects; the kernels come from kernels.fatbin
// (real kernels on a GPU, the twins registered here on the simulator).
#include <doctest/doctest.h>

// Defined in module_only_std_test.cpp (where <string> and readlink may be used): the test kernels'
// image, kernels.fatbin beside the executable.
namespace tether_module_only {
tether::Image test_kernels();
}

namespace {

using Size = decltype(sizeof 0);

// std::move, which an importer that included nothing cannot name.
template <class T>
T&& mv(T& t) noexcept {
  return static_cast<T&&>(t);
}

Size length(const char* s) {
  Size n = 0;
  while (s[n]) ++n;
  return n;
}
bool contains(const char* s, const char* part) {
  const Size n = length(s), m = length(part);
  for (Size i = 0; i + m <= n; ++i) {
    Size j = 0;
    while (j < m && s[i + j] == part[j]) ++j;
    if (j == m) return true;
  }
  return false;
}
// Whether a std::string or std::string_view tether returned equals / contains a literal (their
// members are usable; their non-member operators are not visible here).
template <class S>
bool same(const S& s, const char* lit) {
  const Size n = length(lit);
  if (s.size() != n) return false;
  for (Size i = 0; i < n; ++i)
    if (s[i] != lit[i]) return false;
  return true;
}
template <class S>
bool has(const S& s, const char* part) {
  return s.find(part) != s.npos;
}
// Whether one of the labels of an inspected node or version is `lit` / contains `part`.
template <class V>
bool has_label(const V& labels, const char* lit) {
  for (Size i = 0; i < labels.size(); ++i)
    if (same(labels[i], lit)) return true;
  return false;
}
template <class V>
bool has_label_part(const V& labels, const char* part) {
  for (Size i = 0; i < labels.size(); ++i)
    if (has(labels[i], part)) return true;
  return false;
}
// Whether `f()` throws E whose message contains `part`.
template <class E, class F>
bool throws_with(F&& f, const char* part) {
  try {
    f();
  } catch (const E& e) {
    if (contains(e.what(), part)) return true;
    MESSAGE("the message was: ", e.what());
    return false;
  }
  return false;
}

// A move-only host callable: host nodes, stream host functions and owner bundles take it.
struct MoveOnlyCount {
  int* runs;
  explicit MoveOnlyCount(int* r) : runs(r) {}
  MoveOnlyCount(MoveOnlyCount&&) = default;
  MoveOnlyCount(const MoveOnlyCount&) = delete;
  void operator()() { ++*runs; }
};
// A plain owner with no tether_owner_label: inspect shows its type's name.
struct PlainOwner {
  int value = 0;
};

constexpr int n = 8;
const tether::Grid grid1{1};
const tether::Block block_n{static_cast<unsigned>(n)};

using Fill = tether::Kernel<float*, float, int>;
using Axpy = tether::Kernel<float*, const float*, float, int>;
using Countdown = tether::Kernel<unsigned long long, int*>;

void register_twins() {
  using tether::sim::LaunchInfo;
  tether::sim::register_kernel<float*, float, int>(
      "fill", [](const LaunchInfo& l, float* x, float v, int count) {
        for (Size i = 0; i < l.threads() && i < static_cast<Size>(count); ++i) x[i] = v;
      });
  tether::sim::register_kernel<float*, float, int>(
      "scale", [](const LaunchInfo& l, float* x, float a, int count) {
        for (Size i = 0; i < l.threads() && i < static_cast<Size>(count); ++i) x[i] *= a;
      });
  tether::sim::register_kernel<float*, const float*, float, int>(
      "axpy", [](const LaunchInfo& l, float* y, const float* x, float a, int count) {
        for (Size i = 0; i < l.threads() && i < static_cast<Size>(count); ++i) y[i] += a * x[i];
      });
  tether::sim::register_kernel<unsigned long long, int*>(
      "countdown", [](const LaunchInfo&, unsigned long long h, int* counter) {
        tether::sim::set_conditional(h, --*counter > 0 ? 1u : 0u);
      });
}

// Everything the tests share: the driver, a stream, the test kernels.
struct Fixture {
  bool twins =
      (register_twins(), true);  // first: a twin must be registered before Module::kernel looks it up
  tether::Runtime rt = tether::Runtime::open();
  tether::Context ctx = rt.context(0);
  tether::Stream stream = ctx.make_stream();
  tether::Module mod = ctx.load_module(tether_module_only::test_kernels());
  Fill fill = mod.kernel<float*, float, int>("fill");
  Fill scale = mod.kernel<float*, float, int>("scale");
  Axpy axpy = mod.kernel<float*, const float*, float, int>("axpy");
  Countdown countdown = mod.kernel<unsigned long long, int*>("countdown");

  bool simulated() const { return rt.kind() == tether::DriverKind::simulated; }
  // Whether every element of `b` is `v`.
  static bool all(const float* p, float v) {
    for (int i = 0; i < n; ++i)
      if (p[i] != v) return false;
    return true;
  }
  bool all(const tether::SharedBuffer<float>& b, float v) const {
    float tmp[n];
    b.copy_to(tmp);
    return all(tmp, v);
  }
  tether::SharedBuffer<float> shared() const { return ctx.alloc<float>(n).share(); }
  tether::SharedPinnedBuffer<float> pinned() const { return ctx.alloc_pinned<float>(n).share(); }
};

}  // namespace

TEST_CASE(
    "every node creator of an edit, with every owner adapter, builds and runs from a file that only imports "
    "tether") {
  Fixture f;
  tether::SharedBuffer<float> x = f.shared(), y = f.shared(), z = f.shared(), w = f.shared(), v = f.shared();
  tether::DeviceBuffer<float> scratch = f.ctx.alloc<float>(n);
  tether::SharedPinnedBuffer<float> out = f.pinned(), out_z = f.pinned(), out_w = f.pinned(),
                                    out_v = f.pinned();
  tether::PinnedBuffer<float> staging = f.ctx.alloc_pinned<float>(n),
                              host_copy = f.ctx.alloc_pinned<float>(n);
  for (int i = 0; i < n; ++i) staging.data()[i] = static_cast<float>(i);
  tether::SharedBuffer<int> ints = f.ctx.alloc<int>(n).share();
  tether::SharedBuffer<unsigned short> shorts = f.ctx.alloc<unsigned short>(n).share();
  tether::SharedBuffer<unsigned char> bytes = f.ctx.alloc<unsigned char>(n).share();
  tether::Event ev = f.ctx.make_event();
  int host_runs = 0, move_only_runs = 0, captured_runs = 0;
  tether::PinnedBuffer<float> mapped = f.ctx.alloc_pinned<float>(n);  // a kernel argument through unowned()
  for (int i = 0; i < n; ++i) mapped.data()[i] = 1.0f;

  tether::Graph sub{f.ctx};
  sub.edit([&](tether::Edit& e) { e.memset(z, 4.0f); });

  tether::Graph g{f.ctx};
  tether::Node<tether::KernelNode<float*, float, int>> doubled;
  tether::Node<tether::MemcpyNode> to_out;
  tether::EmbedResult embedded;
  tether::CaptureResult captured, captured_plain;
  g.edit([&](tether::Edit& e) {
    // memset: SharedBuffer, DeviceBuffer&&, unowned(SharedBuffer), unowned(DeviceBuffer&), unowned(p, n);
    // 4-, 2- and 1-byte values.
    tether::Node<tether::MemsetNode> ones = e.memset(x, 1.0f);
    e.memset(f.ctx.alloc<float>(n), 0.0f);
    tether::Node<tether::MemsetNode> zeroed = e.memset(tether::unowned(scratch), 0.0f);
    e.memset(ints, 7);
    e.memset(tether::unowned(shorts.data(), n), static_cast<unsigned short>(0x0102));
    e.memset(tether::unowned(bytes), static_cast<unsigned char>(9));
    // launch: Launch or Grid/Block; SharedBuffer, DeviceBuffer&&, unowned pointers, nullptr.
    doubled = e.after(ones).launch(f.scale, grid1, block_n, x, 2.0f, n);                  // x = 2
    e.launch(f.fill, tether::Launch{grid1, block_n}, f.ctx.alloc<float>(n), 5.0f, n);     // owns its buffer
    e.launch(f.fill, tether::Launch{grid1, block_n}.shared_memory(0), nullptr, 0.0f, 0);  // null pointer
    e.launch(f.scale, grid1, block_n, tether::unowned(mapped), 3.0f, n);                  // pinned memory
    tether::Node<tether::MemsetNode> threes = e.after(doubled).memset(tether::unowned(y), 3.0f);  // y = 3
    auto summed = e.after(threes).launch(f.axpy, grid1, block_n, tether::unowned(y), tether::unowned(x), 1.0f,
                                         n);  // y = 5
    // keeping(...): extra owners of the next node, of every kind an Owners bundle takes.
    auto scaled =
        e.after(summed)
            .keeping(tether::Owners{ev, f.mod, f.ctx.make_stream(), PlainOwner{}, MoveOnlyCount{&host_runs},
                                    [keep = f.ctx.alloc<float>(1).share()] { (void)keep; }})
            .launch(f.scale, grid1, block_n, tether::unowned(y.data(), n), 2.0f, n);  // y = 10
    // memcpy: every direction, every kind of end.
    to_out = e.after(scaled).memcpy(out, y);                              // DtoH: out = 10
    auto staged = e.after(to_out).memcpy(y, mv(staging));                 // HtoD from PinnedBuffer&&: y = i
    auto dtod = e.after(staged).memcpy(w, y);                             // DtoD: w = i
    auto htoh = e.after(to_out).memcpy(tether::unowned(host_copy), out);  // HtoH: host_copy = 10
    auto to_owned = e.after(dtod).memcpy(f.ctx.alloc<float>(n), w, n);    // into a DeviceBuffer&&
    auto to_w = e.after(to_owned).memcpy(out_w, tether::unowned(w));      // from unowned device memory
    e.after(dtod, zeroed).memcpy(tether::unowned(scratch), f.ctx.alloc<float>(n));  // from a DeviceBuffer&&
    // host nodes: a copyable lambda and a move-only callable.
    auto host = e.after(to_w, htoh).host([&host_runs] { ++host_runs; });
    auto host2 = e.after(host).host(MoveOnlyCount{&move_only_runs});
    // events.
    auto recorded = e.after(host2).record(ev);
    auto waited = e.after(recorded).wait(ev);
    // a child graph, and a node in it; capture inside the edit, with and without the Capture.
    embedded = e.after(waited).embed(sub);
    e.in(embedded.graph).empty();
    auto z_out = e.after(embedded.node).memcpy(out_z, z);
    captured = e.after(z_out).capture(f.stream, [&](tether::Capture& c) {
      CHECK(static_cast<bool>(c));
      f.stream.memset(v, 6.0f);
      f.stream.memcpy(out_v, v);
    });
    captured_plain = e.after(captured.node).capture(f.stream, [&] {
      f.stream.host([&captured_runs] { ++captured_runs; });
    });
    // an empty node joining several dependencies.
    e.after(captured_plain.node, waited, doubled).empty();
  });
  CHECK(g.node_count() == 29);
  CHECK(doubled.valid());
  CHECK(embedded.graph.node_count() == 2);
  CHECK(captured.graph.node_count() == 2);
  CHECK(captured_plain.graph.node_count() == 1);

  tether::GraphExec exec = g.instantiate();
  exec.launch(f.stream);
  f.stream.synchronize();
  CHECK(Fixture::all(out.data(), 10.0f));
  CHECK(Fixture::all(host_copy.data(), 10.0f));
  CHECK(Fixture::all(mapped.data(), 3.0f));
  CHECK(Fixture::all(out_z.data(), 4.0f));
  CHECK(Fixture::all(out_v.data(), 6.0f));
  float want_w[n];
  for (int i = 0; i < n; ++i) want_w[i] = static_cast<float>(i);
  bool w_ok = true;
  for (int i = 0; i < n; ++i) w_ok = w_ok && out_w.data()[i] == want_w[i];
  CHECK(w_ok);
  CHECK(f.all(x, 2.0f));
  int int_back[n];
  ints.copy_to(int_back);
  CHECK(int_back[n - 1] == 7);
  unsigned short short_back[n];
  shorts.copy_to(short_back);
  CHECK(short_back[0] == 0x0102);
  unsigned char byte_back[n];
  bytes.copy_to(byte_back);
  CHECK(byte_back[3] == 9);
  CHECK(host_runs == 1);  // the MoveOnlyCount in the bundle is kept, not run
  CHECK(move_only_runs == 1);
  CHECK(captured_runs == 1);
  CHECK_FALSE(static_cast<bool>(staging));  // moved into the node
}

TEST_CASE(
    "conditional nodes with their bodies, and graph memory nodes, build and run from a file that only "
    "imports "
    "tether") {
  Fixture f;
  tether::SharedBuffer<float> v = f.ctx.alloc<float>(1).share(), then_v = f.shared(), else_v = f.shared(),
                              case_v = f.shared(), body_v = f.shared();
  tether::SharedBuffer<int> counter = f.ctx.alloc<int>(1).share();
  int four[1] = {4};
  counter.copy_from(four);
  float one[1] = {1.0f};
  v.copy_from(one);
  then_v.fill_bytes(0);
  else_v.fill_bytes(0);
  case_v.fill_bytes(0);
  body_v.fill_bytes(0);

  const tether::Launch single{tether::Grid{1}, tether::Block{1}};
  tether::Graph g{f.ctx};
  tether::WhileResult loop;
  tether::IfElseResult branch;
  tether::SwitchResult choice;
  tether::IfResult maybe;
  g.edit([&](tether::Edit& e) {
    tether::Condition c = e.condition(1);  // reset to 1 at every launch
    CHECK(c.handle() != 0);
    loop = e.while_(c);
    auto step = e.in(loop.body).launch(f.scale, single, v, 2.0f, 1);
    e.in(loop.body).empty();
    e.after(step).launch(f.countdown, single, c.handle(), counter);
    maybe = e.after(loop.node).if_(e.condition(1));
    e.in(maybe.then_).launch(f.fill, grid1, block_n, then_v, 1.0f, n);
    branch = e.after(maybe.node).if_else(e.condition(0));
    e.in(branch.then_).launch(f.fill, grid1, block_n, else_v, 9.0f, n);
    e.in(branch.else_).launch(f.fill, grid1, block_n, else_v, 2.0f, n);
    choice = e.after(branch.node).switch_(e.condition(2), 3);
    CHECK(choice.cases.size() == 3);
    e.in(choice.cases[0]).launch(f.fill, grid1, block_n, case_v, 10.0f, n);
    e.in(choice.cases[2]).launch(f.fill, grid1, block_n, case_v, 3.0f, n);
    CHECK(throws_with<tether::UsageError>([&] { e.switch_(c, 0); },
                                          "switch_: a switch node needs at least one case"));
  });
  // A body's own edit (a BodyEdit) after the graph's.
  choice.cases[1].edit([&](tether::BodyEdit& be) { be.launch(f.fill, grid1, block_n, case_v, 11.0f, n); });
  maybe.then_.edit([&](tether::BodyEdit& be) {
    tether::Node<tether::EmptyNode> first = be.empty();
    be.after(first).launch(f.fill, grid1, block_n, body_v, 5.0f, n);
  });
  CHECK(g.node_count() == 4);
  CHECK(g.bodies(loop.node).size() == 1);
  CHECK(g.bodies(choice.node).size() == 3);

  tether::GraphExec exec = g.instantiate();
  exec.launch(f.stream);
  f.stream.synchronize();
  float got[1];
  v.copy_to(got);
  CHECK(got[0] == 16.0f);  // the while body ran 4 times
  CHECK(f.all(then_v, 1.0f));
  CHECK(f.all(else_v, 2.0f));
  CHECK(f.all(case_v, 3.0f));
  CHECK(f.all(body_v, 5.0f));

  // Graph memory nodes: alloc, use, copy out, free.
  tether::SharedPinnedBuffer<float> out = f.pinned();
  tether::Graph mg{f.ctx};
  mg.edit([&](tether::Edit& e) {
    tether::AllocResult<float> m = e.alloc<float>(n);
    auto set = e.after(m.node).launch(f.fill, grid1, block_n, m.memory, 7.0f, n);
    auto copy = e.after(set).memcpy(out, m.memory);
    tether::Node<tether::MemFreeNode> freed = e.after(copy).free(m.memory);
    CHECK(freed.valid());
    CHECK(m.memory.count == static_cast<Size>(n));
  });
  tether::GraphExec mexec = mg.instantiate();
  mexec.launch(f.stream);
  f.stream.synchronize();
  CHECK(Fixture::all(out.data(), 7.0f));
}

TEST_CASE(
    "every update of an edit and of an executable, with extra owners, compiles and takes effect from a file "
    "that only imports tether") {
  Fixture f;
  tether::SharedBuffer<float> x = f.shared();
  tether::SharedPinnedBuffer<float> out = f.pinned();
  tether::Event ev = f.ctx.make_event(), ev2 = f.ctx.make_event();
  int first_runs = 0, second_runs = 0, third_runs = 0;

  tether::Graph sub{f.ctx}, sub2{f.ctx};
  tether::SharedBuffer<float> z = f.shared();
  sub.edit([&](tether::Edit& e) { e.memset(z, 4.0f); });
  sub2.edit([&](tether::Edit& e) { e.memset(z, 8.0f); });

  tether::Graph g{f.ctx};
  tether::Node<tether::MemsetNode> ms;
  tether::Node<tether::KernelNode<float*, float, int>> k;
  tether::Node<tether::MemcpyNode> mc;
  tether::Node<tether::HostNode> h;
  tether::Node<tether::EventRecordNode> rec;
  tether::Node<tether::EventWaitNode> wt;
  tether::Node<tether::ChildNode> child;
  g.edit([&](tether::Edit& e) {
    ms = e.memset(x, 1.0f);
    k = e.after(ms).launch(f.scale, grid1, block_n, x, 2.0f, n);
    mc = e.after(k).memcpy(out, x);
    h = e.after(mc).host([&first_runs] { ++first_runs; });
    rec = e.after(h).record(ev);
    wt = e.after(rec).wait(ev);
    child = e.after(wt).embed(sub).node;
  });
  tether::GraphExec exec = g.instantiate(tether::InstantiateOptions{});
  exec.launch(f.stream);
  f.stream.synchronize();
  CHECK(Fixture::all(out.data(), 2.0f));
  CHECK(first_runs == 1);

  // Edit::update of each kind (each overload of NodeUpdates), and update specs with keeping.
  g.edit([&](tether::Edit& e) {
    e.update(ms, x, 3.0f);
    e.update(k, tether::Launch{grid1, block_n}, x, 3.0f, n);
    e.update(k, grid1, block_n, tether::unowned(x), 3.0f, n);
    e.update(k, tether::kernel(f.scale, grid1, block_n, x, 3.0f, n).keeping(tether::Owners{PlainOwner{}}));
    e.update(mc, out, x);
    e.update(h, [&second_runs] { ++second_runs; });
    e.update(rec, ev2);
    e.update(wt, tether::wait(ev2).keeping(tether::Owners{ev}));
    e.update(ms, tether::memset(x, 3.0f));
    e.update(mc, tether::memcpy(out, x));
  });
  CHECK(throws_with<tether::UsageError>(
      [&] {
        g.edit([&](tether::Edit& e) {
          tether::Spec<tether::MemsetNode> once = tether::memset(x, 3.0f).keeping(tether::Owners{PlainOwner{}});
          e.update(ms, static_cast<tether::Spec<tether::MemsetNode>&&>(once));  // no <utility> here
          e.update(ms, static_cast<tether::Spec<tether::MemsetNode>&&>(once));
        });
      },
      "Edit::update: this spec is empty"));
  tether::UpdateResult r = exec.update(g);
  CHECK(static_cast<bool>(r));
  CHECK_FALSE(r.reinstantiated);
  CHECK(same(tether::to_string(r.reason), "success"));
  exec.launch(f.stream);
  f.stream.synchronize();
  CHECK(Fixture::all(out.data(), 9.0f));
  CHECK(second_runs == 1);

  // GraphExec::update of each kind, update specs with keeping, the child graph update.
  exec.update(ms, x, 1.0f);
  exec.update(k, tether::Launch{grid1, block_n}, tether::unowned(x), 4.0f, n);
  exec.update(k, grid1, block_n, x, 4.0f, n);
  exec.update(k, tether::kernel(f.scale, grid1, block_n, x, 4.0f, n).keeping(tether::Owners{PlainOwner{}, f.ctx.make_stream()}));
  exec.update(ms, tether::memset(x, 1.0f));
  exec.update(h, tether::host(MoveOnlyCount{&third_runs}));
  exec.update(mc, out, x, n);
  exec.update(h, MoveOnlyCount{&third_runs});
  exec.update(rec, ev);
  exec.update(wt, ev);
  exec.update(child, sub2);
  CHECK(throws_with<tether::UsageError>(
      [&] {
        exec.update(k, tether::Launch{grid1, block_n}.priority(1), x, 4.0f, n);
      },
      "GraphExec::update: the Launch sets"));
  exec.launch(f.stream);
  f.stream.synchronize();
  CHECK(Fixture::all(out.data(), 4.0f));
  CHECK(third_runs == 1);
  CHECK(f.all(z, 8.0f));
  // enable / enabled of a kernel, memcpy and memset node.
  exec.enable(k, false);
  CHECK_FALSE(exec.enabled(k));
  CHECK(exec.enabled(mc));
  CHECK(exec.enabled(ms));
  exec.launch(f.stream);
  f.stream.synchronize();
  CHECK(Fixture::all(out.data(), 1.0f));
  exec.enable(k, true);
  exec.update(ms, f.ctx.alloc<float>(n), 0.0f);  // a DeviceBuffer&& the executable's version owns
  exec.reclaim(f.stream);
  CHECK(exec.live_node_versions() >= 1);

  // update_or_reinstantiate: the topology changed, so the executable is made again.
  g.edit([&](tether::Edit& e) { e.after(child).empty(); });
  tether::UpdatePlan plan = exec.plan_update(g);
  CHECK_FALSE(static_cast<bool>(plan));
  CHECK(plan.reason == tether::UpdateResult::Reason::topology_changed);
  CHECK_FALSE(plan.rule.empty());
  tether::UpdateResult again = exec.update_or_reinstantiate(g);
  CHECK(again.reinstantiated);
  CHECK(again.planned);
  CHECK(same(tether::to_string(again.reason), "topology_changed"));
  exec.launch(f.stream);
  f.stream.synchronize();
  CHECK(
      Fixture::all(out.data(), 9.0f));  // the graph's memset (3) and scale (3), not the executable's updates

  // A clone, and its node of a source node; updates through the clone's handle.
  tether::Graph copy = g.clone();
  tether::Node<tether::KernelNode<float*, float, int>> k2 = copy.find(k);
  CHECK(k2.valid());
  CHECK_FALSE(k2 == k);
  copy.edit([&](tether::Edit& e) { e.update(k2, grid1, block_n, x, 5.0f, n); });
  copy.instantiate().launch(f.stream);
  f.stream.synchronize();
  CHECK(Fixture::all(out.data(), 15.0f));  // 3 * 5
}

TEST_CASE(
    "replace, remove, connect, disconnect, commit and rollback of an edit work from a file that only imports "
    "tether") {
  Fixture f;
  tether::SharedBuffer<float> z = f.shared();
  tether::Graph sub{f.ctx}, sub2{f.ctx};
  sub.edit([&](tether::Edit& e) { e.memset(z, 4.0f); });
  sub2.edit([&](tether::Edit& e) { e.memset(z, 8.0f); });
  tether::Graph g{f.ctx};
  tether::Node<tether::EmptyNode> a, b;
  tether::Node<tether::ChildNode> c;
  g.edit([&](tether::Edit& e) {
    a = e.empty();
    b = e.empty();
    c = e.after(a).embed(sub).node;
  });
  g.edit([&](tether::Edit& e) {
    e.connect(a, b);
    tether::EmbedResult fresh = e.replace(c, sub2);
    CHECK(fresh.node.valid());
  });
  CHECK_FALSE(c.valid());
  CHECK(g.edges().size() == 2);
  g.edit([&](tether::Edit& e) { e.disconnect(a, b); });
  CHECK(g.edges().size() == 1);
  {
    tether::Edit e = g.edit();
    e.remove(b);
    e.empty();
  }  // dropped: rolled back
  CHECK(g.node_count() == 3);
  CHECK(b.valid());
  tether::Edit e = g.edit();
  e.remove(b);
  e.commit();
  CHECK_FALSE(b.valid());
  CHECK(g.node_count() == 2);
  tether::Edit undone = g.edit();
  undone.empty();
  undone.rollback();
  CHECK(g.node_count() == 2);
  g.instantiate().launch(f.stream);
  f.stream.synchronize();
  CHECK(f.all(z, 8.0f));
}

TEST_CASE("stream work with every owner adapter runs from a file that only imports tether") {
  Fixture f;
  tether::Stream s2 = f.ctx.make_stream(tether::StreamFlags::default_);
  tether::SharedBuffer<float> x = f.shared(), y = f.shared();
  tether::SharedPinnedBuffer<float> out = f.pinned(), out2 = f.pinned();
  tether::PinnedBuffer<float> staging = f.ctx.alloc_pinned<float>(n);
  for (int i = 0; i < n; ++i) staging.data()[i] = 2.0f;
  tether::Event start = f.ctx.make_event(), done = f.ctx.make_event(tether::EventFlags::blocking_sync);
  int runs = 0, move_only_runs = 0;

  f.stream.record(start);
  tether::Node<tether::MemsetNode> m = f.stream.memset(x, 1.0f);
  CHECK_FALSE(m.valid());                                // outside capture the handles are invalid
  f.stream.launch(f.scale, grid1, block_n, x, 3.0f, n);  // x = 3
  f.stream.launch(f.fill, tether::Launch{grid1, block_n}, f.ctx.alloc<float>(n), 1.0f, n);  // owns its buffer
  f.stream.memcpy(y, mv(staging));                                                          // HtoD: y = 2
  f.stream.launch(f.axpy, grid1, block_n, tether::unowned(y), tether::unowned(x.data(), n), 1.0f,
                  n);        // y = 5
  f.stream.memcpy(out, y);   // DtoH
  f.stream.memcpy(x, y, n);  // DtoD: x = 5
  f.stream.memset(tether::unowned(y), 0.0f);
  f.stream.memset(f.ctx.alloc<int>(n), 1);
  f.stream.host([&runs] { ++runs; });
  f.stream.host(MoveOnlyCount{&move_only_runs});
  tether::AllocResult<float> a = f.stream.alloc_async<float>(n);
  f.stream.memset(a.memory, 6.0f);
  f.stream.memcpy(out2, a.memory);
  f.stream.free_async(a.memory);
  f.stream.record(done);
  s2.wait(done);
  tether::Event external =
      f.ctx.make_event(tether::EventFlags::disable_timing | tether::EventFlags::blocking_sync);
  tether::Node<tether::EventRecordNode> ext = s2.record_external(external);
  tether::Node<tether::EventWaitNode> ext_wait = f.stream.wait_external(external);
  CHECK_FALSE(ext.valid());
  CHECK_FALSE(ext_wait.valid());
  f.stream.synchronize();
  s2.synchronize();
  done.synchronize();
  CHECK(done.query());
  CHECK(f.stream.query());
  CHECK_FALSE(f.stream.capturing());
  CHECK(tether::Event::elapsed_ms(start, done) >= 0.0f);
  CHECK(Fixture::all(out.data(), 5.0f));
  CHECK(Fixture::all(out2.data(), 6.0f));
  CHECK(f.all(x, 5.0f));
  CHECK(f.all(y, 0.0f));
  CHECK(runs == 1);
  CHECK(move_only_runs == 1);
}

TEST_CASE(
    "stream capture, scoped captures and capture inside an edit work from a file that only imports tether") {
  Fixture f;
  tether::Stream s2 = f.ctx.make_stream();
  tether::SharedBuffer<float> x = f.shared(), y = f.shared();
  tether::SharedPinnedBuffer<float> out = f.pinned(), out_y = f.pinned();
  tether::Event ev = f.ctx.make_event();
  int runs = 0;

  // tether::capture(stream, fn) and (stream, mode, fn(Capture&)).
  tether::Node<tether::KernelNode<float*, float, int>> k;
  tether::Graph g = tether::capture(f.stream, [&] {
    f.stream.memset(x, 2.0f);
    k = f.stream.launch(f.scale, grid1, block_n, x, 2.0f, n);
    f.stream.memcpy(out, x);
    f.stream.host([&runs] { ++runs; });
  });
  CHECK(k.valid());
  CHECK(g.node_count() == 4);
  tether::GraphExec exec = g.instantiate();
  exec.launch(f.stream);
  f.stream.synchronize();
  CHECK(Fixture::all(out.data(), 4.0f));
  CHECK(runs == 1);
  exec.update(k, grid1, block_n, x, 3.0f, n);  // the captured node's typed handle
  exec.launch(f.stream);
  f.stream.synchronize();
  CHECK(Fixture::all(out.data(), 6.0f));

  tether::Graph forked = tether::capture(f.stream, tether::CaptureMode::relaxed, [&](tether::Capture& c) {
    CHECK(c.id() != 0);
    c.fork(s2);
    s2.memset(y, 1.0f);
    f.stream.memset(x, 1.0f);
    tether::Node<tether::EventRecordNode> r = f.stream.record_external(ev);
    CHECK(r.valid());
    c.join(s2);
    c.keeping(tether::Owners{PlainOwner{}, f.ctx.alloc<float>(1)});
    f.stream.memcpy(out_y, y);
  });
  CHECK(forked.anonymous_owners() == 2);
  forked.instantiate().launch(f.stream);
  f.stream.synchronize();
  CHECK(Fixture::all(out_y.data(), 1.0f));

  // A scoped Capture: ended, and aborted.
  tether::Capture c(f.stream, tether::CaptureMode::thread_local_);
  CHECK(f.stream.capturing());
  tether::AllocResult<float> a = f.stream.alloc_async<float>(n);
  CHECK(a.node.valid());
  f.stream.memset(a.memory, 3.0f);
  f.stream.memcpy(out, a.memory);
  tether::Node<tether::MemFreeNode> freed = f.stream.free_async(a.memory);
  CHECK(freed.valid());
  tether::Graph scoped = c.end();
  CHECK_FALSE(static_cast<bool>(c));
  CHECK(scoped.node_count() == 4);
  scoped.instantiate().launch(f.stream);
  f.stream.synchronize();
  CHECK(Fixture::all(out.data(), 3.0f));
  tether::Capture dropped(f.stream);
  f.stream.memset(x, 9.0f);
  dropped.abort();
  CHECK_FALSE(static_cast<bool>(dropped));
  CHECK_FALSE(f.stream.capturing());
  CHECK(throws_with<tether::UsageError>([&] { (void)tether::Capture().id(); }, "Capture"));
}

namespace {
// The inspected node of `in`'s root graph made by `node`.
template <class K>
const tether::NodeInfo* info_of(const tether::Inspection& in, const tether::Node<K>& node) {
  const tether::Node<> any = node;
  for (Size g = 0; g < in.graphs.size(); ++g)
    for (Size i = 0; i < in.graphs[g].nodes.size(); ++i)
      if (in.graphs[g].nodes[i].node == any) return &in.graphs[g].nodes[i];
  return nullptr;
}
}  // namespace

TEST_CASE("introspection, owner labels and node descriptions work from a file that only imports tether") {
  Fixture f;
  tether::SharedBuffer<float> x = f.shared();
  tether::SharedPinnedBuffer<float> out = f.pinned();
  tether::PinnedBuffer<float> staging = f.ctx.alloc_pinned<float>(n);
  for (int i = 0; i < n; ++i) staging.data()[i] = 1.0f;
  tether::Event ev = f.ctx.make_event();
  tether::Graph sub{f.ctx};
  sub.edit([&](tether::Edit& e) { e.empty(); });

  tether::Graph g{f.ctx};
  tether::Node<tether::MemcpyNode> in_copy, out_copy;
  tether::Node<tether::KernelNode<float*, float, int>> k;
  tether::Node<tether::MemsetNode> ms;
  tether::Node<tether::HostNode> h;
  tether::Node<tether::EventRecordNode> rec;
  tether::Node<tether::EventWaitNode> wt;
  tether::Node<tether::EmptyNode> kept;
  tether::EmbedResult child;
  tether::IfResult cond;
  g.edit([&](tether::Edit& e) {
    in_copy = e.memcpy(x, mv(staging));
    k = e.after(in_copy).launch(f.scale, grid1, block_n, x, 2.0f, n);
    out_copy = e.after(k).memcpy(out, x);
    ms = e.memset(f.ctx.alloc<float>(n), 0.0f);
    h = e.after(out_copy).host([] {});
    rec = e.after(h).record(ev);
    wt = e.after(rec).wait(ev);
    kept = e.after(wt).keeping(tether::Owners{f.ctx.make_stream(), f.mod, PlainOwner{}}).empty();
    child = e.after(kept).embed(sub);
    cond = e.after(child.node).if_(e.condition(1));
    e.in(cond.then_).launch(f.fill, grid1, block_n, x, 3.0f, n);
  });

  // Node handles: descriptions of every kind, conversion to Node<>, equality.
  CHECK(same(tether::to_string(k), "Node(kernel)"));
  CHECK(same(tether::to_string(ms), "Node(memset)"));
  CHECK(same(tether::to_string(in_copy), "Node(memcpy)"));
  CHECK(same(tether::to_string(h), "Node(host)"));
  CHECK(same(tether::to_string(rec), "Node(event_record)"));
  CHECK(same(tether::to_string(wt), "Node(event_wait)"));
  CHECK(same(tether::to_string(kept), "Node(empty)"));
  CHECK(same(tether::to_string(child.node), "Node(child_graph)"));
  CHECK(same(tether::to_string(cond.node), "Node(conditional)"));
  CHECK(same(tether::to_string(tether::Node<tether::HostNode>{}), "Node(invalid)"));
  const tether::Node<> any = k;
  CHECK(any == k);
  CHECK(same(tether::to_string(any), "Node(kernel)"));
  CHECK(k.get() != nullptr);

  // Graph queries and views.
  auto nodes = g.nodes();
  CHECK(nodes.size() == 10);
  CHECK(nodes[0] == in_copy);
  auto roots = g.roots();
  CHECK(roots.size() == 2);
  auto edges = g.edges();
  CHECK(edges.size() == 8);
  bool found = false;  // the driver's order
  for (Size i = 0; i < edges.size(); ++i) found = found || edges[i] == tether::Edge{in_copy, k};
  CHECK(found);
  CHECK(g.child(child.node) == child.graph);
  CHECK(child.graph.nodes().size() == 1);
  CHECK(child.graph.roots().size() == 1);
  CHECK(child.graph.edges().empty());
  auto bodies = g.bodies(cond.node);
  CHECK(bodies.size() == 1);
  CHECK(bodies[0] == cond.then_);
  CHECK(cond.then_.nodes().size() == 1);
  CHECK(cond.then_.valid());
  CHECK(cond.then_.get() != nullptr);

  // inspect: kinds, labels and owners by label, for every owner type tether labels.
  tether::Inspection in = tether::inspect(g);
  CHECK_FALSE(in.executable);
  CHECK(in.graphs.size() == 3);
  CHECK(in.node_count() == 12);
  CHECK(in.owner_count() >= 12);
  CHECK(in.graphs[1].role == tether::GraphInfo::Role::child);
  CHECK(same(tether::to_string(in.graphs[2].role), "body"));
  const tether::NodeInfo* ki = info_of(in, k);
  REQUIRE(ki != nullptr);
  CHECK(ki->kind == tether::NodeKind::kernel);
  CHECK(same(tether::to_string(ki->kind), "kernel"));
  CHECK(same(ki->label, "scale"));
  CHECK(has_label(ki->owners, "kernel scale"));
  CHECK(has_label(ki->owners, "SharedBuffer<float>[8]"));
  CHECK(ki->dependencies.size() == 1);
  CHECK(has(tether::to_string(*ki), "kernel scale"));
  const tether::NodeInfo* mi = info_of(in, ms);
  REQUIRE(mi != nullptr);
  CHECK(has_label(mi->owners, "DeviceBuffer<float>[8]"));
  const tether::NodeInfo* ii = info_of(in, in_copy);
  REQUIRE(ii != nullptr);
  CHECK(has_label(ii->owners, "PinnedBuffer<float>[8]"));
  const tether::NodeInfo* oi = info_of(in, out_copy);
  REQUIRE(oi != nullptr);
  CHECK(has_label(oi->owners, "SharedPinnedBuffer<float>[8]"));
  const tether::NodeInfo* hi = info_of(in, h);
  REQUIRE(hi != nullptr);
  CHECK(has_label_part(hi->owners, "(lambda at module_only_test.cpp:"));
  const tether::NodeInfo* ri = info_of(in, rec);
  REQUIRE(ri != nullptr);
  CHECK(has_label(ri->owners, "Event"));
  const tether::NodeInfo* ei = info_of(in, kept);
  REQUIRE(ei != nullptr);
  CHECK(has_label(ei->owners, "Stream"));
  CHECK(has_label(ei->owners, "Module"));
  CHECK(has_label_part(ei->owners, "PlainOwner"));
  const tether::NodeInfo* ci = info_of(in, child.node);
  REQUIRE(ci != nullptr);
  CHECK(ci->graphs.size() == 1);
  CHECK(has(tether::to_string(in), "SharedPinnedBuffer<float>[8]"));
  CHECK(tether::inspect(child.graph).graphs.size() == 1);
  CHECK(tether::inspect(cond.then_).node_count() == 1);

  // An executable: its versions after a per-node update.
  tether::GraphExec exec = g.instantiate();
  exec.launch(f.stream);
  exec.update(k, grid1, block_n, x, 4.0f, n);
  f.stream.synchronize();
  tether::Inspection ein = tether::inspect(exec);
  CHECK(ein.executable);
  CHECK(ein.launches == 1);
  bool updated = false;
  for (Size i = 0; i < ein.versions.size(); ++i)
    if (ein.versions[i].state == tether::ExecVersion::State::updated)
      updated = has_label(ein.versions[i].owners, "kernel scale");
  CHECK(updated);
  CHECK(same(tether::to_string(tether::ExecVersion::State::superseded), "superseded"));

  // DOT pictures.
  CHECK(has(tether::to_dot(g), "digraph"));
  tether::DotOptions opts;
  opts.owners = false;
  opts.instantiated = true;
  opts.title = "module only";
  CHECK(has(tether::to_dot(in, opts), "module only"));
  CHECK_FALSE(has(tether::to_dot(in, opts), "SharedBuffer<float>[8]"));
  CHECK(has(tether::to_dot(exec), "kernel scale"));

  // adopt refuses a graph tether already holds, and a null one, saying so.
  CHECK(throws_with<tether::UsageError>([&] { (void)tether::Graph::adopt(f.ctx, g.get()); },
                                        "already held by a tether Graph"));
  CHECK(throws_with<tether::UsageError>([&] { (void)tether::Graph::adopt(f.ctx, nullptr); },
                                        "Graph::adopt: the graph is null"));
}

TEST_CASE("the templates' errors name the call and what was wrong from a file that only imports tether") {
  Fixture f;
  tether::SharedBuffer<float> x = f.shared(), empty;
  tether::SharedBuffer<float> small = f.ctx.alloc<float>(2).share();
  tether::Graph g{f.ctx};
  g.edit([&](tether::Edit& e) {
    CHECK(throws_with<tether::UsageError>(
        [&] { e.memset(empty, 0.0f); },
        "Edit::memset: the destination (SharedBuffer) is moved from or empty"));
    CHECK(throws_with<tether::UsageError>(
        [&] { e.memcpy(small, x); },
        "Edit::memcpy: the destination has 8 bytes, fewer than the 32 bytes copied"));
    CHECK(throws_with<tether::UsageError>(
        [&] {
          e.memset(x, static_cast<unsigned char>(1));
          e.memset(tether::unowned(x.data()), 0.0f);
        },
        "Edit::memset: the destination's size is unknown"));
    CHECK(throws_with<tether::UsageError>([&] { e.launch(f.scale, grid1, block_n, empty, 1.0f, n); },
                                          "Edit::launch: argument 0 (SharedBuffer) is moved from or empty"));
    CHECK(throws_with<tether::UsageError>([&] { e.launch(f.scale, tether::Grid{0}, block_n, x, 1.0f, n); },
                                          "Edit::launch"));
    CHECK(throws_with<tether::UsageError>([&] { (void)e.alloc<float>(0); },
                                          "Edit::alloc: allocating 0 elements"));
  });
  tether::Stream none;
  CHECK(throws_with<tether::UsageError>([&] { none.memset(x, 0.0f); }, "Stream::memset"));
  CHECK(throws_with<tether::UsageError>([&] { f.stream.launch(f.scale, grid1, block_n, empty, 1.0f, n); },
                                        "Stream::launch: argument 0 (SharedBuffer) is moved from or empty"));
  tether::Graph moved = mv(g);
  CHECK(throws_with<tether::UsageError>([&] { g.edit([](tether::Edit&) {}); },
                                        "this Graph is moved from or empty"));
  tether::GraphExec exec = moved.instantiate();
  tether::GraphExec gone = mv(exec);
  CHECK(throws_with<tether::UsageError>([&] { exec.launch(f.stream); },
                                        "this GraphExec is moved from or empty"));
  if (f.simulated()) {
    // A driver failure inside a creator: DriverError names the entry point; nothing is left behind.
    const Size before = moved.node_count();  // the 1-byte memset above
    tether::sim::fail_call("cuGraphAddNode", 1);
    CHECK(throws_with<tether::DriverError>([&] { moved.edit([&](tether::Edit& e) { e.memset(x, 1.0f); }); },
                                           "cuGraphAddNode failed with CUDA_ERROR_OUT_OF_MEMORY"));
    tether::sim::clear_faults();
    CHECK(moved.node_count() == before);
    CHECK(tether::sim::violations().empty());
  }
}

TEST_CASE("the members of buffers, kernels and shared handles work from a file that only imports tether") {
  Fixture f;
  tether::DeviceBuffer<float> d = f.ctx.alloc<float>(n), e;
  CHECK(d.size() == static_cast<Size>(n));
  CHECK(d.bytes() == static_cast<Size>(n) * sizeof(float));
  CHECK(d.address() != 0);
  CHECK(d.context() == f.ctx);
  d.fill_bytes(0);
  float ones[n];
  for (int i = 0; i < n; ++i) ones[i] = 1.0f;
  d.copy_from(ones);
  float back[n] = {};
  d.copy_to(back);
  CHECK(Fixture::all(back, 1.0f));
  d.swap(e);
  CHECK_FALSE(static_cast<bool>(d));
  CHECK(static_cast<bool>(e));
  auto address = e.release();
  CHECK_FALSE(static_cast<bool>(e));
  tether::DeviceBuffer<float> adopted = tether::DeviceBuffer<float>::from_native_handle(f.ctx, address, n);
  CHECK(adopted.address() == address);
  tether::SharedBuffer<float> s = mv(adopted).share(), s2 = s, none;
  CHECK(s == s2);
  CHECK_FALSE(s == none);
  CHECK(s.use_count() == 2);
  CHECK(s.context() == f.ctx);
  CHECK_FALSE(static_cast<bool>(none));
  CHECK(f.all(s, 1.0f));
  s.fill_bytes(0);
  CHECK(f.all(s2, 0.0f));
  tether::Unowned<float> u = tether::unowned(s);
  CHECK(u.count == static_cast<Size>(n));
  CHECK(u.ptr == s.data());

  tether::PinnedBuffer<float> p = f.ctx.alloc_pinned<float>(n), q;
  CHECK(p.span().size() == static_cast<Size>(n));
  p.span()[0] = 3.0f;
  p.swap(q);
  CHECK(q.data()[0] == 3.0f);
  CHECK(tether::unowned(q).count == static_cast<Size>(n));
  float* raw = q.release();
  tether::PinnedBuffer<float> back_in = tether::PinnedBuffer<float>::from_native_handle(f.ctx, raw, n);
  CHECK(back_in.context() == f.ctx);
  tether::SharedPinnedBuffer<float> sp = mv(back_in).share(), sp2 = sp;
  CHECK(sp == sp2);
  CHECK(sp.use_count() == 2);
  CHECK(sp.span()[0] == 3.0f);
  CHECK(sp.bytes() == static_cast<Size>(n) * sizeof(float));
  sp2 = tether::SharedPinnedBuffer<float>();
  CHECK(sp.use_count() == 1);
  p.reset();
  CHECK(p.size() == 0);

  CHECK(f.scale == f.mod.kernel<float*, float, int>("scale"));
  CHECK_FALSE(f.scale == f.fill);
  CHECK(same(f.scale.name(), "scale"));
  CHECK(Fill::arity == 3);
  CHECK(f.scale.module() == f.mod);
  CHECK(f.scale.context_handle() == f.ctx.get());
  CHECK(f.scale.function() == f.mod.function("scale"));
  tether::Event ev = f.ctx.make_event(), ev2 = ev;
  CHECK(ev == ev2);
  CHECK(ev.context() == f.ctx);
  CHECK(f.rt == f.ctx.runtime());
  constexpr tether::EventFlags both = tether::EventFlags::blocking_sync | tether::EventFlags::disable_timing;
  CHECK((both & tether::EventFlags::disable_timing) == tether::EventFlags::disable_timing);
  constexpr tether::Launch l = tether::Launch{tether::Grid{2}, tether::Block{32}}
                                   .shared_memory(1024)
                                   .cluster(tether::Cluster{2})
                                   .priority(1);
  CHECK(l.attributes() == (tether::Launch::cluster_bit | tether::Launch::priority_bit));
  CHECK(l.shared_memory_bytes() == 1024);
  tether::AccessPolicy window;
  window.hit = CU_ACCESS_PROPERTY_STREAMING;
  const tether::Launch domain =
      tether::Launch{grid1, block_n}.mem_sync_domain(CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE).access_policy(window);
  CHECK(domain.sync_domain() == CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE);
  CHECK(domain.policy_window().hit == CU_ACCESS_PROPERTY_STREAMING);

  // Owners: adopt, +=, size, reset; the Ownable concept.
  static_assert(tether::Ownable<tether::SharedBuffer<float>> && tether::Ownable<MoveOnlyCount> &&
                !tether::Ownable<tether::Owners>);
  tether::Owners bundle;
  CHECK(bundle.empty());
  PlainOwner& kept = bundle.adopt(PlainOwner{5});
  CHECK(kept.value == 5);
  bundle += tether::Owners{s, ev, MoveOnlyCount{nullptr}};
  CHECK(bundle.size() == 4);
  CHECK(s.use_count() == 3);
  bundle.reset();
  CHECK(bundle.empty());
  CHECK(s.use_count() == 2);

  tether::Stream moved = f.ctx.make_stream(), target;
  target.swap(moved);
  CHECK(static_cast<bool>(target));
  CHECK(target.context() == f.ctx);
  auto handle = target.release();
  tether::Stream readopted = tether::Stream::from_native_handle(f.ctx, handle);
  CHECK(readopted.get() == handle);
  readopted.reset();
  CHECK_FALSE(static_cast<bool>(readopted));
}

TEST_CASE("an executable cache builds, evicts, prewarms and reports from a file that only imports tether") {
  Fixture f;
  tether::SharedBuffer<float> x = f.shared();
  int made = 0;
  tether::ExecCache<int> cache(
      [&](const int& v) {
        ++made;
        tether::Graph g{f.ctx};
        g.edit([&](tether::Edit& e) { e.launch(f.fill, tether::Grid{1}, tether::Block{n}, x, static_cast<float>(v), n); });
        return g.instantiate();
      },
      tether::ExecCacheLimits{2}, [](const int&, const tether::GraphExec&) -> Size { return 64; });
  CHECK(cache.prewarm({1, 2}) == 2);
  cache.launch(3, f.stream);  // evicts 1
  f.stream.synchronize();
  CHECK(f.all(x, 3.0f));
  CHECK_FALSE(cache.contains(1));
  CHECK(cache.contains(2));
  tether::ExecCacheStats s = cache.stats();
  CHECK(s.misses == 3);
  CHECK(s.evictions == 1);
  CHECK(s.bytes == 128);
  CHECK(made == 3);
  CHECK(throws_with<tether::UsageError>([&] { tether::ExecCache<int> none; none.get(1); }, "ExecCache::get: this ExecCache is empty"));
}

TEST_CASE("dynamic parameters bind, set in edits and executables, and swap buffers with import tether alone") {
  Fixture f;
  tether::SharedBuffer<float> x = f.shared();
  tether::SharedBuffer<float> y = f.shared();
  tether::Param<float> value(1.0f, "value");
  tether::Param<tether::SharedBuffer<float>> buf(x, "buf");
  tether::Graph g{f.ctx};
  g.edit([&](tether::Edit& e) { e.launch(f.fill, tether::Grid{1}, tether::Block{n}, buf, value, n); });
  tether::GraphExec exec = g.instantiate();
  CHECK(exec.bound_nodes(value) == 1);
  CHECK(exec.set(value, 4.0f) == 1);
  CHECK(exec.set(buf, y) == 1);
  exec.launch(f.stream);
  f.stream.synchronize();
  CHECK(f.all(y, 4.0f));
  g.edit([&](tether::Edit& e) { CHECK(e.set(value, 5.0f) == 1); });
  CHECK(exec.update(g));
  exec.launch(f.stream);
  f.stream.synchronize();
  CHECK(f.all(x, 5.0f));
  CHECK(throws_with<tether::UsageError>([&] { tether::Param<float> none; none.value(); }, "Param::value: this Param"));
  // A launch parameter: the fill writes one element per thread.
  tether::Param<tether::Launch> shape(tether::Launch{tether::Grid{1}, tether::Block{1}}, "shape");
  tether::SharedBuffer<float> z = f.shared();
  tether::Graph h{f.ctx};
  h.edit([&](tether::Edit& e) { e.launch(f.fill, shape, z, 6.0f, n); });
  tether::GraphExec hx = h.instantiate();
  CHECK(hx.set(shape, tether::Launch{tether::Grid{1}, tether::Block{n}}) == 1);
  hx.launch(f.stream);
  f.stream.synchronize();
  CHECK(f.all(z, 6.0f));
}

TEST_CASE("memory accounting answers for graphs, executables and the process with import tether alone") {
  Fixture f;
  tether::SharedBuffer<float> x = f.shared();
  tether::Graph g{f.ctx};
  g.edit([&](tether::Edit& e) { e.launch(f.fill, tether::Grid{1}, tether::Block{n}, x, 1.0f, n); });
  tether::GraphExec exec = g.instantiate();
  CHECK(tether::owned_memory(g).device_bytes == x.size() * sizeof(float));
  CHECK(tether::owned_memory(exec).allocations == 1);
  CHECK(tether::inspect(g).graphs[0].nodes[0].memory.device_bytes == x.size() * sizeof(float));
  tether::MemoryReport r = tether::memory_report(f.ctx);
  CHECK(r.graphs >= 1);
  CHECK(r.buffer_device_bytes >= x.size() * sizeof(float));
  CHECK(!tether::to_string(r).empty());
  CHECK(tether::to_string(tether::owned_memory(g)).size() > 6);
  tether::GraphMemory m = tether::graph_memory(f.ctx);
  CHECK(m.reserved_high >= m.reserved);
}

TEST_CASE("an NCCL communicator's collectives run on a stream and in a captured graph with import tether alone") {
  Fixture f;
  tether::nccl::UniqueId id = tether::nccl::UniqueId::generate(f.rt);
  tether::nccl::Communicator comm = tether::nccl::Communicator::create(f.ctx, id, 1, 0);
  CHECK(comm.size() == 1);
  tether::SharedBuffer<float> x = f.shared(), y = f.shared();
  f.stream.memset(x, 3.0f);
  comm.all_reduce(f.stream, x, y);
  tether::nccl::group([&] {
    comm.send(f.stream, x, 0);
    comm.recv(f.stream, y, 0);
  });
  f.stream.synchronize();
  CHECK(f.all(y, 3.0f));
  tether::GraphExec exec = tether::capture(f.stream, [&] { comm.all_reduce(f.stream, y, x, tether::nccl::ReduceOp::max); }).instantiate();
  f.stream.memset(y, 5.0f);
  exec.launch(f.stream);
  f.stream.synchronize();
  CHECK(f.all(x, 5.0f));
  tether::nccl::RegisteredBuffer<float> reg = comm.register_buffer(x);
  CHECK(reg.size() == static_cast<Size>(n));
  CHECK(throws_with<tether::UsageError>([&] { tether::nccl::Communicator none; none.rank(); },
                                        "Communicator::rank: this Communicator"));
}
