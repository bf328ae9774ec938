"""Measure a Unigram model's quality, for the trainer's tests (``test_train_unigram.py``) and
benchmark (``benches/python/bench_train_unigram.py``); not shipped in the package.

Models are judged by sentencepiece's own ``SentencePieceProcessor`` (its Viterbi, its
normalizer), whoever trained them: tokpipe's trained tokenizers are saved as the ``.model``
they are (``Tokenizer.sentencepiece_bytes``) and loaded there like sentencepiece's.
"""
from __future__ import annotations

from collections.abc import Iterable

# sentencepiece scores an unknown piece this far under the lowest piece when segmenting.
UNKNOWN_PENALTY = 10.0


def processor(model: bytes):
    """A ``SentencePieceProcessor`` loaded from serialized model bytes."""
    import sentencepiece as spm

    return spm.SentencePieceProcessor(model_proto=model)


def quality(sp, sentences: Iterable[str]) -> dict:
    """How well a model fits ``sentences`` (held-out raw text; the model normalizes it):

    - ``tokens_per_byte``: pieces of the best segmentation per UTF-8 byte (lower is better);
    - ``log_likelihood``: the mean, over sentences, of the summed scores of the best
      segmentation's pieces, an unknown piece scoring the lowest score minus 10 as it does in
      sentencepiece's segmentation (higher is better);
    - ``unknown``: unknown pieces in all.
    """
    n = sp.get_piece_size()
    scores = [sp.get_score(i) for i in range(n)]
    normal = [s for i, s in enumerate(scores) if sp.is_unknown(i) is False and not sp.is_control(i)
              and not sp.is_byte(i) and not sp.is_unused(i)]
    unknown_score = min(normal) - UNKNOWN_PENALTY
    tokens = nbytes = sentences_seen = unknown = 0
    log_likelihood = 0.0
    for s in sentences:
        if not s:
            continue
        ids = sp.encode(s)
        sentences_seen += 1
        tokens += len(ids)
        nbytes += len(s.encode("utf-8"))
        for i in ids:
            if sp.is_unknown(i):
                unknown += 1
                log_likelihood += unknown_score
            else:
                log_likelihood += scores[i]
    return {
        "sentences": sentences_seen,
        "tokens_per_byte": tokens / nbytes,
        "log_likelihood": log_likelihood / sentences_seen,
        "unknown": unknown,
    }
