//! Word and phrase lists matched with Aho-Corasick: C4's bad-words rule (does the text hold
//! one?) and the `blocklist` stage (how many times, per 1,000 script-aware words). One
//! [`PhraseMatcher`] serves both, so "a match" means the same in each.
//!
//! A match is an occurrence of a list entry in the text (both lower-cased with Unicode rules
//! when `ignore_case`); with `word_boundaries`, only where the characters just before and just
//! after it are not word characters (letters, numbers, `_`) or are the text's ends, which is
//! C4's `(?:\W|^)(w1|w2|...)(?:\W|$)`. Every occurrence of every entry counts, overlapping
//! ones included (`"bad"` and `"bad word"` both count in "bad word").

use super::chars::is_alnum;
use super::words::word_count;
use super::StrColumn;
use crate::error::{Error, Result};
use aho_corasick::AhoCorasick;
use rayon::prelude::*;

const ROWS_PER_TASK: usize = 64;

/// Python's `\w` for one character: a letter, a number or `_`.
#[inline]
pub fn is_word_char(c: char) -> bool {
    c == '_' || is_alnum(c)
}

/// `s` lower-cased into `out` (cleared first), as Python's `str.lower`.
pub fn lower_into(s: &str, out: &mut String) {
    out.clear();
    if s.is_ascii() {
        out.push_str(s);
        out.make_ascii_lowercase();
    } else {
        out.push_str(&s.to_lowercase());
    }
}

/// A compiled word/phrase list.
pub struct PhraseMatcher {
    /// None when the list is empty: nothing ever matches.
    automaton: Option<AhoCorasick>,
    ignore_case: bool,
    word_boundaries: bool,
}

impl PhraseMatcher {
    /// Empty entries are ignored; with `ignore_case` the entries are lower-cased here.
    pub fn new(phrases: &[String], ignore_case: bool, word_boundaries: bool) -> Result<Self> {
        let mut entries: Vec<String> = phrases
            .iter()
            .filter(|p| !p.is_empty())
            .map(|p| {
                if ignore_case {
                    p.to_lowercase()
                } else {
                    p.clone()
                }
            })
            .collect();
        // A repeated entry would count each occurrence twice.
        entries.sort_unstable();
        entries.dedup();
        let automaton = if entries.is_empty() {
            None
        } else {
            Some(AhoCorasick::new(&entries).map_err(|e| {
                Error::InvalidArgument(format!("cannot build the phrase automaton: {e}"))
            })?)
        };
        Ok(PhraseMatcher {
            automaton,
            ignore_case,
            word_boundaries,
        })
    }

    /// Calls `hit` for each match in `text` until it returns false; `scratch` holds the
    /// lower-cased text between calls, so a column allocates once per task.
    fn scan(&self, text: &str, scratch: &mut String, mut hit: impl FnMut() -> bool) {
        let Some(ac) = &self.automaton else { return };
        let haystack = if self.ignore_case {
            lower_into(text, scratch);
            scratch.as_str()
        } else {
            text
        };
        for m in ac.find_overlapping_iter(haystack) {
            let bounded = !self.word_boundaries
                || (!haystack[..m.start()]
                    .chars()
                    .next_back()
                    .is_some_and(is_word_char)
                    && !haystack[m.end()..].chars().next().is_some_and(is_word_char));
            if bounded && !hit() {
                return;
            }
        }
    }

    /// The number of matches in `text`.
    pub fn count(&self, text: &str, scratch: &mut String) -> u64 {
        let mut n = 0;
        self.scan(text, scratch, || {
            n += 1;
            true
        });
        n
    }

    /// Whether `text` has a match (stops at the first).
    pub fn contains(&self, text: &str, scratch: &mut String) -> bool {
        let mut found = false;
        self.scan(text, scratch, || {
            found = true;
            false
        });
        found
    }
}

/// Per row: (matches, script-aware words) of the column, as two arrays.
pub fn blocklist_column(column: &StrColumn, matcher: &PhraseMatcher) -> (Vec<u64>, Vec<u64>) {
    let n = column.len();
    let mut rows = vec![(0u64, 0u64); n];
    rows.par_chunks_mut(ROWS_PER_TASK)
        .enumerate()
        .for_each(|(task, chunk)| {
            let mut scratch = String::new();
            for (j, slot) in chunk.iter_mut().enumerate() {
                let text = column.get(task * ROWS_PER_TASK + j);
                *slot = (matcher.count(text, &mut scratch), word_count(text));
            }
        });
    rows.into_iter().unzip()
}

/// Per row, 1 when the text has a match (C4's bad-words rule), else 0.
pub fn contains_column(column: &StrColumn, matcher: &PhraseMatcher) -> Vec<u8> {
    let mut found = vec![0u8; column.len()];
    found
        .par_chunks_mut(ROWS_PER_TASK)
        .enumerate()
        .for_each(|(task, chunk)| {
            let mut scratch = String::new();
            for (j, slot) in chunk.iter_mut().enumerate() {
                let text = column.get(task * ROWS_PER_TASK + j);
                *slot = u8::from(matcher.contains(text, &mut scratch));
            }
        });
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matcher(words: &[&str], ignore_case: bool, word_boundaries: bool) -> PhraseMatcher {
        let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        PhraseMatcher::new(&words, ignore_case, word_boundaries).unwrap()
    }

    #[test]
    fn counts_bounded_overlapping_matches() {
        let mut s = String::new();
        let m = matcher(&["bad", "bad word", "BAD"], true, true);
        assert_eq!(m.count("Bad word, badly bad_ bad.", &mut s), 3);
        let m = matcher(&["bad"], false, false);
        assert_eq!(m.count("Bad badly bad", &mut s), 2);
        let m = matcher(&["猫"], true, false);
        assert_eq!(m.count("我是猫猫", &mut s), 2);
        assert!(!matcher(&[""], true, true).contains("anything", &mut s));
    }
}
