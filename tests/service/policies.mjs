// policies.mjs NAME - one scenario of the PR lifecycle policies: the real service (ABGATE_DRIVER
// serve, stand-in evaluation) or `abgate policies` against the GitHub simulator (tests/ghsim), with
// PRs seeded with authors, dates, commits and patches, and real signed webhook payloads. Asserts
// what GitHub (the simulator) ends up with: PR state, labels, the policy comment (exactly one), and
// whether an evaluation ran. Prints "N passed, N failed".
import { spawn, execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

const GHSIM = process.env.GHSIM_DIR || path.join(path.dirname(new URL(import.meta.url).pathname), "../ghsim");
const { startSim, defaultSeed } = await import(path.join(GHSIM, "server.mjs"));
const { prPayload, signedDelivery, send } = await import(path.join(GHSIM, "webhooks.mjs"));

const DRIVER = process.env.ABGATE_DRIVER;
const REPO = "octo-org/demo";
const SECRET = `s3cret-${randomUUID()}`;
const tmp = mkdtempSync(path.join(tmpdir(), "abgate-pol-"));
const children = new Set();
let passed = 0, failed = 0;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
  passed++;
}
async function waitFor(fn, what, timeoutMs = 60000) {
  const t0 = Date.now();
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for: ${what}`);
    await sleep(100);
  }
}
const iso = (ms) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z");
const HOUR = 3600e3, DAY = 24 * HOUR;
const sha = (n) => n.toString(16).padStart(40, "0");

// Added lines "value_i = compute(i);" for i in [from, to), as one hunk of a patch.
const patch = (from, to, extra = []) => {
  const lines = [];
  for (let i = from; i < to; i++) lines.push(`+  value_${i} = compute(${i});`);
  for (const e of extra) lines.push(`+${e}`);
  return `@@ -0,0 +1,${lines.length} @@\n${lines.join("\n")}`;
};

function seed(sim, n, { user = "alice", created = Date.now() - HOUR, files, commits, labels, draft = false,
  assoc = "CONTRIBUTOR", head } = {}) {
  const h = head || sha(n * 16 + 1);
  sim.state.pulls[`${REPO}#${n}`] = { number: n, state: "open", draft, title: `PR ${n}`, head_ref: `pr-${n}`, head_sha: h,
    base_ref: "main", base_sha: "b".repeat(40), user, author_association: assoc, created_at: iso(created),
    files: files || [{ filename: `src/f${n}.c`, patch: patch(n * 1000, n * 1000 + 3) }],
    commits: commits || [{ sha: h, author: user, committer: user, date: iso(created) }] };
  if (labels) sim.state.labels[`${REPO}#${n}`] = labels;
  return h;
}

function writeConfig(name, sim, policies = {}, over = {}) {
  const cfg = {
    listen: "127.0.0.1:0", state_dir: path.join(tmp, "state"), webhook_secret: SECRET,
    repos: [{ name: REPO, git_url: path.join(tmp, "no-repo"), base: "main" }],
    workers: 1, poll_interval_s: 0, lease_s: 6, job_timeout_s: 120, max_attempts: 3, report_retry_max_s: 2,
    log_level: "info", policies, ...over,
    github: { api_url: sim.url, token: "ghp_policies", timeout_s: 10, max_retries: 3, backoff_base_ms: 50,
      backoff_max_ms: 400, max_wait_s: 10 },
  };
  const file = path.join(tmp, `${name}.json`);
  writeFileSync(file, JSON.stringify(cfg, null, 2));
  return { file, cfg };
}

