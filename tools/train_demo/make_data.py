#!/usr/bin/env python3
"""Assemble the demo model's English corpus from Debian packages, with a held-out split.

Usage (from the repository root; needs `apt-get` with current package lists, no root):

    python3 tools/train_demo/make_data.py [--work tools/train_demo/.work]

Steps:
  1. `apt-get download` the packages in SOURCES (exact versions are whatever the archive serves;
     each .deb's version and sha256 go into the manifest), `dpkg-deb -x` them into WORK/root.
  2. Turn each package's data into plain-text documents (one extractor per source below).
  3. Send each document to the validation split with a fixed probability, decided by a hash of
     (source, document index) so the split is stable and independent of the other sources.
  4. Write WORK/corpus/train.jsonl, WORK/corpus/val.jsonl ({"source", "chat", "text"} per line, documents
     shuffled with a fixed seed) and WORK/corpus/manifest.json (packages, licences, sizes).

Every source is public domain or under a permissive licence; tools/train_demo/DATA.md lists them.
Only the standard library and Jinja2 (for the chat template) are used, so the output depends on
the packages alone.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import html
import html.parser
import json
import random
import re
import struct
import subprocess
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

VAL_FRACTION = 0.02   # share of documents held out (per source, by hash)
SHUFFLE_SEED = 1234   # order of documents in the written splits
CHUNK_CHARS = 3000    # target size when a long text is cut into documents at paragraph breaks


@dataclass(frozen=True)
class Source:
    name: str                               # short id used in the manifest and the split hash
    packages: tuple[str, ...]               # Debian packages that ship the data
    licence: str                            # as stated in the package's copyright file
    extract: Callable[[Path], Iterator[str]]  # root of the unpacked packages -> documents


# ---------------------------------------------------------------------------------------------
# Text helpers


def normalise(text: str) -> str:
    """Unify line endings, drop trailing spaces and collapse runs of blank lines."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\u00a0", " ")
    lines = [line.rstrip() for line in text.split("\n")]
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()


def chunk_paragraphs(text: str, target: int = CHUNK_CHARS) -> Iterator[str]:
    """Cut a long text into documents of about `target` characters at blank lines."""
    buf: list[str] = []
    size = 0
    for para in re.split(r"\n\s*\n", text):
        para = para.strip("\n")
        if not para.strip():
            continue
        buf.append(para)
        size += len(para)
        if size >= target:
            yield "\n\n".join(buf)
            buf, size = [], 0
    if buf:
        yield "\n\n".join(buf)


# ---------------------------------------------------------------------------------------------
# SWORD modules (World English Bible, commentaries): zText / zCom / zCom4 readers.
# Layout (SWORD's zVerse): per testament, *.?zs = block index (offset, size, uncompressed size:
# 3 x u32), *.?zv = one record per verse (block, start, length: u32 u32 u16, or u32 u32 u32 for
# the "4" drivers), *.?zz = zlib-compressed blocks. Records are in canonical verse order, so
# walking them in file order gives the text in reading order; linked verses (several records
# pointing at the same bytes) are emitted once.

_OSIS_DROP = re.compile(r"<note\b[^>]*>.*?</note>|<title\b[^>]*>.*?</title>", re.S)
_OSIS_BREAK = re.compile(r"<(?:lb|p|div|l|lg)\b[^>]*/?>|</(?:p|div|l|lg)>")
_TAG = re.compile(r"<[^>]+>")


def osis_to_text(raw: str) -> str:
    """Strip OSIS markup: drop notes and headings, turn block tags into line breaks."""
    raw = _OSIS_DROP.sub(" ", raw)   # a note sits between two words with no space around it
    raw = _OSIS_BREAK.sub("\n", raw)
    raw = _TAG.sub("", raw)
    raw = html.unescape(raw)
    raw = re.sub(r"[ \t]+", " ", raw)
    raw = re.sub(r" ([,.;:!?’”)\]])", r"\1", raw)   # ...and the space left may precede punctuation
    return normalise(re.sub(r" *\n *", "\n", raw))


def _record_format(records: bytes, blocks: bytes) -> str:
    """The verse-record layout that fits the files: u16 or u32 lengths.

    The driver name does not settle it (the Debian MHCC module says zCom4 but has 10-byte
    records), so take the layout under which every record points inside its block.
    """
    n_blocks = len(blocks) // 12
    sizes = [struct.unpack_from("<III", blocks, 12 * b)[2] for b in range(n_blocks)]
    for fmt in ("<IIH", "<III"):
        size = struct.calcsize(fmt)
        if len(records) % size:
            continue
        ok = all(length == 0 or (block < n_blocks and start + length <= sizes[block])
                 for block, start, length in struct.iter_unpack(fmt, records))
        if ok:
            return fmt
    raise ValueError("verse index matches neither SWORD record layout")


