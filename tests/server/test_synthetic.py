#!/usr/bin/env python3
"""`qwenrt serve --synthetic 0.8b` (random weights with the released shapes, no tokenizer) driven by
the load generator bench/serve_load.py: token-id prompts through /v1/completions give fixed-length
answers with ignore_eos, the text routes give a 400 that says why, and the load generator's report
adds up. Standard library only. Skipped (77) under sanitizers (random 0.8B weights are slow there).

    QWENRT_CLI=build/rel/qwenrt python3 tests/server/test_synthetic.py
"""
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from server_process import Server  # noqa: E402

if os.environ.get("QWENRT_SANITIZED"):
    print("skipping: random 0.8B weights under sanitizers take too long")
    sys.exit(77)


class SyntheticTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--synthetic", "0.8b", "--ctx-size", "256", "--max-seqs", "2")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_token_ids_in_fixed_length_out(self):
        status, body, _ = self.server.request("POST", "/v1/completions", {"prompt": [11, 22, 33, 44], "max_tokens": 3, "ignore_eos": True,
                                                                          "temperature": 0})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["model"], "synthetic-0.8b")
        self.assertEqual(body["usage"]["completion_tokens"], 3)
        self.assertEqual(body["choices"][0]["finish_reason"], "length")
        self.assertRegex(body["choices"][0]["text"], r"^(<\d+>){3}$")  # the placeholder text of each id

    def test_text_routes_say_why(self):
        for path, body, field in (("/v1/completions", {"prompt": "hello"}, "prompt"),
                                  ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]}, "messages"),
                                  ("/tokenize", {"prompt": "x"}, "prompt"), ("/detokenize", {"tokens": [1]}, "tokens")):
            status, err, _ = self.server.request("POST", path, body)
            self.assertEqual((status, err["error"]["param"]), (400, field), err)
            self.assertIn("--synthetic", err["error"]["message"])
        status, err, _ = self.server.request("POST", "/v1/messages", {"messages": [{"role": "user", "content": "x"}], "max_tokens": 2})
        self.assertEqual(status, 400)
        self.assertIn("token ids", err["error"]["message"])

    def test_load_generator(self):
        out = subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "bench", "serve_load.py"), "--url", self.server.url,
                              "--concurrency", "2", "--requests", "2", "--warmup", "0", "--prompt-tokens", "16", "--output-tokens", "4",
                              "--json"], capture_output=True, text=True, timeout=300)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        report = json.loads(out.stdout)
        self.assertEqual((report["requests"], report["errors"]), (2, 0))
        self.assertAlmostEqual(report["output_tok_s"] * report["wall_s"], 8, places=6)  # 2 requests x 4 tokens
        self.assertGreater(report["ttft_ms"]["p50"], 0)
        self.assertGreater(report["itl_ms"]["p50"], 0)
        self.assertLessEqual(report["itl_ms"]["p50"], report["itl_ms"]["p99"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
