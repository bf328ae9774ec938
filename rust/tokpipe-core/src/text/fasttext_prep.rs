//! The text preparation of the fastText quality classifier (`tokpipe.quality`), in one pass
//! over each document with rayon over the documents.
//!
//! The rules, in the order they apply to a document:
//! 1. cut to its first `max_chars` characters (code points);
//! 2. lowercase, each character by Unicode's one-to-one (simple) mapping, as Arrow's
//!    `utf8_lower` does (so `İ` becomes `i`, and `Σ` is always `σ`, never a final `ς`);
//! 3. split at `\n` into lines, each stripped of leading and trailing whitespace (Python's
//!    `str.isspace` characters, which are the ones Arrow's `utf8_trim_whitespace` strips);
//! 4. a non-empty line equal to an earlier line of the document becomes
//!    [`REPEATED_LINE`] (a bag of n-grams cannot see repetition, this token can);
//! 5. every character of the Han, Hiragana, Katakana or Hangul scripts, and every character
//!    that is not a letter (L), mark (M), number (N), `_` or one of `\t\n\x0c\r ` gets a space
//!    on each side: fastText's words are what lies between spaces, and Chinese and Japanese
//!    put none between words, so their characters become words (and the model's word
//!    n-grams are character n-grams for them); punctuation and the pieces of a URL become
//!    words too;
//! 6. the lines joined by single spaces (fastText reads one example per line).
//!
//! This replaces an implementation with Arrow's kernels (kept as a reference in the Python
//! tests, `tests/quality_reference.py`) and gives the same output. Rule 5 is its RE2 class
//! `[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]|[^\p{L}\p{M}\p{N}\s_]` (RE2's `\s` is
//! `[\t\n\f\r ]`, without `\v`), built here from `regex-syntax`'s Unicode tables. The
//! libraries behind the Arrow implementation (RE2, utf8proc) and this one (Rust's and
//! `regex-syntax`'s tables) carry different Unicode versions. Checked over every code point
//! against pyarrow 26, they differ only on characters assigned in Unicode 16 and 17 (new
//! scripts and case pairs, unassigned, hence "not a letter", to the older tables); the tests
//! check every character Python's own tables know.

use super::lines::py_strip;
use super::StrColumn;
use crate::normalizers::sentencepiece::utf8_len;
use crate::util::in_ranges;
use hashbrown::HashTable;
use rayon::prelude::*;
use std::hash::BuildHasher;
use std::sync::OnceLock;

/// What a line that repeats an earlier line of its document becomes.
pub const REPEATED_LINE: &str = "__repeated_line__";

const ROWS_PER_TASK: usize = 64;

/// Rule 5's characters: what each ASCII byte becomes, a bit table for the rest of the Basic
/// Multilingual Plane (where nearly every character of real text is), the sorted ranges for
/// the other planes.
struct SplitClass {
    ascii: [Ascii; 128],
    bmp: Vec<u64>,
    ranges: Vec<(u32, u32)>,
}

/// What lowercasing and rule 5 make of an ASCII byte.
#[derive(Clone, Copy, PartialEq)]
enum Ascii {
    Keep,
    Lower,
    Split,
}

impl SplitClass {
    fn build() -> SplitClass {
        // `\x0c` is RE2's `\f`; `\v` is deliberately absent (RE2's `\s` lacks it).
        let pattern = r"[\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}\p{sc=Hangul}[^\p{L}\p{M}\p{N}\t\n\x0C\r _]]";
        let hir = regex_syntax::parse(pattern).expect("the class is a valid pattern");
        let regex_syntax::hir::HirKind::Class(regex_syntax::hir::Class::Unicode(class)) =
            hir.kind()
        else {
            unreachable!("a bracketed class parses to a Unicode class")
        };
        let ranges: Vec<(u32, u32)> = class
            .ranges()
            .iter()
            .map(|r| (r.start() as u32, r.end() as u32))
            .collect();
        let mut bmp = vec![0u64; 0x10000 / 64];
        for &(lo, hi) in &ranges {
            for c in lo..=hi.min(0xFFFF) {
                bmp[c as usize / 64] |= 1 << (c % 64);
            }
        }
        let mut class = SplitClass {
            ascii: [Ascii::Keep; 128],
            bmp,
            ranges,
        };
        for b in 0..128u8 {
            class.ascii[b as usize] = if class.contains(b as u32) {
                Ascii::Split
            } else if b.is_ascii_uppercase() {
                Ascii::Lower
            } else {
                Ascii::Keep
            };
        }
        class
    }

