// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
import tether;
// Imports the module and touches every export, so that a missing TETHER_EXPORT or an entity that
// does not survive the module boundary fails here. The textual includes come after the import, in
// the order docs/modules.md recommends (module_only_test.cpp instantiates the templates with no
// standard header at all).
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>

TEST_CASE("the module exports the error types, their category and their formatters") {
  tether::Errc e = tether::Errc::invalid_value;
  std::error_code c = e;  // is_error_code_enum + make_error_code through ADL
  CHECK(c.category() == tether::driver_category());
  CHECK(tether::make_error_code(tether::Errc::not_permitted).value() == 800);
  CHECK(tether::result_name(1) == "CUDA_ERROR_INVALID_VALUE");
  CHECK_FALSE(tether::result_description(1).empty());
  tether::DriverError d("cuGraphCreate", 1, "", "creating a graph");
  CHECK(d.code() == tether::Errc::invalid_value);
  CHECK(d.entry_point() == "cuGraphCreate");
  CHECK(d.result_name() == "CUDA_ERROR_INVALID_VALUE");
  CHECK(d.context() == "creating a graph");
  CHECK_FALSE(d.description().empty());
  CHECK(fmt::format("{}", d) == d.what());
  tether::UsageError u("misuse");
  CHECK(fmt::format("{}", u) == "misuse");
  CHECK(fmt::format("{}", tether::Errc::no_device) == "CUDA_ERROR_NO_DEVICE");
  static_assert(std::is_base_of_v<std::system_error, tether::DriverError>);
  static_assert(std::is_base_of_v<std::logic_error, tether::UsageError>);
}

namespace {
int g_hook_calls = 0;
void hook(const tether::ErrorReport& r) noexcept { g_hook_calls += r.where == "here" ? 1 : 0; }
}  // namespace

TEST_CASE("the module exports the error hook and the unavailability reasons") {
  tether::ErrorHook old = tether::set_error_hook(&hook);
  tether::report_error("here", "x");
  try {
    throw tether::UsageError("y");
  } catch (...) {
    tether::report_current_exception("here");
  }
  tether::set_error_hook(old);
  CHECK(g_hook_calls == 2);
  tether::DriverUnavailable du(tether::Unavailable::too_old, "old");
  CHECK(du.reason() == tether::Unavailable::too_old);
  CHECK(tether::to_string(tether::Unavailable::missing_library) == "missing_library");
}

TEST_CASE("the module exports the runtime and driver kinds") {
  CHECK(tether::to_string(tether::DriverKind::cuda) == "cuda");
  CHECK(tether::to_string(tether::DriverKind::simulated) == "simulated");
  CHECK(tether::driver_version_string(13000) == "13.0");
  try {
    tether::Runtime rt = tether::Runtime::open();
    CHECK(rt.device_count() >= 1);
    CHECK(rt.driver_version() >= 12030);
    CHECK_FALSE(rt.origin().empty());
    CHECK(rt.describe().find(std::string(tether::to_string(rt.kind()))) == 0);
    CHECK(rt == rt);
  } catch (const tether::DriverUnavailable& e) {
    MESSAGE("no driver here: ", e.what());
    CHECK(e.reason() != tether::Unavailable::bad_selection);
  }
  static_assert(std::is_same_v<decltype(&tether::Runtime::cuda), tether::Runtime (*)()>);
  static_assert(std::is_same_v<decltype(&tether::Runtime::simulated), tether::Runtime (*)()>);
}

