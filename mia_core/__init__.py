"""MIA Lens core: was this text in a language model's pretraining data?

Data flow: `load_model` → `LanguageModel.token_stats` (one forward pass per text, cached) →
methods in `METHODS` (`score`, `score_texts`) → `metrics`. No Streamlit anywhere in this package.
"""
from . import datasets, metrics
from .frequency import FrequencyTable, build_frequency_table, load_frequency_table
from .language_model import LanguageModel
from .loading import ModelLoadError, load_model
from .methods import METHODS, Score, get_method
from .scoring import score, score_texts
from .token_stats import TokenStats

__version__ = "0.1.0"

__all__ = [
    "FrequencyTable", "LanguageModel", "METHODS", "ModelLoadError", "Score", "TokenStats",
    "build_frequency_table", "datasets", "get_method", "load_frequency_table", "load_model", "metrics",
    "score", "score_texts",
]
