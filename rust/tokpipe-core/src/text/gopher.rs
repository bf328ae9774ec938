//! Per-document statistics behind the Gopher rules (Rae et al. 2021, table A1), computed the
//! way datatrove's `GopherQualityFilter` and `GopherRepetitionFilter` compute them, so that
//! Python only compares them with the thresholds. Every row gets every statistic (no early
//! exit), which also makes them usable as features. Lengths are in code points, as Python's
//! `len` counts them; words are the language's [`Splitter`]'s.
//!
//! The repetition rules look up every word n-gram for nine sizes, so n-grams are never built
//! as strings: each is a range of one buffer of the words (joined by spaces for the top
//! n-grams, by nothing for the duplicated ones, as datatrove joins them) with a polynomial
//! hash of its bytes that costs O(1) from per-word prefix hashes. Each pass first marks the
//! hashes seen more than once in two small bitmaps ([`RepeatFilter`]); an n-gram whose hash
//! occurs once occurs once, so only the others go into the table ([`NgramTable`], open
//! addressing), where a hash match is compared byte for byte: a collision cannot change a
//! count. The buffers and tables are reused from document to document.
//!
//! (Over 500 lines: a third is tests, which check the n-gram counts against datatrove's
//! definitions written on strings, with and without forced hash collisions.)

use super::chars::is_py_alpha;
use super::lines::{char_len, is_py_space, py_splitlines};
use super::words::Splitter;
use super::StrColumn;
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

/// Polynomial hashing modulo the Mersenne prime 2^61 - 1. An n-gram's hash is the hash of
/// its bytes, so n-grams with equal bytes hash alike however their words cut them.
const MODULUS: u64 = (1 << 61) - 1;
const BASE: u64 = 0x1f3d_5b79_a2c4_e601 % MODULUS;

/// BASE^2, to hash two bytes per step.
const BASE2: u64 = mul_mod(BASE, BASE);

#[inline]
const fn mul_mod(a: u64, b: u64) -> u64 {
    let p = a as u128 * b as u128;
    let r = (p as u64 & MODULUS) + (p >> 61) as u64;
    if r >= MODULUS {
        r - MODULUS
    } else {
        r
    }
}

#[inline]
fn add_mod(a: u64, b: u64) -> u64 {
    let s = a + b;
    if s >= MODULUS {
        s - MODULUS
    } else {
        s
    }
}

/// A document's words, one after the other (`concat`) and each followed by a space
/// (`joined`), with prefix sums and prefix hashes over the word sequence, so that any
/// n-gram's length and the hash of its bytes cost O(1), and its bytes are one slice.
struct Words {
    concat: Vec<u8>,
    joined: Vec<u8>,
    chars: Vec<usize>, // code points in words 0..i
    bytes: Vec<usize>, // bytes in words 0..i (in `joined`, add i)
    hashes: Vec<u64>,  // hash of `concat` up to word i
    spaced: Vec<u64>,  // hash of `joined` up to word i
    longest: usize,    // the longest word's bytes
    powers: Vec<u64>,  // BASE^k
    hash_mask: u64,    // all ones; narrowed by tests to force collisions
}

impl Default for Words {
    fn default() -> Self {
        Words {
            concat: Vec::new(),
            joined: Vec::new(),
            chars: Vec::new(),
            bytes: Vec::new(),
            hashes: Vec::new(),
            spaced: Vec::new(),
            longest: 0,
            powers: vec![1],
            hash_mask: u64::MAX,
        }
    }
}

impl Words {
    fn load(&mut self, splitter: Splitter, text: &str) {
        self.clear();
        splitter.for_each_word(text, |word| self.push(word));
    }

    fn clear(&mut self) {
        self.concat.clear();
        self.joined.clear();
        for prefix in [&mut self.chars, &mut self.bytes] {
            prefix.clear();
            prefix.push(0);
        }
        for prefix in [&mut self.hashes, &mut self.spaced] {
            prefix.clear();
            prefix.push(0);
        }
        self.longest = 0;
    }