const fakeFile = path.join(tmp, "fake-eval");
let lastLog = () => "";
async function startService(conf) {
  const addr = path.join(conf.cfg.state_dir, "serve.addr");
  if (existsSync(addr)) unlinkSync(addr);
  const env = { ...process.env, ABGATE_FAKE_EVAL: "pass:0.2", ABGATE_FAKE_EVAL_FILE: fakeFile };
  const out = [];
  const child = spawn(DRIVER, ["serve", "--config", conf.file], { env, stdio: ["ignore", "pipe", "pipe"] });
  children.add(child);
  child.stdout.on("data", (d) => out.push(d));
  child.stderr.on("data", (d) => out.push(d));
  child.on("exit", () => { children.delete(child); writeFileSync(path.join(tmp, `serve-${Date.now()}.log`), Buffer.concat(out)); });
  const exited = new Promise((r) => child.on("exit", (code, signal) => r({ code, signal })));
  await waitFor(() => existsSync(addr) || child.exitCode !== null, "serve.addr", 30000);
  if (child.exitCode !== null) throw new Error(`serve exited: ${Buffer.concat(out).toString()}`);
  lastLog = () => Buffer.concat(out).toString();
  return {
    url: `http://${readFileSync(addr, "utf8").trim()}`, log: () => Buffer.concat(out).toString(),
    async stop() { child.kill("SIGTERM"); const r = await exited; check(r.code === 0, `serve stopped cleanly (exit ${r.code})`); },
    async kill() { child.kill("SIGKILL"); await exited; },
  };
}
async function deliver(svc, payload, opts = {}) {
  const d = await signedDelivery(SECRET, "pull_request", payload, opts);
  return { ...(await send(`${svc.url}/webhook`, d)), delivery: d.delivery };
}
const jobs = (conf) => execFileSync(DRIVER, ["jobs", conf.cfg.state_dir], { encoding: "utf8" })
  .split("\n").filter(Boolean).map((l) => JSON.parse(l));
const FINAL = new Set(["done", "canceled", "superseded"]);
const jobsFinal = (conf, pr, n = 1) => waitFor(() => { const js = jobs(conf).filter((j) => j.pr === pr);
  return js.length >= n && js.every((j) => FINAL.has(j.state)) && js; }, `jobs of #${pr} final`);
// Runs the driver asynchronously (the simulator answers from this process's event loop).
const run = (args) => new Promise((resolve) => {
  const child = spawn(DRIVER, args, { stdio: ["ignore", "pipe", "pipe"] });
  children.add(child);
  const out = [], err = [];
  child.stdout.on("data", (d) => out.push(d));
  child.stderr.on("data", (d) => err.push(d));
  child.on("close", (code) => { children.delete(child); resolve({ code, out: Buffer.concat(out).toString(), err: Buffer.concat(err).toString() }); });
});

const prState = (sim, n) => sim.state.pulls[`${REPO}#${n}`].state;
const labelsOf = (sim, n) => sim.state.labels[`${REPO}#${n}`] || [];
const policyComments = (sim, n) => Object.values(sim.state.comments)
  .filter((c) => c.issue === `${REPO}#${n}` && c.body.startsWith("<!-- abgate:policy"));
const checkRuns = (sim, h) => sim.state.checkRuns.filter((r) => r.head_sha === h);
const writes = (sim, from = 0) => sim.requests.slice(from).filter((q) => q.method !== "GET");

const scenarios = {};

// Idle 3 days -> closed with the rule's comment; a `hold` PR idle as long is untouched.
scenarios.stale = async (sim) => {
  const old = Date.now() - 3 * DAY - HOUR;
  seed(sim, 1, { created: old });
  seed(sim, 2, { created: old, labels: ["hold"] });
  seed(sim, 3, { created: old, user: "carol" });
  sim.state.comments[1] = { id: 1, issue: `${REPO}#3`, body: "still on it", user: { login: "carol" }, created_at: iso(Date.now() - DAY) };
  const conf = writeConfig("stale", sim, {}, { poll_interval_s: 1 });
  const svc = await startService(conf);
  await waitFor(() => prState(sim, 1) === "closed", "PR 1 closed");
  const c = policyComments(sim, 1);
  check(c.length === 1, `one policy comment on #1 (${c.length})`);
  check(c[0].body.includes("## Closed: no activity") && c[0].body.includes("`stale_days` = 2") &&
    /3\.\d days idle/.test(c[0].body) && c[0].body.includes("How to proceed"), `the rule, the figures, how to proceed: ${c[0].body}`);
  await sleep(2500);  // more sweeps
  check(policyComments(sim, 1).length === 1, "no second comment on later sweeps");
  check(prState(sim, 2) === "open" && policyComments(sim, 2).length === 0, "hold: untouched");
  check(prState(sim, 3) === "open" && policyComments(sim, 3).length === 0, "an author comment yesterday keeps #3 alive");
  await svc.stop();
};

