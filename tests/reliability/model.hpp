// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Randomized model checking of tether's ownership (issue 7), shared by tests/reliability/
// model_test.cpp and bench/model_check.cpp. A seeded generator makes sequences of operations —
// edits adding nodes of every kind with owners, updates, removals, edges, embedded graphs,
// conditional bodies, clones, instantiations, per-node and whole executable updates,
// enable/disable, launches, uploads, reclaims, and destruction of graphs and executables in random
// orders — and runs them on the simulator against a small reference model of who may still use
// each owner:
//
// - every owner is a `Tracked` object with an id in a `Ledger`; the model claims an id for each
//   consumer that may use it (the current version of a node in a graph, clone or embedded copy;
//   an executable's version of each of its nodes) and records the last launch that may use it;
// - a `Tracked` destructor (any thread) checks that no consumer claims it, that every launch that
//   may use it has completed, and that it runs where tether drains its reclaimer
//   (`detail::draining_here()`); it must run exactly once;
// - launch completion is observed exactly: every launchable graph has a host "sink" node that
//   depends on every other top-level node, so it runs last in each launch; all launches go to one
//   stream, so the number of sinks run is the number of launches completed;
// - node handles, views and node counts are compared with the model after every edit;
// - at the end of each sequence everything is destroyed in a random order, the reclaimer and the
//   simulator are drained (bounded waits), and every owner must have been destroyed exactly once,
//   attachments and accumulators are back to their count, and the simulator's violation log
//   (use after free of buffers by launches, over-release, ...) is empty.
//
// Everything the generator does depends only on the seed, so a failing sequence is rerun with
// `run_sequence(seed_of(seed, i), ...)`.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "support/kernels.hpp"
#include "support/rng.hpp"
#include "tether.hpp"

namespace tether_model {

using Id = std::uint32_t;
using Ids = std::vector<Id>;

using Rng = tether_test::Rng;  // splitmix64 (tests/support/rng.hpp)

/// The seed of sequence `i` of a run seeded with `seed`.
inline std::uint64_t seed_of(std::uint64_t seed, std::uint64_t i) {
  Rng r(seed ^ (0x5851f42d4c957f2dull * (i + 1)));
  return r.next();
}

// ----------------------------------------------------------------------------- the ledger

/// Who may still use each tracked owner, and what happened to it. Thread-safe: the main thread
/// claims and unclaims; owners are destroyed on tether's reclaimer; host nodes run on the
/// simulator's stream worker.
/// Gates that ran into the documented residual window (see make_gate), over the process.
inline std::atomic<std::uint64_t> window_hits{0};

class Ledger {
 public:
  /// Launch channels: 0 is the checker's stream; shared executables have one each.
  static constexpr std::size_t kChannels = 4;

  Id make() {
    std::lock_guard lock(mu_);
    entries_.emplace_back();
    entries_.back().born = op_now_;
    return static_cast<Id>(entries_.size() - 1);
  }

  /// A consumer may now use `ids` (it must not be destroyed yet). `exec`: an executable.
  void claim(const Ids& ids, std::string_view who, bool exec = false) {
    std::lock_guard lock(mu_);
    for (Id id : ids) {
      Entry& e = entries_[id];
      ++e.refs;
      e.exec = e.exec || exec;
      if (e.destroyed) error_locked(fmt::format("owner {} was destroyed before {} could use it", id, who));
    }
  }
  /// A consumer no longer uses `ids` (before tether is told, so that the release may follow).
  void unclaim(const Ids& ids) {
    std::lock_guard lock(mu_);
    for (Id id : ids) {
      Entry& e = entries_[id];
      if (e.refs == 0)
        error_locked(fmt::format("model error: owner {} unclaimed more often than claimed", id));
      else
        --e.refs;
    }
  }
  /// Launch number `n` of channel `ch` (counted over a stream, or over one shared executable) may
  /// use `ids`.
  void launched(const Ids& ids, std::uint64_t n, std::size_t ch = 0) {
    std::lock_guard lock(mu_);
    for (Id id : ids) {
      Entry& e = entries_[id];
      e.last_launch[ch] = std::max(e.last_launch[ch], n);
      e.exec = true;
      if (e.destroyed)
        error_locked(fmt::format("launch {} uses owner {}, which was already destroyed", n, id));
    }
  }
  /// A host node holding owner `id` runs.
  void ran(Id id) {
    std::lock_guard lock(mu_);
    if (entries_[id].destroyed)
      error_locked(fmt::format("a host node ran after its owner {} was destroyed", id));
  }
  /// `id` is being destroyed (from its destructor, on any thread).
  void destroyed(Id id) {
    const bool draining = tether::detail::draining_here();
    std::lock_guard lock(mu_);
    Entry& e = entries_[id];
    if (e.destroyed++) error_locked(fmt::format("owner {} destroyed twice", id));
    if (!draining) error_locked(fmt::format("owner {} destroyed outside the reclaimer", id));
    if (e.refs) error_locked(fmt::format("owner {} destroyed while {} consumer(s) may use it", id, e.refs));
    for (std::size_t ch = 0; ch < kChannels; ++ch) {
      std::uint64_t done = done_[ch].load(std::memory_order_acquire);
      if (e.last_launch[ch] > done)
        error_locked(fmt::format("owner {} destroyed while launch {} (channel {}) may still use it ({} completed)",
                                 id, e.last_launch[ch], ch, done));
    }
  }

  /// Liveness at a quiescent point (nothing runs, the reclaimer has caught up). `held`: owners that
  /// consumers other than claims keep by design (CUDA's references of live executables to the
  /// versions they were instantiated or whole-updated from); `pending`: superseded per-node
  /// versions that may still be alive (a launch used them and no release was asked for since).
  /// Returns the owners alive that no consumer can use any more (kept beyond the bound), and the
  /// held ones already destroyed.
  std::pair<std::vector<Id>, std::vector<Id>> liveness(const Ids& held, const Ids& pending) const {
    std::lock_guard lock(mu_);
    std::vector<char> mark(entries_.size(), 0);
    for (Id id : held) mark[id] = 1;
    for (Id id : pending) mark[id] = mark[id] ? mark[id] : 2;
    std::vector<Id> kept, lost;
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      const Entry& e = entries_[i];
      if (e.destroyed == 0 && e.refs == 0 && mark[i] == 0) kept.push_back(static_cast<Id>(i));
      if (e.destroyed != 0 && mark[i] == 1) lost.push_back(static_cast<Id>(i));
    }
    return {kept, lost};
  }

  /// Owners not destroyed yet, and owners destroyed more than once.
  std::pair<std::size_t, std::size_t> unsettled() const {
    std::lock_guard lock(mu_);
    std::size_t alive = 0, twice = 0;
    for (const Entry& e : entries_) alive += e.destroyed == 0, twice += e.destroyed > 1;
    return {alive, twice};
  }
  /// The operation during which `id` was made.
  std::uint64_t born(Id id) const {
    std::lock_guard lock(mu_);
    return entries_[id].born;
  }
  std::size_t size() const {
    std::lock_guard lock(mu_);
    return entries_.size();
  }
  std::size_t claimed() const {
    std::lock_guard lock(mu_);
    std::size_t n = 0;
    for (const Entry& e : entries_) n += e.refs > 0;
    return n;
  }
  std::vector<std::string> errors() const {
    std::lock_guard lock(mu_);
    return errors_;
  }
  std::size_t error_count() const {
    std::lock_guard lock(mu_);
    return error_count_;
  }
  void error(std::string msg) {
    std::lock_guard lock(mu_);
    error_locked(std::move(msg));
  }
  /// What the main thread is doing (named in errors found on other threads).
  void set_context(std::string ctx, std::uint64_t op = 0) {
    std::lock_guard lock(mu_);
    context_ = std::move(ctx);
    op_now_ = op;
  }

  /// Launches completed per channel (sink host nodes run).
  std::atomic<std::uint64_t>& done(std::size_t ch) { return done_[ch]; }

 private:
  std::array<std::atomic<std::uint64_t>, kChannels> done_{};

 public:
  /// Launches completed on the model's stream (sink host nodes run).
  std::atomic<std::uint64_t>& completed = done_[0];

 private:
  struct Entry {
    std::uint32_t refs = 0;
    std::uint32_t destroyed = 0;
    std::array<std::uint64_t, kChannels> last_launch{};
    std::uint64_t born = 0;  // the operation that made it
    bool exec = false;  // ever used by an executable or a launch
  };
  void error_locked(std::string msg) {
    ++error_count_;
    if (errors_.size() < 20) errors_.push_back(msg + " [during " + context_ + "]");
  }

  mutable std::mutex mu_;
  std::vector<Entry> entries_;
  std::vector<std::string> errors_;
  std::size_t error_count_ = 0;
  std::string context_;
  std::uint64_t op_now_ = 0;
};

/// A move-only owner with an id in a ledger: its destructor reports to the ledger.
class Tracked {
 public:
  Tracked(std::shared_ptr<Ledger> l, Id id) : l_(std::move(l)), id_(id) {}
  Tracked(Tracked&& o) noexcept : l_(std::move(o.l_)), id_(o.id_) {}
  Tracked& operator=(Tracked&&) = delete;
  ~Tracked() {
    if (l_) l_->destroyed(id_);
  }
  void ran() const {
    if (l_) l_->ran(id_);
  }

 private:
  std::shared_ptr<Ledger> l_;
  Id id_;
};

// ----------------------------------------------------------------------------- the model

enum class Kind : std::uint8_t {
  scale,
  axpy,
  setcond,
  memset,
  memcpy,
  host,
  record,
  wait,
  empty,
  child,
  cond,
  alloc,
  free,
  sink
};

using ScaleNode = tether::Node<tether::KernelNode<float*, float, int>>;
using AxpyNode = tether::Node<tether::KernelNode<float*, const float*, float, int>>;
using CondKernelNode = tether::Node<tether::KernelNode<unsigned long long, unsigned>>;
using Handle = std::variant<std::monostate, ScaleNode, AxpyNode, CondKernelNode,
                            tether::Node<tether::MemsetNode>, tether::Node<tether::MemcpyNode>,
                            tether::Node<tether::HostNode>, tether::Node<tether::EventRecordNode>,
                            tether::Node<tether::EventWaitNode>, tether::Node<tether::EmptyNode>,
                            tether::Node<tether::ChildNode>, tether::Node<tether::ConditionalNode>,
                            tether::Node<tether::MemAllocNode>, tether::Node<tether::MemFreeNode>>;

inline bool has_handle(const Handle& h) {
  return !std::holds_alternative<std::monostate>(h);
}
inline bool handle_valid(const Handle& h) {
  return std::visit(
      [](const auto& n) {
        if constexpr (std::is_same_v<std::decay_t<decltype(n)>, std::monostate>)
          return false;
        else
          return n.valid();
      },
      h);
}
inline tether::Node<> any_of(const Handle& h) {
  return std::visit(
      [](const auto& n) -> tether::Node<> {
        if constexpr (std::is_same_v<std::decay_t<decltype(n)>, std::monostate>)
          return {};
        else
          return tether::Node<>(n);
      },
      h);
}
// The driver's node type (kernels of any signature are one type).
inline int node_type(Kind k) {
  switch (k) {
    case Kind::scale:
    case Kind::axpy:
    case Kind::setcond:
      return 0;
    case Kind::sink:
      return static_cast<int>(Kind::host);
    default:
      return static_cast<int>(k);
  }
}

struct MNode {
  std::uint64_t key = 0;  // unique, increasing in creation order
  Kind kind = Kind::empty;
  Handle h;                // none for nodes copied by embed
  Ids ids;                 // tracked owners of the current version
  std::vector<int> boxes;  // child copy / conditional bodies
  bool fixed = false;      // the sink, a while body's condition setter: never changed by the generator
};

struct MBox {
  int graph = -1;
  int depth = 0;
  bool body = false;  // a conditional body or inside one
  bool alive = false;
  std::vector<MNode> nodes;  // creation order (the driver's order)
  std::set<std::pair<std::uint64_t, std::uint64_t>> edges;
  std::optional<tether::GraphRef> gview;  // the root's ref, or the view of an embedded copy
  std::optional<tether::BodyRef> bview;
  bool editable() const { return gview.has_value() || bview.has_value(); }
};

struct MGraph {
  bool alive = false;
  bool launchable = false;         // has a sink; instantiated and launched
  std::optional<tether::Graph> g;  // dropped for a "headless" graph kept alive by an executable
  int root = -1;
  // Every handle dropped while an executable made from it lives: the definition (and the owners
  // of its current versions) stays alive, unreachable, until the last such executable goes.
  bool held = false;
};

