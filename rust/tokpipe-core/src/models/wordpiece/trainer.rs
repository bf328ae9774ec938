//! The WordPiece trainer.
//!
//! Words are counted after the BERT normalizer and pre-tokenizer. Each word starts as its
//! characters, every one but the first spelled with the continuing-subword prefix (`##`);
//! then the best pair of adjacent symbols is merged, over and over, until the vocabulary is
//! full. Two ways to say which pair is best ([`Score`]):
//! - [`Score::Likelihood`], the original WordPiece rule (Schuster & Nakajima 2012, as the
//!   HF course writes it): the pair maximising `freq(ab) / (freq(a) · freq(b))`, the merge
//!   that raises the corpus likelihood under a unigram model the most. Ties go to the more
//!   frequent pair, then to the smaller (left id, right id).
//! - [`Score::Frequency`], what HF's `WordPieceTrainer` does (a BPE trainer with `##`
//!   prefixes): the most frequent pair, ties to the smaller (left id, right id).
//!
//! Vocabulary order: special tokens, the alphabet (the `limit_alphabet` most frequent
//! characters, by code point), the prefixed characters (by code point), then merges. HF gives
//! the prefixed characters ids in the order it meets them in a hash map, which changes from
//! run to run, so its ids (and its choice among pairs tied on frequency) are not reproducible;
//! the set of tokens is what we match.
//!
//! The merge loop keeps, per pair, its count and the words it occurs in, and a heap of
//! candidates checked lazily: an entry is re-scored when popped and pushed back if stale.
//! Under the likelihood score a merge of `a` and `b` *raises* the score of every other pair
//! holding `a` or `b` (their frequencies drop), so those pairs are pushed again; a per-symbol
//! index of pairs makes that cheap.
//!
//! (Over 500 lines: the merge loop (`learn`, about 220 lines) and the counting and vocabulary
//! around it are one algorithm; 45 lines are unit tests.)

use crate::corpus::{self, CorpusOptions, CorpusReport};
use crate::error::{Error, Result};
use crate::models::base::{Model, Trainer};
use crate::models::piece_counter::{CorpusCounts, PieceCounter};
use crate::models::wordpiece::{WordPieceModel, DEFAULT_MAX_INPUT_CHARS_PER_WORD};
use crate::normalizers::BertNormalizer;
use crate::pre_tokenizers::bert;
use rustc_hash::{FxHashMap, FxHashSet};
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::path::PathBuf;

/// Which pair of symbols is merged next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Score {
    /// `freq(ab) / (freq(a) · freq(b))`: the original WordPiece.
    Likelihood,
    /// `freq(ab)`: HF `tokenizers`' WordPieceTrainer (BPE with `##`).
    Frequency,
}

#[derive(Clone, Debug)]
pub struct WordPieceTrainerConfig {
    /// Size of the final vocabulary, special tokens and alphabet included.
    pub vocab_size: usize,
    /// A pair seen fewer times than this is never merged.
    pub min_frequency: u64,
    /// Given the first ids, in this order. Must hold `unk_token`.
    pub special_tokens: Vec<String>,
    /// Keep only this many characters (the most frequent) in the alphabet; others are dropped
    /// from the words, as in HF.
    pub limit_alphabet: Option<usize>,
    /// Characters always in the alphabet.
    pub initial_alphabet: Vec<char>,
    pub continuing_subword_prefix: String,
    pub unk_token: String,
    pub score: Score,
    /// The normalizer words are counted after (and that the trained tokenizer uses).
    pub normalizer: BertNormalizer,
    pub show_progress: bool,
}

impl Default for WordPieceTrainerConfig {
    /// HF's `BertWordPieceTokenizer.train` defaults, with the likelihood score.
    fn default() -> Self {
        WordPieceTrainerConfig {
            vocab_size: 30000,
            min_frequency: 2,
            special_tokens: ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                .map(String::from)
                .to_vec(),
            limit_alphabet: Some(1000),
            initial_alphabet: Vec::new(),
            continuing_subword_prefix: "##".into(),
            unk_token: "[UNK]".into(),
            score: Score::Likelihood,
            normalizer: BertNormalizer::default(),
            show_progress: false,
        }
    }
}

pub struct WordPieceTrainer {
    config: WordPieceTrainerConfig,
    counts: CorpusCounts,
}

/// A trained WordPiece model and its special tokens
/// ([`crate::assembly::wordpiece_tokenizer`] makes the BERT tokenizer around it).
#[derive(Clone, Debug)]
pub struct TrainedWordPiece {
    pub model: WordPieceModel,
    /// The configured special tokens and their ids (the first ones, in the configured order).
    pub specials: Vec<(String, u32)>,
    /// The normalizer words were counted after, which the tokenizer must use too.
    pub normalizer: BertNormalizer,
}

