#!/usr/bin/env node
// test_serve_http.mjs - `ember serve --http` as its clients see it, on a generated tiny model:
// health, /props, /v1/models; streamed and plain answers of POST /completion (llama-server) and
// POST /v1/completions (OpenAI), their event order and counts, and tokens equal to
// `ember serve --stdio` greedy tokens; that each event leaves when its token exists (with
// --debug-token-delay-us); echo + logprobs (the prompt's teacher-forced log-probs) equal to
// `ember serve --stdio`'s score op on the same window (ids identical, log-probs within 1e-5);
// 503 while busy; a client dropping mid-stream; every refusal (malformed JSON, bodies over the
// cap, bad ids, over the context, sampling, n_probs, logprobs caps, 404, 405) with its message;
// SIGTERM ends it with status 0. With --draft (a seeded draft): /props "spec", every request
// speculating unless "speculative.n_max" is 0, the tokens still the stdio greedy ones, one event
// per token, the draft stats in the final timings, and n_max out of range a 400.
// Exit 77 when this ember was built without libmicrohttpd.
//   usage: node test_serve_http.mjs EMBER_BINARY
import { spawn, spawnSync } from 'node:child_process';
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const ember = process.argv[2];
if (!ember) { console.error('usage: test_serve_http.mjs EMBER'); process.exit(2); }
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ember-http-'));
const model = path.join(dir, 'tiny.gguf');
let failures = 0;
const check = (cond, what) => { if (!cond) { failures++; console.error('FAIL: ' + what); } };
const sleep = ms => new Promise(r => setTimeout(r, ms));
const CTX = 256;

function gen() {
  const r = spawnSync(ember, ['gen', '--shape', 'tiny', '--quant', 'q8_0', '--seed', '1', '-o', model], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error('ember gen failed: ' + r.stderr);
}

// Starts ember serve --http on a free port; resolves { proc, port, log() }.
function startServer(extra = []) {
  return new Promise((resolve, reject) => {
    const proc = spawn(ember, ['serve', '--http', '127.0.0.1:0', '--model', model, '--threads', '1', '--ctx', String(CTX),
      ...extra], { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    const timer = setTimeout(() => reject(new Error('no listening line: ' + log)), 30000);
    proc.stderr.on('data', d => {
      log += d;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(log);
      if (m && !proc.port) { proc.port = +m[1]; clearTimeout(timer); resolve({ proc, port: proc.port, log: () => log }); }
    });
    proc.on('exit', code => { clearTimeout(timer); if (!proc.port) reject(Object.assign(new Error('exited ' + code + ': ' + log), { code, log })); });
  });
}

// One request; resolves { status, headers, body, chunks: [{ t, text }] } (t: ms since the request was sent).
function request(port, method, p, body, { headers = {}, chunked = false } = {}) {
  return new Promise((resolve, reject) => {
    const h = { ...headers };
    if (body !== undefined && !chunked) h['Content-Length'] = Buffer.byteLength(body);
    if (body !== undefined) h['Content-Type'] = 'application/json';
    const req = http.request({ host: '127.0.0.1', port, method, path: p, headers: h, agent: false }, res => {
      const chunks = []; let all = '';
      res.setEncoding('utf8');
      res.on('data', d => { chunks.push({ t: performance.now() - t0, text: d }); all += d; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: all, chunks }));
      res.on('error', reject);
    });
    req.on('error', reject);
    const t0 = performance.now();
    // With Expect: 100-continue the body goes out only when the server asks for it: a server that
    // answers from the headers alone (413 by Content-Length) and closes is read, not raced (EPIPE).
    if (body !== undefined && h.Expect === '100-continue') { req.flushHeaders(); req.on('continue', () => req.end(body)); }
    else if (body !== undefined) req.end(body); else req.end();
  });
}
const json = r => { try { return JSON.parse(r.body); } catch { return null; } };
const post = (port, p, obj) => request(port, 'POST', p, typeof obj === 'string' ? obj : JSON.stringify(obj));

// SSE "data:" payloads with the arrival time of the chunk that completed each.
function sseEvents(r) {
  const out = []; let buf = '';
  for (const c of r.chunks) {
    buf += c.text;
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i); buf = buf.slice(i + 2);
      for (const line of block.split('\n')) if (line.startsWith('data: ')) out.push({ t: c.t, data: line.slice(6) });
    }
  }
  check(buf === '', 'stream ends inside an event: ' + JSON.stringify(buf.slice(0, 80)));
  return out;
}

