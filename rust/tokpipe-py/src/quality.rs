//! `tokpipe._core` bindings of the heuristic quality kernels (`tokpipe_core::text::c4`,
//! `fineweb`, `gopher`): Arrow buffers in, bytes out; the GIL is released.

use crate::arrow_c::ArrowStrings;
use crate::errors::{self, IntoPyResult};
use crate::gate;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tokpipe_core::text::c4::{badwords_column, c4_column, C4Params};
use tokpipe_core::text::fineweb::fineweb_column;
use tokpipe_core::text::gopher::{quality_stats, repetition_stats, QualityParams};
use tokpipe_core::text::words::{word_count_column, Splitter};

/// The word splitter for a language code, or a ValueError naming the languages there are.
fn splitter(language: &str) -> PyResult<Splitter> {
    Splitter::named(language).ok_or_else(|| {
        errors::invalid_argument(format!(
            "no word splitter for language {language:?} (there are: en, zh, ja, unicode)"
        ))
    })
}

fn le_bytes<T: Copy, const N: usize>(values: &[T], to: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| to(v)).collect()
}

/// (offsets, data, drops, line_stats) of `c4_quality`.
type C4Result<'py> = (
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Vec<u64>,
);

/// C4 rules over a column: (offsets, data, drops, line_stats). `offsets` are 64-bit when
/// the column is a `large_string`, else 32-bit (the output is never longer than the input); `drops` one byte per row.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn c4_quality<'py>(
    py: Python<'py>,
    column: &Bound<'py, PyAny>,
    remove_citations: bool,
    filter_no_terminal_punct: bool,
    min_num_sentences: i64,
    min_words_per_line: i64,
    max_word_length: i64,
    filter_lorem_ipsum: bool,
    filter_javascript: bool,
    filter_curly_bracket: bool,
    filter_policy: bool,
) -> PyResult<C4Result<'py>> {
    let params = C4Params {
        remove_citations,
        filter_no_terminal_punct,
        min_num_sentences,
        min_words_per_line,
        max_word_length,
        filter_lorem_ipsum,
        filter_javascript,
        filter_curly_bracket,
        filter_policy,
    };
    let column = ArrowStrings::get(column)?;
    let (out_offsets, out) = gate::enter(py, || -> PyResult<_> {
        let wide = column.is_wide();
        let column = column.column()?;
        let out = c4_column(&column, &params);
        let out_offsets = if wide {
            le_bytes(&out.offsets, i64::to_le_bytes)
        } else {
            le_bytes(&out.offsets, |v| (v as i32).to_le_bytes())
        };
        Ok((out_offsets, out))
    })?;
    Ok((
        PyBytes::new(py, &out_offsets),
        PyBytes::new(py, &out.data),
        PyBytes::new(py, &out.drops),
        out.stats.to_vec(),
    ))
}

/// One byte per row: 1 when the lower-cased text contains one of `words`.
#[pyfunction]
pub fn c4_badwords<'py>(
    py: Python<'py>,
    column: &Bound<'py, PyAny>,
    words: Vec<String>,
    word_boundaries: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    let column = ArrowStrings::get(column)?;
    let found = gate::enter(py, || -> PyResult<Vec<u8>> {
        let column = column.column()?;
        badwords_column(&column, &words, word_boundaries).py()
    })?;
    Ok(PyBytes::new(py, &found))
}

/// FineWeb statistics, field-major u64 (see `tokpipe_core::text::fineweb::FIELDS`).
#[pyfunction]
pub fn fineweb_stats<'py>(
    py: Python<'py>,
    column: &Bound<'py, PyAny>,
    stop_chars: Vec<String>,
    short_line_length: usize,
    language: Option<&str>,
) -> PyResult<Bound<'py, PyBytes>> {
    let column = ArrowStrings::get(column)?;
    let count_words = language.map(splitter).transpose()?;
    let stats = gate::enter(py, || -> PyResult<Vec<u8>> {
        let column = column.column()?;
        Ok(le_bytes(
            &fineweb_column(&column, &stop_chars, short_line_length, count_words),
            u64::to_le_bytes,
        ))
    })?;
    Ok(PyBytes::new(py, &stats))
}