struct MExec {
  bool alive = false;
  bool single_instance = false;  // made while its graph had conditional nodes (CUDA: once at a time)
  std::optional<tether::GraphExec> x;
  int source = -1;
  std::vector<Ids> top;                          // owners used per top-level node (with its nested graphs)
  std::vector<int> types;                        // node type per top-level node
  std::unordered_map<std::uint64_t, int> index;  // source node key -> top-level index
  // Liveness: what the executable keeps besides what it may run now (`top`, claimed).
  std::vector<Ids> base;  // per top-level node: the version CUDA's references hold (instantiate, whole
                          // or child graph update) until a whole update or the executable's end
  struct PerNode {
    Ids ids;            // tracked owners (host callables); kernels, buffers, events are untracked
    bool used = false;  // a launch may have used it
  };
  std::map<int, PerNode> pernode;  // the executable's own version per top-level node (per-node updates)
  struct Retired {
    Ids ids;
    bool asked = false;  // a launch or GraphExec::reclaim came after it was superseded
  };
  std::vector<Retired> retired;  // superseded per-node versions a launch may have used
  std::vector<Retired> unused;   // superseded unused after some launch: must be gone at once (diagnostics)
  std::uint64_t launches = 0;
};

/// Totals of a run.
struct Result {
  std::uint64_t operations = 0;
  std::uint64_t sequences = 0;
  std::uint64_t owners = 0;
  std::uint64_t launches = 0;
  std::uint64_t liveness_checks = 0;  // quiescent points where liveness was checked
  std::vector<std::string> failures;            // "sequence i (seed s): ..." per failing sequence
  std::map<std::string, std::uint64_t> counts;  // operations (and outcomes) by name
};

/// Options of a run.
struct Options {
  std::uint64_t operations = 50000;
  std::uint64_t seed = 1;
  std::uint64_t per_sequence = 400;  // operations per sequence (the last one may be shorter)
  /// Diagnostics only, to look past two library bugs: a per-node version superseded before any
  /// launch used it, after the executable's first launch, may stay until a later launch or reclaim
  /// (instead of going at once); and no tether::reclaim() while a gate may be closed (it frees on
  /// the calling thread, which then blocks while the gate's host callable runs).
  bool lenient = false;
  /// Threads running sequences at once (1: the plain checker; more: run_threads).
  std::uint64_t threads = 1;
};

class Checker {
 public:
  /// How long the gate may hold its stream before the model concludes the application thread is
  /// blocked behind it (500 ms; TETHER_MODEL_GATE_MS overrides, e.g. to attach a debugger).
  static std::chrono::milliseconds gate_limit() {
    static const std::chrono::milliseconds limit{[] {
      const char* s = std::getenv("TETHER_MODEL_GATE_MS");
      long long v = s ? std::atoll(s) : 0;
      return v > 0 ? v : 500;
    }()};
    return limit;
  }

  Checker(const tether::Context& ctx, const tether_test::TestKernels& k, const tether::Stream& s,
          bool lenient = false, bool concurrent = false)
      : ctx_(ctx), k_(k), s_(s), concurrent_(concurrent), lenient_(lenient) {}

  /// One operation on something several threads share (run_threads): chosen with the sequence's
  /// generator, run on this checker's stream (its failures are the shared object's).
  using SharedOp = std::function<void(Rng&, const tether::Stream&, std::uint64_t op,
                                      std::map<std::string, std::uint64_t>& counts)>;

  // The steps of run_sequence, for the threads of run_threads (concurrent checkers): begin, then
  // operations with pause() (stream synchronized) and check_liveness() (after the harness settled
  // everything) at barriers, then end_destroy(), and end_check() once the harness settled again.
  void begin(std::uint64_t seed, Result& totals, SharedOp shared = {}) {
    counts_ = &totals.counts;
    shared_ = std::move(shared);
    start(seed);
  }
  void operation(std::uint64_t i, Result& totals) {
    if (!failures_.empty()) return;
    op_ = i;
    step();
    ++totals.operations;
    check_versions(false);
    check_ledger();
  }
  void pause() {
    if (rng_) sync();
  }
  void end_destroy() {
    if (failures_.empty()) teardown_destroy();
  }
  std::vector<std::string> end_check(Result& totals) {
    if (failures_.empty()) teardown_check();
    totals.owners += ledger_->size();
    totals.launches += launches_;
    totals.liveness_checks += liveness_checks_;
    finish();
    return std::move(failures_);
  }
  bool failed() const { return !failures_.empty(); }

  /// Runs `n` operations of the sequence seeded with `seed`, then tears everything down and checks.
  /// Returns the failures found (empty when the sequence passed).
  std::vector<std::string> run_sequence(std::uint64_t seed, std::uint64_t n, Result& totals) {
    counts_ = &totals.counts;
    start(seed);
    for (std::uint64_t i = 0; i < n && failures_.empty(); ++i) {
      op_ = i;
      step();
      ++totals.operations;
      check_versions(false);
      check_ledger();
    }
    if (failures_.empty()) {
      teardown_destroy();
      teardown_check();
    }
    totals.owners += ledger_->size();
    totals.launches += launches_;
    totals.liveness_checks += liveness_checks_;
    finish();
    return std::move(failures_);
  }

 private:
  // --------------------------------------------------------------------------- sequence life

  void start(std::uint64_t seed) {
    rng_.emplace(seed);
    ledger_ = std::make_shared<Ledger>();
    failures_.clear();
    graphs_.clear();
    boxes_.clear();
    execs_.clear();
    where_.clear();
    launches_ = 0;
    liveness_checks_ = 0;
    next_key_ = 1;
    op_ = 0;
    if (!concurrent_) {
      tether::sim::quiesce();
      tether::wait_reclaimed(std::chrono::seconds(5));
      attachments_ = tether::detail::NodeAttachment::live();
      accumulators_ = tether::detail::ExecAccumulator::live();
      stats_ = tether::sim::stats();
      tether::sim::clear_violations();
    }
    for (int i = 0; i < 4; ++i) pool_.push_back(fresh_buffer(1.0f));
    pinned_ = ctx_.alloc_pinned<float>(4).share();
    events_ = {ctx_.make_event(), ctx_.make_event()};
    make_gate();
  }

  void finish() {
    if (!failures_.empty()) {
      // Leave nothing running for the next sequence (its counts start from here).
      open_gate();
      s_.synchronize();
      gate_exec_.reset();
      execs_.clear();
      graphs_.clear();
      boxes_.clear();
      tether::sim::quiesce(std::chrono::seconds(5));
      tether::wait_reclaimed(std::chrono::seconds(5));
    }
    pool_.clear();
    pinned_ = {};
    events_.clear();
    gate_exec_.reset();
    graphs_.clear();
    boxes_.clear();
    execs_.clear();
    rng_.reset();
  }

  void fail(std::string msg) { failures_.push_back(fmt::format("op {}: {}", op_, msg)); }
  void count(const std::string& what) { ++(*counts_)[what]; }
  static const char* name(Kind k) {
    static const char* const names[] = {
        "kernel (scale)", "kernel (axpy)", "kernel (condition)", "memset", "memcpy",
        "host",           "event record",  "event wait",         "empty",  "child graph",
        "conditional",    "memory alloc",  "memory free",        "sink"};
    return names[static_cast<int>(k)];
  }

  void check_ledger() {
    if (ledger_->error_count() == 0) return;
    for (const std::string& e : ledger_->errors()) fail(e);
  }

