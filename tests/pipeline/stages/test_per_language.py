"""``language: auto``: per-document language rules for ``gopher_quality``,
``gopher_repetition``, ``fineweb_quality``, ``c4_quality``, ``text_stats`` and ``perplexity``.

The reference is the stage itself with one fixed language, run on one document at a time (the
fixed-language stages are checked against datatrove and kenlm in their own tests): on a mixed
corpus of the shared Common Crawl documents and the shared English, Chinese and Japanese texts,
labelled by the ``language`` stage, each document's verdict under ``auto`` must be the verdict
of the stage configured with that document's language."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from tests.conftest import CORPORA, VOCAB
from tokpipe import train_lm
from tokpipe.errors import ConfigError, ConfigWarning, InvalidArgumentError
from tokpipe.pipeline.config import parse_config
from tokpipe.pipeline.stages import (C4Quality, FineWebQuality, GopherQuality, GopherRepetition, LanguageFilter,
                                     Perplexity, TextStats)


def _chunks(text: str, size: int, count: int, step: int = 1) -> list[str]:
    """``count`` documents of about ``size`` characters, whole paragraphs (blank-line separated)
    each, taking every ``step``-th."""
    out, current = [], ""
    for paragraph in text.split("\n\n"):
        current = f"{current}\n\n{paragraph}" if current else paragraph
        if len(current) >= size:
            out.append(current)
            current = ""
    return out[::step][:count]


def mixed_texts() -> list[str]:
    """Common Crawl (English), Chinese notes (whole and cut), Japanese and English novel
    chunks, and a few documents with no language a detector can find."""
    texts = []
    for path in sorted((CORPORA / "web").glob("cc_en_head-*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            texts += [json.loads(line)["text"] for line in f if line.strip()]
    for path in sorted((CORPORA / "text" / "zh_notes").glob("*.txt")):
        note = path.read_text(encoding="utf-8")
        texts += [note] + _chunks(note, 1500, 3)
    japanese = (CORPORA / "text" / "wagahaiwa_nekodearu.txt").read_text(encoding="utf-8")
    # The novel's lines are paragraphs: cut it at newlines into chunks of a few hundred characters.
    texts += _chunks(japanese.replace("\n", "\n\n"), 800, 14, step=20)
    texts += _chunks((CORPORA / "text" / "botchan.txt").read_text(encoding="utf-8"), 2000, 4, step=9)
    texts += ["", "1234 5678 90", "#### ---- ####"]
    return texts


@pytest.fixture(scope="module")
def corpus() -> pa.RecordBatch:
    """The mixed corpus after the ``language`` stage (nothing dropped), plus two documents
    whose ``language`` is null."""
    texts = mixed_texts()
    batch = pa.record_batch([pa.array([f"d{i}" for i in range(len(texts))]), pa.array(texts, type=pa.string())],
                            names=["id", "text"])
    labelled = LanguageFilter(min_score=None).process(batch).kept
    extra = pa.record_batch([pa.array(["n0", "n1"]), pa.array([texts[0], texts[25]]),
                             pa.array([None, None], pa.string()), pa.array([0.0, 0.0])], schema=labelled.schema)
    corpus = pa.Table.from_batches([labelled, extra]).combine_chunks().to_batches()[0]
    languages = corpus.column("language").to_pylist()
    # The corpus is mixed as meant: the detector found the three languages and some others.
    assert languages.count("zh") >= 15 and languages.count("ja") >= 12 and languages.count("en") >= 20
    assert "und" in languages and None in languages
    return corpus


def _verdicts(stage: Any, batch: pa.RecordBatch) -> tuple[list[str], list[str | None]]:
    """(reason per row, "" when kept; the text of the kept rows, None for the dropped) of a
    stage run on ``batch``, in the batch's row order (rows are found by ``id``)."""
    result = stage.process(batch)
    reasons = {i: "" for i in result.kept.column("id").to_pylist()}
    texts: dict[str, str | None] = dict(zip(result.kept.column("id").to_pylist(),
                                            result.kept.column("text").to_pylist()))
    if result.rejected is not None:
        for i, reason in zip(result.rejected.column("id").to_pylist(), result.rejected.column("reason").to_pylist()):
            reasons[i], texts[i] = reason, None
    ids = batch.column("id").to_pylist()
    return [reasons[i] for i in ids], [texts[i] for i in ids]


