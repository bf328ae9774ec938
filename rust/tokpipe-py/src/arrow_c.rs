//! String columns in through the Arrow C data interface: Python passes
//! `array.__arrow_c_array__()`, a `(schema capsule, array capsule)` pair, and every kernel
//! binding reads its column through [`ArrowStrings`], zero-copy, as the core's `StrColumn`.
//!
//! The two C structs are defined here rather than taken from arrow-rs or pyo3-arrow: their
//! layout is fixed by the specification
//! (<https://arrow.apache.org/docs/format/CDataInterface.html>), we read a few fields and
//! two buffers of them, and either crate would add a large dependency tree (and its build
//! time) to a binding that otherwise depends on pyo3 alone. Issue 20 measured this path
//! against the former `(offsets, data, wide)` buffers: no slower, ~1.3 us less per call.

use crate::errors::{self, IntoPyResult};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::ffi::{c_char, c_void, CStr};
use tokpipe_core::text::{Offsets, StrColumn};

// The specification's layouts, field for field (#[repr(C)] keeps them so). `release` and
// `private_data` belong to the producer: we never call them; the capsules' destructors
// release the structs when the capsules die, and `ArrowStrings` holds the capsules.
#[repr(C)]
struct ArrowSchema {
    format: *const c_char,
    name: *const c_char,
    metadata: *const c_char,
    flags: i64,
    n_children: i64,
    children: *mut *mut ArrowSchema,
    dictionary: *mut ArrowSchema,
    release: Option<unsafe extern "C" fn(*mut ArrowSchema)>,
    private_data: *mut c_void,
}

#[repr(C)]
struct ArrowArray {
    length: i64,
    null_count: i64,
    offset: i64,
    n_buffers: i64,
    n_children: i64,
    buffers: *mut *const c_void,
    children: *mut *mut ArrowArray,
    dictionary: *mut ArrowArray,
    release: Option<unsafe extern "C" fn(*mut ArrowArray)>,
    private_data: *mut c_void,
}

/// The struct a capsule named `name` points to; the capsule keeps it alive.
fn capsule_pointer<T>(capsule: &Bound<'_, PyAny>, name: &CStr) -> PyResult<*const T> {
    // SAFETY: PyCapsule_GetPointer checks that the object is a capsule of exactly this name,
    // and sets a Python error (returning null) otherwise.
    let pointer = unsafe { pyo3::ffi::PyCapsule_GetPointer(capsule.as_ptr(), name.as_ptr()) };
    if pointer.is_null() {
        // Python's own error (a ValueError naming no argument) is replaced by ours.
        drop(PyErr::take(capsule.py()));
        return Err(pair_expected());
    }
    Ok(pointer as *const T)
}

/// An Arrow `string` or `large_string` array, imported from its capsules and held (so its
/// buffers stay alive and in place) while a kernel reads it with the GIL released.
/// Validity is not read: a null row reads as the text its offsets span (empty, as Arrow
/// writers lay nulls out), as the kernels always did.
pub(crate) struct ArrowStrings {
    _capsules: Py<PyTuple>,
    wide: bool,
    /// The first of the `rows + 1` offsets of the array's own rows (its `offset` applied).
    offsets: *const u8,
    rows: usize,
    data: *const u8,
    data_len: usize,
}

// SAFETY: the pointers are read-only views of buffers that the held capsules keep alive and
// that an exported Arrow array never changes; reading them from any thread is sound.
unsafe impl Send for ArrowStrings {}
unsafe impl Sync for ArrowStrings {}

