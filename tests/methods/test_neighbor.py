"""Neighbourhood attack: neighbour generation (a tiny masked LM saved to disk, and the self proposer),
the score against a naive recomputation, parameter checks, safe loading, and orientation."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

from mia_core import ModelLoadError, metrics, score, score_texts
from mia_core.methods.neighbor import engine as neighbors
from mia_core.methods.neighbor import NeighborParams, check_params
from mia_core.methods.neighbor.engine import CANDIDATES, SelfProposer, load_masked_lm, make_neighbors, proposer_for, vocab_table

from tests.support.oracle import naive_stats
from tests.support.tiny import WORDS, random_texts

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
#: Text of 41 MLM tokens (40 single-token words and the final period).
LONG_TEXT = random_texts(1, seed=11, min_words=40, max_words=40)[0]


def save_tiny_bert(folder, *, safetensors: bool = True):
    """A 2-layer BERT masked LM and an uncased WordPiece tokenizer over the tiny word list, saved to `folder`."""
    vocab = {w: i for i, w in enumerate(SPECIALS + list(dict.fromkeys(WORDS)) + ["##s", "##ed", ".", ","])}
    backend = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    backend.normalizer = normalizers.BertNormalizer(lowercase=True)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.decoder = decoders.WordPiece()
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    tokenizer = BertTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                  sep_token="[SEP]", mask_token="[MASK]")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64)
    model = BertForMaskedLM(config).eval()
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(folder)
    if safetensors:
        model.save_pretrained(folder)
    else:
        (folder / "config.json").write_text(json.dumps(config.to_dict()))
        torch.save(model.state_dict(), folder / "pytorch_model.bin")
    return folder


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    return save_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


def mean_logprob_naive(lm, text):
    """Mean log-prob of a text from the full float64 logits (boundary token prepended), one text at a time."""
    ids = [lm.tokenizer.convert_tokens_to_ids("<|endoftext|>")] + lm.tokenizer(text)["input_ids"]
    return float(naive_stats(lm.model, ids)["logprob"].mean())


def test_masked_lm_neighbours_swap_the_asked_number_of_words(llama_lm, bert_dir):
    stats = llama_lm.token_stats([LONG_TEXT])[0]
    proposer = proposer_for(str(bert_dir), llama_lm)
    found = make_neighbors(stats, proposer, n=8, swap_fraction=0.1, seed=3)
    assert found.unit == "word" and found.n_swap == round(0.1 * 41) == 4
    assert found.variant == f"Neighbor (masked LM: {bert_dir})"
    vocab = set(WORDS)
    original = LONG_TEXT.rstrip(".").split(" ")
    for nb in found.neighbors:
        words = nb.text.rstrip(".").split(" ")
        changed = [i for i, (a, b) in enumerate(zip(original, words)) if a != b]
        assert len(words) == len(original) and len(changed) == len(nb.swaps) == 4
        for s in nb.swaps:
            assert LONG_TEXT[s.start : s.end] == s.old and s.new.lower() in vocab and s.new.lower() != s.old.lower()
    assert len({nb.text for nb in found.neighbors}) > 1


def test_neighbours_are_reproducible_from_the_seed(llama_lm, bert_dir):
    stats = llama_lm.token_stats([LONG_TEXT])[0]
    for spec in (str(bert_dir), "self"):
        proposer = proposer_for(spec, llama_lm)
        first = make_neighbors(stats, proposer, n=6, swap_fraction=0.1, seed=1)
        again = make_neighbors(stats, proposer, n=6, swap_fraction=0.1, seed=1)
        other = make_neighbors(stats, proposer, n=6, swap_fraction=0.1, seed=2)
        assert again is not first and again == first
        assert [nb.text for nb in other.neighbors] != [nb.text for nb in first.neighbors]


def test_first_letter_case_follows_the_replaced_word(llama_lm, bert_dir):
    text = "River " + LONG_TEXT.lower()
    stats = llama_lm.token_stats([text])[0]
    found = make_neighbors(stats, proposer_for(str(bert_dir), llama_lm), n=25, swap_fraction=0.2, seed=0)
    swaps = [s for nb in found.neighbors for s in nb.swaps]
    assert any(s.start == 0 for s in swaps)
    for s in swaps:
        assert s.new[0].isupper() == s.old[0].isupper()


@pytest.mark.parametrize("mask_model", ["self", "bert"])
@pytest.mark.parametrize("aggregate", ["mean", "max"])
def test_score_equals_naive_recomputation(llama_lm, bert_dir, mask_model, aggregate):
    spec = str(bert_dir) if mask_model == "bert" else "self"
    for text in [LONG_TEXT, *random_texts(2, seed=5)]:
        stats = llama_lm.token_stats([text])[0]
        got = score("neighbor", stats, lm=llama_lm, n_neighbors=6, mask_model=spec, aggregate=aggregate, seed=4)
        found = make_neighbors(stats, proposer_for(spec, llama_lm), n=6, swap_fraction=0.05, seed=4)
        naive = [mean_logprob_naive(llama_lm, nb.text) for nb in found.neighbors]
        own = mean_logprob_naive(llama_lm, text)
        expected = own - (np.mean(naive) if aggregate == "mean" else np.max(naive))
        assert abs(got.value - expected) < 1e-5
        rows = got.details["neighbors"]
        assert [r["neighbor"] for r in rows] == [nb.text for nb in found.neighbors]
        np.testing.assert_allclose([r["mean_logprob"] for r in rows], naive, atol=1e-5)
        assert [r["swapped"] for r in rows] == [len(nb.swaps) for nb in found.neighbors]
        assert got.details["variant"] == ("Neighbor (self-proposed)" if mask_model == "self" else found.variant)
        assert got.token_scores.tolist() == stats.logprob.tolist() and got.selected.all()


def test_max_aggregate_is_at_least_the_mean(llama_lm):
    for stats in llama_lm.token_stats(random_texts(4, seed=8)):
        mean = score("neighbor", stats, lm=llama_lm, n_neighbors=8, aggregate="mean")
        top = score("neighbor", stats, lm=llama_lm, n_neighbors=8, aggregate="max")
        own = float(np.mean(stats.logprob, dtype=np.float64))
        assert own - top.value >= own - mean.value - 1e-12
        assert top.details["neighbors"] == mean.details["neighbors"]


def test_self_proposer_draws_from_the_top_of_p_never_the_true_token(llama_lm):
    """Every replacement is one of the CANDIDATES likeliest admissible tokens under a naive float64 pass."""
    proposer = SelfProposer(llama_lm)
    table = vocab_table(llama_lm.tokenizer, llama_lm.vocab_width)
    for stats in llama_lm.token_stats([LONG_TEXT, *random_texts(3, seed=9)]):
        found = make_neighbors(stats, proposer, n=10, swap_fraction=0.1, seed=0)
        assert found.variant == "Neighbor (self-proposed)"
        ids = [llama_lm.tokenizer.convert_tokens_to_ids("<|endoftext|>"), *stats.token_ids.tolist()]
        with torch.no_grad():
            logits = llama_lm.model(torch.tensor([ids])).logits[0].double()  # (T, vocab)
        for s in (s for nb in found.neighbors for s in nb.swaps):
            t = next(i for i, (a, b) in enumerate(stats.offsets.tolist()) if a <= s.start < b)
            assert s.old_id == stats.token_ids[t] and s.new_id != s.old_id and s.new.lower() != s.old.lower()
            kind = table.word if found.unit == "word" else table.printable
            admissible = [v for v in np.flatnonzero(kind & (table.lead == table.lead[s.old_id]))
                          if table.cores[v].lower() != s.old.lower()]
            logp = torch.log_softmax(logits[t], -1).numpy()
            best = sorted(admissible, key=lambda v: -logp[v])[:CANDIDATES]
            assert s.new_id in best, (s, best)


@pytest.mark.parametrize("bos", ["auto", "none"])
def test_self_proposer_rows_equal_full_logits_with_and_without_a_plain_head(llama_lm, monkeypatch, bos):
    """The proposer's log p rows are those of a full pass, whether it runs the head on the rows or the whole model."""
    stats = llama_lm.token_stats([LONG_TEXT], bos=bos)[0]
    units = SelfProposer(llama_lm).units(stats)
    ids = llama_lm.tokenizer(LONG_TEXT)["input_ids"]
    assert units.input_ids == ([llama_lm.tokenizer.convert_tokens_to_ids("<|endoftext|>")] if bos == "auto" else []) + ids
    rows = np.array([0, 3, 7, len(units.ids) - 1])
    with torch.no_grad():
        full = torch.log_softmax(llama_lm.model(torch.tensor([units.input_ids[:-1]])).logits[0].double(), -1)[rows]
    on_rows = SelfProposer(llama_lm).log_probs(units, rows, torch.Generator())
    monkeypatch.setattr(neighbors, "plain_head", lambda model: None)  # an architecture without a plain head
    whole = SelfProposer(llama_lm).log_probs(units, rows, torch.Generator())
    for got in (on_rows, whole):
        np.testing.assert_allclose(got.numpy(), full.numpy(), atol=1e-4, rtol=0)


