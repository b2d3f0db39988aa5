// scenarios.mjs NAME - one end-to-end scenario of `abgate serve` / `abgate eval --pr`: starts the
// GitHub simulator (tests/ghsim/server.mjs, in this process, on a free port), builds a fixture git
// repository with the mock SUT (ABGATE_EVAL_MODE=real) or uses the driver's stand-in evaluation
// (=fake), writes a config, runs the service (ABGATE_DRIVER serve), sends real webhook payloads
// signed with the test's secret, and asserts on what GitHub (the simulator) ends up with and on the
// queue (driver jobs). Prints "N passed, N failed". Everything it starts it stops.
import { spawn, execFileSync } from "node:child_process";
import { generateKeyPairSync, randomUUID } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync, copyFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";

const GHSIM = process.env.GHSIM_DIR || path.join(path.dirname(new URL(import.meta.url).pathname), "../ghsim");
const { startSim, defaultSeed } = await import(path.join(GHSIM, "server.mjs"));
const { prPayload, commentPayload, pingPayload, signedDelivery, send } = await import(path.join(GHSIM, "webhooks.mjs"));

const DRIVER = process.env.ABGATE_DRIVER;
const MODE = process.env.ABGATE_EVAL_MODE || "fake";
const REPO = "octo-org/demo";
const SECRET = `s3cret-${randomUUID()}`;
const tmp = mkdtempSync(path.join(tmpdir(), "abgate-scn-"));
const children = new Set();
let passed = 0, failed = 0;

// ---- small helpers ----
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
  passed++;
}
async function waitFor(fn, what, timeoutMs = 120000) {
  const t0 = Date.now();
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for: ${what}`);
    await sleep(100);
  }
}
const git = (cwd, ...args) => execFileSync("git", args, { cwd, encoding: "utf8",
  env: { ...process.env, GIT_AUTHOR_NAME: "t", GIT_AUTHOR_EMAIL: "t@e", GIT_COMMITTER_NAME: "t", GIT_COMMITTER_EMAIL: "t@e" } }).trim();

// ---- the fixture repository (real mode) ----
// main: mock SUT at speed 1; each head commit changes only mock_sut.conf. refs/pull/N/head are
// created like GitHub's. The suite is the deployment's (outside the repo), as the design asks.
function fixture() {
  if (MODE !== "real") {
    const sha = (c) => c.repeat(40);
    return { url: path.join(tmp, "no-repo"), suite: null, heads: { fast: sha("1"), fast2: sha("2"), slow: sha("3") }, base: "main" };
  }
  const dir = path.join(tmp, "repo");
  mkdirSync(dir);
  git(dir, "init", "-q", "-b", "main");
  copyFileSync(process.env.MOCK_SUT_C, path.join(dir, "mock_sut.c"));
  const conf = (speed, extra = "") => `decode_tps = 3000\nprefill_tps = 400000\nspeed = ${speed}\nnoise = 0.002\n${extra}`;
  writeFileSync(path.join(dir, "mock_sut.conf"), conf(1));
  git(dir, "add", ".");
  git(dir, "commit", "-q", "-m", "base");
  const heads = {};
  for (const [name, speed, extra] of [["fast", 1.3, ""], ["fast2", 1.3, "# second push\n"], ["slow", 0.7, ""],
    ["sleepy", 1.0, "ready_delay_ms = 800\n"]]) {
    git(dir, "checkout", "-q", "-B", `pr-${name}`, "main");
    writeFileSync(path.join(dir, "mock_sut.conf"), conf(speed, extra));
    git(dir, "commit", "-q", "-am", name);
    heads[name] = git(dir, "rev-parse", "HEAD");
  }
  git(dir, "checkout", "-q", "main");
  const suite = path.join(tmp, "suite.json");
  writeFileSync(suite, JSON.stringify({
    schema: "abgate.suite/1", name: "svc-test",
    build: { build: ["cc", "-O2", "-o", "{build}/mock_sut", "{src}/mock_sut.c", "-lm"], timeout_s: 120 },
    sut: { command: ["{build}/mock_sut", "--config", "{src}/mock_sut.conf"], ready_timeout_s: 20, request_timeout_s: 20 },
    models: [{ name: "mock", path: "{state}/models/mock.bin", generate: ["sh", "-c", "echo mock > {model}"] }],
    speed: { decode: { contexts: [64], gen_tokens: 16 }, prefill: { contexts: [64] }, pairs_min: 4, pairs_max: 6,
      confirm_pairs: 0 },
    harness_paths: [],
  }, null, 2));
  return { url: dir, suite, heads, base: "main" };
}
function setPullRef(fx, pr, sha) {
  if (MODE === "real") git(fx.url, "update-ref", `refs/pull/${pr}/head`, sha);
}

// ---- the service ----
function writeConfig(name, fx, sim, over = {}) {
  const { github: ghOver = {}, ...rest } = over;
  const cfg = {
    listen: "127.0.0.1:0", state_dir: path.join(tmp, "state"), webhook_secret: SECRET,
    repos: [{ name: REPO, git_url: fx.url, base: fx.base, suite: fx.suite }],
    workers: 1, poll_interval_s: 0, lease_s: 6, job_timeout_s: 300, max_attempts: 3, report_retry_max_s: 2,
    log_level: "info", ...rest,
    github: { api_url: sim.url, token: "ghp_scenario", timeout_s: 10, max_retries: 4, backoff_base_ms: 50,
      backoff_max_ms: 400, max_wait_s: 10, ...ghOver },
  };
  for (const k of Object.keys(cfg.github)) if (cfg.github[k] === null) delete cfg.github[k];
  const file = path.join(tmp, `${name}.json`);
  writeFileSync(file, JSON.stringify(cfg, null, 2));
  return { file, cfg };
}

async function startService(conf, { fake } = {}) {
  const addr = path.join(conf.cfg.state_dir, "serve.addr");
  if (existsSync(addr)) unlinkSync(addr);
  const env = { ...process.env };
  delete env.ABGATE_FAKE_EVAL;
  if (fake || MODE !== "real") env.ABGATE_FAKE_EVAL = fake || "pass:0.3";
  const log = path.join(tmp, `serve-${Date.now()}.log`);
  const out = [];
  const child = spawn(DRIVER, ["serve", "--config", conf.file], { env, stdio: ["ignore", "pipe", "pipe"] });
  children.add(child);
  child.stdout.on("data", (d) => out.push(d));
  child.stderr.on("data", (d) => out.push(d));
  child.on("exit", () => { children.delete(child); writeFileSync(log, Buffer.concat(out)); });
  const exited = new Promise((r) => child.on("exit", (code, signal) => r({ code, signal })));
  await waitFor(() => existsSync(addr) || child.exitCode !== null, "serve.addr", 30000);
  if (child.exitCode !== null) throw new Error(`serve exited: ${Buffer.concat(out).toString()}`);
  const url = `http://${readFileSync(addr, "utf8").trim()}`;
  return {
    url, child, exited, log: () => Buffer.concat(out).toString(),
    // A clean stop exits 0; under ASan/LSan a leak or memory error would make it non-zero.
    async stop() { child.kill("SIGTERM"); const r = await exited;
      if (r.code !== 0) console.error(Buffer.concat(out).toString().split("\n").slice(-60).join("\n"));
      check(r.code === 0, `serve stopped cleanly on SIGTERM (exit ${r.code}, signal ${r.signal})`); return r; },
    async kill() { child.kill("SIGKILL"); await exited; },
  };
}

