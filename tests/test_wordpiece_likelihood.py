"""``train_wordpiece(score="likelihood")`` against a brute-force recomputation of the corpus
log-likelihood (issue 23).

On small random corpora the trainer's merges are replayed from its vocabulary (id order). At
every step each candidate pair is merged, left to right, in a copy of the corpus and the
log-likelihood under a unigram model over the symbols, L = Σ c(s) ln(c(s) / N), is recomputed
from scratch. The pair the trainer merged must have the largest gain, and that gain must
equal the closed form of the trainer's module notes.
"""

from __future__ import annotations

import math
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

import tokpipe

SPECIALS = ("[UNK]",)
Split = list[tuple[list[str], int]]


def _join(a: str, b: str) -> str:
    return a + b.removeprefix("##")


def _apply(split: Split, a: str, b: str) -> tuple[Split, int]:
    """``split`` with (a, b) merged left to right in every word, and how many merges applied."""
    merged, applied = [], 0
    for syms, n in split:
        out, i = [], 0
        while i < len(syms):
            if i + 1 < len(syms) and syms[i] == a and syms[i + 1] == b:
                out.append(_join(a, b))
                applied += n
                i += 2
            else:
                out.append(syms[i])
                i += 1
        merged.append((out, n))
    return merged, applied


def _unit_counts(split: Split) -> Counter[str]:
    counts: Counter[str] = Counter()
    for syms, n in split:
        for s in syms:
            counts[s] += n
    return counts


def _log_likelihood(split: Split) -> float:
    counts = _unit_counts(split)
    total = sum(counts.values())
    return math.fsum(c * math.log(c / total) for c in counts.values())


def _closed_form(split: Split, a: str, b: str, applied: int) -> float:
    """ΔL from the module notes: only a, b, the merged symbol and N change."""
    def g(x: int) -> float:
        return x * math.log(x) if x else 0.0

    counts = _unit_counts(split)
    after = Counter(counts)
    after[a] -= applied
    after[b] -= applied
    after[_join(a, b)] += applied
    total = sum(counts.values())
    changed = {a, b, _join(a, b)}
    return math.fsum(g(after[s]) - g(counts[s]) for s in changed) + g(total) - g(total - applied)


def _candidates(split: Split, min_frequency: int) -> tuple[Counter[tuple[str, str]], dict]:
    """The pairs seen at least ``min_frequency`` times, and each one's brute-force gain in L
    with the number of merges it applies."""
    pairs: Counter[tuple[str, str]] = Counter()
    for syms, n in split:
        for pair in zip(syms, syms[1:]):
            pairs[pair] += n
    before = _log_likelihood(split)
    gains = {}
    for (a, b), count in pairs.items():
        if count >= min_frequency:
            after, applied = _apply(split, a, b)
            gains[a, b] = (_log_likelihood(after) - before, applied)
    return pairs, gains


def _replays(split: Split, vocab: list[str], done: int, ids: dict[str, int], min_frequency: int) -> str | None:
    """None when the merges from ``split`` on can make ``vocab[done:]`` (in order), each one
    the pair of the largest brute-force gain; else why not.

    A merge making a token the vocabulary already has leaves no trace in it, so such merges
    are followed here rather than read. Gains within 1e-9 of the largest are tied: the tie
    rule (more frequent pair, then smaller ids) orders them, but the trainer's ``f64`` gains
    may order pairs tied only through identities of logarithms (4 ln 4 = 8 ln 2) otherwise,
    so every tied choice is tried, depth first.
    """
    while done < len(vocab):
        pairs, gains = _candidates(split, min_frequency)
        if not gains:
            return f"no pair left to merge, but the trainer made {vocab[done:]}"
        best = max(gain for gain, _ in gains.values())
        tied = sorted((p for p, (gain, _) in gains.items() if gain >= best - 1e-9 * max(1.0, abs(best))),
                      key=lambda p: (-pairs[p], ids[p[0]], ids[p[1]]))
        for a, b in tied:
            gain, applied = gains[a, b]
            assert math.isclose(gain, _closed_form(split, a, b, applied), rel_tol=1e-9, abs_tol=1e-9)
        # The trainer's choice must be among the tied pairs: one making the next token, or
        # one making a token it has already.
        allowed = [p for p in tied if _join(*p) == vocab[done] or ids.get(_join(*p), len(vocab)) < done]
        if not allowed:
            made = [gains[p][0] for p in gains if _join(*p) == vocab[done]]
            a, b = tied[0]
            return (f"merge {done}: the trainer made {vocab[done]!r} (gain {max(made, default=float('nan')):.6f}), "
                    f"the best merge is {a!r} + {b!r} -> {_join(a, b)!r} (gain {best:.6f})")
        if len(allowed) > 1:
            failures = [_replays(_apply(split, *p)[0], vocab, done + (_join(*p) == vocab[done]), ids, min_frequency)
                        for p in allowed]
            return None if None in failures else failures[0]
        a, b = allowed[0]
        done += _join(a, b) == vocab[done]
        split, _ = _apply(split, a, b)
    return None


