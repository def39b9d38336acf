#!/usr/bin/env python3
"""`qwenrt serve` with and without `--speculative mtp`, driven by bench/serve_load.py at several
concurrencies: output tok/s of each, alternating the two servers `--repeats` times (the median
counts), and the draft counters of the speculative server's /metrics (accepted per round).
`--spec-max-seqs 64` makes every step draft, which is what serve's threshold is chosen from.
Standard library only.

    python3 bench/serve_mtp_compare.py --cli build/dev/qwenrt --concurrency 1,2,4 --repeats 3 --spec-max-seqs 64
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def start(cli, args):
    proc = subprocess.Popen([cli, "serve", "--port", "0", *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
    if not m:
        proc.kill()
        sys.exit(f"server did not start: {line!r}")
    return proc, f"http://127.0.0.1:{m.group(1)}"


def metrics(url):
    text = urllib.request.urlopen(url + "/metrics", timeout=30).read().decode()
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(qwenrt_\w+) (\S+)$", text, re.M)}


def load(url, concurrency, args):
    out = subprocess.run([sys.executable, os.path.join(HERE, "serve_load.py"), "--url", url, "--concurrency", str(concurrency), "--prompt-tokens",
                          str(args.prompt_tokens), "--output-tokens", str(args.output_tokens), "--requests", str(args.requests_per_user * concurrency),
                          "--json"], capture_output=True, text=True, check=True)
    report = json.loads(out.stdout)
    if report["errors"]:
        sys.exit(f"errors: {report['first_errors']}")
    return report


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cli", default="build/dev/qwenrt")
    p.add_argument("--model", default="", help="checkpoint (default: the demo model)")
    p.add_argument("--concurrency", default="1,2,4")
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--output-tokens", type=int, default=128)
    p.add_argument("--requests-per-user", type=int, default=4)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--draft-tokens", type=int, default=3)
    p.add_argument("--spec-max-seqs", type=int, default=None, help="the speculative server's threshold (default: serve's)")
    p.add_argument("--threads", type=int, default=2, help="the servers' --threads")
    args = p.parse_args()
    base = ["--threads", str(args.threads), "--max-seqs", "8"] + (["--model", args.model] if args.model else [])
    spec = base + ["--speculative", "mtp", "--draft-tokens", str(args.draft_tokens)]
    if args.spec_max_seqs is not None:
        spec += ["--spec-max-seqs", str(args.spec_max_seqs)]
    servers = {"plain": start(args.cli, base), "mtp": start(args.cli, spec)}
    rows = []
    try:
        for c in [int(x) for x in args.concurrency.split(",")]:
            rates = {"plain": [], "mtp": []}
            before = metrics(servers["mtp"][1])
            for _ in range(args.repeats):
                for name in ("plain", "mtp"):
                    rates[name].append(load(servers[name][1], c, args)["output_tok_s"])
            after = metrics(servers["mtp"][1])
            drafted = after["qwenrt_spec_draft_tokens_total"] - before["qwenrt_spec_draft_tokens_total"]
            accepted = after["qwenrt_spec_accepted_tokens_total"] - before["qwenrt_spec_accepted_tokens_total"]
            rounds = after["qwenrt_spec_rounds_total"] - before["qwenrt_spec_rounds_total"]
            plain, mtp = statistics.median(rates["plain"]), statistics.median(rates["mtp"])
            rows.append({"concurrency": c, "plain_tok_s": plain, "mtp_tok_s": mtp, "ratio": mtp / plain, "plain_runs": rates["plain"],
                         "mtp_runs": rates["mtp"], "acceptance": accepted / drafted if drafted else 0.0,
                         "accepted_per_round": accepted / rounds if rounds else 0.0})
            r = rows[-1]
            print(f"{c} users: plain {plain:7.1f} tok/s, mtp {mtp:7.1f} tok/s (x{r['ratio']:.2f}); acceptance {r['acceptance']:.2f}, "
                  f"{r['accepted_per_round']:.2f} accepted per round; runs plain {[round(x) for x in rates['plain']]} "
                  f"mtp {[round(x) for x in rates['mtp']]}", flush=True)
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(timeout=60)
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