function jobs(stateDir) {
  const out = execFileSync(DRIVER, ["jobs", stateDir], { encoding: "utf8" });
  return out.split("\n").filter(Boolean).map((l) => JSON.parse(l));
}
const FINAL = new Set(["done", "canceled", "superseded"]);
const allFinal = (js) => js.length > 0 && js.every((j) => FINAL.has(j.state));

async function deliver(svc, event, payload, opts = {}) {
  const d = await signedDelivery(opts.secret || SECRET, event, payload, opts);
  return { ...(await send(`${svc.url}/webhook`, d)), delivery: d.delivery };
}
async function metrics(svc) { return (await fetch(`${svc.url}/metrics`)).text(); }

const comments = (sim, pr) => Object.values(sim.state.comments).filter((c) => c.issue === `${REPO}#${pr}`);
const sticky = (sim, pr) => comments(sim, pr).filter((c) => c.body.startsWith("<!-- abgate:v1"));
const checkRuns = (sim, sha) => sim.state.checkRuns.filter((r) => r.head_sha === sha);
const labelsOf = (sim, pr) => sim.state.labels[`${REPO}#${pr}`] || [];
const seedPr = (sim, pr, sha, extra = {}) => {
  sim.state.pulls[`${REPO}#${pr}`] = { number: pr, state: "open", draft: false, title: `PR ${pr}`, head_ref: `pr-${pr}`,
    head_sha: sha, base_ref: "main", base_sha: "b".repeat(40), ...extra };
};
const verdictLabels = (j) => j.labels || [];

// The evaluated head is reported: a completed check run, one sticky comment with the table, the labels.
async function expectReported(sim, conf, pr, sha, { outcomeIn } = {}) {
  const js = await waitFor(() => { const js = jobs(conf.cfg.state_dir).filter((j) => j.pr === pr && j.head_sha === sha);
    return js.some((j) => j.state === "done") && js; }, `job for #${pr} ${sha.slice(0, 8)} done`);
  const job = js.find((j) => j.state === "done");
  if (outcomeIn) check(outcomeIn.includes(job.outcome), `outcome ${job.outcome} in ${outcomeIn}`);
  const runs = checkRuns(sim, sha);
  check(runs.length === 1, `one check run on ${sha.slice(0, 8)} (got ${runs.length})`);
  check(runs[0].status === "completed" && runs[0].conclusion, `check run completed (${runs[0].status}/${runs[0].conclusion})`);
  check(runs[0].output && runs[0].output.summary && runs[0].output.summary.length <= 65535, "check run has a summary");
  const st = sticky(sim, pr);
  check(st.length === 1, `one sticky comment on #${pr} (got ${st.length})`);
  check(st[0].body.startsWith(`<!-- abgate:v1 head=${sha} -->`), "the comment's marker carries the head sha");
  check(/\| *[^|]+ \| *(decode|prefill)/.test(st[0].body), "the comment has the metrics table");
  const want = verdictLabels(job).slice().sort();
  const have = labelsOf(sim, pr).filter((l) => /^(eval:|eval-.*:|regression-|accuracy-regression$)/.test(l)).sort();
  check(want.length > 0 && JSON.stringify(want) === JSON.stringify(have), `labels ${JSON.stringify(have)} == verdict ${JSON.stringify(want)}`);
  return { job, run: runs[0], comment: st[0] };
}

// ---- scenarios ----
const scenarios = {};

scenarios.client_contract = async (sim) => {
  // Not execFileSync: the simulator lives in this process's event loop and must keep answering.
  const child = spawn(process.env.ABGATE_CLIENT_TEST, [], { env: { ...process.env, GITHUB_API_URL: sim.url }, stdio: ["ignore", "inherit", "inherit"] });
  children.add(child);
  const code = await new Promise((r) => child.on("exit", (c) => { children.delete(child); r(c); }));
  check(code === 0, `test_service_client passed (exit ${code})`);
  // App auth: two JWT exchanges (first use, after the 401), every API call with an installation token.
  check(sim.state.tokens.length === 2, `two installation token exchanges (got ${sim.state.tokens.length})`);
  check(sim.state.tokens.every((t) => /^Bearer [\w-]+\.[\w-]+\.[\w-]+$/.test(t.auth)), "exchanges authenticated with a JWT");
  const api = sim.requests.filter((q) => q.path.startsWith("/repos/"));
  check(api.every((q) => q.auth.startsWith("Bearer ghs_sim")), "API calls use the installation token");
  check(sim.requests.every((q) => q.accept === "application/vnd.github+json" && q.ua === "abgate-test"), "GitHub headers on every request");
};