// Greedy tokens from `ember serve --stdio` for the same prompt.
function stdioTokens(prompt, n) {
  const req = JSON.stringify({ op: 'generate', id: 1, prompt, max_tokens: n }) + '\n{"op":"quit"}\n';
  const r = spawnSync(ember, ['serve', '--stdio', '--model', model, '--threads', '1', '--ctx', String(CTX)], { input: req, encoding: 'utf8' });
  const done = r.stdout.split('\n').filter(Boolean).map(l => JSON.parse(l)).find(l => l.event === 'done');
  if (!done) throw new Error('stdio generate failed: ' + r.stdout + r.stderr);
  return done.tokens;
}

// The stdio score op on `prompt`: top-k per position, and per position p the log-prob of
// prompt[p + 1] (asked through "ids"; the last position asks for nothing).
function stdioScore(prompt, k) {
  const ids = prompt.map((_, p) => p + 1 < prompt.length ? [prompt[p + 1]] : []);
  const req = JSON.stringify({ op: 'score', id: 1, prompt, top_k: k, ids }) + '\n{"op":"quit"}\n';
  const r = spawnSync(ember, ['serve', '--stdio', '--model', model, '--threads', '1', '--ctx', String(CTX)],
    { input: req, encoding: 'utf8', maxBuffer: 64 << 20 });
  const done = r.stdout.split('\n').filter(Boolean).map(l => JSON.parse(l)).find(l => l.event === 'done');
  if (!done) throw new Error('stdio score failed: ' + r.stdout + r.stderr);
  return done.positions;
}

async function expectError(port, p, body, status, want, opts) {
  const r = typeof body === 'string' || body === undefined ? await request(port, p === '/health' ? 'POST' : 'POST', p, body, opts)
    : await post(port, p, body);
  const j = json(r);
  check(r.status === status, `${p} ${String(body).slice(0, 60)}: status ${r.status}, expected ${status}`);
  check(j && j.error && typeof j.error.message === 'string' && j.error.message.includes(want) && j.error.code === status,
    `${p}: error body ${r.body.slice(0, 200)} lacks '${want}'`);
}

async function testEndpoints(port) {
  const h = await request(port, 'GET', '/health');
  check(h.status === 200 && json(h)?.status === 'ok', 'health: ' + h.status + ' ' + h.body);
  const props = json(await request(port, 'GET', '/props'));
  check(props && props.vocab_size === 2048 && props.n_ctx === CTX && props.engine === 'ember', '/props: ' + JSON.stringify(props));
  const models = json(await request(port, 'GET', '/v1/models'));
  check(models?.object === 'list' && typeof models.data?.[0]?.id === 'string' && models.data[0].meta?.n_vocab === 2048,
    '/v1/models: ' + JSON.stringify(models));
}

async function testLlama(port, prompt, want) {
  const n = want.length;
  const r = await post(port, '/completion', { prompt, n_predict: n, temperature: 0, top_k: 1, ignore_eos: true,
    stream: true, return_tokens: true, cache_prompt: false });
  check(r.status === 200 && /text\/event-stream/.test(r.headers['content-type'] || ''), 'llama stream: ' + r.status);
  const ev = sseEvents(r).map(e => JSON.parse(e.data));
  check(ev.length === n + 1, `llama stream: ${ev.length} events, expected ${n} tokens + stop`);
  const toks = ev.slice(0, n).flatMap(e => e.tokens || []);
  check(ev.slice(0, n).every(e => e.stop === false && e.tokens?.length === 1 && e.content === `[${e.tokens[0]}]`),
    'llama token events: ' + JSON.stringify(ev.slice(0, 2)));
  check(JSON.stringify(toks) === JSON.stringify(want), `llama tokens ${toks} != stdio ${want}`);
  const last = ev[ev.length - 1];
  check(last.stop === true && last.tokens_predicted === n && last.tokens_evaluated === prompt.length &&
    ['prompt_ms', 'predicted_ms', 'predicted_per_second', 'prompt_per_second'].every(k => typeof last.timings?.[k] === 'number') &&
    last.timings.predicted_n === n, 'llama stop event: ' + JSON.stringify(last));
  // without return_tokens: no ids, the same text
  const plain = json(await post(port, '/completion', { prompt, n_predict: n, temperature: 0 }));
  check(plain && plain.stop === true && plain.tokens === undefined && plain.content === want.map(t => `[${t}]`).join('') &&
    plain.tokens_predicted === n, 'llama plain: ' + JSON.stringify(plain));
  const withIds = json(await post(port, '/completion', { prompt, n_predict: n, return_tokens: true }));
  check(JSON.stringify(withIds?.tokens) === JSON.stringify(want), 'llama plain tokens: ' + JSON.stringify(withIds));
}

