"""Reference encoders built offline from the shared vocabulary files, and sentencepiece models
trained here.

tiktoken's own encoding constructors (``tiktoken_ext.openai_public``) download their rank files;
we hand them the local copies instead, so the pattern and special tokens under test are the
ones tiktoken itself publishes rather than copies written here.
"""

from __future__ import annotations

import functools
import gzip
import io
import tempfile
from pathlib import Path

import sentencepiece as spm

import tiktoken
import tiktoken.load
import tiktoken_ext.openai_public as openai_public

from tests.conftest import CORPORA, VOCAB

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


# -- sentencepiece models trained here (byte fallback, user-defined symbols, other rules) --

USER_DEFINED = ["<sep>", "[MASK]", "@@", "日本", "New York"]

TRAINED = {
    # Byte fallback (unknown characters as <0xNN> pieces), user-defined and extra control
    # symbols.
    "bytes_user_defined": dict(byte_fallback=True, user_defined_symbols=USER_DEFINED, control_symbols=["<ctl>"]),
    "nfkc": dict(normalization_rule_name="nfkc"),
    "identity_suffix": dict(normalization_rule_name="identity", treat_whitespace_as_suffix=True,
                            remove_extra_whitespaces=False),
    # Pieces across spaces, no dummy prefix, case folding, a pad piece and another unk surface.
    "nfkc_cf_no_split": dict(normalization_rule_name="nmt_nfkc_cf", add_dummy_prefix=False,
                             split_by_whitespace=False, pad_id=3, unk_surface="<?>"),
    "whitespace_pieces": dict(allow_whitespace_only_pieces=True, remove_extra_whitespaces=False,
                              split_digits=True),
}


@functools.lru_cache(maxsize=None)
def trained(name: str) -> bytes:
    """A Unigram model sentencepiece trains on botchan and some Japanese (3000 pieces)."""
    lines = (CORPORA / "text" / "botchan.txt").read_text(encoding="utf-8").splitlines()
    lines += (CORPORA / "text" / "wagahaiwa_nekodearu.txt").read_text(encoding="utf-8").splitlines()[:300]
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=buf, model_type="unigram",
                                   vocab_size=3000, num_threads=2, minloglevel=2, **TRAINED[name])
    return buf.getvalue()


# -- sentencepiece BPE models trained here (issue 7: Llama-1/2 and Mistral style) -------------

def _corpus_lines(corpus: str) -> list[str]:
    text = CORPORA / "text"
    english = (text / "botchan.txt").read_text(encoding="utf-8").splitlines()
    japanese = (text / "wagahaiwa_nekodearu.txt").read_text(encoding="utf-8").splitlines()
    chinese = [line for path in sorted((text / "zh_notes").glob("*.txt"))
               for line in path.read_text(encoding="utf-8").splitlines()]
    return {
        "en": english + (text / "tinyshakespeare.txt").read_text(encoding="utf-8").splitlines(),
        "ja": japanese,
        "zh": chinese,
        "mixed": english + japanese[:300] + chinese[:300],
    }[corpus]


BPE_TRAINED = {
    # English, Japanese and Chinese at a few sizes, Llama's options (byte fallback, digits
    # split), sentencepiece's default normalization (nmt_nfkc).
    "en_bytes_1000": ("en", dict(vocab_size=1000, byte_fallback=True, split_digits=True)),
    "ja_bytes_8000": ("ja", dict(vocab_size=8000, byte_fallback=True, split_digits=True)),
    "zh_bytes_3000": ("zh", dict(vocab_size=3000, byte_fallback=True, split_digits=True)),
    # User-defined pieces (matched whole, never merged) and an extra control symbol.
    "mixed_user_defined": ("mixed", dict(vocab_size=4000, byte_fallback=True, split_digits=True,
                                         user_defined_symbols=USER_DEFINED, control_symbols=["<ctl>"])),
    # Llama's options: identity rules, spaces kept as they are, pieces of runs of spaces (▁▁),
    # rare characters in bytes.
    "llama_like": ("mixed", dict(vocab_size=4000, byte_fallback=True, split_digits=True,
                                 normalization_rule_name="identity", remove_extra_whitespaces=False,
                                 allow_whitespace_only_pieces=True, character_coverage=0.9995)),
    # No byte fallback: characters outside the pieces are <unk>, runs of them one <unk>.
    "unk_no_fallback": ("mixed", dict(vocab_size=2000, character_coverage=0.995)),
    # Whitespace as a suffix (words end with ▁), and pieces across whitespace.
    "suffix_identity": ("mixed", dict(vocab_size=3000, byte_fallback=True, treat_whitespace_as_suffix=True,
                                      normalization_rule_name="identity")),
    "across_whitespace": ("en", dict(vocab_size=2000, byte_fallback=True, split_by_whitespace=False)),
}


@functools.lru_cache(maxsize=None)
def trained_bpe(name: str) -> bytes:
    """A BPE model sentencepiece trains here (see ``BPE_TRAINED``), as ``.model`` bytes."""
    corpus, options = BPE_TRAINED[name]
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(_corpus_lines(corpus)), model_writer=buf,
                                   model_type="bpe", num_threads=2, minloglevel=2, **options)
    return buf.getvalue()
