#!/usr/bin/env python3
"""Builds the training corpus for deepseek-mini from a Debian package, so that nothing but this
script is committed.

Source: Debian 12's `python3.11-doc` package (the Python 3.11 documentation). Its reStructuredText
sources ship under /usr/share/doc/python3.11/html/_sources/. License: the PSF License Agreement
(see the package's /usr/share/doc/python3.11-doc/copyright), which allows reproducing and
preparing derivative works provided the PSF's copyright notice is retained: corpus.json keeps it.

What it keeps: the English prose. Code samples, interactive sessions, directives' own syntax,
tables, labels and section underlines are dropped; inline markup (:func:`len`, ``x``, *em*)
becomes its text; each paragraph becomes one line. Documents are split into training and
held-out sets by a hash of their path (about 1 in 25 held out), so held-out text is whole
documents the model never saw.

    python3 train/corpus.py [--deb PATH] [--out train/data]
"""

import argparse
import hashlib
import json
import pathlib
import re
import subprocess
import tempfile

PACKAGE = "python3.11-doc"
SOURCES = "usr/share/doc/python3.11/html/_sources"
HELD_OUT_ONE_IN = 25

# Directives whose indented body is prose (kept, dedented); every other directive's body is code,
# an index entry, a table or a table of contents (dropped).
PROSE_DIRECTIVES = {
    "function", "method", "class", "attribute", "data", "exception", "describe", "decorator",
    "classmethod", "staticmethod", "coroutinefunction", "coroutinemethod", "abstractmethod",
    "note", "warning", "seealso", "versionadded", "versionchanged", "deprecated", "impl-detail",
    "attention", "caution", "important", "tip", "hint", "topic", "sidebar", "opcode", "cmdoption",
    "option", "envvar", "glossary", "productionlist-prose", "admonition", "rubric",
}

UNDERLINE = re.compile(r"^\s*([=\-~*^\"#+`'.:_])\1{2,}\s*$")
SIMPLE_TABLE = re.compile(r"^\s*=+(\s+=+)+\s*$")
DIRECTIVE = re.compile(r"^(\s*)\.\.\s+([\w:-]+)::")
ROLE_WITH_TARGET = re.compile(r":[\w:-]+:`[!~]?([^`<]*?)\s*<[^`>]*>`")
ROLE = re.compile(r":[\w:-]+:`[!~]?([^`]*)`")
LINK = re.compile(r"`([^`<]*?)\s*<[^`>]*>`__?")
LITERAL = re.compile(r"``([^`]*)``")
INTERPRETED = re.compile(r"`([^`]*)`_?")
STRONG = re.compile(r"\*\*([^*]+)\*\*")
EMPHASIS = re.compile(r"(?<![\w*])\*([^*\s][^*]*)\*")
BULLET = re.compile(r"^([*\-+]|\d+\.|#\.)\s+")


def indent(line):
    return len(line) - len(line.lstrip(" "))


def inline(text):
    for pattern in (ROLE_WITH_TARGET, ROLE, LINK, LITERAL, INTERPRETED, STRONG, EMPHASIS):
        text = pattern.sub(r"\1", text)
    return text.replace("\\", "")


def prose(rst):
    """The paragraphs of one reStructuredText document, one per line."""
    paragraphs, current = [], []
    skip_deeper_than = None  # drop lines indented more than this (a code or directive body)
    pending_literal = False  # the last paragraph ended in '::': a literal block follows

    def flush():
        if current:
            paragraphs.append(" ".join(current))
            current.clear()

    for raw in rst.splitlines():
        line = raw.expandtabs(8).rstrip()
        if not line.strip():
            flush()
            continue
        level = indent(line)
        if skip_deeper_than is not None:
            if level > skip_deeper_than:
                continue
            skip_deeper_than = None
        if pending_literal:
            pending_literal = False
            if level > pending_level:
                skip_deeper_than = pending_level
                continue
        stripped = line.strip()
        directive = DIRECTIVE.match(line)
        if directive:
            flush()
            if directive.group(2) not in PROSE_DIRECTIVES:
                skip_deeper_than = level
            continue
        if stripped.startswith(".."):  # comments, labels, substitutions
            flush()
            skip_deeper_than = level
            continue
        if UNDERLINE.match(line) or SIMPLE_TABLE.match(line) or stripped[0] in "+|":
            flush()
            continue
        if stripped.startswith((">>>", "...", "$ ")):
            flush()
            continue
        if stripped.startswith(":") and re.match(r"^:[\w -]+:", stripped):  # field lists
            flush()
            continue
        if BULLET.match(stripped):
            flush()
        if stripped.endswith("::"):
            pending_literal, pending_level = True, level
            # reST: "text::" reads "text:", "text ::" and "text.::" read "text" and "text.".
            bare = stripped[:-2]
            stripped = bare.rstrip() if bare.endswith(" ") or bare[-1:] in ".?!:" else bare + ":"
            if not stripped:
                continue
        current.append(inline(stripped))
    flush()
    keep = []
    for p in paragraphs:
        p = re.sub(r"\s+", " ", p).strip()
        letters = sum(c.isalpha() or c == " " for c in p)
        if len(p) >= 40 and letters >= 0.8 * len(p):
            keep.append(p)
    return keep


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--deb", help="a downloaded python3.11-doc .deb (default: apt-get download)")
    ap.add_argument("--out", default="train/data")
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        if args.deb:
            deb = pathlib.Path(args.deb).resolve()
        else:
            subprocess.run(["apt-get", "download", PACKAGE], cwd=tmp, check=True)
            deb = next(tmp.glob(f"{PACKAGE}_*.deb"))
        version = subprocess.run(["dpkg-deb", "-f", str(deb), "Version"], check=True,
                                 capture_output=True, text=True).stdout.strip()
        root = tmp / "x"
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
        docs = sorted((root / SOURCES).rglob("*.rst.txt"))
        copyright_text = (root / "usr/share/doc" / PACKAGE / "copyright").read_text(errors="replace")
        splits = {"train": [], "val": []}
        for doc in docs:
            rel = str(doc.relative_to(root / SOURCES))
            if rel.startswith("whatsnew/changelog"):  # issue numbers and names, little prose
                continue
            paragraphs = prose(doc.read_text(encoding="utf-8", errors="replace"))
            if not paragraphs:
                continue
            h = int(hashlib.sha1(rel.encode()).hexdigest(), 16)
            split = "val" if h % HELD_OUT_ONE_IN == 0 else "train"
            splits[split].append("\n".join(paragraphs))
        info = {"package": PACKAGE, "version": version, "license": "PSF-2.0 (Python Software "
                "Foundation License Agreement); Copyright (c) 2001-2023 Python Software Foundation",
                "source": SOURCES, "held_out_one_in": HELD_OUT_ONE_IN}
        for split, texts in splits.items():
            data = ("\n\n".join(texts) + "\n").encode("utf-8")
            (out / f"{split}.txt").write_bytes(data)
            info[split] = {"documents": len(texts), "bytes": len(data),
                           "sha256": hashlib.sha256(data).hexdigest()}
        (out / "COPYRIGHT").write_text(copyright_text)
        (out / "corpus.json").write_text(json.dumps(info, indent=2) + "\n")
        print(json.dumps(info, indent=2))


if __name__ == "__main__":
    main()
