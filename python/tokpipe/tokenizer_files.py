"""Which tokenizer file a path holds, told by its content: what :meth:`tokpipe.Tokenizer.from_file`
reads before it picks a loader.

| kind | content | loaded by |
| --- | --- | --- |
| ``tokenizer.json`` | a JSON object whose first value is not a number (``"version"``, ``"model"``...) | the core's ``from_file`` |
| ``sentencepiece`` | a protobuf ``ModelProto`` (its first byte is 0x0a, a piece's tag) | the core's ``from_file`` |
| ``tiktoken`` | lines of ``<base64 token> <rank>`` | ``from_tiktoken``; the pattern from the name |
| ``gpt2-encoder`` | a JSON object of token → id (GPT-2's ``encoder.json``) | ``from_gpt2``, ``vocab.bpe`` beside it |
| ``gpt2-merges`` | ``#version:`` then merges (GPT-2's ``vocab.bpe``) | ``from_gpt2``, ``encoder.json`` beside it |
| ``vocab.txt`` | one token a line, no spaces (BERT's ``vocab.txt``) | ``from_wordpiece_vocab`` |

Only the first 64 KiB are read (unzipped first when the file is gzip). The name is read only
where the content cannot say: a ``.tiktoken`` file's pre-tokenizer pattern, and which file of
GPT-2's pair sits beside the other. Anything else goes to the core's loader, whose error then
names the file and the problem.
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path
from typing import Literal, Optional

from tokpipe import storage
from tokpipe.errors import FormatError, InvalidArgumentError
from tokpipe.storage import Location, RemotePath

__all__ = ["FileKind", "HEAD_BYTES", "detect", "read_head", "tiktoken_pattern", "gpt2_pair"]

FileKind = Literal["tokenizer.json", "sentencepiece", "tiktoken", "gpt2-encoder", "gpt2-merges", "vocab.txt"]

#: How much of a file is read to tell its kind.
HEAD_BYTES = 64 << 10

_GZIP_MAGIC = b"\x1f\x8b"
_BOM = "\ufeff"
# The first member of a JSON object: its key, then the first character of its value.
_FIRST_MEMBER = re.compile(r'\s*\{\s*"(?:[^"\\]|\\.)*"\s*:\s*(\S)')
_TIKTOKEN_LINE = re.compile(r"[A-Za-z0-9+/]+={0,2} [0-9]+")
_ANY_SPACE = re.compile(r"\s")

#: Words in a ``.tiktoken`` file's name, and the pattern preset each means (p50k and r50k
#: use GPT-2's pattern).
_TIKTOKEN_NAMES = (("o200k", "o200k"), ("cl100k", "cl100k"), ("p50k", "gpt2"), ("r50k", "gpt2"), ("gpt2", "gpt2"))


def read_head(path: str) -> tuple[bytes, bool, bool]:
    """(the first :data:`HEAD_BYTES` of the file's content, whether the file is gzip, whether
    the head is all of it). Unreadable gzip data gives an empty head: the loader then says
    what is wrong with it."""
    with open(path, "rb") as f:
        raw = f.read(HEAD_BYTES + 1)
    if not raw.startswith(_GZIP_MAGIC):
        return raw[:HEAD_BYTES], False, len(raw) <= HEAD_BYTES
    try:
        unzip = zlib.decompressobj(wbits=31)
        head = unzip.decompress(raw[:HEAD_BYTES], HEAD_BYTES + 1)
    except zlib.error:
        return b"", True, False
    return head[:HEAD_BYTES], True, unzip.eof and len(head) <= HEAD_BYTES


def detect(head: bytes, whole: bool) -> Optional[FileKind]:
    """The kind of tokenizer file that starts with ``head`` (``whole``: nothing follows), or
    None when the content says none of them."""
    if head.removeprefix(_BOM.encode()).lstrip().startswith(b"{"):
        member = _FIRST_MEMBER.match(head.decode("utf-8", errors="replace").removeprefix(_BOM))
        # An encoder.json maps tokens to ids; a tokenizer.json's first value is a string
        # ("version"), null or an object.
        if member is not None and (member.group(1).isdigit() or member.group(1) == "-"):
            return "gpt2-encoder"
        return "tokenizer.json"
    if head[:1] == b"\n":  # a piece's tag; no line of the text formats is empty
        return "sentencepiece"
    if not whole:
        cut = head.rfind(b"\n")  # the last line may be cut off, perhaps inside a character
        head = head[: cut + 1] if cut >= 0 else head
    try:
        text = head.decode("utf-8").removeprefix(_BOM)
    except UnicodeDecodeError:
        return None
    lines = text.splitlines()
    if not lines:
        return None
    if lines[0].startswith("#version:"):
        return "gpt2-merges"
    if all(_TIKTOKEN_LINE.fullmatch(line) for line in lines if line):
        return "tiktoken"
    if all(line and not _ANY_SPACE.search(line) for line in lines):
        return "vocab.txt"
    return None


def tiktoken_pattern(path: str | Path) -> str:
    """The pattern preset of a ``.tiktoken`` file, told by its name (OpenAI's encodings:
    cl100k_base, o200k_base, p50k_base, r50k_base, gpt2)."""
    lowered = Path(path).name.lower()
    for word, preset in _TIKTOKEN_NAMES:
        if word in lowered:
            return preset
    raise InvalidArgumentError(
        f"{path}: a .tiktoken file does not say its pre-tokenizer pattern, and its name names none "
        f"(cl100k, o200k, p50k, r50k or gpt2); give pattern= (a preset or a regex), or rename the file")


def gpt2_pair(path: str | Path | RemotePath, kind: FileKind) -> tuple[Location, Location]:
    """(encoder.json, vocab.bpe) of GPT-2's pair, one of which is ``path``: the other is the
    file beside it with the same prefix (``gpt2_encoder.json`` and ``gpt2_vocab.bpe``); for an
    object-storage ``path`` (a :class:`~tokpipe.storage.RemotePath`), the object beside it."""
    where: Location = path if isinstance(path, RemotePath) else Path(path)
    shown = storage.redact(str(where)) if isinstance(where, RemotePath) else str(where)
    ours, other = ("encoder.json", "vocab.bpe") if kind == "gpt2-encoder" else ("vocab.bpe", "encoder.json")
    if not where.name.endswith(ours):
        raise FormatError(f"{shown}: looks like GPT-2's {ours}, but its name does not end with {ours}, so the "
                          f"{other} that goes with it cannot be found; name the pair [prefix]encoder.json and "
                          "[prefix]vocab.bpe")
    partner = where.with_name(where.name[: -len(ours)] + other)
    if not _is_file(partner):
        raise FormatError(f"{shown}: GPT-2's {ours} needs its {other} beside it, and there is no {partner.name}")
    return (where, partner) if kind == "gpt2-encoder" else (partner, where)


def _is_file(where: Location) -> bool:
    if isinstance(where, Path):
        return where.is_file()
    try:
        storage.version(where)
    except FileNotFoundError:
        return False
    return True
