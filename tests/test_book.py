"""The published book: the reproduction join (book_tools), every page's opening box, code that fits the page,
the references and the offline-math configuration."""

import json
import re
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

import book_tools as bt

ROOT = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
NOTEBOOKS = sorted(p for folder in ("notebooks", "book") for p in (ROOT / folder).glob("*.ipynb"))
MAX_CODE_LINE = 80
HIDDEN_CODE_TAGS = {"remove-cell", "remove-input"}  # code the rendered page never shows

BIB_KEYS = {
    "sana2026mixing",
    "glauber1963",
    "levin2017markov",
    "bubley1997path",
    "devlin2019bert",
    "liu2019roberta",
    "warner2025modernbert",
    "wang2019bertmouth",
    "salazar2020mlmscoring",
    "reimers2019sbert",
    "wang2020minilm",
    "greene2006bbc",
    "allal2025smollm2",
    "radford2019gpt2",
    "vehtari2021rhat",
    "efron1993bootstrap",
    "ruffolo2021antiberty",
    "dunbar2016anarci",
}


def read_cells(path: Path) -> list[SimpleNamespace]:
    """A notebook's cells (type, source text, metadata), read as JSON: nbformat's import costs each worker
    seconds (jsonschema's format checkers), and these tests need no validation."""
    return [
        SimpleNamespace(cell_type=c["cell_type"], source="".join(c["source"]), metadata=c.get("metadata", {}))
        for c in json.loads(path.read_text())["cells"]
    ]


# ---------------------------------------------------------------------------------------------------------
# The reproduction join, on constructed CSVs
# ---------------------------------------------------------------------------------------------------------


def claim_row(claim, ours, verdict="reproduced", model="tiny", table="paper", source="01_first", **extra):
    row = dict(
        claim=claim,
        table=table,
        kind="general",
        quantity=f"q_{claim}",
        ours=ours,
        low=ours - 0.1,
        high=ours + 0.1,
        null=0.0,
        ours_text=f"{ours:.2f} [ci]",
        verdict=verdict,
        reason=f"rule for {claim}",
        setup="—",
        model=model,
        profile="smoke",
        code=bt.code_version(source),
        commit="abc1234",
        run_date="2026-11-30 10:00 UTC",
    )
    return row | extra


def write_claims(root: Path, chapter: str, rows) -> None:
    (root / chapter).mkdir(parents=True)
    pd.DataFrame(rows).to_csv(root / chapter / "claims.csv", index=False)


@pytest.fixture
def paper(tmp_path):
    frame = pd.DataFrame(
        {
            "claim": ["a_claim", "b_claim", "c_claim", "x_beyond"],
            "table": ["paper", "paper", "paper", "beyond"],
            "kind": ["general", "model-specific", "general", "general"],
            "chapter": ["01_first", "01_first", "02_second", "02_second"],
            "section": ["4", "5.1", "6", "7"],
            "what": ["what a", "what b", "what c", "what x"],
            "paper_value": ["0.64-0.80", "1.04", "17", "not measured"],
            "values": ["low=0.64; high=0.80", "value=1.04", "value=17", ""],
            "paper_model": ["BERT"] * 4,
            "protocol": ["n=20", "tau=10", "", ""],
        }
    )
    path = tmp_path / "paper_claims.csv"
    frame.to_csv(path, index=False)
    return bt.read_paper_claims(path)


def test_a_row_shown_beside_is_outside_the_count_the_forest_and_the_decide_line(tmp_path, paper):
    """A claim judged at one setting with a row shown beside it (`judged` False: chapter 5's rows at the paper's tau
    when the model's matched tau is judged): both rows in the table, the judged one first; only the judged row is
    counted, drawn in the forest plot, compared across models and given a "would decide it" line; a claims file
    written before the column existed reads as judged."""
    results = tmp_path / "results"
    judged = claim_row("a_claim", 0.05, "inconclusive", setup="τ = 0.5 (matched)")
    shown = claim_row("a_claim", 0.05, "inconclusive", setup="τ = 1", judged=False, reason="shown beside, not judged")
    write_claims(results, "01_first", [judged, shown])
    write_claims(results, "02_second", [claim_row("c_claim", 12.0, "differs", source="02_second")])
    ours = bt.read_claims(results)
    assert ours.judged.tolist() == [True, False, True]  # 02_second's file has no judged column
    table = bt.reproduction_table(paper, ours, "paper")
    rows = table[table.claim == "a_claim"]
    assert rows.setup.tolist() == ["τ = 0.5 (matched)", "τ = 1"] and rows.judged.tolist() == [True, False]
    assert rows.decide_at.iloc[0] and not rows.decide_at.iloc[1]  # only the judged row says what would decide it
    summary = bt.run_summary_text(bt.check_one_run(ours), {"paper": table})
    assert "general claims: 1 differs, 1 inconclusive;" in summary
    assert bt.forest_rows({"paper": table}).claim.tolist() == ["a_claim", "c_claim"]
    assert "shown beside, not judged" in bt.claims_html(rows)
    assert bt.verdicts_beside({"m": ours}, paper).set_index("claim").loc["a_claim", "m: what was measured"]


