"""Neighbour texts for the neighbourhood attack (Mattern et al. 2023): a few words swapped for plausible ones.

Two seeded proposers:
- **masked LM** (`MaskedLMProposer`; any Hugging Face masked LM by hub name or folder, bert-base-uncased
  in the paper and in MIMIR): for each swappable position, one pass of the masked LM over the unmasked
  text with dropout p = 0.7 on that position's input embedding (MIMIR), read at that position.
  Deviation: MIMIR drops out the output of the whole embedding module (word + position + type,
  normalised) and feeds it back as `inputs_embeds`, which adds the positions twice; we drop out the
  word embedding only and let the model add positions once.
- **self** (`SelfProposer`, offline; variant "Neighbor (self-proposed)"): the target causal LM proposes,
  at token t, its most likely tokens under p(· | x_<t) other than x_t, from one forward pass (the right
  context is not seen).

Procedure (`make_neighbors`):
1. units = the proposer's tokens with a non-blank character span (masked LM: up to its maximum length;
   self: the first context window); n_swap = max(1, round(swap_fraction · units)) (MIMIR: int(), ≥ 0).
2. swappable = units that are a whole word of letters; if fewer than n_swap, every unit is swappable
   ("token" unit; e.g. small vocabularies that split most words).
3. each neighbour swaps n_swap distinct swappable units chosen uniformly at random (MIMIR ranks
   candidate swaps by p/(1 − p_orig) and keeps the best; sampling gives varied neighbours).
4. at a unit, candidates are the `CANDIDATES` most likely tokens of the same kind (a whole word, or any
   printable token) and the same leading-space status as the original, never the original token nor
   one spelling the same text up to case; one is drawn with probability ∝ p.
5. the neighbour is the text with each swapped span replaced (masked LMs: the first letter is
   capitalised when the original's was, since bert-base-uncased proposes lowercase words).
Repeated neighbours are kept: the set is a sample of the proposal distribution.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from ...model.forward import head_logits, plain_head
from ...model.identity import text_sha256
from ...model.language_model import LanguageModel
from ...model.errors import ModelLoadError
from ...model.folders import check_weights, folder_fingerprint, resolve_folder
from ...api import TokenStats
from ...model.reduce import stats_dtype

#: Candidates kept per swapped position (MIMIR reads the top 6, the original among them).
CANDIDATES = 5
#: Dropout on the swapped position's input embedding (MIMIR's `token_dropout`).
MLM_DROPOUT = 0.7
#: Float32 logits per masked-LM chunk (rows × length × vocabulary).
LOGITS_BUDGET = 1 << 25


@dataclass(frozen=True)
class Swap:
    """One replaced span: `text[start:end]` was `old` (token `old_id`), is now `new` (token `new_id`)."""

    start: int
    end: int
    old: str
    new: str
    old_id: int
    new_id: int


@dataclass(frozen=True)
class Neighbor:
    """A neighbour text and the swaps that made it."""

    text: str
    swaps: tuple[Swap, ...]


@dataclass(frozen=True)
class NeighborSet:
    """The neighbours of one text; `unit` is "word" or "token" (step 2), `n_swap` the swaps asked per neighbour."""

    neighbors: tuple[Neighbor, ...]
    variant: str
    unit: str
    n_swap: int


@dataclass(frozen=True)
class Units:
    """A proposer's tokens of a text: ids (n,), character spans (n, 2), logits rows (n,), its input ids."""

    ids: np.ndarray
    spans: np.ndarray
    rows: np.ndarray
    input_ids: list[int]


@dataclass(frozen=True)
class VocabTable:
    """Per token id: its text stripped (`cores`), leading space, printable and whole-word flags."""

    cores: list[str]
    lead: np.ndarray
    printable: np.ndarray
    word: np.ndarray
    by_core: dict[str, list[int]]


@lru_cache(maxsize=8)
def vocab_table(tokenizer, width: int) -> VocabTable:
    """Decode every token once; ids past the tokenizer (wider logits) and special tokens are unusable."""
    n = min(len(tokenizer), width)
    decoded = tokenizer.batch_decode([[i] for i in range(n)], clean_up_tokenization_spaces=False)
    model = getattr(getattr(tokenizer, "backend_tokenizer", None), "model", None)
    prefix = getattr(model, "continuing_subword_prefix", None)  # "##" for WordPiece
    special = set(tokenizer.all_special_ids)
    cores, by_core = [""] * width, {}
    lead, printable, word = (np.zeros(width, bool) for _ in range(3))
    for i, piece in enumerate(decoded):
        continuation = bool(prefix) and piece.startswith(prefix)
        piece = piece[len(prefix):] if continuation else piece
        core = piece.strip()
        if i in special or not core or not core.isprintable() or "\ufffd" in core:
            continue
        cores[i], lead[i], printable[i] = core, piece[:1].isspace(), True
        word[i] = core.isalpha() and not continuation
        by_core.setdefault(core.lower(), []).append(i)
    return VocabTable(cores, lead, printable, word, by_core)