    fn push(&mut self, word: &str) {
        let last = self.len();
        let chars = self.chars[last] + char_len(word);
        let word = word.as_bytes();
        let len = word.len();
        self.grow_powers(len + 2);
        // h = h * BASE + byte + 1 for each byte, two bytes a step (a shorter chain of
        // multiplications).
        let mut h = 0u64;
        let mut pairs = word.chunks_exact(2);
        for pair in &mut pairs {
            let two = add_mod(
                mul_mod(u64::from(pair[0]) + 1, BASE),
                u64::from(pair[1]) + 1,
            );
            h = add_mod(mul_mod(h, BASE2), two);
        }
        if let [last] = pairs.remainder() {
            h = add_mod(mul_mod(h, BASE), u64::from(*last) + 1);
        }
        let spaced_h = add_mod(mul_mod(h, BASE), u64::from(b' ') + 1);
        self.longest = self.longest.max(len);
        self.chars.push(chars);
        self.bytes.push(self.bytes[last] + len);
        self.hashes
            .push(add_mod(mul_mod(self.hashes[last], self.powers[len]), h));
        self.spaced.push(add_mod(
            mul_mod(self.spaced[last], self.powers[len + 1]),
            spaced_h,
        ));
        self.concat.extend_from_slice(word);
        self.joined.extend_from_slice(word);
        self.joined.push(b' ');
    }

    fn len(&self) -> usize {
        self.chars.len() - 1
    }

    fn grow_powers(&mut self, len: usize) {
        while self.powers.len() < len {
            let next = mul_mod(*self.powers.last().expect("BASE^0"), BASE);
            self.powers.push(next);
        }
    }

    /// Makes sure `powers` covers every n-gram of `n` words (at most `n` longest words and
    /// their spaces, and never more than the whole text).
    fn cover_ngrams(&mut self, n: usize) {
        let words = self.len();
        self.grow_powers(
            n.saturating_mul(self.longest + 1)
                .min(self.bytes[words] + words)
                + 1,
        );
    }

    /// The hash of the bytes of every run of `n` words, joined by nothing or each followed
    /// by a space, spread over all 64 bits, into `out`.
    fn ngram_hashes(&self, n: usize, spaced: bool, out: &mut Vec<u64>) {
        let (prefix, extra) = if spaced {
            (&self.spaced, n)
        } else {
            (&self.hashes, 0)
        };
        let (powers, mask) = (&self.powers[..], self.hash_mask);
        out.clear();
        out.extend(
            prefix[n..]
                .iter()
                .zip(prefix)
                .zip(self.bytes[n..].iter().zip(&self.bytes))
                .map(|((&to, &from), (&end, &start))| {
                    let h = to + MODULUS - mul_mod(from, powers[end - start + extra]);
                    let h = if h >= MODULUS { h - MODULUS } else { h };
                    (h & mask).wrapping_mul(0x9e37_79b9_7f4a_7c15)
                }),
        );
    }

    /// Whether the n-grams at words `a` and `b` have the same bytes (joined by nothing, or
    /// each word followed by a space).
    #[inline]
    fn same_ngram(&self, a: usize, b: usize, n: usize, spaced: bool) -> bool {
        let span = |i: usize| {
            if spaced {
                &self.joined[self.bytes[i] + i..self.bytes[i + n] + i + n]
            } else {
                &self.concat[self.bytes[i]..self.bytes[i + n]]
            }
        };
        span(a) == span(b)
    }
}

/// A slot of [`NgramTable`]: the n-gram at word `first` (and its count so far), valid in the
/// pass whose stamp it carries.
#[derive(Clone, Copy, Default)]
struct Slot {
    tag: u32, // the low bits of the hash
    first: u32,
    count: u32,
    stamp: u32,
}

/// An open-addressing set of n-grams (linear probing, at most half full) that a new pass
/// empties by changing its stamp instead of clearing its memory. Its entries point at words;
/// equality is [`Words::same_ngram`].
#[derive(Default)]
struct NgramTable {
    slots: Vec<Slot>,
    shift: u32,
    stamp: u32,
}

