#!/usr/bin/env python3
"""ci/gpu-suite.py VARIANT IN OUT - a variant of a GPU suite for the H200 figure runs, written to OUT:
  speed   accuracy off: for `abgate calibrate`, whose A/A evaluations build one tree for both sides,
          so the accuracy gates see bit-identical answers and cannot give a false positive; what is
          calibrated is the speed family, and each run saves the reference and scoring time
  http    the SUT (not the references) through ember's OpenAI-compatible server: "kind": "openai",
          `ember serve --http 127.0.0.1:{port}` with the same model, backend and context, api
          "llama" (token ids back, so greedy agreement works); with the sandbox on, abgate reaches
          it through abgate-relay
The suite keeps its name, so results and calibrations are filed under it."""
import json
import sys


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("speed", "http"):
        sys.exit(__doc__)
    variant, src, dst = sys.argv[1:]
    suite = json.load(open(src))
    if variant == "speed":
        suite["accuracy"]["enabled"] = False
    else:
        cmd = suite["sut"]["command"]
        if "--stdio" not in cmd:
            sys.exit(f"gpu-suite: {src}: the SUT command has no --stdio to replace")
        i = cmd.index("--stdio")
        suite["sut"]["command"] = cmd[:i] + ["--http", "127.0.0.1:{port}"] + cmd[i + 1:]
        suite["sut"].update({"kind": "openai", "url": "http://127.0.0.1:{port}", "ready_path": "/health",
                             "api": "llama"})
    json.dump(suite, open(dst, "w"), indent=1)


if __name__ == "__main__":
    main()
