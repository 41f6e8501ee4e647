"""The statistics pass as a bounded pipeline over batches: the device never waits for the host's work per text.

Batches are packed as `forward.pack_batches` says, then each is *launched* (padded on the host, copied to the
device without waiting, the forward pass and the reduction queued, the statistics copied back into pinned host
memory, an event recorded) and later *finished* (wait for its event, split the statistics per segment). On CUDA
the next batch is launched before the host waits for the current one, so everything the caller does with a
finished batch — assembling `TokenStats`, cache writes, the methods — runs while the device computes the next
one. On the CPU a batch is finished as soon as it is launched: the same order and the same numbers, no overlap
to gain. At most `LOOKAHEAD` batches wait on the device beyond the one being finished, so memory stays bounded:
a waiting batch holds only its statistics (a few floats per token), never its activations or logits.

Segments come in *waves* (`Wave`: the texts tokenised together, `stats_model.plan_waves`): each wave is packed on
its own, and the next one is asked for as soon as the current one's first batch is launched, so on CUDA the host
tokenises it while the device runs, and the first batch starts after the first wave is tokenised, not all texts.

A CUDA out-of-memory error while a batch is launched halves the token budget: what was launched before it is
finished and kept, and the segments not yet finished are packed again at the smaller budget.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
import torch
from torch import nn

from .forward import STATS_NAMES, Segment, batch_arrays, batch_stats, pack_batches, plain_head
from .device_mask import causal_padding_mask, takes_device_mask
from .placement import input_device

#: Batches launched on a CUDA device beyond the one the host is finishing (1: the device always has the next).
LOOKAHEAD = 1
#: When launching ahead, the last batch is cut into pieces of 1/2, 1/4, … of its segments (this many cuts, while a
#: piece keeps at least `TAIL_MIN_SEGMENTS`): the host's work on the last piece is the only work nothing overlaps.
TAIL_CUTS = 3
TAIL_MIN_SEGMENTS = 8

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class FinishedBatch:
    """The statistics of one batch's segments: `stats[j]` belongs to `segments[indices[j]]` (arrays no other batch
    shares, which a text may keep as they are: a text's views keep its whole batch's rows alive); `budget` is the
    token budget the batch was packed under (smaller than asked after out-of-memory halving)."""

    indices: list[int]
    stats: list[dict[str, np.ndarray]]
    budget: int


@dataclass
class _Launched:
    """A batch whose work is queued on the device: its statistics land in `floats`/`ints` once `ready` passed."""

    indices: list[int]
    counts: np.ndarray  # (b,) scored tokens per segment
    fed: int  # tokens fed (for progress)
    floats: torch.Tensor  # (len(forward.FLOAT_STATS), rows), on the host
    ints: torch.Tensor  # (len(forward.INT_STATS), rows), on the host
    ready: torch.cuda.Event | None


def _to_device(array: np.ndarray, device: torch.device) -> torch.Tensor:
    """A host array on the device; on CUDA through pinned memory without waiting (the copy is queued in order)."""
    tensor = torch.from_numpy(array)
    if device.type != "cuda":
        return tensor.to(device)
    return tensor.pin_memory().to(device, non_blocking=True)


def _to_host(tensor: torch.Tensor) -> torch.Tensor:
    """A device tensor's copy on the host; on CUDA into pinned memory, queued (valid once the batch's event passed)."""
    if tensor.device.type != "cuda":
        return tensor.cpu()
    host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
    return host.copy_(tensor, non_blocking=True)


def _launch(model: nn.Module, split, segments: list[Segment], indices: list[int], pad_id: int,
            device: torch.device, device_mask: bool = False) -> _Launched:
    """Queue one batch's forward pass, reduction and copy back; on CUDA this returns before the device is done.

    device_mask : pass a padded batch's 4-D mask built on the device (`device_mask`), so nothing is read back.
    """
    arrays = batch_arrays([segments[i] for i in indices], pad_id)
    ids, mask, rows, targets = (_to_device(a, device) for a in (arrays.ids, arrays.mask, arrays.rows, arrays.targets))
    if device_mask and not arrays.mask.all():
        mask = causal_padding_mask(mask)
    floats, ints = batch_stats(model, split, ids, mask, rows, targets)
    ready, out_device = None, floats.device  # the last device of a model sharded across GPUs
    floats, ints = _to_host(floats), _to_host(ints)
    if out_device.type == "cuda":  # on the stream of the statistics' device, which need not be the current device
        ready = torch.cuda.Event()
        ready.record(torch.cuda.current_stream(out_device))
    return _Launched(indices, arrays.counts, int(arrays.mask.sum()), floats, ints, ready)


def _finish(job: _Launched) -> list[dict[str, np.ndarray]]:
    """Wait for a launched batch and split its statistics per segment: read-only views of arrays the batch owns
    (on CUDA one copy out of the pinned buffer per batch, so no text's statistics keep page-locked memory)."""
    if job.ready is not None:
        job.ready.synchronize()
    floats, ints = job.floats.numpy(), job.ints.numpy()
    if job.ready is not None:  # copied back from CUDA into pinned memory (`_to_host`)
        floats, ints = floats.copy(), ints.copy()
    rows = [*floats, *ints]  # one (n,) row per statistic
    for row in rows:
        row.flags.writeable = False  # texts share the batch's rows: none may write into another's
    ends = np.cumsum(job.counts).tolist()
    return [{name: row[start:end] for name, row in zip(STATS_NAMES, rows)}
            for start, end in zip([0, *ends[:-1]], ends)]


def split_tail(batches: list[list[int]], cuts: int = TAIL_CUTS) -> list[list[int]]:
    """The batches with the last one cut into halves, then halves of the rest (`cuts` times): [B/2, B/4, …, rest].

    Launched ahead, the pieces keep the device busy while the host finishes the piece before, so the work left
    after the device's last batch shrinks from the whole last batch to its last piece.
    """
    if not batches:
        return batches
    head, last = batches[:-1], batches[-1]
    for _ in range(cuts):
        if len(last) < 2 * TAIL_MIN_SEGMENTS:
            break
        half = len(last) // 2
        head.append(last[:half])
        last = last[half:]
    return head + [last]


@dataclass(frozen=True)
class Wave:
    """Segments of the texts tokenised together: they follow the segments of earlier waves (`FinishedBatch.indices`
    count across waves); `expected_tokens` is the fed tokens of all waves as far as known (exact in the last wave);
    `last` says no wave follows."""

    segments: list[Segment]
    expected_tokens: int
    last: bool


def iter_batches(model: nn.Module, segments: list[Segment], **options) -> Iterator[FinishedBatch]:
    """`iter_wave_batches` of segments that are all known at once (one wave)."""
    return iter_wave_batches(model, iter([Wave(segments, sum(len(s.ids) for s in segments), True)]), **options)


@torch.inference_mode()
def iter_wave_batches(
    model: nn.Module,
    waves: Iterator[Wave],
    *,
    batch_tokens: int,
    pad_id: int = 0,
    progress: Progress | None = None,
    min_batch_tokens: int = 1,
    lookahead: int | None = None,
    device_mask: bool | None = None,
) -> Iterator[FinishedBatch]:
    """Statistics of the scored tokens of every segment, batch by batch as the batches finish (longest first within
    a wave).

    Every segment is in exactly one `FinishedBatch`. Each wave is packed on its own; the next wave is asked for
    (tokenised, by whoever makes the waves) right after the current wave's first batch is launched, so on CUDA it
    is made while the device runs, and launching ahead goes on across waves. On a CUDA out-of-memory error the budget
    is halved (not below `min_batch_tokens`; at it, the error is raised) and the unfinished segments are packed again.
    progress : called as progress(tokens fed so far, all tokens as far as known) after each batch.
    lookahead : batches launched beyond the one being finished (default `LOOKAHEAD` on CUDA, 0 elsewhere: on the
        CPU a launch computes, so launching early would only hold a second batch's statistics for nothing).
    device_mask : build padded batches' attention masks on the device (`device_mask`; default on CUDA where the model
        takes it: there transformers' own check of the mask would make each launch wait for the device).
    """
    device = input_device(model)
    split = plain_head(model)
    if lookahead is None:
        lookahead = LOOKAHEAD if device.type == "cuda" else 0
    if device_mask is None:
        device_mask = device.type == "cuda" and takes_device_mask(model)
    segments: list[Segment] = []
    finished: set[int] = set()
    in_flight: deque[_Launched] = deque()
    done, budget, total = 0, batch_tokens, 0

    def finish(job: _Launched) -> FinishedBatch:
        nonlocal done
        stats = _finish(job)
        done += job.fed
        finished.update(job.indices)
        if progress is not None:
            progress(done, max(done, total))
        return FinishedBatch(job.indices, stats, budget)

    wave = next(waves, None)
    while wave is not None:
        left = list(range(len(segments), len(segments) + len(wave.segments)))
        segments += wave.segments
        total = wave.expected_tokens
        coming = None  # the next wave, asked for once this one's first batch is launched
        while left:
            try:
                batches = [[left[j] for j in batch] for batch in pack_batches([segments[i] for i in left], budget)]
                for batch in split_tail(batches) if lookahead and wave.last else batches:
                    in_flight.append(_launch(model, split, segments, batch, pad_id, device, device_mask))
                    if coming is None and not wave.last:  # the device has work: make the next wave meanwhile
                        coming = next(waves)
                    if len(in_flight) > lookahead:
                        yield finish(in_flight.popleft())
                left = []
            except torch.cuda.OutOfMemoryError:
                if budget <= min_batch_tokens:
                    raise
                while in_flight:  # launched before the error: their work is valid, keep it
                    yield finish(in_flight.popleft())
                torch.cuda.empty_cache()
                budget = max(min_batch_tokens, budget // 2)
                left = [i for i in left if i not in finished]
        wave = None if wave.last else coming if coming is not None else next(waves)
    while in_flight:
        yield finish(in_flight.popleft())
