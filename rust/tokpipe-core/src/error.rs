//! The crate's single error type. The Python binding maps each variant once onto the
//! `TokpipeError` hierarchy (and IO errors onto Python's own `OSError` family).
//!
//! Messages are one line and never embed user data whole: a token, a line or a JSON value
//! from a file goes through [`shown`], which quotes it and cuts it short.

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

/// Characters of user data (a token, a line of a file) a message shows before cutting it.
pub const SHOWN_CHARS: usize = 60;

/// `text` quoted as `{:?}` quotes it, cut to its first [`SHOWN_CHARS`] characters (with its
/// full size in bytes after it) so that a 5 MB token never ends up whole in a message.
pub fn shown(text: &str) -> String {
    cut_short(text, |part| format!("{part:?}"))
}

/// A JSON value from a file, for a message: its text, cut short as [`shown`] cuts it.
pub fn shown_json(value: &serde_json::Value) -> String {
    cut_short(&value.to_string(), str::to_string)
}

/// `show` of `text`, or of its first [`SHOWN_CHARS`] characters followed by its size.
fn cut_short(text: &str, show: impl Fn(&str) -> String) -> String {
    match text.char_indices().nth(SHOWN_CHARS) {
        None => show(text),
        Some((cut, _)) => format!("{}… ({} bytes)", show(&text[..cut]), text.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_quotes_short_text_and_cuts_long_text() {
        assert_eq!(shown("a\"b"), "\"a\\\"b\"");
        let long = "é".repeat(5_000_000);
        let s = shown(&long);
        assert!(s.starts_with(&format!("{:?}", "é".repeat(60))), "{s}");
        assert!(s.ends_with("… (10000000 bytes)"), "{s}");
        assert!(s.len() < 200);
        let value = serde_json::json!(["x".repeat(1000), 1]);
        assert!(shown_json(&value).ends_with("… (1006 bytes)"));
        assert_eq!(shown_json(&serde_json::json!([1, 2])), "[1,2]");
    }
}
