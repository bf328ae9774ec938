//! Training: interpolated modified Kneser-Ney, as KenLM's `lmplz` estimates it.
//!
//! Sentences: each line of a document is one sentence (a document's final line break does not
//! start another), scored as `<s> w1 .. wk </s>`, which is what `lmplz` reads. Words are the
//! line's whitespace-separated words (KenLM's spaces: space, tab, CR, VT, FF), or, with a
//! tokenizer, the line's tokens written as the tokenizer's vocabulary writes them (byte-level:
//! `Ġthe`). Like `lmplz`, the words `<s>`, `</s>` and `<unk>` in the text are skipped.
//!
//! The estimate, with `a` the adjusted counts (Chen & Goodman; `lmplz`'s `adjust_counts.cc`,
//! `initial_probabilities.cc`, `interpolate.cc`):
//! - `a(g)` is the count of `g` for the highest order and for n-grams starting with `<s>`,
//!   else the number of distinct words seen just before `g`.
//! - Discounts per order from the counts of adjusted counts `t_k`:
//!   `Y = t1 / (t1 + 2 t2)`, `D1 = 1 - 2Y t2/t1`, `D2 = 2 - 3Y t3/t2`, `D3+ = 3 - 4Y t4/t3`.
//! - For context `c`: `u(w|c) = (a(cw) - D(a(cw))) / sum_x a(cx)` and
//!   `gamma(c) = (sum_w D(a(cw)) + sum of the pruned a(cw)) / sum_x a(cx)`.
//! - `p(w|c) = u(w|c) + gamma(c) p(w|c')` with `c'` the context without its first word; for
//!   unigrams `p(w) = u(w) + gamma / (|V| - 1)` (`|V|` counts `<unk>` and not `<s>`, whose
//!   probability is 1 so it can be scored as context only). The ARPA backoff of `c` is
//!   `gamma(c)`, so the backoff form gives the interpolated probabilities exactly.
//! - Pruning (`lmplz --prune`): an n-gram of order >= 2 seen at most `prune[n-1]` times is
//!   dropped, its mass moving to its context's backoff. Thresholds must not decrease with the
//!   order, so what is kept is closed under prefixes and suffixes (which KenLM requires).
//!
//! Memory: every distinct n-gram of every order is held in memory (hash tables of id arrays,
//! per thread while counting, then merged), about `(4n + 40)` bytes per n-gram of order `n`.
//! That suits corpora up to a few GB of text. Beyond RAM one needs what `lmplz` does: count
//! only the highest order into sorted runs spilled to disk, merge them, and derive the lower
//! orders and the probabilities in streaming passes over suffix- and context-sorted files.
//!
//! (Over 500 lines: 103 of them are its unit tests; the rest is `lmplz`'s one pipeline over the
//! same n-gram tables: counting on all cores (about 130 lines), the trainer that drives it
//! (about 265) and the estimate (about 165).)

