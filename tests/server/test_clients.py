#!/usr/bin/env python3
"""qwenrt serve checked with the official `openai` and `anthropic` Python clients (and raw HTTP for
error shapes, disconnects and shutdown). Starts the real binary on 127.0.0.1 with --port 0 and the
demo model. Exits 77 (CTest: skipped) when the client packages are missing.

    QWENRT_CLI=build/rel/qwenrt python3 tests/server/test_clients.py
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_process import CLI, CLIENT_TIMEOUT, Server as ServerProcess, import_clients  # noqa: E402

anthropic, openai = import_clients("anthropic", "openai")


class Server(ServerProcess):
    """A `qwenrt serve` process with the official clients pointed at it."""

    def openai(self, key="none", **kw):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0, timeout=CLIENT_TIMEOUT, **kw)

    def anthropic(self, key="none"):
        return anthropic.Anthropic(base_url=self.url, api_key=key, max_retries=0, timeout=CLIENT_TIMEOUT)


def greedy_run(prompt, max_tokens):
    """What `qwenrt run` answers (greedy)."""
    out = subprocess.run([CLI, "run", "-p", prompt, "--temperature", "0", "-n", str(max_tokens), "--json", "--threads", "2"],
                         capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


class ServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--max-seqs", "16")
        cls.client = cls.server.openai()
        cls.model = cls.client.models.list().data[0].id

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    # OpenAI chat
    def test_health_and_models(self):
        self.assertEqual(self.server.request("GET", "/health")[0], 200)
        models = self.client.models.list().data
        self.assertEqual(len(models), 1)
        self.assertTrue(models[0].id)

    def test_chat_matches_run(self):
        ref = greedy_run("Hello, who are you?", 24)
        r = self.client.chat.completions.create(model=self.model, messages=[{"role": "user", "content": "Hello, who are you?"}],
                                                max_tokens=24, temperature=0)
        msg = r.choices[0].message
        self.assertEqual((msg.model_extra or {}).get("reasoning_content", ""), ref["reasoning"])
        self.assertEqual(msg.content or "", ref["text"])
        self.assertEqual(r.choices[0].finish_reason, ref["finish_reason"])
        self.assertEqual(r.usage.completion_tokens, len(ref["tokens"]))
        self.assertGreater(r.usage.prompt_tokens, 0)
        self.assertEqual(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens)

    def test_chat_stream_equals_whole(self):
        kw = dict(model=self.model, messages=[{"role": "system", "content": "Be brief."},
                                              {"role": "user", "content": [{"type": "text", "text": "Tell me "},
                                                                           {"type": "text", "text": "a story."}]}],
                  max_completion_tokens=30, temperature=0)
        whole = self.client.chat.completions.create(**kw)
        reasoning, content, usage, finish = "", "", None, None
        for chunk in self.client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw):
            if chunk.usage:
                usage = chunk.usage
            for c in chunk.choices:
                reasoning += (c.delta.model_extra or {}).get("reasoning_content") or ""
                content += c.delta.content or ""
                finish = c.finish_reason or finish
        self.assertEqual(reasoning, (whole.choices[0].message.model_extra or {}).get("reasoning_content", ""))
        self.assertEqual(content, whole.choices[0].message.content or "")
        self.assertTrue(reasoning)  # the demo model's Qwen 3.5 template opens <think>
        self.assertEqual(finish, whole.choices[0].finish_reason)
        self.assertEqual(usage.completion_tokens, whole.usage.completion_tokens)

    def test_thinking_off(self):
        r = self.client.chat.completions.create(model=self.model, messages=[{"role": "user", "content": "Hi"}], max_tokens=12,
                                                temperature=0, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
        self.assertFalse((r.choices[0].message.model_extra or {}).get("reasoning_content"))
        self.assertTrue(r.choices[0].message.content)

    def test_sampling_parameters_and_seed(self):
        kw = dict(model=self.model, messages=[{"role": "user", "content": "Say something"}], max_tokens=16, temperature=0.9,
                  top_p=0.9, presence_penalty=0.5, frequency_penalty=0.2, seed=1234, stop=["zzzz", "qqqq"],
                  extra_body={"top_k": 40, "min_p": 0.05, "repetition_penalty": 1.1})
        a = self.client.chat.completions.create(**kw)
        b = self.client.chat.completions.create(**kw)
        self.assertEqual(a.choices[0].message.model_extra.get("reasoning_content"),
                         b.choices[0].message.model_extra.get("reasoning_content"))

    def test_stop_string(self):
        whole = self.client.completions.create(model=self.model, prompt="The meaning of life is", max_tokens=20, temperature=0)
        text = whole.choices[0].text
        self.assertGreater(len(text), 8)
        stop = text[len(text) // 2:len(text) // 2 + 3]
        cut = self.client.completions.create(model=self.model, prompt="The meaning of life is", max_tokens=20, temperature=0, stop=stop)
        self.assertEqual(cut.choices[0].text, text[:text.index(stop)])
        self.assertEqual(cut.choices[0].finish_reason, "stop")

    def test_tools_round_trip(self):
        tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                                   "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                                  "required": ["city"]}}}]
        messages = [{"role": "user", "content": "Weather in Paris?"},
                    {"role": "assistant", "content": None, "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"}]
        r = self.client.chat.completions.create(model=self.model, messages=messages, tools=tools, tool_choice="auto", max_tokens=16,
                                                temperature=0)
        self.assertIn(r.choices[0].finish_reason, ("length", "stop", "tool_calls"))
        chunks = list(self.client.chat.completions.create(model=self.model, messages=messages, tools=tools, max_tokens=16,
                                                          temperature=0, stream=True))
        self.assertEqual(chunks[-1].choices[0].finish_reason, r.choices[0].finish_reason)
        # The rendered prompt carries the tool definitions and the call.
        status, tok, _ = self.server.request("POST", "/tokenize", {"messages": messages, "tools": tools})
        self.assertEqual(status, 200)
        status, text, _ = self.server.request("POST", "/detokenize", {"tokens": tok["tokens"]})
        self.assertIn("get_weather", text["prompt"])
        self.assertIn("18 C, sunny", text["prompt"])

    # OpenAI completions
    def test_completion_token_ids(self):
        status, tok, _ = self.server.request("POST", "/tokenize", {"prompt": "Once upon a time"})
        ids = tok["tokens"]
        ref = subprocess.run([CLI, "generate", "--tokens", ",".join(map(str, ids)), "--max-tokens", "12", "--temperature", "0",
                              "--json", "--threads", "2", "--model", os.path.dirname(CLI) and self._model_dir()],
                             capture_output=True, text=True, timeout=60)
        r = self.client.completions.create(model=self.model, prompt=ids, max_tokens=12, temperature=0, extra_body={"ignore_eos": True})
        self.assertEqual(r.usage.completion_tokens, 12)
        self.assertEqual(r.usage.prompt_tokens, len(ids))
        self.assertEqual(r.choices[0].finish_reason, "length")
        if ref.returncode == 0:
            # The server's text leaves out special tokens (as OpenAI's and vLLM's do); `generate` does
            # not stop at them, so the greedy ids may hold some (<|im_end|>, <|endoftext|>).
            with open(os.path.join(self._model_dir(), "tokenizer.json"), encoding="utf-8") as f:
                special = {t["id"] for t in json.load(f)["added_tokens"] if t.get("special")}
            gen = [t for t in json.loads(ref.stdout)["tokens"] if t not in special]
            status, text, _ = self.server.request("POST", "/detokenize", {"tokens": gen})
            self.assertEqual(r.choices[0].text, text["prompt"])
        streamed = "".join(c.choices[0].text for c in self.client.completions.create(
            model=self.model, prompt=ids, max_tokens=12, temperature=0, stream=True, extra_body={"ignore_eos": True}) if c.choices)
        self.assertEqual(streamed, r.choices[0].text)

    def _model_dir(self):
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models")
        return next(os.path.join(root, d) for d in sorted(os.listdir(root)) if os.path.exists(os.path.join(root, d, "config.json")))

    def test_tokenize_round_trip(self):
        text = "Hello world, ünïcode ✓ and <think> tags"
        status, tok, _ = self.server.request("POST", "/tokenize", {"prompt": text})
        self.assertEqual(status, 200)
        self.assertEqual(tok["count"], len(tok["tokens"]))
        status, back, _ = self.server.request("POST", "/detokenize", {"tokens": tok["tokens"]})
        self.assertEqual(back["prompt"], text)

    # Anthropic messages
    def test_anthropic_messages(self):
        client = self.server.anthropic()
        kw = dict(model=self.model, max_tokens=24, temperature=0, system="You are terse.",
                  messages=[{"role": "user", "content": [{"type": "text", "text": "Hello there"}]}])
        m = client.messages.create(**kw)
        self.assertEqual(m.role, "assistant")
        # The demo model may end its answer before the budget: either way the usage says so.
        self.assertIn(m.stop_reason, ("max_tokens", "end_turn"))
        if m.stop_reason == "max_tokens":
            self.assertEqual(m.usage.output_tokens, 24)
        self.assertLessEqual(m.usage.output_tokens, 24)  # the end-of-turn token counts when it ends the answer
        kinds = [b.type for b in m.content]
        self.assertIn("thinking", kinds)
        with client.messages.stream(**kw) as s:
            events = [e.type for e in s]
            final = s.get_final_message()
        self.assertEqual(events[0], "message_start")
        self.assertEqual(events[-1], "message_stop")
        self.assertIn("content_block_start", events)
        self.assertIn("message_delta", events)
        self.assertEqual([b.model_dump() for b in final.content], [b.model_dump() for b in m.content])
        self.assertEqual(final.stop_reason, m.stop_reason)

    def test_anthropic_tools_and_history(self):
        client = self.server.anthropic()
        m = client.messages.create(
            model=self.model, max_tokens=10, temperature=0, stop_sequences=["zzzz"],
            tools=[{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
            messages=[{"role": "user", "content": "Weather in Paris?"},
                      {"role": "assistant", "content": [{"type": "thinking", "thinking": "I should call the tool.", "signature": ""},
                                                        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
                      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C"}]}],
            extra_body={"thinking": {"type": "disabled"}})
        self.assertIn(m.stop_reason, ("max_tokens", "end_turn", "tool_use"))

    def test_anthropic_errors(self):
        client = self.server.anthropic()
        with self.assertRaises(anthropic.BadRequestError) as e:
            client.messages.create(model=self.model, max_tokens=-5, messages=[{"role": "user", "content": "x"}])
        self.assertEqual(e.exception.body["type"], "error")
        self.assertIn("max_tokens", e.exception.body["error"]["message"])

    # Errors
    def test_errors_name_the_field(self):
        cases = [({"messages": "hi"}, "messages"), ({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"}, "temperature"),
                 ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 10 ** 9}, "max_tokens"),
                 ({"messages": [{"role": "user", "content": "x"}], "top_p": 3}, "top_p"),
                 ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
                 ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages[0].content[0].type"),
                 ({"messages": [{"role": "user", "content": "x"}], "n": 17}, "n"),
                 ({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2}, "top_logprobs"),
                 ({"messages": [{"role": "user", "content": "x"}], "logprobs": True, "top_logprobs": 21}, "top_logprobs"),
                 ({"messages": [{"role": "user", "content": "x"}], "stop": [1]}, "stop[0]")]
        for body, field in cases:
            status, err, _ = self.server.request("POST", "/v1/chat/completions", body)
            self.assertEqual(status, 400, body)
            self.assertEqual(err["error"]["param"], field, err)
            self.assertEqual(err["error"]["type"], "invalid_request_error")
        for raw in ("{", "[]", "{\"messages\": " + "[" * 500 + "]" * 500 + "}", "\xff"):
            status, err, _ = self.server.request("POST", "/v1/chat/completions", raw)
            self.assertEqual(status, 400, raw[:20])
            self.assertIn("error", err)
        status, err, _ = self.server.request("POST", "/v1/completions", {"prompt": [99999999]})
        self.assertEqual((status, err["error"]["param"]), (400, "prompt[0]"))
        with self.assertRaises(openai.BadRequestError) as e:
            self.client.chat.completions.create(model=self.model, messages=[{"role": "user", "content": "x"}], max_tokens=0)
        self.assertEqual(e.exception.body["param"], "max_tokens")
        status, err, _ = self.server.request("GET", "/v1/nothing")
        self.assertEqual(status, 404)
        self.assertEqual(err["error"]["type"], "not_found_error")
        status, err, _ = self.server.request("POST", "/v1/chat/completions", b"{" + b" " * (9 << 20) + b"}")
        self.assertEqual(status, 413)

    # Batching
    def test_greedy_tokens_do_not_depend_on_the_load(self):
        # The same tokens and bitwise the same logprobs (a float32 printed to round-trip) of each token.
        prompt = "Invariance: the same greedy answer whatever else runs."
        kw = dict(model=self.model, max_tokens=40, temperature=0, logprobs=2, extra_body={"ignore_eos": True})

        def answer():
            c = self.client.completions.create(prompt=prompt, **kw).choices[0]
            return c.text, c.logprobs.token_logprobs, c.logprobs.top_logprobs

        alone = answer()
        self.assertEqual(len(alone[1]), 40)

        def other(i):
            return self.client.completions.create(model=self.model, prompt=f"Other request {i}: " + "words " * (i * 5), max_tokens=20 + i,
                                                  temperature=0.7 if i % 2 else 0, seed=i).choices[0].text

        with ThreadPoolExecutor(16) as pool:
            others = [pool.submit(other, i) for i in range(15)]
            together = pool.submit(answer)
            for f in others:
                f.result()
            self.assertEqual(together.result(), alone)

    def test_disconnect_frees_the_slot(self):
        socks = []
        for i in range(6):
            s = socket.create_connection(("127.0.0.1", self.server.port), timeout=30)
            body = json.dumps({"model": self.model, "prompt": f"disconnect {i}", "max_tokens": 4000, "stream": True, "ignore_eos": True})
            s.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
            socks.append(s)
        for s in socks:
            got = b""
            while got.count(b"data:") < 3:
                got += s.recv(4096)
            s.close()
        deadline = time.time() + 10
        while time.time() < deadline and self.server.metrics()["qwenrt_requests_running"] > 0:
            time.sleep(0.1)
        m = self.server.metrics()
        self.assertEqual(m["qwenrt_requests_running"], 0)
        self.assertEqual(m["qwenrt_free_slots"], 16)
        r = self.client.completions.create(model=self.model, prompt="still serving", max_tokens=4, extra_body={"ignore_eos": True})
        self.assertEqual(r.usage.completion_tokens, 4)


class EngineApiTest(unittest.TestCase):
    """n choices, logprobs, the prefix cache (usage and /metrics), context and pool limits."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server("--max-seqs", "8", "--prefill-chunk", "256")
        cls.client = cls.server.openai()
        cls.model = cls.client.models.list().data[0].id

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_chat_n_and_logprobs_whole_and_streamed(self):
        kw = dict(model=self.model, messages=[{"role": "user", "content": "Name three colours."}], max_tokens=12, temperature=1.0,
                  seed=11, n=3, logprobs=True, top_logprobs=2, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
        whole = self.client.chat.completions.create(**kw)
        self.assertEqual([c.index for c in whole.choices], [0, 1, 2])
        counts = [len(c.logprobs.content) for c in whole.choices]
        self.assertEqual(sum(counts), whole.usage.completion_tokens)
        for c in whole.choices:
            for t in c.logprobs.content:
                self.assertLessEqual(t.logprob, 0.0)
                self.assertEqual(len(t.top_logprobs), 2)
                self.assertGreaterEqual(t.top_logprobs[0].logprob, t.top_logprobs[1].logprob)
                self.assertGreaterEqual(t.top_logprobs[0].logprob, t.logprob)
                self.assertEqual(bytes(t.bytes).decode(errors="replace"), t.token)
        # Each choice samples its own stream: with the same seed, streamed equals whole.
        texts, tokens, finish, usage = {}, {}, {}, None
        for chunk in self.client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw):
            usage = chunk.usage or usage
            for c in chunk.choices:
                texts[c.index] = texts.get(c.index, "") + (c.delta.content or "")
                if c.logprobs and c.logprobs.content:
                    tokens.setdefault(c.index, []).extend(t.token for t in c.logprobs.content)
                finish[c.index] = c.finish_reason or finish.get(c.index)
        for c in whole.choices:
            self.assertEqual(texts[c.index], c.message.content or "")
            self.assertEqual(tokens[c.index], [t.token for t in c.logprobs.content])
            self.assertEqual(finish[c.index], c.finish_reason)
        self.assertEqual(usage.completion_tokens, whole.usage.completion_tokens)

    def test_completion_logprobs(self):
        kw = dict(model=self.model, prompt="The capital of France is", max_tokens=8, temperature=0, logprobs=3, extra_body={"ignore_eos": True})
        whole = self.client.completions.create(**kw)
        lp = whole.choices[0].logprobs
        self.assertEqual(len(lp.tokens), 8)
        self.assertEqual(len(lp.token_logprobs), 8)
        # With ignore_eos the answer may run past <|endoftext|>: special tokens are listed with their
        # logprobs and left out of the text (as skip_special_tokens does).
        self.assertEqual("".join(t for t in lp.tokens if not re.fullmatch(r"<\|[a-z_]+\|>", t)), whole.choices[0].text)
        self.assertEqual(lp.text_offset, sorted(lp.text_offset))
        for token, logprob, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
            self.assertLessEqual(len(top), 3)
            self.assertAlmostEqual(max(top.values()), logprob, places=5)  # greedy: the best
        streamed = []
        for chunk in self.client.completions.create(stream=True, **kw):
            if chunk.choices and chunk.choices[0].logprobs:
                streamed.extend(chunk.choices[0].logprobs.tokens)
        self.assertEqual(streamed, lp.tokens)

    def test_second_turn_prefills_only_new_tokens(self):
        story = " ".join(f"Fact {i}: the lighthouse keeper counted {i * 7 % 101} gulls on day {i}." for i in range(160))
        first = [{"role": "user", "content": story + " What did the keeper count?"}]
        chat = dict(model=self.model, max_tokens=16, temperature=0, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
        r1 = self.client.chat.completions.create(messages=first, **chat)
        self.assertGreater(r1.usage.prompt_tokens, 3500)
        self.assertEqual(r1.usage.prompt_tokens_details.cached_tokens, 0)
        second = first + [{"role": "assistant", "content": r1.choices[0].message.content}, {"role": "user", "content": "And on day 3?"}]
        _, t1, _ = self.server.request("POST", "/tokenize", {"messages": first})
        _, t2, _ = self.server.request("POST", "/tokenize", {"messages": second})
        common = next((i for i, (a, b) in enumerate(zip(t1["tokens"], t2["tokens"])) if a != b), len(t1["tokens"]))
        before = self.server.metrics()
        r2 = self.client.chat.completions.create(messages=second, **chat)
        after = self.server.metrics()
        cached = r2.usage.prompt_tokens_details.cached_tokens
        # Turn 1 left snapshots every 2048 tokens and at the last multiple of 64 before its last token;
        # turn 2 resumes from the longest one within the prefix the two prompts share.
        n1 = len(t1["tokens"])
        points = list(range(2048, n1, 2048)) + [(n1 - 1) // 64 * 64]
        self.assertEqual(cached, max(p for p in points if p <= min(common, r2.usage.prompt_tokens - 1)))
        # So it prefills the new tokens and fewer than 64 + a few of the old ones.
        self.assertLess(r2.usage.prompt_tokens - cached, (r2.usage.prompt_tokens - common) + 64 + 8)
        self.assertEqual(after["qwenrt_prefill_tokens_total"] - before["qwenrt_prefill_tokens_total"], r2.usage.prompt_tokens - cached)
        self.assertEqual(after["qwenrt_prefix_cache_hits_total"] - before["qwenrt_prefix_cache_hits_total"], 1)
        # Anthropic reports the same prefix as cache_read_input_tokens (input_tokens: the rest).
        a = self.server.anthropic().messages.create(model=self.model, max_tokens=4, messages=second, temperature=0)
        self.assertGreaterEqual(a.usage.cache_read_input_tokens, cached)
        self.assertGreater(a.usage.input_tokens, 0)

    def test_metrics(self):
        self.client.completions.create(model=self.model, prompt="metrics", max_tokens=3)
        status, text, headers = self.server.request("GET", "/metrics")
        self.assertEqual(status, 200)
        for name in ("qwenrt_time_to_first_token_seconds_bucket{le=\"+Inf\"}", "qwenrt_inter_token_latency_seconds_count",
                     "qwenrt_http_responses_total{code=\"200\"}", "qwenrt_kv_blocks_total", "qwenrt_kv_bytes_used", "qwenrt_state_bytes_used",
                     "qwenrt_prefix_cache_bytes", "qwenrt_prefix_cache_misses_total", "qwenrt_sequences_finished_total{reason=\"length\"}"):
            self.assertIn("\n" + name + " ", text)
        m = self.server.metrics()
        self.assertGreater(m["qwenrt_kv_blocks_total"], 0)
        # Where the time went: the prompt's window and the decode steps, each with rows and time.
        steps = {(k, kind): float(v) for k, kind, v in re.findall(r'^(qwenrt_model_step\w*)\{kind="(\w+)"\} (\S+)$', text, re.M)}
        for kind in ("decode", "window"):
            self.assertGreater(steps[("qwenrt_model_steps_total", kind)], 0)
            self.assertGreaterEqual(steps[("qwenrt_model_step_rows_total", kind)], steps[("qwenrt_model_steps_total", kind)])
            self.assertGreater(steps[("qwenrt_model_step_seconds_total", kind)], 0)
        self.assertGreater(m["qwenrt_scheduler_busy_seconds_total"], 0)
        deadline = time.time() + 10
        while time.time() < deadline and self.server.metrics()["qwenrt_requests_running"] > 0:
            time.sleep(0.05)
        self.assertEqual(self.server.metrics()["qwenrt_state_bytes_used"], 0)

    def test_prompt_over_the_context_is_400(self):
        status, err, _ = self.server.request("POST", "/v1/completions", {"prompt": [1] * 9000, "max_tokens": 1})
        self.assertEqual(status, 400)
        self.assertEqual(err["error"]["type"], "invalid_request_error")
        status, err, _ = self.server.request("POST", "/v1/messages", {"max_tokens": 4, "messages": [{"role": "user", "content": "word " * 9000}]})
        self.assertEqual(status, 400)
        self.assertEqual(err["type"], "error")
        self.assertEqual(err["error"]["type"], "invalid_request_error")


class LimitsTest(unittest.TestCase):
    def test_api_key(self):
        server = Server("--api-key", "sekrit")
        try:
            self.assertEqual(server.request("GET", "/health")[0], 200)
            with self.assertRaises(openai.AuthenticationError):
                server.openai("wrong").models.list()
            with self.assertRaises(anthropic.AuthenticationError):
                server.anthropic("wrong").messages.create(model="m", max_tokens=4, messages=[{"role": "user", "content": "x"}])
            status, err, _ = server.request("GET", "/v1/models")
            self.assertEqual((status, err["error"]["type"]), (401, "authentication_error"))
            self.assertEqual(len(server.openai("sekrit").models.list().data), 1)
            m = server.anthropic("sekrit").messages.create(model="m", max_tokens=4, messages=[{"role": "user", "content": "x"}])
            self.assertEqual(m.usage.output_tokens, 4)
        finally:
            self.assertEqual(server.stop(), 0)

    def test_full_queue_is_429(self):
        server = Server("--max-seqs", "1", "--max-queue", "1")
        try:
            def call(i):
                return server.request("POST", "/v1/completions", {"prompt": f"flood {i}", "max_tokens": 64, "ignore_eos": True})

            with ThreadPoolExecutor(8) as pool:
                results = list(pool.map(call, range(8)))
            statuses = sorted(r[0] for r in results)
            self.assertIn(429, statuses)
            self.assertIn(200, statuses)
            self.assertTrue(all(s in (200, 429) for s in statuses), statuses)
            limited = next(r for r in results if r[0] == 429)
            self.assertEqual(limited[1]["error"]["type"], "rate_limit_error")
            self.assertIn("Retry-After", limited[2])
        finally:
            self.assertEqual(server.stop(), 0)

    def test_sigterm_drains(self):
        server = Server()
        result = {}

        def stream():
            client = server.openai()
            n, finish = 0, None
            for c in client.completions.create(model="m", prompt="drain me", max_tokens=150, stream=True, extra_body={"ignore_eos": True}):
                n += 1 if c.choices and c.choices[0].text else 0
                finish = (c.choices[0].finish_reason if c.choices else None) or finish
                result.setdefault("first", time.time())
            result["finish"] = finish

        t = threading.Thread(target=stream)
        t.start()
        while "first" not in result:
            time.sleep(0.01)
        server.proc.send_signal(signal.SIGTERM)
        t.join(60)
        self.assertEqual(result.get("finish"), "length")
        self.assertEqual(server.proc.wait(timeout=30), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
