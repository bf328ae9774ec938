//! CCNet-style paragraph deduplication: a paragraph (a line, as CCNet splits documents on
//! `\n`) whose normalised form was already seen anywhere earlier in the corpus is removed.
//!
//! The normalisation is CCNet's `normalize_for_dedup` (cc_net/text_normalizer.py), character
//! for character: strip the ends (Python's whitespace), lowercase, every Unicode decimal digit
//! (`\d`, category Nd) made `0`, then remove CCNet's `UNICODE_PUNCT` characters (the 34 CJK and
//! typographic marks it maps to ASCII: `，。、„”“«»１」「《》´∶：？！（）；–—．～’…━〈〉【】％►`) and the
//! control characters U+0000..U+001F and U+007F..U+009F. It does not fold accents nor remove
//! ASCII punctuation (`normalize_for_dedup` does neither; CCNet's `normalize` does more).
//! The hash is CCNet's too: the first 8 bytes of the SHA-1 of the normalised UTF-8, as a
//! little-endian u64.
//!
//! One deliberate difference: CCNet hashes empty lines like any other, so every blank line
//! after the corpus's first is removed and documents lose their paragraph breaks. Here a line
//! whose normalised form is empty is never a duplicate and is always kept.

use super::keys::is_python_whitespace;
use super::{par_binary_rows, StrColumn};
use rustc_hash::FxHashSet;
use sha1::{Digest, Sha1};
use unicode_general_category::{get_general_category, GeneralCategory};

/// Bytes per line in a document's key: the line's hash (u64, 0 for a blank line) and its
/// length in bytes (u32), little-endian.
pub const LINE_KEY_BYTES: usize = 12;

const ROWS_PER_TASK: usize = 64;

const CCNET_PUNCT: &str = "，。、„”“«»１」「《》´∶：？！（）；–—．～’…━〈〉【】％►";

fn is_removed(c: char) -> bool {
    let u = c as u32;
    u < 0x20 || (0x7f..0xa0).contains(&u) || CCNET_PUNCT.contains(c)
}

/// CCNet's `normalize_for_dedup(line)` into `out` (cleared first).
pub fn normalize_for_dedup(line: &str, out: &mut String) {
    out.clear();
    let line = line.trim_matches(is_python_whitespace);
    for c in line.chars() {
        // str.lower() then \d -> 0 then removal; lowercase maps no digit or removed mark out of
        // or into those classes except through the per-char checks below.
        for l in c.to_lowercase() {
            if get_general_category(l) == GeneralCategory::DecimalNumber {
                out.push('0');
            } else if !is_removed(l) {
                out.push(l);
            }
        }
    }
}

/// CCNet's `str_hash`: the first 8 bytes of SHA-1, little-endian; 0 for an empty string
/// (blank lines, which are never duplicates here).
pub fn paragraph_hash(normalised: &str) -> u64 {
    if normalised.is_empty() {
        return 0;
    }
    let digest = Sha1::digest(normalised.as_bytes());
    u64::from_le_bytes(digest[..8].try_into().expect("SHA-1 has 20 bytes"))
}

/// Every row's line keys ([`LINE_KEY_BYTES`] per `\n`-separated line), as (data, offsets).
pub fn paragraph_keys(column: &StrColumn<'_>) -> (Vec<u8>, Vec<i64>) {
    par_binary_rows(column.len(), ROWS_PER_TASK, |row, data| {
        let mut scratch = String::new();
        for line in column.get(row).split('\n') {
            normalize_for_dedup(line, &mut scratch);
            data.extend_from_slice(&paragraph_hash(&scratch).to_le_bytes());
            let len = u32::try_from(line.len()).unwrap_or(u32::MAX);
            data.extend_from_slice(&len.to_le_bytes());
        }
    })
}

#[derive(Debug, Default)]
pub struct ParagraphVerdict {
    /// One flag per line of the corpus, in order: 1 removes the line.
    pub drop: Vec<u8>,
    /// One flag per document: every non-blank line was removed.
    pub emptied: Vec<u8>,
    pub paragraphs: u64,
    pub paragraphs_removed: u64,
    /// UTF-8 bytes of the removed lines (their newlines not counted).
    pub bytes_removed: u64,
}

