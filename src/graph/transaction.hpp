// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The mutation protocol of docs/design/attachments.md lifted to a transaction over many operations: every
// operation prepares (attachment, user object retained on the graph, metadata record), then makes
// its driver call and stages the change in the transaction's ledger; commit publishes the ledger
// (all metadata, and only then the releases of superseded versions); rollback discards it (every
// driver change undone in reverse order). Holds the hierarchy's
// lock for its whole life (invariant 10). The typed DSL (`tether::Edit`) is built on it.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "function_ref.hpp"
#include "hierarchy.hpp"
#include "kinds/desc.hpp"
#include "ledger.hpp"

namespace tether::detail {

struct ParamValue;

class Transaction {
 public:
  /// The driver call of an update (called once, during update()); throws DriverError when the
  /// driver refuses, after putting the node back as it was.
  using ApplyFn = FunctionRef<void()>;
  /// Called after an add succeeded, to register graphs CUDA created inside the node (child graph,
  /// conditional bodies) as boxes of the hierarchy, or to set a kernel node's attributes. May
  /// throw (the add is then undone).
  using AfterAdd = FunctionRef<void(Hierarchy&, NodeRecord*)>;

  /// Locks `h` and checks it is usable (UsageError otherwise, also when this thread already has an
  /// edit of the same graph open, or when waiting would close a cycle of threads waiting for each
  /// other's graphs).
  explicit Transaction(std::shared_ptr<Hierarchy> h);
  /// Rolls back what was not committed.
  ~Transaction();

  /// A transaction on `h` from the process-wide pool that edits use (locks `h` as the constructor
  /// does, and throws what it throws; nothing is taken from the pool then). Give it back with
  /// `give_back`. Why a pool whose transactions are never freed: an insertion point keeps a plain
  /// pointer and the `serial()` of its edit, and a pointer to memory that is never freed can
  /// always be read to find out that its edit has ended (without a shared_ptr copy, two atomic
  /// operations, per insertion point); and a reused transaction keeps its log's capacity.
  static Transaction* lease(std::shared_ptr<Hierarchy> h);
  /// Rolls `t` back if it is still active, drops its hierarchy and returns it to the pool.
  static void give_back(Transaction* t) noexcept;
  /// Changes once whenever the transaction ends (commit or rollback): an insertion point made
  /// while it was active compares it with the value it noted. Readable from any thread.
  std::uint64_t serial() const noexcept { return serial_.load(std::memory_order_acquire); }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  Hierarchy& hierarchy() noexcept { return *h_; }
  const std::shared_ptr<Hierarchy>& shared() const noexcept { return h_; }
  bool active() const noexcept { return !done_; }
  /// Throws UsageError unless the calling thread opened the transaction (`what` names the call).
  void check_thread(std::string_view what) const {
    if (std::this_thread::get_id() != thread_.load(std::memory_order_relaxed)) [[unlikely]]
      throw_wrong_thread(what);
  }

  /// Adds a node described by `params` to `box` after `deps` (all in `box`), with cuGraphAddNode.
  /// `what` names the node for errors. Returns the node's record (usable as a dependency at once,
  /// published at commit). Throws UsageError for bad handles, DriverError when prepare or the
  /// driver call fails (nothing of this operation remains; earlier operations stay until the
  /// transaction ends).
  NodeRecord* add(Box& box, std::span<NodeRecord* const> deps, CUgraphNodeParams& params, Owners&& owners,
                  std::string_view what, AfterAdd after = {});

  /// Changes the parameters of `r`: `apply` makes the driver calls; `undo` restores the previous
  /// parameters on rollback. The new owners become the node's version at commit, and the previous
  /// version is released after that.
  void update(NodeRecord* r, Owners&& owners, ApplyFn apply, Undo undo);

  /// Sets parameter `v` in every kernel node of the hierarchy whose newest version (staged by this
  /// transaction, else published) binds it, all or nothing (Edit::set); with `count_only`, only
  /// counts them. Returns the number of nodes. Throws DriverError, std::bad_alloc.
  std::size_t set_param(const ParamValue& v, bool count_only);

  /// Where updates keep their nodes' previous parameters until the transaction ends.
  Arena& arena() noexcept { return ledger_.arena(); }
  /// Makes room for `n` more changes (so that a merge cannot fail). Throws std::bad_alloc.
  void reserve(std::size_t n) { ledger_.reserve(n); }
  /// Takes over a capture's ledger, whose graph is `box` of this hierarchy: its nodes are the box's
  /// at once, and a rollback retires them with the rest of the transaction (Ledger::merge). Call
  /// `reserve` first; never fails then.
  void merge(Ledger& captured, Box& box) noexcept { ledger_.merge(captured, box, *h_); }
  /// Removes `r` at commit (removals never need undoing). Idempotent within the transaction.
  void remove(NodeRecord* r);

  /// Adds / removes the edge from -> to now (undone on rollback).
  void connect(NodeRecord* from, NodeRecord* to);
  void disconnect(NodeRecord* from, NodeRecord* to);
  /// Names `r` (an empty name removes its name); restored on rollback. `what` names the call.
  /// Throws UsageError for a name with a control character, std::bad_alloc (nothing changed).
  void name(NodeRecord* r, std::string name, std::string_view what);

  /// Publishes every change, then releases superseded versions and applies removals. Never
  /// throws; a removal the driver refuses leaves that node in place and is reported through the
  /// error hook (docs/dsl.md, "when the driver fails").
  void commit() noexcept;
  /// Undoes every driver change in reverse order. If an undo step fails, the references that the
  /// graph may still need are kept, the failure is reported through the error hook, and the graph
  /// is marked unusable (later edits throw UsageError saying why).
  void rollback() noexcept;

  /// While set, every operation throws UsageError (an edit's capture is running its function).
  void set_capturing(bool on) noexcept { capturing_ = on; }
  [[noreturn]] static void throw_capturing();

  /// Checks that `n` is a live node of this hierarchy or one added by this transaction; returns
  /// its record. Throws UsageError naming `what`.
  NodeRecord* check_node(const NodeRef& n, const char* what) const;

 private:
  void change_edge(NodeRecord* from, NodeRecord* to, bool add);
  [[noreturn]] static void throw_wrong_thread(std::string_view what);
  void finish() noexcept;

  std::shared_ptr<Hierarchy> h_;
  Transaction() noexcept = default;  // closed: for the pool
  void open(std::shared_ptr<Hierarchy> h);
  // The thread that opened it: the only one that may use it. Atomic: a stale insertion point on
  // another thread may read it while a pooled transaction is opened again.
  std::atomic<std::thread::id> thread_{};
  std::atomic<std::uint64_t> serial_{0};
  Ledger ledger_;
  bool done_ = true;  // set by open()
  bool capturing_ = false;
};

}  // namespace tether::detail
