"""The report as one self-contained HTML page: inline CSS and inline SVG, no script, no
network. Sections: Scale (overview, funnel, inputs, unreadable records), Quality (drop
reasons, samples, histograms with thresholds), Diversity (languages, sources, domains,
duplicate clusters, n-gram ratios, PII, tokens). Several runs appear side by side, one column
each, in the order given.

Every value that reaches the page passes through :func:`html.escape`: document text, ids and
paths are data, never markup.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from tokpipe import __version__
from tokpipe.pipeline import summary
from tokpipe.report import charts
from tokpipe.report.collect import (HISTOGRAM_ROWS, MAX_CLUSTER_IDS, NGRAM_SIZES, TEXT_SAMPLE_BYTES,
                                    WORDS_SAMPLE_BYTES, RunData)

__all__ = ["render", "length_charts", "page", "table", "legend"]

TOP = 20
CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;color:#1a1a1a;
background:#fafafa;line-height:1.45;font-size:14px}
main{max-width:1240px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:24px;margin:12px 0 4px}h2{font-size:20px;margin:32px 0 8px;border-bottom:2px solid #3b6fb6;
padding-bottom:4px}h3{font-size:16px;margin:20px 0 6px}h4{font-size:14px;margin:12px 0 4px}
nav a{margin-right:14px}
.runs{display:grid;gap:18px;align-items:start}
.run{background:#fff;border:1px solid #ddd;border-radius:6px;padding:10px 12px;min-width:0;overflow-x:auto}
.run>h3:first-child{margin-top:0}.run>h4:first-child{margin-top:0;color:#3b6fb6;overflow-wrap:anywhere}
table{border-collapse:collapse;margin:4px 0 10px;background:#fff}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:right;vertical-align:top}
th{background:#f0f3f8}td.l,th.l{text-align:left;white-space:nowrap}td.w{white-space:normal;overflow-wrap:anywhere;
max-width:420px;text-align:left}
.note{color:#555;font-size:13px}.small{font-size:12px;color:#555}
.sample{background:#fff;border:1px solid #ddd;border-left:4px solid #e07b39;margin:6px 0;padding:6px 8px}
.sample .id{font-size:12px;color:#555;overflow-wrap:anywhere}
.sample pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:4px 0 0;font-size:12.5px;max-height:12em;
overflow:auto;font-family:ui-monospace,"DejaVu Sans Mono",monospace}
details{margin:6px 0}summary{cursor:pointer;font-weight:600}
svg.chart{max-width:100%;height:auto;display:block;margin:4px 0}
.legend span{display:inline-block;margin-right:12px;font-size:12px}
.legend i{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px}
.bar{display:inline-block;height:9px;background:#3b6fb6;vertical-align:middle}
.pct{display:inline-block;width:4.6em;text-align:right;margin-right:6px}
table.distribution td:nth-child(3){text-align:left;min-width:190px}
"""


def _e(value: object) -> str:
    return html.escape(str(value))


def _n(value: int | float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,}" if isinstance(value, int) else f"{value:,.2f}"


def _pct(value: float) -> str:
    return f"{value:.2%}" if value else "0%"


def _bytes(run: RunData, value: int | None) -> str:
    """Text bytes, marked ``≈`` where they are scaled from a sample of the text."""
    if run.kind != "clean" or value is None:
        return "–"
    return ("≈ " if run.text_sampled else "") + _mb(value)


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def _mb(value: int | None) -> str:
    """Bytes as the dataset card writes them (``12.3 kB``); ``–`` when unknown."""
    return "–" if value is None else summary.byte_size(value)


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1, cls: str = "",
           wrap: Sequence[int] = (), over: str = "") -> str:
    """``rows`` are already-escaped cells; the first ``left`` columns are left-aligned and
    kept on one line, the columns in ``wrap`` wrap anywhere (ids, paths, text); ``over`` is an
    already-built header row put above the column names."""
    def cls_of(i: int) -> str:
        return "w" if i in wrap else "l" if i < left else ""

    heads = "".join(f'<th class="{"l" if i < left or i in wrap else ""}">{_e(h)}</th>' for i, h in enumerate(head))
    out = [f'<table class="{cls}">{over}<tr>{heads}</tr>']
    for row in rows:
        out.append("<tr>" + "".join(f'<td class="{cls_of(i)}">{c}</td>' for i, c in enumerate(row)) + "</tr>")
    out.append("</table>")
    return "".join(out)


