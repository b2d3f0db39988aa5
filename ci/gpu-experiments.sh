#!/usr/bin/env bash
# ci/gpu-experiments.sh REPO - creates the experiment branches the GPU evaluations use,
# each one commit on top of main, in the (bare) repository REPO:
#   exp/aa        a comment-only change to the engine (A/A: nothing may be labelled)
#   exp/nograph   the decode step's CUDA graph switched off by default (EMBER_GRAPHS=0): a real slowdown
#   exp/plaingemv the streaming decode GEMV switched off by default (EMBER_GEMV_STREAM=0): a kernel
#                 default reverted to the slower variant that stays behind the toggle
#   exp/ropebug   RoPE's theta 1% off in the CUDA backend: a subtle numerical bug, speed unchanged
#   exp/slowdec2  decode 2% slower at every context (engine/session.h's EMBER_SLOW_DECODE_PM = 20:
#                 each decode pass busy-waits 2% of its own time, inside ember's own clock)
#   exp/slowpf3   prefill 3% slower at every context (EMBER_SLOW_PREFILL_PM = 30)
# Each edit is checked to have changed the file, so a renamed line fails loudly instead of
# producing an experiment that changes nothing.
set -euo pipefail
repo=$(cd "${1:?usage: $0 REPO}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git clone -q "$repo" "$work/w"
cd "$work/w"
g() { git -c user.name=abgate-experiments -c user.email=experiments@abgate.invalid "$@"; }

experiment() { # branch message file sed-expression
  local branch=$1 msg=$2 file=$3 expr=$4
  g checkout -q -B "$branch" main
  cp "$file" "$file.orig"
  sed -i "$expr" "$file"
  if cmp -s "$file" "$file.orig"; then
    echo "gpu-experiments: $branch: '$expr' changed nothing in $file" >&2
    exit 1
  fi
  rm "$file.orig"
  g commit -qam "$msg"
  git push -q origin "$branch"
  echo "gpu-experiments: $branch = $(git rev-parse --short HEAD): $msg"
}

experiment exp/aa "engine: reword a comment (no functional change)" engine/serve.c \
  '1,3s|^ \* serve.c - |&(the SUT server) |'
experiment exp/nograph "kernels: decode without CUDA graphs by default" kernels/cuda_backend.c \
  's|env_int("EMBER_GRAPHS", 1)|env_int("EMBER_GRAPHS", 0)|'
experiment exp/ropebug "kernels: precompute RoPE tables (introduces a 1% theta error)" kernels/cuda_backend.c \
  's|pow((double)hp->rope_theta, |pow((double)hp->rope_theta * 1.01, |'
experiment exp/plaingemv "kernels: plain decode GEMV by default" kernels/cuda_backend.c \
  's|env_int("EMBER_GEMV_STREAM", 1)|env_int("EMBER_GEMV_STREAM", 0)|'
experiment exp/slowdec2 "engine: decode 2% slower (injected)" engine/session.h \
  's|^#define EMBER_SLOW_DECODE_PM 0$|#define EMBER_SLOW_DECODE_PM 20|'
experiment exp/slowpf3 "engine: prefill 3% slower (injected)" engine/session.h \
  's|^#define EMBER_SLOW_PREFILL_PM 0$|#define EMBER_SLOW_PREFILL_PM 30|'
