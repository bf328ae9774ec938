"""Hostile and mutated tokenizer files: every loader loads a file (and encodes a short text with
it) or raises a ``TokpipeError`` (or ``FileNotFoundError``), in bounded time and memory.

(Over 500 lines: most of it is the hand-written files of every format, sentencepiece's
protobuf included, and the named cases, kept together so the cases read next to what they
break.)

Two kinds of cases, all made here from a fixed seed:

- named cases, one per defect of issue 19 (an id of 10^9, an added token at 2^31, a 40,000-byte
  ``vocab.txt`` line, a 2 GiB gzip bomb, ...); each failed before the loaders were hardened;
- mutants of small valid files of every format (``tokenizer.json`` byte-level BPE, BPE over
  characters, WordPiece and Unigram, ``encoder.json`` + ``vocab.bpe``, ``.tiktoken``,
  ``.tiktoken.gz``, ``vocab.txt``, sentencepiece ``.model`` Unigram and BPE): ids swapped for
  hostile numbers, strings for long ones, fields dropped, bytes flipped, files cut short.

The cases run in worker processes (this file run as a script) under an address-space limit
(``RLIMIT_AS``), with a watchdog per case (``faulthandler`` ends the worker when a case runs past
``CASE_SECONDS``). A case fails when its worker dies (a panic, an abort on a failed allocation,
the watchdog), when it raises anything but a ``TokpipeError`` or ``FileNotFoundError``, when
its error message is not one short line, or when a case that must be refused loads. A dead
worker's remaining cases go on in a fresh one, so one report names every failing case.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import random
import re
import resource
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

#: The address space a worker may map: the bound on what any case may allocate.
MEMORY_BYTES = 3 << 29  # 1.5 GiB

#: A case running longer than this ends its worker. Not a speed check: every case takes
#: milliseconds, and the defects this catches (quadratic loading, a decompression bomb) took
#: minutes or did not end; a thousand times the margin keeps a loaded machine from failing it.
CASE_SECONDS = 30

#: Error messages are one line and never hold the file's data whole.
MAX_MESSAGE_CHARS = 1000

#: Mutants made of each base file.
MUTANTS_PER_BASE = 30

SEED = 19

TEXT = "Hello world, <s> this is ab abc é 中文 123 </s>"


# -- small valid files of every format ----------------------------------------------------------

def _byte_level_alphabet() -> dict[int, str]:
    """GPT-2's byte -> printable character table (bytes_to_unicode)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTE_TEXT = _byte_level_alphabet()
MERGE_WORDS = ["ab", "abc", "Ġt", "Ġth", "Ġthe", "he", "ll", "llo"]


def _byte_level_vocab() -> tuple[dict[str, int], list[str]]:
    vocab = {BYTE_TEXT[b]: b for b in range(256)}
    merges = []
    for word in MERGE_WORDS:
        left, right = word[:-1], word[-1]
        if left not in vocab:
            left, right = word[:-2], word[-2:]
        merges.append(f"{left} {right}")
        vocab[word] = len(vocab)
    return vocab, merges


def added_token(content: str, id_: int, special: bool = True) -> dict[str, Any]:
    return {"id": id_, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": not special, "special": special}


def _template(tokens: dict[str, int]) -> dict[str, Any]:
    first, last = list(tokens)[0], list(tokens)[-1]
    return {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": first, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                   {"SpecialToken": {"id": last, "type_id": 0}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {t: {"id": t, "ids": [i], "tokens": [t]} for t, i in tokens.items()},
    }


def byte_level_bpe_json() -> dict[str, Any]:
    vocab, merges = _byte_level_vocab()
    n = len(vocab)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added_token("<s>", n), added_token("</s>", n + 1), added_token("  ", n + 2, special=False)],
        "normalizer": {"type": "NFC"}, "pre_tokenizer": byte_level,
        "post_processor": _template({"<s>": n, "</s>": n + 1}), "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "vocab": vocab, "merges": merges},
    }


def _metaspace() -> dict[str, Any]:
    return {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}


