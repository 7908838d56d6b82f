"""The paragraphs the QA-shaped start builds its synthetic questions from: the non-test, non-dev
paragraphs of a SQuAD file (``qa_start.squad``) and any other texts (``qa_start.texts``), a text that
shares a sentence with a test or dev article being an error; and the held-out paragraphs (every 25th)
whose questions are the start's dev set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from tasks.qa.synthetic import chunk_text, word_windows
from uda.data import DataError

HELD_OUT_EVERY = 25  # every 25th paragraph's examples are held out of training (the dev set)


def squad_paragraphs(path: str, test_articles: int, dev_articles: int) -> tuple[list, dict, set[str]]:
    """Paragraphs of the SQuAD file's articles that are neither test nor dev in the task's split
    (sha256(title) order), the split's article titles, and the word runs (word_windows) of the test and dev
    paragraphs. Paragraphs are read whether or not they have questions."""
    from tasks.common.squad import article_order, find_squad_json, load_squad_file

    load_squad_file(path)  # the task's own checks of the layout, with its error messages
    obj = json.loads(find_squad_json(Path(path).expanduser()).read_text(encoding="utf-8-sig"))
    items = [(str(a.get("title", f"article-{i}")), p["context"]) for i, a in enumerate(obj["data"])
             for p in a.get("paragraphs", []) if isinstance(p.get("context"), str)]
    order = article_order([t for t, _ in items])
    if len(order) <= test_articles + dev_articles:
        raise DataError(f"qa_start.squad '{path}' has {len(order)} articles, and the split's qa_start.test_articles "
                        f"{test_articles} + qa_start.dev_articles {dev_articles} hold out all of them: lower them to "
                        f"those of the squad_v2 runs this start is for")
    held = set(order[:test_articles + dev_articles])
    seen, paras, held_words = set(), [], set()
    for title, context in items:
        if (title, context) in seen:
            continue
        seen.add((title, context))
        if title in held:
            held_words |= word_windows(context)
        else:
            paras.append((title, context))
    articles = {"test": order[:test_articles], "dev": order[test_articles:test_articles + dev_articles],
                "unlabeled_pool": order[test_articles + dev_articles:]}
    return paras, articles, held_words


def text_files(path: str) -> list[Path]:
    """The files a ``qa_start.texts`` entry names: the file itself, or a folder's .txt, .json and
    .jsonl(.gz) files (sorted)."""
    p = Path(path).expanduser()
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.is_file() and _text_file(f))
        if not files:
            raise DataError(f"qa_start.texts folder '{p}' holds no .txt, .json or .jsonl(.gz) file")
        return files
    if p.is_file():
        return [p]
    raise DataError(f"qa_start.texts '{p}' does not exist; give a .txt, .json or .jsonl(.gz) file or a folder of them")


def read_texts(path: str, text_column: str, limit: Optional[int]) -> list[str]:
    """Texts of a .txt file (paragraphs separated by blank lines), a .json/.jsonl(.gz) file (the
    ``text_column`` of each record) or a folder of such files (sorted)."""
    from uda.io import iter_jsonl, open_text

    out: list[str] = []
    for f in text_files(path):
        name = f.name.lower()
        if name.endswith((".txt", ".txt.gz")):
            with open_text(f) as fh:
                out += [b.strip() for b in fh.read().split("\n\n") if b.strip()]
        elif name.endswith((".jsonl", ".jsonl.gz")):
            for lineno, row in iter_jsonl(f):
                out.append(_column(row, text_column, f, lineno))
                if limit is not None and len(out) >= limit:
                    break
        else:
            with open_text(f) as fh:
                try:
                    obj = json.load(fh)
                except json.JSONDecodeError as e:
                    raise DataError(f"qa_start.texts file '{f}' is not valid JSON (line {e.lineno}: {e.msg})") from None
            if isinstance(obj, dict) and "data" in obj:
                raise DataError(f"qa_start.texts file '{f}' is a SQuAD file: pass it as qa_start.squad (--squad), so "
                                f"that its test and dev articles are held out")
            rows = obj if isinstance(obj, list) else [obj]
            out += [_column(r, text_column, f, i + 1) for i, r in enumerate(rows)]
        if limit is not None and len(out) >= limit:
            return out[:limit]
    return out


def _text_file(f: Path) -> bool:
    return f.name.lower().endswith((".txt", ".txt.gz", ".json", ".jsonl", ".jsonl.gz"))


def _column(row: Any, column: str, f: Path, where: int) -> str:
    if isinstance(row, str):
        return row
    if not isinstance(row, dict) or not isinstance(row.get(column), str):
        raise DataError(f"qa_start.texts file '{f}', record {where}: no text column '{column}' (choose it with "
                        f"qa_start.text_column)")
    return row[column]


def collect_paragraphs(s: Any) -> tuple[list[tuple[str, str, str]], dict]:
    """(paragraph id, title, text) triples from ``s.squad`` and ``s.texts`` (``s``: the qa_start
    section), and the data_info record: the articles read (the squad_v2 task refuses a start that read
    its dev or test articles), the held-out ones, the text files read. A text sharing a sentence with
    a test or dev paragraph of the SQuAD file is an error naming it."""
    paras: list[tuple[str, str, str]] = []
    info: dict = {"squad": None, "articles": {}, "texts": [], "files": {}}
    held_words: set[str] = set()
    if s.squad:
        sq, articles, held_words = squad_paragraphs(s.squad, s.test_articles, s.dev_articles)
        info["squad"] = info["files"]["squad"] = str(Path(s.squad).expanduser().resolve())
        info["held_out_articles"] = {"test": articles["test"], "dev": articles["dev"]}
        if s.squad_paragraphs:
            paras += [(f"squad{i}", t, c) for i, (t, c) in enumerate(sq)]
            info["articles"] = {"unlabeled_pool": sorted({t for t, _ in sq})}
    for k, path in enumerate(s.texts):
        texts = read_texts(path, s.text_column, s.max_texts)
        n0 = len(paras)
        for i, t in enumerate(texts):
            shared = word_windows(t) & held_words if held_words else set()
            if shared:
                raise DataError(f"qa_start.texts '{path}', text {i + 1} shares a sentence with a test or dev article "
                                f"of qa_start.squad (the words {next(iter(shared))[:80]!r}; case, punctuation and "
                                f"spacing aside); test and dev text must not be trained on: remove it")
            paras += [(f"t{k}-{i}-{j}", Path(path).name, chunk) for j, chunk in enumerate(chunk_text(t, s.chunk_words))]
        info["texts"].append({"path": str(Path(path).expanduser().resolve()), "texts": len(texts),
                              "paragraphs": len(paras) - n0})
        info["files"].update({f"texts{k}:{f.name}": str(f.resolve()) for f in text_files(path)})
    if not paras:
        raise DataError("no text to build questions from: give qa_start.squad (--squad FILE, its non-test, non-dev "
                        "paragraphs) and/or qa_start.texts (--texts PATH)")
    info["held_out_check"] = ("texts checked against the test and dev articles of qa_start.squad" if held_words else
                              "none: no qa_start.squad given, so nothing tells which text is held out")
    if s.texts and not held_words:
        from tqdm.auto import tqdm

        tqdm.write("warning: no qa_start.squad (--squad FILE) given, so the texts were checked against no test or "
                   "dev article; a squad_v2 run from this start warns that its scores may not be held out. Give "
                   "--squad with the SQuAD file the reader will be tested on")
    return paras, info


def held_out_split(paras: list) -> tuple[list, list]:
    """(training paragraphs, held-out paragraphs): every 25th paragraph is held out (the last one when
    there are fewer than 25, and none when there is one)."""
    held = {i for i in range(len(paras)) if i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1} or (
        {len(paras) - 1} if len(paras) > 1 else set())
    return [p for i, p in enumerate(paras) if i not in held], [paras[i] for i in sorted(held)]
