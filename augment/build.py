"""Build the augmenter named by the config (``augment.method``)."""

from __future__ import annotations

from typing import Any, Sequence

from augment.base import Augmenter


def build_augmenter(cfg: Any, corpus_texts: Sequence[str]) -> Augmenter:
    """``cfg`` is an AugmentConfig; ``corpus_texts`` are the unlabelled texts the TF-IDF statistics
    are fitted on (the reference fits them on the unlabelled corpus)."""
    if cfg.method == "precomputed":
        from augment.precomputed import PrecomputedAugmenter

        return PrecomputedAugmenter(cfg.file)
    from augment.word_replace import TfIdfWordReplacement, UniformWordReplacement, fit_tfidf_stats

    stats = fit_tfidf_stats(corpus_texts)
    if cfg.method == "tf_idf":
        return TfIdfWordReplacement(stats, cfg.p)
    if cfg.method == "unif":
        return UniformWordReplacement(stats, cfg.p)
    raise ValueError(f"unknown augment.method {cfg.method!r}")
