// server.mjs - the GitHub REST simulator for abgate's service tests: @simulacrum/github-api-simulator
// validates every request against GitHub's OpenAPI description and routes it; the handlers below
// keep state for what a PR bot writes (comments, labels, check runs, statuses) so writes can be read
// back, paginate list endpoints with `Link`, and answer collaborator permission checks from a seed.
// Test-control endpoints (/_sim/*) reset and inspect state, move PR heads, inject failures
// (status + headers for the next N matching requests) and return the request log.
//
// Library:  import { startSim } from "./server.mjs";  const sim = await startSim({ port: 0, seed });
// CLI:      node server.mjs [--port N] [--seed FILE]   (prints "listening on 127.0.0.1:PORT")
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { simulation } from "@simulacrum/github-api-simulator";

// A seed: the repos the simulator knows (with collaborator permissions) and the open PRs.
export const defaultSeed = {
  initialState: {
    users: [{ login: "abgate-bot", organizations: ["octo-org"] }],
    organizations: [{ login: "octo-org" }],
    repositories: [{ owner: "octo-org", name: "demo" }],
    branches: [{ name: "main" }],
    blobs: [],
  },
  permissions: { "octo-org/demo": { alice: "write", maint: "admin", mallory: "read" } },
  pulls: {
    "octo-org/demo#7": {
      number: 7, state: "open", draft: false, title: "Speed up decode",
      head_sha: "a".repeat(40), head_ref: "feature", base_sha: "b".repeat(40), base_ref: "main",
    },
  },
};

const labelObj = (name) => ({
  id: 1, node_id: "MDU6TGFiZWwx", url: "https://api.github.com/repos/o/r/labels/x", name,
  description: null, color: "ededed", default: false,
});

