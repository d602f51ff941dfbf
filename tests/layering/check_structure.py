#!/usr/bin/env python3
# Holds the tree to the shape docs/architecture.md describes:
#  1. no source, header or test file over 800 lines (src, include, tools, tests);
#  2. every unit src/LAYER/NAME.cc has tests/LAYER/NAME_test.cc, or a line
#     in tested_elsewhere.txt naming the test file that covers it (which
#     must exist); a line for a unit that has its own test now, or is gone,
#     is stale and fails too.
# Two checks, each naming every offender when it fails.
# Usage: check_structure.py SOURCE_ROOT
import glob
import os
import sys

MAX_LINES = 800
root = sys.argv[1]
passed = failed = 0


def result(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAILED: " + what)


def rel(path):
    return os.path.relpath(path, root)


sources = []
for top in ("src", "include", "tools", "tests"):
    for path in glob.glob(os.path.join(root, top, "**", "*"), recursive=True):
        if path.endswith((".cc", ".h")) and os.path.isfile(path):
            sources.append(path)
long_files = []
for path in sorted(sources):
    with open(path, "rb") as f:
        lines = f.read().count(b"\n")
    if lines > MAX_LINES:
        long_files.append("%s has %d lines (at most %d)" % (rel(path), lines, MAX_LINES))
result(not long_files, "; ".join(long_files))

elsewhere = {}
with open(os.path.join(root, "tests", "layering", "tested_elsewhere.txt")) as f:
    for number, line in enumerate(f, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split(None, 2)
        if len(fields) < 3:
            result(False, "tested_elsewhere.txt:%d: want UNIT TEST-FILE WHY" % number)
            continue
        elsewhere[fields[0]] = fields[1]

units = set()
missing = []
for path in sorted(glob.glob(os.path.join(root, "src", "*", "*.cc"))):
    layer = os.path.basename(os.path.dirname(path))
    name = os.path.basename(path)[:-3]
    unit = layer + "/" + name
    units.add(unit)
    own = os.path.join(root, "tests", layer, name + "_test.cc")
    if os.path.exists(own):
        if unit in elsewhere:
            missing.append("%s has %s: its tested_elsewhere.txt line is stale" % (unit, rel(own)))
    elif unit in elsewhere:
        if not os.path.isfile(os.path.join(root, elsewhere[unit])):
            missing.append("%s: tested_elsewhere.txt names %s, which does not exist" % (unit, elsewhere[unit]))
    else:
        missing.append("%s has no tests/%s/%s_test.cc and no line in tested_elsewhere.txt" % (unit, layer, name))
for unit in sorted(set(elsewhere) - units):
    missing.append("tested_elsewhere.txt names %s, which is not a unit of src/" % unit)
result(not missing, "; ".join(missing))

print("%d passed, %d failed, 0 skipped" % (passed, failed))
sys.exit(1 if failed else 0)
