#!/usr/bin/env python3
"""qwenrt serve --speculative mtp through the official `openai` client: the same answers (text,
token logprobs, finish reasons, usage) as a server without speculation, for greedy and seeded
sampled requests sent one at a time and several at once, with stop strings and n = 2; the draft
counters of /metrics move; a refusal on --synthetic weights (no MTP block). Demo model, 127.0.0.1.
Exits 77 (CTest: skipped) when the client package is missing.

    QWENRT_CLI=build/dev/qwenrt python3 tests/server/test_speculative.py
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
    dict(prompt="The little robot", max_tokens=33, temperature=0.8, seed=7, logprobs=2),
    dict(prompt="In the morning the cat", max_tokens=25, temperature=1.0, top_p=0.9, seed=11),
    dict(prompt="Once upon a time", max_tokens=30, temperature=0, logprobs=1),  # + a stop string, chosen below
    dict(prompt="Tell me", max_tokens=20, temperature=0.7, seed=3, n=2),
]


def answer(client, request):
    r = client.completions.create(model="demo", extra_body={"ignore_eos": True}, **request)
    out = []
    for c in sorted(r.choices, key=lambda c: c.index):
        lp = c.logprobs
        out.append((c.text, c.finish_reason, lp.tokens if lp else None, lp.token_logprobs if lp else None,
                    lp.top_logprobs if lp else None))
    return out, (r.usage.prompt_tokens, r.usage.completion_tokens)


class SpeculativeServerTest(unittest.TestCase):
    def answers(self, *args, requests=REQUESTS):
        server = Server("--max-seqs", "8", *args)
        try:
            client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=CLIENT_TIMEOUT)
            alone = [answer(client, r) for r in requests]
            with ThreadPoolExecutor(len(requests)) as pool:
                together = list(pool.map(lambda r: answer(client, r), requests))
            metrics = server.wait_idle()
        finally:
            self.assertEqual(server.stop(), 0)
        return alone, together, metrics

    def stop_inside(self):
        """A stop string that first occurs a few tokens into request 3's greedy text: whatever the
        demo model says, the stop lands inside the answer."""
        server = Server("--max-seqs", "1")
        try:
            client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=CLIENT_TIMEOUT)
            text = answer(client, dict(REQUESTS[3]))[0][0][0]
        finally:
            self.assertEqual(server.stop(), 0)
        for at in range(min(12, len(text) // 3), len(text) - 8):
            if text.find(text[at:at + 8]) == at:
                return text[at:at + 8], text[:at]
        self.fail(f"no stop string found in {text!r}")

    def test_same_answers_and_counters(self):
        stop, before = self.stop_inside()
        requests = [dict(r) for r in REQUESTS]
        requests[3]["stop"] = [stop]
        plain_alone, plain_together, plain_metrics = self.answers(requests=requests)
        spec_alone, spec_together, metrics = self.answers("--speculative", "mtp", "--draft-tokens", "3", "--spec-max-seqs", "8", requests=requests)
        for i, request in enumerate(requests):
            self.assertEqual(plain_alone[i], plain_together[i], f"request {i} plain: alone and together")
            self.assertEqual(plain_alone[i], spec_alone[i], f"request {i}: speculative alone")
            self.assertEqual(plain_alone[i], spec_together[i], f"request {i}: speculative together")
        self.assertEqual(plain_alone[3][0][0][1], "stop")  # the stop string ended it
        self.assertEqual(plain_alone[3][0][0][0], before)
        self.assertEqual(plain_metrics["qwenrt_spec_draft_tokens_total"], 0)
        self.assertGreater(metrics["qwenrt_spec_draft_tokens_total"], 0)
        self.assertGreater(metrics["qwenrt_spec_accepted_tokens_total"], 0)
        self.assertLessEqual(metrics["qwenrt_spec_accepted_tokens_total"], metrics["qwenrt_spec_draft_tokens_total"])
        self.assertGreater(metrics["qwenrt_spec_rounds_total"], 0)
        self.assertAlmostEqual(metrics["qwenrt_spec_accepted_per_round"],
                               metrics["qwenrt_spec_accepted_tokens_total"] / metrics["qwenrt_spec_rounds_total"], places=6)
        self.assertEqual(metrics["qwenrt_generation_tokens_total"], plain_metrics["qwenrt_generation_tokens_total"])

    def test_refusals(self):
        for args, words in [(["--spec-max-seqs", "2"], "goes with --speculative mtp"),
                            (["--speculative", "draft"], "takes 'mtp'"),
                            (["--draft-tokens", "2"], "needs --speculative mtp"),
                            (["--device", "cuda", "--speculative", "mtp"], "CPU only|CUDA|GPU")]:
            p = subprocess.run([CLI, "serve", "--port", "0", *args], capture_output=True, text=True, timeout=60)
            self.assertNotEqual(p.returncode, 0, args)
            self.assertRegex(p.stderr, words, args)


if __name__ == "__main__":
    unittest.main()
