//! Seed pieces: every character of the alphabet, and the substrings of the words that occur
//! at least twice in the corpus, the `seed_size` best by occurrences × length.
//!
//! sentencepiece builds an enhanced suffix array (esaxx) of the whole corpus and reads the
//! repeated substrings off its internal nodes. We keep only the distinct words with their
//! counts, so the suffix array is over the distinct words and a substring's occurrences are the
//! summed counts of the suffixes under its node, which is the corpus frequency sentencepiece
//! sees (pieces never cross a word, so nothing across words is lost):
//!
//! - The words are laid end to end as character ids + 1, each followed by a 0 separator, and
//!   libsais builds the suffix array and the LCP array.
//! - Each LCP value is cut at the end of the word it starts in. The separators are then as if
//!   distinct, and the LCP intervals are the internal nodes of the generalized suffix tree of the
//!   words: the substrings that occur in two places with different continuations (the end of a
//!   word counts as a continuation of its own). One bottom-up pass over the LCP array visits them
//!   and sums the counts under each.
//! - A suffix of a word that is no internal node still occurs as often as its word; when that is
//!   at least twice it is a candidate too (sentencepiece, seeing the corpus, finds it as a node).
//!
//! Candidates are filtered by the piece rule ([`Alphabet::is_valid_piece`]) and the best kept in
//! a bounded buffer; ties go to the smaller string, so the seeds do not depend on the order of
//! the words or the thread count.

use super::em::PieceSet;
use super::words::{Alphabet, PieceRules, Words};
use crate::error::{Error, Result};
use libsais::SuffixArrayConstruction;
use std::cmp::Ordering;

/// A candidate substring: `len` characters at `start` of `Words::chars`, and its score.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    score: u64,
    start: u32,
    len: u32,
}

/// The seed pieces with their initial log-probabilities: characters first (by falling
/// frequency), then substrings (by falling score).
pub(crate) fn seed_pieces(
    words: &Words,
    alphabet: &Alphabet,
    rules: &PieceRules,
    seed_size: usize,
) -> Result<PieceSet> {
    let mut char_counts = vec![0u64; alphabet.len() + 1];
    for w in 0..words.len() {
        for &c in words.word(w) {
            char_counts[c as usize] += words.counts[w];
        }
    }
    let substrings = frequent_substrings(words, alphabet, rules, seed_size)?;

    let mut seeds = PieceSet::default();
    let mut raw_scores = Vec::with_capacity(alphabet.len() + substrings.len());
    for (c, &n) in char_counts[..alphabet.len()].iter().enumerate() {
        if n > 0 {
            seeds.push(&[c as u32], 0.0);
            raw_scores.push(n as f64);
        }
    }
    for cand in &substrings {
        seeds.push(candidate_chars(words, cand), 0.0);
        raw_scores.push(cand.score as f64);
    }
    let log_sum = raw_scores.iter().sum::<f64>().ln();
    for (score, raw) in seeds.scores.iter_mut().zip(raw_scores) {
        *score = raw.ln() - log_sum;
    }
    Ok(seeds)
}

fn candidate_chars<'a>(words: &'a Words, cand: &Candidate) -> &'a [u32] {
    &words.chars[cand.start as usize..(cand.start + cand.len) as usize]
}