def sword_entries(module_dir: Path, stem: str) -> Iterator[str]:
    """Yield the raw text of every verse record of one testament ("ot"/"nt"), in file order."""
    for s_ext, v_ext, z_ext in (("bzs", "bzv", "bzz"), ("czs", "czv", "czz")):
        if (module_dir / f"{stem}.{s_ext}").exists():
            break
    else:
        return
    blocks = (module_dir / f"{stem}.{s_ext}").read_bytes()
    records = (module_dir / f"{stem}.{v_ext}").read_bytes()
    data = (module_dir / f"{stem}.{z_ext}").read_bytes()
    seen: set[tuple[int, int]] = set()
    current, text = -1, b""
    for block, start, length in struct.iter_unpack(_record_format(records, blocks), records):
        if length == 0 or (block, start) in seen:
            continue
        seen.add((block, start))
        if block != current:   # records run through the blocks in order: keep one inflated
            off, csize, _ = struct.unpack_from("<III", blocks, block * 12)
            current, text = block, zlib.decompress(data[off:off + csize])
        yield text[start:start + length].decode("utf-8", "replace")


def sword_documents(root: Path, module: str, per_doc: int) -> Iterator[str]:
    """A SWORD commentary as documents of `per_doc` consecutive entries; long ones are cut."""
    mod_dir = next(p for p in (root / "usr/share/sword/modules").glob(f"*/*/{module}") if p.is_dir())
    buf: list[str] = []
    for stem in ("ot", "nt"):
        for raw in sword_entries(mod_dir, stem):
            text = osis_to_text(raw)
            if not text:
                continue
            if len(text) > CHUNK_CHARS:   # Spurgeon's entries are whole psalms
                yield from chunk_paragraphs(text)
                continue
            buf.append(text)
            if len(buf) == per_doc:
                yield normalise("\n\n".join(buf))
                buf = []
    if buf:
        yield normalise("\n\n".join(buf))


def web_bible(root: Path) -> Iterator[str]:
    # Verses joined with spaces into paragraphs of ~30 verses: running text, not one verse a line.
    mod_dir = root / "usr/share/sword/modules/texts/ztext/engWEB2015eb"
    verses: list[str] = []
    for stem in ("ot", "nt"):
        for raw in sword_entries(mod_dir, stem):
            text = osis_to_text(raw).replace("\n", " ").strip()
            if text:
                verses.append(text)
    for i in range(0, len(verses), 30):
        yield " ".join(verses[i:i + 30])


# ---------------------------------------------------------------------------------------------
# Other sources


def fortunes(root: Path) -> Iterator[str]:
    """Every fortune cookie of the non-offensive English files (one document each), less the
    files in `skip`: the package's BSD terms cover the collection, but song lyrics and quotes of
    recent novels and TV shows are better left out of a model that ships."""
    folder = root / "usr/share/games/fortunes"
    skip = {
        "art", "ascii-art",                              # pictures made of characters, not prose
        "songs-poems", "pratchett", "startrek", "zippy",   # quotations of modern copyrighted works
        "ethnic",                                        # jokes about ethnic groups
        "translate-me",                                  # not English
    }
    for path in sorted(folder.iterdir()):
        if path.suffix or not path.is_file() or path.name in skip:
            continue
        utf8 = folder / f"{path.name}.u8"   # the package's UTF-8 copy, where the original is Latin-1
        text = (utf8 if utf8.exists() else path).read_text("utf-8", "replace")
        for cookie in re.split(r"^%\s*$", text, flags=re.M):
            cookie = normalise(cookie)
            if cookie:
                yield cookie


WORDNET_POS = {"noun": "noun", "verb": "verb", "adj": "adjective", "adv": "adverb"}


def wordnet_synsets(root: Path) -> Iterator[tuple[list[str], str, str]]:
    """(words, part of speech, gloss) for every WordNet synset, in file order."""
    for part, label in WORDNET_POS.items():
        for line in (root / f"usr/share/wordnet/data.{part}").read_text("utf-8", "replace").splitlines():
            if line.startswith("  ") or " | " not in line:
                continue   # licence header
            fields, gloss = line.split(" | ", 1)
            f = fields.split()
            count = int(f[3], 16)
            words = [re.sub(r"\(.*\)$", "", w).replace("_", " ") for w in f[4:4 + 2 * count:2]]
            yield words, label, gloss.strip()


