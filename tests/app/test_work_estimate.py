"""The cost line before a request: token-passes against the bound of where the model runs, and for a server that
sends the whole distribution back, how many megabytes that is."""
from __future__ import annotations

from ui.work_estimate import estimate_line


def test_a_full_distribution_request_says_how_many_megabytes_come_back():
    line = estimate_line(120, 1, "served", answer_bytes_per_token=49_152 * 78)
    assert "on the model's server (its device is not reported)" in line
    assert line.endswith("about 3.8 MB per token, 460 MB for this request.")  # 49,152 × 78 B = 3.83 MB; × 120
    assert "MB" not in estimate_line(120, 1, "served", answer_bytes_per_token=200)  # a few log-probs: nothing to say
    assert "MB" not in estimate_line(120, 1, "cpu")
