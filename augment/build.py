"""Build the augmenter named by the config (``augment.method``, then ``augment.then``)."""

from __future__ import annotations

from typing import Any, Iterable

from augment.base import Augmenter
from augment.registry import NEEDS_CORPUS, make_augmenter


def _options(cfg: Any) -> dict:
    opts: dict = {} if cfg.p is None else {"p": cfg.p}  # None: the method's DEFAULT_P
    if getattr(cfg, "wordnet_dir", None) is not None:
        opts["wordnet_dir"] = cfg.wordnet_dir
    if getattr(cfg, "vectors", None) is not None:
        opts["vectors"] = cfg.vectors
    if getattr(cfg, "nlpaug_args", None) is not None:
        opts["nlpaug_args"] = cfg.nlpaug_args
    if getattr(cfg, "protect", None):  # a config with augment.protect (word-level stages keep protected words)
        opts["protect"] = cfg.protect
    return opts


def build_augmenter(cfg: Any, corpus_texts: Iterable[str]) -> Augmenter:
    """``cfg`` is an AugmentConfig; ``corpus_texts`` are the unlabelled texts the TF-IDF statistics
    are fitted on (the reference fits them on the unlabelled corpus), read once (an iterator over a
    pool on disk will do)."""
    then = getattr(cfg, "then", None)
    names = [cfg.method] + ([then] if then else [])
    stats = None
    if NEEDS_CORPUS & set(names):
        from augment.word_replace import fit_tfidf_stats

        stats = fit_tfidf_stats(corpus_texts)
    stages: list[Augmenter] = []
    if cfg.method == "precomputed":
        from augment.precomputed import PrecomputedAugmenter

        stages.append(PrecomputedAugmenter(cfg.file))
    else:
        stages.append(make_augmenter(cfg.method, _options(cfg), stats))
    if then:
        stages.append(make_augmenter(then, _options(cfg), stats))
    if len(stages) == 1:
        return stages[0]
    from augment.compose import Compose

    return Compose(stages)
