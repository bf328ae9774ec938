//! Statistical features of a document for the `text_stats` stage, in one pass over its
//! characters, over an Arrow string column on all cores. Python applies the thresholds.
//!
//! Definitions (the Python stage's docstring repeats them for users):
//! - words are the script-aware words of [`super::words`];
//! - a sentence ends after each `.`, `!` or `?` followed by whitespace or the end of the text,
//!   and at each `。！？｡`; sentences without a word do not count, and every word lies in
//!   exactly one sentence (the cuts fall between words);
//! - characters are the text's non-whitespace characters (`str.isspace`);
//! - punctuation is Unicode category P*; its distribution gives each class of
//!   [`PUNCT_CLASSES`] as a fraction of all punctuation characters (`other` for the rest);
//! - a ratio whose denominator is 0 is computed over 1 (so it is 0 when its numerator is).

use super::chars::{is_alnum, is_punct_category};
use super::lines::is_py_space;
use super::words::{is_cjk_terminal, WordScanner};
use super::StrColumn;
use rayon::prelude::*;
use std::sync::OnceLock;
use unicode_general_category::{get_general_category, GeneralCategory as G};

const ROWS_PER_TASK: usize = 64;

/// The features of one document, in the order they are laid out (see [`stats_column`]).
pub const FEATURES: [&str; 18] = [
    "words",                // script-aware words
    "sentences",            // sentences with at least one word
    "sentence_length_mean", // words per sentence
    "sentence_length_var",  // population variance of the words per sentence
    "hash_word_ratio",      // `#` per word (Gopher's symbol-to-word ratio for the hash)
    "ellipsis_word_ratio",  // `...` (non-overlapping) and `…` per word (Gopher's, ellipsis)
    "digit_ratio",          // decimal digits (Nd) over characters
    "uppercase_ratio",      // upper-case letters (Lu) over cased letters (Lu, Ll, Lt)
    "non_alnum_ratio",      // characters neither letter nor number (not L*, N*) over characters
    "punct_period",         // . 。 ｡ ．
    "punct_comma",          // , ， 、 ､
    "punct_exclamation",    // ! ！
    "punct_question",       // ? ？
    "punct_colon",          // : ; ： ；
    "punct_quote",          // " ' “ ” ‘ ’ « » ‹ › „ ‚ 「 」 『 』 ＂ ＇
    "punct_bracket",        // ( ) [ ] { } （ ） ［ ］ ｛ ｝ 【 】 〔 〕 《 》 〈 〉
    "punct_dash",           // all of category Pd (- ‐ – — ― ...)
    "punct_other",          // the rest of P*
];

/// The named punctuation classes, in [`FEATURES`] order after `punct_`; `other` is implicit.
pub const PUNCT_CLASSES: [&str; 9] = [
    "period",
    "comma",
    "exclamation",
    "question",
    "colon",
    "quote",
    "bracket",
    "dash",
    "other",
];

fn general_category(c: char) -> G {
    get_general_category(c)
}

/// The class (index into [`PUNCT_CLASSES`]) of a punctuation character of category `g`.
fn punct_class(c: char, g: G) -> usize {
    match c {
        '.' | '。' | '｡' | '．' => 0,
        ',' | '，' | '、' | '､' => 1,
        '!' | '！' => 2,
        '?' | '？' => 3,
        ':' | ';' | '：' | '；' => 4,
        '"' | '\'' | '“' | '”' | '‘' | '’' | '«' | '»' | '‹' | '›' | '„' | '‚' | '「' | '」'
        | '『' | '』' | '＂' | '＇' => 5,
        '(' | ')' | '[' | ']' | '{' | '}' | '（' | '）' | '［' | '］' | '｛' | '｝' | '【'
        | '】' | '〔' | '〕' | '《' | '》' | '〈' | '〉' => 6,
        _ if g == G::DashPunctuation => 7,
        _ => 8,
    }
}

fn ratio(num: u64, den: u64) -> f64 {
    num as f64 / den.max(1) as f64
}

// What an ASCII character is, for the fast path: one of these, or PUNCT + its class.
const SPACE: u8 = 0;
const DIGIT: u8 = 1;
const UPPER: u8 = 2;
const LOWER: u8 = 3;
const OTHER: u8 = 4; // neither letter, number nor punctuation (symbols, controls)
const PUNCT: u8 = 16;

/// The kind of each ASCII character, derived once from the same rules as the slow path.
fn ascii_table() -> &'static [u8; 128] {
    static TABLE: OnceLock<[u8; 128]> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = [OTHER; 128];
        for (b, slot) in table.iter_mut().enumerate() {
            let c = b as u8 as char;
            let g = general_category(c);
            *slot = if is_py_space(c) {
                SPACE
            } else if c.is_ascii_digit() {
                DIGIT
            } else if c.is_ascii_uppercase() {
                UPPER
            } else if c.is_ascii_lowercase() {
                LOWER
            } else if is_punct_category(g) {
                PUNCT + punct_class(c, g) as u8
            } else {
                OTHER
            };
        }
        table
    })
}

