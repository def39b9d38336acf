#!/usr/bin/env python3
"""qwenrt serve --mixed-steps through the official `openai` client: while a long prompt prefills
in 16-token windows, the decoding requests' rows ride in its window steps (qwenrt_mixed_steps_total
moves), and every answer (greedy and seeded sampled texts, finish reasons, usage) is the one a server
with --mixed-steps off gives; the option's refusals. Demo model on the CPU, 127.0.0.1. Exits 77
(CTest: skipped) when the client package is missing.

    QWENRT_CLI=build/dev/qwenrt python3 tests/server/test_mixed_steps.py
"""
import os
import subprocess
import sys
import unittest
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_process import CLI, CLIENT_TIMEOUT, Server, import_clients  # noqa: E402

(openai,) = import_clients("openai")

REQUESTS = [
    dict(prompt="Once upon a time", max_tokens=40, temperature=0),
    dict(prompt="The little robot", max_tokens=32, temperature=0.8, seed=7),
    dict(prompt=list(range(300, 900)), max_tokens=6, temperature=0),  # 600 prompt tokens: ~38 windows
]


def answer(client, request):
    r = client.completions.create(model="demo", extra_body={"ignore_eos": True}, **request)
    return r.choices[0].text, r.choices[0].finish_reason, (r.usage.prompt_tokens, r.usage.completion_tokens)


class MixedStepsServerTest(unittest.TestCase):
    def answers(self, mode):
        server = Server("--max-seqs", "4", "--prefill-chunk", "16", "--mixed-steps", mode)
        try:
            client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=CLIENT_TIMEOUT)
            # The short ones start decoding while the long prompt is still in its windows.
            with ThreadPoolExecutor(len(REQUESTS)) as pool:
                together = list(pool.map(lambda r: answer(client, r), REQUESTS))
            metrics = server.wait_idle()
        finally:
            self.assertEqual(server.stop(), 0)
        return together, metrics

    def test_same_answers_with_decode_rows_in_the_windows(self):
        apart, apart_metrics = self.answers("off")
        mixed, mixed_metrics = self.answers("on")
        self.assertEqual(apart_metrics["qwenrt_mixed_steps_total"], 0)
        self.assertGreater(mixed_metrics["qwenrt_mixed_steps_total"], 5)
        self.assertEqual(mixed, apart)
        for (text, finish, usage), request in zip(mixed, REQUESTS):
            self.assertEqual(finish, "length")
            self.assertEqual(usage[1], request["max_tokens"])
            self.assertTrue(text)

    def test_refusals(self):
        for args, words in [(["--mixed-steps", "maybe"], "takes on or off"),
                            (["--mixed-steps", "on", "--deterministic"], "--deterministic")]:
            p = subprocess.run([CLI, "serve", "--port", "0", *args], capture_output=True, text=True, timeout=60)
            self.assertNotEqual(p.returncode, 0, args)
            self.assertRegex(p.stderr, words, args)


if __name__ == "__main__":
    unittest.main()