scenarios.opened = async (sim) => {
  const fx = fixture();
  // App auth end to end: the service signs a JWT and uses installation tokens.
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const keyFile = path.join(tmp, "app.pem");
  writeFileSync(keyFile, privateKey.export({ type: "pkcs1", format: "pem" }), { mode: 0o600 });
  const conf = writeConfig("opened", fx, sim, { github: { token: null, app_id: 4242, private_key_file: keyFile, installation_id: 31 } });
  seedPr(sim, 7, fx.heads.fast);
  setPullRef(fx, 7, fx.heads.fast);
  const svc = await startService(conf);
  const t0 = sim.requests.length;
  const r = await deliver(svc, "pull_request", prPayload({ repo: REPO, number: 7, action: "opened", head_sha: fx.heads.fast }));
  check(r.status === 202, `opened -> 202 (got ${r.status} ${r.text})`);
  const js = jobs(conf.cfg.state_dir);
  check(js.length === 1, "one job");
  const { job, run, comment } = await expectReported(sim, conf, 7, fx.heads.fast, { outcomeIn: ["pass", "reject"] });
  check(run.external_id.includes(`#7@${fx.heads.fast}`), "check run external_id is the job key");
  check(run.history[0] === "in_progress", "check run was in_progress while evaluating");
  check(sim.state.tokens.length >= 1 && sim.requests.slice(t0).filter((q) => q.path.startsWith("/repos/")).every((q) => q.auth.startsWith("Bearer ghs_sim")),
    "App auth: installation token on every call");
  // Figure: the API calls of one evaluation.
  const calls = sim.requests.slice(t0).map((q) => `${q.method} ${q.path.replace(/\/[0-9a-f]{40}/, "/{sha}").replace(/\/\d+/g, "/{n}")}`);
  const byRoute = {};
  for (const c of calls) byRoute[c] = (byRoute[c] || 0) + 1;
  console.log(`figure: API calls for one evaluation (opened, ${job.outcome}): ${calls.length}`);
  for (const [k, v] of Object.entries(byRoute)) console.log(`  ${v} x ${k}`);
  // A second push: the sticky comment is known, so it is patched in place without listing comments.
  const t1 = sim.requests.length;
  seedPr(sim, 7, fx.heads.fast2);
  setPullRef(fx, 7, fx.heads.fast2);
  await deliver(svc, "pull_request", prPayload({ repo: REPO, number: 7, action: "synchronize", head_sha: fx.heads.fast2 }));
  const second = await expectReported(sim, conf, 7, fx.heads.fast2);
  check(sticky(sim, 7)[0].id === comment.id && sticky(sim, 7)[0].updates === 1, "the same comment was updated in place");
  const calls2 = sim.requests.slice(t1).map((q) => `${q.method} ${q.path.replace(/\/[0-9a-f]{40}/, "/{sha}").replace(/\/\d+/g, "/{n}")}`);
  console.log(`figure: API calls for the next push of the same PR (${second.job.outcome}): ${calls2.length} (${calls2.join(", ")})`);
  await svc.stop();
};

scenarios.synchronize_supersedes = async (sim) => {
  const fx = fixture();
  const conf = writeConfig("sync", fx, sim);
  seedPr(sim, 8, fx.heads.sleepy || fx.heads.slow);
  setPullRef(fx, 8, fx.heads.sleepy || fx.heads.slow);
  seedPr(sim, 7, fx.heads.fast);
  const svc = await startService(conf, { fake: MODE === "real" ? undefined : "pass:2" });
  // PR 8 keeps the only worker busy, so PR 7's first head waits in the queue.
  await deliver(svc, "pull_request", prPayload({ repo: REPO, number: 8, action: "opened", head_sha: fx.heads.sleepy || fx.heads.slow }));
  await waitFor(() => jobs(conf.cfg.state_dir).some((j) => j.pr === 8 && j.state === "running"), "PR 8 running");
  await deliver(svc, "pull_request", prPayload({ repo: REPO, number: 7, action: "opened", head_sha: fx.heads.fast }));
  seedPr(sim, 7, fx.heads.fast2);
  setPullRef(fx, 7, fx.heads.fast2);
  const r = await deliver(svc, "pull_request", prPayload({ repo: REPO, number: 7, action: "synchronize", head_sha: fx.heads.fast2 }));
  check(r.status === 202, "synchronize accepted");
  const first = jobs(conf.cfg.state_dir).find((j) => j.pr === 7 && j.head_sha === fx.heads.fast);
  check(first && first.state === "superseded", `the queued head is superseded (${first && first.state})`);
  // A push to PR 8 while its evaluation runs: stopped at the next safe point, result not posted.
  const h8 = fx.heads.sleepy || fx.heads.slow;
  seedPr(sim, 8, fx.heads.slow);
  setPullRef(fx, 8, fx.heads.slow);
  await deliver(svc, "pull_request", prPayload({ repo: REPO, number: 8, action: "synchronize", head_sha: fx.heads.slow }));
  await expectReported(sim, conf, 7, fx.heads.fast2);
  check(checkRuns(sim, fx.heads.fast).length === 0, "no check run for the superseded queued head");
  check(sticky(sim, 7).every((c) => !c.body.includes(fx.heads.fast)), "the superseded head is never reported");
  await expectReported(sim, conf, 8, fx.heads.slow);
  const old8 = jobs(conf.cfg.state_dir).find((j) => j.pr === 8 && j.head_sha === h8);
  check(old8.state === "superseded", `the running head of PR 8 was stopped (${old8.state})`);
  const runs8 = checkRuns(sim, h8);
  check(runs8.length === 1 && runs8[0].conclusion === "cancelled", "its check run closed as cancelled");
  check(sticky(sim, 8).length === 1 && sticky(sim, 8)[0].body.includes(fx.heads.slow), "PR 8's comment is about the new head only");
  await waitFor(() => allFinal(jobs(conf.cfg.state_dir)), "all jobs final");
  await svc.stop();
};

