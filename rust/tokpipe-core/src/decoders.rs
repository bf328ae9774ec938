//! Decoders of sentencepiece-style tokenizers: how ids become text again.
//!
//! - [`SentencePieceDecoder`]: sentencepiece's `DecodeIds`: control pieces vanish, `<unk>`
//!   becomes ` ⁇ ` (the model's `unk_surface`), runs of `<0xNN>` pieces become their bytes
//!   (a byte that does not start valid UTF-8 becomes U+FFFD on its own), `▁` becomes a space,
//!   and the space the normalizer put in front of the text is dropped; then the model's
//!   denormalizer, if it has one.
//! - [`DecodeStep`]s: HF's decoders for converted tokenizers (`Metaspace`, or a `Sequence` of
//!   `Replace`, `ByteFallback`, `Fuse`, `Strip`), applied to the list of token strings in turn.

use crate::error::{Error, Result};
use crate::models::pieces::{piece_byte, Piece, PieceKind};
use crate::normalizers::sentencepiece::{SentencePieceNormalizer, SPACE_SYMBOL};
use crate::normalizers::Replace;
use crate::pre_tokenizers::PrependScheme;
use std::sync::Arc;

/// sentencepiece's default `unk_surface`: U+2047 between spaces.
pub const DEFAULT_UNK_SURFACE: &str = " \u{2047} ";

#[derive(Clone, Debug)]
pub struct SentencePieceDecoder {
    pub unk_surface: String,
    /// The normalizer spec's `add_dummy_prefix` and `remove_extra_whitespaces`, which decide
    /// what is dropped at the start of the text.
    pub add_dummy_prefix: bool,
    pub remove_extra_whitespaces: bool,
    /// The model's `denormalizer_spec`, applied to the decoded text.
    pub denormalizer: Option<Arc<SentencePieceNormalizer>>,
    /// That spec as the `.model` held it (also when it is empty and so not applied), written
    /// back as it was.
    pub(crate) denormalizer_spec: Option<Vec<u8>>,
}

impl SentencePieceDecoder {
    /// The text of `ids` of a model with these `pieces` (a sentencepiece model's, Unigram or
    /// BPE); `raw`: keep the bytes of `<0xNN>` pieces as they are instead of decoding them, and
    /// skip the denormalizer (for `decode_bytes`).
    pub fn decode(&self, pieces: &[Piece], ids: &[u32], raw: bool) -> Result<Vec<u8>> {
        let mut text: Vec<u8> = Vec::with_capacity(ids.len() * 4);
        let mut pending: Vec<u8> = Vec::new();
        let mut is_bos_ws = true;
        let mut bos_ws_seen = false;
        for &id in ids {
            let piece = pieces.get(id as usize).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "token id {id} is not in the vocabulary (size {})",
                    pieces.len()
                ))
            })?;
            if piece.kind == PieceKind::Byte {
                pending.push(piece_byte(&piece.text).unwrap_or(b'?'));
                continue;
            }
            flush_bytes(&mut pending, &mut text, raw);
            if bos_ws_seen || !text.is_empty() {
                is_bos_ws = false;
            }
            bos_ws_seen = false;
            match piece.kind {
                PieceKind::Control => {}
                PieceKind::Unknown => text.extend_from_slice(self.unk_surface.as_bytes()),
                _ => {
                    let mut s = piece.text.as_str();
                    if is_bos_ws && (self.add_dummy_prefix || self.remove_extra_whitespaces) {
                        if let Some(rest) = s.strip_prefix(SPACE_SYMBOL) {
                            s = rest;
                            // With remove_extra_whitespaces every leading space goes.
                            bos_ws_seen = !self.remove_extra_whitespaces;
                        }
                    }
                    let mut rest = s;
                    while let Some(i) = rest.find(SPACE_SYMBOL) {
                        text.extend_from_slice(&rest.as_bytes()[..i]);
                        text.push(b' ');
                        rest = &rest[i + SPACE_SYMBOL.len()..];
                    }
                    text.extend_from_slice(rest.as_bytes());
                }
            }
        }
        flush_bytes(&mut pending, &mut text, raw);
        if let Some(denormalizer) = &self.denormalizer {
            if !raw {
                let s = String::from_utf8(text)
                    .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
                return Ok(denormalizer.normalize(&s).into_bytes());
            }
        }
        Ok(text)
    }
}

/// Byte pieces in a row: their bytes, where each byte that does not start a valid UTF-8
/// character becomes U+FFFD alone (sentencepiece's `DecodeUTF8` consumes one byte on error,
/// unlike Rust's lossy decoding, which replaces a whole broken sequence at once).
fn flush_bytes(pending: &mut Vec<u8>, text: &mut Vec<u8>, raw: bool) {
    if pending.is_empty() {
        return;
    }
    if raw {
        text.extend_from_slice(pending);
        pending.clear();
        return;
    }
    let mut i = 0;
    while i < pending.len() {
        match valid_char_len(&pending[i..]) {
            Some(n) => {
                text.extend_from_slice(&pending[i..i + n]);
                i += n;
            }
            None => {
                text.extend_from_slice("\u{fffd}".as_bytes());
                i += 1;
            }
        }
    }
    pending.clear();
}

