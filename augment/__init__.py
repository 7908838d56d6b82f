"""Augmenters that make the second view of an unlabelled text for consistency training."""
