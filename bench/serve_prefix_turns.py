#!/usr/bin/env python3
"""The prefix cache on a chat's second turn: starts `qwenrt serve` (the demo model unless more
arguments say otherwise), sends a ~4k-token first turn and a second turn that resends it, and prints
each turn's prompt, cached and prefilled tokens (from usage and /metrics) and wall time.

    QWENRT_CLI=build/dev/qwenrt python3 bench/serve_prefix_turns.py [serve args, e.g. --cache-bytes 0]
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "server"))
import test_clients  # noqa: E402  (its Server class starts and stops the binary)


def main():
    server = test_clients.Server("--max-seqs", "8", *sys.argv[1:])
    try:
        client = server.openai()
        model = client.models.list().data[0].id
        story = " ".join(f"Fact {i}: the lighthouse keeper counted {i * 7 % 101} gulls on day {i}." for i in range(160))
        first = [{"role": "user", "content": story + " What did the keeper count?"}]
        chat = dict(model=model, max_tokens=16, temperature=0, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
        turns = [first]
        for turn in range(2):
            before = server.metrics()
            start = time.time()
            r = client.chat.completions.create(messages=turns[-1], **chat)
            seconds = time.time() - start
            after = server.metrics()
            prefilled = after["qwenrt_prefill_tokens_total"] - before["qwenrt_prefill_tokens_total"]
            print(f"turn {turn + 1}: prompt {r.usage.prompt_tokens} cached {r.usage.prompt_tokens_details.cached_tokens} "
                  f"prefilled {prefilled:.0f} wall {seconds:.2f} s; prefix cache {after['qwenrt_prefix_cache_bytes'] / 2**20:.1f} MiB "
                  f"in {after['qwenrt_prefix_cache_entries']:.0f} snapshots")
            turns.append(turns[-1] + [{"role": "assistant", "content": r.choices[0].message.content}, {"role": "user", "content": "And on day 3?"}])
    finally:
        server.stop()


if __name__ == "__main__":
    main()
