"""``url_filter``: drop documents by their URL: domain block and allow lists (millions of
entries), exact URLs, regexes, and datatrove's ``URLFilter`` word rules.

The lists are loaded and the URLs judged in Rust, a whole column at a time
(``rust/tokpipe-core/src/text/urls.rs``): a domain list is a sorted array of 64-bit hashes, 8
bytes an entry, so 5M domains load in about a second and take 40 MB.
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokpipe.errors import ConfigError, InvalidArgumentError
from tokpipe.pipeline.base import Stage, StageResult, register
from tokpipe.pipeline.kernels import UrlRules, url_rules, url_verdicts

__all__ = ["UrlFilter", "URL_REASONS"]

#: A list parameter: a path to a file (one entry a line, ``#`` comments, gzip if it ends in
#: ``.gz``) or the entries themselves.
ListParam = Union[str, Sequence[str], None]

#: The reason of each verdict code of the kernel (``UrlVerdict``); "" keeps the document.
URL_REASONS = ("", "missing_url", "invalid_url", "blocked_domain", "blocked_url", "blocked_pattern", "banned_word",
               "soft_banned_words", "banned_subword", "")
_MISSING, _INVALID, _ALLOWED = 1, 2, 9
_REASONS = np.asarray(URL_REASONS, dtype=object)


def _split(stage: str, key: str, value: ListParam) -> tuple[list[str], list[str]]:
    """(entries, files) of a list parameter; a file that is not there is a ConfigError now."""
    if value is None:
        return [], []
    if isinstance(value, (str, Path)):
        path = Path(value)
        if not path.is_file():
            raise ConfigError(f"{stage}: {key}: no list file at {path}")
        return [], [str(path)]
    if not all(isinstance(v, str) for v in value):
        raise InvalidArgumentError(f"{stage}: {key} is a path or a list of strings")
    return list(value), []


def _lines(path: str) -> list[str]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


@register
class UrlFilter(Stage):
    """Drops a document by its URL (the ``url`` column; for JSONL, ``url_field`` names
    another, ``metadata.url`` a field of a struct column; by default ``url``, else
    ``metadata.url`` as Common Crawl JSONL has it). The rules, in this order (the first that
    fails names the reason):

    - ``blocked_domain``: the URL's host, or any parent domain of it, is in ``block_domains``
      (``a.b.example.com`` matches ``example.com``);
    - ``blocked_url``: the whole URL (trimmed) is in ``block_urls``;
    - ``blocked_pattern``: one of ``block_url_patterns`` (Rust ``regex`` syntax, searched
      anywhere in the URL) matches;
    - ``banned_word``: a word of the URL (cut at characters other than ASCII letters and
      digits; the words keep their case, as datatrove's do) is in ``banned_words``;
    - ``soft_banned_words``: at least ``soft_word_threshold`` distinct words of
      ``soft_banned_words`` are in it;
    - ``banned_subword``: one of ``banned_subwords`` occurs in the URL stripped of all but
      ASCII letters and digits and lower-cased.

    Word lists are normalised as datatrove's (letters and digits only, lower-cased). Every list
    is a path (one entry a line, ``#`` comments, gzip when it ends in ``.gz``) or a list.
    A document whose host, or a parent domain of it, is in ``allow_domains`` is kept whatever
    rule it fails (counted as ``allowed_domain``). A null or empty URL (``missing_url``) or one
    with no host (``invalid_url``) is counted in the stats and kept, or dropped with that reason
    when ``invalid_url: drop``."""

    name = "url_filter"

    def __init__(self, block_domains: str | Sequence[str] | None = None, allow_domains: str | Sequence[str] | None = None,
                 block_url_patterns: Sequence[str] | None = None, block_urls: str | Sequence[str] | None = None,
                 banned_words: str | Sequence[str] | None = None, banned_subwords: str | Sequence[str] | None = None,
                 soft_banned_words: str | Sequence[str] | None = None, soft_word_threshold: int = 2, url_field: str | None = None,
                 invalid_url: str = "keep") -> None:
        if invalid_url not in ("keep", "drop"):
            raise InvalidArgumentError(f"url_filter: invalid_url must be keep or drop, not {invalid_url!r}")
        if isinstance(block_url_patterns, str):
            raise InvalidArgumentError("url_filter: block_url_patterns is a list of regexes, not a string")
        if int(soft_word_threshold) < 1:
            raise InvalidArgumentError(f"url_filter: soft_word_threshold must be >= 1, not {soft_word_threshold}")
        self.block_domains = block_domains
        self.allow_domains = allow_domains
        self.block_url_patterns = list(block_url_patterns or [])
        self.block_urls = block_urls
        self.banned_words = banned_words
        self.banned_subwords = banned_subwords
        self.soft_banned_words = soft_banned_words
        self.soft_word_threshold = int(soft_word_threshold)
        self.url_field = url_field
        self.invalid_url = invalid_url
        lists = {key: _split(self.name, key, getattr(self, key)) for key in (
            "block_domains", "allow_domains", "block_urls", "banned_words", "banned_subwords", "soft_banned_words")}
        self._lists = lists
        self._rules: UrlRules | None = self._build()  # compiles the regexes, reads the files: fail now

    def _build(self) -> UrlRules:
        # Word lists are short: read here, so their entries are normalised as inline ones are.
        lists = {key: (entries + [line for f in files for line in _lines(f)], [])
                 if key.endswith("words") else (entries, files) for key, (entries, files) in self._lists.items()}
        return url_rules(lists, self.block_url_patterns, self.soft_word_threshold)

    @property
    def rules(self) -> UrlRules:
        if self._rules is None:
            self._rules = self._build()
        return self._rules

    def __getstate__(self) -> dict[str, Any]:
        # The compiled rules do not pickle; a copy (a worker) loads the lists again on first use.
        state = dict(self.__dict__)
        state["_rules"] = None
        return state

    def urls(self, batch: pa.RecordBatch) -> pa.Array:
        """The batch's URL column, as strings."""
        names = batch.schema.names
        if self.url_field is None:
            candidates = ["url", "metadata.url"]
        else:
            candidates = [self.url_field]
        for candidate in candidates:
            top, _, rest = candidate.partition(".")
            if top not in names:
                continue
            column = batch.column(top)
            for part in rest.split(".") if rest else []:
                if not pa.types.is_struct(column.type) or column.type.get_field_index(part) < 0:
                    break
                column = pc.struct_field(column, part)
            else:
                if pa.types.is_null(column.type) or not (pa.types.is_string(column.type)
                                                          or pa.types.is_large_string(column.type)):
                    column = column.cast(pa.string())
                return column
        raise InvalidArgumentError(f"url_filter: the documents have no {' or '.join(map(repr, candidates))} column "
                                   "(set url_field to the field that holds the URL)")

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        codes = url_verdicts(self.rules, self.urls(batch))
        extra = self.stats.extra
        extra["url_missing"] += int(np.count_nonzero(codes == _MISSING))
        extra["url_invalid"] += int(np.count_nonzero(codes == _INVALID))
        extra["allowed_domain"] += int(np.count_nonzero(codes == _ALLOWED))
        keep = (codes == 0) | (codes == _ALLOWED)
        if self.invalid_url == "keep":
            keep |= (codes == _MISSING) | (codes == _INVALID)
        if keep.all():
            return StageResult(batch)
        return self.reject(batch, keep, _REASONS[codes])
