//! Per-document statistics behind the Gopher rules (Rae et al. 2021, table A1), computed the
//! way datatrove's `GopherQualityFilter` and `GopherRepetitionFilter` compute them, so that
//! Python only compares them with the thresholds. Every row gets every statistic (no early
//! exit), which also makes them usable as features. Lengths are in code points, as Python's
//! `len` counts them; words are the language's [`Splitter`]'s.
//!
//! The repetition rules look up every word n-gram for nine sizes, so n-grams are never built
//! as strings: each is a range of one buffer of the words (joined by spaces for the top
//! n-grams, by nothing for the duplicated ones, as datatrove joins them), found in a
//! [`HashTable`] by a polynomial hash of its bytes that costs O(1) per n-gram from prefix
//! hashes, and compared byte for byte on a hash match, so a hash collision cannot change a
//! count. The tables and buffers are reused from document to document.

use super::chars::is_py_alpha;
use super::lines::{char_len, is_py_space, py_splitlines};
use super::words::Splitter;
use super::StrColumn;
use hashbrown::HashTable;
use rayon::prelude::*;
use rustc_hash::FxHashSet;

/// Rows per parallel task.
const ROWS_PER_TASK: usize = 16;

/// The columns of [`quality_stats`], in order.
pub const QUALITY_STATS: [&str; 10] = [
    "words",            // all words (datatrove's `len(words)`)
    "non_symbol_words", // words with a character outside the punctuation set
    "non_symbol_chars", // their total length (mean word length = this / non_symbol_words)
    "hashes",           // text.count("#")
    "ellipses",         // text.count("...") + text.count("…")
    "lines",            // len(text.splitlines())
    "bullet_lines",     // lines whose lstrip() starts with "•" or "-"
    "ellipsis_lines",   // lines whose rstrip() ends with "..." or "…"
    "alpha_words",      // words with an alphabetic character (str.isalpha)
    "stop_words",       // distinct stop words among the words
];

/// The first columns of [`repetition_stats`], in order; one column per top n-gram size and
/// one per duplicated n-gram size follow.
pub const REPETITION_STATS: [&str; 7] = [
    "chars",          // len(text)
    "paragraphs",     // len(re.split(r"\n{2,}", text.strip()))
    "dup_paragraphs", // paragraphs equal to an earlier one
    "dup_para_chars", // their total length
    "lines",          // len(re.split(r"\n+", text))
    "dup_lines",      // lines equal to an earlier one
    "dup_line_chars", // their total length
];

/// The quality rules' settings: datatrove's `PUNCTUATION_SET` (a word made only of these is a
/// symbol, not a word) and the stop words.
pub struct QualityParams {
    splitter: Splitter,
    punctuation: FxHashSet<char>,
    ascii_punctuation: [bool; 128],
    stop_words: Vec<String>,
}

impl QualityParams {
    pub fn new(splitter: Splitter, punctuation: &str, stop_words: &[String]) -> Self {
        let mut ascii_punctuation = [false; 128];
        for c in punctuation.chars().filter(char::is_ascii) {
            ascii_punctuation[c as usize] = true;
        }
        QualityParams {
            splitter,
            punctuation: punctuation.chars().collect(),
            ascii_punctuation,
            stop_words: stop_words.to_vec(),
        }
    }

    #[inline]
    fn is_punctuation(&self, c: char) -> bool {
        if c.is_ascii() {
            self.ascii_punctuation[c as usize]
        } else {
            self.punctuation.contains(&c)
        }
    }
}

