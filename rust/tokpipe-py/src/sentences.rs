//! `tokpipe._core` bindings of sentence-span dedup (`tokpipe_core::text::sentences`): Arrow
//! buffers in, bytes out, the GIL released around the work.

use crate::arrow_c::ArrowStrings;
use crate::errors::{self, IntoPyResult};
use crate::gate;
use crate::kernels::bytes_of;
use pyo3::buffer::PyUntypedBuffer;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tokpipe_core::text::sentences::{self, Splitter};

fn splitter(name: &str) -> PyResult<Splitter> {
    match name {
        "en" => Ok(Splitter::English),
        "cjk" => Ok(Splitter::Cjk),
        other => Err(errors::invalid_argument(format!(
            "sentence splitter must be en or cjk, not {:?}",
            other.chars().take(40).collect::<String>()
        ))),
    }
}

fn le_bytes<T: Copy, const N: usize>(values: &[T], to: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| to(v)).collect()
}

/// Per row, one 12-byte key per sentence: (data, int64 offsets as bytes).
#[pyfunction]
pub fn sentence_keys<'py>(
    py: Python<'py>,
    column: &Bound<'py, PyAny>,
    n: usize,
    split: &str,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let column = ArrowStrings::get(column)?;
    let split = splitter(split)?;
    let (keys, offsets) = gate::enter(py, || -> PyResult<_> {
        let (keys, offsets) = sentences::sentence_keys(&column.column()?, n, split).py()?;
        Ok((keys, le_bytes(&offsets, i64::to_le_bytes)))
    })?;
    Ok((PyBytes::new(py, &keys), PyBytes::new(py, &offsets)))
}

/// Which sentences to remove: (drop flag per sentence, touched flag per document, sentences,
/// spans removed, sentences removed, bytes removed). `counts` holds each document's sentence
/// count (u32).
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn sentence_decide<'py>(
    py: Python<'py>,
    keys: &Bound<'py, PyAny>,
    counts: &Bound<'py, PyAny>,
    n: usize,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, u64, u64, u64, u64)> {
    let keys = PyUntypedBuffer::get(keys)?;
    let counts = PyUntypedBuffer::get(counts)?;
    let verdict = gate::enter(py, || -> PyResult<_> {
        let counts: Vec<u32> = bytes_of(&counts)?
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect();
        sentences::sentence_decide(bytes_of(&keys)?, &counts, n).py()
    })?;
    Ok((
        PyBytes::new(py, &verdict.drop),
        PyBytes::new(py, &verdict.touched),
        verdict.sentences,
        verdict.spans_removed,
        verdict.sentences_removed,
        verdict.bytes_removed,
    ))
}

/// Rows without their flagged sentences and whether each is kept: (data, int64 offsets as
/// bytes, keep flag per row). `flag_offsets` are the int32 offsets of a binary column holding
/// one flag byte per sentence of each row.
#[pyfunction]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub fn sentence_filter<'py>(
    py: Python<'py>,
    column: &Bound<'py, PyAny>,
    flag_offsets: &Bound<'py, PyAny>,
    flag_data: &Bound<'py, PyAny>,
    split: &str,
    min_doc_words: usize,
    min_num_sentences: usize,
) -> PyResult<(
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
)> {
    let column = ArrowStrings::get(column)?;
    let flag_offsets = PyUntypedBuffer::get(flag_offsets)?;
    let flag_data = PyUntypedBuffer::get(flag_data)?;
    let split = splitter(split)?;
    let (text, offsets, keep) = gate::enter(py, || -> PyResult<_> {
        let column = column.column()?;
        let fo: Vec<usize> = bytes_of(&flag_offsets)?
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().expect("4 bytes")).max(0) as usize)
            .collect();
        let fd = bytes_of(&flag_data)?;
        if fo.len() != column.len() + 1
            || fo.windows(2).any(|w| w[0] > w[1])
            || fo.last().is_some_and(|&e| e > fd.len())
        {
            return Err(errors::invalid_argument(
                "sentence flags do not match the column",
            ));
        }
        let (text, offsets, keep) = sentences::filter_sentences(
            &column,
            |i| &fd[fo[i]..fo[i + 1]],
            split,
            min_doc_words,
            min_num_sentences,
        )
        .py()?;
        Ok((text, le_bytes(&offsets, i64::to_le_bytes), keep))
    })?;
    Ok((
        PyBytes::new(py, &text),
        PyBytes::new(py, &offsets),
        PyBytes::new(py, &keep),
    ))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(sentence_keys, m)?)?;
    m.add_function(wrap_pyfunction!(sentence_decide, m)?)?;
    m.add_function(wrap_pyfunction!(sentence_filter, m)?)?;
    Ok(())
}
