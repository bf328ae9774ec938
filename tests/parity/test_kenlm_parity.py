"""n-gram models against the ``kenlm`` module: every sentence's log10 probability must equal
``kenlm.Model.score`` within 1e-4, for models we train (orders 2..5, pruned or not; words,
characters and tokenizer tokens) and for ARPA files we did not write (hand-built and random
ones, with arbitrary backoffs and missing lower-order n-grams). Trained models must be
normalised (checked through kenlm's own state API) and use Chen & Goodman's discounts,
recomputed here from the corpus."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from pathlib import Path

import kenlm
import pytest

from tests.conftest import CORPORA, VOCAB
from tokpipe import LanguageModel, Tokenizer, train_lm

TOL = 1e-4


def _lines(name: str, limit: int | None = None) -> list[str]:
    lines = (CORPORA / "text" / name).read_text(encoding="utf-8").split("\n")
    return lines[:limit] if limit else lines


def _zh_lines() -> list[str]:
    out: list[str] = []
    for path in sorted((CORPORA / "text" / "zh_notes").glob("*.txt")):
        out.extend(path.read_text(encoding="utf-8").split("\n"))
    return out


@pytest.fixture(scope="module")
def english() -> tuple[list[str], list[str]]:
    """(training lines, held-out lines): botchan, plus half of tinyshakespeare held out."""
    shakespeare = _lines("tinyshakespeare.txt")
    half = len(shakespeare) // 2
    return _lines("botchan.txt") + shakespeare[:half], shakespeare[half:half + 3000]


def assert_same_scores(ours: LanguageModel, theirs: kenlm.Model, sentences: list[str],
                       bos: bool = True, eos: bool = True) -> None:
    worst, where = 0.0, ""
    for s in sentences:
        d = abs(ours.score(s, bos, eos) - theirs.score(s, bos=bos, eos=eos))
        if d > worst:
            worst, where = d, s
    assert worst <= TOL, f"{worst} on {where!r}"


@pytest.mark.parametrize("order", [2, 3, 4, 5])
@pytest.mark.parametrize("prune", [(), (0, 1), (0, 0, 1, 2)])
def test_trained_word_models_score_as_kenlm(tmp_path: Path, english, order: int, prune: tuple[int, ...]) -> None:
    train, held_out = english
    prune = prune[:order]
    lm = train_lm(texts=["\n".join(train)], order=order, prune=prune, show_progress=False)
    path = tmp_path / "m.arpa"
    lm.save(path)
    theirs = kenlm.Model(str(path))
    assert theirs.order == order
    ours = LanguageModel.load(path)
    assert ours.counts == lm.kept
    if any(prune):
        assert lm.kept[-1] < lm.counted[-1]
    sentences = train[::7] + held_out + ["", "   ", "unseen-word another-one", "the the the the the"]
    assert_same_scores(ours, theirs, sentences)
    assert_same_scores(ours, theirs, held_out[:300], bos=False, eos=True)
    assert_same_scores(ours, theirs, held_out[:300], bos=True, eos=False)
    assert_same_scores(ours, theirs, held_out[:300], bos=False, eos=False)


def test_character_models_for_chinese_and_japanese(tmp_path: Path) -> None:
    """Words are characters (the text spaced out first), the usual way without a segmenter."""
    def spaced(lines: list[str]) -> list[str]:
        return [" ".join(ch for ch in line if not ch.isspace()) for line in lines]

    for lines in (_zh_lines(), _lines("wagahaiwa_nekodearu.txt", 6000)):
        chars = spaced(lines)
        cut = len(chars) * 4 // 5
        lm = train_lm(texts=["\n".join(chars[:cut])], order=4, prune=(0, 0, 1), show_progress=False)
        path = tmp_path / "c.arpa"
        lm.save(path)
        assert_same_scores(LanguageModel.load(path), kenlm.Model(str(path)), chars[::5] + chars[cut:])


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-level alphabet (``bytes_to_unicode`` in openai/gpt-2's encoder.py)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def test_tokenizer_models_score_as_kenlm_on_the_joined_tokens(tmp_path: Path, english) -> None:
    """With a tokenizer, a line's words are its tokens in byte-level form; kenlm scoring those
    joined by spaces must give our score of the raw line."""
    tok = Tokenizer.from_file(VOCAB / "gpt-neo-tokenizer.json")
    alphabet = _bytes_to_unicode()

    def words(line: str) -> str:
        return " ".join("".join(alphabet[b] for b in tok.token_bytes(i)) for i in tok.encode(line))

    ja = _lines("wagahaiwa_nekodearu.txt", 4000)
    train = english[0][:4000] + ja[:3000]
    lm = train_lm(texts=["\n".join(train)], order=3, tokenizer=tok, show_progress=False)
    path = tmp_path / "t.arpa"
    lm.save(path)
    theirs = kenlm.Model(str(path))
    ours = LanguageModel.load(path, tokenizer=tok)
    worst = 0.0
    for line in train[::9] + ja[3000:] + english[1][:500] + ["multiple   spaces\tand tabs", ""]:
        score, n = ours.score_line(line)
        joined = words(line)
        assert n == len(joined.split())
        worst = max(worst, abs(score - theirs.score(joined)))
    assert worst <= TOL


def _spare_slots(count: int) -> int:
    """Entries kenlm's probing table for ``count`` n-grams takes beyond them: it has
    ``max(count + 1, int(1.5 * count))`` buckets and must keep one empty."""
    return max(count + 1, int(1.5 * count)) - count - 1


def _random_arpa(rng: random.Random, order: int, with_unk: bool) -> tuple[str, list[str]] | None:
    """An ARPA file no trainer would write: random probabilities and backoffs (positive ones
    too, zero ones, missing ones), n-grams whose suffixes are missing (legal: KenLM fills them
    in), markers in odd places. Every n-gram's context is present, which ARPA requires."""
    vocab = [f"w{i}" for i in range(rng.randint(5, 40))]
    unigrams = ["<s>", "</s>"] + vocab + (["<unk>"] if with_unk else [])
    rng.shuffle(unigrams)
    grams: list[list[tuple[str, ...]]] = [[(w,) for w in unigrams]]
    # The suffixes kenlm will add as blanks, per order: its probing tables have spare room for
    # only so many.
    blanks: list[set[tuple[str, ...]]] = [set()]
    for n in range(2, order + 1):
        lower = grams[-1]
        found: set[tuple[str, ...]] = set()
        for _ in range(rng.randint(5, 25 * n)):
            context = rng.choice(lower)
            extending = [g[-1] for g in lower if g[:-1] == context[1:]] if n > 2 else []
            if extending and rng.random() < 0.8:
                found.add(context + (rng.choice(extending),))
                continue
            gram = context + (rng.choice(unigrams),)
            missing = []
            for k in range(n - 1, 1, -1):
                suffix = gram[n - k:]
                if suffix in set(grams[k - 1]) or suffix in blanks[k - 1]:
                    break
                missing.append((k, suffix))
            if all(len(blanks[k - 1]) + 1 <= _spare_slots(len(grams[k - 1])) for k, _ in missing):
                for k, suffix in missing:
                    blanks[k - 1].add(suffix)
                found.add(gram)
        if not found:
            return None  # the caller draws again
        grams.append(sorted(sorted(found), key=lambda g: rng.random()))  # sorted first: sets' order varies
        blanks.append(set())

    def weight(n: int) -> str:
        prob = f"{-rng.uniform(0.01, 4.0):.6f}" if rng.random() > 0.02 else "0"
        if n == order:
            return prob + ("\t0" if rng.random() < 0.1 else "")
        choice = rng.random()
        if choice < 0.15:
            return prob  # no backoff column
        if choice < 0.25:
            return prob + "\t0"
        return prob + f"\t{rng.uniform(-2.0, 0.7):.6f}"

    out = ["\\data\\"] + [f"ngram {n}={len(g)}" for n, g in enumerate(grams, start=1)] + [""]
    for n, g in enumerate(grams, start=1):
        out.append(f"\\{n}-grams:")
        for gram in g:
            p, _, b = weight(n).partition("\t")
            out.append(f"{p}\t{' '.join(gram)}" + (f"\t{b}" if b else ""))
        out.append("")
    out.append("\\end\\")
    return "\n".join(out) + "\n", vocab


