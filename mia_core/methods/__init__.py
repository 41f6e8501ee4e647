"""Membership-inference methods; importing this package registers every method in `METHODS`."""
from . import dc_pdd, loss, lowercase, min_k, min_k_pp, ref, zlib  # noqa: F401  (registration)
from .registry import METHODS, NEEDS, MethodSpec, Score, get_method, register

__all__ = ["METHODS", "NEEDS", "MethodSpec", "Score", "get_method", "register"]
