//! Benchmark decontamination (GPT-3's rule): a document is contaminated when it shares an
//! n-gram of normalised words with an evaluation record.
//!
//! **Words** are the script-aware words of [`super::words`] (whitespace-separated pieces
//! holding a letter or number, each Han character or kana a word of its own), each
//! normalised by keeping only its letters and numbers (Unicode L* and N*; so punctuation
//! inside or around it goes: `Don't` -> `dont`, `GPT-4` -> `gpt4`) and lower-casing them one
//! character at a time (Unicode's lowercase mapping, without the context-dependent final
//! sigma).
//!
//! **The index** ([`DecontIndex`]) holds a 64-bit key per n-gram of every benchmark record
//! (the benchmark it came from as its value: the first benchmark added wins a shared
//! n-gram). A record of fewer than `n` words but at least `min_words` is indexed whole, as one
//! shorter n-gram (GPT-3 matched a record shorter than its n-gram size whole); a shorter one
//! is skipped, since one- or two-word records ("Paris", "yes") would match most documents.
//!
//! **Keys**: each normalised word is hashed (xxh3-64), an n-gram's key is the polynomial hash
//! of its word hashes (mod 2^64, computed in O(1) per position from prefix sums) mixed with
//! its length. Two different n-grams share a key with probability about 2^-64 per pair.
//!
//! **The scan** ([`DecontIndex::scan`]) streams each document's words once, looking up the
//! n-gram ending at each word (and the shorter lengths that whole short records gave), and
//! stops at the first match: the n-gram that ends first in the document (the longest of
//! those ending at the same word). Rows run in parallel.

use super::chars::is_alnum;
use super::words::for_each_word;
use super::StrColumn;
use crate::error::{Error, Result};
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use xxhash_rust::xxh3::xxh3_64;

/// The multiplier of the polynomial hash: odd, so every power of it is odd too.
const BASE: u64 = 0x9E37_79B9_7F4A_7C15;

/// Text bytes per unit of parallel work.
const RUN_BYTES: usize = 1 << 16;

/// `word` normalised into `out`: its letters and numbers, lower-cased.
fn normalize_word(word: &str, out: &mut String) {
    out.clear();
    for c in word.chars() {
        if c.is_ascii() {
            if c.is_ascii_alphanumeric() {
                out.push(c.to_ascii_lowercase());
            }
        } else if is_alnum(c) {
            out.extend(c.to_lowercase());
        }
    }
}

/// Calls `emit` with the hash of each normalised word of `text`, in order, while it returns
/// true.
fn for_each_word_hash(text: &str, buffer: &mut String, mut emit: impl FnMut(u64) -> bool) {
    let mut going = true;
    for_each_word(text, |word| {
        if going {
            normalize_word(word, buffer);
            going = emit(xxh3_64(buffer.as_bytes()));
        }
    });
}

/// The normalised words `start..start + len` of `text`, joined by single spaces.
pub fn ngram_text(text: &str, start: usize, len: usize) -> String {
    let (mut out, mut buffer, mut i) = (String::new(), String::new(), 0usize);
    for_each_word(text, |word| {
        if i >= start && i < start + len {
            normalize_word(word, &mut buffer);
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(&buffer);
        }
        i += 1;
    });
    out
}

/// splitmix64's finaliser: spreads the polynomial hash over all 64 bits.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The key of the `len` words ending before prefix position `end`: `prefix[i]` is the
/// polynomial hash of the first `i` word hashes, `power` is `BASE^len`.
#[inline]
fn window_key(prefix: &[u64], end: usize, len: usize, power: u64) -> u64 {
    let hash = prefix[end].wrapping_sub(prefix[end - len].wrapping_mul(power));
    mix(hash ^ (len as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93))
}

fn power_of(len: usize) -> u64 {
    (0..len).fold(1u64, |p, _| p.wrapping_mul(BASE))
}

/// What adding a benchmark's records did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AddCounts {
    /// Records read.
    pub records: u64,
    /// Records indexed: at least `min_words` words.
    pub usable: u64,
    /// Records of 1 to `min_words - 1` words, skipped.
    pub short: u64,
    /// Records without a word, skipped.
    pub empty: u64,
    /// Keys added (n-grams not in the index before).
    pub ngrams: u64,
}

/// A document's first match: which benchmark, and where in its normalised words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Match {
    pub benchmark: u32,
    /// Index of the n-gram's first word among the document's words.
    pub start: usize,
    /// Words in the n-gram: `n`, or fewer for a whole short record.
    pub len: usize,
}

/// The n-gram keys of every benchmark record, built once, then scanned against documents.
pub struct DecontIndex {
    n: usize,
    min_words: usize,
    keys: FxHashMap<u64, u32>,
    /// The n-gram lengths in the index, longest first, with `BASE^len`.
    lengths: Vec<(usize, u64)>,
}

impl DecontIndex {
    /// An empty index of `n`-grams; records of `min_words..n` words are indexed whole.
    pub fn new(n: usize, min_words: usize) -> Result<Self> {
        if n == 0 || min_words == 0 || min_words > n {
            return Err(Error::InvalidArgument(format!(
                "decontamination needs 1 <= min_words <= n, got n={n}, min_words={min_words}"
            )));
        }
        Ok(DecontIndex {
            n,
            min_words,
            keys: FxHashMap::default(),
            lengths: Vec::new(),
        })
    }

