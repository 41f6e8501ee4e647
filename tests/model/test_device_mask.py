"""A padded batch's mask built on the device (`device_mask`): the same numbers as transformers' own mask, bit for bit,
for every architecture that takes it, and the forward pass then reads nothing back from the device (transformers'
check of a 2-D mask does, which on CUDA makes the host wait for the batches queued before)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import AutoConfig, AutoModelForCausalLM, masking_utils

from mia_core.model import device_mask, forward, pipeline
from mia_core.model.forward import FLOAT_STATS, INT_STATS, Segment

from tests.support.tiny import random_texts

SMALL = dict(vocab_size=300, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
             max_position_embeddings=128)
EXTRA = {"llama": dict(num_key_value_heads=2), "stablelm": dict(num_key_value_heads=4),
         "gpt2": dict(n_embd=32, n_layer=2, n_head=4, n_positions=128)}


def tiny(model_type: str, attn: str = "sdpa"):
    torch.manual_seed(0)
    config = AutoConfig.for_model(model_type, **SMALL, **EXTRA.get(model_type, {}), bos_token_id=1, eos_token_id=2)
    return AutoModelForCausalLM.from_config(config, attn_implementation=attn).eval()


def padded_batch(lengths=(20, 13, 7, 2)):
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 300, (len(lengths), max(lengths)), generator=generator)
    mask = torch.zeros_like(ids)
    for b, n in enumerate(lengths):
        mask[b, :n] = 1
    return ids * mask, mask


@pytest.mark.parametrize("model_type", sorted(device_mask.DEVICE_MASK_TYPES))
def test_each_architecture_gives_the_same_logits_and_statistics_from_the_mask_built_on_the_device(model_type):
    model = tiny(model_type)
    assert device_mask.takes_device_mask(model)
    ids, mask = padded_batch()
    with torch.inference_mode():
        plain = model(input_ids=ids, attention_mask=mask, use_cache=False).logits
        built = model(input_ids=ids, attention_mask=device_mask.causal_padding_mask(mask), use_cache=False).logits
    assert torch.equal(plain, built)
    rows_ids = [row[:n].tolist() for row, n in zip(ids, mask.sum(1))]
    arrays = forward.batch_arrays([Segment(b, row, 1) for b, row in enumerate(rows_ids)])
    assert np.array_equal(arrays.ids, ids.numpy())
    rows, targets = torch.from_numpy(arrays.rows), torch.from_numpy(arrays.targets)
    split = forward.plain_head(model)
    a = forward.batch_stats(model, split, ids, mask, rows, targets)
    b = forward.batch_stats(model, split, ids, device_mask.causal_padding_mask(mask), rows, targets)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


class ReadBacks(TorchDispatchMode):
    """Counts the operations that bring a tensor's value to the host (`bool(t)`, `t.item()`): on CUDA each one waits
    for everything queued before it."""

    READ_BACK = (torch.ops.aten.is_nonzero.default, torch.ops.aten._local_scalar_dense.default,
                 torch.ops.aten.item.default)

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += func in self.READ_BACK
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("model_type", sorted(device_mask.DEVICE_MASK_TYPES))
def test_the_forward_with_the_mask_built_on_the_device_reads_nothing_back(model_type):
    model = tiny(model_type)
    ids, mask = padded_batch()
    with torch.inference_mode():
        with ReadBacks() as plain:
            model(input_ids=ids, attention_mask=mask, use_cache=False)
        with ReadBacks() as built:
            model(input_ids=ids, attention_mask=device_mask.causal_padding_mask(mask), use_cache=False)
    assert plain.count > 0  # transformers asks whether the 2-D mask has padding, and waits for the answer
    assert built.count == 0


def test_the_mask_is_causal_and_stops_at_each_rows_last_token():
    _, mask = padded_batch((4, 2))
    built = device_mask.causal_padding_mask(mask)
    assert built.shape == (2, 1, 4, 4) and built.dtype == torch.bool
    for b, n in enumerate((4, 2)):
        for t in range(4):
            assert built[b, 0, t].tolist() == [s <= t and s < n for s in range(4)]


def test_models_that_slide_a_window_or_attend_eagerly_keep_transformers_mask():
    assert not device_mask.takes_device_mask(tiny("llama", attn="eager"))
    config = AutoConfig.for_model("mistral", **SMALL, num_key_value_heads=4, sliding_window=8)
    assert not device_mask.takes_device_mask(AutoModelForCausalLM.from_config(config, attn_implementation="sdpa"))
    assert not device_mask.takes_device_mask(torch.nn.Linear(2, 2))


def test_the_pipeline_with_its_device_mask_gives_the_same_statistics_and_never_asks_transformers_to_check_it(
        llama_lm, monkeypatch):
    segments = [Segment(i, llama_lm.fed_ids(t), 1) for i, t in enumerate(random_texts(25, seed=5, max_words=40))]
    segments.append(Segment(25, segments[0].ids, 1))  # so one batch may be unpadded: two rows of the same length

    def run(own: bool):
        out = {}
        for batch in pipeline.iter_batches(llama_lm.model, segments, batch_tokens=200, device_mask=own):
            out.update(zip(batch.indices, batch.stats))
        return out

    checks = []
    real = masking_utils._ignore_causal_mask_sdpa
    monkeypatch.setattr(masking_utils, "_ignore_causal_mask_sdpa", lambda *a, **k: checks.append(1) or real(*a, **k))
    plain = run(False)
    asked_plain = len(checks)
    checks.clear()
    built = run(True)
    batches = forward.pack_batches(segments, 200)  # as the pipeline packs them (CPU: no launching ahead)
    launched = len(batches)
    padded = sum(1 for b in batches if len({len(segments[i].ids) for i in b}) > 1)
    assert asked_plain == launched and padded > 3
    assert len(checks) == launched - padded  # only unpadded batches keep the 2-D mask (SDPA's causal kernel)
    for i in range(len(segments)):
        for name in FLOAT_STATS + INT_STATS:
            np.testing.assert_array_equal(built[i][name], plain[i][name])


def test_the_pipeline_builds_its_device_mask_only_on_cuda_by_default(llama_lm, monkeypatch):
    calls = []
    real = device_mask.causal_padding_mask
    monkeypatch.setattr(pipeline, "causal_padding_mask", lambda m: calls.append(1) or real(m))
    segments = [Segment(i, llama_lm.fed_ids(t), 1) for i, t in enumerate(random_texts(6, seed=6))]
    list(pipeline.iter_batches(llama_lm.model, segments, batch_tokens=10_000))
    assert calls == []  # CPU: nothing to overlap, transformers' path as before
    list(pipeline.iter_batches(llama_lm.model, segments, batch_tokens=10_000, device_mask=True))
    assert calls == [1]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the mask's point is CUDA (run on the GPU machine)")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("model_type", ["llama", "gpt_neox"])
def test_on_cuda_the_mask_built_on_the_device_gives_the_statistics_of_transformers_mask(model_type, dtype):
    model = tiny(model_type).to("cuda", dtype)
    generator = np.random.default_rng(7)
    segments = [Segment(i, generator.integers(3, 300, int(n)).tolist(), 1)
                for i, n in enumerate(generator.integers(2, 120, 40))]

    def run(own: bool):
        out = {}
        for batch in pipeline.iter_batches(model, segments, batch_tokens=1024, device_mask=own):
            out.update(zip(batch.indices, batch.stats))
        return out

    assert device_mask.takes_device_mask(model)
    plain, built = run(False), run(True)
    for i in range(len(segments)):
        for name in FLOAT_STATS + INT_STATS:
            np.testing.assert_array_equal(built[i][name], plain[i][name])
