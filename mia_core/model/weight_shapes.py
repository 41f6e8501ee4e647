"""Refuse a config.json that does not fit its safetensors weights before any model is built, in one sentence.

transformers builds the whole model from the config and only then compares it with the weights: a config claiming
400 layers over SmolLM2's 30 initialised 370 random layers (5 GB) before `check_loading_info` refused it, and
a vocabulary, head or MLP size that differs failed with "You set `ignore_mismatched_sizes` to `False`…". Here the
file's shapes come from the safetensors headers (no tensor is read) and the config's from the architecture built on
the meta device (no memory: 60 MB of module objects for 400 SmolLM2 layers). File keys are matched as transformers
5 matches them (its renamings, the base-model prefix added or stripped, the keys each model ignores); a tensor one of
its converters reshapes (fused MoE experts, split qkv) is left to `from_pretrained` and `check_loading_info`, as are
missing or extra tensors other than whole layers, and configs with remote code or quantised weights.
"""
from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import torch
from safetensors import safe_open
from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig
from transformers.conversion_mapping import get_model_conversion_mapping
from transformers.core_model_loading import WeightConverter, WeightRenaming, dot_natural_key, rename_source_key
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

from .errors import ModelLoadError

SAFE_SINGLE = "model.safetensors"
SAFE_INDEX = "model.safetensors.index.json"
#: The first numbered module list in a key ("model.layers", 3): how layers are counted, whatever the architecture.
_NUMBERED = re.compile(r"^(.*?)\.(\d+)\.")
#: Tensors old checkpoints hold that transformers drops without a word (`_adjust_missing_and_unexpected_keys`).
_ALWAYS_IGNORED = (r"rotary_emb\.inv_freq", r"(^|\.)position_ids$")
#: Words in a tensor's name that say which config field sizes it, when several give the differing number.
_HINTS = {"vocab_size": ("embed", "lm_head", "wte", "word"),
          "intermediate_size": ("mlp", "ffn", "fc", "feed_forward", "gate_proj", "up_proj", "down_proj"),
          "num_key_value_heads": ("k_proj", "v_proj", "key", "value"),
          "num_attention_heads": ("attn", "attention", "q_proj", "o_proj", "query", "qkv")}

Shape = tuple[int, ...]


def check_weight_shapes(folder: Path) -> None:
    """Raise `ModelLoadError` where config.json and the folder's safetensors disagree on layers or a tensor's shape."""
    files = file_shapes(folder)
    raw = json.loads((folder / "config.json").read_text())
    if not files or "auto_map" in raw or "quantization_config" in raw:  # pickle, remote code, packed quantised shapes
        return
    config = AutoConfig.from_pretrained(folder, trust_remote_code=False)
    if type(config) not in MODEL_FOR_CAUSAL_LM_MAPPING:  # from_pretrained says why it cannot load it
        return
    with torch.device("meta"):  # shapes without memory; the device context is this thread's only
        model = AutoModelForCausalLM.from_config(config)
    expected = {key: tuple(value.shape) for key, value in model.state_dict().items()}
    renamed = renamed_file_shapes(model, files, expected)
    problem = layer_count_problem(config, expected, renamed) or shape_problem(config, expected, renamed)
    if problem:
        raise ModelLoadError(f"the weights in {folder} do not match its config.json: {problem}; fix config.json or "
                             "the weight files")


def file_shapes(folder: Path) -> dict[str, Shape]:
    """Each tensor's shape in the safetensors `from_pretrained` reads (the index's shards, or model.safetensors),
    from the file headers only; empty when the folder has neither."""
    if (folder / SAFE_INDEX).exists():
        names = sorted(set(json.loads((folder / SAFE_INDEX).read_text())["weight_map"].values()))
    elif (folder / SAFE_SINGLE).exists():
        names = [SAFE_SINGLE]
    else:
        return {}
    shapes: dict[str, Shape] = {}
    for name in names:
        with safe_open(folder / name, framework="pt") as weights:
            shapes.update({key: tuple(weights.get_slice(key).get_shape()) for key in weights.keys()})
    return shapes


def renamed_file_shapes(model: torch.nn.Module, files: dict[str, Shape],
                        expected: dict[str, Shape]) -> dict[str, Shape | None]:
    """The file's tensors under the names `from_pretrained` gives them; None for a tensor a converter reshapes."""
    transforms = get_model_conversion_mapping(model)
    renamings = [t for t in transforms if isinstance(t, WeightRenaming)]
    converters = [t for t in transforms if isinstance(t, WeightConverter)]
    prefix = model.base_model_prefix
    ignored = re.compile("|".join((*_ALWAYS_IGNORED, *(model._keys_to_ignore_on_load_unexpected or ()))))
    renamed: dict[str, Shape | None] = {}
    for key in sorted(files, key=dot_natural_key):  # transformers' order (a group renaming starts at its first key)
        name, converted = rename_source_key(key, renamings, converters, prefix, expected)
        if name not in expected and key in expected:  # as transformers does: a key needing no rename, bar the prefix
            name, converted = rename_source_key(key, [], [], prefix, expected)
        if not ignored.search(name):
            renamed[name] = None if converted else files[key]
    return renamed