// Three eval:none and one eval:infra-error: closed after the third counted, not before.
scenarios.exhausted = async (sim) => {
  const conf = writeConfig("exhausted", sim);
  const svc = await startService(conf);
  const outcomes = ["none:0.1", "none:0.1", "infra:0.1", "none:0.1"];
  for (let i = 0; i < 4; i++) {
    writeFileSync(fakeFile, outcomes[i]);
    const h = seed(sim, 5, { head: sha(0x500 + i) });
    await deliver(svc, prPayload({ repo: REPO, number: 5, action: i ? "synchronize" : "opened", head_sha: h }));
    await waitFor(() => jobs(conf).some((j) => j.head_sha === h && j.state === "done"), `evaluation ${i + 1} done`);
    if (i < 3) {
      await sleep(1500);  // the dispatcher's sweep after the post
      check(prState(sim, 5) === "open", `open after evaluation ${i + 1} (${outcomes[i]})`);
    }
  }
  await waitFor(() => prState(sim, 5) === "closed", "closed after the third eval:none");
  const c = policyComments(sim, 5);
  check(c.length === 1 && c[0].body.includes("3 evaluations counted") && c[0].body.includes("1 infrastructure error(s) not counted"),
    `figures name the counted evaluations (${c[0] && c[0].body})`);
  check(/\]\(http[^)]+\/(runs|commit)\//.test(c[0].body), "with links");
  await svc.stop();
};

