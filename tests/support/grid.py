"""Streamlit's data grid read in a real browser: it draws its cells on a canvas, but gives them to assistive
technology as rows of cells under column headers, which is what these read."""
from __future__ import annotations

import re

#: "0.734 [0.650, 0.810]": an AUROC cell with its interval.
WITH_INTERVAL = re.compile(r"(\d\.\d{3}) \[(\d\.\d{3}), (\d\.\d{3})\]")


def metrics_row(page) -> dict[str, str]:
    """The first row of the Benchmark metrics table as the grid gives it to assistive technology: header → cell text."""
    return grid_rows(page.locator('[data-testid="stDataFrame"]').filter(
        has=page.locator('[role="columnheader"]', has_text="TPR@5%FPR")).first)[0]


def grid_rows(table) -> list[dict[str, str]]:
    """A Streamlit table as the grid gives it to assistive technology: one dict (header → cell text) per row."""
    headers = [h.inner_text().strip() for h in table.locator('[role="columnheader"]').all()]
    rows = []
    for row in table.locator('[role="row"]').all()[1:]:
        cells = [c.inner_text().strip() for c in row.locator('[role="gridcell"]').all()]
        rows.append(dict(zip(headers[-len(cells):], cells)))
    return rows