/// The [`QUALITY_STATS`] of one text.
pub fn quality_row(text: &str, params: &QualityParams, out: &mut [u64]) {
    let (mut words, mut non_symbol, mut non_symbol_chars, mut alpha) = (0u64, 0u64, 0u64, 0u64);
    let mut stop_seen = 0u64; // one bit per stop word (the first 64 are checked)
    params.splitter.for_each_word(text, |word| {
        words += 1;
        if word.chars().any(|c| !params.is_punctuation(c)) {
            non_symbol += 1;
            non_symbol_chars += char_len(word) as u64;
        }
        if word.chars().any(is_py_alpha) {
            alpha += 1;
        }
        for (i, stop) in params.stop_words.iter().take(64).enumerate() {
            if word == stop {
                stop_seen |= 1 << i;
            }
        }
    });
    // `str.count` counts non-overlapping matches, as memmem's iterator finds them.
    let hashes = memchr::memchr_iter(b'#', text.as_bytes()).count() as u64;
    let ellipses = (memchr::memmem::find_iter(text.as_bytes(), b"...").count()
        + memchr::memmem::find_iter(text.as_bytes(), "…".as_bytes()).count())
        as u64;
    let (mut lines, mut bullets, mut ellipsis_lines) = (0u64, 0u64, 0u64);
    for line in py_splitlines(text) {
        lines += 1;
        let head = line.trim_start_matches(is_py_space);
        bullets += u64::from(head.starts_with('•') || head.starts_with('-'));
        let tail = line.trim_end_matches(is_py_space);
        ellipsis_lines += u64::from(tail.ends_with("...") || tail.ends_with('…'));
    }
    out.copy_from_slice(&[
        words,
        non_symbol,
        non_symbol_chars,
        hashes,
        ellipses,
        lines,
        bullets,
        ellipsis_lines,
        alpha,
        u64::from(stop_seen.count_ones()),
    ]);
}

/// [`QUALITY_STATS`] of every row, row-major (`rows x 10`), in parallel.
pub fn quality_stats(column: &StrColumn<'_>, params: &QualityParams) -> Vec<u64> {
    let width = QUALITY_STATS.len();
    let mut out = vec![0u64; column.len() * width];
    out.par_chunks_mut(ROWS_PER_TASK * width)
        .enumerate()
        .for_each(|(chunk, out)| {
            for (j, row) in out.chunks_mut(width).enumerate() {
                quality_row(column.get(chunk * ROWS_PER_TASK + j), params, row);
            }
        });
    out
}

/// `(elements, duplicates, duplicate chars)` of datatrove's `find_duplicates`.
fn duplicates<'a>(parts: impl Iterator<Item = &'a str>, out: &mut [u64]) {
    let mut seen: FxHashSet<&str> = FxHashSet::default();
    let (mut n, mut dups, mut dup_chars) = (0u64, 0u64, 0u64);
    for part in parts {
        n += 1;
        if !seen.insert(part) {
            dups += 1;
            dup_chars += char_len(part) as u64;
        }
    }
    out.copy_from_slice(&[n, dups, dup_chars]);
}

/// Pieces of `text` between runs of at least `min_run` newlines (`re.split(r"\n{k,}", text)`).
fn split_newline_runs(text: &str, min_run: usize) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut at = 0usize;
    let mut search = 0usize;
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        while let Some(i) = memchr::memchr(b'\n', &bytes[search..]).map(|i| search + i) {
            let j = i + bytes[i..].iter().take_while(|&&b| b == b'\n').count();
            search = j;
            if j - i >= min_run {
                let piece = &text[at..i];
                at = j;
                return Some(piece);
            }
        }
        done = true;
        Some(&text[at..])
    })
}

/// Polynomial hashing modulo the Mersenne prime 2^61 - 1.
const MODULUS: u64 = (1 << 61) - 1;
const BASE: u64 = 0x1f3d_5b79_a2c4_e601 % MODULUS;

#[inline]
fn mul_mod(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    let r = (p as u64 & MODULUS) + (p >> 61) as u64;
    if r >= MODULUS {
        r - MODULUS
    } else {
        r
    }
}

/// A byte buffer with the prefix hashes of its bytes, so any range hashes in O(1).
#[derive(Default)]
struct HashedBytes {
    bytes: Vec<u8>,
    prefix: Vec<u64>,
}

impl HashedBytes {
    fn clear(&mut self) {
        self.bytes.clear();
        self.prefix.clear();
        self.prefix.push(0);
    }

    fn push(&mut self, data: &[u8]) {
        let mut h = *self.prefix.last().expect("cleared first");
        for &b in data {
            h = mul_mod(h, BASE) + u64::from(b) + 1;
            if h >= MODULUS {
                h -= MODULUS;
            }
            self.prefix.push(h);
        }
        self.bytes.extend_from_slice(data);
    }