    #[inline]
    fn contains(&self, c: u32) -> bool {
        if c < 0x10000 {
            self.bmp[c as usize / 64] & (1 << (c % 64)) != 0
        } else {
            in_ranges(&self.ranges, c)
        }
    }
}

fn split_class() -> &'static SplitClass {
    static CLASS: OnceLock<SplitClass> = OnceLock::new();
    CLASS.get_or_init(SplitClass::build)
}

/// Unicode's simple (one-to-one) lowercase mapping. Rust's `char::to_lowercase` is the full
/// mapping, which differs from the simple one only where it gives more than one character:
/// `İ` alone (full: `i` + U+0307; simple: `i`).
#[inline]
fn simple_lowercase(c: char) -> char {
    // CJK symbols, kana and ideographs, and Hangul syllables have no case: spared the
    // table search (the tests check that the search leaves them alone).
    if ('\u{3000}'..='\u{9FFF}').contains(&c) || ('\u{AC00}'..='\u{D7FF}').contains(&c) {
        return c;
    }
    let mut lower = c.to_lowercase();
    match (lower.next(), lower.next()) {
        (Some(l), None) => l,
        _ if c == '\u{130}' => 'i',
        _ => c,
    }
}

/// Scratch space reused from one document to the next (one per rayon task).
#[derive(Default)]
pub struct Preparer {
    // (start, end) in the output of each distinct non-empty line of the current document.
    seen: HashTable<(usize, usize)>,
}

impl Preparer {
    /// Appends the prepared form of `text` to `out` (see the module docs).
    pub fn prepare(&mut self, text: &str, max_chars: Option<usize>, out: &mut Vec<u8>) {
        let class = split_class();
        let hasher = rustc_hash::FxBuildHasher;
        self.seen.clear();
        for (n, line) in cut(text, max_chars).split('\n').enumerate() {
            if n > 0 {
                out.push(b' ');
            }
            // Stripped before it is lowered: no whitespace character has a case, and no
            // character lowers to whitespace (the tests check every one).
            let line = py_strip(line);
            let start = out.len();
            lower_split_into(line, class, out);
            if start == out.len() {
                continue;
            }
            // Lines are compared in their prepared form: rule 5 is one-to-one (a space
            // followed by a character of the class was inserted, so the form reads back to
            // one line), so two lines are equal exactly when their prepared forms are.
            let hash = hasher.hash_one(&out[start..]);
            let seen = self
                .seen
                .find(hash, |&(a, b)| out[a..b] == out[start..])
                .is_some();
            if seen {
                out.truncate(start);
                out.extend_from_slice(REPEATED_LINE.as_bytes());
            } else {
                let end = out.len();
                self.seen
                    .insert_unique(hash, (start, end), |&(a, b)| hasher.hash_one(&out[a..b]));
            }
        }
    }
}

/// The first `max_chars` characters of `text`.
fn cut(text: &str, max_chars: Option<usize>) -> &str {
    match max_chars {
        // A character is at least one byte: a text of no more bytes needs no count.
        Some(n) if text.len() > n => text.char_indices().nth(n).map_or(text, |(i, _)| &text[..i]),
        _ => text,
    }
}

/// Appends `line` lowercased, with a space on each side of each character of rule 5's class.
#[inline]
fn lower_split_into(line: &str, class: &SplitClass, out: &mut Vec<u8>) {
    let bytes = line.as_bytes();
    out.reserve(bytes.len() + bytes.len() / 2);
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b < 0x80 {
            match class.ascii[b as usize] {
                Ascii::Keep => out.push(b),
                Ascii::Lower => out.push(b.to_ascii_lowercase()),
                Ascii::Split => out.extend_from_slice(&[b' ', b, b' ']),
            }
            i += 1;
            continue;
        }
        let len = utf8_len(b);
        let c = line[i..i + len].chars().next().expect("a whole character");
        let lower = simple_lowercase(c);
        let mut buf = [0u8; 4];
        let encoded = lower.encode_utf8(&mut buf).as_bytes();
        if class.contains(lower as u32) {
            out.push(b' ');
            out.extend_from_slice(encoded);
            out.push(b' ');
        } else {
            out.extend_from_slice(encoded);
        }
        i += len;
    }
}

