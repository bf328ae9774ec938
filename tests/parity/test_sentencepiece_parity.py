"""Identical ids to ``sentencepiece.SentencePieceProcessor`` for sentencepiece ``.model`` files:
the two shared Unigram models and models trained by sentencepiece here (byte fallback,
user-defined symbols, other normalization rules), on every shared corpus document and on
generated text; n-best lists; decoding; and ``.model`` files written by us, which sentencepiece
loads and encodes alike."""

from __future__ import annotations

import functools
import io
import math
from pathlib import Path

import pytest
import sentencepiece as spm
from hypothesis import given, settings
from hypothesis import strategies as st

import tokpipe
from tests.conftest import CORPORA, VOCAB
from tests.parity.peers import TRAINED, USER_DEFINED, trained

MODELS = ["spm_botchan_unigram_1000.model", "spm_ja_unigram_8000.model"]


@functools.lru_cache(maxsize=None)
def sp(name: str) -> spm.SentencePieceProcessor:
    return spm.SentencePieceProcessor(model_file=str(VOCAB / name))


@functools.lru_cache(maxsize=None)
def ours(name: str) -> tokpipe.Tokenizer:
    return tokpipe.Tokenizer.from_sentencepiece(VOCAB / name)


# Characters that exercise the normalizer and the unknown-character paths: odd whitespace
# (NBSP, ideographic space, line separators, tabs), control characters, scripts neither model
# knows, emoji (with a skin-tone modifier and a ZWJ sequence), combining marks, and full-width
# and compatibility forms that NFKC folds.
ODD = list(
    " \t\n\r\x0b\x0c\u00a0\u2002\u3000\u2028\u200b\ufeff\x00\x01\x1b\x7f\x85"
    "\u13a0\u1200\u0f40\u0531\u2c80"
    "\U0001f600\U0001f44d\U0001f3fd\u200d\U0001f469\U0001f4bb"
    "\u0301\u0308\u0323\u20dd"
    "\uff21\uff41\uff11\uff01\u3231\u2460\ufb01\u2122\u00bd\u212b\u2126\u1e9b"
    "aeinostTh.,'-!?()0123456789"
    "日本語のテキストかなカナ漢字中文简体繁體。、「」ー"
)


@pytest.mark.parametrize("name", MODELS)
def test_every_document_encodes_like_sentencepiece(name: str, documents: list[tuple[str, str]]) -> None:
    kinds = {n.split(":")[0].split("#")[0].rsplit(".", 1)[-1] for n, _ in documents}
    assert {"txt", "gz"} <= kinds  # text files, CC JSONL and WARC records
    for doc_name, text in documents:
        assert ours(name).encode(text) == sp(name).encode(text), doc_name


@pytest.mark.parametrize("name", MODELS)
def test_every_line_encodes_like_sentencepiece(name: str) -> None:
    # Short texts: leading and trailing whitespace, empty lines, one-word lines.
    for path in sorted((CORPORA / "text").rglob("*.txt")):
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)[:3000]
        got = ours(name).encode_batch(lines, num_threads=2)
        assert got == [sp(name).encode(line) for line in lines], path.name


@pytest.mark.parametrize("name", MODELS)
@settings(max_examples=400, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(ODD), max_size=60))
def test_generated_odd_text_like_sentencepiece(name: str, text: str) -> None:
    assert ours(name).encode(text) == sp(name).encode(text)


@pytest.mark.parametrize("name", MODELS)
@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=50))
def test_any_unicode_like_sentencepiece(name: str, text: str) -> None:
    assert ours(name).encode(text) == sp(name).encode(text)


@pytest.mark.parametrize("name", MODELS)
def test_every_code_point_like_sentencepiece(name: str) -> None:
    # Each code point alone, between letters and doubled: the charsmap's every rule and the
    # unknown-character path for every script.
    points = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    texts = [" ".join(f"{c} a{c}b {c}{c}" for c in points[i:i + 256]) for i in range(0, len(points), 256)]
    got = ours(name).encode_batch(texts)
    for text, ids in zip(texts, got):
        assert ids == sp(name).encode(text), f"code points from U+{ord(text[0]):04X}"


@pytest.mark.parametrize("name", MODELS)
def test_decode_like_sentencepiece(name: str, documents: list[tuple[str, str]]) -> None:
    for doc_name, text in documents:
        ids = sp(name).encode(text)
        assert ours(name).decode(ids) == sp(name).decode(ids), doc_name


