//! The crate's single error type. The Python binding maps each variant once onto the
//! `TokpipeError` hierarchy (and IO errors onto Python's own `OSError` family).

use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a file failed; carries the path so the message names it.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A tokenizer file (tokenizer.json, .tiktoken, encoder.json, vocab.bpe) is malformed.
    #[error("{path}: {message}")]
    Format { path: String, message: String },
    /// A regex pattern does not compile.
    #[error("invalid pre-tokenizer pattern: {0}")]
    Pattern(String),
    /// Caller passed an argument that cannot work (vocab too small, unknown preset, ...).
    #[error("{0}")]
    InvalidArgument(String),
    /// Text contains a special token that the caller did not allow.
    #[error("{0}")]
    Encode(String),
    /// A training corpus is unusable (missing, empty, undecodable under --strict).
    #[error("{0}")]
    Corpus(String),
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub fn format(path: impl std::fmt::Display, message: impl Into<String>) -> Self {
        Error::Format {
            path: path.to_string(),
            message: message.into(),
        }
    }
}
