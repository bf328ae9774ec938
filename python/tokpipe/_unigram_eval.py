"""Private: encode with Unigram pieces trained by ``_core.UnigramTrainer`` through
sentencepiece's own ``SentencePieceProcessor``, and measure a model's quality.

Until tokpipe has its own Unigram encoder and ``.model`` writer, the tests and the benchmark
judge trained pieces this way: the pieces go into a sentencepiece ``ModelProto`` (through the
``sentencepiece_model_pb2`` module that ships in the ``sentencepiece`` package) with the
identity normalizer, the same whitespace options, and the same special ids.
"""
from __future__ import annotations

from collections.abc import Iterable

_KIND_TO_TYPE = {"normal": 1, "unknown": 2, "control": 3, "user_defined": 4, "byte": 6}

# sentencepiece scores an unknown piece this far under the lowest piece when segmenting.
UNKNOWN_PENALTY = 10.0


def spm_model_bytes(trained: dict) -> bytes:
    """A serialized sentencepiece ``ModelProto`` holding ``trained["pieces"]`` (the dict
    ``_core.UnigramTrainer.train`` returns). Needs the ``sentencepiece`` package."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    m = pb.ModelProto()
    spec = m.trainer_spec
    spec.model_type = pb.TrainerSpec.UNIGRAM
    spec.vocab_size = len(trained["pieces"])
    spec.unk_id = trained["unk_id"]
    spec.bos_id = trained["bos_id"]
    spec.eos_id = trained["eos_id"]
    spec.pad_id = trained["pad_id"]
    spec.byte_fallback = trained["byte_fallback"]
    norm = m.normalizer_spec
    norm.name = trained["normalization"]
    norm.add_dummy_prefix = trained["add_dummy_prefix"]
    norm.remove_extra_whitespaces = trained["remove_extra_whitespaces"]
    norm.escape_whitespaces = True
    for piece, score, kind in trained["pieces"]:
        p = m.pieces.add()
        p.piece = piece
        p.score = score
        p.type = _KIND_TO_TYPE[kind]
    return m.SerializeToString()


def processor(model: bytes):
    """A ``SentencePieceProcessor`` loaded from serialized model bytes."""
    import sentencepiece as spm

    return spm.SentencePieceProcessor(model_proto=model)


def quality(sp, sentences: Iterable[str]) -> dict:
    """How well a model fits ``sentences`` (held-out text, normalized like the training text):

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
