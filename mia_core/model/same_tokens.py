"""The same-token reference pass (METHODS-FIELD.md part 2, conventions): the reference model run on the target's ids.

EZ-MIA and WBC compare the two models token by token, so the reference must read exactly the ids the target's
statistics pass fed (`B + ids(x)`, same BOS policy), not its own tokenisation of the text (which is what `ref` uses).
The pass is the shared statistics kernel of `LanguageModel.token_stats` on the reference's weights with the target's
tokenizer, cached on disk like the shared pass (keyed by both; by the reference alone when the two tokenizers are
identical, so the pass is then the reference's own cached one).
"""
from __future__ import annotations

from typing import Callable, Sequence

from ..api.token_stats import TokenStats
from .boundary import boundary_token_id
from .identity import tokenizer_fingerprint
from .language_model import LanguageModel


def same_tokenizer(reference: LanguageModel, target: LanguageModel) -> bool:
    """Whether the two models share the vocabulary (`get_vocab()` equal) and the document-boundary token `B`."""
    return (reference.tokenizer.get_vocab() == target.tokenizer.get_vocab()
            and boundary_token_id(reference.tokenizer) == boundary_token_id(target.tokenizer))


def on_target_tokens(reference: LanguageModel, target: LanguageModel, method: str) -> LanguageModel:
    """The reference's weights reading the target's tokenisation (its own softmax width, the target's context when
    the reference's positions allow it); a reference with another tokenizer is refused with the spec's sentence."""
    if not same_tokenizer(reference, target):
        raise ValueError(f"{method} compares token by token: the reference model must share the target's tokenizer")
    # an identical tokenizer makes this the reference's own pass: it shares that pass's cache entries (so a reference
    # equal to the target reads the target's very statistics, d ≡ 0, not the float noise of another batching)
    same = tokenizer_fingerprint(reference.tokenizer) == tokenizer_fingerprint(target.tokenizer)
    fingerprint = reference.fingerprint if same else \
        f"{reference.fingerprint}+tokens-of-{tokenizer_fingerprint(target.tokenizer)}"
    return LanguageModel(reference.model, target.tokenizer, name=f"{reference.name} on {target.name}'s tokens",
                         fingerprint=fingerprint, max_length=target.max_length, stats_cache=reference.stats_cache,
                         spec=reference.spec)


def same_token_stats(reference: LanguageModel, target: LanguageModel, texts: Sequence[str], *, method: str,
                     bos: str = "auto", long_text: str = "sliding",
                     progress: Callable[[int, int], None] | None = None) -> list[TokenStats]:
    """The reference model's statistics of each text on the target's ids (one `TokenStats` per text, cached)."""
    paired = on_target_tokens(reference, target, method)
    return paired.token_stats(texts, bos=bos, progress=progress, long_text=long_text)


__all__ = ["on_target_tokens", "same_token_stats", "same_tokenizer"]