    /// A well-mixed 64-bit hash of `bytes[a..b]` (`powers[k]` is BASE^k).
    #[inline]
    fn hash(&self, a: usize, b: usize, powers: &[u64]) -> u64 {
        let h = (self.prefix[b] + MODULUS - mul_mod(self.prefix[a], powers[b - a])) % MODULUS;
        // hashbrown reads the top 7 bits and the low bits: spread the 61 bits over both.
        let m = u128::from(h) * 0x9e37_79b9_7f4a_7c15;
        (m as u64) ^ ((m >> 64) as u64)
    }
}

/// Reused from document to document by one worker.
#[derive(Default)]
pub struct RepetitionScratch {
    joined: HashedBytes,         // the words, each followed by a space
    concat: HashedBytes,         // the words, one after the other
    joined_starts: Vec<usize>,   // where word i starts in `joined` (and one past the end)
    concat_starts: Vec<usize>,   // the same in `concat`
    chars: Vec<usize>,           // code points in words 0..i
    powers: Vec<u64>,            // BASE^k
    top: HashTable<(u32, u32)>,  // n-gram -> (count, first position)
    seen: HashTable<(u32, u32)>, // n-gram -> (start, end) in `concat`
}

impl RepetitionScratch {
    fn load_words(&mut self, splitter: Splitter, text: &str) {
        self.joined.clear();
        self.concat.clear();
        self.joined_starts.clear();
        self.concat_starts.clear();
        self.chars.clear();
        self.chars.push(0);
        splitter.for_each_word(text, |word| {
            self.joined_starts.push(self.joined.bytes.len());
            self.concat_starts.push(self.concat.bytes.len());
            self.joined.push(word.as_bytes());
            self.joined.push(b" ");
            self.concat.push(word.as_bytes());
            self.chars.push(self.chars.last().unwrap() + char_len(word));
        });
        self.joined_starts.push(self.joined.bytes.len());
        self.concat_starts.push(self.concat.bytes.len());
        let needed = self.joined.bytes.len() + 1;
        if self.powers.is_empty() {
            self.powers.push(1);
        }
        while self.powers.len() < needed {
            let next = mul_mod(*self.powers.last().unwrap(), BASE);
            self.powers.push(next);
        }
    }

    /// Datatrove's `find_top_duplicate` over the `n`-grams of words joined by spaces: the
    /// length of the most frequent n-gram (the first seen among equally frequent ones) times
    /// its count. 0 when there are fewer than `n` words.
    fn top_ngram_chars(&mut self, n: usize) -> u64 {
        let words = self.chars.len() - 1;
        if words < n {
            return 0;
        }
        let (joined, starts, powers) = (&self.joined, &self.joined_starts, &self.powers);
        // n-gram i spans joined[starts[i] .. starts[i + n] - 1] (its last space left out).
        let span = |i: usize| (starts[i], starts[i + n] - 1);
        let table = &mut self.top;
        table.clear();
        let mut best = (0u32, 0u32);
        for i in 0..=words - n {
            let (a, b) = span(i);
            let hash = joined.hash(a, b, powers);
            let bytes = &joined.bytes[a..b];
            let entry = table.entry(
                hash,
                |&(_, first)| {
                    let (fa, fb) = span(first as usize);
                    &joined.bytes[fa..fb] == bytes
                },
                |&(_, first)| {
                    let (fa, fb) = span(first as usize);
                    joined.hash(fa, fb, powers)
                },
            );
            let slot = entry.or_insert((0, i as u32)).into_mut();
            slot.0 += 1;
            if slot.0 > best.0 || (slot.0 == best.0 && slot.1 < best.1) {
                best = *slot;
            }
        }
        let (count, first) = (u64::from(best.0), best.1 as usize);
        (self.chars[first + n] - self.chars[first] + n - 1) as u64 * count
    }