scenarios.duplicate_delivery = async (sim) => {
  const fx = fixture();
  const conf = writeConfig("dup", fx, sim);
  seedPr(sim, 7, fx.heads.fast);
  const svc = await startService(conf);
  const payload = prPayload({ repo: REPO, number: 7, action: "opened", head_sha: fx.heads.fast });
  const d = await signedDelivery(SECRET, "pull_request", payload);
  const results = await Promise.all(Array.from({ length: 20 }, () => send(`${svc.url}/webhook`, d)));
  check(results.every((x) => x.status === 200 || x.status === 202), `all 20 acknowledged (${results.map((x) => x.status)})`);
  check(results.filter((x) => x.text.includes("enqueued")).length === 1, "enqueued exactly once");
  check(results.filter((x) => x.text.includes("duplicate")).length === 19, "19 recognised as redeliveries");
  await expectReported(sim, conf, 7, fx.heads.fast);
  check(jobs(conf.cfg.state_dir).length === 1, "one job");
  // The same delivery again after the work is done, and after a restart: still nothing new.
  await svc.stop();
  const svc2 = await startService(conf);
  const again = await send(`${svc2.url}/webhook`, d);
  check(again.text.includes("duplicate"), "still a duplicate after a restart (persisted)");
  await sleep(500);
  check(jobs(conf.cfg.state_dir).length === 1 && comments(sim, 7).length === 1, "still one job, one comment");
  await svc2.stop();
};

/* POST with full control of the headers; with Expect: 100-continue the body is sent only if the
 * server says "continue". Resolves to the status (0: no answer). */
function rawPost(url, headers, body) {
  return new Promise((resolve) => {
    const u = new URL(url);
    const req = httpRequest({ host: u.hostname, port: u.port, path: u.pathname, method: "POST", headers }, (res) => {
      resolve(res.statusCode);
      res.resume();
    });
    req.on("error", () => resolve(0));
    if (headers.Expect) req.on("continue", () => req.end(body));
    else req.end(body);
  });
}

scenarios.bad_signature = async (sim) => {
  const fx = fixture();
  const conf = writeConfig("badsig", fx, sim);
  seedPr(sim, 7, fx.heads.fast);
  const svc = await startService(conf);
  const payload = prPayload({ repo: REPO, number: 7, action: "opened", head_sha: fx.heads.fast });
  let r = await deliver(svc, "pull_request", payload, { secret: "not-the-secret" });
  check(r.status === 401, `forged signature -> 401 (${r.status})`);
  r = await deliver(svc, "pull_request", payload, { signature: null });
  check(r.status === 401, `missing signature -> 401 (${r.status})`);
  r = await deliver(svc, "pull_request", payload, { signature: "sha256=" + "0".repeat(64) });
  check(r.status === 401, `zero signature -> 401 (${r.status})`);
  // 6 MiB body, correctly signed: refused on its Content-Length before it is read (the client
  // asks with Expect: 100-continue, so it never sends the body), and, sent chunked without a
  // length, drained without being kept and refused at its end.
  const big = Buffer.alloc(6 << 20, 0x20);
  const d = await signedDelivery(SECRET, "pull_request", big.toString());
  let status = await rawPost(`${svc.url}/webhook`, { ...d.headers, "Content-Length": String(big.length), Expect: "100-continue" }, big);
  check(status === 413, `oversized body (Content-Length) -> 413 (${status})`);
  status = await rawPost(`${svc.url}/webhook`, { ...d.headers, "Transfer-Encoding": "chunked" }, big);
  check(status === 413, `oversized body (chunked) -> 413 (${status})`);
  // unknown repository and ping: acknowledged, nothing queued
  r = await deliver(svc, "pull_request", prPayload({ repo: "someone/else", number: 7, head_sha: fx.heads.fast }));
  check(r.status === 200 && r.text.includes("not configured"), `unknown repo ignored (${r.status} ${r.text})`);
  r = await deliver(svc, "ping", pingPayload(REPO));
  check(r.status === 200 && r.text.includes("pong"), "ping answered");
  await sleep(500);
  check(jobs(conf.cfg.state_dir).length === 0, "no job");
  const m = await metrics(svc);
  check(/abgate_webhook_deliveries_total\{status="401"\} 3/.test(m), "401s counted in /metrics");
  check(/abgate_jobs\{state="queued"\} 0/.test(m), "/metrics: no queued job");
  check(sim.state.checkRuns.length === 0 && Object.keys(sim.state.comments).length === 0, "nothing posted");
  await svc.stop();
};

scenarios.api_502_then_ok = async (sim) => {
  const fx = fixture();
  const conf = writeConfig("e502", fx, sim);
  seedPr(sim, 7, fx.heads.fast);
  const svc = await startService(conf);
  // The comment create answers 502 twice: a create is never blindly repeated, it looks first.
  sim.failures.push({ method: "POST", path: /\/issues\/7\/comments$/, status: 502, count: 2, fired: 0 });
  sim.failures.push({ method: "PATCH", path: /\/check-runs\/\d+$/, status: 502, count: 2, fired: 0 });
  await deliver(svc, "pull_request", prPayload({ repo: REPO, number: 7, action: "opened", head_sha: fx.heads.fast }));
  await expectReported(sim, conf, 7, fx.heads.fast);
  check(sim.failures.every((f) => f.fired === 2), "both injected 502 pairs were hit");
  const posts = sim.requests.filter((q) => q.method === "POST" && /\/issues\/7\/comments$/.test(q.path));
  check(posts.length === 3 && posts[2].status === 201, `3 POSTs, the third created it (${posts.map((p) => p.status)})`);
  check(comments(sim, 7).length === 1, "posted once");
  check(/abgate_github_api_errors_total\{status="502"\} 4/.test(await metrics(svc)), "502s counted in /metrics");
  await svc.stop();
};

