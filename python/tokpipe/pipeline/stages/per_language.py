"""Per-document language rules: ``language: auto`` for the stages whose rules depend on the
language (``gopher_quality``, ``gopher_repetition``, ``c4_quality``, ``fineweb_quality``,
``text_stats``, ``perplexity``).

With ``language: auto`` a stage reads each document's language from the ``language`` column
(the ``language`` stage writes it: ISO 639-1 codes such as ``en``, ``zh``, ``ja``, and
``und`` for text it cannot place) and judges it by the rule set of that language:

- a language listed in the stage's ``languages:`` mapping gets the stage's built-in rules for
  that language (the rules the stage has with ``language: <code>``) with the table's
  parameters set over them;
- every other language, ``und``, and a null language get the stage's top-level parameters
  (for the stages with word rules, with ``default_language``'s words and defaults); with no
  default (``default_language: null``, or ``perplexity`` without a top-level ``model``) those
  documents are kept unjudged and counted as ``not_judged``.

A batch is grouped by language once (a dictionary encoding of the column, then a stable
argsort of the rule-set numbers): each rule set runs its kernel once over its rows, and the
per-row results are put back in row order. Each rule set is an ordinary fixed-language
instance of the stage, built once when the config is read, so a document gets exactly the
verdict the stage with its language gives it.

The stats count, per rule set, the documents judged (``judged_<code>``, ``judged_default``)
and kept (``kept_<code>``, ``kept_default``), and ``not_judged``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokpipe.errors import ConfigError, InvalidArgumentError
from tokpipe.pipeline.base import Stage, StageStats
from tokpipe.pipeline.documents import TEXT
from tokpipe.pipeline.kernels import arrow_of
from tokpipe.pipeline.params import check_params, param_types

__all__ = ["AUTO", "LANGUAGE", "DEFAULT", "ISO_639_1", "is_language_code", "LanguageRules", "LanguageGroup",
           "LanguageAware", "check_auto", "rules_language", "in_row_order", "PER_LANGUAGE_OPTIONS"]

#: The value of ``language`` that picks the rules per document.
AUTO = "auto"
#: The column the ``language`` stage writes.
LANGUAGE = "language"
#: The name, in the stats, of the rule set for the languages not listed.
DEFAULT = "default"
#: The options that choose the rule sets; a language's table cannot set them.
PER_LANGUAGE_OPTIONS = ("language", "languages", "default_language")

#: ISO 639-1 codes (Lingua writes these; fastText's lid.176 writes them and a few ISO 639-3),
#: and ``sh`` (Serbo-Croatian, withdrawn from ISO 639-1 but one of lid.176's labels).
ISO_639_1 = frozenset(
    "aa ab ae af ak am an ar as av ay az ba be bg bh bi bm bn bo br bs ca ce ch co cr cs cu cv cy da de dv dz ee el "
    "en eo es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha he hi ho hr ht hu hy hz ia id ie ig ii ik io is it iu "
    "ja jv ka kg ki kj kk kl km kn ko kr ks ku kv kw ky la lb lg li ln lo lt lu lv mg mh mi mk ml mn mr ms mt my na "
    "nb nd ne ng nl nn no nr nv ny oc oj om or os pa pi pl ps pt qu rm rn ro ru rw sa sc sd se sg sh si sk sl sm sn so "
    "sq sr ss st su sv sw ta te tg th ti tk tl tn to tr ts tt tw ty ug uk ur uz ve vi vo wa wo xh yi yo za zh zu"
    .split())


def is_language_code(code: Any) -> bool:
    """An ISO 639-1 code, or three lower-case letters (ISO 639-3, as fastText writes ``ceb``,
    ``war``), not ``und``."""
    if not isinstance(code, str):
        return False
    if code in ISO_639_1:
        return True
    return len(code) == 3 and code.isascii() and code.isalpha() and code.islower() and code != "und"


def check_auto(stage: str, language: str | None, languages: Mapping[str, Any] | None,
               auto_only: Sequence[str] = ()) -> bool:
    """Whether ``language`` is ``auto``; refuses ``languages`` (and the options named in
    ``auto_only``, given as non-None) without it."""
    if language == AUTO:
        if languages is not None and not isinstance(languages, Mapping):
            raise InvalidArgumentError(f"{stage}: languages must map language codes to parameter tables, "
                                       f"not {type(languages).__name__}")
        return True
    if languages is not None:
        raise InvalidArgumentError(f"{stage}: languages (per-language parameters) needs language: auto, "
                                   f"not language: {language}")
    for option in auto_only:
        raise InvalidArgumentError(f"{stage}: {option} is for language: auto, not language: {language}")
    return False


def rules_language(stage: str, language: str, languages: Mapping[str, Any] | None, default_language: str | None,
                   supported: Sequence[str]) -> tuple[bool, str]:
    """For a stage with words per language (``supported``: those it has) and a
    ``default_language`` option (en by default): (whether ``language`` is auto, the language
    of the stage's own rules: ``language``, or with auto the default language's, en when
    there is none). Refuses a language or default it has no rules for."""
    def check(value: str | None, option: str) -> None:
        if value not in supported:
            choices = ", ".join(supported) + (" or auto" if option == "language" else "")
            raise InvalidArgumentError(f"{stage}: {option} must be one of {choices}, not {value!r}")

    auto = check_auto(stage, language, languages, ["default_language"] if default_language != "en" else [])
    if not auto:
        check(language, "language")
        return False, language
    if default_language is not None:
        check(default_language, "default_language")
    return True, default_language or "en"


S = TypeVar("S", bound=Stage)


@dataclass
class LanguageGroup(Generic[S]):
    """The rows of a batch judged by one rule set."""

    #: The rule set: a listed language's code, or ``DEFAULT``.
    name: str
    #: Its stage; None when these documents are not judged.
    stage: S | None
    #: Their positions in the batch, ascending.
    rows: np.ndarray
    #: The whole batch, and whether these rows are all of it.
    source: pa.RecordBatch
    whole: bool = False
    _batch: pa.RecordBatch | None = None

    @property
    def batch(self) -> pa.RecordBatch:
        """Those rows' ``text`` (the rules read nothing else), copied on first use (a stage
        that reads only per-row values it computed for the whole batch copies nothing)."""
        if self.whole:
            return self.source
        if self._batch is None:
            self._batch = self.source.select([TEXT]).take(arrow_of(self.rows))
        return self._batch


class LanguageRules(Generic[S]):
    """The rule sets of a stage with ``language: auto``: one stage per listed language, built
    by ``make(code, params)`` from ``languages`` (each table checked against the stage's
    parameters), and ``default`` for the rest (None: not judged)."""

    def __init__(self, stage: str, cls: type[S], languages: Mapping[str, Any] | None, default: S | None,
                 make: Callable[[str, dict[str, Any]], S], supported: Sequence[str] | None = None) -> None:
        self.stage = stage
        self.default = default
        self.rules: dict[str, S] = {}
        allowed = [p for p in param_types(cls) if p not in PER_LANGUAGE_OPTIONS]
        for code, table in (languages or {}).items():
            if not is_language_code(code):
                raise InvalidArgumentError(f"{stage}: languages: {str(code)[:20]!r} is not a language code "
                                           "(ISO 639-1, as the language stage writes: en, zh, ja...)")
            if supported is not None and code not in supported:
                raise InvalidArgumentError(f"{stage}: languages: no built-in rules for {code!r} "
                                           f"(this stage has rules for {', '.join(supported)})")
            table = {} if table is None else table
            if not isinstance(table, Mapping):
                raise InvalidArgumentError(f"{stage}: languages.{code} must be a mapping of parameters, "
                                           f"not {type(table).__name__}")
            for key in table:
                if key not in allowed:
                    raise InvalidArgumentError(f"{stage}: languages.{code}: no parameter {str(key)[:40]!r} "
                                               f"(parameters: {', '.join(allowed)})")
            try:
                self.rules[code] = make(code, check_params(cls, table))
            except (ConfigError, InvalidArgumentError) as e:
                raise InvalidArgumentError(f"{stage}: languages.{code}: {e}") from None
        self._names = [*self.rules, DEFAULT]
        self._slot = {code: n for n, code in enumerate(self.rules)}
        self._stages: list[S | None] = [*self.rules.values(), default]

    def stages(self) -> list[S]:
        """Every rule set's stage (listed languages first, then the default if any)."""
        return [s for s in self._stages if s is not None]

    def groups(self, batch: pa.RecordBatch) -> list[LanguageGroup[S]]:
        """The batch's rows grouped by rule set, in rule-set order (empty groups left out)."""
        index = batch.schema.get_field_index(LANGUAGE)
        if index < 0:
            raise InvalidArgumentError(f"{self.stage}: language: auto reads the `{LANGUAGE}` column, which the "
                                       "documents lack: run the `language` stage first")
        column = batch.column(index)
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        if pa.types.is_null(column.type):
            # A batch whose `language` is null on every row (an input's own column, read
            # without a value to type it): each is a null language, judged by the default.
            column = column.cast(pa.string())
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            raise InvalidArgumentError(f"{self.stage}: the `{LANGUAGE}` column holds {column.type}, not language "
                                       "codes (strings)")
        encoded = pc.dictionary_encode(column)
        values = encoded.dictionary.to_pylist()
        # The rule set of each distinct value (few: one per language in the batch); a null
        # value is the one past the dictionary.
        slots = np.array([self._slot.get(v, len(self.rules)) for v in values] + [len(self.rules)], dtype=np.int64)
        codes = pc.fill_null(encoded.indices, len(values)).to_numpy(zero_copy_only=False)
        rule = slots[codes]
        counts = np.bincount(rule, minlength=len(self._names))
        if np.count_nonzero(counts) == 1:  # one rule set: the whole batch, not a copy
            slot = int(np.flatnonzero(counts)[0])
            return [LanguageGroup(self._names[slot], self._stages[slot], np.arange(batch.num_rows), batch, True)]
        order = np.argsort(rule, kind="stable")
        groups = []
        for slot, rows in enumerate(np.split(order, np.cumsum(counts)[:-1])):
            if len(rows):
                groups.append(LanguageGroup(self._names[slot], self._stages[slot], rows, batch))
        return groups

    def count(self, stats: StageStats, groups: Sequence[LanguageGroup[S]], kept: np.ndarray | None) -> None:
        """Adds the documents each rule set judged and kept (``kept``: the batch's keep mask,
        None when all are kept) to ``stats``."""
        for group in groups:
            if group.stage is None:
                stats.extra["not_judged"] += len(group.rows)
                continue
            stats.extra[f"judged_{group.name}"] += len(group.rows)
            stats.extra[f"kept_{group.name}"] += len(group.rows) if kept is None else int(kept[group.rows].sum())

    def verdict(self, batch: pa.RecordBatch, stats: StageStats,
                judge: Callable[[S, pa.RecordBatch], tuple[Any, Any]]) -> tuple[np.ndarray, np.ndarray]:
        """A filter's (keep mask, reasons) over the batch: ``judge(stage, rows)`` per rule set,
        put back in row order; unjudged rows are kept."""
        keep = np.ones(batch.num_rows, dtype=bool)
        reasons = np.full(batch.num_rows, "", dtype=object)
        groups = self.groups(batch)
        for group in groups:
            if group.stage is None:
                continue
            mask, why = judge(group.stage, group.batch)
            if isinstance(mask, (pa.Array, pa.ChunkedArray)):
                mask = mask.fill_null(False).to_numpy(zero_copy_only=False)
            if isinstance(why, (pa.Array, pa.ChunkedArray)):
                why = why.to_numpy(zero_copy_only=False)
            keep[group.rows] = np.asarray(mask, dtype=bool)
            reasons[group.rows] = why
        self.count(stats, groups, keep)
        return keep, reasons


class LanguageAware:
    """Mixed into a stage that takes ``language: auto`` (before its base class): warns when
    no ``language`` stage comes before it. A warning, not an error: the input may carry its
    own ``language`` column; a batch without one is an error when it comes."""

    _rules: LanguageRules[Any] | None = None

    def config_warnings(self, earlier: Sequence[Stage]) -> list[str]:
        if self._rules is None or any(stage.name == LANGUAGE for stage in earlier):
            return []
        return [f"language: auto reads the `{LANGUAGE}` column, and no `language` stage comes before this one "
                "(the input must have the column)"]


def in_row_order(groups: Sequence[LanguageGroup[Any]], parts: Sequence[pa.Array], rows: int) -> pa.Array:
    """Arrow arrays, one per group (its rows' values, in its order), as one array in the
    batch's row order."""
    if len(parts) == 1:
        return parts[0]
    kind = parts[0].type
    joined = pa.concat_arrays([p if p.type == kind else p.cast(kind) for p in parts])
    inverse = np.empty(rows, dtype=np.int64)
    inverse[np.concatenate([g.rows for g in groups])] = np.arange(rows)
    return joined.take(arrow_of(inverse))
