// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Randomized model checking of the NCCL layer's ownership, in the manner of
// tests/reliability/model_test.cpp: seeded random sequences of operations over a small pool of
// handles on one rank — communicators made, dropped and aborted; buffers (tether's and NCCL's
// memory) made and dropped; registrations; collectives on streams (which keep their operands until
// the stream has run them) and captured into graphs (grouped send/receive pairs, which NCCL runs as
// a kernel whose plan the graph owns, and all_reduces); instantiations; launches, some held in
// flight by a host node waiting on a gate; drops of graphs, executables and streams;
// synchronizations — checked against a reference model of who may still use each communicator,
// registration and buffer:
// - safety, after every step: no simulator violation (use after free of a buffer by NCCL or a
//   copy, a destroyed event, ...), every buffer a consumer may use is still held by someone
//   besides the test's witness copy, and the refusals the documentation promises (an aborted
//   communicator refuses collectives, registrations and launches, quoting why);
// - results, at every synchronization: each buffer that collectives wrote holds what the last of
//   them wrote (one stream), or what one of them wrote (several streams, or a send/receive an abort
//   may have cancelled), never a mix; the sources are intact;
// - liveness, at every synchronize-and-settle point: a communicator, registration, NCCL allocation
//   or buffer no consumer can use is gone, and one a consumer can use is there
//   (`nccl::communicator_counts()`, `sim::nccl_stats()`, the simulator's allocations, the
//   witness's `use_count()`); an aborted communicator is destroyed by NCCL once the last graph and
//   executable holding a plan of it are gone, and not before.
// A threaded variant runs three such sequences at once, each on its own device with its own
// communicators, meeting at barriers for the process-wide checks. Sizes shrink under
// ThreadSanitizer; TETHER_NCCL_MODEL_OPERATIONS overrides the number of operations per seed and
// TETHER_NCCL_MODEL_TRACE=1 prints every operation.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "nccl/nccl_support.hpp"
#include "support/rng.hpp"

#if defined(__SANITIZE_THREAD__)
#define TETHER_NCCL_MODEL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TETHER_NCCL_MODEL_TSAN 1
#endif
#endif
#ifndef TETHER_NCCL_MODEL_TSAN
#define TETHER_NCCL_MODEL_TSAN 0
#endif

using namespace tether;
using namespace tether_test;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kElems = 1024;  // 4 KiB: each buffer is a registration range of its own in the simulator's NCCL
constexpr int kSettleEvery = 50;      // operations between synchronize-and-settle points
constexpr std::uint64_t kSequence = 500;  // operations before everything is dropped and checked gone

std::uint64_t operations_per_seed() {
  if (const char* s = std::getenv("TETHER_NCCL_MODEL_OPERATIONS")) {
    long long n = std::atoll(s);
    if (n > 0) return static_cast<std::uint64_t>(n);
  }
  return TETHER_NCCL_MODEL_TSAN ? 400 : 2500;
}

bool trace() {
  static const bool on = [] {
    const char* v = std::getenv("TETHER_NCCL_MODEL_TRACE");
    return v && *v && *v != '0';
  }();
  return on;
}

using Rng = tether_test::Rng;  // splitmix64, as the other model checker's (tests/support/rng.hpp)

// The value of element i of a buffer holding pattern p: a source holds its own id's pattern, a
// sink what the last collective into it copied (a sink that nothing wrote yet: pattern -1).
float value_of(int pattern, std::size_t i) {
  return pattern < 0 ? -1.0f : static_cast<float>(pattern * 4096 + static_cast<int>(i % 4096));
}

/// A gate the host node at the start of some captured graphs waits on: a launch of such a graph
/// stays in flight while it is closed.
struct Gate {
  std::atomic<bool> open{true};
};

enum class Op : std::size_t {
  make_comm,
  drop_comm,
  abort_comm,
  make_buffer,
  drop_buffer,
  register_buffer,
  drop_registration,
  stream_collective,
  capture,
  instantiate,
  launch,
  drop_graph,
  drop_exec,
  make_stream,
  drop_stream,
  synchronize,
  count_
};
constexpr std::array<const char*, static_cast<std::size_t>(Op::count_)> kOpNames = {
    "make communicator", "drop communicator", "abort communicator", "make buffer", "drop buffer",
    "register buffer", "drop registration", "collective on a stream", "capture collectives", "instantiate",
    "launch", "drop graph", "drop executable", "make stream", "drop stream", "synchronize"};
constexpr std::array<int, static_cast<std::size_t>(Op::count_)> kWeights = {4, 3, 1, 6, 5, 4, 3, 12, 8, 6, 12, 4, 4, 2, 2, 4};

struct Counts {
  std::uint64_t steps = 0;  // operations drawn
  std::array<std::uint64_t, static_cast<std::size_t>(Op::count_)> ops{};  // those that acted
  std::uint64_t refused = 0;          // operations refused as documented (an aborted communicator)
  std::uint64_t gated_launches = 0;   // launches held in flight by a closed gate
  std::uint64_t results_checked = 0;  // sink buffers whose contents were checked against the model
  std::uint64_t settle_points = 0;
  std::uint64_t total() const {
    std::uint64_t n = 0;
    for (auto c : ops) n += c;
    return n;
  }
  void add(const Counts& o) {
    steps += o.steps;
    for (std::size_t i = 0; i < ops.size(); ++i) ops[i] += o.ops[i];
    refused += o.refused;
    gated_launches += o.gated_launches;
    results_checked += o.results_checked;
    settle_points += o.settle_points;
  }
};

