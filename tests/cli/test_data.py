"""`mia methods`: every method with what it reads and needs, its parameters (default and help) from its parameter
dataclass, and for a model which methods it allows and why not the others."""
from __future__ import annotations

from mia_core.api import ModelAccess
from mia_core.cli.methods import allowed_lines
from mia_core.methods import METHODS

from tests.support.cli_runner import run_cli


def test_methods_lists_access_words_and_every_parameter_with_its_default_and_help():
    code, out, err = run_cli("methods")
    assert code == 0, err
    blocks = {}
    for line in out.splitlines():
        if not line.startswith(" "):
            name = line.split()[0]
            blocks[name] = []
        blocks[name].append(line.strip())
    assert list(blocks) == list(METHODS)
    for name, spec in METHODS.items():
        text = "\n".join(blocks[name])
        assert f"access: {', '.join(spec.access_words())}; cost: {spec.cost}" in text, name
        params = [line for line in blocks[name] if line.startswith("--param ")]
        assert [p.split()[1].split("=")[0] for p in params] == list(spec.param_names), name
        for line, info in zip(params, spec.param_infos):
            assert line.split()[1] == f"{info.name}={info.default}" and line.endswith(info.help), (name, line)
        if spec.supervised is not None:  # how it gets its fit: saved by mia fit, or fitted by mia eval --fit
            assert f"mia fit --method {name}" in text and f"--param {spec.supervised.fits}=FOLDER" in text, name
    assert any(info.help for spec in METHODS.values() for info in spec.param_infos)  # help comes from the dataclass


def test_an_in_process_model_allows_every_method(model_dir):
    code, out, err = run_cli("methods", "--model", model_dir)
    assert code == 0, err
    assert out.strip() == f"{model_dir} allows every method ({len(METHODS)}): {', '.join(METHODS)}"


def test_a_model_with_less_access_lists_each_refusal_with_its_reason():
    server = ModelAccess(token_logprob=True, top_k=20, where="this server")
    lines = allowed_lines(server, "served-model")
    refused = {name: spec for name, spec in METHODS.items() if spec.access.full_distribution or spec.access.gradients
               or spec.access.further_passes or spec.access.generation or spec.access.top_k > 20}
    allowed = [name for name in METHODS if name not in refused]
    assert refused and allowed  # both sides of the listing are exercised
    assert lines[0] == f"served-model allows {len(allowed)} of {len(METHODS)} methods: {', '.join(allowed)}"
    assert lines[1] == f"refused ({len(refused)}):"
    for line, name in zip(lines[2:], refused):
        assert line.split()[0] == name and line.rstrip().endswith(".") and METHODS[name].label in line
    full = [line for line in lines[2:] if line.split()[0] == "min_k_pp"]
    assert full and "this server returns 20 log-probs per token" in full[0]