class SelfProposer:
    """The target causal LM proposes replacements from p(· | x_<t) (offline fallback)."""

    variant = "Neighbor (self-proposed)"
    match_case = False

    def __init__(self, lm: LanguageModel):
        self.lm = lm
        self.table = vocab_table(lm.tokenizer, lm.vocab_width)

    def units(self, stats: TokenStats) -> Units:
        """The scored tokens of the first window; logits row u predicts token u."""
        keep = self.lm.max_length - 1
        fed = self.lm._with_boundary(self.lm._encode(stats.text)[0], stats.bos_policy)[: keep + 1]
        ids = stats.token_ids[:keep]
        return Units(ids, stats.offsets[:keep], np.arange(len(ids)), [int(t) for t in fed])

    @torch.inference_mode()
    def log_probs(self, units: Units, rows: np.ndarray, generator: torch.Generator) -> torch.Tensor:
        """(len(rows), vocab) float32 log p(· | x_<t) from one forward pass."""
        ids = torch.tensor([units.input_ids[:-1]], device=self.lm.device)  # (1, T); the last token predicts nothing
        keep = torch.as_tensor(rows, device=self.lm.device)
        split = plain_head(self.lm.model)
        if split is not None:  # the head on the chosen rows only, float32 at least (as the core's statistics)
            hidden = split[0](input_ids=ids, use_cache=False)[0][0, keep]  # (rows, H)
            logits = head_logits(hidden, split[1])
        else:
            logits = self.lm.model(input_ids=ids, use_cache=False).logits[0, keep]
        return torch.log_softmax(logits.to(stats_dtype(logits.dtype)), dim=-1)  # (rows, vocab)


@dataclass(frozen=True)
class MaskedLM:
    """A loaded masked LM with its (fast) tokenizer."""

    model: torch.nn.Module
    tokenizer: object
    name: str
    fingerprint: str