def test_join_keeps_the_paper_order_and_marks_missing_claims(tmp_path, paper):
    results = tmp_path / "results"
    write_claims(results, "02_second", [claim_row("c_claim", 12.0, "differs", source="02_second")])
    write_claims(results, "01_first", [claim_row("a_claim", 0.7)])
    ours = bt.read_claims(results)
    assert sorted(ours.source) == ["01_first", "02_second"]

    table = bt.reproduction_table(paper, ours, "paper")
    assert table.claim.tolist() == ["a_claim", "b_claim", "c_claim"]
    assert table.verdict.tolist() == ["reproduced", "not run here", "differs"]
    assert table.ours_text.tolist() == ["0.70 [ci]", "—", "12.00 [ci]"]
    assert table.paper_value.tolist() == ["0.64-0.80", "1.04", "17"]
    assert table.model.tolist() == ["tiny", "—", "tiny"]
    assert "results/01_first/claims.csv" in table.reason[1]
    assert bt.verdict_counts(table) == {
        "reproduced": 1,
        "differs": 1,
        "inconclusive": 0,
        "other setup": 0,
        "not run here": 1,
    }

    beyond = bt.reproduction_table(paper, ours, "beyond")
    assert beyond.claim.tolist() == ["x_beyond"] and beyond.verdict.tolist() == ["not run here"]


def test_join_shows_one_row_per_model(tmp_path, paper):
    write_claims(
        tmp_path,
        "01_first",
        [claim_row("a_claim", 0.7, model="tiny"), claim_row("a_claim", 0.75, model="bert-base-uncased")],
    )
    table = bt.reproduction_table(paper, bt.read_claims(tmp_path), "paper")
    assert table.claim.tolist() == ["a_claim", "a_claim", "b_claim", "c_claim"]
    assert table.model.tolist()[:2] == ["tiny", "bert-base-uncased"]


def test_no_results_means_nothing_run(tmp_path, paper):
    ours = bt.read_claims(tmp_path / "nothing")
    assert ours.empty
    table = bt.reproduction_table(paper, ours, "paper")
    assert set(table.verdict) == {"not run here"}


def test_unknown_claims_are_reported(tmp_path, paper):
    write_claims(tmp_path, "01_first", [claim_row("a_claim", 0.7), claim_row("typo_claim", 1.0)])
    assert bt.unknown_claims(paper, bt.read_claims(tmp_path)) == ["typo_claim"]


def test_bad_claims_csv_raises(tmp_path, paper):
    write_claims(tmp_path / "one", "01_first", [{k: v for k, v in claim_row("a_claim", 0.7).items() if k != "reason"}])
    with pytest.raises(ValueError, match="reason"):
        bt.read_claims(tmp_path / "one")
    write_claims(tmp_path / "two", "01_first", [claim_row("a_claim", 0.7, verdict="sort of")])
    with pytest.raises(ValueError, match="verdict"):
        bt.read_claims(tmp_path / "two")
    write_claims(tmp_path / "three", "01_first", [claim_row("a_claim", 0.7, table="appendix")])
    with pytest.raises(ValueError, match="table"):
        bt.read_claims(tmp_path / "three")
    with pytest.raises(ValueError, match="table must be one of"):
        bt.reproduction_table(paper, bt.read_claims(tmp_path / "none"), "other")