/// What a checker expects of the process-wide counts at a settle point (summed over threads).
struct Expected {
  std::size_t comms_alive = 0;    // nccl::communicator_counts().alive
  std::size_t comms_closing = 0;  // aborted communicators NCCL waits to destroy (a graph holds a plan)
  std::size_t sim_comms = 0;      // sim::nccl_stats().communicators
  std::size_t registrations = 0;  // of communicators not aborted
  bool registrations_exact = true;
  std::size_t nccl_allocations = 0;
  std::size_t device_allocations = 0;  // tracked buffers (tether's and NCCL's memory)
  std::size_t persistent_refs = 0;     // captured send/receive plans a graph or executable still holds
  void add(const Expected& o) {
    comms_alive += o.comms_alive;
    comms_closing += o.comms_closing;
    sim_comms += o.sim_comms;
    registrations += o.registrations;
    registrations_exact = registrations_exact && o.registrations_exact;
    nccl_allocations += o.nccl_allocations;
    device_allocations += o.device_allocations;
    persistent_refs += o.persistent_refs;
  }
};

/// The process-wide counts, observed at once.
struct Observed {
  nccl::CommunicatorCounts counts;
  sim::NcclStats nccl;
  std::size_t device_allocations = 0;
};
Observed observe() { return {nccl::communicator_counts(), sim::nccl_stats(), sim::stats().device_allocations}; }

std::string mismatch(const Expected& e, const Observed& o, std::size_t device_base) {
  std::string s;
  auto diff = [&](const char* what, std::size_t want, std::size_t got) {
    if (want != got) s += fmt::format(" {}: model {}, observed {};", what, want, got);
  };
  diff("communicators alive", e.comms_alive, o.counts.alive);
  diff("communicators closing", e.comms_closing, o.counts.closing);
  diff("NCCL communicators", e.sim_comms, o.nccl.communicators);
  diff("NCCL destroys waiting", e.comms_closing, o.nccl.destroys_waiting);
  if (e.registrations_exact)
    diff("NCCL registrations", e.registrations, o.nccl.registrations);
  else if (o.nccl.registrations < e.registrations)
    s += fmt::format(" NCCL registrations: model at least {}, observed {};", e.registrations, o.nccl.registrations);
  diff("NCCL allocations", e.nccl_allocations, o.nccl.allocations);
  diff("NCCL graph references", e.persistent_refs, o.nccl.persistent_refs);
  diff("NCCL launches in flight", 0, o.nccl.launches_in_flight);
  diff("device allocations", device_base + e.device_allocations, o.device_allocations);
  return s;
}

// ----------------------------------------------------------------------------- the model

struct OpRec {
  int comm = -1;
  bool p2p = false;                 // a send and its receive (to itself), grouped; else an all_reduce
  int src = -1, sink = -1;          // buffer ids
  int src_reg = -1, sink_reg = -1;  // registration ids (-1: the plain buffer was passed)
};

struct CommRec {
  std::optional<nccl::Communicator> slot;  // the test's handle, if it still holds one
  bool aborted = false;
};
struct Write {
  int pattern;
  int stream;    // the stream it runs on
  bool certain;  // false: a send/receive whose communicator was aborted before it may have run
  int comm;
  bool p2p;
};
struct BufRec {
  SharedBuffer<float> witness;  // the test's own copy: use_count() tells whether anyone else holds it
  std::optional<SharedBuffer<float>> slot;
  bool source = false;
  bool nccl_memory = false;
  std::set<int> allowed;      // what it may hold when nothing wrote it since the last check
  std::vector<Write> writes;  // since the last check, in issue order
};
struct RegRec {
  int comm = -1, buf = -1;
  std::optional<nccl::RegisteredBuffer<float>> slot;
};
struct GraphRec {
  std::optional<Graph> slot;
  std::vector<OpRec> ops;  // in execution order
  bool gated = false;
};
struct ExecRec {
  std::optional<GraphExec> slot;
  std::vector<OpRec> ops;
  bool gated = false;
};
struct StreamRec {
  std::optional<Stream> slot;
};
struct Pending {
  int stream = -1;
  std::vector<OpRec> ops;  // owners its work keeps until the stream has run it
  bool blocked = false;    // behind a launch the closed gate holds: it cannot have run yet
  bool launch = false;     // a launch of an executable (else a collective issued on the stream)
};

class Checker {
 public:
  Checker(const Runtime& rt, int device, std::uint64_t seed, bool threaded)
      : rt_(rt), ctx_(rt.context(device)), device_(device), rng_(seed), threaded_(threaded) {}
  Checker(const Checker&) = delete;
  Checker& operator=(const Checker&) = delete;

  Counts counts;
  std::vector<std::string> failures;

  void fail(std::string what) {
    if (trace()) fmt::print("[{}] FAILURE at step {}: {}\n", device_, step_, what);
    if (failures.size() < 20) failures.push_back(fmt::format("step {}: {}", step_, std::move(what)));
  }

  /// One random operation, then the per-step safety checks.
  void step() {
    ++step_;
    int total = 0;
    for (int w : kWeights) total += w;
    // An operation that can act on the pool as it is (a few draws, then a synchronization).
    std::size_t op = static_cast<std::size_t>(Op::synchronize);
    for (int tries = 0; tries < 20; ++tries) {
      int pick = static_cast<int>(rng_.below(static_cast<std::size_t>(total)));
      std::size_t o = 0;
      while (pick >= kWeights[o]) pick -= kWeights[o++];
      if (can(static_cast<Op>(o))) {
        op = o;
        break;
      }
    }
    if (trace()) fmt::print("[{}] step {}: {}\n", device_, step_, kOpNames[op]);
    acted_ = false;
    try {
      run(static_cast<Op>(op));
    } catch (const std::exception& e) {
      fail(fmt::format("{} threw: {}", kOpNames[op], e.what()));
    }
    ++counts.steps;
    if (acted_) ++counts.ops[op];
    safety();
  }