def _spm_decoder() -> dict[str, Any]:
    return {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
        {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}


def char_bpe_json() -> dict[str, Any]:
    chars = ["<unk>", "<s>", "</s>", "▁", *"abcdehlorstw"]
    vocab = {c: i for i, c in enumerate(chars)}
    merges = [["▁", "t"], ["▁t", "h"], ["a", "b"], ["ab", "c"], ["l", "l"], ["h", "e"]]
    for left, right in merges:
        vocab[left + right] = len(vocab)
    return {
        "version": "1.0", "added_tokens": [added_token("<unk>", 0), added_token("<s>", 1), added_token("</s>", 2)],
        "normalizer": None, "pre_tokenizer": _metaspace(), "post_processor": _template({"<s>": 1, "</s>": 2}),
        "decoder": _spm_decoder(),
        "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": True, "byte_fallback": False,
                  "vocab": vocab, "merges": merges},
    }


WORDPIECE_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdehlorstw", "##a", "##b", "##c", "##s",
                    "##llo", "he", "ab", "abc", "this", "is", "world", ",", "<", ">", "/", "1", "##2", "##3"]


def wordpiece_json() -> dict[str, Any]:
    vocab = {t: i for i, t in enumerate(WORDPIECE_TOKENS)}
    return {
        "version": "1.0",
        "added_tokens": [added_token(t, vocab[t]) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")],
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": _template({"[CLS]": 2, "[SEP]": 3}),
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab},
    }


UNIGRAM_PIECES = [("<unk>", 0.0), ("<s>", 0.0), ("</s>", 0.0), ("▁", -2.0), *((c, -3.0) for c in "abcdehlorstw"),
                  ("▁this", -4.0), ("▁is", -4.0), ("ab", -3.5), ("abc", -3.6), ("llo", -3.8), ("▁world", -5.0)]


def unigram_json() -> dict[str, Any]:
    return {
        "version": "1.0", "added_tokens": [added_token("<unk>", 0), added_token("<s>", 1), added_token("</s>", 2)],
        "normalizer": None, "pre_tokenizer": _metaspace(), "post_processor": _template({"<s>": 1, "</s>": 2}),
        "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
        "model": {"type": "Unigram", "unk_id": 0, "vocab": [list(p) for p in UNIGRAM_PIECES], "byte_fallback": False},
    }


def tiktoken_text() -> bytes:
    ranks = [bytes([b]) for b in range(256)] + [w.encode() for w in ("ab", "abc", " t", " th", " the", "he", "ll")]
    return b"".join(base64.b64encode(t) + b" %d\n" % i for i, t in enumerate(ranks))


def vocab_txt() -> bytes:
    return "".join(t + "\n" for t in WORDPIECE_TOKENS).encode()


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def sentencepiece_model(model_type: int) -> bytes:
    """A ``ModelProto`` written by hand: the pieces (UNKNOWN, CONTROL, NORMAL), a trainer spec
    naming the model type (1 Unigram, 2 BPE) and the default normalizer without a charsmap."""
    kinds = {"<unk>": 2, "<s>": 3, "</s>": 3}
    pieces = b"".join(
        _field(1, _field(1, text.encode()) + b"\x15" + struct.pack("<f", score) + b"\x18" + _varint(kinds.get(text, 1)))
        for text, score in UNIGRAM_PIECES
    )
    trainer = b"\x18" + _varint(model_type)
    normalizer = _field(1, b"identity")
    return pieces + _field(2, trainer) + _field(3, normalizer)