async function testOpenai(port, prompt, want) {
  const n = want.length;
  const r = await post(port, '/v1/completions', { prompt, max_tokens: n, temperature: 0, stream: true,
    stream_options: { include_usage: true }, ignore_eos: true });
  const raw = sseEvents(r);
  check(r.status === 200 && raw.length === n + 3 && raw[raw.length - 1].data === '[DONE]',
    `openai stream: status ${r.status}, ${raw.length} events, last ${raw[raw.length - 1]?.data}`);
  const ev = raw.slice(0, -1).map(e => JSON.parse(e.data));
  const texts = ev.slice(0, n).map(e => e.choices?.[0]?.text);
  check(JSON.stringify(texts) === JSON.stringify(want.map(t => `[${t}]`)), 'openai texts: ' + texts);
  check(ev.slice(0, n).every(e => e.object === 'text_completion' && e.choices.length === 1 && e.choices[0].finish_reason === null),
    'openai chunks: ' + JSON.stringify(ev[0]));
  const fin = ev[n], usage = ev[n + 1];
  check(fin?.choices?.[0]?.finish_reason === 'length' && fin.choices[0].text === '', 'openai finish: ' + JSON.stringify(fin));
  check(usage?.choices?.length === 0 && usage.usage?.completion_tokens === n && usage.usage.prompt_tokens === prompt.length,
    'openai usage: ' + JSON.stringify(usage));
  const noUsage = sseEvents(await post(port, '/v1/completions', { prompt, max_tokens: 2, stream: true }));
  check(noUsage.length === 4 && !noUsage.some(e => e.data.includes('"usage"')), 'openai without include_usage: ' + noUsage.length);
  const plain = json(await post(port, '/v1/completions', { prompt, max_tokens: n, temperature: 0 }));
  check(plain?.choices?.[0]?.text === want.map(t => `[${t}]`).join('') && plain.usage?.completion_tokens === n &&
    plain.choices[0].finish_reason === 'length', 'openai plain: ' + JSON.stringify(plain));
}

async function testErrors(port) {
  await expectError(port, '/completion', '{"prompt":[1,2,3', 400, 'malformed JSON');
  await expectError(port, '/v1/completions', '[1,2]', 400, 'must be a JSON object');
  await expectError(port, '/completion', { n_predict: 2 }, 400, "missing field 'prompt'");
  await expectError(port, '/completion', { prompt: 'hello', n_predict: 2 }, 400, 'array of token ids');
  await expectError(port, '/completion', { prompt: [1, 2048], n_predict: 2 }, 400, 'outside the vocabulary');
  await expectError(port, '/v1/completions', { prompt: [1, -1], max_tokens: 2 }, 400, 'outside the vocabulary');
  await expectError(port, '/completion', { prompt: [1, 'a'], n_predict: 2 }, 400, 'not an integer');
  await expectError(port, '/completion', { prompt: [], n_predict: 2 }, 400, "'prompt' is empty");
  await expectError(port, '/completion', { prompt: [1, 2, 3], n_predict: CTX - 2 }, 400, 'exceeds the context');
  await expectError(port, '/v1/completions', { prompt: [1, 2, 3], max_tokens: CTX }, 400, 'exceeds the context');
  await expectError(port, '/completion', { prompt: [1], n_predict: 2, temperature: 0.8 }, 400, 'greedily only');
  await expectError(port, '/v1/completions', { prompt: [1], max_tokens: 2, temperature: 1 }, 400, 'greedily only');
  await expectError(port, '/completion', { prompt: [1], n_predict: 2, n_probs: 4 }, 400, 'n_probs not supported');
  await expectError(port, '/v1/completions', { prompt: [1], max_tokens: 2, logprobs: 1 }, 400, 'logprobs not supported');
  await expectError(port, '/completion', { prompt: [1], n_predict: 2, stream: 'yes' }, 400, "'stream' must be true or false");
  await expectError(port, '/completion', { prompt: [1], n_predict: 0 }, 400, "'n_predict' must be");
  const big = JSON.stringify({ prompt: [1], n_predict: 1, pad: 'x'.repeat((1 << 20) + 10) });
  await expectError(port, '/completion', big, 413, 'request body over', { headers: { Expect: '100-continue' } });
  await expectError(port, '/completion', big, 413, 'request body over', { chunked: true, headers: { 'Transfer-Encoding': 'chunked' } });
  const nf = await request(port, 'GET', '/nope');
  check(nf.status === 404 && json(nf)?.error?.message.includes('no endpoint'), '404: ' + nf.status + ' ' + nf.body);
  const m1 = await request(port, 'GET', '/completion');
  check(m1.status === 405 && m1.headers.allow === 'POST' && json(m1)?.error?.message.includes('needs POST'), '405: ' + m1.status + ' ' + m1.body);
  const m2 = await request(port, 'POST', '/health', '{}');
  check(m2.status === 405 && /GET/.test(m2.headers.allow || ''), '405 on /health: ' + m2.status);
  const ok = await post(port, '/completion', { prompt: [5], n_predict: 1 });
  check(ok.status === 200, 'server keeps serving after the errors: ' + ok.status);
}