  /// Opens the gate and synchronizes every stream the test holds: their work is done.
  void synchronize() {
    open_gate();
    for (auto& [id, s] : streams_)
      if (s.slot) s.slot->synchronize();
    std::erase_if(pending_, [&](const Pending& p) { return streams_.at(p.stream).slot.has_value(); });
    check_results();
  }

  /// Before a settle point: the gate open and the held streams synchronized (work on dropped
  /// streams finishes during the settle).
  void before_settle() {
    open_gate();
    for (auto& [id, s] : streams_)
      if (s.slot) s.slot->synchronize();
  }

  /// After the process settled: every stream's work is done and every release queued. Checks the
  /// results and the buffers' witnesses, forgets what no consumer can use any more (a buffer's
  /// witness goes, so its memory is freed next), and returns what the process-wide counts must
  /// then be for this checker.
  Expected settled() {
    pending_.clear();
    check_results();
    ++counts.settle_points;
    const Live live = liveness();
    for (auto& [id, b] : bufs_) {
      const bool used = live.bufs.count(id) > 0;
      if (used && b.witness.use_count() < 2)
        fail(fmt::format("buffer {} is still used by a consumer but only the witness holds it", id));
      if (!used && !eventually([&] { return b.witness.use_count() == 1; }, 5s))
        fail(fmt::format("buffer {} has no consumer left but {} other holder(s)", id, b.witness.use_count() - 1));
    }
    // An aborted communicator is destroyed by NCCL once no graph or executable holds a plan of it.
    std::set<int> waiting;
    for (int id : live.plan_comms)
      if (comms_.at(id).aborted) waiting.insert(id);
    std::erase_if(regs_, [&](const auto& kv) { return !live.regs.count(kv.first); });
    std::erase_if(comms_, [&](const auto& kv) { return !live.comms.count(kv.first); });
    std::erase_if(bufs_, [&](const auto& kv) { return !live.bufs.count(kv.first); });
    std::erase_if(streams_, [&](const auto& kv) { return !kv.second.slot; });
    std::erase_if(graph_ops_, [&](const auto& kv) {
      return !graphs_.count(kv.first) &&
             std::none_of(x_graph_.begin(), x_graph_.end(), [&](const auto& x) { return x.second == kv.first; });
    });
    std::erase_if(plans_of_, [&](const auto& kv) { return !graph_ops_.count(kv.first); });

    Expected e;
    for (auto& [id, c] : comms_) {
      ++e.comms_alive;
      if (!c.aborted) ++e.sim_comms;
    }
    e.comms_closing = waiting.size();
    e.sim_comms += waiting.size();
    std::set<std::pair<int, int>> ranges;  // one NCCL registration per communicator and buffer
    for (auto& [id, r] : regs_)
      if (!comms_.at(r.comm).aborted) ranges.insert({r.comm, r.buf});
    e.registrations = ranges.size();
    // An aborted communicator still waiting keeps what was registered when it was aborted.
    e.registrations_exact = waiting.empty();
    e.persistent_refs = live.plans;
    for (auto& [id, b] : bufs_) {
      ++e.device_allocations;
      if (b.nccl_memory) ++e.nccl_allocations;
    }
    return e;
  }

  /// The end of a sequence: everything dropped in a random order.
  void drop_all() {
    open_gate();
    std::vector<std::function<void()>> drops;
    for (auto& [id, c] : comms_) drops.push_back([&c] { c.slot.reset(); });
    for (auto& [id, b] : bufs_) drops.push_back([&b] { b.slot.reset(); });
    for (auto& [id, r] : regs_) drops.push_back([&r] { r.slot.reset(); });
    for (auto& [id, g] : graphs_) drops.push_back([&g] { g.slot.reset(); });
    for (auto& [id, x] : execs_) drops.push_back([&x] { x.slot.reset(); });
    for (auto& [id, s] : streams_) drops.push_back([&s] { s.slot.reset(); });
    for (std::size_t i = drops.size(); i > 1; --i) std::swap(drops[i - 1], drops[rng_.below(i)]);
    for (auto& d : drops) d();
    graphs_.clear();
    execs_.clear();
    x_graph_.clear();
  }

  bool empty() const { return comms_.empty() && bufs_.empty() && regs_.empty(); }

 private:
  struct Live {
    std::set<int> comms, regs, bufs;
    std::set<int> plan_comms;  // communicators of captured send/receive plans graphs or executables hold
    std::size_t plans = 0;     // those plans (one per captured send/receive group)
  };

