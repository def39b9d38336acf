"""Question-answer items built from the structured parts of the corpus packages.

Each extractor reads the unpacked Debian packages (make_data.py's WORK/root) and yields QA items:
a question about one subject, the answer taken from the source's own text, a short reasoning
note that names the subject and the plan (the `<think>` block of thinking conversations), and
optional follow-ups and a tool call that would fetch the same answer. conversations.py turns
them into chat documents. Everything is deterministic: file order, and `pick` (a hash) wherever
a phrasing is chosen.

Sources (licences in DATA.md): WordNet 3.0 (synsets), the Jargon File and the Devil's Dictionary
(headword entries), the World English Bible (verses by reference, NRSVA versification read from
libsword-dev's canon_nrsva.h: book names and verse counts only), Matthew Henry's Concise
Commentary (chapter introductions), fortune cookies with an attribution (quotes by author), the
Python 3.11 documentation (API entries, glossary, module pages) and the SQLite documentation
(function entries, page overviews).
"""

from __future__ import annotations

import gzip
import hashlib
import html
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import make_data as text


@dataclass
class QA:
    source: str                    # corpus source name (split hash, manifest)
    key: str                       # stable id within the source (split hash, phrasing picks)
    question: str
    answer: str
    thought: str                   # short reasoning: what is asked, where the answer comes from
    followups: list[tuple[str, str]] = field(default_factory=list)   # (question, answer) for later turns
    tool: tuple[str, dict, str] | None = None                          # (function, arguments, result)


def pick(options: list[str], key: str) -> str:
    """A fixed choice among phrasings, by hash (no global random state)."""
    return options[int(hashlib.sha256(key.encode()).hexdigest(), 16) % len(options)]


def first_sentences(s: str, limit: int = 400) -> str:
    """The leading sentences of `s`, at most `limit` characters (at least the first sentence)."""
    s = re.sub(r"\s+", " ", s).strip()
    if len(s) <= limit:
        return s
    cut = [m.end() for m in re.finditer(r"[.!?](?=\s+[A-Z(\"'“])", s)]
    fit = [c for c in cut if c <= limit]
    if fit:
        return s[:fit[-1]]
    return s[:cut[0]] if cut and cut[0] <= 2 * limit else s[:limit].rsplit(" ", 1)[0] + " ..."


