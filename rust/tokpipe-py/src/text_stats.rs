//! `tokpipe._core` bindings of the `text_stats` and `blocklist` kernels
//! (`tokpipe_core::text::stats`, `tokpipe_core::text::blocklist`): Arrow string columns in, bytes
//! out; the GIL is released.

use crate::arrow_c::ArrowStrings;
use crate::errors::IntoPyResult;
use crate::gate;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tokpipe_core::text::blocklist::{blocklist_column, PhraseMatcher};
use tokpipe_core::text::stats::{stats_column, FEATURES};

/// The features' names, in the order `text_stats` lays them out.
#[pyfunction]
pub fn text_stats_features() -> Vec<&'static str> {
    FEATURES.to_vec()
}

/// Features of every row, feature-major little-endian f64 (see `text_stats_features`).
#[pyfunction]
pub fn text_stats<'py>(
    py: Python<'py>,
    column: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let column = ArrowStrings::get(column)?;
    let out = gate::enter(py, || -> PyResult<Vec<u8>> {
        let column = column.column()?;
        Ok(stats_column(&column)
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect())
    })?;
    Ok(PyBytes::new(py, &out))
}

/// (matches, words) per row of a word/phrase list, each as little-endian u64.
#[pyfunction]
pub fn blocklist_counts<'py>(
    py: Python<'py>,
    column: &Bound<'py, PyAny>,
    phrases: Vec<String>,
    ignore_case: bool,
    word_boundaries: bool,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let column = ArrowStrings::get(column)?;
    let (hits, words) = gate::enter(py, || -> PyResult<(Vec<u8>, Vec<u8>)> {
        let matcher = PhraseMatcher::new(&phrases, ignore_case, word_boundaries).py()?;
        let column = column.column()?;
        let (hits, words) = blocklist_column(&column, &matcher);
        let le = |v: Vec<u64>| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        Ok((le(hits), le(words)))
    })?;
    Ok((PyBytes::new(py, &hits), PyBytes::new(py, &words)))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(text_stats_features, m)?)?;
    m.add_function(wrap_pyfunction!(text_stats, m)?)?;
    m.add_function(wrap_pyfunction!(blocklist_counts, m)?)?;
    Ok(())
}