  // Who may use what: `all_pending` counts every stream operation not known to have run; without
  // it, only those a closed gate still holds back (the others may have run, and released what
  // they kept, already).
  Live liveness(bool all_pending = true) const {
    Live l;
    auto use = [&](const OpRec& o) {
      l.comms.insert(o.comm);
      l.bufs.insert(o.src);
      l.bufs.insert(o.sink);
      if (o.src_reg >= 0) l.regs.insert(o.src_reg);
      if (o.sink_reg >= 0) l.regs.insert(o.sink_reg);
    };
    for (const auto& [id, c] : comms_)
      if (c.slot) l.comms.insert(id);
    for (const auto& [id, b] : bufs_)
      if (b.slot) l.bufs.insert(id);
    for (const auto& [id, r] : regs_)
      if (r.slot) l.regs.insert(id);
    // A graph's captured plans are shared with the executables made from it (CUDA copies the
    // graph's references to its user objects): they live while either does.
    std::set<int> plan_graphs;
    for (const auto& [id, g] : graphs_) {
      for (const OpRec& o : g.ops) use(o);
      if (g.slot) plan_graphs.insert(id);
    }
    for (const auto& [id, x] : execs_) {
      for (const OpRec& o : x.ops) use(o);
      plan_graphs.insert(x_graph_.at(id));
    }
    for (int gid : plan_graphs) {
      for (const OpRec& o : graph_ops_.at(gid))
        if (o.p2p) l.plan_comms.insert(o.comm);
      l.plans += plans_of_.at(gid);
    }
    for (const Pending& p : pending_)
      if (all_pending || p.blocked)
        for (const OpRec& o : p.ops) use(o);
    for (int r : l.regs) {
      l.bufs.insert(regs_.at(r).buf);
      l.comms.insert(regs_.at(r).comm);
    }
    return l;
  }

  // Per step: no violation, and every buffer a consumer certainly still uses is held by more than
  // the witness.
  void safety() {
    auto v = sim::violations();
    if (!v.empty()) {
      fail(fmt::format("simulator violation {}: {}", sim::to_string(v.front().kind), v.front().detail));
      if (!threaded_) sim::clear_violations();
    }
    const Live live = liveness(false);
    for (const auto& [id, b] : bufs_)
      if (live.bufs.count(id) && b.witness.use_count() < 2)
        fail(fmt::format("buffer {} was released while a consumer may still use it", id));
  }

  void open_gate() {
    gate_->open = true;
    for (Pending& p : pending_) p.blocked = false;
    blocked_.clear();
  }
  void add_pending(int stream, const std::vector<OpRec>& ops, bool launch) {
    pending_.push_back(Pending{stream, ops, blocked_.count(stream) > 0, launch});
    record_writes(ops, stream);
  }

  // Says what an operation does (TETHER_NCCL_MODEL_TRACE), once it is sure to act.
  void note(const std::string& t) {
    acted_ = true;
    if (trace()) fmt::print("[{}]     {}\n", device_, t);
  }
  static std::string describe(const std::vector<OpRec>& ops) {
    std::string t;
    for (const OpRec& o : ops)
      t += fmt::format(" [{} c{} b{}{} -> b{}{}]", o.p2p ? "send/recv" : "all_reduce", o.comm, o.src,
                       o.src_reg >= 0 ? fmt::format("(r{})", o.src_reg) : "", o.sink,
                       o.sink_reg >= 0 ? fmt::format("(r{})", o.sink_reg) : "");
    return t;
  }

  // ------------------------------------------------------------------------- picks

  template <class M>
  int pick_held(const M& m) {
    std::vector<int> ids;
    for (const auto& [id, r] : m)
      if (r.slot) ids.push_back(id);
    return ids.empty() ? -1 : ids[rng_.below(ids.size())];
  }
  template <class M>
  static std::size_t held(const M& m) {
    std::size_t n = 0;
    for (const auto& [id, r] : m) n += r.slot.has_value();
    return n;
  }

  // A communicator to issue on: one the test holds, or the one a registration the test holds
  // keeps (a registered buffer's communicator() outlives the test's own handle).
  std::optional<std::pair<int, nccl::Communicator>> pick_comm() {
    std::vector<std::pair<int, nccl::Communicator>> c;
    for (auto& [id, r] : comms_)
      if (r.slot) c.emplace_back(id, *r.slot);
    for (auto& [id, r] : regs_)
      if (r.slot) c.emplace_back(r.comm, r.slot->communicator());
    if (c.empty()) return std::nullopt;
    return c[rng_.below(c.size())];
  }

  // An operand of `comm`: a held buffer of the role, or a held registration of such a buffer with
  // that communicator, not in `taken`. False if there is none.
  bool pick_operand(int comm, bool source, const std::set<int>& taken, int& buf, int& reg) {
    std::vector<std::pair<int, int>> c;  // (buf, reg)
    for (auto& [id, b] : bufs_)
      if (b.slot && b.source == source && !taken.count(id)) c.emplace_back(id, -1);
    for (auto& [id, r] : regs_)
      if (r.slot && r.comm == comm && bufs_.at(r.buf).source == source && !taken.count(r.buf)) c.emplace_back(r.buf, id);
    if (c.empty()) return false;
    std::tie(buf, reg) = c[rng_.below(c.size())];
    return true;
  }

  // Issues `o` on `s` with its operands as the test holds them (plain or registered).
  void issue(const nccl::Communicator& c, const Stream& s, const OpRec& o) {
    auto with = [&](int buf, int reg, auto&& f) {
      if (reg >= 0)
        f(*regs_.at(reg).slot);
      else
        f(*bufs_.at(buf).slot);
    };
    with(o.src, o.src_reg, [&](const auto& src) {
      with(o.sink, o.sink_reg, [&](const auto& sink) {
        if (o.p2p) {
          nccl::group([&] {
            c.send(s, src, 0);
            c.recv(s, sink, 0);
          });
        } else {
          c.all_reduce(s, src, sink);
        }
      });
    });
  }

  // The sinks that work pending on a stream other than `stream` may still write. Two streams
  // never write one buffer unordered: the simulator's devices are host memory, and such writes
  // would race in the host's sense (as they race on a GPU, where the result is undefined).
  std::set<int> written_elsewhere(int stream) const {
    std::set<int> out;
    for (const Pending& p : pending_)
      if (p.stream != stream)
        for (const OpRec& o : p.ops) out.insert(o.sink);
    return out;
  }