def _alone(make: Any, batch: pa.RecordBatch, language: str | None) -> tuple[str, str | None]:
    """The verdict of the fixed stage ``make(language)`` on a batch of one document (a stage
    that does not judge it: kept as it is)."""
    stage = make(language)
    if stage is None:
        return "", batch.column("text")[0].as_py()
    reasons, texts = _verdicts(stage, batch)
    return reasons[0], texts[0]


# stage class, top-level parameters, languages, default_language (None: unjudged), and the
# fixed stage a document of a language gets.
CASES = {
    "gopher_quality": (GopherQuality, {"min_doc_words": 40}, {"zh": {"min_stop_words": 1}, "ja": {}}, "en"),
    "gopher_repetition": (GopherRepetition, {"dup_line_frac": 0.2}, {"zh": {}, "ja": {"dup_para_frac": 0.25}}, "en"),
    "fineweb_quality": (FineWebQuality, {}, {"zh": {}, "ja": {"short_line_thr": 0.9}}, "en"),
    "fineweb_quality_zh_default": (FineWebQuality, {"line_punct_thr": 0.05}, {"en": {}}, "zh"),
    "c4_quality": (C4Quality, {}, {"en": {"min_num_sentences": 3}}, None),
    "c4_quality_en_default": (C4Quality, {"min_words_per_line": 2}, {}, "en"),
}


def _fixed(cls: type, common: dict[str, Any], tables: dict[str, Any], default: str | None):
    def make(language: str | None) -> Any:
        if language in tables:
            return cls(**tables[language], language=language)
        return cls(**common, language=default) if default is not None else None
    return make


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_document_gets_its_languages_verdict(corpus: pa.RecordBatch, case: str) -> None:
    cls, common, tables, default = CASES[case]
    stage = cls(**common, language="auto", languages=tables, default_language=default)
    reasons, texts = _verdicts(stage, corpus)
    make = _fixed(cls, common, tables, default)
    languages = corpus.column("language").to_pylist()
    expected = [_alone(make, corpus.slice(i, 1), languages[i]) for i in range(corpus.num_rows)]
    assert reasons == [r for r, _ in expected]
    assert texts == [t for _, t in expected]  # c4_quality rewrites the kept documents' text
    assert any(reasons) and not all(reasons)  # the rules decide something on this corpus
    # The same however the documents are cut into batches.
    cut = [_verdicts(stage, corpus.slice(start, 7)) for start in range(0, corpus.num_rows, 7)]
    assert [r for part in cut for r in part[0]] == reasons
    # Stats: the documents each rule set judged and kept.
    extra = stage.stats.extra
    for language in tables:
        judged = [i for i, code in enumerate(languages) if code == language]
        assert extra[f"judged_{language}"] == 2 * len(judged)  # the whole corpus, then its cuts
        assert extra[f"kept_{language}"] == 2 * sum(reasons[i] == "" for i in judged)
    others = sum(code not in tables for code in languages)
    assert extra["judged_default" if default else "not_judged"] == 2 * others


def test_text_stats_thresholds_per_language(corpus: pa.RecordBatch) -> None:
    common = {"max_words": 700, "max_hash_word_ratio": 0.05}
    tables = {"zh": {"min_words": 600}, "ja": {"max_sentence_length_mean": 30.0, "min_sentences": 8}}
    stage = TextStats(**common, language="auto", languages=tables)
    reasons, _ = _verdicts(stage, corpus)
    languages = corpus.column("language").to_pylist()
    expected = [_alone(lambda code: TextStats(**tables.get(code, common)), corpus.slice(i, 1), code)[0]
                for i, code in enumerate(languages)]
    assert reasons == expected
    assert {"words", "sentence_length_mean"} <= set(reasons)
    # The features are the same columns as without auto, on kept and rejected rows alike.
    result = stage.process(corpus)
    plain = TextStats().process(corpus).kept
    ours = pa.concat_tables([pa.Table.from_batches([result.kept]),
                             pa.Table.from_batches([result.rejected]).drop_columns(["reason", "stage"])]).sort_by("id")
    expected_words = pa.Table.from_batches([plain]).sort_by("id").column("stat_words").to_pylist()
    assert ours.column("stat_words").to_pylist() == expected_words


