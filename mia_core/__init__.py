"""MIA Lens core: was this text in a language model's pretraining data?

Data flow: `load_model` → `LanguageModel.token_stats` (one forward pass per text, cached) →
methods in `METHODS` (`score`, `score_texts`) → `metrics`. No Streamlit anywhere in this package.
The folders follow that flow: model/ → methods/ → scoring → metrics, evaluation → audit/, runs/;
docs/architecture.md draws it.

Importing the package is light (no torch, no transformers), so `mia --help` answers at once: the
public names below are imported on first use (PEP 562 module `__getattr__`), `from mia_core import X`
and `mia_core.X` work as before.
"""
from __future__ import annotations

import importlib
import importlib.util

from .version import __version__

#: Public name → the module that defines it (a module's own name: the module itself).
EXPORTS = {
    "FrequencyTable": "mia_core.methods.dc_pdd.frequency",
    "build_frequency_table": "mia_core.methods.dc_pdd.frequency",
    "load_frequency_table": "mia_core.methods.dc_pdd.frequency",
    "LanguageModel": "mia_core.model.language_model",
    "METHODS": "mia_core.methods",
    "Score": "mia_core.methods",
    "get_method": "mia_core.methods",
    "ModelLoadError": "mia_core.model.errors",
    "load_model": "mia_core.model.loading",
    "ServedModel": "mia_core.model.served.served_model",
    "is_served_spec": "mia_core.model.served.spec",
    "StatsPolicy": "mia_core.model.policy",
    "TokenStats": "mia_core.api",
    "ModelAccess": "mia_core.api",
    "methods_allowed": "mia_core.methods",
    "score": "mia_core.scoring",
    "score_texts": "mia_core.scoring",
    "blind": "mia_core.blind",
    "extraction": "mia_core.extract",
    "ExtractionSettings": "mia_core.extract",
    "dataset_inference": "mia_core.dataset_inference",
    "datasets": "mia_core.inputs.datasets",
    "metrics": "mia_core.metrics",
    "reference": "mia_core.reference",
    "runs": "mia_core.runs",
}

#: Loaded along with a module: scoring's "ray" backend is registered by `runs` (runs imports scoring, never back).
COMPANIONS = {"mia_core.scoring": "mia_core.runs"}

__all__ = [
    "FrequencyTable", "LanguageModel", "METHODS", "ModelLoadError", "ModelAccess", "Score", "StatsPolicy", "TokenStats",
    "ExtractionSettings", "__version__", "blind", "extraction", "build_frequency_table", "dataset_inference", "datasets", "get_method",
    "ServedModel", "is_served_spec", "load_frequency_table", "load_model", "methods_allowed", "metrics", "reference", "runs", "score", "score_texts",
]


def __getattr__(name: str):
    """Import a public name's module on first use and keep the name here (PEP 562); `mia_core.audit` and the
    other subpackages load on first use too, as they did when this package imported everything."""
    module_name = EXPORTS.get(name)
    if module_name is None and not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}"):
        module_name = f"{__name__}.{name}"
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(module_name)
    if module_name in COMPANIONS:
        importlib.import_module(COMPANIONS[module_name])
    value = module if module_name.rsplit(".", 1)[-1] == name else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names, loaded or not (for completion and `dir(mia_core)`)."""
    return sorted({*globals(), *EXPORTS})