  // One collective or a few, chosen at random on `comm`, into distinct sinks that no other
  // stream's pending work writes (`stream` < 0: any sink, for a capture).
  std::vector<OpRec> choose_ops(int comm, std::size_t most, int stream) {
    std::vector<OpRec> ops;
    std::set<int> sinks = stream >= 0 ? written_elsewhere(stream) : std::set<int>{};
    const std::size_t n = 1 + rng_.below(most);
    for (std::size_t i = 0; i < n; ++i) {
      OpRec o;
      o.comm = comm;
      o.p2p = rng_.chance(0.5);
      if (!pick_operand(comm, true, {}, o.src, o.src_reg)) break;
      if (!pick_operand(comm, false, sinks, o.sink, o.sink_reg)) break;
      sinks.insert(o.sink);
      ops.push_back(o);
    }
    return ops;
  }

  void expect_aborted_refusal(const std::exception& e, int comm, const char* what) {
    const std::string text = e.what();
    if (!comms_.at(comm).aborted) {
      fail(fmt::format("{} on a communicator that was not aborted threw: {}", what, text));
      return;
    }
    acted_ = true;
    if (text.find("was aborted (the model aborts it") == std::string::npos)
      fail(fmt::format("{} on an aborted communicator threw without saying why: {}", what, text));
    ++counts.refused;
  }

  // Records the writes `ops` make when they run on stream `stream`, in order.
  void record_writes(const std::vector<OpRec>& ops, int stream) {
    for (const OpRec& o : ops) bufs_.at(o.sink).writes.push_back(Write{o.src, stream, true, o.comm, o.p2p});
  }

  // ------------------------------------------------------------------------- operations

  // Whether `op` finds what it needs (a source and a sink may still be missing for a communicator
  // whose registrations are the only operands: then it does nothing).
  bool can(Op op) const {
    auto any_operand = [&](bool source) {
      for (const auto& [id, b] : bufs_)
        if (b.slot && b.source == source) return true;
      for (const auto& [id, r] : regs_)
        if (r.slot && bufs_.at(r.buf).source == source) return true;
      return false;
    };
    const bool issuable =
        held(streams_) > 0 && (held(comms_) > 0 || held(regs_) > 0) && any_operand(true) && any_operand(false);
    switch (op) {
      case Op::make_comm: return held(comms_) < 2 && comms_.size() < 4;
      case Op::drop_comm:
      case Op::abort_comm: return held(comms_) > 0;
      case Op::make_buffer: return held(bufs_) < 6 && bufs_.size() < 10;
      case Op::drop_buffer: return held(bufs_) > 0;
      case Op::register_buffer: return held(regs_) < 3 && held(comms_) > 0 && held(bufs_) > 0;
      case Op::drop_registration: return held(regs_) > 0;
      case Op::stream_collective: return issuable;
      case Op::capture: return issuable && held(graphs_) < 3;
      case Op::instantiate: return held(execs_) < 3 && held(graphs_) > 0;
      case Op::launch: return held(execs_) > 0 && held(streams_) > 0;
      case Op::drop_graph: return held(graphs_) > 0;
      case Op::drop_exec: return held(execs_) > 0;
      case Op::make_stream: return held(streams_) < 2;
      case Op::drop_stream: return held(streams_) > 0;
      case Op::synchronize: return true;
      case Op::count_: return false;
    }
    return false;
  }

