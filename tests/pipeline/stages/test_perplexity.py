"""perplexity: CCNet's document perplexity with kenlm as the reference, buckets from given or
sampled cutoffs, the ceiling, CCNet's normalisation, tokenizer models."""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import kenlm
import numpy as np
import pyarrow as pa
import pytest

from tests.conftest import CORPORA, VOCAB
from tokpipe import Tokenizer, train_lm
from tokpipe.errors import InvalidArgumentError
from tokpipe.pipeline.stages import registered_stages
from tokpipe.pipeline.stages.perplexity import Perplexity


def _docs() -> list[str]:
    """Documents of 1..12 lines from botchan and tinyshakespeare, blank lines and all."""
    docs = []
    for name in ("botchan.txt", "tinyshakespeare.txt"):
        lines = (CORPORA / "text" / name).read_text(encoding="utf-8").split("\n")
        i, k = 0, 0
        while i < len(lines) and len(docs) < 400 * (1 + (name != "botchan.txt")):
            size = 1 + k % 12
            docs.append("\n".join(lines[i:i + size]))
            i, k = i + size, k + 1
    return docs + ["", "\n", "one line\n"]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    text = (CORPORA / "text" / "tinyshakespeare.txt").read_text(encoding="utf-8")
    path = tmp_path_factory.mktemp("lm") / "m.arpa"
    train_lm(texts=[text[: len(text) // 2]], order=4, prune=(0, 0, 1), show_progress=False).save(path)
    return path


def batch(texts: list[str]) -> pa.RecordBatch:
    return pa.record_batch([pa.array([f"d{i}" for i in range(len(texts))]), pa.array(texts, type=pa.string())],
                           names=["id", "text"])


def ccnet_perplexity(lm: kenlm.Model, doc: str, normalize=lambda line: line) -> float:
    """cc_net/perplexity.py DocLM.do, with kenlm's word count (kenlm.Model.perplexity's
    ``len(line.encode().split())``; CCNet's ``str.split`` differs only on non-ASCII spaces)."""
    log_score, length = 0.0, 0
    for line in doc.split("\n"):
        line = normalize(line)
        log_score += lm.score(line)
        length += len(line.encode().split()) + 1
    return 10.0 ** (-log_score / length)


def test_registered_and_matches_kenlm(model: Path) -> None:
    assert registered_stages()["perplexity"] is Perplexity
    docs = _docs()
    result = Perplexity(model=str(model)).process(batch(docs))
    assert result.rejected is None
    assert "bucket" not in result.kept.schema.names
    ours = result.kept.column("perplexity").to_numpy()
    lm = kenlm.Model(str(model))
    expected = np.array([ccnet_perplexity(lm, d) for d in docs])
    np.testing.assert_allclose(ours, expected, rtol=1e-4)


def test_max_perplexity_rejects_with_the_value(model: Path) -> None:
    docs = _docs()
    stage = Perplexity(model=str(model), max_perplexity=800.0)
    result = stage.process(batch(docs))
    rejected = result.rejected
    assert rejected is not None and rejected.num_rows > 0 and result.kept.num_rows > 0
    assert set(rejected.column("reason").to_pylist()) == {"perplexity"}
    assert (rejected.column("perplexity").to_numpy() > 800.0).all()
    assert (result.kept.column("perplexity").to_numpy() <= 800.0).all()
    assert stage.stats.as_dict()["dropped_perplexity"] == rejected.num_rows


def test_buckets_from_given_cutoffs_follow_ccnet(model: Path) -> None:
    docs = _docs()
    result = Perplexity(model=str(model), cutoffs=[300.0, 700.0]).process(batch(docs))
    ppl = result.kept.column("perplexity").to_numpy()
    buckets = result.kept.column("bucket").to_pylist()
    expected = ["head" if p <= 300.0 else "middle" if p <= 700.0 else "tail" for p in ppl]
    assert buckets == expected
    assert {"head", "middle", "tail"} <= set(buckets)


def test_sampled_cutoffs_are_percentiles_and_the_same_everywhere(model: Path, tmp_path: Path) -> None:
    docs = _docs()
    sample = tmp_path / "sample.jsonl"
    sample.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs), encoding="utf-8")
    stage = Perplexity(model=str(model), sample=str(sample), sample_size=300)
    lm = kenlm.Model(str(model))
    expected = np.percentile([ccnet_perplexity(lm, d) for d in docs[:300]], [30, 60])
    assert stage.bucket_cutoffs == pytest.approx(tuple(expected), rel=1e-4)
    # Whatever the batches a worker sees, the buckets are the same.
    whole = stage.process(batch(docs)).kept.column("bucket").to_pylist()
    again = Perplexity(model=str(model), sample=str(sample), sample_size=300)
    parts = [again.process(batch(docs[i:i + 37])).kept.column("bucket").to_pylist() for i in range(0, len(docs), 37)]
    assert whole == [b for part in parts for b in part]
    counts = {b: whole[:300].count(b) for b in ("head", "middle", "tail")}
    assert 80 <= counts["head"] <= 100 and 80 <= counts["middle"] <= 100, counts


# cc_net/text_normalizer.py, normalize(line) with its defaults, transcribed.
UNICODE_PUNCT = {"，": ",", "。": ".", "、": ",", "„": '"', "”": '"', "“": '"', "«": '"', "»": '"', "１": '"',
                 "」": '"', "「": '"', "《": '"', "》": '"', "´": "'", "∶": ":", "：": ":", "？": "?", "！": "!",
                 "（": "(", "）": ")", "；": ";", "–": "-", "—": " - ", "．": ". ", "～": "~", "’": "'", "…": "...",
                 "━": "-", "〈": "<", "〉": ">", "【": "[", "】": "]", "％": "%", "►": "-"}
NON_PRINTING_CHARS_RE = re.compile(f"[{''.join(map(chr, list(range(0, 32)) + list(range(127, 160))))}]")
DIGIT_RE = re.compile(r"\d")


def ccnet_normalize(line: str) -> str:
    line = line.strip()
    if not line:
        return line
    line = line.lower()
    line = "".join(c for c in unicodedata.normalize("NFD", line) if unicodedata.category(c) != "Mn")
    line = DIGIT_RE.sub("0", line)
    line = "".join(UNICODE_PUNCT.get(c, c) for c in line)
    return NON_PRINTING_CHARS_RE.sub("", line)


def test_ccnet_normalisation(tmp_path: Path) -> None:
    ja = (CORPORA / "text" / "wagahaiwa_nekodearu.txt").read_text(encoding="utf-8").split("\n")
    en = (CORPORA / "text" / "botchan.txt").read_text(encoding="utf-8").split("\n")
    odd = ["Ça va? «Très bien» — 1,234.5 ５６ １ …\x07\x85 ＡＢ", "  İstanbul ΣΑΣ 𝟘𝟙 ٣ ½ ﬁ  ", "\t\t"]
    # Words are characters, so every normalised character is visible to the model.
    spaced = [" ".join(ccnet_normalize(line).replace(" ", "")) for line in en[:3000] + ja[:3000]]
    path = tmp_path / "n.arpa"
    train_lm(texts=["\n".join(spaced)], order=3, show_progress=False).save(path)
    from tokpipe import LanguageModel

    ours = LanguageModel.load(path)
    lm = kenlm.Model(str(path))
    for line in en[3000:3500:3] + ja[3000:4000:3] + odd:
        char_line = " ".join(line)  # spaced first, so normalisation acts on characters only
        expected = lm.score(ccnet_normalize(char_line))
        assert abs(ours.score_line(char_line, normalize=True)[0] - expected) <= 1e-4, line


def test_normalize_param_and_tokenizer_model(tmp_path: Path) -> None:
    tok_path = VOCAB / "gpt-neo-tokenizer.json"
    text = (CORPORA / "text" / "botchan.txt").read_text(encoding="utf-8")
    path = tmp_path / "t.arpa"
    train_lm(texts=[text], order=3, tokenizer=tok_path, normalize=True, show_progress=False).save(path)
    docs = _docs()[:200]
    stage = Perplexity(model=str(path), tokenizer=str(tok_path), normalize=True)
    ours = stage.process(batch(docs)).kept.column("perplexity").to_numpy()
    tok = Tokenizer.from_file(tok_path)
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    extra = [b for b in range(256) if b not in bs]
    alphabet = {b: chr(b) for b in bs} | {b: chr(256 + i) for i, b in enumerate(extra)}  # GPT-2 byte-level
    lm = kenlm.Model(str(path))
    for doc, p in zip(docs, ours):
        log_score, length = 0.0, 0
        for line in doc.split("\n"):
            ids = tok.encode(ccnet_normalize(line))
            log_score += lm.score(" ".join("".join(alphabet[b] for b in tok.token_bytes(i)) for i in ids))
            length += len(ids) + 1
        assert p == pytest.approx(10 ** (-log_score / length), rel=1e-4)


def test_bad_params_are_refused(model: Path, tmp_path: Path) -> None:
    for kw in [dict(model=str(tmp_path / "missing.arpa")), dict(model=str(model), max_perplexity=0),
               dict(model=str(model), cutoffs=[5.0]), dict(model=str(model), cutoffs=[9.0, 3.0]),
               dict(model=str(model), cutoffs=[1.0, 2.0], sample=str(model)),
               dict(model=str(model), sample=str(tmp_path / "none.jsonl")),
               dict(model=str(model), percentiles=[60, 30])]:
        with pytest.raises(InvalidArgumentError):
            Perplexity(**kw)
