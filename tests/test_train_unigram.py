"""``tokpipe.train_unigram`` against sentencepiece's own trainer and processor, and HF ``tokenizers``.

Both trainers read the same raw lines of the shared corpora and normalize them themselves (the
same rule, ``nmt_nfkc`` unless said otherwise). What we check:

- the ``.model`` we save is the one sentencepiece writes for the same options (trainer spec,
  normalizer spec with its precompiled charsmap, piece layout), and loads in
  ``SentencePieceProcessor`` with the ids and decoded text of our tokenizer on every shared
  document; saved as ``tokenizer.json`` it loads in HF ``tokenizers`` with the same ids;
- quality on held-out lines, each model segmenting with sentencepiece's processor: ours may
  not be more than 1% worse than sentencepiece's, by tokens per byte or by log-likelihood;
- the same ``.model`` for 1 and 2 threads, for files and ``texts=``, and bad input refused or
  counted as the other trainers do.
"""

from __future__ import annotations

import functools
import io
import json
import math
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as pb
from tokenizers import Tokenizer as HfTokenizer

import tokpipe
from tests import unigram_eval as ev
from tests.conftest import CORPORA, REPO
from tokpipe import CorpusError, CorpusReport, InvalidArgumentError, _core

TEXT = CORPORA / "text"
BOTCHAN = TEXT / "botchan.txt"
WAGAHAIWA = TEXT / "wagahaiwa_nekodearu.txt"
ZH = sorted((TEXT / "zh_notes").glob("*.txt"))

# Ours may trail sentencepiece's model by this much on a quality measure.
TOLERANCE = 0.01

# sentencepiece's option names for ours where they differ.
SPM_NAMES = {"max_piece_length": "max_sentencepiece_length", "seed_size": "seed_sentencepiece_size",
             "normalization": "normalization_rule_name"}


