"""The book-audit report as a print-ready PDF: the report's HTML laid out on A4 pages by WeasyPrint.

Why WeasyPrint: the report is already HTML and CSS, so one set of sections serves the browser and the page, and CSS
paged media gives the print layout in a few rules (A4, margins, "page N of M" in every footer, headings kept with
what follows, table rows never split). It is pure Python on Pango (a Debian library most desktops and servers have),
runs offline, draws SVG as vectors, and is actively kept (BSD licence). reportlab or fpdf2 would mean laying out
every table and paragraph a second time by hand; a headless Chrome (plotly's kaleido, Playwright's page.pdf) is a
browser to install and drive per report. The figures are vector SVG from `print_figures`, the snippet heatmaps stay
coloured HTML text.

Nothing outside the document is fetched while rendering: only `data:` URIs (the embedded figures) are allowed.
Control and bidi characters in the text (book names come from users' files) are written as their escapes
(`names.HIDDEN_CHARS`): a right-to-left override in a name must not reorder what the auditor reads or copies.
"""
from __future__ import annotations

import re

from ..names import HIDDEN_CHARS, escaped

try:  # WeasyPrint loads Pango when imported; without either, the HTML report and the CSVs still work
    import weasyprint
    UNAVAILABLE = ""
except ImportError:  # the [pdf] extra not installed
    weasyprint = None
    UNAVAILABLE = 'PDF reports need WeasyPrint: pip install "mia-lens[pdf]"'
except OSError as err:
    weasyprint = None
    UNAVAILABLE = (f"PDF reports need the Pango library (Debian: apt-get install libpango-1.0-0 libpangoft2-1.0-0): "
                   f"{err}")

#: The print layout, which the printed report puts after its own style: A4, page numbers, tables that fit the text width.
PRINT_STYLE = """
@page{size:A4;margin:16mm 14mm 18mm 14mm;
  @bottom-left{content:"MIA Lens · " string(title) " · " string(run);font:7.5pt "DejaVu Sans",sans-serif;color:#666}
  @bottom-right{content:"page " counter(page) " of " counter(pages);font:7.5pt "DejaVu Sans",sans-serif;color:#666}}
body{max-width:none;margin:0;padding:0;font-family:"DejaVu Sans",sans-serif;font-size:9pt;line-height:1.35}
code.run-id{string-set:run content(text)} h1{string-set:title content(text)}
h1{font-size:17pt} h2{font-size:12.5pt;break-after:avoid} h3{font-size:10.5pt;break-after:avoid}
table{width:100%;table-layout:fixed;font-size:7.5pt} td,th{overflow-wrap:anywhere;vertical-align:top;padding:.2em .4em}
tr{break-inside:avoid} table.meta td:first-child{width:26%} table.digests{font-size:6.5pt}
table.digests th:nth-child(1){width:11%} table.digests th:nth-child(2){width:24%} table.digests th:nth-child(3),
table.digests th:nth-child(4),table.digests th:nth-child(5){width:8%} table.digests td:last-child{font-family:monospace}
img.figure{display:block;max-width:100%;margin:.4em 0;break-inside:avoid} .warn{break-inside:avoid}
details{break-inside:avoid} summary{display:block;margin:.3em 0}
.mia-heatmap{font-family:"DejaVu Sans Mono",monospace !important;font-size:7.5pt;line-height:1.6 !important}
.mia-tip{display:none !important}
"""
_HIDDEN = re.compile(f"[{HIDDEN_CHARS}]")
_FETCH_NOTHING_BUT_DATA = {"data"}


def html_to_pdf(page: str) -> bytes:
    """The PDF of a report page (`report.report_html(..., printed=True)`), its hidden characters written as escapes.

    Raises RuntimeError with UNAVAILABLE's message when Pango is missing.
    """
    if weasyprint is None:
        raise RuntimeError(UNAVAILABLE)
    fetcher = weasyprint.URLFetcher(allowed_protocols=_FETCH_NOTHING_BUT_DATA)
    document = weasyprint.HTML(string=_HIDDEN.sub(escaped, page), url_fetcher=fetcher)
    return document.write_pdf()