def gzip_bomb(unpacked: int) -> bytes:
    """A gzip file of valid ``.tiktoken`` lines followed by ``unpacked`` bytes of newlines: gzip
    members of 64 MiB of newlines each (about 64 KB packed) one after another."""
    head = gzip.compress(tiktoken_text())
    block = 64 << 20
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: a gzip header and trailer
    member = packer.compress(b"\n" * block) + packer.flush()
    return head + member * (unpacked // block)


# -- cases --------------------------------------------------------------------------------------

def _write(directory: Path, name: str, data: bytes | str | dict[str, Any]) -> str:
    path = directory / name
    if isinstance(data, dict):
        data = json.dumps(data, ensure_ascii=False)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return str(path)


def _case(name: str, loader: str, paths: list[str], *, must_fail: str | None = None, must_load: bool = False,
          **kwargs: Any) -> dict[str, Any]:
    """``must_fail``: a regex the error must match (the case must be refused, clearly);
    ``kwargs``: further arguments of the loader."""
    return {"name": name, "loader": loader, "paths": paths, "kwargs": kwargs, "must_fail": must_fail,
            "must_load": must_load}


def named_cases(d: Path) -> list[dict[str, Any]]:
    """One case per defect of issue 19 (each failed before the fix, as the comment says)."""
    cases = []

    # An id of 10^9 sized a table of 10^9 entries: 16 GB, an abort.
    bpe = byte_level_bpe_json()
    bpe["model"]["vocab"]["hello"] = 10**9
    cases.append(_case("tokenizer.json vocab id 10^9", "file", [_write(d, "id9.json", bpe)],
                       must_fail=r"id 1000000000, far past the vocabulary size"))
    wp = wordpiece_json()
    wp["model"]["vocab"]["hello"] = 10**9
    cases.append(_case("WordPiece tokenizer.json vocab id 10^9", "file", [_write(d, "wp-id9.json", wp)],
                       must_fail=r"id 1000000000, far past the vocabulary size"))
    chars = char_bpe_json()
    chars["model"]["vocab"]["hello"] = 10**9
    cases.append(_case("character BPE tokenizer.json vocab id 10^9", "file", [_write(d, "chars-id9.json", chars)],
                       must_fail=r"id 1000000000, far past the vocabulary size"))
    encoder, merges = _byte_level_vocab()
    encoder["hello"] = 10**9
    cases.append(_case("encoder.json id 10^9", "gpt2",
                       [_write(d, "encoder.json", json.dumps(encoder)),
                        _write(d, "vocab.bpe", "#version: 0.2\n" + "\n".join(merges) + "\n")],
                       must_fail=r"id 1000000000, far past the vocabulary size"))

    # An added token at 2^31 loaded, then encoding built an int object per id below it.
    bpe = byte_level_bpe_json()
    bpe["added_tokens"].append(added_token("<big>", 2**31))
    cases.append(_case("added token id 2^31", "file", [_write(d, "added31.json", bpe)],
                       must_fail=r"<big>.* id 2147483648, far past the vocabulary size"))
    # Ids past u32 were wrapped: 2^32 + 300 became 300.
    bpe = byte_level_bpe_json()
    bpe["added_tokens"].append(added_token("<wrap>", 2**32 + 300))
    cases.append(_case("added token id 2^32 + 300", "file", [_write(d, "added32.json", bpe)],
                       must_fail=r"added_tokens\[3\] \"<wrap>\" has the id 4294967596"))

    # WordPiece kept failure pops for every trie node: quadratic in a line (3.2 GB for 40,000).
    cases.append(_case("vocab.txt with a 40,000-byte line", "wordpiece",
                       [_write(d, "long-line-vocab.txt", vocab_txt() + b"a" * 40_000 + b"\n")]))
    wp = wordpiece_json()
    wp["model"]["vocab"]["a" * 40_000] = len(wp["model"]["vocab"])
    wp["model"]["max_input_chars_per_word"] = 10**6
    cases.append(_case("WordPiece tokenizer.json with a 40,000-byte token", "file", [_write(d, "wp-long.json", wp)]))

    # aho-corasick built a DFA for an added token in time quadratic in its length (minutes).
    bpe = byte_level_bpe_json()
    bpe["added_tokens"].append(added_token("x" * 262_144, len(bpe["model"]["vocab"]) + 3))
    cases.append(_case("added token of 256 KiB", "file", [_write(d, "added-long.json", bpe)]))

    # tiktoken ranks: every cut of every token looked up (a 1 MB token took minutes), and a
    # rank of 990 million sized a 15.8 GB table.
    long_token = base64.b64encode(b"a" * (1 << 20)) + b" 263\n"
    cases.append(_case(".tiktoken with a 1 MiB token", "tiktoken",
                       [_write(d, "long.tiktoken", tiktoken_text() + long_token)]))
    cases.append(_case(".tiktoken with rank 990,000,000", "tiktoken",
                       [_write(d, "rank.tiktoken", tiktoken_text() + base64.b64encode(b"xyz") + b" 990000000\n")],
                       must_fail=r"\"xyz\" has id 990000000, far past the vocabulary size"))
    # A 2 MB .tiktoken.gz holding 2 GiB was unpacked whole.
    cases.append(_case(".tiktoken.gz holding 2 GiB", "tiktoken", [_write(d, "bomb.tiktoken.gz", gzip_bomb(2 << 30))],
                       must_fail=r"gzip data unpacks to more than \d+ bytes"))

    # Post-processor ids past u32 were wrapped, ids of no token kept; unknown byte-level
    # decoder and post-processor types were not read at all. HF refuses all but the second.
    for base, label in ((wordpiece_json, "WordPiece"), (unigram_json, "Unigram"), (byte_level_bpe_json, "BPE")):
        for bad_id, message in ((2**32 + 2, r"malformed id 4294967298"), (10**9, r"id 1000000000, which is no token")):
            data = base()
            first = data["post_processor"]["single"][0]["SpecialToken"]["id"]
            data["post_processor"]["special_tokens"][first]["ids"] = [bad_id]
            cases.append(_case(f"{label} post_processor id {bad_id}", "file",
                               [_write(d, f"post-{label}-{bad_id}.json", data)], must_fail=message))
    for part in ("decoder", "post_processor"):
        data = byte_level_bpe_json()
        data[part] = {"type": "NoSuchType"}
        cases.append(_case(f"byte-level BPE with an unknown {part}", "file", [_write(d, f"unknown-{part}.json", data)],
                           must_fail=rf"{part}: .*NoSuchType"))

    # Messages held a 5 MB token whole.
    bpe = byte_level_bpe_json()
    bpe["added_tokens"].append({**added_token("y" * 5_000_000, 300), "lstrip": True})
    cases.append(_case("5 MB added token with lstrip", "file", [_write(d, "lstrip.json", bpe)],
                       must_fail=r"sets lstrip"))
    bpe = byte_level_bpe_json()
    bpe["model"]["vocab"]["z z" * 2_000_000] = 300  # a space is no byte-level text
    cases.append(_case("5 MB vocab entry that is not byte-level text", "file", [_write(d, "not-bytes.json", bpe)],
                       must_fail=r"is not byte-level text"))
    cases.append(_case("5 MB special token passed to from_tiktoken", "tiktoken",
                       [_write(d, "plain.tiktoken", tiktoken_text())], special_tokens={"s" * 5_000_000: 5},
                       must_fail=r"already has"))
    return cases


HOSTILE_NUMBERS: list[Any] = [-1, 2**31, 2**32, 2**32 + 5, 2**64, 10**9, 123456, 1.5, "7", None, True, [], {}]


def _json_paths(value: Any, path: tuple = ()) -> list[tuple]:
    """Every path to a value inside a JSON document, the vocabulary's first entries included."""
    paths = [path]
    if isinstance(value, dict):
        for i, (k, v) in enumerate(value.items()):
            if i < 40:
                paths += _json_paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:40]):
            paths += _json_paths(v, (*path, i))
    return paths