  // Destroys everything in a random order; teardown_check drains, and checks that every owner
  // went exactly once.
  void teardown_destroy() {
    ledger_->set_context("teardown");
    std::vector<std::pair<int, int>> order;  // (0 graph | 1 exec, index)
    for (std::size_t i = 0; i < graphs_.size(); ++i)
      if (graphs_[i].alive) order.emplace_back(0, static_cast<int>(i));
    for (std::size_t i = 0; i < execs_.size(); ++i)
      if (execs_[i].alive) order.emplace_back(1, static_cast<int>(i));
    for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng_->below(i)]);
    for (auto [what, i] : order) {
      if (what == 0) {
        if (graphs_[static_cast<std::size_t>(i)].alive) destroy_graph(i);  // (an executable's end may have taken it)
      } else {
        destroy_exec(i);
      }
      if (rng_->chance(0.2) && !(lenient_ && (concurrent_ || !gate_open_->load()))) tether::reclaim();
    }
    open_gate();
    sync();
    gate_exec_.reset();
    pool_.clear();
    pinned_ = {};
    events_.clear();
  }
  void teardown_check() {
    // Bounded waits: the simulator's deferred destructors and the reclaimer.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (;;) {
      tether::sim::quiesce(std::chrono::seconds(5));
      tether::wait_reclaimed(std::chrono::seconds(5));
      auto [alive, twice] = ledger_->unsettled();
      if (alive == 0 || std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    check_ledger();
    auto [alive, twice] = ledger_->unsettled();
    if (alive) fail(fmt::format("{} owner(s) never destroyed after every consumer was gone", alive));
    if (twice) fail(fmt::format("{} owner(s) destroyed more than once", twice));
    if (std::size_t c = ledger_->claimed())
      fail(fmt::format("model error: {} owner(s) still claimed after teardown", c));
    if (concurrent_) return;  // the counts below are the whole process's: the harness checks them
    auto settled = [&] {
      tether::sim::Stats st = tether::sim::stats();
      return tether::detail::NodeAttachment::live() == attachments_ &&
             tether::detail::ExecAccumulator::live() == accumulators_ && st.graphs == stats_.graphs &&
             st.execs == stats_.execs && st.user_objects == stats_.user_objects &&
             st.device_allocations == stats_.device_allocations &&
             st.host_allocations == stats_.host_allocations && st.events == stats_.events;
    };
    while (!settled() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (!settled()) {
      tether::sim::Stats st = tether::sim::stats();
      fail(fmt::format(
          "not back to the start: attachments {} -> {}, accumulators {} -> {}, graphs {} -> {}, execs {} -> "
          "{}, user objects {} -> {}, device allocations {} -> {}, host allocations {} -> {}, events {} -> "
          "{}",
          attachments_, tether::detail::NodeAttachment::live(), accumulators_,
          tether::detail::ExecAccumulator::live(), stats_.graphs, st.graphs, stats_.execs, st.execs,
          stats_.user_objects, st.user_objects, stats_.device_allocations, st.device_allocations,
          stats_.host_allocations, st.host_allocations, stats_.events, st.events));
    }
    for (const tether::sim::Violation& v : tether::sim::violations())
      fail(fmt::format("simulator violation {} in {}: {}", tether::sim::to_string(v.kind), v.entry_point,
                       v.detail));
    tether::sim::clear_violations();
  }

  // --------------------------------------------------------------------------- resources

  tether::SharedBuffer<float> fresh_buffer(float v) {
    tether::SharedBuffer<float> b = ctx_.alloc<float>(4).share();
    std::vector<float> h(4, v);
    b.copy_from(h);
    return b;
  }
  // A pool buffer, or a fresh one that only the node will keep alive.
  tether::SharedBuffer<float> buf() {
    return rng_->chance(0.3) ? fresh_buffer(1.0f) : pool_[rng_->below(pool_.size())];
  }
  tether::Event event() {
    return rng_->chance(0.2) ? ctx_.make_event() : events_[rng_->below(events_.size())];
  }
  float value() { return static_cast<float>(rng_->below(4)); }

  // New tracked owners (0 to 2), for a node version.
  tether::Owners owners(Ids& ids) {
    std::size_t n = rng_->below(3);
    tether::Owners o;
    for (std::size_t i = 0; i < n; ++i) o += tether::Owners{tracked(ids)};
    return o;
  }
  Tracked tracked(Ids& ids) {
    Id id = ledger_->make();
    ids.push_back(id);
    return Tracked(ledger_, id);
  }
  // A host callable owning a tracked owner, checking that it is alive whenever it runs.
  auto host_fn(Ids& ids) {
    return [t = tracked(ids)] { t.ran(); };
  }
  auto sink_fn() {
    return [l = ledger_] { l->completed.fetch_add(1, std::memory_order_acq_rel); };
  }

  // --------------------------------------------------------------------------- the gate

  // A launchable graph whose host node waits for the gate, so that launches queue behind it.
  void make_gate() {
    gate_open_ = std::make_shared<std::atomic<bool>>(true);
    tether::Graph g{ctx_};
    g.edit([&](tether::Edit& e) {
      auto sink = e.host(sink_fn());
      // The application thread opens the gate within a few operations; if it does not within
      // kGateLimit, it is blocked, and this callable is what it waits for (cuMemFree and
      // cuModuleLoadData block while a host callback runs): a liveness failure, which the timeout
      // breaks (named in the failure: the operation that was blocked).
      auto h = e.host([open = gate_open_, l = ledger_] {
        const auto limit = gate_limit();
        auto until = std::chrono::steady_clock::now() + limit;
        while (!open->load() && std::chrono::steady_clock::now() < until)
          std::this_thread::sleep_for(std::chrono::microseconds(50));
        if (open->load()) return;
        // The residual window (docs/design/attachments.md, "Blocking driver calls"): this callable
        // started between the reclaimer's check for running callables and its cuMemFree, which now
        // waits for it, and the application thread's allocation waits behind that free. Counted,
        // not failed: the limitation is documented and measured (docs/reliability.md).
        if (tether::detail::reclaimer_in_blocking_release()) {
          window_hits.fetch_add(1, std::memory_order_relaxed);
          return;
        }
        l->error(fmt::format("liveness: the gate (a host callable the application thread opens) ran for {} ms: "
                             "the application thread was blocked while it ran",
                             limit.count()));
      });
      e.connect(h, sink);
    });
    gate_exec_.emplace(g.instantiate());
  }
  void hold_gate() {
    if (!gate_open_->load()) return;
    gate_open_->store(false);
    gate_exec_->launch(s_);
    ++launches_;
  }
  void open_gate() { gate_open_->store(true); }
  void sync() {
    open_gate();
    s_.synchronize();
    std::uint64_t done = ledger_->completed.load();
    if (done != launches_) fail(fmt::format("model error: {} launches made, {} sinks ran", launches_, done));
  }

  // --------------------------------------------------------------------------- model helpers

  MNode* find(std::uint64_t key) {
    auto it = where_.find(key);
    if (it == where_.end()) return nullptr;
    MBox& b = boxes_[static_cast<std::size_t>(it->second)];
    if (!b.alive) return nullptr;
    for (MNode& n : b.nodes)
      if (n.key == key) return &n;
    return nullptr;
  }

  // Ids used by a node with everything nested in it.
  void collect(const MNode& n, Ids& out) const {
    out.insert(out.end(), n.ids.begin(), n.ids.end());
    for (int b : n.boxes) collect_box(b, out);
  }
  void collect_box(int bi, Ids& out) const {
    const MBox& b = boxes_[static_cast<std::size_t>(bi)];
    if (!b.alive) return;
    for (const MNode& n : b.nodes) collect(n, out);
  }
  Ids graph_ids(int gi) const {
    Ids out;
    collect_box(graphs_[static_cast<std::size_t>(gi)].root, out);
    return out;
  }
  bool has_conditional(int bi) const {
    const MBox& b = boxes_[static_cast<std::size_t>(bi)];
    if (!b.alive) return false;
    for (const MNode& n : b.nodes) {
      if (n.kind == Kind::cond) return true;
      for (int c : n.boxes)
        if (has_conditional(c)) return true;
    }
    return false;
  }
  void kill_box(int bi) {
    MBox& b = boxes_[static_cast<std::size_t>(bi)];
    if (!b.alive) return;
    b.alive = false;
    for (MNode& n : b.nodes)
      for (int c : n.boxes) kill_box(c);
  }
  int new_box(int graph, int depth, bool body) {
    MBox b;
    b.graph = graph;
    b.depth = depth;
    b.body = body;
    boxes_.push_back(std::move(b));
    return static_cast<int>(boxes_.size() - 1);
  }

  // Copies box `src` (a graph being embedded or cloned) into a new box of `graph`, with new keys.
  // `handles`: map a source handle to the copy's (clone), or drop handles (embed).
  int copy_box(int src, int graph, int depth, bool body,
               const std::function<Handle(const Handle&)>& handles) {
    int bi = new_box(graph, depth, body);
    std::unordered_map<std::uint64_t, std::uint64_t> keys;
    std::vector<MNode> nodes;
    for (const MNode& n : boxes_[static_cast<std::size_t>(src)].nodes) {
      MNode c;
      c.key = next_key_++;
      keys[n.key] = c.key;
      c.kind = n.kind;
      c.ids = n.ids;
      c.fixed = n.fixed;
      c.h = handles ? handles(n.h) : Handle{};
      for (int sub : n.boxes) {
        int cb = copy_box(sub, graph, depth + 1, body || n.kind == Kind::cond, handles);
        c.boxes.push_back(cb);
      }
      nodes.push_back(std::move(c));
    }
    MBox& b = boxes_[static_cast<std::size_t>(bi)];
    b.alive = true;
    for (MNode& n : nodes) where_[n.key] = bi;
    b.nodes = std::move(nodes);
    for (auto [f, t] : boxes_[static_cast<std::size_t>(src)].edges) b.edges.emplace(keys.at(f), keys.at(t));
    return bi;
  }

  template <class V>
  std::optional<std::size_t> pick(const V& v, const std::function<bool(const typename V::value_type&)>& ok) {
    std::vector<std::size_t> c;
    for (std::size_t i = 0; i < v.size(); ++i)
      if (ok(v[i])) c.push_back(i);
    if (c.empty()) return std::nullopt;
    return c[rng_->below(c.size())];
  }

  // Compares the library's view of graph `gi` with the model: node counts of editable boxes, and
  // the validity of every handle and view.
  void compare(int gi) {
    for (std::size_t bi = 0; bi < boxes_.size(); ++bi) {
      MBox& b = boxes_[bi];
      if (b.graph != gi) continue;
      bool view_valid = b.gview ? b.gview->valid() : b.bview ? b.bview->valid() : b.alive;
      if (view_valid != b.alive)
        fail(fmt::format("box {}: view valid {} but the model says alive {}", bi, view_valid, b.alive));
      if (!b.alive) continue;
      if (b.editable()) {
        std::size_t count = b.gview ? b.gview->node_count() : b.bview->node_count();
        if (count != b.nodes.size())
          fail(fmt::format("box {}: {} nodes, the model has {}", bi, count, b.nodes.size()));
      }
      for (const MNode& n : b.nodes)
        if (has_handle(n.h) && !handle_valid(n.h))
          fail(fmt::format("node {} of box {}: handle invalid, model alive", n.key, bi));
    }
  }

  // --------------------------------------------------------------------------- the generator

  void step() {
    std::size_t live_graphs = 0, live_execs = 0;
    for (auto& g : graphs_) live_graphs += g.alive;
    for (auto& x : execs_) live_execs += x.alive;
    struct Choice {
      int weight;
      void (Checker::*fn)();
      const char* name;
    };
    const Choice choices[] = {
        {live_graphs < 8 ? 6 : 0, &Checker::op_new_graph, "new graph"},
        {live_graphs ? 40 : 0, &Checker::op_edit, "edit"},
        {live_graphs ? 4 : 0, &Checker::op_clone, "clone"},
        {live_graphs > 2 ? 3 : 0, &Checker::op_destroy_graph, "destroy graph"},
        {live_graphs ? 1 : 0, &Checker::op_drop_handle, "drop a graph handle"},
        {live_graphs && live_execs < 6 ? 7 : 0, &Checker::op_instantiate, "instantiate"},
        {live_execs ? 10 : 0, &Checker::op_launch, "launch"},
        {live_execs ? 8 : 0, &Checker::op_exec_update_node, "per-node executable update"},
        {live_execs ? 4 : 0, &Checker::op_exec_update_whole, "whole executable update"},
        {live_execs ? 2 : 0, &Checker::op_exec_update_child, "child graph executable update"},
        {live_execs ? 1 : 0, &Checker::op_exec_update_foreign,
         "executable update naming another graph's node"},
        {live_execs ? 2 : 0, &Checker::op_enable, "enable/disable"},
        {live_execs ? 1 : 0, &Checker::op_upload, "upload"},
        {live_execs ? 2 : 0, &Checker::op_exec_reclaim, "executable reclaim"},
        {live_execs > 1 ? 3 : 0, &Checker::op_destroy_exec, "destroy executable"},
        {2, &Checker::op_hold, "hold the stream"},
        {4, &Checker::op_sync, "synchronize"},
        {1, &Checker::op_reclaim, "reclaim"},
        {shared_ ? 12 : 0, &Checker::op_shared, "shared executable"},
    };
    int total = 0;
    for (const Choice& c : choices) total += c.weight;
    int r = static_cast<int>(rng_->below(static_cast<std::size_t>(total)));
    for (const Choice& c : choices) {
      if (r < c.weight) {
        ledger_->set_context(fmt::format("op {} ({})", op_, c.name), op_);
        count(c.name);
        try {
          (this->*c.fn)();
        } catch (const std::exception& e) {
          fail(fmt::format("{}: unexpected exception: {}", c.name, e.what()));
        }
        return;
      }
      r -= c.weight;
    }
  }

  void op_new_graph() {
    int gi = static_cast<int>(graphs_.size());
    graphs_.emplace_back();
    MGraph& g = graphs_.back();
    g.alive = true;
    g.launchable = rng_->chance(0.6);
    g.g.emplace(ctx_);
    g.root = new_box(gi, 0, false);
    MBox& b = boxes_[static_cast<std::size_t>(g.root)];
    b.alive = true;
    b.gview = g.g->ref();
    if (g.launchable) {
      // The sink: first node, every other top-level node is connected to it.
      MNode s;
      s.key = next_key_++;
      s.kind = Kind::sink;
      s.fixed = true;
      g.g->edit([&](tether::Edit& e) { s.h = e.host(sink_fn()); });
      where_[s.key] = g.root;
      boxes_[static_cast<std::size_t>(g.root)].nodes.push_back(std::move(s));
    }
  }

  void op_destroy_graph() {
    auto gi = pick(graphs_, [](const MGraph& g) { return g.alive; });
    if (gi) destroy_graph(static_cast<int>(*gi));
  }
  // Whether an executable made from graph `gi` is alive: it keeps the graph's definition.
  bool exec_holds(int gi) const {
    for (const MExec& x : execs_)
      if (x.alive && x.source == gi) return true;
    return false;
  }
  // Drops the Graph and every handle and view into it. The definition dies with them unless an
  // executable made from it lives (it is then `held` until that executable goes).
  void destroy_graph(int gi) {
    MGraph& g = graphs_[static_cast<std::size_t>(gi)];
    const bool held = exec_holds(gi);
    // Unclaimed before the library lets go: the owners are released asynchronously from then on.
    if (!held) ledger_->unclaim(graph_ids(gi));
    for (auto& x : execs_)
      if (x.source == gi) x.index.clear();  // its nodes can no longer be named
    for (std::size_t bi = 0; bi < boxes_.size(); ++bi) {
      MBox& b = boxes_[bi];
      if (b.graph != gi) continue;
      b.gview.reset();
      b.bview.reset();
      for (MNode& n : b.nodes) n.h = {};
    }
    g.g.reset();
    g.alive = false;
    g.held = held;
    if (!held) clear_graph(gi);
  }
  // A held definition's last executable is about to go: unclaim first (see destroy_graph).
  void finish_graph(int gi) {
    ledger_->unclaim(graph_ids(gi));
    clear_graph(gi);
    graphs_[static_cast<std::size_t>(gi)].held = false;
  }
  void clear_graph(int gi) {
    for (std::size_t bi = 0; bi < boxes_.size(); ++bi) {
      MBox& b = boxes_[bi];
      if (b.graph != gi) continue;
      b.alive = false;
      b.nodes.clear();
      b.edges.clear();
    }
  }

  void op_drop_handle() {
    // The Graph goes; views and node handles do not own, so the hierarchy lives on (headless, still
    // editable through its views) only while an executable made from it does.
    auto gi = pick(graphs_, [](const MGraph& g) { return g.alive && g.g.has_value(); });
    if (!gi) return;
    if (!exec_holds(static_cast<int>(*gi))) {
      // The model drops its views with the graph: copies of them must be invalid afterwards.
      const int g = static_cast<int>(*gi);
      struct Kept {
        std::size_t box;
        std::optional<tether::GraphRef> gview;
        std::optional<tether::BodyRef> bview;
      };
      std::vector<Kept> kept;
      for (std::size_t bi = 0; bi < boxes_.size(); ++bi)
        if (boxes_[bi].graph == g && boxes_[bi].editable()) kept.push_back({bi, boxes_[bi].gview, boxes_[bi].bview});
      destroy_graph(g);
      for (const Kept& k : kept)
        if (k.gview ? k.gview->valid() : k.bview->valid())
          fail(fmt::format("box {}: a view is still valid after its graph was dropped", k.box));
      return;
    }
    graphs_[*gi].g.reset();
    compare(static_cast<int>(*gi));
  }

  void op_clone() {
    auto gi = pick(graphs_, [](const MGraph& g) { return g.alive && g.g.has_value(); });
    if (!gi) return;
    const int src = static_cast<int>(*gi);
    const bool refused = has_conditional(graphs_[*gi].root);
    std::optional<tether::Graph> c;
    try {
      c.emplace(graphs_[*gi].g->clone());
    } catch (const tether::DriverError& e) {
      if (!refused || e.code() != tether::Errc::not_supported)
        fail(fmt::format("clone failed: {}", e.what()));
      count("clone refused (conditional nodes)");
      compare(src);
      return;
    }
    if (refused) fail("clone of a graph with a conditional node succeeded");
    int ci = static_cast<int>(graphs_.size());
    graphs_.emplace_back();
    MGraph& m = graphs_.back();
    m.alive = true;
    m.launchable = graphs_[*gi].launchable;
    tether::Graph& cg = *c;
    auto map = [&](const Handle& h) -> Handle {
      return std::visit(
          [&](const auto& n) -> Handle {
            if constexpr (std::is_same_v<std::decay_t<decltype(n)>, std::monostate>)
              return Handle{};
            else
              return cg.find(n);
          },
          h);
    };
    m.root = copy_box(graphs_[*gi].root, ci, 0, false, map);
    boxes_[static_cast<std::size_t>(m.root)].gview = cg.ref();
    m.g = std::move(c);
    ledger_->claim(graph_ids(ci), "a clone");
    compare(ci);
    compare(src);
  }

  // --------------------------------------------------------------------------- edits

  struct Cand {
    std::uint64_t key;
    int box;
    Kind kind;
    Handle h;
    bool fixed;
  };
  struct Op {
    enum Type { add, update, remove, connect, disconnect } type = add;
    int box = -1;
    MNode node;                       // add
    std::vector<std::uint64_t> deps;  // add
    std::uint64_t a = 0, b = 0;       // update/remove: a; connect/disconnect: a -> b
    Ids ids;                          // update
  };
  static Op make_op(typename Op::Type t) {
    Op op;
    op.type = t;
    return op;
  }
  struct EditState {
    int graph;
    std::vector<Cand> cands;   // nodes with handles (pre-edit and added in this edit)
    std::vector<int> boxes;    // boxes of the hierarchy one can insert into (pre-edit and new)
    std::vector<int> pending;  // boxes made in this edit
    std::map<int, std::set<std::pair<std::uint64_t, std::uint64_t>>> edges;  // the driver's edges now
    std::vector<Op> ops;
    std::uint64_t first_key = 0;  // nodes added in this edit have keys from here
  };

  void op_edit() {
    auto gi = pick(graphs_, [](const MGraph& g) { return g.alive; });
    if (!gi) return;
    const int g = static_cast<int>(*gi);
    EditState st;
    st.graph = g;
    st.first_key = next_key_;
    for (std::size_t bi = 0; bi < boxes_.size(); ++bi) {
      MBox& b = boxes_[bi];
      if (b.graph != g || !b.alive) continue;
      st.boxes.push_back(static_cast<int>(bi));
      for (const MNode& n : b.nodes)
        if (has_handle(n.h)) st.cands.push_back({n.key, static_cast<int>(bi), n.kind, n.h, n.fixed});
    }
    // Open the edit on the root (mostly) or on the view of a child graph or body.
    std::vector<int> views;
    for (int bi : st.boxes)
      if (boxes_[static_cast<std::size_t>(bi)].editable()) views.push_back(bi);
    int at = graphs_[*gi].root;
    if (rng_->chance(0.2) && !views.empty()) at = views[rng_->below(views.size())];
    MBox& ab = boxes_[static_cast<std::size_t>(at)];
    if (ab.bview) {
      tether::BodyEdit e = ab.bview->edit();
      run_edit(e, st);
    } else {
      tether::Edit e = ab.gview->edit();
      run_edit(e, st);
    }
  }

  template <class E>
  void run_edit(E& e, EditState& st) {
    const int nops = 1 + static_cast<int>(rng_->below(6));
    for (int i = 0; i < nops; ++i) edit_op(e, st);
    if (rng_->chance(0.1)) {
      count("edit rolled back");
      e.rollback();  // or dropping the edit: every change undone, the new owners released
      for (int bi : st.pending) kill_box(bi);
      for (const Op& op : st.ops)
        if (op.type == Op::add && has_handle(op.node.h) && handle_valid(op.node.h))
          fail(fmt::format("node {} added in a rolled back edit is still valid", op.node.key));
      compare(st.graph);
      return;
    }
    // The model of the commit: the operations in order; removals, then, take effect in order too.
    Ids before = graph_ids(st.graph);
    apply(st);
    Ids after = graph_ids(st.graph);
    auto [gone, came] = difference(before, after);
    ledger_->unclaim(gone);
    count("edit committed");
    e.commit();
    ledger_->claim(came, "a graph");
    compare(st.graph);
    for (const Cand& c : st.cands)
      if (handle_valid(c.h) != (find(c.key) != nullptr))
        fail(fmt::format("node {}: handle valid {}, but the model says {}", c.key, handle_valid(c.h),
                         find(c.key) ? "alive" : "gone"));
  }

  static std::pair<Ids, Ids> difference(Ids a, Ids b) {
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    Ids gone, came;
    std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(gone));
    std::set_difference(b.begin(), b.end(), a.begin(), a.end(), std::back_inserter(came));
    return {gone, came};
  }

  void apply(EditState& st) {
    for (Op& op : st.ops) {
      switch (op.type) {
        case Op::add: {
          MBox& b = boxes_[static_cast<std::size_t>(op.box)];
          if (!b.alive) break;  // its graph was removed earlier in the edit: the node went with it
          for (int c : op.node.boxes) revive(c);
          for (std::uint64_t d : op.deps)
            if (find(d)) b.edges.emplace(d, op.node.key);
          where_[op.node.key] = op.box;
          b.nodes.push_back(op.node);
          break;
        }
        case Op::update:
          if (MNode* n = find(op.a)) n->ids = op.ids;
          break;
        case Op::remove:
          if (MNode* n = find(op.a)) {
            MBox& b = boxes_[static_cast<std::size_t>(where_[op.a])];
            for (int c : n->boxes) kill_box(c);
            for (auto it = b.edges.begin(); it != b.edges.end();)
              it = (it->first == op.a || it->second == op.a) ? b.edges.erase(it) : std::next(it);
            std::erase_if(b.nodes, [&](const MNode& x) { return x.key == op.a; });
          }
          break;
        case Op::connect:
          if (find(op.a) && find(op.b))
            boxes_[static_cast<std::size_t>(where_[op.a])].edges.emplace(op.a, op.b);
          break;
        case Op::disconnect:
          if (find(op.a) && find(op.b))
            boxes_[static_cast<std::size_t>(where_[op.a])].edges.erase({op.a, op.b});
          break;
      }
    }
  }
  // A box made in this edit becomes alive with its node (and so do the boxes nested in it).
  void revive(int bi) {
    MBox& b = boxes_[static_cast<std::size_t>(bi)];
    b.alive = true;
    for (MNode& n : b.nodes)
      for (int c : n.boxes) revive(c);
  }

  // The driver's edges of box `bi` now (the model's plus this edit's changes).
  std::set<std::pair<std::uint64_t, std::uint64_t>>& edges_now(EditState& st, int bi) {
    auto it = st.edges.find(bi);
    if (it == st.edges.end()) it = st.edges.emplace(bi, boxes_[static_cast<std::size_t>(bi)].edges).first;
    return it->second;
  }
  const MBox& box(int bi) const { return boxes_[static_cast<std::size_t>(bi)]; }
  bool launchable_root(const EditState& st, int bi) const {
    return graphs_[static_cast<std::size_t>(st.graph)].launchable &&
           graphs_[static_cast<std::size_t>(st.graph)].root == bi;
  }

  template <class E>
  void edit_op(E& e, EditState& st) {
    std::size_t r = rng_->below(100);
    if (r < 45) return edit_add(e, st);
    if (r < 65) return edit_update(e, st);
    if (r < 78) return edit_remove(e, st);
    if (r < 85) return edit_connect(e, st);
    if (r < 90) return edit_disconnect(e, st);
    if (r < 95) return edit_embed(e, st);
    if (r < 97) return edit_replace(e, st);
    return edit_conditional(e, st);
  }

  // An insertion point in box `bi`: after 0-2 nodes of it, or at its top through its view.
  template <class E, class F>
  bool insert(E& e, EditState& st, int bi, std::vector<std::uint64_t>& deps, F&& f) {
    std::vector<tether::Node<>> d;
    for (const Cand& c : st.cands)
      if (c.box == bi && c.kind != Kind::sink && d.size() < 2 && rng_->chance(0.3)) {
        d.push_back(any_of(c.h));
        deps.push_back(c.key);
      }
    if (d.empty()) {
      const MBox& b = box(bi);
      if (b.bview) {
        f(e.in(*b.bview));
        return true;
      }
      if (b.gview) {
        f(e.in(*b.gview));
        return true;
      }
      return false;
    }
    if (d.size() == 1)
      f(e.after(d[0]));
    else
      f(e.after(d[0], d[1]));
    return true;
  }

  // Records node `n` (made in box `bi` after `deps`) as an operation of the edit; a top-level node
  // of a launchable graph is connected to the sink.
  template <class E>
  std::uint64_t added(E& e, EditState& st, int bi, MNode n, const std::vector<std::uint64_t>& deps) {
    count(std::string("edit: add ") + name(n.kind) +
          (box(bi).body    ? " in a body"
           : box(bi).depth ? " in a child graph"
                           : ""));
    n.key = next_key_++;
    const std::uint64_t key = n.key;
    auto& edges = edges_now(st, bi);
    for (std::uint64_t d : deps) edges.emplace(d, key);
    if (has_handle(n.h)) st.cands.push_back({key, bi, n.kind, n.h, n.fixed});
    Op op = make_op(Op::add);
    op.box = bi;
    op.deps = deps;
    const Handle h = n.h;
    op.node = std::move(n);
    st.ops.push_back(std::move(op));
    if (launchable_root(st, bi)) {
      const MNode& sink = box(bi).nodes.front();
      e.connect(any_of(h), any_of(sink.h));
      edges.emplace(key, sink.key);
      Op c = make_op(Op::connect);
      c.a = key;
      c.b = sink.key;
      st.ops.push_back(std::move(c));
    }
    return key;
  }

  // A box of the edited hierarchy to insert into (memory nodes: the top of a launchable graph).
  std::optional<int> insertion_box(EditState& st, bool memory) {
    std::vector<int> c;
    for (int bi : st.boxes) {
      const MBox& b = box(bi);
      if (b.depth > 3) continue;
      if (memory && !launchable_root(st, bi)) continue;
      c.push_back(bi);
    }
    if (c.empty()) return std::nullopt;
    return c[rng_->below(c.size())];
  }

  template <class E>
  void edit_add(E& e, EditState& st) {
    const bool memory = graphs_[static_cast<std::size_t>(st.graph)].launchable && rng_->chance(0.06);
    auto bi = insertion_box(st, memory);
    if (!bi) return;
    if constexpr (std::is_same_v<E, tether::Edit>)
      if (memory) {
        // A graph memory allocation and its free (top level of a launchable graph only). Nothing
        // reads the memory: the simulator backs it only while the allocation node exists.
        // Both fixed: a graph whose allocation is not freed inside it cannot be relaunched.
        MNode a, f;
        a.kind = Kind::alloc;
        f.kind = Kind::free;
        a.fixed = f.fixed = true;
        auto r = e.in(*box(*bi).gview).keeping(owners(a.ids)).template alloc<float>(4);
        a.h = r.node;
        f.h = e.after(r.node).keeping(owners(f.ids)).free(r.memory);
        std::uint64_t ak = added(e, st, *bi, std::move(a), {});
        added(e, st, *bi, std::move(f), {ak});
        return;
      }
    // Conditional bodies take kernel, memset, memcpy and empty nodes (and child graphs and
    // conditionals: edit_embed, edit_conditional); other graphs every kind.
    const bool body = box(*bi).body;
    const std::size_t kind = rng_->below(body ? 5 : 9);
    std::vector<std::uint64_t> deps;
    MNode n;
    bool ok = insert(e, st, *bi, deps, [&](auto&& ins) {
      switch (kind) {
        case 0:
          n.kind = Kind::scale;
          n.h = std::move(ins)
                    .keeping(owners(n.ids))
                    .launch(k_.scale, tether::Grid{1}, tether::Block{4}, buf(), value(), 4);
          break;
        case 1:
          n.kind = Kind::axpy;
          n.h = std::move(ins)
                    .keeping(owners(n.ids))
                    .launch(k_.axpy, tether::Grid{1}, tether::Block{4}, buf(), buf(), value(), 4);
          break;
        case 2:
          n.kind = Kind::memset;
          if (rng_->chance(0.3))
            n.h = std::move(ins).keeping(owners(n.ids)).memset(ctx_.alloc<float>(4), value());
          else
            n.h = std::move(ins).keeping(owners(n.ids)).memset(buf(), value());
          break;
        case 3:
          n.kind = Kind::memcpy;
          if (rng_->chance(0.2))
            n.h = std::move(ins).keeping(owners(n.ids)).memcpy(buf(), pinned_);
          else
            n.h = std::move(ins).keeping(owners(n.ids)).memcpy(buf(), buf());
          break;
        case 4:
          n.kind = Kind::empty;
          n.h = std::move(ins).keeping(owners(n.ids)).empty();
          break;
        case 5:
        case 6:
          n.kind = Kind::host;
          n.h = std::move(ins).keeping(owners(n.ids)).host(host_fn(n.ids));
          break;
        case 7:
          n.kind = Kind::record;
          n.h = std::move(ins).keeping(owners(n.ids)).record(event());
          break;
        default:
          n.kind = Kind::wait;
          n.h = std::move(ins).keeping(owners(n.ids)).wait(event());
          break;
      }
    });
    if (ok) added(e, st, *bi, std::move(n), deps);
  }

  template <class E>
  void edit_update(E& e, EditState& st) {
    auto ci = pick(st.cands, [](const Cand& c) {
      return !c.fixed && (c.kind == Kind::scale || c.kind == Kind::axpy || c.kind == Kind::memset ||
                          c.kind == Kind::memcpy || c.kind == Kind::host || c.kind == Kind::record ||
                          c.kind == Kind::wait);
    });
    if (!ci) return;
    const Cand c = st.cands[*ci];
    Op op = make_op(Op::update);
    op.a = c.key;
    switch (c.kind) {
      case Kind::scale:
        e.update(std::get<ScaleNode>(c.h), tether::Grid{1}, tether::Block{4}, buf(), value(), 4);
        break;
      case Kind::axpy:
        e.update(std::get<AxpyNode>(c.h), tether::Grid{1}, tether::Block{4}, buf(), buf(), value(), 4);
        break;
      case Kind::memset:
        if (rng_->chance(0.3))
          e.update(std::get<tether::Node<tether::MemsetNode>>(c.h), ctx_.alloc<float>(4), value());
        else
          e.update(std::get<tether::Node<tether::MemsetNode>>(c.h), buf(), value());
        break;
      case Kind::memcpy:
        e.update(std::get<tether::Node<tether::MemcpyNode>>(c.h), buf(), buf());
        break;
      case Kind::host:
        e.update(std::get<tether::Node<tether::HostNode>>(c.h), host_fn(op.ids));
        break;
      case Kind::record:
        e.update(std::get<tether::Node<tether::EventRecordNode>>(c.h), event());
        break;
      case Kind::wait:
        e.update(std::get<tether::Node<tether::EventWaitNode>>(c.h), event());
        break;
      default:
        return;
    }
    count(std::string("edit: update ") + name(c.kind));
    st.ops.push_back(std::move(op));
  }

  template <class E>
  void edit_remove(E& e, EditState& st) {
    auto ci = pick(st.cands, [](const Cand& c) { return !c.fixed; });
    if (!ci) return;
    const Cand c = st.cands[*ci];
    std::visit(
        [&](const auto& n) {
          if constexpr (!std::is_same_v<std::decay_t<decltype(n)>, std::monostate>) e.remove(n);
        },
        c.h);
    Op op = make_op(Op::remove);
    op.a = c.key;
    st.ops.push_back(std::move(op));
    count(std::string("edit: remove ") + name(c.kind));
  }

  // Whether `to` is reachable from `from` over `edges`.
  static bool reaches(const std::set<std::pair<std::uint64_t, std::uint64_t>>& edges, std::uint64_t from,
                      std::uint64_t to) {
    std::vector<std::uint64_t> todo{from};
    std::set<std::uint64_t> seen;
    while (!todo.empty()) {
      std::uint64_t n = todo.back();
      todo.pop_back();
      if (n == to) return true;
      if (!seen.insert(n).second) continue;
      for (auto it = edges.lower_bound({n, 0}); it != edges.end() && it->first == n; ++it)
        todo.push_back(it->second);
    }
    return false;
  }

  template <class E>
  void edit_connect(E& e, EditState& st) {
    // Any two nodes of one graph (never the sink, which every top-level node already precedes)
    // whose edge keeps the graph acyclic.
    auto ci = pick(st.cands, [](const Cand& c) { return c.kind != Kind::sink; });
    if (!ci) return;
    const Cand a = st.cands[*ci];
    auto& edges = edges_now(st, a.box);
    auto cj = pick(st.cands, [&](const Cand& c) {
      return c.box == a.box && c.key != a.key && c.kind != Kind::sink && !edges.count({a.key, c.key}) &&
             !reaches(edges, c.key, a.key);
    });
    if (!cj) return;
    const Cand b = st.cands[*cj];
    e.connect(any_of(a.h), any_of(b.h));
    count("edit: connect");
    edges.emplace(a.key, b.key);
    Op op = make_op(Op::connect);
    op.a = a.key;
    op.b = b.key;
    st.ops.push_back(std::move(op));
  }

  template <class E>
  void edit_disconnect(E& e, EditState& st) {
    auto ci = pick(st.cands, [](const Cand& c) { return !c.fixed; });
    if (!ci) return;
    const Cand a = st.cands[*ci];
    auto& edges = edges_now(st, a.box);
    auto cj = pick(st.cands, [&](const Cand& c) { return c.box == a.box && !c.fixed && edges.count({a.key, c.key}); });
    if (!cj) return;
    const Cand b = st.cands[*cj];
    e.disconnect(any_of(a.h), any_of(b.h));
    count("edit: disconnect");
    edges.erase({a.key, b.key});
    Op op = make_op(Op::disconnect);
    op.a = a.key;
    op.b = b.key;
    st.ops.push_back(std::move(op));
  }

  // Whether a box holds only node kinds a conditional body may hold (recursively).
  bool body_safe(int bi) const {
    const MBox& b = box(bi);
    for (const MNode& n : b.nodes) {
      if (n.kind == Kind::host || n.kind == Kind::record || n.kind == Kind::wait || n.kind == Kind::alloc ||
          n.kind == Kind::free || n.kind == Kind::sink)
        return false;
      for (int c : n.boxes)
        if (!body_safe(c)) return false;
    }
    return true;
  }

  template <class E>
  void edit_embed(E& e, EditState& st) {
    // Sources: graphs that are not launchable (no sink), with their Graph, without conditionals.
    const MGraph* self = &graphs_[static_cast<std::size_t>(st.graph)];
    auto si = pick(graphs_, [&](const MGraph& g) {
      return g.alive && !g.launchable && g.g.has_value() && &g != self && !has_conditional(g.root);
    });
    if (!si) return;
    const int src = static_cast<int>(*si);
    auto bi = insertion_box(st, false);
    if (!bi || box(*bi).depth > 2) return;
    if (box(*bi).body && !body_safe(graphs_[static_cast<std::size_t>(src)].root)) return;
    std::vector<std::uint64_t> deps;
    MNode n;
    n.kind = Kind::child;
    tether::EmbedResult r;
    bool ok = insert(e, st, *bi, deps, [&](auto&& ins) {
      r = std::move(ins).keeping(owners(n.ids)).embed(*graphs_[static_cast<std::size_t>(src)].g);
    });
    if (!ok) return;
    n.h = r.node;
    const MBox& target = box(*bi);
    int cb =
        copy_box(graphs_[static_cast<std::size_t>(src)].root, st.graph, target.depth + 1, target.body, {});
    boxes_[static_cast<std::size_t>(cb)].gview = r.graph;
    mark_pending(st, cb);
    n.boxes.push_back(cb);
    added(e, st, *bi, std::move(n), deps);
  }
  // Edit::replace: a new child node embedding another graph, after the old node's dependencies
  // and before its dependents; the old node is removed at commit.
  template <class E>
  void edit_replace(E& e, EditState& st) {
    auto ci = pick(st.cands, [](const Cand& c) { return c.kind == Kind::child; });
    if (!ci) return;
    const Cand old = st.cands[*ci];
    const MGraph* self = &graphs_[static_cast<std::size_t>(st.graph)];
    auto si = pick(graphs_, [&](const MGraph& g) {
      return g.alive && !g.launchable && g.g.has_value() && &g != self && !has_conditional(g.root);
    });
    if (!si) return;
    const int src = static_cast<int>(*si);
    if (box(old.box).body && !body_safe(graphs_[static_cast<std::size_t>(src)].root)) return;
    auto& edges = edges_now(st, old.box);
    std::vector<std::uint64_t> deps, dependents;
    for (auto [f, t] : edges) {
      if (t == old.key) deps.push_back(f);
      if (f == old.key) dependents.push_back(t);
    }
    // replace() refuses a node with edges to nodes added in the same edit ("commit them first").
    for (std::uint64_t k : deps)
      if (k >= st.first_key) return;
    for (std::uint64_t k : dependents)
      if (k >= st.first_key) return;
    MNode n;
    n.kind = Kind::child;
    tether::EmbedResult r = e.replace(std::get<tether::Node<tether::ChildNode>>(old.h),
                                      *graphs_[static_cast<std::size_t>(src)].g);
    n.h = r.node;
    const MBox& target = box(old.box);
    int cb =
        copy_box(graphs_[static_cast<std::size_t>(src)].root, st.graph, target.depth + 1, target.body, {});
    boxes_[static_cast<std::size_t>(cb)].gview = r.graph;
    mark_pending(st, cb);
    n.boxes.push_back(cb);
    // Recorded as an embed after the dependencies, edges to the dependents (the sink among them),
    // and the removal of the old node.
    n.key = next_key_++;
    const std::uint64_t key = n.key;
    for (std::uint64_t d : deps) edges.emplace(d, key);
    st.cands.push_back({key, old.box, n.kind, n.h, false});
    Op add = make_op(Op::add);
    add.box = old.box;
    add.deps = deps;
    add.node = std::move(n);
    st.ops.push_back(std::move(add));
    for (std::uint64_t d : dependents) {
      edges.emplace(key, d);
      Op c = make_op(Op::connect);
      c.a = key;
      c.b = d;
      st.ops.push_back(std::move(c));
    }
    Op rm = make_op(Op::remove);
    rm.a = old.key;
    st.ops.push_back(std::move(rm));
    count("edit: replace a child graph node");
  }

  // A box made in this edit: dead until the commit publishes its node; insertable now.
  void mark_pending(EditState& st, int bi) {
    MBox& b = boxes_[static_cast<std::size_t>(bi)];
    b.alive = false;
    for (MNode& n : b.nodes)
      for (int c : n.boxes) mark_pending(st, c);
    st.pending.push_back(bi);
    if (b.editable()) st.boxes.push_back(bi);
  }

  template <class E>
  void edit_conditional(E& e, EditState& st) {
    if (!graphs_[static_cast<std::size_t>(st.graph)].launchable) return;
    // At the top of a launchable graph or in a body (not in embedded copies).
    std::vector<int> c;
    for (int bi : st.boxes) {
      const MBox& b = box(bi);
      if (b.depth <= 2 && (bi == graphs_[static_cast<std::size_t>(st.graph)].root || b.bview))
        c.push_back(bi);
    }
    if (c.empty()) return;
    const int bi = c[rng_->below(c.size())];
    std::vector<std::uint64_t> deps;
    MNode n;
    n.kind = Kind::cond;
    const std::size_t type = rng_->below(4);
    const unsigned cases = 1 + static_cast<unsigned>(rng_->below(3));
    bool setter = false;
    std::uint64_t handle = 0;
    std::vector<tether::BodyRef> bodies;
    bool ok = insert(e, st, bi, deps, [&](auto&& ins) {
      switch (type) {
        case 0: {
          tether::Condition cd = ins.condition(static_cast<unsigned>(rng_->below(2)));
          auto r = std::move(ins).keeping(owners(n.ids)).if_(cd);
          n.h = r.node;
          bodies = {r.then_};
          break;
        }
        case 1: {
          tether::Condition cd = ins.condition(static_cast<unsigned>(rng_->below(2)));
          auto r = std::move(ins).keeping(owners(n.ids)).if_else(cd);
          n.h = r.node;
          bodies = {r.then_, r.else_};
          break;
        }
        case 2: {
          // A while loop whose body runs once: a fixed node of the body clears the condition.
          setter = rng_->chance(0.7);
          tether::Condition cd = ins.condition(setter ? 1u : 0u);
          handle = cd.handle();
          auto r = std::move(ins).keeping(owners(n.ids)).while_(cd);
          n.h = r.node;
          bodies = {r.body};
          break;
        }
        default: {
          tether::Condition cd = ins.condition(static_cast<unsigned>(rng_->below(cases + 1)));
          auto r = std::move(ins).keeping(owners(n.ids)).switch_(cd, cases);
          n.h = r.node;
          bodies = r.cases;
          break;
        }
      }
    });
    if (!ok) return;
    const MBox& target = box(bi);
    const int depth = target.depth + 1;
    for (tether::BodyRef& b : bodies) {
      int nb = new_box(st.graph, depth, true);
      boxes_[static_cast<std::size_t>(nb)].bview = b;
      n.boxes.push_back(nb);
      st.pending.push_back(nb);
      st.boxes.push_back(nb);
    }
    const std::vector<int> made = n.boxes;
    added(e, st, bi, std::move(n), deps);
    if (setter) {
      MNode s;
      s.kind = Kind::setcond;
      s.fixed = true;
      s.h = e.in(bodies[0]).launch(k_.set_condition, tether::Grid{1}, tether::Block{1}, handle, 0u);
      added(e, st, made[0], std::move(s), {});
    }
    // A node in some of the bodies right away.
    for (int nb : made) {
      if (!rng_->chance(0.6)) continue;
      MNode m;
      m.kind = Kind::scale;
      m.h = e.in(*box(nb).bview)
                .keeping(owners(m.ids))
                .launch(k_.scale, tether::Grid{1}, tether::Block{4}, buf(), value(), 4);
      added(e, st, nb, std::move(m), {});
    }
  }

  // --------------------------------------------------------------------------- executables

  void op_instantiate() {
    auto gi = pick(graphs_, [](const MGraph& g) { return g.alive && g.launchable && g.g.has_value(); });
    if (!gi) return;
    const int g = static_cast<int>(*gi);
    // CUDA instantiates a graph with conditional nodes once at a time; tether refuses before it.
    bool conditional = false;
    for (const MNode& n : box(graphs_[*gi].root).nodes) conditional = conditional || n.kind == Kind::cond;
    bool busy = false;
    for (const MExec& e : execs_) busy = busy || (e.alive && e.source == g && e.single_instance);
    if (conditional && busy) {
      bool refused = false;
      try {
        (void)graphs_[*gi].g->instantiate();
      } catch (const tether::UsageError&) {
        refused = true;
      }
      if (!refused) fail("a second executable of a graph with conditional nodes was not refused");
      return;
    }
    MExec x;
    x.alive = true;
    x.source = g;
    x.single_instance = conditional;
    snapshot(g, x.top, x.types);
    const MBox& root = box(graphs_[*gi].root);
    for (std::size_t i = 0; i < root.nodes.size(); ++i)
      if (has_handle(root.nodes[i].h)) x.index[root.nodes[i].key] = static_cast<int>(i);
    try {
      if (rng_->chance(0.2)) {
        tether::InstantiateOptions o;
        o.upload = &s_;
        x.x.emplace(graphs_[*gi].g->instantiate(o));
      } else {
        x.x.emplace(graphs_[*gi].g->instantiate());
      }
    } catch (const tether::UsageError& e) {
      // An executable of it dropped where CUDA calls are forbidden is still being destroyed on the
      // reclaimer (documented; the application retries after tether::wait_reclaimed()).
      if (!conditional || std::string_view(e.what()).find("not destroyed yet") == std::string_view::npos) throw;
      return;
    }
    for (const Ids& ids : x.top) ledger_->claim(ids, "an executable", true);
    x.base = x.top;
    execs_.push_back(std::move(x));
  }

  // Owners per top-level node of graph g, and the node types.
  void snapshot(int g, std::vector<Ids>& top, std::vector<int>& types) const {
    const MBox& root = box(graphs_[static_cast<std::size_t>(g)].root);
    top.clear();
    types.clear();
    for (const MNode& n : root.nodes) {
      Ids ids;
      collect(n, ids);
      top.push_back(std::move(ids));
      types.push_back(node_type(n.kind));
    }
  }

  std::optional<std::size_t> live_exec() {
    return pick(execs_, [](const MExec& x) { return x.alive; });
  }

  void op_launch() {
    auto xi = live_exec();
    if (!xi) return;
    MExec& x = execs_[*xi];
    x.x->launch(s_);
    ++launches_;
    ++x.launches;
    Ids all;
    for (const Ids& ids : x.top) all.insert(all.end(), ids.begin(), ids.end());
    ledger_->launched(all, launches_);
    launched(x);
  }
  // The model of a launch of x: every version it runs is used; a marker follows the launch.
  static void launched(MExec& x) {
    for (auto& [i, p] : x.pernode) p.used = true;
    asked(x);
  }
  static void asked(MExec& x) {
    for (MExec::Retired& r : x.retired) r.asked = true;
    for (MExec::Retired& r : x.unused) r.asked = true;
  }
  // A per-node update of node i was applied: its previous per-node version goes at once if no
  // launch used it, else once a later launch or reclaim has run.
  static void supersede(MExec& x, int i, Ids ids) {
    auto it = x.pernode.find(i);
    if (it != x.pernode.end())
      (it->second.used ? x.retired : x.unused).push_back({std::move(it->second.ids), false});
    x.pernode[i] = {std::move(ids), false};
  }
  static void supersede_all(MExec& x) {
    for (auto& [i, p] : x.pernode) (p.used ? x.retired : x.unused).push_back({std::move(p.ids), false});
    x.pernode.clear();
  }

  void op_upload() {
    auto xi = live_exec();
    if (xi) execs_[*xi].x->upload(s_);
  }

  void op_exec_reclaim() {
    auto xi = live_exec();
    if (!xi) return;
    execs_[*xi].x->reclaim(s_);
    asked(execs_[*xi]);
  }

  void op_destroy_exec() {
    auto xi = live_exec();
    if (xi) destroy_exec(static_cast<int>(*xi));
  }
  void destroy_exec(int xi) {
    MExec& x = execs_[static_cast<std::size_t>(xi)];
    x.alive = false;
    // The executable kept its source graph: a graph no Graph handle owns goes with the last one,
    // and is settled in the model before the executable lets go of it.
    const int gi = x.source;
    if (gi >= 0 && !exec_holds(gi)) {
      MGraph& g = graphs_[static_cast<std::size_t>(gi)];
      if (g.held)
        finish_graph(gi);
      else if (g.alive && !g.g)
        destroy_graph(gi);
    }
    for (const Ids& ids : x.top) ledger_->unclaim(ids);
    x.x.reset();
    x.top.clear();
    x.base.clear();
    x.pernode.clear();
    x.retired.clear();
    x.unused.clear();
  }

  // A top-level node of the source, still there, that the executable has (per-node updates name
  // nodes of the graph it was instantiated from).
  std::optional<std::pair<MNode*, int>> exec_node(MExec& x, const std::function<bool(Kind)>& ok) {
    std::vector<std::pair<MNode*, int>> c;
    const MGraph& g = graphs_[static_cast<std::size_t>(x.source)];
    if (!g.alive) return std::nullopt;
    for (MNode& n : boxes_[static_cast<std::size_t>(g.root)].nodes) {
      auto it = x.index.find(n.key);
      if (it == x.index.end() || n.fixed || !has_handle(n.h) || !ok(n.kind)) continue;
      if (x.types[static_cast<std::size_t>(it->second)] != node_type(n.kind)) continue;
      c.emplace_back(&n, it->second);
    }
    if (c.empty()) return std::nullopt;
    return c[rng_->below(c.size())];
  }

  // Runs a change of top-level node i of x: the model first gives up its claim (so tether may
  // release), then claims the new owners, or the old ones again if the change failed.
  template <class F>
  bool exec_change(MExec& x, int i, F&& change, Ids& fresh, bool expect_ok) {
    Ids old = x.top[static_cast<std::size_t>(i)];
    ledger_->unclaim(old);
    bool ok = true;
    try {
      change();
    } catch (const tether::DriverError& e) {
      ok = false;
      if (expect_ok) fail(fmt::format("executable update failed: {}", e.what()));
    }
    count(ok ? "executable node update applied" : "executable node update refused by the driver");
    if (ok) {
      ledger_->claim(fresh, "an executable", true);
      x.top[static_cast<std::size_t>(i)] = std::move(fresh);
    } else {
      ledger_->claim(old, "an executable (update refused)", true);
    }
    return ok;
  }

  void op_exec_update_node() {
    auto xi = live_exec();
    if (!xi) return;
    MExec& x = execs_[*xi];
    auto t = exec_node(x, [](Kind k) {
      return k == Kind::scale || k == Kind::axpy || k == Kind::memset || k == Kind::memcpy ||
             k == Kind::host || k == Kind::record || k == Kind::wait;
    });
    if (!t) return;
    auto [n, i] = *t;
    Ids fresh;
    const Handle h = n->h;
    bool ok = exec_change(
        x, i,
        [&] {
          switch (n->kind) {
            case Kind::scale:
              x.x->update(std::get<ScaleNode>(h), tether::Grid{1}, tether::Block{4}, buf(), value(), 4);
              break;
            case Kind::axpy:
              x.x->update(std::get<AxpyNode>(h), tether::Grid{1}, tether::Block{4}, buf(), buf(), value(), 4);
              break;
            case Kind::memset:
              if (rng_->chance(0.3))
                x.x->update(std::get<tether::Node<tether::MemsetNode>>(h), ctx_.alloc<float>(4), value());
              else
                x.x->update(std::get<tether::Node<tether::MemsetNode>>(h), buf(), value());
              break;
            case Kind::memcpy:
              x.x->update(std::get<tether::Node<tether::MemcpyNode>>(h), buf(), buf());
              break;
            case Kind::host:
              x.x->update(std::get<tether::Node<tether::HostNode>>(h), host_fn(fresh));
              break;
            case Kind::record:
              x.x->update(std::get<tether::Node<tether::EventRecordNode>>(h), event());
              break;
            case Kind::wait:
              x.x->update(std::get<tether::Node<tether::EventWaitNode>>(h), event());
              break;
            default:
              break;
          }
        },
        // The driver refuses a memcpy update that moves an end between host and device memory
        // (the node may copy from pinned memory): the model does not track where ends live.
        fresh, n->kind != Kind::memcpy);
    if (ok) supersede(x, i, x.top[static_cast<std::size_t>(i)]);
  }

  void op_exec_update_child() {
    auto xi = live_exec();
    if (!xi) return;
    MExec& x = execs_[*xi];
    auto t = exec_node(x, [](Kind k) { return k == Kind::child; });
    if (!t) return;
    auto si = pick(graphs_, [](const MGraph& g) { return g.alive && !g.launchable && g.g.has_value(); });
    if (!si) return;
    auto [n, i] = *t;
    const Handle h = n->h;
    const int src = static_cast<int>(*si);
    // Succeeds only when the new graph has the embedded graph's shape: the model learns which.
    Ids fresh = n->ids;  // the child node's own version stays; its graph's owners are swapped
    Ids sub = graph_ids(src);
    fresh.insert(fresh.end(), sub.begin(), sub.end());
    bool ok = exec_change(
        x, i,
        [&] {
          x.x->update(std::get<tether::Node<tether::ChildNode>>(h),
                      *graphs_[static_cast<std::size_t>(src)].g);
        },
        fresh, false);
    // CUDA swaps the child's references: the old embedded versions go (once launches are done).
    if (ok) x.base[static_cast<std::size_t>(i)] = x.top[static_cast<std::size_t>(i)];
  }

  // A per-node update naming a node of another graph (often one made after the source was
  // destroyed, perhaps at the same address) is refused before any driver call.
  void op_exec_update_foreign() {
    auto xi = live_exec();
    if (!xi) return;
    MExec& x = execs_[*xi];
    std::vector<const MNode*> c;
    for (std::size_t gi = 0; gi < graphs_.size(); ++gi) {
      if (!graphs_[gi].alive || static_cast<int>(gi) == x.source) continue;
      for (const MNode& n : boxes_[static_cast<std::size_t>(graphs_[gi].root)].nodes)
        if (n.kind == Kind::scale && has_handle(n.h)) c.push_back(&n);
    }
    if (c.empty()) return;
    const MNode& n = *c[rng_->below(c.size())];
    try {
      x.x->update(std::get<ScaleNode>(n.h), tether::Grid{1}, tether::Block{4}, buf(), value(), 4);
      fail(fmt::format("a per-node executable update took node {} of another graph", n.key));
    } catch (const tether::UsageError&) {
    }
  }

  void op_exec_update_whole() {
    auto xi = live_exec();
    if (!xi) return;
    MExec& x = execs_[*xi];
    // From the source itself (after edits), from another launchable graph (often a clone of it).
    std::optional<std::size_t> gi;
    if (rng_->chance(0.5) && graphs_[static_cast<std::size_t>(x.source)].alive &&
        graphs_[static_cast<std::size_t>(x.source)].g)
      gi = static_cast<std::size_t>(x.source);
    else
      gi = pick(graphs_, [](const MGraph& g) { return g.alive && g.launchable && g.g.has_value(); });
    if (!gi) return;
    const int g = static_cast<int>(*gi);
    std::vector<Ids> top;
    std::vector<int> types;
    snapshot(g, top, types);
    for (const Ids& ids : x.top) ledger_->unclaim(ids);
    tether::UpdateResult r = x.x->update(*graphs_[*gi].g);
    count(r ? "whole update applied"
            : "whole update refused (" + std::string(tether::to_string(r.reason)) + ")");
    if (r) {
      if (top.size() != x.top.size()) fail("whole update succeeded with another node count");
      for (const Ids& ids : top) ledger_->claim(ids, "an executable (whole update)", true);
      x.top = std::move(top);
      x.types = std::move(types);
      x.base = x.top;  // CUDA swapped the references (DRIVER_FACTS 7a)
      supersede_all(x);
      if (g == x.source) {
        const MBox& root = box(graphs_[*gi].root);
        for (std::size_t i = 0; i < root.nodes.size(); ++i) x.index[root.nodes[i].key] = static_cast<int>(i);
      }
    } else {
      for (const Ids& ids : x.top) ledger_->claim(ids, "an executable (whole update refused)", true);
    }
  }

  void op_enable() {
    auto xi = live_exec();
    if (!xi) return;
    MExec& x = execs_[*xi];
    auto t = exec_node(x, [](Kind k) {
      return k == Kind::scale || k == Kind::axpy || k == Kind::memset || k == Kind::memcpy;
    });
    if (!t) return;
    bool on = rng_->chance(0.5);
    std::visit(
        [&](const auto& n) {
          using N = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<N, ScaleNode> || std::is_same_v<N, AxpyNode> ||
                        std::is_same_v<N, tether::Node<tether::MemsetNode>> ||
                        std::is_same_v<N, tether::Node<tether::MemcpyNode>>) {
            x.x->enable(n, on);
            if (x.x->enabled(n) != on) fail("enable did not take");
          }
        },
        t->first->h);
  }

  void op_hold() { hold_gate(); }
  void op_sync() {
    // Half the time every executable is asked to release what its launches no longer use.
    if (rng_->chance(0.5)) {
      count("synchronize after reclaiming every executable");
      for (MExec& x : execs_)
        if (x.alive) {
          x.x->reclaim(s_);
          asked(x);
        }
    }
    sync();
    if (concurrent_) return;  // the quiescent checks run at the barriers
    settle(ctx_);
    check_liveness();
  }

 public:
  /// Off a quiescent point, with the gate open: lets the reclaimer catch up with what is queued
  /// (a version superseded unused is released "at once", on the reclaimer). With a gate closed
  /// (any thread's) the reclaimer may rightly wait: it starts no blocking release (cuMemFree)
  /// while a host callable runs, and the gate is one.
  static void catch_up() {
    tether::wait_reclaimed(std::chrono::seconds(5));
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    tether::wait_reclaimed(std::chrono::seconds(5));
  }
  /// Waits until nothing runs and everything whose last consumer is gone has been released
  /// (the simulator's streams and deferred destructors, then tether::wait_released).
  static void settle(const tether::Context& ctx) {
    tether::sim::quiesce(std::chrono::seconds(5));
    if (!tether::wait_released(ctx, std::chrono::seconds(5))) tether::wait_reclaimed(std::chrono::seconds(5));
  }

  /// Liveness at a quiescent point (everything launched has completed, settle() ran): the owners
  /// alive are exactly those some consumer may still use — a graph, clone or embedded copy (its
  /// current versions), an executable (what it runs now, and the versions CUDA's references hold:
  /// those it was instantiated, whole-updated or child-updated from), and superseded per-node
  /// versions a launch used and whose release nobody asked for since (no later launch, no
  /// reclaim). Each executable's live_node_versions() is within the same bound.
  void check_liveness() {
    Ids held, pending;
    for (MExec& x : execs_) {
      if (!x.alive) continue;
      std::erase_if(x.retired, [](const MExec::Retired& r) { return r.asked; });
      std::erase_if(x.unused, [](const MExec::Retired& r) { return r.asked; });
      for (const Ids& ids : x.base) held.insert(held.end(), ids.begin(), ids.end());
      for (const MExec::Retired& r : x.retired) pending.insert(pending.end(), r.ids.begin(), r.ids.end());
      if (lenient_)
        for (const MExec::Retired& r : x.unused) pending.insert(pending.end(), r.ids.begin(), r.ids.end());
    }
    check_versions(true);
    auto [kept, lost] = ledger_->liveness(held, pending);
    ++liveness_checks_;
    if (!kept.empty())
      fail(fmt::format("liveness: {} owner(s) alive that no consumer can use any more (first: {}, made at op {})",
                       kept.size(), kept.front(), ledger_->born(kept.front())));
    if (!lost.empty())
      fail(fmt::format("{} owner(s) destroyed that an executable's CUDA references still hold (first: {})",
                       lost.size(), lost.front()));
  }
  std::uint64_t liveness_checks() const { return liveness_checks_; }

 private:
  // Each executable's per-node versions alive: at least one per node updated per-node (its
  // current one), at most that plus the superseded ones a launch used whose release is not known
  // to have run (`settled`: nothing runs and the reclaimer caught up, so only those never asked).
  // Off a quiescent point a version superseded unused may still be queued on the reclaimer: an
  // excess is rechecked after waiting for it.
  void check_versions(bool settled) {
    for (MExec& x : execs_) {
      if (!x.alive) continue;
      const std::size_t lo = x.pernode.size(), hi = lo + x.retired.size() + (lenient_ ? x.unused.size() : 0);
      std::size_t live = x.x->live_node_versions();
      if (live > hi && !settled) {
        if (concurrent_ || !gate_open_->load()) {
          // The reclaimer may be waiting for a gate: the synchronize point checks these.
          if (live > hi + x.unused.size()) fail(fmt::format("executable {}: {} per-node versions alive, more "
                                                            "than the {} superseded or current ones",
                                                            &x - execs_.data(), live, hi + x.unused.size()));
          continue;
        }
        for (int retry = 0; live > hi && retry < 20; ++retry) {
          catch_up();
          live = x.x->live_node_versions();
        }
      }
      if (live > hi && live <= hi + x.unused.size())
        fail(fmt::format("liveness: executable {} keeps {} per-node version(s) superseded before any launch "
                         "used them (the bound is {}..{}; {} such superseded after launch {} and not released "
                         "at once)",
                         &x - execs_.data(), live - hi, lo, hi, x.unused.size(), x.launches));
      else if (live < lo || live > hi)
        fail(fmt::format("executable {}: {} per-node versions alive, the bound is {}..{} ({} nodes updated "
                         "per-node, {} superseded versions a launch may have used{})",
                         &x - execs_.data(), live, lo, hi, lo, x.retired.size(),
                         settled ? "" : ", unsettled"));
    }
  }

 private:
  void op_reclaim() {
    if (lenient_ && (concurrent_ || !gate_open_->load())) return;  // diagnostics: see Options::lenient
    tether::reclaim();
  }
  void op_shared() {
    shared_(*rng_, s_, op_, *counts_);
  }

  // --------------------------------------------------------------------------- state

  const tether::Context& ctx_;
  const tether_test::TestKernels& k_;
  const tether::Stream& s_;
  std::optional<Rng> rng_;
  std::shared_ptr<Ledger> ledger_;
  std::vector<std::string> failures_;
  std::vector<MGraph> graphs_;
  std::vector<MBox> boxes_;
  std::vector<MExec> execs_;
  std::unordered_map<std::uint64_t, int> where_;  // node key -> box
  std::map<std::string, std::uint64_t>* counts_ = nullptr;
  std::vector<tether::SharedBuffer<float>> pool_;
  tether::SharedPinnedBuffer<float> pinned_;
  std::vector<tether::Event> events_;
  std::shared_ptr<std::atomic<bool>> gate_open_;
  std::optional<tether::GraphExec> gate_exec_;
  std::uint64_t launches_ = 0;
  std::uint64_t next_key_ = 1;
  std::uint64_t op_ = 0;
  std::uint64_t attachments_ = 0;
  std::uint64_t accumulators_ = 0;
  std::uint64_t liveness_checks_ = 0;
  bool concurrent_ = false;  // one of several threads: global checks and waits are the harness's
  SharedOp shared_;
  bool lenient_ = false;     // diagnostics: versions superseded unused after a launch may linger until asked
  tether::sim::Stats stats_;
};