def test_small_vocabulary_falls_back_to_token_swaps(llama_lm):
    text = "Cathedral monsoon saffron quartz."  # the tiny 300-token BPE splits every word
    stats = llama_lm.token_stats([text])[0]
    found = make_neighbors(stats, SelfProposer(llama_lm), n=5, swap_fraction=0.2, seed=0)
    assert found.unit == "token"
    n_units = sum(1 for a, b in stats.offsets.tolist() if text[a:b].strip())
    assert found.n_swap == round(0.2 * n_units)
    for nb in found.neighbors:
        assert len(nb.swaps) == found.n_swap and nb.text != text


@pytest.mark.parametrize("bad, message", [
    ({"n_neighbors": 0}, "n_neighbors"), ({"n_neighbors": 2.5}, "n_neighbors"), ({"swap_fraction": 0.0}, "swap_fraction"),
    ({"swap_fraction": 1.5}, "swap_fraction"), ({"aggregate": "median"}, "aggregate"), ({"mask_model": " "}, "mask_model"),
    ({"seed": -1}, "seed"),
])
def test_bad_parameters_are_clear_errors(bad, message):
    with pytest.raises(ValueError, match=message):
        check_params(NeighborParams(**bad))


def test_masked_lm_loading_is_safe_and_offline(tmp_path, monkeypatch):
    pickled = save_tiny_bert(tmp_path / "pickled", safetensors=False)
    with pytest.raises(ModelLoadError, match="pickle"):
        load_masked_lm(str(pickled))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match="offline"):
        load_masked_lm("someone/not-a-cached-masked-lm")