/// Length of the valid UTF-8 character at the start of `b` (no overlongs, no surrogates,
/// nothing past U+10FFFF).
fn valid_char_len(b: &[u8]) -> Option<usize> {
    let n = match b[0] {
        0x00..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => return None,
    };
    let s = b.get(..n)?;
    std::str::from_utf8(s).ok().map(|_| n)
}

/// One of HF's decoders.
#[derive(Clone, Debug)]
pub enum DecodeStep {
    /// Every match in each token replaced.
    Replace(Arc<Replace>),
    /// Runs of `<0xNN>` tokens become the text of their bytes, or one U+FFFD per byte when
    /// the run is not valid UTF-8.
    ByteFallback,
    /// All tokens joined into one.
    Fuse,
    /// Up to `start` leading and `stop` trailing `content` characters removed from each token.
    Strip {
        content: char,
        start: usize,
        stop: usize,
    },
    /// The replacement character becomes a space; in the first token it is dropped instead
    /// (every one of them, as HF does) unless `prepend_scheme` is `never`.
    Metaspace {
        replacement: char,
        prepend_scheme: PrependScheme,
    },
}

impl DecodeStep {
    pub fn apply(&self, tokens: Vec<String>) -> Vec<String> {
        match self {
            DecodeStep::Replace(r) => tokens
                .into_iter()
                .map(|t| r.apply(&t).into_owned())
                .collect(),
            DecodeStep::ByteFallback => {
                let mut out = Vec::with_capacity(tokens.len());
                let mut bytes: Vec<u8> = Vec::new();
                let flush = |bytes: &mut Vec<u8>, out: &mut Vec<String>| {
                    if bytes.is_empty() {
                        return;
                    }
                    match String::from_utf8(std::mem::take(bytes)) {
                        Ok(s) => out.push(s),
                        Err(e) => out.extend(e.as_bytes().iter().map(|_| "\u{fffd}".to_string())),
                    }
                };
                for t in tokens {
                    // HF reads any two hex digits here, lower case included.
                    let byte = (t.len() == 6 && t.starts_with("<0x") && t.ends_with('>'))
                        .then(|| u8::from_str_radix(&t[3..5], 16).ok())
                        .flatten();
                    match byte {
                        Some(b) => bytes.push(b),
                        None => {
                            flush(&mut bytes, &mut out);
                            out.push(t);
                        }
                    }
                }
                flush(&mut bytes, &mut out);
                out
            }
            DecodeStep::Fuse => vec![tokens.concat()],
            DecodeStep::Strip {
                content,
                start,
                stop,
            } => tokens
                .into_iter()
                .map(|t| {
                    let chars: Vec<char> = t.chars().collect();
                    let lead = chars
                        .iter()
                        .take(*start)
                        .take_while(|&&c| c == *content)
                        .count();
                    let trail = chars[lead..]
                        .iter()
                        .rev()
                        .take(*stop)
                        .take_while(|&&c| c == *content)
                        .count();
                    chars[lead..chars.len() - trail].iter().collect()
                })
                .collect(),
            DecodeStep::Metaspace {
                replacement,
                prepend_scheme,
            } => tokens
                .into_iter()
                .enumerate()
                .map(|(i, t)| {
                    let mut out = String::with_capacity(t.len());
                    for c in t.chars() {
                        if c == *replacement {
                            if !(i == 0 && *prepend_scheme != PrependScheme::Never) {
                                out.push(' ');
                            }
                        } else {
                            out.push(c);
                        }
                    }
                    out
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broken_byte_runs_give_one_replacement_per_bad_byte() {
        let mut text = Vec::new();
        let mut pending = vec![0xe3, 0x81, b'A', 0xe3, 0x81, 0x82, 0xff, 0xed, 0xa0, 0x80];
        flush_bytes(&mut pending, &mut text, false);
        assert_eq!(
            String::from_utf8(text).unwrap(),
            "\u{fffd}\u{fffd}Aあ\u{fffd}\u{fffd}\u{fffd}\u{fffd}"
        );
    }

    #[test]
    fn hf_steps_follow_hf() {
        let toks = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            DecodeStep::ByteFallback.apply(toks(&["a", "<0xE3>", "<0x81>", "<0x82>", "b"])),
            toks(&["a", "あ", "b"])
        );
        // A run that is not UTF-8 as a whole: one U+FFFD per byte, the valid part included.
        assert_eq!(
            DecodeStep::ByteFallback.apply(toks(&["<0xE3>", "<0x81>", "<0x82>", "<0xE3>"])),
            toks(&["\u{fffd}"; 4])
        );
        assert_eq!(
            DecodeStep::Strip {
                content: ' ',
                start: 1,
                stop: 0
            }
            .apply(toks(&["  a ", " "])),
            toks(&[" a ", ""])
        );
        // Metaspace drops every replacement of the first token.
        assert_eq!(
            DecodeStep::Metaspace {
                replacement: '▁',
                prepend_scheme: PrependScheme::Always
            }
            .apply(toks(&["▁a▁", "▁b"])),
            toks(&["a", " b"])
        );
    }
}
