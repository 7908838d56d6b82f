"""Back-translation: translate each sentence to a pivot language and back.

Two engines share one driver, :class:`BackTranslation`:

* :class:`MarianEngine` runs transformers MarianMT models (``Helsinki-NLP/opus-mt-en-de`` and
  ``opus-mt-de-en`` by default; any pair by hub name or local folder). Decoding samples with a
  temperature (0.9 by default: the reference uses 0.6-0.9, "diversity matters more than quality"),
  optionally with top-k / top-p, or runs beam search when the temperature is None. Sentences are
  sorted by length and translated in batches; fp16/bf16 on GPU, float32 on CPU.
* :class:`ApertiumEngine` pipes text through the rule-based Apertium engine (Debian package
  ``apertium-eng-spa``): English -> Spanish -> English on CPU, with no model download. Many sentences
  go through one process call, separated by a marker line that survives translation. Apertium is
  deterministic: every copy of a text is the same unless another augmenter follows it.

The driver splits each text into paragraphs (newlines and IMDB ``<br />`` tags) and sentences,
back-translates every sentence, and rejoins them with the original paragraph separators. It keeps the
original sentence when either side is under 10 characters or their lengths differ by more than 50%
(the reference rule), and counts how often that happens in :attr:`BackTranslation.stats`.

Randomness comes only from the ``rng`` passed to ``__call__``: Marian batches are sampled under
``torch.random.fork_rng`` seeded from it, so the global torch RNG is left as it was.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Optional, Protocol, Sequence

import numpy as np

__all__ = [
    "split_paragraphs",
    "split_sentences",
    "keep_original",
    "TranslationEngine",
    "BackTranslation",
    "MarianEngine",
    "ApertiumEngine",
    "ApertiumMissingError",
    "marian_back_translation",
    "apertium_back_translation",
]

# Paragraph separators: newlines and <br /> tags (with the spaces around them), kept verbatim.
_PARA_SPLIT_RE = re.compile(r"((?:\s*(?:<\s*br\s*/?\s*>|\n)\s*)+)", re.IGNORECASE)
# A sentence ends at . ! ? (possibly repeated, possibly followed by closing quotes/brackets) followed
# by whitespace and something that can start a sentence.
_SENT_END_RE = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
# Common abbreviations after which a period does not end a sentence.
_ABBREV = frozenset("mr mrs ms dr prof st jr sr vs etc e.g i.e no vol fig approx".split())


def split_paragraphs(text: str) -> tuple[list[str], list[str]]:
    """Split ``text`` into paragraphs and the separators between them (newlines and ``<br />`` tags with
    the whitespace around them, kept verbatim).

    Returns ``(paragraphs, separators)`` with ``len(separators) == len(paragraphs) - 1``; a text that
    starts or ends with a separator has an empty first or last paragraph. Interleaving them rebuilds
    ``text`` exactly.
    """
    parts = _PARA_SPLIT_RE.split(text)
    return parts[0::2], parts[1::2]


def _join_paragraphs(paragraphs: Sequence[str], separators: Sequence[str]) -> str:
    parts = [paragraphs[0]]
    for s, p in zip(separators, paragraphs[1:]):
        parts.append(s)
        parts.append(p)
    return "".join(parts)


def split_sentences(paragraph: str) -> list[str]:
    """Split one paragraph into sentences (at . ! ? followed by a capital, digit or quote), not after
    common abbreviations or single initials. Sentences are stripped; joining them with single spaces
    gives the paragraph up to whitespace."""
    out: list[str] = []
    start = 0
    for m in _SENT_END_RE.finditer(paragraph):
        before = paragraph[start:m.start()].rstrip("\"')]")
        last_word = before.rsplit(None, 1)[-1] if before.strip() else ""
        word = last_word.rstrip(".!?").lower()
        if before.endswith(".") and (word in _ABBREV or (len(word) == 1 and word.isalpha())):
            continue
        out.append(paragraph[start:m.start() + len(m.group().rstrip())].strip())
        start = m.end()
    tail = paragraph[start:].strip()
    if tail:
        out.append(tail)
    return [s for s in out if s]


def keep_original(original: str, translated: str, min_chars: int = 10, max_len_change: float = 0.5) -> bool:
    """The reference rule: keep the original when either text is shorter than ``min_chars`` characters
    or the lengths differ by more than ``max_len_change`` times the original length."""
    a, b = len(original.strip()), len(translated.strip())
    return a < min_chars or b < min_chars or abs(b - a) > max_len_change * a


class TranslationEngine(Protocol):
    """Round-trip translation of sentence units: ``round_trip(units, rng)`` returns one back-translated
    string per unit, aligned. ``deterministic`` engines ignore ``rng`` (their output may be memoised)."""

    name: str
    deterministic: bool

    def round_trip(self, units: Sequence[str], rng: np.random.Generator) -> list[str]: ...


@dataclass
class _Split:
    paragraphs: list[list[str]]  # sentences of each paragraph
    separators: list[str]


class BackTranslation:
    """The back-translation augmenter: split into sentences, round-trip each through ``engine``, apply
    the keep-original rule per sentence, rejoin keeping the paragraph structure.

    :attr:`stats` counts ``texts``, ``sentences``, ``sentences_kept_original`` (the rule fired),
    ``sentences_too_short`` and ``sentences_length_changed`` (why it fired) and ``texts_unchanged``.
    """

    def __init__(self, engine: TranslationEngine, min_chars: int = 10, max_len_change: float = 0.5,
                 memo_size: int = 50000):
        self.engine = engine
        self.min_chars = int(min_chars)
        self.max_len_change = float(max_len_change)
        self.name = engine.name
        self.stats: Counter[str] = Counter()
        # A deterministic engine gives the same sentence the same translation: remember recent ones,
        # so several copies of a text (e.g. Apertium followed by a word-level augmenter) cost one call.
        self._memo: dict[str, str] = {}
        self._memo_size = memo_size if engine.deterministic else 0

    def __call__(self, texts: Sequence[str], rng: np.random.Generator) -> list[str]:
        splits: list[_Split] = []
        units: list[str] = []
        for text in texts:
            paragraphs, separators = split_paragraphs(text)
            sents = [split_sentences(p) for p in paragraphs]
            splits.append(_Split(sents, separators))
            for s in sents:
                units.extend(s)
        translated = self._translate(units, rng)
        out = []
        k = 0
        for text, sp in zip(texts, splits):
            new_paragraphs = []
            for sents in sp.paragraphs:
                new = []
                for s in sents:
                    t = translated[k]
                    k += 1
                    self.stats["sentences"] += 1
                    if keep_original(s, t, self.min_chars, self.max_len_change):
                        self.stats["sentences_kept_original"] += 1
                        short = min(len(s.strip()), len(t.strip())) < self.min_chars
                        self.stats["sentences_too_short" if short else "sentences_length_changed"] += 1
                        t = s
                    new.append(t)
                new_paragraphs.append(" ".join(new))
            result = _join_paragraphs(new_paragraphs, sp.separators)
            self.stats["texts"] += 1
            if result == text:
                self.stats["texts_unchanged"] += 1
            out.append(result)
        return out

    def _translate(self, units: list[str], rng: np.random.Generator) -> list[str]:
        if not self._memo_size:
            return self.engine.round_trip(units, rng) if units else []
        todo = list(dict.fromkeys(u for u in units if u not in self._memo))
        if todo:
            if len(self._memo) + len(todo) > self._memo_size:
                self._memo.clear()
            self._memo.update(zip(todo, self.engine.round_trip(todo, rng)))
        return [self._memo[u] for u in units]


# --------------------------------------------------------------------------------------------
# MarianMT
# --------------------------------------------------------------------------------------------


def _short_model_name(name: str) -> str:
    base = os.path.basename(os.path.normpath(name))
    return base.replace("opus-mt-", "")


def _default_device() -> str:
    import torch

    if torch.cuda.is_available():
        return f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"
    return "cpu"


class MarianEngine:
    """Round trip through two MarianMT models (``forward``: source -> pivot, ``backward``: pivot -> source).

    ``temperature`` (None: beam search with ``num_beams``), ``top_k`` and ``top_p`` (None: off) set the
    decoding. ``batch_size`` sentences are translated at once, after sorting by length (``sort=False``
    keeps the input order: the one-at-a-time baseline of the benchmark). ``device`` "auto" picks the GPU
    of this process's LOCAL_RANK when there is one, else the CPU; ``dtype`` "auto" is bf16 (fp16 where
    bf16 is unsupported) on GPU and float32 on CPU. Sentences longer than ``max_tokens`` are truncated.
    """

    deterministic = False

    def __init__(self, forward: str = "Helsinki-NLP/opus-mt-en-de", backward: str = "Helsinki-NLP/opus-mt-de-en",
                 *, temperature: Optional[float] = 0.9, top_k: Optional[int] = None, top_p: Optional[float] = None,
                 num_beams: int = 4, batch_size: int = 32, max_tokens: int = 256, device: str = "auto",
                 dtype: str = "auto", sort: bool = True):
        import torch
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        if temperature is not None and temperature <= 0:
            raise ValueError(f"temperature must be > 0 or None (beam search), got {temperature}")
        if top_p is not None and not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1] or None, got {top_p}")
        if top_k is not None and top_k < 1:
            raise ValueError(f"top_k must be >= 1 or None, got {top_k}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.temperature, self.top_k, self.top_p, self.num_beams = temperature, top_k, top_p, int(num_beams)
        self.deterministic = temperature is None  # beam search ignores the rng
        self.batch_size, self.max_tokens, self.sort = int(batch_size), int(max_tokens), bool(sort)
        self.device = torch.device(_default_device() if device == "auto" else device)
        if dtype == "auto":
            if self.device.type == "cuda":
                dtype = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
            else:
                dtype = "fp32"
        torch_dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}.get(dtype)
        if torch_dtype is None:
            raise ValueError(f"dtype must be auto, fp32, fp16 or bf16, got {dtype!r}")
        if self.device.type == "cpu" and torch_dtype == torch.float16:
            torch_dtype = torch.float32  # fp16 matmuls are slow or missing on CPU
        self.dtype = torch_dtype
        self.models = []
        for name in (forward, backward):
            tok = AutoTokenizer.from_pretrained(name)
            model = AutoModelForSeq2SeqLM.from_pretrained(name, dtype=torch_dtype).to(self.device).eval()
            self.models.append((tok, model))
        if temperature is None:
            decode = f"beam{self.num_beams}"
        else:
            decode = f"T{temperature}" + (f"-k{top_k}" if top_k else "") + (f"-p{top_p}" if top_p else "")
        self.name = f"marian-{_short_model_name(forward)}-{_short_model_name(backward)}-{decode}"

    def _generate_kwargs(self) -> dict:
        if self.temperature is None:
            return {"do_sample": False, "num_beams": self.num_beams}
        kw = {"do_sample": True, "num_beams": 1, "temperature": self.temperature, "top_k": self.top_k or 0}
        if self.top_p is not None:
            kw["top_p"] = self.top_p
        return kw

    def translate(self, sentences: Sequence[str], direction: int, rng: np.random.Generator) -> list[str]:
        """Translate with model ``direction`` (0 forward, 1 backward); output aligned with the input."""
        import torch

        tok, model = self.models[direction]
        order = list(range(len(sentences)))
        if self.sort:  # longest first: padding waste is smallest and an out-of-memory shows at once
            order.sort(key=lambda i: -len(sentences[i]))
        out: list[Optional[str]] = [None] * len(sentences)
        gen_kwargs = self._generate_kwargs()
        devices = [self.device] if self.device.type == "cuda" else []
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            batch = tok([sentences[i] for i in idx], return_tensors="pt", padding=True, truncation=True,
                        max_length=self.max_tokens).to(self.device)
            n_in = int(batch["input_ids"].shape[1])
            seed = int(rng.integers(0, 2**63 - 1))
            with torch.random.fork_rng(devices=devices), torch.inference_mode():
                torch.manual_seed(seed)  # seeded per batch from rng; global RNG restored on exit
                generated = model.generate(**batch, max_new_tokens=min(self.max_tokens, int(n_in * 1.5) + 10),
                                           **gen_kwargs)
            for i, t in zip(idx, tok.batch_decode(generated, skip_special_tokens=True)):
                out[i] = t.strip()
        return out  # type: ignore[return-value]

    def round_trip(self, units: Sequence[str], rng: np.random.Generator) -> list[str]:
        return self.translate(self.translate(units, 0, rng), 1, rng)


def marian_back_translation(forward: str = "Helsinki-NLP/opus-mt-en-de", backward: str = "Helsinki-NLP/opus-mt-de-en",
                            *, min_chars: int = 10, max_len_change: float = 0.5, **engine_kwargs) -> BackTranslation:
    """A :class:`BackTranslation` augmenter over a :class:`MarianEngine` (keyword arguments go to the engine)."""
    return BackTranslation(MarianEngine(forward, backward, **engine_kwargs), min_chars, max_len_change)


# --------------------------------------------------------------------------------------------
# Apertium
# --------------------------------------------------------------------------------------------

APERTIUM_PACKAGE = "apertium-eng-spa"
_SEPARATOR = "@@UDASEP@@"
_MARKS_RE = re.compile(r"(?<![\w@])[#@*~](?=\w)")  # Apertium's unknown/transfer/generation marks
_SPACE_BEFORE_PUNCT_RE = re.compile(r"\s+([.,!?;:)\]])")
_MULTISPACE_RE = re.compile(r"[ \t]{2,}")


class ApertiumMissingError(RuntimeError):
    """Apertium or its language pair is not installed; the message names the Debian package."""


def _clean_apertium(text: str) -> str:
    text = _MARKS_RE.sub("", text)
    text = _MULTISPACE_RE.sub(" ", text)
    text = _SPACE_BEFORE_PUNCT_RE.sub(r"\1", text)
    return text.strip()


class ApertiumEngine:
    """Round trip ``forward`` (e.g. eng-spa) then ``backward`` (spa-eng) through the ``apertium``
    command. Up to ``batch_size`` sentences go through one pair of processes, one per line pair
    separated by a marker line; if the marker count does not come back right the batch is split in
    halves (down to single sentences) so alignment is never lost."""

    deterministic = True

    def __init__(self, forward: str = "eng-spa", backward: str = "spa-eng", batch_size: int = 2000,
                 package: str = APERTIUM_PACKAGE, timeout: float = 600.0):
        self.forward, self.backward = forward, backward
        self.batch_size = int(batch_size)
        self.timeout = timeout
        self.name = f"apertium-{forward}"
        exe = shutil.which("apertium")
        if exe is None:
            raise ApertiumMissingError(
                f"Apertium back-translation needs the `apertium` command and the Debian package {package}: "
                f"`apt-get install -y {package}` (see scripts/install_system_deps.sh)"
            )
        self.exe = exe
        pairs = subprocess.run([exe, "-l"], capture_output=True, text=True, timeout=60).stdout.split()
        missing = [m for m in (forward, backward) if m not in pairs]
        if missing:
            raise ApertiumMissingError(
                f"Apertium has no language pair {', '.join(missing)} (installed: {', '.join(pairs) or 'none'}); "
                f"install the Debian package {package}: `apt-get install -y {package}`"
            )

    def _pipe(self, payload: str) -> str:
        """payload -> apertium forward -> apertium backward, the two processes running concurrently."""
        env = dict(os.environ, LC_ALL="C.UTF-8")
        p1 = subprocess.Popen([self.exe, "-u", self.forward], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=env)
        p2 = subprocess.Popen([self.exe, "-u", self.backward], stdin=p1.stdout, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=env)
        p1.stdout.close()  # type: ignore[union-attr]  # p2 owns it now

        def feed() -> None:
            try:
                p1.stdin.write(payload.encode("utf-8"))  # type: ignore[union-attr]
            except BrokenPipeError:
                pass
            finally:
                p1.stdin.close()  # type: ignore[union-attr]

        writer = threading.Thread(target=feed, daemon=True)
        writer.start()
        try:
            out, err2 = p2.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            p1.kill()
            p2.kill()
            raise
        writer.join()
        err1 = p1.stderr.read() if p1.stderr else b""  # type: ignore[union-attr]
        p1.wait()
        if p1.returncode or p2.returncode:
            raise RuntimeError(f"apertium failed ({p1.returncode}/{p2.returncode}): "
                               f"{(err1 + err2).decode('utf-8', 'replace')[-500:]}")
        return out.decode("utf-8", "replace")

    def _round_trip_batch(self, units: Sequence[str]) -> list[str]:
        clean = [" ".join(u.split()) for u in units]  # a unit is one line
        if len(clean) == 1:
            return [_clean_apertium(self._pipe(clean[0] + "\n"))]
        sep = f"\n\n{_SEPARATOR}\n\n"
        out = self._pipe(sep.join(clean) + sep).split(_SEPARATOR)
        if len(out) == len(clean) + 1 and not out[-1].strip():
            return [_clean_apertium(o) for o in out[:-1]]
        half = len(clean) // 2  # the marker was lost or duplicated somewhere: narrow it down
        return self._round_trip_batch(units[:half]) + self._round_trip_batch(units[half:])

    def round_trip(self, units: Sequence[str], rng: np.random.Generator) -> list[str]:
        out: list[str] = []
        for start in range(0, len(units), self.batch_size):
            out.extend(self._round_trip_batch(units[start:start + self.batch_size]))
        return out


def apertium_back_translation(forward: str = "eng-spa", backward: str = "spa-eng", *, min_chars: int = 10,
                              max_len_change: float = 0.5, batch_size: int = 2000) -> BackTranslation:
    """A :class:`BackTranslation` augmenter over an :class:`ApertiumEngine`."""
    return BackTranslation(ApertiumEngine(forward, backward, batch_size=batch_size), min_chars, max_len_change)
