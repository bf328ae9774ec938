//! `tokpipe._core` text kernels: Arrow string columns in through the Arrow C data interface
//! (zero-copy, see `arrow_c.rs`), other inputs as buffers, results out as bytes that Python wraps into Arrow or numpy arrays without a copy.

use crate::arrow_c::ArrowStrings;
use crate::errors;
use crate::gate;
use pyo3::buffer::PyUntypedBuffer;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tokpipe_core::text::keys::exact_keys;

/// The bytes of a C-contiguous buffer (a pyarrow Buffer, a numpy array, a memoryview).
pub(crate) fn bytes_of(buffer: &PyUntypedBuffer) -> PyResult<&[u8]> {
    if !buffer.is_c_contiguous() {
        return Err(errors::invalid_argument("the buffer is not contiguous"));
    }
    if buffer.len_bytes() == 0 {
        return Ok(&[]);
    }
    // SAFETY: the exporter keeps the memory alive and in place while the buffer view
    // (`buffer`) exists, which outlives the returned slice; it is only read.
    Ok(unsafe { std::slice::from_raw_parts(buffer.buf_ptr() as *const u8, buffer.len_bytes()) })
}

/// A Rust vector of plain numbers handed to Python without a copy: a read-only object with
/// the buffer protocol, which numpy (`np.frombuffer`), pyarrow (`pa.py_buffer`) and `bytes()`
/// read in place, and `len()` (its size in bytes). It is how every binding hands a large
/// flat buffer over: building Python `bytes` instead would copy it once more, into freshly
/// faulted pages.
#[pyclass(frozen, module = "tokpipe._core")]
pub(crate) struct OwnedBuffer {
    numbers: Numbers,
}

pub(crate) enum Numbers {
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    I64(Vec<i64>),
}

impl OwnedBuffer {
    fn bytes(&self) -> &[u8] {
        fn view<T>(values: &[T]) -> &[u8] {
            // SAFETY: integers have no padding and every byte is initialised.
            unsafe {
                std::slice::from_raw_parts(
                    values.as_ptr() as *const u8,
                    std::mem::size_of_val(values),
                )
            }
        }
        match &self.numbers {
            Numbers::U8(v) => v,
            Numbers::U16(v) => view(v),
            Numbers::U32(v) => view(v),
            Numbers::I64(v) => view(v),
        }
    }
}

#[pymethods]
impl OwnedBuffer {
    /// # Safety
    /// Called by Python with a valid `view`; the data never moves or changes while the
    /// object lives (it is frozen and owns the vector), and the view holds a reference to it.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut pyo3::ffi::Py_buffer,
        flags: std::ffi::c_int,
    ) -> PyResult<()> {
        let bytes = slf.get().bytes();
        // SAFETY: see above; PyBuffer_FillInfo takes its own reference to `slf`.
        let status = unsafe {
            pyo3::ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                bytes.as_ptr() as *mut std::ffi::c_void,
                bytes.len() as pyo3::ffi::Py_ssize_t,
                1,
                flags,
            )
        };
        if status == -1 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    fn __len__(&self) -> usize {
        self.bytes().len()
    }
}

/// Vectors [`owned_buffer`] hands over.
pub(crate) trait IntoNumbers {
    fn into_numbers(self) -> Numbers;
}
impl IntoNumbers for Vec<u8> {
    fn into_numbers(self) -> Numbers {
        Numbers::U8(self)
    }
}
impl IntoNumbers for Vec<u16> {
    fn into_numbers(self) -> Numbers {
        Numbers::U16(self)
    }
}
impl IntoNumbers for Vec<u32> {
    fn into_numbers(self) -> Numbers {
        Numbers::U32(self)
    }
}
impl IntoNumbers for Vec<i64> {
    fn into_numbers(self) -> Numbers {
        Numbers::I64(self)
    }
}

/// `values` as an [`OwnedBuffer`] (native byte order), moved, not copied.
pub(crate) fn owned_buffer(
    py: Python<'_>,
    values: impl IntoNumbers,
) -> PyResult<Bound<'_, OwnedBuffer>> {
    Bound::new(
        py,
        OwnedBuffer {
            numbers: values.into_numbers(),
        },
    )
}

/// 16-byte exact-dedup keys of every row, concatenated (see `tokpipe_core::text::keys`).
#[pyfunction]
#[pyo3(signature = (column, lowercase=true, collapse_whitespace=true))]
pub fn exact_dedup_keys<'py>(
    py: Python<'py>,
    column: &Bound<'py, PyAny>,
    lowercase: bool,
    collapse_whitespace: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    let column = ArrowStrings::get(column)?;
    let keys = gate::enter(py, || -> PyResult<Vec<[u8; 16]>> {
        let column = column.column()?;
        Ok(exact_keys(&column, lowercase, collapse_whitespace))
    })?;
    Ok(PyBytes::new(py, keys.as_flattened()))
}