def test_bad_paper_claims_raise(tmp_path, paper):
    path = tmp_path / "paper_claims.csv"
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    pd.concat([frame, frame.iloc[:1]]).to_csv(path, index=False)
    with pytest.raises(ValueError, match="listed twice"):
        bt.read_paper_claims(path)
    frame.assign(kind="vague").to_csv(path, index=False)
    with pytest.raises(ValueError, match="kind"):
        bt.read_paper_claims(path)
    frame.assign(values="0.64").to_csv(path, index=False)
    with pytest.raises(ValueError, match="key=value"):
        bt.read_paper_claims(path)
    pd.DataFrame({"claim": ["a"], "table": ["paper"]}).to_csv(path, index=False)
    with pytest.raises(ValueError, match="chapter"):
        bt.read_paper_claims(path)


def test_the_summary_refuses_rows_of_another_run(tmp_path):
    write_claims(
        tmp_path, "01_first", [claim_row("a_claim", 0.7, profile="quick"), claim_row("b_claim", 0.7, profile="quick")]
    )
    ours = bt.read_claims(tmp_path)
    run = bt.check_one_run(ours, "quick", "tiny")
    assert run["profile"] == "quick" and run["commit"] == "abc1234" and "2026-11-30" in run["dates"]
    with pytest.raises(ValueError, match="'a_claim' comes from the 'quick' profile.*'smoke'"):
        bt.check_one_run(ours, "smoke", "tiny")
    with pytest.raises(ValueError, match="made with model 'tiny'"):
        bt.check_one_run(ours, "quick", "minilm-l4-bbc-mlm")
    stale = bt.read_claims(tmp_path).assign(code="000000000000")
    with pytest.raises(ValueError, match="other code"):
        bt.check_one_run(stale, "quick", "tiny")
    mixed = pd.concat([ours, ours.assign(profile="smoke")])
    with pytest.raises(ValueError, match="mix profiles"):
        bt.check_one_run(mixed)


def test_chapter_links_only_for_chapters_in_the_book(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "_toc.yml").write_text("chapters:\n  - file: notebooks/01_first\n  - file: notebooks/03_listed\n")
    (tmp_path / "notebooks" / "01_first.ipynb").write_text("{}")
    (tmp_path / "notebooks" / "02_unlisted.ipynb").write_text("{}")
    assert bt.chapter_href("01_first", tmp_path) == "../notebooks/01_first.html"
    assert bt.chapter_href("02_unlisted", tmp_path) is None  # not in _toc.yml
    assert bt.chapter_href("03_listed", tmp_path) is None  # no notebook


def test_claims_html_escapes_text_and_links_chapters(tmp_path, paper):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "_toc.yml").write_text("- file: notebooks/01_first\n")
    (tmp_path / "notebooks" / "01_first.ipynb").write_text("{}")
    write_claims(tmp_path / "results", "01_first", [claim_row("a_claim", 0.7, reason="<script>x</script> & y")])
    table = bt.reproduction_table(paper, bt.read_claims(tmp_path / "results"), "paper")
    page = bt.claims_html(table, tmp_path)
    assert "<script>" not in page and "&lt;script&gt;x&lt;/script&gt; &amp; y" in page
    assert page.count('<a href="../notebooks/01_first.html">01</a>') == 2  # a_claim and b_claim
    assert page.count("<tr>") == 1 + 3 and "<td>02</td>" in page
    assert page.count("<details>") == 3 and "what a" in page  # the full statement in each row's dropdown


def test_read_benchmark(tmp_path):
    path = tmp_path / "bench.csv"
    frame = pd.DataFrame(
        {
            "batch": [64, 1],
            "glauber_rate": [290.0, 57.0],
            "bare_rate": [286.0, 65.0],
            "naive_rate": [35.5, 35.5],
            "speedup_vs_naive": [8.2, 1.6],
            "step_over_forward": [0.98, 1.13],
        }
    )
    frame.assign(note="", model="m").to_csv(path, index=False)
    bench = bt.read_benchmark(path)
    assert bench.batch.tolist() == [1, 64] and bench.note.tolist() == ["", ""]  # a run without --note
    html = bt.benchmark_table(bench).to_html()
    assert ">64<" in html and ">64.0<" not in html and ">290.0<" in html and ">8.20<" in html
    frame.drop(columns="bare_rate").to_csv(path, index=False)
    with pytest.raises(ValueError, match="bare_rate"):
        bt.read_benchmark(path)
    frame.iloc[:0].to_csv(path, index=False)
    with pytest.raises(ValueError, match="no rows"):
        bt.read_benchmark(path)


