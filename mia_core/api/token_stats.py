"""`TokenStats`: the per-token statistics of one forward pass, the shared input of every method (NumPy only).

Computed once per (model, text, BOS policy); every single-pass method is a cheap pure function of
it, so switching methods or k never re-runs the model (docs/methods.md, "Token statistics").
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

#: Log-probs are floored here (p < e^-10000 is 0 in float32 anyway) so that masked logits stay finite.
LOGPROB_FLOOR = -1e4
#: Per-token float arrays that a `TokenStats` carries, in storage order.
FLOAT_FIELDS = ("logprob", "mu", "sigma", "top1_logprob", "entropy")
#: Per-token array fields of `TokenStats` (sliced for a window, stored as arrays).
ARRAY_FIELDS = ("token_ids", "offsets", "top1_id", "rank", *FLOAT_FIELDS)
#: Per-text fields stored beside the arrays (the text itself is the key, kept by whoever stores them).
META_FIELDS = ("tokens", "bos_policy", "first_token_scored", "boundary_token", "long_text", "n_text_tokens", "vocab_width")


class TokenStrings(Sequence):
    """Display strings of a text's scored tokens, made on first use: each token's span of the text, or its name where
    it has no span (specials such as the boundary token). A statistics pass makes none of them: most texts are scored,
    not drawn. Reads, compares and prints as the list of strings."""

    __slots__ = ("_text", "_offsets", "_names", "_strings")

    def __init__(self, text: str, offsets: np.ndarray, names: dict[int, str]):
        self._text, self._offsets, self._names = text, offsets, names
        self._strings: list[str] | None = None

    @property
    def names(self) -> dict[int, str]:
        """The strings that are not the text's span at their offsets (position → string)."""
        return self._names

    def _all(self) -> list[str]:
        if self._strings is None:
            text = self._text
            strings = [text[a:b] for a, b in self._offsets.tolist()]
            for j, name in self._names.items():
                strings[j] = name
            self._strings = strings
        return self._strings

    def __len__(self) -> int:
        return int(self._offsets.shape[0])

    def __getitem__(self, index):
        return self._all()[index]

    def __iter__(self):
        return iter(self._all())

    def __eq__(self, other) -> bool:
        if isinstance(other, (list, tuple, TokenStrings)):
            return self._all() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  (compares as a list, which has no hash)

    def __repr__(self) -> str:
        return repr(self._all())


def token_names(text: str, offsets: np.ndarray, tokens: Sequence[str]) -> dict[int, str]:
    """The display strings that differ from the text's span at their offsets (all a `TokenStrings` needs to store)."""
    if isinstance(tokens, TokenStrings) and tokens._text == text and (
            tokens._offsets is offsets or np.array_equal(tokens._offsets, offsets)):  # one array, as the pass makes them
        return dict(tokens.names)
    return {j: t for j, (t, (a, b)) in enumerate(zip(tokens, offsets.tolist())) if t != text[a:b]}


@dataclass(frozen=True)
class TokenStats:
    """Statistics of every scored token of one text (arrays of shape (n_scored,)).

    Attributes
    ----------
    text
        the text as given.
    token_ids
        ids of the scored tokens (int64).
    tokens
        display strings of the scored tokens (the text span, or the token name for specials); a list, or a
        `TokenStrings` that makes them on first use.
    offsets
        (n_scored, 2) character span of each scored token in `text` ((0, 0) for specials).
    logprob
        log p(x_t | x_<t).
    mu, sigma
        mean and standard deviation of log p(v | x_<t) under p(· | x_<t) (Min-K%++).
    top1_id, top1_logprob
        the most likely next token and its log-prob.
    rank
        1-based rank of the true token in p(· | x_<t) (1 = it was the top prediction; ties share).
    entropy
        Shannon entropy of p(· | x_<t) in nats (= -mu).
    bos_policy
        the BOS policy the statistics were computed under ("auto" or "none").
    boundary_token
        the document-boundary token prepended (`bos="auto"`), else None.
    first_token_scored
        whether the text's first token was scored (a boundary token was prepended
        or the tokenizer put its own BOS first); False under `bos="none"` without a tokenizer BOS.
    long_text
        "none" (fits the context), "sliding" (windowed with left context) or "truncated".
    n_text_tokens
        tokens the tokenizer produced for the whole text (before any truncation).
    vocab_width
        width of the logits the softmax ran over.
    """

    text: str
    token_ids: np.ndarray
    tokens: Sequence[str]
    offsets: np.ndarray
    logprob: np.ndarray
    mu: np.ndarray
    sigma: np.ndarray
    top1_id: np.ndarray
    top1_logprob: np.ndarray
    entropy: np.ndarray
    rank: np.ndarray
    bos_policy: str = "auto"
    boundary_token: str | None = None
    first_token_scored: bool = True
    long_text: str = "none"
    n_text_tokens: int = 0
    vocab_width: int = 0
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def n_scored(self) -> int:
        """Number of scored tokens."""
        return int(self.token_ids.shape[0])

    @property
    def policies(self) -> dict[str, str]:
        """The `token_stats` policies that produced these statistics: for scoring related texts the same way."""
        return {"bos": self.bos_policy, "long_text": "truncate" if self.long_text == "truncated" else "sliding"}

    @property
    def scored_text(self) -> str:
        """The part of the text the scores cover: all of it, or the kept prefix when truncated."""
        if self.long_text != "truncated" or self.n_scored == 0:
            return self.text
        return self.text[: int(self.offsets[:, 1].max())]



def stats_parts(stats: TokenStats) -> tuple[dict[str, np.ndarray], dict]:
    """(per-token arrays, per-text metadata) of statistics, for storing them without pickle (the display strings as
    the names of those that are not the text's span: the text is the key, kept by whoever stores them)."""
    meta = {n: getattr(stats, n) for n in META_FIELDS if n != "tokens"}
    offsets = stats.offsets
    if not (isinstance(offsets, np.ndarray) and offsets.ndim == 2):  # an (n, 2) array is passed as it is (see above)
        offsets = np.asarray(offsets).reshape(-1, 2)
    names = token_names(stats.text, offsets, stats.tokens)
    meta["token_names"] = [[j, name] for j, name in sorted(names.items())]
    return {n: getattr(stats, n) for n in ARRAY_FIELDS}, meta


def stats_from_parts(text: str, arrays: dict[str, np.ndarray], meta: dict) -> TokenStats:
    """The statistics `stats_parts` split up, for `text`."""
    meta = dict(meta)
    offsets = arrays["offsets"].reshape(-1, 2)
    names = {}
    for j, name in meta.pop("token_names"):
        if not isinstance(j, int) or isinstance(j, bool) or not 0 <= j < len(offsets) or not isinstance(name, str):
            raise ValueError(f"token name {j!r}: {name!r} is not a string at a token position")
        names[j] = name
    tokens = TokenStrings(text, offsets, names)
    return TokenStats(text=text, **{n: arrays[n] for n in ARRAY_FIELDS}, tokens=tokens, **meta)