impl ArrowStrings {
    pub(crate) fn get(capsules: &Bound<'_, PyAny>) -> PyResult<Self> {
        let capsules = capsules.cast::<PyTuple>().map_err(|_| pair_expected())?;
        if capsules.len() != 2 {
            return Err(pair_expected());
        }
        let schema: *const ArrowSchema = capsule_pointer(&capsules.get_item(0)?, c"arrow_schema")?;
        let array: *const ArrowArray = capsule_pointer(&capsules.get_item(1)?, c"arrow_array")?;
        // SAFETY: the capsules are alive (held by `capsules`, then by `Self`) and their
        // producer filled the structs in per the specification; a released (moved) struct
        // has a null `release`, refused before anything else is read.
        let (schema, array) = unsafe { (&*schema, &*array) };
        if schema.release.is_none() || array.release.is_none() {
            return Err(errors::invalid_argument(
                "the Arrow capsule was already consumed",
            ));
        }
        // SAFETY: `format` is a non-null, NUL-terminated string per the specification.
        let wide = match unsafe { CStr::from_ptr(schema.format) }.to_bytes() {
            b"u" => false,
            b"U" => true,
            other => {
                return Err(errors::invalid_argument(format!(
                    "expected an Arrow string or large_string array, got format {:?}",
                    String::from_utf8_lossy(&other[..other.len().min(32)])
                )))
            }
        };
        if array.n_buffers != 3 || array.length < 0 || array.offset < 0 {
            return Err(errors::invalid_argument(
                "malformed Arrow string array (buffers, length or offset)",
            ));
        }
        let (start, rows) = (array.offset as usize, array.length as usize);
        // SAFETY: a string array has 3 buffers: validity, offsets, data.
        let (offsets, data) = unsafe { (*array.buffers.add(1), *array.buffers.add(2)) };
        let (offsets, data) = (offsets as *const u8, data as *const u8);
        let width = if wide { 8 } else { 4 };
        let mut strings = ArrowStrings {
            _capsules: capsules.clone().unbind(),
            wide,
            offsets,
            rows,
            data,
            data_len: 0,
        };
        if offsets.is_null() {
            // A zero-length array may come without buffers.
            if rows != 0 {
                return Err(errors::invalid_argument(
                    "an Arrow string array without offsets",
                ));
            }
            strings.offsets = std::ptr::null();
            return Ok(strings);
        }
        if offsets as usize % width != 0 {
            return Err(errors::invalid_argument(
                "the offsets buffer is not aligned for its integer type",
            ));
        }
        // SAFETY: the offsets buffer holds `offset + length + 1` integers (specification).
        strings.offsets = unsafe { offsets.add(start * width) };
        let end = match strings.offsets_view() {
            Offsets::I32(o) => o[rows] as i64,
            Offsets::I64(o) => o[rows],
        };
        if end < 0 || (end > 0 && data.is_null()) {
            return Err(errors::invalid_argument(
                "malformed Arrow string array (data buffer)",
            ));
        }
        // The data buffer holds at least as many bytes as the last offset (specification).
        strings.data_len = end as usize;
        Ok(strings)
    }

    /// Whether the offsets are 64-bit (`large_string`).
    pub(crate) fn is_wide(&self) -> bool {
        self.wide
    }

    fn offsets_view(&self) -> Offsets<'_> {
        if self.offsets.is_null() {
            return Offsets::I32(&[0]);
        }
        // SAFETY: `offsets` points at `rows + 1` aligned integers of the format's width,
        // kept alive by the held capsules (see `get`).
        unsafe {
            if self.wide {
                Offsets::I64(std::slice::from_raw_parts(
                    self.offsets as *const i64,
                    self.rows + 1,
                ))
            } else {
                Offsets::I32(std::slice::from_raw_parts(
                    self.offsets as *const i32,
                    self.rows + 1,
                ))
            }
        }
    }

    /// The column, checked (offsets in order and inside the data).
    pub(crate) fn column(&self) -> PyResult<StrColumn<'_>> {
        let data = if self.data_len == 0 {
            &[][..]
        } else {
            // SAFETY: `data_len` bytes of the data buffer, kept alive by the held capsules.
            unsafe { std::slice::from_raw_parts(self.data, self.data_len) }
        };
        StrColumn::new(self.offsets_view(), data).py()
    }
}

fn pair_expected() -> PyErr {
    errors::invalid_argument("expected the (schema, array) capsule pair of __arrow_c_array__()")
}
