//! `tokpipe._core` text kernels: Arrow string columns in as their buffers (zero-copy),
//! results out as bytes that Python wraps into Arrow or numpy arrays without a copy.

use crate::errors::IntoPyResult;
use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tokpipe_core::text::keys::exact_keys;
use tokpipe_core::text::{Offsets, StrColumn};

/// The bytes of a C-contiguous buffer (a pyarrow Buffer, a numpy array, a memoryview).
pub(crate) fn bytes_of(buffer: &PyUntypedBuffer) -> PyResult<&[u8]> {
    if !buffer.is_c_contiguous() {
        return Err(PyValueError::new_err("the buffer is not contiguous"));
    }
    if buffer.len_bytes() == 0 {
        return Ok(&[]);
    }
    // SAFETY: the exporter keeps the memory alive and in place while the buffer view
    // (`buffer`) exists, which outlives the returned slice; it is only read.
    Ok(unsafe { std::slice::from_raw_parts(buffer.buf_ptr() as *const u8, buffer.len_bytes()) })
}

/// A slice of plain numbers as Python bytes (native byte order) in one copy: the way every
/// binding hands a flat buffer to numpy or Arrow, which wrap the bytes without a copy.
pub(crate) fn py_bytes_of<'py, T: Copy + NumberLike>(
    py: Python<'py>,
    values: &[T],
) -> Bound<'py, PyBytes> {
    // SAFETY: `NumberLike` types are integers or floats: no padding, every byte initialised.
    let bytes = unsafe {
        std::slice::from_raw_parts(values.as_ptr() as *const u8, std::mem::size_of_val(values))
    };
    PyBytes::new(py, bytes)
}

/// The number types [`py_bytes_of`] may view as bytes.
pub(crate) trait NumberLike {}
impl NumberLike for u8 {}
impl NumberLike for u16 {}
impl NumberLike for u32 {}
impl NumberLike for i32 {}
impl NumberLike for i64 {}
impl NumberLike for u64 {}
impl NumberLike for f64 {}

/// Arrow offsets (`int32` for string, `int64` for large_string) from their raw bytes.
fn offsets_of(bytes: &[u8], wide: bool) -> PyResult<Offsets<'_>> {
    // SAFETY: i32 and i64 have no invalid bit patterns; align_to only yields whole, aligned items.
    let misaligned =
        || PyValueError::new_err("the offsets buffer is not aligned for its integer type");
    if wide {
        let (head, offsets, tail) = unsafe { bytes.align_to::<i64>() };
        if !head.is_empty() || !tail.is_empty() {
            return Err(misaligned());
        }
        Ok(Offsets::I64(offsets))
    } else {
        let (head, offsets, tail) = unsafe { bytes.align_to::<i32>() };
        if !head.is_empty() || !tail.is_empty() {
            return Err(misaligned());
        }
        Ok(Offsets::I32(offsets))
    }
}

/// An Arrow string column's offsets and data buffers, held (so exported, alive and in place)
/// while a kernel reads them with the GIL released. Every kernel binding takes its column
/// through this one type.
pub(crate) struct StrBuffers {
    offsets: PyUntypedBuffer,
    data: PyUntypedBuffer,
    wide: bool,
}

impl StrBuffers {
    pub(crate) fn get(
        offsets: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
        wide: bool,
    ) -> PyResult<Self> {
        Ok(StrBuffers {
            offsets: PyUntypedBuffer::get(offsets)?,
            data: PyUntypedBuffer::get(data)?,
            wide,
        })
    }

    /// The column, checked (offsets in order and inside the data).
    pub(crate) fn column(&self) -> PyResult<StrColumn<'_>> {
        StrColumn::new(
            offsets_of(bytes_of(&self.offsets)?, self.wide)?,
            bytes_of(&self.data)?,
        )
        .py()
    }
}

/// 16-byte exact-dedup keys of every row, concatenated (see `tokpipe_core::text::keys`).
#[pyfunction]
#[pyo3(signature = (offsets, data, wide, lowercase=true, collapse_whitespace=true))]
pub fn exact_dedup_keys<'py>(
    py: Python<'py>,
    offsets: &Bound<'py, PyAny>,
    data: &Bound<'py, PyAny>,
    wide: bool,
    lowercase: bool,
    collapse_whitespace: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    let column = StrBuffers::get(offsets, data, wide)?;
    let keys = py.detach(|| -> PyResult<Vec<[u8; 16]>> {
        let column = column.column()?;
        Ok(exact_keys(&column, lowercase, collapse_whitespace))
    })?;
    Ok(PyBytes::new(py, keys.as_flattened()))
}
