"""How many requests a served model runs at once when its spec does not say: as many of the longest requests as the
server's KV cache holds together, read from vLLM's `/metrics`; 8 where the server says nothing.

vLLM 0.32 publishes its cache settings as the labels of one Prometheus gauge, `vllm:cache_config_info`:
`num_gpu_blocks` (the KV cache's blocks on the device — on vLLM's CPU backend, its CPU KV cache) × `block_size`
(tokens per block) is the number of tokens whose keys and values fit at once. `num_cpu_blocks` is swap space, not
cache a running request can use, so it is not counted. A request here holds at most one window of the model's context
(`max_length` tokens: a statistics window, or a SaMIA prompt with its continuation), so
`capacity ÷ max_length` such requests always fit together — none waits for memory or is preempted — clamped to
1 … `MAX_CONCURRENCY`. vLLM does not publish `--max-num-seqs`: more requests than it allows wait in its queue.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .http import Client, ServedError
from .spec import MAX_CONCURRENCY, ServedSpec

#: Requests at once when the spec gives none and the server does not say how much it holds.
FALLBACK_CONCURRENCY = 8
_CACHE_INFO = re.compile(r"^vllm:cache_config_info\{(?P<labels>[^\n]*)\}", re.MULTILINE)
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Concurrency:
    """Requests at once (`value`) and why that many, in words for `mia models check`."""

    value: int
    why: str


def cache_config(metrics: str) -> dict[str, str] | None:
    """The labels of vLLM's `vllm:cache_config_info` gauge in a Prometheus text page, or None when it has none."""
    found = _CACHE_INFO.search(metrics)
    return dict(_LABEL.findall(found["labels"])) if found else None


def kv_capacity(labels: dict[str, str]) -> tuple[int, int] | None:
    """(blocks, tokens per block) of the KV cache from `cache_config` labels, or None when either is not a number."""
    try:
        blocks, block_size = int(labels.get("num_gpu_blocks", "")), int(labels.get("block_size", ""))
    except ValueError:
        return None
    return (blocks, block_size) if blocks > 0 and block_size > 0 else None


def concurrency_for(served: ServedSpec, client: Client, window_tokens: int) -> Concurrency:
    """The spec's `concurrency=` if it gives one, else sized from the server's KV cache, else `FALLBACK_CONCURRENCY`
    with the reason the server's size was not used."""
    if served.concurrency is not None:
        return Concurrency(served.concurrency, "concurrency= in the spec")
    fallback = f"{FALLBACK_CONCURRENCY}, the default: "
    if served.api != "vllm":
        return Concurrency(FALLBACK_CONCURRENCY, fallback + f"the KV cache's size is read only from vLLM "
                                                            f"(api={served.api})")
    try:
        labels = cache_config(client.get_text("//metrics"))
    except ServedError as err:
        return Concurrency(FALLBACK_CONCURRENCY, fallback + f"no /metrics to size it from ({err})")
    size = kv_capacity(labels) if labels is not None else None
    if size is None:
        return Concurrency(FALLBACK_CONCURRENCY, fallback + "/metrics gives no KV-cache size (vllm:cache_config_info "
                                                            "with num_gpu_blocks and block_size)")
    blocks, block_size = size
    value = max(1, min(MAX_CONCURRENCY, blocks * block_size // window_tokens))
    return Concurrency(value, f"sized from the server's KV cache: {blocks} blocks × {block_size} tokens = "
                              f"{blocks * block_size:,} tokens, room for {blocks * block_size // window_tokens} "
                              f"requests of a whole {window_tokens:,}-token window at once; 1 to {MAX_CONCURRENCY}")
