//! Shingles: the set a document's MinHash signature summarises.
//!
//! Every document is first normalised to Python's `" ".join(text.lower().split())` (the
//! lowercasing is optional): Unicode-aware lowercase, every whitespace run (Python's
//! `str.split()` whitespace) made one space, ends dropped. Then:
//! - **word** shingles: every run of `n` consecutive words (whitespace-separated tokens,
//!   punctuation stays attached), joined by one space;
//! - **char** shingles: every run of `n` consecutive characters (Unicode scalar values) of the
//!   normalised text, spaces included: the right unit for Chinese and Japanese, which put no
//!   spaces between words;
//! - **auto**: char shingles for a document whose non-space characters are at least one third
//!   Han or kana, word shingles otherwise.
//!
//! A document shorter than `n` units has one shingle, its whole normalised text, so short
//! exact copies still match; an empty (or all-whitespace) document has none and takes part in
//! no cluster. Shingles are fed as their UTF-8 bytes: `datasketch.MinHash.update` on the same
//! bytes gives the same signature.
//!
//! Why this normalisation and no more: it is what text-dedup does before 5-gram shingling
//! (lowercase, split on whitespace), and it is the exact-dedup normalisation, so an exact
//! duplicate is always a MinHash duplicate. datatrove goes further (punctuation and digits
//! removed, diacritics folded); that makes near-duplicates out of documents that differ only
//! in numbers, a choice for the caller (a normalize stage before this one).

use crate::text::keys::normalise_into;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShingleKind {
    Word,
    Char,
    Auto,
}

impl ShingleKind {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "word" => Some(ShingleKind::Word),
            "char" => Some(ShingleKind::Char),
            "auto" => Some(ShingleKind::Auto),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct ShingleConfig {
    pub kind: ShingleKind,
    /// Words per word shingle.
    pub word_ngram: usize,
    /// Characters per char shingle.
    pub char_ngram: usize,
    pub lowercase: bool,
}

impl Default for ShingleConfig {
    fn default() -> Self {
        ShingleConfig {
            kind: ShingleKind::Auto,
            word_ngram: 5,
            char_ngram: 5,
            lowercase: true,
        }
    }
}

/// Han ideographs and kana: a document mostly made of them has no spaces between words.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // hiragana, katakana
        | 0x31F0..=0x31FF    // katakana phonetic extensions
        | 0x3400..=0x4DBF    // CJK extension A
        | 0x4E00..=0x9FFF    // CJK unified ideographs
        | 0xF900..=0xFAFF    // compatibility ideographs
        | 0xFF66..=0xFF9F    // half-width katakana
        | 0x20000..=0x3FFFF) // extensions B and later
}

/// Whether `auto` shingles `normalised` by characters (see the module docs).
pub fn prefers_chars(normalised: &str) -> bool {
    let (mut cjk, mut other) = (0usize, 0usize);
    for c in normalised.chars() {
        if c == ' ' {
            continue;
        }
        if is_cjk(c) {
            cjk += 1;
        } else {
            other += 1;
        }
    }
    cjk > 0 && cjk * 3 >= cjk + other
}

/// [`normalise_into`] for ASCII text, byte by byte: the same result (ASCII has no special
/// casing and its Python whitespace is `\t\n\x0b\x0c\r\x1c-\x1f` and space) without the
/// lowercased copy and the char decoding, which cost as much as the hashing on English text.
fn normalise_ascii(text: &str, lowercase: bool, out: &mut String) {
    out.clear();
    let mut bytes = std::mem::take(out).into_bytes();
    let mut pending_space = false;
    for &b in text.as_bytes() {
        if matches!(b, b' ' | b'\t'..=b'\r' | 0x1c..=0x1f) {
            pending_space = !bytes.is_empty();
        } else {
            if pending_space {
                bytes.push(b' ');
                pending_space = false;
            }
            bytes.push(if lowercase { b.to_ascii_lowercase() } else { b });
        }
    }
    // Only ASCII bytes were pushed, so this cannot fail.
    *out = String::from_utf8(bytes).expect("ASCII is UTF-8");
}

/// Reusable buffers: shingling allocates nothing per document once they have grown.
#[derive(Default)]
pub struct Shingler {
    normalised: String,
    bounds: Vec<usize>,
}

impl Shingler {
    /// Calls `f` with every shingle of `text` (repeats included: a set's MinHash does not
    /// change when an element is added twice).
    pub fn for_each(&mut self, text: &str, config: &ShingleConfig, mut f: impl FnMut(&[u8])) {
        if text.is_ascii() {
            normalise_ascii(text, config.lowercase, &mut self.normalised);
        } else {
            normalise_into(text, config.lowercase, true, &mut self.normalised);
        }
        let s = self.normalised.as_str();
        if s.is_empty() {
            return;
        }
        let chars = match config.kind {
            ShingleKind::Word => false,
            ShingleKind::Char => true,
            ShingleKind::Auto => prefers_chars(s),
        };
        let bytes = s.as_bytes();
        self.bounds.clear();
        // `bounds` holds unit starts and, last, the end of the text; for words, the start of
        // word i+1 is one past the end of word i (the single space).
        if chars {
            self.bounds.extend(s.char_indices().map(|(i, _)| i));
        } else {
            self.bounds.push(0);
            self.bounds
                .extend(memchr::memchr_iter(b' ', bytes).map(|i| i + 1));
        }
        let units = self.bounds.len();
        self.bounds.push(bytes.len() + usize::from(!chars));
        let n = if chars {
            config.char_ngram
        } else {
            config.word_ngram
        }
        .max(1);
        if units <= n {
            f(bytes);
            return;
        }
        for i in 0..=units - n {
            let end = self.bounds[i + n] - usize::from(!chars);
            f(&bytes[self.bounds[i]..end]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shingles(text: &str, kind: ShingleKind, n: usize) -> Vec<String> {
        let config = ShingleConfig {
            kind,
            word_ngram: n,
            char_ngram: n,
            lowercase: true,
        };
        let mut out = Vec::new();
        Shingler::default().for_each(text, &config, |s| {
            out.push(String::from_utf8(s.to_vec()).unwrap())
        });
        out
    }

    #[test]
    fn word_shingles_are_normalised_windows() {
        assert_eq!(
            shingles("  The quick\tBrown\n\nfox jumps ", ShingleKind::Word, 3),
            ["the quick brown", "quick brown fox", "brown fox jumps"]
        );
        assert_eq!(shingles("Two words", ShingleKind::Word, 5), ["two words"]);
        assert!(shingles(" \n ", ShingleKind::Word, 5).is_empty());
    }

    #[test]
    fn ascii_fast_path_equals_the_general_normalisation() {
        let text = " A\tb\x0bC\x1c d\r\n\x0c E,F  \x1f g ";
        let (mut fast, mut slow) = (String::new(), String::new());
        for lowercase in [true, false] {
            normalise_ascii(text, lowercase, &mut fast);
            normalise_into(text, lowercase, true, &mut slow);
            assert_eq!(fast, slow);
        }
    }

    #[test]
    fn char_shingles_count_characters() {
        assert_eq!(
            shingles("中文 文本", ShingleKind::Char, 3),
            ["中文 ", "文 文", " 文本"]
        );
        assert_eq!(shingles("中文文本", ShingleKind::Auto, 4), ["中文文本"]);
        assert_eq!(shingles("ab cd", ShingleKind::Auto, 1), ["ab", "cd"]);
    }
}
