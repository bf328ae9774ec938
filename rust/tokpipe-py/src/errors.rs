//! Maps the core's one error enum onto Python exceptions, in one place.
//!
//! The exception classes live in `tokpipe/errors.py` so they can inherit from both
//! `TokpipeError` and the built-in users already catch (`ValueError`); we look them up when an
//! error is raised, which is rare enough that the import costs nothing that matters.

use pyo3::exceptions::{PyOSError, PyRuntimeError};
use pyo3::prelude::*;
use tokpipe_core::Error;

fn raise(py: Python<'_>, class: &str, message: String) -> PyErr {
    match py.import("tokpipe.errors").and_then(|m| m.getattr(class)) {
        Ok(cls) => PyErr::from_value(
            cls.call1((message,))
                .unwrap_or_else(|e| e.into_value(py).into_bound(py).into_any()),
        ),
        Err(_) => PyRuntimeError::new_err(message),
    }
}

pub fn to_py(err: Error) -> PyErr {
    Python::attach(|py| match err {
        // OSError(errno, strerror, filename) picks the right subclass (FileNotFoundError, ...).
        Error::Io { path, source } => PyOSError::new_err((
            source.raw_os_error().unwrap_or(0),
            source.to_string(),
            path.display().to_string(),
        )),
        Error::Format { .. } => raise(py, "FormatError", err.to_string()),
        Error::Pattern(_) => raise(py, "PatternError", err.to_string()),
        Error::InvalidArgument(_) => raise(py, "InvalidArgumentError", err.to_string()),
        Error::Encode(_) => raise(py, "EncodeError", err.to_string()),
        Error::Corpus(_) => raise(py, "CorpusError", err.to_string()),
    })
}

pub trait IntoPyResult<T> {
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for Result<T, Error> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}