/// Runs `options.operations` operations in sequences of `options.per_sequence`, sequence i seeded
/// with `seed_of(options.seed, i)`. `progress` (if set) is called after each sequence.
inline Result run(const tether::Context& ctx, const tether_test::TestKernels& k, const tether::Stream& s,
                  const Options& options, const std::function<void(const Result&)>& progress = {}) {
  Result result;
  Checker checker(ctx, k, s, options.lenient);
  for (std::uint64_t i = 0; result.operations < options.operations; ++i) {
    std::uint64_t n = std::min(options.per_sequence, options.operations - result.operations);
    std::uint64_t seed = seed_of(options.seed, i);
    std::vector<std::string> f = checker.run_sequence(seed, n, result);
    ++result.sequences;
    for (const std::string& m : f)
      result.failures.push_back(fmt::format("sequence {} (seed {:#x}, {} operations): {}", i, seed, n, m));
    if (progress) progress(result);
  }
  return result;
}


// ----------------------------------------------------------------------------- several threads

/// Executables that the threads of run_threads share: made from one source graph (a sink and
/// kernel and host nodes with tracked owners), launched, updated per node and whole, and reclaimed
/// from every thread, each on its own stream. The model of one executable is only exact if it
/// knows the order of its calls, so each executable's calls are made under its own lock (the
/// library's lock serialises them anyway); everything else runs concurrently: calls on the other
/// executables, whole updates reading the one source graph, the threads' own sequences, launches
/// and completion markers on several streams, the reclaimer. Launches of one executable run one
/// after another, even on different streams, so each executable counts its completions on its own
/// ledger channel: it runs its own sink (a per-node update of the source's sink, made again after
/// every whole update, before any launch).
class SharedExecs {
 public:
  static constexpr std::size_t kExecs = 3;  // ledger channels 1..3
  static constexpr std::size_t kNodes = 4;  // besides the sink: kernels 1, 2; host nodes 3, 4

