// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// Support of the hardening families: a family is a table of named member invocations, checked
// one per SUBCASE (each with a fresh fixture), so that adding a member is one line. A member of
// the contract that the library does not declare yet is reached through a detector below, which
// fails that member ("not implemented: ...") instead of breaking the build of every family.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>
#include <vector>

#include "support/dsl_fixture.hpp"

namespace hardening {

using namespace std::chrono_literals;

/// One named member invocation of a family.
using Member = std::pair<std::string, std::function<void()>>;
using Table = std::vector<Member>;
/// One named observation (must hold) of a family.
using Observation = std::pair<std::string, std::function<bool()>>;
using Observations = std::vector<Observation>;

/// Thrown by the detectors when the library does not declare a member of the contract yet.
struct Missing : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline bool contains(std::string_view hay, std::string_view needle) { return hay.find(needle) != std::string_view::npos; }

inline std::string quoted(std::initializer_list<std::string_view> needles) {
  std::string s;
  for (std::string_view n : needles) s += (s.empty() ? "\"" : ", \"") + std::string(n) + "\"";
  return s;
}

/// Runs `fn` once: it must throw tether::UsageError whose message contains every one of `needles`
/// and none of `absent`. Anything else fails the member with what was thrown instead.
inline void expect_usage(const std::function<void()>& fn, std::initializer_list<std::string_view> needles,
                         std::initializer_list<std::string_view> absent = {}) {
  try {
    fn();
  } catch (const tether::UsageError& e) {
    const std::string what = e.what();
    for (std::string_view n : needles)
      CHECK_MESSAGE(contains(what, n), "UsageError \"" << what << "\" does not contain \"" << std::string(n) << "\"");
    for (std::string_view n : absent)
      CHECK_MESSAGE(!contains(what, n), "UsageError \"" << what << "\" contains \"" << std::string(n) << "\"");
    return;
  } catch (const Missing& e) {
    FAIL_CHECK("not implemented: " << std::string(e.what()));
    return;
  } catch (const tether::DriverError& e) {
    FAIL_CHECK("threw DriverError instead of UsageError: " << std::string(e.what()));
    return;
  } catch (const std::exception& e) {
    FAIL_CHECK("threw " << std::string(typeid(e).name()) << " instead of UsageError: " << std::string(e.what()));
    return;
  } catch (...) {
    FAIL_CHECK("threw something that is not a std::exception instead of UsageError");
    return;
  }
  FAIL_CHECK("no exception; expected UsageError containing " << quoted(needles));
}

/// Runs `fn` once: it must not throw.
inline void expect_ok(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Missing& e) {
    FAIL_CHECK("not implemented: " << std::string(e.what()));
  } catch (const std::exception& e) {
    FAIL_CHECK("threw " << std::string(typeid(e).name()) << ": " << std::string(e.what()));
  } catch (...) {
    FAIL_CHECK("threw something that is not a std::exception");
  }
}

/// Every simulator violation since the last check fails the current member (a violation means
/// tether reached the driver where it should not have); the log is cleared.
inline void no_violations() {
  for (const tether::sim::Violation& v : tether::sim::violations())
    FAIL_CHECK("simulator violation " << std::string(tether::sim::to_string(v.kind)) << " in '" << v.entry_point
                                      << "': " << v.detail);
  tether::sim::clear_violations();
}

// Every SUBCASE is named by its whole path ("state / member"), so that one member can be selected
// or excluded on the command line (doctest -sc / -sce, commas escaped as \,): run_isolated.py
// runs the families around members that crash.

/// Each member of `table` in its own SUBCASE named `prefix + name`: it must throw UsageError
/// containing `needles` and none of `absent`.
inline void each_throws(const Table& table, std::initializer_list<std::string_view> needles,
                        std::initializer_list<std::string_view> absent = {}, const std::string& prefix = "") {
  for (const Member& m : table) {
    SUBCASE((prefix + m.first).c_str()) {
      INFO("member: " << m.first);
      expect_usage(m.second, needles, absent);
      no_violations();
    }
  }
}
/// Each member of `table` in its own SUBCASE: it must not throw.
inline void each_ok(const Table& table, const std::string& prefix = "") {
  for (const Member& m : table) {
    SUBCASE((prefix + m.first).c_str()) {
      INFO("member: " << m.first);
      expect_ok(m.second);
      no_violations();
    }
  }
}
/// Each observation in its own SUBCASE: it must hold (and not throw).
inline void each_holds(const Observations& table, const std::string& prefix = "") {
  for (const Observation& o : table) {
    SUBCASE((prefix + o.first).c_str()) {
      INFO("observation: " << o.first);
      bool held = false;
      expect_ok([&] { held = o.second(); });
      CHECK_MESSAGE(held, "does not hold: " << o.first);
      no_violations();
    }
  }
}

