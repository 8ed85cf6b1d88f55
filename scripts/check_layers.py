#!/usr/bin/env python3
"""Checks that #include arrows point one way: runtime <- kernels <- compile <- models <- engine
(inside engine: the core <- server, bench <- cli). A file may include headers of its own layer and
of the layers below it; tests/ and bench/ may include anything. Prints each arrow that points up
(file:line, what it includes) and exits 1 when there is one. Usage: check_layers.py [REPO]"""
import pathlib
import re
import sys

# (folder prefix, rank): the longest matching prefix gives a file's layer. The GPU modules'
# sources (kernels/cuda) implement runtime/ and kernels/ interfaces and sit at kernels' rank.
LAYERS = [
    ("runtime/", 0),
    ("kernels/", 1),
    ("compile/", 2),
    ("models/", 3),
    ("engine/", 4),
    ("engine/server/", 5),
    ("engine/bench/", 5),
    ("engine/cli/", 6),
]
SOURCE_SUFFIXES = {".cpp", ".h", ".cu", ".cuh", ".inc"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def rank_of(path):
    best = None
    for prefix, rank in LAYERS:
        if path.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, rank)
    return best


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    violations = []
    checked = 0
    for prefix, _ in LAYERS:
        for file in sorted((root / prefix).rglob("*")):
            relative = file.relative_to(root).as_posix()
            if file.suffix not in SOURCE_SUFFIXES or rank_of(relative)[0] != prefix:
                continue
            checked += 1
            own_rank = rank_of(relative)[1]
            for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                target = rank_of(match.group(1))
                if target is not None and target[1] > own_rank:
                    violations.append(f"{relative}:{number}: includes {match.group(1)} "
                                      f"({target[0]} is above {rank_of(relative)[0]})")
    for violation in violations:
        print(violation)
    print(f"check_layers: {checked} files, {len(violations)} arrows pointing up")
    return 1 if violations or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