scenarios.rate_limit_retry_after = async (sim) => {
  const fx = fixture();
  const conf = writeConfig("rl", fx, sim, { github: { max_wait_s: 3 } });
  seedPr(sim, 7, fx.heads.fast);
  const svc = await startService(conf);
  sim.failures.push({ method: "POST", path: /\/issues\/7\/comments$/, status: 403, count: 1, fired: 0,
    headers: { "Retry-After": "2" }, body: { message: "You have exceeded a secondary rate limit." } });
  await deliver(svc, "pull_request", prPayload({ repo: REPO, number: 7, action: "opened", head_sha: fx.heads.fast }));
  await expectReported(sim, conf, 7, fx.heads.fast);
  const posts = sim.requests.filter((q) => q.method === "POST" && /\/issues\/7\/comments$/.test(q.path));
  check(posts.length === 2 && posts[0].status === 403 && posts[1].status === 201, `403 then 201 (${posts.map((p) => p.status)})`);
  const waited = (posts[1].t - posts[0].t) / 1000;
  console.log(`  waited ${waited.toFixed(2)} s after Retry-After: 2`);
  check(waited >= 1.9, "waited out Retry-After before posting again");
  // Longer than max_wait_s (3 s): the post is deferred (the job stays "reporting", nothing is
  // dropped) and made once the wait is over.
  seedPr(sim, 9, fx.heads.slow);
  setPullRef(fx, 9, fx.heads.slow);
  sim.failures.push({ method: "POST", path: /\/issues\/9\/comments$/, status: 429, count: 1, fired: 0, headers: { "Retry-After": "5" } });
  await deliver(svc, "pull_request", prPayload({ repo: REPO, number: 9, action: "opened", head_sha: fx.heads.slow }));
  await waitFor(() => jobs(conf.cfg.state_dir).some((j) => j.pr === 9 && j.state === "reporting"), "PR 9 waiting to post");
  await expectReported(sim, conf, 9, fx.heads.slow);
  const posts9 = sim.requests.filter((q) => q.method === "POST" && /\/issues\/9\/comments$/.test(q.path));
  console.log(`  deferred post made ${((posts9[1].t - posts9[0].t) / 1000).toFixed(2)} s after Retry-After: 5`);
  check(posts9.length === 2 && (posts9[1].t - posts9[0].t) / 1000 >= 4.9, "deferred post made after the wait GitHub asked for");
  check(/abgate_reports_deferred_total 1/.test(await metrics(svc)), "deferral counted in /metrics");
  await svc.stop();
};

scenarios.sigkill_restart = async (sim) => {
  const fx = fixture();
  const conf = writeConfig("kill", fx, sim, { lease_s: 6 });
  const head = fx.heads.sleepy || fx.heads.fast;
  seedPr(sim, 7, head);
  let svc = await startService(conf, { fake: MODE === "real" ? undefined : "pass:4" });
  await deliver(svc, "pull_request", prPayload({ repo: REPO, number: 7, action: "opened", head_sha: head }));
  await waitFor(() => checkRuns(sim, head).some((r) => r.status === "in_progress"), "check run in progress");
  await sleep(1500);
  await svc.kill();
  const mid = jobs(conf.cfg.state_dir);
  check(mid.length === 1 && mid[0].state === "running", `job left running by the killed process (${mid[0] && mid[0].state})`);
  check(comments(sim, 7).length === 0, "nothing posted before the kill");
  svc = await startService(conf, { fake: MODE === "real" ? undefined : "pass:4" });
  const { job } = await expectReported(sim, conf, 7, head);
  check(job.attempts === 2, `completed on the second attempt (attempts ${job.attempts})`);
  check(checkRuns(sim, head).length === 1, "the check run was reused, not duplicated");
  check(checkRuns(sim, head)[0].status === "completed", "check run not left in_progress");
  check(jobs(conf.cfg.state_dir).length === 1, "still one job");
  await svc.stop();
};

scenarios.sigterm_pauses = async (sim) => {
  const fx = fixture();
  const conf = writeConfig("term", fx, sim);
  const head = fx.heads.sleepy || fx.heads.fast;
  seedPr(sim, 7, head);
  let svc = await startService(conf, { fake: MODE === "real" ? undefined : "pass:4" });
  await deliver(svc, "pull_request", prPayload({ repo: REPO, number: 7, action: "opened", head_sha: head }));
  await waitFor(() => checkRuns(sim, head).some((r) => r.status === "in_progress"), "check run in progress");
  await sleep(1000);
  await svc.stop();
  let runs = checkRuns(sim, head);
  check(runs.length === 1 && runs[0].status === "queued", `check run back to queued by the stop (${runs.map((r) => r.status)})`);
  check((runs[0].output.summary || "").includes("starts again when the service restarts"), "the check run says it resumes");
  const mid = jobs(conf.cfg.state_dir);
  check(mid.length === 1 && mid[0].state === "queued", `job back in the queue (${mid[0] && mid[0].state})`);
  check(comments(sim, 7).length === 0, "nothing posted by the stop");
  svc = await startService(conf, { fake: MODE === "real" ? undefined : "pass:4" });
  await expectReported(sim, conf, 7, head);
  runs = checkRuns(sim, head);
  check(runs.length === 1 && runs[0].status === "completed", "the same check run completed after the restart");
  check(runs[0].history.join(",") === "in_progress,queued,in_progress,completed", `check run history ${runs[0].history}`);
  await svc.stop();
};

scenarios.eval_permission = async (sim) => {
  const fx = fixture();
  const conf = writeConfig("perm", fx, sim);
  seedPr(sim, 7, fx.heads.fast);
  const svc = await startService(conf);
  let r = await deliver(svc, "issue_comment", commentPayload({ repo: REPO, number: 7, user: "mallory", body: "/eval" }));
  check(r.status === 202, `command accepted for checking (${r.status})`);
  await waitFor(() => comments(sim, 7).length === 1, "polite reply");
  const reply = comments(sim, 7)[0];
  check(reply.body.includes("@mallory") && reply.body.includes("write access"), "the reply says why");
  check(!reply.body.startsWith("<!-- abgate"), "the reply is not the sticky comment");
  await sleep(500);
  check(jobs(conf.cfg.state_dir).length === 0, "no job for a read-only user");
  check(sim.requests.some((q) => q.path === `/repos/${REPO}/collaborators/mallory/permission`), "permission checked via the API");
  r = await deliver(svc, "issue_comment", commentPayload({ repo: REPO, number: 7, user: "alice", body: "/eval" }));
  await expectReported(sim, conf, 7, fx.heads.fast);
  const js = jobs(conf.cfg.state_dir);
  check(js.length === 1 && js[0].trigger.includes("alice"), "alice's /eval ran");
  // "/eval rerun" evaluates the same head again and updates the same comment.
  r = await deliver(svc, "issue_comment", commentPayload({ repo: REPO, number: 7, user: "maint", body: "/eval rerun", comment_id: 4343 }));
  await waitFor(() => { const j = jobs(conf.cfg.state_dir); return j.length === 2 && allFinal(j); }, "rerun done");
  check(sticky(sim, 7).length === 1 && sticky(sim, 7)[0].updates >= 1, "rerun updated the one sticky comment");
  await svc.stop();
};

