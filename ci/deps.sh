#!/usr/bin/env bash
# ci/deps.sh - installs what building and testing abgate + ember needs on a Debian 12 machine,
# skipping anything already present (chromium: the headless browser test of the HTML pages;
# bubblewrap: the sandbox of PR builds and SUTs, evaluator/pipeline/sandbox.h; python3-torch and
# python3-sentencepiece: test_tools_train_pair, tools/train_pair.py end to end on the CPU).
# Sourced by ci/test.sh and ci/demo.sh; safe to run twice.
set -euo pipefail

ab_deps_packages="build-essential cmake pkg-config git jq curl openssl
  libgit2-dev libjansson-dev libsqlite3-dev libcurl4-openssl-dev libmicrohttpd-dev libssl-dev
  python3-numpy python3-torch python3-sentencepiece chromium bubblewrap"

ab_deps_missing() {
  local missing="" p
  for p in $ab_deps_packages; do
    dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
  done
  echo "$missing"
}

ab_deps_install() {
  local missing
  missing=$(ab_deps_missing)
  if [ -n "$missing" ]; then
    echo "ci/deps: installing$missing" >&2
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
  fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  ab_deps_install
fi