# ---------------------------------------------------------------------------------------------------------
# The book's own files
# ---------------------------------------------------------------------------------------------------------


def test_paper_claims_csv_lists_every_claim_once():
    paper = bt.read_paper_claims(ROOT / "book" / "paper_claims.csv")
    assert (paper.paper_value.str.len() > 0).all() and (paper.section.str.len() > 0).all()
    assert set(paper.chapter) == {"01_incompatibility", "02_mixing_bounds", "03_phase_diagram", "04_basins", "05_traps"}
    assert (paper[paper.kind == "model-specific"].paper_model.str.len() > 1).all()


def paper_numbers() -> dict[str, set[str]]:
    """The paper's reported numbers (the `values` column) per chapter, as they could be typed: 0.979, 4,950."""
    paper = bt.read_paper_claims(ROOT / "book" / "paper_claims.csv")
    numbers = {}
    for row in paper.itertuples(index=False):
        for value in bt.parse_pairs(row.values).values():
            number = float(value.replace(",", ""))
            if number == int(number) and abs(number) < 100:
                continue  # small integers (0, 4, 17, 50) are everywhere in code and prose
            forms = {value, f"{number:g}", f"{number:,.0f}" if number == int(number) else f"{number:g}"}
            numbers.setdefault(row.chapter, set()).update(forms)
    return numbers


@pytest.mark.parametrize("chapter", sorted(paper_numbers()))
def test_chapters_never_type_a_paper_number(chapter):
    """Paper numbers are typed once, in book/paper_claims.csv; a chapter reads them from there."""
    text = (ROOT / "notebooks" / f"{chapter}.py").read_text()
    typed = sorted(
        n for n in paper_numbers()[chapter] if re.search(rf"(?<![\w.,]){re.escape(n)}(?![\w]|\.\d|,\d)", text)
    )
    assert not typed, f"{chapter} types the paper's {typed}: glue them from paper_claims.csv (bt.glue_paper)"


def test_references_have_exactly_the_cited_keys():
    keys = set(re.findall(r"^@\w+\{([^,]+),", (ROOT / "references.bib").read_text(), flags=re.M))
    assert keys == BIB_KEYS
    assert CONFIG["bibtex_bibfiles"] == ["references.bib"]
    assert "{bibliography}" in (ROOT / "book" / "references.md").read_text()


def test_every_toc_entry_exists():
    files = re.findall(r"file:\s*(\S+)", (ROOT / "_toc.yml").read_text())
    files.append(yaml.safe_load((ROOT / "_toc.yml").read_text())["root"])
    for name in files:
        assert any((ROOT / f"{name}{suffix}").exists() for suffix in (".md", ".ipynb")), f"{name} does not exist"


def test_math_is_served_from_the_build():
    sphinx = CONFIG["sphinx"]
    assert "://" not in sphinx["config"]["mathjax_path"]
    assert "book_sphinx" in sphinx["local_extensions"]
    sys.path.insert(0, str(ROOT / sphinx["local_extensions"]["book_sphinx"]))
    from book_sphinx import MATHJAX_SOURCE

    assert (MATHJAX_SOURCE / "MathJax.js").exists()
    config = sphinx["config"]["mathjax_path"].partition("?config=")[2]
    assert (MATHJAX_SOURCE / "config" / f"{config}.js").exists()


# ---------------------------------------------------------------------------------------------------------
# Every page: the opening box, code that fits the page
# ---------------------------------------------------------------------------------------------------------