def test_chinese_and_japanese_are_no_longer_judged_by_english_rules(corpus: pa.RecordBatch) -> None:
    languages = np.array(corpus.column("language").to_pylist(), dtype=object)
    cjk = np.flatnonzero((languages == "zh") | (languages == "ja"))
    part = corpus.take(pa.array(cjk))
    for cls in (GopherQuality, FineWebQuality):
        english, _ = _verdicts(cls(), part)
        auto, _ = _verdicts(cls(language="auto", languages={"zh": {}, "ja": {}}), part)
        changed = [i for i in range(len(cjk)) if english[i] != auto[i]]
        # English words make a Chinese or Japanese paragraph a handful of long "words".
        assert changed, cls.name
        assert sum(r == "" for r in auto) > sum(r == "" for r in english), cls.name
    # By English rules a run of Han or kana is one word: too long on average.
    english, _ = _verdicts(GopherQuality(), part)
    auto, _ = _verdicts(GopherQuality(language="auto", languages={"zh": {}, "ja": {}}), part)
    assert any(e == "gopher_above_avg_threshold" and a == "" for e, a in zip(english, auto))


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("lms")
    texts = {"en": (CORPORA / "text" / "botchan.txt").read_text(encoding="utf-8")[:120_000],
             "ja": (CORPORA / "text" / "wagahaiwa_nekodearu.txt").read_text(encoding="utf-8")[:120_000]}
    # Japanese has no spaces: its model's words are a Japanese sentencepiece model's pieces.
    tokenizers = {"en": None, "ja": str(VOCAB / "spm_ja_unigram_8000.model")}
    out = {"ja_tokenizer": Path(tokenizers["ja"])}
    for code, text in texts.items():
        out[code] = folder / f"{code}.arpa"
        lm = train_lm(texts=[text], order=3, prune=(0, 0, 1), tokenizer=tokenizers[code], show_progress=False)
        lm.save(out[code])
    return out


def test_perplexity_scores_with_each_languages_model(corpus: pa.RecordBatch, models: dict[str, Path]) -> None:
    ja = {"model": str(models["ja"]), "tokenizer": str(models["ja_tokenizer"]), "cutoffs": [30.0, 120.0],
          "max_perplexity": 150.0}
    stage = Perplexity(model=str(models["en"]), language="auto", languages={"ja": ja})
    result = stage.process(corpus)
    assert result.rejected is not None and set(result.rejected.column("reason").to_pylist()) == {"perplexity"}
    table = pa.concat_tables([pa.Table.from_batches([result.kept]),
                              pa.Table.from_batches([result.rejected]).drop_columns(["reason", "stage"])])
    by_id = {r["id"]: r for r in table.to_pylist()}
    en_stage, ja_stage = Perplexity(model=str(models["en"])), Perplexity(**ja)
    for i, (doc_id, code) in enumerate(zip(corpus.column("id").to_pylist(), corpus.column("language").to_pylist())):
        alone = (ja_stage if code == "ja" else en_stage).process(corpus.slice(i, 1))
        row = (alone.kept if alone.kept.num_rows else alone.rejected).to_pylist()[0]
        assert by_id[doc_id]["perplexity"] == pytest.approx(row["perplexity"], rel=1e-12)
        # Buckets from the Japanese model's cutoffs; the English model has none: null.
        assert by_id[doc_id]["bucket"] == row.get("bucket")
        assert (doc_id in result.rejected.column("id").to_pylist()) == (code == "ja" and row["perplexity"] > 150.0)
    assert stage.stats.extra["judged_ja"] == corpus.column("language").to_pylist().count("ja")


def test_perplexity_without_a_default_model_keeps_and_counts(corpus: pa.RecordBatch, models: dict[str, Path]) -> None:
    ja = {"model": str(models["ja"]), "tokenizer": str(models["ja_tokenizer"]), "max_perplexity": 1.0}
    stage = Perplexity(language="auto", languages={"ja": ja})
    result = stage.process(corpus)
    languages = corpus.column("language").to_pylist()
    others = sum(code != "ja" for code in languages)
    assert result.kept.num_rows == others  # every Japanese document is above the ceiling
    assert result.kept.column("perplexity").null_count == others
    assert "bucket" not in result.kept.schema.names
    assert stage.stats.extra["not_judged"] == others
    assert stage.stats.extra["judged_ja"] == languages.count("ja") and stage.stats.extra["kept_ja"] == 0