def _mutate_json(rng: random.Random, doc: Any) -> Any:
    doc = json.loads(json.dumps(doc))
    for _ in range(rng.randint(1, 3)):
        paths = _json_paths(doc)[1:]
        path = rng.choice(paths)
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        key = path[-1]
        action = rng.random()
        if action < 0.45:
            parent[key] = rng.choice(HOSTILE_NUMBERS)
        elif action < 0.6:
            parent[key] = rng.choice(["", "a" * rng.choice([300, 70_000]), "Ġ", "##", "<s>", "▁▁", "\u0000"])
        elif action < 0.7 and isinstance(parent, dict):
            del parent[key]
        elif action < 0.8 and isinstance(parent, dict) and isinstance(key, str):
            # A key made long or hostile (a vocabulary entry's text, a field's name).
            parent[rng.choice(["a" * 50_000, "", "[UNK]", key + key])] = parent.pop(key)
        elif isinstance(parent, list):
            parent.insert(key, parent[key])
        else:
            parent[key] = [parent[key]] * rng.randint(0, 3)
    return doc


def _mutate_lines(rng: random.Random, data: bytes) -> bytes:
    lines = data.split(b"\n")
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(lines))
        action = rng.random()
        words = lines[i].split(b" ")
        if action < 0.3 and len(words) == 2:
            lines[i] = words[0] + b" " + str(rng.choice([-1, 2**31, 2**32, 10**9, 123456, 0, 256])).encode()
        elif action < 0.5:
            token = bytes(rng.randrange(256) for _ in range(rng.choice([1, 500, 20_000])))
            lines[i] = base64.b64encode(token) + b" 300"
        elif action < 0.6:
            lines[i] = b"a" * rng.choice([1000, 50_000])
        elif action < 0.7:
            lines.insert(i, lines[i])
        elif action < 0.8:
            del lines[i]
        else:
            lines[i] = bytes(rng.randrange(256) for _ in range(rng.randint(0, 20)))
    return b"\n".join(lines)