/// A column of prepared texts as Arrow lays out a `large_string` column.
pub struct PreparedColumn {
    pub offsets: Vec<i64>,
    pub data: Vec<u8>,
}

/// The prepared form of every row of `column` (null rows read as empty text), in row order;
/// `line_end` is appended to each (fastText's predict wants a `\n` ending each line).
pub fn prepare_column(
    column: &StrColumn<'_>,
    max_chars: Option<usize>,
    line_end: &str,
) -> PreparedColumn {
    let n = column.len();
    let parts: Vec<(Vec<usize>, Vec<u8>)> = (0..n)
        .into_par_iter()
        .step_by(ROWS_PER_TASK)
        .map(|start| {
            let end = (start + ROWS_PER_TASK).min(n);
            let mut preparer = Preparer::default();
            let mut data = Vec::new();
            let mut ends = Vec::with_capacity(end - start);
            for i in start..end {
                preparer.prepare(column.get(i), max_chars, &mut data);
                data.extend_from_slice(line_end.as_bytes());
                ends.push(data.len());
            }
            (ends, data)
        })
        .collect();
    let mut out = PreparedColumn {
        offsets: Vec::with_capacity(n + 1),
        data: Vec::with_capacity(parts.iter().map(|p| p.1.len()).sum()),
    };
    out.offsets.push(0);
    for (ends, data) in parts {
        let base = out.data.len() as i64;
        out.offsets.extend(ends.iter().map(|&e| base + e as i64));
        out.data.extend_from_slice(&data);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::lines::is_py_space;

    fn prepare(text: &str, max_chars: Option<usize>) -> String {
        let mut out = Vec::new();
        Preparer::default().prepare(text, max_chars, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_rules_on_a_small_document() {
        // Words compared, as fastText sees them (runs of spaces are one separator).
        let words = |s: String| {
            s.split(' ')
                .filter(|w| !w.is_empty())
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            words(prepare("Hello, World!\n  HELLO, world! \n\nBye", None)),
            ["hello", ",", "world", "!", REPEATED_LINE, "bye"]
        );
        assert_eq!(
            words(prepare("abc 漢字abc x_1=2", None)),
            ["abc", "漢", "字", "abc", "x_1", "=", "2"]
        );
        assert_eq!(prepare("İSTANBUL ΟΔΟΣ", None), "istanbul οδοσ");
        assert_eq!(prepare("日本語テキスト", Some(3)), " 日  本  語 ");
        assert_eq!(prepare("", Some(3)), "");
        // Lines are stripped and joined by one space; blank lines are never "repeated".
        assert_eq!(prepare(" a \r\n\n\t\nb", None), "a   b");
    }

    #[test]
    fn the_class_is_re2s() {
        let class = split_class();
        for (c, split) in [
            ('a', false),
            ('_', false),
            (' ', false),
            ('\t', false),
            ('\u{b}', true),
            (',', true),
            ('é', false),
            ('\u{301}', false),
            ('９', false),
            ('漢', true),
            ('ー', false),
            ('ア', true),
            ('한', true),
            ('\u{a0}', true),
            ('\u{20000}', true),
            ('\u{1F600}', true),
        ] {
            assert_eq!(class.contains(c as u32), split, "{c:?}");
        }
    }

    #[test]
    fn case_and_whitespace_do_not_meet() {
        for c in (0..0x110000u32).filter_map(char::from_u32) {
            let lower = simple_lowercase(c);
            assert_eq!(is_py_space(c), is_py_space(lower), "{c:?}");
            if ('\u{3000}'..='\u{9FFF}').contains(&c) || ('\u{AC00}'..='\u{D7FF}').contains(&c) {
                assert!(c.to_lowercase().eq([c]), "{c:?} has a lower case");
            }
        }
    }

    #[test]
    fn columns_keep_row_order() {
        let texts = ["B\nb", "", "Ça, va"];
        let (offsets, data) = crate::text::column_parts::<i32>(texts.iter().cycle().take(300));
        let column = StrColumn::new(super::super::Offsets::I32(&offsets), &data).unwrap();
        let out = prepare_column(&column, None, "\n");
        assert_eq!(out.offsets.len(), 301);
        for (i, t) in texts.iter().cycle().take(300).enumerate() {
            let row = &out.data[out.offsets[i] as usize..out.offsets[i + 1] as usize];
            assert_eq!(std::str::from_utf8(row).unwrap(), prepare(t, None) + "\n");
        }
    }
}
