#!/usr/bin/env python3
"""sut_compare.py - accuracy of a candidate SUT against a reference SUT, both speaking Contract 1.

Both commands are started; identical `score` requests go to both on seeded random prompt windows
(random ids, or windows of a token file). The candidate is asked for the log-probs of the
reference's top-k ids at every position, so KL(reference || candidate) is exact on that support
plus one tail bucket (tail mass = 1 - sum of the top-k probabilities, on each side). Prints the
positions scored, top-1 agreement (Wilson 95%), mean KL (bootstrap 95%), KL p99 and max;
--greedy N also compares N greedy `generate` tokens and reports the first differing position.

Exit status: 0 pass, 1 a --min-top1 / --max-kl / --greedy-strict threshold failed, 2 an error
(a SUT crashed, timed out or broke the protocol; bad arguments).
"""

import argparse
import json
import math
import os
import select
import shlex
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

MAX_EVENT_BYTES = 512 << 20      # one output line of a SUT
TAIL_FLOOR = 1e-12               # tail masses below this are treated as this (0 log 0 = 0 still)


class CompareError(Exception):
    """A SUT failure or protocol violation; ends the comparison with exit status 2."""


def parse_command(text):
    text = text.strip()
    if text.startswith("["):
        argv = json.loads(text)
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv) or not argv:
            raise CompareError("a JSON command must be a non-empty list of strings")
        return argv
    argv = shlex.split(text)
    if not argv:
        raise CompareError("empty SUT command")
    return argv


class SutProcess:
    """One SUT child process: line-oriented JSON over pipes, with timeouts and crash reports."""

    def __init__(self, name, command, stderr_path=None):
        self.name = name
        self.argv = parse_command(command)
        self.command = command
        self.stderr_path = stderr_path
        self.err = open(stderr_path, "wb") if stderr_path else None
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=self.err if self.err else None, bufsize=0,
                                         start_new_session=True)
        except OSError as exc:
            raise CompareError("%s: cannot start %r: %s" % (name, self.argv[0], exc)) from None
        self.buf = b""
        self.ready = None
        self.hung = False

    def _stderr_tail(self, n=2000):
        if not self.stderr_path:
            return ""
        try:
            with open(self.stderr_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - n))
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def _died(self, what):
        try:
            rc = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            rc = None
        if rc is not None and rc < 0:
            how = "killed by signal %d" % -rc
        else:
            how = "exited with status %s" % rc
        tail = self._stderr_tail()
        return CompareError("%s %s %s%s" % (self.name, how, what,
                                            ("; stderr tail:\n" + tail) if tail else ""))

    def _pump(self, out_data, deadline):
        """Writes out_data fully, reading stdout meanwhile; returns when written."""
        fd_in = self.proc.stdin.fileno()
        fd_out = self.proc.stdout.fileno()
        while out_data:
            left = deadline - time.monotonic()
            if left <= 0:
                self.hung = True
                raise CompareError("%s: timed out writing a request" % self.name)
            r, w, _ = select.select([fd_out], [fd_in], [], min(left, 1.0))
            if r:
                self._read_some(fd_out, "while a request was written")
            if w:
                try:
                    n = os.write(fd_in, out_data[:65536])
                except BrokenPipeError:
                    raise self._died("(stdin closed while a request was written)") from None
                out_data = out_data[n:]

    def _read_some(self, fd, what):
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            raise self._died(what)
        self.buf += chunk
        if len(self.buf) > MAX_EVENT_BYTES and b"\n" not in self.buf:
            raise CompareError("%s: an output line longer than %d bytes" % (self.name,
                                                                          MAX_EVENT_BYTES))

    def read_event(self, timeout, what):
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.hung = True
                raise CompareError("%s: no answer within %.0fs %s" % (self.name, timeout, what))
            r, _, _ = select.select([fd], [], [], min(left, 1.0))
            if r:
                self._read_some(fd, what)
        line, self.buf = self.buf.split(b"\n", 1)
        try:
            event = json.loads(line)
        except ValueError:
            raise CompareError("%s: not a JSON line on stdout %s: %r"
                               % (self.name, what, line[:200])) from None
        if not isinstance(event, dict):
            raise CompareError("%s: a stdout line is not a JSON object: %r" % (self.name, line[:200]))
        return event

    def wait_ready(self, timeout):
        event = self.read_event(timeout, "(waiting for the ready line)")
        if event.get("ready") is not True:
            raise CompareError("%s: first line is not a ready line: %s" % (self.name,
                                                                           json.dumps(event)[:300]))
        if event.get("protocol") != 1:
            raise CompareError("%s: speaks protocol %r, expected 1" % (self.name,
                                                                     event.get("protocol")))
        self.ready = event
        return event

    def send(self, request, timeout):
        line = (json.dumps(request, separators=(",", ":")) + "\n").encode()
        self._pump(line, time.monotonic() + timeout)

    def wait_done(self, req_id, timeout, events=None):
        """Reads events for req_id until done; returns (done event, seconds to `first` or None)."""
        t0 = time.monotonic()
        first_at = None
        while True:
            left = timeout - (time.monotonic() - t0)
            event = self.read_event(max(left, 0.001), "(request %s)" % req_id)
            if event.get("id") != req_id:
                raise CompareError("%s: answer for id %r while waiting for %r: %s"
                                   % (self.name, event.get("id"), req_id, json.dumps(event)[:300]))
            kind = event.get("event")
            if kind == "error":
                raise CompareError("%s: error for request %s: %s" % (self.name, req_id,
                                                                   event.get("message")))
            if kind == "first":
                first_at = time.monotonic() - t0
                continue
            if kind == "done":
                return event, first_at
            raise CompareError("%s: unexpected event %r" % (self.name, kind))

    def close(self):
        if self.proc.poll() is None and self.hung:
            os.killpg(self.proc.pid, signal.SIGKILL)       # it stopped answering: no polite quit
            self.proc.wait()
        if self.proc.poll() is None:
            try:
                self.send({"op": "quit"}, 5)
                self.proc.stdin.close()
            except (CompareError, OSError):
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.err):
            try:
                if f:
                    f.close()
            except OSError:
                pass


