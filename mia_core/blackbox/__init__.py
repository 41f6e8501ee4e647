"""Audits of models one can only generate from (METHODS-API.md §17–§24): pure functions of stored answers."""
