"""`StatsModel`: what every model MIA Lens scores through shares — tokenise, apply the BOS policy, window long texts,
run the passes, assemble and cache `TokenStats`.

The passes themselves are the subclass's (`_batches`): `LanguageModel` runs a transformers model in process, a served
model sends the same segments to a server. Both therefore feed the same ids for a text (the same tokenizer, boundary
token and windows), so their statistics, cache keys and heatmap offsets are comparable.
"""
from __future__ import annotations

from typing import Callable, Iterator, NamedTuple, Sequence

import numpy as np

from ..api.access import ModelAccess
from ..api.token_stats import TokenStats, TokenStrings
from ..paths import cache_root
from .boundary import boundary_token_id
from .cache_writes import WriteBehind
from .encoding import encode_texts
from .forward import INT_STATS, STATS_NAMES, split_windows
from .pipeline import FinishedBatch, Wave
from .policy import StatsPolicy
from .stats_cache import StatsCache
from .text_windows import TextWindows

#: The statistics of a text with nothing scored (shared, so read-only).
_NOTHING_SCORED = {name: np.empty(0, np.int64 if name in INT_STATS else np.float32) for name in STATS_NAMES}
for _array in _NOTHING_SCORED.values():
    _array.flags.writeable = False

WindowPlan = Callable[[int, int, int], list[tuple[int, int, int]]]


class _Common(NamedTuple):
    """What every text of one statistics pass shares, read once per pass (not once per text)."""

    bos: str
    boundary_str: str | None
    bos_token_id: int | None
    vocab_width: int


