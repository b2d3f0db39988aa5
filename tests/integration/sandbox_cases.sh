#!/usr/bin/env bash
# sandbox_cases.sh CASE - adversarial PRs against the bubblewrap sandbox (issue 17). The base suite
# builds with `sh {src}/build.sh {src} {build}`, so a head's build.sh is what the PR runs at build
# time, and the {build}/mock_sut it leaves (a wrapper script around the real mock) is what it runs
# as the SUT. Each case checks the verdict AND host-side evidence that the attack failed; several
# run the same attack with --no-sandbox first as a control, proving the check can fail.
#   usage: ABGATE=... SRC_ROOT=... sandbox_cases.sh CASE
source "$(dirname "$0")/lib.sh"
command -v bwrap >/dev/null || { echo "SKIP: bubblewrap is not installed (ci/deps.sh)"; exit 77; }
export PAIRS_MIN=${PAIRS_MIN:-2} PAIRS_MAX=${PAIRS_MAX:-2}

# Limits small enough for the attacks to hit them quickly.
CONFIG=$WORK/sandbox.json
cat > "$CONFIG" <<JSON
{ "sandbox": { "build": { "nproc": 128, "fsize_mb": 64, "disk_mb": 256, "tmp_mb": 64, "cpu_s": 120 },
               "run": { "nproc": 128, "fsize_mb": 16, "tmp_mb": 32 } } }
JSON

BENIGN='set -e
cc -O2 -o "$2/mock_sut" "$1/mock_sut.c" -lm'

sb_suite() {
  fixture_suite | jq '.build.build = ["sh", "{src}/build.sh", "{src}", "{build}"] | .build.timeout_s = 60'
}
sb_init() {
  fixture_init "$(sb_suite)"
  printf '%s\n' "$BENIGN" > "$REPO/build.sh"
  g add -A && g commit -qm "base: build.sh"
}
# head_build MSG SCRIPT: the head's build.sh is SCRIPT.
head_build() {
  g checkout -q -B head
  printf '%s\n' "$2" > "$REPO/build.sh"
  g add -A && g commit -qm "$1"
  g checkout -q main
}
# A build.sh that builds the real mock as mock_sut.real and installs WRAPPER (a sh script run as
# the SUT: "$0.real" is the real mock) as {build}/mock_sut.
wrapper_build() {
  printf 'set -e\ncc -O2 -o "$2/mock_sut.real" "$1/mock_sut.c" -lm\ncat > "$2/mock_sut" <<'"'"'WRAP'"'"'\n#!/bin/sh\n%s\nexec "$0.real" "$@"\nWRAP\nchmod +x "$2/mock_sut"\n' "$1"
}
sb_eval() { run_eval --config "$CONFIG" "$@"; }
no_file() { local f; f=$(find "$@" 2>/dev/null | head -1); [ -z "$f" ] || fail "found $f"; }
state_grep() { grep -rl --binary-files=text "$1" "$WORK/state" "$RESULT" "$WORK/comment.md" "$WORK/stderr.txt" 2>/dev/null || true; }
count_procs() { pgrep -fc "$1" 2>/dev/null || true; }
kill_procs() { local p; for p in $(pgrep -f "$1" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done; }

case "${1:?case}" in
aa)
  # A normal A/B evaluation with the sandbox on (the default): a verdict, sandbox recorded.
  sb_init
  head_build "head: comment" "$BENIGN
