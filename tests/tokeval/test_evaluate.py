"""``evaluate_tokenizers`` against peers and against counts made here.

Token counts come from tiktoken (cl100k, o200k) on the shared texts, unknown tokens from HF
``tokenizers`` (BERT's vocab.txt) and from sentencepiece (a Unigram ``.model``, and a byte-fallback
model saved as one), vocabulary use and the longest token from a ``Counter`` of tiktoken's ids,
words from texts whose words are counted by hand. Nothing expected comes from tokeval itself.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import sentencepiece as spm
from tokenizers import BertWordPieceTokenizer

import tokpipe
from tests.conftest import CORPORA, REPO, VOCAB
from tests.parity.peers import tiktoken_encoding
from tokpipe.errors import CorpusError, InvalidArgumentError, NoDocumentsError
from tokpipe.tokeval import ALL, OTHER, evaluate_tokenizers

TEXT = CORPORA / "text"
#: The shared text files as the readers give them (one document per .txt file), by the
#: language their dominant script says.
LANGUAGE_OF = {"botchan.txt": "Latin", "tinyshakespeare.txt": "Latin", "wagahaiwa_nekodearu.txt": "ja"}


def shared_texts() -> dict[str, str]:
    """The texts as the readers give them: as they are on disk (``newline=""``: botchan.txt
    ends its lines with CRLF) less a leading byte-order mark (botchan.txt has one)."""
    texts = {}
    for path in sorted(TEXT.rglob("*.txt")):
        with open(path, encoding="utf-8", newline="") as f:
            texts[str(path.relative_to(TEXT))] = f.read().removeprefix("\ufeff")
    return texts


def language(name: str) -> str:
    return LANGUAGE_OF.get(name, "zh")


def write_jsonl(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.mark.parametrize(("encoding", "file"), [("cl100k", "cl100k_base.tiktoken.gz"),
                                                 ("o200k", "o200k_base.tiktoken.gz")])
def test_token_counts_and_vocabulary_use_match_tiktoken(encoding: str, file: str) -> None:
    enc = tiktoken_encoding(encoding)
    texts = shared_texts()
    ids = {name: enc.encode_ordinary(text) for name, text in texts.items()}
    result = evaluate_tokenizers([VOCAB / file], TEXT, by="language")
    assert result.groups[:3] == ["Latin", "ja", "zh"] or set(result.groups) == {"Latin", "ja", "zh"}
    for group in ("Latin", "ja", "zh"):
        names = [n for n in texts if language(n) == group]
        m = result.per_group[group][file]
        assert m.documents == len(names)
        assert m.tokens == sum(len(ids[n]) for n in names)
        assert m.chars == sum(len(texts[n]) for n in names)
        assert m.bytes == sum(len(texts[n].encode("utf-8")) for n in names)
    overall = result.overall[file]
    counts = Counter(i for name in texts for i in ids[name])
    assert overall.tokens == sum(counts.values())
    assert overall.distinct_tokens == len(counts)
    assert overall.vocab_size == enc.n_vocab
    assert overall.vocabulary_used == pytest.approx(len(counts) / enc.n_vocab)
    # 90% of the uses: the fewest tokens, most used first, whose uses reach 90%.
    covered, needed = 0, 0
    for _, count in counts.most_common():
        covered += count
        needed += 1
        if covered >= 0.9 * sum(counts.values()):
            break
    assert overall.tokens_for_90 == needed
    longest = max(len(enc.decode_single_token_bytes(i)) for i in counts)
    first_longest = min(i for i in counts if len(enc.decode_single_token_bytes(i)) == longest)
    assert (overall.longest_used.id, overall.longest_used.bytes) == (first_longest, longest)
    # A byte-level BPE: no fallback, every document round-trips.
    assert overall.fallback_tokens == overall.fallback_documents == 0
    assert overall.round_trips == len(texts)
    assert not result.tokenizers[0].falls_back and "byte-level" in result.tokenizers[0].fallback


def test_bert_unknown_tokens_match_hf_tokenizers() -> None:
    hf = BertWordPieceTokenizer(str(VOCAB / "bert_base_uncased_vocab.txt"), lowercase=True)
    # A note writes "[UNK]" literally: tokpipe encodes special-token strings in text as text,
    # and so does HF with this setting (by default it would match them as the token).
    hf._tokenizer.encode_special_tokens = True
    unk = hf.token_to_id("[UNK]")
    texts = shared_texts()
    result = evaluate_tokenizers([VOCAB / "bert_base_uncased_vocab.txt"], TEXT, by="language")
    assert result.tokenizers[0].fallback == "[UNK]"
    for group in ("Latin", "ja", "zh"):
        encoded = [hf.encode(texts[n], add_special_tokens=False).ids for n in texts if language(n) == group]
        m = result.per_group[group]["bert_base_uncased_vocab.txt"]
        assert m.tokens == sum(map(len, encoded))
        assert m.fallback_tokens == sum(ids.count(unk) for ids in encoded)
        assert m.fallback_documents == sum(unk in ids for ids in encoded)
    # Japanese and Chinese hold characters BERT's vocabulary lacks.
    assert result.per_group["ja"]["bert_base_uncased_vocab.txt"].fallback_tokens > 0
    # BERT lowercases, strips accents and decodes with spaces: no book round-trips.
    assert result.overall["bert_base_uncased_vocab.txt"].round_trips == 0


def test_sentencepiece_unknown_pieces_match_sentencepiece() -> None:
    model = VOCAB / "spm_botchan_unigram_1000.model"
    peer = spm.SentencePieceProcessor(model_file=str(model))
    texts = shared_texts()
    encoded = {n: peer.encode(t) for n, t in texts.items()}
    result = evaluate_tokenizers([model], TEXT, by="language")
    assert result.tokenizers[0].fallback == "<unk>"
    for group in ("Latin", "ja", "zh"):
        names = [n for n in texts if language(n) == group]
        m = result.per_group[group][model.name]
        assert m.tokens == sum(len(encoded[n]) for n in names)
        assert m.fallback_tokens == sum(encoded[n].count(peer.unk_id()) for n in names)
        assert m.fallback_documents == sum(peer.unk_id() in encoded[n] for n in names)
        assert m.fallback_document_bytes == sum(len(texts[n].encode()) for n in names if peer.unk_id() in encoded[n])


def test_byte_fallback_pieces_count_as_fallback(tmp_path: Path) -> None:
    trained = tokpipe.train_unigram(texts=["the cat sat on the mat. the dog ate the log."] * 50, vocab_size=280,
                                    byte_fallback=True, show_progress=False)
    model = tmp_path / "bytes.model"
    trained.save_sentencepiece(model)
    peer = spm.SentencePieceProcessor(model_file=str(model))
    docs = ["the cat sat", "the 猫 sat on the 犬", "a dog ate the log"]
    corpus = write_jsonl(tmp_path / "docs.jsonl", [{"text": t} for t in docs])
    result = evaluate_tokenizers([model], corpus)
    pieces = [[peer.id_to_piece(i) for i in peer.encode(t)] for t in docs]
    is_byte = [[p.startswith("<0x") and p.endswith(">") for p in doc] for doc in pieces]
    m = result.overall["bytes.model"]
    assert sum(map(sum, is_byte)) == 6  # two Han characters, three bytes each
    assert m.fallback_tokens == sum(map(sum, is_byte))
    assert m.fallback_documents == 1
    assert m.fallback_document_bytes == len(docs[1].encode())
    assert m.fallback_byte_share == pytest.approx(len(docs[1].encode()) / sum(len(t.encode()) for t in docs))
    assert "byte pieces" in result.tokenizers[0].fallback


def test_words_round_trips_and_tokenizer_objects(tmp_path: Path) -> None:
    # Unicode words (UAX #29) with every Han and kana character one word, counted by hand:
    # "don't", "stop" | "我", "是", "猫" | "hello", "world" | "Hello", "World" | "GPT", "4", "3.14",
    # "コ", "ー", "ヒ", "ー" (whitespace words would make "GPT-4," one word).
    docs = ["don't stop.", "我是猫。", "hello world", "Hello World", "GPT-4, 3.14 コーヒー"]
    corpus = write_jsonl(tmp_path / "docs.jsonl", [{"text": t} for t in docs])
    bert = tokpipe.Tokenizer.from_file(VOCAB / "bert_base_uncased_vocab.txt")
    result = evaluate_tokenizers({"bert": bert, "gpt2": VOCAB / "gpt2_encoder.json"}, corpus)
    assert [t.name for t in result.tokenizers] == ["bert", "gpt2"]
    assert result.tokenizers[0].path is None
    for m in result.overall.values():
        assert m.words == 2 + 3 + 2 + 2 + 7
        assert m.tokens_per_word == pytest.approx(m.tokens / 16)
    # BERT gives back "hello world" only: the others lose their case, "'" spacing or "。".
    assert result.overall["bert"].round_trips == 1
    assert result.overall["gpt2"].round_trips == 5
    assert result.overall["gpt2"].chars == sum(map(len, docs))


def test_groups_from_a_language_column_a_source_column_and_file_names(tmp_path: Path) -> None:
    records = [{"text": "hello there", "language": "en", "source": "web"},
               {"text": "bonjour à tous", "language": "fr", "source": "books"},
               {"text": "good day", "language": "en", "source": "books"}]
    corpus = write_jsonl(tmp_path / "docs.jsonl", records)
    gpt2 = VOCAB / "gpt2_encoder.json"
    by_language = evaluate_tokenizers([gpt2], corpus, by="language")
    assert by_language.groups == ["en", "fr"] and by_language.grouped_from == "the language column"
    assert by_language.per_group["en"][gpt2.name].documents == 2
    by_source = evaluate_tokenizers([gpt2], corpus, by="source")
    assert sorted(by_source.groups) == ["books", "web"] and by_source.grouped_from == "the source column"
    (tmp_path / "two").mkdir()
    (tmp_path / "two" / "a.txt").write_text("one file", encoding="utf-8")
    (tmp_path / "two" / "b.txt").write_text("another, longer file", encoding="utf-8")
    by_file = evaluate_tokenizers([gpt2], tmp_path / "two", by="source")
    assert by_file.groups == ["b.txt", "a.txt"] and by_file.grouped_from == "the file name"
    whole = evaluate_tokenizers([gpt2], corpus)
    assert whole.groups == [ALL] and whole.per_group[ALL] == whole.overall


def test_groups_past_the_limit_count_as_other(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tokpipe.tokeval import evaluate

    monkeypatch.setattr(evaluate, "MAX_GROUPS", 2)
    records = [{"text": f"text number {n}", "language": lang} for n, lang in enumerate("aabcdd")]
    corpus = write_jsonl(tmp_path / "docs.jsonl", records)
    result = evaluate_tokenizers([VOCAB / "gpt2_encoder.json"], corpus, by="language")
    assert result.groups[-1] == OTHER and set(result.groups) == {"a", "b", OTHER}
    documents = {g: m["gpt2_encoder.json"].documents for g, m in result.per_group.items()}
    assert documents == {"a": 2, "b": 1, OTHER: 3}
    assert sum(m["gpt2_encoder.json"].tokens for m in result.per_group.values()) == \
        result.overall["gpt2_encoder.json"].tokens


def test_samples_are_the_first_documents(tmp_path: Path) -> None:
    docs = [f"document {n} " + "word " * n for n in range(10)]
    corpus = write_jsonl(tmp_path / "docs.jsonl", [{"text": t} for t in docs])
    first = write_jsonl(tmp_path / "first.jsonl", [{"text": t} for t in docs[:3]])
    gpt2 = VOCAB / "gpt2_encoder.json"
    sampled = evaluate_tokenizers([gpt2], corpus, max_documents=3)
    assert sampled.documents == 3 and sampled.sampled and "3 documents" in sampled.sampled
    assert sampled.overall == evaluate_tokenizers([gpt2], first).overall
    limit = sum(len(t) for t in docs[:4])
    by_bytes = evaluate_tokenizers([gpt2], corpus, max_bytes=limit)
    assert by_bytes.documents == 4 and by_bytes.bytes == limit
    assert evaluate_tokenizers([gpt2], corpus, max_bytes=1).documents == 1  # the first document always
    assert evaluate_tokenizers([gpt2], corpus).sampled is None


def test_a_clean_output_stands_for_its_kept_shards(tmp_path: Path) -> None:
    import subprocess
    import sys

    records = [{"id": f"k{n}", "text": f"A kept document number {n} with enough words in it.", "language": "en"}
               for n in range(5)] + [{"id": "short", "text": "tiny", "language": "xx"}]
    corpus = write_jsonl(tmp_path / "docs.jsonl", records)
    config = tmp_path / "pipeline.yaml"
    config.write_text("stages:\n  - type: length_filter\n    min: 20\n", encoding="utf-8")
    run = subprocess.run([sys.executable, "-c", "from tokpipe.cli import main; main()", "clean", str(corpus), "-c",
                          str(config), "-o", str(tmp_path / "out"), "-q", "-w", "1"], capture_output=True, text=True,
                         cwd=REPO)
    assert run.returncode == 0, run.stderr
    result = evaluate_tokenizers([VOCAB / "gpt2_encoder.json"], tmp_path / "out", by="language")
    assert result.documents == 5 and result.groups == ["en"]  # rejected/ is not read


def test_bad_input(tmp_path: Path) -> None:
    gpt2 = VOCAB / "gpt2_encoder.json"
    with pytest.raises(CorpusError, match="does not exist"):
        evaluate_tokenizers([gpt2], tmp_path / "missing.jsonl")
    wrong_field = write_jsonl(tmp_path / "docs.jsonl", [{"content": "text"}])
    with pytest.raises(NoDocumentsError, match="1 unreadable"):
        evaluate_tokenizers([gpt2], wrong_field)
    with pytest.raises(InvalidArgumentError, match="by must be"):
        evaluate_tokenizers([gpt2], wrong_field, by="colour")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="no tokenizer"):
        evaluate_tokenizers([], wrong_field)


def test_why_nothing_was_read_is_said_and_the_field_hint_only_when_a_field_is_missing(tmp_path: Path) -> None:
    gpt2 = VOCAB / "gpt2_encoder.json"
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    with pytest.raises(NoDocumentsError) as empty:
        evaluate_tokenizers([gpt2], tmp_path / "empty.txt")
    message = str(empty.value)
    assert "1 unreadable record: 1 empty_file" in message and "field" not in message and "\n" not in message
    nulls = write_jsonl(tmp_path / "nulls.jsonl", [{"text": None}, {"text": None}])
    with pytest.raises(NoDocumentsError, match=r"\(2 unreadable records: 2 null_text\)$"):
        evaluate_tokenizers([gpt2], nulls)
    misnamed = write_jsonl(tmp_path / "misnamed.jsonl", [{"id": "a", "content": "some text"}])
    with pytest.raises(NoDocumentsError, match="1 missing_text_field\\): no field 'text'; did you mean 'content'\\?"):
        evaluate_tokenizers([gpt2], misnamed)


def test_a_language_or_source_column_of_objects_or_lists_groups_by_its_json(tmp_path: Path) -> None:
    # pyarrow has no cast from a struct or a list to a string: this used to end in a traceback.
    records = [{"text": "hello there", "language": {"code": "en"}, "source": ["web", "crawl"]},
               {"text": "good day", "language": {"code": "en"}, "source": ["books"]}]
    corpus = write_jsonl(tmp_path / "docs.jsonl", records)
    gpt2 = VOCAB / "gpt2_encoder.json"
    by_language = evaluate_tokenizers([gpt2], corpus, by="language")
    assert by_language.groups == ['{"code": "en"}'] and by_language.grouped_from == "the language column"
    assert by_language.per_group['{"code": "en"}'][gpt2.name].documents == 2
    by_source = evaluate_tokenizers([gpt2], corpus, by="source")
    assert sorted(by_source.groups) == ['["books"]', '["web", "crawl"]']


def test_names_and_paths_of_tokenizer_urls_hold_no_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    from tokpipe.tokeval.evaluate import load_tokenizers

    gpt2 = tokpipe.Tokenizer.from_file(VOCAB / "gpt2_encoder.json")
    monkeypatch.setattr(tokpipe.Tokenizer, "from_file", staticmethod(lambda spec: gpt2))  # no object store here
    urls = ["s3://AKIDEXAMPLE:s3cr3tkey@bucket/tok.json?X-Amz-Signature=f00d",
            "s3://AKIDEXAMPLE:s3cr3tkey@other/tok.json"]
    loaded = load_tokenizers(urls)
    shown = repr(list(loaded)) + repr([path for _, path in loaded.values()])
    assert "s3cr3tkey" not in shown and "f00d" not in shown
    assert len(loaded) == 2


def test_two_files_of_one_name_are_told_apart_by_their_folder(tmp_path: Path) -> None:
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "tokenizer.json").write_text(Path(VOCAB / "gpt-neo-tokenizer.json").read_text())
    corpus = write_jsonl(tmp_path / "docs.jsonl", [{"text": "hello"}])
    result = evaluate_tokenizers([tmp_path / "a" / "tokenizer.json", tmp_path / "b" / "tokenizer.json"], corpus)
    assert [t.name for t in result.tokenizers] == ["a/tokenizer.json", "b/tokenizer.json"]
