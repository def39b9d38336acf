#!/usr/bin/env python3
"""Assemble the demo model's English corpus from Debian packages, with a held-out split.

Usage (from the repository root; needs `apt-get` with current package lists, no root):

    python3 tools/train_demo/make_data.py [--work tools/train_demo/.work] [--quick]

Steps:
  1. `apt-get download` the packages of the sources below (exact versions are whatever the archive
     serves; each .deb's version and sha256 go into the manifest), `dpkg-deb -x` them into WORK/root.
  2. Plain sources: turn each package's data into plain-text documents. Chat sources: build
     question-answer items from the structured data (qa_sources.py) and render them as
     conversations with Qwen 3.5's chat template (conversations.py, chat_render.py).
  3. Send each document to `test` (the model card's held-back slice, 1%), `val` (early stopping,
     1%) or `train`, by a hash of (source, document key): stable and independent of other sources.
  4. Write WORK/corpus/{train,val,test}.jsonl ({"source", "chat", "text"[, "messages", "tools"]}
     per line, documents shuffled with a fixed seed) and WORK/corpus/manifest.json.

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
import itertools
import json
import random
import re
import struct
import subprocess
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

TEST_FRACTION = 0.01  # share of documents held back for the model card's evaluation (per source, by hash)
VAL_FRACTION = 0.01   # share held out for early stopping during training
SMALL_TALK_COPIES = 20
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


def sword_records(module_dir: Path, stem: str) -> dict[int, str]:
    """{record index: raw text} of one testament's non-empty records, linked records included: the
    index is SWORD's position in the versification (qa_sources.py maps it to book:chapter:verse)."""
    blocks = (module_dir / f"{stem}.bzs").read_bytes()
    records = (module_dir / f"{stem}.bzv").read_bytes()
    data = (module_dir / f"{stem}.bzz").read_bytes()
    inflated: dict[int, bytes] = {}
    out = {}
    for index, (block, start, length) in enumerate(struct.iter_unpack(_record_format(records, blocks), records)):
        if length == 0:
            continue
        if block not in inflated:
            off, csize, _ = struct.unpack_from("<III", blocks, block * 12)
            inflated = {block: zlib.decompress(data[off:off + csize])}   # records run through the blocks in order
        out[index] = inflated[block][start:start + length].decode("utf-8", "replace")
    return out


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
# Sources. Plain ones yield documents; chat ones (qa_sources.py items rendered by conversations.py)
# yield (key, {"text", "messages", "tools"}). `keep` thins a chat source (by a hash of the key) to
# balance the mix and keep the token streams within the device tool's carry limit.


@dataclass(frozen=True)
class ChatSource:
    name: str
    packages: tuple[str, ...]
    licence: str
    items: Callable[[Path], Iterator]       # root -> qa_sources.QA items
    keep: float = 1.0


def plain_sources() -> list[Source]:
    return [
        Source("web_bible", ("sword-text-web",), "public domain (World English Bible)", web_bible),
        Source("mhcc", ("sword-comm-mhcc",), "public domain (Matthew Henry's Concise Commentary)",
               lambda r: sword_documents(r, "mhcc", per_doc=2)),
        Source("tdavid", ("sword-comm-tdavid",), "public domain (C. H. Spurgeon, The Treasury of David, 1869-1885)",
               lambda r: (d for i, d in enumerate(sword_documents(r, "tdavid", per_doc=1)) if i % TDAVID_EVERY == 0)),
        Source("devil", ("dict-devil",), "public domain (Ambrose Bierce, The Devil's Dictionary, 1911)", devils_dictionary),
        Source("jargon", ("jargon-text",), "public domain (The Jargon File 4.4.7)", jargon_file),
        Source("fortunes", ("fortunes", "fortunes-min"), "BSD-3-Clause (fortune-mod data files)", fortunes),
        Source("wordnet", ("wordnet-base",), "WordNet 3.0 licence (permissive, BSD-like)",
               lambda r: (d for i, d in enumerate(wordnet_glosses(r)) if i % WORDNET_EVERY == 0)),
        Source("python_docs", ("python3.11-doc",), "PSF License Version 2", python_docs),
        Source("sqlite_docs", ("sqlite3-doc",), "public domain (SQLite documentation)", sqlite_docs),
    ]


TDAVID_EVERY = 2    # every 2nd Treasury of David document: its 11.5 M characters would crowd out the rest
WORDNET_EVERY = 2   # every 2nd block of 40 glosses as plain text (the conversations cover the rest)
CANON = "usr/include/sword"   # libsword-dev's versification tables (book names, verse counts)


def chat_sources() -> list[ChatSource]:
    import qa_sources as qa
    return [
        ChatSource("wordnet_qa", ("wordnet-base",), "WordNet 3.0 licence (permissive, BSD-like)", qa.wordnet, keep=0.35),
        ChatSource("jargon_qa", ("jargon-text",), "public domain (The Jargon File 4.4.7)", qa.jargon),
        ChatSource("devil_qa", ("dict-devil",), "public domain (Ambrose Bierce, The Devil's Dictionary, 1911)", qa.devils_dictionary),
        ChatSource("bible_qa", ("sword-text-web", "libsword-dev"), "public domain (World English Bible); versification tables only",
                   lambda r: qa.bible(r, r / CANON), keep=0.6),
        ChatSource("mhcc_qa", ("sword-comm-mhcc", "libsword-dev"), "public domain (Matthew Henry's Concise Commentary)",
                   lambda r: qa.matthew_henry(r, r / CANON)),
        ChatSource("quotes_qa", ("fortunes", "fortunes-min"), "BSD-3-Clause (fortune-mod data files)", qa.quotes),
        ChatSource("python_qa", ("python3.11-doc",), "PSF License Version 2", qa.python_docs),
        ChatSource("sqlite_qa", ("sqlite3-doc",), "public domain (SQLite documentation)", qa.sqlite_docs),
    ]


