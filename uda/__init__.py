"""uda: faithful Unsupervised Data Augmentation (consistency training) for transformers."""

__version__ = "0.1.0"
