"""Runs: the results store, the job plumbing, and the backends that compute statistics (local, Ray).

Importing this package registers the "ray" backend with `mia_core.scoring` (see `backends.py`);
the results store (`runs.store`, DuckDB) is imported by what uses it.
"""
from . import backends
from .ray_driver import RayOptions, WorkerError

__all__ = ["RayOptions", "WorkerError", "backends"]
