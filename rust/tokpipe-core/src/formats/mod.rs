//! Readers and writers for the tokenizer files people already have.
//!
//! | format | read | write |
//! | --- | --- | --- |
//! | HF `tokenizer.json` (byte-level BPE, WordPiece, Unigram) | [`hf_json::load`] | [`hf_json::save`] |
//! | sentencepiece `.model` (Unigram) | [`sentencepiece::load`] | [`sentencepiece::save`] |
//! | BERT `vocab.txt` (WordPiece) | [`vocab_txt::load`] | [`vocab_txt::save`] |
//! | tiktoken `.tiktoken` (plain or gzip) | [`tiktoken::load`] | [`tiktoken::save`] |
//! | GPT-2 `encoder.json` + `vocab.bpe` | [`gpt2::load`] | |
//!
//! Files may be hostile, so every reader takes time and memory linear in the file and refuses
//! a bad one with [`Error::Format`] (naming the file, quoting at most a few dozen characters of
//! it: [`crate::error::shown`]):
//! - ids are integers from 0 to `u32::MAX - 1`, never wrapped (`u32::MAX` means "no token"
//!   inside), and below [`crate::models::id_limit`] (twice the tokens, ordinary and added,
//!   plus 2^20): ids index dense tables, so a sparse id far past the vocabulary is refused
//!   before anything is sized by it;
//! - post-processor ids must be tokens; unknown decoder and post-processor types are refused;
//! - gzip data may unpack to [`GUNZIP_FACTOR`] times the file (at least [`MIN_GUNZIP_LIMIT`]);
//! - long tokens cost time linear in their length (see `models::bpe::splits` for tiktoken
//!   ranks and sentencepiece BPE, `models::wordpiece` for WordPiece's failure pops, and the
//!   added-token matcher in [`crate::tokenizer`]).

pub mod gpt2;
pub(crate) mod hf_components;
pub mod hf_json;
pub mod hf_unigram;
pub mod hf_wordpiece;
pub(crate) mod protobuf;
pub mod sentencepiece;
pub mod tiktoken;
pub mod vocab_txt;

use crate::error::{Error, Result};
use std::io::Read;
use std::path::Path;

/// A gzip file may unpack to this many times its size (or to [`MIN_GUNZIP_LIMIT`], whichever
/// is more) and no more: real tokenizer files shrink 2 to 10 times, a crafted one 1000 times.
pub const GUNZIP_FACTOR: u64 = 100;

/// What any gzip file may unpack to, however small it is.
pub const MIN_GUNZIP_LIMIT: u64 = 64 << 20;

/// Reads a whole (small) file, gunzipping it when it starts with the gzip magic bytes, so
/// `cl100k_base.tiktoken` and `cl100k_base.tiktoken.gz` load alike. What it unpacks to is
/// bounded (see [`GUNZIP_FACTOR`]), so a 2 MB file cannot fill memory with gigabytes.
pub(crate) fn read_maybe_gzip(path: &Path) -> Result<Vec<u8>> {
    let raw = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    if !raw.starts_with(&[0x1f, 0x8b]) {
        return Ok(raw);
    }
    let limit = (raw.len() as u64)
        .saturating_mul(GUNZIP_FACTOR)
        .max(MIN_GUNZIP_LIMIT);
    gunzip(&raw, limit).map_err(|message| Error::format(path.display(), message))
}

/// The bytes `packed` unpacks to (every gzip member), or a message when they are not gzip
/// data or pass `limit` bytes.
fn gunzip(packed: &[u8], limit: u64) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(packed.len() * 3);
    flate2::read::MultiGzDecoder::new(packed)
        .take(limit + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("corrupt gzip data: {e}"))?;
    if out.len() as u64 > limit {
        return Err(format!(
            "gzip data unpacks to more than {limit} bytes, the limit for a file of {} bytes \
             ({GUNZIP_FACTOR} times its size, at least {} MiB)",
            packed.len(),
            MIN_GUNZIP_LIMIT >> 20
        ));
    }
    Ok(out)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn gunzip_stops_at_the_limit() {
        let packed = gzip(&[b'\n'; 100_000]);
        assert_eq!(gunzip(&packed, 100_000).unwrap().len(), 100_000);
        let err = gunzip(&packed, 99_999).unwrap_err();
        assert!(
            err.starts_with("gzip data unpacks to more than 99999 bytes, the limit for a file of "),
            "{err}"
        );
        // Members one after another count together (a bomb is many small members).
        let twice = [packed.clone(), packed].concat();
        assert!(gunzip(&twice, 150_000).is_err());
        assert_eq!(gunzip(&twice, 200_000).unwrap().len(), 200_000);
    }
}