/// The best `seed_size` valid substrings of 2 or more characters occurring at least twice,
/// best first.
fn frequent_substrings(
    words: &Words,
    alphabet: &Alphabet,
    rules: &PieceRules,
    seed_size: usize,
) -> Result<Vec<Candidate>> {
    let n = words.chars.len() + words.len();
    if n >= i32::MAX as usize {
        return Err(Error::InvalidArgument(format!(
            "the distinct words hold {n} characters, more than the suffix array takes (2^31)"
        )));
    }
    // The text: character id + 1, and 0 after every word; `word_of[p]` is the word holding
    // (or ended by) position p.
    let mut text: Vec<i32> = Vec::with_capacity(n);
    let mut word_of: Vec<u32> = Vec::with_capacity(n);
    for w in 0..words.len() {
        text.extend(words.word(w).iter().map(|&c| c as i32 + 1));
        text.push(0);
        word_of.resize(text.len(), w as u32);
    }
    // Characters to the end of the word from text position p (0 at a separator).
    let to_word_end = |p: usize| -> u32 {
        let w = word_of[p] as usize;
        (words.starts[w + 1] as usize + w - p) as u32
    };
    // Where text position p is in `Words::chars`.
    let char_index = |p: usize| -> u32 { (p - word_of[p] as usize) as u32 };

    let sais_error = |e: libsais::LibsaisError| {
        Error::InvalidArgument(format!("suffix array construction failed: {e:?}"))
    };
    let suffixes = SuffixArrayConstruction::for_text_mut(&mut text)
        .in_owned_buffer32()
        .single_threaded()
        .run()
        .map_err(sais_error)?
        .plcp_construction()
        .single_threaded()
        .run()
        .map_err(sais_error)?
        .lcp_construction()
        .single_threaded()
        .run()
        .map_err(sais_error)?;
    let (sa, lcp) = (suffixes.suffix_array(), suffixes.lcp());
    // LCP of suffixes i - 1 and i, cut at the end of the word (the two suffixes end their words
    // at the same offset whenever the raw value goes past one of them).
    let capped = |i: usize| -> u32 {
        if i == 0 || i >= n {
            0
        } else {
            (lcp[i] as u32).min(to_word_end(sa[i] as usize))
        }
    };

    let mut best = BoundedBest::new(seed_size, words);
    let mut consider = |start: usize, len: u32, occurrences: u64| {
        if len < 2 || len as usize > rules.max_piece_length {
            return;
        }
        let start = char_index(start);
        let chars = &words.chars[start as usize..(start + len) as usize];
        if alphabet.is_valid_piece(chars, rules) {
            best.push(Candidate {
                score: occurrences * len as u64,
                start,
                len,
            });
        }
    };

    // Bottom-up traversal of the LCP intervals: (depth, left bound, summed counts).
    let mut stack: Vec<(u32, usize, u64)> = vec![(0, 0, 0)];
    for i in 1..=n {
        let leaf = sa[i - 1] as usize;
        let leaf_len = to_word_end(leaf);
        let leaf_count = if leaf_len > 0 {
            words.counts[word_of[leaf] as usize]
        } else {
            0
        };
        let depth = capped(i);
        // A whole suffix of a repeated word that no other suffix extends.
        if leaf_count >= 2 && depth.max(capped(i - 1)) < leaf_len {
            consider(leaf, leaf_len, leaf_count);
        }
        let top = stack.last_mut().expect("the root stays");
        if depth > top.0 {
            stack.push((depth, i - 1, leaf_count));
            continue;
        }
        top.2 += leaf_count;
        let mut left = i - 1;
        let mut carried = 0;
        while depth < stack.last().expect("the root stays").0 {
            let (node_depth, node_left, node_count) = stack.pop().expect("checked");
            consider(sa[node_left] as usize, node_depth, node_count);
            left = node_left;
            let parent = stack.last_mut().expect("the root stays");
            if parent.0 >= depth {
                parent.2 += node_count;
            } else {
                carried = node_count;
            }
        }
        if depth > stack.last().expect("the root stays").0 {
            stack.push((depth, left, carried));
        }
    }
    Ok(best.into_sorted())
}

/// Keeps the best `size` candidates seen: collects, and cuts back to `size` whenever twice as
/// many have come.
struct BoundedBest<'a> {
    size: usize,
    words: &'a Words,
    items: Vec<Candidate>,
}

impl<'a> BoundedBest<'a> {
    fn new(size: usize, words: &'a Words) -> Self {
        BoundedBest {
            size,
            words,
            items: Vec::new(),
        }
    }

    fn order(words: &Words, a: &Candidate, b: &Candidate) -> Ordering {
        b.score
            .cmp(&a.score)
            .then_with(|| candidate_chars(words, a).cmp(candidate_chars(words, b)))
    }

    fn push(&mut self, cand: Candidate) {
        self.items.push(cand);
        if self.items.len() >= 2 * self.size.max(1 << 16) {
            self.cut();
        }
    }

    fn cut(&mut self) {
        if self.items.len() > self.size {
            let words = self.words;
            self.items
                .select_nth_unstable_by(self.size, |a, b| Self::order(words, a, b));
            self.items.truncate(self.size);
        }
    }