/// Counts the BERT words of one text.
fn count_words(normalizer: &BertNormalizer, text: &str, counter: &mut PieceCounter) -> Result<()> {
    let text = normalizer.normalize(text);
    bert::split(&text, &mut |word: &str| counter.add(word.as_bytes(), 1));
    Ok(())
}

impl WordPieceTrainer {
    pub fn new(config: WordPieceTrainerConfig) -> Result<Self> {
        let mut seen = FxHashSet::default();
        for special in &config.special_tokens {
            if special.is_empty() || !seen.insert(special.as_str()) {
                return Err(Error::InvalidArgument(format!(
                    "special token {special:?} is empty or given twice"
                )));
            }
        }
        if !seen.contains(config.unk_token.as_str()) {
            return Err(Error::InvalidArgument(format!(
                "the special tokens must include the unknown token {:?}",
                config.unk_token
            )));
        }
        if config.vocab_size < config.special_tokens.len() || config.vocab_size > (1 << 30) {
            return Err(Error::InvalidArgument(format!(
                "vocab_size {} cannot hold the {} special tokens (or is too large)",
                config.vocab_size,
                config.special_tokens.len()
            )));
        }
        Ok(WordPieceTrainer {
            config,
            counts: CorpusCounts::default(),
        })
    }

    fn progress_bar(&self, len: u64, template: &str) -> indicatif::ProgressBar {
        if !self.config.show_progress {
            return indicatif::ProgressBar::hidden();
        }
        let style = indicatif::ProgressStyle::with_template(template)
            .expect("progress templates are valid");
        indicatif::ProgressBar::new(len).with_style(style)
    }

    /// The vocabulary (token, id) learned from everything fed so far.
    pub fn train_vocab(&self) -> Result<Vec<(String, u32)>> {
        if self.counts.fed_bytes == 0 {
            return Err(Error::Corpus(
                "no text to train on: the corpus is empty".into(),
            ));
        }
        let words: Vec<(&str, u64)> = self
            .counts
            .counts
            .iter()
            .map(|(w, n)| (std::str::from_utf8(w).expect("words are cut from str"), n))
            .collect();
        let progress = self.progress_bar(
            self.config.vocab_size as u64,
            "{msg} [{elapsed_precise}] {wide_bar} {pos}/{len} tokens (eta {eta})",
        );
        progress.set_message("merging");
        let vocab = learn(&self.config, &words, &progress);
        progress.finish_and_clear();
        Ok(vocab)
    }
}

impl Trainer for WordPieceTrainer {
    type Trained = TrainedWordPiece;

    fn feed(&mut self, texts: &[&str]) -> Result<()> {
        let normalizer = self.config.normalizer;
        self.counts.feed(texts, &|text, counter| {
            count_words(&normalizer, text, counter)
        })
    }

    fn feed_files(&mut self, paths: &[PathBuf], opts: &CorpusOptions) -> Result<CorpusReport> {
        let total_bytes = corpus::check_paths(paths)?;
        let progress = self.progress_bar(
            total_bytes,
            "{msg} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec})",
        );
        progress.set_message("reading");
        let normalizer = self.config.normalizer;
        self.counts
            .feed_files(paths, opts, &progress, &|text, counter| {
                count_words(&normalizer, text, counter)
            })
    }

    fn train(self) -> Result<TrainedWordPiece> {
        let vocab = self.train_vocab()?;
        let c = &self.config;
        let model = WordPieceModel::new(
            vocab,
            &c.unk_token,
            &c.continuing_subword_prefix,
            DEFAULT_MAX_INPUT_CHARS_PER_WORD,
            "<trained>",
        )?;
        let specials = c
            .special_tokens
            .iter()
            .filter_map(|t| model.token_to_id(t).map(|id| (t.clone(), id)))
            .collect();
        Ok(TrainedWordPiece {
            model,
            specials,
            normalizer: c.normalizer,
        })
    }
}

/// The token table: id -> text and text -> id.
#[derive(Default)]
struct Vocab {
    tokens: Vec<String>,
    ids: FxHashMap<String, u32>,
}

impl Vocab {
    /// The id of `token`, added at the end when new.
    fn intern(&mut self, token: String) -> u32 {
        if let Some(&id) = self.ids.get(&token) {
            return id;
        }
        let id = self.tokens.len() as u32;
        self.ids.insert(token.clone(), id);
        self.tokens.push(token);
        id
    }
}

/// A candidate merge in the heap; `Ord` puts the best on top.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    pair: (u32, u32),
    count: u64,
    /// freq(left) · freq(right) when scored (1 under the frequency score).
    units: u128,
}

