//! Readers and writers for the tokenizer files people already have.
//!
//! | format | read | write |
//! | --- | --- | --- |
//! | HF `tokenizer.json` (byte-level BPE, WordPiece, Unigram) | [`hf_json::load`] | [`hf_json::save`] |
//! | sentencepiece `.model` (Unigram) | [`sentencepiece::load`] | [`sentencepiece::save`] |
//! | BERT `vocab.txt` (WordPiece) | [`vocab_txt::load`] | [`vocab_txt::save`] |
//! | tiktoken `.tiktoken` (plain or gzip) | [`tiktoken::load`] | [`tiktoken::save`] |
//! | GPT-2 `encoder.json` + `vocab.bpe` | [`gpt2::load`] | |

pub mod gpt2;
pub(crate) mod hf_components;
pub mod hf_json;
pub(crate) mod protobuf;
pub mod sentencepiece;
pub mod tiktoken;
pub mod vocab_txt;

use crate::error::{Error, Result};
use std::io::Read;
use std::path::Path;

/// Reads a whole (small) file, gunzipping it when it starts with the gzip magic bytes, so
/// `cl100k_base.tiktoken` and `cl100k_base.tiktoken.gz` load alike.
pub(crate) fn read_maybe_gzip(path: &Path) -> Result<Vec<u8>> {
    let raw = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::with_capacity(raw.len() * 3);
        flate2::read::MultiGzDecoder::new(raw.as_slice())
            .read_to_end(&mut out)
            .map_err(|e| Error::format(path.display(), format!("corrupt gzip data: {e}")))?;
        Ok(out)
    } else {
        Ok(raw)
    }
}

/// Loads a tokenizer file of either kind, told by its content rather than its name: an HF
/// `tokenizer.json` (plain or gzip) or a sentencepiece `.model`.
pub fn load_any(path: &Path) -> Result<crate::Tokenizer> {
    let raw = read_maybe_gzip(path)?;
    let source = path.display().to_string();
    // A model starts with the byte 0x0a, the tag of its first piece; JSON with `{` after
    // whitespace, which may be a newline (0x0a too): such a file is read as JSON first.
    let text_start = raw.strip_prefix("\u{feff}".as_bytes()).unwrap_or(&raw);
    let json_like = text_start.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    match (sentencepiece::looks_like_model(&raw), json_like) {
        (true, false) => sentencepiece::from_bytes(&raw, &source),
        (true, true) => hf_json::from_slice(&raw, &source)
            .or_else(|e| sentencepiece::from_bytes(&raw, &source).map_err(|_| e)),
        (false, _) => hf_json::from_slice(&raw, &source),
    }
}

/// Writes a file through a temporary sibling and a rename, so a crash never leaves half a
/// tokenizer where a whole one is expected.
pub(crate) fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!(
        "{}.tmp-{}",
        path.extension().and_then(|e| e.to_str()).unwrap_or(""),
        std::process::id()
    ));
    std::fs::write(&tmp, data).map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
}