// echo + logprobs over HTTP against the stdio score op: entry i + 1 is stdio position i.
async function testEcho(port) {
  const K = 8, N = 100;   /* 100 positions: across a 64-row scoring chunk */
  const prompt = Array.from({ length: N }, (_, i) => (i * 37 + 11) % 2048);
  const ref = stdioScore(prompt, K);
  const r = await post(port, '/v1/completions', { prompt, max_tokens: 1, echo: true, logprobs: K, temperature: 0,
    return_tokens_as_token_ids: true });
  const j = json(r);
  const lp = j?.choices?.[0]?.logprobs;
  check(r.status === 200 && lp && lp.tokens.length === N + 1 && lp.token_logprobs.length === N + 1 &&
    lp.top_logprobs.length === N + 1 && lp.text_offset.length === N + 1, 'echo shape: ' + r.status + ' ' + r.body.slice(0, 300));
  if (!lp) return;
  check(lp.token_logprobs[0] === null && lp.top_logprobs[0] === null, 'echo entry 0 is not null');
  check(lp.tokens.slice(0, N).every((t, i) => t === `token_id:${prompt[i]}`), 'echo tokens are not the prompt');
  check(lp.tokens[N] === `token_id:${ref[N - 1].top[0][0]}` && j.usage?.completion_tokens === 1 &&
    j.usage.prompt_tokens === N && j.choices[0].finish_reason === 'length', 'echo next token / usage: ' + lp.tokens[N]);
  let worst = 0, idsOk = true;
  for (let p = 0; p < N; p++) {
    const top = Object.entries(lp.top_logprobs[p + 1]);
    idsOk &&= top.length === K && top.every(([key], i) => key === `token_id:${ref[p].top[i][0]}`);
    top.forEach(([, v], i) => { worst = Math.max(worst, Math.abs(v - ref[p].top[i][1])); });
    const own = p + 1 < N ? ref[p].ids[0] : ref[p].top[0][1];
    worst = Math.max(worst, Math.abs(lp.token_logprobs[p + 1] - own));
  }
  check(idsOk, 'echo top-k ids differ from the stdio score op');
  check(worst <= 1e-5, `echo log-probs differ from the stdio score op by ${worst}`);
  // without return_tokens_as_token_ids: the placeholder text names the same ids
  const plain = json(await post(port, '/v1/completions', { prompt: prompt.slice(0, 5), max_tokens: 0, echo: true, logprobs: 2 }));
  const pl = plain?.choices?.[0]?.logprobs;
  check(pl && pl.tokens.length === 5 && pl.tokens[1] === `[${prompt[1]}]` &&
    Object.keys(pl.top_logprobs[1]).join() === ref[0].top.slice(0, 2).map(e => `[${e[0]}]`).join() &&
    plain.choices[0].text === prompt.slice(0, 5).map(t => `[${t}]`).join('') && plain.usage.completion_tokens === 0,
    'echo with placeholders: ' + JSON.stringify(plain).slice(0, 300));
  const bare = json(await post(port, '/v1/completions', { prompt: [4, 5], max_tokens: 0, echo: true }));
  check(bare?.choices?.[0]?.text === '[4][5]' && bare.choices[0].logprobs === null, 'echo without logprobs: ' + JSON.stringify(bare));
  await expectError(port, '/v1/completions', { prompt: [1], max_tokens: 1, echo: true, logprobs: 65 }, 400, 'at most 64');
  await expectError(port, '/v1/completions', { prompt: [1], max_tokens: 2, echo: true, logprobs: 1 }, 400, 'max_tokens 0 or 1');
  await expectError(port, '/v1/completions', { prompt: [1], max_tokens: 1, echo: true, logprobs: 1, stream: true }, 400,
    'without streaming only');
  await expectError(port, '/v1/completions', { prompt: [1], max_tokens: 1, echo: true, logprobs: 'x' }, 400,
    "'logprobs' must be an integer");
  await expectError(port, '/v1/completions', { prompt: [1], max_tokens: 0 }, 400, "'max_tokens' must be");
}

