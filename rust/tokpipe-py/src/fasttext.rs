//! `tokpipe._core` bindings of the quality classifier's and the `language` stage's kernels:
//! the fastText text preparation (`tokpipe_core::text::fasttext_prep`) and fastText supervised
//! models, `model.bin` or quantized `.ftz` (`tokpipe_core::fasttext`). Arrow buffers in, bytes
//! out; the GIL is released.

use crate::arrow_c::ArrowStrings;
use crate::errors::IntoPyResult;
use crate::gate;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tokpipe_core::fasttext::{quality_scores, top_labels, FastText, Rows};
use tokpipe_core::text::fasttext_prep::prepare_column;

/// The prepared form of every row, each followed by `line_end`: (offsets as little-endian
/// i64, data), a `large_string` column's buffers.
#[pyfunction]
#[pyo3(signature = (column, max_chars, line_end=""))]
pub fn fasttext_prepare<'py>(
    py: Python<'py>,
    column: &Bound<'py, PyAny>,
    max_chars: Option<usize>,
    line_end: &str,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let column = ArrowStrings::get(column)?;
    let out = gate::enter(py, || -> PyResult<_> {
        Ok(prepare_column(&column.column()?, max_chars, line_end))
    })?;
    let offsets: Vec<u8> = out.offsets.iter().flat_map(|o| o.to_le_bytes()).collect();
    Ok((PyBytes::new(py, &offsets), PyBytes::new(py, &out.data)))
}

/// A fastText supervised model read from its `model.bin` or `.ftz` bytes (`name` is named in
/// errors).
#[pyclass(name = "FastTextModel", module = "tokpipe._core", frozen)]
pub struct PyFastText {
    model: FastText,
}

#[pymethods]
impl PyFastText {
    #[new]
    fn new(py: Python<'_>, data: &[u8], name: &str) -> PyResult<Self> {
        let model = gate::enter(py, || FastText::from_bytes(data, name))?;
        Ok(PyFastText { model })
    }

    /// The labels, in the model's order.
    #[getter]
    fn labels(&self) -> Vec<String> {
        self.model.labels().to_vec()
    }

    /// Little-endian f64 per row: the probability of label number `positive` (see
    /// `tokpipe_core::fasttext::quality_scores`). The rows are documents, prepared with
    /// `max_chars` first, when `prepare` is true; else lines already prepared.
    #[pyo3(signature = (column, positive, prepare, max_chars=None))]
    #[allow(clippy::too_many_arguments)]
    fn quality_scores<'py>(
        &self,
        py: Python<'py>,
        column: &Bound<'py, PyAny>,
        positive: usize,
        prepare: bool,
        max_chars: Option<usize>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let column = ArrowStrings::get(column)?;
        let rows = if prepare {
            Rows::Documents { max_chars }
        } else {
            Rows::Prepared
        };
        let scores = gate::enter(py, || -> PyResult<Vec<u8>> {
            let scores = quality_scores(&self.model, &column.column()?, positive, rows).py()?;
            Ok(scores.iter().flat_map(|s| s.to_le_bytes()).collect())
        })?;
        Ok(PyBytes::new(py, &scores))
    }

    /// Every row's top label as fastText's `predict(text, k=1)` gives it for the row's first
    /// `max_chars` characters, newlines read as spaces (see
    /// `tokpipe_core::fasttext::top_labels`): (label indices as little-endian i32, -1 for no
    /// prediction; probabilities as little-endian f32).
    #[pyo3(signature = (column, max_chars=None))]
    fn top_labels<'py>(
        &self,
        py: Python<'py>,
        column: &Bound<'py, PyAny>,
        max_chars: Option<usize>,
    ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let column = ArrowStrings::get(column)?;
        let (labels, probs) = gate::enter(py, || -> PyResult<(Vec<u8>, Vec<u8>)> {
            let (labels, probs) = top_labels(&self.model, &column.column()?, max_chars);
            Ok((
                labels.iter().flat_map(|l| l.to_le_bytes()).collect(),
                probs.iter().flat_map(|p| p.to_le_bytes()).collect(),
            ))
        })?;
        Ok((PyBytes::new(py, &labels), PyBytes::new(py, &probs)))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fasttext_prepare, m)?)?;
    m.add_class::<PyFastText>()?;
    Ok(())
}