def _mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        action = rng.random()
        at = rng.randrange(len(out) or 1)
        if action < 0.4:
            out[at:at + 1] = bytes([rng.randrange(256)])
        elif action < 0.6:
            del out[at:]
        elif action < 0.8:
            out[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        else:
            out[at:at] = out[at:at + rng.randint(1, 64)] * rng.randint(2, 50)
    return bytes(out)


def mutant_cases(d: Path) -> list[dict[str, Any]]:
    rng = random.Random(SEED)
    cases: list[dict[str, Any]] = []
    json_bases = {"bpe": byte_level_bpe_json(), "chars": char_bpe_json(), "wordpiece": wordpiece_json(),
                  "unigram": unigram_json()}
    encoder, merges = _byte_level_vocab()
    merges_text = ("#version: 0.2\n" + "\n".join(merges) + "\n").encode()
    for n in range(MUTANTS_PER_BASE):
        for kind, base in json_bases.items():
            name = f"{kind}-{n}.json"
            if n % 3 == 2:  # a third of them mutated as bytes rather than as JSON
                data: bytes | dict[str, Any] = _mutate_bytes(rng, json.dumps(base).encode())
            else:
                data = _mutate_json(rng, base)
            cases.append(_case(f"mutant {name}", "file", [_write(d, name, data)]))
        cases.append(_case(f"mutant encoder.json {n}", "gpt2",
                           [_write(d, f"encoder-{n}.json", json.dumps(_mutate_json(rng, encoder))),
                            _write(d, f"vocab-{n}.bpe", _mutate_lines(rng, merges_text) if n % 2 else merges_text)]))
        cases.append(_case(f"mutant .tiktoken {n}", "tiktoken",
                           [_write(d, f"ranks-{n}.tiktoken", _mutate_lines(rng, tiktoken_text()))]))
        cases.append(_case(f"mutant .tiktoken.gz {n}", "tiktoken",
                           [_write(d, f"ranks-{n}.tiktoken.gz", _mutate_bytes(rng, gzip.compress(tiktoken_text())))]))
        cases.append(_case(f"mutant vocab.txt {n}", "wordpiece",
                           [_write(d, f"vocab-{n}.txt", _mutate_lines(rng, vocab_txt()))]))
        for model_type in (1, 2):
            name = f"spm-{model_type}-{n}.model"
            cases.append(_case(f"mutant {name}", "file",
                               [_write(d, name, _mutate_bytes(rng, sentencepiece_model(model_type)))]))
    return cases


def base_cases(d: Path) -> list[dict[str, Any]]:
    """The unmutated files: each must load."""
    encoder, merges = _byte_level_vocab()
    cases = [_case(f"valid {kind}", "file", [_write(d, f"valid-{kind}.json", make())], must_load=True)
             for kind, make in (("bpe", byte_level_bpe_json), ("chars", char_bpe_json),
                                ("wordpiece", wordpiece_json), ("unigram", unigram_json))]
    cases += [
        _case("valid gpt2", "gpt2", [_write(d, "valid-encoder.json", json.dumps(encoder)),
                                     _write(d, "valid-vocab.bpe", "#version: 0.2\n" + "\n".join(merges) + "\n")],
              must_load=True),
        _case("valid .tiktoken", "tiktoken", [_write(d, "valid.tiktoken", tiktoken_text())], must_load=True),
        _case("valid .tiktoken.gz", "tiktoken", [_write(d, "valid.tiktoken.gz", gzip.compress(tiktoken_text()))],
              must_load=True),
        _case("valid vocab.txt", "wordpiece", [_write(d, "valid-vocab.txt", vocab_txt())], must_load=True),
        _case("valid spm unigram", "file", [_write(d, "valid-1.model", sentencepiece_model(1))], must_load=True),
        _case("valid spm bpe", "file", [_write(d, "valid-2.model", sentencepiece_model(2))], must_load=True),
    ]
    return cases


# -- running them -------------------------------------------------------------------------------

def _load(case: dict[str, Any]) -> Any:
    from tokpipe import Tokenizer

    paths, kwargs = case["paths"], case["kwargs"]
    if case["loader"] == "file":
        return Tokenizer.from_file(paths[0])
    if case["loader"] == "gpt2":
        return Tokenizer.from_gpt2(paths[0], paths[1])
    if case["loader"] == "tiktoken":
        return Tokenizer.from_tiktoken(paths[0], pattern="cl100k", **kwargs)
    if case["loader"] == "wordpiece":
        return Tokenizer.from_wordpiece_vocab(paths[0])
    raise AssertionError(case["loader"])


def worker(cases_file: str, first: int) -> None:
    """Runs the cases from ``first`` on, one JSON line each, a watchdog around each."""
    import faulthandler

    from tokpipe import TokpipeError

    cases = json.loads(Path(cases_file).read_text(encoding="utf-8"))
    for i in range(first, len(cases)):
        print(json.dumps({"start": i}), flush=True)
        faulthandler.dump_traceback_later(CASE_SECONDS, exit=True)
        result: dict[str, Any] = {"done": i}
        try:
            tok = _load(cases[i])
            ids = tok.encode(TEXT, allowed_special="all")
            tok.encode(TEXT, add_special_tokens=True)
            tok.decode(ids)
            result["outcome"] = "loaded"
        except (TokpipeError, FileNotFoundError) as error:
            result.update(outcome="refused", message=str(error)[:MAX_MESSAGE_CHARS + 1],
                          message_chars=len(str(error)))
        except BaseException as error:  # noqa: BLE001 - a panic is a BaseException
            result.update(outcome="unexpected", message=f"{type(error).__name__}: {str(error)[:300]}")
        faulthandler.cancel_dump_traceback_later()
        print(json.dumps(result), flush=True)


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))


