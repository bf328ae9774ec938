//! Per-document statistics for datatrove's `FineWebQualityFilter`; Python applies the
//! thresholds. Lines are the text cut at `\n`, blank ones (only whitespace) left out.

use super::lines::{char_len, py_strip, Endings};
use super::words::Splitter;
use super::StrColumn;
use rayon::prelude::*;
use rustc_hash::FxHashSet;

const ROWS_PER_TASK: usize = 64;

/// The statistics of one document, in the order they are laid out (see [`fineweb_column`]).
pub const FIELDS: [&str; 7] = [
    "lines",          // non-blank lines
    "punct_lines",    // of those, ending with one of the stop characters
    "short_lines",    // of those, at most `short_line_length` characters long
    "dup_line_chars", // characters of lines equal to an earlier line
    "chars",          // characters of the text less its newlines
    "newlines",       // number of `\n`
    "words",          // words (the language's splitter's), when counted
];

/// The statistics of one document; words are only counted with a splitter in `count_words`
/// (they are the costly part and only the last rule reads them: see `word_count_column`).
pub fn fineweb_document(
    text: &str,
    stop_chars: &Endings,
    short_line_length: usize,
    count_words: Option<Splitter>,
) -> [u64; 7] {
    let mut s = [0u64; 7];
    let mut seen: FxHashSet<&str> = FxHashSet::default();
    for line in text.split('\n') {
        s[5] += 1;
        if py_strip(line).is_empty() {
            continue;
        }
        s[0] += 1;
        if stop_chars.matches(line) {
            s[1] += 1;
        }
        let len = char_len(line) as u64;
        if len <= short_line_length as u64 {
            s[2] += 1;
        }
        if !seen.insert(line) {
            s[3] += len;
        }
    }
    s[5] -= 1;
    s[4] = (char_len(text) as u64) - s[5];
    // Words only decide the last rule; a document with no non-blank line never gets there.
    if let Some(splitter) = count_words.filter(|_| s[0] > 0) {
        splitter.for_each_word(text, |_| s[6] += 1);
    }
    s
}

/// The statistics of every row, field-major: `FIELDS.len()` arrays of `column.len()` u64.
pub fn fineweb_column(
    column: &StrColumn,
    stop_chars: &[String],
    short_line_length: usize,
    count_words: Option<Splitter>,
) -> Vec<u64> {
    let stop_chars = &Endings::new(stop_chars);
    let n = column.len();
    let mut rows = vec![[0u64; 7]; n];
    rows.par_chunks_mut(ROWS_PER_TASK)
        .enumerate()
        .for_each(|(task, chunk)| {
            for (j, slot) in chunk.iter_mut().enumerate() {
                *slot = fineweb_document(
                    column.get(task * ROWS_PER_TASK + j),
                    stop_chars,
                    short_line_length,
                    count_words,
                );
            }
        });
    super::field_major(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_of_a_small_text() {
        let stop = Endings::new(&[".".to_string()]);
        let s = fineweb_document(
            "Hello there.\n\nHello there.\nbye",
            &stop,
            5,
            Some(Splitter::English),
        );
        assert_eq!(s, [3, 2, 1, 12, 27, 3, 7]);
    }
}
