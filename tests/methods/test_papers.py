"""Every registered method cites its paper whole: authors, year, title, venue and a link, as checked against the
paper's own abstract page; the fields that could not be confirmed are named here with the reason, so the gap shows."""
from __future__ import annotations

import re

import pytest

from mia_core import METHODS
from mia_core.api import Paper

#: Fields left empty because no source read confirmed them: {method: {field: reason}}. None at present.
UNCONFIRMED: dict[str, dict[str, str]] = {}

#: Papers with no peer-reviewed venue confirmed: their venue is the arXiv identifier, which must match the link.
PREPRINTS = {
    "con_recall": "arXiv abstract page only; no venue found",
    "ez_mia": "arXiv abstract page only; no venue found",
    "gds": "arXiv:2603.04828v1 (our copy in /work/shared/papers) and its abstract page; no venue found",
    "grad_norm": "Hugging Face's mirror of the arXiv abstract page only; no venue found",
    "samia": "arXiv abstract page only; no venue found",
    "simmia": "the official code's README citation (arXiv eprint 2601.11314); abstract page not read; no venue found",
    "simmia_star": "SimMIA's paper (the variant is the authors' own): see simmia",
    "surp": "arXiv abstract page only; no venue found",
    "tag_tab": "arXiv abstract page; its OpenReview entry is an ACL Rolling Review submission, not a venue",
}

ARXIV = re.compile(r"https://arxiv\.org/abs/(\d{4}\.\d{4,5})")


def missing(name: str, field: str) -> bool:
    """Whether `field` of the method's paper is one the table above excuses."""
    return field in UNCONFIRMED.get(name, {})


def test_the_gap_tables_name_registered_methods_and_say_why():
    for table in (UNCONFIRMED, PREPRINTS):
        assert set(table) <= set(METHODS)
    assert all(reason.strip() for fields in UNCONFIRMED.values() for reason in fields.values())
    assert all(reason.strip() for reason in PREPRINTS.values())


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_cites_authors_year_title_venue_and_link(name):
    paper = METHODS[name].paper
    assert paper.authors.strip()
    for field in ("year", "title", "venue", "link"):
        value = getattr(paper, field)
        if missing(name, field):
            assert not value, f"{name}: {field} is filled, drop it from UNCONFIRMED"
        else:
            assert value, f"{name}: no {field} (confirm it, or name the gap in UNCONFIRMED with the reason)"
    if paper.year is not None:
        assert 1990 < paper.year < 2100
    if paper.link:
        assert paper.link.startswith("https://") and " " not in paper.link
    assert "under review" not in paper.venue.lower() and "our copy" not in paper.venue.lower()
    assert paper.title == " ".join(paper.title.split())


@pytest.mark.parametrize("name", sorted(METHODS))
def test_a_preprint_is_cited_by_its_arxiv_identifier(name):
    paper = METHODS[name].paper
    arxiv = ARXIV.fullmatch(paper.link or "")
    if name in PREPRINTS:
        assert arxiv and paper.venue == f"arXiv:{arxiv.group(1)}"
    else:
        assert not paper.venue.startswith("arXiv"), f"{name}: a preprint? name it in PREPRINTS"
    if arxiv and paper.year is not None:  # an arXiv id starts with the year it was first posted (yymm)
        assert paper.year >= 2000 + int(arxiv.group(1)[:2])


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_citation_ends_with_one_period_and_never_doubles_one(name):
    cite = METHODS[name].paper.cite()
    assert ".." not in cite and cite.endswith(".") and not cite.endswith("..")
    assert "  " not in cite and cite == cite.strip()
    paper = METHODS[name].paper
    assert all(part in cite for part in (paper.authors, paper.title, paper.venue))


@pytest.mark.parametrize(("paper", "expected"), [
    (Paper("Carlini, Tramèr, Wallace et al.", 2021, "https://arxiv.org/abs/2012.07805",
           "Extracting Training Data from Large Language Models", "USENIX Security 2021"),
     "Carlini, Tramèr, Wallace et al. (2021). Extracting Training Data from Large Language Models. "
     "USENIX Security 2021."),
    (Paper("Raoof et al.", None, title="Does it detect pretraining data?"),
     "Raoof et al. Does it detect pretraining data?"),
    (Paper("Raoof et al.", None), "Raoof et al."),
    (Paper("A & B", 2024, title="A title that ends.", venue="ICLR 2024"),
     "A & B (2024). A title that ends. ICLR 2024."),
    (Paper("A & B", 2024, venue="arXiv:2404.11262"), "A & B (2024). arXiv:2404.11262."),
])
def test_cite_puts_one_mark_after_each_part(paper, expected):
    assert paper.cite() == expected