    /// The number of distinct keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Adds every record (row) of `column` as benchmark `benchmark`'s.
    pub fn add(&mut self, benchmark: u32, column: &StrColumn) -> AddCounts {
        let (n, min_words) = (self.n, self.min_words);
        // Keys per record in parallel, then inserted in record order.
        let per_record: Vec<(usize, Vec<u64>)> = (0..column.len())
            .into_par_iter()
            .with_min_len(16)
            .map_init(
                || (String::new(), vec![0u64]),
                |(buffer, prefix), i| {
                    prefix.truncate(1);
                    for_each_word_hash(column.get(i), buffer, |h| {
                        let last = *prefix.last().unwrap_or(&0);
                        prefix.push(last.wrapping_mul(BASE).wrapping_add(h));
                        true
                    });
                    let words = prefix.len() - 1;
                    let len = if words >= n {
                        n
                    } else if words >= min_words {
                        words
                    } else {
                        return (words, Vec::new());
                    };
                    let power = power_of(len);
                    let keys = (len..=words)
                        .map(|end| window_key(prefix, end, len, power))
                        .collect();
                    (words, keys)
                },
            )
            .collect();
        let mut counts = AddCounts::default();
        for (words, keys) in per_record {
            counts.records += 1;
            if words == 0 {
                counts.empty += 1;
                continue;
            }
            if words < min_words {
                counts.short += 1;
                continue;
            }
            counts.usable += 1;
            let len = words.min(n);
            if !self.lengths.iter().any(|&(l, _)| l == len) {
                self.lengths.push((len, power_of(len)));
                self.lengths
                    .sort_unstable_by_key(|&(len, _)| std::cmp::Reverse(len));
            }
            for key in keys {
                if let std::collections::hash_map::Entry::Vacant(slot) = self.keys.entry(key) {
                    slot.insert(benchmark);
                    counts.ngrams += 1;
                }
            }
        }
        counts
    }

    /// The first match of `text` (see the module's documentation), or None.
    pub fn first_match(
        &self,
        text: &str,
        buffer: &mut String,
        prefix: &mut Vec<u64>,
    ) -> Option<Match> {
        if self.keys.is_empty() {
            return None;
        }
        prefix.clear();
        prefix.push(0);
        let mut found = None;
        for_each_word_hash(text, buffer, |h| {
            let last = prefix[prefix.len() - 1];
            prefix.push(last.wrapping_mul(BASE).wrapping_add(h));
            let end = prefix.len() - 1;
            for &(len, power) in &self.lengths {
                if end >= len {
                    if let Some(&benchmark) = self.keys.get(&window_key(prefix, end, len, power)) {
                        found = Some(Match {
                            benchmark,
                            start: end - len,
                            len,
                        });
                        return false;
                    }
                }
            }
            true
        });
        found
    }

    /// The first match of each row of `column` (null rows read as empty text), rows in
    /// parallel.
    pub fn scan(&self, column: &StrColumn) -> Vec<Option<Match>> {
        column
            .runs(RUN_BYTES)
            .into_par_iter()
            .map_init(
                || (String::new(), Vec::new()),
                |(buffer, prefix), run| {
                    run.map(|i| self.first_match(column.get(i), buffer, prefix))
                        .collect::<Vec<_>>()
                },
            )
            .flatten()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{column_parts, Offsets};

    fn index_of(n: usize, min_words: usize, records: &[&str]) -> (DecontIndex, AddCounts) {
        let (offsets, data) = column_parts::<i64>(records);
        let column = StrColumn::new(Offsets::I64(&offsets), &data).unwrap();
        let mut index = DecontIndex::new(n, min_words).unwrap();
        let counts = index.add(0, &column);
        (index, counts)
    }

    fn first(index: &DecontIndex, text: &str) -> Option<Match> {
        index.first_match(text, &mut String::new(), &mut Vec::new())
    }

    #[test]
    fn matches_normalised_ngrams() {
        let (index, counts) = index_of(4, 2, &["The quick brown fox jumps", "a", ""]);
        assert_eq!(
            (counts.records, counts.usable, counts.short, counts.empty),
            (3, 1, 1, 1)
        );
        assert_eq!(counts.ngrams, 2);
        let hit = first(&index, "so... THE quick, brown 'fox' ran").unwrap();
        assert_eq!((hit.start, hit.len), (1, 4));
        assert_eq!(
            ngram_text("so... THE quick, brown 'fox' ran", 1, 4),
            "the quick brown fox"
        );
        assert_eq!(first(&index, "the quick brown dog jumps"), None);
    }

    #[test]
    fn short_records_match_whole_and_cjk_characters_are_words() {
        let (index, _) = index_of(13, 3, &["我是猫。", "x y"]);
        let hit = first(&index, "吾輩は猫である。我是猫").unwrap();
        assert_eq!((hit.start, hit.len), (7, 3));
        assert_eq!(first(&index, "我 是 狗"), None);
        // "x y" has 2 words, under min_words: skipped.
        assert_eq!(first(&index, "x y z"), None);
    }

    #[test]
    fn rejects_bad_sizes() {
        assert!(DecontIndex::new(0, 0).is_err());
        assert!(DecontIndex::new(5, 6).is_err());
    }
}