@pytest.mark.parametrize("seed", range(40))
def test_random_arpa_files_score_as_kenlm(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    order = 2 + seed % 5
    drawn = None
    while drawn is None:
        drawn = _random_arpa(rng, order, with_unk=seed % 3 != 0)
    text, vocab = drawn
    path = tmp_path / "r.arpa"
    path.write_text(text, encoding="utf-8")
    theirs = kenlm.Model(str(path))
    ours = LanguageModel.load(path)
    words = vocab + ["oov", "<unk>", "</s>", "<s>"]
    sentences = [" ".join(rng.choice(words if rng.random() < 0.1 else vocab) for _ in range(rng.randint(0, 30)))
                 for _ in range(300)]
    for bos, eos in [(True, True), (False, True), (True, False)]:
        assert_same_scores(ours, theirs, sentences, bos, eos)


def test_hand_built_arpa_with_missing_suffixes(tmp_path: Path) -> None:
    """SRILM-style pruning leaves "x a b" without "a b": kenlm fills the gap with the
    backed-off probability, and so must we."""
    path = tmp_path / "h.arpa"
    path.write_text("""\\data\\
ngram 1=6
ngram 2=4
ngram 3=2

\\1-grams:
-1.0\t<s>\t-0.5
-1.2\t</s>
-0.9\ta\t-0.25
-1.5\tb\t-0.1
-2.0\tx\t-0.2
-3.0\t<unk>

\\2-grams:
-0.5\tx a\t-0.3
-0.6\t<s> x\t-0.4
-0.7\ta </s>
-0.2\tb x\t0.3

\\3-grams:
-0.1\tx a b
-0.05\t<s> x a

\\end\\
""", encoding="utf-8")
    sentences = ["x a b", "a b", "b x a b", "x a", "a", "q x a b q", "b x a b x a b", "b b b x x a"]
    assert_same_scores(LanguageModel.load(path), kenlm.Model(str(path)), sentences)


def _unigrams(arpa: Path) -> list[str]:
    words, inside = [], False
    for line in arpa.read_text(encoding="utf-8").split("\n"):
        if line == "\\1-grams:":
            inside = True
        elif inside and not line:
            break
        elif inside:
            words.append(line.split("\t")[1])
    return words


@pytest.mark.parametrize("prune", [(), (0, 1, 1)])
def test_trained_models_are_normalised(tmp_path: Path, english, prune: tuple[int, ...]) -> None:
    """sum over the vocabulary (``<s>`` excepted) of P(w | context) is 1, by kenlm's own scores."""
    lm = train_lm(texts=["\n".join(english[0][:5000])], order=3, prune=prune, show_progress=False)
    path = tmp_path / "n.arpa"
    lm.save(path)
    model = kenlm.Model(str(path))
    vocab = [w for w in _unigrams(path) if w != "<s>"]
    for context, bos in [((), False), ((), True), (("the",), True), (("of", "the"), False),
                         (("I", "am"), False), (("zzz", "unseen"), False), (("said", "the"), True)]:
        state = kenlm.State()
        (model.BeginSentenceWrite if bos else model.NullContextWrite)(state)
        for word in context:
            out = kenlm.State()
            model.BaseScore(state, word, out)
            state = out
        total = sum(10.0 ** model.BaseScore(state, w, kenlm.State()) for w in vocab)
        assert abs(total - 1.0) < 1e-3, (context, bos, total)


def _adjusted_counts(lines: list[str], order: int) -> list[Counter[tuple[str, ...]]]:
    """Kneser-Ney adjusted counts, from scratch: the raw count for the highest order and for
    n-grams starting with <s>, else the number of distinct words seen before the n-gram."""
    raw: list[Counter[tuple[str, ...]]] = [Counter() for _ in range(order)]
    for line in lines:
        s = ["<s>"] + [w for w in line.split() if w not in ("<s>", "</s>", "<unk>")] + ["</s>"]
        for end in range(1, len(s)):
            for n in range(1, min(order, end + 1) + 1):
                raw[n - 1][tuple(s[end + 1 - n:end + 1])] += 1
    adjusted: list[Counter[tuple[str, ...]]] = []
    for n in range(1, order + 1):
        if n == order:
            adjusted.append(raw[n - 1])
            continue
        before: defaultdict[tuple[str, ...], set[str]] = defaultdict(set)
        for gram in raw[n]:
            before[gram[1:]].add(gram[0])
        adjusted.append(Counter({g: (c if g[0] == "<s>" else len(before[g])) for g, c in raw[n - 1].items()}))
    return adjusted


def test_discounts_are_chen_and_goodmans(english) -> None:
    lines = english[0][:8000]
    order = 4
    lm = train_lm(texts=["\n".join(lines)], order=order, show_progress=False)
    for n, (adjusted, theirs) in enumerate(zip(_adjusted_counts(lines, order), lm.discounts), start=1):
        t = Counter(adjusted.values())
        n1, n2, n3, n4 = t[1], t[2], t[3], t[4]
        y = n1 / (n1 + 2 * n2)
        expected = (1 - 2 * y * n2 / n1, 2 - 3 * y * n3 / n2, 3 - 4 * y * n4 / n3)
        assert lm.count_of_counts[n - 1] == (n1, n2, n3, n4), n
        assert theirs == pytest.approx(expected, rel=1e-12), n
