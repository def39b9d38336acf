#!/usr/bin/env python3
"""Generates the chat-template goldens under tests/data/chat_template/ with the real thing: transformers'
own Jinja environment (`_compile_jinja_template`: ImmutableSandboxedEnvironment, trim_blocks,
lstrip_blocks, loopcontrols, its tojson/raise_exception/namespace) and its request pipeline
(`_normalize_chat_messages` + `render_jinja_template`, as apply_chat_template(tokenize=False) calls them).

Outputs:
  request_goldens.json        chat requests rendered with the Qwen3 and Qwen3.5 templates
  jinja_feature_goldens.json  small templates exercising the Jinja subset (filters, tests, loops, ...)

Run from the repository root with the project venv (needs jinja2 and transformers):
    /work/pyenv/bin/python tools/text/chat_template_goldens.py
Re-running reproduces the files byte for byte (fixed random seed).
"""
import json
import random
import sys
from pathlib import Path

import jinja2
import transformers
from transformers.utils.chat_template_utils import (
    _compile_jinja_template,
    _normalize_chat_messages,
    render_jinja_template,
)

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "chat_template"
TEMPLATES = {
    "qwen3": (DATA / "qwen3_chat_template.jinja").read_text(encoding="utf-8"),
    "qwen3.5": (DATA / "qwen3.5_chat_template.jinja").read_text(encoding="utf-8"),
}
# transformers passes tokenizer.special_tokens_map; for Qwen3 that is eos and pad (bos is null).
QWEN_SPECIAL_TOKENS = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
APPLY_PARAMETERS = {"conversation", "messages", "tools", "documents", "chat_template", "add_generation_prompt",
                    "continue_final_message", "tokenize", "padding", "truncation", "max_length", "return_tensors",
                    "return_dict", "return_assistant_tokens_mask", "tokenizer_kwargs", "sanitize_control_tokens"}


def error_record(e):
    return {"type": type(e).__name__, "message": str(e)}


def apply_like_transformers(template, request, special_tokens):
    """apply_chat_template(**request, tokenize=False) without needing a tokenizer object."""
    messages = request["messages"]
    if isinstance(messages, list) and len(messages) == 0:
        raise ValueError("Cannot apply chat template to an empty conversation. Provide at least one message.")
    conversation = _normalize_chat_messages(messages)
    cont = request.get("continue_final_message", False)
    agp = request.get("add_generation_prompt", False)
    if cont and agp:
        raise ValueError("continue_final_message and add_generation_prompt are not compatible.")
    kwargs = {k: v for k, v in request.items() if k not in APPLY_PARAMETERS}
    template_kwargs = {**special_tokens, **kwargs}
    rendered, _ = render_jinja_template(
        conversations=[conversation], tools=request.get("tools"), documents=request.get("documents"),
        chat_template=template, continue_final_message=cont, add_generation_prompt=agp, **template_kwargs)
    return rendered[0]


# --- request corpus ------------------------------------------------------------------------------

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Get the weather for a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name, e.g. Zürich"},
                                                            "days": {"type": "integer"}}, "required": ["city"]}}}
SEARCH = {"type": "function", "function": {"name": "search", "description": "Search the web for \"quoted\" <things> & more.",
          "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "top_k": {"type": "integer", "default": 5},
                                                           "filters": {"type": "object", "properties": {"lang": {"type": "string", "enum": ["en", "zh"]}}}},
                         "required": ["query"]}}}
