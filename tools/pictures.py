#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 The tether authors
"""The tutorial's pictures: docs/tutorial/img/<name>.dot and <name>.svg.

Every example that calls examples::picture(name, ...) writes tether::to_dot of a graph or an
executable to $TETHER_EXAMPLES_DOT_DIR/<name>.dot. This script runs every example of a build on
the simulator with that variable set and

  update --build DIR   copies each .dot into docs/tutorial/img/ and renders it with Graphviz
                       (`dot -Tsvg`), recording the DOT source's SHA-256 in the SVG;
  check --build DIR    fails if a committed .dot differs from what the examples draw now, if an
                       SVG was not rendered from its committed .dot (its recorded hash differs),
                       or if a picture is missing or left over. Needs no Graphviz.
"""
import argparse
import hashlib
import os
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
IMG = ROOT / "docs" / "tutorial" / "img"
MARK = "<!-- tether-dot-sha256: {} -->"


def draw(build: pathlib.Path) -> dict:
    """name -> DOT text, from running every example of `build` on the simulator."""
    out = {}
    examples = sorted(p for p in (build / "examples").glob("[0-9][0-9]_*") if p.is_file() and os.access(p, os.X_OK))
    if not examples:
        sys.exit(f"pictures.py: no examples in {build / 'examples'} (build them first)")
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, TETHER_DRIVER="sim", TETHER_EXAMPLES_DOT_DIR=tmp)
        for e in examples:
            r = subprocess.run([str(e)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                sys.exit(f"pictures.py: {e.name} failed (rc {r.returncode}):\n{r.stderr}")
        for f in sorted(pathlib.Path(tmp).glob("*.dot")):
            out[f.stem] = f.read_text()
    return out


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def update(pictures: dict) -> None:
    IMG.mkdir(parents=True, exist_ok=True)
    for old in IMG.glob("*.dot"):
        if old.stem not in pictures:
            old.unlink()
            (IMG / (old.stem + ".svg")).unlink(missing_ok=True)
    for name, text in pictures.items():
        (IMG / f"{name}.dot").write_text(text)
        svg = subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True, check=True).stdout
        # Graphviz writes its version and the file's title; the hash says which source it drew.
        svg = re.sub(r"(<svg )", MARK.format(sha(text)) + "\n\\1", svg, count=1)
        (IMG / f"{name}.svg").write_text(svg)
        print(f"pictures.py: {name}.svg")


def check(pictures: dict) -> int:
    problems = []
    committed = {p.stem for p in IMG.glob("*.dot")}
    for name in sorted(committed - pictures.keys()):
        problems.append(f"{name}.dot is committed but no example draws it any more")
    for name, text in sorted(pictures.items()):
        dot, svg = IMG / f"{name}.dot", IMG / f"{name}.svg"
        if not dot.exists():
            problems.append(f"{name}.dot is drawn by an example but not committed")
            continue
        if dot.read_text() != text:
            problems.append(f"{name}.dot differs from what the example draws now")
        if not svg.exists() or MARK.format(sha(dot.read_text())) not in svg.read_text():
            problems.append(f"{name}.svg was not rendered from the committed {name}.dot")
    for p in problems:
        print(f"pictures.py: {p}")
    if problems:
        print("pictures.py: run `tools/pictures.py update --build <build dir>` (needs Graphviz) and commit docs/tutorial/img/")
        return 1
    print(f"pictures.py: {len(pictures)} pictures current")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["update", "check"])
    ap.add_argument("--build", default="build", type=pathlib.Path)
    a = ap.parse_args()
    pictures = draw(a.build.resolve())
    if a.mode == "update":
        update(pictures)
        return 0
    return check(pictures)


if __name__ == "__main__":
    sys.exit(main())
