"""Runs: the results store, the job plumbing, and the backends that compute statistics (local, Ray).

Importing this package registers the "ray" backend with `mia_core.scoring` (see `backends.py`).
"""
from . import backends
from .ray_driver import RayOptions, WorkerError
from .store import ResultsStore, RunRecord

__all__ = ["RayOptions", "ResultsStore", "RunRecord", "WorkerError", "backends"]
