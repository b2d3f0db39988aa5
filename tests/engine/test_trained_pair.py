#!/usr/bin/env python3
"""test_trained_pair.py - the shipped trained target/DFlash draft pair (guards/trained/) through ember.

Asserts: the files are the ones guards/trained/SHA256SUMS names; `ember info` loads both (qwen3 and
dflash, block 16, mask id 3); on 16 held-out prompts (tools/spec_tau.py's windows, seed 5, prompt
64, gen 64, depth 15) every speculative answer equals the plain one and tau >= TAU_FLOOR. Greedy
tau is a deterministic function of prompts and build on the CPU (measured 2.7541 for the
head_dim-64 pair shipped 2026-12-02; the first, head_dim-32 pair read 1.8428); the floor is 5 % below it. Exits 77 (CTest skip) when numpy is missing.
usage: test_trained_pair.py EMBER_BINARY SOURCE_DIR
"""
import hashlib
import json
import os
import subprocess
import sys

TAU_FLOOR = 2.61


def main():
    ember, src = sys.argv[1], sys.argv[2]
    try:
        import numpy  # noqa: F401
    except ImportError:
        print("SKIP: numpy is not installed for %s" % sys.executable)
        return 77
    d = os.path.join(src, "guards", "trained")
    failures = 0
    for line in open(os.path.join(d, "SHA256SUMS")):
        want, name = line.split()
        got = hashlib.sha256(open(os.path.join(d, name), "rb").read()).hexdigest()
        if got != want:
            print("FAIL: %s sha256 %s, SHA256SUMS says %s" % (name, got, want))
            failures += 1
    target, draft = os.path.join(d, "target-q8_0.gguf"), os.path.join(d, "draft-q8_0.gguf")
    for path, needles in ((target, ["qwen3", "Q8_0"]), (draft, ["dflash", "block size 16", "mask token id 3"])):
        out = subprocess.run([ember, "info", path], capture_output=True, text=True)
        if out.returncode or any(n not in out.stdout for n in needles):
            print("FAIL: ember info %s (rc %d) lacks %s" % (path, out.returncode, needles))
            failures += 1
    res = subprocess.run([sys.executable, os.path.join(src, "tools", "spec_tau.py"), "--ember", ember,
                          "--target", target, "--draft", draft, "--ids", os.path.join(d, "heldout.u32"),
                          "--n", "16", "--prompt-len", "64", "--gen", "64", "--seed", "5", "--json"],
                         capture_output=True, text=True)
    try:
        r = json.loads(res.stdout)
    except ValueError:
        print("FAIL: spec_tau.py gave no result (rc %d): %s" % (res.returncode, res.stderr[-2000:]))
        return 1
    print("trained pair: tau %.4f over %d prompts, %d spec != plain" % (r["tau"], r["prompts"], r["spec_mismatches"]))
    if r["spec_mismatches"]:
        print("FAIL: %d speculative answers differ from plain decode" % r["spec_mismatches"])
        failures += 1
    if not r["tau"] >= TAU_FLOOR:
        print("FAIL: tau %.4f below the floor %.2f" % (r["tau"], TAU_FLOOR))
        failures += 1
    print("PASS" if not failures else "%d failures" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
