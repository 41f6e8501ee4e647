"""Book and corpus audits: snippets, calibrated thresholds, per-book rates with honest statistics,
the results store that makes runs resumable, reports; the unlearning audit; sliding-window detection.
"""
