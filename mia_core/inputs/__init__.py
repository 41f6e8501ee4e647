"""Readers of what users bring: tables, documents, corpora; the built-in demo sets and hub benchmarks."""
