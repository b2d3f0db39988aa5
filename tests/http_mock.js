#!/usr/bin/env node
// http_mock.js - a stand-in HTTP SUT for abgate's HTTP adapter tests: llama-server's native
// /completion (return_tokens) and OpenAI /v1/completions, streamed, with deterministic greedy
// tokens (next = (prev * 31 + 7) % vocab), and injectable faults:
//   --fault never-ready | 500 | garbage-sse | lie-usage | hang | drop | big | long-line |
//           crash | no-vocab
// Scoring: POST /v1/completions with "echo": true (not streamed, max_tokens 1, logprobs K) answers
// vLLM's prompt log-probs with "token_id:N" names: after token t the top K are g(t) + j (g the
// greedy rule above) with log-prob -(j + 1) ln 2, and a token outside them has -(K + 3) ln 2.
// Its faults: echo-400 (refused: 400), echo-500 (llama-server's 500 "Unsupported param: echo"),
// bad-key, big-id, wrong-count, nan, null-lp, positive, no-logprobs, misecho, own-disagrees.
// Other options: --port N (required), --vocab V (1000), --delay-ms D per token (0),
// --ready-after-ms R (0: /health answers 503 until then), --draft (as llama-server -md: every
// request speculates, 4 proposals per step of which 3 are accepted, unless it sends
// "speculative.n_max": 0; the final timings carry draft_n / draft_n_accepted, no step count).
// Its faults: spec-plain-drafts (drafts although asked not to), spec-no-stats (no draft fields).
'use strict';
const http = require('http');
const args = process.argv.slice(2);
const opt = (name, def) => { const i = args.indexOf('--' + name); return i >= 0 ? args[i + 1] : def; };
const port = parseInt(opt('port', '0'), 10);
const vocab = parseInt(opt('vocab', '1000'), 10);
const fault = opt('fault', '');
const delayMs = parseFloat(opt('delay-ms', '0'));
const readyAfter = parseInt(opt('ready-after-ms', '0'), 10);
const draft = args.includes('--draft');
const started = Date.now();
let requests = 0;

const sleep = ms => new Promise(r => setTimeout(r, ms));
function greedy(prompt, n) {
  let prev = prompt.length ? prompt[prompt.length - 1] : 0;
  const out = [];
  for (let i = 0; i < n; i++) { prev = (prev * 31 + 7) % vocab; out.push(prev); }
  return out;
}
function readBody(req) {
  return new Promise((resolve, reject) => {
    let len = 0; const parts = [];
    req.on('data', c => { len += c.length; if (len > (8 << 20)) { reject(new Error('too big')); req.destroy(); } else parts.push(c); });
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
  });
}
const send = (res, code, obj) => { res.writeHead(code, { 'Content-Type': 'application/json' }); res.end(JSON.stringify(obj)); };

