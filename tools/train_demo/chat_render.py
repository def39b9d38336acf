"""Render conversations with Qwen 3.5's official chat template, the way transformers renders it.

transformers compiles chat templates in an ImmutableSandboxedEnvironment with trim_blocks,
lstrip_blocks and the loopcontrols extension, a `tojson` filter that is json.dumps with
ensure_ascii=False, and a `raise_exception` global (transformers/utils/chat_template_utils.py).
That is reproduced here so make_data.py needs only Jinja2 (the tokenizer does not exist yet when
the corpus is made); make_tokenizer.py then renders a sample of the conversations again with
transformers' own apply_chat_template on the trained tokenizer and stops on any difference.

The template file is the official one (shared/tokenizers/qwen3.5/chat_template.jinja, Apache-2.0):
found by walking up from this file, or given with --template.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

TEMPLATE_RELATIVE = Path("shared/tokenizers/qwen3.5/chat_template.jinja")


def find_template() -> Path:
    """The official template: the nearest shared/ above this file (a worktree sits deeper than main)."""
    for parent in Path(__file__).resolve().parents:
        if (parent / TEMPLATE_RELATIVE).is_file():
            return parent / TEMPLATE_RELATIVE
    raise SystemExit(f"no {TEMPLATE_RELATIVE} above {Path(__file__).parent}; pass --template")


def renderer(template_path: Path) -> Callable[..., str]:
    """render(messages, tools=None, add_generation_prompt=False, enable_thinking=None) -> text."""
    import jinja2.sandbox
    from jinja2.ext import loopcontrols

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    template = env.from_string(template_path.read_text("utf-8"))

    def render(messages: list[dict], tools: list[dict] | None = None, add_generation_prompt: bool = False,
               enable_thinking: bool | None = None) -> str:
        kwargs = {"messages": messages, "tools": tools, "add_generation_prompt": add_generation_prompt}
        if enable_thinking is not None:
            kwargs["enable_thinking"] = enable_thinking
        return template.render(**kwargs)
    return render
