"""c4_quality, c4_badwords and fineweb_quality: thresholds, and agreement with datatrove."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from tokpipe.errors import InvalidArgumentError
from tests.conftest import real_english_documents
from tokpipe.pipeline.stages.quality_c4 import C4BadWords, C4Quality, FineWebQuality

S = "The old man walked slowly along the quiet river bank."  # one sentence, ten words


def batch(*texts: str) -> pa.RecordBatch:
    return pa.record_batch([pa.array(list(texts), type=pa.string())], names=["text"])


def c4(texts, **kw):
    result = C4Quality(**kw).process(batch(*texts))
    kept = result.kept.column("text").to_pylist()
    reasons = [] if result.rejected is None else result.rejected.column("reason").to_pylist()
    return kept, reasons


def test_c4_min_num_sentences_boundary():
    assert c4(["\n".join([S] * 5)]) == (["\n".join([S] * 5)], [])
    assert c4(["\n".join([S] * 4)]) == ([], ["too_few_sentences"])
    assert c4(["\n".join([S] * 4)], min_num_sentences=4)[1] == []
    assert c4(["One line."], min_num_sentences=-1)[1] == []


def test_c4_line_rules():
    body = "\n".join([S] * 5)
    three, two = "Birds fly south.", "Birds fly."
    assert c4([body + "\n" + three])[0] == [body + "\n" + three]
    assert c4([body + "\n" + two])[0] == [body]
    assert c4([body + "\nNo full stop here"])[0] == [body]
    assert c4([body + "\nIt trailed off..."])[0] == [body]
    assert c4([body + "\nPlease enable JavaScript to continue."])[0] == [body]
    assert c4([body + "\nRead our Privacy Policy today."])[0] == [body]
    long_word = "a" * 11
    assert c4([body + f"\nThe word {long_word} is long."], max_word_length=11)[0][0].endswith("long.")
    assert c4([body + f"\nThe word {long_word} is long."], max_word_length=10)[0] == [body]
    assert c4([body + "\nThe river rose.[1]"])[0] == [body + "\nThe river rose."]
    assert c4([body + "\nThe river rose.[1]"], remove_citations=False)[0] == [body]


def test_c4_document_rules():
    body = "\n".join([S] * 5)
    assert c4([body + "\nLorem ipsum dolor sit amet."]) == ([], ["lorem_ipsum"])
    assert c4([body + "\nSet x to {1, 2} now."]) == ([], ["curly_bracket"])
    # A curly bracket on a dropped line does not count.
    assert c4([body + "\nint main() {"])[1] == []
    assert c4([body + "\nSet x to {1, 2} now."], filter_curly_bracket=False)[1] == []


def test_c4_stats_and_errors():
    stage = C4Quality()
    stage.process(batch("\n".join([S] * 5) + "\nshort"))
    assert stage.stats.extra["line-kept"] == 5 and stage.stats.extra["line-filter-no_terminal_punc"] == 1
    with pytest.raises(InvalidArgumentError):
        C4Quality(split_paragraph=False)


def test_badwords():
    stage = C4BadWords(badwords=["darn", "heck no"])
    mask, reason = stage.keep(batch("Well, DARN it.", "Darned thing.", "Heck no!", "heck nothing", "clean"))
    assert mask.tolist() == [False, True, False, True, True] and reason == "document_removed_with_badwords"
    mask, _ = C4BadWords(badwords=["darn"], word_boundaries=False).keep(batch("Darned thing."))
    assert mask.tolist() == [False]
    with pytest.raises(InvalidArgumentError):
        C4BadWords()


def test_badwords_file(tmp_path):
    path = tmp_path / "words.txt"
    path.write_text("darn\n\n", encoding="utf-8")
    assert C4BadWords(badwords_file=str(path)).keep(batch("darn", "fine"))[0].tolist() == [False, True]


def fineweb(text, **kw):
    mask, reasons = FineWebQuality(**kw).keep(batch(text))
    return "" if mask[0] else reasons[0]


def test_fineweb_thresholds():
    long = "The old man walked slowly along the quiet river bank"  # 52 chars, no stop char
    # 1 of 8 lines punctuated = 0.125 >= 0.12 passes; 1 of 9 = 0.111 fails.
    lines8 = [long + "."] + [f"{long} {i}" for i in range(7)]
    assert fineweb("\n".join(lines8)) == ""
    assert fineweb("\n".join(lines8 + [long + " 7"])) == "line_punct_ratio"
    assert fineweb("   \n\n") == "empty"
    # Short lines: 2 of 3 = 0.667 <= 0.67 passes, 3 of 4 fails.
    short = ["Birds fly south.", "Cats sleep all day.", "Dogs bark."]
    assert fineweb("\n".join([S] + short[:2])) == ""
    assert fineweb("\n".join([S] + short)) == "short_line_ratio"
    # Duplicated lines.
    assert fineweb("\n".join([S, S.replace("old", "young")] * 1)) == ""
    assert fineweb("\n".join([S, S])) == "char_dup_ratio"
    # Newlines per word: 3 newlines over 10 words = 0.3 passes, 4 fails.
    words = "The old man walked slowly along the quiet river bank.".split()
    assert fineweb(" ".join(words[:5]) + "\n\n\n" + " ".join(words[5:]), short_line_thr=1.0) == ""
    assert fineweb(" ".join(words[:5]) + "\n\n\n\n" + " ".join(words[5:]), short_line_thr=1.0) == "list_ratio"


def test_agreement_with_datatrove():
    from datatrove.data import Document
    from datatrove.pipeline.filters import C4QualityFilter, FineWebQualityFilter

    docs = real_english_documents()
    column = pa.array(docs, type=pa.string())
    text, c4_reasons, _ = C4Quality().rewrite(column)
    fw_mask, fw_reasons = FineWebQuality().keep(pa.record_batch([column], names=["text"]))
    c4_peer, fw_peer = C4QualityFilter(), FineWebQualityFilter()
    c4_diff, fw_diff = [], []
    for i, doc in enumerate(docs):
        d = Document(text=doc, id=str(i))
        verdict = c4_peer.filter(d)
        expected = "" if verdict is True else verdict[1]
        if expected != c4_reasons[i] or (expected == "" and d.text != text[i].as_py()):
            c4_diff.append(i)
        verdict = fw_peer.filter(Document(text=doc, id=str(i)))
        expected = "" if verdict is True else verdict[1]
        if expected != fw_reasons[i] or fw_mask[i] != (expected == ""):
            fw_diff.append(i)
    assert len(docs) > 1000
    # Every decision, reason and rewritten text agrees.
    assert c4_diff == [] and fw_diff == []
    assert 0 < int(np.sum(c4_reasons == "")) < len(docs)
