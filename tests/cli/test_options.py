"""What the commands share: the option groups (model and backend options declared once), method parameters checked
against the chosen methods, and the inputs a method needs named by need (`--ref-model`, `--freq`)."""
from __future__ import annotations

import inspect

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from mia_core import load_model, score_texts
from mia_core.cli.groups import Backend, option_groups
from mia_core.methods import METHODS
from mia_core.model.options import ModelOptions, ModelRef

from tests.support.cli_runner import run_cli
from tests.support.tiny import random_texts


def test_a_group_parameter_becomes_its_options_in_place_and_comes_back_as_one_value():
    seen = {}

    @option_groups
    def command(first: int = typer.Option(1, "--first", help="before"), options: ModelOptions = ModelOptions(),
                last: int = typer.Option(2, "--last", help="after")) -> None:
        seen.update(options=options, first=first, last=last)

    assert list(inspect.signature(command).parameters) == [
        "first", "options__device", "options__dtype", "options__max_memory", "options__allow_pickle",
        "options__trust_remote_code", "last"]
    app = typer.Typer()
    app.command()(command)
    result = CliRunner().invoke(app, ["--dtype", "float64", "--max-memory", "cpu=1GiB", "--allow-pickle", "--last", "5"])
    assert result.exit_code == 0, result.output
    assert seen == {"options": ModelOptions(dtype="float64", max_memory="cpu=1GiB", allow_pickle=True), "first": 1,
                    "last": 5}


def test_backend_choice_says_where_the_workers_load_the_model():
    ref = ModelRef("demo", ModelOptions(dtype="float32"))
    assert Backend().where(ref) == {"backend": "local"}
    assert Backend().driver(ref.options) == ref.options
    ray = Backend("ray", "127.0.0.1:1", 2)
    where = ray.where(ref)
    assert where["ray_options"].model == ref and where["ray_options"].actors == 2 and where["ray_address"] == "127.0.0.1:1"
    assert ray.driver(ref.options) == ModelOptions(device="cpu", dtype="float32")
    sharded = ModelOptions(max_memory="cuda:0=70GiB,cuda:1=70GiB")  # the actors shard; the driver loads whole on CPU
    assert ray.driver(sharded) == ModelOptions(device="cpu")


def test_model_ref_of_a_loaded_model_reloads_the_same_numbers(model_dir):
    lm = load_model(str(model_dir), dtype="float64", max_length=32)
    ref = ModelRef.of(lm)
    assert ref == ModelRef(str(model_dir), ModelOptions(dtype="float64", max_length=32))
    again = ref.load()
    assert again.fingerprint == lm.fingerprint and again.max_length == 32 and str(again.dtype) == "torch.float64"
    assert ref.portable().spec == str(model_dir.resolve()) and ModelRef("demo").portable() == ModelRef("demo")


def test_unknown_parameter_names_the_closest_of_the_chosen_methods(tmp_path):
    src = tmp_path / "in.csv"
    src.write_text("text\nhello there\n")
    common = ["score", "--model", "no-such-model", "--input", src, "--output", tmp_path / "o.csv"]
    code, _, err = run_cli(*common, "--methods", "min_k,surp", "--param", "e_maks=3")
    assert code == 2 and "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith("error: --param: unknown parameter 'e_maks'; did you mean 'e_max'?") and "see: mia methods" in line
    assert "loading model" not in err  # refused before any model is loaded
    code, _, err = run_cli(*common, "--methods", "zlib", "--param", "k=0.3")
    assert code == 2 and "none of the chosen methods (zlib) takes a parameter" in err


def test_a_removed_flag_is_a_usage_error_and_its_parameter_goes_through_param(model_dir, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(random_texts(40, seed=3)))
    code, _, err = run_cli("freq", "build", "--model", model_dir, "--corpus", corpus, "--output", tmp_path / "f.npz")
    assert code == 0, err
    texts = random_texts(5, seed=4)
    pd.DataFrame({"text": texts}).to_csv(tmp_path / "in.csv", index=False)
    common = ["score", "--model", model_dir, "--input", tmp_path / "in.csv", "--output", tmp_path / "s.csv",
              "--methods", "dc_pdd", "--freq", tmp_path / "f.npz"]
    code, _, err = run_cli(*common, "--a", "0.5")
    assert code == 2 and "No such option: --a" in err
    code, _, err = run_cli(*common, "--param", "a=0.5")
    assert code == 0, err
    got = pd.read_csv(tmp_path / "s.csv")["dc_pdd"].to_numpy()
    capped = score_texts(load_model(str(model_dir)), texts, ["dc_pdd"], freq=tmp_path / "f.npz", a=0.5)["dc_pdd"]
    default = score_texts(load_model(str(model_dir)), texts, ["dc_pdd"], freq=tmp_path / "f.npz")["dc_pdd"]
    np.testing.assert_allclose(got, capped.to_numpy(), rtol=1e-6)
    assert not np.allclose(got, default.to_numpy())  # the parameter reached the method


@pytest.mark.parametrize("needs, flag", [(("ref_stats", "ref_same_token_stats"), "--ref-model"), (("freq",), "--freq")])
def test_an_input_flag_is_asked_for_by_the_methods_that_need_it(needs, flag, tmp_path):
    src = tmp_path / "in.csv"
    src.write_text("text\nhello there\n")
    needing = [name for name, spec in METHODS.items() if set(needs) & set(spec.needs)]
    common = ["score", "--model", "no-such-model", "--input", src, "--output", tmp_path / "o.csv"]
    code, _, err = run_cli(*common, "--methods", ",".join(["loss", *needing]))
    assert code == 2 and "loading model" not in err
    assert err.strip().splitlines()[-1].startswith(f"error: {', '.join(needing)} need")
    assert flag in err
    code, _, err = run_cli(*common, "--methods", "loss", flag, "x")
    assert code == 2 and f"{flag} is used by none of the chosen methods (it is for {', '.join(needing)})" in err