scenarios.closed_cancels = async (sim) => {
  const fx = fixture();
  const conf = writeConfig("closed", fx, sim);
  const h8 = fx.heads.sleepy || fx.heads.slow;
  seedPr(sim, 8, h8);
  seedPr(sim, 7, fx.heads.fast);
  const svc = await startService(conf, { fake: MODE === "real" ? undefined : "pass:30" });
  await deliver(svc, "pull_request", prPayload({ repo: REPO, number: 8, action: "opened", head_sha: h8 }));
  await waitFor(() => checkRuns(sim, h8).some((r) => r.status === "in_progress"), "PR 8 evaluating");
  await deliver(svc, "pull_request", prPayload({ repo: REPO, number: 7, action: "opened", head_sha: fx.heads.fast }));
  sim.state.pulls[`${REPO}#7`].state = "closed";
  let r = await deliver(svc, "pull_request", prPayload({ repo: REPO, number: 7, action: "closed", head_sha: fx.heads.fast }));
  check(r.status === 202 && r.text.includes("canceled"), `closing a PR with a queued job (${r.text})`);
  check(jobs(conf.cfg.state_dir).find((j) => j.pr === 7).state === "canceled", "queued job canceled");
  sim.state.pulls[`${REPO}#8`].state = "closed";
  r = await deliver(svc, "pull_request", prPayload({ repo: REPO, number: 8, action: "closed", head_sha: h8 }));
  await waitFor(() => allFinal(jobs(conf.cfg.state_dir)), "running job stopped", 60000);
  const j8 = jobs(conf.cfg.state_dir).find((j) => j.pr === 8);
  check(j8.state === "canceled", `running job canceled (${j8.state})`);
  const runs = checkRuns(sim, h8);
  check(runs.length === 1 && runs[0].status === "completed" && runs[0].conclusion === "cancelled", "its check run closed as cancelled");
  check(comments(sim, 8).length === 0 && comments(sim, 7).length === 0, "no comment for canceled work");
  check(checkRuns(sim, fx.heads.fast).length === 0, "the queued one never started");
  await svc.stop();
};

scenarios.poll_sweep = async (sim) => {
  const fx = fixture();
  const conf = writeConfig("poll", fx, sim, { poll_interval_s: 1 });
  seedPr(sim, 7, fx.heads.fast);
  seedPr(sim, 9, fx.heads.slow, { draft: true });
  const svc = await startService(conf);
  await expectReported(sim, conf, 7, fx.heads.fast);
  check(jobs(conf.cfg.state_dir).every((j) => j.pr === 7 && j.trigger === "poll"), "queued by the sweep, draft skipped");
  await sleep(2500);  /* more sweeps: a head with a result is not queued again */
  check(jobs(conf.cfg.state_dir).length === 1, "one job after several sweeps");
  check(sim.requests.filter((q) => q.path === `/repos/${REPO}/pulls`).length >= 2, "listed open PRs repeatedly");
  await svc.stop();
};

scenarios.token_status_fallback = async (sim) => {
  const fx = fixture();
  const conf = writeConfig("status", fx, sim);
  seedPr(sim, 7, fx.heads.fast);
  seedPr(sim, 8, fx.heads.slow);
  setPullRef(fx, 8, fx.heads.slow);
  // A plain token cannot create check runs: GitHub answers 403.
  sim.failures.push({ method: "POST", path: /\/check-runs$/, status: 403, count: 1000, fired: 0,
    body: { message: "Resource not accessible by personal access token" } });
  const svc = await startService(conf);
  await deliver(svc, "pull_request", prPayload({ repo: REPO, number: 7, action: "opened", head_sha: fx.heads.fast }));
  await waitFor(() => jobs(conf.cfg.state_dir).some((j) => j.state === "done"), "PR 7 done");
  const st = sim.state.statuses.filter((s) => s.sha === fx.heads.fast);
  check(st.length === 2 && st[0].state === "pending" && ["success", "failure", "error"].includes(st[1].state),
    `pending then final commit status (${st.map((s) => s.state)})`);
  check(st.every((s) => s.context === "abgate" && s.description.length <= 140), "context and short description");
  check(sticky(sim, 7).length === 1, "the comment is still posted");
  await svc.stop();
  // Remembered across a restart: the next job goes straight to statuses.
  const svc2 = await startService(conf);
  await deliver(svc2, "pull_request", prPayload({ repo: REPO, number: 8, action: "opened", head_sha: fx.heads.slow }));
  await waitFor(() => jobs(conf.cfg.state_dir).filter((j) => j.state === "done").length === 2, "PR 8 done");
  check(sim.requests.filter((q) => q.method === "POST" && /\/check-runs$/.test(q.path)).length === 1, "check runs tried once only");
  check(jobs(conf.cfg.state_dir).every((j) => j.check_kind === "status"), "jobs recorded as status-reported");
  await svc2.stop();
};

scenarios.labels_exclusive = async (sim) => {
  const fx = fixture();
  const conf = writeConfig("labels", fx, sim);
  seedPr(sim, 7, fx.heads.fast);
  sim.state.labels[`${REPO}#7`] = ["eval:XS", "regression-128", "eval-tiny:REJECT", "accuracy-regression", "bug", "evaluation", "needs-review"];
  const svc = await startService(conf);
  await deliver(svc, "pull_request", prPayload({ repo: REPO, number: 7, action: "opened", head_sha: fx.heads.fast }));
  const { job } = await expectReported(sim, conf, 7, fx.heads.fast);
  const have = labelsOf(sim, 7);
  for (const keep of ["bug", "evaluation", "needs-review"]) check(have.includes(keep), `kept ${keep}`);
  for (const stale of ["eval:XS", "regression-128", "eval-tiny:REJECT", "accuracy-regression"])
    check(!have.includes(stale) || verdictLabels(job).includes(stale), `removed stale ${stale}`);
  // The same verdict again: no label writes at all (no notification churn).
  const before = sim.requests.length;
  await deliver(svc, "issue_comment", commentPayload({ repo: REPO, number: 7, user: "alice", body: "/eval rerun" }));
  await waitFor(() => { const j = jobs(conf.cfg.state_dir); return j.length === 2 && allFinal(j); }, "rerun done");
  const writes = sim.requests.slice(before).filter((q) => q.path.includes("/labels") && q.method !== "GET");
  const sameVerdict = JSON.stringify(verdictLabels(jobs(conf.cfg.state_dir)[1]).sort()) === JSON.stringify(verdictLabels(job).sort());
  check(!sameVerdict || writes.length === 0, `unchanged label set costs no write (${writes.length})`);
  await svc.stop();
};

