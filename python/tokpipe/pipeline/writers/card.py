"""The dataset card (``README.md``) of an output folder: a Hugging Face card whose YAML header
(``configs:``) tells ``datasets.load_dataset(OUT)`` where the data is, followed by a Markdown
summary of what the run did, made from its manifest.

* :func:`clean_card`: a ``tokpipe clean`` output. Configs ``default`` (the kept documents,
  ``data/part-*``) and ``rejected`` (``rejected/part-*``; with ``rejected_by_stage``,
  ``rejected/*/part-*``, and one config ``rejected-STAGE`` per stage folder, in the order of
  their names); the summary gives the totals, the
  pipeline (each stage with the parameters the config set), the funnel, every drop reason and
  the sources.
* :func:`tokens_card`: a ``tokpipe tokenize`` output. Config ``default`` (the token rows:
  splits ``train`` from ``train/part-*`` and ``validation`` from ``val/part-*``) and
  ``documents`` (``documents/{split}.parquet``: id and length per document; the default
  when only a Megatron pair was written); the summary gives the tokenizer, the write options,
  the splits, the funnel and the sources.

The numbers come from :mod:`tokpipe.pipeline.summary`, the one reading of a manifest that
``tokpipe report`` shares. A config appears only when it has files (``load_dataset`` fails on a
pattern that matches nothing). Whatever comes from the user (paths, parameter values) is
cut to :data:`_CELL_CHARS` characters, URLs have their credentials redacted, secret
parameters (a ``salt``, a ``key``) are masked, and at most :data:`_SOURCES` inputs are listed:
the card is meant to be published.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any

from tokpipe import storage
from tokpipe.pipeline import summary

__all__ = ["clean_card", "tokens_card", "HF_SPLITS"]

#: HF split names of tokpipe's splits (HF's convention is ``validation``).
HF_SPLITS = {"train": "train", "val": "validation"}
#: Longest text from the user put in one place of the card.
_CELL_CHARS = 120
#: Inputs listed by name (the rest are counted).
_SOURCES = 20
#: Parameters whose value is a secret (the ``pii`` stage's ``salt``, a key): shown as ``***``.
_SECRET_PARAM = re.compile(r"(^|_)(salt|secret|password|passwd|key|credentials?)$")


def clean_card(manifest: dict[str, Any], suffix: str, set_params: Sequence[tuple[str, dict[str, Any]]] | None = None,
               data_dir: str = "data", rejected_dir: str = "rejected") -> str:
    """The card of a ``tokpipe clean`` output described by ``manifest`` (its shards named
    ``part-*{suffix}``). ``set_params``: each stage with the parameters its config set (the
    others are at their defaults); None shows every parameter the manifest's config records."""
    configs = []
    if manifest.get("shards"):
        configs.append(("default", [(None, f"{data_dir}/part-*{suffix}")]))
    # The stage folders of a run with rejected_by_stage (the manifest names each shard's;
    # only names tokpipe gives, safe as they are in the YAML header).
    folders = sorted({str(e["stage"]) for e in manifest.get("rejected") or ()
                     if re.fullmatch(r"[A-Za-z0-9._-]+", str(e.get("stage") or ""))})
    if manifest.get("rejected"):
        configs.append(("rejected", [(None, f"{rejected_dir}/{'*/' if folders else ''}part-*{suffix}")]))
    configs += [(f"rejected-{stage}", [(None, f"{rejected_dir}/{stage}/part-*{suffix}")]) for stage in folders]
    view = summary.overview(manifest)
    lines = [_header(configs), "# Dataset written by tokpipe clean", ""]
    lines += [f"**{view.documents_kept:,} documents kept** of {view.documents_read:,} input records "
              f"({_percent(view.documents_kept, view.documents_read)}), in {view.shards:,} shard(s) of "
              f"{summary.byte_size(view.kept_bytes or 0)}; {view.documents_rejected:,} rejected by a stage, "
              f"{view.unreadable:,} unreadable.", ""]
    # The snippet and the file list name the rejected documents only where the header has
    # their config (a run that rejected nothing writes none).
    has_rejected = bool(manifest.get("rejected"))
    lines += ["```python", "import datasets", "",
              'kept = datasets.load_dataset("path/to/this/folder", split="train")',
              *(['rejected = datasets.load_dataset("path/to/this/folder", "rejected", split="train")']
                if has_rejected else []),
              *([f'one_stage = datasets.load_dataset("path/to/this/folder", "rejected-{folders[0]}", split="train")']
                if folders else []),
              "```", "",
              f"or `pyarrow.dataset.dataset(\"path/to/this/folder/{data_dir}\")` for the kept documents alone.", ""]
    stages = list(set_params) if set_params is not None else summary.pipeline_stages(manifest)
    lines += ["## Pipeline", ""]
    if stages:
        heading = "parameters set in the config" if set_params is not None else "parameters"
        lines += _table(["#", "stage", heading], [[str(i), _cell(name), _params(params)]
                                                  for i, (name, params) in enumerate(stages, 1)], "rll")
    else:
        lines.append("No stage: the documents were read and written as they were.")
    lines += ["", *_funnel(manifest), "", *_drop_reasons(manifest), "", *_sources(manifest), ""]
    lines += ["## Files", "",
              f"- `{data_dir}/part-*{suffix}`: the kept documents (`id`, `text`, the input's other fields and "
              "the columns the stages added).",
              *([f"- `{rejected_dir}/part-*{suffix}`: the dropped documents, with `reason`, `stage` and "
                 "`duplicate_of`."] if has_rejected and not folders else []),
              *([f"- `{rejected_dir}/STAGE/part-*{suffix}`: the documents each stage dropped, one folder a stage "
                 f"({', '.join(f'`{_code(stage)}`' for stage in folders)}), with `reason`, `stage` and "
                 "`duplicate_of`."] if folders else []),
              "- `errors.jsonl`: input that could not be read (file, location, reason).",
              "- `manifest.json`: every shard with its rows, bytes and sha256; the config; per-stage stats "
              "(`tokpipe stats --verify` checks the folder against it).", ""]
    return "\n".join(lines).lstrip("\n")