def _config_error(stage: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config({"stages": [{"type": "language"}, stage]})
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("name", ["gopher_quality", "gopher_repetition", "fineweb_quality", "c4_quality",
                                  "text_stats", "perplexity"])
def test_bad_tables_fail_when_the_config_is_read(name: str, models: dict[str, Path]) -> None:
    model = {"model": str(models["en"])} if name == "perplexity" else {}
    known = "en" if name == "c4_quality" else "zh"
    assert "languages: 'xx' is not a language code" in _config_error(
        {"type": name, "language": "auto", "languages": {"xx": {}}, **model})
    assert f"languages.{known}: no parameter 'min_stopwords'" in _config_error(
        {"type": name, "language": "auto", "languages": {known: {"min_stopwords": 1}}, **model})
    fixed = {} if name in ("text_stats", "perplexity") else {"language": "en"}
    assert "languages (per-language parameters) needs language: auto" in _config_error(
        {"type": name, **fixed, "languages": {known: {}}, **model})


def test_more_bad_input() -> None:
    # A language the stage has no rules for, where the rules need the language's words.
    assert "no built-in rules for 'de' (this stage has rules for en, zh, ja)" in _config_error(
        {"type": "gopher_quality", "language": "auto", "languages": {"de": {}}})
    assert "no built-in rules for 'zh' (this stage has rules for en)" in _config_error(
        {"type": "c4_quality", "language": "auto", "languages": {"zh": {}}})
    # text_stats has no language-specific rules: any language code may have thresholds, among
    # them every label of fastText's lid.176 (sh, Serbo-Croatian, is no longer ISO 639-1).
    parse_config({"stages": [{"type": "language"},
                             {"type": "text_stats", "language": "auto",
                              "languages": {"de": {"min_words": 5}, "sh": {"min_words": 5}, "ceb": {}}}]})
    assert "languages.zh: min_stop_words must be an integer, 'auto' or null, got 'x'" in _config_error(
        {"type": "gopher_quality", "language": "auto", "languages": {"zh": {"min_stop_words": "x"}}})
    assert "languages.zh: no parameter 'language'" in _config_error(
        {"type": "gopher_quality", "language": "auto", "languages": {"zh": {"language": "ja"}}})
    assert "default_language is for language: auto" in _config_error(
        {"type": "fineweb_quality", "default_language": "zh"})
    assert "default_language must be one of en, zh, ja, not 'de'" in _config_error(
        {"type": "gopher_quality", "language": "auto", "default_language": "de"})
    assert "language must be one of en, zh, ja or auto, not 'de'" in _config_error(
        {"type": "gopher_repetition", "language": "de"})
    assert "languages.ja: perplexity: give model" in _config_error(
        {"type": "perplexity", "language": "auto", "languages": {"ja": {}}})
    assert "perplexity: give model" in _config_error({"type": "perplexity"})
    # Without a top-level model nothing would read these: refused, not silently ignored.
    for option in ({"max_perplexity": 100.0}, {"normalize": True}):
        assert "max_perplexity and normalize are the top-level model's: give model" in _config_error(
            {"type": "perplexity", "language": "auto", **option})
    assert "languages must be a mapping of strings to mappings or nulls" in _config_error(
        {"type": "text_stats", "language": "auto", "languages": {"zh": 5}})


def test_auto_without_a_language_column() -> None:
    # A warning when the config is read (the input may carry the column)...
    with pytest.warns(ConfigWarning, match="no `language` stage comes before"):
        parse_config({"stages": [{"type": "gopher_quality", "language": "auto"}]})
    # ...and an error naming the column when a batch comes without it.
    batch = pa.record_batch([pa.array(["the cat sat on the mat"])], names=["text"])
    for stage in (GopherQuality(language="auto"), C4Quality(language="auto"), TextStats(language="auto")):
        with pytest.raises(InvalidArgumentError, match="language: auto reads the `language` column, which the "
                                                       "documents lack: run the `language` stage first"):
            stage.process(batch)
    numbers = pa.record_batch([pa.array(["a"]), pa.array([1])], names=["text", "language"])
    with pytest.raises(InvalidArgumentError, match="the `language` column holds int64"):
        GopherQuality(language="auto").process(numbers)


def test_an_input_language_column_null_on_every_row(tmp_path: Path) -> None:
    """A JSON Lines file whose own ``language`` is null on every line is read as a null-typed
    column: those documents are null languages, judged by the default rules (not an error)."""
    from tokpipe.pipeline import open_dataset, run

    short = "A cat sat on a mat."  # too few words for gopher_quality, whatever the language
    long = " ".join(["Researchers have studied the behaviour of domestic animals for many years, and the "
                     "results show that cats prefer quiet places with plenty of sunlight."] * 5)
    corpus = tmp_path / "in"
    corpus.mkdir()
    with open(corpus / "unlabelled.jsonl", "w", encoding="utf-8") as f:
        for i, text in enumerate([long, short]):
            f.write(json.dumps({"id": f"u{i}", "text": text, "language": None}) + "\n")
    config = {"stages": [{"type": "gopher_quality", "language": "auto", "languages": {"zh": {}}}]}
    with pytest.warns(ConfigWarning):
        summary = run([corpus], tmp_path / "out", config=config, workers=1)
    assert open_dataset(tmp_path / "out").to_table().column("id").to_pylist() == ["u0"]
    assert open_dataset(tmp_path / "out", rejected=True).to_table().column("reason").to_pylist() == [
        "gopher_short_doc"]
    assert summary.stats["gopher_quality"].extra["judged_default"] == 2


def test_print_config_shows_the_options() -> None:
    # `tokpipe clean --print-config` prints this: every stage with every parameter.
    config = parse_config({"stages": [{"type": "language"}, {"type": "gopher_quality"}, {"type": "gopher_repetition"},
                                      {"type": "fineweb_quality"}, {"type": "c4_quality"}, {"type": "text_stats"},
                                      {"type": "perplexity", "language": "auto"}]}).to_dict()["stages"]
    for stage in config[1:5]:
        assert (stage["language"], stage["languages"], stage["default_language"]) == ("en", None, "en"), stage["type"]
    for stage in config[5:]:
        assert stage["languages"] is None and "default_language" not in stage, stage["type"]
    assert config[5]["language"] is None and config[6]["language"] == "auto" and config[6]["model"] is None


def test_an_empty_batch(models: dict[str, Path]) -> None:
    empty = pa.record_batch([pa.array([], pa.string()), pa.array([], pa.string()), pa.array([], pa.string())],
                            names=["id", "text", "language"])
    for stage in (GopherQuality(language="auto"), GopherRepetition(language="auto"), FineWebQuality(language="auto"),
                  C4Quality(language="auto"), TextStats(language="auto", max_words=3),
                  Perplexity(model=str(models["en"]), language="auto")):
        result = stage.process(empty)
        assert result.kept.num_rows == 0 and not result.rejected, stage.name
        assert result.kept.schema.field("text").type == pa.string(), stage.name


def test_fixed_language_configs_are_unchanged() -> None:
    # Without auto a stage has no rule sets and counts nothing new.
    stage = GopherQuality(language="zh")
    batch = pa.record_batch([pa.array(["i0"]), pa.array(["我是猫。" * 30])], names=["id", "text"])
    stage.process(batch)
    assert not stage.stats.extra


def test_in_a_pipeline_run_on_two_workers(tmp_path: Path) -> None:
    from tokpipe.pipeline import open_dataset, run

    corpus = tmp_path / "in"
    corpus.mkdir()
    texts = mixed_texts()
    with open(corpus / "docs.jsonl", "w", encoding="utf-8") as f:
        for i, text in enumerate(texts):
            f.write(json.dumps({"id": f"d{i}", "text": text}, ensure_ascii=False) + "\n")
    config = {"stages": [{"type": "language", "min_score": None},
                         {"type": "gopher_quality", "language": "auto", "languages": {"zh": {}, "ja": {}}}]}
    summary = run([corpus], tmp_path / "out", config=config, workers=2)
    kept = open_dataset(tmp_path / "out").to_table()
    rejected = open_dataset(tmp_path / "out", rejected=True).to_table()
    assert kept.num_rows + rejected.num_rows == len(texts)
    # The same verdicts as the stage on the whole corpus in one process.
    labelled = LanguageFilter(min_score=None).process(
        pa.record_batch([pa.array([f"d{i}" for i in range(len(texts))]), pa.array(texts)], names=["id", "text"])).kept
    reasons, _ = _verdicts(GopherQuality(language="auto", languages={"zh": {}, "ja": {}}), labelled)
    assert sorted(kept.column("id").to_pylist()) == sorted(i for i, r in zip(labelled.column("id").to_pylist(), reasons)
                                                             if r == "")
    # The counts of every worker add up, in the run's stats and manifest.
    extra = summary.stats["gopher_quality"].extra
    languages = labelled.column("language").to_pylist()
    assert extra["judged_zh"] == languages.count("zh") and extra["judged_ja"] == languages.count("ja")
    assert extra["judged_default"] == len(texts) - languages.count("zh") - languages.count("ja")
    assert extra["kept_zh"] + extra["kept_ja"] + extra["kept_default"] == kept.num_rows