def check_likelihood_merges(words: dict[str, int], merges: int, min_frequency: int, score: str) -> None:
    """Train on ``words`` (each repeated its count) and replay the merges by brute force."""
    text = " ".join(w for w, n in words.items() for _ in range(n))
    initial = [*SPECIALS, *sorted({c for w in words for c in w})]
    initial += [f"##{c}" for c in sorted({c for w in words for c in w[1:]})]
    tok = tokpipe.train_wordpiece(texts=[text], vocab_size=len(initial) + merges, min_frequency=min_frequency,
                                  score=score, special_tokens=SPECIALS, unk_token="[UNK]", show_progress=False)
    vocab = [tok.id_to_token(i) for i in range(tok.vocab_size)]
    assert vocab[:len(initial)] == initial
    ids = {t: i for i, t in enumerate(vocab)}
    split: Split = [([c if i == 0 else f"##{c}" for i, c in enumerate(w)], n) for w, n in words.items()]
    failure = _replays(split, vocab, len(initial), ids, min_frequency)
    assert failure is None, failure


words_strategy = st.dictionaries(st.text(alphabet="abcd", min_size=1, max_size=7), st.integers(1, 6),
                                 min_size=1, max_size=10)


@settings(max_examples=400, deadline=None)
@given(words=words_strategy, merges=st.integers(1, 25), min_frequency=st.integers(1, 3))
def test_each_merge_has_the_largest_likelihood_gain(words: dict[str, int], merges: int, min_frequency: int) -> None:
    check_likelihood_merges(words, merges, min_frequency, "likelihood")


def test_self_pairs_count_the_merges_applied_not_the_windows() -> None:
    # "##a ##a" occurs in runs of 5: 4 windows, but only 2 merges apply per run.
    check_likelihood_merges({"baaaaa": 6, "bcac": 3, "cab": 2, "ab": 2}, 12, 1, "likelihood")


def test_pairs_tied_through_identities_of_logarithms() -> None:
    # After "a ##c", "ac ##c": "acc ##a", "##c ##b" and "##b ##c" all gain 2 ln 2 − 6 ln 3 + g(14)
    # − g(16) (since g(4) − g(6) = g(2) − 2·g(3)), which f64 rounds apart.
    check_likelihood_merges({"accaa": 2, "bbca": 1, "cacbcb": 1}, 12, 1, "likelihood")


def test_merges_into_an_existing_token() -> None:
    # "a ##bc" and "ab ##c" both make "abc".
    check_likelihood_merges({"abc": 7, "abd": 5, "bcd": 6, "abcbc": 2, "dbc": 3, "da": 2}, 14, 1, "likelihood")


def test_pmi_is_not_the_likelihood() -> None:
    # The ratio rule merges "x ##y" (3 / (3 · 3)) first; the likelihood gains more from "a ##b".
    words = {"ab": 40, "ac": 10, "db": 10, "xy": 3}
    text = " ".join(w for w, n in words.items() for _ in range(n))
    def last(score: str) -> str:
        # [UNK], a b c d x y, ##b ##c ##y, then one merge.
        tok = tokpipe.train_wordpiece(texts=[text], vocab_size=11, min_frequency=1, score=score,
                                      special_tokens=SPECIALS, unk_token="[UNK]", show_progress=False)
        return tok.id_to_token(tok.vocab_size - 1)
    assert (last("likelihood"), last("pmi"), last("frequency")) == ("ab", "xy", "ab")