# ---------------------------------------------------------------------------------------------
# Packages


def fetch_packages(work: Path, packages: set[str]) -> dict[str, dict]:
    """Download each package once into WORK/debs and unpack it into WORK/root."""
    debs, root = work / "debs", work / "root"
    debs.mkdir(parents=True, exist_ok=True)
    info: dict[str, dict] = {}
    for package in sorted(packages):
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


def hash_fraction(key: str) -> float:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little") / 2**64


def split_of(source: str, key) -> str:
    """'test' (the held-back evaluation slice of the model card), 'val' (early stopping) or 'train',
    by a hash of (source, document key): fixed, and independent of the other sources."""
    f = hash_fraction(f"{source}/{key}")
    return "test" if f < TEST_FRACTION else "val" if f < TEST_FRACTION + VAL_FRACTION else "train"


def main() -> None:
    import chat_render
    import conversations

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", type=Path, default=Path(__file__).resolve().parent / ".work")
    ap.add_argument("--template", type=Path, help="Qwen 3.5's chat_template.jinja (default: shared/ above this folder)")
    ap.add_argument("--quick", action="store_true", help="every 20th of the first 4,000 documents of every source (smoke runs)")
    args = ap.parse_args()

    plain, chats = plain_sources(), chat_sources()
    packages = fetch_packages(args.work, {p for s in plain + chats for p in s.packages})
    root = args.work / "root"
    template = args.template or chat_render.find_template()
    render = chat_render.renderer(template)
    splits: dict[str, list[dict]] = {"train": [], "val": [], "test": []}
    manifest = {"val_fraction": VAL_FRACTION, "test_fraction": TEST_FRACTION, "shuffle_seed": SHUFFLE_SEED,
                "chat_template_sha256": hashlib.sha256(template.read_bytes()).hexdigest(), "quick": args.quick, "sources": []}

    def add(name: str, licence: str, pkgs: tuple[str, ...], docs: Iterator[tuple[object, dict]], chat: bool) -> None:
        counts = {k: [0, 0] for k in splits}   # documents, characters
        for n, (key, doc) in enumerate(itertools.islice(docs, 4000) if args.quick else docs):
            if args.quick and n % 20:
                continue
            # Phrasings of one entry ("key/0", "key/1", ...) share a split: no answer on both sides.
            split = split_of(name, str(key).split("/")[0])
            splits[split].append({"source": name, "chat": chat, **doc})
            counts[split][0] += 1
            counts[split][1] += len(doc["text"])
        entry = {"name": name, "licence": licence, "packages": {p: packages[p] for p in pkgs}}
        for k, (d, c) in counts.items():
            entry[f"{k}_docs"], entry[f"{k}_chars"] = d, c
        manifest["sources"].append(entry)
        print(f"{name:12s} {'+'.join(pkgs)[:30]:30s} train {counts['train'][0]:7d} docs {counts['train'][1] / 1e6:6.2f} M chars"
              f" | val {counts['val'][0]:5d} / test {counts['test'][0]:5d} docs", flush=True)

    for source in plain:
        add(source.name, source.licence, source.packages, ((i, {"text": d}) for i, d in enumerate(source.extract(root))), False)
    for source in chats:
        kept = (qa for qa in source.items(root) if conversations.fraction("keep/" + qa.key) < source.keep)
        add(source.name, source.licence, source.packages, conversations.chat_documents(kept, render), True)
    # The hand-written small talk: training only, SMALL_TALK_COPIES copies so a few dozen lines weigh something.
    talk = [{"source": "small_talk", "chat": True, "text": render(m), "messages": m, "tools": None}
            for _ in range(SMALL_TALK_COPIES) for _, m in conversations.small_talk()]
    splits["train"] += talk
    manifest["sources"].append({"name": "small_talk", "licence": "this repository's (hand-written)", "packages": {},
                                "train_docs": len(talk), "train_chars": sum(len(d["text"]) for d in talk)})

    out = args.work / "corpus"
    out.mkdir(parents=True, exist_ok=True)
    for split, docs in splits.items():
        random.Random(SHUFFLE_SEED).shuffle(docs)
        with open(out / f"{split}.jsonl", "w", encoding="utf-8") as f:
            for d in docs:
                f.write(json.dumps(d, ensure_ascii=False) + "\n")
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    for split, docs in splits.items():
        chat = sum(len(d["text"]) for d in docs if d["chat"])
        total = sum(len(d["text"]) for d in docs)
        print(f"{split}: {len(docs)} documents, {total / 1e6:.2f} M characters ({100 * chat / max(total, 1):.0f}% conversations)")
    print(f"-> {out}")


if __name__ == "__main__":
    main()
