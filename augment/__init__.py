"""Augmenters that make the second view of an unlabelled text for consistency training.

- ``base``: the ``Augmenter`` protocol (``name``; ``__call__(texts, rng) -> list[str]``).
- ``word_replace``: TF-IDF and uniform word replacement (UDA's ``tf_idf-p`` / ``unif-p``).
- ``word_level``: WordNet synonyms, random swap / deletion, GloVe-neighbour replacement.
- ``backtranslate``: back-translation through MarianMT models or Apertium.
- ``precomputed``: copies made ahead of time, looked up by the original text.
- ``nlpaug_adapter``: any nlpaug text augmenter as a method (``nlpaug:keyboard``, ...), seeded per text.
- ``compose``, ``registry``, ``build``: chaining, methods by name, and the config's augmenter.
- ``config``: the ``augment`` config section, registered with the core's config on import.
- ``pipeline``: whole data sets with workers / ranks, a cache, resume and an ordered merge
  (``scripts/uda_augment.py`` is its command line).
"""

from augment import config  # noqa: F401 (registers the "augment" config section)
