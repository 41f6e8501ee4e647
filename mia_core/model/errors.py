"""The error a model spec that cannot be used raises: one message that says why and what to do."""
from __future__ import annotations


class ModelLoadError(ValueError):
    """A model spec that cannot be loaded, with a message saying why and what to do."""