def raw_lines(files: list[Path]) -> list[str]:
    """Every non-empty line as it is in the files (each trainer normalizes for itself)."""
    return [line for path in files for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def split(lines: list[str]) -> tuple[list[str], list[str]]:
    """Every tenth line held out."""
    return [s for i, s in enumerate(lines) if i % 10], [s for i, s in enumerate(lines) if i % 10 == 0]


def train_spm(lines: list[str], **options: object) -> bytes:
    """sentencepiece's model for our options (only those given, as ours writes only those)."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, model_type="unigram",
                                   num_threads=2, minloglevel=2,
                                   **{SPM_NAMES.get(k, k): v for k, v in options.items()})
    return model.getvalue()


def train_ours(lines: list[str], **options: object) -> tokpipe.Tokenizer:
    return tokpipe.train_unigram(texts=lines, show_progress=False, **options)  # type: ignore[arg-type]


def proto(model: bytes) -> pb.ModelProto:
    m = pb.ModelProto()
    m.ParseFromString(model)
    return m


# (name, files, options): the models checked against sentencepiece's processor and HF.
USER_DEFINED = ["<sep>", "[MASK]", "@@", "日本", "New York"]
TRAINED = {
    "default": ([BOTCHAN], dict(vocab_size=1000)),
    "bytes_user_defined": ([BOTCHAN, WAGAHAIWA], dict(vocab_size=3000, byte_fallback=True,
                                                      user_defined_symbols=USER_DEFINED, control_symbols=["<ctl>"])),
    "japanese": ([WAGAHAIWA], dict(vocab_size=4000, character_coverage=0.9995)),
}


@functools.lru_cache(maxsize=None)
def trained(name: str) -> tokpipe.Tokenizer:
    files, options = TRAINED[name]
    return tokpipe.train_unigram(files, show_progress=False, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", TRAINED)
def test_saved_model_gives_sentencepiece_ids_on_every_document(name: str, tmp_path: Path,
                                                                documents: list[tuple[str, str]]) -> None:
    ours = trained(name)
    path = tmp_path / f"{name}.model"
    ours.save_sentencepiece(path)
    sp = spm.SentencePieceProcessor(model_file=str(path))
    assert sp.get_piece_size() == ours.vocab_size == TRAINED[name][1]["vocab_size"]
    for doc_name, text in documents:
        ids = ours.encode(text)
        assert ids == sp.encode(text), doc_name
        assert ours.decode(ids) == sp.decode(ids), doc_name
    # Loaded back, it is the same model, byte for byte.
    assert tokpipe.Tokenizer.from_sentencepiece(path).sentencepiece_bytes() == path.read_bytes()


def _score(sp: spm.SentencePieceProcessor, ids: list[int]) -> float:
    return sum(sp.get_score(i) for i in ids)


@pytest.mark.parametrize("name", TRAINED)
def test_saved_tokenizer_json_gives_the_same_ids_in_hf(name: str, tmp_path: Path,
                                                       documents: list[tuple[str, str]]) -> None:
    ours = trained(name)
    path = tmp_path / f"{name}.json"
    ours.save(path)
    hf = HfTokenizer.from_file(str(path))
    reloaded = tokpipe.Tokenizer.from_file(path)
    for doc_name, text in documents:
        assert reloaded.encode(text, allowed_special="all") == hf.encode(text, add_special_tokens=False).ids, doc_name
    # Line by line against the trained tokenizer (sentencepiece's rules): the same ids, or a
    # segmentation scoring exactly as well (runs like "-----" tie, and sentencepiece and HF
    # break ties apart). Whole books differ in more places: HF sums scores in f64 per word,
    # sentencepiece in f32 over the text, and near-ties fall differently.
    sp = spm.SentencePieceProcessor(model_proto=ours.sentencepiece_bytes())
    lines = [line for _, text in documents for line in text.splitlines()]
    same = 0
    for line, ids, hf_enc in zip(lines, ours.encode_batch(lines), hf.encode_batch(lines, add_special_tokens=False)):
        if ids == hf_enc.ids:
            same += 1
        else:
            assert math.isclose(_score(sp, ids), _score(sp, hf_enc.ids), rel_tol=1e-9), line
    assert same > 0.999 * len(lines)
    # <s> … </s> on request, in HF too.
    assert hf.encode("Botchan").ids == ours.encode("Botchan", add_special_tokens=True)


# Options besides the defaults, spelled as ours; each case is trained by both and the two
# .model files compared field by field.
SPEC_CASES = [
    dict(vocab_size=1500),
    dict(vocab_size=1600, normalization="nfkc", character_coverage=1.0, byte_fallback=True, pad_id=3),
    dict(vocab_size=1400, normalization="nmt_nfkc_cf", add_dummy_prefix=False, split_by_whitespace=False,
         user_defined_symbols=["<sep>", "<mask>"], control_symbols=["<cls>"], unk_id=2, bos_id=0, eos_id=-1,
         pad_id=1),
    dict(vocab_size=1500, normalization="nfkc_cf", remove_extra_whitespaces=False, split_digits=True,
         split_by_number=False, split_by_unicode_script=False, max_piece_length=8, shrinking_factor=0.8,
         num_sub_iterations=3, seed_size=200_000, max_sentence_length=2000),
    dict(vocab_size=1500, normalization="identity", unk_piece="[UNK]", bos_piece="[BOS]", eos_piece="[EOS]",
         pad_piece="[PAD]", pad_id=3),
]


@pytest.mark.parametrize("options", SPEC_CASES, ids=[c.get("normalization", "nmt_nfkc") for c in SPEC_CASES])
def test_model_file_is_laid_out_as_sentencepiece_writes_it(options: dict) -> None:
    lines = raw_lines([BOTCHAN]) + raw_lines([WAGAHAIWA])[:60]
    ref = proto(train_spm(lines, **options))
    ours = proto(train_ours(lines, **options).sentencepiece_bytes())
    # The normalizer spec whole, precompiled charsmap included: the embedded blob of the rule
    # is the one the installed sentencepiece compiles in.
    assert ours.normalizer_spec.SerializeToString() == ref.normalizer_spec.SerializeToString()
    ref.trainer_spec.ClearField("num_threads")  # the model is the same for any thread count
    assert ours.trainer_spec == ref.trainer_spec
    assert not ours.HasField("denormalizer_spec") and not ref.HasField("denormalizer_spec")
    # Meta pieces at sentencepiece's ids with its types; normal pieces with a score and no type.
    meta = [(p.piece, p.type) for p in ref.pieces if p.type != pb.ModelProto.SentencePiece.NORMAL]
    assert [(p.piece, p.type) for p in ours.pieces if p.type != pb.ModelProto.SentencePiece.NORMAL] == meta
    for a, b in zip(ours.pieces, ref.pieces):
        assert a.type == b.type and a.HasField("type") == b.HasField("type") and a.HasField("score")
        if a.type != pb.ModelProto.SentencePiece.NORMAL:
            assert (a.piece, a.score) == (b.piece, 0.0)
    assert len(ours.pieces) == len(ref.pieces) == options["vocab_size"]


def test_embedded_charsmaps_are_regenerated_alike() -> None:
    # The generator rebuilds each rule's charsmap with the installed sentencepiece and compares
    # it with the committed file that the crate embeds.
    script = REPO / "scripts" / "gen_spm_charsmaps.py"
    result = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


# (name, files, vocab_size, character_coverage)
QUALITY_CASES = [
    ("botchan", [BOTCHAN], 1000, 1.0),
    ("wagahaiwa", [WAGAHAIWA], 4000, 0.9995),
    ("zh_notes", ZH, 2000, 0.9995),
]

MAX_SENTENCE_BYTES = 4192  # sentencepiece's max_sentence_length: longer sentences are skipped


def required_chars(sp: spm.SentencePieceProcessor, lines: list[str], coverage: float) -> set[str]:
    """The published rule, in Python, over sentencepiece's own normalization of the lines:
    characters by falling count (ties to the smaller code point) until they cover
    ``coverage`` of all."""
    counts: Counter[str] = Counter()
    for s in lines:
        if len(s.encode("utf-8")) <= MAX_SENTENCE_BYTES:
            counts.update(sp.normalize(s))
    total = sum(counts.values())
    covered, out = 0, set()
    for c, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if covered / total >= coverage:
            break
        covered += n
        out.add(c)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name,files,vocab_size,coverage", QUALITY_CASES, ids=[c[0] for c in QUALITY_CASES])
def test_quality_matches_sentencepiece(name: str, files: list[Path], vocab_size: int, coverage: float) -> None:
    train, held_out = split(raw_lines(files))
    assert len(train) > 1000 or name == "zh_notes"
    ref = ev.processor(train_spm(train, vocab_size=vocab_size, character_coverage=coverage))
    tok = train_ours(train, vocab_size=vocab_size, character_coverage=coverage)
    ours = ev.processor(tok.sentencepiece_bytes())
    pieces = [ours.id_to_piece(i) for i in range(ours.get_piece_size())]
    assert len(pieces) == vocab_size == ref.get_piece_size()
    assert len(set(pieces)) == vocab_size
    # The layout of sentencepiece's defaults: <unk>, <s>, </s>, then pieces by falling score.
    assert pieces[:3] == [ref.id_to_piece(i) for i in range(3)] == ["<unk>", "<s>", "</s>"]
    scores = [ours.get_score(i) for i in range(3, vocab_size)]
    assert scores == sorted(scores, reverse=True)

    required = required_chars(ref, train, coverage)
    assert required <= set(pieces), sorted(required - set(pieces))[:20]
    # Single characters are exactly the required ones, as in sentencepiece's vocabulary.
    singles = {p for p in pieces[3:] if len(p) == 1}
    assert singles == required
    assert singles == {ref.id_to_piece(i) for i in range(3, vocab_size) if len(ref.id_to_piece(i)) == 1}

    want = ev.quality(ref, held_out)
    got = ev.quality(ours, held_out)
    assert got["sentences"] == want["sentences"] > 100
    assert got["unknown"] == want["unknown"], "the same characters are unknown to both"
    assert got["tokens_per_byte"] <= want["tokens_per_byte"] * (1 + TOLERANCE), (got, want)
    # Log-likelihoods are negative: ours may be at most 1% lower.
    assert got["log_likelihood"] >= want["log_likelihood"] * (1 + TOLERANCE), (got, want)


def test_m_step_reference_is_scipys() -> None:
    """sentencepiece's Bayesian M-step (drop expected counts under 0.5, score
    digamma(c) - digamma(sum of kept c)) is checked in Rust against values scipy computed
    (``em::tests::m_step_matches_scipy``); the generator recomputes them with the installed
    scipy and compares them with the committed file."""
    script = REPO / "scripts" / "gen_unigram_m_step_reference.py"
    result = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


_THREADS_SCRIPT = """
import sys, tokpipe
tok = tokpipe.train_unigram(sys.argv[1:-1], vocab_size=6000, byte_fallback=True, show_progress=False)
tok.save_sentencepiece(sys.argv[-1])
"""


@pytest.mark.slow
def test_same_model_file_for_one_and_two_threads(tmp_path: Path) -> None:
    runs = []
    for threads in (1, 2):
        out = tmp_path / f"t{threads}.model"
        env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
        subprocess.run([sys.executable, "-c", _THREADS_SCRIPT, str(WAGAHAIWA), str(BOTCHAN), *map(str, ZH), str(out)],
                       env=env, check=True)
        runs.append(out.read_bytes())
    assert len(proto(runs[0]).pieces) == 6000
    assert runs[0] == runs[1]


def train_small(**kwargs: object) -> tuple[tokpipe.Tokenizer, CorpusReport]:
    report: list[CorpusReport] = []
    tok = tokpipe.train_unigram(**{"vocab_size": 500, "show_progress": False, **kwargs}, report=report)  # type: ignore[arg-type]
    return tok, report[0]


def test_files_and_texts_give_the_same_model(tmp_path: Path) -> None:
    lines = raw_lines([BOTCHAN])
    path = tmp_path / "botchan.txt"
    path.write_text("".join(s + "\n" for s in lines), encoding="utf-8")
    from_files, report = train_small(files=path)
    assert report.documents == len(lines)
    from_texts, _ = train_small(texts=lines)
    assert from_files.sentencepiece_bytes() == from_texts.sentencepiece_bytes()
    # A text of many lines is those lines, one sentence each.
    assert train_small(texts=["\n".join(lines)])[0].sentencepiece_bytes() == from_texts.sentencepiece_bytes()


def test_invalid_utf8_is_replaced_and_counted(tmp_path: Path) -> None:
    prose = BOTCHAN.read_text(encoding="utf-8")[:60_000]
    raw = prose.encode() + b"\nbad \xff\xfe bytes\ncut \xe3\x81 short\xc3\n"
    path = tmp_path / "bad.txt"
    path.write_bytes(raw)
    tok, report = train_small(files=path)
    assert report.invalid_utf8_documents == 2
    reference, _ = train_small(texts=raw.decode("utf-8", errors="replace").splitlines())
    assert tok.sentencepiece_bytes() == reference.sentencepiece_bytes()
    with pytest.raises(CorpusError, match=r"bad\.txt:\d+: invalid UTF-8"):
        train_small(files=path, strict=True)


def test_jsonl_bad_records_are_set_aside_with_their_lines(tmp_path: Path) -> None:
    prose = BOTCHAN.read_text(encoding="utf-8")
    good = [prose[:30_000], prose[30_000:60_000], "短い日本語の文。"]
    rows = [json.dumps({"text": good[0], "id": 1}), "{not json", json.dumps({"text": 5}), json.dumps({"body": "x"}),
            json.dumps([1, 2]), json.dumps({"text": good[1]}), "", json.dumps({"text": good[2]}, ensure_ascii=False)]
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    tok, report = train_small(files=path)
    assert report.documents == 3
    assert report.set_aside == {"malformed_json": 2, "non_string_text_field": 1, "missing_text_field": 1}
    assert [(Path(p).name, line) for p, line, _ in report.examples] == [("docs.jsonl", n) for n in (2, 3, 4, 5)]
    assert tok.sentencepiece_bytes() == train_small(texts=good)[0].sentencepiece_bytes()


def test_skipped_sentences_are_counted_in_the_report() -> None:
    lines = raw_lines([BOTCHAN])
    long_line = "x" * 5000
    tok, report = train_small(texts=lines + [long_line, "a reserved \u2585 character", long_line])
    assert report.set_aside == {"sentence_too_long": 2, "reserved_character": 1}
    # sentencepiece skips them too: the same pieces as without them.
    assert tok.sentencepiece_bytes() == train_small(texts=lines)[0].sentencepiece_bytes()


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    lines = raw_lines([WAGAHAIWA])
    with pytest.raises(InvalidArgumentError, match="required characters"):
        train_ours(lines, vocab_size=500, character_coverage=0.9995)
    with pytest.raises(InvalidArgumentError, match="too large for this corpus"):
        train_ours(lines[:20], vocab_size=5000)
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(CorpusError):
        tokpipe.train_unigram(empty, show_progress=False)
    with pytest.raises(CorpusError):
        train_ours(["   ", "\t"], vocab_size=100)
    with pytest.raises(CorpusError):
        train_ours([], vocab_size=100)
    with pytest.raises(InvalidArgumentError, match="character_coverage"):
        train_ours(lines, character_coverage=0.5)
    with pytest.raises(InvalidArgumentError, match="given twice"):
        train_ours(lines, user_defined_symbols=["<x>", "<x>"])
    with pytest.raises(InvalidArgumentError, match="unk_id"):
        train_ours(lines, unk_id=-1)
    with pytest.raises(InvalidArgumentError, match="unknown normalization rule"):
        train_ours(lines, normalization="nfc")
    with pytest.raises(CorpusError, match="no such file"):
        tokpipe.train_unigram(tmp_path / "missing.txt", show_progress=False)
    with pytest.raises(TypeError, match="either files or texts"):
        tokpipe.train_unigram(BOTCHAN, texts=lines)
    trainer = _core.UnigramTrainer(300)
    trainer.feed(raw_lines([BOTCHAN]))
    trainer.train()
    with pytest.raises(RuntimeError, match="already trained"):
        trainer.train()
