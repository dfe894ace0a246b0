#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The tether authors
# Compile-failure check: compiling <file> must fail and the diagnostics must contain <message>
# (or, with message "-", compiling must succeed: the harness's positive control).
# Args: <compiler> <file> <message> <compiler flags...>
cxx=$1 file=$2 message=$3
shift 3
out=$("$cxx" -std=c++20 -fsyntax-only "$@" "$file" 2>&1)
rc=$?
if [ "$message" = "-" ]; then
  [ $rc -eq 0 ] && exit 0
  echo "expected $file to compile, but:"; echo "$out" | head -30; exit 1
fi
if [ $rc -eq 0 ]; then echo "expected $file not to compile, but it did"; exit 1; fi
if printf '%s' "$out" | grep -qF -- "$message"; then exit 0; fi
echo "expected the diagnostics of $file to contain: $message"; echo "$out" | grep -E "error" | head -10; exit 1
