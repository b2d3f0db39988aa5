#!/usr/bin/env bash
# ci/test.sh - the README's test command: installs what is missing, builds everything (the CUDA
# kernels too when nvcc is there, so a kernel that does not compile fails), runs every test, then
# runs the suite again under AddressSanitizer + UndefinedBehaviorSanitizer.
#   usage: bash ci/test.sh            (ABGATE_SKIP_ASAN=1 skips the sanitizer pass)
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/deps.sh
ab_deps_install

# The GitHub API simulator and real webhook payloads for the service tests (npm registry).
if [ -f tests/ghsim/package.json ]; then
  echo "ci/test: installing the GitHub simulator (npm ci)" >&2
  (cd tests/ghsim && npm ci --no-audit --no-fund --loglevel=error)
  export ABGATE_REQUIRE_GHSIM=1      # the service tests must not skip themselves in CI
fi
# ci/deps.sh installed python3-torch + python3-sentencepiece: test_tools_train_pair must not skip.
export ABGATE_REQUIRE_TORCH=1

jobs=$(nproc)
echo "ci/test: build (RelWithDebInfo, EMBER_CUDA=AUTO)" >&2
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_CUDA=AUTO >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j"$jobs")

if [ -z "${ABGATE_SKIP_ASAN:-}" ]; then
  echo "ci/test: build and test under ASan + UBSan" >&2
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DABGATE_SANITIZE=ON -DEMBER_CUDA=OFF >/dev/null
  cmake --build build-asan -j"$jobs"
  # Long statistical simulations and the fuzzer run once, in the plain build above.
  (cd build-asan && ctest --output-on-failure -j"$jobs" -LE "nosan")
fi
echo "ci/test: all tests passed" >&2
