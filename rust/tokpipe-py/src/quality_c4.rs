//! `tokpipe._core` bindings of the C4 and FineWeb quality kernels (`tokpipe_core::text::c4`,
//! `tokpipe_core::text::fineweb`): Arrow buffers in, bytes out; the GIL is released.

use crate::errors::IntoPyResult;
use crate::kernels::StrBuffers;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tokpipe_core::text::c4::{badwords_column, c4_column, C4Params};
use tokpipe_core::text::fineweb::fineweb_column;

fn le_bytes<T: Copy, const N: usize>(values: &[T], to: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| to(v)).collect()
}

/// C4 rules over a column: (offsets, data, drops, line_stats). `offsets` are 64-bit when
/// `wide`, else 32-bit (the output is never longer than the input); `drops` one byte per row.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn c4_quality<'py>(
    py: Python<'py>,
    offsets: &Bound<'py, PyAny>,
    data: &Bound<'py, PyAny>,
    wide: bool,
    remove_citations: bool,
    filter_no_terminal_punct: bool,
    min_num_sentences: i64,
    min_words_per_line: i64,
    max_word_length: i64,
    filter_lorem_ipsum: bool,
    filter_javascript: bool,
    filter_curly_bracket: bool,
    filter_policy: bool,
) -> PyResult<(
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Vec<u64>,
)> {
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
    let column = StrBuffers::get(offsets, data, wide)?;
    let (out_offsets, out) = py.detach(|| -> PyResult<_> {
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
    offsets: &Bound<'py, PyAny>,
    data: &Bound<'py, PyAny>,
    wide: bool,
    words: Vec<String>,
    word_boundaries: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    let column = StrBuffers::get(offsets, data, wide)?;
    let found = py.detach(|| -> PyResult<Vec<u8>> {
        let column = column.column()?;
        badwords_column(&column, &words, word_boundaries).py()
    })?;
    Ok(PyBytes::new(py, &found))
}

/// FineWeb statistics, field-major u64 (see `tokpipe_core::text::fineweb::FIELDS`).
#[pyfunction]
pub fn fineweb_stats<'py>(
    py: Python<'py>,
    offsets: &Bound<'py, PyAny>,
    data: &Bound<'py, PyAny>,
    wide: bool,
    stop_chars: Vec<String>,
    short_line_length: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    let column = StrBuffers::get(offsets, data, wide)?;
    let stats = py.detach(|| -> PyResult<Vec<u8>> {
        let column = column.column()?;
        Ok(le_bytes(
            &fineweb_column(&column, &stop_chars, short_line_length),
            u64::to_le_bytes,
        ))
    })?;
    Ok(PyBytes::new(py, &stats))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(c4_quality, m)?)?;
    m.add_function(wrap_pyfunction!(c4_badwords, m)?)?;
    m.add_function(wrap_pyfunction!(fineweb_stats, m)?)?;
    Ok(())
}