impl NgramTable {
    /// Empties the table for up to `entries` n-grams.
    fn reset(&mut self, entries: usize) {
        let capacity = (2 * entries).next_power_of_two().max(16);
        if capacity > self.slots.len() {
            self.slots.clear();
            self.slots.resize(capacity, Slot::default());
            self.stamp = 0;
        }
        self.shift = 64 - capacity.trailing_zeros();
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.slots.fill(Slot::default());
            self.stamp = 1;
        }
    }

    /// The slot of the n-gram with `hash` for which `same(first)` holds, and true; or a new
    /// slot for the n-gram at `at` (count 0), and false.
    #[inline]
    fn find_or_insert(
        &mut self,
        hash: u64,
        at: usize,
        same: impl Fn(usize) -> bool,
    ) -> (&mut Slot, bool) {
        let mask = (1usize << (64 - self.shift)) - 1;
        let tag = hash as u32;
        let mut i = (hash >> self.shift) as usize;
        loop {
            let slot = self.slots[i];
            if slot.stamp != self.stamp {
                self.slots[i] = Slot {
                    tag,
                    first: at as u32,
                    count: 0,
                    stamp: self.stamp,
                };
                return (&mut self.slots[i], false);
            }
            if slot.tag == tag && same(slot.first as usize) {
                return (&mut self.slots[i], true);
            }
            i = (i + 1) & mask;
        }
    }
}

/// Which n-gram hashes occur more than once in a pass: two bitmaps (seen, seen twice) of at
/// least 16 bits per n-gram. An n-gram whose hash's bit was not seen twice occurs once in the
/// document (equal bytes hash alike), so it can never be found again and a pass can leave
/// it out of the table; a repeated n-gram always passes. A few unique ones pass too (bits
/// shared by chance) and are then handled exactly like the rest.
#[derive(Default)]
struct RepeatFilter {
    seen: Vec<u64>,
    twice: Vec<u64>,
    mask: usize,
}

impl RepeatFilter {
    fn build(&mut self, hashes: &[u64]) {
        let bits = (hashes.len() * 16).next_power_of_two().max(64);
        for map in [&mut self.seen, &mut self.twice] {
            map.clear();
            map.resize(bits / 64, 0);
        }
        self.mask = bits - 1;
        for &hash in hashes {
            let (word, bit) = self.bit(hash);
            self.twice[word] |= self.seen[word] & bit;
            self.seen[word] |= bit;
        }
    }

    #[inline]
    fn bit(&self, hash: u64) -> (usize, u64) {
        let b = hash as usize & self.mask;
        (b >> 6, 1 << (b & 63))
    }

    /// False only for an n-gram that occurs once.
    #[inline]
    fn may_repeat(&self, hash: u64) -> bool {
        let (word, bit) = self.bit(hash);
        self.twice[word] & bit != 0
    }
}

/// Reused from document to document by one worker.
#[derive(Default)]
pub struct RepetitionScratch {
    words: Words,
    hashes: Vec<u64>,     // the current pass' n-gram hashes
    candidates: Vec<u32>, // the n-grams that may repeat
    filter: RepeatFilter,
    table: NgramTable,
}

impl RepetitionScratch {
    fn load_words(&mut self, splitter: Splitter, text: &str) {
        self.words.load(splitter, text);
    }

    /// Hashes the `n`-grams (each word followed by a space or not) and finds those that may
    /// repeat.
    fn prepare_pass(&mut self, n: usize, spaced: bool) {
        self.words.cover_ngrams(n);
        self.words.ngram_hashes(n, spaced, &mut self.hashes);
        self.filter.build(&self.hashes);
        // Without a branch per n-gram: most are unique, but not predictably so.
        let filter = &self.filter;
        self.candidates.resize(self.hashes.len(), 0);
        let mut kept = 0;
        for (i, &hash) in self.hashes.iter().enumerate() {
            self.candidates[kept] = i as u32;
            kept += usize::from(filter.may_repeat(hash));
        }
        self.candidates.truncate(kept);
    }

    /// Datatrove's `find_top_duplicate` over the `n`-grams of words joined by spaces: the
    /// length of the most frequent n-gram (the first seen among equally frequent ones) times
    /// its count. 0 when there are fewer than `n` words.
    fn top_ngram_chars(&mut self, n: usize) -> u64 {
        if self.words.len() < n {
            return 0;
        }
        self.prepare_pass(n, true);
        let (words, table) = (&self.words, &mut self.table);
        table.reset(self.candidates.len());
        // The first n-gram occurs at least once; the n-grams the filter leaves out occur
        // once and later, so only a repeated one can beat it.
        let mut best = (1u32, 0u32);
        for &i in &self.candidates {
            let i = i as usize;
            let (slot, _) = table.find_or_insert(self.hashes[i], i, |first| {
                words.same_ngram(first, i, n, true)
            });
            slot.count += 1;
            if slot.count > best.0 || (slot.count == best.0 && slot.first < best.1) {
                best = (slot.count, slot.first);
            }
        }
        let (count, first) = (u64::from(best.0), best.1 as usize);
        (words.chars[first + n] - words.chars[first] + n - 1) as u64 * count
    }