def run_cases(cases: list[dict[str, Any]], directory: Path) -> dict[int, dict[str, Any]]:
    """Every case's result by index; a case whose worker died gets ``outcome: "died"``."""
    cases_file = directory / "cases.json"
    cases_file.write_text(json.dumps(cases), encoding="utf-8")
    env = {**os.environ, "RAYON_NUM_THREADS": "2", "MALLOC_ARENA_MAX": "2", "RUST_BACKTRACE": "0"}
    results: dict[int, dict[str, Any]] = {}
    first = 0
    while first < len(cases):
        try:
            proc = subprocess.run([sys.executable, __file__, str(cases_file), str(first)], capture_output=True,
                                  text=True, env=env, preexec_fn=_limit_memory,
                                  timeout=CASE_SECONDS * (len(cases) - first) + 60)
            stdout, stderr, code = proc.stdout, proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as expired:  # the watchdog failed to fire
            stdout = (expired.stdout or b"").decode() if isinstance(expired.stdout, bytes) else expired.stdout or ""
            stderr, code = "timed out", "timeout"
        started = first
        for line in stdout.splitlines():
            record = json.loads(line)
            if "start" in record:
                started = record["start"]
            else:
                results[record["done"]] = record
        if started in results or code == 0:
            break
        if "Timeout (" in stderr:  # faulthandler's watchdog
            why = f"ran past {CASE_SECONDS} s"
        else:
            why = f"exit {code}: " + " | ".join(stderr.strip().splitlines()[-3:])[-300:]
        results[started] = {"outcome": "died", "message": why}
        first = started + 1
    return results


def failures(cases: list[dict[str, Any]], results: dict[int, dict[str, Any]]) -> list[str]:
    bad = []
    for i, case in enumerate(cases):
        result = results.get(i, {"outcome": "not run"})
        outcome, message = result["outcome"], result.get("message", "")
        why = None
        if outcome in ("died", "unexpected", "not run"):
            why = message or outcome
        elif outcome == "refused" and (result["message_chars"] > MAX_MESSAGE_CHARS or "\n" in message):
            why = f"a message of {result['message_chars']} characters or several lines: {message[:120]!r}"
        elif case["must_fail"] and outcome == "loaded":
            why = "loaded, must be refused"
        elif case["must_fail"] and not re.search(case["must_fail"], message):
            why = f"refused without /{case['must_fail']}/: {message[:200]!r}"
        elif case["must_load"] and outcome != "loaded":
            why = f"refused: {message[:200]!r}"
        if why:
            bad.append(f"{case['name']}: {why}")
    return bad


def test_hostile_files_are_refused_in_bounded_time_and_memory(tmp_path: Path) -> None:
    cases = named_cases(tmp_path) + base_cases(tmp_path)
    bad = failures(cases, run_cases(cases, tmp_path))
    assert not bad, "\n".join(bad)


def test_mutated_files_load_or_are_refused(tmp_path: Path) -> None:
    cases = base_cases(tmp_path) + mutant_cases(tmp_path)
    assert len(cases) > 300
    results = run_cases(cases, tmp_path)
    bad = failures(cases, results)
    assert not bad, "\n".join(bad)
    # The mutants reach past the parsers: some load, most are refused.
    outcomes = [r["outcome"] for r in results.values()]
    assert outcomes.count("loaded") > 30 and outcomes.count("refused") > 150, outcomes


if __name__ == "__main__":
    worker(sys.argv[1], int(sys.argv[2]))