// With a per-token delay: events arrive one by one, a second request is 503, a dropped client
// frees the engine within a token or two.
async function testStreamingAndDrops(prompt) {
  const DELAY_MS = 40, N = 10;
  const s = await startServer(['--debug-token-delay-us', String(DELAY_MS * 1000)]);
  const pending = post(s.port, '/completion', { prompt, n_predict: N, stream: true, return_tokens: true });
  await sleep(3 * DELAY_MS);
  const busy = await post(s.port, '/v1/completions', { prompt, max_tokens: 1 });
  check(busy.status === 503 && json(busy)?.error?.message.includes('one generation at a time'), 'busy: ' + busy.status + ' ' + busy.body);
  const ev = sseEvents(await pending);
  const first = ev[0].t, lastTok = ev[N - 1].t;
  check(ev.length === N + 1, 'delayed stream: ' + ev.length + ' events');
  check(lastTok - first >= 0.8 * (N - 1) * DELAY_MS,
    `token events were not sent as produced: first at ${first.toFixed(1)} ms, last at ${lastTok.toFixed(1)} ms`);
  // drop mid-stream: read two events, destroy the socket
  await new Promise((resolve, reject) => {
    const body = JSON.stringify({ prompt, n_predict: 200, stream: true, return_tokens: true });
    const req = http.request({ host: '127.0.0.1', port: s.port, method: 'POST', path: '/completion', agent: false,
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } }, res => {
      let seen = 0;
      res.on('data', d => { seen += (String(d).match(/\n\n/g) || []).length; if (seen >= 2) { req.destroy(); resolve(); } });
    });
    req.on('error', () => {});
    req.end(body);
    setTimeout(() => reject(new Error('no events before the drop')), 10000);
  });
  let after = null;
  for (let i = 0; i < 50 && !(after && after.status === 200); i++) {
    await sleep(DELAY_MS);
    after = await post(s.port, '/completion', { prompt, n_predict: 2, return_tokens: true });
  }
  check(after && after.status === 200 && json(after)?.tokens?.length === 2, 'after a dropped client: ' + (after && after.status));
  check(/client went away after \d+ of 200 tokens/.test(s.log()), 'the drop is not logged: ' + s.log());
  s.proc.kill('SIGTERM');
  const code = await new Promise(r => s.proc.on('exit', c => r(c)));
  check(code === 0, 'SIGTERM exit status ' + code);
}

// The last event's timings of a streamed /completion.
async function specAnswer(port, prompt, n, extra) {
  const r = await post(port, '/completion', { prompt, n_predict: n, temperature: 0, stream: true, return_tokens: true, ...extra });
  const ev = sseEvents(r).map(e => JSON.parse(e.data));
  const tokens = ev.filter(e => !e.stop).flatMap(e => e.tokens);
  return { status: r.status, tokens, events: ev.filter(e => !e.stop).length, timings: ev.at(-1)?.timings };
}

