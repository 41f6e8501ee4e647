"""The extraction pass: windows of equal length in batches without padding, each reduced to its log10 p_z and
greedy flag.

Windows are fed whole (`WindowLayout.fed`); only the suffix positions' logits are computed (where the head is a
plain linear layer on the last hidden state, a chunk of rows at a time, as the statistics pass does) and reduced at
once (`reduce.reduce_suffix_rows`). Identical windows (a repeated passage) are computed once.
"""
from __future__ import annotations

import math
from typing import Callable, Protocol, runtime_checkable

import numpy as np
import torch
from torch import nn

from ..model.forward import head_chunk_rows, head_logits, plain_head
from .reduce import reduce_suffix_rows
from .settings import ExtractionSettings

LN10 = math.log(10.0)


@runtime_checkable
class ComputesWindows(Protocol):
    """A model whose windows are computed where it runs (a served model: one request per window): `extract_texts`
    asks it for (log10 p_z, greedy flag) instead of running the pass here."""

    def extraction_windows(self, fed: np.ndarray, *, prefix: int, suffix: int, top_k: int, temperature: float,
                           n_lead: int, progress=None) -> tuple[np.ndarray, np.ndarray]: ...

Progress = Callable[[int, int], None]


@torch.inference_mode()
def window_log10_pz(model: nn.Module, fed: np.ndarray, settings: ExtractionSettings, n_lead: int, *,
                    batch_tokens: int, progress: Progress | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(log10 p_z (w,) float64 under top-k sampling, greedy flag (w,) bool) of the windows `fed` (w, width) int64.

    Each row is one window as fed (lead token, prefix, suffix); its suffix's log-probabilities are summed in float64.
    batch_tokens : tokens fed per batch (`LanguageModel.auto_batch_tokens`); halved on a CUDA out-of-memory error.
    """
    n = fed.shape[0]
    log10_pz, greedy = np.empty(n, np.float64), np.empty(n, bool)
    if n == 0:
        return log10_pz, greedy
    unique, inverse = np.unique(fed, axis=0, return_inverse=True)
    device = next(model.parameters()).device
    rows = max(1, batch_tokens // fed.shape[1])
    u_pz, u_greedy = np.empty(len(unique), np.float64), np.empty(len(unique), bool)
    done = 0
    while done < len(unique):
        end = min(done + rows, len(unique))
        try:
            logq, rank = _suffix_logq(model, torch.from_numpy(unique[done:end]).to(device), settings, n_lead)
        except torch.cuda.OutOfMemoryError:
            if rows == 1:
                raise
            torch.cuda.empty_cache()
            rows //= 2
            continue
        u_pz[done:end] = logq.to(torch.float64).sum(-1).cpu().numpy() / LN10
        u_greedy[done:end] = (rank == 1).all(-1).cpu().numpy()
        done = end
        if progress is not None:
            progress(done, len(unique))
    log10_pz[:], greedy[:] = u_pz[inverse.reshape(-1)], u_greedy[inverse.reshape(-1)]
    return log10_pz, greedy


def _suffix_logq(model: nn.Module, ids: torch.Tensor, settings: ExtractionSettings,
                 n_lead: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(log q of each suffix token (b, S), its rank (b, S)) for a batch of fed windows (b, width)."""
    b, s = ids.shape[0], settings.suffix
    first = n_lead + settings.prefix - 1  # the position whose logits predict the first suffix token
    targets = ids[:, first + 1 : first + 1 + s].reshape(-1)
    mask = torch.ones_like(ids)
    split = plain_head(model)
    if split is not None:
        backbone, head = split
        hidden = backbone(input_ids=ids, attention_mask=mask, use_cache=False)[0]  # (b, width, H)
        flat = hidden[:, first : first + s].reshape(b * s, -1)  # (b·S, H)
        logits_of = lambda sl: head_logits(flat[sl], head)  # noqa: E731  (rows, vocab)
        vocab = head.weight.shape[0]
    else:
        logits = model(input_ids=ids, attention_mask=mask, use_cache=False).logits  # (b, width, V)
        flat = logits[:, first : first + s].reshape(b * s, -1)
        logits_of = lambda sl: flat[sl]  # noqa: E731
        vocab = flat.shape[-1]
    step = head_chunk_rows(ids.device, vocab)
    parts = [reduce_suffix_rows(logits_of(slice(i, i + step)), targets[i : i + step], settings.top_k,
                                settings.temperature) for i in range(0, b * s, step)]
    logq = torch.cat([p[0] for p in parts]).reshape(b, s)
    rank = torch.cat([p[1] for p in parts]).reshape(b, s)
    return logq, rank

