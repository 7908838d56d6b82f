"""What several tasks share: ``heads.py`` (a transformers model with heads of our own, saved under the
model's key names), ``mlm.py`` and ``contrastive.py`` (optional encoder stages before training)."""