async function testSpec(prompt, want, noDraftPort) {
  const draft = path.join(dir, 'draft.gguf');
  const g = spawnSync(ember, ['gen', '--draft-for', 'tiny', '--layers', '1', '--block', '8', '--seed', '3', '-o', draft],
    { encoding: 'utf8' });
  check(g.status === 0, 'ember gen --draft-for: ' + g.stderr);
  const s = await startServer(['--draft', draft]);
  const props = json(await request(s.port, 'GET', '/props'));
  check(props?.speculative === true && props.spec?.kind === 'dflash' && props.spec.block_size === 8 && props.spec.depth === 7,
    '/props with a draft: ' + JSON.stringify(props));
  const n = want.length;
  const a = await specAnswer(s.port, prompt, n, {});
  const t = a.timings || {};
  check(a.status === 200 && JSON.stringify(a.tokens) === JSON.stringify(want), 'speculative tokens ' + a.tokens + ' vs ' + want);
  check(a.events === n, `speculative stream: ${a.events} token events for ${n} tokens`);
  check(Number.isInteger(t.draft_n) && Number.isInteger(t.draft_n_accepted) && t.target_steps >= 1 &&
    t.draft_n_accepted <= t.draft_n && t.spec_depth === 7 && Math.abs(t.accept_mean - (n - 1) / t.target_steps) < 1e-9 &&
    t.target_steps + t.draft_n_accepted === n - 1, 'speculative timings: ' + JSON.stringify(t));
  const plain = await specAnswer(s.port, prompt, n, { 'speculative.n_max': 0 });
  check(JSON.stringify(plain.tokens) === JSON.stringify(want) && plain.timings && plain.timings.draft_n === undefined,
    'n_max 0 must decode plainly: ' + JSON.stringify(plain.timings));
  const d3 = await specAnswer(s.port, prompt, n, { 'speculative.n_max': 3 });
  check(JSON.stringify(d3.tokens) === JSON.stringify(want) && d3.timings?.spec_depth === 3 && d3.timings.draft_n <= 3 * d3.timings.target_steps,
    'n_max 3: ' + JSON.stringify(d3.timings));
  const o = await post(s.port, '/v1/completions', { prompt, max_tokens: n, temperature: 0 });
  check(o.status === 200 && json(o)?.timings?.draft_n >= 0, '/v1/completions speculates too: ' + o.body.slice(0, 200));
  await expectError(s.port, '/completion', { prompt: [1], n_predict: 4, 'speculative.n_max': 8 }, 400, "'speculative.n_max' must be an integer in 0..7");
  await expectError(s.port, '/completion', { prompt: [1], n_predict: 4, 'speculative.p_min': 'x' }, 400, "'speculative.p_min' must be a number");
  // without a draft the field changes nothing, as on llama-server
  const nd = await specAnswer(noDraftPort, prompt, n, { 'speculative.n_max': 3 });
  check(JSON.stringify(nd.tokens) === JSON.stringify(want) && nd.timings && nd.timings.draft_n === undefined,
    'no draft, n_max 3: ' + JSON.stringify(nd.timings));
  check(s.proc.exitCode === null, 'server with a draft died: ' + s.log());
  s.proc.kill('SIGTERM');
  const code = await new Promise(r => s.proc.on('exit', c => r(c)));
  check(code === 0, 'SIGTERM exit status (draft) ' + code + ' ' + s.log().slice(-2000));
}

async function main() {
  gen();
  let s;
  try {
    s = await startServer();
  } catch (e) {
    if (/without libmicrohttpd/.test(e.log || '')) { console.log('SKIP: ember built without libmicrohttpd'); process.exit(77); }
    throw e;
  }
  const prompt = [1, 2, 3, 500, 1000, 2047];
  const want = stdioTokens(prompt, 12);
  check(want.length === 12 && new Set(want).size >= 3, 'stdio tokens (a comparison needs distinct ones): ' + want);
  await testEndpoints(s.port);
  await testLlama(s.port, prompt, want);
  await testOpenai(s.port, prompt, want);
  await testErrors(s.port);
  await testEcho(s.port);
  await testSpec(prompt, want, s.port);
  check(s.proc.exitCode === null, 'server died: ' + s.log());
  s.proc.kill('SIGTERM');
  const code = await new Promise(r => s.proc.on('exit', c => r(c)));
  check(code === 0, 'SIGTERM exit status ' + code + ' (under ASan: a leak report) ' + s.log().slice(-2000));
  await testStreamingAndDrops(prompt);
  const bad = spawnSync(ember, ['serve', '--http', '127.0.0.1:notaport', '--model', model], { encoding: 'utf8' });
  check(bad.status === 1 && /bad port/.test(bad.stderr), 'bad listen address: ' + bad.status + ' ' + bad.stderr);
  fs.rmSync(dir, { recursive: true, force: true });
  if (failures) { console.error(`test_serve_http: ${failures} check(s) failed`); process.exit(1); }
  console.log('test_serve_http: ok');
}
main().catch(e => { console.error('FAIL: ' + (e.stack || e)); process.exit(1); });