# comment"
  sb_eval
  expect_rc 0
  expect_label "eval:none"
  [ "$(jq_result '.environment.sandbox.enabled')" = "true" ] || fail "environment.sandbox.enabled is not true"
  jq_result '.environment.sandbox.bwrap' | grep -q bubblewrap || fail "no bwrap version recorded"
  grep -q "sandbox: on" "$WORK/stderr.txt" || fail "eval did not say the sandbox is on"
  ! grep -qi unsandboxed "$WORK/comment.md" || fail "sandboxed report says unsandboxed"
  # The same with --no-sandbox: said on stderr, in the result and in the markdown.
  run_eval --no-sandbox
  expect_rc 0
  [ "$(jq_result '.environment.sandbox.enabled')" = "false" ] || fail "unsandboxed run not recorded"
  grep -q "unsandboxed" "$WORK/comment.md" || fail "markdown does not show the unsandboxed run"
  grep -q "sandbox: OFF" "$WORK/stderr.txt" || fail "eval did not warn that the sandbox is off"
  pass "A/A with the sandbox on -> eval:none; --no-sandbox is shown in the report"
  ;;
network)
  # The build connects to a loopback listener the test opened: no connection arrives.
  PORT_FILE=$WORK/port; CONN=$WORK/connections
  python3 - "$PORT_FILE" "$CONN" <<'PY' &
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
while True:
    c, _ = s.accept(); open(sys.argv[2], "a").write(c.recv(64).decode(errors="replace") + "\n"); c.close()
PY
  LISTENER=$!
  trap 'kill $LISTENER 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
  for _ in $(seq 50); do [ -s "$PORT_FILE" ] && break; sleep 0.1; done
  PORT=$(cat "$PORT_FILE")
  # Control: the listener does record a connection from the host.
  python3 -c "import socket; s=socket.create_connection(('127.0.0.1', $PORT)); s.send(b'control')"
  for _ in $(seq 20); do grep -q control "$CONN" 2>/dev/null && break; sleep 0.1; done
  grep -q control "$CONN" || fail "control connection not recorded: the test cannot see a leak"
  : > "$CONN"
  sb_init
  head_build "head: phone home" "python3 -c \"import socket; s=socket.create_connection(('127.0.0.1', $PORT), 3); s.send(b'LEAK')\" || { echo 'network unreachable'; exit 1; }
$BENIGN"
  sb_eval
  sleep 0.3
  [ ! -s "$CONN" ] || fail "the listener got a connection: $(cat "$CONN")"
  expect_rc 1
  expect_label "eval:REJECT"
  jq_result '.build.head.log_tail' | grep -q "network unreachable" || fail "head log does not show the failed connect"
  pass "build connecting to loopback -> no connection, REJECT (does not compile)"
  ;;
token_env)
  # The service token in abgate's environment: the build and the SUT dump their environment.
  export ABGATE_GITHUB_TOKEN=tok-ENV-a1b2c3 GITHUB_TOKEN=tok-ENV-d4e5f6 AWS_SECRET_ACCESS_KEY=tok-ENV-g7h8 SSH_AUTH_SOCK=/tmp/tok-ENV-ssh
  sb_init
  head_build "head: env dump" "$(wrapper_build 'env >&2')
env; env > \"\$2/env.txt\""
  run_eval --no-sandbox
  [ -n "$(state_grep tok-ENV-)" ] || fail "control: the unsandboxed build did not leak the env (the check is blind)"
  rm -rf "$WORK/state"
  sb_eval
  expect_rc 0
  expect_label "eval:none"
  leaks=$(state_grep tok-ENV-)
  [ -z "$leaks" ] || fail "token reached: $leaks"
  grep -q "HOME=/tmp" "$WORK/state/builds/"*.head.log || fail "the build's env dump is not in its log"
  pass "token in env -> not in build log, SUT stderr, result or store (unsandboxed control leaks it)"
  ;;
token_file)
  # The token file (path known to the attacker), /etc and $HOME: none readable by the build.
  mkdir -p "$WORK/secrets" && printf 'tok-FILE-9z8y7x\n' > "$WORK/secrets/github-token" && chmod 600 "$WORK/secrets/github-token"
  sb_init
  head_build "head: read token" "for f in '$WORK/secrets/github-token' /etc/abgate/* /etc/shadow \$HOME/.ssh/* /root/.ssh/* /root/.config/gh/hosts.yml; do cat \"\$f\" 2>&1; done