@pytest.mark.parametrize("name", MODELS)
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_decode_of_any_ids_like_sentencepiece(name: str, data: st.DataObject) -> None:
    # Any ids: control and unknown pieces anywhere, pieces starting with ▁ at the start.
    size = sp(name).get_piece_size()
    ids = data.draw(st.lists(st.one_of(st.integers(0, 5), st.integers(0, size - 1)), max_size=30))
    assert ours(name).decode(ids) == sp(name).decode(ids)


@pytest.mark.parametrize("name", MODELS)
def test_special_tokens_like_sentencepiece(name: str) -> None:
    text = "Hello <s> world </s>, 吾輩は猫である。"
    tok = ours(name)
    assert tok.encode(text) == sp(name).encode(text)
    assert tok.encode(text, add_special_tokens=True) == sp(name).encode(text, add_bos=True, add_eos=True)
    assert tok.special_tokens == {"<s>": 1, "</s>": 2}
    # Allowed, a control symbol in the text is its id (sentencepiece never does this).
    assert tok.encode("a<s>b", allowed_special="all") == tok.encode("a") + [1] + tok.encode("b")
    assert tok.model_type == "Unigram"
    assert tok.vocab_size == sp(name).get_piece_size()
    for i in range(tok.vocab_size):
        assert tok.id_to_token(i) == sp(name).id_to_piece(i)
        assert tok.token_to_id(sp(name).id_to_piece(i)) == i


def test_batches_and_arrow_equal_single_encodes(documents: list[tuple[str, str]]) -> None:
    import pyarrow as pa

    tok = ours(MODELS[1])
    texts = [text for _, text in documents]
    single = [tok.encode(t) for t in texts]
    assert tok.encode_batch(texts, num_threads=1) == single
    assert tok.encode_batch(texts, num_threads=2) == single
    assert tok.encode_arrow(pa.array(texts)).to_pylist() == single


def test_file_is_told_by_content(tmp_path: Path) -> None:
    copy = tmp_path / "model.json"  # a misleading name
    copy.write_bytes((VOCAB / MODELS[0]).read_bytes())
    tok = tokpipe.Tokenizer.from_file(copy)
    assert tok.model_type == "Unigram"
    assert tok.encode("I am a cat.") == sp(MODELS[0]).encode("I am a cat.")


def test_broken_models_are_clear_errors(tmp_path: Path) -> None:
    data = (VOCAB / MODELS[0]).read_bytes()
    bad = tmp_path / "bad.model"
    for broken in (data[:1000], data[:5] + b"\xff" * 50, b"\x0a\x02\x0a\x00"):
        bad.write_bytes(broken)
        with pytest.raises(tokpipe.FormatError, match="bad.model"):
            tokpipe.Tokenizer.from_sentencepiece(bad)
    with pytest.raises(FileNotFoundError):
        tokpipe.Tokenizer.from_sentencepiece(tmp_path / "missing.model")


# -- models trained by sentencepiece here ----------------------------------------------------

@functools.lru_cache(maxsize=None)
def trained_pair(name: str) -> tuple[spm.SentencePieceProcessor, tokpipe.Tokenizer]:
    data = trained(name)
    return spm.SentencePieceProcessor(model_proto=data), tokpipe.Tokenizer.from_sentencepiece_bytes(data)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TRAINED))
def test_trained_models_encode_and_decode_like_sentencepiece(name: str, documents: list[tuple[str, str]]) -> None:
    peer, tok = trained_pair(name)
    for doc_name, text in documents:
        ids = peer.encode(text)
        assert tok.encode(text) == ids, doc_name
        assert tok.decode(ids) == peer.decode(ids), doc_name


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TRAINED))
@settings(max_examples=200, deadline=None)
@given(parts=st.lists(st.sampled_from(ODD + USER_DEFINED + ["  ", "New  York", "▁"]), max_size=25))
def test_trained_models_on_generated_text(name: str, parts: list[str]) -> None:
    peer, tok = trained_pair(name)
    text = "".join(parts)
    ids = peer.encode(text)
    assert tok.encode(text) == ids
    assert tok.decode(ids) == peer.decode(ids)


def test_byte_fallback_and_user_defined_paths_are_exercised() -> None:
    peer, tok = trained_pair("bytes_user_defined")
    text = "Tell <sep> me [MASK] about 日本 and New York @@ \U0001f600 \u13a0\u13a1"
    ids = peer.encode(text)
    assert tok.encode(text) == ids
    pieces = [peer.id_to_piece(i) for i in ids]
    assert {"<sep>", "[MASK]", "@@", "日本"} <= set(pieces)
    assert "<0xF0>" in pieces and peer.unk_id() not in ids  # the emoji in bytes, nothing unknown
    assert tok.decode(ids) == peer.decode(ids)


# -- n-best and sampling ---------------------------------------------------------------------

