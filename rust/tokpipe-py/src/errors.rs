//! Maps errors onto Python exceptions, in one place: the core's one error enum ([`to_py`]),
//! the binding's own argument checks ([`invalid_argument`]), an object used in the wrong
//! state ([`state_error`]) and a panic ([`internal_error`]).
//!
//! The exception classes live in `tokpipe/errors.py` so they can inherit from both
//! `TokpipeError` and the built-in users already catch (`ValueError`); we look them up when an
//! error is raised, which is rare enough that the import costs nothing that matters.
//! [`crate::gate::enter`] applies this mapping at every call that releases the GIL.

use pyo3::exceptions::{PyOSError, PyRuntimeError};
use pyo3::prelude::*;
use std::any::Any;
use tokpipe_core::Error;

/// Characters of a panic's message kept in the Python error.
const PANIC_MESSAGE_CHARS: usize = 300;

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

/// An argument the binding finds unusable before the core sees it (a buffer that is not
/// contiguous, lengths that disagree): the core's `InvalidArgument`, mapped as the core's are.
pub(crate) fn invalid_argument(message: impl Into<String>) -> PyErr {
    to_py(Error::InvalidArgument(message.into()))
}

/// An object used in a state that forbids the call (a trainer that has trained, a writer or
/// an index that is closed): `tokpipe.errors.StateError`.
pub(crate) fn state_error(message: impl Into<String>) -> PyErr {
    Python::attach(|py| raise(py, "StateError", message.into()))
}

/// A panic of the core, caught before it unwinds into the interpreter:
/// `tokpipe.errors.InternalError`, with the panic's message on one line and cut short.
pub(crate) fn internal_error(payload: Box<dyn Any + Send>) -> PyErr {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into());
    let mut one_line = message.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some((cut, _)) = one_line.char_indices().nth(PANIC_MESSAGE_CHARS) {
        one_line.truncate(cut);
        one_line.push('…');
    }
    Python::attach(|py| {
        raise(
            py,
            "InternalError",
            format!("internal error in tokpipe's Rust core (a bug, please report it): {one_line}"),
        )
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