def tokens_card(manifest: dict[str, Any], documents: dict[str, str]) -> str:
    """The card of a ``tokpipe tokenize`` output described by ``manifest``; ``documents``:
    each split's documents file (from OUT)."""
    splits = manifest.get("splits") or {}
    token_rows = [(HF_SPLITS.get(name, name), f"{name}/part-*.parquet")
                  for name, split in splits.items() if split.get("parquet")]
    document_rows = [(HF_SPLITS.get(name, name), path) for name, path in documents.items()
                     if splits.get(name, {}).get("documents")]
    configs = []
    if token_rows:
        configs.append(("default", token_rows))
    if document_rows:
        configs.append(("documents" if token_rows else "default", document_rows))
    tokenizer = manifest.get("tokenizer") or {}
    totals = manifest.get("totals") or {}
    name = PurePosixPath(str(tokenizer.get("path", "?")).replace("\\", "/")).name
    lines = [_header(configs), "# Tokens written by tokpipe tokenize", ""]
    lines += [f"**{int(totals.get('tokens', 0)):,} tokens** in {int(totals.get('documents', 0)):,} documents, "
              f"tokenized with `{_code(name)}` (vocabulary {int(tokenizer.get('vocab_size', 0)):,}, sha256 "
              f"`{str(tokenizer.get('sha256', ''))[:12]}`), stored as {manifest.get('dtype')}.", ""]
    if token_rows:
        lines += ["```python", "import datasets", "",
                  'tokens = datasets.load_dataset("path/to/this/folder")  # splits: '
                  + ", ".join(split for split, _ in token_rows), "```", "",
                  "or `pyarrow.dataset.dataset(\"path/to/this/folder/train\")` for one split's rows.", ""]
    seq_len = manifest.get("seq_len")
    eos = tokenizer.get("eos_id")
    options = [["sequence length", f"{seq_len:,}" if seq_len else "none"],
               ["rows", f"packed, {seq_len + 1:,} tokens each" if manifest.get("pack") and seq_len
                else "one document each"],
               ["documents cut at a row", _yes(manifest.get("truncate"))],
               ["end-of-document token", f"appended (id {eos})" if tokenizer.get("append_eos") else "not appended"],
               ["shuffle", f"global, seed {manifest.get('seed')}" if manifest.get("shuffle") else "none: input order"],
               ["validation fraction", f"{float(manifest.get('val_fraction') or 0):g}"],
               ["formats", ", ".join(manifest.get("formats") or [])]]
    lines += ["## Write options", "", *_table(["option", "value"], options, "ll"), ""]
    rows = []
    for split_name, split in splits.items():
        packed = split.get("packed") or {}
        rows.append([_cell(HF_SPLITS.get(split_name, split_name)), f"{int(split.get('documents', 0)):,}",
                     f"{int(split.get('tokens', 0)):,}", f"{len(split.get('parquet') or []):,}",
                     f"{int(packed['rows']):,}" if packed else "-"])
    lines += ["## Splits", "", *_table(["split", "documents", "tokens", "Parquet shards", "packed rows"], rows,
                                       "lrrrr"), ""]
    lines += [*_funnel(manifest), "", *_drop_reasons(manifest), "", *_sources(manifest), ""]
    files = [f"- `{split}/part-*.parquet`: `input_ids` and `length` per document (or per packed row)."
             for split in splits if splits[split].get("parquet")]
    files += [f"- `{_code(path)}`: `id` and `length` of every document of {HF_SPLITS.get(split, split)}, in output "
              "order." for split, path in documents.items()]
    files += [f"- `{_code(split['megatron']['prefix'])}.bin`, `.idx`: Megatron-LM's indexed dataset "
              f"(`--data-path {_code(split['megatron']['prefix'])}`)."
              for split in splits.values() if split.get("megatron")]
    files += ["- `errors.jsonl`: input that could not be read (file, location, reason).",
              "- `manifest.json`: every file with its size and sha256, the tokenizer, the options and per-stage "
              "stats (`tokpipe stats --verify` checks the folder against it)."]
    lines += ["## Files", "", *files, ""]
    return "\n".join(lines).lstrip("\n")


