#!/usr/bin/env python3
"""Writes spm_charsmaps/*.bin.zst: the precompiled charsmap of each of sentencepiece's built-in
normalization rules, as sentencepiece puts it in a model's `normalizer_spec`.

sentencepiece compiles these rules into its binary and copies the blob into every model it
trains; the Unigram trainer needs the same blobs without sentencepiece, so they are read off
the installed sentencepiece (a dev-only dependency) by training a tiny model with each rule
and taking `normalizer_spec.precompiled_charsmap`. The files are zstd-compressed (about 0.24
MB each raw); `identity` has no charsmap and no file.

    python3 gen_spm_charsmaps.py           # (re)write the files
    python3 gen_spm_charsmaps.py --check   # exit 1 when a file differs from sentencepiece's blob
"""
from __future__ import annotations

import io
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "spm_charsmaps"

# The rules with a charsmap; `identity` is the fifth, empty one.
RULES = ("nmt_nfkc", "nfkc", "nmt_nfkc_cf", "nfkc_cf")


def charsmap(rule: str) -> bytes:
    """The precompiled charsmap sentencepiece writes into a model trained with ``rule``."""
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(["a b c"] * 4), model_writer=buf, model_type="char",
                                   vocab_size=6, normalization_rule_name=rule, minloglevel=2, num_threads=1)
    model = pb.ModelProto()
    model.ParseFromString(buf.getvalue())
    return model.normalizer_spec.precompiled_charsmap


def path(rule: str) -> Path:
    return OUT / f"{rule}.bin.zst"


def committed(rule: str) -> bytes:
    """The blob in the committed file, decompressed."""
    import zstandard

    return zstandard.ZstdDecompressor().decompress(path(rule).read_bytes())


def main() -> int:
    import zstandard

    check = "--check" in sys.argv[1:]
    stale = []
    OUT.mkdir(exist_ok=True)
    for rule in RULES:
        blob = charsmap(rule)
        if check:
            if not path(rule).exists() or committed(rule) != blob:
                stale.append(rule)
            continue
        path(rule).write_bytes(zstandard.ZstdCompressor(level=19).compress(blob))
    if stale:
        print(f"differs from the installed sentencepiece: {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