 private:
  Tracked tracked(Ids& ids) {
    Id id = ledger_->make();
    ids.push_back(id);
    return Tracked(ledger_, id);
  }
  auto host_fn(Ids& ids) {
    return [t = tracked(ids)] { t.ran(); };
  }

 public:

  SharedExecs(const tether::Context& ctx, const tether_test::TestKernels& k, bool lenient)
      : ctx_(ctx), k_(k), lenient_(lenient), ledger_(std::make_shared<Ledger>()) {
    for (int i = 0; i < 2; ++i) pool_.push_back(ctx_.alloc<float>(4).share());
    g_.emplace(ctx_);
    tether::GraphRef ref = g_->ref();
    src_.resize(kNodes + 1);
    g_->edit([&](tether::Edit& e) {
      sink_ = e.host([l = ledger_] { l->error("the source graph's own sink ran (each executable runs its own)"); });
      for (std::size_t i = 1; i <= kNodes; ++i) {
        tether::Owners o;
        for (int j = 0; j < 2; ++j) o += tether::Owners{tracked(src_[i])};
        tether::Node<> n;
        // Kernels over no elements: the executables run concurrently, their buffers are shared.
        if (i <= 2)
          n = kern_[i - 1] =
              e.in(ref).keeping(std::move(o)).launch(k_.scale, tether::Grid{1}, tether::Block{4}, pool_[0], 1.0f, 0);
        else
          n = host_[i - 3] = e.in(ref).keeping(std::move(o)).host(host_fn(src_[i]));
        e.connect(n, sink_);
      }
    });
    for (const Ids& ids : src_) ledger_->claim(ids, "the shared source graph");
    for (std::size_t j = 0; j < kExecs; ++j) {
      X& x = xs_[j];
      x.x.emplace(g_->instantiate());
      x.top = src_;
      for (const Ids& ids : x.top) ledger_->claim(ids, "a shared executable", true);
      x.base = x.top;
      own_sink(j);
    }
  }

