"""One `qwenrt serve` process on a free port of 127.0.0.1 (the demo model unless told), for the
server tests. Standard library only."""
import http.client
import importlib
import json
import os
import re
import signal
import subprocess
import sys
import time

CLI = os.environ.get("QWENRT_CLI", "build/rel/qwenrt")

# A client's timeout for one request: under the sanitizers the model runs ~25x slower (the 4k-token
# prompt of the prefix-cache test takes ~50 s to prefill there).
CLIENT_TIMEOUT = 300 if os.environ.get("QWENRT_SANITIZED") else 60


def import_clients(*names):
    """The official client packages `names` (tests/server/requirements.txt); exits 77 (CTest:
    skipped) when one is not installed."""
    try:
        return [importlib.import_module(n) for n in names]
    except ImportError as e:  # pragma: no cover
        print(f"skipping: {e} (pip install -r tests/server/requirements.txt)")
        sys.exit(77)


class Server:
    def __init__(self, *args, env=None, cli=None):
        self.started = time.time()
        self.proc = subprocess.Popen([cli or CLI, "serve", "--port", "0", "--threads", "2", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
        deadline = time.time() + 60
        line = ""
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if "ready on" in line or not line:
                break
        m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"server did not start: {line!r} {self.proc.stderr.read()}")
        self.ready_line = line
        self.port = int(m.group(1))
        self.url = f"http://127.0.0.1:{self.port}"

    def request(self, method, path, body=None, headers=None, timeout=30):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
        c.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        r = c.getresponse()
        raw = r.read()
        c.close()
        try:
            return r.status, json.loads(raw), dict(r.getheaders())
        except ValueError:
            return r.status, raw.decode(errors="replace"), dict(r.getheaders())

    def metrics(self):
        status, text, _ = self.request("GET", "/metrics")
        assert status == 200, text
        return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(qwenrt_\w+) (\S+)$", text, re.M)}

    def wait_idle(self, timeout=20):
        """Waits until no sequence runs or waits; returns the last metrics."""
        deadline = time.time() + timeout
        m = self.metrics()
        while time.time() < deadline and (m["qwenrt_requests_running"] > 0 or m["qwenrt_requests_waiting"] > 0):
            time.sleep(0.05)
            m = self.metrics()
        return m

    def vm_rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M).group(1))

    def stop(self, sig=signal.SIGTERM, timeout=30):
        """Signals the server (unless it has exited), waits, keeps its stderr in self.log; the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout=timeout)
        if not self.proc.stderr.closed:
            self.log = self.proc.stderr.read()
            self.proc.stderr.close()
            self.proc.stdout.close()
        return code
