#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The tether authors
"""Counts test cases in one or more meson testlog.json files and prints `tests: N passed, M failed`.

A doctest executable contributes its own test-case counts (its summary line); any other test
(examples, the consumer build, the nvcc header check) counts as one case. A doctest executable that
crashed before printing its summary counts as one failure, so a crash is never lost.
"""
import json
import os
import re
import sys

SUMMARY = re.compile(r"\[doctest\] test cases:\s*(\d+)\s*\|\s*(\d+) passed\s*\|\s*(\d+) failed")

passed = failed = 0
for path in sys.argv[1:]:
    if not os.path.exists(path):
        print(f"{path}: missing (the build failed before any test ran); counted as one failure")
        failed += 1
        continue
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            t = json.loads(line)
            ok = t.get("result") in ("OK", "EXPECTEDFAIL")
            found = SUMMARY.findall(t.get("stdout") or "")
            if found:
                total, p, fl = map(int, found[-1])
                passed += p
                failed += fl
                if not ok and fl == 0:
                    failed += 1   # the process failed although every case passed (sanitizer, exit code)
            elif t.get("result") == "SKIP":
                continue
            else:
                passed += ok
                failed += not ok
print(f"tests: {passed} passed, {failed} failed")