// vLLM's answer to echo + logprobs (see the header); `fault` bends it.
function echo(res, body) {
  const prompt = body.prompt, K = body.logprobs;
  if (fault === 'echo-400') return send(res, 400, { error: { message: 'echo is not supported by this server' } });
  if (fault === 'echo-500') return send(res, 500, { error: { code: 500, message: 'Unsupported param: echo', type: 'server_error' } });
  if (!Array.isArray(prompt) || body.max_tokens !== 1 || !Number.isInteger(K) || K < 1 || body.stream === true ||
      body.return_tokens_as_token_ids !== true)
    return send(res, 400, { error: { message: 'bad echo request' } });
  requests++;
  const name = id => 'token_id:' + id;
  const toks = [...prompt, greedy(prompt, 1)[0]];
  const tokens = toks.map(name), token_logprobs = [null], top_logprobs = [null];
  for (let e = 1; e < toks.length; e++) {
    const g = greedy([toks[e - 1]], 1)[0], top = {};
    for (let j = 0; j < K; j++) top[name((g + j) % vocab)] = -(j + 1) * Math.LN2;
    const rank = (toks[e] - g + vocab) % vocab;
    token_logprobs.push(rank < K ? -(rank + 1) * Math.LN2 : -(K + 3) * Math.LN2);
    top_logprobs.push(top);
  }
  if (fault === 'bad-key') { const t = top_logprobs[2]; t['tok_5'] = -9; delete t[Object.keys(t)[0]]; }
  if (fault === 'big-id') top_logprobs[1][name(vocab)] = -20;
  if (fault === 'wrong-count') { tokens.pop(); token_logprobs.pop(); top_logprobs.pop(); }
  if (fault === 'null-lp') token_logprobs[3] = null;
  if (fault === 'positive') top_logprobs[2][Object.keys(top_logprobs[2])[1]] = 0.5;
  if (fault === 'misecho') tokens[2] = name((prompt[2] + 1) % vocab);
  if (fault === 'own-disagrees') token_logprobs[1] -= 1;   // listed when prompt[1] is within g(prompt[0]) + 0..K-1
  const logprobs = fault === 'no-logprobs' ? null : { tokens, token_logprobs, top_logprobs, text_offset: toks.map((_, i) => i) };
  let text = JSON.stringify({ id: 'c', object: 'text_completion', choices: [{ index: 0, text: '', logprobs, finish_reason: 'length' }],
    usage: { prompt_tokens: prompt.length, completion_tokens: 1 } });
  if (fault === 'nan') text = text.replace(/"token_logprobs":\[null,[^,]*,/, '"token_logprobs":[null,NaN,');
  res.writeHead(200, { 'Content-Type': 'application/json' });
  res.end(text);
}

async function completion(req, res, llama) {
  const body = JSON.parse(await readBody(req));
  if (!llama && body.echo === true) return echo(res, body);
  const prompt = body.prompt, n = llama ? body.n_predict : body.max_tokens;
  if (!Array.isArray(prompt) || !Number.isInteger(n) || n < 1 || body.stream !== true)
    return send(res, 400, { error: { message: 'bad request' } });
  requests++;
  if (fault === '500') return send(res, 500, { error: { message: 'mock internal error' } });
  res.writeHead(200, { 'Content-Type': 'text/event-stream' });
  const ev = o => res.write('data: ' + (typeof o === 'string' ? o : JSON.stringify(o)) + '\n\n');
  const toks = greedy(prompt, n);
  const t0 = Date.now();
  for (let i = 0; i < n; i++) {
    if (i > 0 && delayMs > 0) await sleep(delayMs);
    if (fault === 'garbage-sse' && i === 1) { res.write('this is not sse\n\n'); }
    if (fault === 'drop' && i === 2) { res.socket.destroy(); return; }
    if (fault === 'crash' && i === 2) process.exit(3);
    if (fault === 'hang' && i === 2) return;   // never ends the stream
    const text = ' t' + toks[i];
    if (fault === 'long-line') { res.write('data: {"content":"' + 'x'.repeat(80 << 10) + '"}\n'); continue; }
    if (fault === 'big') { for (let k = 0; k < 64; k++) res.write(': ' + 'x'.repeat(1 << 10) + '\n'); }
    if (llama) ev({ content: text, tokens: [toks[i]], stop: false });
    else ev({ id: 'c', object: 'text_completion', choices: [{ index: 0, text, finish_reason: i === n - 1 ? 'length' : null }] });
  }
  const count = fault === 'lie-usage' ? n + 1 : n;
  const ms = Date.now() - t0;
  const timings = { prompt_n: prompt.length, predicted_n: n, predicted_ms: ms, predicted_per_second: ms > 0 ? n * 1000 / ms : 0 };
  const speculates = draft && (body['speculative.n_max'] !== 0 || fault === 'spec-plain-drafts');
  if (speculates && fault !== 'spec-no-stats' && n > 1) {
    const steps = Math.ceil((n - 1) / 4);   // each step: 4 proposals, 3 accepted + the target's token
    timings.draft_n = 4 * steps;
    timings.draft_n_accepted = (n - 1) - steps;
  }
  if (llama) ev({ content: '', stop: true, tokens_predicted: count, tokens_evaluated: prompt.length, timings });
  else { ev({ id: 'c', choices: [], usage: { prompt_tokens: prompt.length, completion_tokens: count } }); ev('[DONE]'); }
  res.end();
}

const server = http.createServer(async (req, res) => {
  try {
    if (req.url === '/health') {
      if (fault === 'never-ready' || Date.now() - started < readyAfter) return send(res, 503, { status: 'loading' });
      return send(res, 200, { status: 'ok' });
    }
    if (req.url === '/props' && req.method === 'GET')
      return send(res, 200, fault === 'no-vocab' ? { total_slots: 1 } : { vocab_size: vocab, requests });
    if (req.url === '/completion' && req.method === 'POST') return await completion(req, res, true);
    if (req.url === '/v1/completions' && req.method === 'POST') return await completion(req, res, false);
    send(res, 404, { error: { message: 'not found' } });
  } catch (e) { send(res, 400, { error: { message: String(e.message) } }); }
});
server.keepAliveTimeout = 60000;
server.listen(port, '127.0.0.1', () => process.stderr.write(`http_mock: listening on 127.0.0.1:${port}\n`));
process.on('SIGTERM', () => process.exit(0));
