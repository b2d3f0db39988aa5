#!/bin/sh
# abgate_cli.sh ABGATE SOURCE_DIR - the real `abgate` executable reaches the service's commands:
# `serve --config-table` matches the committed ci/abgate.sample.md, the sample config loads and is
# printed with its secret masked, `serve` starts, answers /healthz, refuses an unsigned webhook and
# stops on SIGTERM, and `eval --pr` reports usage errors with exit status 2.
set -u
ABGATE=$1
SRC=$2
TMP=$(mktemp -d /tmp/abgate-cli-XXXXXX)
PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
pass=0
ok() { pass=$((pass + 1)); }

"$ABGATE" serve --config-table > "$TMP/table.md" || fail "serve --config-table"
sed -n '/^| key |/,$p' "$SRC/ci/abgate.sample.md" > "$TMP/committed.md"
cmp -s "$TMP/table.md" "$TMP/committed.md" || { diff "$TMP/table.md" "$TMP/committed.md" >&2; fail "ci/abgate.sample.md is out of date (regenerate with: abgate serve --config-table)"; }
ok

ABGATE_WEBHOOK_SECRET=top-secret-value "$ABGATE" serve --config "$SRC/ci/abgate.sample.json" --print-config 2> "$TMP/print.txt" \
	|| { cat "$TMP/print.txt" >&2; fail "sample config does not load"; }
grep -q "webhook_secret = \*\*\*\*\*\*\*\*" "$TMP/print.txt" || fail "secret not shown masked"
grep -q "top-secret-value" "$TMP/print.txt" && fail "secret printed"
ok

"$ABGATE" serve --config "$TMP/missing.json" 2>/dev/null; [ $? -eq 2 ] || fail "missing config is not a usage error"
printf '{"listen":"127.0.0.1:0","state_dir":"%s/state","repos":[{"name":"o/r"}]}' "$TMP" > "$TMP/nosecret.json"
"$ABGATE" serve --config "$TMP/nosecret.json" 2>"$TMP/err.txt"; [ $? -eq 2 ] || fail "serve without a webhook secret must refuse"
grep -q "no webhook secret" "$TMP/err.txt" || fail "no reason given for refusing"
ok

printf '{"listen":"127.0.0.1:0","state_dir":"%s/state","webhook_secret":"s","poll_interval_s":0,"repos":[{"name":"o/r","git_url":"%s/none"}]}' "$TMP" "$TMP" > "$TMP/cfg.json"
"$ABGATE" serve --config "$TMP/cfg.json" 2> "$TMP/serve.log" &
PID=$!
i=0
while [ ! -s "$TMP/state/serve.addr" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -s "$TMP/state/serve.addr" ] || { cat "$TMP/serve.log" >&2; fail "serve did not start"; }
ADDR=$(cat "$TMP/state/serve.addr")
curl -fsS "http://$ADDR/healthz" | grep -q "^ok" || fail "/healthz"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'X-GitHub-Event: ping' -d '{}' "http://$ADDR/webhook")
[ "$code" = 401 ] || fail "unsigned webhook answered $code, not 401"
curl -fsS "http://$ADDR/metrics" | grep -q 'abgate_webhook_deliveries_total{status="401"} 1' || fail "/metrics"
# A second instance on the same state dir refuses to start.
"$ABGATE" serve --config "$TMP/cfg.json" 2> "$TMP/second.log"; [ $? -eq 3 ] || fail "second instance started"
grep -q "another abgate serve" "$TMP/second.log" || fail "second instance: no reason"
kill -TERM "$PID"
wait "$PID"; rc=$?
PID=""
[ $rc -eq 0 ] || { cat "$TMP/serve.log" >&2; fail "serve exited $rc after SIGTERM"; }
grep -q "stopped" "$TMP/serve.log" || fail "no clean stop logged"
ok

"$ABGATE" eval --pr 0 --config "$TMP/cfg.json" 2>/dev/null; [ $? -eq 2 ] || fail "eval --pr 0 is not a usage error"
"$ABGATE" eval --pr 7 --post --dry-run --config "$TMP/cfg.json" 2>/dev/null; [ $? -eq 2 ] || fail "--post with --dry-run is not a usage error"
ok

echo "$pass passed, 0 failed"