#: The page's table and legend, for other pages in its style (``tokpipe eval-tokenizer --report``).
table = _table


def _side_by_side(runs: Sequence[RunData], body: Callable[[RunData], str]) -> str:
    cells = [f'<div class="run"><h4>{_e(run.name)}</h4>{body(run)}</div>' for run in runs]
    return (f'<div class="runs" style="grid-template-columns:repeat({len(runs)},minmax(0,1fr))">'
            + "".join(cells) + "</div>")


def _legend(items: Sequence[tuple[str, str]]) -> str:
    return '<div class="legend">' + "".join(f'<span><i style="background:{c}"></i>{_e(t)}</span>'
                                            for t, c in items) + "</div>"


legend = _legend


# -- Scale -------------------------------------------------------------------------------------

def _overview(runs: Sequence[RunData]) -> str:
    views = [summary.overview(r.manifest) for r in runs]
    rows = [
        ("output", [_e(r.kind) for r in runs]),
        ("documents read", [_n(v.documents_read) for v in views]),
        ("documents kept", [f"{_n(v.documents_kept)} ({_pct(_ratio(v.documents_kept, v.documents_read))})"
                            for v in views]),
        ("documents rejected", [_n(v.documents_rejected) for v in views]),
        ("unreadable records", [_n(v.unreadable) for v in views]),
        ("text kept", [_bytes(r, r.text_bytes("kept")) for r in runs]),
        ("text rejected", [_bytes(r, r.text_bytes("rejected")) for r in runs]),
        ("tokens", [_n(v.tokens) for v in views]),
        ("kept shards (on disk)", [f"{v.shards} ({_mb(v.kept_bytes)})" if v.kept_bytes is not None else str(v.shards)
                                    for v in views]),
        ("created, tokpipe", [_e(f"{r.manifest.get('created', '?')}, {r.manifest.get('tokpipe_version', '?')}")
                              for r in runs]),
    ]
    return _table(["", *[r.name for r in runs]], [[_e(k), *v] for k, v in rows])


def _funnel(run: RunData, width: int = 720) -> str:
    steps = summary.funnel(run.manifest)
    chart = charts.funnel([(s.stage, s.documents_in, s.kept) for s in steps], width=width)
    rows = []
    for s in steps:
        dropped_bytes = run.stage_bytes(s.stage) if s.stage != "read" else None
        rows.append([_e(s.stage), _n(s.documents_in), _n(s.kept), _n(s.dropped), _pct(s.share_dropped),
                     _bytes(run, dropped_bytes), _n(s.tokens), f"{s.seconds:,.1f}"])
    table = _table(["stage", "in", "kept", "dropped", "dropped %", "text dropped", "tokens", "worker s"], rows)
    return (_legend([("kept", charts.KEPT), ("dropped by this stage", charts.REJECTED)]) + chart + table
            + '<p class="small">worker s: seconds spent in the stage, summed over the workers (not the run&#39;s '
              "wall time). Text dropped: the UTF-8 "
              "bytes of the rejected documents' text as written (after rewriting stages before them).</p>")


def _inputs(run: RunData) -> str:
    inputs = summary.overview(run.manifest).inputs
    shown = "".join(f"<li>{_e(i)}</li>" for i in inputs[:TOP])
    more = f"<li>… and {len(inputs) - TOP} more</li>" if len(inputs) > TOP else ""
    out = f"<h4>inputs</h4><ul>{shown}{more}</ul>" if inputs else ""
    if run.errors:
        rows = []
        for reason, count in run.errors.most_common():
            example = run.error_samples.get(reason, [{}])[0]
            where = f"{example.get('path', '')} {example.get('location', '')}: {example.get('detail', '')}"
            rows.append([_e(reason), _n(count), f'<span class="small">{_e(where)}</span>'])
        out += "<h4>unreadable records (errors.jsonl), by reason</h4>" + _table(["reason", "records", "example"], rows,
                                                                                   cls="errors", wrap=(2,))
    else:
        out += '<p class="note">No unreadable records.</p>'
    return out