def wordnet_glosses(root: Path) -> Iterator[str]:
    """WordNet synsets as 'word, synonym (part of speech): gloss' lines, 40 synsets to a document."""
    lines: list[str] = []
    for words, label, gloss in wordnet_synsets(root):
        lines.append(f"{', '.join(words)} ({label}): {gloss}")
        if len(lines) == 40:
            yield "\n".join(lines)
            lines = []
    if lines:
        yield "\n".join(lines)


def devils_dictionary(root: Path) -> Iterator[str]:
    text = gzip.decompress((root / "usr/share/dictd/devil.dict.dz").read_bytes()).decode("utf-8", "replace")
    # dictfmt prepends its own database-info entries before the preface; drop them.
    start = text.find("The Internet Wiretap")
    yield from chunk_paragraphs(normalise(text[start:] if start >= 0 else text))


def jargon_file(root: Path) -> Iterator[str]:
    text = gzip.decompress((root / "usr/share/doc/jargon-text/jargon.txt.gz").read_bytes()).decode("utf-8", "replace")
    text = re.sub(r"^\s*═+\s*$", "", text, flags=re.M)   # rules between sections
    text = "\n".join(line.strip() for line in text.split("\n"))
    yield from chunk_paragraphs(normalise(text))


class _HtmlText(html.parser.HTMLParser):
    """HTML to text: keeps the text inside the element selected by `keep`, skips `drop` ones."""

    BLOCK = {"p", "div", "pre", "li", "dt", "dd", "tr", "br", "h1", "h2", "h3", "h4", "h5", "h6",
             "table", "ul", "ol", "dl", "blockquote", "section", "hr"}

    def __init__(self, keep: Callable[[str, dict], bool], drop: Callable[[str, dict], bool]):
        super().__init__(convert_charrefs=True)
        self.keep, self.drop = keep, drop
        self.out: list[str] = []
        self.stack: list[tuple[str, bool, bool]] = []   # (tag, keeping, dropping) for open elements
        self.pre = 0

    def _state(self) -> tuple[bool, bool]:
        return (self.stack[-1][1], self.stack[-1][2]) if self.stack else (False, False)

    def _emit(self, text: str) -> None:
        self.out.append(text)

    def _newline(self, blank: bool) -> None:
        self.out.append("\n\n" if blank else "\n")

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        keeping, dropping = self._state()
        keeping = keeping or self.keep(tag, a)
        dropping = dropping or self.drop(tag, a) or tag in ("script", "style", "svg")
        if tag in self.BLOCK and keeping and not dropping:
            self._newline(tag in ("p", "pre", "h1", "h2", "h3", "h4", "dt"))
        if tag in ("br", "hr", "img", "meta", "link", "input", "wbr", "col", "area", "base"):
            return   # void elements never close
        self.stack.append((tag, keeping, dropping))
        self.pre += tag == "pre"

    def handle_endtag(self, tag):
        keeping, dropping = self._state()
        for i in range(len(self.stack) - 1, -1, -1):   # tolerate unclosed children (SQLite's <li>)
            if self.stack[i][0] == tag:
                del self.stack[i:]
                self.pre = max(self.pre - (tag == "pre"), 0)
                break
        if tag in self.BLOCK and keeping and not dropping:
            self._newline(tag == "pre")

    def handle_data(self, data):
        keeping, dropping = self._state()
        if not keeping or dropping:
            return
        if self.pre:   # code keeps its layout
            self._emit(data)
            return
        data = re.sub(r"\s+", " ", data)
        if not self.out or self.out[-1].endswith("\n"):
            data = data.lstrip()   # no indent from the HTML source's own line breaks
        self._emit(data)

    def text(self) -> str:
        return normalise("".join(self.out))


def html_to_text(path: Path, keep, drop) -> str:
    parser = _HtmlText(keep, drop)
    parser.feed(path.read_text("utf-8", "replace"))
    parser.close()
    return parser.text()


