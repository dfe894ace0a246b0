#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The tether authors
"""Keeps the code and the output shown in the documentation equal to the examples.

Markdown files (README.md and every .md under docs/) show code and output through markers, each
followed by a fenced block that this tool owns:

    <!-- snippet: examples/03_edits_and_rollback.cpp [name] -->   the region [name] of the file
    <!-- snippet: examples/03_edits_and_rollback.cpp -->          the whole file
    <!-- output: 03_edits_and_rollback -->                        what the example prints

A region of a source file lies between two comment lines `// [name]` (the same line opens and
closes it); marker lines are never shown and the region's common indentation is removed. The
whole file is shown without its leading comment block (license and description; `#` lines in
CMake and Meson files) and without any marker line. The fence names the language by the file's
name: cmake, meson, cuda (.cu), otherwise cpp. The output is the stdout of BUILD/examples/<name> run with TETHER_DRIVER=sim. The
ports' header line "(N lines in the original; this port: M)" must give the file's line count M.

    tools/tutorial.py update --build DIR   rewrites every such block from the sources and the runs
    tools/tutorial.py check --build DIR    the same without writing: fails listing each drifted block

Standard library only (it runs as the meson test 'tutorial is current').
"""
import argparse
import difflib
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARKER = re.compile(r"^<!--\s*(snippet|output):\s*(\S+)(?:\s+\[([A-Za-z0-9_-]+)\])?\s*-->\s*$")
REGION = re.compile(r"^\s*//\s*\[([A-Za-z0-9_-]+)\]\s*$")
FENCE = re.compile(r"^(`{3,}|~{3,})")
DIFF_LINES = 24  # a longer diff is cut: the first lines say enough to find the drift
RUN_TIMEOUT_S = 300


class DocError(Exception):
    """A marker that cannot be resolved: a missing file, region or example, or a failed run."""


def markdown_files():
    """README.md and every Markdown file under docs/, in a stable order."""
    found = [os.path.join(ROOT, "README.md")]
    for top, dirs, files in os.walk(os.path.join(ROOT, "docs")):
        dirs.sort()
        found += [os.path.join(top, f) for f in sorted(files) if f.endswith(".md")]
    return [f for f in found if os.path.isfile(f)]


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")


def dedent(lines):
    """Removes the indentation common to the non-blank lines; blank lines become empty."""
    widths = [len(l) - len(l.lstrip(" ")) for l in lines if l.strip()]
    cut = min(widths) if widths else 0
    return [l[cut:] if l.strip() else "" for l in lines]


def trim_blank(lines):
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


