//! Token ids into Python lists without making an int object per id, and into `bytes` without
//! clearing them first.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyList};
use std::mem::MaybeUninit;

// Turning ids into a `list[int]` holds the GIL, so in `encode_batch` it is the serial part that
// caps how far threads can help: made the plain way (one new int object per id, ~21M of them
// for the 77 MB benchmark corpus) it took a quarter of a two-thread batch. Ints are immutable,
// so each tokenizer makes one int object per vocabulary id, once, and every list shares them:
// an id then costs a reference-count increment instead of an allocation, and freeing the list
// later costs a decrement instead of a free. Only the first `SHARED_IDS` ids get a shared
// object: BPE ids are roughly in order of frequency, so those are most of a text's ids and
// their objects stay in cache, while an increment on the object of a rare id (and the load of
// its pointer from a table of 100k-200k) was a cache miss each: a profile of one-document
// `encode` on English text put 18% of the time on those two loads with a table of every id,
// 13.5% with this one. A rarer id gets a new int, which the allocator serves from the blocks
// the last list freed. The table (128 KiB of pointers) is only built when ids are first
// returned.
/// Ids below this get a shared int object.
const SHARED_IDS: usize = 1 << 14;

pub struct IdObjects {
    size: usize,
    table: PyOnceLock<Box<[Py<PyAny>]>>,
}

impl IdObjects {
    pub fn new(size: usize) -> Self {
        IdObjects {
            size: size.min(SHARED_IDS),
            table: PyOnceLock::new(),
        }
    }

    fn table(&self, py: Python<'_>) -> PyResult<&[Py<PyAny>]> {
        let table = self.table.get_or_try_init(py, || {
            (0..self.size as u32)
                .map(|id| Ok(id.into_pyobject(py)?.into_any().unbind()))
                .collect::<PyResult<Box<[_]>>>()
        })?;
        Ok(table)
    }

    /// `ids` as a new Python list of ints, not tracked by the cycle collector.
    pub fn list<'py>(&self, py: Python<'py>, ids: &[u32]) -> PyResult<Bound<'py, PyList>> {
        let table = self.table(py)?;
        let items = ids.iter().map(|&id| match table.get(id as usize) {
            Some(obj) => Ok(obj.clone_ref(py).into_bound(py)),
            None => Ok(id.into_pyobject(py)?.into_any()),
        });
        let list = new_list(py, ids.len(), items)?;
        // Why untracked: a list of ints cannot be part of a reference cycle, yet every list
        // is born tracked, and the collections its allocations trigger walk every id of every
        // list still alive: a quarter of the CPU of an `encode_batch` returning 34,000 lists
        // (20 MB of text). CPython untracks tuples of atomic items for the same reason.
        // Should a caller later put the list itself into a cycle, the collector cannot break
        // that cycle (it leaks, as any untracked container would); it never frees an object
        // the list still holds, since references from untracked objects count as external.
        // SAFETY: the list is a fully built, tracked GC object owned here.
        unsafe { ffi::PyObject_GC_UnTrack(list.as_ptr().cast()) };
        Ok(list)
    }
}

/// A list of exactly `len` items filled in place (`PyList::new` goes through a generic
/// iterator protocol with per-item checks this loop does not need).
pub fn new_list<'py>(
    py: Python<'py>,
    len: usize,
    items: impl Iterator<Item = PyResult<Bound<'py, PyAny>>>,
) -> PyResult<Bound<'py, PyList>> {
    // SAFETY: PyList_New(len) gives a list whose `len` slots are NULL; each slot is set once
    // with a reference we own (`into_ptr`), and the list is owned by `Bound` before anything
    // can fail, so an error drops it with the slots set so far (NULL slots are allowed there).
    unsafe {
        let ptr = ffi::PyList_New(len as ffi::Py_ssize_t);
        let list = Bound::from_owned_ptr_or_err(py, ptr)?.cast_into_unchecked::<PyList>();
        let mut n = 0;
        for item in items.take(len) {
            ffi::PyList_SET_ITEM(ptr, n as ffi::Py_ssize_t, item?.into_ptr());
            n += 1;
        }
        assert_eq!(n, len, "the iterator gave fewer items than the list holds");
        Ok(list)
    }
}

/// A `bytes` of `len` bytes, every one of them written by `write` (which runs without the GIL
/// if it asks for that). `PyBytes::new_with` clears its buffer before handing it over, on the
/// calling thread; for the ids of a 20 MB column (22 MB) the clearing, and the page faults it
/// takes, were about a tenth of `encode_arrow` on two threads, whose writes then came after
/// it. Here the pages are first touched by the writes, on the threads that make them.
pub fn bytes_written_by<'py>(
    py: Python<'py>,
    len: usize,
    write: impl FnOnce(&mut [MaybeUninit<u8>]) -> PyResult<()>,
) -> PyResult<Bound<'py, PyBytes>> {
    // SAFETY: PyBytes_FromStringAndSize(NULL, len) gives a new `bytes` with `len` bytes of
    // uninitialised content (and its terminating NUL), which `Bound` owns before anything can
    // fail; the content is only handed out as `MaybeUninit`, and the object is returned to
    // Python only after `write` succeeded, which writes every byte (an error drops it unread).
    unsafe {
        let ptr = ffi::PyBytes_FromStringAndSize(std::ptr::null(), len as ffi::Py_ssize_t);
        let bytes = Bound::from_owned_ptr_or_err(py, ptr)?.cast_into_unchecked::<PyBytes>();
        let buffer = ffi::PyBytes_AsString(ptr).cast::<MaybeUninit<u8>>();
        write(std::slice::from_raw_parts_mut(buffer, len))?;
        Ok(bytes)
    }
}