def python_docs(root: Path) -> Iterator[str]:
    """Python 3.11 documentation pages (the main body only); indexes and changelogs left out."""
    base = root / "usr/share/doc/python3.11/html"
    skip = re.compile(r"^(genindex|py-modindex|search|contents|whatsnew/changelog|_)")
    keep = lambda tag, a: tag == "div" and a.get("role") == "main"
    drop = lambda tag, a: "headerlink" in (a.get("class") or "") or a.get("class") == "highlight-none notranslate"
    for path in sorted(base.rglob("*.html")):
        rel = path.relative_to(base).as_posix()
        if skip.match(rel):
            continue
        text = html_to_text(path, keep, drop).replace("¶", "")
        yield from chunk_paragraphs(text, 4 * CHUNK_CHARS)


def sqlite_docs(root: Path) -> Iterator[str]:
    """SQLite documentation pages without their navigation menus; C API reference left out."""
    base = root / "usr/share/doc/sqlite3"
    keep = lambda tag, a: tag == "body"
    drop = lambda tag, a: a.get("class") in ("nosearch", "menu", "fancy_toc") or tag in ("form", "select")
    for path in sorted(base.rglob("*.html")):
        rel = path.relative_to(base).as_posix()
        if re.match(r"(c3ref|releaselog|syntax|session)/|doc_|requirements|syntaxdiagrams|keyword_index|toc|"
                    r"sitemap|changes|capi3ref|chronology|fileformat_req|rescode", rel):
            continue   # API listings, indexes and release notes: lists of names, not prose
        text = html_to_text(path, keep, drop)
        yield from chunk_paragraphs(text, 4 * CHUNK_CHARS)


# ---------------------------------------------------------------------------------------------
# Chat-formatted documents: a small share of the data rendered with Qwen 3.5's own chat template,
# so that `qwenrt chat` gets answers in the right shape (a definition, a fortune) instead of
# free-running prose. The template comes from shared/ (the official Qwen 3.5 file).

CHAT_TEMPLATE = Path(__file__).resolve().parents[3] / "shared/tokenizers/qwen3.5/chat_template.jinja"
CHAT_SHARE = 6   # one synset (or cookie) in CHAT_SHARE becomes a conversation