    /// Datatrove's `find_all_duplicate`: n-grams of words joined with nothing between them,
    /// scanned left to right; a repeat adds its length and skips past itself.
    fn dup_ngram_chars(&mut self, n: usize) -> u64 {
        let words = self.chars.len() - 1;
        let (concat, starts, powers) = (&self.concat, &self.concat_starts, &self.powers);
        let table = &mut self.seen;
        table.clear();
        let (mut repeated, mut i) = (0usize, 0usize);
        while i + n <= words {
            let (a, b) = (starts[i], starts[i + n]);
            let hash = concat.hash(a, b, powers);
            let bytes = &concat.bytes[a..b];
            let entry = table.entry(
                hash,
                |&(sa, sb)| &concat.bytes[sa as usize..sb as usize] == bytes,
                |&(sa, sb)| concat.hash(sa as usize, sb as usize, powers),
            );
            match entry {
                hashbrown::hash_table::Entry::Occupied(_) => {
                    repeated += self.chars[i + n] - self.chars[i];
                    i += n;
                }
                hashbrown::hash_table::Entry::Vacant(v) => {
                    v.insert((a as u32, b as u32));
                    i += 1;
                }
            }
        }
        repeated as u64
    }
}

/// The [`REPETITION_STATS`] of one text, then its top n-gram chars for each of `top_n` and its
/// duplicated n-gram chars for each of `dup_n`.
pub fn repetition_row(
    splitter: Splitter,
    text: &str,
    top_n: &[usize],
    dup_n: &[usize],
    scratch: &mut RepetitionScratch,
    out: &mut [u64],
) {
    out[0] = char_len(text) as u64;
    let stripped = text.trim_matches(is_py_space);
    duplicates(split_newline_runs(stripped, 2), &mut out[1..4]);
    duplicates(split_newline_runs(text, 1), &mut out[4..7]);
    scratch.load_words(splitter, text);
    let base = REPETITION_STATS.len();
    for (k, &n) in top_n.iter().enumerate() {
        out[base + k] = scratch.top_ngram_chars(n.max(1));
    }
    for (k, &n) in dup_n.iter().enumerate() {
        out[base + top_n.len() + k] = scratch.dup_ngram_chars(n.max(1));
    }
}

/// Repetition statistics of every row, row-major (`rows x (7 + top_n + dup_n)`), in parallel.
pub fn repetition_stats(
    splitter: Splitter,
    column: &StrColumn<'_>,
    top_n: &[usize],
    dup_n: &[usize],
) -> Vec<u64> {
    let width = REPETITION_STATS.len() + top_n.len() + dup_n.len();
    let mut out = vec![0u64; column.len() * width];
    out.par_chunks_mut(ROWS_PER_TASK * width)
        .enumerate()
        .for_each_init(RepetitionScratch::default, |scratch, (chunk, out)| {
            for (j, row) in out.chunks_mut(width).enumerate() {
                repetition_row(
                    splitter,
                    column.get(chunk * ROWS_PER_TASK + j),
                    top_n,
                    dup_n,
                    scratch,
                    row,
                );
            }
        });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newline_runs_split_like_re_split() {
        // re.split(r"\n+", "\na\n\nb\n") == ['', 'a', 'b', '']
        let parts: Vec<&str> = split_newline_runs("\na\n\nb\n", 1).collect();
        assert_eq!(parts, ["", "a", "b", ""]);
        // re.split(r"\n{2,}", "a\nb\n\n\nc") == ['a\nb', 'c']
        let parts: Vec<&str> = split_newline_runs("a\nb\n\n\nc", 2).collect();
        assert_eq!(parts, ["a\nb", "c"]);
    }

    #[test]
    fn repetition_counts() {
        let text = "a b a b a b\n\nx\n\nx";
        let mut out = [0u64; 9];
        repetition_row(
            Splitter::English,
            text,
            &[2],
            &[2],
            &mut RepetitionScratch::default(),
            &mut out,
        );
        // paragraphs and lines ['a b a b a b', 'x', 'x']; the top 2-gram "a b" x3 = 9 chars;
        // concatenated 2-grams "ab" "ba" "ab"(repeat: +2, skip 2) "ab"(repeat: +2) = 4.
        assert_eq!(&out[..7], &[text.chars().count() as u64, 3, 1, 1, 3, 1, 1]);
        assert_eq!(out[7], 9);
        assert_eq!(out[8], 4);
    }

    #[test]
    fn concatenated_ngrams_repeat_across_word_boundaries() {
        // "".join(["ab", "c"]) == "".join(["a", "bc"]): datatrove counts the second as a repeat.
        let mut scratch = RepetitionScratch::default();
        scratch.load_words(Splitter::English, "ab c a bc");
        assert_eq!(scratch.dup_ngram_chars(2), 3);
    }
}