def _short_texts(documents: list[tuple[str, str]], count: int) -> list[str]:
    texts = []
    for _, text in documents:
        texts += [line for line in text.splitlines() if line.strip()][:count]
    return texts


@pytest.mark.parametrize("name", MODELS)
def test_nbest_like_sentencepiece(name: str, documents: list[tuple[str, str]]) -> None:
    # Lines of every document, and n from 2 to sentencepiece's largest: ties between equal
    # scores, unknown characters, and the agenda's shrinking on long lines all happen here.
    for text in _short_texts(documents, 40):
        for n in (2, 7, 64, 512):
            assert ours(name).encode_nbest(text, n) == sp(name).nbest_encode_as_ids(text, n), (text[:60], n)
    for n in (0, 1):
        assert ours(name).encode_nbest("Hello world", n) == sp(name).nbest_encode_as_ids("Hello world", n)
    assert ours(name).encode_nbest("", 5) == sp(name).nbest_encode_as_ids("", 5) == [[]]
    with pytest.raises(tokpipe.InvalidArgumentError, match="512"):
        ours(name).encode_nbest("Hello", 513)


@pytest.mark.parametrize("name", MODELS)
def test_nbest_scores_like_sentencepiece(name: str, documents: list[tuple[str, str]]) -> None:
    for text in _short_texts(documents, 5):
        proto = sp(name).nbest_encode(text, nbest_size=20, out_type="proto")
        want = [([p.id for p in n.pieces], n.score) for n in proto.nbests]
        got = ours(name).encode_nbest(text, 20, scores=True)
        assert [ids for ids, _ in got] == [ids for ids, _ in want]
        assert [score for _, score in got] == pytest.approx([score for _, score in want], abs=1e-4)


@pytest.mark.slow
def test_nbest_of_trained_models_like_sentencepiece(documents: list[tuple[str, str]]) -> None:
    for name in ("bytes_user_defined", "nfkc_cf_no_split"):
        peer, tok = trained_pair(name)
        for text in _short_texts(documents, 10):
            assert tok.encode_nbest(text, 16) == peer.nbest_encode_as_ids(text, 16), (name, text[:60])


def _chi_square(counts: dict[tuple[int, ...], int], probs: dict[tuple[int, ...], float], draws: int) -> tuple[float, int]:
    """Pearson's statistic over the segmentations expected 5 times or more, the rest pooled."""
    big = [k for k, p in probs.items() if p * draws >= 5]
    stat = sum((counts.get(k, 0) - probs[k] * draws) ** 2 / (probs[k] * draws) for k in big)
    rest_p = 1.0 - sum(probs[k] for k in big)
    rest_n = draws - sum(counts.get(k, 0) for k in big)
    bins = len(big)
    if rest_p * draws >= 5:
        stat += (rest_n - rest_p * draws) ** 2 / (rest_p * draws)
        bins += 1
    return stat, bins - 1


def _segmentations(name: str, text: str) -> dict[tuple[int, ...], float]:
    """Every segmentation of `text` (fewer than 512) with its score, from sentencepiece."""
    proto = sp(name).nbest_encode(text, nbest_size=512, out_type="proto")
    assert len(proto.nbests) < 512, "text too long to enumerate"
    return {tuple(p.id for p in n.pieces): sum(sp(name).get_score(p.id) for p in n.pieces) for n in proto.nbests}


@pytest.mark.parametrize("text, alpha", [("hello", 0.5), ("understand", 0.2), ("mathematics", 0.1), ("I am a cat.", 0.2),
                                         ("吾輩は猫である", 0.2)])
def test_sampling_follows_exp_alpha_score(text: str, alpha: float) -> None:
    from scipy.stats import chi2

    name = MODELS[1] if "吾" in text else MODELS[0]
    scores = _segmentations(name, text)
    assert len(scores) >= 3

    def probs(a: float) -> dict[tuple[int, ...], float]:
        weights = {k: math.exp(a * s) for k, s in scores.items()}
        total = sum(weights.values())
        return {k: w / total for k, w in weights.items()}

    draws = 20000
    samples = ours(name).encode_batch_sample([text] * draws, alpha=alpha, nbest_size=-1, seed=1234)
    counts: dict[tuple[int, ...], int] = {}
    for ids in samples:
        counts[tuple(ids)] = counts.get(tuple(ids), 0) + 1
    assert set(counts) <= set(scores)
    stat, dof = _chi_square(counts, probs(alpha), draws)
    limit = chi2.ppf(1 - 1e-6, dof)
    assert stat < limit, (stat, limit)
    # The check has power: the same draws are far from the distribution of another alpha.
    wrong, wrong_dof = _chi_square(counts, probs(alpha * 2), draws)
    assert wrong > chi2.ppf(1 - 1e-6, wrong_dof)
    # sentencepiece's own sampler passes the same check.
    spm.set_random_generator_seed(99)
    theirs: dict[tuple[int, ...], int] = {}
    for _ in range(draws):
        ids = tuple(sp(name).encode(text, enable_sampling=True, alpha=alpha, nbest_size=-1))
        theirs[ids] = theirs.get(ids, 0) + 1
    assert _chi_square(theirs, probs(alpha), draws)[0] < limit


