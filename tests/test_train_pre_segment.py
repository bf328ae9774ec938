"""``pre_segment="jieba"`` of ``train_bpe`` and ``train_unigram`` on the shared Chinese notes.

What we check, each against jieba called directly here (not through :mod:`tokpipe.presegment`):

- with the option no learned token or piece crosses a jieba word boundary between two Han
  characters, and without it some do (so the check can fail);
- BPE learns only inside the whole text's regex pre-tokens split at the cuts (gpt2, cl100k and
  o200k, tiktoken's regexes as the peer): with o200k, segments fed as texts of their own would not;
- the text is not changed: the trained tokenizers encode raw text without jieba, round-trip,
  and load in HF ``tokenizers`` and ``sentencepiece`` with the same ids;
- reading files gives the tokenizer ``texts=`` gives; a bad value, WordPiece, and a missing jieba
  are one-line errors before any work.
"""

from __future__ import annotations

import functools
import re
import sys
from pathlib import Path

import jieba
import pytest
import regex
import sentencepiece as spm
import tokenizers

import tokpipe
from tests.conftest import CORPORA
from tests.parity.peers import tiktoken_encoding
from tokpipe import InvalidArgumentError
from tokpipe.presegment import Segmenter

ZH_NOTES = CORPORA / "text" / "zh_notes"
# The CJK Unified Ideographs block: all the Han characters of the notes.
HAN_RUN = re.compile("[\u4e00-\u9fff]+")


@functools.cache
def notes() -> dict[str, list[str]]:
    """Each note's non-empty lines (the documents the trainers see in a text file)."""
    files = sorted(ZH_NOTES.glob("*.txt"))
    assert len(files) == 5
    return {f.name: [line for line in f.read_text(encoding="utf-8").split("\n") if line] for f in files}


def training_lines() -> list[str]:
    # 004 is held out; 000 and 002 are near-duplicates, both kept for training.
    return [line for name, lines in notes().items() if not name.startswith("004") for line in lines]


def held_out_lines() -> list[str]:
    return next(lines for name, lines in notes().items() if name.startswith("004"))


@functools.cache
def jieba_words() -> tuple[str, ...]:
    """Every jieba word of every Han run of the training lines, as jieba gives it."""
    return tuple(word for line in training_lines() for run in HAN_RUN.findall(line) for word in jieba.cut(run))


def jieba_segments(line: str) -> list[str]:
    """``line`` split at each jieba word boundary that falls inside a Han run."""
    cuts = []
    for run in HAN_RUN.finditer(line):
        at = run.start()
        for word in jieba.cut(run.group()):
            at += len(word)
            cuts.append(at)
        cuts.pop()  # the run's end is no cut between two Han characters
    bounds = [0, *cuts, len(line)]
    return [line[a:b] for a, b in zip(bounds, bounds[1:])]


def crossing_bpe_tokens(tok: tokpipe.Tokenizer) -> list[bytes]:
    """Learned tokens whose bytes occur in no jieba segment of the training text: only across
    a boundary, so learned there."""
    segments = b"\x00".join(seg.encode() for line in training_lines() for seg in jieba_segments(line))
    learned = (tok.token_bytes(i) for i in range(tok.vocab_size))
    return [t for t in learned if t is not None and len(t) > 1 and t not in segments]


def crossing_unigram_pieces(tok: tokpipe.Tokenizer) -> list[str]:
    """Pieces of two or more Han characters (a leading ▁ aside) found inside no jieba word."""
    words = "\x00".join(jieba_words())
    pieces = (tok.id_to_token(i) or "" for i in range(tok.vocab_size))
    han = [p.lstrip("\u2581") for p in pieces]
    return [p for p in han if len(p) > 1 and HAN_RUN.fullmatch(p) and p not in words]


@functools.cache
def bpe(pre_segment: str | None) -> tokpipe.Tokenizer:
    return tokpipe.train_bpe(texts=training_lines(), vocab_size=1500, special_tokens=(), pre_segment=pre_segment,
                             show_progress=False)


@functools.cache
def unigram(pre_segment: str | None) -> tokpipe.Tokenizer:
    return tokpipe.train_unigram(texts=training_lines(), vocab_size=3000, pre_segment=pre_segment,
                                 show_progress=False)


def test_no_bpe_token_crosses_a_jieba_boundary() -> None:
    assert crossing_bpe_tokens(bpe(None)), "character-level BPE learns tokens across words (the check works)"
    assert crossing_bpe_tokens(bpe("jieba")) == []


def test_no_unigram_piece_crosses_a_jieba_boundary() -> None:
    assert crossing_unigram_pieces(unigram(None)), "character-level Unigram learns pieces across words"
    assert crossing_unigram_pieces(unigram("jieba")) == []
    # No ▁ appears where the text had none: the jieba-trained model's pieces that start with ▁
    # are a subset of what the text offers after a space or at a line start.
    starts = {p for p in (unigram("jieba").id_to_token(i) or "" for i in range(unigram("jieba").vocab_size))
              if p.startswith("\u2581") and len(p) > 1 and HAN_RUN.fullmatch(p[1:])}
    uncut_text = "\u2581" + "\u2581".join(re.sub(r"\s+", "\u2581", line) for line in training_lines())
    assert starts and all(p in uncut_text for p in starts)


