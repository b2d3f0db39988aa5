#!/usr/bin/env bash
# html_pages.sh structure|browser - the HTML reports and pages (issue 16) on real results: five
# evaluations of one fixture repository into one state dir (A/A, REJECT, tier, infra, A/A again).
#   structure: `abgate report ID --format html` of each: the verdict, every series, a plot in every
#     plot section, no external URL or script; `abgate serve` answers /runs/ID, /runs/ID.json,
#     /history over the five, /calibration, 404 for unknown ids and paths, and no page carries a
#     configured secret.
#   browser: the served pages in headless Chromium: they load, no console message, screenshots
#     under $ARTIFACTS (exit 77 when chromium is absent).
source "$(dirname "$0")/lib.sh"
MODE=${1:?structure or browser}
ART=${ARTIFACTS:-$WORK/artifacts}
mkdir -p "$ART"
if [ "$MODE" = browser ] && ! command -v chromium >/dev/null; then
  echo "SKIP: chromium is not installed"; exit 77
fi
SECRET=hook-secret-5f9c2e71
TOKEN=ghp_token-a81d77c3e0
PID=""
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT

# branch NAME MSG [KEY=VALUE...]: a branch off main that appends mock_sut.conf keys.
branch() {
  local name=$1 msg=$2; shift 2
  g checkout -q -B "$name" main
  local kv
  for kv in "$@"; do printf '%s = %s\n' "${kv%%=*}" "${kv#*=}" >> "$REPO/mock_sut.conf"; done
  g add -A && g commit -qm "$msg" && g checkout -q main
}
evaluate() {
  set +e
  "$ABGATE" eval --repo "$REPO" --base main --head "$1" --state "$WORK/state" --seed "$2" --quiet \
    --json "$WORK/r.json" > /dev/null 2> "$WORK/stderr.txt"
  local rc=$?
  set -e
  [ "$rc" -eq "$3" ] || { cat "$WORK/stderr.txt" >&2; fail "eval $1: exit $rc, expected $3"; }
}

fixture_init
branch aa "head: comment only" "# no change=1"
branch slow "head: 20% slower decode" "decode_speed=0.8"
branch fast "head: 20% faster" "speed=1.2"
branch crash "head: crashes" "crash_after=0"
evaluate aa 7 0
evaluate slow 7 1
evaluate fast 7 0
evaluate crash 7 3
evaluate aa 8 0

# No external resource of any kind: no URL, no script, no import, no url() in the style sheet.
no_external() {
  ! grep -qiE 'https?://|<script|src=|@import|url\(|<link' "$1" || fail "$1 refers to something outside: $(grep -oiE 'https?://[^"<> ]*|<script|src=|@import|url\(|<link' "$1" | head -3)"
}

if [ "$MODE" = structure ]; then
  for id in 1 2 3 4 5; do
    page=$ART/run-$id.html
    "$ABGATE" report "$id" --state "$WORK/state" --format html -o "$page" || fail "report $id --format html"
    "$ABGATE" report "$id" --state "$WORK/state" --format json > "$WORK/doc.json"
    label=$(jq -r .verdict.label "$WORK/doc.json")
    grep -q "<span class=\"label\">$label</span>" "$page" || fail "run $id: verdict $label missing"
    no_external "$page"
    # Every series with samples has its own plot, titled model · metric · ctx.
    n_series=$(jq '[.samples[] | [.model, .metric, .ctx]] | unique | length' "$WORK/doc.json")
    n_plots=$(grep -o '<figure class="plot series' "$page" | wc -l)
    [ "$n_plots" -eq "$n_series" ] || fail "run $id: $n_plots sample plots for $n_series series"
    for m in $(jq -r '.metrics[] | "\(.name)@\(.ctx)"' "$WORK/doc.json"); do
      name=${m%@*}; ctx=${m#*@}
      case $name in decode_tps) shown="decode tok/s";; prefill_tps) shown="prefill tok/s";; *) shown=$name;; esac
      [ "$ctx" -ge 1024 ] && [ $((ctx % 1024)) -eq 0 ] && ctx="$((ctx / 1024))k"
      grep -q "mock · $shown · $ctx" "$page" || fail "run $id: series $shown $ctx not shown"
    done
    # One plot per plot section at least; the metrics section's is the forest plot.
    python3 - "$page" <<'PY' || fail "run $id: a plot section without a plot"
