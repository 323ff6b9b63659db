"""The offline eval corpus: every shipped paragraph becomes searchable, pages merge by title."""

from __future__ import annotations


import orjson
from typer.testing import CliRunner

from deepresearcher.cli.main import app
from deepresearcher.data import load_benchmark
from deepresearcher.eval.corpus import build_eval_corpus, wiki_url
from deepresearcher.web.backends.local import LocalIndex


def test_wiki_url():
    assert wiki_url("Ed Wood (film)") == "https://en.wikipedia.org/wiki/Ed_Wood_(film)"
    assert wiki_url("Małgorzata Braunek") == "https://en.wikipedia.org/wiki/Ma%C5%82gorzata_Braunek"


def test_missing_data_dir_is_a_clear_error(tmp_path):
    result = CliRunner().invoke(app, ["eval-corpus", "--out", str(tmp_path / "c"), "--data-dir", str(tmp_path / "no")])
    assert result.exit_code != 0 and "DEEPRESEARCHER_DATA_DIR" in str(result.exception)


def test_supporting_paragraphs_are_found_by_search(tmp_path, shared_data_dir):
    """For real dev questions, the supporting paragraph's page is retrievable and holds its text."""
    report = build_eval_corpus(tmp_path / "corpus", shared_data_dir)
    assert report.pages > 20_000 and "wikipedia_vital_l4_en/summaries_en-us.json" in report.sources
    urls = [orjson.loads(line)["url"] for line in report.corpus_path.read_bytes().splitlines()]
    assert len(urls) == len(set(urls)), "one page per title"
    index = LocalIndex(report.index_dir)
    assert index.num_docs == report.pages
    for name, split in (("hotpotqa", "distractor_dev"), ("2wiki", "flashrag_dev"), ("musique", "flashrag_dev")):
        task = load_benchmark(name, split, limit=1, data_dir=shared_data_dir)[0]
        support = next(p for p in task.context if p.supporting)
        page = index.get_page(wiki_url(support.title))
        assert page is not None and support.text[:80] in page.text
        hits = index.search(support.title, top_k=10)
        assert wiki_url(support.title) in [h.url for h in hits]