def exact_pre_tokens(pattern: str) -> bytes:
    """The regex pre-tokens of each whole training line (tiktoken's regex), split at the jieba
    cuts inside them, back to back (NUL between): where BPE may learn tokens."""
    pat = regex.compile(tiktoken_encoding(pattern)._pat_str)
    pieces = []
    for line in training_lines():
        cuts, at = [], 0
        for segment in jieba_segments(line)[:-1]:
            at += len(segment)
            cuts.append(at)
        for m in pat.finditer(line):
            bounds = [m.start(), *(c for c in cuts if m.start() < c < m.end()), m.end()]
            pieces += [line[a:b].encode() for a, b in zip(bounds, bounds[1:])]
    return b"\x00".join(pieces)


@pytest.mark.parametrize("pattern", ["gpt2", "cl100k", "o200k"])
def test_bpe_learns_only_inside_the_whole_texts_pre_tokens_cut_by_jieba(pattern: str) -> None:
    # Segments fed as texts of their own would not do for o200k: a match that starts at a cut
    # takes a capital letter its whole-text match leaves out (...的|Token: 的Token, not 的 Token).
    # At 6,000 tokens, feeding segments as texts learns 6 such tokens with o200k (的Tensor, 多GPU不同).
    tok = tokpipe.train_bpe(texts=training_lines(), vocab_size=6000, min_frequency=1, special_tokens=(),
                            pattern=pattern, pre_segment="jieba", show_progress=False)
    allowed = exact_pre_tokens(pattern)
    learned = (tok.token_bytes(i) for i in range(tok.vocab_size))
    assert [t for t in learned if t is not None and len(t) > 1 and t not in allowed] == []


def test_segmenter_cuts_where_jieba_does_and_keeps_the_text() -> None:
    segmenter = Segmenter(jieba.cut)
    cut = 0
    for line in training_lines():
        parts = segmenter.parts(line)
        assert "".join(parts) == line
        assert parts == jieba_segments(line)
        cut += len(parts) - 1
    assert cut > 5000


def test_trained_tokenizers_encode_raw_text_and_load_elsewhere(tmp_path: Path) -> None:
    text = "\n".join(held_out_lines())
    tok = bpe("jieba")
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    tok.save(tmp_path / "tokenizer.json")
    assert tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json")).encode(text).ids == ids

    uni = unigram("jieba")
    uni.save_sentencepiece(tmp_path / "zh.model")
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "zh.model"))
    for line in held_out_lines()[:200]:
        ids = uni.encode(line)
        assert sp.encode(line) == ids
        assert uni.decode(ids) == sp.decode(ids)
    # Word-level training changed the vocabulary, not only the ids' order.
    assert set(uni.id_to_token(i) for i in range(uni.vocab_size)) != set(
        unigram(None).id_to_token(i) for i in range(uni.vocab_size))


def saved(tok: tokpipe.Tokenizer, path: Path) -> bytes:
    tok.save(path)
    return path.read_bytes()


def test_files_give_what_texts_give(tmp_path: Path) -> None:
    import json

    jsonl = tmp_path / "notes.jsonl"
    jsonl.write_text("".join(json.dumps({"text": line}, ensure_ascii=False) + "\n" for line in training_lines()),
                     encoding="utf-8")
    report: list[tokpipe.CorpusReport] = []
    from_file = tokpipe.train_bpe(jsonl, vocab_size=1500, special_tokens=(), pre_segment="jieba", show_progress=False,
                                  report=report)
    assert saved(from_file, tmp_path / "file.json") == saved(bpe("jieba"), tmp_path / "texts.json")
    assert report[0].documents == len(training_lines()) and report[0].files == 1
    # Text files too (each line a document), folders walked as without the option.
    folder = tmp_path / "notes"
    folder.mkdir()
    for name, lines in notes().items():
        if not name.startswith("004"):
            (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    from_text = tokpipe.train_unigram(folder, vocab_size=3000, pre_segment="jieba", show_progress=False)
    assert saved(from_text, tmp_path / "file.json") == saved(unigram("jieba"), tmp_path / "texts.json")


def test_compressed_text_files_are_refused_by_name(tmp_path: Path) -> None:
    import gzip

    packed = tmp_path / "notes.txt.gz"
    packed.write_bytes(gzip.compress("今天天气很好\n".encode()))
    with pytest.raises(tokpipe.CorpusError, match="notes.txt.gz: pre_segment reads"):
        tokpipe.train_bpe(packed, vocab_size=300, pre_segment="jieba", show_progress=False)


def test_bad_value_and_wordpiece_are_one_line_errors() -> None:
    with pytest.raises(InvalidArgumentError, match="pre_segment") as bad:
        tokpipe.train_bpe(texts=["今天天气很好"], pre_segment="thulac")
    assert "\n" not in str(bad.value) and "jieba" in str(bad.value)
    with pytest.raises(InvalidArgumentError, match="pre_segment") as wordpiece:
        tokpipe.train_wordpiece(texts=["今天天气很好"], pre_segment="jieba")
    assert "\n" not in str(wordpiece.value) and "CJK character" in str(wordpiece.value)


@pytest.mark.parametrize("train", [tokpipe.train_bpe, tokpipe.train_unigram])
def test_missing_jieba_names_the_extra_before_any_work(train, monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules makes `import jieba` raise ImportError, as when it is not installed.
    monkeypatch.setitem(sys.modules, "jieba", None)
    # The corpus does not exist: the jieba error must come first.
    with pytest.raises(InvalidArgumentError) as missing:
        train("/no/such/corpus.txt", pre_segment="jieba", show_progress=False)
    assert "tokpipe[chinese]" in str(missing.value) and "\n" not in str(missing.value)
