//! CCNet's line normalisation (`cc_net/text_normalizer.py`, `normalize(line)` with its
//! defaults accent=True, case=True, numbers=True, punct=1), which CCNet applies to every line
//! before its SentencePiece + KenLM perplexity: strip (Python's `str.strip`), lowercase
//! (`str.lower`), decompose (NFD) and drop non-spacing marks (category Mn), replace every
//! decimal digit (`\d`, category Nd) by `0`, replace CCNet's table of Unicode punctuation by
//! ASCII, and drop the control characters U+0000..U+001F and U+007F..U+009F.

use crate::text::lines::py_strip;
use unicode_general_category::{get_general_category, GeneralCategory};
use unicode_normalization::UnicodeNormalization;

/// CCNet's `UNICODE_PUNCT`.
fn unicode_punct(c: char) -> Option<&'static str> {
    Some(match c {
        '，' => ",",
        '。' => ".",
        '、' => ",",
        '„' => "\"",
        '”' => "\"",
        '“' => "\"",
        '«' => "\"",
        '»' => "\"",
        '１' => "\"",
        '」' => "\"",
        '「' => "\"",
        '《' => "\"",
        '》' => "\"",
        '´' => "'",
        '∶' => ":",
        '：' => ":",
        '？' => "?",
        '！' => "!",
        '（' => "(",
        '）' => ")",
        '；' => ";",
        '–' => "-",
        '—' => " - ",
        '．' => ". ",
        '～' => "~",
        '’' => "'",
        '…' => "...",
        '━' => "-",
        '〈' => "<",
        '〉' => ">",
        '【' => "[",
        '】' => "]",
        '％' => "%",
        '►' => "-",
        _ => return None,
    })
}

#[inline]
fn is_non_printing(c: char) -> bool {
    matches!(c as u32, 0..=31 | 127..=159)
}

/// Writes CCNet's normalisation of `line` into `out` (cleared first).
pub fn ccnet_normalize(line: &str, out: &mut String) {
    out.clear();
    let line = py_strip(line);
    if line.is_empty() {
        return;
    }
    if line.is_ascii() {
        // No case mapping beyond ASCII, nothing to decompose, no marks, only ASCII digits.
        for b in line.bytes() {
            match b {
                b'0'..=b'9' => out.push('0'),
                b'A'..=b'Z' => out.push((b + 32) as char),
                0..=31 | 127 => {}
                _ => out.push(b as char),
            }
        }
        return;
    }
    let lowered = line.to_lowercase();
    // The steps after lowercasing act on one character each, in CCNet's order: digits before
    // punctuation (so the fullwidth digit one becomes "0", not the quote of the table).
    for c in lowered.nfd() {
        if get_general_category(c) == GeneralCategory::NonspacingMark {
            continue;
        }
        if get_general_category(c) == GeneralCategory::DecimalNumber {
            out.push('0');
        } else if let Some(ascii) = unicode_punct(c) {
            out.push_str(ascii);
        } else if !is_non_printing(c) {
            out.push(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(s: &str) -> String {
        let mut out = String::new();
        ccnet_normalize(s, &mut out);
        out
    }

    #[test]
    fn follows_ccnet() {
        assert_eq!(norm("  Hello World 2024!\t"), "hello world 0000!");
        assert_eq!(norm("Café — «Ünïcödé»…"), "cafe  -  \"unicode\"...");
        assert_eq!(norm("１２３，ＡＢＣ"), "000,ａｂｃ");
        assert_eq!(norm("a\u{7}b\u{85}c"), "abc");
        assert_eq!(norm(" \u{3000} "), "");
    }
}
