"""Turn question-answer items (qa_sources.py) into chat documents in Qwen 3.5's template.

Each item becomes one conversation; its shape is chosen by a hash of the item's key, so the
corpus is the same on every run:

  thinking      user question -> assistant `<think>` short reasoning `</think>` answer
  no thinking   the same with an empty think block (what enable_thinking=false prompts with)
  multi-turn    the question, its follow-ups and the next item of the same source as later
                turns; earlier assistant turns are rendered as history (no think block, as the
                template renders them), the last one thinking or not
  tool call     the four tools below in the system prompt; the assistant reasons, calls the tool
                in Qwen 3.5's XML form, reads the <tool_response> and answers

A few conversations carry a short system prompt. The reasoning is always one to three sentences
that name the subject and the plan, and it always closes before the answer.
"""

from __future__ import annotations

import hashlib
from typing import Callable, Iterator

from qa_sources import QA, pick

# Shares of the conversation shapes (cumulative thresholds on a hash in [0, 1)).
SHAPES = [("thinking", 0.45), ("plain", 0.70), ("multi", 0.87), ("tool", 1.0)]
SYSTEM_SHARE = 0.1

SYSTEM_PROMPTS = ["You are a helpful assistant.", "You are a helpful assistant. Answer briefly.",
                  "You are qwenrt's demo model. Answer the user's questions."]

TOOLS = [
    {"type": "function", "function": {"name": "lookup_word", "description": "Look up a word in a dictionary.",
                                      "parameters": {"type": "object", "properties": {"word": {"type": "string", "description": "The word"}},
                                                     "required": ["word"]}}},
    {"type": "function", "function": {"name": "bible_verse", "description": "Get the text of a Bible verse (World English Bible).",
                                      "parameters": {"type": "object", "properties": {"reference": {"type": "string", "description": "Book chapter:verse"}},
                                                     "required": ["reference"]}}},
    {"type": "function", "function": {"name": "python_docs", "description": "Search the Python documentation.",
                                      "parameters": {"type": "object", "properties": {"name": {"type": "string", "description": "A module, function or term"}},
                                                     "required": ["name"]}}},
    {"type": "function", "function": {"name": "sqlite_docs", "description": "Search the SQLite documentation.",
                                      "parameters": {"type": "object", "properties": {"topic": {"type": "string", "description": "A function or topic"}},
                                                     "required": ["topic"]}}},
]

# Hand-written exchanges about the model itself (repository licence), a few phrasings each.
SMALL_TALK = [
    (["Hello!", "Hi.", "Hello, who are you?", "Hi there!"],
     "Hello! I am a small demo model that ships with qwenrt. I can answer simple questions about words, the Bible, "
     "Python and SQLite.",
     "The user greets me. I will greet them back and say what I can help with."),
    (["What can you do?", "What do you know about?", "How can you help me?"],
     "I am a very small language model. I know word definitions, Bible verses, some quotations, and the Python and SQLite "
     "documentation. Ask me about one of those.",
     "The user asks what I can do. I will list the subjects of my training data."),
    (["Thank you.", "Thanks!", "Thanks for the help."],
     "You are welcome.", "The user thanks me. A short reply is enough."),
]


def fraction(key: str) -> float:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little") / 2**64


def shape_of(key: str) -> str:
    f = fraction("shape/" + key)
    return next(name for name, top in SHAPES if f < top)


def assistant(content: str, thought: str | None) -> dict:
    """An assistant message; `thought` None or '' renders the empty think block of no-thinking mode."""
    return {"role": "assistant", "content": content, "reasoning_content": thought or ""}


def conversation(qa: QA, nxt: QA | None) -> tuple[list[dict], list[dict] | None]:
    """(messages, tools) for one item; `nxt` is the following item of the same source (multi-turn)."""
    shape = shape_of(qa.key)
    if shape == "tool" and qa.tool is None:
        shape = "thinking"
    messages: list[dict] = []
    if fraction("system/" + qa.key) < SYSTEM_SHARE:
        messages.append({"role": "system", "content": pick(SYSTEM_PROMPTS, "sp/" + qa.key)})
    think_last = fraction("think/" + qa.key) < 0.6
    if shape == "thinking":
        messages += [{"role": "user", "content": qa.question}, assistant(qa.answer, qa.thought)]
        return messages, None
    if shape == "plain":
        messages += [{"role": "user", "content": qa.question}, assistant(qa.answer, None)]
        return messages, None
    if shape == "multi":
        turns = [(qa.question, qa.answer, qa.thought)] + [(q, a, None) for q, a in qa.followups[:1]]
        if nxt is not None:
            turns.append((pick(["And {q}", "Another question: {q}", "{q}"], "mt/" + qa.key).format(
                q=nxt.question[0].lower() + nxt.question[1:] if nxt.question[:1].isupper() and not nxt.question.startswith(('"', "I ")) else nxt.question),
                nxt.answer, nxt.thought))
        for n, (q, a, t) in enumerate(turns):
            last = n == len(turns) - 1
            messages += [{"role": "user", "content": q},
                         assistant(a, (t or f"The user asks a follow-up question. I will answer it from what I said.") if last and think_last else None)]
        return messages, None
    # Tool call: reason, call, read the response, answer.
    name, args, result = qa.tool
    call_thought = f"{qa.thought.split('. ')[0].rstrip('.')}. I will look it up with {name}."
    answer_thought = pick(["The tool returned the entry. I will answer from it.", "I have the result; now I can answer.",
                           "The lookup found it. I will give the answer."], "tt/" + qa.key)
    messages += [
        {"role": "user", "content": qa.question},
        {"role": "assistant", "content": "", "reasoning_content": call_thought,
         "tool_calls": [{"type": "function", "function": {"name": name, "arguments": args}}]},
        {"role": "tool", "content": result},
        assistant(qa.answer, answer_thought if think_last else None),
    ]
    return messages, TOOLS


def small_talk() -> Iterator[tuple[str, list[dict]]]:
    for n, (asks, answer, thought) in enumerate(SMALL_TALK):
        for m, ask in enumerate(asks):
            for thinking in (True, False):
                key = f"st{n}/{m}/{thinking}"
                yield key, [{"role": "user", "content": ask}, assistant(answer, thought if thinking else None)]


def chat_documents(items: Iterator[QA], render: Callable[..., str]) -> Iterator[tuple[str, dict]]:
    """(key, {"text", "messages", "tools"}) for every item, in order."""
    prev: QA | None = None
    for qa in items:
        if prev is not None:
            yield from _emit(prev, qa if qa.source == prev.source else None, render)
        prev = qa
    if prev is not None:
        yield from _emit(prev, None, render)


def _emit(qa: QA, nxt: QA | None, render) -> Iterator[tuple[str, dict]]:
    messages, tools = conversation(qa, nxt)
    yield qa.key, {"text": render(messages, tools=tools), "messages": messages, "tools": tools}