def test_there_are_book_notebooks():
    assert {"quick_tour.ipynb", "bundled_model.ipynb", "reproduction.ipynb", "performance.ipynb"} <= {
        p.name for p in NOTEBOOKS
    }


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_opening_box(path):
    first = read_cells(path)[0]
    assert first.cell_type == "markdown", f"{path.name}: the first cell must be markdown"
    lines = [line for line in first.source.splitlines() if line.strip()]
    assert lines[0].startswith("# "), f"{path.name}: the first line must be the `# Title`"
    assert lines[1:3] == ["```{admonition} This chapter at a glance", ":class: tip"], (
        f"{path.name}: the title must be followed by the opening box (see notes/COMMON.md)"
    )
    box = []  # the box's bullets, a bullet's wrapped continuation lines joined to it
    for line in lines[3 : lines.index("```", 3)]:
        if line.startswith("- ") or not box:
            box.append(line)
        else:
            box[-1] += " " + line.strip()
    assert [item.split("**")[1] if item.count("**") >= 2 else item for item in box] == ["Claim", "Look at", "Rerun"], (
        f"{path.name}: the box lists **Claim**, **Look at**, **Rerun**, in that order"
    )
    rerun = box[2]
    assert "launch button" in rerun and "colab.research" not in rerun, (
        f"{path.name}: Rerun names the page's launch button (Colab), no hand-typed link"
    )
    assert f"`papermill {path.relative_to(ROOT).as_posix()} " in rerun, f"{path.name}: no papermill command"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_code_lines_fit_the_page(path):
    long = [
        (index, line)
        for index, cell in enumerate(read_cells(path))
        if cell.cell_type == "code" and not HIDDEN_CODE_TAGS & set(cell.metadata.get("tags", []))
        for line in cell.source.splitlines()
        if len(line) > MAX_CODE_LINE
    ]
    assert not long, f"{path.name}: code lines over {MAX_CODE_LINE} characters (cell, line): {long}"


# ---------------------------------------------------------------------------------------------------------
# The browser check (tools/check_book.py) on constructed pages
# ---------------------------------------------------------------------------------------------------------

sys.path.insert(0, str(ROOT / "tools"))
import check_book  # noqa: E402


def test_broken_links_finds_missing_files_and_anchors(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "page.html").write_text('<h1 id="top">x</h1><a name="old">y</a>')
    (tmp_path / "other.html").write_text('<p id="here">z</p>')
    links = [
        "other.html",
        "other.html#here",
        "other.html#gone",
        "missing.html",
        "#here",
        "#top",
        "#old",
        "https://example.org/x.js",
        "mailto:a@b.c",
        "../outside.html",
        "other.html?v=1",
    ]
    (tmp_path.parent / "outside.html").write_text("")
    broken = check_book.broken_links(tmp_path / "other.html", tmp_path, links)
    assert broken == [
        "#old (no #old on other.html)",
        "#top (no #top on other.html)",
        "../outside.html (outside the book)",
        "missing.html (no such file)",
        "other.html#gone (no #gone on other.html)",
    ]
    page = tmp_path / "sub" / "page.html"
    assert check_book.broken_links(page, tmp_path, ["#top", "#old", "../other.html#here"]) == []


PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
PAGES = {
    "good.html": '<main><h1 id="t">Fine</h1><p>Plain text with a <a href="#t">link</a>.</p></main>',
    "traceback.html": '<main><div class="cell_output"><pre>Traceback (most recent call last):\n'
    '  File "x"\nZeroDivisionError: division by zero</pre></div></main>',
    "image.html": '<main><img src="missing.png"></main>',
    "mathless.html": '<main><span class="math notranslate nohighlight">\\(x^2\\)</span></main>',
    "raw.html": "<main><p>A formula left as text: $$x^2$$</p></main>",
    "links.html": '<main><a href="nowhere.html">a</a> <a href="good.html#missing">b</a></main>',
    "remote.html": '<main><img src="https://example.invalid/badge.svg"></main>',
    "wide.html": '<main><div class="bd-article-container" style="width:600px"><table><tr>'
    '<td style="min-width:900px">a wide cell</td></tr></table></div></main>',
    "title.html": '<main><table class="claims-table"><tbody><tr><td>' + "a claim's whole statement " * 5 + "</td>"
    "</tr></tbody></table></main>",
    "book/reproduction.html": '<main><div style="height:1500px">results text</div><div class="cell_output">'
    f'<img src="data:image/png;base64,{PIXEL}"></div></main>',
}