  void run(Op op) {
    switch (op) {
      case Op::make_comm: {
        if (held(comms_) >= 2 || comms_.size() >= 4) return;
        const int id = next_id_++;
        note(fmt::format("communicator {}", id));
        comms_[id].slot = nccl::Communicator::create(ctx_, nccl::UniqueId::generate(rt_), 1, 0);
        return;
      }
      case Op::drop_comm: {
        const int id = pick_held(comms_);
        if (id < 0) return;
        note(fmt::format("communicator {}", id));
        comms_.at(id).slot.reset();
        return;
      }
      case Op::abort_comm: {
        const int id = pick_held(comms_);
        if (id < 0) return;
        note(fmt::format("communicator {}", id));
        CommRec& c = comms_.at(id);
        c.slot->abort(fmt::format("the model aborts it at step {}", step_));
        if (!c.slot->aborted() || !c.slot->abort_reason().starts_with("the model aborts it"))
          fail("an aborted communicator does not say it was aborted, or why");
        c.aborted = true;
        // What it has not run yet may now never run (its NCCL kernels return at once).
        for (auto& [bid, b] : bufs_)
          for (Write& w : b.writes)
            if (w.comm == id && w.p2p) w.certain = false;
        return;
      }
      case Op::make_buffer: {
        if (held(bufs_) >= 6 || bufs_.size() >= 10) return;
        const int id = next_id_++;
        BufRec b;
        b.source = rng_.chance(0.5);
        b.nccl_memory = rng_.chance(0.3);
        note(fmt::format("buffer {} ({}{})", id, b.source ? "source" : "sink", b.nccl_memory ? ", NCCL memory" : ""));
        SharedBuffer<float> buf =
            b.nccl_memory ? nccl::alloc<float>(ctx_, kElems).share() : ctx_.alloc<float>(kElems).share();
        const int pattern = b.source ? id : -1;
        std::vector<float> h(kElems);
        for (std::size_t i = 0; i < kElems; ++i) h[i] = value_of(pattern, i);
        buf.copy_from(h);
        b.allowed = {pattern};
        b.witness = buf;
        b.slot = std::move(buf);
        bufs_.emplace(id, std::move(b));
        return;
      }
      case Op::drop_buffer: {
        const int id = pick_held(bufs_);
        if (id < 0) return;
        note(fmt::format("buffer {}", id));
        bufs_.at(id).slot.reset();
        return;
      }
      case Op::register_buffer: {
        if (held(regs_) >= 3) return;
        const int c = pick_held(comms_), b = pick_held(bufs_);
        if (c < 0 || b < 0) return;
        try {
          nccl::RegisteredBuffer<float> r = comms_.at(c).slot->register_buffer(*bufs_.at(b).slot);
          if (comms_.at(c).aborted) fail("an aborted communicator registered a buffer");
          if (r.communicator().get() != comms_.at(c).slot->get() || r.data() != bufs_.at(b).slot->data())
            fail("a registered buffer names another communicator or buffer");
          const int id = next_id_++;
          note(fmt::format("registration {} of buffer {} with communicator {}", id, b, c));
          regs_[id] = RegRec{c, b, std::move(r)};
        } catch (const UsageError& e) {
          expect_aborted_refusal(e, c, "register_buffer");
        }
        return;
      }
      case Op::drop_registration: {
        const int id = pick_held(regs_);
        if (id < 0) return;
        note(fmt::format("registration {}", id));
        regs_.at(id).slot.reset();
        return;
      }
      case Op::stream_collective: {
        const int s = pick_held(streams_);
        auto c = pick_comm();
        if (s < 0 || !c) return;
        std::vector<OpRec> ops = choose_ops(c->first, 1, s);
        if (ops.empty()) return;
        // Not a send/receive behind a launch of captured send/receive work of the same
        // communicator on the same stream that may not have started: that launch's external wait
        // on NCCL's serial event would wait for the record this one queues behind it, and the
        // stream would hang (graph mixing; the simulator models it so, see the report of the
        // sweep). An all_reduce of one rank is a copy and takes no part in that ordering.
        if (ops.front().p2p)
          for (const Pending& p : pending_)
            if (p.stream == s && p.launch)
              for (const OpRec& o : p.ops)
                if (o.p2p && o.comm == c->first) ops.front().p2p = false;
        note(fmt::format("on stream {}:{}", s, describe(ops)));
        try {
          issue(c->second, *streams_.at(s).slot, ops.front());
          if (comms_.at(c->first).aborted) fail("an aborted communicator issued a collective");
          add_pending(s, ops, false);
        } catch (const UsageError& e) {
          expect_aborted_refusal(e, c->first, "a collective");
        }
        return;
      }
      case Op::capture: {
        if (held(graphs_) >= 3) return;
        const int s = pick_held(streams_);
        auto c = pick_comm();
        if (s < 0 || !c) return;
        std::vector<OpRec> ops = choose_ops(c->first, 3, -1);
        if (ops.empty()) return;
        const bool gated = rng_.chance(0.5);
        const Stream& stream = *streams_.at(s).slot;
        const int id = next_id_++;
        note(fmt::format("graph {} on stream {}{}:{}", id, s, gated ? " gated" : "", describe(ops)));
        try {
          // Threads capture in THREAD_LOCAL mode: one thread's synchronizations and copies must not
          // invalidate another's capture (GLOBAL mode would make them, as CUDA does).
          const CaptureMode mode = threaded_ ? CaptureMode::thread_local_ : CaptureMode::global;
          Graph g = tether::capture(stream, mode, [&] {
            if (gated)
              stream.host([gate = gate_] {
                while (!gate->open.load()) std::this_thread::sleep_for(50us);
              });
            for (const OpRec& o : ops) issue(c->second, stream, o);
          });
          if (comms_.at(c->first).aborted) fail("an aborted communicator's collective was captured");
          std::size_t plans = 0;
          for (const OpRec& o : ops) plans += o.p2p;
          graphs_[id] = GraphRec{std::move(g), ops, gated};
          graph_ops_[id] = ops;
          plans_of_[id] = plans;
        } catch (const UsageError& e) {
          expect_aborted_refusal(e, c->first, "a captured collective");
        }
        return;
      }
      case Op::instantiate: {
        if (held(execs_) >= 3) return;
        const int g = pick_held(graphs_);
        if (g < 0) return;
        const int id = next_id_++;
        note(fmt::format("executable {} of graph {}", id, g));
        execs_[id] = ExecRec{graphs_.at(g).slot->instantiate(), graphs_.at(g).ops, graphs_.at(g).gated};
        x_graph_[id] = g;
        return;
      }
      case Op::launch: {
        const int x = pick_held(execs_), s = pick_held(streams_);
        if (x < 0 || s < 0) return;
        ExecRec& e = execs_.at(x);
        const std::set<int> busy = written_elsewhere(s);
        for (const OpRec& o : e.ops)
          if (busy.count(o.sink)) return;  // another stream may still write its sink (not acted)
        int aborted_comm = -1;
        for (const OpRec& o : e.ops)
          if (comms_.at(o.comm).aborted) aborted_comm = o.comm;
        const bool hold = e.gated && aborted_comm < 0 && rng_.chance(0.6);
        note(fmt::format("executable {} on stream {}{}{}", x, s, hold ? ", held by the gate" : "",
                         aborted_comm >= 0 ? " (aborted communicator)" : ""));
        if (hold) gate_->open = false;
        try {
          e.slot->launch(*streams_.at(s).slot);
          if (aborted_comm >= 0) fail("an executable holding an aborted communicator's collective was launched");
          if (hold) {
            ++counts.gated_launches;
            blocked_.insert(s);
          }
          add_pending(s, e.ops, true);
        } catch (const UsageError& err) {
          if (hold) open_gate();
          expect_aborted_refusal(err, aborted_comm >= 0 ? aborted_comm : e.ops.front().comm, "a launch");
        }
        return;
      }
      case Op::drop_graph: {
        const int id = pick_held(graphs_);
        if (id < 0) return;
        note(fmt::format("graph {}", id));
        graphs_.erase(id);
        return;
      }
      case Op::drop_exec: {
        const int id = pick_held(execs_);
        if (id < 0) return;
        note(fmt::format("executable {}", id));
        // Its launches in flight keep what they use (pending on their streams).
        execs_.erase(id);
        x_graph_.erase(id);
        return;
      }
      case Op::make_stream: {
        if (held(streams_) >= 2) return;
        note(fmt::format("stream {}", next_id_));
        streams_[next_id_++].slot = ctx_.make_stream();
        return;
      }
      case Op::drop_stream: {
        const int id = pick_held(streams_);
        if (id < 0) return;
        note(fmt::format("stream {}", id));
        streams_.at(id).slot.reset();  // its work still runs, and keeps its owners
        return;
      }
      case Op::synchronize: {
        note("every held stream");
        synchronize();
        return;
      }
      case Op::count_: return;
    }
  }