export async function startSim({ port = 0, seed = defaultSeed, host = "127.0.0.1", quiet = true } = {}) {
  let state;
  let nextId;
  let failures = [];      // [{method, path: RegExp, status, count, headers, body}]
  let requests = [];      // [{t, method, path, status, auth}]
  const reset = () => {
    state = {
      pulls: structuredClone(seed.pulls || {}),
      permissions: structuredClone(seed.permissions || {}),
      comments: {}, labels: {}, checkRuns: [], statuses: [], tokens: [],
    };
    nextId = 1000;
    failures = [];
    requests = [];
  };
  reset();

  const key = (p) => `${p.owner}/${p.repo}#${p.issue_number ?? p.pull_number}`;
  const mock = (c, op) => structuredClone(c.api.mockResponseForOperation(op).mock);
  const notFound = (res) => res.status(404).json({ message: "Not Found", documentation_url: "https://docs.github.com/rest" });

  // GitHub-style pagination: per_page (default 30, max 100), page (1-based), Link rel=next/last.
  const paginate = (req, res, items) => {
    const perPage = Math.min(Math.max(Number(req.query.per_page) || 30, 1), 100);
    const page = Math.max(Number(req.query.page) || 1, 1);
    const last = Math.max(Math.ceil(items.length / perPage), 1);
    const url = new URL(req.originalUrl, `http://${req.headers.host}`);
    const link = (p, rel) => { url.searchParams.set("page", String(p)); url.searchParams.set("per_page", String(perPage)); return `<${url.href}>; rel="${rel}"`; };
    const links = [];
    if (page < last) links.push(link(page + 1, "next"), link(last, "last"));
    if (page > 1) links.push(link(1, "first"), link(page - 1, "prev"));
    if (links.length) res.set("Link", links.join(", "));
    return items.slice((page - 1) * perPage, page * perPage);
  };

  // A PR's author (`user`, `user_type` "User" | "Bot", `author_association`), `created_at`, and
  // optionally `files` [{filename, patch, previous_filename?}], `commits` [{sha, author,
  // committer, date, files?}] (logins, an ISO date, the commit's own files with patches for
  // GET /commits/{sha}) and `timeline` [{event, created_at}] (e.g. convert_to_draft,
  // ready_for_review) feed the policy facts.
  const iso = (t) => new Date(t).toISOString().replace(/\.\d+Z$/, "Z");
  const prJson = (c, pr, k) => {
    const m = mock(c, "pulls/get");
    return {
      ...m, number: pr.number, state: pr.state, draft: !!pr.draft, title: pr.title,
      user: { ...m.user, login: pr.user || "octocat", type: pr.user_type || "User" },
      author_association: pr.author_association || "CONTRIBUTOR",
      created_at: pr.created_at || iso(Date.now()), updated_at: pr.updated_at || pr.created_at || iso(Date.now()),
      head: { ...m.head, sha: pr.head_sha, ref: pr.head_ref },
      base: { ...m.base, sha: pr.base_sha, ref: pr.base_ref },
      labels: (state.labels[k] || []).map(labelObj),
    };
  };

  const openapiHandlers = () => ({
    "pulls/get": async (c, _q, res) => {
      const k = key(c.request.params); const pr = state.pulls[k];
      if (!pr) return notFound(res);
      res.status(200).json(prJson(c, pr, k));
    },
    "pulls/list": async (c, q, res) => {
      const want = q.query.state || "open"; const { owner, repo } = c.request.params;
      const all = Object.entries(state.pulls)
        .filter(([k, p]) => k.startsWith(`${owner}/${repo}#`) && (want === "all" || p.state === want))
        .sort(([, a], [, b]) => b.number - a.number)
        .map(([k, p]) => prJson(c, p, k));
      res.status(200).json(paginate(q, res, all));
    },
    "pulls/list-files": async (c, q, res) => {
      const pr = state.pulls[key(c.request.params)];
      if (!pr) return notFound(res);
      const m = mock(c, "pulls/list-files")[0];
      const files = (pr.files || []).map((f) => {
        const lines = (f.patch || "").split("\n");
        const additions = lines.filter((l) => l.startsWith("+")).length, deletions = lines.filter((l) => l.startsWith("-")).length;
        return { ...m, filename: f.filename, status: f.previous_filename ? "renamed" : "modified", additions, deletions,
          changes: additions + deletions, patch: f.patch, ...(f.previous_filename ? { previous_filename: f.previous_filename } : {}) };
      });
      res.status(200).json(paginate(q, res, files));
    },
    "pulls/list-commits": async (c, q, res) => {
      const pr = state.pulls[key(c.request.params)];
      if (!pr) return notFound(res);
      const m = mock(c, "pulls/list-commits")[0];
      const person = (login, date) => ({ name: login || "someone", email: `${login || "someone"}@example.com`, date });
      const user = (login) => (login ? { ...m.author, login } : null);
      const commits = (pr.commits || [{ sha: pr.head_sha, author: pr.user, committer: pr.user, date: pr.created_at || iso(Date.now()) }])
        .map((x) => ({ ...m, sha: x.sha, commit: { ...m.commit, author: person(x.author, x.date), committer: person(x.committer, x.date) },
          author: user(x.author), committer: user(x.committer) }));
      res.status(200).json(paginate(q, res, commits));
    },
    "repos/get-commit": async (c, _q, res) => {
      const { owner, repo, ref } = c.request.params;
      let found = null;
      for (const [k, pr] of Object.entries(state.pulls))
        if (k.startsWith(`${owner}/${repo}#`)) for (const x of pr.commits || []) if (x.sha === ref) found = x;
      if (!found) return res.status(422).json({ message: `No commit found for SHA: ${ref}` });
      const m = mock(c, "repos/get-commit");
      const person = (login) => ({ name: login || "someone", email: `${login || "someone"}@example.com`, date: found.date });
      const files = (found.files || []).map((f) => {
        const lines = (f.patch || "").split("\n");
        const additions = lines.filter((l) => l.startsWith("+")).length, deletions = lines.filter((l) => l.startsWith("-")).length;
        return { ...m.files[0], filename: f.filename, status: "modified", additions, deletions, changes: additions + deletions, patch: f.patch };
      });
      const additions = files.reduce((a, f) => a + f.additions, 0), deletions = files.reduce((a, f) => a + f.deletions, 0);
      res.status(200).json({ ...m, sha: found.sha, commit: { ...m.commit, author: person(found.author), committer: person(found.committer) },
        author: found.author ? { ...m.author, login: found.author } : null,
        committer: found.committer ? { ...m.committer, login: found.committer } : null,
        stats: { additions, deletions, total: additions + deletions }, files });
    },
    "issues/list-events-for-timeline": async (c, q, res) => {
      const pr = state.pulls[key(c.request.params)];
      if (!pr) return notFound(res);
      const actor = { ...mock(c, "pulls/get").user, login: pr.user || "octocat" };
      const events = (pr.timeline || []).map((e, i) => ({ id: 9000 + i, node_id: `IE_${i}`,
        url: `https://api.github.com/repos/${c.request.params.owner}/${c.request.params.repo}/issues/events/${9000 + i}`,
        actor, event: e.event, commit_id: null, commit_url: null, created_at: e.created_at, performed_via_github_app: null }));
      res.status(200).json(paginate(q, res, events));
    },
    // Issues are the PRs here (each with `pull_request`); `state` and `labels` (comma-separated, all
    // required) filter as GitHub does.
    "issues/list-for-repo": async (c, q, res) => {
      const { owner, repo } = c.request.params; const want = q.query.state || "open";
      const need = (q.query.labels || "").split(",").filter(Boolean);
      const m = mock(c, "issues/list-for-repo")[0];
      const all = Object.entries(state.pulls)
        .filter(([k, p]) => k.startsWith(`${owner}/${repo}#`) && (want === "all" || p.state === want)
          && need.every((l) => (state.labels[k] || []).includes(l)))
        .sort(([, a], [, b]) => b.number - a.number)
        .map(([k, p]) => ({ ...m, number: p.number, state: p.state, title: p.title, labels: (state.labels[k] || []).map(labelObj),
          user: { ...m.user, login: p.user || "octocat" },
          pull_request: { url: `https://api.github.com/repos/${owner}/${repo}/pulls/${p.number}`,
            html_url: `https://github.com/${owner}/${repo}/pull/${p.number}`,
            diff_url: `https://github.com/${owner}/${repo}/pull/${p.number}.diff`,
            patch_url: `https://github.com/${owner}/${repo}/pull/${p.number}.patch` } }));
      res.status(200).json(paginate(q, res, all));
    },
    "pulls/update": async (c, q, res) => {
      const k = key(c.request.params); const pr = state.pulls[k];
      if (!pr) return notFound(res);
      for (const f of ["state", "title"]) if (q.body[f] !== undefined) pr[f] = q.body[f];
      res.status(200).json(prJson(c, pr, k));
    },
    "repos/get-collaborator-permission-level": async (c, _q, res) => {
      const { owner, repo, username } = c.request.params;
      const perm = (state.permissions[`${owner}/${repo}`] || {})[username] || "read";
      const m = mock(c, "repos/get-collaborator-permission-level");
      res.status(200).json({ ...m, permission: perm, role_name: perm === "admin" ? "admin" : perm, user: { ...m.user, login: username } });
    },
    "issues/create-comment": async (c, q, res) => {
      const id = nextId++;
      const m = mock(c, "issues/create-comment");
      const cm = { ...m, id, body: q.body.body, issue: key(c.request.params), created_at: iso(Date.now()),
        user: { ...m.user, login: "abgate-bot[bot]", type: "Bot" } };
      state.comments[id] = cm; res.status(201).json(cm);
    },
    "issues/list-comments": async (c, q, res) => {
      const k = key(c.request.params);
      res.status(200).json(paginate(q, res, Object.values(state.comments).filter((x) => x.issue === k)));
    },
    "issues/get-comment": async (c, _q, res) => {
      const cm = state.comments[c.request.params.comment_id];
      cm ? res.status(200).json(cm) : notFound(res);
    },
    "issues/update-comment": async (c, q, res) => {
      const cm = state.comments[c.request.params.comment_id];
      if (!cm) return notFound(res);
      cm.body = q.body.body; cm.updates = (cm.updates || 0) + 1; res.status(200).json(cm);
    },
    "issues/delete-comment": async (c, _q, res) => {
      const id = c.request.params.comment_id;
      if (!state.comments[id]) return notFound(res);
      delete state.comments[id]; res.status(204).end();
    },
    "issues/list-labels-on-issue": async (c, q, res) =>
      res.status(200).json(paginate(q, res, (state.labels[key(c.request.params)] || []).map(labelObj))),
    "issues/add-labels": async (c, q, res) => {
      const k = key(c.request.params); const b = q.body;
      const names = (Array.isArray(b) ? b : b.labels).map((l) => (typeof l === "string" ? l : l.name));
      state.labels[k] = [...new Set([...(state.labels[k] || []), ...names])];
      res.status(200).json(state.labels[k].map(labelObj));
    },
    "issues/remove-label": async (c, _q, res) => {
      const k = key(c.request.params); const cur = state.labels[k] || [];
      if (!cur.includes(c.request.params.name)) return res.status(404).json({ message: "Label does not exist" });
      state.labels[k] = cur.filter((n) => n !== c.request.params.name);
      res.status(200).json(state.labels[k].map(labelObj));
    },
    "checks/create": async (c, q, res) => {
      const id = nextId++; const { owner, repo } = c.request.params;
      const run = { ...mock(c, "checks/create"), id, repo: `${owner}/${repo}`, output: {}, ...q.body, history: [q.body.status || "queued"] };
      if (q.body.conclusion) run.status = "completed";
      state.checkRuns.push(run); res.status(201).json(run);
    },
    "checks/update": async (c, q, res) => {
      const run = state.checkRuns.find((r) => String(r.id) === String(c.request.params.check_run_id));
      if (!run) return notFound(res);
      Object.assign(run, q.body);
      if (q.body.conclusion) run.status = "completed";
      run.history.push(run.status);
      res.status(200).json(run);
    },
    "checks/list-for-ref": async (c, q, res) => {
      const runs = state.checkRuns.filter((r) => r.head_sha === c.request.params.ref
        && (!q.query.check_name || r.name === q.query.check_name));
      res.status(200).json({ total_count: runs.length, check_runs: paginate(q, res, runs) });
    },
    "repos/create-commit-status": async (c, q, res) => {
      const id = nextId++;
      const st = { ...mock(c, "repos/create-commit-status"), id, sha: c.request.params.sha, ...q.body };
      state.statuses.push(st); res.status(201).json(st);
    },
    "repos/list-commit-statuses-for-ref": async (c, q, res) =>
      res.status(200).json(paginate(q, res, state.statuses.filter((s) => s.sha === c.request.params.ref))),
    "apps/create-installation-access-token": async (c, q, res) => {
      const token = `ghs_sim${nextId++}`;
      state.tokens.push({ installation_id: c.request.params.installation_id, auth: q.headers.authorization || "" });
      res.status(201).json({ ...mock(c, "apps/create-installation-access-token"), token,
        expires_at: new Date(Date.now() + 3600e3).toISOString().replace(/\.\d+Z$/, "Z") });
    },
  });

  const extendRouter = (router) => {
    // Runs before the OpenAPI layer: log every request, then apply injected failures.
    router.use((req, res, next) => {
      if (req.path.startsWith("/_sim/") || req.path === "/health") return next();
      const entry = { t: Date.now(), method: req.method, path: req.path, status: 0, auth: req.headers.authorization || "",
        accept: req.headers.accept || "", ua: req.headers["user-agent"] || "" };
      requests.push(entry);
      res.on("finish", () => { entry.status = res.statusCode; });
      const f = failures.find((x) => x.count > 0 && (!x.method || x.method === req.method) && x.path.test(req.path));
      if (!f) return next();
      f.count -= 1; f.fired += 1;
      for (const [h, v] of Object.entries(f.headers || {})) res.set(h, String(v));
      res.status(f.status).json(f.body || { message: `injected ${f.status}` });
    });
    router.post("/_sim/reset", (_q, res) => { reset(); res.json({ ok: true }); });
    router.get("/_sim/state", (_q, res) => res.json(state));
    router.get("/_sim/requests", (_q, res) => res.json(requests));
    // {repo, number, ...fields}: create or change a PR (head_sha, state, draft, title).
    router.post("/_sim/pulls", (q, res) => {
      const { repo, number, ...fields } = q.body; const k = `${repo}#${number}`;
      state.pulls[k] = { number, state: "open", draft: false, title: `PR ${number}`, head_ref: `pr-${number}`,
        base_ref: "main", base_sha: "b".repeat(40), head_sha: "a".repeat(40), ...(state.pulls[k] || {}), ...fields };
      res.json(state.pulls[k]);
    });
    // {method?, path: "regex", status, count, headers?, body?}: the next `count` matching requests fail.
    router.post("/_sim/fail", (q, res) => {
      const f = { ...q.body, path: new RegExp(q.body.path), fired: 0 };
      failures.push(f); res.json({ ok: true });
    });
  };

  const sim = await simulation({ initialState: seed.initialState, extend: { openapiHandlers, extendRouter } })
    .listen(port, host);
  if (!quiet) console.log(`listening on ${host}:${sim.port}`);
  return {
    port: sim.port,
    url: `http://${host}:${sim.port}`,
    get state() { return state; },
    get requests() { return requests; },
    get failures() { return failures; },
    reset,
    close: () => sim.ensureClose(),
  };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const arg = (name, dflt) => { const i = process.argv.indexOf(name); return i > 0 ? process.argv[i + 1] : dflt; };
  const seedFile = arg("--seed", process.env.SEED);
  const seed = seedFile ? JSON.parse(readFileSync(seedFile, "utf8")) : defaultSeed;
  const sim = await startSim({ port: Number(arg("--port", process.env.PORT || 0)), seed, quiet: false });
  const stop = async () => { await sim.close(); process.exit(0); };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}