cat '$WORK/secrets/github-token' > \"\$2/stolen\" 2>/dev/null || true
$BENIGN"
  sb_eval
  expect_rc 0
  leaks=$(state_grep tok-FILE-)
  [ -z "$leaks" ] || fail "token file content reached: $leaks"
  grep -q "No such file" "$WORK/state/builds/"*.head.log || fail "the build's read attempts are not in its log"
  pass "token file -> not visible to the build (log shows 'No such file'), eval:none"
  ;;
base_build)
  # The head's build overwrites the base's build (reused from a first evaluation) through ../.
  sb_init
  head_build "head: benign" "$BENIGN
# benign"
  sb_eval
  expect_rc 0
  base_dir=$(for d in "$WORK"/state/builds/*/; do [ ! -f "${d%/}.base.log" ] || echo "${d%/}"; done)
  [ -n "$base_dir" ] || fail "no base build dir"
  before=$(cd "$base_dir" && find . -type f -exec sha256sum {} + | sort | sha256sum)
  head_build "head: sabotage the base" "for d in \"\$2\"/../*/; do [ -f \"\$d/mock_sut\" ] && printf '#!/bin/sh\nexit 1\n' > \"\$d/mock_sut\" && echo SABOTAGED \$d; done
echo x > '$base_dir/mock_sut' && echo SABOTAGED-ABS
$BENIGN"
  sb_eval
  after=$(cd "$base_dir" && find . -type f -exec sha256sum {} + | sort | sha256sum)
  [ "$before" = "$after" ] || fail "the base build dir changed"
  [ "$(jq_result '.build.base.reused')" = "true" ] || fail "base build not reused"
  ! grep -q "SABOTAGED" "$WORK/state/builds/"*.head.log || fail "the head reports it sabotaged the base"
  expect_rc 0
  expect_label "eval:none"
  pass "head writing into the base build dir -> base unchanged (checksums), eval:none"
  ;;
store)
  # The head's build edits the store and the queue and drops files into the state dir.
  sb_init
  head_build "head: edit the store" "for p in \"\$2/../../abgate.db\" '$WORK/state/abgate.db' '$WORK/state/PWNED'; do echo PWNED >> \"\$p\" 2>/dev/null && echo WROTE \$p; done
rm -f '$WORK/state/abgate.db' \"\$2/../../abgate.db\" 2>/dev/null
$BENIGN"
  sb_eval
  expect_rc 0
  no_file "$WORK/state" -name 'PWNED*'
  [ "$(tail -c 6 "$WORK/state/abgate.db")" != "PWNED" ] || fail "the PR appended to the store"
  # (Writes "succeed" inside: they land in the sandbox's private root tmpfs, gone with it.)
  "$ABGATE" history --state "$WORK/state" | grep -q "eval:" || fail "the store lost the evaluation"
  pass "build editing the store -> store intact, nothing written in the state dir, eval:none"
  ;;
symlink)
  # Symlinks in the tree pointing up into the state dir and at it by absolute path.
  sb_init
  g checkout -q -B head
  for i in 1 2 3 4 5; do ln -s "$(printf '../%.0s' $(seq $i))" "$REPO/up$i"; done
  ln -s "$WORK/state" "$REPO/abs"
  printf '%s\n' "for l in up1 up2 up3 up4 up5 abs; do ls \"\$1/\$l/\" 2>/dev/null | grep -q abgate.db && echo READ-\$l; touch \"\$1/\$l/PWNED-\$l\" 2>/dev/null; done
$BENIGN" > "$REPO/build.sh"
  g add -A && g commit -qm "head: symlinks to the state dir" && g checkout -q main
  sb_eval
  expect_rc 0
  no_file "$WORK" -name 'PWNED-*'
  ! grep -q "READ-" "$WORK/state/builds/"*.head.log || fail "the build listed the state dir through a link: $(grep READ- "$WORK/state/builds/"*.head.log)"
  pass "symlinks in the tree to the state dir -> nothing visible or written, eval:none"
  ;;
