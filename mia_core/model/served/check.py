"""`check_served`: what a server exposes, whether its log-probs are repeatable, and which methods that allows — the
facts `mia models check` prints and the dashboard shows before anything is scored."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from ...api.access import FULL_VOCABULARY
from ...paths import cache_root
from .http import Client, ServedError
from .probe import CROWD_TEXTS, PROBE_TEXT, determinism_warning, record_determinism
from .served_model import ServedModel, check_tokenizer
from .shapes import SHAPES


@dataclass
class ServerReport:
    """What `check_served` found, as (fact, value) lines and warnings."""

    facts: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def largest_logprobs(model: ServedModel) -> str:
    """How many log-probs per position the server returns: "all" (the whole vocabulary), or the cap it states."""
    path, body = SHAPES[model.served.api][0](model.info.name, model.fed_ids("The end.")[:2], -1)
    try:
        model.client.post(path, body)
    except ServedError as err:
        return f"fewer than the whole vocabulary ({str(err).split(': ', 1)[-1][:160]})"
    return "all (the whole next-token distribution: logprobs=full can compute Min-K%++ exactly, on short texts)"


def determinism_gap(model: ServedModel) -> float:
    """The probe text's largest log-prob difference scored alone vs among `CROWD_TEXTS` sent at the same time."""
    ids = model.fed_ids(PROBE_TEXT)
    alone = model.true_token_stats(ids, 1)["logprob"].astype(np.float64)
    crowd = [model.fed_ids(t) for t in CROWD_TEXTS]
    with ThreadPoolExecutor(len(crowd) + 1) as pool:
        futures = [pool.submit(model.true_token_stats, c, 1) for c in crowd[:4]]
        probed = pool.submit(model.true_token_stats, ids, 1)
        futures += [pool.submit(model.true_token_stats, c, 1) for c in crowd[4:]]
        among = probed.result()["logprob"].astype(np.float64)
        for future in futures:
            future.result()
    return float(np.max(np.abs(alone - among), initial=0.0))


def check_served(model: ServedModel) -> ServerReport:
    """Probe a connected served model: the server's version and limits, the tokenizer check, how many log-probs it
    returns, and whether its log-probs are repeatable (recorded, so every later run on it carries the warning)."""
    report = ServerReport()
    client: Client = model.client
    version = _version(client)
    report.facts += [("server", model.served.base_url + (f" (vLLM {version})" if version else "")),
                     ("served model", model.info.name + (f" (LoRA adapter on {model.info.parent})" if model.info.parent
                                                         else "")),
                     ("model root on the server", model.info.root or "not given"),
                     ("context", f"{model.info.max_model_len or '?'} tokens (windows of {model.max_length})"),
                     ("fingerprint", model.fingerprint),
                     ("concurrency", f"{model.concurrency.value} requests at once ({model.concurrency.why})")]
    same = check_tokenizer(client, model.info.name, model.tokenizer, model.served)
    report.facts.append(("tokenizer", f"{model.tokenizer.name_or_path}: " +
                         ("the same ids as the server's /tokenize" if same else "not checked (no /tokenize)")))
    report.facts.append(("log-probs per position", largest_logprobs(model)))
    mode = model.access
    report.facts.append(("asked for", "every log-prob (logprobs=full)" if mode.top_k >= FULL_VOCABULARY
                         else "the true token's log-prob, its rank and the top token"))
    gap = determinism_gap(model)
    record_determinism(cache_root() / "served", model.identity_key, model.fingerprint, gap)
    model.determinism_gap = gap
    report.facts.append(("repeatable", f"yes (the probe alone vs among 8 concurrent requests: {gap:.1e})" if determinism_warning(gap)
                         is None else f"NO (differs by {gap:.1e})"))
    report.warnings = model.warnings
    return report


def _version(client: Client) -> str | None:
    """vLLM's version from `/version`, or None for other servers."""
    try:
        answer = client.get("//version")
    except ServedError:
        return None
    return answer.get("version") if isinstance(answer, dict) and isinstance(answer.get("version"), str) else None