def test_members_score_higher_with_masked_lm_neighbours(membership, bert_dir):
    lm, members, nonmembers = membership["lm"], membership["members"], membership["nonmembers"]
    df = score_texts(lm, members + nonmembers, ["neighbor"], n_neighbors=5, mask_model=str(bert_dir))
    values, labels = df["neighbor"].to_numpy(), [1] * len(members) + [0] * len(nonmembers)
    assert values[: len(members)].mean() > values[len(members) :].mean()
    assert metrics.auroc(labels, values) > 0.7  # 0.83 (seeds 1, 2: 0.91, 0.85); loss: 0.99


def test_cli_takes_a_masked_lm_path_as_a_parameter(bert_dir, tmp_path, monkeypatch):
    from mia_core import load_model

    from tests.support.cli_runner import run_cli
    from tests.support.tiny import tiny_llama, tiny_tokenizer

    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))
    model_dir = tmp_path / "tiny-model"
    tok = tiny_tokenizer(300)
    tiny_llama(len(tok), seed=0).save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    texts = random_texts(3, seed=2)
    (tmp_path / "in.jsonl").write_text("\n".join(json.dumps({"text": t}) for t in texts))
    code, _, err = run_cli("score", "--model", model_dir, "--input", tmp_path / "in.jsonl", "--output", tmp_path / "s.csv",
                           "--methods", "neighbor", "--param", "n_neighbors=3", "--param", f"mask_model={bert_dir}")
    assert code == 0, err
    got = pd.read_csv(tmp_path / "s.csv")["neighbor"].to_numpy()
    expected = score_texts(load_model(str(model_dir)), texts, ["neighbor"], n_neighbors=3, mask_model=str(bert_dir))
    np.testing.assert_allclose(got, expected["neighbor"].to_numpy(), rtol=1e-6)


@pytest.mark.integration
def test_demo_model_proposes_whole_words_offline():
    from mia_core import load_model

    lm = load_model("demo")
    text = "The castle was built on a hill above the river in the twelfth century by the bishop of the city."
    stats = lm.token_stats([text])[0]
    got = score("neighbor", stats, lm=lm, n_neighbors=4, swap_fraction=0.1)
    found = make_neighbors(stats, proposer_for("self", lm), n=4, swap_fraction=0.1, seed=0)
    assert found.unit == "word" and found.n_swap == 2
    for nb in found.neighbors:
        assert len(nb.swaps) == 2 and len(nb.text.split()) == len(text.split())
        assert all(s.new.isalpha() and s.new.lower() != s.old.lower() for s in nb.swaps)
    assert got.details["variant"] == "Neighbor (self-proposed)" and np.isfinite(got.value)
