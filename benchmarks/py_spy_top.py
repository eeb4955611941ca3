"""Summarise ``py-spy record --format raw`` files: top functions by self and by total samples.

Usage: ``python benchmarks/py_spy_top.py DIR_OR_FILES... [--top N] [--match TEXT]``. Every line
of a raw file is ``frame;frame;...;leaf COUNT`` (outermost first). Prints the share of all
samples each function is on top of the stack (self) and anywhere in it (total, counted once
per stack). ``--match`` keeps only stacks that contain TEXT (for example ``MainThread``).
"""

from __future__ import annotations

import argparse
import collections
import pathlib


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--match", default=None)
    args = ap.parse_args()
    files: list[pathlib.Path] = []
    for p in map(pathlib.Path, args.paths):
        files += sorted(p.glob("*.txt")) if p.is_dir() else [p]
    self_: collections.Counter = collections.Counter()
    total: collections.Counter = collections.Counter()
    n = 0
    for f in files:
        for line in f.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack or (args.match and args.match not in stack):
                continue
            k = int(count)
            frames = stack.split(";")
            n += k
            self_[frames[-1]] += k
            for fr in set(frames):
                total[fr] += k
    print(f"{n} samples")
    for title, c in (("self", self_), ("total", total)):
        print(f"--- {title}")
        for fr, k in c.most_common(args.top):
            print(f"{100 * k / n:5.1f}%  {fr}")


if __name__ == "__main__":
    main()