def chat_renderer() -> Callable[[str, str], str]:
    """Render one user/assistant exchange the way transformers renders chat templates."""
    import jinja2.sandbox   # only the chat sources need Jinja
    from jinja2.ext import loopcontrols

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = lambda x, **kw: json.dumps(x, ensure_ascii=False, **kw)
    template = env.from_string(CHAT_TEMPLATE.read_text("utf-8"))

    def render(user: str, assistant: str) -> str:
        messages = [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
        return template.render(messages=messages, add_generation_prompt=False)
    return render


def pick(options: list[str], key: str) -> str:
    """A fixed choice among phrasings, by hash (no global random state)."""
    return options[int(hashlib.sha256(key.encode()).hexdigest(), 16) % len(options)]


def wordnet_chat(root: Path) -> Iterator[str]:
    """'What does X mean?' answered with the WordNet gloss and its examples."""
    render = chat_renderer()
    questions = ['What does "{w}" mean?', 'What is the meaning of the word "{w}"?', 'Define "{w}".',
                 'What does the {pos} "{w}" mean?', 'Can you explain the word "{w}"?']
    for i, (words, label, gloss) in enumerate(wordnet_synsets(root)):
        if i % CHAT_SHARE:
            continue
        word = words[0]
        parts = [p.strip() for p in gloss.split(";")]
        definition = parts[0]
        examples = [p.strip('"') for p in parts[1:] if p.startswith('"')]
        answer = f'"{word}" is a{"n" if label[0] in "aeiou" else ""} {label} meaning {definition}.'
        if len(words) > 1:
            answer += " Similar words: " + ", ".join(words[1:]) + "."
        if examples:
            answer += f' For example: "{examples[0]}".'
        yield render(pick(questions, f"wn{i}").format(w=word, pos=label), answer)


def fortune_chat(root: Path) -> Iterator[str]:
    """'Tell me a fortune' answered with a fortune cookie."""
    render = chat_renderer()
    questions = ["Tell me a fortune.", "Give me a quote.", "Say something wise.", "Tell me something funny.",
                 "Do you have a saying for me?"]
    for i, cookie in enumerate(fortunes(root)):
        if i % CHAT_SHARE == 0:
            yield render(pick(questions, f"fc{i}"), cookie)


SOURCES = [
    Source("web_bible", ("sword-text-web",), "public domain (World English Bible)", web_bible),
    Source("mhcc", ("sword-comm-mhcc",), "public domain (Matthew Henry's Concise Commentary)",
           lambda r: sword_documents(r, "mhcc", per_doc=2)),
    Source("tdavid", ("sword-comm-tdavid",), "public domain (C. H. Spurgeon, The Treasury of David, 1869-1885)",
           lambda r: sword_documents(r, "tdavid", per_doc=1)),
    Source("devil", ("dict-devil",), "public domain (Ambrose Bierce, The Devil's Dictionary, 1911)", devils_dictionary),
    Source("jargon", ("jargon-text",), "public domain (The Jargon File 4.4.7)", jargon_file),
    Source("fortunes", ("fortunes", "fortunes-min"), "BSD-3-Clause (fortune-mod data files)", fortunes),
    Source("wordnet", ("wordnet-base",), "WordNet 3.0 licence (permissive, BSD-like)", wordnet_glosses),
    Source("wordnet_chat", ("wordnet-base",), "WordNet 3.0 licence (permissive, BSD-like)", wordnet_chat),
    Source("fortune_chat", ("fortunes", "fortunes-min"), "BSD-3-Clause (fortune-mod data files)", fortune_chat),
    Source("python_docs", ("python3.11-doc",), "PSF License Version 2", python_docs),
    Source("sqlite_docs", ("sqlite3-doc",), "public domain (SQLite documentation)", sqlite_docs),
]


# ---------------------------------------------------------------------------------------------
# Packages


def fetch_packages(work: Path) -> dict[str, dict]:
    """Download each package once into WORK/debs and unpack it into WORK/root."""
    debs, root = work / "debs", work / "root"
    debs.mkdir(parents=True, exist_ok=True)
    info: dict[str, dict] = {}
    for package in sorted({p for s in SOURCES for p in s.packages}):
        found = sorted(debs.glob(f"{package}_*.deb"))
        if not found:
            subprocess.run(["apt-get", "download", package], cwd=debs, check=True)
            found = sorted(debs.glob(f"{package}_*.deb"))
        deb = found[-1]
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
        version = subprocess.run(["dpkg-deb", "-f", str(deb), "Version"], check=True,
                                 capture_output=True, text=True).stdout.strip()
        info[package] = {"deb": deb.name, "version": version,
                         "sha256": hashlib.sha256(deb.read_bytes()).hexdigest()}
    return info


def is_validation(source: str, index: int) -> bool:
    digest = hashlib.sha256(f"{source}/{index}".encode()).digest()
    return int.from_bytes(digest[:8], "little") / 2**64 < VAL_FRACTION


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", type=Path, default=Path(__file__).resolve().parent / ".work")
    args = ap.parse_args()

    packages = fetch_packages(args.work)
    root = args.work / "root"
    splits: dict[str, list[dict]] = {"train": [], "val": []}
    manifest = {"val_fraction": VAL_FRACTION, "shuffle_seed": SHUFFLE_SEED, "sources": []}
    for source in SOURCES:
        counts = {"train": [0, 0], "val": [0, 0]}   # documents, characters
        for i, doc in enumerate(source.extract(root)):
            split = "val" if is_validation(source.name, i) else "train"
            splits[split].append({"source": source.name, "chat": source.name.endswith("_chat"), "text": doc})
            counts[split][0] += 1
            counts[split][1] += len(doc)
        manifest["sources"].append({"name": source.name, "licence": source.licence,
                                    "packages": {p: packages[p] for p in source.packages},
                                    "train_docs": counts["train"][0], "train_chars": counts["train"][1],
                                    "val_docs": counts["val"][0], "val_chars": counts["val"][1]})
        print(f"{source.name:12s} {'+'.join(source.packages):24s} train {counts['train'][0]:7d} docs {counts['train'][1] / 1e6:7.2f} M chars"
              f" | val {counts['val'][0]:5d} docs {counts['val'][1] / 1e6:6.2f} M chars")

    out = args.work / "corpus"
    out.mkdir(parents=True, exist_ok=True)
    for split, docs in splits.items():
        random.Random(SHUFFLE_SEED).shuffle(docs)
        with open(out / f"{split}.jsonl", "w", encoding="utf-8") as f:
            for d in docs:
                f.write(json.dumps(d, ensure_ascii=False) + "\n")
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    total = sum(len(d["text"]) for docs in splits.values() for d in docs)
    print(f"total {total / 1e6:.2f} M characters -> {out}")


if __name__ == "__main__":
    main()