# ---- prompts and statistics ---------------------------------------------------------------------
def load_token_file(path):
    if path.endswith(".npy"):
        arr = np.load(path)
    else:
        with open(path) as f:
            text = f.read()
        text = text.strip()
        if text.startswith("["):
            arr = np.array(json.loads(text))
        else:
            arr = np.array([int(t) for t in text.replace(",", " ").split()])
    arr = np.asarray(arr).reshape(-1)
    if arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
        raise CompareError("%s: expected a non-empty list of integer token ids" % path)
    return arr.astype(np.int64)


def make_prompts(args, vocab):
    rng = np.random.default_rng(args.seed)
    prompts, starts = [], []
    if args.tokens_file:
        corpus = load_token_file(args.tokens_file)
        if corpus.min() < 0 or corpus.max() >= vocab:
            raise CompareError("token file ids fall outside the vocabulary [0, %d)" % vocab)
        if corpus.size < args.prompt_len:
            raise CompareError("token file has %d tokens, fewer than --prompt-len %d"
                               % (corpus.size, args.prompt_len))
        for _ in range(args.prompts):
            s = int(rng.integers(0, corpus.size - args.prompt_len + 1))
            starts.append(s)
            prompts.append(corpus[s:s + args.prompt_len].tolist())
    else:
        hi = min(vocab, args.vocab_limit) if args.vocab_limit else vocab
        for _ in range(args.prompts):
            prompts.append(rng.integers(0, hi, args.prompt_len).tolist())
    return prompts, starts


def wilson(k, n, z=1.959964):
    if n == 0:
        return [0.0, 1.0]
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return [max(0.0, mid - half), min(1.0, mid + half)]


def bootstrap_mean_ci(x, seed, n_boot=2000):
    x = np.asarray(x, dtype=np.float64)
    if x.size < 2:
        return [float(x.mean()) if x.size else 0.0] * 2
    rng = np.random.default_rng(seed)
    means = np.empty(n_boot)
    for b in range(n_boot):
        means[b] = x[rng.integers(0, x.size, x.size)].mean()
    return [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]


def position_kl(ref_top, cand_lps):
    """KL(ref || cand) on the reference's top-k support plus one tail bucket."""
    p_lp = np.array([lp for _, lp in ref_top], dtype=np.float64)
    q_lp = np.array(cand_lps, dtype=np.float64)
    p = np.exp(p_lp)
    q = np.exp(q_lp)
    kl = float(np.sum(p * (p_lp - q_lp)))
    tail_p = 1.0 - float(p.sum())
    tail_q = 1.0 - float(q.sum())
    if tail_p > TAIL_FLOOR:
        kl += tail_p * (math.log(tail_p) - math.log(max(tail_q, TAIL_FLOOR)))
    return kl


