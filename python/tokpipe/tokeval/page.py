"""The results of an evaluation or a sweep as text cells and as one self-contained HTML page.

:data:`METRIC_COLUMNS` and :func:`metric_cells` are the columns both the terminal table
(``tokpipe eval-tokenizer``) and the page show, so the two always agree. The page is built
from the run report's pieces (:func:`tokpipe.report.render.page`, its tables and legend, the
SVG charts of :mod:`tokpipe.report.charts`): inline CSS and SVG, no script, no network. Every
value that reaches the page passes through :func:`html.escape`.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

from tokpipe import __version__
from tokpipe.report import charts
from tokpipe.report.render import legend, page, table
from tokpipe.tokeval.evaluate import Evaluation, Metrics, Token
from tokpipe.tokeval.sweep import Sweep

__all__ = ["METRIC_COLUMNS", "metric_cells", "percent", "token_cell", "evaluation_page", "sweep_page", "notes"]

#: The metric columns, short headers first (the terminal is narrow), with what each means.
METRIC_COLUMNS: tuple[tuple[str, str], ...] = (
    ("chars/tok", "characters per token"),
    ("bytes/tok", "UTF-8 bytes per token"),
    ("tok/word", "tokens per Unicode word (UAX #29; Han and kana: one word per character)"),
    ("fb docs", "share of documents with a fallback token (unknown token or byte piece)"),
    ("fb bytes", "share of bytes in documents with a fallback token"),
    ("fb tokens", "share of tokens that are fallback tokens"),
    ("vocab used", "share of the vocabulary used at least once"),
    ("90% in", "how many distinct tokens make 90% of the uses"),
    ("round trip", "share of documents with decode(encode(text)) == text"),
)


def percent(value: float) -> str:
    """A share as a percentage: ``0%``, ``0.0042%``, ``12.3%``, ``99.96%``; only a share of 1
    shows as ``100.0%`` (one document in 3,000 that does not round-trip must not read as all)."""
    if value == 0:
        return "0%"
    if value < 0.001:
        return f"{value * 100:.2g}%"
    if value < 1 and f"{value * 100:.1f}" == "100.0":
        return f"{math.floor(value * 10_000) / 100:.2f}%"  # rounded down: 99.96%, 99.99%
    return f"{value * 100:.1f}%"


def metric_cells(m: Metrics) -> list[str]:
    """The cells of :data:`METRIC_COLUMNS` for ``m``."""
    return [f"{m.chars_per_token:.2f}", f"{m.bytes_per_token:.2f}", f"{m.tokens_per_word:.2f}",
            percent(m.fallback_document_share), percent(m.fallback_byte_share), percent(m.fallback_token_share),
            percent(m.vocabulary_used), f"{m.tokens_for_90:,}", percent(m.round_trip_share)]


#: Longer tokens are shown cut (a vocabulary can hold 128 spaces as one token).
TOKEN_SHOWN_CHARS = 40


def token_cell(token: Token | None) -> str:
    """A token as text: quoted, spaces shown as ``␣`` (a page would collapse them), cut at
    :data:`TOKEN_SHOWN_CHARS`, and its length in bytes."""
    if token is None:
        return "–"
    text = token.text if len(token.text) <= TOKEN_SHOWN_CHARS else token.text[:TOKEN_SHOWN_CHARS] + "…"
    text = text.replace(" ", "␣")
    return f"{text!r} ({token.bytes} bytes)"


def notes(evaluation: Evaluation) -> list[str]:
    """What the numbers were measured on, in sentences."""
    out = [f"{evaluation.documents:,} documents, {evaluation.bytes:,} bytes, measured in {evaluation.seconds:,.1f} s"
           + (f"; {evaluation.unreadable:,} unreadable records set aside" if evaluation.unreadable else "") + "."]
    if evaluation.sampled:
        out.append(f"Sampled: {evaluation.sampled}.")
    if evaluation.by:
        out.append(f"Grouped by {evaluation.by}, from {evaluation.grouped_from}.")
    silent: dict[str, list[str]] = {}
    for t in evaluation.tokenizers:
        if not t.falls_back:
            silent.setdefault(t.fallback.removeprefix("none: "), []).append(t.name)
    for why, names in silent.items():
        out.append(f"{', '.join(names)}: no fallback token ({why}), so the fallback columns are 0 by construction.")
    lossy = [t for t in evaluation.tokenizers if evaluation.overall[t.name].round_trip_share < 1]
    if lossy:
        out.append(f"Round trip below 100% for {', '.join(t.name for t in lossy)}: the tokenizer normalizes "
                   "(lowercasing, accents, NFKC, whitespace), decodes with spaces between words, or decodes unknown "
                   "text as a placeholder, so decode(encode(text)) differs from the text.")
    return out


def _e(value: object) -> str:
    return html.escape(str(value))


def _scroll(html_table: str) -> str:
    """A table that scrolls sideways inside the page when the window is narrower than it."""
    return f'<div style="overflow-x:auto">{html_table}</div>'


def _metrics_table(rows: Sequence[tuple[str, Metrics]], first: str) -> str:
    head = [first, *(h for h, _ in METRIC_COLUMNS), "longest token used"]
    return _scroll(table(head, [[_e(name), *map(_e, metric_cells(m)), _e(token_cell(m.longest_used))]
                                for name, m in rows], wrap=(len(head) - 1,)))


def _compression_chart(evaluation: Evaluation) -> str:
    names = [t.name for t in evaluation.tokenizers]
    values = [evaluation.overall[n].chars_per_token for n in names]
    # Wide enough that no two names below their bars touch (the page scales a wide chart down
    # as a whole, which keeps them apart).
    step = max(len(n) for n in names) * charts.CHAR_W + 14
    return charts.columns(names, values, x_label="tokenizer", y_label="characters per token",
                          width=int(max(560, 78 + step * len(names))))


def _evaluation_body(evaluation: Evaluation) -> str:
    info = [[_e(t.name), _e(t.model), f"{t.vocab_size:,}", _e(t.fallback), _e(token_cell(t.longest_in_vocabulary)),
             f"{_throughput(evaluation, t.name)}"] for t in evaluation.tokenizers]
    out = ['<ul class="note">' + "".join(f"<li>{_e(n)}</li>" for n in notes(evaluation)) + "</ul>",
           "<h2>Tokenizers</h2>",
           _scroll(table(["tokenizer", "model", "vocabulary", "fallback tokens", "longest token in the vocabulary",
                          "encoding MB/s"], info, wrap=(3, 4))),
           "<h2>Overall</h2>", _compression_chart(evaluation),
           _metrics_table([(t.name, evaluation.overall[t.name]) for t in evaluation.tokenizers], "tokenizer"),
           '<ul class="small">' + "".join(f"<li><b>{_e(h)}</b>: {_e(d)}</li>" for h, d in METRIC_COLUMNS) + "</ul>"]
    if evaluation.by:
        groups = evaluation.groups
        out += [f"<h2>By {_e(evaluation.by)}</h2>", "<h3>Characters per token</h3>",
                _scroll(table(["tokenizer", *groups],
                              [[_e(t.name), *(f"{evaluation.per_group[g][t.name].chars_per_token:.2f}" for g in groups)]
                               for t in evaluation.tokenizers])),
                "<h3>Fallback tokens (share of tokens)</h3>",
                _scroll(table(["tokenizer", *groups],
                              [[_e(t.name), *(percent(evaluation.per_group[g][t.name].fallback_token_share)
                                              for g in groups)] for t in evaluation.tokenizers]))]
        for g in groups:
            first = next(iter(evaluation.per_group[g].values()))
            out.append(f"<h3>{_e(g)}</h3><p class=\"small\">{first.documents:,} documents, {first.bytes:,} bytes, "
                       f"{first.words:,} words</p>")
            out.append(_metrics_table([(t.name, evaluation.per_group[g][t.name]) for t in evaluation.tokenizers],
                                      "tokenizer"))
    return "".join(out)


def _throughput(evaluation: Evaluation, name: str) -> str:
    seconds = evaluation.encode_seconds.get(name, 0.0)
    return f"{evaluation.bytes / seconds / 1e6:,.1f}" if seconds > 0 else "–"


def evaluation_page(evaluation: Evaluation, title: str = "tokpipe eval-tokenizer") -> str:
    """The page of an evaluation: notes, the tokenizers, the overall table and chart, and
    each group's table."""
    return page(title, f'<p class="note">Written by tokpipe {_e(__version__)}.</p>' + _evaluation_body(evaluation))