// ---------------------------------------------------------------------------- detectors
// Contract members the library may not declare yet. Each is a template so that the missing
// spelling is only looked at on instantiation.

/// `static_cast<bool>(x)`; fails the member if T has no explicit operator bool.
template <class T>
bool truthy(const T& x) {
  if constexpr (std::is_constructible_v<bool, const T&>)
    return static_cast<bool>(x);
  else
    throw Missing(std::string("explicit operator bool of ") + typeid(T).name());
}

/// `x.reset()`; throws Missing if T has no reset().
template <class T>
void reset_of(T& x) {
  if constexpr (requires { x.reset(); })
    x.reset();
  else
    throw Missing(std::string("reset() of ") + typeid(T).name());
}

/// `tether::wait_released(ctx, timeout)`; throws Missing if not declared.
template <class C>
bool wait_released_of(const C& ctx, std::chrono::milliseconds timeout) {
  if constexpr (requires { { wait_released(ctx, timeout) } -> std::same_as<bool>; })
    return wait_released(ctx, timeout);  // found by ADL in namespace tether
  else
    throw Missing("tether::wait_released(const Context&, std::chrono::milliseconds) -> bool");
}

/// Whether the contract's new declarations exist (checked by one test of states_test.cpp).
template <class C = tether::Context>
constexpr bool has_wait_released = requires(const C& c, std::chrono::milliseconds t) {
  { wait_released(c, t) } -> std::same_as<bool>;
};
template <class G = tether::Graph>
constexpr bool has_graph_reset = requires(G& g) { g.reset(); };
template <class G = tether::GraphExec>
constexpr bool has_exec_reset = requires(G& g) { g.reset(); };

// ---------------------------------------------------------------------------- fixture

/// The DSL fixture, and a graph with one node of each kind that an executable updates.
struct Fixture : tether_test::DslFixture {
  using Scale = tether::Node<tether::KernelNode<float*, float, int>>;

  /// A live graph with a node of every updatable kind (and a child graph), and the handles.
  struct AllKinds {
    tether::SharedBuffer<float> x, y;
    tether::SharedPinnedBuffer<float> h;
    tether::Event ev;
    tether::Graph child;
    tether::Graph g;
    Scale kernel;
    tether::Node<tether::MemsetNode> memset;
    tether::Node<tether::MemcpyNode> memcpy;
    tether::Node<tether::HostNode> host;
    tether::Node<tether::EventRecordNode> record;
    tether::Node<tether::EventWaitNode> wait;
    tether::Node<tether::ChildNode> embedded;
    tether::GraphRef view;
  };

  AllKinds all_kinds() {
    AllKinds a{buffer(8, 1.0f), buffer(8, 0.0f), ctx.alloc_pinned<float>(8).share(), ctx.make_event(), tether::Graph{ctx},
               tether::Graph{ctx}, {}, {}, {}, {}, {}, {}, {}, {}};
    a.child.edit([&](tether::Edit& e) { e.empty(); });
    a.g.edit([&](tether::Edit& e) {
      a.kernel = e.launch(k.scale, tether::Grid{1}, tether::Block{8}, a.x, 2.0f, 8);
      a.memset = e.after(a.kernel).memset(a.y, 0.0f);
      a.memcpy = e.after(a.memset).memcpy(a.y, a.x);
      a.host = e.after(a.memcpy).host([] {});
      a.record = e.after(a.host).record(a.ev);
      a.wait = e.after(a.record).wait(a.ev);
      auto [n, v] = e.after(a.wait).embed(a.child);
      a.embedded = n;
      a.view = v;
    });
    return a;
  }

  /// tether::wait_released on the fixture's context; where it is not declared yet (the
  /// declarations test reports that), tether::wait_reclaimed, so that the other checks still run.
  bool released(std::chrono::milliseconds timeout = 5s) {
    if constexpr (has_wait_released<>)
      return wait_released_of(ctx, timeout);
    else
      return tether::wait_reclaimed(timeout);
  }
};

}  // namespace hardening