def _check_positions(name, answer, n_expected, first, n_prompt):
    positions = answer.get("positions")
    if not isinstance(positions, list):
        raise CompareError("%s: score answer without a positions list" % name)
    if len(positions) == n_prompt and first > 0:
        positions = positions[first:]          # a SUT that ignores "first" scores every position
    if len(positions) != n_expected:
        raise CompareError("%s: %d positions answered, %d expected" % (name, len(positions),
                                                                        n_expected))
    return positions


def run_compare(args, ref, cand, log):
    vocab = min(ref.ready["model"]["vocab_size"], cand.ready["model"]["vocab_size"])
    if ref.ready["model"]["vocab_size"] != cand.ready["model"]["vocab_size"]:
        raise CompareError("vocabulary sizes differ: reference %d, candidate %d"
                           % (ref.ready["model"]["vocab_size"], cand.ready["model"]["vocab_size"]))
    prompts, starts = make_prompts(args, vocab)
    first = args.first
    if not 0 <= first < args.prompt_len:
        raise CompareError("--first must be in [0, --prompt-len)")
    n_pos = args.prompt_len - first

    def score_req(prefix, i, ids=None):
        req = {"op": "score", "id": "%s%d" % (prefix, i), "prompt": prompts[i], "top_k": args.top_k}
        if first:
            req["first"] = first
        if ids is not None:
            req["ids"] = ids
        return req

    kls, agree, per_prompt, worst = [], [], [], (-1.0, None)
    t_ref = t_cand = 0.0
    ref_answers = {}
    if args.prompts:
        ref.send(score_req("r", 0), args.timeout)
        t = time.monotonic()
        ref_answers[0] = ref.wait_done("r0", args.timeout)[0]
        t_ref += time.monotonic() - t
    for i in range(args.prompts):
        ref_pos = _check_positions(ref.name, ref_answers.pop(i), n_pos, first, args.prompt_len)
        ask = []
        for p, pos in enumerate(ref_pos):
            top = pos.get("top")
            if not isinstance(top, list) or len(top) != min(args.top_k, vocab):
                raise CompareError("%s: position %d has %s top entries, %d requested"
                                   % (ref.name, p, len(top) if isinstance(top, list) else "no",
                                      args.top_k))
            ask.append([int(t) for t, _ in top])
        t = time.monotonic()
        cand.send(score_req("c", i, ask), args.timeout)
        if i + 1 < args.prompts:           # the reference works on the next prompt meanwhile
            ref.send(score_req("r", i + 1), args.timeout)
        cand_ans = cand.wait_done("c%d" % i, args.timeout)[0]
        t_cand += time.monotonic() - t
        if i + 1 < args.prompts:
            t = time.monotonic()
            ref_answers[i + 1] = ref.wait_done("r%d" % (i + 1), args.timeout)[0]
            t_ref += time.monotonic() - t
        cand_pos = _check_positions(cand.name, cand_ans, n_pos, first, args.prompt_len)
        p_kl, p_agree = [], []
        for p, (rp, cp) in enumerate(zip(ref_pos, cand_pos)):
            lps = cp.get("ids")
            if not isinstance(lps, list) or len(lps) != len(ask[p]):
                raise CompareError("%s: position %d answered %s requested ids, %d asked"
                                   % (cand.name, p, len(lps) if isinstance(lps, list) else "no",
                                      len(ask[p])))
            ctop = cp.get("top")
            if not isinstance(ctop, list) or not ctop:
                raise CompareError("%s: position %d has no top list" % (cand.name, p))
            kl = position_kl(rp["top"], lps)
            p_kl.append(kl)
            p_agree.append(int(ctop[0][0]) == int(rp["top"][0][0]))
            if kl > worst[0]:
                worst = (kl, {"prompt": i, "position": first + p})
        kls.extend(p_kl)
        agree.extend(p_agree)
        per_prompt.append({"index": i, "start": starts[i] if starts else None,
                           "top1": float(np.mean(p_agree)), "kl_mean": float(np.mean(p_kl)),
                           "kl_max": float(np.max(p_kl))})
        if args.verbose:
            print("prompt %d/%d: top-1 %.4f, mean KL %.3g" % (i + 1, args.prompts,
                                                            np.mean(p_agree), np.mean(p_kl)),
                  file=log, flush=True)
    kls_arr = np.array(kls, dtype=np.float64)
    n = int(kls_arr.size)
    matches = int(np.sum(agree))
    result = {
        "positions": n,
        "top1_agree": matches / n if n else None,
        "top1_matches": matches,
        "top1_wilson95": wilson(matches, n),
        "kl_mean": float(kls_arr.mean()) if n else None,
        "kl_mean_ci95": bootstrap_mean_ci(kls_arr, args.seed),
        "kl_median": float(np.median(kls_arr)) if n else None,
        "kl_p99": float(np.percentile(kls_arr, 99)) if n else None,
        "kl_max": float(kls_arr.max()) if n else None,
        "kl_max_at": worst[1],
        "kl_negative_min": float(min(0.0, kls_arr.min())) if n else 0.0,
        "per_prompt": per_prompt,
        "prompts": prompts,
        "seconds": {"reference": round(t_ref, 3), "candidate": round(t_cand, 3)},
    }
    return result