class Sources:
    """The text each marker stands for, computed once per source file or example run."""

    def __init__(self, build):
        self.build = build
        self.outputs = {}

    def snippet(self, rel, region):
        path = os.path.join(ROOT, rel)
        if not os.path.isfile(path):
            raise DocError(f"the file {rel} does not exist")
        lines = read_lines(path)
        if lines and lines[-1] == "":
            lines = lines[:-1]
        marks = {}
        for i, line in enumerate(lines):
            m = REGION.match(line)
            if m:
                marks.setdefault(m.group(1), []).append(i)
        for name, at in marks.items():
            if len(at) != 2:
                raise DocError(f"{rel}: the region marker // [{name}] must appear exactly twice "
                               f"(open and close); it appears {len(at)} times (lines "
                               f"{', '.join(str(i + 1) for i in at)})")
        if region is None:
            comment = "#" if language(rel) in ("cmake", "meson") else "//"
            start = 0
            while start < len(lines) and lines[start].lstrip().startswith(comment):
                start += 1
            body = lines[start:]
        else:
            if region not in marks:
                known = ", ".join(f"[{n}]" for n in marks) or "none"
                raise DocError(f"{rel} has no region [{region}] (its regions: {known})")
            first, last = marks[region]
            body = lines[first + 1:last]
        body = [l for l in body if not REGION.match(l)]
        return trim_blank(dedent(body))

    def output(self, name):
        if name not in self.outputs:
            exe = os.path.join(self.build, "examples", name)
            if not os.path.isfile(exe):
                raise DocError(f"the example {name} is not built: {exe} does not exist "
                               f"(build it, e.g. `ninja -C {self.build} examples/{name}`)")
            env = dict(os.environ, TETHER_DRIVER="sim")
            try:
                run = subprocess.run([exe], cwd=os.path.dirname(exe), env=env, capture_output=True,
                                     text=True, timeout=RUN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise DocError(f"{exe} did not finish within {RUN_TIMEOUT_S} s")
            if run.returncode != 0:
                raise DocError(f"{exe} exited with status {run.returncode} under TETHER_DRIVER=sim; "
                               f"its stderr:\n{run.stderr.rstrip()}")
            out = run.stdout.split("\n")
            if out and out[-1] == "":
                out = out[:-1]
            self.outputs[name] = out
        return self.outputs[name]


def language(rel):
    """The fence's language of a snippet: by the file's name, C++ unless it is CUDA or a build file."""
    name = os.path.basename(rel)
    if name == "CMakeLists.txt" or name.endswith(".cmake"):
        return "cmake"
    if name in ("meson.build", "meson_options.txt"):
        return "meson"
    if name.endswith((".cu", ".cuh")):
        return "cuda"
    return "cpp"


def fence_for(body):
    """A fence longer than any backtick run that starts a line of the body."""
    longest = max((len(m.group(1)) for m in map(FENCE.match, body) if m and m.group(1)[0] == "`"),
                  default=0)
    return "`" * max(3, longest + 1)


def closing(lines, i, fence):
    """The index of the line closing the block whose opening `fence` is on line i - 1, or None."""
    return next((j for j in range(i, len(lines))
                 if lines[j].startswith(fence) and not lines[j][len(fence):].strip()), None)


def process(path, sources, problems):
    """Returns the file's lines, those with every marked block regenerated, and the number of
    markers; appends ("drift", text) for each block that differs and ("error", text) for each
    marker that cannot be resolved to `problems`.
    Markers and fences count at the start of a line only; a marker inside a fenced block that no
    marker owns (documentation showing the syntax) is text."""
    rel = os.path.relpath(path, ROOT)
    lines = read_lines(path)
    out = []
    markers = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        f = FENCE.match(line)
        if f:
            close = closing(lines, i, f.group(1))
            if close is not None:
                out += lines[i:close + 1]
                i = close + 1
            continue
        m = MARKER.match(line.rstrip())
        if not m:
            continue
        markers += 1
        kind, target, region = m.groups()
        marker = line.rstrip()
        where = f"{rel}:{i}"
        try:
            if kind == "snippet":
                body, lang = sources.snippet(target, region), language(target)
            else:
                if region is not None:
                    raise DocError("an output marker takes an example's name only, no [region]")
                body, lang = sources.output(target), "text"
        except DocError as e:
            problems.append(("error", f"{where}: {marker}\n  {e}".replace("\n", "\n  ").rstrip()))
            continue
        # The block this marker owns: the fenced block that starts on the next line, if any.
        old = None
        if i < len(lines):
            f = FENCE.match(lines[i])
            if f:
                close = closing(lines, i + 1, f.group(1))
                if close is not None:
                    old = lines[i:close + 1]
                    i = close + 1
        fence = fence_for(body)
        new = [fence + lang] + body + [fence]
        if old != new:
            if old is None:
                diff = ["(no fenced block follows the marker)"]
            else:
                source = target if kind == "output" else f"{target} [{region}]" if region else target
                diff = list(difflib.unified_diff(old, new, f"{rel} (shown)", f"{source} (current)", n=1,
                                                 lineterm=""))
            if len(diff) > DIFF_LINES:
                diff = diff[:DIFF_LINES] + [f"... ({len(diff) - DIFF_LINES} more diff lines)"]
            problems.append(("drift", f"{where}: {marker} has drifted:\n    " + "\n    ".join(diff)))
        out += new
    return lines, out, markers


PORT_COUNT = re.compile(r"this( port|\n// port): (\d+)\)")


def port_headers(write, problems):
    """The ports' header comments say "(N lines in the original; this port: M)": M must be the
    file's line count. Checked (and, when `write`, corrected) for every program in examples/."""
    changed = []
    folder = os.path.join(ROOT, "examples")
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".cpp"):
            continue
        path = os.path.join(folder, name)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        m = PORT_COUNT.search(text)
        if not m:
            continue
        lines = text.count("\n")
        if int(m.group(2)) == lines:
            continue
        if write:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text[:m.start(2)] + str(lines) + text[m.end(2):])
            changed.append(f"examples/{name}")
        else:
            problems.append(("drift", f"examples/{name}: its header says \"this port: {m.group(2)}\" but the "
                                      f"file has {lines} lines"))
    return changed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=["update", "check"])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"),
                    help="the meson build directory holding examples/ (default: build)")
    args = ap.parse_args()
    sources = Sources(os.path.abspath(args.build))
    problems, blocks = [], 0
    changed = port_headers(args.command == "update", problems)
    for path in markdown_files():
        mine = []
        lines, out, markers = process(path, sources, mine)
        blocks += markers
        problems += mine
        if args.command == "update" and out != lines:
            with open(path, "w", encoding="utf-8") as f:
                f.write("\n".join(out))
            changed.append(os.path.relpath(path, ROOT))
    if args.command == "update":
        for c in changed:
            print(f"tutorial.py: updated {c}")
        errors = [text for kind, text in problems if kind == "error"]
        for p in errors:
            print(p, file=sys.stderr)
        print(f"tutorial.py: {blocks} marked blocks, {len(changed)} files rewritten, {len(errors)} errors")
        return 1 if errors else 0
    for _, text in problems:
        print(text, file=sys.stderr)
    if problems:
        print(f"tutorial.py: {len(problems)} not current ({blocks} marked blocks checked, and the ports' "
              f"headers); run `tools/tutorial.py update --build {args.build}` and commit the result",
              file=sys.stderr)
        return 1
    print(f"tutorial.py: all {blocks} marked blocks and the ports' headers are current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
