#!/usr/bin/env python3
"""fake_sut.py - a misbehaving Contract-1 SUT for sut_compare's error-path tests.
Usage: fake_sut.py MODE, MODE one of: crash (dies after the ready line), garbage (answers a
non-JSON line), noready (prints a log line instead of the ready line), hang (never answers),
wrongid (answers with another id), shortids (answers too few requested log-probs),
uniform (a valid SUT over a 300-token vocabulary answering the uniform distribution)."""

import json
import math
import sys
import time

mode = sys.argv[1]
VOCAB = 300


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


if mode == "noready":
    print("loading model...", flush=True)
    sys.exit(0)
send({"ready": True, "protocol": 1, "engine": "fake", "model": {"name": "fake", "arch": "qwen3",
      "vocab_size": VOCAB, "n_layer": 1, "n_embd": 8}, "device": "none"})
for line in sys.stdin:
    req = json.loads(line)
    if req.get("op") == "quit":
        break
    if mode == "crash":
        print("fake_sut: simulated crash", file=sys.stderr, flush=True)
        sys.exit(3)
    if mode == "garbage":
        print("this is not JSON", flush=True)
        continue
    if mode == "hang":
        time.sleep(3600)
    rid = req.get("id")
    if mode == "wrongid":
        rid = "other"
    lp = -math.log(VOCAB)
    if req["op"] == "generate":
        send({"id": rid, "event": "first"})
        send({"id": rid, "event": "done", "tokens": [0] * req["max_tokens"], "stats": {}})
        continue
    n = len(req["prompt"]) - req.get("first", 0)
    ids = req.get("ids") or [[] for _ in range(n)]
    positions = []
    for p in range(n):
        asked = ids[p][:-1] if mode == "shortids" else ids[p]
        positions.append({"top": [[i, lp] for i in range(req["top_k"])],
                          "ids": [lp for _ in asked]})
    send({"id": rid, "event": "done", "positions": positions})