namespace {
std::string beside_me(const char* file) {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  std::string exe(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
  return exe.substr(0, exe.rfind('/') + 1) + file;
}
}  // namespace

TEST_CASE("the module exports resources, owners, the DSL, executables and the simulator API") {
  using namespace tether;
  sim::register_kernel<float*, float, int>("scale", [](const sim::LaunchInfo& l, float* x, float a, int n) {
    for (std::size_t i = 0; i < l.threads() && i < static_cast<std::size_t>(n); ++i) x[i] *= a;
  });
  Runtime rt = Runtime::open();
  Context ctx = rt.context(0);
  CHECK(ctx.device() == 0);
  Stream s = ctx.make_stream();
  Event ev = ctx.make_event();
  Module m = ctx.load_module(Image::from_file(beside_me("kernels.fatbin")));
  Kernel<float*, float, int> scale = m.kernel<float*, float, int>("scale");
  CHECK(scale.name() == "scale");
  SharedBuffer<float> x = ctx.alloc<float>(4).share();
  std::vector<float> ones(4, 1.0f);
  x.copy_from(ones);
  PinnedBuffer<float> pinned = ctx.alloc_pinned<float>(4);
  SharedPinnedBuffer<float> host = std::move(pinned).share();
  static_assert(Ownable<SharedBuffer<float>>);
  Owners extra{ev, std::vector<int>(3)};
  CHECK(extra.size() == 2);

  Graph g{ctx};
  Node<KernelNode<float*, float, int>> k;
  g.edit([&](Edit& e) {
    auto r = e.record(ev);
    k = e.after(r).keeping(std::move(extra)).launch(scale, Grid{1}, Block{4}, x, 3.0f, 4);
    auto w = e.after(k).wait(ev);
    auto c = e.after(w).memcpy(host, x);
    auto set = e.after(c).empty();
    Condition cond = e.condition(0);
    IfResult branch = e.after(set).if_(cond);
    e.in(branch.then_).empty();
    e.after(set).host([] {});
  });
  CHECK(k.valid());
  CHECK(g.node_count() == 7);
  Node<> any = k;
  CHECK(any == k);
  GraphExec exec = g.instantiate(InstantiateOptions{});
  exec.launch(s);
  s.synchronize();
  CHECK(host.data()[0] == 3.0f);
  exec.update(k, Grid{1}, Block{4}, unowned(x), 2.0f, 4);
  exec.enable(k, false);
  CHECK_FALSE(exec.enabled(k));
  UpdateResult r = exec.update(g);
  CHECK(static_cast<bool>(r));
  CHECK(to_string(r.reason) == "success");
  exec.reclaim(s);  // the per-node version superseded by the whole update goes once the launch is done
  s.synchronize();
  for (int i = 0; i < 5000 && exec.live_node_versions() != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(exec.live_node_versions() == 0);
  Graph small{ctx};
  small.edit([&](Edit& e) { e.empty(); });
  Graph embedding{ctx};
  embedding.edit([&](Edit& e) {
    EmbedResult er = e.embed(small);
    CHECK(er.graph.node_count() == 1);
  });
  Graph copy = small.clone();
  CHECK(copy.node_count() == 1);
  reclaim();
  CHECK(wait_reclaimed(std::chrono::seconds(5)));
  if (rt.kind() == DriverKind::simulated) {
    CHECK(sim::violations().empty());
    CHECK(sim::stats().graphs >= 3);
    CHECK(sim::to_string(sim::ViolationKind::use_after_free) == "use_after_free");
  }
}

TEST_CASE("the module exports introspection, the raw handle types, and hashing of handles and views, with no <cuda.h> "
          "in this file") {
  using namespace tether;
  Runtime rt = Runtime::open();
  Context ctx = rt.context(0);
  Graph g{ctx};
  Node<EmptyNode> a, b;
  g.edit([&](Edit& e) {
    a = e.empty();
    b = e.after(a).empty();
  });
  // The raw accessors' types can be named by an importer.
  CUgraph raw = g.get();
  CHECK(raw != nullptr);
  CUgraphNode node = a.get();
  CHECK(node != nullptr);
  CUcontext c = ctx.get();
  CHECK(c != nullptr);
  Stream s = ctx.make_stream();
  CUstream st = s.get();
  CHECK(st != nullptr);
  GraphExec exec = g.instantiate();
  CUgraphExec ex = exec.get();
  CHECK(ex != nullptr);
  static_assert(sizeof(CUlaunchMemSyncDomain) > 0 && sizeof(CUaccessProperty) > 0 && sizeof(CUdeviceptr) == 8);
  std::unordered_set<Node<>> nodes;
  for (const Node<>& n : g.nodes()) nodes.insert(n);
  CHECK(nodes.size() == 2);
  CHECK(nodes.count(Node<>(b)) == 1);
  std::unordered_map<GraphRef, int> views{{g.ref(), 1}};
  CHECK(views.at(g.ref()) == 1);
  CHECK(g.edges() == std::vector<Edge>{Edge{a, b}});
  Inspection in = inspect(g);
  CHECK(in.graphs[0].nodes[1].dependencies == std::vector<std::size_t>{0});
  CHECK(to_string(in.graphs[0].nodes[0].kind) == "empty");
  CHECK(fmt::format("{}", a) == "Node(empty)");
  CHECK(to_dot(g).find("g0n0 -> g0n1;") != std::string::npos);
  CHECK(inspect(exec).executable);
}

namespace {
void surface_axpy(float, const float*, float*, int) {}  // stands in for a __global__ function
}  // namespace

TEST_CASE("the module exports the simulator's twins by function and what a Kernel says about its module") {
  using namespace tether;
  sim::register_kernel(&surface_axpy, [](const sim::LaunchInfo&, float, const float*, float*, int) {});
  sim::register_kernel(&surface_axpy, "surface_axpy", [](const sim::LaunchInfo&, float, const float*, float*, int) {});
  sim::register_kernel_erased(reinterpret_cast<const void*>(&surface_axpy), "surface_axpy", {},
                              [](const sim::LaunchInfo&, const void* const*) {});
  CHECK(sim::unregister_kernel(&surface_axpy));
  CHECK_FALSE(sim::unregister_kernel_erased(reinterpret_cast<const void*>(&surface_axpy)));
  sim::register_kernel<float*, float, int>("scale", [](const sim::LaunchInfo&, float*, float, int) {});
  Context ctx = Runtime::open().context(0);
  Module m = ctx.load_module(Image::from_file(beside_me("kernels.fatbin")));
  Kernel<float*, float, int> scale = m.kernel<float*, float, int>("scale");
  CHECK(scale.has_module());
  CHECK(scale.module() == m);
  CHECK(scale.context() == ctx);
}

TEST_CASE("the module exports the NCCL layer, its errors and types, the simulator's NCCL hooks and peer access") {
  std::error_code c = tether::nccl::Errc::invalid_usage;  // is_error_code_enum + make_error_code through ADL
  CHECK(c.category() == tether::nccl::nccl_category());
  CHECK(tether::nccl::result_name(6) == "ncclRemoteError");
  tether::nccl::Error e("ncclAllReduce", 5, "bad", "doing it");
  CHECK(std::string(e.what()) ==
        "ncclAllReduce failed with ncclInvalidUsage (5: invalid usage (run with NCCL_DEBUG=WARN for details)) while "
        "doing it; NCCL: bad");
  CHECK(e.code() == tether::nccl::Errc::invalid_usage);
  tether::nccl::Unavailable u(tether::Unavailable::too_old, "old");
  CHECK(u.reason() == tether::Unavailable::too_old);
  CHECK(tether::nccl::to_string(tether::nccl::DataType::bfloat16) == "bfloat16");
  CHECK(tether::nccl::to_string(tether::nccl::ReduceOp::avg) == "avg");
  static_assert(tether::nccl::ElementType<float>::value == tether::nccl::DataType::float32);
  static_assert(tether::nccl::ElementType<tether::nccl::Float8E5M2>::value == tether::nccl::DataType::float8e5m2);
  static_assert(tether::nccl::Element<tether::nccl::Half> && !tether::nccl::Element<char*>);
  CHECK(tether::nccl::whole == static_cast<std::size_t>(-1));
  CHECK_FALSE(static_cast<bool>(tether::nccl::UniqueId{}));
  tether::nccl::CommunicatorOptions o;
  CHECK(o.watchdog.count() == 0);
  CHECK_FALSE(o.check_sequences);
  tether::nccl::Communicator none;
  CHECK(none.get() == static_cast<ncclComm*>(nullptr));
  tether::nccl::CommunicatorCounts counts = tether::nccl::communicator_counts();
  CHECK(counts.closing == 0);
  tether::Runtime rt = tether::Runtime::open();
  CHECK(tether::nccl::describe(rt).starts_with("NCCL "));
  if (rt.kind() == tether::DriverKind::simulated) {
    tether::sim::NcclStats s = tether::sim::nccl_stats();
    CHECK(s.communicators == 0);
    CHECK(tether::sim::nccl_call_count("ncclAllReduce") == 0);
  }
  tether::Context ctx = rt.context(0);
  CHECK(ctx.can_access_peer(ctx));
  ctx.enable_peer_access(ctx);  // the same device: nothing to do
}
