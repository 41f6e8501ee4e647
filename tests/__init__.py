"""The test suite, a package so that test modules in different folders may share a name (pytest's prepend mode)."""
import pytest

pytest.register_assert_rewrite("tests.support")  # plain asserts in the shared helpers report like the tests' own
