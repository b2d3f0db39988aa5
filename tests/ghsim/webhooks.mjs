// webhooks.mjs - real GitHub webhook payloads (@octokit/webhooks-examples), pointed at a test PR and
// signed the way GitHub signs them: X-Hub-Signature-256 = "sha256=" + hex HMAC-SHA256(secret, raw
// body). The signature is cross-checked against @octokit/webhooks-methods' verify() so a test can
// never "pass" with a signer that only agrees with our own C code.
//
// Library:  import { prPayload, commentPayload, signedDelivery, send } from "./webhooks.mjs";
// CLI:      node webhooks.mjs URL SECRET EVENT ACTION [example-index] [JSON-merge]
//           (prints the HTTP status; the merge is applied with Object.assign at top level)
//           node webhooks.mjs bench URL SECRET REPO NUMBER COUNT  (latencies of COUNT deliveries, JSON)
import { createHmac, randomUUID } from "node:crypto";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { verify } from "@octokit/webhooks-methods";

const require = createRequire(import.meta.url);
const examples = require("@octokit/webhooks-examples");

/** The n-th example of an event/action, deep-copied. */
export function example(event, action, n = 0) {
  const ev = examples.find((e) => e.name === event);
  if (!ev) throw new Error(`no examples for event ${event}`);
  const list = ev.examples.filter((e) => action === null || e.action === action);
  if (!list[n]) throw new Error(`no example ${event}.${action}[${n}]`);
  return structuredClone(list[n]);
}

function pointAtRepo(p, repo) {
  const [owner, name] = repo.split("/");
  p.repository.full_name = repo;
  p.repository.name = name;
  p.repository.owner.login = owner;
  return p;
}

/** A pull_request event for `repo`#number with the given head sha (real payload, fields moved). */
export function prPayload({ repo, number, action = "opened", head_sha, base_ref = "main", draft = false, index = 0 }) {
  const p = pointAtRepo(example("pull_request", action, index), repo);
  p.number = number;
  p.pull_request.number = number;
  p.pull_request.draft = draft;
  p.pull_request.state = action === "closed" ? "closed" : "open";
  if (head_sha) p.pull_request.head.sha = head_sha;
  p.pull_request.base.ref = base_ref;
  if (action === "synchronize") p.after = p.pull_request.head.sha;
  return p;
}

/** An issue_comment.created event on PR `repo`#number (issue.pull_request added, as GitHub sends it). */
export function commentPayload({ repo, number, user, body, comment_id = 4242, index = 0 }) {
  const p = pointAtRepo(example("issue_comment", "created", index), repo);
  p.issue.number = number;
  p.issue.pull_request = {
    url: `https://api.github.com/repos/${repo}/pulls/${number}`,
    html_url: `https://github.com/${repo}/pull/${number}`,
    diff_url: `https://github.com/${repo}/pull/${number}.diff`,
    patch_url: `https://github.com/${repo}/pull/${number}.patch`,
    merged_at: null,
  };
  p.comment.body = body;
  p.comment.id = comment_id;
  p.comment.user.login = user;
  p.sender.login = user;
  return p;
}

export function pingPayload(repo) {
  return pointAtRepo(example("ping", null, 0), repo);
}

export function sign(secret, body) {
  return "sha256=" + createHmac("sha256", secret).update(body).digest("hex");
}

/**
 * Builds the raw body and GitHub's headers for one delivery. `signature` overrides the computed
 * one (null: leave the header out). Verified against @octokit/webhooks-methods when signed.
 */
export async function signedDelivery(secret, event, payload, { delivery = randomUUID(), signature } = {}) {
  const body = Buffer.from(typeof payload === "string" ? payload : JSON.stringify(payload));
  const headers = {
    "Content-Type": "application/json",
    "User-Agent": "GitHub-Hookshot/abgate-test",
    "X-GitHub-Event": event,
    "X-GitHub-Delivery": delivery,
    "X-GitHub-Hook-ID": "1",
    "X-GitHub-Hook-Installation-Target-Type": "repository",
    "X-GitHub-Hook-Installation-Target-ID": "1",
  };
  const sig = signature === undefined ? sign(secret, body) : signature;
  if (signature === undefined && !(await verify(secret, body.toString("utf8"), sig)))
    throw new Error("signer disagrees with @octokit/webhooks-methods");
  if (sig !== null) headers["X-Hub-Signature-256"] = sig;
  return { body, headers, delivery };
}

/** POSTs a delivery; resolves to {status, text, ms}. */
export async function send(url, d) {
  const t0 = process.hrtime.bigint();
  const r = await fetch(url, { method: "POST", headers: d.headers, body: d.body });
  const text = await r.text();
  return { status: r.status, text, ms: Number(process.hrtime.bigint() - t0) / 1e6 };
}

/**
 * Sends `count` signed pull_request.synchronize deliveries for repo#number, one after the other,
 * each with a new head sha; resolves to the client-side latencies (ms) and statuses.
 */
export async function bench(url, secret, repo, number, count) {
  const ms = [], statuses = [];
  for (let i = 0; i < count; i++) {
    const head_sha = (i + 1).toString(16).padStart(40, "c");
    const r = await send(url, await signedDelivery(secret, "pull_request",
      prPayload({ repo, number, action: "synchronize", head_sha })));
    ms.push(r.ms);
    statuses.push(r.status);
  }
  return { ms, statuses };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1] && process.argv[2] === "bench") {
  // node webhooks.mjs bench URL SECRET REPO NUMBER COUNT  -> JSON {ms:[...], statuses:[...]}
  const [, , , url, secret, repo, number, count] = process.argv;
  console.log(JSON.stringify(await bench(url, secret, repo, Number(number), Number(count))));
} else if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [url, secret, event, action, n = "0", merge = "{}"] = process.argv.slice(2);
  if (!action) {
    console.error("usage: node webhooks.mjs URL SECRET EVENT ACTION [example-index] [JSON-merge]");
    process.exit(2);
  }
  const payload = Object.assign(example(event, action === "-" ? null : action, Number(n)), JSON.parse(merge));
  const r = await send(url, await signedDelivery(secret, event, payload));
  console.log(r.status);
}