  /// One operation on a random executable, on `s`, from any thread (`thread` names it in failures).
  /// After a failure the shared executables are left alone.
  void op(Rng& rng, const tether::Stream& s, std::size_t thread, std::uint64_t at,
          std::map<std::string, std::uint64_t>& counts) {
    const std::size_t j = rng.below(kExecs);
    const std::size_t r = rng.below(100);
    if (failed_.load()) return;
    auto fail = [&](std::string m) { record(fmt::format("thread {} op {}: {}", thread, at, m)); };
    X& x = xs_[j];
    if (r < 40) {
      // Launches of one executable run at once from several threads (the model's lock is shared):
      // they change no version, and each counts as the latest one of the executable so far.
      ++counts["shared: launch"];
      std::shared_lock lock(x.mu);
      try {
        x.x->launch(s);
        const std::uint64_t n = x.launches.fetch_add(1) + 1;
        Ids all;
        for (const Ids& ids : x.top) all.insert(all.end(), ids.begin(), ids.end());
        ledger_->launched(all, n, j + 1);
        std::lock_guard g(x.since_mu);
        x.since.insert(&s);
      } catch (const std::exception& e) {
        fail(fmt::format("shared executable {}: unexpected exception: {}", j, e.what()));
      }
      check_versions(j, false, fail);
      return;
    }
    std::unique_lock lock(x.mu);
    absorb(x);
    try {
      if (r < 75) {
        ++counts["shared: per-node update"];
        const std::size_t i = 1 + rng.below(kNodes);
        Ids fresh;
        ledger_->unclaim(x.top[i]);
        if (i <= 2)
          x.x->update(kern_[i - 1], tether::Grid{1}, tether::Block{4}, pool_[rng.below(pool_.size())],
                      static_cast<float>(rng.below(4)), 0);
        else
          x.x->update(host_[i - 3], host_fn(fresh));
        ledger_->claim(fresh, "a shared executable", true);
        x.top[i] = fresh;
        supersede(x, i, std::move(fresh));
      } else if (r < 85) {
        ++counts["shared: whole update"];
        for (const Ids& ids : x.top) ledger_->unclaim(ids);
        tether::UpdateResult u = x.x->update(*g_);
        if (!u) fail(fmt::format("shared executable {}: whole update from its source refused", j));
        x.top = src_;
        for (const Ids& ids : x.top) ledger_->claim(ids, "a shared executable (whole update)", true);
        x.base = x.top;
        for (auto& [i, p] : x.pernode) (p.used ? x.retired : x.unused).push_back({std::move(p.ids), false});
        x.pernode.clear();
        own_sink(j);
      } else if (r < 95) {
        // The last launch's stream is one of `last` (launches made at once: any of theirs).
        const bool may = x.launches.load() == 0 || x.last.count(&s);
        const bool must = x.launches.load() == 0 || (x.last.size() == 1 && may);
        bool ok = true;
        try {
          x.x->reclaim(s);
        } catch (const tether::UsageError&) {
          ok = false;
        }
        ++counts[ok ? "shared: reclaim" : "shared: reclaim on another stream (refused)"];
        if (ok && !may) fail(fmt::format("shared executable {}: reclaim took a stream other than its last launch's", j));
        if (!ok && must) fail(fmt::format("shared executable {}: reclaim on its last launch's stream refused", j));
        if (ok) {
          if (x.launches.load()) x.last = {&s};
          asked(x);
        } else {
          x.last.erase(&s);
        }
      } else {
        ++counts["shared: enable/disable"];
        const bool on = rng.chance(0.5);
        x.x->enable(kern_[rng.below(2)], on);
      }
    } catch (const std::exception& e) {
      fail(fmt::format("shared executable {}: unexpected exception: {}", j, e.what()));
    }
    check_versions(j, false, fail);
  }

