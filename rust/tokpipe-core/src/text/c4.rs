//! C4's heuristic rules (Raffel et al. 2020) as datatrove's `C4QualityFilter` applies them,
//! and C4's bad-words check (`C4BadWordsFilter`), over an Arrow string column on all cores.
//!
//! The quality rules rewrite the text (they drop lines), so the kernel returns the new column
//! and, per row, why the document was dropped ([`C4Drop`]) along with counts of dropped lines.

use super::blocklist::{contains_column, lower_into, PhraseMatcher};
use super::en_words::sentence_count;
use super::lines::{char_len, py_splitlines, py_strip, py_words};
use super::StrColumn;
use crate::error::Result;
use rayon::prelude::*;

const ROWS_PER_TASK: usize = 64;

/// `C4QualityFilter`'s parameters (split_paragraph=True, English); -1 disables a number.
#[derive(Clone, Debug)]
pub struct C4Params {
    pub remove_citations: bool,
    pub filter_no_terminal_punct: bool,
    pub min_num_sentences: i64,
    pub min_words_per_line: i64,
    pub max_word_length: i64,
    pub filter_lorem_ipsum: bool,
    pub filter_javascript: bool,
    pub filter_curly_bracket: bool,
    pub filter_policy: bool,
}

impl Default for C4Params {
    fn default() -> Self {
        C4Params {
            remove_citations: true,
            filter_no_terminal_punct: true,
            min_num_sentences: 5,
            min_words_per_line: 3,
            max_word_length: 1000,
            filter_lorem_ipsum: true,
            filter_javascript: true,
            filter_curly_bracket: true,
            filter_policy: true,
        }
    }
}

/// Per-row outcome: 0 kept, else the rule that dropped the document.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum C4Drop {
    Kept = 0,
    LoremIpsum = 1,
    CurlyBracket = 2,
    TooFewSentences = 3,
}

/// Lines seen and dropped per rule, summed over the column (datatrove's line stats).
pub const LINE_STATS: [&str; 7] = [
    "line-total",
    "line-filter-too_long_word",
    "line-filter-no_terminal_punc",
    "line-filter-too_few_words",
    "line-filter-javascript",
    "line-filter-policy",
    "line-kept",
];

const POLICY: [&str; 6] = [
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "use cookies",
];

