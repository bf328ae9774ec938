"""The Unigram trainer (``_core.UnigramTrainer``) against sentencepiece's own trainer.

Both train on the same NFKC-normalized sentences of the shared corpora (sentencepiece with the
identity normalization rule, so neither changes the text further); the trained pieces are
loaded into sentencepiece's ``SentencePieceProcessor`` (``tokpipe._unigram_eval``) and both
models segment held-out sentences: ours may not be more than 1% worse, by tokens per byte or
by average log-likelihood per sentence.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import unicodedata
from collections import Counter
from pathlib import Path

import pytest
import scipy.special
import sentencepiece as spm

from tests.conftest import CORPORA
from tokpipe import CorpusError, InvalidArgumentError, _core
from tokpipe import _unigram_eval as ev

TEXT = CORPORA / "text"

# (name, files, vocab_size, character_coverage)
CASES = [
    ("botchan", [TEXT / "botchan.txt"], 1000, 1.0),
    ("wagahaiwa", [TEXT / "wagahaiwa_nekodearu.txt"], 4000, 0.9995),
    ("zh_notes", sorted((TEXT / "zh_notes").glob("*.txt")), 2000, 0.9995),
]

# Ours may trail sentencepiece's model by this much on a quality measure.
TOLERANCE = 0.01


def sentences(files: list[Path]) -> list[str]:
    """Every non-empty line, NFKC-normalized, runs of whitespace made one space."""
    out = []
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            line = " ".join(unicodedata.normalize("NFKC", line).split())
            if line:
                out.append(line)
    assert len(out) > 1000 or "zh_notes" in str(files[0]), files
    return out


def split(lines: list[str]) -> tuple[list[str], list[str]]:
    """Every tenth sentence held out."""
    return [s for i, s in enumerate(lines) if i % 10], [s for i, s in enumerate(lines) if i % 10 == 0]


def train_spm(lines: list[str], **options) -> spm.SentencePieceProcessor:
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, model_type="unigram",
                                   normalization_rule_name="identity", num_threads=2, minloglevel=2, **options)
    return ev.processor(model.getvalue())


def train_ours(lines: list[str], vocab_size: int, **options) -> dict:
    trainer = _core.UnigramTrainer(vocab_size, **options)
    trainer.feed(["\n".join(lines)])
    return trainer.train()


MAX_SENTENCE_BYTES = 4192  # sentencepiece's max_sentence_length: longer sentences are skipped


def required_chars(lines: list[str], coverage: float) -> set[str]:
    """The published rule, in Python: characters of the escaped sentences by falling count
    (ties to the smaller code point) until they cover ``coverage`` of all."""
    counts = Counter()
    for s in lines:
        if len(s.encode("utf-8")) <= MAX_SENTENCE_BYTES:
            counts.update("\u2581" + s.replace(" ", "\u2581"))
    total = sum(counts.values())
    covered, out = 0, set()
    for c, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if covered / total >= coverage:
            break
        covered += n
        out.add(c)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name,files,vocab_size,coverage", CASES, ids=[c[0] for c in CASES])
def test_quality_matches_sentencepiece(name, files, vocab_size, coverage) -> None:
    train, held_out = split(sentences(files))
    ref = train_spm(train, vocab_size=vocab_size, character_coverage=coverage)
    trained = train_ours(train, vocab_size, character_coverage=coverage)
    pieces = [p for p, _, _ in trained["pieces"]]
    assert len(pieces) == vocab_size == ref.get_piece_size()
    assert len(set(pieces)) == vocab_size
    # The layout of sentencepiece's defaults: <unk>, <s>, </s>, then pieces by falling score.
    assert [(p, k) for p, _, k in trained["pieces"][:3]] == [
        (ref.id_to_piece(i), "unknown" if i == 0 else "control") for i in range(3)]
    scores = [s for _, s, _ in trained["pieces"][3:]]
    assert scores == sorted(scores, reverse=True)

    required = required_chars(train, coverage)
    assert required <= set(pieces), sorted(required - set(pieces))[:20]
    # Single characters are exactly the required ones, as in sentencepiece's vocabulary.
    singles = {p for p in pieces[3:] if len(p) == 1}
    assert singles == required
    assert singles == {ref.id_to_piece(i) for i in range(3, vocab_size) if len(ref.id_to_piece(i)) == 1}

    want = ev.quality(ref, held_out)
    got = ev.quality(ev.processor(ev.spm_model_bytes(trained)), held_out)
    assert got["sentences"] == want["sentences"] > 100
    assert got["unknown"] == want["unknown"], "the same characters are unknown to both"
    assert got["tokens_per_byte"] <= want["tokens_per_byte"] * (1 + TOLERANCE), (got, want)
    # Log-likelihoods are negative: ours may be at most 1% lower.
    assert got["log_likelihood"] >= want["log_likelihood"] * (1 + TOLERANCE), (got, want)


def test_m_step_is_the_digamma_update() -> None:
    """sentencepiece's Bayesian M-step (drop expected counts under 0.5, score
    digamma(c) - digamma(sum of kept c)) computed with scipy, on word counts of real text
    scaled to fractional expected counts."""
    counts = Counter(" ".join(sentences([TEXT / "botchan.txt"])).split())
    expected = [n * f for n, f in zip(sorted(counts.values()), [0.1, 0.37, 0.5, 0.9, 1.7] * len(counts))]
    assert any(c < 0.5 for c in expected) and any(c >= 0.5 for c in expected)
    kept = [c for c in expected if c >= 0.5]
    log_sum = scipy.special.digamma(sum(kept))
    got = _core._unigram_m_step(expected)
    assert len(got) == len(expected)
    for c, g in zip(expected, got):
        if c < 0.5:
            assert g is None
        else:
            want = scipy.special.digamma(c) - log_sum
            assert g == pytest.approx(want, rel=1e-12, abs=1e-12)


_THREADS_SCRIPT = """
import json, sys
from tokpipe import _core
lines = json.load(open(sys.argv[1], encoding="utf-8"))
t = _core.UnigramTrainer(3000, character_coverage=0.9995)
t.feed(lines)
print(json.dumps(t.train()["pieces"]))
"""


@pytest.mark.slow
def test_same_pieces_for_one_and_two_threads(tmp_path: Path) -> None:
    lines = sentences([TEXT / "wagahaiwa_nekodearu.txt", TEXT / "botchan.txt"])
    data = tmp_path / "lines.json"
    data.write_text(json.dumps(lines), encoding="utf-8")
    runs = []
    for threads in (1, 2):
        env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
        out = subprocess.run([sys.executable, "-c", _THREADS_SCRIPT, str(data)], env=env, check=True,
                             capture_output=True, text=True, encoding="utf-8")
        runs.append(json.loads(out.stdout))
    assert len(runs[0]) == 3000
    assert runs[0] == runs[1]


def test_files_and_texts_give_the_same_pieces(tmp_path: Path) -> None:
    lines = sentences([TEXT / "botchan.txt"])
    path = tmp_path / "botchan.txt"
    path.write_text("".join(s + "\n" for s in lines), encoding="utf-8")
    from_files = _core.UnigramTrainer(800)
    report = from_files.feed_files([str(path)])
    assert report["documents"] == len(lines)
    assert from_files.train()["pieces"] == train_ours(lines, 800)["pieces"]


def test_meta_pieces_byte_fallback_and_user_symbols_as_sentencepiece_lays_them_out() -> None:
    lines = split(sentences([TEXT / "botchan.txt"]))[0]
    options = dict(user_defined_symbols=["<sep>", "<mask>"], control_symbols=["<cls>"], byte_fallback=True,
                   unk_id=2, bos_id=0, eos_id=-1, pad_id=1)
    ref = train_spm(lines, vocab_size=1200, character_coverage=1.0, **options)
    trained = train_ours(lines, 1200, character_coverage=1.0, **options)
    sp = ev.processor(ev.spm_model_bytes(trained))
    meta = [i for i in range(1200) if not ref.is_unknown(i) and (ref.is_control(i) or ref.is_byte(i)
                                                                 or ref.id_to_piece(i) in ("<sep>", "<mask>"))]
    meta.append(ref.unk_id())
    for i in sorted(meta):
        assert trained["pieces"][i][0] == ref.id_to_piece(i), i
        assert (sp.is_control(i), sp.is_byte(i), sp.is_unknown(i)) == (
            ref.is_control(i), ref.is_byte(i), ref.is_unknown(i)), i
    assert len(meta) == 3 + 256 + 2 + 1  # <s>, <pad>, <cls>; bytes; two user symbols; <unk>
    # A user-defined symbol comes out whole; an unseen character as its UTF-8 bytes.
    text = "Botchan<sep>said \u6f22"
    assert sp.encode(text, out_type=str) .count("<sep>") == 1
    assert sp.encode(text, out_type=str)[-3:] == ["<0xE6>", "<0xBC>", "<0xA2>"]
    assert ref.encode(text, out_type=str)[-3:] == ["<0xE6>", "<0xBC>", "<0xA2>"]


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    lines = sentences([TEXT / "wagahaiwa_nekodearu.txt"])
    with pytest.raises(InvalidArgumentError, match="required characters"):
        train_ours(lines, 500, character_coverage=0.9995)
    with pytest.raises(CorpusError, match="empty"):
        _core.UnigramTrainer(100).train()
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    t = _core.UnigramTrainer(100)
    t.feed_files([str(empty)])
    with pytest.raises(CorpusError):
        t.train()
    with pytest.raises(InvalidArgumentError, match="too large for this corpus"):
        train_ours(lines[:20], 5000)
    with pytest.raises(InvalidArgumentError, match="character_coverage"):
        _core.UnigramTrainer(100, character_coverage=0.5)
    with pytest.raises(InvalidArgumentError, match="given twice"):
        _core.UnigramTrainer(100, user_defined_symbols=["<x>", "<x>"])
    with pytest.raises(InvalidArgumentError, match="unk_id"):
        _core.UnigramTrainer(100, unk_id=-1)
    with pytest.raises(FileNotFoundError):
        _core.UnigramTrainer(100).feed_files([str(tmp_path / "missing.txt")])
    trainer = _core.UnigramTrainer(300)
    trainer.feed(sentences([TEXT / "botchan.txt"]))
    trainer.train()
    with pytest.raises(RuntimeError, match="already trained"):
        trainer.train()
