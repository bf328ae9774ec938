"""language: the real English, Japanese and Chinese texts of ../shared/corpora are told apart,
the Common Crawl documents get CCNet's fastText label, keep lists and scores drop with their
reason; the fastText backend gives what fastText's own predict gives."""

from __future__ import annotations

import gzip
import json
import pickle
import sys

import numpy as np
import pyarrow as pa
import pytest

from tokpipe.errors import ConfigError, InvalidArgumentError
from tokpipe.pipeline.config import parse_config
from tokpipe.pipeline.stages.language import LanguageFilter
from tests.conftest import CORPORA


def batch(texts: list[str]) -> pa.RecordBatch:
    return pa.record_batch([pa.array(texts, type=pa.string())], names=["text"])


def corpus_files() -> list[tuple[str, str, str]]:
    """(name, expected language, text) of the text files, by the corpora README's table."""
    files = [("botchan.txt", "en"), ("tinyshakespeare.txt", "en"), ("wagahaiwa_nekodearu.txt", "ja")]
    out = [(name, lang, (CORPORA / "text" / name).read_text(encoding="utf-8")) for name, lang in files]
    notes = sorted((CORPORA / "text" / "zh_notes").glob("*.txt"))
    out += [(p.name, "zh", p.read_text(encoding="utf-8")) for p in notes]
    assert len(out) == 8
    return out


