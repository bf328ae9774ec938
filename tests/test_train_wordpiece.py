"""``train_wordpiece`` with the ``pmi`` score against a plain Python implementation of the HF
course's form of WordPiece (merge the pair maximising freq(ab) / (freq(a) · freq(b))), plus
the API's edges. The ``likelihood`` score is checked by brute force in
``test_wordpiece_likelihood.py``, the default ``frequency`` score against HF's trainer in
``parity/test_wordpiece_parity.py``."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

import pytest
from tokenizers.normalizers import BertNormalizer
from tokenizers.pre_tokenizers import BertPreTokenizer

import tokpipe
from tests.conftest import CORPORA
from tokpipe.errors import CorpusError, InvalidArgumentError

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def reference_wordpiece(lines: list[str], vocab_size: int, min_frequency: int = 2,
                        limit_alphabet: int = 1000) -> list[str]:
    """The vocabulary in id order, recomputing every score at every step.

    Conventions this implementation and tokpipe share (the paper leaves them open): words come
    from BERT's normalizer and pre-tokenizer (HF's, here); special tokens first, then the
    alphabet (the ``limit_alphabet`` most frequent characters, ties to the smaller code point)
    by code point, then ``##`` + each character seen inside a word, by code point; a tie in
    score goes to the more frequent pair, then to the smaller (left id, right id).
    """
    normalizer, pre = BertNormalizer(lowercase=True), BertPreTokenizer()
    words: Counter[str] = Counter()
    for line in lines:
        for word, _ in pre.pre_tokenize_str(normalizer.normalize_str(line)):
            words[word] += 1
    chars: Counter[str] = Counter()
    for word, n in words.items():
        for c in word:
            chars[c] += n
    alphabet = sorted(chars, key=lambda c: (-chars[c], c))[:limit_alphabet]
    vocab = list(SPECIALS)
    vocab += [c for c in sorted(alphabet) if c not in vocab]
    inner = sorted({c for word in words for c in word[1:]})
    vocab += [f"##{c}" for c in inner if c in vocab and f"##{c}" not in vocab]
    ids = {t: i for i, t in enumerate(vocab)}
    splits = {word: [c if i == 0 else f"##{c}" for i, c in enumerate(word) if c in ids] for word in words}
    while len(vocab) < vocab_size:
        unit: Counter[str] = Counter()
        pairs: Counter[tuple[str, str]] = Counter()
        for word, n in words.items():
            split = splits[word]
            for t in split:
                unit[t] += n
            for pair in zip(split, split[1:]):
                pairs[pair] += n
        candidates = [(pair, count) for pair, count in pairs.items() if count >= max(min_frequency, 1)]
        if not candidates:
            break
        (a, b), _ = max(candidates, key=lambda pc: (Fraction(pc[1], unit[pc[0][0]] * unit[pc[0][1]]), pc[1],
                                                     -ids[pc[0][0]], -ids[pc[0][1]]))
        new = a + b.removeprefix("##")
        if new not in ids:
            ids[new] = len(vocab)
            vocab.append(new)
        for word, split in splits.items():
            merged, i = [], 0
            while i < len(split):
                if i + 1 < len(split) and split[i] == a and split[i + 1] == b:
                    merged.append(new)
                    i += 2
                else:
                    merged.append(split[i])
                    i += 1
            splits[word] = merged
    return vocab


def _lines(name: str, n: int) -> list[str]:
    return (CORPORA / "text" / name).read_text(encoding="utf-8").splitlines()[:n]


@pytest.mark.parametrize(("name", "n", "merges", "min_frequency"), [
    ("botchan.txt", 1200, 250, 2),
    ("tinyshakespeare.txt", 800, 200, 1),
    ("wagahaiwa_nekodearu.txt", 150, 150, 2),
])
def test_pmi_score_equals_the_reference(name: str, n: int, merges: int, min_frequency: int) -> None:
    lines = _lines(name, n)
    base = len(reference_wordpiece(lines, 0, min_frequency))
    expected = reference_wordpiece(lines, base + merges, min_frequency)
    tok = tokpipe.train_wordpiece(texts=lines, vocab_size=base + merges, min_frequency=min_frequency,
                                  score="pmi", show_progress=False)
    assert [tok.id_to_token(i) for i in range(tok.vocab_size)] == expected


def test_pmi_and_likelihood_differ_from_frequency() -> None:
    lines = _lines("botchan.txt", 1200)
    by_frequency = tokpipe.train_wordpiece(texts=lines, vocab_size=600, score="frequency", show_progress=False)
    words = "the boy was a good sort of fellow, but rather unpleasant"
    for score in ("likelihood", "pmi"):
        other = tokpipe.train_wordpiece(texts=lines, vocab_size=600, score=score, show_progress=False)
        assert other.encode(words) != by_frequency.encode(words), score


def test_trained_tokenizer_round_trips_through_tokenizer_json(tmp_path) -> None:
    tok = tokpipe.train_wordpiece(texts=_lines("botchan.txt", 500), vocab_size=400, show_progress=False)
    tok.save(tmp_path / "t.json")
    again = tokpipe.Tokenizer.from_file(tmp_path / "t.json")
    text = "I was a mischievous boy."
    assert again.encode(text) == tok.encode(text)
    assert tok.encode(text, add_special_tokens=True)[0] == tok.token_to_id("[CLS]")
    assert tok.special_tokens == {t: SPECIALS.index(t) for t in SPECIALS}


def test_bad_arguments() -> None:
    with pytest.raises(InvalidArgumentError, match="unknown token"):
        tokpipe.train_wordpiece(texts=["a b"], special_tokens=["[PAD]"], show_progress=False)
    with pytest.raises(InvalidArgumentError, match="score"):
        tokpipe.train_wordpiece(texts=["a b"], score="bogus", show_progress=False)
    with pytest.raises(CorpusError):
        tokpipe.train_wordpiece(texts=[], show_progress=False)
    with pytest.raises(TypeError):
        tokpipe.train_wordpiece(["x.txt"], texts=["a"], show_progress=False)
