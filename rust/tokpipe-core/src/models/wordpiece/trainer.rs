//! The WordPiece trainer.
//!
//! Words are counted after the BERT normalizer and pre-tokenizer. Each word starts as its
//! characters, every one but the first spelled with the continuing-subword prefix (`##`);
//! then the best pair of adjacent symbols is merged, over and over, until the vocabulary is
//! full. Three ways to say which pair is best ([`Score`]); ties always go to the more frequent
//! pair, then to the smaller (left id, right id):
//! - [`Score::Frequency`] (the default), what HF's `WordPieceTrainer` does (a BPE trainer with
//!   `##` prefixes): the most frequent pair. A merge applied `f` times removes exactly `f`
//!   symbols, so this is the greedy choice for compression, and it measured the most compact
//!   of the three on English, Japanese and Chinese (`benches/RESULTS.md`, "WordPiece scores").
//! - [`Score::Likelihood`], the rule WordPiece was defined by (Schuster &
//!   Nakajima 2012): the merge that raises the training data's log-likelihood under a unigram
//!   model over the current symbols the most, computed exactly (below).
//! - [`Score::Pmi`], the formula the HF course gives for WordPiece: the pair maximising
//!   `freq(ab) / (freq(a) · freq(b))`. It ignores how often the pair occurs, so it favours
//!   pairs of rare symbols and gives a poor vocabulary on real text (issue 23).
//!
//! ## The likelihood gain
//!
//! Let `c(s)` be how often symbol `s` occurs over all words (each word weighted by its count)
//! and `N = Σ c(s)`. The unigram model gives `s` probability `c(s) / N`, so the corpus
//! log-likelihood is `L = Σ c(s) ln(c(s) / N) = Σ g(c(s)) − g(N)` with `g(x) = x ln x`,
//! `g(0) = 0`. Merging the pair `(a, b)` into `m` (applied left to right in every word) is done
//! `f` times: for `a ≠ b` two occurrences cannot overlap, so `f` is the pair's count; for a
//! self-pair a run of `r` equal symbols takes `⌊r/2⌋` merges, not the `r − 1` windows. Then
//! `a` and `b` lose `f` each (`a = b`: `2f`), `m` gains `f` (`m` may already be a symbol:
//! `a ##bc` and `ab ##c` both make `abc`), and `N` drops by `f`. Only those terms of `L`
//! change, so the gain is
//!
//! ```text
//! ΔL = [g(c_a − f) − g(c_a)] + [g(c_b − f) − g(c_b)] + [g(c_m + f) − g(c_m)] + [g(N) − g(N − f)]
//! ```
//!
//! (symbols that coincide have their changes added first). Unlike the ratio it is weighted by
//! `f`: a frequent pair gains about `f` times its log-ratio. The best gain can be negative
//! late in training; merging goes on regardless, since the user asked for a vocabulary size.
//! The gain is an `f64` from one function ([`likelihood_gain`]), so recomputing it from the
//! same counts gives the same bits; counts that appear on both sides cancel before summing, in
//! sorted order, so pairs whose gains are equal in exact arithmetic through such a
//! cancellation tie in `f64` too. Gains equal only through identities of logarithms (`4 ln 4 =
//! 8 ln 2`: a 1-in-10⁴ event on tiny random corpora) can still differ in their last bits;
//! those pairs go by the bits, not by the tie rule.
//!
//! ## The merge loop
//!
//! The loop keeps, per pair, its count and the words it occurs in, and a heap of candidates
//! checked lazily: an entry is re-scored when popped and pushed back if stale. That is exact
//! as long as every stored key is an upper bound of its pair's current score, so after each
//! merge every pair whose score may have *risen* is pushed again:
//! - pairs whose count changed (the likelihood gain is not monotone in `f`);
//! - pairs holding `a` or `b`: their `c` dropped, and `g(c − f) − g(c)` rises as `c` drops
//!   (the same holds for the ratio);
//! - under the likelihood, pairs that also join into `m`'s string, since `c_m` rose and
//!   `g(c + f) − g(c)` rises with `c`; they are found by cutting `m`'s string at each
//!   character boundary and looking both halves up.
//!
//! Every other pair's score can only fall: `N` dropped and `g(N) − g(N − f)` falls with `N`;
//! a pair holding `m` loses more as `c_m` grows; a pair joining into `a` or `b` gains less. A
//! per-symbol index of pairs makes the `a`/`b` lookups cheap.
//!
//! Under the likelihood the merged symbols are frequent ones, which sit in many pairs, so
//! that rule pushes millions of entries. The loop therefore keeps one *live* entry per pair
//! (its key in a map): a re-scored pair is pushed only when it beats its live key (otherwise
//! the live entry still bounds it), superseded entries are dropped unscored when popped, and
//! the heap is rebuilt from the live keys whenever it holds twice as many entries (on the
//! bench corpus this took the heap from 10M entries to 0.1M and the CPU time from 17 s to 10 s).
//!
//! Vocabulary order: special tokens, the alphabet (the `limit_alphabet` most frequent
//! characters, by code point), the prefixed characters (by code point), then merges. HF gives
//! the prefixed characters ids in the order it meets them in a hash map, which changes from
//! run to run, so its ids (and its choice among pairs tied on frequency) are not reproducible;
//! the set of tokens is what we match.
//!
//! (Over 500 lines: the merge loop (`learn`, about 300 lines) and the counting and vocabulary
//! around it are one algorithm; the rest is the derivation above and unit tests, which check
//! every likelihood merge against a brute-force recomputation of `L`.)

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
    /// The largest gain in corpus log-likelihood under a unigram model: the original
    /// WordPiece (see the module notes).
    Likelihood,
    /// `freq(ab) / (freq(a) · freq(b))`: the HF course's formula for WordPiece.
    Pmi,
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
    /// HF's `BertWordPieceTokenizer.train` defaults (the frequency score, HF's).
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
            score: Score::Frequency,
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
    /// freq(left) · freq(right) when scored under the ratio (1 under the other scores).
    units: u128,
    /// The likelihood gain when scored (0 under the other scores).
    gain: f64,
}

