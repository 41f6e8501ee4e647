"""Parameters declared once: each field's help and bounds, read back by `param_infos` for the CLI and the pages."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from mia_core import METHODS
from mia_core.api import KParams, NoParams, param, param_infos


@dataclass(frozen=True)
class Toy:
    k: float = param(0.3, "fraction", low=0.05, high=1.0, step=0.05)
    mode: str = param("a", "which way", choices=("a", "b"))
    seed: int = param(0, "seed of the draws", widget=False)
    plain: int = 4


def test_param_infos_read_help_bounds_and_choices():
    infos = {i.name: i for i in param_infos(Toy)}
    assert list(infos) == ["k", "mode", "seed", "plain"]
    assert (infos["k"].default, infos["k"].kind, infos["k"].low, infos["k"].high, infos["k"].step) == (
        0.3, float, 0.05, 1.0, 0.05)
    assert infos["mode"].choices == ("a", "b") and infos["mode"].help == "which way"
    assert infos["seed"].widget is False and infos["k"].widget is True
    assert (infos["plain"].default, infos["plain"].kind, infos["plain"].help) == (4, int, "")
    assert Toy().k == 0.3 and Toy(k=0.5).k == 0.5  # still a plain dataclass


def test_k_is_declared_once_with_its_bounds_and_checked():
    [k] = param_infos(KParams)
    assert (k.name, k.default, k.low, k.high) == ("k", 0.2, 0.05, 1.0) and "fraction" in k.help
    with pytest.raises(ValueError, match=r"k must be in \(0, 1\]"):
        KParams(k=0)
    assert param_infos(NoParams) == []


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_parameter_default_builds_and_sits_in_its_bounds(name):
    spec = METHODS[name]
    spec.make_params()  # the defaults validate
    for info in spec.param_infos:
        if info.low is not None and isinstance(info.default, (int, float)) and not isinstance(info.default, bool):
            assert info.low <= info.default <= info.high, (name, info)
        if info.choices is not None:
            assert info.default in info.choices, (name, info)