def test_nbest_sampling_draws_among_the_n_best() -> None:
    from scipy.stats import chi2

    name, text, alpha, n = MODELS[0], "understanding", 0.5, 8
    proto = sp(name).nbest_encode(text, nbest_size=n, out_type="proto")
    weights = {tuple(p.id for p in b.pieces): math.exp(alpha * b.score) for b in proto.nbests}
    total = sum(weights.values())
    probs = {k: w / total for k, w in weights.items()}
    draws = 20000
    samples = ours(name).encode_batch_sample([text] * draws, alpha=alpha, nbest_size=n, seed=7)
    counts: dict[tuple[int, ...], int] = {}
    for ids in samples:
        counts[tuple(ids)] = counts.get(tuple(ids), 0) + 1
    assert set(counts) <= set(probs)
    stat, dof = _chi_square(counts, probs, draws)
    assert stat < chi2.ppf(1 - 1e-6, dof)


def test_sampling_is_reproducible_at_any_thread_count(documents: list[tuple[str, str]]) -> None:
    tok = ours(MODELS[0])
    texts = [text[:3000] for _, text in documents]
    one = tok.encode_batch_sample(texts, alpha=0.1, nbest_size=-1, seed=42, num_threads=1)
    assert tok.encode_batch_sample(texts, alpha=0.1, nbest_size=-1, seed=42, num_threads=2) == one
    assert tok.encode_batch_sample(texts, alpha=0.1, nbest_size=-1, seed=43, num_threads=2) != one
    assert tok.encode_sample(texts[0], 0.1, -1, seed=5) == tok.encode_sample(texts[0], 0.1, -1, seed=5)
    # Every draw is a segmentation of the text: it decodes back to what the best one does.
    for text, ids in zip(texts, one):
        assert tok.decode(ids) == tok.decode(tok.encode(text))
    # nbest_size 0 or 1, or alpha that makes the best path certain, give the plain encoding.
    assert tok.encode_sample(texts[0], 0.1, 1, seed=1) == tok.encode(texts[0])
    for bad in (dict(alpha=-0.1, nbest_size=-1), dict(alpha=float("nan"), nbest_size=-1), dict(alpha=0.1, nbest_size=513)):
        with pytest.raises(tokpipe.InvalidArgumentError):
            tok.encode_sample("x", seed=1, **bad)


# -- writing .model files ---------------------------------------------------------------------

@pytest.mark.parametrize("name", MODELS)
def test_model_round_trips_byte_for_byte(name: str, tmp_path: Path) -> None:
    out = tmp_path / "copy.model"
    ours(name).save_sentencepiece(out)
    assert out.read_bytes() == (VOCAB / name).read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TRAINED))
def test_trained_models_round_trip(name: str, tmp_path: Path, documents: list[tuple[str, str]]) -> None:
    peer, tok = trained_pair(name)
    data = tok.sentencepiece_bytes()
    assert data == trained(name)
    reloaded = spm.SentencePieceProcessor(model_proto=data)
    for doc_name, text in documents[:10]:
        assert reloaded.encode(text) == peer.encode(text), doc_name


def test_written_model_keeps_unknown_fields() -> None:
    from sentencepiece import sentencepiece_model_pb2 as pb

    proto = pb.ModelProto()
    proto.ParseFromString((VOCAB / MODELS[0]).read_bytes())
    proto.trainer_spec.seed_sentencepieces_file = "kept.txt"
    proto.normalizer_spec.normalization_rule_tsv = "41\t61"
    # A field this sentencepiece does not define (from a newer version, say): unknown fields
    # survive as bytes.
    raw = proto.SerializeToString() + b"\xa2\x06\x03abc"  # field 100, length-delimited
    tok = tokpipe.Tokenizer.from_sentencepiece_bytes(raw)
    assert tok.sentencepiece_bytes() == raw
    back = pb.ModelProto()
    back.ParseFromString(tok.sentencepiece_bytes())
    assert back.trainer_spec.seed_sentencepieces_file == "kept.txt"
    assert back.normalizer_spec.normalization_rule_tsv == "41\t61"