  /// At a barrier (every thread paused): asks some executables to reclaim, synchronizes `streams`,
  /// settles, and checks completions, the per-node bound and liveness.
  void quiescent(Rng& rng, const std::vector<tether::Stream>& streams, std::uint64_t at) {
    auto fail = [&](std::string m) { record(fmt::format("barrier after op {}: {}", at, m)); };
    if (failed_.load()) {
      for (const tether::Stream& st : streams) st.synchronize();
      Checker::settle(ctx_);
      return;
    }
    for (X& x : xs_) {
      absorb(x);
      if (!rng.chance(0.5)) continue;
      if (x.launches.load() == 0) {
        x.x->reclaim(streams.front());
        asked(x);
        continue;
      }
      bool ok = false;
      for (const tether::Stream* st : std::set<const tether::Stream*>(x.last)) {
        try {
          x.x->reclaim(*st);
          ok = true;
          x.last = {st};
          asked(x);
          break;
        } catch (const tether::UsageError&) {
          x.last.erase(st);
        }
      }
      if (!ok) fail(fmt::format("shared executable {}: reclaim refused on every stream its latest launches used",
                                &x - xs_.data()));
    }
    for (const tether::Stream& st : streams) st.synchronize();
    Checker::settle(ctx_);
    Ids held, pending;
    for (std::size_t j = 0; j < kExecs; ++j) {
      X& x = xs_[j];
      if (std::uint64_t d = ledger_->done(j + 1).load(); d != x.launches.load())
        fail(fmt::format("model error: shared executable {}: {} launches, {} sinks ran", j, x.launches.load(), d));
      std::erase_if(x.retired, [](const Retired& r) { return r.asked; });
      std::erase_if(x.unused, [](const Retired& r) { return r.asked; });
      check_versions(j, true, fail);
      for (const Ids& ids : x.base) held.insert(held.end(), ids.begin(), ids.end());
      for (const Retired& r : x.retired) pending.insert(pending.end(), r.ids.begin(), r.ids.end());
      if (lenient_)
        for (const Retired& r : x.unused) pending.insert(pending.end(), r.ids.begin(), r.ids.end());
    }
    auto [kept, lost] = ledger_->liveness(held, pending);
    if (!kept.empty())
      fail(fmt::format("liveness: {} shared owner(s) alive that no consumer can use any more (first: {})",
                       kept.size(), kept.front()));
    if (!lost.empty())
      fail(fmt::format("{} shared owner(s) destroyed that an executable's CUDA references still hold", lost.size()));
    for (const std::string& e : ledger_->errors()) fail(e);
  }

