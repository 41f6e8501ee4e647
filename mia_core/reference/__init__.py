"""Reference sets of known non-members and conformal p-values: how unusual is this text's score?

`build_reference` scores known non-members once per model and setting; `cached_reference` keeps them in the
cache (`reference.cache`) so later texts and sessions reuse them; `save_reference` / `load_reference` keep
them on disk without pickle; progress comes as `TextsProgress` (texts done, elapsed, ETA); `compare` turns a text's score into a p-value, a
percentile and a length check; `demo_reference` is the demo's built-in set.
"""
from .build import DEMO_REFERENCE, build_reference, check_demo_model, demo_reference, demo_split, demo_texts
from .cache import cached_reference, kept_reference, references_dir
from .progress import TextsProgress, duration_words
from ..metrics import benjamini_hochberg as bh_adjust
from .pvalues import conformal_p_values, format_p, in_words, percentiles
from .reference_set import (
    ReferenceSet, check_model, compare, is_reference_folder, load_reference, save_reference, setting_conflicts,
)

__all__ = ["DEMO_REFERENCE", "ReferenceSet", "TextsProgress", "bh_adjust", "build_reference", "cached_reference",
           "check_demo_model", "check_model", "compare", "conformal_p_values", "demo_reference", "demo_split",
           "demo_texts", "duration_words", "format_p", "in_words", "is_reference_folder", "kept_reference",
           "load_reference", "percentiles", "references_dir", "save_reference", "setting_conflicts"]
