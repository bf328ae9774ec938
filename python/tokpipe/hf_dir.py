"""The folder ``transformers.AutoTokenizer.from_pretrained`` loads: what
:meth:`tokpipe.Tokenizer.save_pretrained` and ``tokpipe train-* --hf-dir`` write.

Three files, as transformers' own ``save_pretrained`` writes them:

- ``tokenizer.json``: the bytes :meth:`~tokpipe.Tokenizer.save` writes, except that a token
  named for a role below that is an ordinary vocabulary entry (a sentencepiece ``<unk>``, a
  ``<pad>`` piece) is also listed under ``added_tokens`` with ``special: true``, as HF's
  converters list them: HF's ``decode(skip_special_tokens=True)`` skips only such tokens.
- ``tokenizer_config.json``: ``tokenizer_class`` ``PreTrainedTokenizerFast`` (the class
  transformers 4.x loads a bare ``tokenizer.json`` with; transformers 5 maps that name to its
  ``TokenizersBackend``, while 4.x does not know ``TokenizersBackend``), the roles
  (``bos_token``, ``eos_token``, ``unk_token``, ``pad_token``, ``cls_token``, ``sep_token``,
  ``mask_token``), the other special tokens as ``additional_special_tokens``,
  ``added_tokens_decoder`` (the ``added_tokens`` of ``tokenizer.json``, so neither version
  adds them again), ``model_max_length``, ``padding_side`` and
  ``clean_up_tokenization_spaces: false`` (transformers 4.x defaults to true, which rewrites
  ``" ."`` as ``"."`` in decoded text, so decoding would no longer give back the text).
  ``add_bos_token``/``add_eos_token`` are left out on purpose: given, transformers replaces
  the file's post-processor, which already adds what tokpipe's ``add_special_tokens=True``
  adds (BERT ``[CLS] … [SEP]``, sentencepiece ``<s> … </s>``, byte-level BPE nothing).
- ``special_tokens_map.json``: the roles again, for tools that read only that file.

The roles default by model family (see :func:`family`), each only when the vocabulary has it
(:data:`ROLE_DEFAULTS`; a role the vocabulary lacks is left out):

- byte-level BPE (GPT-2, cl100k, ``train_bpe``): ``<|endoftext|>`` as bos, eos and unk, as
  GPT-2's own files say, and as pad too: GPT-2 has no pad token, and padding needs one (the
  attention mask tells padding from a real end of text).
- WordPiece (BERT): ``[CLS]``, ``[SEP]``, ``[PAD]``, ``[UNK]``, ``[MASK]``.
- sentencepiece (Unigram, and BPE with ``▁`` and byte fallback): ``<s>``, ``</s>``, the
  model's unknown piece (``<unk>``), and ``<pad>`` as pad when the vocabulary has it, else the
  unknown piece (not ``</s>``: collators that hide padding from the loss by its id would hide
  every real ``</s>`` too).

``model_max_length`` defaults to :data:`DEFAULT_MODEL_MAX_LENGTH` (512 for WordPiece, BERT's;
2048 for the others): the tokenizer does not know the model's context, so pass the real one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Optional

from tokpipe.errors import InvalidArgumentError

__all__ = ["ROLES", "ROLE_DEFAULTS", "DEFAULT_MODEL_MAX_LENGTH", "family", "hf_files"]

#: The special-token roles transformers knows by name, in the order its files list them.
ROLES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")

#: Each family's role -> token; the model's own unknown token is used first where it has one.
ROLE_DEFAULTS: dict[str, dict[str, str]] = {
    "byte-level": {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>",
                   "pad_token": "<|endoftext|>"},
    "wordpiece": {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
                  "mask_token": "[MASK]"},
    "sentencepiece": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"},
}

#: ``model_max_length`` when none is given: BERT's 512 for WordPiece, 2048 for the others.
DEFAULT_MODEL_MAX_LENGTH = {"wordpiece": 512, "byte-level": 2048, "sentencepiece": 2048}

#: The fields of one ``added_tokens`` entry besides its id, as HF writes them.
_ADDED_TOKEN_FIELDS = ("content", "single_word", "lstrip", "rstrip", "normalized", "special")


def family(doc: dict[str, Any]) -> str:
    """``"byte-level"``, ``"wordpiece"`` or ``"sentencepiece"``, told from a parsed
    ``tokenizer.json``: its model type, and for BPE whether bytes come from a ``ByteLevel``
    pre-tokenizer (GPT-2's kind) or not (sentencepiece's ``▁`` and byte-fallback kind)."""
    kind = doc["model"]["type"]
    if kind == "WordPiece":
        return "wordpiece"
    if kind == "BPE" and '"ByteLevel"' in json.dumps([doc.get("pre_tokenizer"), doc.get("decoder")]):
        return "byte-level"
    return "sentencepiece"


def _model_unk(doc: dict[str, Any]) -> str | None:
    """The unknown token the model itself names (WordPiece and BPE ``unk_token``, Unigram
    ``unk_id``), if any."""
    model = doc["model"]
    if model.get("unk_id") is not None and model["type"] == "Unigram":
        return str(model["vocab"][model["unk_id"]][0])
    unk = model.get("unk_token")
    return unk if isinstance(unk, str) else None


def _shown(token: str) -> str:
    """A token as an error message names it: quoted, and cut short if long."""
    return repr(token if len(token) <= 40 else token[:40] + "…")


def hf_files(
    tokenizer_json: str,
    token_to_id: Callable[[str], Optional[int]],
    roles: dict[str, str | None],
    model_max_length: int | None,
    padding_side: str,
) -> dict[str, str]:
    """The three files' text by name, for a tokenizer whose ``tokenizer.json`` text is
    ``tokenizer_json`` and whose ``token_to_id`` finds a token's id. ``roles`` holds the
    tokens the caller named (``None``: the family's default). A named token that is not in the
    vocabulary, or a bad ``padding_side`` or ``model_max_length``, raises
    :class:`~tokpipe.InvalidArgumentError` before anything is written."""
    if padding_side not in ("right", "left"):
        raise InvalidArgumentError(f"save_pretrained: padding_side must be 'right' or 'left', not {padding_side!r}")
    if model_max_length is not None and (isinstance(model_max_length, bool) or model_max_length < 1):
        raise InvalidArgumentError(f"save_pretrained: model_max_length must be a positive integer, "
                                   f"not {model_max_length!r}")
    unknown = sorted(set(roles) - set(ROLES))
    if unknown:
        raise InvalidArgumentError(f"save_pretrained: unknown role {unknown[0]!r} (roles: {', '.join(ROLES)})")
    for role in ROLES:
        token = roles.get(role)
        if token is not None and token_to_id(token) is None:
            raise InvalidArgumentError(f"save_pretrained: {role} {_shown(token)} is not in the vocabulary")

    doc = json.loads(tokenizer_json)
    kind = family(doc)
    defaults = dict(ROLE_DEFAULTS[kind])
    model_unk = _model_unk(doc)
    if model_unk is not None:
        defaults["unk_token"] = model_unk
    if kind == "sentencepiece" and token_to_id(defaults["pad_token"]) is None:
        defaults["pad_token"] = defaults["unk_token"]
    chosen: dict[str, str] = {}
    for role in ROLES:
        token = roles.get(role) or defaults.get(role)
        if token is not None and token_to_id(token) is not None:
            chosen[role] = token

    # Every role's token is an added special token, as HF's own files have it.
    added = doc["added_tokens"]
    listed = {entry["content"] for entry in added}
    for token in dict.fromkeys(chosen.values()):
        if token in listed:
            for entry in added:
                if entry["content"] == token:
                    entry["special"] = True
        else:
            added.append({"id": token_to_id(token), "content": token, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True})
    added.sort(key=lambda entry: entry["id"])
    named = set(chosen.values())
    others = [entry["content"] for entry in added if entry["special"] and entry["content"] not in named]

    special_map: dict[str, Any] = dict(chosen)
    if others:
        special_map["additional_special_tokens"] = others
    config: dict[str, Any] = {
        "added_tokens_decoder": {str(entry["id"]): {field: entry[field] for field in _ADDED_TOKEN_FIELDS}
                                 for entry in added},
        **special_map,
        "clean_up_tokenization_spaces": False,
        "model_max_length": model_max_length or DEFAULT_MODEL_MAX_LENGTH[kind],
        "padding_side": padding_side,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    # json.dumps with indent=2 and ensure_ascii=False writes what Tokenizer.save writes, byte
    # for byte, so a tokenizer whose roles are already special tokens keeps its exact file.
    return {
        "tokenizer.json": json.dumps(doc, ensure_ascii=False, indent=2),
        "tokenizer_config.json": json.dumps(config, ensure_ascii=False, indent=2) + "\n",
        "special_tokens_map.json": json.dumps(special_map, ensure_ascii=False, indent=2) + "\n",
    }
