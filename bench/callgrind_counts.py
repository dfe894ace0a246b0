#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The tether authors
"""The report of bench/instructions.sh (docs/performance.md, "Deterministic counts").

Usage: callgrind_counts.py RUN_DIR N1 N2 OP...

RUN_DIR holds, per operation OP, size N and mode (tether: fakes excluded with --toggle-collect;
raw: the floor, nothing excluded; total: tether with nothing excluded, for the driver's share),
`OP.MODE.N.cg` (callgrind's dump of the measured window, main thread: `--callgrind-out-file`
`OP.MODE.N.out`, part 1, thread 1) and `OP.MODE.N.stdout` (the program's CALLS/METADATA lines).
Prints RESULT, FLOOR and DETAIL lines with the marginal per-node figures between N1 and N2; exits
1 if a file is missing or malformed.
"""
import os
import re
import sys

# Heap allocation entry points. A call into one of them from a function that is not one of them is
# one allocation (operator new calling malloc is one, not two).
ALLOC = re.compile(r"^(malloc|calloc|realloc|reallocarray|memalign|aligned_alloc|posix_memalign|valloc|pvalloc)"
                   r"(@.*)?$|^operator new(\[\])?\(")
# Lock acquisitions (try-locks included): pthread mutexes, rwlocks and spin locks, and tether's
# own locks (HierarchyLock, an atomic flag with a wait; PublishLock and ExecLock, atomics with a futex wait). Counted the same way.
LOCK = re.compile(r"^_*pthread_(mutex_(lock|trylock|timedlock|clocklock)|"
                  r"rwlock_(rdlock|wrlock|tryrdlock|trywrlock|timedrdlock|timedwrlock|clockrdlock|clockwrlock)|"
                  r"spin_(lock|trylock))(@.*)?$|^tether::detail::HierarchyLock::(lock|try_lock)\(|"
                  r"^tether::detail::PublishLock::(lock|lock_shared)\(|^tether::detail::(anonymous namespace::)?ExecLock::lock\(")
# tether's owner-group pool (not a heap allocation when the pool serves it).
POOLED = re.compile(r"^tether::detail::group_allocate\(")


class Bad(Exception):
    pass


def parse(path):
    """Totals of a callgrind file (--compress-strings=no, --dump-instr=no): events, call counts."""
    events, summary = None, None
    fn = cfn = None
    calls = {}  # (caller, callee) -> count
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                continue  # a self cost, or a call's inclusive cost: the summary line has the totals
            if line.startswith("fn="):
                fn = line[3:].rstrip("\n")
            elif line.startswith("cfn="):
                cfn = line[4:].rstrip("\n")
            elif line.startswith("calls="):
                key = (fn, cfn)
                calls[key] = calls.get(key, 0) + int(line[6:].split()[0])
            elif line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("summary:") or (line.startswith("totals:") and summary is None):
                # summary: the events callgrind counted in the window, which is what valgrind
                # reports as I refs. The totals line (the sum of the per-function cost lines) can
                # exceed it by a few instructions per node where callgrind's call-stack tracking
                # charges a return path twice; it is used only if there is no summary.
                summary = [int(x) for x in line.split()[1:]]
    if not events or summary is None:
        raise Bad(f"{path}: no events or summary line (not a callgrind dump?)")
    summary += [0] * (len(events) - len(summary))
    totals = dict(zip(events, summary))
    if "Ge" not in totals:
        raise Bad(f"{path}: no Ge event (run callgrind with --collect-bus=yes)")

    def count(pattern):
        return sum(n for (a, b), n in calls.items() if pattern.match(b) and not (a and pattern.match(a)))

    return {"ir": totals["Ir"], "ge": totals["Ge"], "alloc": count(ALLOC), "lock": count(LOCK),
            "pooled": count(POOLED)}


def stdout_values(path):
    vals = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"^CALLS .* total=(\d+)", line)
            if m:
                vals["calls"] = int(m.group(1))
                vals["calls_line"] = line.strip()
            m = re.match(r"^METADATA .* bytes_per_node=([0-9.]+)", line)
            if m:
                vals["metadata"] = float(m.group(1))
    if "calls" not in vals:
        raise Bad(f"{path}: no CALLS line")
    return vals


def fmt(x):
    s = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def main():
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    run_dir, n1, n2, ops = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    failed = False

    def load(op, mode, n):
        base = os.path.join(run_dir, f"{op}.{mode}.{n}")
        v = parse(base + ".cg")
        v.update(stdout_values(base + ".stdout"))
        return v

    def marginal(a, b, key):
        return (b[key] - a[key]) / (n2 - n1)

    for op in ops:
        try:
            t1, t2 = load(op, "tether", n1), load(op, "tether", n2)
            r1, r2 = load(op, "raw", n1), load(op, "raw", n2)
        except (Bad, OSError, ValueError) as e:
            print(f"FAILED op={op}: {e}", file=sys.stderr)
            failed = True
            continue
        m = {k: marginal(t1, t2, k) for k in ("ir", "alloc", "ge", "lock", "calls", "pooled")}
        print(f"RESULT op={op} instructions_per_node={fmt(m['ir'])} allocations_per_node={fmt(m['alloc'])} "
              f"atomics_per_node={fmt(m['ge'])} locks_per_node={fmt(m['lock'])} "
              f"driver_calls_per_node={fmt(m['calls'])}")
        print(f"FLOOR op={op} instructions_per_node={fmt(marginal(r1, r2, 'ir'))} "
              f"driver_calls_per_node={fmt(marginal(r1, r2, 'calls'))}")
        detail = (f"DETAIL op={op} N={n1}: instructions_per_node={fmt(t1['ir'] / n1)} "
                  f"allocations_per_node={fmt(t1['alloc'] / n1)} atomics_per_node={fmt(t1['ge'] / n1)} "
                  f"locks_per_node={fmt(t1['lock'] / n1)} driver_calls_per_node={fmt(t1['calls'] / n1)}; "
                  f"marginal: pooled_groups_per_node={fmt(m['pooled'])}")
        try:
            a1, a2 = load(op, "total", n1), load(op, "total", n2)
            detail += f" driver_instructions_per_node={fmt(marginal(a1, a2, 'ir') - m['ir'])}"
        except OSError:
            pass  # --smoke: no run with the fakes' cost included
        except (Bad, ValueError) as e:
            print(f"FAILED op={op} (total run): {e}", file=sys.stderr)
            failed = True
        print(detail)
        if "metadata" in t2:
            print(f"METADATA op={op} bytes_per_node={fmt(t2['metadata'])} (N={n2}; N={n1}: {fmt(t1['metadata'])})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