/// Removes `\[\d*]`, `[edit]` and `[citation needed]` (Python's `\d`: any decimal digit).
fn remove_citations(line: &str, out: &mut String) {
    out.clear();
    let mut rest = line;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let digits = after
            .find(|c: char| !c.is_numeric() || !is_decimal(c))
            .unwrap_or(after.len());
        let skip = if after[digits..].starts_with(']') {
            Some(digits + 1)
        } else if after.starts_with("edit]") {
            Some(5)
        } else if after.starts_with("citation needed]") {
            Some(16)
        } else {
            None
        };
        match skip {
            Some(n) => rest = &after[n..],
            None => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
}

fn is_decimal(c: char) -> bool {
    use unicode_general_category::{get_general_category, GeneralCategory};
    get_general_category(c) == GeneralCategory::DecimalNumber
}

/// One document: writes the kept text to `out` (cleared first) and returns the outcome.
pub fn c4_document(text: &str, p: &C4Params, out: &mut String, stats: &mut [u64; 7]) -> C4Drop {
    out.clear();
    let mut num_sentences: i64 = 0;
    let mut cited = String::new();
    let mut lower = String::new();
    let mut first = true;
    for raw in py_splitlines(text) {
        let stripped = py_strip(raw);
        stats[0] += 1;
        let mut n_words: i64 = 0;
        let mut too_long = false;
        for w in py_words(stripped) {
            n_words += 1;
            if p.max_word_length != -1 && char_len(w) as i64 > p.max_word_length {
                too_long = true;
            }
        }
        if too_long {
            stats[1] += 1;
            continue;
        }
        let line: &str = if p.remove_citations && stripped.contains('[') {
            remove_citations(stripped, &mut cited);
            &cited
        } else {
            stripped
        };
        if p.filter_no_terminal_punct
            && (!line.ends_with(['.', '?', '!', '"', '\'']) || line.ends_with("..."))
        {
            stats[2] += 1;
            continue;
        }
        if n_words < p.min_words_per_line {
            stats[3] += 1;
            continue;
        }
        lower_into(line, &mut lower);
        if p.filter_lorem_ipsum && lower.contains("lorem ipsum") {
            out.clear();
            return C4Drop::LoremIpsum;
        }
        if p.filter_javascript && lower.contains("javascript") {
            stats[4] += 1;
            continue;
        }
        if p.filter_curly_bracket && line.contains('{') {
            out.clear();
            return C4Drop::CurlyBracket;
        }
        if p.filter_policy && POLICY.iter().any(|s| lower.contains(s)) {
            stats[5] += 1;
            continue;
        }
        if p.min_num_sentences != -1 {
            num_sentences += sentence_count(line) as i64;
        }
        if !first {
            out.push('\n');
        }
        out.push_str(line);
        first = false;
        stats[6] += 1;
    }
    if num_sentences < p.min_num_sentences {
        out.clear();
        return C4Drop::TooFewSentences;
    }
    let trimmed = py_strip(out);
    if trimmed.len() != out.len() {
        *out = trimmed.to_string();
    }
    C4Drop::Kept
}

/// The column's result: the rewritten text as Arrow offsets (64-bit) and data (dropped rows
/// are empty), one [`C4Drop`] code per row, and the line counts of [`LINE_STATS`].
pub struct C4Output {
    pub offsets: Vec<i64>,
    pub data: Vec<u8>,
    pub drops: Vec<u8>,
    pub stats: [u64; 7],
}

/// One parallel task's rows: kept-text lengths, kept text, drop codes and line counts.
type C4Part = (Vec<u32>, String, Vec<u8>, [u64; 7]);

pub fn c4_column(column: &StrColumn, p: &C4Params) -> C4Output {
    let n = column.len();
    let starts: Vec<usize> = (0..n).step_by(ROWS_PER_TASK).collect();
    let parts: Vec<C4Part> = starts
        .par_iter()
        .map(|&start| {
            let end = (start + ROWS_PER_TASK).min(n);
            let mut lens = Vec::with_capacity(end - start);
            let mut data = String::new();
            let mut drops = Vec::with_capacity(end - start);
            let mut stats = [0u64; 7];
            let mut out = String::new();
            for i in start..end {
                let drop = c4_document(column.get(i), p, &mut out, &mut stats);
                data.push_str(&out);
                lens.push(out.len() as u32);
                drops.push(drop as u8);
            }
            (lens, data, drops, stats)
        })
        .collect();
    let total: usize = parts.iter().map(|p| p.1.len()).sum();
    let mut result = C4Output {
        offsets: Vec::with_capacity(n + 1),
        data: Vec::with_capacity(total),
        drops: Vec::with_capacity(n),
        stats: [0; 7],
    };
    result.offsets.push(0);
    let mut at = 0i64;
    for (lens, data, drops, stats) in parts {
        for len in lens {
            at += len as i64;
            result.offsets.push(at);
        }
        result.data.extend_from_slice(data.as_bytes());
        result.drops.extend_from_slice(&drops);
        for (a, b) in result.stats.iter_mut().zip(stats) {
            *a += b;
        }
    }
    result
}

/// Whether each row's lower-cased text contains one of `words`: with `word_boundaries`, only
/// where flanked by non-word characters or the text's ends, as C4's
/// `(?:\W|^)(w1|w2|...)(?:\W|$)` (see [`PhraseMatcher`]). One byte per row, 1 when found.
pub fn badwords_column(
    column: &StrColumn,
    words: &[String],
    word_boundaries: bool,
) -> Result<Vec<u8>> {
    let matcher = PhraseMatcher::new(words, true, word_boundaries)?;
    Ok(contains_column(column, &matcher))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn citations() {
        let mut out = String::new();
        remove_citations("a[1] b[edit] c[citation needed] d[x] e[]", &mut out);
        assert_eq!(out, "a b c d[x] e");
    }

    #[test]
    fn drops_lines_and_documents() {
        let p = C4Params::default();
        let mut out = String::new();
        let mut stats = [0; 7];
        let text = "Menu\nThe cat sat on the mat. It purred.\nShe left. He stayed. They slept.\nEnable javascript to see this.\nWe all went home.";
        assert_eq!(c4_document(text, &p, &mut out, &mut stats), C4Drop::Kept);
        assert_eq!(out, "The cat sat on the mat. It purred.\nShe left. He stayed. They slept.\nWe all went home.");
        assert_eq!(
            c4_document("Some {code} here, you see.", &p, &mut out, &mut stats),
            C4Drop::CurlyBracket
        );
        assert_eq!(
            c4_document("One short line.", &p, &mut out, &mut stats),
            C4Drop::TooFewSentences
        );
    }
}