    /// Datatrove's `find_all_duplicate`: n-grams of words joined with nothing between them,
    /// scanned left to right; a repeat adds its length and skips past itself.
    fn dup_ngram_chars(&mut self, n: usize) -> u64 {
        if self.words.len() < n {
            return 0;
        }
        self.prepare_pass(n, false);
        let (words, table) = (&self.words, &mut self.table);
        table.reset(self.candidates.len());
        let (mut repeated, mut i) = (0usize, 0usize);
        // An n-gram that occurs once is never found, and no later n-gram can find it.
        let mut next = self.candidates.iter().map(|&c| c as usize).peekable();
        while let Some(&c) = next.peek() {
            if c < i {
                next.next();
                continue;
            }
            i = c;
            let (_, found) = table.find_or_insert(self.hashes[i], i, |first| {
                words.same_ngram(first, i, n, false)
            });
            if found {
                repeated += words.chars[i + n] - words.chars[i];
                i += n;
            } else {
                i += 1;
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

    /// datatrove's `find_top_duplicate(get_n_grams(words, n))`, on strings.
    fn top_reference(words: &[&str], n: usize) -> u64 {
        if words.len() < n {
            return 0;
        }
        let mut order: Vec<String> = Vec::new();
        let mut counts: std::collections::HashMap<String, u64> = Default::default();
        for gram in words.windows(n).map(|w| w.join(" ")) {
            let count = counts.entry(gram.clone()).or_insert(0);
            if *count == 0 {
                order.push(gram);
            }
            *count += 1;
        }
        // Counter.most_common(1): the highest count, the first inserted among equals.
        let best = order.iter().fold(
            &order[0],
            |best, g| if counts[g] > counts[best] { g } else { best },
        );
        best.chars().count() as u64 * counts[best]
    }

    /// datatrove's `find_all_duplicate(words, n)`, on strings.
    fn dup_reference(words: &[&str], n: usize) -> u64 {
        let mut seen = std::collections::HashSet::new();
        let (mut repeated, mut i) = (0, 0);
        while i + n <= words.len() {
            let gram = words[i..i + n].concat();
            if seen.contains(&gram) {
                repeated += gram.chars().count() as u64;
                i += n;
            } else {
                seen.insert(gram);
                i += 1;
            }
        }
        repeated
    }

    /// Word lists with many repeats: words from a small set that holds prefixes of each other
    /// ("a" "ab" "b" "bc": equal bytes across different word boundaries), non-ASCII words
    /// and a word with a space (no splitter makes one, but the joined n-grams must still
    /// compare by their bytes).
    fn word_lists() -> Vec<Vec<&'static str>> {
        let vocab = [
            "a", "ab", "b", "bc", "c", "abc", "é", "éa", "日本", "日", "本", "x y", "x", "y",
        ];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut lists = vec![
            vec![],
            vec!["a"],
            vec!["ab", "c", "a", "bc"],
            vec!["x y", "x", "y", "x y"],
        ];
        for round in 0..300 {
            let (len, spread) = (1 + round % 40, 2 + round % (vocab.len() - 1));
            lists.push(
                (0..len)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        vocab[(state % spread as u64) as usize]
                    })
                    .collect(),
            );
        }
        lists
    }

    fn check_against_reference(hash_mask: u64) {
        let mut scratch = RepetitionScratch::default();
        scratch.words.hash_mask = hash_mask;
        for words in word_lists() {
            scratch.words.clear();
            for word in &words {
                scratch.words.push(word);
            }
            for n in 1..=6 {
                assert_eq!(
                    scratch.top_ngram_chars(n),
                    top_reference(&words, n),
                    "top {n} of {words:?}"
                );
                assert_eq!(
                    scratch.dup_ngram_chars(n),
                    dup_reference(&words, n),
                    "dup {n} of {words:?}"
                );
            }
        }
    }

    #[test]
    fn ngram_counts_equal_datatrove_definitions() {
        check_against_reference(u64::MAX);
    }

    #[test]
    fn ngram_counts_survive_hash_collisions() {
        // Four hash values in all: nearly every pair of n-grams collides, so the repeat
        // filter lets every n-gram through and the table tells them apart by their bytes.
        check_against_reference(0b11);
    }
}
