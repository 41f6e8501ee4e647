"""The extraction pass: windows of equal length in batches without padding, each reduced to its log10 p_z and
greedy flag.

Windows are fed whole (`WindowLayout.fed`); only the suffix positions' logits are computed (where the head is a
plain linear layer on the last hidden state, a chunk of rows at a time, as the statistics pass does) and reduced at
once (`reduce.reduce_suffix_rows`; the ties at the top too, `reduce.top_ties`, for the reference greedy rule).
Identical windows (a repeated passage) are computed once.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Protocol, runtime_checkable

import numpy as np
import torch
from torch import nn

from ..model.forward import head_chunk_rows, head_logits, plain_head
from .reduce import reduce_suffix_rows, top_ties
from .settings import ExtractionSettings

LN10 = math.log(10.0)


@runtime_checkable
class ComputesWindows(Protocol):
    """A model whose windows are computed where it runs (a served model: one request per window): `extract_texts`
    asks it for (log10 p_z, greedy flag) instead of running the pass here."""

    def extraction_windows(self, fed: np.ndarray, *, prefix: int, suffix: int, top_k: int, temperature: float,
                           n_lead: int, progress=None) -> tuple[np.ndarray, np.ndarray]: ...

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class WindowPz:
    """What the pass gives per window (w,): `log10_pz` under top-k sampling (float64), `top` whether every suffix token
    is the model's top token (a tie at the top counted as top), and `log10_tied` the greedy probability with m tokens
    tied at the top each 1/m (Cooper et al.'s k = 1; −inf where a suffix token is below the top), or None where it was
    not asked for."""

    log10_pz: np.ndarray
    top: np.ndarray
    log10_tied: np.ndarray | None = None


@torch.inference_mode()
def window_pz(model: nn.Module, fed: np.ndarray, settings: ExtractionSettings, n_lead: int, *, batch_tokens: int,
              progress: Progress | None = None, tied: bool = False) -> WindowPz:
    """`WindowPz` of the windows `fed` (w, width) int64, each row one window as fed (n_lead lead tokens, prefix,
    suffix); its suffix's log-probabilities are summed in float64.

    batch_tokens : tokens fed per batch (`LanguageModel.auto_batch_tokens`); halved on a CUDA out-of-memory error.
    tied : also count the ties at the top (`WindowPz.log10_tied`; one more pass over each suffix row's logits).
    """
    n = fed.shape[0]
    if n == 0:
        return WindowPz(np.empty(0, np.float64), np.empty(0, bool), np.empty(0, np.float64) if tied else None)
    unique, inverse = np.unique(fed, axis=0, return_inverse=True)
    device = next(model.parameters()).device
    rows = max(1, batch_tokens // fed.shape[1])
    u_pz, u_top, u_tied = np.empty(len(unique), np.float64), np.empty(len(unique), bool), np.empty(len(unique))
    done = 0
    while done < len(unique):
        end = min(done + rows, len(unique))
        try:
            logq, rank, ties = _suffix_logq(model, torch.from_numpy(unique[done:end]).to(device), settings, n_lead, tied)
        except torch.cuda.OutOfMemoryError:
            if rows == 1:
                raise
            torch.cuda.empty_cache()
            rows //= 2
            continue
        u_pz[done:end] = logq.to(torch.float64).sum(-1).cpu().numpy() / LN10
        top = (rank == 1).all(-1)
        u_top[done:end] = top.cpu().numpy()
        if ties is not None:  # −Σ log10 m over the suffix where every token is at the top, else −inf
            spent = 0.0 - torch.log10(ties.to(torch.float64)).sum(-1)  # 0.0, not −0.0, where no ties
            u_tied[done:end] = torch.where(top, spent, torch.full_like(spent, -math.inf)).cpu().numpy()
        done = end
        if progress is not None:
            progress(done, len(unique))
    inverse = inverse.reshape(-1)
    return WindowPz(u_pz[inverse], u_top[inverse], u_tied[inverse] if tied else None)


def window_log10_pz(model: nn.Module, fed: np.ndarray, settings: ExtractionSettings, n_lead: int, *,
                    batch_tokens: int, progress: Progress | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(log10 p_z (w,) float64 under top-k sampling, greedy flag (w,) bool) of the windows `fed` (w, width) int64
    (`window_pz` without the ties)."""
    found = window_pz(model, fed, settings, n_lead, batch_tokens=batch_tokens, progress=progress)
    return found.log10_pz, found.top


def _suffix_logq(model: nn.Module, ids: torch.Tensor, settings: ExtractionSettings, n_lead: int,
                 tied: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(log q of each suffix token (b, S), its rank (b, S), the tokens tied at the top (b, S) or None) for a batch of
    fed windows (b, width)."""
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
    parts, ties = [], []
    for i in range(0, b * s, step):
        rows = logits_of(slice(i, i + step))  # (rows, vocab)
        parts.append(reduce_suffix_rows(rows, targets[i : i + step], settings.top_k, settings.temperature))
        if tied:
            ties.append(top_ties(rows, settings.temperature))
    logq = torch.cat([p[0] for p in parts]).reshape(b, s)
    rank = torch.cat([p[1] for p in parts]).reshape(b, s)
    return logq, rank, torch.cat(ties).reshape(b, s) if tied else None
