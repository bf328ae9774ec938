//! BERT's `vocab.txt`: one token a line, the line number is the id. Read as HF reads it:
//! trailing whitespace is trimmed, and a token given twice keeps its last line.

use super::write_atomic;
use crate::error::{Error, Result};
use crate::models::wordpiece::WordPieceModel;
use std::path::Path;

pub fn load(path: &Path) -> Result<Vec<(String, u32)>> {
    let raw = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let text = String::from_utf8(raw)
        .map_err(|e| Error::format(path.display(), format!("not UTF-8: {e}")))?;
    // `lines` splits on LF and drops a CR before it, like Rust's BufRead::lines in HF.
    Ok(text
        .lines()
        .enumerate()
        .map(|(i, line)| (line.trim_end().to_string(), i as u32))
        .collect())
}

/// Writes the tokens in id order; an id no token has is written as an empty line would be
/// read back as a token, so a vocabulary with holes is refused.
pub fn save(model: &WordPieceModel, path: &Path) -> Result<()> {
    let mut out = String::new();
    for (expected, (id, token)) in model.tokens().enumerate() {
        if id as usize != expected {
            return Err(Error::InvalidArgument(format!(
                "vocab.txt cannot hold this vocabulary: no token has id {expected}"
            )));
        }
        if token.contains('\n') || token.trim_end() != token {
            return Err(Error::InvalidArgument(format!(
                "vocab.txt cannot hold the token {token:?} (line break or trailing whitespace)"
            )));
        }
        out.push_str(token);
        out.push('\n');
    }
    write_atomic(path, out.as_bytes())
}
