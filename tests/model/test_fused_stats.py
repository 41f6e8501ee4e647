"""The one-pass Triton reduction against a naive float64 computation and against `reduce_logits`.

Runs on CUDA when there is one, else on CPU in Triton's interpreter (TRITON_INTERPRET=1, slow: few
rows); skipped where Triton is absent (CI).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from mia_core.model.fused_stats import fused_available, fused_reduce
from mia_core.api.token_stats import LOGPROB_FLOOR
from mia_core.model.reduce import reduce_logits

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
pytestmark = pytest.mark.skipif(not fused_available(DEVICE), reason="needs Triton (CUDA, or TRITON_INTERPRET=1 on CPU)")

#: `reduce_logits` sums 128k float32 terms itself (its mu drifts ~1e-4 relative on CPU), so it is
#: checked looser than the float64 oracle, which bounds the fused kernel's own error.
REFERENCE_TOL = {"atol": 1e-5, "rtol": 1e-4}
FLOATS = ("logprob", "mu", "sigma", "top1_logprob", "entropy")
KEYS = ("logprob", "mu", "sigma", "top1_id", "top1_logprob", "entropy", "rank")
WIDTHS = (320, 4097, 49152, 128256)


def n_rows(width: int) -> int:
    """Rows per case: few in the (slow) interpreter for wide vocabularies."""
    return 16 if DEVICE.type == "cuda" else (5 if width <= 4097 else 3)


def naive(logits: torch.Tensor, targets: torch.Tensor) -> dict[str, np.ndarray]:
    """Row by row in float64 numpy, ignoring −inf entries (p = 0), with its own max, sort-free rank."""
    out = {k: [] for k in KEYS}
    for row, t in zip(logits.double().cpu().numpy(), targets.cpu().numpy()):
        live = row[np.isfinite(row)]
        log_z = live.max() + np.log(np.sum(np.exp(live - live.max())))
        logp = live - log_z
        p = np.exp(logp)
        mu = float(np.sum(p * logp))
        out["logprob"].append(row[t] - log_z if np.isfinite(row[t]) else LOGPROB_FLOOR)
        out["mu"].append(mu)
        out["sigma"].append(np.sqrt(np.sum(p * (logp - mu) ** 2)))
        out["top1_id"].append(int(np.argmax(row)))
        out["top1_logprob"].append(row.max() - log_z)
        out["entropy"].append(-mu)
        out["rank"].append(1 + int(np.sum(row > row[t])))
    return {k: np.asarray(v) for k, v in out.items()}


def check(got: dict[str, torch.Tensor], expected: dict[str, np.ndarray], atol: float = 2e-5, rtol: float = 1e-6) -> None:
    assert set(got) == set(KEYS)
    for name in FLOATS:
        assert got[name].dtype == torch.float32 and got[name].device.type == DEVICE.type, name
        np.testing.assert_allclose(got[name].cpu().numpy(), expected[name], rtol=rtol, atol=atol, err_msg=name)
    for name in ("top1_id", "rank"):
        assert got[name].dtype == torch.int64, name
        np.testing.assert_array_equal(got[name].cpu().numpy(), expected[name], err_msg=name)


def distinct_logits(rows: int, width: int, seed: int, scale: float = 3.0) -> torch.Tensor:
    """Random logits with pairwise-distinct values (a shuffled grid plus noise), so top-1 and rank are unambiguous."""
    g = torch.Generator().manual_seed(seed)
    grid = torch.linspace(-1.0, 1.0, width, dtype=torch.float64) * 4.0  # spacing ≥ 8/width
    perm = torch.stack([torch.randperm(width, generator=g) for _ in range(rows)])
    noise = torch.rand(rows, width, generator=g, dtype=torch.float64) * (2.0 / width)
    return (scale * (grid[perm] + noise)).float().to(DEVICE)


def some_targets(rows: int, width: int, seed: int) -> torch.Tensor:
    return torch.randint(0, width, (rows,), generator=torch.Generator().manual_seed(seed)).to(DEVICE)


@pytest.mark.parametrize("width", WIDTHS)
def test_matches_naive_and_reduce_logits(width):
    rows = n_rows(width)
    logits, targets = distinct_logits(rows, width, seed=width), some_targets(rows, width, seed=1)
    targets[0] = logits[0].argmax()  # rank 1 covered
    got = fused_reduce(logits, targets)
    check(got, naive(logits, targets))
    check(got, {k: v.cpu().numpy() for k, v in reduce_logits(logits, targets).items()}, **REFERENCE_TOL)


def test_peaked_and_large_magnitude_logits():
    rows, width = n_rows(49152), 49152
    logits = distinct_logits(rows, width, seed=3, scale=50.0)  # logits up to ±200: exp overflows unshifted
    logits[:, 7] = 400.0  # one dominant token
    logits[1, 40000] = 401.0  # ... beaten in a later block
    targets = some_targets(rows, width, seed=2)
    got = fused_reduce(logits, targets)
    assert all(torch.isfinite(got[k]).all() for k in FLOATS)
    check(got, naive(logits, targets))


@pytest.mark.parametrize("width", (320, 49152))
def test_masked_vocabulary(width):
    rows = n_rows(width)
    logits, targets = distinct_logits(rows, width, seed=5), some_targets(rows, width // 2, seed=4)
    logits[:, width - width // 3:] = float("-inf")  # masked tail (whole blocks of it at 49152)
    logits[0, 1:width:7] = float("-inf")  # scattered holes
    logits[1, targets[1]] = float("-inf")  # a masked target is floored, like reduce_logits does
    got = fused_reduce(logits, targets)
    assert all(torch.isfinite(got[k]).all() for k in FLOATS)
    check(got, naive(logits, targets))
    check(got, {k: v.cpu().numpy() for k, v in reduce_logits(logits, targets).items()}, **REFERENCE_TOL)


def test_masked_head_blocks():
    """Whole leading blocks at −inf: the running max starts at −inf and must not make NaN."""
    width = 12000
    logits, targets = distinct_logits(2, width, seed=6), some_targets(2, 3000, seed=6) + 9000
    logits[:, :9000] = float("-inf")
    check(fused_reduce(logits, targets), naive(logits, targets))


def test_ties_keep_first_index_and_strict_rank():
    width = 9000  # several blocks
    logits = torch.zeros(4, width, device=DEVICE)
    logits[0] = 1.0  # all equal: top1 0, rank 1 for any target
    logits[1, [10, 20, 5000, 8999]] = 3.0  # ties inside a block and across blocks
    logits[2, [8000, 4500]] = 2.0  # first maximum is in a later block, tied with an even later one
    logits[3, :] = torch.arange(width, device=DEVICE).remainder(3).float()  # many ties at every level
    targets = torch.tensor([123, 20, 4500, 4], device=DEVICE)
    got = fused_reduce(logits, targets)
    assert got["top1_id"].tolist() == [0, 10, 4500, 2]
    assert got["rank"].tolist() == [1, 1, 1, 1 + 3000]  # target 4 has logit 1: only the 2s are above
    check(got, naive(logits, targets))


def test_row_slice_view():
    full = distinct_logits(6, 5000, seed=8)
    logits = full[1:5, 100:4196]  # stride 5000 > width 4096, offset start
    assert not logits.is_contiguous()
    targets = some_targets(4, 4096, seed=8)
    got = fused_reduce(logits, targets)
    check(got, naive(logits, targets))
    dense = fused_reduce(logits.contiguous(), targets)  # may differ in the last bit (other specialisation)
    for k in KEYS:
        torch.testing.assert_close(got[k], dense[k], rtol=1e-6, atol=1e-6)


def test_zero_rows():
    got = fused_reduce(torch.empty(0, 320, device=DEVICE), torch.empty(0, dtype=torch.int64, device=DEVICE))
    assert set(got) == set(KEYS)
    assert all(v.shape == (0,) for v in got.values())
    assert got["rank"].dtype == torch.int64 and got["mu"].dtype == torch.float32


def test_rejects_wrong_inputs():
    logits = torch.zeros(2, 8, device=DEVICE)
    with pytest.raises(ValueError):
        fused_reduce(logits.double(), torch.zeros(2, dtype=torch.int64, device=DEVICE))
    with pytest.raises(ValueError):
        fused_reduce(logits[:, :0], torch.zeros(2, dtype=torch.int64, device=DEVICE))
    with pytest.raises(ValueError):
        fused_reduce(logits, torch.zeros(3, dtype=torch.int64, device=DEVICE))
    with pytest.raises(ValueError):
        fused_reduce(logits, torch.zeros(2, dtype=torch.int32, device=DEVICE))
