//! The one gate into the core for work that runs without the GIL, as polars' `enter_polars`
//! is for polars: [`enter`] releases the GIL (other Python threads run meanwhile), catches a
//! panic before it unwinds into the interpreter, and maps errors onto the `TokpipeError`
//! hierarchy ([`crate::errors`]). Every binding that releases the GIL goes through it.

use crate::errors::{internal_error, to_py};
use pyo3::prelude::*;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// An error a closure run by [`enter`] returns: the core's, or a Python error the binding
/// made while reading its arguments (a buffer that is not contiguous, say).
pub(crate) trait IntoPyErr {
    fn into_py_err(self) -> PyErr;
}

impl IntoPyErr for tokpipe_core::Error {
    fn into_py_err(self) -> PyErr {
        to_py(self)
    }
}

impl IntoPyErr for PyErr {
    fn into_py_err(self) -> PyErr {
        self
    }
}

/// Runs `f` with the GIL released; its error, or its panic, comes back as a Python error.
///
/// A panic is caught whole (`AssertUnwindSafe`, as polars does): what `f` borrowed is
/// dropped or left as the panic left it, and an object that a panic may leave half-changed
/// says so on its next use (a trainer's poisoned lock is a `StateError`).
pub(crate) fn enter<T, E, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    F: Send + FnOnce() -> Result<T, E>,
    T: Send,
    E: Send + IntoPyErr,
{
    match py.detach(|| catch_unwind(AssertUnwindSafe(f))) {
        Ok(result) => result.map_err(IntoPyErr::into_py_err),
        Err(payload) => Err(internal_error(payload)),
    }
}

/// [`enter`] for work that cannot fail but may still panic.
pub(crate) fn enter_ok<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    F: Send + FnOnce() -> T,
    T: Send,
{
    enter(py, || Ok::<T, PyErr>(f()))
}