scenarios.eval_pr_cli = async (sim) => {
  const fx = fixture();
  seedPr(sim, 7, fx.heads.fast);
  setPullRef(fx, 7, fx.heads.fast);
  const env = { ...process.env };
  delete env.ABGATE_WEBHOOK_SECRET;
  if (MODE !== "real") { env.ABGATE_FAKE_EVAL = "reject:0.1"; env.ABGATE_FAKE_HEAD_SHA = fx.heads.fast; }
  // Asynchronous: the simulator answers from this process's event loop.
  const run = (args, extraEnv = {}) => new Promise((resolve) => {
    const child = spawn(DRIVER, args, { env: { ...env, ...extraEnv }, stdio: ["ignore", "pipe", "pipe"] });
    children.add(child);
    const out = [], err = [];
    child.stdout.on("data", (d) => out.push(d));
    child.stderr.on("data", (d) => err.push(d));
    child.on("close", (code) => { children.delete(child);
      resolve({ code, out: Buffer.concat(out).toString(), err: Buffer.concat(err).toString() }); });
  });
  // No token: "posting" writes the files.
  const noTok = writeConfig("cli-notoken", fx, sim, { github: { token: null } });
  const outDir = path.join(tmp, "out");
  let r = await run(["eval", "--pr", "7", "--config", noTok.file, "--post", "--out-dir", outDir, "--quiet"]);
  check([0, 1].includes(r.code), `eval --pr exits with a verdict status (${r.code} ${r.err || ""})`);
  const comment = readFileSync(path.join(outDir, "comment.md"), "utf8");
  check(comment.startsWith("<!-- abgate:v1 head="), "comment.md has the sticky marker");
  const labels = JSON.parse(readFileSync(path.join(outDir, "labels.json"), "utf8"));
  check(Array.isArray(labels.labels) && labels.labels.length > 0 && labels.labels.every((l) => /^(eval|regression)/.test(l)), "labels.json");
  const cr = JSON.parse(readFileSync(path.join(outDir, "check_run.json"), "utf8"));
  check(cr.status === "completed" && ["success", "failure"].includes(cr.conclusion) && cr.output.summary.length > 0, "check_run.json");
  check(Object.keys(sim.state.comments).length === 0, "nothing went to GitHub");
  // --dry-run: the comment on stdout.
  r = await run(["eval", "--pr", "7", "--config", noTok.file, "--dry-run", "--quiet"]);
  check(r.out && r.out.startsWith("<!-- abgate:v1 head="), "--dry-run prints the comment");
  // --post with a token: the same path as the service.
  const tok = writeConfig("cli-token", fx, sim);
  r = await run(["eval", "--pr", "7", "--config", tok.file, "--post", "--quiet"]);
  check([0, 1].includes(r.code), `eval --pr --post (${r.code} ${r.err || ""})`);
  check(sticky(sim, 7).length === 1 && sticky(sim, 7)[0].body.includes(fx.heads.fast), "posted the sticky comment");
  const runs = checkRuns(sim, fx.heads.fast);
  check(runs.length === 1 && runs[0].status === "completed", "check run completed");
  r = await run(["eval", "--pr", "7", "--config", tok.file, "--post", "--quiet"]);
  check(sticky(sim, 7).length === 1, "a second manual run updates the same comment");
  // An infra error with no result: the comment gives its message, even when posting meets errors of
  // its own (the check run's PATCH answered 404 once) that must not replace it.
  sim.failures.push({ method: "PATCH", path: /\/check-runs\/\d+$/, status: 404, count: 1, fired: 0 });
  r = await run(["eval", "--pr", "7", "--config", tok.file, "--post", "--quiet"], { ABGATE_FAKE_EVAL: "crash:0" });
  check(r.code === 3, `an infra error exits 3 (${r.code} ${r.err || ""})`);
  const crashed = sticky(sim, 7);
  // The poster's error reads "github: PATCH /repos/.../check-runs/N → 404 ..."; a bare "404" can be
  // part of the head sha in the marker (a CI run's sha held "...614040...").
  check(crashed.length === 1 && crashed[0].body.includes("the SUT crashed") && !crashed[0].body.includes("→ 404") &&
    !crashed[0].body.includes("github: PATCH"),
    `the comment names the evaluation's error, not the poster's (${crashed[0] && crashed[0].body.slice(0, 300)})`);
  r = await run(["eval", "--config", tok.file]);
  check(r.code === 2, "usage error without --pr");
};