# -- Quality -----------------------------------------------------------------------------------

def _reasons(runs: Sequence[RunData]) -> str:
    keys: dict[tuple[str, str], None] = {}
    by_run = []
    for run in runs:
        reasons = {(r.stage, r.reason): r for r in summary.drop_reasons(run.manifest)}
        by_run.append(reasons)
        keys.update(dict.fromkeys(reasons))
    if not keys:
        return '<p class="note">No document was dropped.</p>'
    head = ["stage", "reason"]
    over = '<tr><th colspan="2"></th>' + "".join(f'<th colspan="4">{_e(run.name)}</th>' for run in runs) + "</tr>"
    for _ in runs:
        head += ["documents", "% of stage input", "% of all read", "text"]
    rows = []
    for key in keys:
        row = [_e(key[0]), f'<a href="#samples-{_e(key[0])}-{_e(key[1])}">{_e(key[1])}</a>']
        for run, reasons in zip(runs, by_run):
            r = reasons.get(key)
            if r is None:
                row += ["–"] * 4
            else:
                row += [_n(r.count), _pct(r.share_of_stage), _pct(r.share_of_input),
                        _bytes(run, run.reason_bytes(key) if key[0] != "read" else None)]
        rows.append(row)
    return _table(head, rows, left=2, cls="reasons", over=over)


def _samples(run: RunData) -> str:
    if run.kind != "clean":
        return '<p class="note">A tokenize output keeps no rejected documents.</p>'
    pii = any(stage == "pii" for stage, _ in summary.pipeline_stages(run.manifest))
    out = [f'<p class="small">Up to {max((len(s) for s in run.samples.values()), default=0)} documents per reason, '
           "those with the smallest hash of their id (the same on every report of this output); text cut at 600 "
           "characters." + (" A pii stage ran: the text shown has every match of its detectors masked (letters "
                                 "and digits become *), whatever its action." if pii else "")
           + "</p>"]
    for r in summary.drop_reasons(run.manifest):
        if r.stage == "read":
            continue
        samples = run.samples.get((r.stage, r.reason), [])
        out.append(f'<details open id="samples-{_e(r.stage)}-{_e(r.reason)}"><summary>{_e(r.stage)}: '
                   f'{_e(r.reason)} ({_n(r.count)})</summary>')
        for s in samples:
            dup = f", duplicate of {_e(s.duplicate_of)}" if s.duplicate_of else ""
            out.append(f'<div class="sample"><div class="id">id {_e(s.id)}{dup}</div><pre>{_e(s.text)}'
                       f'{"…" if s.truncated else ""}</pre></div>')
        if not samples:
            out.append('<p class="note">No rejected rows found for this reason in rejected/.</p>')
        out.append("</details>")
    return "".join(out)


