"""``gopher_quality`` and ``gopher_repetition``: each rule just inside and just outside its
default threshold (each verdict also checked against datatrove's filter, so the documents are
known to sit where we say; the fraction rules' documents are found one character either side
of the threshold by a search with datatrove's filter), and agreement with datatrove on every
real English document of ``../shared/corpora``."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from datatrove.data import Document
from datatrove.pipeline.filters import GopherQualityFilter, GopherRepetitionFilter

from tests.conftest import CORPORA, real_english_documents
from tokpipe.pipeline.stages import GopherQuality, GopherRepetition

FILLER = ["house", "garden", "river", "tree", "window", "morning", "letter", "dog"]


def words(n: int, extra: tuple[str, ...] = ("the", "with")) -> list[str]:
    """n real words: the two stop words first, then FILLER over and over."""
    out = list(extra) + [FILLER[i % len(FILLER)] for i in range(n - len(extra))]
    return out[:n]


def mean_doc(pattern: list[str], n: int = 60) -> str:
    return " ".join(pattern[i % len(pattern)] for i in range(n))


def lines_doc(lines: int, marked: int, bullet: bool) -> str:
    out = []
    for i in range(lines):
        line = f"the dog with {FILLER[i % 8]} ran to the old {FILLER[(i + 3) % 8]} there"
        if i < marked:
            line = f"- {line}" if bullet else f"{line}..."
        out.append(line)
    return "\n".join(out)


def symbols_doc(symbol: str, count: int) -> str:
    body = words(90)
    for i in range(count):
        body.insert(5 + i * 8, symbol)
    return " ".join(body)


def alpha_doc(numbers: int, total: int = 100) -> str:
    return " ".join(words(total - numbers) + [str(1900 + i) for i in range(numbers)])


QUALITY_CASES = {
    # rule: (document just inside, document just outside)
    "gopher_short_doc": (" ".join(words(50)), " ".join(words(49))),
    "gopher_long_doc": (" ".join(words(100_000)), " ".join(words(100_001))),
    # "the of with": mean 3.0; "the of with of": 2.75
    "gopher_below_avg_threshold": (mean_doc(["the", "of", "with"]), mean_doc(["the", "of", "with", "of"])),
    # 3 + 4 + 18 + 15 = 40 over 4 words: mean 10.0; with 16 instead of 15: 10.25
    "gopher_above_avg_threshold": (mean_doc(["the", "with", "characteristically", "extraordinarily"]),
                                   mean_doc(["the", "with", "characteristically", "responsibilities"])),
    "gopher_too_many_hashes": (symbols_doc("#", 10), symbols_doc("#", 11)),  # 10 of 100 words, 11 of 101
    "gopher_too_many_ellipsis": (symbols_doc("...", 10), symbols_doc("...", 11)),
    "gopher_too_many_bullets": (lines_doc(20, 18, True), lines_doc(20, 19, True)),  # 0.9, 0.95
    "gopher_too_many_end_ellipsis": (lines_doc(10, 3, False), lines_doc(10, 4, False)),  # 0.3, 0.4
    "gopher_below_alpha_threshold": (alpha_doc(20), alpha_doc(21)),  # 80 of 100 words, 79
    "gopher_enough_stop_words": (" ".join(words(60)), " ".join(words(60, ("the",)))),
}


def thanks_doc(unique: int, repeats: int, line_sep: str = "\n\n") -> str:
    return line_sep.join(SENTENCES[:unique] + ["Thanks."] * repeats)


SENTENCES = ["The house by the river was painted blue last summer.",
             "Our neighbour opened every window before breakfast.",
             "A small dog slept under the kitchen table all afternoon.",
             "Letters from abroad arrived twice each week in winter.",
             "Old trees along the road were cut down in March.",
             "She found her grandfather's watch inside a wooden box."]


def unique_words(n: int, length: int = 6) -> list[str]:
    """n distinct words of at least `length` letters from a real book, in order of appearance."""
    text = (CORPORA / "text" / "botchan.txt").read_text(encoding="utf-8")
    words = list(dict.fromkeys(w.lower() for w in text.split() if w.isalpha() and len(w) >= length))
    assert len(words) >= n
    return words[:n]


LONG = "supercalifragilisticexpialidocious"
SHORT = ["of", "in", "to", "at", "by", "on", "up", "as", "is"]


def repeated_phrase(n: int, repeats: int):
    """Builder of documents where an n-word phrase (short words, then LONG, so its shorter
    n-grams weigh little) comes `repeats` times, each followed by g words used nowhere else."""
    phrase = SHORT[:n - 1] + [LONG]

    def build(g: int) -> str:
        filler = iter(unique_words(repeats * g))
        return " ".join(w for _ in range(repeats) for w in phrase + [next(filler) for _ in range(g)])
    return build


def repeated_part(separator: str):
    """Builder of documents of five paragraphs (or lines) of which the second and the fourth
    are the same single long word: g + 1 distinct words in each other one."""
    def build(g: int) -> str:
        filler = iter(unique_words(3 * (g + 1)))
        part = lambda: " ".join(next(filler) for _ in range(g + 1))  # noqa: E731
        return separator.join([part(), LONG * 2, part(), LONG * 2, part()])
    return build


# rule: a builder of documents whose fraction for that rule falls as g grows.
REPETITION_FAMILIES = {
    "dup_para_char_frac": repeated_part("\n\n"),
    "dup_line_char_frac": repeated_part("\n"),
    **{f"top_{n}_gram": repeated_phrase(n, 12) for n in (2, 3, 4)},
    **{f"duplicated_{n}_n_grams": repeated_phrase(n, 10) for n in range(5, 11)},
}


def boundary(build, rule: str, peer) -> tuple[str, str]:
    """(just inside, just outside) of `rule`'s threshold, datatrove's filter deciding: the
    largest g for which build(g) fails on `rule` (and on nothing before it) gives the base,
    then a word of j letters appended to it lowers the fraction one character at a time, and
    the pair is j + 1 (passes every rule) and j (fails on `rule`)."""
    g = 0
    while datatrove_verdict(peer, build(g + 1)) != (True, None):
        g += 1
        assert g < 500, f"{rule}: the documents never pass"
    base = build(g)
    assert datatrove_verdict(peer, base) == (False, rule), f"{rule}: the family fails on another rule first"

    def make(j: int) -> str:
        return base if j == 0 else f"{base} {'q' * j}"
    lo, hi = 0, 1  # make(lo) fails on rule; find hi that passes
    while datatrove_verdict(peer, make(hi)) != (True, None):
        assert datatrove_verdict(peer, make(hi)) == (False, rule)
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if datatrove_verdict(peer, make(mid)) == (True, None):
            hi = mid
        else:
            lo = mid
    return make(hi), make(lo)


def datatrove_verdict(filter_, text: str) -> tuple[bool, str | None]:
    verdict = filter_.filter(Document(text=text, id="x"))
    return (True, None) if verdict is True else (verdict[0], verdict[1])


def our_verdicts(stage, texts: list[str]) -> list[tuple[bool, str | None]]:
    mask, reasons = stage.keep(pa.record_batch({"text": texts}))
    return [(bool(m), None if m else r) for m, r in zip(mask, reasons)]


@pytest.mark.parametrize("rule", sorted(QUALITY_CASES))
def test_quality_rule_thresholds(rule: str) -> None:
    inside, outside = QUALITY_CASES[rule]
    ours = our_verdicts(GopherQuality(), [inside, outside])
    theirs = GopherQualityFilter()
    assert ours == [datatrove_verdict(theirs, inside), datatrove_verdict(theirs, outside)]
    assert ours == [(True, None), (False, rule)]


@pytest.mark.parametrize("repeated", ["\n\n", "\n"])
def test_repetition_count_thresholds(repeated: str) -> None:
    # 3 of 10 paragraphs (or lines) repeat an earlier one: 0.3 passes; 4 of 11 fails.
    rule = "dup_para_frac" if repeated == "\n\n" else "dup_line_frac"
    inside, outside = thanks_doc(6, 4, repeated), thanks_doc(6, 5, repeated)
    ours = our_verdicts(GopherRepetition(), [inside, outside])
    theirs = GopherRepetitionFilter()
    assert ours == [datatrove_verdict(theirs, inside), datatrove_verdict(theirs, outside)]
    assert ours == [(True, None), (False, rule)]


@pytest.mark.parametrize("rule", sorted(REPETITION_FAMILIES))
def test_repetition_fraction_thresholds(rule: str) -> None:
    inside, outside = boundary(REPETITION_FAMILIES[rule], rule, GopherRepetitionFilter())
    assert len(inside) - len(outside) in (1, 2)  # one more letter, or the tail word's space too
    assert our_verdicts(GopherRepetition(), [inside, outside]) == [(True, None), (False, rule)]


def test_empty_and_null_text() -> None:
    batch = pa.record_batch({"text": pa.array(["", None], type=pa.string())})
    result = GopherRepetition().process(batch)
    assert result.rejected is not None and result.rejected.column("reason").to_pylist() == ["empty", "empty"]
    result = GopherQuality().process(batch)
    assert result.rejected is not None and result.rejected.column("reason").to_pylist() == ["gopher_short_doc"] * 2


@pytest.mark.parametrize("stage, peer", [(GopherQuality, GopherQualityFilter),
                                         (GopherRepetition, GopherRepetitionFilter)])
def test_agrees_with_datatrove_on_real_english(stage, peer) -> None:
    docs = real_english_documents()
    ours = our_verdicts(stage(), docs)
    theirs = peer()
    differ = {i: (o, datatrove_verdict(theirs, t)) for i, (t, o) in enumerate(zip(docs, ours))
              if o != datatrove_verdict(theirs, t)}
    assert differ == {}
    assert len(docs) > 1000
    assert 0 < sum(kept for kept, _ in ours) < len(docs)


def repetition_documents() -> list[str]:
    """Documents with repeated n-grams: across line breaks, with the same bytes split into
    other words ("ab c" and "a bc" concatenate alike), non-ASCII words, and every 20th real
    English document."""
    rng = np.random.default_rng(5)
    vocab = ["ab", "c", "a", "bc", "abc", "the", "of", "café", "naïve", "日本", "é", "x", "-", "."]
    docs = ["ab c a bc ab c a bc", "one two three four five six\none two three four five six",
            "a b c d e f g h i j k\n\na b c d e f g h i j k", "café naïve café naïve café naïve"]
    for i in range(200):
        picked = rng.integers(0, 2 + i % (len(vocab) - 1), size=1 + i % 60)
        docs.append("".join(vocab[k] + (" \n"[k % 2] if k % 3 else " ") for k in picked))
    return docs + real_english_documents()[::20]


def test_repetition_counts_equal_datatrove_helpers() -> None:
    """Every n-gram count equals what datatrove's own helpers compute on datatrove's words
    (so a collision or a wrong repeat shows even where it would not flip a verdict)."""
    from datatrove.pipeline.filters.gopher_repetition_filter import (find_all_duplicate, find_top_duplicate,
                                                                     get_n_grams)
    from datatrove.utils.text import split_into_words

    stage = GopherRepetition()
    docs = repetition_documents()
    ours = stage.features(pa.record_batch({"text": docs}))[:, 7:].astype(int).tolist()
    theirs = []
    for text in docs:
        words = split_into_words(text, "en")
        top = [find_top_duplicate(grams) if (grams := get_n_grams(words, n)) else 0 for n, _ in stage.top_n_grams]
        theirs.append(top + [find_all_duplicate(words, n) for n, _ in stage.dup_n_grams])
    differ = {i: (o, t) for i, (o, t) in enumerate(zip(ours, theirs)) if o != t}
    assert differ == {}
    assert sum(any(row[3:]) for row in theirs) > 50  # documents with repeated 5- to 10-grams


def chinese_notes() -> list[str]:
    return [p.read_text(encoding="utf-8") for p in sorted((CORPORA / "text" / "zh_notes").glob("*.txt"))]


def chinese_junk() -> dict[str, tuple[str, str, str]]:
    """Chinese boilerplate and garbage: (text, the stage that must drop it, the rule)."""
    notes = chinese_notes()
    menu = ("首页 | 新闻 | 体育 | 财经 | 科技 | 娱乐 | 汽车 | 房产 | 教育 | 旅游 | 登录 | 注册\n"
            "帮助中心 | 关于我们 | 联系我们 | 网站地图 | 广告服务 | 招聘信息 | 意见反馈\n"
            "版权所有 © 2024 某某网络科技有限公司 京ICP备12345678号 京公网安备11010802000000号")
    # A list of links titled with the notes' own headings.
    titles = [line.lstrip("# ").strip() for note in notes for line in note.splitlines() if line.startswith("#")]
    links = "\n".join(f"- [{t}](https://example.com/p/{i})" for i, t in enumerate(titles[:30]))
    lines = [line for line in notes[1].splitlines() if len(line) > 40]
    repeated = "\n".join([lines[0]] * 3 + lines[1:4] * 4)
    rng = np.random.default_rng(0)
    random_han = "".join(chr(c) for c in rng.integers(0x4E00, 0xA000, size=800))
    # A real note's UTF-8 bytes read as GBK: the garbled text a wrong charset guess gives.
    mojibake = notes[3].encode("utf-8").decode("gbk", errors="replace")
    return {
        "menu": (menu, "gopher_quality", "gopher_enough_stop_words"),
        "links": (links, "gopher_quality", "gopher_too_many_bullets"),
        "repeated lines": (repeated, "gopher_repetition", "dup_line_frac"),
        "random characters": (random_han, "gopher_quality", "gopher_enough_stop_words"),
        "mojibake": (mojibake, "gopher_quality", "gopher_enough_stop_words"),
    }


@pytest.mark.parametrize("stage", [GopherQuality, GopherRepetition])
def test_real_chinese_notes_pass_with_chinese_defaults(stage) -> None:
    notes = chinese_notes()
    assert len(notes) == 5
    assert our_verdicts(stage(language="zh"), notes) == [(True, None)] * 5
    # English defaults would drop them: a Chinese word is one character, below the mean of 3.
    assert all(not kept for kept, _ in our_verdicts(GopherQuality(), notes))


@pytest.mark.parametrize("kind", sorted(chinese_junk()))
def test_chinese_boilerplate_and_garbage_fail(kind: str) -> None:
    text, stage_name, rule = chinese_junk()[kind]
    stage = {"gopher_quality": GopherQuality, "gopher_repetition": GopherRepetition}[stage_name]
    assert our_verdicts(stage(language="zh"), [text]) == [(False, rule)]


def test_japanese_prose_passes_with_japanese_defaults() -> None:
    book = (CORPORA / "text" / "wagahaiwa_nekodearu.txt").read_text(encoding="utf-8")
    chunks = [book[i:i + 5000] for i in range(0, len(book), 50_000)]
    for stage in (GopherQuality(language="ja"), GopherRepetition(language="ja")):
        assert our_verdicts(stage, chunks) == [(True, None)] * len(chunks)


def test_script_aware_words_are_text_stats_words() -> None:
    # One definition of a word for Chinese and Japanese, two implementations: the splitter the
    # Gopher rules use and the counter behind text_stats and blocklist.
    from tokpipe import _core
    from tokpipe.pipeline.stages import TextStats

    docs = chinese_notes() + [(CORPORA / "text" / "wagahaiwa_nekodearu.txt").read_text(encoding="utf-8")[:20000]]
    counts = TextStats().process(pa.record_batch({"text": docs})).kept.column("stat_words").to_pylist()
    assert [len(_core.words(d, "zh")) for d in docs] == counts
