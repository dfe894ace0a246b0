// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The tether authors
//
// The mutation protocol of docs/design/attachments.md lifted to a transaction over many operations: every
// operation prepares (attachment, user object retained on the graph, metadata record), then makes
// its driver call and logs how to undo it; commit publishes all metadata and only then releases
// superseded versions; rollback undoes every driver change in reverse order. Holds the hierarchy's
// lock for its whole life (invariant 10). The typed DSL (`tether::Edit`) is built on it.
#pragma once

#include "../config.hpp"
#include "../prelude.hpp"
#include "function_ref.hpp"
#include "hierarchy.hpp"

namespace tether::detail {

/// A self-contained copy of a kernel node's parameters (the argument values are copied, so the
/// copy stays valid after the caller's arguments are gone). Parameter lists of up to 16 arguments
/// and 128 bytes are stored inline: reading, keeping and restoring a node's parameters then
/// allocates nothing.
struct KernelCall {
  CUDA_KERNEL_NODE_PARAMS params{};

  /// Copies `p`, whose argument i has `sizes[i]` bytes. Throws std::bad_alloc.
  static KernelCall copy(const CUDA_KERNEL_NODE_PARAMS& p, std::span<const std::size_t> sizes);
  KernelCall() = default;
  KernelCall(const KernelCall& o) { assign(o); }
  KernelCall& operator=(const KernelCall& o) {
    if (this != &o) assign(o);
    return *this;
  }
  ~KernelCall() = default;

 private:
  static constexpr std::size_t kInlineBytes = 128, kInlineArgs = 16;
  void assign(const KernelCall& o);
  // Where nbytes of argument values and nargs pointers go (inline, or on the heap).
  void reserve(std::size_t nbytes, std::size_t nargs);
  std::byte* bytes() noexcept { return heap_bytes_ ? heap_bytes_.get() : inline_bytes_; }
  void** args() noexcept { return heap_args_ ? heap_args_.get() : inline_args_; }

  alignas(16) std::byte inline_bytes_[kInlineBytes];
  void* inline_args_[kInlineArgs];
  std::unique_ptr<std::byte[]> heap_bytes_;
  std::unique_ptr<void*[]> heap_args_;
  std::size_t nbytes_ = 0, nargs_ = 0;
};

class Transaction {
 public:
  using AddFn = FunctionRef<CUresult(CUgraph graph, const CUgraphNode* deps, std::size_t ndeps, CUgraphNode* out)>;
  /// The driver call of an update (called once, during update()).
  using ApplyFn = FunctionRef<CUresult()>;
  /// How to restore a node's previous parameters (kept until the transaction ends).
  using CallFn = std::function<CUresult()>;
  /// Called after an add succeeded, to register graphs CUDA created inside the node (child graph,
  /// conditional bodies) as boxes of the hierarchy. May throw (the add is then undone).
  using AfterAdd = FunctionRef<void(Hierarchy&, NodeRecord*)>;

  /// Locks `h` and checks it is usable (UsageError otherwise, also when this thread already has an
  /// edit of the same graph open, or when waiting would close a cycle of threads waiting for each
  /// other's graphs).
  explicit Transaction(std::shared_ptr<Hierarchy> h);
  /// Rolls back what was not committed.
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  Hierarchy& hierarchy() noexcept { return *h_; }
  const std::shared_ptr<Hierarchy>& shared() const noexcept { return h_; }
  bool active() const noexcept { return !done_; }
  /// Throws UsageError unless the calling thread opened the transaction (`what` names the call).
  void check_thread(std::string_view what) const {
    if (std::this_thread::get_id() != thread_) [[unlikely]]
      throw_wrong_thread(what);
  }

  /// Adds a node to `box` after `deps` (all in `box`). `add` makes the driver call; `entry` names it
  /// for errors. Returns the node's record (usable as a dependency at once, published at commit).
  /// Throws UsageError for bad handles, DriverError when prepare or the driver call fails (nothing
  /// of this operation remains; earlier operations stay until the transaction ends).
  NodeRecord* add(Box& box, std::span<NodeRecord* const> deps, CUgraphNodeType type, Owners&& owners, AddFn add,
                  Entry entry, std::string_view what, AfterAdd after = {});

  /// Changes the parameters of `r`: `apply` makes the driver call; `undo` restores the previous
  /// parameters on rollback. The new owners become the node's version at commit, and the previous
  /// version is released after that.
  void update(NodeRecord* r, Owners&& owners, ApplyFn apply, Entry entry, CallFn undo, std::string_view what);

  /// Keeps a copy of kernel node `node`'s previous parameters until the transaction ends, for the
  /// undo of its update: the undo then captures only an index (no allocation). Throws
  /// std::bad_alloc.
  std::size_t keep_kernel(CUgraphNode node, const KernelCall& previous) {
    kept_.push_back({node, previous});
    return kept_.size() - 1;
  }
  /// Restores what keep_kernel(i) kept (cuGraphKernelNodeSetParams).
  CUresult restore_kernel(std::size_t i) const noexcept;

  /// Removes `r` at commit (removals never need undoing). Idempotent within the transaction.
  void remove(NodeRecord* r);

  /// Adds / removes the edge from -> to now (undone on rollback).
  void connect(NodeRecord* from, NodeRecord* to);
  void disconnect(NodeRecord* from, NodeRecord* to);

  /// Publishes every change, then releases superseded versions and applies removals. Never
  /// throws; a removal the driver refuses leaves that node in place and is reported through the
  /// error hook (docs/dsl.md, "when the driver fails").
  void commit() noexcept;
  /// Undoes every driver change in reverse order. If an undo step fails, the references that the
  /// graph may still need are kept, the failure is reported through the error hook, and the graph
  /// is marked unusable (later edits throw UsageError saying why).
  void rollback() noexcept;

  /// Checks that `r` is a live node of this hierarchy or one added by this transaction.
  void check_node(const NodeRecord* r, std::uint32_t generation, const char* what) const;

 private:
  enum class Kind : std::uint8_t { add, update, remove, connect, disconnect };
  // Trivially copyable, 40 bytes: the log grows by memcpy. An update's undo closure lives in
  // undos_ (only updates have one).
  struct Op {
    Kind kind;
    std::uint32_t undo = 0;  // index into undos_ (updates)
    NodeRecord* rec = nullptr;
    NodeRecord* other = nullptr;  // edge target
    Staged staged;
  };
  void undo_one(Op& op) noexcept;
  void reserve_one();
  [[noreturn]] static void throw_wrong_thread(std::string_view what);
  void finish() noexcept;
  void remove_now(NodeRecord* r) noexcept;
  bool added_here(const NodeRecord* r) const noexcept;

  std::shared_ptr<Hierarchy> h_;
  std::thread::id thread_;  // the thread that opened it: the only one that may use it
  std::vector<Op> ops_;
  std::vector<CallFn> undos_;
  struct KeptKernel {
    CUgraphNode node;
    KernelCall params;
  };
  std::vector<KeptKernel> kept_;
  bool done_ = false;
};

}  // namespace tether::detail