/// Which lines to remove, given every document's line keys in corpus order (`lines[d]` is
/// document d's line count, `keys` all line keys concatenated): the first occurrence of a
/// normalised line is kept, every later one removed, within a document or across documents.
pub fn paragraph_decide(keys: &[u8], lines: &[u32]) -> crate::Result<ParagraphVerdict> {
    let total: usize = lines.iter().map(|&n| n as usize).sum();
    if keys.len() != total * LINE_KEY_BYTES {
        return Err(crate::Error::InvalidArgument(format!(
            "paragraph keys: {} bytes for {total} lines",
            keys.len()
        )));
    }
    let mut seen: FxHashSet<u64> = FxHashSet::default();
    let mut verdict = ParagraphVerdict {
        drop: vec![0; total],
        emptied: vec![0; lines.len()],
        ..Default::default()
    };
    let mut line = 0usize;
    for (doc, &count) in lines.iter().enumerate() {
        let (mut non_blank, mut kept) = (0u32, 0u32);
        for _ in 0..count {
            let key = &keys[line * LINE_KEY_BYTES..(line + 1) * LINE_KEY_BYTES];
            let hash = u64::from_le_bytes(key[..8].try_into().expect("8 bytes"));
            let len = u32::from_le_bytes(key[8..].try_into().expect("4 bytes"));
            if hash != 0 {
                non_blank += 1;
                verdict.paragraphs += 1;
                if seen.insert(hash) {
                    kept += 1;
                } else {
                    verdict.drop[line] = 1;
                    verdict.paragraphs_removed += 1;
                    verdict.bytes_removed += len as u64;
                }
            }
            line += 1;
        }
        verdict.emptied[doc] = u8::from(non_blank > 0 && kept == 0);
    }
    Ok(verdict)
}

/// Row `i` of `column` without the lines flagged in `flags(i)` (one byte per line, 1 drops),
/// kept lines joined by `\n`: as (data, offsets). A row whose flags do not match its line
/// count is an error (the keys came from other text).
pub fn drop_lines<'f>(
    column: &StrColumn<'_>,
    flags: impl Fn(usize) -> &'f [u8],
) -> crate::Result<(Vec<u8>, Vec<i64>)> {
    let mut data = Vec::new();
    let mut offsets = Vec::with_capacity(column.len() + 1);
    offsets.push(0i64);
    for row in 0..column.len() {
        let text = column.get(row);
        let f = flags(row);
        if f.iter().all(|&x| x == 0) {
            if f.len() != text.split('\n').count() {
                return Err(crate::Error::InvalidArgument(format!(
                    "paragraph flags of row {row} do not match its lines"
                )));
            }
            data.extend_from_slice(text.as_bytes());
        } else {
            let mut first = true;
            let mut n = 0usize;
            for (line, &flag) in text.split('\n').zip(f.iter().chain(std::iter::repeat(&0))) {
                n += 1;
                if flag == 0 {
                    if !first {
                        data.push(b'\n');
                    }
                    data.extend_from_slice(line.as_bytes());
                    first = false;
                }
            }
            if n != f.len() {
                return Err(crate::Error::InvalidArgument(format!(
                    "paragraph flags of row {row} do not match its lines"
                )));
            }
        }
        offsets.push(data.len() as i64);
    }
    Ok((data, offsets))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ccnet_normalisation() {
        let mut s = String::new();
        normalize_for_dedup("  Hello, Wörld ２０２３！ Call 555-1234.\t", &mut s);
        // ASCII punctuation and accents stay; fullwidth digits are Nd and become 0.
        assert_eq!(s, "hello, wörld 0000 call 000-0000.");
        normalize_for_dedup(" \u{3000} ", &mut s);
        assert_eq!(s, "");
    }

    #[test]
    fn first_occurrence_is_kept() {
        let key = |h: u64, len: u32| [h.to_le_bytes().as_slice(), &len.to_le_bytes()].concat();
        let keys = [
            key(5, 3),
            key(0, 0),
            key(6, 2),
            key(5, 3),
            key(0, 0),
            key(6, 2),
            key(5, 3),
        ]
        .concat();
        let v = paragraph_decide(&keys, &[3, 2, 2]).unwrap();
        assert_eq!(v.drop, [0, 0, 0, 1, 0, 1, 1]);
        assert_eq!(v.emptied, [0, 1, 1]);
        assert_eq!(
            (v.paragraphs, v.paragraphs_removed, v.bytes_removed),
            (5, 3, 8)
        );
    }
}
