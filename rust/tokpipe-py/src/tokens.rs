//! `tokpipe._core` binding of `tokpipe_core::tokens`: gathering rows of Arrow list columns
//! (token ids) from several columns, the shuffle's copy in `tokpipe tokenize`. Buffers in
//! (read in place), Python bytes out, the GIL released while copying.

use crate::errors::IntoPyResult;
use crate::kernels::{bytes_of, owned_buffer, IntoNumbers, OwnedBuffer};
use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use tokpipe_core::tokens::{gather_lists_into, gathered_len, Lists};

/// `bytes` seen as a slice of `T`, or an error when it is not aligned for `T`.
fn typed<'a, T: Copy>(bytes: &'a [u8], what: &str) -> PyResult<&'a [T]> {
    // SAFETY: only used with plain integer types, for which every bit pattern is valid.
    let (head, values, tail) = unsafe { bytes.align_to::<T>() };
    if !head.is_empty() || !tail.is_empty() {
        return Err(PyValueError::new_err(format!(
            "the {what} buffer is not aligned or not a whole number of items"
        )));
    }
    Ok(values)
}

fn gather<'py, T: Copy + Send + Sync + Default>(
    py: Python<'py>,
    sources: &[(PyUntypedBuffer, PyUntypedBuffer)],
    pieces: &[i64],
    rows: &[i64],
) -> PyResult<(Bound<'py, OwnedBuffer>, Bound<'py, OwnedBuffer>)>
where
    Vec<T>: IntoNumbers,
{
    let lists = sources
        .iter()
        .map(|(offsets, values)| {
            Ok(Lists {
                offsets: typed::<i64>(bytes_of(offsets)?, "offsets")?,
                values: typed::<T>(bytes_of(values)?, "values")?,
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    let picks = || {
        pieces
            .iter()
            .zip(rows)
            .map(|(&p, &r)| (p.max(-1) as usize, r.max(-1) as usize))
    };
    let (offsets, values) = py.detach(|| -> PyResult<(Vec<i64>, Vec<T>)> {
        let mut values = vec![T::default(); gathered_len(&lists, picks()).py()?];
        let offsets = gather_lists_into(&lists, picks(), &mut values).py()?;
        Ok((offsets, values))
    })?;
    Ok((owned_buffer(py, offsets)?, owned_buffer(py, values)?))
}

/// Rows `(pieces[i], rows[i])` of the list columns `sources` (each `(int64 offsets, values)`,
/// values `width` bytes wide: 2 or 4), in that order: `(int64 offsets from 0, values)`.
#[pyfunction]
pub fn gather_lists<'py>(
    py: Python<'py>,
    sources: Vec<(Bound<'py, PyAny>, Bound<'py, PyAny>)>,
    width: usize,
    pieces: &Bound<'py, PyAny>,
    rows: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, OwnedBuffer>, Bound<'py, OwnedBuffer>)> {
    let buffers = sources
        .iter()
        .map(|(o, v)| Ok((PyUntypedBuffer::get(o)?, PyUntypedBuffer::get(v)?)))
        .collect::<PyResult<Vec<_>>>()?;
    let (pieces, rows) = (PyUntypedBuffer::get(pieces)?, PyUntypedBuffer::get(rows)?);
    let pieces = typed::<i64>(bytes_of(&pieces)?, "pieces")?;
    let rows = typed::<i64>(bytes_of(&rows)?, "rows")?;
    if pieces.len() != rows.len() {
        return Err(PyValueError::new_err("pieces and rows differ in length"));
    }
    match width {
        2 => gather::<u16>(py, &buffers, pieces, rows),
        4 => gather::<u32>(py, &buffers, pieces, rows),
        _ => Err(PyValueError::new_err(format!(
            "width must be 2 or 4, not {width}"
        ))),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(gather_lists, m)?)?;
    Ok(())
}