forkbomb)
  # Thousands of processes at build time: stopped at the sandbox's limit, none left over.
  sb_init
  # A subshell forks until the limit stops it (dash exits when a fork fails); the build's own shell
  # stays alive meanwhile without forking (a counting loop), so the host's sampler sees the peak even
  # on a loaded machine, then the build fails.
  head_build "head: fork bomb" "( i=0; while [ \$i -lt 5000 ]; do sleep 4321 & i=\$((i+1)); done ) 2>/dev/null &
j=0; while [ \$j -lt 400000 ]; do j=\$((j+1)); done
exit 1
$BENIGN"
  ( peak=0; while [ ! -f "$WORK/done" ]; do n=$(count_procs 'sleep 4321'); [ "$n" -gt "$peak" ] && peak=$n && echo "$peak" > "$WORK/peak"; sleep 0.05; done ) &
  MON=$!
  sb_eval
  touch "$WORK/done"; wait $MON || true
  left=$(count_procs 'sleep 4321')
  [ "$left" -eq 0 ] || { kill_procs 'sleep 4321'; fail "$left processes left after the build"; }
  peak=$(cat "$WORK/peak" 2>/dev/null || echo 0)
  [ "$peak" -le 128 ] || fail "peak of $peak processes above the limit of 128"
  [ "$peak" -gt 10 ] || fail "the bomb never ran (peak $peak): the test is blind"
  expect_rc 1
  expect_label "eval:REJECT"
  pass "fork bomb -> stopped at $peak processes (limit 128), none left, REJECT"
  ;;
daemon)
  # The SUT double-forks a daemon: gone when the SUT process ends. Control: unsandboxed it survives.
  sb_init
  head_build "head: daemon" "$(wrapper_build "(setsid sh -c 'exec sleep 4322' >/dev/null 2>&1 &)")"
  run_eval --no-sandbox
  [ "$(count_procs 'sleep 4322')" -gt 0 ] || fail "control: the unsandboxed daemon did not survive (the check is blind)"
  kill_procs 'sleep 4322'
  rm -rf "$WORK/state"
  sb_eval
  expect_rc 0
  sleep 0.5
  left=$(count_procs 'sleep 4322')
  [ "$left" -eq 0 ] || { kill_procs 'sleep 4322'; fail "$left daemons outlived the sandboxed SUT"; }
  expect_label "eval:none"
  pass "SUT double-forking a daemon -> none left (unsandboxed control: it survives), eval:none"
  ;;
disk)
  # The build fills the disk: one big file (RLIMIT_FSIZE), many files (build dir budget), /tmp.
  sb_init
  free_before=$(df -Pm "$WORK" | awk 'NR==2 {print $4}')
  head_build "head: fill the disk" "head -c 100M /dev/zero > /tmp/fill || echo TMP-FULL
rm -f /tmp/fill
head -c 200M /dev/zero > \"\$2/big\" || echo FSIZE-HIT
for i in \$(seq 10); do head -c 60M /dev/zero > \"\$2/fill\$i\"; done
$BENIGN"
  sb_eval
  free_after=$(df -Pm "$WORK" | awk 'NR==2 {print $4}')
  expect_rc 1
  expect_label "eval:REJECT"
  jq_result '.verdict.reason' | grep -q "over the sandbox" || fail "reason: $(jq_result .verdict.reason)"
  grep -q FSIZE-HIT "$WORK/state/builds/"*.head.log || fail "the 200 MiB file was not stopped"
  grep -q TMP-FULL "$WORK/state/builds/"*.head.log || fail "/tmp was not bounded"
  used=$(du -sm "$WORK/state" | cut -f1)
  [ "$used" -lt 300 ] || fail "state dir holds $used MiB after the build"
  [ $((free_before - free_after)) -lt 300 ] || fail "disk free dropped by $((free_before - free_after)) MiB"
  pass "disk-filling build -> file size, /tmp and build dir bounded ($used MiB left), REJECT"
  ;;