def _shares(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    if not len(values):
        return np.zeros(len(edges) - 1)
    clipped = np.clip(values, edges[0], edges[-1] * (1 - 1e-12))
    counts, _ = np.histogram(clipped, bins=edges)
    return counts / len(values)


def _histograms(runs: Sequence[RunData]) -> str:
    keys: dict[str, None] = {}
    for run in runs:
        keys.update(dict.fromkeys(k for k in run.metrics if k != "tokens"))
    if not keys:
        return '<p class="note">No per-document values to plot.</p>'
    out = [_legend([("kept", charts.KEPT), ("rejected (any stage)", charts.REJECTED),
                    ("threshold from the config", charts.THRESHOLD)]),
           '<p class="small">Each bar is the share of its group (kept or rejected) in that bin, so the two '
           "distributions compare whatever their sizes. Documents dropped before a stage wrote a column have no value "
           "for it.</p>"]
    cards = []
    for key in keys:
        def body(run: RunData, key: str = key) -> str:
            metric = run.metrics.get(key)
            if metric is None:
                return '<p class="note">Not in this output.</p>'
            kept, rejected = metric.values(True), metric.values(False)
            edges, log = charts.bin_edges([kept, rejected], integer=key in ("chars", "bytes", "words"),
                                          include=[t.value for t in metric.thresholds])
            lines = [charts.Line(t.value, t.label, t.kind != "mark") for t in metric.thresholds]
            svg = charts.histogram([charts.Series("kept", _shares(kept, edges), charts.KEPT),
                                    charts.Series("rejected", _shares(rejected, edges), charts.REJECTED)],
                                   edges, log, x_label=metric.label, y_label="% of group", lines=lines, percent=True)
            note = f"{len(kept):,} kept, {len(rejected):,} rejected documents"
            if metric.measured < metric.total:
                note += f" (sampled: measured on {metric.measured:,} of {metric.total:,} documents)"
            return svg + f'<p class="small">{_e(note)}</p>'

        if len(runs) == 1:  # one card per column, two columns: half the scrolling
            cards.append(f'<div class="run"><h3>{_e(key)}</h3>{body(runs[0])}</div>')
        else:
            out.append(f"<h3>{_e(key)}</h3>" + _side_by_side(runs, body))
    if cards:
        out.append('<div class="runs" style="grid-template-columns:repeat(2,minmax(0,1fr))">' + "".join(cards)
                   + "</div>")
    return "".join(out)


# -- Diversity ---------------------------------------------------------------------------------

def _distribution(counter: Counter, total: int | None = None, limit: int = TOP) -> str:
    total = total or sum(counter.values())
    if not counter:
        return '<p class="note">No such column in this output.</p>'
    rows = []
    for value, count in counter.most_common(limit):
        share = count / total if total else 0
        rows.append([_e(value), _n(count), f'<span class="pct">{_pct(share)}</span><span class="bar" '
                     f'style="width:{share * 120:.1f}px"></span>'])
    rest = total - sum(c for _, c in counter.most_common(limit))
    if len(counter) > limit:
        share = f'<span class="pct">{_pct(_ratio(rest, total))}</span>'
        rows.append([f"… {len(counter) - limit:,} more", _n(rest), share])
    return _table(["value", "count", "share"], rows, wrap=(0,), cls="distribution")


def _languages(run: RunData, which: str) -> str:
    counters = run.languages if which == "language" else run.sources
    out = ""
    for side in ("kept", "rejected"):
        out += f"<h4>{side} documents</h4>" + _distribution(counters[side])
    return out


def _domains(run: RunData) -> str:
    if not run.domains:
        return '<p class="note">No url column, url in metadata, or URL-like id in this output.</p>'
    known = sum(c for d, c in run.domains.items() if d != "(none)")
    return ('<p class="small">Kept documents by the host of their <code>url</code> column, else of '
            '<code>metadata.url</code>, else of their id when it is a URL; "www." removed; '
            f"{len(run.domains) - ('(none)' in run.domains):,} distinct domains, {known:,} documents with one.</p>"
            + _distribution(run.domains))


def _clusters(run: RunData) -> str:
    if run.kind != "clean":
        return '<p class="note">Not a clean output.</p>'
    stages = [s for s, _ in summary.pipeline_stages(run.manifest) if s in ("exact_dedup", "minhash_dedup")]
    if not stages:
        return '<p class="note">No dedup stage ran.</p>'
    out = []
    for stage in stages:
        clusters = run.clusters.get(stage, Counter())
        removed = run.cluster_removed[stage]
        # Past MAX_CLUSTER_IDS kept ids, the tally holds the clusters of 1 in `scale` of them.
        scale = 1 << run.cluster_sampling[stage]
        out.append(f"<h4>{_e(stage)}</h4>")
        if not clusters:
            out.append('<p class="note">No duplicates found: every cluster has one document.</p>')
            continue
        sizes = Counter(n + 1 for n in clusters.values())
        buckets = [("2", 2, 2), ("3", 3, 3), ("4", 4, 4), ("5", 5, 5), ("6-10", 6, 10), ("11-100", 11, 100),
                   (">100", 101, 1 << 62)]
        values = [scale * sum(c for size, c in sizes.items() if lo <= size <= hi) for _, lo, hi in buckets]
        if scale == 1:
            out.append(f'<p class="small">{len(clusters):,} clusters of two or more documents; {removed:,} '
                       f"documents removed as duplicates; the largest cluster has {max(sizes):,} documents.</p>")
        else:
            out.append(f'<p class="small">≈ {scale * len(clusters):,} clusters of two or more documents; '
                       f"{removed:,} documents removed as duplicates. Sampled: over {MAX_CLUSTER_IDS:,} clusters, "
                       f"their sizes were counted for 1 in {scale:,} of them (chosen by a hash of the kept "
                       f"document's id; each counted exactly), and the chart scales them by {scale:,}; the "
                       f"largest of those has {max(sizes):,} documents.</p>")
        out.append(charts.columns([b[0] for b in buckets], values, y_label="clusters",
                                  x_label="documents in the cluster (kept one included)"))
        rows = [[_e(kept_id), _n(n + 1)] for kept_id, n in clusters.most_common(5)]
        heading = "largest clusters: kept document" if scale == 1 else "largest sampled clusters: kept document"
        out.append(_table([heading, "documents"], rows, cls="clusters", wrap=(0,)))
    return "".join(out)


def _ngrams(run: RunData) -> str:
    if not run.ngram_ratios:
        return '<p class="note">No kept text to sample.</p>'
    rows = [[f"{n}-grams", f"{run.ngram_ratios[n]:.3f}"] for n in NGRAM_SIZES if n in run.ngram_ratios]
    return (_table(["word n-grams", "distinct / all"], rows)
            + f'<p class="small">Measured on {run.ngram_docs:,} kept documents, {run.ngram_words:,} words '
              "(lowercased, whitespace-split; n-grams within a document). Lower is more repetitive.</p>")


def _pii(run: RunData) -> str:
    counts = summary.pii_counts(run.manifest)
    if not counts:
        return '<p class="note">No pii stage ran.</p>'
    rows = [[_e(kind), _n(count)] for kind, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    return _table(["type", "matches"], rows)


def length_charts(lengths: np.ndarray, seq_len: int | None, what: str = "document length (tokens)",
                  edges: np.ndarray | None = None) -> str:
    """:func:`length_histograms` and a line of totals and percentiles."""
    if not len(lengths):
        return '<p class="note">No documents.</p>'
    values = lengths.astype(np.float64)
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return ("".join(length_histograms(lengths, seq_len, what, edges))
            + f'<p class="small">{len(values):,} documents, {int(values.sum()):,} tokens; mean {values.mean():,.1f}, '
              f"p50 {p50:,.0f}, p90 {p90:,.0f}, p99 {p99:,.0f}, max {int(values.max()):,}"
            + (f"; seq_len {seq_len:,}" if seq_len else "") + ". Above: documents per length; below: the tokens "
              "they hold (a few long documents can hold most tokens).</p>")


def length_histograms(lengths: np.ndarray, seq_len: int | None, what: str = "document length (tokens)",
                      edges: np.ndarray | None = None) -> list[str]:
    """Two SVG histograms of (non-empty) document lengths in tokens over the same bins
    (log-spaced, or ``edges``): documents per bin and tokens per bin (where the tokens are),
    with p50/p90/p99 and ``seq_len`` marked."""
    values = lengths.astype(np.float64)
    if edges is None:
        edges, log = charts.bin_edges([values], integer=True, include=[seq_len] if seq_len else [])
    else:
        edges, log = np.asarray(edges, dtype=np.float64), True
    clipped = np.clip(values, edges[0], edges[-1] * (1 - 1e-12))
    documents, _ = np.histogram(clipped, bins=edges)
    tokens, _ = np.histogram(clipped, bins=edges, weights=values)
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    lines = [charts.Line(float(p50), "p50", False), charts.Line(float(p90), "p90", False),
             charts.Line(float(p99), "p99", False)]
    if seq_len:
        lines.append(charts.Line(float(seq_len), "seq_len", True))
    return [charts.histogram([charts.Series("documents", documents, charts.KEPT)], edges, log, x_label=what,
                             y_label="documents", lines=lines, height=CHART_HEIGHT),
            charts.histogram([charts.Series("tokens", tokens, charts.REJECTED)], edges, log, x_label=what,
                             y_label="tokens (token-weighted)", lines=lines, height=CHART_HEIGHT)]


#: The height of each length histogram (``stats --plot x.svg`` stacks them).
CHART_HEIGHT = 260


def page(title: str, body: str) -> str:
    """A standalone page in the report's style around ``body`` (already HTML)."""
    return (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{_e(title)}</title>"
            f"<style>{CSS}</style></head><body><main><h1>{_e(title)}</h1>{body}</main></body></html>\n")


def _tokens(run: RunData) -> str:
    if run.kind != "tokenize":
        return '<p class="note">Not a tokenize output.</p>'
    out = length_charts(run.doc_lengths if run.doc_lengths is not None else np.zeros(0), run.seq_len)
    for column in ("language", "source"):
        if column in run.tokens_by:
            out += f"<h4>tokens per {column}</h4>" + _distribution(run.tokens_by[column])
    if not run.tokens_by:
        out += ('<p class="note">Tokens per language and source need the inputs\' language/source columns '
                "(a clean output's shards, still in place).</p>")
    return out


# -- the page ----------------------------------------------------------------------------------

def _notes(runs: Sequence[RunData]) -> str:
    items = [f"Counts of documents, reasons, languages, sources, domains and clusters take every document. "
             f"Text is read from row groups spread evenly through the output, up to {TEXT_SAMPLE_BYTES >> 20} MB per "
             f"run (text bytes are then scaled from it, marked ≈), word counts from {WORDS_SAMPLE_BYTES >> 20} MB of "
             f"it; histograms hold at most about {HISTOGRAM_ROWS:,} documents per run. Each chart says when it is "
             "sampled."]
    for run in runs:
        items += [f"{run.name}: {note}" for note in run.notes]
    return "<ul class=\"note\">" + "".join(f"<li>{_e(i)}</li>" for i in items) + "</ul>"


def render(runs: Sequence[RunData]) -> str:
    """The whole page for ``runs`` (one or several, shown side by side)."""
    clean = [r for r in runs if r.kind == "clean"]
    tokenized = [r for r in runs if r.kind == "tokenize"]
    parts = [f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
             f"<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
             f"<title>tokpipe report: {_e(', '.join(r.name for r in runs))}</title><style>{CSS}</style></head>"
             "<body><main>",
             f"<h1>tokpipe report</h1><p class=\"note\">{_e(', '.join(r.name for r in runs))}; written by tokpipe "
             f"{_e(__version__)}.</p>",
             '<nav><a href="#scale">Scale</a><a href="#quality">Quality</a><a href="#diversity">Diversity</a></nav>',
             _notes(runs),
             '<h2 id="scale">Scale</h2><h3>Overview</h3>', _overview(runs),
             "<h3>Funnel</h3>", _side_by_side(runs, lambda r: _funnel(r, 720 if len(runs) == 1 else 520)),
             "<h3>Inputs and unreadable records</h3>", _side_by_side(runs, _inputs),
             '<h2 id="quality">Quality</h2><h3>Drop reasons</h3>', _reasons(runs)]
    if clean:
        parts += ["<h3>Sample rejected documents</h3>", _side_by_side(clean, _samples),
                  "<h3>Histograms</h3>", _histograms(clean)]
    parts.append('<h2 id="diversity">Diversity</h2>')
    if clean:
        parts += ["<h3>Languages</h3>", _side_by_side(clean, lambda r: _languages(r, "language")),
                  "<h3>Sources</h3>", _side_by_side(clean, lambda r: _languages(r, "source")),
                  "<h3>Top domains</h3>", _side_by_side(clean, _domains),
                  "<h3>Duplicate clusters</h3>", _side_by_side(clean, _clusters),
                  "<h3>Distinct word n-grams</h3>", _side_by_side(clean, _ngrams),
                  "<h3>PII</h3>", _side_by_side(clean, _pii)]
    if tokenized:
        parts += ["<h3>Tokens</h3>", _side_by_side(tokenized, _tokens)]
    parts.append("</main></body></html>\n")
    return "".join(parts)