def run_greedy(args, ref, cand, prompts, log):
    runs = []
    count = min(len(prompts), args.greedy_prompts) if args.greedy_prompts else len(prompts)
    for i in range(count):
        req = {"op": "generate", "id": "g%d" % i, "prompt": prompts[i],
               "max_tokens": args.greedy, "spec": False}
        ref.send(req, args.timeout)
        cand.send(req, args.timeout)                 # both decode at the same time
        r_done = ref.wait_done(req["id"], args.timeout)[0]
        c_done = cand.wait_done(req["id"], args.timeout)[0]
        rt, ct = r_done.get("tokens"), c_done.get("tokens")
        for name, toks in ((ref.name, rt), (cand.name, ct)):
            if not isinstance(toks, list) or len(toks) != args.greedy:
                raise CompareError("%s: generate returned %s tokens, %d asked"
                                   % (name, len(toks) if isinstance(toks, list) else "no",
                                      args.greedy))
        diff = next((j for j, (a, b) in enumerate(zip(rt, ct)) if a != b), None)
        runs.append({"index": i, "first_diff": diff, "reference": rt, "candidate": ct,
                     "reference_stats": r_done.get("stats"), "candidate_stats": c_done.get("stats")})
        if args.verbose:
            print("greedy %d/%d: %s" % (i + 1, count, "identical" if diff is None
                                        else "first difference at token %d" % diff),
                  file=log, flush=True)
    identical = sum(1 for r in runs if r["first_diff"] is None)
    return {"tokens": args.greedy, "prompts": count, "identical": identical,
            "first_diffs": [r["first_diff"] for r in runs], "runs": runs}


def fmt(x):
    return "n/a" if x is None else ("%.4g" % x)