class StatsModel:
    """A model with a tokenizer that turns texts into `TokenStats`: `.tokenizer`, `.name`, `.spec`, `.fingerprint`,
    `.max_length`, `.access`; subclasses run the passes (`_batches`) and say what they offer."""

    #: Cache writes go to a writer thread (`cache_writes.WriteBehind`); a bench sets False to time them inline.
    writes_behind: bool = True

    def __init__(self, tokenizer, *, name: str, spec: str | None, fingerprint: str, max_length: int,
                 stats_cache: StatsCache | None = None):
        self.tokenizer = tokenizer
        self.name = name
        #: What `load_model` was given to load it ("demo", a folder, a hub id, a server's spec): workers load it again
        #: from this.
        self.spec = str(spec or name)
        self.fingerprint = fingerprint
        self.max_length = max_length
        if self.max_length < 2:
            raise ValueError(f"max_length must be at least 2 tokens (got {self.max_length})")
        self._boundary = boundary_token_id(tokenizer)
        self.stats_cache = stats_cache if stats_cache is not None else StatsCache(cache_root() / "stats")
        #: (n_tokens, context, stride) -> windows under "sliding"; a bench swaps in another plan (cache=False).
        self.window_plan: WindowPlan = split_windows
        #: Token budget per batch of the last statistics run (after any halving on out-of-memory).
        self.last_batch_tokens: int | None = None

    @property
    def access(self) -> ModelAccess:
        """What the model lets a method read (`mia_core.methods_allowed` compares it with each method's needs)."""
        raise NotImplementedError

    @property
    def vocab_width(self) -> int:
        """Width of the distribution the statistics are taken over."""
        raise NotImplementedError

    @property
    def dtype(self):
        """The precision the passes run in (part of the statistics' cache key)."""
        raise NotImplementedError

    def auto_batch_tokens(self) -> int:
        """The default token budget per batch."""
        raise NotImplementedError

    def _batches(self, waves: Iterator[Wave], budget: int, progress) -> Iterator[FinishedBatch]:
        """The statistics of every segment's scored tokens, as batches finish (every segment in exactly one); the
        waves are asked for one by one (each is tokenised when asked) and must all be taken."""
        raise NotImplementedError

    def _wave_plan(self, texts: list[str], budget: int) -> list[tuple[int, int]]:
        """The ranges of texts tokenised together (`waves.plan_waves`): one wave, unless tokenising while the device
        runs pays (a subclass says where)."""
        return [(0, len(texts))]

    def _cache_model_key(self, bos: str, long_text: str) -> str:
        """What a text's cache entry is keyed by besides its text: model, dtype, BOS policy and token, long-text
        policy and context."""
        boundary = self._boundary if bos == "auto" else None  # tokenizer configs can change it
        return f"{self.fingerprint}|{self.dtype}|bos={bos}:{boundary}|{long_text}|ctx={self.max_length}"

    def cached_count(self, texts: Sequence[str], bos: str = "auto", long_text: str = "sliding") -> int:
        """How many of `texts` have statistics in the cache under this model and policy (what a run will read, not
        compute): for estimates before a run."""
        StatsPolicy(bos, long_text)
        model_key = self._cache_model_key(bos, long_text)
        return sum(self.stats_cache.has(self.stats_cache.key(model_key, str(t))) for t in texts)

    def token_stats(
        self,
        texts: Sequence[str],
        bos: str = "auto",
        progress: Callable[[int, int], None] | None = None,
        *,
        long_text: str = "sliding",
        cache: bool = True,
        batch_tokens: int | None = None,
        on_stats: Callable[[int, TokenStats], None] | None = None,
        on_batch: Callable[[list[int], list[TokenStats]], None] | None = None,
    ) -> list[TokenStats]:
        """Per-token statistics of every text, in input order.

        Parameters
        ----------
        texts
            the texts to score, each one document.
        bos
            "auto" prepends the document-boundary token (see `mia_core.model.boundary`) so every text
            token is scored; "none" reproduces the Min-K%/Min-K%++ reference code (first token unscored).
        progress
            called as progress(done, total), counted in tokens (the total is an estimate until the last wave
            of texts is tokenised).
        long_text
            texts longer than `max_length` tokens are scored in sliding windows with at
            least max_length/2 tokens of left context ("sliding"), or cut to the first max_length
            tokens ("truncate"); `TokenStats.long_text` says which happened.
        cache
            read and write the on-disk statistics cache.
        batch_tokens
            padded tokens per batch (default: 4096 on CPU, from free memory on CUDA).
        on_stats
            called as on_stats(index, statistics) once per text as soon as its statistics are ready (cached
            texts first, then in the order their batches finish): on CUDA it runs while the device computes the
            next batch, so work per text done there costs no device time.
        on_batch
            called as on_batch(indices, statistics) once per group of texts ready together (the cached texts,
            then those each finished batch completes), after their `on_stats`: where work on a whole batch is cheaper
            than text by text (`mia_core.score_texts` scores so, with the methods' batch forms).
        """
        StatsPolicy(bos, long_text)  # validates both, naming the closest valid value
        texts = [str(t) for t in texts]
        model_key = self._cache_model_key(bos, long_text)
        keys = [self.stats_cache.key(model_key, t) for t in texts] if cache else []
        out: list[TokenStats | None] = [self.stats_cache.get(k, t) for k, t in zip(keys, texts)] if cache else [None] * len(texts)
        todo = [i for i, s in enumerate(out) if s is None]
        cached = [i for i, s in enumerate(out) if s is not None]
        if on_stats is not None:
            for i in cached:
                on_stats(i, out[i])  # type: ignore[arg-type]
        if on_batch is not None and cached:
            on_batch(cached, [out[i] for i in cached])  # type: ignore[misc]
        if todo:
            with WriteBehind(self.stats_cache) as writes:
                put_many = writes.put_many if self.writes_behind else self.stats_cache.put_many
                for group in self._compute([texts[i] for i in todo], bos, long_text, progress, batch_tokens):
                    indices = [todo[j] for j, _ in group]
                    try:
                        for i, (_, stats) in zip(indices, group):
                            out[i] = stats
                            if on_stats is not None:
                                on_stats(i, stats)
                        if on_batch is not None and group:
                            on_batch(indices, [stats for _, stats in group])
                    finally:  # queued after the batch's callbacks, so the writer's Python does not slow them (the
                        # GIL); queued even when one raises, so a cancelled run keeps what it computed
                        if cache:
                            put_many([(keys[i], stats) for i, (_, stats) in zip(indices, group)])
        elif progress is not None:  # all cached: done, counted in the same unit (tokens)
            tokens = max(1, sum(len(s.tokens) for s in out if s is not None))
            progress(tokens, tokens)
        return out  # type: ignore[return-value]

    def _compute(self, texts, bos, long_text, progress, batch_tokens) -> Iterator[list[tuple[int, TokenStats]]]:
        """Tokenise (wave by wave, `_wave_plan`), window and run the model on texts that were not cached: the (index,
        statistics) of the texts each finished batch completes, as one group (texts with nothing to score join the
        next group)."""
        boundary = self._boundary if bos == "auto" else None
        boundary_str = self.tokenizer.convert_ids_to_tokens(boundary) if boundary is not None else None
        common = _Common(bos, boundary_str, self.tokenizer.bos_token_id, self.vocab_width)
        budget = batch_tokens or self.auto_batch_tokens()
        self.last_batch_tokens = budget
        plan = TextWindows(self, bos, long_text, len(texts))
        ready: list[int] = []  # texts with nothing to score, handed on with the next group

        def waves() -> Iterator[Wave]:
            ranges = self._wave_plan(texts, budget)
            all_chars, chars, fed = sum(map(len, texts)), 0, 0
            for n, (start, end) in enumerate(ranges):
                segments = plan.add(start, encode_texts(self.tokenizer, texts[start:end], arrays=True), ready)
                chars += sum(map(len, texts[start:end]))
                fed += sum(len(s.ids) for s in segments)
                last = n == len(ranges) - 1
                yield Wave(segments, fed if last else fed + (all_chars - chars) * fed // max(1, chars), last)

        def assemble(i: int, joined: dict) -> tuple[int, TokenStats]:
            stats = self._assemble(texts[i], plan.encodings[i], joined, plan.flags[i], common)
            plan.encodings[i] = None  # the text's arrays are its statistics' now
            return i, stats

        for batch in self._batches(waves(), budget, progress):
            self.last_batch_tokens = batch.budget
            group = [assemble(i, {}) for i in ready]
            ready.clear()
            for k, stats in zip(batch.indices, batch.stats):
                owner, joined = plan.fill(k, stats)
                if joined is not None:
                    group.append(assemble(owner, joined))
            yield group
        if ready:  # every text left had nothing to score
            yield [assemble(i, {}) for i in ready]

    def fed_ids(self, text: str, bos: str = "auto") -> list[int]:
        """The ids the statistics pass feeds for a whole text (before windowing); it scores `fed_ids[1:]`."""
        StatsPolicy(bos, "sliding")
        return self._with_boundary(self._encode(text)[0], bos)

    def _with_boundary(self, ids: list[int], bos: str) -> list[int]:
        """The ids a pass feeds for a text's ids: the document-boundary token first under bos="auto"."""
        return ([self._boundary] if bos == "auto" and self._boundary is not None else []) + ids

    def _encode(self, text: str) -> tuple[list[int], list[tuple[int, int]] | None]:
        """Token ids with `add_special_tokens=True` and character offsets (where the tokenizer has them).

        Special tokens a tokenizer appends after the text (an EOS) are dropped: they are not text.
        """
        return self._encode_many([text])[0]

    def _encode_many(self, texts: list[str]) -> list[tuple[list[int], list[tuple[int, int]] | None]]:
        """`_encode` of every text, in one batched tokenizer call (parallel in fast tokenizers)."""
        return encode_texts(self.tokenizer, texts)

    def _assemble(self, text, encoding, joined: dict[str, np.ndarray], flag, common: "_Common") -> TokenStats:
        """Attach ids, display strings and offsets of the scored tokens to a text's joined window statistics."""
        ids, offsets = encoding
        n_scored = len(joined["logprob"]) if joined else 0
        # scored tokens are full[1 : 1 + n_scored]; full = [boundary] + ids, or ids itself
        first = 0 if common.boundary_str is not None else 1
        first_token_scored = common.boundary_str is not None or len(ids) > 0 and bool(ids[0] == common.bos_token_id)
        if isinstance(ids, np.ndarray):  # a long text: views of its arrays (copies of a truncated text's few)
            scored_ids = ids[first : first + n_scored]
            scored_ids = scored_ids.copy() if flag == "truncated" else scored_ids
        else:
            scored = ids[first : first + n_scored]
            scored_ids = np.fromiter(scored, np.int64, len(scored))
        if offsets is not None:
            spans = offsets[first : first + n_scored]
            spans = spans.copy() if flag == "truncated" else spans
        else:
            spans = np.zeros((n_scored, 2), dtype=np.int64)
        # display strings are made when first read; only tokens without a span (specials) need their names now
        no_span = spans[:, 1] <= spans[:, 0]
        names = {j: self.tokenizer.convert_ids_to_tokens(int(scored_ids[j]))
                 for j in np.flatnonzero(no_span).tolist()} if no_span.any() else {}
        return TokenStats(
            text=text,
            token_ids=scored_ids,
            tokens=TokenStrings(text, spans, names),
            offsets=spans,
            **{name: joined.get(name, empty) for name, empty in _NOTHING_SCORED.items()},
            bos_policy=common.bos,
            boundary_token=common.boundary_str,
            first_token_scored=first_token_scored,
            long_text=flag,
            n_text_tokens=len(ids),
            vocab_width=common.vocab_width,
        )


