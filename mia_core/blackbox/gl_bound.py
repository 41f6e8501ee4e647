"""Tier GL per window (METHODS-API.md §18): one greedy call with the generated tokens' top log-probs gives a rigorous
upper bound on log p(z) for the suffix's token path z — exact for that path when the answer reproduces it — which
rules windows out cheaply.

z needs the provider's tokenisation, so the bound is computed only with a tokenizer the user declares to be the
provider's (a local `tokenizer.json`, its SHA-256 recorded; ours: nothing is downloaded, and a production API's
tokenizer is not guessed). Tokens are compared as the API spells them — as text, or as ids where the API gives ids
(vLLM's `--return-tokens-as-token-ids`: exact); where a token is not readable as text
(a partial UTF-8 character, "bytes:…"), the comparison stops there and the next token is bounded by 1, so the bound
stays an upper bound.
"""
from __future__ import annotations

import hashlib
import math
from functools import lru_cache
from pathlib import Path

from tokenizers import Tokenizer

from ..model.chat.answers import Choice
from .sampled import gl_upper_bound, is_discoverable

#: Bytes of a declared tokenizer file: 50 MB (the largest public tokenizer.json files are ≈ 20 MB).
MAX_TOKENIZER_BYTES = 50_000_000


def file_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def tokenizer_file(path: str | Path) -> Path:
    """The `tokenizer.json` of a path (the file, or a folder holding it); a ValueError in one sentence otherwise."""
    path = Path(path)
    found = path / "tokenizer.json" if path.is_dir() else path
    if not found.is_file():
        raise ValueError(f"no tokenizer at {path}: give a tokenizer.json file (Hugging Face `tokenizers` format) or a "
                         "folder holding one")
    if found.stat().st_size > MAX_TOKENIZER_BYTES:
        raise ValueError(f"{found} is over the {MAX_TOKENIZER_BYTES // 1_000_000} MB a tokenizer file may be")
    return found


def declared_tokenizer(path: str | Path | None) -> tuple[str | None, str | None]:
    """(absolute path, SHA-256) of a tokenizer the user declares, as a run's settings record it; (None, None) for
    none."""
    if path is None:
        return None, None
    found = tokenizer_file(path)
    return str(found.resolve()), file_sha256(found)


@lru_cache(maxsize=4)
def _load(path: str, sha256: str) -> Tokenizer:
    if file_sha256(path) != sha256:
        raise ValueError(f"the tokenizer at {path} is not the one this run recorded (its SHA-256 differs)")
    try:
        return Tokenizer.from_file(path)
    except Exception as err:  # the tokenizers library raises its own Exception type for a malformed file
        raise ValueError(f"{path} is not a tokenizer.json file: {err}") from None


#: How vLLM spells a token with `--return-tokens-as-token-ids`: its id, so tokens compare exactly.
TOKEN_ID_PREFIX = "token_id:"


def token_strings(path: str, sha256: str, target: str, *, as_ids: bool = False) -> list[str]:
    """z: `target` in the declared tokenizer (no special tokens added), each token as text, or as "token_id:N" where
    the API spells its tokens so (`as_ids`)."""
    tokenizer = _load(path, sha256)
    ids = tokenizer.encode(target, add_special_tokens=False).ids
    if as_ids:
        return [f"{TOKEN_ID_PREFIX}{i}" for i in ids]
    return [tokenizer.decode([i], skip_special_tokens=False) for i in ids]


def token_text(path: str, sha256: str, token: str) -> str:
    """A token as text: "token_id:N" decoded with the declared tokenizer, any other spelling as it is."""
    if not token.startswith(TOKEN_ID_PREFIX):
        return token
    try:
        token_id = int(token[len(TOKEN_ID_PREFIX):])
    except ValueError:
        return token
    return _load(path, sha256).decode([token_id], skip_special_tokens=False)


def spells_ids(choice: Choice | None) -> bool:
    """Whether an answer's tokens are spelt as ids ("token_id:N"), as vLLM's `--return-tokens-as-token-ids` does."""
    return bool(choice is not None and choice.logprobs
                and all(t.token.startswith(TOKEN_ID_PREFIX) for t in choice.logprobs))


def _readable(token: str) -> bool:
    return "\ufffd" not in token and not token.startswith("bytes:")


def window_bound(choice: Choice | None, suffix: list[str], tries: int, ps: tuple[float, ...]) -> dict:
    """One window's GL numbers from its greedy answer: `gl_log_p` (natural log; an upper bound, or the path's exact
    log-probability when `gl_exact_path`), the tokens reproduced `gl_j`, how the next was bounded; with an upper bound,
    whether it already rules the window out at each p (`1 − (1 − u)^n < p`); with an exact path — a lower bound on
    the suffix string's probability — whether that alone makes it (n,p)-discoverable."""
    empty = {"gl_log_p": None, "gl_exact_path": None, "gl_j": None, "gl_side": None, "gl_ruled_out": None,
             "gl_discoverable": None}
    if choice is None or not choice.logprobs or not suffix:
        return empty | {"gl_side": "no log-probs" if choice is not None else None}
    tokens = list(choice.logprobs)
    cut = len(tokens)
    for t, token in enumerate(tokens):
        readable = _readable(token.token) and all(_readable(k) for k in token.top)
        if not readable or (t < len(suffix) and not _readable(suffix[t])):
            cut = t
            break
    tokens = tokens[:cut]
    bound = gl_upper_bound([t.token for t in tokens], [t.logprob for t in tokens], [t.top for t in tokens], suffix)
    side = "unreadable" if bound.side == "ended" and cut < len(choice.logprobs) else bound.side
    upper = math.exp(bound.log_p)
    reach = [is_discoverable(upper, tries, p) for p in ps]
    return {"gl_log_p": bound.log_p, "gl_exact_path": bound.exact_path, "gl_j": bound.j, "gl_side": side,
            "gl_ruled_out": None if bound.exact_path else [not r for r in reach],
            "gl_discoverable": reach if bound.exact_path else None}
