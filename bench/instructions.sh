#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The tether authors
#
# Deterministic per-node counts of tether's own cost (docs/performance.md, "Deterministic counts"):
# runs `instructions` (bench/instructions.cpp: one operation on the fake driver entry points of
# bench/fake_driver.hpp) for every operation at two sizes under callgrind, with tether and with the
# raw floor, and prints per operation, marginal between the sizes:
#   RESULT op=OP instructions_per_node=N allocations_per_node=N atomics_per_node=N locks_per_node=N driver_calls_per_node=N
#   FLOOR op=OP instructions_per_node=N driver_calls_per_node=N
# plus DETAIL and METADATA lines (bench/callgrind_counts.py says how each figure is counted).
# Exits non-zero if any run failed.
# Usage: bench/instructions.sh [--smoke] [--args 1|3] [--sizes N1,N2] [--keep DIR] BUILD_DIR
#   --smoke   N = 20 and 40, and no runs for the driver's share (CI)
#   --args 3  every node owns three buffers (default one)
#   --keep    leave the callgrind files and the program's output in DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
n1=1000 n2=2000 nargs=1 smoke=0 keep= build=
while (($#)); do
  case $1 in
    --smoke) smoke=1 n1=20 n2=40 ;;
    --args) nargs=$2; shift ;;
    --sizes) n1=${2%,*} n2=${2#*,}; shift ;;
    --keep) keep=$2; shift ;;
    -h | --help) sed -n '4,17p' "$0"; exit 0 ;;
    -*) echo "instructions.sh: unknown option $1" >&2; exit 2 ;;
    *) build=$1 ;;
  esac
  shift
done
[[ $n1 =~ ^[1-9][0-9]*$ && $n2 =~ ^[1-9][0-9]*$ ]] && ((n1 < n2)) ||
  { echo "instructions.sh: --sizes wants two node counts N1,N2 with 0 < N1 < N2 (got $n1,$n2)" >&2; exit 2; }
[[ $nargs = 1 || $nargs = 3 ]] || { echo "instructions.sh: --args wants 1 or 3 (got $nargs)" >&2; exit 2; }
[ -n "$build" ] || { echo "usage: bench/instructions.sh [--smoke] [--args 1|3] [--sizes N1,N2] [--keep DIR] BUILD_DIR" >&2; exit 2; }
[ -x "$build/bench/instructions" ] || { echo "instructions.sh: $build/bench/instructions is not built (ninja -C $build bench/instructions)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "instructions.sh: valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "instructions.sh: python3 is not installed" >&2; exit 1; }
objcopy=$(command -v objcopy || command -v llvm-objcopy-19 || true)
[ -n "$objcopy" ] || { echo "instructions.sh: neither objcopy nor llvm-objcopy-19 is installed" >&2; exit 1; }

# valgrind 3.19 cannot read clang-19's DWARF 5: stripped copies of the program and of libtether
# (function names come from the symbol tables), laid out as in the build folder so that the
# program's $ORIGIN/.. run path finds the copy.
work=$(mktemp -d)
trap '[ -n "$keep" ] || rm -rf "$work"' EXIT
mkdir -p "$work/bin/bench" "$work/runs"
"$objcopy" --strip-debug "$build/bench/instructions" "$work/bin/bench/instructions"
for lib in "$build"/libtether.so*; do
  [ -e "$lib" ] || continue
  if [ -L "$lib" ]; then
    cp -P "$lib" "$work/bin/"
  elif [ -f "$lib" ]; then
    "$objcopy" --strip-debug "$lib" "$work/bin/$(basename "$lib")"
  fi
done
export LD_LIBRARY_PATH="$work/bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# glibc's malloc debugging (meson test sets MALLOC_PERTURB_) fills memory on every allocation and
# free: instructions that are neither tether's nor the driver's.
unset MALLOC_PERTURB_ MALLOC_CHECK_

ops=(${OPS:-build update_all exec_update capture capture_exclusive clone param_set whole_update whole_update_unplanned plan_update})
modes=(tether raw)
((smoke)) || modes+=(total)
status=0
for op in "${ops[@]}"; do
  for mode in "${modes[@]}"; do
    for n in "$n1" "$n2"; do
      base="$work/runs/$op.$mode.$n"
      opts=(--tool=callgrind --collect-bus=yes --dump-instr=no --compress-strings=no --compress-pos=no
            --separate-threads=yes "--callgrind-out-file=$base.out")
      # tether: everything under the fake entry points is excluded (collection is switched off on
      # entering one and back on when it returns), except tether's user-object destructors that a
      # fake runs: the real driver runs them on the releasing thread too, inside the call, when the
      # last reference goes with a graph never launched (docs/design/driver-facts.md), so they
      # are tether's cost on that thread (a second toggle switches collection on inside them).
      # raw and total: nothing is excluded.
      [ "$mode" = tether ] && opts+=("--toggle-collect=fake_entry::*" "--toggle-collect=tether::*::on_destroy(*"
                                     --collect-atstart=yes)
      args=(--op "$op" --n "$n" --args "$nargs")
      [ "$mode" = raw ] && args+=(--raw)
      if ! valgrind "${opts[@]}" "$work/bin/bench/instructions" "${args[@]}" >"$base.stdout" 2>"$base.stderr"; then
        echo "FAILED op=$op mode=$mode n=$n: instructions exited non-zero; its stderr:" >&2
        grep -v '^==' "$base.stderr" | tail -n 20 >&2 || true
        status=1
        continue
      fi
      # The measured window's dump: part 1, thread 1 (the measuring thread).
      if [ -f "$base.out.1-01" ] && grep -q '^desc: Trigger: Client Request: instructions-measured' "$base.out.1-01"; then
        mv "$base.out.1-01" "$base.cg"
      else
        echo "FAILED op=$op mode=$mode n=$n: no callgrind dump of the measured window" >&2
        status=1
      fi
      rm -f "$base.out"*
    done
  done
done
echo "COUNTS tether's own cost per node, marginal between N = $n1 and N = $n2, $nargs owned buffer argument(s) per node"
python3 "$here/callgrind_counts.py" "$work/runs" "$n1" "$n2" "${ops[@]}" || status=1
[ -z "$keep" ] || { mkdir -p "$keep" && cp "$work/runs/"* "$keep/"; }
exit $status