def layer_count_problem(config: PretrainedConfig, expected: dict[str, Shape],
                        renamed: dict[str, Shape | None]) -> str | None:
    """'config.json claims N layers … but the weight files hold M …' for the first numbered list they differ on."""
    claimed, held = _numbered(expected), _numbered(renamed)
    for lists, numbers in claimed.items():
        have = held.get(lists, set())
        if not have or len(have) == len(numbers):
            continue  # no such list in the files (a rename transformers resolves), or as many layers (renumbered?)
        text, count = config.get_text_config(), len(numbers)
        named = _json_name(text, "num_hidden_layers") if count == getattr(text, "num_hidden_layers", None) else lists
        layers = f"{count} layer{'' if count == 1 else 's'}"
        claim = f"config.json claims {layers} ({named}) but the weight files hold {len(have)}"
        lacking, extra = sorted(numbers - have), sorted(have - numbers)
        if lacking:
            return f"{claim}, so the weights of {_span(lists, lacking)} are missing from the files (random if loaded)"
        return f"{claim}, so the weights of {_span(lists, extra)} have no place in the config"
    return None


def shape_problem(config: PretrainedConfig, expected: dict[str, Shape],
                  renamed: dict[str, Shape | None]) -> str | None:
    """'<tensor> is (a, b) in the weight files but (c, d) by config.json (<field> …)' for the model's first tensor
    that differs (the embedding before the output layer)."""
    differing = [name for name in expected if renamed.get(name) not in (None, expected[name])]  # the model's order
    if not differing:
        return None
    name, others = differing[0], len(differing) - 1
    in_files, by_config = renamed[name], expected[name]
    more = f" (and {others:,} more tensor{' differs' if others == 1 else 's differ'})" if others else ""
    return (f"{name} is {_shape(in_files)} in the weight files but {_shape(by_config)} by config.json"
            f"{_explained(config, name, in_files, by_config)}{more}")


def _explained(config: PretrainedConfig, name: str, in_files: Shape, by_config: Shape) -> str:
    """' (vocab_size 400)': the config fields that give a size the file's tensor lacks; '' when none does."""
    text = config.get_text_config()
    sizes = {field: getattr(text, field, None) for field in ("vocab_size", "hidden_size", "intermediate_size")}
    heads, hidden = getattr(text, "num_attention_heads", None), getattr(text, "hidden_size", None)
    head_dim = getattr(text, "head_dim", None) or (hidden // heads if hidden and heads else None)
    said: dict[str, str] = {}
    for field in ("num_attention_heads", "num_key_value_heads"):
        count = getattr(text, field, None)
        if count and head_dim:
            sizes[field] = count * head_dim
            said[field] = f"{_json_name(text, field)} {count} × head_dim {head_dim} = {count * head_dim}"
    differ = {size for index, size in enumerate(by_config)
              if len(in_files) != len(by_config) or in_files[index] != size}
    fields = [field for field, size in sizes.items() if size in differ]
    module = name.rsplit(".", 2)[-2] if name.count(".") >= 1 else name  # "k_proj" in "….self_attn.k_proj.weight"
    for words_in in (module, name):  # the module's own name first: a k_proj sits in self_attn
        if hinted := [field for field in fields if any(word in words_in for word in _HINTS.get(field, ()))]:
            fields = hinted
            break
    if not fields:
        return ""
    return " (" + ", or ".join(said.get(field, f"{_json_name(text, field)} {sizes[field]}") for field in fields) + ")"


def _numbered(keys) -> dict[str, set[int]]:
    """The numbers under each numbered module list of `keys`: {"model.layers": {0, 1}}."""
    numbers: dict[str, set[int]] = defaultdict(set)
    for key in keys:
        if found := _NUMBERED.match(key):
            numbers[found[1]].add(int(found[2]))
    return numbers


def _span(lists: str, numbers: list[int]) -> str:
    """'model.layers.2 to model.layers.399' for a run of numbers, else the first three and a count."""
    if numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"{lists}.{numbers[0]}" if len(numbers) == 1 else f"{lists}.{numbers[0]} to {lists}.{numbers[-1]}"
    shown = ", ".join(f"{lists}.{number}" for number in numbers[:3])
    return f"{shown} and {len(numbers) - 3} more" if len(numbers) > 3 else shown


def _json_name(config: PretrainedConfig, field: str) -> str:
    """The field as config.json spells it (GPT-2 writes `n_layer` for `num_hidden_layers`)."""
    return config.attribute_map.get(field, field)


def _shape(shape: Shape) -> str:
    """'(300, 48)'; '(48)' for one dimension, not Python's '(48,)'."""
    return "(" + ", ".join(str(size) for size in shape) + ")"
