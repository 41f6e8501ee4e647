"""mia_core/deferred.py: a module stands deferred until a name is read from it, then every read and write is the
module's own."""
from __future__ import annotations

import sys
import threading

import pytest

from mia_core.deferred import deferred

MODULE = '''
import time
LOADS = [time.sleep(0.2)]  # a slow import: two threads reading at once must both see it executed once, whole
VALUE = 41


def value():
    return VALUE + 1
'''


@pytest.fixture
def slow_module(tmp_path, monkeypatch):
    name = f"deferred_probe_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_nothing_is_imported_before_a_name_is_read(slow_module):
    module = deferred(slow_module)
    assert slow_module not in sys.modules
    assert module.value() == 42 and slow_module in sys.modules
    assert module.LOADS is sys.modules[slow_module].LOADS


def test_a_name_set_on_it_is_set_on_the_module(slow_module, monkeypatch):
    module = deferred(slow_module)
    monkeypatch.setattr(module, "VALUE", 1)  # what a test's monkeypatch of an engine function does
    assert sys.modules[slow_module].VALUE == 1 and module.value() == 2
    monkeypatch.undo()
    assert module.value() == 42


def test_two_threads_reading_at_once_get_one_whole_module(slow_module):
    module, found = deferred(slow_module), []
    threads = [threading.Thread(target=lambda: found.append((module.VALUE, id(module.LOADS)))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(found) == 4 and len(set(found)) == 1 and found[0][0] == 41