/// Gopher quality statistics, row-major u64 (see `tokpipe_core::text::gopher::QUALITY_STATS`).
#[pyfunction]
pub fn gopher_quality_stats<'py>(
    py: Python<'py>,
    column: &Bound<'py, PyAny>,
    language: &str,
    punctuation: &str,
    stop_words: Vec<String>,
) -> PyResult<Bound<'py, PyBytes>> {
    let column = ArrowStrings::get(column)?;
    let params = QualityParams::new(splitter(language)?, punctuation, &stop_words);
    let stats = gate::enter(py, || -> PyResult<Vec<u8>> {
        let column = column.column()?;
        Ok(le_bytes(&quality_stats(&column, &params), u64::to_le_bytes))
    })?;
    Ok(PyBytes::new(py, &stats))
}

/// Gopher repetition statistics, row-major u64: `REPETITION_STATS`, then one column per
/// `top_n` and one per `dup_n` (see `tokpipe_core::text::gopher`).
#[pyfunction]
pub fn gopher_repetition_stats<'py>(
    py: Python<'py>,
    column: &Bound<'py, PyAny>,
    language: &str,
    top_n: Vec<usize>,
    dup_n: Vec<usize>,
) -> PyResult<Bound<'py, PyBytes>> {
    let column = ArrowStrings::get(column)?;
    let splitter = splitter(language)?;
    let stats = gate::enter(py, || -> PyResult<Vec<u8>> {
        let column = column.column()?;
        Ok(le_bytes(
            &repetition_stats(splitter, &column, &top_n, &dup_n),
            u64::to_le_bytes,
        ))
    })?;
    Ok(PyBytes::new(py, &stats))
}

/// Word counts (`words`' lengths) of the rows whose byte in `selected` is non-zero (all rows
/// when None), 0 for the others: u64 per row.
#[pyfunction]
#[pyo3(signature = (column, language, selected=None))]
pub fn word_counts<'py>(
    py: Python<'py>,
    column: &Bound<'py, PyAny>,
    language: &str,
    selected: Option<Vec<u8>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let column = ArrowStrings::get(column)?;
    let splitter = splitter(language)?;
    let counts = gate::enter(py, || -> PyResult<Vec<u8>> {
        let column = column.column()?;
        if selected.as_ref().is_some_and(|s| s.len() != column.len()) {
            return Err(errors::invalid_argument(
                "selected must have one byte per row",
            ));
        }
        Ok(le_bytes(
            &word_count_column(splitter, &column, selected.as_deref()),
            u64::to_le_bytes,
        ))
    })?;
    Ok(PyBytes::new(py, &counts))
}

/// The words of `text` as the language rules count them (for "en", datatrove's
/// `split_into_words(text, "en")`: spaCy's tokens less the whitespace ones), for inspection
/// and tests; the kernels never build this list.
#[pyfunction]
#[pyo3(signature = (text, language="en"))]
pub fn words<'t>(text: &'t str, language: &str) -> PyResult<Vec<&'t str>> {
    let mut words = Vec::new();
    splitter(language)?.for_each_word(text, |w| words.push(w));
    Ok(words)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(c4_quality, m)?)?;
    m.add_function(wrap_pyfunction!(c4_badwords, m)?)?;
    m.add_function(wrap_pyfunction!(fineweb_stats, m)?)?;
    m.add_function(wrap_pyfunction!(words, m)?)?;
    m.add_function(wrap_pyfunction!(word_counts, m)?)?;
    m.add_function(wrap_pyfunction!(gopher_quality_stats, m)?)?;
    m.add_function(wrap_pyfunction!(gopher_repetition_stats, m)?)?;
    Ok(())
}
