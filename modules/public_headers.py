#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The tether authors
#
# Prints, one per line and relative to <src dir>, every file that the given headers include with
# `#include "..."`, transitively, the given headers among them: what `meson install` puts under
# include/tether/ and what the module interface needs. Usage: public_headers.py <src dir> <header>...
#
# Why follow the includes instead of listing the headers: a header added by another change is
# installed without anyone remembering this list, and src/ also holds private headers (the
# simulator's state) that must not be installed. Conditional includes are followed too: a header
# is installed if any configuration can include it.
import os
import re
import sys

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def closure(src, roots):
    seen, todo = set(), list(roots)
    while todo:
        rel = todo.pop()
        if rel in seen:
            continue
        path = os.path.join(src, rel)
        if not os.path.isfile(path):
            sys.exit(f'public_headers.py: {path} does not exist')
        seen.add(rel)
        with open(path, encoding='utf-8') as f:
            for line in f:
                m = _INCLUDE.match(line)
                if m:
                    target = os.path.normpath(os.path.join(os.path.dirname(rel), m.group(1)))
                    if target.startswith('..') or not os.path.isfile(os.path.join(src, target)):
                        sys.exit(f'public_headers.py: {path} includes "{m.group(1)}", which is not a file '
                                 f'of {src} relative to it (the installed headers are found only that way)')
                    todo.append(target)
    return sorted(seen)


if __name__ == '__main__':
    if len(sys.argv) < 3:
        sys.exit('usage: public_headers.py <src dir> <header>...')
    print('\n'.join(closure(sys.argv[1], sys.argv[2:])))