impl Candidate {
    fn cmp_score(&self, other: &Self) -> Ordering {
        // The likelihood gain, then count / units against other.count / other.units, exactly.
        self.gain.total_cmp(&other.gain).then_with(|| {
            (self.count as u128 * other.units).cmp(&(other.count as u128 * self.units))
        })
    }

    /// Whether `self` was scored from the same counts as `other` (bit-identical gain).
    fn same_as(&self, other: &Self) -> bool {
        self.count == other.count
            && self.units == other.units
            && self.gain.to_bits() == other.gain.to_bits()
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

/// `x ln x`, with `0 ln 0 = 0`.
fn x_ln_x(x: u64) -> f64 {
    if x == 0 {
        0.0
    } else {
        let x = x as f64;
        x * x.ln()
    }
}

/// The change in corpus log-likelihood when `pair` is merged `merges` times into `merged`
/// (`None`: a symbol not in the vocabulary yet), with symbol counts `unit` summing to `total`
/// (see the module notes).
fn likelihood_gain(
    pair: (u32, u32),
    merged: Option<u32>,
    merges: u64,
    unit: &[u64],
    total: u64,
) -> f64 {
    let f = merges as i64;
    // (symbol, change of its count); coinciding symbols add up.
    let mut changes: [(u32, i64); 3] = [(pair.0, -f), (pair.1, 0), (u32::MAX, 0)];
    let mut len = 1;
    for (s, d) in [(Some(pair.1), -f), (merged, f)] {
        let Some(s) = s else { continue };
        match changes[..len].iter_mut().find(|c| c.0 == s) {
            Some(c) => c.1 += d,
            None => {
                changes[len] = (s, d);
                len += 1;
            }
        }
    }
    // ΔL = Σ g(count after) − Σ g(count before) over the changed symbols and N. Counts on
    // both sides cancel first and each side is summed in sorted order, so gains that are
    // equal in exact arithmetic through such a cancellation get the same bits, and the tie
    // rule decides between them (`ab ##a` and `##a ##a`, each merged 6 times with
    // c(ab) = 8, c(##a) = 14: both are g(2) + g(6) + g(N) − g(14) − g(N − 6)).
    let mut after: [u64; 4] = [0; 4];
    let mut before: [u64; 4] = [0; 4];
    let mut n = 0;
    for &(s, d) in &changes[..len] {
        let c = unit[s as usize];
        after[n] = (c as i64 + d) as u64;
        before[n] = c;
        n += 1;
    }
    if merged.is_none() {
        after[n] = merges;
        n += 1;
    }
    after[n] = total;
    before[n] = total - merges;
    n += 1;
    let (after, before) = (&mut after[..n], &mut before[..n]);
    for x in after.iter_mut() {
        if let Some(y) = before.iter_mut().find(|y| **y == *x) {
            (*x, *y) = (0, 0);
        }
    }
    after.sort_unstable();
    before.sort_unstable();
    let sum = |counts: &[u64]| counts.iter().map(|&c| x_ln_x(c)).sum::<f64>();
    sum(after) - sum(before)
}

/// Calls `f(symbol, ⌊r/2⌋)` for every run of `r ≥ 2` equal symbols in `syms`: how many times
/// merging the self-pair (symbol, symbol) left to right applies in that run.
fn for_each_self_merge(syms: &[u32], mut f: impl FnMut(u32, u64)) {
    let mut i = 0;
    while i < syms.len() {
        let mut j = i + 1;
        while j < syms.len() && syms[j] == syms[i] {
            j += 1;
        }
        if j - i >= 2 {
            f(syms[i], ((j - i) / 2) as u64);
        }
        i = j;
    }
}

/// Writes the token that merging `pair` makes into `buf`.
fn join_into(vocab: &Vocab, prefix: &str, pair: (u32, u32), buf: &mut String) {
    let right = &vocab.tokens[pair.1 as usize];
    buf.clear();
    buf.push_str(&vocab.tokens[pair.0 as usize]);
    buf.push_str(right.strip_prefix(prefix).unwrap_or(right));
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
    let mut word_counts: Vec<u64> = Vec::with_capacity(words.len());
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
        word_counts.push(n);
    }
    progress.set_position(vocab.tokens.len() as u64);

    let score = config.score;
    let likelihood = score == Score::Likelihood;
    // The ratio and the likelihood both rise for pairs holding a merged symbol.
    let index_pairs = score != Score::Frequency;
    let mut counts = SymbolCounts {
        unit: vec![0; vocab.tokens.len()],
        total: 0,
        self_merges: FxHashMap::default(),
    };
    let mut pair_count: FxHashMap<(u32, u32), u64> = FxHashMap::default();
    let mut pair_words: FxHashMap<(u32, u32), Vec<u32>> = FxHashMap::default();
    // Per symbol, the pairs it was ever part of (stale ones are skipped when used).
    let mut pairs_of: Vec<Vec<(u32, u32)>> = vec![Vec::new(); vocab.tokens.len()];
    for (wi, (syms, &n)) in symbols.iter().zip(&word_counts).enumerate() {
        for &s in syms {
            counts.unit[s as usize] += n;
        }
        counts.total += n * syms.len() as u64;
        if likelihood {
            for_each_self_merge(syms, |s, k| {
                *counts.self_merges.entry(s).or_default() += k * n;
            });
        }
        for p in syms.windows(2) {
            let pair = (p[0], p[1]);
            let c = pair_count.entry(pair).or_default();
            if *c == 0 && index_pairs {
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
    let min_count = config.min_frequency.max(1);
    let mut buf = String::new();
    let mut heap: BinaryHeap<Candidate> = pair_count
        .iter()
        .filter(|&(_, &c)| c >= min_count)
        .map(|(&pair, &c)| counts.candidate(score, pair, c, &vocab, prefix, &mut buf))
        .collect();
    // Under the likelihood, the (gain, count) of each pair's one live heap entry: a pair whose
    // new score does not beat it needs no new entry (the live one still bounds it), and any
    // other entry of the pair is dead, dropped unscored when popped. Every merge lowers all
    // gains a little (N drops), so without this the heap fills with entries that are pushed
    // again and again for the many pairs holding a frequent merged symbol.
    let mut live: FxHashMap<(u32, u32), (f64, u64)> = FxHashMap::default();
    if likelihood {
        live.extend(heap.iter().map(|c| (c.pair, (c.gain, c.count))));
    }
    let is_live = |live: &FxHashMap<(u32, u32), (f64, u64)>, c: &Candidate| {
        live.get(&c.pair)
            .is_some_and(|&(gain, count)| gain.to_bits() == c.gain.to_bits() && count == c.count)
    };

    while vocab.tokens.len() < config.vocab_size {
        if likelihood && heap.len() > 2 * live.len() + 1024 {
            // Mostly dead entries: rebuild the heap from the live ones (linear time).
            live.retain(|pair, _| pair_count.get(pair).is_some_and(|&c| c >= min_count));
            heap = live
                .iter()
                .map(|(&pair, &(gain, count))| Candidate {
                    pair,
                    count,
                    units: 1,
                    gain,
                })
                .collect();
        }
        let Some(top) = heap.pop() else { break };
        if likelihood && !is_live(&live, &top) {
            continue;
        }
        let count = pair_count.get(&top.pair).copied().unwrap_or(0);
        if count < min_count {
            live.remove(&top.pair);
            continue;
        }
        let current = counts.candidate(score, top.pair, count, &vocab, prefix, &mut buf);
        if !current.same_as(&top) {
            if likelihood {
                live.insert(current.pair, (current.gain, current.count));
            }
            heap.push(current);
            continue;
        }
        live.remove(&top.pair);
        let (a, b) = top.pair;
        join_into(&vocab, prefix, top.pair, &mut buf);
        let new = vocab.intern(buf.clone());
        if counts.unit.len() < vocab.tokens.len() {
            counts.unit.resize(vocab.tokens.len(), 0);
            pairs_of.resize(vocab.tokens.len(), Vec::new());
        }
        // Re-count the pairs (and self-pair merges) of every word holding (a, b).
        let mut delta: FxHashMap<(u32, u32), i64> = FxHashMap::default();
        let mut self_delta: FxHashMap<u32, i64> = FxHashMap::default();
        for wi in pair_words.remove(&top.pair).unwrap_or_default() {
            let syms = &mut symbols[wi as usize];
            let n = word_counts[wi as usize] as i64;
            if !syms.windows(2).any(|p| (p[0], p[1]) == (a, b)) {
                continue;
            }
            for p in syms.windows(2) {
                *delta.entry((p[0], p[1])).or_default() -= n;
            }
            if likelihood {
                for_each_self_merge(syms, |s, k| {
                    *self_delta.entry(s).or_default() -= k as i64 * n;
                });
            }
            let mut out = Vec::with_capacity(syms.len());
            let mut i = 0;
            while i < syms.len() {
                if i + 1 < syms.len() && syms[i] == a && syms[i + 1] == b {
                    out.push(new);
                    counts.unit[a as usize] -= n as u64;
                    counts.unit[b as usize] -= n as u64;
                    counts.unit[new as usize] += n as u64;
                    counts.total -= n as u64;
                    i += 2;
                } else {
                    out.push(syms[i]);
                    i += 1;
                }
            }
            *syms = out;
            if likelihood {
                for_each_self_merge(syms, |s, k| {
                    *self_delta.entry(s).or_default() += k as i64 * n;
                });
            }
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
            if was == 0 && *c > 0 && index_pairs {
                pairs_of[pair.0 as usize].push(pair);
                if pair.1 != pair.0 {
                    pairs_of[pair.1 as usize].push(pair);
                }
            }
            // A lower count lowers the frequency and the ratio, but the likelihood gain is
            // not monotone in it.
            if d > 0 || likelihood {
                touched.push(pair);
            }
        }
        for (s, d) in self_delta {
            if d != 0 {
                let k = counts.self_merges.entry(s).or_default();
                *k = (*k as i64 + d) as u64;
                touched.push((s, s));
            }
        }
        pair_count.remove(&top.pair);
        if index_pairs {
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
        if likelihood {
            // Every other pair joining into the merged token's string scores higher now.
            let merged = &vocab.tokens[new as usize];
            for (cut, _) in merged.char_indices().skip(1) {
                buf.clear();
                buf.push_str(prefix);
                buf.push_str(&merged[cut..]);
                if let (Some(&left), Some(&right)) =
                    (vocab.ids.get(&merged[..cut]), vocab.ids.get(buf.as_str()))
                {
                    if pair_count.get(&(left, right)).is_some_and(|&c| c > 0) {
                        touched.push((left, right));
                    }
                }
            }
        }
        touched.sort_unstable();
        touched.dedup();
        for pair in touched {
            let c = pair_count.get(&pair).copied().unwrap_or(0);
            if c < min_count {
                continue;
            }
            let candidate = counts.candidate(score, pair, c, &vocab, prefix, &mut buf);
            if likelihood {
                let bound = (candidate.gain, candidate.count);
                match live.get_mut(&pair) {
                    Some(key) if key.0.total_cmp(&bound.0).then(key.1.cmp(&bound.1)).is_ge() => {
                        continue
                    }
                    Some(key) => *key = bound,
                    None => {
                        live.insert(pair, bound);
                    }
                }
            }
            heap.push(candidate);
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

/// The symbol counts the scores read, kept up to date by the merge loop.
struct SymbolCounts {
    /// Per symbol id, its occurrences over all words (weighted by word count).
    unit: Vec<u64>,
    /// The sum of `unit`: N in the module notes.
    total: u64,
    /// Per symbol `s`, how many times merging (s, s) left to right would apply (likelihood
    /// only): `⌊r/2⌋` per run of `r` equal symbols, fewer than the pair's windows.
    self_merges: FxHashMap<u32, u64>,
}

impl SymbolCounts {
    /// `pair`, seen `count` times, scored under `score`.
    fn candidate(
        &self,
        score: Score,
        pair: (u32, u32),
        count: u64,
        vocab: &Vocab,
        prefix: &str,
        buf: &mut String,
    ) -> Candidate {
        let (units, gain) = match score {
            Score::Frequency => (1, 0.0),
            Score::Pmi => (
                self.unit[pair.0 as usize] as u128 * self.unit[pair.1 as usize] as u128,
                0.0,
            ),
            Score::Likelihood => {
                let merges = if pair.0 == pair.1 {
                    self.self_merges.get(&pair.0).copied().unwrap_or(0)
                } else {
                    count
                };
                join_into(vocab, prefix, pair, buf);
                let merged = vocab.ids.get(buf.as_str()).copied();
                (
                    1,
                    likelihood_gain(pair, merged, merges, &self.unit, self.total),
                )
            }
        };
        Candidate {
            pair,
            count,
            units,
            gain,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(score: Score) -> WordPieceTrainerConfig {
        WordPieceTrainerConfig {
            vocab_size: 0,
            min_frequency: 1,
            special_tokens: vec!["[UNK]".into()],
            score,
            ..Default::default()
        }
    }

    /// The vocabulary `learn` gives with `merges` more tokens than the initial ones.
    fn train(score: Score, words: &[(&str, u64)], merges: usize) -> Vec<String> {
        let hidden = indicatif::ProgressBar::hidden();
        let base = learn(&config(score), words, &hidden).len();
        let config = WordPieceTrainerConfig {
            vocab_size: base + merges,
            ..config(score)
        };
        learn(&config, words, &hidden)
            .into_iter()
            .map(|(t, _)| t)
            .collect()
    }

    /// `Σ c(s) ln(c(s) / N)` over the symbols of `words`, from scratch.
    fn log_likelihood(words: &[(Vec<String>, u64)]) -> f64 {
        let mut c: FxHashMap<&str, u64> = FxHashMap::default();
        for (syms, n) in words {
            for s in syms {
                *c.entry(s.as_str()).or_default() += n;
            }
        }
        let total: u64 = c.values().sum();
        c.values()
            .map(|&x| x as f64 * (x as f64 / total as f64).ln())
            .sum()
    }

    /// Merges (a, b) left to right in every word.
    fn apply(words: &[(Vec<String>, u64)], a: &str, b: &str) -> Vec<(Vec<String>, u64)> {
        let joined = format!("{a}{}", b.strip_prefix("##").unwrap_or(b));
        words
            .iter()
            .map(|(syms, n)| {
                let mut out = Vec::new();
                let mut i = 0;
                while i < syms.len() {
                    if i + 1 < syms.len() && syms[i] == a && syms[i + 1] == b {
                        out.push(joined.clone());
                        i += 2;
                    } else {
                        out.push(syms[i].clone());
                        i += 1;
                    }
                }
                (out, *n)
            })
            .collect()
    }

    /// The likelihood trainer's vocabulary, by brute force: at every step each candidate is
    /// merged in a copy of the corpus and L recomputed; the largest gain wins (gains within
    /// 1e-9 are tied: then the more frequent pair, then the smaller ids).
    fn brute_force(words: &[(&str, u64)], merges: usize) -> Vec<String> {
        let mut vocab = train(Score::Likelihood, words, 0);
        let mut split: Vec<(Vec<String>, u64)> = words
            .iter()
            .map(|&(w, n)| {
                let syms = w.chars().enumerate();
                let syms = syms.map(|(i, c)| {
                    if i == 0 {
                        c.to_string()
                    } else {
                        format!("##{c}")
                    }
                });
                (syms.collect(), n)
            })
            .collect();
        let target = vocab.len() + merges;
        while vocab.len() < target {
            let id = |t: &str| vocab.iter().position(|v| v == t).unwrap();
            let mut pairs: FxHashMap<(String, String), u64> = FxHashMap::default();
            for (syms, n) in &split {
                for p in syms.windows(2) {
                    *pairs.entry((p[0].clone(), p[1].clone())).or_default() += n;
                }
            }
            let before = log_likelihood(&split);
            let scored: Vec<_> = pairs
                .iter()
                .map(|(p, &c)| {
                    let gain = log_likelihood(&apply(&split, &p.0, &p.1)) - before;
                    (gain, c, (id(&p.0), id(&p.1)), p)
                })
                .collect();
            let Some(best) = scored.iter().map(|s| s.0).reduce(f64::max) else {
                break;
            };
            let (_, _, _, (a, b)) = scored
                .iter()
                .filter(|s| s.0 >= best - 1e-9 * best.abs().max(1.0))
                .min_by(|x, y| y.1.cmp(&x.1).then(x.2.cmp(&y.2)))
                .unwrap();
            let (a, b) = (a.clone(), b.clone());
            let joined = format!("{a}{}", b.strip_prefix("##").unwrap());
            if !vocab.contains(&joined) {
                vocab.push(joined);
            }
            split = apply(&split, &a, &b);
        }
        vocab
    }

    #[test]
    fn likelihood_merges_the_pair_that_raises_the_likelihood_most() {
        let corpora: [&[(&str, u64)]; 5] = [
            // The issue's shape: a frequent pair of frequent symbols against a rare pair of
            // rare ones.
            &[("ab", 20), ("ba", 10), ("aab", 10), ("xy", 3)],
            // Runs of one symbol: (##a, ##a) applies ⌊r/2⌋ times in a run of r, not r − 1.
            &[
                ("baaaaa", 5),
                ("baaa", 4),
                ("caaaab", 3),
                ("ab", 2),
                ("cab", 1),
            ],
            // "a ##bc" and "ab ##c" both make "abc": merges into a token that exists.
            &[
                ("abc", 7),
                ("abd", 5),
                ("bcd", 6),
                ("abcbc", 2),
                ("dbc", 3),
                ("da", 2),
            ],
            &[
                ("the", 30),
                ("then", 8),
                ("there", 6),
                ("he", 9),
                ("her", 7),
                ("tea", 2),
            ],
            // "ab ##a" and "##a ##a" come to gain exactly the same (##a's count cancels out of
            // both): the tie rule must decide, not the rounding of two different sums.
            &[("aaaba", 5), ("abaacc", 6), ("abcbacc", 2), ("bacbcc", 5)],
        ];
        for words in corpora {
            let merges = 14;
            assert_eq!(
                train(Score::Likelihood, words, merges),
                brute_force(words, merges),
                "{words:?}"
            );
        }
        // Small random corpora over few letters, where merged tokens often exist already and
        // other pairs join into them (a fixed linear congruential generator: reproducible).
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |bound: u64| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) % bound
        };
        for _ in 0..300 {
            let words: Vec<(String, u64)> = (0..1 + next(8))
                .map(|_| {
                    let len = 1 + next(6);
                    let word = (0..len).map(|_| (b'a' + next(3) as u8) as char).collect();
                    (word, 1 + next(6))
                })
                .collect();
            let mut merged: FxHashMap<&str, u64> = FxHashMap::default();
            for (w, n) in &words {
                *merged.entry(w.as_str()).or_default() += n;
            }
            let mut words: Vec<(&str, u64)> = merged.into_iter().collect();
            words.sort_unstable();
            let merges = 1 + next(20) as usize;
            assert_eq!(
                train(Score::Likelihood, &words, merges),
                brute_force(&words, merges),
                "{words:?}"
            );
        }
    }

    #[test]
    fn likelihood_weighs_the_ratio_by_frequency() {
        // "x ##y" has the best ratio (x and y only ever meet each other: 3 / (3 · 3)) but
        // occurs 3 times; "a ##b" has a poor ratio (40 / (50 · 50)) but occurs 40 times, and
        // merging it raises the likelihood more (by 28.7 against 14.2 nats).
        let words = [("ab", 40), ("ac", 10), ("db", 10), ("xy", 3)];
        assert_eq!(train(Score::Likelihood, &words, 1).last().unwrap(), "ab");
        assert_eq!(train(Score::Pmi, &words, 1).last().unwrap(), "xy");
        assert_eq!(train(Score::Frequency, &words, 1).last().unwrap(), "ab");
    }

    #[test]
    fn pmi_prefers_pairs_of_rare_symbols() {
        // The ratio merges "x ##y" first although "a ##b" is more frequent.
        let words = [("ab", 20), ("ba", 10), ("aab", 10), ("xy", 3)];
        assert_eq!(train(Score::Pmi, &words, 1).last().unwrap(), "xy");
        assert_eq!(train(Score::Frequency, &words, 1).last().unwrap(), "ab");
    }

    #[test]
    fn likelihood_gain_counts_coinciding_symbols_once() {
        // unit: 0 -> 5, 1 -> 3, 2 -> 4; N = 12.
        let unit = [5, 3, 4];
        let g = |x: f64| if x == 0.0 { 0.0 } else { x * x.ln() };
        // (0, 1) merged twice into a new symbol.
        let fresh = g(3.0) - g(5.0) + g(1.0) - g(3.0) + g(2.0) + g(12.0) - g(10.0);
        assert!((likelihood_gain((0, 1), None, 2, &unit, 12) - fresh).abs() < 1e-12);
        // The self-pair (0, 0) merged twice into the existing symbol 2.
        let own = g(1.0) - g(5.0) + g(6.0) - g(4.0) + g(12.0) - g(10.0);
        assert!((likelihood_gain((0, 0), Some(2), 2, &unit, 12) - own).abs() < 1e-12);
    }
}