// Six open PRs of one author: the newest closed; a member's six untouched. Through `abgate policies`.
scenarios.cap_cli = async (sim) => {
  for (let i = 0; i < 6; i++) {
    seed(sim, 10 + i, { user: "busy", created: Date.now() - (10 - i) * HOUR });
    seed(sim, 20 + i, { user: "maint", assoc: "MEMBER", created: Date.now() - (10 - i) * HOUR });
  }
  const conf = writeConfig("cap", sim);
  // --dry-run first: a table of what would happen, nothing written anywhere.
  const t0 = sim.requests.length;
  let r = await run(["policies", "--config", conf.file, "--dry-run"]);
  check(r.code === 0, `dry run exits 0 (${r.code} ${r.err})`);
  check(/\| octo-org\/demo \| #15 \| max-open-prs \| would comment, close \|/.test(r.out), `dry run table: ${r.out}`);
  check(writes(sim, t0).length === 0, `--dry-run changes nothing (${JSON.stringify(writes(sim, t0))})`);
  r = await run(["policies", "--config", conf.file]);
  check(r.code === 0 && /#15 \| max-open-prs \| commented, closed \|/.test(r.out), `the sweep's table: ${r.out}`);
  check(prState(sim, 15) === "closed", "the newest of the six closed");
  for (let i = 0; i < 5; i++) check(prState(sim, 10 + i) === "open", `#${10 + i} kept`);
  for (let i = 0; i < 6; i++) check(prState(sim, 20 + i) === "open" && policyComments(sim, 20 + i).length === 0, `member's #${20 + i} untouched`);
  const c = policyComments(sim, 15);
  check(c.length === 1 && c[0].body.includes("@busy has 6 open pull requests"), `figures (${c[0] && c[0].body})`);
  r = await run(["policies", "--config", conf.file]);
  check(r.code === 0 && policyComments(sim, 15).length === 1, "a second run comments nothing more");
};

// A copy at 90% containment of an earlier open PR: copycat, no evaluation, closed.
scenarios.copycat = async (sim) => {
  const conf = writeConfig("copycat", sim);
  const svc = await startService(conf);
  const h10 = seed(sim, 40, { user: "orig", created: Date.now() - 2 * HOUR, files: [{ filename: "kernels/a.cu", patch: patch(0, 40) }] });
  await deliver(svc, prPayload({ repo: REPO, number: 40, action: "opened", head_sha: h10 }));
  await jobsFinal(conf, 40);
  const h11 = seed(sim, 41, { user: "copier", created: Date.now() - HOUR,
    files: [{ filename: "kernels/a.cu", patch: patch(0, 36, ["mine_1();", "mine_2();", "mine_3();", "mine_4();"]) }] });
  await deliver(svc, prPayload({ repo: REPO, number: 41, action: "opened", head_sha: h11 }));
  const [j] = await jobsFinal(conf, 41);
  check(j.state === "canceled" && checkRuns(sim, h11).length === 0, `no evaluation of the copy (${j.state})`);
  check(prState(sim, 41) === "closed" && labelsOf(sim, 41).includes("copycat"), "closed and labelled copycat");
  const c = policyComments(sim, 41);
  check(c.length === 1 && c[0].body.includes("90.0%") && c[0].body.includes("#40"), `figures (${c[0] && c[0].body})`);
  check(prState(sim, 40) === "open" && policyComments(sim, 40).length === 0 && checkRuns(sim, h10).length === 1, "the original evaluated, untouched");
  await svc.stop();
};

// The placeholder: opened first, empty; the copied code force-pushed in later (with a back-dated
// commit). abgate recorded the lines arriving, so the placeholder is the copy.
scenarios.placeholder = async (sim) => {
  const conf = writeConfig("placeholder", sim);
  const svc = await startService(conf);
  const p1 = seed(sim, 50, { user: "squatter", created: Date.now() - 2 * HOUR, files: [{ filename: "kernels/a.cu", patch: patch(900, 901) }] });
  await deliver(svc, prPayload({ repo: REPO, number: 50, action: "opened", head_sha: p1 }));
  await jobsFinal(conf, 50);
  const o = seed(sim, 51, { user: "author", created: Date.now() - HOUR, files: [{ filename: "kernels/a.cu", patch: patch(0, 40) }] });
  await deliver(svc, prPayload({ repo: REPO, number: 51, action: "opened", head_sha: o }));
  await jobsFinal(conf, 51);
  const p2 = seed(sim, 50, { user: "squatter", created: Date.now() - 2 * HOUR, head: sha(0x5002),
    files: [{ filename: "kernels/a.cu", patch: patch(0, 36, ["mine_1();", "mine_2();", "mine_3();", "mine_4();"]) }],
    commits: [{ sha: p1, author: "squatter", committer: "squatter", date: iso(Date.now() - 2 * HOUR) },
      { sha: sha(0x5002), author: "squatter", committer: "squatter", date: iso(Date.now() - 90 * 60e3) }] });
  await deliver(svc, prPayload({ repo: REPO, number: 50, action: "synchronize", head_sha: p2 }));
  await jobsFinal(conf, 50, 2);
  check(prState(sim, 50) === "closed" && labelsOf(sim, 50).includes("copycat"), "the placeholder is the copy");
  const c = policyComments(sim, 50);
  check(c.length === 1 && c[0].body.includes("#51") && c[0].body.includes("as abgate recorded it"), `figures (${c[0] && c[0].body})`);
  check(prState(sim, 51) === "open" && policyComments(sim, 51).length === 0, "the real author untouched");
  await svc.stop();
};

// A 10-line identical fix in two PRs: below min_added_lines, not compared, both evaluated.
scenarios.small_fix = async (sim) => {
  const conf = writeConfig("small", sim);
  const svc = await startService(conf);
  const a = seed(sim, 60, { user: "a", files: [{ filename: "src/fix.c", patch: patch(0, 10) }] });
  const b = seed(sim, 61, { user: "b", created: Date.now() - 30 * 60e3, files: [{ filename: "src/fix.c", patch: patch(0, 10) }] });
  await deliver(svc, prPayload({ repo: REPO, number: 60, action: "opened", head_sha: a }));
  await deliver(svc, prPayload({ repo: REPO, number: 61, action: "opened", head_sha: b }));
  await jobsFinal(conf, 60);
  await jobsFinal(conf, 61);
  check(jobs(conf).every((j) => j.state === "done"), "both evaluated");
  check(policyComments(sim, 60).length + policyComments(sim, 61).length === 0, "neither flagged");
  await svc.stop();
};

// A denylisted committer on a PR opened by another account: flagged:gaming, closed, never
// evaluated. Then a redelivery, a restart and a reopen: still one comment.
scenarios.denylist_restart = async (sim) => {
  const deny = path.join(tmp, "deny.txt");
  writeFileSync(deny, "# sybil ring\nsybil\n");
  const conf = writeConfig("deny", sim, { denylist_file: deny });
  let svc = await startService(conf);
  const h = seed(sim, 70, { user: "front", commits: [{ sha: sha(0x70), author: "front", committer: "sybil", date: iso(Date.now() - HOUR) }] });
  const first = await deliver(svc, prPayload({ repo: REPO, number: 70, action: "opened", head_sha: h }));
  const [j] = await jobsFinal(conf, 70);
  check(j.state === "canceled" && checkRuns(sim, h).length === 0, "never evaluated");
  check(prState(sim, 70) === "closed" && labelsOf(sim, 70).includes("flagged:gaming"), "flagged:gaming and closed");
  let c = policyComments(sim, 70);
  check(c.length === 1 && c[0].body.includes("flagged: eval-gaming") &&
    c[0].body.includes("`sybil`") && c[0].body.includes("opened by another account"), `comment (${c[0] && c[0].body})`);
  // The same delivery again: a duplicate. A restart (SIGKILL), a maintainer reopens, a new delivery.
  const d = await deliver(svc, prPayload({ repo: REPO, number: 70, action: "opened", head_sha: h }), { delivery: first.delivery });
  check(d.status === 200 && d.text.includes("duplicate"), `redelivery is a duplicate (${d.text})`);
  await svc.kill();
  svc = await startService(conf);
  sim.state.pulls[`${REPO}#70`].state = "open";
  await deliver(svc, prPayload({ repo: REPO, number: 70, action: "reopened", head_sha: h }));
  await jobsFinal(conf, 70, 2);
  c = policyComments(sim, 70);
  check(c.length === 1, `still one comment after redelivery and restart (${c.length})`);
  check(checkRuns(sim, h).length === 0, "still not evaluated");
  await svc.stop();
};

// copycat.warn <= containment < copycat.block: labelled copycat-warn, not evaluated, not closed,
// the check run says why. Later sweeps read no commit again (cached per sha).
scenarios.copycat_warn = async (sim) => {
  const conf = writeConfig("warn", sim, {}, { poll_interval_s: 1 });
  const svc = await startService(conf);
  const o = seed(sim, 100, { user: "orig", created: Date.now() - 2 * HOUR, files: [{ filename: "kernels/a.cu", patch: patch(0, 40) }] });
  await deliver(svc, prPayload({ repo: REPO, number: 100, action: "opened", head_sha: o }));
  await jobsFinal(conf, 100);
  const own = Array.from({ length: 10 }, (_, i) => `mine_${i}();`);
  const w = seed(sim, 101, { user: "borrower", created: Date.now() - HOUR, files: [{ filename: "kernels/a.cu", patch: patch(0, 30, own) }] });
  await deliver(svc, prPayload({ repo: REPO, number: 101, action: "opened", head_sha: w }));
  const [j] = await jobsFinal(conf, 101);
  check(j.outcome === "skipped", `not evaluated (${j.state} ${j.outcome})`);
  check(prState(sim, 101) === "open" && labelsOf(sim, 101).includes("copycat-warn"), `labelled copycat-warn, open (${labelsOf(sim, 101)})`);
  const runs = checkRuns(sim, w);
  check(runs.length === 1 && runs[0].conclusion === "skipped" &&
    JSON.stringify(runs[0].output).includes("Not evaluated (policy copycat-warn)") && JSON.stringify(runs[0].output).includes("75.0%"),
    `the check run says why (${JSON.stringify(runs.map((r) => [r.conclusion, r.output]))})`);
  const c = policyComments(sim, 101);
  check(c.length === 1 && c[0].body.includes("## Not evaluated: large overlap") && c[0].body.includes("#100"), `comment (${c[0] && c[0].body})`);
  check(prState(sim, 100) === "open" && labelsOf(sim, 100).length === 0 || !labelsOf(sim, 100).includes("copycat-warn"), "the original untouched");
  const commitReads = () => sim.requests.filter((q) => /\/commits\/[0-9a-f]{40}$/.test(q.path)).length;
  const before = commitReads();
  check(before >= 1 && before <= 2, `commit patches read once per sha (${before})`);
  await sleep(3500);  // several polling sweeps look at the pair again
  check(commitReads() === before, `no commit read again by later sweeps (${commitReads()} vs ${before})`);
  check(policyComments(sim, 101).length === 1, "still one comment");
  await svc.stop();
};

// harness_changes "skip": a PR touching the harness is not evaluated, not closed; the check run says why.
scenarios.harness_skip = async (sim) => {
  const conf = writeConfig("harness", sim, { harness_changes: "skip" });
  const svc = await startService(conf);
  const h = seed(sim, 110, { files: [{ filename: "src/fast.c", patch: patch(0, 3) }, { filename: "guards/default.json", patch: patch(5, 6) }] });
  const ok = seed(sim, 111, { user: "bob", files: [{ filename: "src/other.c", patch: patch(10, 13) }] });
  await deliver(svc, prPayload({ repo: REPO, number: 110, action: "opened", head_sha: h }));
  await deliver(svc, prPayload({ repo: REPO, number: 111, action: "opened", head_sha: ok }));
  const [j] = await jobsFinal(conf, 110);
  const [k] = await jobsFinal(conf, 111);
  check(j.outcome === "skipped" && k.outcome === "pass", `harness PR skipped, the other evaluated (${j.outcome}, ${k.outcome})`);
  const runs = checkRuns(sim, h);
  check(runs.length === 1 && runs[0].conclusion === "skipped" && JSON.stringify(runs[0].output).includes("Not evaluated (policy harness)") &&
    JSON.stringify(runs[0].output).includes("guards/default.json"), `the check run says why (${JSON.stringify(runs.map((r) => r.output))})`);
  check(prState(sim, 110) === "open" && policyComments(sim, 110).length === 0, "not closed, no comment");
  await svc.stop();
};

// merge_first: after each verdict the open PR with the largest verified gain carries merge-first,
// one at a time; a tie leaves it where it is; a closed PR loses it.
scenarios.merge_first = async (sim) => {
  const conf = writeConfig("merge", sim, { merge_first: true, max_unrewarded_evals: 0 });
  const svc = await startService(conf);
  const holders = () => [80, 81, 82, 83].filter((n) => labelsOf(sim, n).includes("merge-first"));
  const evaluate = async (n, spec, user) => {
    writeFileSync(fakeFile, spec);
    const h = seed(sim, n, { user, files: [{ filename: `src/m${n}.c`, patch: patch(n * 100, n * 100 + 3) }] });
    await deliver(svc, prPayload({ repo: REPO, number: n, action: "opened", head_sha: h }));
    await jobsFinal(conf, n);
  };
  await evaluate(80, "pass:0.1:1.04", "a1");           // eval:S, lower bound +4%
  await waitFor(() => holders().join() === "80", "#80 labelled merge-first");
  await evaluate(81, "pass:0.1:1.12", "a2");           // eval:L, +12%: the label moves
  await waitFor(() => holders().join() === "81", `merge-first moved to #81 (${holders()})`);
  check(true, "moved, one at a time");
  await evaluate(82, "pass:0.1:1.12", "a3");           // the same gain: no move
  await evaluate(83, "none:0.1", "a4");                 // eval:none: never a candidate
  await sleep(1500);
  check(holders().join() === "81", `a tie and a none leave it on #81 (${holders()})`);
  // #81 is closed by someone; the next verdict's sweep takes the label off it and gives it to #82.
  sim.state.pulls[`${REPO}#81`].state = "closed";
  writeFileSync(fakeFile, "pass:0.1:1.03");
  const h = seed(sim, 80, { user: "a1", head: sha(0x8002), files: [{ filename: "src/m80.c", patch: patch(8000, 8004) }] });
  await deliver(svc, prPayload({ repo: REPO, number: 80, action: "synchronize", head_sha: h }));
  await jobsFinal(conf, 80, 2);
  await waitFor(() => holders().join() === "82", `merge-first on #82, off the closed #81 (${holders()})`);
  check(!labelsOf(sim, 81).includes("merge-first"), "the closed PR lost it");
  const bad = sim.requests.filter((q) => q.status >= 400 && /labels|issues\?/.test(q.path));
  check(bad.length === 0, `every label request valid (${JSON.stringify(bad)})`);
  await svc.stop();
};

// draft_stale_days counts from creation or the last conversion to draft (the issue timeline).
scenarios.draft_stale = async (sim) => {
  const old = Date.now() - 10 * DAY;
  seed(sim, 90, { draft: true, created: old });
  sim.state.pulls[`${REPO}#90`].timeline = [{ event: "ready_for_review", created_at: iso(Date.now() - 3 * DAY) },
    { event: "convert_to_draft", created_at: iso(Date.now() - DAY) }];
  seed(sim, 91, { draft: true, created: old });
  sim.state.pulls[`${REPO}#91`].timeline = [{ event: "convert_to_draft", created_at: iso(Date.now() - 5 * DAY) }];
  seed(sim, 92, { draft: true, created: Date.now() - 6 * DAY });
  seed(sim, 93, { draft: true, created: Date.now() - 2 * DAY });  // too young to ask the timeline
  const conf = writeConfig("draft", sim);
  const r = await run(["policies", "--config", conf.file]);
  check(r.code === 0, `sweep exits 0 (${r.code} ${r.err})`);
  check(prState(sim, 90) === "open" && policyComments(sim, 90).length === 0, "converted to draft a day ago: kept");
  check(prState(sim, 91) === "closed", "converted 5 days ago: closed");
  const c91 = policyComments(sim, 91), c92 = policyComments(sim, 92);
  check(c91.length === 1 && c91[0].body.includes("## Closed: draft left too long") && /5\.\d days idle: converted to draft/.test(c91[0].body),
    `figures of #91 (${c91[0] && c91[0].body})`);
  check(prState(sim, 92) === "closed" && c92.length === 1 && /6\.\d days idle: opened as a draft/.test(c92[0].body), `#92 (${c92[0] && c92[0].body})`);
  check(prState(sim, 93) === "open", "a young draft kept");
  const tl = sim.requests.filter((q) => q.path.endsWith("/timeline"));
  check(tl.length === 3 && tl.every((q) => q.status === 200), `timeline read for the three old drafts, valid (${JSON.stringify(tl.map((q) => [q.path, q.status]))})`);
};

// "Earlier" from commit dates when abgate recorded nothing that decides: both PRs first seen in
// one sweep (#121, listed first, is recorded first; it was also opened first). But its copied
// lines came in a commit an hour ago, and #120's are in a commit three hours old: #121 is the
// copy. #120 has 40 commits: only the oldest 30 are read.
scenarios.copycat_commit_dates = async (sim) => {
  const own = ["mine_1();", "mine_2();", "mine_3();", "mine_4();"];
  const copyFiles = [{ filename: "kernels/a.cu", patch: patch(0, 36, own) }];
  const origFiles = [{ filename: "kernels/a.cu", patch: patch(0, 40) }];
  seed(sim, 121, { user: "squatter", created: Date.now() - 5 * HOUR, head: sha(0x1212), files: copyFiles,
    commits: [{ sha: sha(0x1211), author: "squatter", committer: "squatter", date: iso(Date.now() - 5 * HOUR), files: [{ filename: "kernels/a.cu", patch: patch(900, 901) }] },
      { sha: sha(0x1212), author: "squatter", committer: "squatter", date: iso(Date.now() - HOUR), files: copyFiles }] });
  const commits = [{ sha: sha(0x12000), author: "author", committer: "author", date: iso(Date.now() - 3 * HOUR), files: origFiles }];
  for (let i = 1; i < 40; i++)
    commits.push({ sha: sha(0x12000 + i), author: "author", committer: "author", date: iso(Date.now() - 3 * HOUR + i * 60e3), files: [] });
  seed(sim, 120, { user: "author", created: Date.now() - 3 * HOUR, head: sha(0x12000 + 39), files: origFiles, commits });
  const conf = writeConfig("dates", sim);
  const r = await run(["policies", "--config", conf.file]);
  check(r.code === 0 && /#121 \| copycat \|/.test(r.out), `the sweep's table (${r.out} ${r.err})`);
  check(prState(sim, 121) === "closed" && labelsOf(sim, 121).includes("copycat"), "the later-pushed copy is the copy");
  const c = policyComments(sim, 121);
  check(c.length === 1 && c[0].body.includes("#120") && (c[0].body.match(/by its date/g) || []).length === 2,
    `both times from commit dates (${c[0] && c[0].body})`);
  check(prState(sim, 120) === "open" && policyComments(sim, 120).length === 0, "the real author untouched");
  const reads = sim.requests.filter((q) => /\/commits\/[0-9a-f]{40}$/.test(q.path));
  check(reads.length === 32 && reads.every((q) => q.status === 200), `2 + 30 commit patches read, valid (${reads.length})`);
};

// ---- main ----
const name = process.argv[2];
if (!scenarios[name]) {
  console.error(`usage: node policies.mjs ${Object.keys(scenarios).join("|")}`);
  process.exit(2);
}
const simSeed = structuredClone(defaultSeed);
simSeed.pulls = {};
const sim = await startSim({ port: 0, seed: simSeed });
let code = 0;
try {
  console.log(`policies scenario ${name}`);
  await scenarios[name](sim);
} catch (e) {
  failed++;
  code = 1;
  console.error(e.stack || String(e));
  console.error(lastLog().split("\n").slice(-40).join("\n"));
} finally {
  for (const c of children) c.kill("SIGKILL");
  await sim.close();
  if (!process.env.AB_TEST_KEEP) rmSync(tmp, { recursive: true, force: true });
  else console.log(`kept ${tmp}`);
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(code);