use super::model::split_words;
use super::normalize::ccnet_normalize;
use super::probing::Vocab;
use crate::corpus::{self, CorpusOptions, CorpusReport};
use crate::error::{Error, Result};
use crate::pre_tokenizers::byte_level;
use crate::tokenizer::{AllowedSpecial, Tokenizer};
use hashbrown::HashTable;
use rayon::prelude::*;
use std::hash::{BuildHasher, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Ids every vocabulary starts with.
pub const UNK: u32 = 0;
pub const BOS: u32 = 1;
pub const EOS: u32 = 2;
const SPECIALS: [&str; 3] = ["<unk>", "<s>", "</s>"];
/// A tokenizer id whose string is a special word: skipped, as `lmplz` skips them.
const SKIP: u32 = u32::MAX;

#[derive(Clone, Debug)]
pub struct LmTrainerConfig {
    /// The model's order (2 and up; `kenlm` loads up to 6 in its default build).
    pub order: usize,
    /// `lmplz --prune`: thresholds per order, from unigrams; the last one repeats for higher
    /// orders; the unigram threshold must be 0; must not decrease. Empty: no pruning.
    pub prune: Vec<u64>,
    /// CCNet's line normalisation before tokenizing (see [`super::normalize`]).
    pub normalize: bool,
    /// Discounts (D1, D2, D3+) for an order whose own cannot be estimated (too little or
    /// artificial data); `lmplz --discount_fallback` uses 0.5 1 1.5. `None`: such an order is
    /// an error.
    pub discount_fallback: Option<[f64; 3]>,
    pub show_progress: bool,
}

impl Default for LmTrainerConfig {
    fn default() -> Self {
        LmTrainerConfig {
            order: 5,
            prune: Vec::new(),
            normalize: false,
            discount_fallback: None,
            show_progress: false,
        }
    }
}

/// How a line is cut into the model's words.
#[derive(Clone)]
pub enum LineTokens {
    /// Whitespace-separated words (KenLM's spaces).
    Words,
    /// A tokenizer's tokens; `strings[id]` is the word each token id stands for.
    Tokenizer {
        tokenizer: Box<Tokenizer>,
        strings: Vec<Vec<u8>>,
    },
}

impl LineTokens {
    pub fn tokenizer(tokenizer: Tokenizer) -> Self {
        let strings = token_strings(&tokenizer);
        LineTokens::Tokenizer {
            tokenizer: Box::new(tokenizer),
            strings,
        }
    }
}

/// The word each token id stands for: its bytes in byte-level form (`Ġthe`), which never holds
/// whitespace, so a line of them joined by spaces is what KenLM reads. Ids without a token are
/// empty.
pub fn token_strings(tokenizer: &Tokenizer) -> Vec<Vec<u8>> {
    (0..tokenizer.vocab_size() as u32)
        .map(|id| {
            tokenizer
                .token_bytes(id)
                .map(|b| byte_level::encode(b).into_bytes())
                .unwrap_or_default()
        })
        .collect()
}

/// Calls `each` with every sentence of a document: its lines, after one final line break is
/// dropped (`"a\nb\n"` is two sentences, `""` one empty sentence).
pub fn for_each_sentence(doc: &str, mut each: impl FnMut(&str)) {
    let doc = doc.strip_suffix('\n').unwrap_or(doc);
    for line in doc.split('\n') {
        each(line);
    }
}

/// Counts of the n-grams of one order: the ids of entry `i` are `ids[i*n..(i+1)*n]`.
#[derive(Clone, Debug)]
struct NgramCounts {
    n: usize,
    ids: Vec<u32>,
    counts: Vec<u64>,
    table: HashTable<u32>,
}

#[inline]
fn hash_ids(ids: &[u32]) -> u64 {
    let mut h = rustc_hash::FxBuildHasher.build_hasher();
    for &id in ids {
        h.write_u32(id);
    }
    h.finish()
}

impl NgramCounts {
    fn new(n: usize) -> Self {
        NgramCounts {
            n,
            ids: Vec::new(),
            counts: Vec::new(),
            table: HashTable::new(),
        }
    }

    fn len(&self) -> usize {
        self.counts.len()
    }

    fn gram(&self, i: usize) -> &[u32] {
        &self.ids[i * self.n..(i + 1) * self.n]
    }

    fn find(&self, gram: &[u32]) -> Option<usize> {
        let (ids, n) = (&self.ids, self.n);
        self.table
            .find(hash_ids(gram), |&i| {
                &ids[i as usize * n..(i as usize + 1) * n] == gram
            })
            .map(|&i| i as usize)
    }

    #[inline]
    fn add(&mut self, gram: &[u32], count: u64) {
        let hash = hash_ids(gram);
        let (ids, n) = (&self.ids, self.n);
        if let Some(&i) = self.table.find(hash, |&i| {
            &ids[i as usize * n..(i as usize + 1) * n] == gram
        }) {
            self.counts[i as usize] += count;
            return;
        }
        let i = self.counts.len() as u32;
        self.ids.extend_from_slice(gram);
        self.counts.push(count);
        let ids = &self.ids;
        self.table.insert_unique(hash, i, |&i| {
            hash_ids(&ids[i as usize * n..(i as usize + 1) * n])
        });
    }

    fn memory(&self) -> usize {
        self.ids.capacity() * 4 + self.counts.capacity() * 8 + self.table.capacity() * 5
    }

    /// Sorted by ids (so every context's n-grams are contiguous), indexed again.
    fn sorted(self) -> NgramCounts {
        let n = self.n;
        let mut order: Vec<u32> = (0..self.len() as u32).collect();
        order.par_sort_unstable_by(|&a, &b| {
            self.ids[a as usize * n..(a as usize + 1) * n]
                .cmp(&self.ids[b as usize * n..(b as usize + 1) * n])
        });
        let mut out = NgramCounts::new(n);
        out.ids.reserve(self.ids.len());
        out.counts.reserve(self.counts.len());
        for i in order {
            out.ids.extend_from_slice(self.gram(i as usize));
            out.counts.push(self.counts[i as usize]);
        }
        let ids = &out.ids;
        out.table.reserve(out.counts.len(), |&i| {
            hash_ids(&ids[i as usize * n..(i as usize + 1) * n])
        });
        for i in 0..out.counts.len() {
            let h = hash_ids(out.gram(i));
            let ids = &out.ids;
            out.table.insert_unique(h, i as u32, |&i| {
                hash_ids(&ids[i as usize * n..(i as usize + 1) * n])
            });
        }
        out
    }
}

/// One thread's counts, and its scratch buffers.
struct ThreadCounts {
    /// Word mode: this thread's words (ids are local until the merge).
    words: Vocab,
    orders: Vec<NgramCounts>,
    sentence: Vec<u32>,
    tokens: Vec<u32>,
    normalized: String,
    tokens_seen: u64,
    sentences: u64,
}

impl ThreadCounts {
    fn new(order: usize) -> Self {
        let mut words = Vocab::default();
        for s in SPECIALS {
            words.insert(s.as_bytes());
        }
        ThreadCounts {
            words,
            orders: (1..=order).map(NgramCounts::new).collect(),
            sentence: Vec::new(),
            tokens: Vec::new(),
            normalized: String::new(),
            tokens_seen: 0,
            sentences: 0,
        }
    }
}

/// Counts n-grams of documents (files, or texts given in batches), then estimates the model.
pub struct LmTrainer {
    config: LmTrainerConfig,
    tokens: LineTokens,
    /// Tokenizer mode: token id to word id (in `shared_words`), or [`SKIP`].
    token_to_word: Vec<u32>,
    /// Tokenizer mode: the words, shared by every thread.
    shared_words: Vocab,
    threads: Vec<Mutex<ThreadCounts>>,
    fed_bytes: u64,
}

/// Thresholds per order from `lmplz`-style `--prune` values.
fn prune_thresholds(prune: &[u64], order: usize) -> Result<Vec<u64>> {
    if prune.is_empty() {
        return Ok(vec![0; order]);
    }
    if prune.len() > order {
        return Err(Error::InvalidArgument(format!(
            "{} pruning thresholds given for a model of order {order}",
            prune.len()
        )));
    }
    if prune[0] != 0 {
        return Err(Error::InvalidArgument(
            "the unigram pruning threshold must be 0 (unigrams are never pruned)".into(),
        ));
    }
    if prune.windows(2).any(|w| w[1] < w[0]) {
        return Err(Error::InvalidArgument(
            "pruning thresholds must not decrease with the order (else substrings of kept n-grams would be pruned)".into(),
        ));
    }
    let mut t = prune.to_vec();
    t.resize(order, *prune.last().expect("not empty"));
    Ok(t)
}

impl LmTrainer {
    pub fn new(config: LmTrainerConfig, tokens: LineTokens) -> Result<Self> {
        if !(2..=super::model::MAX_ORDER).contains(&config.order) {
            return Err(Error::InvalidArgument(format!(
                "order must be 2..={}, not {}",
                super::model::MAX_ORDER,
                config.order
            )));
        }
        prune_thresholds(&config.prune, config.order)?;
        if let Some(d) = config.discount_fallback {
            if !(0.0..=1.0).contains(&d[0])
                || !(0.0..=2.0).contains(&d[1])
                || !(0.0..=3.0).contains(&d[2])
            {
                return Err(Error::InvalidArgument(format!(
                    "fallback discounts must be D1 in [0, 1], D2 in [0, 2], D3+ in [0, 3], not {d:?}"
                )));
            }
        }
        let mut shared_words = Vocab::default();
        for s in SPECIALS {
            shared_words.insert(s.as_bytes());
        }
        let token_to_word = match &tokens {
            LineTokens::Words => Vec::new(),
            LineTokens::Tokenizer { strings, .. } => strings
                .iter()
                .map(|s| {
                    if s.is_empty() || SPECIALS.iter().any(|sp| sp.as_bytes() == s.as_slice()) {
                        SKIP
                    } else {
                        shared_words.insert(s).0
                    }
                })
                .collect(),
        };
        let threads = (0..rayon::current_num_threads())
            .map(|_| Mutex::new(ThreadCounts::new(config.order)))
            .collect();
        Ok(LmTrainer {
            config,
            tokens,
            token_to_word,
            shared_words,
            threads,
            fed_bytes: 0,
        })
    }

    /// Counts the sentences of one document into `counts`.
    fn count_document(&self, counts: &mut ThreadCounts, doc: &str) -> Result<()> {
        let order = self.config.order;
        let mut result = Ok(());
        for_each_sentence(doc, |line| {
            if result.is_err() {
                return;
            }
            let ThreadCounts {
                words,
                orders,
                sentence,
                tokens,
                normalized,
                tokens_seen,
                sentences,
            } = counts;
            let line = if self.config.normalize {
                ccnet_normalize(line, normalized);
                normalized.as_str()
            } else {
                line
            };
            sentence.clear();
            sentence.push(BOS);
            match &self.tokens {
                LineTokens::Words => {
                    for w in split_words(line) {
                        let id = words.insert(w).0;
                        if id > EOS {
                            sentence.push(id);
                        }
                    }
                }
                LineTokens::Tokenizer { tokenizer, .. } => {
                    tokens.clear();
                    if let Err(e) = tokenizer.encode_into(line, &AllowedSpecial::None, tokens) {
                        result = Err(e);
                        return;
                    }
                    sentence.extend(
                        tokens
                            .iter()
                            .map(|&t| self.token_to_word.get(t as usize).copied().unwrap_or(SKIP))
                            .filter(|&w| w != SKIP),
                    );
                }
            }
            sentence.push(EOS);
            *tokens_seen += sentence.len() as u64 - 2;
            *sentences += 1;
            for end in 1..sentence.len() {
                for n in 1..=order.min(end + 1) {
                    orders[n - 1].add(&sentence[end + 1 - n..=end], 1);
                }
            }
        });
        result
    }

    /// Counts `texts`, each one document, in parallel. May be called many times.
    pub fn feed(&mut self, texts: &[&str]) -> Result<()> {
        const TASK_BYTES: usize = 256 << 10;
        let mut tasks = Vec::new();
        let (mut start, mut size) = (0, 0);
        for (i, t) in texts.iter().enumerate() {
            size += t.len();
            if size >= TASK_BYTES {
                tasks.push(start..i + 1);
                (start, size) = (i + 1, 0);
            }
        }
        if start < texts.len() {
            tasks.push(start..texts.len());
        }
        let this = &*self;
        tasks.into_par_iter().try_for_each(|task| {
            let slot = rayon::current_thread_index().unwrap_or(0) % this.threads.len();
            let mut counts = this.threads[slot].lock().expect("no panics while counting");
            texts[task]
                .iter()
                .try_for_each(|t| this.count_document(&mut counts, t))
        })?;
        self.fed_bytes += texts.iter().map(|t| t.len() as u64).sum::<u64>();
        Ok(())
    }

    /// Streams `paths` (txt, jsonl, json, optionally .gz/.zst; see [`crate::corpus`]) and
    /// counts their n-grams on all cores.
    pub fn feed_files(&mut self, paths: &[PathBuf], opts: &CorpusOptions) -> Result<CorpusReport> {
        let total = corpus::check_paths(paths)?;
        let progress = progress_bar(
            self.config.show_progress,
            total,
            "{msg} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec})",
        );
        progress.set_message("counting");
        let report = corpus::par_for_each_document(
            paths,
            opts,
            &progress,
            &self.threads,
            |counts, doc| self.count_document(counts, doc),
            |_| {},
        );
        progress.finish_and_clear();
        let report = report?;
        self.fed_bytes += report.bytes;
        Ok(report)
    }

    /// Bytes the counts hold now.
    pub fn memory(&self) -> usize {
        self.threads
            .iter()
            .map(|t| {
                let t = t.lock().expect("no panics while counting");
                t.words.memory() + t.orders.iter().map(NgramCounts::memory).sum::<usize>()
            })
            .sum()
    }

    /// Merges the counts and estimates the model.
    pub fn train(self) -> Result<TrainedLm> {
        let order = self.config.order;
        let thresholds = prune_thresholds(&self.config.prune, order)?;
        let threads: Vec<ThreadCounts> = self
            .threads
            .into_iter()
            .map(|t| t.into_inner().expect("no panics while counting"))
            .collect();
        let tokens: u64 = threads.iter().map(|t| t.tokens_seen).sum();
        let sentences: u64 = threads.iter().map(|t| t.sentences).sum();
        if sentences == 0 {
            return Err(Error::Corpus(
                "no text to train on: the corpus is empty".into(),
            ));
        }

        // One vocabulary: the specials, then every word in byte order (so the output does not
        // depend on which thread saw a word first).
        let word_mode = matches!(self.tokens, LineTokens::Words);
        let mut all_words: Vec<Vec<u8>> = if word_mode {
            let mut seen = Vocab::default();
            for t in &threads {
                for id in 3..t.words.len() as u32 {
                    seen.insert(t.words.word(id));
                }
            }
            (0..seen.len() as u32)
                .map(|i| seen.word(i).to_vec())
                .collect()
        } else {
            (3..self.shared_words.len() as u32)
                .map(|i| self.shared_words.word(i).to_vec())
                .collect()
        };
        all_words.sort_unstable();
        let mut vocab = Vocab::default();
        for s in SPECIALS {
            vocab.insert(s.as_bytes());
        }
        for w in &all_words {
            vocab.insert(w);
        }
        drop(all_words);

        // Merge every thread's counts under the final ids.
        let mut merged: Vec<NgramCounts> = (1..=order).map(NgramCounts::new).collect();
        let mut gram = Vec::with_capacity(order);
        for t in threads {
            let local = if word_mode {
                &t.words
            } else {
                &self.shared_words
            };
            let to_global: Vec<u32> = (0..local.len() as u32)
                .map(|id| {
                    vocab
                        .get(local.word(id))
                        .expect("every word is in the vocabulary")
                })
                .collect();
            for (n, counts) in t.orders.into_iter().enumerate() {
                for i in 0..counts.len() {
                    gram.clear();
                    gram.extend(counts.gram(i).iter().map(|&id| to_global[id as usize]));
                    merged[n].add(&gram, counts.counts[i]);
                }
            }
        }
        // <unk> and <s> are unigrams of count 0 (the text never predicts them).
        merged[0].add(&[UNK], 0);
        merged[0].add(&[BOS], 0);
        let progress = progress_bar(self.config.show_progress, 0, "{msg} [{elapsed_precise}]");
        progress.set_message("estimating");
        let orders: Vec<NgramCounts> = merged.into_par_iter().map(NgramCounts::sorted).collect();
        let estimate = estimate(
            &orders,
            &thresholds,
            self.config.discount_fallback,
            vocab.len(),
        )?;
        progress.finish_and_clear();
        Ok(TrainedLm {
            vocab,
            orders,
            estimate,
            tokens,
            sentences,
        })
    }
}

fn progress_bar(show: bool, len: u64, template: &str) -> indicatif::ProgressBar {
    if !show {
        return indicatif::ProgressBar::hidden();
    }
    let style =
        indicatif::ProgressStyle::with_template(template).expect("progress templates are valid");
    indicatif::ProgressBar::new(len).with_style(style)
}

/// An n-gram's log10 probability and log10 backoff (`None`: no backoff column), or `None`
/// when it is pruned.
type Written = Option<(f32, Option<f32>)>;

/// Everything the counts give, per order.
struct Estimate {
    /// log10 probability and log10 backoff (`None` for no backoff column) of each n-gram,
    /// `None` for a pruned one.
    weights: Vec<Vec<Written>>,
    adjusted: Vec<Vec<u64>>,
    discounts: Vec<[f64; 3]>,
    count_of_counts: Vec<[u64; 4]>,
    kept: Vec<u64>,
}

/// Chen & Goodman's discounts from the counts of adjusted counts `t[k-1]` for k = 1..4, or
/// why they cannot be estimated.
pub fn kn_discounts(t: [u64; 4]) -> std::result::Result<[f64; 3], String> {
    for (k, &c) in t[..3].iter().enumerate() {
        if c == 0 {
            return Err(format!("no n-grams with adjusted count {}", k + 1));
        }
    }
    let [t1, t2, t3, t4] = t.map(|c| c as f64);
    let y = t1 / (t1 + 2.0 * t2);
    let d = [
        1.0 - 2.0 * y * t2 / t1,
        2.0 - 3.0 * y * t3 / t2,
        3.0 - 4.0 * y * t4 / t3,
    ];
    for (k, &dk) in d.iter().enumerate() {
        if !(0.0..=(k + 1) as f64).contains(&dk) {
            return Err(format!("discount D{} = {dk} is out of range", k + 1));
        }
    }
    Ok(d)
}

fn estimate(
    orders: &[NgramCounts],
    thresholds: &[u64],
    fallback: Option<[f64; 3]>,
    vocab_size: usize,
) -> Result<Estimate> {
    let top = orders.len();
    // Adjusted counts: raw for the highest order and for n-grams starting with <s>, else the
    // number of distinct words before.
    let mut adjusted: Vec<Vec<u64>> = Vec::with_capacity(top);
    for n in 1..=top {
        let counts = &orders[n - 1];
        if n == top {
            adjusted.push(counts.counts.clone());
            continue;
        }
        let mut a: Vec<u64> = (0..counts.len())
            .map(|i| {
                if counts.gram(i)[0] == BOS {
                    counts.counts[i]
                } else {
                    0
                }
            })
            .collect();
        let longer = &orders[n];
        for j in 0..longer.len() {
            let suffix = &longer.gram(j)[1..];
            let i = counts.find(suffix).expect("every suffix is counted");
            if suffix[0] != BOS {
                a[i] += 1;
            }
        }
        adjusted.push(a);
    }
    let pruned = |n: usize, i: usize| n >= 2 && orders[n - 1].counts[i] <= thresholds[n - 1];

    let mut discounts = Vec::with_capacity(top);
    let mut count_of_counts = Vec::with_capacity(top);
    for (n, a) in adjusted.iter().enumerate() {
        let mut t = [0u64; 4];
        for &c in a {
            if (1..=4).contains(&c) {
                t[c as usize - 1] += 1;
            }
        }
        count_of_counts.push(t);
        discounts.push(match (kn_discounts(t), fallback) {
            (Ok(d), _) => d,
            (Err(_), Some(d)) => d,
            (Err(why), None) => {
                return Err(Error::Corpus(format!(
                    "cannot estimate Kneser-Ney discounts for {}-grams: {why} (counts of adjusted counts 1..4: {t:?}); \
                     the corpus is too small or artificial; deduplicate it, lower the order, or give fallback discounts",
                    n + 1
                )))
            }
        });
    }
    let discount = |n: usize, a: u64| -> f64 {
        match a {
            0 => 0.0,
            1..=2 => discounts[n - 1][a as usize - 1],
            _ => discounts[n - 1][2],
        }
    };

    // Interpolated probabilities (f64), order by order; gamma per context.
    let mut probs: Vec<Vec<f64>> = Vec::with_capacity(top);
    // gammas[n - 1][i]: gamma of n-gram i of order n as a context, NaN if it is none.
    let mut gammas: Vec<Vec<f64>> = orders.iter().map(|o| vec![f64::NAN; o.len()]).collect();
    {
        // Unigrams: one context (the empty one).
        let counts = &orders[0];
        let a = &adjusted[0];
        let denominator: u64 = a.iter().sum();
        let numerator: f64 = a.iter().map(|&c| discount(1, c)).sum();
        let gamma = numerator / denominator as f64;
        // |V| - 1: <unk> in, <s> out.
        let uniform = 1.0 / (vocab_size as f64 - 1.0);
        let p = (0..counts.len())
            .map(|i| match counts.gram(i)[0] {
                BOS => 1.0,
                _ => (a[i] as f64 - discount(1, a[i])) / denominator as f64 + gamma * uniform,
            })
            .collect();
        probs.push(p);
    }
    for n in 2..=top {
        let counts = &orders[n - 1];
        let a = &adjusted[n - 1];
        let lower = &orders[n - 2];
        let mut p = vec![f64::NAN; counts.len()];
        let mut start = 0;
        while start < counts.len() {
            let context = &counts.gram(start)[..n - 1];
            let mut end = start + 1;
            while end < counts.len() && &counts.gram(end)[..n - 1] == context {
                end += 1;
            }
            let mut denominator = 0u64;
            let mut numerator = 0.0f64;
            for (i, &c) in a.iter().enumerate().take(end).skip(start) {
                denominator += c;
                numerator += if pruned(n, i) {
                    c as f64
                } else {
                    discount(n, c)
                };
            }
            let gamma = numerator / denominator as f64;
            let c = lower.find(context).expect("every context is counted");
            gammas[n - 2][c] = gamma;
            for i in start..end {
                if pruned(n, i) {
                    continue;
                }
                let suffix = lower
                    .find(&counts.gram(i)[1..])
                    .expect("every suffix is counted");
                let lower_p = probs[n - 2][suffix];
                debug_assert!(!lower_p.is_nan(), "a kept n-gram's suffix is kept");
                p[i] = (a[i] as f64 - discount(n, a[i])) / denominator as f64 + gamma * lower_p;
            }
            start = end;
        }
        probs.push(p);
    }

    let mut weights = Vec::with_capacity(top);
    let mut kept = Vec::with_capacity(top);
    for n in 1..=top {
        let counts = &orders[n - 1];
        let mut w = Vec::with_capacity(counts.len());
        let mut k = 0u64;
        for i in 0..counts.len() {
            if pruned(n, i) {
                w.push(None);
                continue;
            }
            k += 1;
            let prob = (probs[n - 1][i].log10() as f32).min(0.0);
            let last = *counts.gram(i).last().expect("not empty");
            let backoff = (n < top).then(|| {
                let g = gammas[n - 1][i];
                if g.is_nan() || last == UNK || last == EOS {
                    0.0
                } else {
                    g.log10() as f32
                }
            });
            w.push(Some((prob, backoff)));
        }
        weights.push(w);
        kept.push(k);
    }
    Ok(Estimate {
        weights,
        adjusted,
        discounts,
        count_of_counts,
        kept,
    })
}

/// A trained model: what to write as ARPA, and what training found.
pub struct TrainedLm {
    vocab: Vocab,
    orders: Vec<NgramCounts>,
    estimate: Estimate,
    tokens: u64,
    sentences: u64,
}

impl TrainedLm {
    pub fn order(&self) -> usize {
        self.orders.len()
    }

    /// Words seen, not counting the sentence markers.
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    pub fn sentences(&self) -> u64 {
        self.sentences
    }

    /// Distinct n-grams counted per order (unigrams include `<unk>` and `<s>`).
    pub fn counted(&self) -> Vec<u64> {
        self.orders.iter().map(|o| o.len() as u64).collect()
    }

    /// n-grams kept per order (the ARPA header's counts).
    pub fn kept(&self) -> &[u64] {
        &self.estimate.kept
    }

    /// (D1, D2, D3+) per order.
    pub fn discounts(&self) -> &[[f64; 3]] {
        &self.estimate.discounts
    }

    /// Counts of adjusted counts 1..4 per order, what the discounts come from.
    pub fn count_of_counts(&self) -> &[[u64; 4]] {
        &self.estimate.count_of_counts
    }

    /// Every n-gram of order `n` with its raw and adjusted count (for inspection and tests).
    pub fn ngram_counts(&self, n: usize) -> impl Iterator<Item = (Vec<&[u8]>, u64, u64)> + '_ {
        let counts = &self.orders[n - 1];
        (0..counts.len()).map(move |i| {
            (
                counts
                    .gram(i)
                    .iter()
                    .map(|&id| self.vocab.word(id))
                    .collect(),
                counts.counts[i],
                self.estimate.adjusted[n - 1][i],
            )
        })
    }

    /// Writes the model as an ARPA file.
    pub fn write_arpa_to(&self, out: &mut impl Write) -> std::io::Result<()> {
        super::arpa::write(out, &self.estimate.kept, |n, out| {
            let counts = &self.orders[n - 1];
            for (i, w) in self.estimate.weights[n - 1].iter().enumerate() {
                if let Some((prob, backoff)) = *w {
                    let words = counts.gram(i).iter().map(|&id| self.vocab.word(id));
                    super::arpa::write_entry(out, prob, words, backoff)?;
                }
            }
            Ok(())
        })
    }

    pub fn write_arpa(&self, path: &Path) -> Result<()> {
        let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
        self.write_arpa_to(&mut out)
            .and_then(|_| out.flush())
            .map_err(|e| Error::io(path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lm::NgramModel;

    fn train(texts: &[&str], order: usize, prune: Vec<u64>) -> TrainedLm {
        let config = LmTrainerConfig {
            order,
            prune,
            discount_fallback: Some([0.5, 1.0, 1.5]),
            ..Default::default()
        };
        let mut t = LmTrainer::new(config, LineTokens::Words).unwrap();
        t.feed(texts).unwrap();
        t.train().unwrap()
    }

    fn model(lm: &TrainedLm) -> NgramModel {
        let mut arpa = Vec::new();
        lm.write_arpa_to(&mut arpa).unwrap();
        NgramModel::read_arpa(arpa.as_slice(), "trained").unwrap()
    }

    const TEXT: &str = "the cat sat on the mat\nthe dog sat on the log\na cat and a dog\nthe cat ate\nthe dog ate the cat\non the mat sat a dog\n";

    #[test]
    fn adjusted_counts_are_continuation_counts() {
        let lm = train(&[TEXT], 3, vec![]);
        let find = |n: usize, words: &[&str]| {
            lm.ngram_counts(n)
                .find(|(g, _, _)| {
                    g.iter()
                        .map(|w| std::str::from_utf8(w).unwrap())
                        .eq(words.iter().copied())
                })
                .map(|(_, raw, adj)| (raw, adj))
        };
        // "cat": after "the" (3 times) and "a": two distinct left words.
        assert_eq!(find(1, &["cat"]), Some((4, 2)));
        // "<s> the": starts a sentence, so its raw count.
        assert_eq!(find(2, &["<s>", "the"]), Some((4, 4)));
        // Highest order: raw counts.
        assert_eq!(find(3, &["sat", "on", "the"]), Some((2, 2)));
        assert_eq!(find(1, &["<s>"]), Some((0, 0)));
    }

    #[test]
    fn probabilities_sum_to_one() {
        for prune in [vec![], vec![0, 1]] {
            let lm = train(&[TEXT], 3, prune);
            let m = model(&lm);
            let contexts: [&[&str]; 4] = [&[], &["the"], &["on", "the"], &["zebra", "cat"]];
            for ctx in contexts {
                let ctx: Vec<u32> = ctx.iter().map(|w| m.word_id(w.as_bytes())).collect();
                let mut total = 0.0f64;
                for w in 0..m.vocab_size() as u32 {
                    if w == m.bos() {
                        continue;
                    }
                    let mut ids = ctx.clone();
                    ids.push(w);
                    let with = m.score_ids(&ids, false, false) as f64;
                    let without = m.score_ids(&ctx, false, false) as f64;
                    total += 10f64.powf(with - without);
                }
                assert!((total - 1.0).abs() < 1e-4, "{ctx:?}: {total}");
            }
        }
    }

    #[test]
    fn pruning_keeps_prefixes_and_suffixes() {
        let lm = train(&[TEXT], 3, vec![0, 1, 1]);
        assert!(lm.kept()[1] < lm.counted()[1]);
        model(&lm); // loads, so every kept n-gram's context is kept
    }

    #[test]
    fn discounts_follow_chen_and_goodman() {
        assert_eq!(
            kn_discounts([10, 5, 2, 1]).unwrap()[0],
            1.0 - 2.0 * 0.5 * 5.0 / 10.0
        );
        assert!(kn_discounts([10, 0, 2, 1]).is_err());
    }

    #[test]
    fn bad_settings_are_refused() {
        let bad = |config: LmTrainerConfig| LmTrainer::new(config, LineTokens::Words).is_err();
        assert!(bad(LmTrainerConfig {
            order: 1,
            ..Default::default()
        }));
        assert!(bad(LmTrainerConfig {
            prune: vec![1],
            ..Default::default()
        }));
        assert!(bad(LmTrainerConfig {
            prune: vec![0, 2, 1],
            ..Default::default()
        }));
    }
}