def report(res, greedy, out):
    n = res["positions"]
    lo, hi = res["top1_wilson95"]
    print("positions scored: %d" % n, file=out)
    if n:
        print("top-1 agreement:  %.4f (%d/%d, Wilson 95%% [%.4f, %.4f])"
              % (res["top1_agree"], res["top1_matches"], n, lo, hi), file=out)
        klo, khi = res["kl_mean_ci95"]
        print("KL(ref || cand):  mean %s (95%% [%s, %s])  median %s  p99 %s  max %s"
              % (fmt(res["kl_mean"]), fmt(klo), fmt(khi), fmt(res["kl_median"]),
                 fmt(res["kl_p99"]), fmt(res["kl_max"])), file=out)
        if res["kl_max_at"]:
            print("worst position:   prompt %(prompt)d, position %(position)d" % res["kl_max_at"],
                  file=out)
    if greedy:
        diffs = [d for d in greedy["first_diffs"] if d is not None]
        print("greedy %d tokens: %d/%d prompts identical%s"
              % (greedy["tokens"], greedy["identical"], greedy["prompts"],
                 ("; first difference at tokens %s" % greedy["first_diffs"]) if diffs else ""),
              file=out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ref", required=True, help="reference SUT command (shell words or JSON argv)")
    ap.add_argument("--cand", required=True, help="candidate SUT command (shell words or JSON argv)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--prompts", type=int, default=8, help="number of prompt windows")
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--first", type=int, default=0,
                    help="first scored position of each window (0: all positions)")
    ap.add_argument("--top-k", type=int, default=64)
    ap.add_argument("--tokens-file", help="token ids (.npy, JSON list, or whitespace/comma text)")
    ap.add_argument("--vocab-limit", type=int, default=0,
                    help="random prompts draw ids below this (default: the vocabulary size)")
    ap.add_argument("--greedy", type=int, default=0, metavar="N",
                    help="also compare N greedy generate tokens per prompt")
    ap.add_argument("--greedy-prompts", type=int, default=0,
                    help="how many prompts to decode with --greedy (default: all)")
    ap.add_argument("--greedy-strict", action="store_true",
                    help="fail (exit 1) unless every greedy run is identical")
    ap.add_argument("--min-top1", type=float, help="fail (exit 1) below this top-1 agreement")
    ap.add_argument("--max-kl", type=float, help="fail (exit 1) above this mean KL")
    ap.add_argument("--json", help="write the machine-readable result here")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    ap.add_argument("--ready-timeout", type=float, default=1800.0,
                    help="seconds to wait for each SUT's ready line")
    ap.add_argument("--log-dir", help="keep the SUTs' stderr here (default: a temp dir)")
    ap.add_argument("--verbose", action="store_true", help="progress per prompt on stderr")
    args = ap.parse_args(argv)
    if args.prompts < 0 or args.prompt_len < 1 or args.top_k < 1 or args.greedy < 0:
        ap.error("--prompts >= 0, --prompt-len >= 1, --top-k >= 1 and --greedy >= 0 required")

    tmp = None
    log_dir = args.log_dir
    if not log_dir:
        tmp = tempfile.TemporaryDirectory(prefix="sut_compare.")
        log_dir = tmp.name
    os.makedirs(log_dir, exist_ok=True)
    suts = []
    status = 2
    try:
        ref = SutProcess("reference", args.ref, os.path.join(log_dir, "reference.stderr"))
        suts.append(ref)
        cand = SutProcess("candidate", args.cand, os.path.join(log_dir, "candidate.stderr"))
        suts.append(cand)
        for s in suts:
            s.wait_ready(args.ready_timeout)
            m = s.ready.get("model", {})
            if not isinstance(m.get("vocab_size"), int):
                raise CompareError("%s: ready line without model.vocab_size" % s.name)
            print("%s: %s, %s, vocab %d, on %s" % (s.name, s.ready.get("engine"), m.get("name"),
                                                   m["vocab_size"], s.ready.get("device")),
                  file=sys.stderr, flush=True)
        res = run_compare(args, ref, cand, sys.stderr)
        greedy = run_greedy(args, ref, cand, res["prompts"], sys.stderr) if args.greedy else None
        violations = []
        if args.min_top1 is not None and (res["top1_agree"] is None
                                          or res["top1_agree"] < args.min_top1):
            violations.append("top-1 agreement %s < %g" % (fmt(res["top1_agree"]), args.min_top1))
        if args.max_kl is not None and (res["kl_mean"] is None or res["kl_mean"] > args.max_kl):
            violations.append("mean KL %s > %g" % (fmt(res["kl_mean"]), args.max_kl))
        if args.greedy_strict and greedy and greedy["identical"] != greedy["prompts"]:
            violations.append("greedy output differs in %d of %d prompts"
                              % (greedy["prompts"] - greedy["identical"], greedy["prompts"]))
        report(res, greedy, sys.stdout)
        for v in violations:
            print("FAIL: %s" % v, file=sys.stdout)
        status = 1 if violations else 0
        if args.json:
            doc = {"schema": "ember.sut_compare/1",
                   "reference": {"command": args.ref, "ready": ref.ready},
                   "candidate": {"command": args.cand, "ready": cand.ready},
                   "settings": {"seed": args.seed, "prompts": args.prompts,
                                "prompt_len": args.prompt_len, "first": args.first,
                                "top_k": args.top_k, "tokens_file": args.tokens_file,
                                "vocab_limit": args.vocab_limit or None},
                   "thresholds": {"min_top1": args.min_top1, "max_kl": args.max_kl,
                                  "greedy_strict": args.greedy_strict},
                   "pass": not violations, "violations": violations,
                   "result": res, "greedy": greedy}
            with open(args.json, "w") as f:
                json.dump(doc, f, indent=1)
                f.write("\n")
    except CompareError as exc:
        print("error: %s" % exc, file=sys.stderr)
        status = 2
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        import traceback
        traceback.print_exc()
        print("error: malformed SUT answer (%s: %s)" % (type(exc).__name__, exc), file=sys.stderr)
        status = 2
    finally:
        for s in suts:
            s.close()
        if tmp:
            tmp.cleanup()
    return status


if __name__ == "__main__":
    sys.exit(main())
