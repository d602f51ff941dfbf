#!/usr/bin/env python3
# Proves that the build refuses an upward include (docs/architecture.md).
#  1. Each tests/layering/LAYER_includes_*.cc is compiled with LAYER's include
#     directory (build/layers/LAYER, as the layer's library is): a file that
#     says "expect: refused" must fail, on its upward include; one that says
#     "expect: compiles" must compile.
#  2. For every pair of layers, a header of the one included from the other
#     is found exactly when the second is the first or below it, and a
#     public header (include/hiodsfs/) exactly when its layer is.
# Usage: check_layering.py SOURCE_ROOT BUILD_ROOT CXX... -- LAYER=SEES:PUBLIC...
import glob
import os
import subprocess
import sys
import tempfile

source, build = sys.argv[1], sys.argv[2]
split = sys.argv.index("--")
cxx, specs = sys.argv[3:split], sys.argv[split + 1:]
layers = {}
for spec in specs:
    name, rest = spec.split("=", 1)
    sees, public = rest.split(":", 1)
    layers[name] = (set(filter(None, sees.split(","))), set(filter(None, public.split(","))))
passed = failed = skipped = 0


def result(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAILED: " + what)


def run(args, text=None):
    p = subprocess.run(cxx + ["-std=c++20"] + args, input=text, capture_output=True, text=True)
    return p.returncode, p.stderr


def layer_args(layer):
    return ["-I", os.path.join(build, "layers", layer)]


# 1. The files of tests/layering.
for path in sorted(glob.glob(os.path.join(source, "tests", "layering", "*_includes_*.cc"))):
    name = os.path.basename(path)
    layer = name.split("_includes_")[0]
    with open(path) as f:
        text = f.read()
    refused = "expect: refused" in text
    include = next(line.split('"')[1] for line in text.splitlines() if line.startswith("#include \""))
    rc, err = run(layer_args(layer) + ["-fsyntax-only", path])
    if refused:
        result(rc != 0 and (include + ": No such file") in err,
               "%s: %s compiled for the %s layer (%s)" % (name, include, layer, err.strip()[:300] or "no error"))
    else:
        result(rc == 0, "%s: does not compile for the %s layer: %s" % (name, layer, err.strip()[:600]))

# 2. Every pair of layers, with the preprocessor only.
full = ["-I", os.path.join(source, "include"), "-I", os.path.join(source, "src")]


def findable(header, args):
    rc, err = run(args + ["-E", "-P", "-o", os.devnull, "-x", "c++", "-"], '#include "%s"\n' % header)
    return rc == 0, err


samples = {}
for layer in layers:
    # A header of the layer that preprocesses with every layer in view (one
    # that needs a system header the test does not pass, e.g. libfuse's, is
    # passed over).
    for path in sorted(glob.glob(os.path.join(source, "src", layer, "*.h"))):
        header = layer + "/" + os.path.basename(path)
        if findable(header, full)[0]:
            samples[layer] = header
            break
for layer, (sees, public) in sorted(layers.items()):
    for other in sorted(layers):
        if other not in samples:
            continue
        ok, err = findable(samples[other], layer_args(layer))
        expect = other in sees
        result(ok == expect, "%s %s %s" % (layer, "cannot include" if expect else "includes", samples[other]) +
               ("" if ok else ": " + err.strip()[:300]))
    for path in sorted(glob.glob(os.path.join(source, "include", "hiodsfs", "*.h"))):
        header = "hiodsfs/" + os.path.basename(path)
        ok, err = findable(header, layer_args(layer))
        expect = os.path.basename(path) in public
        result(ok == expect, "%s %s %s" % (layer, "cannot include" if expect else "includes", header) +
               ("" if ok else ": " + err.strip()[:300]))

print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
sys.exit(1 if failed else 0)
