#!/bin/sh
# run_node.sh SCRIPT ARGS... - runs a node test script of the service tests. When node (>= 20.11)
# or tests/ghsim/node_modules is missing the test is skipped (exit 77), unless ABGATE_REQUIRE_GHSIM
# is set to 1, in which case that is a failure: CI sets it so these tests cannot vanish silently.
# Install the simulator with: (cd tests/ghsim && npm ci)
GHSIM_DIR=${GHSIM_DIR:-$(dirname "$0")/../ghsim}
missing=""
if ! command -v node >/dev/null 2>&1; then
	missing="node is not installed"
elif ! node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a==20&&b>=11)?0:1)'; then
	missing="node $(node --version) is older than 20.11 (@simulacrum/github-api-simulator needs import.meta.dirname)"
elif [ ! -d "$GHSIM_DIR/node_modules/@simulacrum/github-api-simulator" ] || \
     [ ! -d "$GHSIM_DIR/node_modules/@octokit/webhooks-examples" ]; then
	missing="$GHSIM_DIR/node_modules is not installed (run: cd tests/ghsim && npm ci)"
fi
if [ -n "$missing" ]; then
	if [ "${ABGATE_REQUIRE_GHSIM:-0}" = "1" ]; then
		echo "FAIL: $missing, and ABGATE_REQUIRE_GHSIM=1" >&2
		exit 1
	fi
	echo "SKIP: $missing" >&2
	exit 77
fi
exec node "$@"