import re, sys
html = open(sys.argv[1], encoding="utf-8").read()
sections = re.findall(r'<section id="(\w+)" class="plots">(.*?)</section>', html, re.S)
assert sections, "no plot sections"
for name, body in sections:
    if "No speed metrics" in body or "No samples" in body:
        continue
    assert "<svg" in body, name
m = dict(sections)["metrics"]
assert "No speed metrics" in m or m.count('class="plot forest"') == 1
PY
  done
  grep -q 'class="row bad"' "$ART/run-2.html" || fail "REJECT forest plot has no regressed row"
  grep -q 'class="tier"' "$ART/run-3.html" || fail "tier lines missing from the forest plot"
  pass "html reports of 5 evaluations: verdict, every series, a plot per section, nothing external"
fi

# The service, with secrets and a public_url configured.
cat > "$WORK/cfg.json" <<JSON
{ "listen": "127.0.0.1:0", "state_dir": "$WORK/state", "webhook_secret": "$SECRET", "poll_interval_s": 0,
  "public_url": "http://pages.example.invalid/",
  "github": { "token": "$TOKEN", "api_url": "http://127.0.0.1:9" },
  "repos": [ { "name": "o/r", "git_url": "$REPO", "base": "main" } ] }
JSON
"$ABGATE" serve --config "$WORK/cfg.json" 2> "$WORK/serve.log" &
PID=$!
for _ in $(seq 100); do [ -s "$WORK/state/serve.addr" ] && break; sleep 0.1; done
[ -s "$WORK/state/serve.addr" ] || { cat "$WORK/serve.log" >&2; fail "serve did not start"; }
BASE="http://$(cat "$WORK/state/serve.addr")"

# get PATH STATUS FILE: fetches PATH, checks the status, keeps the body in FILE.
get() {
  local code
  code=$(curl -s -o "$3" -w '%{http_code}' "$BASE$1")
  [ "$code" = "$2" ] || fail "GET $1: $code, expected $2"
  ! grep -qF -e "$SECRET" -e "$TOKEN" "$3" || fail "GET $1 shows a configured secret"
}

