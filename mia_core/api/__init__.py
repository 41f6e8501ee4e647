"""The contracts everything imports: `TokenStats`, `Score`, parameters, model access, `MethodSpec` and the registry.

NumPy only (no torch): a served model, a report or a test can use them without loading a model.
"""
from .access import ACCESS, FULL_ACCESS, FULL_VOCABULARY, AccessNeeds, ModelAccess, refusal
from .method import (
    HELPER_NEEDS, LESSON_STAGES, LOGP, LOGP_RANGE, MODEL_NEEDS, NEED_WORDS, NEEDS, REF_NEEDS, MethodSpec, Paper,
    Supervised, TokenView,
)
from .params import KParams, NoParams, ParamInfo, is_int, param, param_infos
from .registry import (
    METHODS, Allowed, get_method, methods_allowed, methods_for, model_access, reading, register, stats_only_methods,
    teaching_order,
)
from .score import Score, as_fraction, check_k, lowest_k, mean_of_all, require_tokens
from .stats_batch import StatsBatch, batch_lowest_k, batch_mean, batch_selection, first_occurrences_batch
from .token_stats import TokenStats

__all__ = ["ACCESS", "FULL_ACCESS", "FULL_VOCABULARY", "AccessNeeds", "ModelAccess", "refusal", "HELPER_NEEDS",
           "LESSON_STAGES", "LOGP", "LOGP_RANGE", "MODEL_NEEDS", "NEED_WORDS", "NEEDS", "REF_NEEDS", "MethodSpec", "Paper",
           "Supervised", "TokenView", "KParams", "NoParams", "ParamInfo", "is_int", "param", "param_infos", "METHODS",
           "Allowed", "get_method", "methods_allowed", "methods_for", "model_access", "reading", "register",
           "stats_only_methods", "teaching_order", "Score", "as_fraction", "check_k", "lowest_k", "mean_of_all",
           "require_tokens", "StatsBatch", "batch_lowest_k", "batch_mean", "batch_selection", "first_occurrences_batch",
           "TokenStats"]