def strip_tags(s: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", s))).replace("¶", "").strip()


def article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


# ---------------------------------------------------------------------------------------------
# Dictionaries


def wordnet(root: Path) -> Iterator[QA]:
    """One item per synset whose first word is a plain word (no digits), every second synset."""
    asks = ['What does "{w}" mean?', 'What is the meaning of the word "{w}"?', 'Define "{w}".',
            'What does the {pos} "{w}" mean?', 'Can you explain the word "{w}"?', 'What is meant by "{w}"?']
    thinks = ['The user asks about the word "{w}". WordNet lists it as {a} {pos}: {d}. I will give that meaning{plus}.',
              'This is a question about the meaning of "{w}", {a} {pos}. The definition is: {d}. I will answer with it{plus}.',
              '"{w}" is {a} {pos}. Its meaning is {d}. A short answer with the definition{plus} is enough.']
    for i, (words, pos, gloss) in enumerate(text.wordnet_synsets(root)):
        w = words[0]
        if i % 2 or re.search(r"[\d/]", w) or len(w) < 3:
            continue
        parts = [p.strip() for p in gloss.split(";")]
        definition = parts[0].rstrip(".")
        examples = [p.strip('"').strip() for p in parts[1:] if p.startswith('"')]
        answer = f'"{w}" is {article(pos)} {pos} meaning {definition}.'
        plus = []
        if len(words) > 1:
            answer += " Similar words: " + ", ".join(words[1:4]) + "."
            plus.append("synonyms")
        if examples:
            answer += f' For example: "{examples[0]}".'
            plus.append("an example")
        follow = []
        if examples:
            follow.append((pick(["Can you use it in a sentence?", "Give me an example.", "How is it used?"], f"wnf{i}"),
                           f'Here is an example: "{examples[0]}".'))
        if len(words) > 1:
            follow.append((pick(["Are there synonyms?", "What are some similar words?", "Any other words for it?"], f"wns{i}"),
                           f'Words with the same meaning as "{w}": ' + ", ".join(words[1:5]) + "."))
        key = f"wn{i}"
        yield QA("wordnet_qa", key, pick(asks, key).format(w=w, pos=pos), answer,
                 pick(thinks, key + "t").format(w=w, a=article(pos), pos=pos, d=definition,
                                               plus=" and " + " and ".join(plus) if plus else ""),
                 follow, ("lookup_word", {"word": w}, f"{w} ({pos}): {gloss}"))


def jargon(root: Path) -> Iterator[QA]:
    """The Jargon File's entries: ':term: /pronunciation/, n.' then the definition paragraphs."""
    raw = gzip.decompress((root / "usr/share/doc/jargon-text/jargon.txt.gz").read_bytes()).decode("utf-8", "replace")
    lines = raw.split("\n")
    asks = ['What does "{w}" mean in hacker jargon?', 'What is "{w}" in the Jargon File?', 'Explain the hacker term "{w}".',
            'In programmer slang, what is "{w}"?']
    for n, line in enumerate(lines):
        m = re.match(r"^\s*:([^:]{1,60}):(.*)$", line)
        if not m:
            continue
        term = m.group(1).strip()
        body: list[str] = []
        for follow in lines[n + 1:n + 40]:
            if re.match(r"^\s*:[^:]{1,60}:", follow):
                break
            body.append(follow.strip())
        paras = [p for p in re.split(r"\n\s*\n", "\n".join(body)) if p.strip()]
        if not paras:
            continue
        definition = first_sentences(re.sub(r"[{}]", "", paras[0]), 500)
        if len(definition) < 20:
            continue
        key = f"jg{n}"
        yield QA("jargon_qa", key, pick(asks, key).format(w=term), f'In hacker jargon, "{term}" means: {definition}',
                 f'"{term}" is a term from the Jargon File, the hackers\' dictionary. I will give its definition from there.',
                 [], ("lookup_word", {"word": term}, f"{term}: {definition}"))


def devils_dictionary(root: Path) -> Iterator[QA]:
    """Bierce's entries: 'WORD, n.  Definition...' paragraphs (verse quotations left out)."""
    raw = gzip.decompress((root / "usr/share/dictd/devil.dict.dz").read_bytes()).decode("utf-8", "replace")
    asks = ['How does the Devil\'s Dictionary define "{w}"?', 'What did Ambrose Bierce say "{w}" means?',
            'Give me the Devil\'s Dictionary entry for "{w}".']
    for n, para in enumerate(re.split(r"\n\s*\n", raw)):
        m = re.match(r"^([A-Z][A-Z' -]{1,30}), ([a-z. ]{1,12})\s+(.+)$", para.strip(), re.S)
        if not m:
            continue
        word = m.group(1).strip().lower()
        definition = first_sentences(m.group(3), 500)
        key = f"dv{n}"
        yield QA("devil_qa", key, pick(asks, key).format(w=word), f'Ambrose Bierce\'s Devil\'s Dictionary (1911) defines "{word}" as: {definition}',
                 f'The user wants Bierce\'s satirical definition of "{word}". I will quote the Devil\'s Dictionary entry.', [], None)


# ---------------------------------------------------------------------------------------------
# Bible: verses by reference (World English Bible), topics, Matthew Henry's chapter notes


def read_canon(canon_dir: Path, system: str) -> list[tuple[str, list[int]]]:
    """[(book name, [verses in chapter 1, 2, ...])] of a SWORD versification ("nrsva" or "kjv"),
    read from libsword-dev's canon headers (book names and verse counts: facts, no text)."""
    canon = (canon_dir / "canon.h").read_text("utf-8", "replace")
    own = canon if system == "kjv" else (canon_dir / f"canon_{system}.h").read_text("utf-8", "replace")
    suffix = "" if system == "kjv" else f"_{system}"
    book_re = r'\{"([^"]+)",\s*"[^"]*",\s*"[^"]*",\s*(\d+)\}'
    ot = re.findall(book_re, own.split(f"otbooks{suffix}[]")[1].split("};")[0])
    nt = re.findall(book_re, canon.split("ntbooks[]")[1].split("};")[0])
    table = re.sub(r"//[^\n]*", "", own.split(f"int vm{suffix}[]")[1].split("};")[0])
    counts = [int(x) for x in re.findall(r"\d+", table)]
    books, at = [], 0
    for name, chapters in ot + nt:
        books.append((name, counts[at:at + int(chapters)]))
        at += int(chapters)
    if at != len(counts):
        raise ValueError(f"{system} verse table has {len(counts)} chapters, the books {at}")
    return books


def book_display(name: str) -> str:
    """'I Samuel' -> '1 Samuel', 'Revelation of John' -> 'Revelation'."""
    name = re.sub(r"^III ", "3 ", re.sub(r"^II ", "2 ", re.sub(r"^I ", "1 ", name)))
    return {"Revelation of John": "Revelation"}.get(name, name)


def bible_index(root: Path, canon_dir: Path) -> list[tuple[str, int, int, str]]:
    """(book, chapter, verse, text) of every WEB verse, by SWORD's positional index: per testament,
    entry 0 the module heading, 1 the testament heading, then per book a heading and per chapter
    a heading (verse 0) followed by its verses."""
    mod_dir = root / "usr/share/sword/modules/texts/ztext/engWEB2015eb"
    books = read_canon(canon_dir, "nrsva")
    n_ot = next(i for i, (b, _) in enumerate(books) if b == "Matthew")
    out = []
    for stem, testament in (("ot", books[:n_ot]), ("nt", books[n_ot:])):
        entries = text.sword_records(mod_dir, stem)
        index = 2
        for name, chapters in testament:
            index += 1
            for c, verses in enumerate(chapters, 1):
                index += 1
                for v in range(1, verses + 1):
                    raw = entries.get(index, "")
                    index += 1
                    t = re.sub(r"\s+", " ", text.osis_to_text(raw)).strip()
                    if t:
                        out.append((book_display(name), c, v, t))
    return out


def bible(root: Path, canon_dir: Path) -> Iterator[QA]:
    verses = bible_index(root, canon_dir)
    asks = ["What does {r} say?", "Quote {r}.", "Can you read me {r}?", "What is written in {r}?", "Recite {r} from the Bible."]
    for i, (book, c, v, t) in enumerate(verses):
        if i % 2:
            continue
        ref = f"{book} {c}:{v}"
        key = f"bv{i}"
        follow = []
        if i + 1 < len(verses) and verses[i + 1][0] == book:
            nb, nc, nv, nt = verses[i + 1]
            follow.append((pick(["And the next verse?", "What comes next?", "Continue."], key + "f"), f'{nb} {nc}:{nv}: "{nt}"'))
        yield QA("bible_qa", key, pick(asks, key).format(r=ref), f'{ref} says: "{t}"',
                 f"The user wants the text of {ref}, in the book of {book}. I will quote it from the World English Bible.",
                 follow, ("bible_verse", {"reference": ref}, f"{ref} (World English Bible): {t}"))
    # Topics: a word and two verses that use it (proper names and common nouns of moderate frequency).
    uses: dict[str, list[int]] = {}
    for i, (_, _, _, t) in enumerate(verses):
        for w in set(re.findall(r"\b[A-Z][a-z]{3,}\b", t)):
            uses.setdefault(w, []).append(i)
    topic_asks = ["What does the Bible say about {w}?", "Tell me about {w} in the Bible.", "Where does the Bible mention {w}?",
                  "Tell me about {w}."]
    for w in sorted(uses):
        idx = uses[w]
        if not 4 <= len(idx) <= 400 or w in STOP_CAPITALS:
            continue
        a = idx[int(hashlib.sha256(w.encode()).hexdigest(), 16) % len(idx)]
        b = idx[(idx.index(a) + len(idx) // 2) % len(idx)]
        refs = [(f"{verses[j][0]} {verses[j][1]}:{verses[j][2]}", verses[j][3]) for j in sorted({a, b})]
        answer = f"{w} is named in {len(idx)} verses of the Bible. " + " ".join(f'{r}: "{t}"' for r, t in refs)
        key = f"bt{w}"
        yield QA("bible_qa", key, pick(topic_asks, key).format(w=w), answer,
                 f"{w} appears in the Bible. I will quote verses that mention {w}: " + " and ".join(r for r, _ in refs) + ".")


STOP_CAPITALS = {"Then", "There", "They", "This", "That", "When", "What", "Where", "With", "Your", "Behold", "Therefore",
                 "Also", "Now", "Because", "From", "Have", "Here", "Yahweh", "Will", "Shall", "Have", "Even", "Those",
                 "These", "Every", "After", "Before", "Thus", "Moreover", "Should", "Would", "Could", "Like", "Look",
                 "Come", "Give", "Take", "Make", "Many", "Some", "Most", "Into", "Upon", "Unto", "Amen", "Yes"}


def matthew_henry(root: Path, canon_dir: Path) -> Iterator[QA]:
    """Matthew Henry's chapter introductions ('Genesis 1' -> the note on its first verses)."""
    mod_dir = next(p for p in (root / "usr/share/sword/modules").glob("*/*/mhcc") if p.is_dir())
    kjv = read_canon(canon_dir, "kjv")   # the module's .conf names no versification: SWORD's default
    n_ot = next(i for i, (b, _) in enumerate(kjv) if b == "Matthew")
    asks = ["What does Matthew Henry say about {r}?", "Summarise {r} as Matthew Henry explains it.",
            "What is {r} about, according to Matthew Henry's commentary?"]
    for stem, testament in (("ot", kjv[:n_ot]), ("nt", kjv[n_ot:])):
        entries = text.sword_records(mod_dir, stem)
        index = 2
        for name, chapters in testament:
            index += 1
            for c, verses in enumerate(chapters, 1):
                index += 1
                note = next((entries[j] for j in range(index, index + verses) if entries.get(j)), "")
                index += verses
                note = text.osis_to_text(note)
                if len(note) < 80:
                    continue
                ref = f"{book_display(name)} {c}"
                key = f"mh{ref}"
                yield QA("mhcc_qa", key, pick(asks, key).format(r=ref),
                         f"Matthew Henry writes on {ref}: {first_sentences(note, 600)}",
                         f"The user asks about {ref}. Matthew Henry's Concise Commentary has a note on it; I will summarise it.")


# ---------------------------------------------------------------------------------------------
# Quotations: fortune cookies that end with an attribution line


def quotes(root: Path) -> Iterator[QA]:
    for i, cookie in enumerate(text.fortunes(root)):
        m = re.match(r"^(.{20,400}?)\s*\n\s*--\s*([A-Z][A-Za-z .'-]{2,40})\s*$", cookie, re.S)
        if not m:
            continue
        quote = re.sub(r"\s+", " ", m.group(1)).strip().strip('"')
        author = m.group(2).strip().rstrip(".,")
        key = f"fq{i}"
        if i % 2:
            yield QA("quotes_qa", key, pick(["Give me a quote by {a}.", "What did {a} say?", "Tell me a saying of {a}."], key).format(a=author),
                     f'{author} said: "{quote}"', f"The user wants a quotation from {author}. I will give one.")
        else:
            yield QA("quotes_qa", key, f'Who said "{quote}"?', f'That is a quote by {author}.',
                     f"This is a known quotation; it is attributed to {author}.")


# ---------------------------------------------------------------------------------------------
# Python and SQLite documentation

PY_KINDS = {"function": "function", "method": "method", "class": "class", "exception": "exception",
            "data": "constant", "attribute": "attribute"}


def python_docs(root: Path) -> Iterator[QA]:
    base = root / "usr/share/doc/python3.11/html"
    entry = re.compile(r'<dl class="py (\w+)">\s*<dt class="sig sig-object py" id="([\w.]+)">.*?</dt>\s*<dd>\s*<p>(.*?)</p>', re.S)
    asks = {"function": ["What does the Python function {n}() do?", "How do I use {n}() in Python?", "Explain {n}() in Python."],
            "method": ["What does the Python method {n}() do?", "What is {n}() for in Python?"],
            "class": ["What is the Python class {n}?", "What is {n} in Python?"],
            "exception": ["When does Python raise {n}?", "What is the Python exception {n}?"],
            "constant": ["What is {n} in Python?"], "attribute": ["What is the attribute {n} in Python?"]}
    for path in sorted((base / "library").glob("*.html")):
        page = path.read_text("utf-8", "replace")
        for m in entry.finditer(page):
            kind = PY_KINDS.get(m.group(1))
            name, desc = m.group(2), first_sentences(strip_tags(m.group(3)), 450)
            if not kind or len(desc) < 25:
                continue
            module = name.rsplit(".", 1)[0] if "." in name else "builtins"
            key = f"py{name}"
            where = f"the {module} module" if module != "builtins" else "the built-in namespace"
            yield QA("python_qa", key, pick(asks[kind], key).format(n=name), f"{name} is {article(kind)} {kind} in {where}. {desc}",
                     f"The user asks about {name}, a Python {kind} from {where}. The Python documentation describes it; I will explain it.",
                     [(pick(["Which module is it in?", "Where is it defined?"], key + "m"), f"{name} is in {where}.")],
                     ("python_docs", {"name": name}, desc))
    glossary = (base / "glossary.html").read_text("utf-8", "replace")
    for m in re.finditer(r'<dt id="term-[^"]*">(.*?)<a class="headerlink".*?</dt>\s*<dd>\s*<p>(.*?)</p>', glossary, re.S):
        term, desc = strip_tags(m.group(1)), first_sentences(strip_tags(m.group(2)), 500)
        key = f"pg{term}"
        for n, ask in enumerate(["What is {t} in Python?", "In Python, what does \"{t}\" mean?", "Explain {t} in Python."]):
            yield QA("python_qa", f"{key}/{n}", ask.format(t=term), f"In Python, {term}: {desc}",
                     f"The user asks about {term}, a term from the Python glossary. I will explain it.", [],
                     ("python_docs", {"name": term}, desc))
    for path in sorted((base / "library").glob("*.html")):
        title = re.search(r"<title>(.*?)</title>", path.read_text("utf-8", "replace"), re.S)
        if not title:
            continue
        m = re.match(r"([\w.]+) — (.*?) — Python", html.unescape(title.group(1)))
        if not m:
            continue
        module, summary = m.group(1), m.group(2).strip().rstrip(".")
        key = f"pm{module}"
        yield QA("python_qa", key, pick(["What is the Python module {m} for?", "What does the {m} module do?",
                                         "Tell me about the {m} module in Python."], key).format(m=module),
                 f"The {module} module: {summary}.", f"The user asks about the Python module {module}. Its documentation title says what it is for.",
                 [], ("python_docs", {"name": module}, f"{module}: {summary}"))


def sqlite_docs(root: Path) -> Iterator[QA]:
    base = root / "usr/share/doc/sqlite3"
    for page in ("lang_corefunc.html", "lang_aggfunc.html"):
        raw = (base / page).read_text("utf-8", "replace")
        for m in re.finditer(r"<dt><p><b>(.*?)</b></dt>\s*<dd>(.*?)</dd>", raw, re.S):
            sig = strip_tags(m.group(1))
            desc = first_sentences(strip_tags(m.group(2)), 500)
            name = sig.split("(")[0]
            for n, ask in enumerate(["What does the SQLite function {s} do?", "How does {f}() work in SQLite?",
                                     "Explain the SQL function {s} in SQLite."]):
                yield QA("sqlite_qa", f"sf{sig}/{n}", ask.format(s=sig, f=name), desc,
                         f"The user asks about {sig}, an SQL function of SQLite. The SQLite documentation describes it.", [],
                         ("sqlite_docs", {"topic": name}, desc))
    for path in sorted(base.glob("*.html")):
        raw = path.read_text("utf-8", "replace")
        title = re.search(r"<title>(.*?)</title>", raw, re.S)
        if not title:
            continue
        topic = strip_tags(title.group(1)).replace("SQLite Query Language: ", "")
        if len(topic) < 4 or "Index" in topic or "Release" in topic:
            continue
        body = text.html_to_text(path, lambda tag, a: tag == "body",
                                 lambda tag, a: a.get("class") in ("nosearch", "menu", "fancy_toc") or tag in ("form", "select", "svg"))
        paras = [p for p in re.split(r"\n\s*\n", body) if len(p) > 120 and not p.lstrip().startswith(("1.", "Table"))]
        if not paras:
            continue
        desc = first_sentences(paras[0], 600)
        key = f"sp{path.name}"
        for n, ask in enumerate(["What does the SQLite documentation say about {t}?", "Tell me about {t} in SQLite.",
                                 "Explain {t} (SQLite)."]):
            yield QA("sqlite_qa", f"{key}/{n}", ask.format(t=topic), desc,
                     f"The user asks about {topic} in SQLite. I will summarise the SQLite documentation on it.", [],
                     ("sqlite_docs", {"topic": topic}, desc))