  /// Destroys everything (the streams are synchronized after); end() checks.
  void destroy() {
    for (X& x : xs_) {
      for (const Ids& ids : x.top) ledger_->unclaim(ids);
      x.x.reset();
    }
    for (const Ids& ids : src_) ledger_->unclaim(ids);
    kern_[0] = kern_[1] = {};
    host_[0] = host_[1] = {};
    sink_ = {};
    g_.reset();
    pool_.clear();
  }
  void end() {
    auto fail = [&](std::string m) { record("end: " + m); };
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (ledger_->unsettled().first && std::chrono::steady_clock::now() < deadline) {
      Checker::settle(ctx_);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    auto [alive, twice] = ledger_->unsettled();
    if (alive) fail(fmt::format("{} shared owner(s) never destroyed after every consumer was gone", alive));
    if (twice) fail(fmt::format("{} shared owner(s) destroyed more than once", twice));
    for (const std::string& e : ledger_->errors()) fail(e);
  }

 private:
 public:
  /// Failures found so far.
  std::vector<std::string> failures() const {
    std::lock_guard lock(fail_mu_);
    return failures_;
  }

 private:
  void record(std::string m) {
    std::lock_guard lock(fail_mu_);
    failed_.store(true);
    if (failures_.size() < 10) failures_.push_back(std::move(m));
  }
  struct Retired {
    Ids ids;
    bool asked = false;
  };
  struct PerNode {
    Ids ids;
    bool used = false;
  };
  struct X {
    std::shared_mutex mu;  // shared: launches; exclusive: everything else
    std::optional<tether::GraphExec> x;
    std::vector<Ids> top, base;
    std::map<std::size_t, PerNode> pernode;
    std::vector<Retired> retired, unused;
    std::atomic<std::uint64_t> launches{0};
    std::mutex since_mu;
    std::set<const tether::Stream*> since;  // streams of the launches since the last absorb()
    std::set<const tether::Stream*> last;   // the last launch's stream is one of these
  };
  // Under the exclusive lock: the launches made since (at once, under the shared lock) used every
  // current version and asked for the release of the superseded ones.
  static void absorb(X& x) {
    std::lock_guard g(x.since_mu);
    if (x.since.empty()) return;
    for (auto& [i, p] : x.pernode) p.used = true;
    asked(x);
    x.last = std::move(x.since);
    x.since.clear();
  }

  static void asked(X& x) {
    for (Retired& r : x.retired) r.asked = true;
    for (Retired& r : x.unused) r.asked = true;
  }
  static void supersede(X& x, std::size_t i, Ids ids) {
    auto it = x.pernode.find(i);
    if (it != x.pernode.end()) (it->second.used ? x.retired : x.unused).push_back({std::move(it->second.ids), false});
    x.pernode[i] = {std::move(ids), false};
  }
  // The executable's own sink (node 0), counting its completions on channel j + 1.
  void own_sink(std::size_t j) {
    X& x = xs_[j];
    x.x->update(sink_, [l = ledger_, ch = j + 1] { l->done(ch).fetch_add(1, std::memory_order_acq_rel); });
    supersede(x, 0, {});
  }
  void check_versions(std::size_t j, bool settled, const std::function<void(std::string)>& fail) {
    X& x = xs_[j];
    const std::size_t lo = x.pernode.size(), hi = lo + x.retired.size() + (lenient_ ? x.unused.size() : 0);
    std::size_t live = x.x->live_node_versions();
    if (live > hi && !settled) {
      // Another thread's gate may hold the reclaimer: the barrier checks these.
      if (live > hi + x.unused.size())
        fail(fmt::format("shared executable {}: {} per-node versions alive, more than the {} superseded or current "
                         "ones", j, live, hi + x.unused.size()));
      return;
    }
    if (live > hi && live <= hi + x.unused.size())
      fail(fmt::format("liveness: shared executable {} keeps {} per-node version(s) superseded before any "
                       "launch used them (bound {}..{}, after launch {})",
                       j, live - hi, lo, hi, x.launches.load()));
    else if (live < lo || live > hi)
      fail(fmt::format("shared executable {}: {} per-node versions alive, the bound is {}..{}{}", j, live, lo, hi,
                       settled ? "" : " (unsettled)"));
  }
  const tether::Context& ctx_;
  const tether_test::TestKernels& k_;
  bool lenient_;
  std::shared_ptr<Ledger> ledger_;
  std::vector<tether::SharedBuffer<float>> pool_;
  std::optional<tether::Graph> g_;
  std::vector<Ids> src_;  // tracked owners per top-level node of the source (0: the sink)
  tether::Node<tether::HostNode> sink_;
  ScaleNode kern_[2];
  tether::Node<tether::HostNode> host_[2];
  std::array<X, kExecs> xs_;
  mutable std::mutex fail_mu_;
  std::vector<std::string> failures_;
  std::atomic<bool> failed_{false};
};

/// Runs `options.operations` operations on `options.threads` threads at once, in rounds: in each
/// round every thread runs a sequence (seed `seed_of(options.seed, round * threads + t)`) of
/// `options.per_sequence` operations on its own graphs and executables, on its own stream, plus
/// operations on the round's shared executables (SharedExecs). Every `barrier_every` operations
/// all threads stop (gate opened, stream synchronized), the main thread settles everything and
/// checks the shared executables, then each thread checks liveness of its own. At the end of a
/// round everything is destroyed, settled and checked as in `run` (each ledger settled; the
/// process's attachments, accumulators, simulator objects back to the start; no violations).
inline Result run_threads(const tether::Context& ctx, const tether_test::TestKernels& k, const Options& options,
                          const std::function<void(const Result&)>& progress = {},
                          std::uint64_t barrier_every = 40) {
  const std::size_t T = static_cast<std::size_t>(options.threads);
  std::vector<tether::Stream> streams;
  for (std::size_t t = 0; t < T; ++t) streams.push_back(ctx.make_stream());
  Result result;
  for (std::uint64_t round = 0; result.operations < options.operations; ++round) {
    const std::uint64_t n = std::min(options.per_sequence, (options.operations - result.operations + T - 1) / T);
    Checker::settle(ctx);
    const std::uint64_t attachments = tether::detail::NodeAttachment::live();
    const std::uint64_t accumulators = tether::detail::ExecAccumulator::live();
    const tether::sim::Stats stats = tether::sim::stats();
    tether::sim::clear_violations();
    std::vector<std::string> failures;  // the main thread's
    auto fail_main = [&](std::string m) { failures.push_back(std::move(m)); };
    SharedExecs shared(ctx, k, options.lenient);
    Rng rng(seed_of(options.seed, ~round));
    std::vector<Result> parts(T);
    std::vector<std::vector<std::string>> thread_failures(T);
    std::vector<std::uint64_t> seeds(T);
    std::barrier<> barrier(static_cast<std::ptrdiff_t>(T + 1));
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < T; ++t) {
      seeds[t] = seed_of(options.seed, round * T + t);
      threads.emplace_back([&, t] {
        ctx.make_current();
        Checker c(ctx, k, streams[t], options.lenient, true);
        c.begin(seeds[t], parts[t],
                [&, t](Rng& r, const tether::Stream& s, std::uint64_t op, std::map<std::string, std::uint64_t>& counts) {
                  shared.op(r, s, t, op, counts);
                });
        for (std::uint64_t i = 0; i < n;) {
          const std::uint64_t end = std::min(n, i + barrier_every);
          for (; i < end; ++i) c.operation(i, parts[t]);
          c.pause();
          barrier.arrive_and_wait();  // every thread stopped
          barrier.arrive_and_wait();  // the main thread settled everything
          if (!c.failed()) c.check_liveness();
        }
        c.end_destroy();
        barrier.arrive_and_wait();
        barrier.arrive_and_wait();  // the main thread settled everything
        thread_failures[t] = c.end_check(parts[t]);
      });
    }
    for (std::uint64_t i = 0; i < n; i += barrier_every) {
      barrier.arrive_and_wait();
      shared.quiescent(rng, streams, i + barrier_every);
      barrier.arrive_and_wait();
    }
    barrier.arrive_and_wait();
    shared.destroy();
    for (const tether::Stream& st : streams) st.synchronize();
    Checker::settle(ctx);
    barrier.arrive_and_wait();
    for (std::thread& th : threads) th.join();
    shared.end();
    for (std::string& m : shared.failures()) fail_main("shared executables: " + m);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    auto settled = [&] {
      tether::sim::Stats st = tether::sim::stats();
      return tether::detail::NodeAttachment::live() == attachments &&
             tether::detail::ExecAccumulator::live() == accumulators && st.graphs == stats.graphs &&
             st.execs == stats.execs && st.user_objects == stats.user_objects &&
             st.device_allocations == stats.device_allocations && st.host_allocations == stats.host_allocations &&
             st.events == stats.events;
    };
    while (!settled() && std::chrono::steady_clock::now() < deadline) {
      Checker::settle(ctx);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!settled()) {
      tether::sim::Stats st = tether::sim::stats();
      fail_main(fmt::format("not back to the start: attachments {} -> {}, accumulators {} -> {}, graphs {} -> {}, "
                            "execs {} -> {}, user objects {} -> {}, device allocations {} -> {}",
                            attachments, tether::detail::NodeAttachment::live(), accumulators,
                            tether::detail::ExecAccumulator::live(), stats.graphs, st.graphs, stats.execs, st.execs,
                            stats.user_objects, st.user_objects, stats.device_allocations, st.device_allocations));
    }
    for (const tether::sim::Violation& v : tether::sim::violations())
      fail_main(fmt::format("simulator violation {} in {}: {}", tether::sim::to_string(v.kind), v.entry_point,
                            v.detail));
    tether::sim::clear_violations();
    // Totals.
    result.sequences += T;
    for (std::size_t t = 0; t < T; ++t) {
      result.operations += parts[t].operations;
      result.owners += parts[t].owners;
      result.launches += parts[t].launches;
      result.liveness_checks += parts[t].liveness_checks;
      for (auto& [what, c] : parts[t].counts) result.counts[what] += c;
      for (const std::string& m : thread_failures[t])
        result.failures.push_back(fmt::format("round {} thread {} (seed {:#x}, {} operations, {} threads): {}", round,
                                              t, seeds[t], n, T, m));
    }
    for (const std::string& m : failures)
      result.failures.push_back(fmt::format("round {} ({} threads, seed {}): {}", round, T, options.seed, m));
    if (progress) progress(result);
  }
  return result;
}

}  // namespace tether_model