PLAIN_TOOL = {"name": "calculator", "description": "Evaluate arithmetic.", "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}}}


def call(name, args, wrap=True):
    fn = {"name": name, "arguments": args}
    return {"type": "function", "function": fn} if wrap else fn


def hand_written_requests():
    u = lambda c: {"role": "user", "content": c}
    a = lambda c, **kw: {"role": "assistant", "content": c, **kw}
    s = lambda c: {"role": "system", "content": c}
    t = lambda c, **kw: {"role": "tool", "content": c, **kw}
    R = {}
    R["user_only"] = {"messages": [u("Hi")], "add_generation_prompt": True}
    R["user_only_no_genprompt"] = {"messages": [u("Hi")]}
    R["thinking_false"] = {"messages": [u("Hi")], "add_generation_prompt": True, "enable_thinking": False}
    R["thinking_true"] = {"messages": [u("Hi")], "add_generation_prompt": True, "enable_thinking": True}
    R["thinking_none"] = {"messages": [u("Hi")], "add_generation_prompt": True, "enable_thinking": None}
    R["system_user"] = {"messages": [s("You are terse."), u("2+2?")], "add_generation_prompt": True}
    R["multi_turn_history"] = {"messages": [s("Sys"), u("Q1"), a("A1"), u("Q2"), a("A2"), u("Q3")], "add_generation_prompt": True}
    R["reasoning_in_history"] = {"messages": [u("Q1"), a("A1", reasoning_content="R1"), u("Q2"), a("A2", reasoning_content="R2")]}
    R["reasoning_after_last_query"] = {"messages": [u("Q1"), a("A1", reasoning_content="  padded R1 \n\n")], "add_generation_prompt": False}
    R["inline_think"] = {"messages": [u("Q1"), a("<think>\nplan it\n</think>\n\nA1"), u("Q2"), a("<think>step</think>A2")]}
    R["inline_think_no_open_tag"] = {"messages": [u("Q"), a("just thoughts</think>\n\nanswer")]}
    R["thinking_alias"] = {"messages": [u("Q"), a("A", thinking="T via thinking")]}
    R["reasoning_alias"] = {"messages": [u("Q"), a("A", reasoning="T via reasoning")]}
    R["empty_reasoning_string"] = {"messages": [u("Q"), a("A", reasoning_content="")]}
    R["none_fields_dropped"] = {"messages": [u("Q"), a("A", tool_calls=None, reasoning_content=None)], "add_generation_prompt": True}
    R["empty_contents"] = {"messages": [s(""), u(""), a("")], "add_generation_prompt": True}
    R["unicode"] = {"messages": [s("Réponds en français 🇫🇷"), u("日本語で？ مرحبا שלום — e\u0301 \u2028 tab\there"), a("はい 😀")], "add_generation_prompt": True}
    R["trim_unicode_whitespace"] = {"messages": [u("\u00a0\u3000 padded \u2003\n"), a("\u200b zero width stays\u00a0")]}
    R["control_chars"] = {"messages": [u("bell\x07 null\x00 esc\x1b del\x7f")], "add_generation_prompt": True}
    R["tools_no_system"] = {"messages": [u("Weather in Paris?")], "tools": [WEATHER], "add_generation_prompt": True}
    R["tools_with_system"] = {"messages": [s("Be helpful."), u("Search for cats")], "tools": [WEATHER, SEARCH], "add_generation_prompt": True}
    R["tools_plain_schema"] = {"messages": [u("1+1")], "tools": [PLAIN_TOOL], "add_generation_prompt": True}
    R["tools_empty_list"] = {"messages": [u("Hi")], "tools": [], "add_generation_prompt": True}
    R["tool_call_dict_args"] = {"messages": [u("Weather?"), a("", tool_calls=[call("get_weather", {"city": "Paris", "days": 2})]), t("{\"temp\": 18}")],
                                "tools": [WEATHER], "add_generation_prompt": True}
    R["tool_call_string_args_qwen3"] = {"messages": [u("Weather?"), a("Checking.", tool_calls=[call("get_weather", "{\"city\": \"Paris\"}")]), t("sunny")],
                                        "tools": [WEATHER], "add_generation_prompt": True}
    R["tool_call_unwrapped"] = {"messages": [u("calc"), a(None, tool_calls=[call("calculator", {"expr": "1+1"}, wrap=False)]), t("2")], "add_generation_prompt": True}
    R["tool_call_rich_values"] = {"messages": [u("search"), a("Let me search.", reasoning_content="need search", tool_calls=[
        call("search", {"query": "naïve café", "top_k": 3, "exact": True, "cursor": None, "score": 0.5, "big": 1e20,
                        "filters": {"lang": "zh", "tags": ["a", "b"]}, "ids": [1, 2, 3], "empty": [], "emptyd": {}, "text": "multi\nline"})])],
                                  "tools": [SEARCH]}
    R["parallel_calls_and_responses"] = {"messages": [s("Be helpful."), u("Weather in Paris and Rome?"),
        a("", reasoning_content="need two calls", tool_calls=[call("get_weather", {"city": "Paris", "days": 2}), call("get_weather", {"city": "Rome"})]),
        t("{\"temp\": 18}"), t("{\"temp\": 24}"), t("third")], "tools": [WEATHER], "add_generation_prompt": True}
    R["tool_loop_then_answer"] = {"messages": [u("Weather in Paris?"), a("Let me check.", tool_calls=[call("get_weather", {"city": "Paris"})]),
        t("sunny"), a("It is sunny.", reasoning_content="read tool"), u("Thanks"), a("You're welcome!")], "tools": [WEATHER]}
    R["tool_response_wrapper_user"] = {"messages": [u("Q"), a("", tool_calls=[call("get_weather", {"city": "X"})]),
        u("<tool_response>\nmanual\n</tool_response>")], "add_generation_prompt": True}
    R["tool_first_message"] = {"messages": [t("orphan result"), u("Q")], "add_generation_prompt": True}
    R["multimodal"] = {"messages": [u([{"type": "image"}, {"type": "text", "text": "What is this?"}, {"type": "video"}, {"type": "text", "text": "And this?"}])],
                       "add_generation_prompt": True}
    R["multimodal_vision_ids"] = {"messages": [u([{"type": "image", "image": "a.png"}, {"type": "image_url", "image_url": {"url": "http://x/y.png"}}, {"type": "text", "text": "Compare"}]),
        a("They differ."), u([{"video": "v.mp4"}, {"text": "and now?"}, {"image": "b.png"}])], "add_generation_prompt": True, "add_vision_id": True}
    R["multimodal_system_text_parts"] = {"messages": [s([{"type": "text", "text": "  System as parts  "}]), u([{"type": "text", "text": "hi"}])], "add_generation_prompt": True}
    R["multimodal_with_tools_system"] = {"messages": [s([{"type": "text", "text": "Sys parts"}]), u("x")], "tools": [WEATHER], "add_generation_prompt": True}
    R["continue_final_message"] = {"messages": [u("Write a haiku"), a("Autumn moonlight—")], "continue_final_message": True}
    R["continue_final_message_trailing_space"] = {"messages": [u("Count"), a("1, 2, ")], "continue_final_message": True}
    R["extra_vars_and_bos"] = {"messages": [u("Hi")], "add_generation_prompt": True, "custom_flag": "x", "eos_token": "<override>"}
    R["long_history_mixed"] = {"messages": [s("S"), u("a"), a("b", reasoning_content="r1"), u("c"),
        a("", tool_calls=[call("get_weather", {"city": "Oslo"})]), t("cold"), t("windy"), a("d", reasoning_content="r2"),
        u("e"), a("<think>\nx\n</think>\n\nf")], "tools": [WEATHER], "add_generation_prompt": True, "enable_thinking": False}
    # error cases
    R["error_no_messages"] = {"messages": [], "add_generation_prompt": True}
    R["error_system_not_first"] = {"messages": [u("Q"), s("late system")]}
    R["error_only_system"] = {"messages": [s("alone")], "add_generation_prompt": True}
    R["error_developer_role"] = {"messages": [{"role": "developer", "content": "dev"}, u("Q")]}
    R["error_image_in_system"] = {"messages": [s([{"type": "image"}]), u("Q")]}
    R["error_video_in_system"] = {"messages": [s([{"type": "video"}]), u("Q")]}
    R["error_unknown_part"] = {"messages": [u([{"type": "audio", "audio": "x.wav"}])]}
    R["error_content_number"] = {"messages": [u(42)]}
    R["error_only_tool_responses"] = {"messages": [u("<tool_response>\nr\n</tool_response>")]}
    R["error_string_args_qwen35"] = {"messages": [u("Q"), a("", tool_calls=[call("get_weather", "{\"city\": \"Paris\"}")])]}
    R["error_continue_and_genprompt"] = {"messages": [u("Q"), a("A")], "continue_final_message": True, "add_generation_prompt": True}
    return R


WORDS = ["hello", "world", "naïve", "café", "日本", "中文", "😀", "🚀", "Ωμέγα", "Привет", "עברית", "x", "",
         "<tool_response>", "</think>", "<think>", "\\n", "quote\"s", "it's", "tab\t", "line\nbreak", " ", "\u00a0",
         "{{ not_jinja }}", "{% raw %}", "1.5", "True", "null", "e\u0301", "\u2028", "Σ", "ß"]


def rand_text(rng, max_words=6):
    n = rng.randint(0, max_words)
    text = "".join(rng.choice(WORDS) + rng.choice([" ", "", "\n", ", "]) for _ in range(n))
    if rng.random() < 0.2:
        text = rng.choice([" ", "\n", "\n\n", "\t"]) + text + rng.choice([" ", "\n", ""])
    return text


def rand_value(rng, depth=0):
    kind = rng.randint(0, 7 if depth < 2 else 4)
    if kind == 0: return rand_text(rng, 3)
    if kind == 1: return rng.randint(-1000, 1000)
    if kind == 2: return rng.choice([0.5, -2.25, 1e-7, 3.0, 123456.789, 1e16])
    if kind == 3: return rng.choice([True, False])
    if kind == 4: return None
    if kind == 5: return [rand_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {f"k{i}{rng.choice(WORDS[:6])}": rand_value(rng, depth + 1) for i in range(rng.randint(0, 3))}


def rand_content(rng, multimodal):
    if multimodal and rng.random() < 0.35:
        parts = []
        for _ in range(rng.randint(1, 4)):
            r = rng.random()
            if r < 0.25: parts.append({"type": "image", "image": "img.png"})
            elif r < 0.4: parts.append({"type": "video", "video": "clip.mp4"})
            else: parts.append({"type": "text", "text": rand_text(rng)})
        return parts
    return rand_text(rng)


def random_request(rng, multimodal, template_name):
    messages = []
    if rng.random() < 0.4:
        messages.append({"role": "system", "content": rand_text(rng)})
    turns = rng.randint(1, 5)
    for _ in range(turns):
        messages.append({"role": "user", "content": rand_content(rng, multimodal) or "q"})
        if rng.random() < 0.8:
            msg = {"role": "assistant", "content": rand_text(rng)}
            r = rng.random()
            if r < 0.3:
                msg["reasoning_content"] = rand_text(rng)
            elif r < 0.45:
                msg["content"] = "<think>\n" + rand_text(rng) + "\n</think>\n\n" + msg["content"]
            if rng.random() < 0.35:
                calls = []
                for _ in range(rng.randint(1, 3)):
                    args = {f"arg{i}": rand_value(rng) for i in range(rng.randint(0, 3))}
                    if template_name == "qwen3" and rng.random() < 0.3:
                        args = json.dumps(args, ensure_ascii=rng.random() < 0.5)
                    calls.append(call(rng.choice(["get_weather", "search", "f_ü"]), args, wrap=rng.random() < 0.8))
                msg["tool_calls"] = calls
                messages.append(msg)
                for _ in range(rng.randint(1, 3)):
                    messages.append({"role": "tool", "content": rand_text(rng) or "ok"})
                if rng.random() < 0.5:
                    messages.append({"role": "assistant", "content": rand_text(rng)})
            else:
                messages.append(msg)
    req = {"messages": messages}
    if rng.random() < 0.5: req["tools"] = rng.sample([WEATHER, SEARCH, PLAIN_TOOL], rng.randint(1, 3))
    if rng.random() < 0.7: req["add_generation_prompt"] = True
    r = rng.random()
    if r < 0.3: req["enable_thinking"] = False
    elif r < 0.45: req["enable_thinking"] = True
    if multimodal and rng.random() < 0.3: req["add_vision_id"] = True
    return req


def build_request_goldens():
    out = []
    for name, request in hand_written_requests().items():
        for tname in ["qwen3", "qwen3.5"]:
            out.append(render_case(f"{name}", tname, request))
    rng = random.Random(20260517)
    for tname in ["qwen3", "qwen3.5"]:
        for i in range(80):
            out.append(render_case(f"random_{i:03d}", tname, random_request(rng, tname == "qwen3.5", tname)))
    return out


def render_case(name, tname, request):
    case = {"name": name, "template": tname, "special_tokens": QWEN_SPECIAL_TOKENS, "request": request}
    try:
        case["expected"] = apply_like_transformers(TEMPLATES[tname], json.loads(json.dumps(request)), QWEN_SPECIAL_TOKENS)
    except Exception as e:  # noqa: BLE001 - the error itself is the golden
        case["error"] = error_record(e)
    return case


# --- Jinja feature corpus --------------------------------------------------------------------------

FEATURE_CONTEXT = {
    "d": {"a": 1, "b": [1, 2, {"c": "x"}], "items": "shadowed", "name": "Zoë", "nested": {"k": {"v": 3}}},
    "l": [3, 1, 2], "s": "  Hello, Wörld!  ", "n": None, "t": True, "f": False, "i": 7, "x": 2.5, "e": "",
    "words": ["b", "A", "c", "a"], "users": [{"name": "bob", "age": 30}, {"name": "Al", "age": 25}, {"name": "cy", "age": 30}],
    "u": "ÄÖÜ ß straße ΣΑΣ ǆ ﬁ İ", "big": 9007199254740993, "neg": -3,
}

FEATURES = [
    # output and whitespace control
    "plain text\n", "a\n{% if t %}\n  yes\n{% endif %}\nb", "  {%- if t %} x {% endif -%}  !", "{{- ' x ' -}}  \n y",
    "a  {%+ if t %}b{% endif %}", "{% if t +%}\nkeep{% endif %}", "line1\n    {% if t %}in{% endif %}\nline2",
    "{# comment #}x", "a\n  {# c #}\nb", "{#- c -#}  x", "{% raw %}{{ not rendered }}{% endraw %}", "{%- raw -%}  {{x}}  {%- endraw -%}|",
    "trailing newline kept?\n\n", "x\r\ny\rz", "{{ 'a' }}\n{{ 'b' }}\n", "\t{% if t %}\ttab{% endif %}",
    # literals and printing
    "{{ 1 }} {{ -1 }} {{ 1.0 }} {{ 1.5e3 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e-5 }} {{ 3 / 2 }} {{ 4 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }}",
    "{{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1_000 }} {{ 1_0.5 }}", "{{ true }} {{ False }} {{ none }} {{ n }}",
    "{{ [1, 'a', none, true, 1.5] }} {{ (1,) }} {{ (1, 'b') }} {{ {'k': 'v', 1: [2]} }} {{ () }} {{ [] }} {{ {} }}",
    "{{ \"it's\" }} {{ 'say \"hi\"' }} {{ ['it\\'s', \"q\\\"\", 'both\\'\"'] }}", "{{ 'a\\tb\\\\n\\x41\\u00e9\\U0001F600\\101' }}",
    "{{ ['\\n', '\\x07', '\\u200b', 'é', '\\xa0', '😀', '\\ud7ff'] }}", "{{ 'adjacent' 'strings' }}", "{{ d }}", "{{ users }}",
    "{{ x }} {{ -x }} {{ +i }} {{ i - 10 }} {{ i * x }} {{ 'ab' * 3 }} {{ [1] * 2 }} {{ 1 + true }}",
    "{{ 'a' ~ 1 ~ none ~ t ~ undefined_var ~ 1.0 }}", "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 == 1.0 }} {{ 1 == true }} {{ 'a' != 'a' }}",
    "{{ 'b' in 'abc' }} {{ 2 in l }} {{ 'a' in d }} {{ 'z' not in d }} {{ 'x' in undefined_var }} {{ 1 in [1.0] }}",
    "{{ t and 'yes' }} {{ f and 'yes' }} {{ f or 'fallback' }} {{ e or n or 'last' }} {{ not t }} {{ not (t and f) }}",
    "{{ 'y' if t else 'n' }} {{ 'y' if f }} [{{ 'y' if f else 'n' if t else 'z' }}]",
    # attribute and item access
    "{{ d.a }} {{ d['a'] }} {{ d.b[2].c }} {{ d.b.1 }} {{ d.nested.k.v }} {{ l[-1] }} {{ l[10] }} {{ d.missing }} [{{ d['missing'] }}]",
    "{{ d.items()|list }}", "{{ d['items'] }}", "{{ d.get('a') }} {{ d.get('zz', 'dflt') }} {{ d.get('zz') }} {{ d.keys()|list }} {{ d.values()|list|length }}",
    "{{ s[2:7] }}|{{ s[::-1] }}|{{ s[-4:] }}|{{ l[::2] }}|{{ l[1:] }}|{{ l[:-1] }}|{{ l[5:] }}|{{ 'héllo'[1] }}|{{ 'héllo'[1:3] }}|{{ l[::-1] }}",
    "{{ n.attr }}|{{ i.real }}|{{ s.nope }}", "{{ d['b'][2]['c'] }} {{ users[0].name }}",
    # string methods
    "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'xxhixx'.strip('x') }}|{{ '\\n\\nhi\\n'.lstrip('\\n') }}|{{ 'hi!!'.rstrip('!') }}",
    "{{ 'a,b,,c'.split(',') }} {{ '  a  b c '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ ''.split() }} {{ ''.split(',') }}",
    "{{ s.startswith('  H') }} {{ s.endswith('!  ') }} {{ 'abc'.startswith(('x', 'a')) }} {{ 'abc'.startswith('b', 1) }} {{ 'abc'.endswith('b', 0, 2) }}",
    "{{ 'Hello'.upper() }} {{ 'Hello'.lower() }} {{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ 'aBc'.swapcase() }}",
    "{{ u.upper() }}|{{ u.lower() }}|{{ u.title() }}|{{ u.capitalize() }}|{{ 'ΌΣΟΣ Σ'.lower() }}",
    "{{ 'aaa'.replace('a', 'b', 2) }} {{ 'abc'.replace('', '-') }} {{ 'abcabc'.find('c') }} {{ 'abcabc'.rfind('c') }} {{ 'héllo'.find('l') }} {{ 'abc'.find('z') }} {{ 'aaa'.count('a') }}",
    "{{ '-'.join(['a', 'b']) }} {{ 'ab'.center(6, '*') }}|{{ 'ab'.ljust(4) }}|{{ 'ab'.rjust(4, '0') }}|{{ '42'.zfill(5) }}|{{ '-4'.zfill(4) }}",
    "{{ 'a=b=c'.partition('=') }} {{ 'a=b=c'.rpartition('=') }} {{ 'prefix_x'.removeprefix('prefix_') }} {{ 'x.txt'.removesuffix('.txt') }}",
    "{{ 'line1\\nline2\\r\\nline3'.splitlines() }} {{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ ' \\t'.isspace() }} {{ 'abc'.islower() }} {{ 'ABC'.isupper() }}",
    # filters
    "{{ s|trim }}|{{ 'xxaxx'|trim('x') }}|{{ '\\u3000 wide \\u00a0'|trim }}|{{ n|trim }}|{{ 5|trim }}",
    "{{ l|length }} {{ d|length }} {{ s|length }} {{ 'héllo'|length }} {{ undefined_var|length }} {{ l|count }}",
    "{{ l|first }} {{ l|last }} {{ 'abc'|first }} {{ []|first }}|{{ d|first }}", "{{ l|join(', ') }} {{ l|join }} {{ users|join('/', attribute='name') }}",
    "{{ 'Hi'|upper }} {{ 'Hi'|lower }} {{ 'hi there'|capitalize }} {{ 'hello big-world(x) [y] <z>'|title }}",
    "{{ 'aXbX'|replace('X', '-') }} {{ 'aaaa'|replace('a', 'b', 2) }} {{ 1.5|string }} {{ none|string }} {{ [1]|string }}",
    "{{ undefined_var|default('dflt') }} {{ ''|default('dflt') }} {{ ''|default('dflt', true) }} {{ none|default('x') }} {{ false|d('y', boolean=true) }}",
    "{{ l|sort }} {{ l|sort(reverse=true) }} {{ words|sort }} {{ words|sort(case_sensitive=true) }} {{ users|sort(attribute='age')|map(attribute='name')|list }}",
    "{{ users|sort(attribute='age,name')|map(attribute='name')|join(',') }} {{ words|unique|list }} {{ [1, 2, 1, '1']|unique|list }}",
    "{{ l|min }} {{ l|max }} {{ words|min }} {{ users|max(attribute='age') }} {{ []|max }}|{{ l|sum }} {{ users|sum(attribute='age') }} {{ [0.5, 1]|sum(start=1) }}",
    "{{ l|reverse|list }} {{ 'abc'|reverse }} {{ l|list }} {{ 'ab'|list }} {{ d|list }} {{ {'b': 1, 'a': 2}|dictsort }} {{ {'b': 1, 'a': 2}|dictsort(by='value', reverse=true) }}",
    "{{ d|items|list }} {% for k, v in {'x': 1, 'y': [2]}|items %}{{ k }}={{ v }};{% endfor %} {{ undefined_var|items|list }}",
    "{{ users|map(attribute='name')|list }} {{ words|map('upper')|list }} {{ users|map(attribute='zzz', default='?')|list }} {{ ['1', '2']|map('int')|sum }}",
    "{{ l|select('odd')|list }} {{ l|reject('odd')|list }} {{ [0, 1, '', 'a', none]|select|list }} {{ users|selectattr('age', 'equalto', 30)|map(attribute='name')|list }} {{ users|rejectattr('age', '>', 26)|list|length }}",
    "{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(-1) }} {{ 4.9|int }} {{ '0x1A'|int(base=16) }} {{ ' 12 '|int }} {{ '3.5'|float }} {{ 'abc'|float }} {{ 3|float }} {{ true|int }}",
    "{{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 2.1|round(method='ceil') }} {{ 2.9|round(0, 'floor') }} {{ 7|round }} {{ -2.5|round }} {{ neg|abs }} {{ -1.5|abs }}",
    "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(width='> ', blank=true) }}",
    "{{ 'hello'|center(11) }}|{{ 'a b c d e f g h'|truncate(9) }}|{{ 'abcdefghijklmnop'|truncate(10, true) }}|{{ 'short'|truncate(10) }}|{{ 'one two three'|wordcount }}",
    "{{ l|batch(2)|list }} {{ l|batch(2, 'x')|list }} {{ '<a&b>'|escape }} {{ '<a>'|e|e }} {{ ('<b>'|safe) + '<i>' }} {{ '<i>' + ('<b>'|safe) }} {{ ('<b>'|safe)|string + '<' }}",
    "{{ d|attr('a') }}|{{ d|attr('keys') is callable }}|{{ 'x'|attr('upper') is defined }}",
    # tojson (transformers flavour)
    "{{ d|tojson }}", "{{ users|tojson(indent=2) }}", "{{ {'z': 1, 'a': {'y': [1, 2.0, none, true]}}|tojson(sort_keys=true) }}",
    "{{ {'k': 'ü <b> & \\'\"\\\\ \\n\\t\\u2028 😀 \\x7f \\x1f'}|tojson }}", "{{ {'k': 'ü 😀'}|tojson(ensure_ascii=true) }}",
    "{{ [1, [2, [3, {}]], []]|tojson(indent=1) }}", "{{ {'a': 1}|tojson(separators=(',', ':')) }}", "{{ {'a': [1, 2]}|tojson(indent='\\t') }}",
    "{{ 'str'|tojson }} {{ 1.0|tojson }} {{ 1e20|tojson }} {{ 0.1|tojson }} {{ none|tojson }} {{ (1, 2)|tojson }} {{ {1: 'int key', true: 'bool', none: 'n'}|tojson }}",
    "{{ big|tojson }} {{ big }} {{ 1e300 * 1e300 }} {{ [1e300 * 1e300]|tojson }}",
    # tests
    "{{ d is mapping }} {{ l is mapping }} {{ l is sequence }} {{ s is sequence }} {{ d is sequence }} {{ i is sequence }} {{ s is iterable }} {{ i is iterable }} {{ undefined_var is iterable }}",
    "{{ s is string }} {{ i is number }} {{ x is number }} {{ t is number }} {{ i is integer }} {{ t is integer }} {{ x is float }} {{ t is boolean }} {{ i is boolean }}",
    "{{ undefined_var is defined }} {{ undefined_var is undefined }} {{ n is none }} {{ n is not none }} {{ f is false }} {{ 0 is false }} {{ t is true }} {{ 1 is true }}",
    "{{ i is odd }} {{ i is even }} {{ 9 is divisibleby 3 }} {{ 2 is in l }} {{ 'upper' is filter }} {{ 'nope' is test }} {{ 'ABC' is upper }} {{ 'abc' is lower }}",
    "{{ 1 is eq 1 }} {{ 1 is ne 2 }} {{ 1 is lt 2 }} {{ 2 is ge 2 }} {{ 2 is gt 1 }} {{ 1 is le 0 }} {{ n is sameas none }} {{ t is sameas true }} {{ range is callable }} {{ d is callable }}",
    # loops
    "{% for x in l %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }};{% endfor %}",
    "{% for x in l %}[{{ loop.previtem }}|{{ loop.nextitem }}]{% endfor %}", "{% for x in [] %}x{% else %}empty{% endfor %}",
    "{% for x in l if x > 1 %}{{ x }}:{{ loop.index }}/{{ loop.length }} {% endfor %}", "{% for k in d %}{{ k }},{% endfor %}",
    "{% for c in 'héllo' %}{{ c }}.{% endfor %}", "{% for a, b in [(1, 2), (3, 4)] %}{{ a + b }}{% endfor %}",
    "{% for x in l %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}",
    "{% for x in l %}{{ loop.cycle('odd', 'even') }} {% endfor %}", "{% for x in [1, 1, 2] %}{{ loop.changed(x) }} {% endfor %}",
    "{% for row in [[1, 2], [3]] %}{% for v in row %}{{ loop.index }}.{{ v }}@{{ loop.depth }} {% endfor %}|{% endfor %}",
    "{% for x in [{'c': [{'c': []}]}, {'c': []}] recursive %}<{{ loop.depth }}{{ loop(x.c) }}>{% endfor %}",
    "{% for x in undefined_var %}x{% else %}none{% endfor %}", "{% for i in range(3) %}{{ i }}{% endfor %}{% for i in range(5, 0, -2) %}{{ i }}{% endfor %}",
    # scoping
    "{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}",
    "{% for i in [1, 2] %}{% if i == 2 %}[{{ y }}]{% endif %}{% set y = i %}{% endfor %}",
    "{% if t %}{% set z = 'leaks' %}{% endif %}{{ z }}", "{% set a, b = 1, 2 %}{{ a }}{{ b }}", "{% set lst = [1, 2] %}{% set a, b = lst %}{{ b }}{{ a }}",
    "{% set ns = namespace(count=0, items=[]) %}{% for i in l %}{% set ns.count = ns.count + i %}{% endfor %}{{ ns.count }} {{ ns }}",
    "{% set ns = namespace(d) %}{{ ns.a }} {{ ns.name }}", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]",
    "{% set block %}inner {{ i }}{% endset %}[{{ block }}]", "{% set up | upper %}shout{% endset %}{{ up }}",
    "{% filter upper %}filtered {{ s|trim }}{% endfilter %}", "{% set d2 = dict(a=1, b='x') %}{{ d2 }} {{ dict(d2, c=3) }} {{ dict() }}",
    # macros
    "{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('Ann') }} {{ greet('Bo', 'Hi') }} {{ greet(greeting='Yo', name='Cy') }} {{ greet() }}",
    "{% macro m() %}{{ outer }}{% endmacro %}{% set outer = 'late binding' %}{{ m() }}",
    "{% macro wrap(x) %}  [{{ x }}]  {% endmacro %}{{ wrap('a')|trim }}|{{ wrap('b') }}", "{% macro v() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ v(1, 2, k=3) }}",
    "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(5) }}",
    "{% set c = namespace(v=0) %}{% macro inc() %}{% set c.v = c.v + 1 %}{% endmacro %}{{ inc() }}{{ inc() }}{{ c.v }}",
    "{% macro d(a, b=a ~ '!') %}{{ b }}{% endmacro %}{{ d('x') }}", "{{ raise_exception is defined }} {{ strftime_now is defined }} {{ namespace is callable }}",
    "{% generation %}gen body{% endgeneration %}",
    # errors
    "{{ raise_exception('custom failure: ' ~ i) }}", "{{ undefined_var.attr }}", "{{ undefined_var + 1 }}", "{{ undefined_var() }}", "{{ undefined_var[0] }}",
    "{{ 1 + 'a' }}", "{{ 'a' + 1 }}", "{{ 1 < 'a' }}", "{{ 1 / 0 }}", "{{ 1 in 5 }}", "{{ 1 in 'abc' }}", "{{ l.append(4) }}", "{{ d.update({}) }}",
    "{{ undefined_var|tojson }}", "{{ 'abc'|items|list }}", "{% set x.y = 1 %}", "{% set ns = namespace() %}{% set ns._private = 1 %}",
    "{% for a, b in [1] %}{% endfor %}", "{{ range(200000)|length }}", "{{ undefined_var < 1 }}", "{{ -undefined_var }}", "{{ none.attr.deeper }}",
    "{{ [1, 2][1:2:0] }}", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", "{% macro m(a) %}{% endmacro %}{{ m(b=1) }}", "{{ 'abc'.index('z') }}",
    # syntax errors (line numbers matter)
    "{% if t %}\nunclosed", "line1\nline2\n{% for %}", "{{ 1 + }}", "{% endfor %}", "a\n{% unknown_tag %}", "{{ 'unterminated }}", "{{ x | nosuchfilter }}",
    "{{ x is nosuchtest }}", "{% include 'other.html' %}", "{% extends 'base' %}", "{% break %}", "{{ (1, 2 }}", "{# unclosed comment", "\n\n{{ a b }}",
    "{% macro m(a=1, b) %}{% endmacro %}", "{{ 1 if }}", "{% set 1 = 2 %}", "{{ x.0a }}",
]


def build_feature_goldens():
    env = _compile_jinja_template("{{ 1 }}").environment
    out = []
    for i, src in enumerate(FEATURES):
        case = {"name": f"feature_{i:03d}", "template": src}
        try:
            case["expected"] = env.from_string(src).render(**json.loads(json.dumps(FEATURE_CONTEXT)))
        except jinja2.exceptions.TemplateSyntaxError as e:
            case["error"] = {**error_record(e), "line": e.lineno}
        except Exception as e:  # noqa: BLE001
            case["error"] = error_record(e)
        out.append(case)
    return out


def dump(path, data):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=1)
        f.write("\n")


def main():
    meta = {"generator": "tools/text/chat_template_goldens.py", "python": sys.version.split()[0],
            "jinja2": jinja2.__version__, "transformers": transformers.__version__}
    dump(DATA / "request_goldens.json", {"meta": meta, "cases": build_request_goldens()})
    dump(DATA / "jinja_feature_goldens.json", {"meta": meta, "context": FEATURE_CONTEXT, "cases": build_feature_goldens()})


if __name__ == "__main__":
    main()