gpu_hang)
  # The SUT hangs on its first request while holding a device open and ignoring SIGTERM (no GPU
  # here: /dev/zero stands in for /dev/nvidia0; the GPU binding itself is unit-tested).
  export REQUEST_TIMEOUT_S=2
  sb_init
  head_build "head: hang holding the device" "$(wrapper_build "sh -c 'trap \"\" TERM; exec 3</dev/zero; exec sleep 4323' &
trap '' TERM")
printf 'hang_after = 1\nignore_term = 1\n' >> \"\$1/mock_sut.conf\" 2>/dev/null || true"
  g checkout -q head && printf 'hang_after = 1\nignore_term = 1\n' >> "$REPO/mock_sut.conf" && g add -A && g commit -qm "head: hang" && g checkout -q main
  start=$(date +%s)
  sb_eval
  elapsed=$(( $(date +%s) - start ))
  sleep 0.5
  left=$(count_procs 'sleep 4323')
  [ "$left" -eq 0 ] || { kill_procs 'sleep 4323'; fail "$left processes left holding the device"; }
  expect_rc 3
  expect_label "eval:infra-error"
  [ "$elapsed" -lt 90 ] || fail "took ${elapsed}s"
  pass "hanging SUT holding a device -> killed at the timeout, nothing left, infra-error (${elapsed}s)"
  ;;
env_detect)
  # The head looks for the harness in its environment and would run 2x faster when it finds it.
  export ABGATE_CONFIG=/etc/abgate/abgate.json GITHUB_ACTIONS=true CI=true GITHUB_TOKEN=tok-ENV-zz
  sb_init
  head_build "head: detect the harness" "$(wrapper_build 'env >&2