impl Candidate {
    fn cmp_score(&self, other: &Self) -> Ordering {
        // count / units against other.count / other.units, exactly.
        (self.count as u128 * other.units).cmp(&(other.count as u128 * self.units))
    }
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Candidate {}
impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> Ordering {
        self.cmp_score(other)
            .then(self.count.cmp(&other.count))
            .then(other.pair.cmp(&self.pair))
    }
}

fn learn(
    config: &WordPieceTrainerConfig,
    words: &[(&str, u64)],
    progress: &indicatif::ProgressBar,
) -> Vec<(String, u32)> {
    let mut vocab = Vocab::default();
    for s in &config.special_tokens {
        vocab.intern(s.clone());
    }
    // The alphabet: character frequencies, the initial alphabet always kept.
    let mut freq: FxHashMap<char, u64> = FxHashMap::default();
    for &(w, n) in words {
        for c in w.chars() {
            *freq.entry(c).or_default() += n;
        }
    }
    for &c in &config.initial_alphabet {
        freq.insert(c, u64::MAX);
    }
    let mut alphabet: Vec<(char, u64)> = freq.into_iter().collect();
    if let Some(limit) = config.limit_alphabet {
        if alphabet.len() > limit {
            // Drop the rarest; among equally rare, the larger code points.
            alphabet.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            alphabet.truncate(limit);
        }
    }
    alphabet.sort_unstable_by_key(|&(c, _)| c);
    for &(c, _) in &alphabet {
        vocab.intern(c.to_string());
    }
    let prefix = &config.continuing_subword_prefix;
    // Prefixed characters, by code point.
    let mut continuing: Vec<char> = Vec::new();
    for &(w, _) in words {
        for c in w.chars().skip(1) {
            continuing.push(c);
        }
    }
    continuing.sort_unstable();
    continuing.dedup();
    for c in continuing {
        if vocab.ids.contains_key(&c.to_string()) {
            vocab.intern(format!("{prefix}{c}"));
        }
    }
    // Words as symbol ids; characters outside the alphabet are dropped, as in HF.
    let mut symbols: Vec<Vec<u32>> = Vec::with_capacity(words.len());
    let mut counts: Vec<u64> = Vec::with_capacity(words.len());
    let mut buf = String::new();
    for &(w, n) in words {
        let mut syms = Vec::with_capacity(w.len());
        for (i, c) in w.chars().enumerate() {
            buf.clear();
            buf.push(c);
            if !vocab.ids.contains_key(buf.as_str()) {
                continue;
            }
            if i > 0 {
                buf.insert_str(0, prefix);
            }
            syms.push(vocab.ids[buf.as_str()]);
        }
        symbols.push(syms);
        counts.push(n);
    }
    progress.set_position(vocab.tokens.len() as u64);

    let likelihood = config.score == Score::Likelihood;
    // Symbol frequencies (the likelihood's unit counts).
    let mut unit: Vec<u64> = vec![0; vocab.tokens.len()];
    let mut pair_count: FxHashMap<(u32, u32), u64> = FxHashMap::default();
    let mut pair_words: FxHashMap<(u32, u32), Vec<u32>> = FxHashMap::default();
    // Per symbol, the pairs it was ever part of (stale ones are skipped when used).
    let mut pairs_of: Vec<Vec<(u32, u32)>> = vec![Vec::new(); vocab.tokens.len()];
    for (wi, (syms, &n)) in symbols.iter().zip(&counts).enumerate() {
        for &s in syms {
            unit[s as usize] += n;
        }
        for p in syms.windows(2) {
            let pair = (p[0], p[1]);
            let c = pair_count.entry(pair).or_default();
            if *c == 0 && likelihood {
                pairs_of[p[0] as usize].push(pair);
                if p[1] != p[0] {
                    pairs_of[p[1] as usize].push(pair);
                }
            }
            *c += n;
            let ws = pair_words.entry(pair).or_default();
            if ws.last() != Some(&(wi as u32)) {
                ws.push(wi as u32);
            }
        }
    }
    let candidate = |pair: (u32, u32), count: u64, unit: &[u64]| Candidate {
        pair,
        count,
        units: if likelihood {
            unit[pair.0 as usize] as u128 * unit[pair.1 as usize] as u128
        } else {
            1
        },
    };
    let mut heap: BinaryHeap<Candidate> = pair_count
        .iter()
        .filter(|&(_, &c)| c >= config.min_frequency.max(1))
        .map(|(&pair, &c)| candidate(pair, c, &unit))
        .collect();

    while vocab.tokens.len() < config.vocab_size {
        let Some(top) = heap.pop() else { break };
        let count = pair_count.get(&top.pair).copied().unwrap_or(0);
        if count < config.min_frequency.max(1) {
            continue;
        }
        let current = candidate(top.pair, count, &unit);
        if current.count != top.count || current.units != top.units {
            heap.push(current);
            continue;
        }
        let (a, b) = top.pair;
        let right = &vocab.tokens[b as usize];
        let joined = format!(
            "{}{}",
            vocab.tokens[a as usize],
            right.strip_prefix(prefix.as_str()).unwrap_or(right)
        );
        let new = vocab.intern(joined);
        if unit.len() < vocab.tokens.len() {
            unit.resize(vocab.tokens.len(), 0);
            pairs_of.resize(vocab.tokens.len(), Vec::new());
        }
        // Re-count the pairs of every word holding (a, b).
        let mut delta: FxHashMap<(u32, u32), i64> = FxHashMap::default();
        for wi in pair_words.remove(&top.pair).unwrap_or_default() {
            let syms = &mut symbols[wi as usize];
            let n = counts[wi as usize] as i64;
            if !syms.windows(2).any(|p| (p[0], p[1]) == (a, b)) {
                continue;
            }
            for p in syms.windows(2) {
                *delta.entry((p[0], p[1])).or_default() -= n;
            }
            let mut out = Vec::with_capacity(syms.len());
            let mut i = 0;
            while i < syms.len() {
                if i + 1 < syms.len() && syms[i] == a && syms[i + 1] == b {
                    out.push(new);
                    unit[a as usize] -= n as u64;
                    unit[b as usize] -= n as u64;
                    unit[new as usize] += n as u64;
                    i += 2;
                } else {
                    out.push(syms[i]);
                    i += 1;
                }
            }
            *syms = out;
            for p in syms.windows(2) {
                let pair = (p[0], p[1]);
                *delta.entry(pair).or_default() += n;
                if pair.0 == new || pair.1 == new {
                    let ws = pair_words.entry(pair).or_default();
                    if ws.last() != Some(&wi) {
                        ws.push(wi);
                    }
                }
            }
        }
        let mut touched: Vec<(u32, u32)> = Vec::new();
        for (pair, d) in delta {
            if d == 0 {
                continue;
            }
            let c = pair_count.entry(pair).or_default();
            let was = *c;
            *c = (*c as i64 + d) as u64;
            if was == 0 && *c > 0 && likelihood {
                pairs_of[pair.0 as usize].push(pair);
                if pair.1 != pair.0 {
                    pairs_of[pair.1 as usize].push(pair);
                }
            }
            if d > 0 {
                touched.push(pair);
            }
        }
        pair_count.remove(&top.pair);
        if likelihood {
            // Every pair holding a or b scores higher now.
            for s in [a, b] {
                let list = std::mem::take(&mut pairs_of[s as usize]);
                let live: Vec<(u32, u32)> = list
                    .into_iter()
                    .filter(|p| pair_count.get(p).is_some_and(|&c| c > 0))
                    .collect();
                touched.extend_from_slice(&live);
                pairs_of[s as usize] = live;
            }
        }
        touched.sort_unstable();
        touched.dedup();
        for pair in touched {
            let c = pair_count[&pair];
            if c >= config.min_frequency.max(1) {
                heap.push(candidate(pair, c, &unit));
            }
        }
        progress.set_position(vocab.tokens.len() as u64);
    }
    vocab
        .tokens
        .into_iter()
        .enumerate()
        .map(|(id, t)| (t, id as u32))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn likelihood_prefers_pairs_of_rare_symbols() {
        // "ab" is frequent but a and b are everywhere; "xy" is rarer but x and y only ever
        // meet each other, so the likelihood score merges "x ##y" first.
        let config = WordPieceTrainerConfig {
            vocab_size: 0,
            min_frequency: 1,
            special_tokens: vec!["[UNK]".into()],
            ..Default::default()
        };
        let words = [("ab", 20), ("ba", 10), ("aab", 10), ("xy", 3)];
        let base = learn(
            &WordPieceTrainerConfig {
                vocab_size: 0,
                ..config.clone()
            },
            &words,
            &indicatif::ProgressBar::hidden(),
        )
        .len();
        let vocab = learn(
            &WordPieceTrainerConfig {
                vocab_size: base + 1,
                ..config.clone()
            },
            &words,
            &indicatif::ProgressBar::hidden(),
        );
        assert_eq!(vocab.last().unwrap().0, "xy");
        let vocab = learn(
            &WordPieceTrainerConfig {
                vocab_size: base + 1,
                score: Score::Frequency,
                ..config
            },
            &words,
            &indicatif::ProgressBar::hidden(),
        );
        assert_eq!(vocab.last().unwrap().0, "ab");
    }
}