def _header(configs: list[tuple[str, list[tuple[str | None, str]]]]) -> str:
    """The YAML header: each config with its data files (one pattern, or one per split).
    Values are written as JSON strings, which YAML reads as they are. Nothing without a
    config (an output without data files)."""
    if not configs:
        return ""
    lines = ["---", "configs:"]
    for name, files in configs:
        lines.append(f"- config_name: {name}")
        if len(files) == 1 and files[0][0] is None:
            lines.append(f"  data_files: {json.dumps(files[0][1])}")
            continue
        lines.append("  data_files:")
        for split, path in files:
            lines += [f"  - split: {split}", f"    path: {json.dumps(path)}"]
    return "\n".join([*lines, "---", ""])


def _funnel(manifest: dict[str, Any]) -> list[str]:
    steps = summary.funnel(manifest)
    if not steps:
        return ["## Funnel", "", "No stats recorded."]
    rows = [[_cell(step.stage), f"{step.documents_in:,}", f"{step.kept:,}", f"{step.dropped:,}",
             _percent(step.share_kept)] for step in steps]
    return ["## Funnel", "", "Documents through each stage, in order (`read`: every input record; those that "
            "could not be read are its `dropped`, listed in `errors.jsonl`).", "",
            *_table(["stage", "in", "kept", "dropped", "kept, of read"], rows, "lrrrr")]


def _drop_reasons(manifest: dict[str, Any]) -> list[str]:
    reasons = summary.drop_reasons(manifest)
    if not reasons:
        return ["## Drop reasons", "", "No document was dropped."]
    rows = [[_cell(r.stage), _cell(r.reason), f"{r.count:,}", _percent(r.share_of_stage), _percent(r.share_of_input)]
            for r in reasons]
    return ["## Drop reasons", "",
            *_table(["stage", "reason", "documents", "of the stage's input", "of read"], rows, "llrrr")]


def _sources(manifest: dict[str, Any]) -> list[str]:
    view = summary.overview(manifest)
    lines = ["## Sources", ""]
    if not view.inputs:
        return [*lines, "No input recorded."]
    lines.append(f"{len(view.inputs):,} input(s), {view.unreadable:,} unreadable record(s) (`errors.jsonl`):")
    lines.append("")
    lines += [f"- `{_code(storage.redact(path))}`" for path in view.inputs[:_SOURCES]]
    if len(view.inputs) > _SOURCES:
        lines.append(f"- ... and {len(view.inputs) - _SOURCES:,} more (`manifest.json` lists them all)")
    return lines


def _table(header: list[str], rows: list[list[str]], align: str) -> list[str]:
    rule = ["---:" if a == "r" else "---" for a in align]
    return [f"| {' | '.join(header)} |", f"| {' | '.join(rule)} |", *(f"| {' | '.join(row)} |" for row in rows)]


def _params(params: dict[str, Any]) -> str:
    """A stage's parameters in one cell, secrets masked and URLs' credentials redacted."""
    if not params:
        return "(defaults)"
    shown = [f"{key}=***" if _SECRET_PARAM.search(key) and value is not None
             else f"{key}={storage.redact(json.dumps(value, default=str))}" for key, value in params.items()]
    return _cell(", ".join(shown))


def _cut(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= _CELL_CHARS else text[:_CELL_CHARS - 1] + "…"


def _cell(text: str) -> str:
    """A table cell: one line, cut, with the characters that would end the cell escaped."""
    return _cut(text).replace("\\", "\\\\").replace("|", "\\|")


def _code(text: str) -> str:
    """Text for an inline code span: one line, cut, no backquote to end it early."""
    return _cut(text).replace("`", "'")


def _percent(part: float, whole: float | None = None) -> str:
    share = part if whole is None else (part / whole if whole else 0.0)
    return f"{100 * share:.1f}%"


def _yes(flag: Any) -> str:
    return "yes" if flag else "no"
