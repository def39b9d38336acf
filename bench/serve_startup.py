#!/usr/bin/env python3
"""Start-to-ready time of `qwenrt serve`: from launching the process to the first 200 of GET /health
(polled every 2 ms), over several starts; also the time the server prints in its ready line. Python
standard library only.

    python3 bench/serve_startup.py --cli build/rel/qwenrt --runs 10 [-- extra serve flags]
"""
import argparse
import http.client
import re
import signal
import statistics
import subprocess
import sys
import time


def one_start(cli, extra):
    t0 = time.perf_counter()
    proc = subprocess.Popen([cli, "serve", "--port", "0", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # The port is in the first stderr line ("listening on ..."), printed before the model loads.
        line = proc.stderr.readline()
        m = re.search(r"127\.0\.0\.1:(\d+)", line)
        if not m:
            sys.exit(f"unexpected first line: {line!r}")
        port = int(m.group(1))
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/health")
                status = c.getresponse().status
                c.close()
                if status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.002)
        ready = time.perf_counter() - t0
        printed = float(re.search(r"in ([\d.]+) s", proc.stdout.readline()).group(1))
        return ready, printed
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()


def main():
    p = argparse.ArgumentParser(description="start-to-ready time of qwenrt serve")
    p.add_argument("--cli", default="build/rel/qwenrt")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("extra", nargs="*", help="more serve flags (after --)")
    args = p.parse_args()
    runs = [one_start(args.cli, args.extra) for _ in range(args.runs)]
    ready = [r for r, _ in runs]
    printed = [q for _, q in runs]
    print(f"start to /health 200: min {min(ready) * 1e3:.0f} ms, median {statistics.median(ready) * 1e3:.0f} ms, "
          f"max {max(ready) * 1e3:.0f} ms over {len(runs)} starts")
    print(f"printed by the server (main to ready): min {min(printed) * 1e3:.0f} ms, median {statistics.median(printed) * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