if env | grep -qiE "^(ABGATE|GITHUB|CI=)|TOKEN"; then echo HARNESS-DETECTED >&2; exec "$0.real" "$@" --speed-hack; fi')"
  sb_eval
  expect_rc 0
  expect_label "eval:none"
  runs=$(ls "$WORK/state/runs/"*/* 2>/dev/null | head -1)
  [ -n "$runs" ] || fail "no SUT stderr logs"
  grep -rq "HOME=/tmp" "$WORK/state/runs/" || fail "the SUT's env dump is not in its stderr log"
  ! grep -rq "HARNESS-DETECTED" "$WORK/state/runs/" || fail "the SUT saw the harness's environment"
  ! grep -rqE "^(ABGATE|GITHUB|CI=)" "$WORK/state/runs/" || fail "harness variables reached the SUT"
  pass "head probing its env for the harness -> only the minimal base env, eval:none"
  ;;
dotdot)
  # The build's output dir escapes with ../ (relative to its cwd and to {build}).
  sb_init
  head_build "head: ../ output" "cc -O2 -o \"\$2/../escape-PWNED\" \"\$1/mock_sut.c\" -lm 2>/dev/null; cc -O2 -o ../../escape-PWNED2 \"\$1/mock_sut.c\" -lm 2>/dev/null; cc -O2 -o \"\$1/../escape-PWNED3\" \"\$1/mock_sut.c\" -lm 2>/dev/null
$BENIGN"
  sb_eval
  expect_rc 0
  no_file "$WORK" /tmp -maxdepth 6 -name 'escape-PWNED*'
  pass "../ output dirs -> nothing written outside the build dir, eval:none"
  ;;
marker)
  # The build forges the success marker and fails: it must not be "reused" as built next time.
  sb_init
  head_build "head: forge success" "touch \"\$2.ok\" \"\$2/.abgate-build-ok\" 2>/dev/null; exit 1"
  sb_eval
  expect_rc 1
  expect_label "eval:REJECT"
  sb_eval
  expect_rc 1
  [ "$(jq_result '.build.head.reused')" = "false" ] || fail "the failed head build was reused"
  pass "forged success marker -> REJECT both times, never reused"
  ;;
forged_bwrap)
  # The build fails while printing what bubblewrap prints when IT fails. Output is the PR's to
  # write; bwrap's status fd (an exit-code record: the command ran) decides, so this is the PR's
  # failed build (REJECT), not an infra error that would spare it the verdict.
  sb_init
  head_build "head: pose as the sandbox" "echo \"bwrap: Can't mount proc on /newroot/proc: Operation not permitted\" >&2; exit 1"
  sb_eval
  expect_rc 1
  expect_label "eval:REJECT"
  [ "$(jq_result '.build.head.status')" = "failed" ] || fail "head build status $(jq_result .build.head.status), expected failed"
  pass "a build that prints bwrap's failure and exits 1 -> REJECT (the status fd says it ran)"
  ;;
no_bwrap)
  # A sandbox that cannot start is infra with the reason, never a REJECT.
  sb_init
  head_build "head: fine" "$BENIGN
# fine"
  jq '.sandbox.bwrap = "/nonexistent/bwrap"' "$CONFIG" > "$WORK/bad.json"
  run_eval --config "$WORK/bad.json"
  expect_rc 3
  expect_label "eval:infra-error"
  jq_result '.verdict.reason' | grep -qi "sandbox" || fail "reason does not name the sandbox: $(jq_result .verdict.reason)"
  pass "bwrap missing -> infra-error: $(jq_result .verdict.reason)"
  ;;
sut_box_fails)
  # The sandbox around the SUT cannot start (a stand-in bwrap that fails as bwrap does, without a
  # status record, for SUT commands only; builds and the probe get the real one): infra at the
  # first process with bwrap's reason, no retries, never a REJECT.
  sb_init
  head_build "head: fine" "$BENIGN
# fine"
  real=$(command -v bwrap)
  cat > "$WORK/bwrap-sut-fails" <<SH
#!/bin/sh
case "\$*" in
*"/mock_sut --config"*)
  echo started >> "$WORK/sut-attempts"
  echo "bwrap: Can't mount tmpfs on /newroot/tmp: No space left on device" >&2
  exit 1 ;;
esac
exec "$real" "\$@"
SH
  chmod +x "$WORK/bwrap-sut-fails"
  jq --arg b "$WORK/bwrap-sut-fails" '.sandbox.bwrap = $b' "$CONFIG" > "$WORK/box.json"
  run_eval --config "$WORK/box.json"
  expect_rc 3
  expect_label "eval:infra-error"
  reason=$(jq_result '.verdict.reason')
  case "$reason" in *"sandbox: bwrap: Can't mount tmpfs"*) ;; *) fail "reason: $reason" ;; esac
  [ "$(wc -l < "$WORK/sut-attempts")" -eq 1 ] || fail "$(wc -l < "$WORK/sut-attempts") SUT starts, expected 1 (no retry)"
  pass "the SUT's sandbox cannot start -> infra-error at the first process: $reason"
  ;;
sut_poses_bwrap)
  # A head SUT that prints bwrap's failure and exits before its ready line ran (bwrap's status fd
  # has its exit-code record): a crash of the SUT with retries, not a sandbox failure.
  sb_init
  wrapper_build 'echo "bwrap: Can'"'"'t mount tmpfs on /newroot/tmp: No space left on device" >&2; exit 1' > "$WORK/poser.sh"
  head_build "head: SUT poses as the sandbox" "$(cat "$WORK/poser.sh")"
  sb_eval
  expect_rc 3
  expect_label "eval:infra-error"
  reason=$(jq_result '.verdict.reason')
  case "$reason" in *"sandbox: bwrap"*) fail "classified as the sandbox's: $reason" ;; esac
  case "$reason" in *"head SUT failed"*crash*) ;; *) fail "reason: $reason" ;; esac
  pass "a SUT that prints bwrap's failure -> its own crash: $reason"
  ;;
*)
  echo "unknown case $1" >&2
  exit 2
  ;;
esac