@pytest.mark.skipif(
    not (shutil.which("chromium") and shutil.which("chromedriver")),
    reason="needs Debian's chromium and chromium-driver (make check-book installs them)",
)
def test_check_book_flags_each_problem(tmp_path, capsys):
    (tmp_path / "book").mkdir()
    for name, body in PAGES.items():
        (tmp_path / name).write_text(f"<!DOCTYPE html><html><head><title>t</title></head><body>{body}</body></html>")
    assert check_book.main([str(tmp_path), "--screenshots", str(tmp_path / "shots")]) == 1
    report = capsys.readouterr().out
    verdicts = dict(
        line.split()[::-1] for line in report.splitlines() if line.startswith(("ok", "FAIL")) and len(line.split()) == 2
    )
    assert verdicts == {"good.html": "ok", **{name: "FAIL" for name in PAGES if name != "good.html"}}
    for expected in [
        "error on the page: output cell: Traceback",
        "image failed to load or is empty: missing.png",
        "the page has math but loads no MathJax",
        "raw TeX left in the text: A formula left as text",
        "broken link: nowhere.html (no such file)",
        "broken link: good.html#missing (no #missing",
        "loads from another host: img https://example.invalid/badge.svg",
        "FAIL loads from another host: remote.html: https://example.invalid/badge.svg",
        'wider than the content column at 1280 px: table starting "a wide cell" is 9',
        "claims-table first column over 100 characters: a claim's whole statement",
        "the first figure at 15",
    ]:
        assert expected in report
    assert len(list((tmp_path / "shots").glob("*.png"))) == len(PAGES)
    good = '<main><div style="height:900px">text</div><div class="cell_output"><img src="data:image/png;base64,'
    (tmp_path / "book" / "reproduction.html").write_text(f'<html><body>{good}{PIXEL}"></div></main></body></html>')
    driver = check_book.make_driver()
    try:  # a figure within a screen and a half of the top is fine
        assert check_book.check_page(driver, (tmp_path / "book" / "reproduction.html").resolve(), tmp_path, None) == []
    finally:
        driver.quit()


# ---------------------------------------------------------------------------------------------------------
# The Sphinx extension (tools/book_sphinx.py): summary pages always fresh, read last
# ---------------------------------------------------------------------------------------------------------


def test_summary_pages_are_read_last_and_always_executed():
    import book_sphinx  # imported where used: it imports jupyter_server (seconds of every worker's collection)

    docnames = [
        "book/intro",
        "book/reproduction",
        "notebooks/01_incompatibility",
        "book/performance",
        "notebooks/05_traps",
    ]
    book_sphinx.summaries_read_last(None, None, docnames)
    assert docnames == [
        "book/intro",
        "notebooks/01_incompatibility",
        "notebooks/05_traps",
        "book/reproduction",
        "book/performance",
    ]

    class Env:
        found_docs = {"book/intro", *book_sphinx.SUMMARY_DOCS}

    assert book_sphinx.summaries_always_outdated(None, Env(), set(), set(), set()) == list(book_sphinx.SUMMARY_DOCS)

    source = [json.dumps({"cells": [], "metadata": {"kernelspec": {"name": "python3"}}})]
    book_sphinx.summaries_always_execute(None, "book/reproduction", source)
    metadata = json.loads(source[0])["metadata"]
    assert metadata["mystnb"] == {"execution_mode": "force"} and metadata["kernelspec"] == {"name": "python3"}
    other = [json.dumps({"cells": [], "metadata": {}})]
    book_sphinx.summaries_always_execute(None, "notebooks/quick_tour", other)
    assert json.loads(other[0])["metadata"] == {}


def test_static_scan_finds_remote_scripts_styles_and_fonts(tmp_path):
    (tmp_path / "_static").mkdir()
    (tmp_path / "a.html").write_text(
        '<script src="https://cdn.example.org/m.js"></script>'
        '<link rel="stylesheet" href="//fonts.example.org/css">'
        '<link rel="canonical" href="https://example.org/a.html">'
        '<a href="https://example.org">a link is not a load</a>'
        '<script src="_static/local.js"></script>'
    )
    (tmp_path / "_static" / "s.css").write_text(
        "/* see https://example.org */ "
        '@font-face {src: url("https://f.example.org/x.woff")}'
        " .x {background: url(img/local.png)}"
    )
    assert check_book.remote_loads(tmp_path) == [
        "_static/s.css: https://f.example.org/x.woff",
        "a.html: https://cdn.example.org/m.js",
        "a.html: //fonts.example.org/css",
    ]
