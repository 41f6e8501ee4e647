"""Helpers shared by the tests (tiny models, oracles, the CLI and dashboard runners): `tests.support.<module>`."""