/// The features of one document, in [`FEATURES`] order.
pub fn text_features(text: &str) -> [f64; 18] {
    let table = ascii_table();
    let bytes = text.as_bytes();
    let is_space_at = |i: usize| match bytes.get(i) {
        None => true,
        Some(&b) if b < 0x80 => table[b as usize] == SPACE,
        Some(_) => text[i..].chars().next().is_some_and(is_py_space),
    };
    let mut words = WordScanner::default();
    let mut n_words = 0u64;
    let mut sentence_words = 0u64;
    let mut sentences = 0u64;
    let mut length_sum = 0u64;
    let mut length_squares = 0u128;
    let mut end_sentence = |sentence_words: &mut u64| {
        if *sentence_words > 0 {
            sentences += 1;
            length_sum += *sentence_words;
            length_squares += u128::from(*sentence_words) * u128::from(*sentence_words);
            *sentence_words = 0;
        }
    };
    let (mut chars, mut digits, mut upper, mut cased, mut non_alnum) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let (mut hashes, mut ellipses, mut dot_run) = (0u64, 0u64, 0u64);
    let mut punct = [0u64; 9];
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let ends_sentence;
        if b < 0x80 {
            i += 1;
            let completed = u64::from(words.feed_ascii(b));
            n_words += completed;
            sentence_words += completed;
            if b == b'.' {
                dot_run += 1;
            } else {
                ellipses += dot_run / 3;
                dot_run = 0;
            }
            let kind = table[b as usize];
            if kind == SPACE {
                continue;
            }
            chars += 1;
            match kind {
                DIGIT => digits += 1,
                UPPER => {
                    upper += 1;
                    cased += 1;
                }
                LOWER => cased += 1,
                OTHER => non_alnum += 1,
                _ => {
                    non_alnum += 1;
                    punct[(kind - PUNCT) as usize] += 1;
                    hashes += u64::from(b == b'#');
                }
            }
            ends_sentence = matches!(b, b'.' | b'!' | b'?') && is_space_at(i);
        } else {
            let c = text[i..].chars().next().unwrap_or_default();
            i += c.len_utf8();
            let completed = u64::from(words.feed(c));
            n_words += completed;
            sentence_words += completed;
            ellipses += dot_run / 3;
            dot_run = 0;
            if is_py_space(c) {
                continue;
            }
            chars += 1;
            let g = general_category(c);
            match g {
                G::DecimalNumber => digits += 1,
                G::UppercaseLetter => {
                    upper += 1;
                    cased += 1;
                }
                G::LowercaseLetter | G::TitlecaseLetter => cased += 1,
                _ => {}
            }
            if !is_alnum(c) {
                non_alnum += 1;
                if is_punct_category(g) {
                    punct[punct_class(c, g)] += 1;
                }
                ellipses += u64::from(c == '…');
            }
            ends_sentence = is_cjk_terminal(c);
        }
        if ends_sentence {
            // An ASCII stop ends its token (whitespace follows); close the word it ends first.
            let last = u64::from(words.end_piece());
            n_words += last;
            sentence_words += last;
            end_sentence(&mut sentence_words);
        }
    }
    ellipses += dot_run / 3;
    let last = u64::from(words.end_piece());
    n_words += last;
    sentence_words += last;
    end_sentence(&mut sentence_words);

    let (mean, var) = if sentences == 0 {
        (0.0, 0.0)
    } else {
        // n * sum(x^2) - (sum x)^2 is exact in integers; one division at the end.
        let n = u128::from(sentences);
        let sum = u128::from(length_sum);
        let num = n * length_squares - sum * sum;
        (
            length_sum as f64 / sentences as f64,
            num as f64 / (n * n) as f64,
        )
    };
    let total_punct: u64 = punct.iter().sum();
    let mut out = [0.0f64; 18];
    out[0] = n_words as f64;
    out[1] = sentences as f64;
    out[2] = mean;
    out[3] = var;
    out[4] = ratio(hashes, n_words);
    out[5] = ratio(ellipses, n_words);
    out[6] = ratio(digits, chars);
    out[7] = ratio(upper, cased);
    out[8] = ratio(non_alnum, chars);
    for (slot, count) in out[9..].iter_mut().zip(punct) {
        *slot = ratio(count, total_punct);
    }
    out
}

/// The features of every row, feature-major: `FEATURES.len()` arrays of `column.len()` f64.
pub fn stats_column(column: &StrColumn) -> Vec<f64> {
    let n = column.len();
    let mut rows = vec![[0f64; 18]; n];
    rows.par_chunks_mut(ROWS_PER_TASK)
        .enumerate()
        .for_each(|(task, chunk)| {
            for (j, slot) in chunk.iter_mut().enumerate() {
                *slot = text_features(column.get(task * ROWS_PER_TASK + j));
            }
        });
    super::field_major(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_of_a_small_text() {
        let f = text_features("Hi there. Is it 3.14? Yes... #1 我是猫。OK");
        // Sentences: "Hi there." (2), "Is it 3.14?" (3), "Yes..." (1), "#1 我是猫。" (4), "OK" (1).
        assert_eq!(f[0], 11.0);
        assert_eq!(f[1], 5.0);
        assert_eq!(f[2], 11.0 / 5.0);
        let mean = 11.0 / 5.0;
        let var = [2.0f64, 3.0, 1.0, 4.0, 1.0]
            .iter()
            .map(|x| (x - mean) * (x - mean))
            .sum::<f64>()
            / 5.0;
        assert!((f[3] - var).abs() < 1e-12);
        assert_eq!(f[4], 1.0 / 11.0);
        assert_eq!(f[5], 1.0 / 11.0);
        // Non-space characters: 31; digits 3, 1, 4, 1.
        assert_eq!(f[6], 4.0 / 31.0);
        // Cased letters: H i t h e r e I s i t Y e s O K = 16, upper H I Y O K = 5.
        assert_eq!(f[7], 5.0 / 16.0);
        // Punctuation: . . ? . . . # 。 = 8 (periods 6 with 。, question 1, other #).
        assert_eq!(f[9], 6.0 / 8.0);
        assert_eq!(f[12], 1.0 / 8.0);
        assert_eq!(f[17], 1.0 / 8.0);
        assert_eq!(text_features(""), [0.0; 18]);
    }
}