    fn into_sorted(mut self) -> Vec<Candidate> {
        self.cut();
        let words = self.words;
        self.items.sort_unstable_by(|a, b| Self::order(words, a, b));
        self.items
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustc_hash::FxHashMap;

    /// Words from strings; the alphabet holds every character.
    fn setup(list: &[(&str, u64)]) -> (Words, Alphabet) {
        let mut counts: FxHashMap<char, u64> = FxHashMap::default();
        for (w, n) in list {
            for c in w.chars() {
                *counts.entry(c).or_default() += n;
            }
        }
        let alphabet = Alphabet::new(&super::super::words::required_chars(&counts, 1.0));
        let mut words = Words {
            starts: vec![0],
            ..Default::default()
        };
        for (w, n) in list {
            words.chars.extend(w.chars().map(|c| alphabet.id(c)));
            words.starts.push(words.chars.len() as u32);
            words.counts.push(*n);
        }
        (words, alphabet)
    }

    /// The definition, by brute force over the distinct words: a substring occurring at two or
    /// more places with two or more continuations (each word end its own), or a substring
    /// found at one place only, ending a word whose count is at least 2.
    fn brute_force(
        list: &[(&str, u64)],
        rules: &PieceRules,
        alphabet: &Alphabet,
    ) -> Vec<(String, u64)> {
        #[derive(Default)]
        struct Seen {
            places: usize,
            freq: u64,
            next: std::collections::BTreeSet<char>,
            word_ends: usize,
        }
        let mut seen: FxHashMap<Vec<char>, Seen> = FxHashMap::default();
        for (w, n) in list {
            let chars: Vec<char> = w.chars().collect();
            for i in 0..chars.len() {
                for j in i + 1..=chars.len() {
                    let e = seen.entry(chars[i..j].to_vec()).or_default();
                    e.places += 1;
                    e.freq += n;
                    match chars.get(j) {
                        Some(&c) => {
                            e.next.insert(c);
                        }
                        None => e.word_ends += 1,
                    }
                }
            }
        }
        let mut out: Vec<(String, u64)> = seen
            .into_iter()
            .filter(|(s, e)| {
                let ids: Vec<u32> = s.iter().map(|&c| alphabet.id(c)).collect();
                let node = e.places >= 2 && e.next.len() + e.word_ends >= 2;
                let leaf = e.places == 1 && e.word_ends == 1 && e.freq >= 2;
                s.len() >= 2 && (node || leaf) && alphabet.is_valid_piece(&ids, rules)
            })
            .map(|(s, e)| (s.iter().collect::<String>(), e.freq * s.len() as u64))
            .collect();
        // Ties by the strings as character ids (ranks), as the trainer orders them.
        let ids = |s: &str| s.chars().map(|c| alphabet.id(c)).collect::<Vec<u32>>();
        out.sort_by(|a, b| b.1.cmp(&a.1).then(ids(&a.0).cmp(&ids(&b.0))));
        out
    }

    #[test]
    fn substrings_match_the_definition() {
        let rules = PieceRules {
            max_piece_length: 16,
            split_by_whitespace: true,
            split_by_unicode_script: true,
            split_by_number: true,
            split_digits: false,
        };
        let lists: Vec<Vec<(&str, u64)>> = vec![
            vec![("▁banana", 3), ("▁bandana", 1), ("▁an", 5), ("ana", 1)],
            vec![
                ("▁hello", 1),
                ("▁help", 1),
                ("▁yellow", 2),
                ("low", 1),
                ("▁l", 1),
            ],
            vec![("▁abcabcabc", 1), ("▁abc", 2), ("bca", 1)],
            vec![("▁unique", 1)],
        ];
        for list in lists {
            let (words, alphabet) = setup(&list);
            let got: Vec<(String, u64)> = frequent_substrings(&words, &alphabet, &rules, 1000)
                .unwrap()
                .iter()
                .map(|c| (alphabet.spell(candidate_chars(&words, c)), c.score))
                .collect();
            assert_eq!(got, brute_force(&list, &rules, &alphabet), "{list:?}");
        }
    }

    #[test]
    fn keeps_the_best_and_breaks_ties_by_string() {
        let rules = PieceRules {
            max_piece_length: 16,
            split_by_whitespace: true,
            split_by_unicode_script: true,
            split_by_number: true,
            split_digits: false,
        };
        let list = [("▁xy", 4), ("▁ab", 4), ("▁cd", 2)];
        let (words, alphabet) = setup(&list);
        let got: Vec<String> = frequent_substrings(&words, &alphabet, &rules, 3)
            .unwrap()
            .iter()
            .map(|c| alphabet.spell(candidate_chars(&words, c)))
            .collect();
        assert_eq!(got, vec!["▁ab", "▁xy", "ab"]);
    }
}
