"""Every method parameter says what it is and how far it goes: the pages draw their widgets from these declarations
(`ui.params`), so a bound the method's own check refuses would put a value on the page that fails."""
from __future__ import annotations

import pytest

from mia_core import METHODS


def cases() -> list[tuple[str, str]]:
    return [(name, info.name) for name, spec in METHODS.items() for info in spec.param_infos]


def info_of(method: str, name: str):
    return next(i for i in METHODS[method].param_infos if i.name == name)


@pytest.mark.parametrize(("method", "name"), cases())
def test_every_parameter_has_help_and_a_default_inside_its_bounds(method, name):
    info = info_of(method, name)
    assert len(info.help.split()) >= 3, f"{method}.{name}: no help"
    if info.choices is not None:
        assert info.default in info.choices, f"{method}.{name}: default {info.default!r} not among {info.choices}"
    if info.widget and info.kind in (int, float) and info.choices is None:
        assert info.low is not None and info.high is not None and info.step, f"{method}.{name}: a widget needs bounds"
        assert info.default is None or info.low <= info.default <= info.high, f"{method}.{name}: default outside"
        assert isinstance(info.low, info.kind) or info.kind is float, f"{method}.{name}: bounds of another kind"


@pytest.mark.parametrize(("method", "name"), cases())
def test_the_method_accepts_its_declared_bounds_and_choices(method, name):
    """Each bound and choice, alone (the others at their defaults), passes the parameters' own check; only a check
    between two parameters (Tag&Tab: max_words ≥ min_words) may refuse one, and its message names the other."""
    spec, info = METHODS[method], info_of(method, name)
    others = [i.name for i in spec.param_infos if i.name != name]
    for value in [*(info.choices or ()), *(b for b in (info.low, info.high) if b is not None)]:
        try:
            spec.make_params(**{name: value})
        except ValueError as err:
            assert any(other in str(err) for other in others), f"{method}.{name}={value!r}: {err}"


def test_a_bound_outside_the_check_would_be_caught():
    """The check above is not vacuous: k's declared low is accepted, a value below the check's range is not."""
    spec = METHODS["min_k"]
    spec.make_params(k=info_of("min_k", "k").low)
    with pytest.raises(ValueError, match="k must be in"):
        spec.make_params(k=0.0)
