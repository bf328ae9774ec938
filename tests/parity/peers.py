"""Reference encoders built offline from the shared vocabulary files.

tiktoken's own encoding constructors (``tiktoken_ext.openai_public``) download their rank files;
we hand them the local copies instead, so the pattern and special tokens under test are the
ones tiktoken itself publishes rather than copies written here.
"""

from __future__ import annotations

import functools
import gzip
import tempfile
from pathlib import Path

import tiktoken
import tiktoken.load
import tiktoken_ext.openai_public as openai_public

from tests.conftest import VOCAB

# (tiktoken constructor, local rank file, tokpipe pattern preset)
ENCODINGS = {
    "cl100k": (openai_public.cl100k_base, "cl100k_base.tiktoken.gz", "cl100k"),
    "o200k": (openai_public.o200k_base, "o200k_base.tiktoken.gz", "o200k"),
}


def _local_ranks(gz_name: str) -> dict[bytes, int]:
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / gz_name.removesuffix(".gz")
        plain.write_bytes(gzip.decompress((VOCAB / gz_name).read_bytes()))
        return tiktoken.load.load_tiktoken_bpe(str(plain))


@functools.lru_cache(maxsize=None)
def tiktoken_encoding(name: str) -> tiktoken.Encoding:
    """tiktoken's cl100k_base / o200k_base / gpt2 (r50k) built from the shared files."""
    if name == "gpt2":
        original = openai_public.data_gym_to_mergeable_bpe_ranks

        def local(**_: object) -> dict[bytes, int]:
            return original(vocab_bpe_file=str(VOCAB / "gpt2_vocab.bpe"), encoder_json_file=str(VOCAB / "gpt2_encoder.json"))

        openai_public.data_gym_to_mergeable_bpe_ranks = local
        try:
            spec = openai_public.gpt2()
        finally:
            openai_public.data_gym_to_mergeable_bpe_ranks = original
    else:
        constructor, gz_name, _ = ENCODINGS[name]
        original = openai_public.load_tiktoken_bpe
        openai_public.load_tiktoken_bpe = lambda *_a, **_k: _local_ranks(gz_name)
        try:
            spec = constructor()
        finally:
            openai_public.load_tiktoken_bpe = original
    spec.pop("explicit_n_vocab", None)
    return tiktoken.Encoding(**spec)
