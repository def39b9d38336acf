#!/usr/bin/env python3
"""Load generator for any OpenAI-compatible server (qwenrt serve, vLLM, SGLang, llama.cpp):
`concurrency` clients each send streaming /v1/completions requests back to back, with prompts of
random token ids (`prompt-tokens` long) and fixed output lengths (`max_tokens` = output-tokens,
`ignore_eos`), as vLLM's benchmark_serving does with its random dataset. Reports output tokens per
second, time to first token (TTFT), inter-token latency (ITL: the gaps between streamed chunks) and
time per output token (TPOT), p50 / p99. Python standard library only (runs on a bare GPU machine).

    qwenrt serve --synthetic 27b --device cuda --ctx-size 9216 --max-seqs 64 &
    python3 bench/serve_load.py --url http://127.0.0.1:8080 --concurrency 64 --prompt-tokens 8192 --output-tokens 1024
"""
import argparse
import http.client
import json
import random
import statistics
import sys
import threading
import time
import urllib.parse


def percentile(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    k = (len(s) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


class Result:
    def __init__(self):
        self.start = self.first = self.end = None
        self.chunk_times = []  # arrival of each chunk that carried text
        self.output_tokens = 0
        self.prompt_tokens = 0
        self.error = None


def one_request(url, args, prompt, headers):
    r = Result()
    body = {"prompt": prompt, "max_tokens": args.output_tokens, "ignore_eos": True, "temperature": args.temperature, "stream": True,
            "stream_options": {"include_usage": True}}
    if args.model:
        body["model"] = args.model
    conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=args.timeout)
    try:
        r.start = time.perf_counter()
        conn.request("POST", url.path.rstrip("/") + "/v1/completions", body=json.dumps(body), headers=headers)
        resp = conn.getresponse()
        if resp.status != 200:
            r.error = f"HTTP {resp.status}: {resp.read()[:300]!r}"
            return r
        chunks = 0
        while True:
            line = resp.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                break
            event = json.loads(data)
            now = time.perf_counter()
            if event.get("usage"):
                r.output_tokens = event["usage"].get("completion_tokens", 0)
                r.prompt_tokens = event["usage"].get("prompt_tokens", 0)
            if any(c.get("text") for c in event.get("choices") or []):
                chunks += 1
                if r.first is None:
                    r.first = now
                r.chunk_times.append(now)
        r.end = time.perf_counter()
        if not r.output_tokens:
            r.output_tokens = chunks  # a server without usage in streams: one token per chunk
        if r.first is None:
            r.error = "no text came back"
    except Exception as e:  # noqa: BLE001 (reported per request)
        r.error = repr(e)
    finally:
        conn.close()
    return r


def run(args):
    url = urllib.parse.urlparse(args.url)
    headers = {"Content-Type": "application/json"}
    if args.api_key:
        headers["Authorization"] = "Bearer " + args.api_key
    rng = random.Random(args.seed)
    lo, hi = (int(x) for x in args.token_range.split(","))

    def prompt():
        return [rng.randrange(lo, hi) for _ in range(args.prompt_tokens)]

    total = args.requests or 4 * args.concurrency
    prompts = [prompt() for _ in range(total)]
    for i in range(args.warmup):  # not measured: first-use costs (page faults, graph capture)
        w = one_request(url, args, prompt(), headers)
        if w.error:
            sys.exit(f"warm-up request failed: {w.error}")
    results, lock, next_index = [], threading.Lock(), [0]

    def worker():
        while True:
            with lock:
                i = next_index[0]
                next_index[0] += 1
            if i >= total:
                return
            res = one_request(url, args, prompts[i], headers)
            with lock:
                results.append(res)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(args.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0

    ok = [r for r in results if not r.error]
    errors = [r.error for r in results if r.error]
    ttft = [(r.first - r.start) * 1e3 for r in ok]
    itl = [(b - a) * 1e3 for r in ok for a, b in zip(r.chunk_times, r.chunk_times[1:])]
    tpot = [(r.end - r.first) * 1e3 / (r.output_tokens - 1) for r in ok if r.output_tokens > 1]
    out_tokens = sum(r.output_tokens for r in ok)
    report = {
        "url": args.url, "concurrency": args.concurrency, "prompt_tokens": args.prompt_tokens, "output_tokens": args.output_tokens,
        "requests": len(results), "errors": len(errors), "wall_s": wall,
        "output_tok_s": out_tokens / wall if wall > 0 else 0.0,
        "total_tok_s": (out_tokens + sum(r.prompt_tokens or args.prompt_tokens for r in ok)) / wall if wall > 0 else 0.0,
        "request_per_s": len(ok) / wall if wall > 0 else 0.0,
        "ttft_ms": {"mean": statistics.fmean(ttft) if ttft else float("nan"), "p50": percentile(ttft, 50), "p99": percentile(ttft, 99)},
        "itl_ms": {"mean": statistics.fmean(itl) if itl else float("nan"), "p50": percentile(itl, 50), "p99": percentile(itl, 99)},
        "tpot_ms": {"mean": statistics.fmean(tpot) if tpot else float("nan"), "p50": percentile(tpot, 50), "p99": percentile(tpot, 99)},
        "first_errors": errors[:3],
    }
    return report


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default="http://127.0.0.1:8080", help="the server (its /v1/completions is used)")
    p.add_argument("--concurrency", type=int, default=1, help="clients sending at once")
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--output-tokens", type=int, default=128, help="max_tokens, with ignore_eos")
    p.add_argument("--requests", type=int, default=0, help="requests in all (default 4 x concurrency)")
    p.add_argument("--warmup", type=int, default=1, help="requests sent first, one at a time, not measured")
    p.add_argument("--token-range", default="100,8000", help="prompt token ids are drawn from [A, B) (within every vocabulary here: the demo model has 8,192)")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--model", default="", help="the model field (some servers need it)")
    p.add_argument("--api-key", default="")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=3600, help="seconds per request")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    args = p.parse_args()
    report = run(args)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{report['requests']} requests ({report['errors']} failed), concurrency {args.concurrency}, "
              f"{args.prompt_tokens} prompt + {args.output_tokens} output tokens, {report['wall_s']:.1f} s")
        print(f"output {report['output_tok_s']:.1f} tok/s, total {report['total_tok_s']:.1f} tok/s, {report['request_per_s']:.2f} req/s")
        for name in ("ttft_ms", "itl_ms", "tpot_ms"):
            m = report[name]
            print(f"{name[:-3].upper():5s} mean {m['mean']:8.2f} ms   p50 {m['p50']:8.2f} ms   p99 {m['p99']:8.2f} ms")
        for e in report["first_errors"]:
            print("error:", e)
    sys.exit(1 if report["errors"] else 0)


if __name__ == "__main__":
    main()
