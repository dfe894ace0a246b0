// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The transaction engine's bookkeeping where operations of one transaction interact (an update
// and a removal of the same node, a removal of the graph that holds an updated node): invariants
// 2 and 3 say each staged reference is either published or released, never left behind.
#include <doctest/doctest.h>

#include <memory>

#include "support/owner_probe.hpp"

namespace {

using namespace tether_test;
using tether::Owners;
namespace td = tether::detail;

TEST_CASE_FIXTURE(
    AttachEnv,
    "invariant 3: a node updated and removed in one transaction releases every version at commit, in "
    "either order") {
  auto tr = tracker();
  auto h = graph();
  NodeRecord* r = edit(h, [&](Transaction& tx) {
    return td::add_host(tx, h->root(), {}, &host_nothing, nullptr, Owners{Probe(tr)});
  });
  edit(h, [&](Transaction& tx) { return td::add_empty(tx, h->root(), {}, Owners{}); });
  SUBCASE("update, then remove") {
    edit(h, [&](Transaction& tx) {
      td::update_host(tx, r, &host_nothing, nullptr, Owners{Probe(tr)});
      tx.remove(r);
    });
  }
  SUBCASE("remove, then update") {
    edit(h, [&](Transaction& tx) {
      tx.remove(r);
      td::update_host(tx, r, &host_nothing, nullptr, Owners{Probe(tr)});
    });
  }
  CHECK(h->root().node_count == 1);
  // Both versions are released now, while the graph lives on (not only when it is destroyed).
  CHECK(tr->wait_destroyed(2));
  CHECK(tr->destroyed_after_settle(2));
  CHECK(wait_attachments(live_before, acc_before));
  h.reset();
  CHECK(tr->none_twice());
}

TEST_CASE_FIXTURE(
    AttachEnv,
    "invariant 3: a node of an embedded graph updated in the transaction that removes the child node "
    "is released exactly once, by CUDA") {
  auto tr = tracker();
  auto s = graph();
  edit(s, [&](Transaction& tx) {
    return td::add_host(tx, s->root(), {}, &host_nothing, nullptr, Owners{Probe(tr)});
  });
  auto h = graph();
  Box* made = nullptr;
  NodeRecord* child =
      edit(h, [&](Transaction& tx) { return td::embed(tx, h->root(), {}, *s, Owners{Probe(tr)}, &made); });
  s.reset();
  NodeRecord* inner = made->first;
  REQUIRE(inner != nullptr);
  SUBCASE("update, then remove the child node") {
    edit(h, [&](Transaction& tx) {
      td::update_host(tx, inner, &host_nothing, nullptr, Owners{Probe(tr)});
      tx.remove(child);
    });
  }
  SUBCASE("remove the child node, then update") {
    edit(h, [&](Transaction& tx) {
      tx.remove(child);
      td::update_host(tx, inner, &host_nothing, nullptr, Owners{Probe(tr)});
    });
  }
  CHECK(h->root().node_count == 0);
  CHECK(tr->wait_destroyed(3));
  CHECK(tr->destroyed_after_settle(3));
  CHECK(tr->none_twice());
  CHECK(wait_attachments(live_before, acc_before));
  h.reset();
}

}  // namespace