if [ "$MODE" = structure ]; then
  for id in 1 2 3 4 5; do
    get "/runs/$id" 200 "$WORK/p.html"
    grep -q 'href="/runs/'$id'.json"' "$WORK/p.html" || fail "run page $id lacks its JSON link"
    grep -q 'href="/history?repo=o/r&amp;suite=mock"' "$WORK/p.html" || fail "run page $id lacks the history link"
    get "/runs/$id.json" 200 "$WORK/p.json"
    [ "$(jq -r .schema "$WORK/p.json")" = abgate.result/2 ] || fail "/runs/$id.json is not the result"
  done
  for bad in /runs/999 /runs/0 /runs/abc /runs/1x /runs/01 /runs/ /nope /history "/history?repo=x/y"; do
    get "$bad" 404 "$WORK/p.html"
    grep -q "404" "$WORK/p.html" || fail "$bad: not a 404 page"
    ! grep -qi "sqlite\|\.db\|$WORK" "$WORK/p.html" || fail "$bad: the 404 page shows internals"
  done
  get "/history?repo=o/r&suite=mock" 200 "$WORK/h.html"
  no_external "$WORK/h.html"
  # One plot per series the base branch's evaluations measured (decode, prefill and the cold-start
  # first-request series of each context), counted from a stored result.
  get "/runs/1.json" 200 "$WORK/p1.json"
  series=$(jq '[.metrics[] | "\(.model)/\(.name)/\(.ctx)"] | unique | length' "$WORK/p1.json")
  [ "$series" -ge 4 ] || fail "history: the first result has only $series series"
  [ "$(grep -o '<figure class="plot history"' "$WORK/h.html" | wc -l)" -eq "$series" ] || fail "history: not one plot per series ($series)"
  [ "$(grep -o 'href="/runs/[0-9]*"' "$WORK/h.html" | wc -l)" -ge 4 ] || fail "history: fewer than 4 evaluations with base samples"
  grep -q '5 evaluations</figcaption>\|4 evaluations</figcaption>' "$WORK/h.html" || fail "history: points per series"
  get "/calibration" 200 "$WORK/c.html"
  grep -q "No calibration is stored" "$WORK/c.html" || fail "calibration page"
  # Once the suite is calibrated, the page lists its newest calibration with the figures.
  # (--no-sandbox reaches its evaluations: each stored result records the sandbox as off)
  "$ABGATE" calibrate --repo "$REPO" --ref main --runs 2 --state "$WORK/state" --pairs-max 4 --quiet --no-sandbox \
    > "$WORK/calib.out" 2>&1 || { cat "$WORK/calib.out" >&2; fail "abgate calibrate"; }
  off=$(sqlite3 "$WORK/state/abgate.db" "SELECT group_concat(json_extract(result_json, '\$.environment.sandbox.enabled'))
    FROM evaluations WHERE \"trigger\" LIKE 'calibrate%'")
  [ "$off" = "0,0" ] || fail "calibrate --no-sandbox: its evaluations record sandbox.enabled as '$off'"
  get "/calibration" 200 "$WORK/c.html"
  grep -q "<h3>mock" "$WORK/c.html" || fail "calibration page does not list the calibrated suite"
  grep -q "fpr_upper_95" "$WORK/c.html" || fail "calibration page lacks the false-positive bound"
  no_external "$WORK/c.html"
  pass "served pages: runs, JSON, history over 5 evaluations, calibration, 404s, no secret"
  exit 0
fi

# browser: load each page, no console message at all, a screenshot each.
shot() {
  local name=$1 url=$2
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --enable-logging=stderr --v=0 \
    --window-size=1280,${3:-2200} --virtual-time-budget=3000 --screenshot="$ART/$name.png" "$url" \
    > "$WORK/$name.out" 2> "$WORK/$name.err" || { tail -5 "$WORK/$name.err" >&2; fail "chromium on $url"; }
  [ -s "$ART/$name.png" ] || fail "no screenshot of $url"
  ! grep -q "CONSOLE" "$WORK/$name.err" || fail "$url: console messages: $(grep CONSOLE "$WORK/$name.err" | head -3)"
}
# The console check must be able to fail: a page with a script error is caught.
printf '<!DOCTYPE html><p>x</p><script>nosuchfunction()</script>' > "$WORK/bad.html"
chromium --headless --no-sandbox --disable-gpu --enable-logging=stderr --v=0 --virtual-time-budget=1000 \
  --dump-dom "file://$WORK/bad.html" > /dev/null 2> "$WORK/bad.err" || true
grep -q "CONSOLE.*nosuchfunction" "$WORK/bad.err" || fail "the console check does not see a script error"
shot run-aa "$BASE/runs/1"
shot run-reject "$BASE/runs/2"
shot run-tier "$BASE/runs/3"
shot run-infra "$BASE/runs/4"
shot history "$BASE/history?repo=o/r&suite=mock" 1400
shot calibration "$BASE/calibration" 600
shot not-found "$BASE/runs/999" 400
if [ -f "$ART/large.html" ]; then   # written by test_reports html_large
  start=$(date +%s%N)
  shot large "file://$ART/large.html" 3000
  echo "large page ($(wc -c < "$ART/large.html") bytes) loaded and shot in $(( ($(date +%s%N) - start) / 1000000 )) ms"
fi
pass "served pages load in chromium without console messages; screenshots in $ART"
