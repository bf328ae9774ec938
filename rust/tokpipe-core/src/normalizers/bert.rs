//! HF's `BertNormalizer`: clean text (drop control characters, every whitespace becomes a
//! space), put spaces around CJK ideographs, strip accents (NFD, then drop nonspacing marks)
//! and lowercase, in that order. The character classes are HF's own ([`super::bert_tables`]),
//! so ids equal HF's on any text, not just on text our Unicode version agrees on.

use super::bert_tables::{NONSPACING_MARKS, REMOVED};
use crate::util::in_ranges;
use std::borrow::Cow;
use unicode_normalization::UnicodeNormalization;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BertNormalizer {
    pub clean_text: bool,
    pub handle_chinese_chars: bool,
    /// `None`: strip accents when lowercasing (HF's default, BERT uncased).
    pub strip_accents: Option<bool>,
    pub lowercase: bool,
}

impl Default for BertNormalizer {
    fn default() -> Self {
        BertNormalizer {
            clean_text: true,
            handle_chinese_chars: true,
            strip_accents: None,
            lowercase: true,
        }
    }
}

/// HF's `is_chinese_char`: the CJK Unified Ideographs blocks and their extensions, and the
/// compatibility ideographs (not kana or hangul).
pub fn is_chinese_char(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2A6DF
        | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F
        | 0x2B920..=0x2CEAF
        | 0xF900..=0xFAFF
        | 0x2F800..=0x2FA1F)
}

/// ASCII bytes `clean_text` drops: C0 controls but tab, LF and CR, and DEL.
#[inline]
fn ascii_removed(b: u8) -> bool {
    (b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r')) || b == 0x7F
}

impl BertNormalizer {
    pub fn strips_accents(&self) -> bool {
        self.strip_accents.unwrap_or(self.lowercase)
    }

    pub fn normalize<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if text.is_ascii() {
            return self.normalize_ascii(text);
        }
        let mut s = String::with_capacity(text.len() + text.len() / 4);
        for c in text.chars() {
            if self.clean_text {
                let removed = if c.is_ascii() {
                    ascii_removed(c as u8)
                } else {
                    in_ranges(REMOVED, c as u32)
                };
                if removed {
                    continue;
                }
                if c.is_whitespace() {
                    s.push(' ');
                    continue;
                }
            }
            if self.handle_chinese_chars && is_chinese_char(c) {
                s.push(' ');
                s.push(c);
                s.push(' ');
            } else {
                s.push(c);
            }
        }
        // NFD works on the whole string (it reorders runs of combining marks), so it runs after
        // the per-character steps, on their output, as in HF.
        if self.strips_accents() {
            let lower = self.lowercase;
            let mut out = String::with_capacity(s.len());
            for c in s.nfd() {
                if c.is_ascii() || !in_ranges(NONSPACING_MARKS, c as u32) {
                    push_case(&mut out, c, lower);
                }
            }
            return Cow::Owned(out);
        }
        if self.lowercase {
            let mut out = String::with_capacity(s.len());
            for c in s.chars() {
                push_case(&mut out, c, true);
            }
            return Cow::Owned(out);
        }
        Cow::Owned(s)
    }

    /// ASCII text: no ideographs, no accents; only controls, whitespace and case can change,
    /// and text that needs none of it is returned as is.
    fn normalize_ascii<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let bytes = text.as_bytes();
        let changes = |b: u8| {
            (self.clean_text && (b < 0x20 || b == 0x7F))
                || (self.lowercase && b.is_ascii_uppercase())
        };
        let Some(first) = bytes.iter().position(|&b| changes(b)) else {
            return Cow::Borrowed(text);
        };
        let mut out = Vec::with_capacity(bytes.len());
        out.extend_from_slice(&bytes[..first]);
        for &b in &bytes[first..] {
            if self.clean_text {
                if ascii_removed(b) {
                    continue;
                }
                if matches!(b, b'\t' | b'\n' | b'\r') {
                    out.push(b' ');
                    continue;
                }
            }
            out.push(if self.lowercase {
                b.to_ascii_lowercase()
            } else {
                b
            });
        }
        Cow::Owned(String::from_utf8(out).expect("ASCII in, ASCII out"))
    }
}

/// HF lowercases character by character (`char::to_lowercase`), so a final sigma stays σ,
/// unlike `str::to_lowercase`.
#[inline]
fn push_case(out: &mut String, c: char, lower: bool) {
    if !lower {
        out.push(c);
    } else if c.is_ascii() {
        out.push(c.to_ascii_lowercase());
    } else {
        out.extend(c.to_lowercase());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_hf_order_of_steps() {
        let n = BertNormalizer::default();
        assert_eq!(n.normalize("Héllo\tWORLD\u{0}"), "hello world");
        assert_eq!(n.normalize("中文ok"), " 中  文 ok");
        assert_eq!(n.normalize("ΟΔΟΣ"), "οδοσ");
        let cased = BertNormalizer {
            lowercase: false,
            ..BertNormalizer::default()
        };
        assert_eq!(cased.normalize("Héllo"), "Héllo");
        assert!(matches!(n.normalize("plain text"), Cow::Borrowed(_)));
    }
}