def common_crawl() -> list[tuple[str, float, str]]:
    """(CCNet's language label, its fastText score, text) of the Common Crawl documents."""
    out = []
    for path in sorted((CORPORA / "web").glob("cc_en_head-*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                record = json.loads(line)
                out.append((record["metadata"]["language"], record["metadata"]["language_score"], record["text"]))
    assert len(out) == 20
    return out


@pytest.fixture(scope="module")
def lingua_stage() -> LanguageFilter:
    return LanguageFilter(min_score=None)


def test_english_japanese_and_chinese_files(lingua_stage):
    files = corpus_files()
    languages, scores = lingua_stage.detect(pa.array([t for _, _, t in files]))
    assert languages.tolist() == [lang for _, lang, _ in files]
    assert ((scores >= 0.65) & (scores <= 1.0)).all()
    fast = LanguageFilter(min_score=None, low_accuracy=True).detect(pa.array([t for _, _, t in files]))[0]
    assert fast.tolist() == [lang for _, lang, _ in files]


def test_common_crawl_documents_get_ccnets_label(lingua_stage):
    docs = common_crawl()
    languages, scores = lingua_stage.detect(pa.array([t for _, _, t in docs]))
    assert languages.tolist() == [label for label, _, _ in docs]
    assert ((scores >= 0.0) & (scores <= 1.0)).all()


def test_keep_list_drops_the_others_with_reason():
    files = corpus_files()
    stage = LanguageFilter(languages=["en", "zh"])
    result = stage.process(batch([t for _, _, t in files]))
    assert result.kept.column("language").to_pylist() == ["en", "en"] + ["zh"] * 5
    assert result.rejected.column("language").to_pylist() == ["ja"]
    assert result.rejected.column("reason").to_pylist() == ["language"]
    assert result.rejected.schema.field("language_score").type == pa.float64()
    assert stage.stats.dropped == {"language": 1} and stage.stats.kept == 7


def test_min_score_just_inside_and_outside():
    # Short texts get Lingua confidences well inside (0, 1).
    lines = [line for line in (CORPORA / "text" / "botchan.txt").read_text(encoding="utf-8").splitlines()
             if 20 < len(line) < 40][:30]
    languages, scores = LanguageFilter(min_score=None).detect(pa.array(lines))
    partial = [(text, s) for text, s in zip(lines, scores) if 0.0 < s < 1.0]
    assert partial, "expected short lines with a confidence under 1"
    for text, score in partial[:5]:
        assert LanguageFilter(min_score=float(score)).process(batch([text])).rejected is None
        above = float(np.nextafter(score, np.inf))
        result = LanguageFilter(min_score=above).process(batch([text]))
        assert result.rejected.column("reason").to_pylist() == ["language_score"]
        assert result.rejected.column("language_score").to_pylist() == [score]


def test_scores_do_not_depend_on_the_batch():
    lines = [line for line in (CORPORA / "text" / "botchan.txt").read_text(encoding="utf-8").splitlines()
             if 20 < len(line) < 60][:40]
    stage = LanguageFilter(min_score=None)
    together = stage.detect(pa.array(lines))[1]
    one_by_one = np.concatenate([stage.detect(pa.array([line]))[1] for line in lines])
    assert together.tolist() == one_by_one.tolist()


def test_every_lingua_language_as_candidates():
    stage = LanguageFilter(candidate_languages=None, low_accuracy=True, languages=["de"])
    result = stage.process(batch(["The cat sat on the mat and looked at the garden.",
                                  "Der Hund schläft im Garten und träumt von Katzen."]))
    assert result.kept.column("language").to_pylist() == ["de"]
    assert result.rejected.column("language").to_pylist() == ["en"]


def test_no_letters_is_undetermined_and_max_chars():
    stage = LanguageFilter(languages=["en"])
    result = stage.process(pa.record_batch([pa.array(["", None, "12345 !!!"], type=pa.string())], names=["text"]))
    assert result.rejected.column("language").to_pylist() == ["und"] * 3
    assert result.rejected.column("language_score").to_pylist() == [0.0] * 3
    assert result.rejected.column("reason").to_pylist() == ["language"] * 3
    # Only the first max_chars characters are scored: an English head decides.
    mixed = "The cat sat on the mat and looked at the garden for a long time. " + "吾輩は猫である。名前はまだ無い。" * 50
    assert LanguageFilter(max_chars=60, min_score=None).detect(pa.array([mixed]))[0].tolist() == ["en"]
    assert LanguageFilter(max_chars=None, min_score=None).detect(pa.array([mixed]))[0].tolist() == ["ja"]


def test_config_errors_and_pickling(monkeypatch, tmp_path):
    assert parse_config({"stages": [{"type": "language", "languages": ["en"]}]}).to_dict()["stages"][0]["min_score"] \
        == 0.65
    with pytest.raises(ConfigError, match="no language 'xx'"):
        parse_config({"stages": [{"type": "language", "languages": ["xx"]}]})
    with pytest.raises(InvalidArgumentError):
        LanguageFilter(backend="cld3")
    with pytest.raises(InvalidArgumentError, match="model_path"):
        LanguageFilter(backend="fasttext")
    with pytest.raises(InvalidArgumentError):
        LanguageFilter(min_score=1.5)
    with pytest.raises(InvalidArgumentError):
        LanguageFilter(max_chars=0)
    copy = pickle.loads(pickle.dumps(LanguageFilter(languages=["ja"])))
    assert copy.process(batch(["吾輩は猫である。名前はまだ無い。"])).rejected is None
    monkeypatch.setitem(sys.modules, "lingua", None)  # as if it were not installed
    with pytest.raises(InvalidArgumentError, match=r"pip install 'tokpipe\[language\]'"):
        LanguageFilter()


def test_fasttext_backend_gives_fasttexts_predictions(tmp_path):
    import fasttext

    # A small fastText language-ID model trained here on lines of the three languages (no
    # download), then the stage against fastText's own predict on the same prepared texts.
    files = corpus_files()
    train = tmp_path / "train.txt"
    with open(train, "w", encoding="utf-8") as f:
        for _, lang, text in files:
            for line in text.splitlines()[:2000]:
                if line.strip():
                    f.write(f"__label__{lang} {line.strip()}\n")
    model = fasttext.train_supervised(str(train), epoch=10, minn=1, maxn=3, thread=1, seed=1, verbose=0)
    path = tmp_path / "lid.bin"
    model.save_model(str(path))

    texts = [t for _, _, t in files] + [t for _, _, t in common_crawl()] + ["", "short one"]
    stage = LanguageFilter(backend="fasttext", model_path=str(path), languages=["en", "ja"], min_score=0.5,
                           max_chars=500)
    labels, probs = model.predict([t[:500].replace("\n", " ") for t in texts], k=1)
    expected_languages = [label[0].removeprefix("__label__") for label in labels]
    expected_scores = [min(float(p[0]), 1.0) for p in probs]
    result = stage.process(batch(texts))
    out = pa.Table.from_batches([result.kept, result.rejected.drop_columns(["reason", "stage"])])
    by_text = dict(zip(out.column("text").to_pylist(), zip(out.column("language").to_pylist(),
                                                         out.column("language_score").to_pylist())))
    assert [by_text[t] for t in texts] == list(zip(expected_languages, expected_scores))
    assert expected_languages[:8] == [lang for _, lang, _ in files]
    expected_reasons = ["language" if lang not in ("en", "ja") else "language_score"
                        for lang, score in zip(expected_languages, expected_scores)
                        if lang not in ("en", "ja") or score < 0.5]
    assert result.rejected.column("reason").to_pylist() == expected_reasons


def test_in_a_pipeline_run_on_two_workers(tmp_path):
    # Worker processes are spawned: the stages travel as configs and build their detector there.
    import shutil

    from tokpipe.pipeline import open_dataset, run

    corpus = tmp_path / "in"
    corpus.mkdir()
    for name, _, _ in corpus_files():
        src = CORPORA / "text" / name if (CORPORA / "text" / name).exists() else CORPORA / "text" / "zh_notes" / name
        shutil.copy(src, corpus / name)
    config = {"stages": [{"type": "text_stats", "min_words": 1},
                         {"type": "blocklist", "words": ["吾輩"], "word_boundaries": False, "max_per_1000_words": 1},
                         {"type": "language", "languages": ["zh"]}]}
    run([corpus], tmp_path / "out", config=config, workers=2)
    kept = open_dataset(tmp_path / "out").to_table()
    rejected = open_dataset(tmp_path / "out", rejected=True).to_table().sort_by("reason")
    assert kept.num_rows == 5 and set(kept.column("language").to_pylist()) == {"zh"}
    assert rejected.column("reason").to_pylist() == ["blocklist", "language", "language"]
    assert kept.schema.field("stat_words").type == pa.float64()