scenarios.ack_latency = async (sim) => {
  const fx = fixture();
  const conf = writeConfig("lat", fx, sim);
  seedPr(sim, 7, fx.heads.fast);
  const svc = await startService(conf, { fake: "pass:5" });
  const n = 300;
  // The client runs in its own process, so this process's simulator does not skew its clock.
  // Every delivery is a new push of PR 7: a new job superseding the last (the heaviest transaction).
  const child = spawn(process.execPath, [path.join(GHSIM, "webhooks.mjs"), "bench", `${svc.url}/webhook`, SECRET, REPO, "7", String(n)],
    { stdio: ["ignore", "pipe", "inherit"] });
  children.add(child);
  const out = [];
  child.stdout.on("data", (d) => out.push(d));
  await new Promise((r) => child.on("close", () => { children.delete(child); r(); }));
  const { ms, statuses } = JSON.parse(Buffer.concat(out).toString());
  ms.sort((a, b) => a - b);
  const q = (p) => ms[Math.min(ms.length - 1, Math.floor(p * ms.length))];
  console.log(`figure: webhook ack latency over ${n} signed deliveries on loopback (client side): p50 ${q(0.5).toFixed(2)} ms, ` +
    `p99 ${q(0.99).toFixed(2)} ms, max ${ms[ms.length - 1].toFixed(2)} ms`);
  check(statuses.every((s) => s === 202), `all ${n} acknowledged with 202`);
  await sleep(300);
  const hist = (await metrics(svc)).split("\n").filter((l) => l.startsWith("abgate_webhook_ack_seconds_bucket"));
  console.log(`  server side (abgate_webhook_ack_seconds, cumulative): ${hist.map((l) => l.replace(/.*le="([^"]+)"\} (\d+)/, "<=$1s:$2")).join(" ")}`);
  const js = jobs(conf.cfg.state_dir);
  const states = {};
  for (const j of js) states[j.state] = (states[j.state] || 0) + 1;
  console.log(`  jobs: ${JSON.stringify(states)}`);
  check(js.length >= n && js.filter((j) => !FINAL.has(j.state)).length <= 2, "the live job is the last push, the rest superseded");
  await svc.stop();
};

scenarios.stale_head_not_current = async (sim) => {
  const fx = fixture();
  const conf = writeConfig("stale", fx, sim);
  const head = fx.heads.sleepy || fx.heads.fast;
  seedPr(sim, 7, head);
  sim.state.labels[`${REPO}#7`] = ["eval:XS"];
  const svc = await startService(conf, { fake: MODE === "real" ? undefined : "pass:2" });
  await deliver(svc, "pull_request", prPayload({ repo: REPO, number: 7, action: "opened", head_sha: head }));
  await waitFor(() => checkRuns(sim, head).some((r) => r.status === "in_progress"), "evaluating");
  seedPr(sim, 7, fx.heads.fast2);  /* pushed while measuring, and the webhook got lost */
  await waitFor(() => allFinal(jobs(conf.cfg.state_dir)), "job final");
  const runs = checkRuns(sim, head);
  check(runs.length === 1 && runs[0].status === "completed", "the measured sha still gets its check run");
  check(comments(sim, 7).length === 0, "no comment: the result is not about the PR's current head");
  check(JSON.stringify(labelsOf(sim, 7)) === JSON.stringify(["eval:XS"]), "labels untouched");
  await svc.stop();
};

scenarios.job_timeout = async (sim) => {
  const fx = fixture();
  const conf = writeConfig("timeout", fx, sim, { job_timeout_s: 1 });
  const head = fx.heads.sleepy || fx.heads.fast;
  seedPr(sim, 7, head);
  const svc = await startService(conf, { fake: MODE === "real" ? undefined : "pass:20" });
  await deliver(svc, "pull_request", prPayload({ repo: REPO, number: 7, action: "opened", head_sha: head }));
  const j = (await waitFor(() => { const js = jobs(conf.cfg.state_dir); return allFinal(js) && js; }, "job final", 60000))[0];
  check(j.outcome === "timeout", `outcome timeout (${j.outcome})`);
  const runs = checkRuns(sim, head);
  check(runs.length === 1 && runs[0].conclusion === "timed_out", "check run timed_out");
  const st = sticky(sim, 7);
  check(st.length === 1 && st[0].body.includes("infrastructure problem"), "the comment says it is not the PR's fault");
  check(JSON.stringify(labelsOf(sim, 7)) === JSON.stringify(["eval:infra-error"]), "labelled eval:infra-error, never REJECT");
  await svc.stop();
};

scenarios.exhausted_closed_out = async (sim) => {
  const fx = fixture();
  const conf = writeConfig("exhausted", fx, sim, { max_attempts: 1 });
  const head = fx.heads.sleepy || fx.heads.fast;
  seedPr(sim, 7, head);
  let svc = await startService(conf, { fake: MODE === "real" ? undefined : "pass:20" });
  await deliver(svc, "pull_request", prPayload({ repo: REPO, number: 7, action: "opened", head_sha: head }));
  await waitFor(() => checkRuns(sim, head).some((r) => r.status === "in_progress"), "evaluating");
  await svc.kill();
  svc = await startService(conf);
  const j = (await waitFor(() => { const js = jobs(conf.cfg.state_dir); return allFinal(js) && js; }, "job closed out"))[0];
  check(j.outcome === "exhausted" && j.attempts === 1, `closed out after its only attempt (${j.outcome}, ${j.attempts})`);
  const runs = checkRuns(sim, head);
  check(runs.length === 1 && runs[0].status === "completed" && runs[0].conclusion === "cancelled",
    "the dead worker's check run is closed, not left in_progress");
  check(sticky(sim, 7).length === 1 && JSON.stringify(labelsOf(sim, 7)) === JSON.stringify(["eval:infra-error"]), "infra error reported");
  await svc.stop();
};

// ---- main ----
const name = process.argv[2];
if (!scenarios[name]) {
  console.error(`usage: node scenarios.mjs ${Object.keys(scenarios).join("|")}`);
  process.exit(2);
}
if (!DRIVER && name !== "client_contract") {
  console.error("set ABGATE_DRIVER to the abgate_service_driver binary");
  process.exit(2);
}
const seed = structuredClone(defaultSeed);
if (name !== "client_contract") seed.pulls = {};  /* scenarios seed their own PRs */
const sim = await startSim({ port: 0, seed });
let code = 0;
try {
  console.log(`scenario ${name} (evaluation: ${MODE === "real" && !["ack_latency"].includes(name) ? "real pipeline, mock SUT" : "stand-in"})`);
  await scenarios[name](sim);
} catch (e) {
  failed++;
  code = 1;
  console.error(e.stack || String(e));
  const logs = readdirLogs();
  if (logs) console.error(logs);
} finally {
  for (const c of children) c.kill("SIGKILL");
  await sim.close();
  if (!process.env.AB_TEST_KEEP) rmSync(tmp, { recursive: true, force: true });
  else console.log(`kept ${tmp}`);
}
function readdirLogs() {
  try {
    return execFileSync("sh", ["-c", `tail -n 40 ${tmp}/serve-*.log 2>/dev/null`], { encoding: "utf8" });
  } catch { return ""; }
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(code);