@lru_cache(maxsize=4)
def load_masked_lm(spec: str, device: str = "cpu") -> MaskedLM:
    """A Hugging Face masked LM from a folder or hub id: safetensors only, no remote code, hub only if reachable."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    folder = resolve_folder(spec, allow_pickle=False)
    check_weights(folder, allow_pickle=False)
    try:
        model = AutoModelForMaskedLM.from_pretrained(folder, dtype=torch.float32, use_safetensors=True,
                                                     trust_remote_code=False).to(device).eval()
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
    except Exception as err:  # not a masked LM, corrupt weights, …
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ModelLoadError(f"could not load a masked LM from {folder}: {first_line}") from err
    if not tokenizer.is_fast:
        raise ModelLoadError(f"the masked LM in {folder} has no fast tokenizer (character offsets are needed)")
    return MaskedLM(model, tokenizer, spec, folder_fingerprint(folder, tokenizer))


class MaskedLMProposer:
    """A masked LM proposes replacements, one dropout pass per swapped position (MIMIR)."""

    match_case = True

    def __init__(self, mlm: MaskedLM):
        self.mlm = mlm
        self.variant = f"Neighbor (masked LM: {mlm.name})"
        self.table = vocab_table(mlm.tokenizer, int(mlm.model.get_output_embeddings().weight.shape[0]))

    def units(self, stats: TokenStats) -> Units:
        """The masked LM's non-special tokens (text truncated to its maximum length)."""
        tok = self.mlm.tokenizer
        limit = min(tok.model_max_length, getattr(self.mlm.model.config, "max_position_embeddings", None) or 512)
        enc = tok(stats.text, truncation=True, max_length=limit, return_offsets_mapping=True,
                  return_special_tokens_mask=True)
        rows = np.flatnonzero(np.asarray(enc["special_tokens_mask"]) == 0)
        ids = np.asarray(enc["input_ids"], dtype=np.int64)
        spans = np.asarray(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2)
        return Units(ids[rows], spans[rows], rows, list(map(int, enc["input_ids"])))

    @torch.inference_mode()
    def log_probs(self, units: Units, rows: np.ndarray, generator: torch.Generator) -> torch.Tensor:
        """(len(rows), vocab) log-probs at each row, its input embedding dropped out (p = 0.7, seeded)."""
        model = self.mlm.model
        device = next(model.parameters()).device
        embeds = model.get_input_embeddings()(torch.tensor([units.input_ids], device=device))  # (1, T, H)
        _, length, hidden = embeds.shape
        chunk = max(1, LOGITS_BUDGET // (length * int(self.table.lead.shape[0])))
        out = []
        for start in range(0, len(rows), chunk):
            pos = torch.as_tensor(rows[start : start + chunk], device=device)  # (c,)
            x = embeds.expand(len(pos), length, hidden).clone()  # (c, T, H)
            keep = torch.rand(len(pos), hidden, generator=generator) >= MLM_DROPOUT  # (c, H)
            arange = torch.arange(len(pos), device=device)
            x[arange, pos] *= keep.to(device, x.dtype) / (1 - MLM_DROPOUT)
            logits = model(inputs_embeds=x, attention_mask=torch.ones(x.shape[:2], device=device)).logits
            out.append(torch.log_softmax(logits[arange, pos].float(), dim=-1))  # (c, vocab)
        return torch.cat(out)


def proposer_for(mask_model: str, lm: LanguageModel):
    """"self" → the target proposes; anything else names a masked LM (hub id or folder), loaded once."""
    if mask_model == "self":
        return SelfProposer(lm)
    return MaskedLMProposer(load_masked_lm(mask_model, str(lm.device)))


def make_neighbors(stats: TokenStats, proposer, *, n: int, swap_fraction: float, seed: int) -> NeighborSet:
    """`n` neighbours of `stats.text`, reproducible from `seed` (see the module docstring for the procedure)."""
    text, table = stats.text, proposer.table
    units = proposer.units(stats)
    spans, words = _swappable(text, units.spans)
    n_swap = max(1, round(swap_fraction * len(spans)))
    pool = [u for u in spans if words[u]]
    unit = "word" if len(pool) >= n_swap else "token"
    pool = pool if unit == "word" else list(spans)
    if not pool:
        preview = text[:40] + ("…" if len(text) > 40 else "")
        raise ValueError(f"no token of the text {preview!r} can be swapped to make neighbours "
                         "(nothing but blanks, or a tokenizer without character offsets)")
    n_swap = min(n_swap, len(pool))
    rng = np.random.default_rng([seed, int(text_sha256(text)[:15], 16)])
    picks = [sorted(pool[i] for i in rng.choice(len(pool), n_swap, replace=False)) for _ in range(n)]
    needed = sorted({u for pick in picks for u in pick})
    generator = torch.Generator().manual_seed(int(rng.integers(1 << 62)))
    logp = proposer.log_probs(units, units.rows[needed], generator)  # (len(needed), vocab)
    kind = table.word if unit == "word" else table.printable
    candidates = {u: _top_candidates(row, kind, table, int(units.ids[u]), text[slice(*spans[u])])
                  for row, u in zip(logp, needed)}
    neighbors = []
    for pick in picks:
        swaps = []
        for u in pick:
            ids, probs = candidates[u]
            if len(ids) == 0:  # nothing of the same kind to propose here
                continue
            new_id = int(ids[rng.choice(len(ids), p=probs)])
            a, b = spans[u]
            new = table.cores[new_id]
            new = _match_case(new, text[a:b]) if proposer.match_case else new
            swaps.append(Swap(int(a), int(b), text[a:b], new, int(units.ids[u]), new_id))
        neighbors.append(Neighbor(_splice(text, swaps), tuple(swaps)))
    return NeighborSet(tuple(neighbors), proposer.variant, unit, n_swap)


def _top_candidates(logp: torch.Tensor, kind: np.ndarray, table: VocabTable, old_id: int, old: str):
    """The `CANDIDATES` likeliest tokens of `kind` with the original's leading space, not spelling `old`;
    returns their ids and sampling weights (probabilities renormalised over them)."""
    lead = bool(table.lead[old_id]) if old_id < len(table.cores) else False
    mask = torch.as_tensor(kind & (table.lead == lead), device=logp.device)  # (vocab,)
    mask[[old_id, *table.by_core.get(old.lower(), [])]] = False
    values, ids = torch.where(mask, logp, -torch.inf).topk(CANDIDATES)
    finite = torch.isfinite(values)
    return ids[finite].cpu().numpy(), torch.softmax(values[finite].double(), 0).cpu().numpy()


def _swappable(text: str, token_spans: np.ndarray) -> tuple[dict[int, tuple[int, int]], dict[int, bool]]:
    """Units with a non-blank span (stripped of surrounding space, non-overlapping), and which are whole words."""
    spans, words, end = {}, {}, 0
    for u, (a, b) in enumerate(token_spans.tolist()):
        piece = text[a:b]
        core = piece.strip()
        if not core or a < end:  # blank, special, or sharing characters with the previous unit
            continue
        a += len(piece) - len(piece.lstrip())
        b = a + len(core)
        end = b
        spans[u] = (a, b)
        words[u] = core.isalpha() and (a == 0 or not text[a - 1].isalnum()) and (b == len(text) or not text[b].isalnum())
    return spans, words


def _match_case(new: str, old: str) -> str:
    """Capitalise a lowercase proposal like the word it replaces."""
    if not new.islower():
        return new
    if old.isupper() and len(old) > 1:
        return new.upper()
    return new[:1].upper() + new[1:] if old[:1].isupper() else new


def _splice(text: str, swaps: list[Swap]) -> str:
    """The text with every swap applied (spans are disjoint and sorted)."""
    out, end = [], 0
    for s in sorted(swaps, key=lambda s: s.start):
        out += [text[end : s.start], s.new]
        end = s.end
    return "".join(out + [text[end:]])