  // Each sink holds what the model allows; each source its own pattern. Buffers with work pending
  // on a stream the test dropped are checked at the next settle point.
  void check_results() {
    std::set<int> unsettled;
    for (const Pending& p : pending_)
      for (const OpRec& o : p.ops) unsettled.insert(o.sink);
    for (auto& [id, b] : bufs_) {
      if (unsettled.count(id)) continue;
      std::vector<float> h(kElems);
      b.witness.copy_to(h);
      const int pattern = h[0] == -1.0f ? -1 : static_cast<int>(h[0]) / 4096;
      bool uniform = true;
      for (std::size_t i = 0; i < kElems && uniform; ++i) uniform = h[i] == value_of(pattern, i);
      if (!uniform) {
        fail(fmt::format("buffer {} holds a mix of patterns (element 0 is {}), not one collective's result", id, h[0]));
        continue;
      }
      if (b.source) {
        if (pattern != id) fail(fmt::format("source buffer {} was overwritten with pattern {}", id, pattern));
        continue;
      }
      if (b.writes.empty()) {
        if (!b.allowed.count(pattern))
          fail(fmt::format("buffer {} changed to pattern {} with no collective into it", id, pattern));
        continue;
      }
      ++counts.results_checked;
      const bool one_stream = std::all_of(b.writes.begin(), b.writes.end(),
                                          [&](const Write& w) { return w.stream == b.writes.front().stream; });
      const bool certain = std::all_of(b.writes.begin(), b.writes.end(), [](const Write& w) { return w.certain; });
      if (one_stream && certain) {
        if (pattern != b.writes.back().pattern)
          fail(fmt::format("buffer {} holds pattern {}; the last collective into it copied pattern {}", id, pattern,
                           b.writes.back().pattern));
      } else {
        std::set<int> ok = b.allowed;
        for (const Write& w : b.writes) ok.insert(w.pattern);
        if (!ok.count(pattern))
          fail(fmt::format("buffer {} holds pattern {}, which no collective wrote into it", id, pattern));
      }
      b.allowed = {pattern};
      b.writes.clear();
    }
  }

  const Runtime& rt_;
  Context ctx_;
  int device_;
  Rng rng_;
  bool threaded_;
  std::uint64_t step_ = 0;
  bool acted_ = false;  // the current step's operation found what it needs and acted (or was refused)
  int next_id_ = 0;
  std::shared_ptr<Gate> gate_ = std::make_shared<Gate>();
  std::map<int, CommRec> comms_;
  std::map<int, BufRec> bufs_;
  std::map<int, RegRec> regs_;
  std::map<int, GraphRec> graphs_;
  std::map<int, ExecRec> execs_;
  std::map<int, int> x_graph_;                   // executable -> the graph it was made from
  std::map<int, std::vector<OpRec>> graph_ops_;  // graphs a graph or executable still holds
  std::map<int, std::size_t> plans_of_;          // send/receive plans a graph's capture made
  std::map<int, StreamRec> streams_;
  std::vector<Pending> pending_;
  std::set<int> blocked_;  // streams a launch the closed gate holds blocks
};

// Settles the process (every device the checkers use): all work has run and the releases queued
// are done.
void settle_process(const Runtime& rt, const std::vector<int>& devices) {
  sim::quiesce(10s);  // the work of dropped streams too (every gate is open)
  for (int d : devices) (void)wait_released(rt.context(d), 10s);
  (void)wait_reclaimed(10s);
}

// Waits for the process-wide counts to match the model's; returns the mismatch if they never do.
std::string compare_eventually(const Expected& e, std::size_t device_base) {
  const bool same = eventually(
      [&] {
        tether::reclaim();
        return mismatch(e, observe(), device_base).empty();
      },
      10s);
  return same ? std::string() : mismatch(e, observe(), device_base);
}

std::string report(const std::vector<std::string>& f) {
  std::string s;
  for (std::size_t i = 0; i < f.size() && i < 10; ++i) s += "\n  " + f[i];
  return s;
}

std::string op_counts(const Counts& c) {
  std::string s;
  for (std::size_t i = 0; i < c.ops.size(); ++i) s += fmt::format("{}{} {}", i ? ", " : "", c.ops[i], kOpNames[i]);
  return s;
}

}  // namespace

TEST_SUITE_BEGIN("reliability");