def sweep_page(sweep: Sweep, title: str | None = None) -> str:
    """The page of a sweep: compression and fallback rate against vocabulary size, one line
    per group and one for all documents, then the evaluation of every size."""
    title = title or f"tokpipe eval-tokenizer: {sweep.model} vocabulary sizes"
    rows = [[f"{p.asked:,}", "–" if p.vocab_size is None else f"{p.vocab_size:,}", f"{p.train_seconds:,.1f}",
             _e(p.note)] for p in sweep.points]
    out = [f'<p class="note">Written by tokpipe {_e(__version__)}. Each size trained with tokpipe.train_'
           f"{_e(sweep.model)}'s defaults, then evaluated on the held-out documents.</p>",
           "<h2>Trained sizes</h2>", table(["asked", "trained", "training s", "note"], rows, wrap=(3,))]
    evaluation = sweep.evaluation
    if evaluation is None:
        return page(title, "".join(out) + '<p class="note">No size could be trained.</p>')
    trained = [p for p in sweep.points if p.name is not None]
    # Without a grouping, groups holds ALL alone; with one, a real group may be called "all".
    groups = list(evaluation.groups) if evaluation.by else []
    # One colour per line: the largest groups are drawn, every group is in the tables below.
    drawn = groups[:len(charts.PALETTE) - 1]
    series: list[tuple[str, dict[str, Metrics]]] = [("all documents", evaluation.overall)]
    series += [(g, evaluation.per_group[g]) for g in drawn]
    colors = list(charts.PALETTE[:len(series)])
    # At the size trained, which can differ from the size asked (a small corpus runs out of
    # pieces; WordPiece's alphabet alone may be larger than asked).
    ticks = [float(p.vocab_size or p.asked) for p in trained]

    def curves(value: str) -> list[charts.Curve]:
        return [charts.Curve(label, [(float(p.vocab_size or p.asked), getattr(by_name[p.name], value))
                                     for p in trained], color)
                for (label, by_name), color in zip(series, colors)]

    key = legend([(label, color) for (label, _), color in zip(series, colors)])
    if len(drawn) < len(groups):
        key += (f'<p class="small">The {len(drawn)} largest of {len(groups)} groups by bytes; every group is in '
                "the tables below.</p>")
    out += ["<h2>Compression against vocabulary size</h2>", key,
            charts.line_chart(curves("chars_per_token"), x_label="vocabulary size", y_label="characters per token",
                              log_x=True, x_ticks=ticks, width=720),
            "<h2>Fallback rate against vocabulary size</h2>"]
    if any(t.falls_back for t in evaluation.tokenizers):
        out += [key, charts.line_chart(curves("fallback_token_share"), x_label="vocabulary size",
                                       y_label="fallback tokens (share)", log_x=True, percent=True, x_ticks=ticks,
                                       width=720)]
    else:
        out.append(f'<p class="note">{_e(evaluation.tokenizers[0].fallback)}: the fallback rate is 0 at every '
                   "size, so it is not drawn.</p>")
    out += ["<h2>Every size on the held-out documents</h2>", _evaluation_body(evaluation)]
    return page(title, "".join(out))
