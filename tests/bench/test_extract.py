"""bench extract's trafilatura-set loader and metric: a tiny hand-written page, not the downloaded set."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

PAGE = """<!DOCTYPE html><html><head><meta charset="windows-1252"><title>Kapitel</title></head><body>
<nav><ul><li><a href="/">Startseite</a></li><li><a href="/impressum">Impressum</a></li></ul></nav>
<main><article><h1>Kapitel 121</h1>
<p>Kapitel 121 ist endlich da, und die   Übersetzung
ist fertig. Wir haben lange daran gearbeitet, damit jede Seite stimmt.</p>
<p>Die nächsten Kapitel folgen im Laufe des Monats, sobald die Korrektur abgeschlossen ist.</p>
</article></main>
<footer><p>Kommentare schreiben</p><p>Impressum und Datenschutz</p></footer></body></html>"""


@pytest.fixture(scope="module")
def extract(load_bench):
    return load_bench("extract")


def test_counts_follow_trafilaturas_comparison(extract) -> None:
    text = "Kapitel 121 ist endlich da, und die Übersetzung\nist fertig.\nKommentare schreiben"
    with_ = ["die Übersetzung ist fertig.", "Die nächsten Kapitel folgen"]
    without = ["Kommentare schreiben", "Impressum"]
    # whitespace (line breaks, runs of spaces) is normalized on both sides before matching
    assert extract.snippet_counts(text, with_, without) == (1, 1, 1, 1)
    assert extract.snippet_counts("", with_, without) == (0, 2, 0, 2)
    scores = extract.snippet_scores(tp=3, fn=1, fp=1, tn=5)
    assert scores == {"precision": 0.75, "recall": 0.75, "f1": 0.75, "accuracy": 0.8}
    assert extract.snippet_scores(0, 0, 0, 0) == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "accuracy": 0.0}


def test_loader_reads_pages_and_both_extractors_are_scored(extract, tmp_path: Path) -> None:
    (tmp_path / "love-hina.ch.0409.html").write_bytes(PAGE.encode("cp1252"))  # not UTF-8, as two real pages
    (tmp_path / "expectations.json").write_bytes(orjson.dumps({
        "love-hina.ch.0409.html": {"url": "http://love-hina.ch/news/0409.html",
                                   "with": ["Kapitel 121 ist endlich da", "die Übersetzung ist fertig."],
                                   "without": ["Kommentare schreiben", "Impressum und Datenschutz"]},
        "missing.html": {"with": ["never loaded"], "without": []},
    }))
    pages = extract.snippet_pages(tmp_path)
    assert len(pages) == 1, "an expectation without its page is skipped"
    html, with_, without = pages[0]
    assert "Übersetzung" in html and with_[1] == "die Übersetzung ist fertig." and len(without) == 2

    result = extract.compare_snippets(pages)
    assert (result["pages"], result["sentences_with"], result["sentences_without"]) == (1, 2, 2)
    for extractor in ("resiliparse", "trafilatura"):
        row = result["extractors"][extractor]
        counts = (row["true_positives"], row["false_negatives"], row["false_positives"], row["true_negatives"])
        assert counts == (2, 0, 0, 2), (extractor, row)
        assert row["f1"] == row["accuracy"] == 1.0 and row["ms_per_page_median"] >= 0


def test_set_folder_is_the_flag_then_the_data_dir_then_the_user_cache(extract, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("DEEPRESEARCHER_DATA_DIR", str(tmp_path / "data"))
    assert extract.snippets_folder(tmp_path / "given") == tmp_path / "given"
    assert extract.snippets_folder(None) == tmp_path / "cache" / "deepresearcher" / "trafilatura-eval"
    (tmp_path / "data" / "trafilatura-eval").mkdir(parents=True)
    (tmp_path / "data" / "trafilatura-eval" / "expectations.json").write_text("{}")
    assert extract.snippets_folder(None) == tmp_path / "data" / "trafilatura-eval"