TEST_CASE_FIXTURE(NcclFixture,
                  "Random sequences of communicator, buffer, registration, collective, graph and launch operations "
                  "keep every communicator and buffer exactly as long as the model says a consumer may use it") {
  if (!simulated) {
    MESSAGE("the model checker needs the simulator (its NCCL's accounting and violation log)");
    return;
  }
  const std::uint64_t per_seed = operations_per_seed();
  std::vector<std::uint64_t> seeds{1, 2, 3, 4};
  if (const char* only = std::getenv("TETHER_NCCL_MODEL_SEED")) seeds = {std::strtoull(only, nullptr, 0)};
  Context ctx = rt.context(0);
  ctx.make_current();
  REQUIRE(settle());
  const std::size_t device_base = sim::stats().device_allocations;
  REQUIRE(nccl::communicator_counts().alive == 0);
  Counts all;
  std::uint64_t sequences = 0;
  for (std::uint64_t seed : seeds) {
    CAPTURE(seed);
    Checker c(rt, 0, seed, false);
    for (std::uint64_t i = 0; i < per_seed; ++i) {
      c.step();
      const bool end = (i + 1) % kSequence == 0 || i + 1 == per_seed;
      if (end) {
        c.drop_all();
        ++sequences;
      }
      if ((i + 1) % kSettleEvery == 0 || end) {
        c.before_settle();
        settle_process(rt, {0});
        const Expected e = c.settled();
        const std::string m = compare_eventually(e, device_base);
        if (!m.empty()) c.fail("at a settle point:" + m);
        if (end && !c.empty()) c.fail("after everything was dropped the model still tracks live objects");
      }
    }
    CHECK_MESSAGE(c.failures.empty(), c.failures.size() << " failure(s):" << report(c.failures));
    all.add(c.counts);
  }
  MESSAGE("NCCL model check: " << all.steps << " operations drawn in " << sequences << " sequences (seeds " << seeds.front() << "-" << seeds.back() << ", "
                               << per_seed << " each), " << all.total() << " acted: " << op_counts(all) << "; "
                               << all.refused
                               << " refused as documented (aborted communicator), " << all.gated_launches
                               << " launches held in flight by a gate, " << all.results_checked
                               << " collective results checked, " << all.settle_points << " settle points");
  CHECK(all.steps == per_seed * seeds.size());
  CHECK(all.total() * 2 > all.steps);
  CHECK(all.results_checked > 0);
  CHECK(all.refused > 0);
  CHECK(all.gated_launches > 0);
}

TEST_CASE_FIXTURE(NcclFixture,
                  "Random sequences on three threads at once, each with its own communicators on its own device, keep "
                  "every communicator and buffer exactly as long as the model says a consumer may use it") {
  if (!simulated) {
    MESSAGE("the model checker needs the simulator (its NCCL's accounting and violation log)");
    return;
  }
  constexpr int kThreads = 3;
  if (!fits(kThreads)) return;
  const std::uint64_t per_thread = operations_per_seed() / 2;
  REQUIRE(settle());
  const std::size_t device_base = sim::stats().device_allocations;
  std::vector<std::unique_ptr<Checker>> checkers;
  for (int t = 0; t < kThreads; ++t)
    checkers.push_back(std::make_unique<Checker>(rt, t, 100 + static_cast<std::uint64_t>(t), true));
  const std::vector<int> devices{0, 1, 2};
  std::vector<Expected> expected(kThreads);
  std::vector<std::string> global_failures;
  // The first barrier's completion settles the process; the second's compares its counts with
  // the sum of what every checker expects.
  std::barrier settled(kThreads, [&]() noexcept {
    try {
      settle_process(rt, devices);
    } catch (const std::exception& e) {
      global_failures.push_back(fmt::format("settling threw: {}", e.what()));
    }
  });
  std::barrier compared(kThreads, [&]() noexcept {
    Expected sum;
    for (const Expected& e : expected) sum.add(e);
    const std::string m = compare_eventually(sum, device_base);
    if (!m.empty() && global_failures.size() < 10) global_failures.push_back("at a settle point:" + m);
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      Checker& c = *checkers[static_cast<std::size_t>(t)];
      rt.context(t).make_current();
      for (std::uint64_t i = 0; i < per_thread; ++i) {
        c.step();
        const bool end = i + 1 == per_thread;
        if (end) c.drop_all();
        if ((i + 1) % kSettleEvery == 0 || end) {
          try {
            c.before_settle();
          } catch (const std::exception& e) {
            c.fail(fmt::format("synchronizing before a settle point threw: {}", e.what()));
          }
          settled.arrive_and_wait();
          try {
            expected[static_cast<std::size_t>(t)] = c.settled();
          } catch (const std::exception& e) {
            c.fail(fmt::format("checking a settle point threw: {}", e.what()));
          }
          compared.arrive_and_wait();
          if (end && !c.empty()) c.fail("after everything was dropped the model still tracks live objects");
        }
      }
    });
  for (auto& th : threads) th.join();
  Counts all;
  for (int t = 0; t < kThreads; ++t) {
    Checker& c = *checkers[static_cast<std::size_t>(t)];
    CAPTURE(t);
    CHECK_MESSAGE(c.failures.empty(), c.failures.size() << " failure(s):" << report(c.failures));
    all.add(c.counts);
  }
  CHECK_MESSAGE(global_failures.empty(), global_failures.size() << " failure(s):" << report(global_failures));
  MESSAGE("NCCL model check, " << kThreads << " threads (seeds 100-102, devices 0-2): " << all.steps
                               << " operations drawn, " << all.total() << " acted: " << op_counts(all) << "; " << all.refused << " refused, "
                               << all.gated_launches << " gated launches, " << all.results_checked
                               << " results checked, " << all.settle_points << " settle points");
  CHECK(all.steps == per_thread * kThreads);
  CHECK(all.total() * 2 > all.steps);
}

TEST_SUITE_END();
