#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The tether authors
"""Runs the hardening families around members that crash.

A member that crashes (SIGSEGV, abort) ends the doctest run and hides every later member. This
runs the test executable, and whenever a run crashes, names the subcase (every hardening SUBCASE is
named by its whole path, so the name selects one member) and runs again with it excluded (-sce),
until a run ends without crashing. It prints the crashed members, then the last run's output.

    TETHER_DRIVER=sim tests/hardening/run_isolated.py build/tests/hardening/hardening_tests [doctest args]
"""
import re
import subprocess
import sys
import xml.etree.ElementTree as ET


def escape(name: str) -> str:
    return name.replace("\\", "\\\\").replace(",", "\\,")


def summarize(exe, extra, crashed):
    """Reruns with the XML reporter: members per test case, and every failing member's messages."""
    args = [exe, "-r=xml", *extra]
    if crashed:
        args.append("-sce=" + ",".join(escape(stack[-1]) for _, stack in crashed if stack))
    run = subprocess.run(args, capture_output=True, text=True, timeout=600)
    try:
        root = ET.fromstring(run.stdout)
    except ET.ParseError as e:
        print(f"(no summary: the XML run did not parse: {e})")
        return
    print("\n==== summary: members (leaf subcases) per test case, then each failing member")
    failures = []
    for tc in root.iter("TestCase"):
        name = tc.get("name")
        leaves = 0

        def walk(node, path):
            nonlocal leaves
            subs = node.findall("SubCase")
            if node.tag == "SubCase" and not subs:
                leaves += 1
            msgs = []
            for e in node:
                if e.tag == "Expression" and e.get("success") == "false":
                    infos = [i.text or "" for i in e.findall("Info")]
                    infos = [" ".join(i.split()) for i in infos]
                    msgs.append(" | ".join(infos[1:] or infos) or " ".join((e.findtext("Original") or "").split()))
                elif e.tag == "Message" and e.get("type") in ("ERROR", "FATAL ERROR"):
                    msgs.append((e.findtext("Text") or "").strip())
                elif e.tag == "Exception":
                    msgs.append("exception: " + (e.text or "").strip())
            if msgs:
                failures.append((name, " / ".join(path) or "(test body)", msgs))
            for sub in subs:
                walk(sub, path + [sub.get("name")])

        walk(tc, [])
        if tc.get("skipped") != "true":
            print(f"  {max(leaves, 1):4d}  {name}")
    print(f"\n{len(failures)} failing member(s):")
    for name, path, msgs in failures:
        print(f"FAIL {name} :: {path}")
        for m in dict.fromkeys(msgs):
            print(f"     {m}")
    for case, stack in crashed:
        print(f"CRASH {case} :: {stack[-1]}")


def main() -> int:
    exe, extra = sys.argv[1], sys.argv[2:]
    crashed = []  # (test case, subcase stack)
    while True:
        args = [exe, "--no-colors", *extra]
        if crashed:
            args.append("-sce=" + ",".join(escape(stack[-1]) for _, stack in crashed if stack))
        try:
            run = subprocess.run(args, capture_output=True, text=True, timeout=600)
            out = run.stdout + run.stderr
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            print("the run hung (600 s); last output:\n" + out[-4000:])
            return 2
        m = re.search(r"TEST CASE:\s+(.*?)\n((?:  .*\n)*)\n[^\n]*FATAL ERROR: test case CRASHED: (\S+)", out)
        if not m:
            break
        case = m.group(1).strip()
        stack = [line.strip() for line in m.group(2).splitlines() if line.strip()]
        if not stack or (case, stack) in crashed:
            print(f"crash in '{case}' outside any subcase (or again after excluding it): giving up")
            print(out[-6000:])
            return 2
        crashed.append((case, stack))
        print(f"CRASHED ({m.group(3)}): {case} / {' / '.join(stack)}", flush=True)
    print(out)
    summarize(exe, extra, crashed)
    if crashed:
        print(f"{len(crashed)} member(s) crashed and were excluded:")
        for case, stack in crashed:
            print(f"  {case} :: {stack[-1]}")
        return 1
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
