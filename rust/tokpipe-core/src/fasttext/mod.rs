//! fastText supervised classifiers: reading fastText's own model files (`model.bin`, as
//! `fasttext.train_supervised(...).save_model` writes it, and the quantized `.ftz` that
//! `quantize` writes, such as the `lid.176.ftz` language-ID model) and predicting a line's
//! labels the way fastText's `predict` does, so that the quality classifier and the `language`
//! stage score documents without a round trip through Python lists and on every core with the
//! GIL released.
//!
//! The model: a line's features are its words found in the dictionary (with their character
//! n-grams when the model has them, `minn`/`maxn`), the character n-grams of words not in it,
//! the end-of-line token `</s>`, and the hashed word n-grams up to `wordNgrams` (hashed
//! buckets after the words' rows of the input matrix; in a pruned `.ftz`, only the buckets
//! kept, renumbered). The hidden vector is the mean of those features' rows of the input
//! matrix; the labels' scores come from the output matrix and the loss (`loss`: softmax, or
//! the hierarchical softmax of `lid.176`). Every step is fastText's, in the same order and in
//! `f32`, so the probabilities are the ones fastText gives (to the last bit, in the tests).
//!
//! The module map: `file` reads the file layout, `matrix` the dense and product-quantized
//! matrices, `loss` the softmax and hierarchical softmax with fastText's k-best heap, `tests`
//! the unit tests; this file holds the model, its features and the column-wide entry points.

mod file;
mod loss;
mod matrix;

use crate::error::{Error, Result};
use crate::text::fasttext_prep::Preparer;
use crate::text::StrColumn;
pub use loss::Prediction;
use loss::{softmax_k_best, KBest, Tree};
use matrix::Matrix;
use rayon::prelude::*;

const EOS: &[u8] = b"</s>";
const LABEL_PREFIX: &[u8] = b"__label__";

/// fastText's word hash: 32-bit FNV-1a over the bytes taken as *signed* chars (a byte
/// of 0x80 or more is sign-extended before the xor), as every released model was trained.
#[inline]
fn fnv(bytes: &[u8]) -> u32 {
    let mut h: u32 = 2166136261;
    for &b in bytes {
        h ^= b as i8 as i32 as u32;
        h = h.wrapping_mul(16777619);
    }
    h
}

/// The separators of fastText's reader: a word is what lies between them.
#[inline]
fn is_separator(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t' | 0x0b | 0x0c | 0)
}

/// `<` + `word` + `>` into `out`: how fastText marks a word's ends for its character n-grams.
fn bracket(word: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.push(b'<');
    out.extend_from_slice(word);
    out.push(b'>');
}

/// A pruned dictionary's n-gram buckets -> their rows among the kept ones: open addressing
/// (a power of two long, probed linearly) of `(bucket + 1, row)`, `bucket + 1 == 0` empty.
/// Looked up for every character n-gram of an unknown word, so kept small and flat.
struct PruneMap {
    slots: Vec<(u32, u32)>,
    len: usize,
}

impl PruneMap {
    fn with_capacity(n: usize) -> PruneMap {
        PruneMap {
            slots: vec![(0, 0); (n * 2).next_power_of_two().max(2)],
            len: 0,
        }
    }

    #[inline]
    fn slot(&self, bucket: u32) -> usize {
        let mask = self.slots.len() - 1;
        let mut slot = (bucket.wrapping_mul(0x9E37_79B9) >> 7) as usize & mask;
        while self.slots[slot].0 != 0 && self.slots[slot].0 != bucket + 1 {
            slot = (slot + 1) & mask;
        }
        slot
    }

    /// A bucket given twice keeps its last row, as fastText's map does.
    fn insert(&mut self, bucket: u32, row: u32) {
        let slot = self.slot(bucket);
        self.len += usize::from(self.slots[slot].0 == 0);
        self.slots[slot] = (bucket + 1, row);
    }

    #[inline]
    fn get(&self, bucket: u32) -> Option<u32> {
        let (key, row) = self.slots[self.slot(bucket)];
        (key != 0).then_some(row)
    }
}

enum Loss {
    Softmax,
    Hierarchical(Tree),
}

/// A loaded fastText supervised model.
pub struct FastText {
    dim: usize,
    word_ngrams: usize,
    bucket: u64,
    minn: usize,
    maxn: usize,
    nwords: usize,
    /// Every dictionary entry's bytes (words, then labels), back to back.
    entries: Vec<u8>,
    entry_ends: Vec<usize>,
    /// Open-addressing table (a power of two long) of entry ids + 1, 0 for an empty slot,
    /// placed by `fnv` and probed linearly.
    table: Vec<u32>,
    /// The features of each word: itself, then its character n-grams (`maxn > 0` only).
    /// Features are rows of the input matrix: below 2^32, as words and buckets each number
    /// below 2^31.
    subword_ends: Vec<usize>,
    subwords: Vec<u32>,
    /// A pruned dictionary's kept buckets (None: not pruned, every bucket has its row).
    prune: Option<PruneMap>,
    labels: Vec<String>,
    input: Matrix,
    output: Matrix,
    loss: Loss,
}

/// Per-thread scratch space of [`FastText::predict`].
#[derive(Default)]
pub struct Scratch {
    features: Vec<u32>,
    hashes: Vec<i32>,
    word: Vec<u8>,
    hidden: Vec<f32>,
    probs: Vec<f32>,
    best: Vec<Prediction>,
    /// The hierarchical softmax's pending branches (`Tree::k_best`).
    branches: Vec<(usize, f32)>,
}

impl FastText {
    fn entry(&self, id: usize) -> &[u8] {
        let start = if id == 0 { 0 } else { self.entry_ends[id - 1] };
        &self.entries[start..self.entry_ends[id]]
    }

    /// The dictionary id of `word` (whose `fnv` is `h`), if it has one.
    #[inline]
    fn find(&self, word: &[u8], h: u32) -> Option<usize> {
        let mask = self.table.len() - 1;
        let mut slot = h as usize & mask;
        loop {
            match self.table[slot] {
                0 => return None,
                id if self.entry(id as usize - 1) == word => return Some(id as usize - 1),
                _ => slot = (slot + 1) & mask,
            }
        }
    }

    /// The labels, in the model's order (the indices [`FastText::predict`] gives).
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// Appends the input row of n-gram bucket `bucket` (fastText's `pushHash`): in a pruned
    /// dictionary, its renumbered row if it was kept, nothing if not.
    #[inline]
    fn push_bucket(&self, bucket: u64, features: &mut Vec<u32>) {
        let row = match &self.prune {
            None => bucket,
            Some(map) => match map.get(bucket as u32) {
                Some(row) => row as u64,
                None => return,
            },
        };
        features.push((self.nwords as u64 + row) as u32);
    }

    /// Appends the bucket rows of the character n-grams of `word` (`<` + word + `>`): every
    /// run of `minn..=maxn` characters but a lone `<` or `>`. The n-grams starting at one
    /// character are prefixes of each other, so each one's hash extends the last one's
    /// (FNV-1a goes byte by byte: the same hash as hashing it whole).
    fn char_ngrams(&self, word: &[u8], features: &mut Vec<u32>) {
        if self.prune.as_ref().is_some_and(|map| map.len == 0) {
            return; // pruned of every n-gram
        }
        let continuation = |b: u8| b & 0xC0 == 0x80;
        for i in 0..word.len() {
            if continuation(word[i]) {
                continue;
            }
            let mut h: u32 = 2166136261;
            let mut j = i;
            let mut n = 1;
            while j < word.len() && n <= self.maxn {
                h = (h ^ word[j] as i8 as i32 as u32).wrapping_mul(16777619);
                j += 1;
                while j < word.len() && continuation(word[j]) {
                    h = (h ^ word[j] as i8 as i32 as u32).wrapping_mul(16777619);
                    j += 1;
                }
                if n >= self.minn && !(n == 1 && (i == 0 || j == word.len())) {
                    self.push_bucket(h as u64 % self.bucket, features);
                }
                n += 1;
            }
        }
    }

    /// The features (input matrix rows) of the first line of `line`, as fastText's reader
    /// finds them when the line ends with a newline (an end-of-line token `</s>` last).
    fn features(&self, line: &[u8], s: &mut Scratch) {
        s.features.clear();
        s.hashes.clear();
        let mut at = 0;
        loop {
            while at < line.len() && is_separator(line[at]) && line[at] != b'\n' {
                at += 1;
            }
            let word = if at == line.len() || line[at] == b'\n' {
                EOS
            } else {
                let start = at;
                while at < line.len() && !is_separator(line[at]) {
                    at += 1;
                }
                &line[start..at]
            };
            let h = fnv(word);
            let id = self.find(word, h);
            let is_label = match id {
                Some(id) => id >= self.nwords,
                None => word.starts_with(LABEL_PREFIX),
            };
            if !is_label {
                match id {
                    Some(id) if self.maxn == 0 => s.features.push(id as u32),
                    Some(id) => {
                        let start = if id == 0 {
                            0
                        } else {
                            self.subword_ends[id - 1]
                        };
                        s.features
                            .extend_from_slice(&self.subwords[start..self.subword_ends[id]]);
                    }
                    None if word != EOS && self.maxn > 0 => {
                        bracket(word, &mut s.word);
                        self.char_ngrams(&s.word, &mut s.features);
                    }
                    None => {}
                }
                // Stored as fastText stores them (i32), and widened with its sign below.
                s.hashes.push(h as i32);
            }
            if word == EOS {
                break;
            }
        }
        for i in 0..s.hashes.len() {
            let mut h = s.hashes[i] as i64 as u64;
            for j in i + 1..s.hashes.len().min(i + self.word_ngrams) {
                h = h
                    .wrapping_mul(116049371)
                    .wrapping_add(s.hashes[j] as i64 as u64);
                self.push_bucket(h % self.bucket, &mut s.features);
            }
        }
    }

    /// The hidden vector of `line` into `s.hidden`: the mean of its features' input rows.
    /// False when the line has no features (fastText then predicts nothing).
    fn hidden(&self, line: &[u8], s: &mut Scratch) -> bool {
        self.features(line, s);
        if s.features.is_empty() {
            return false;
        }
        s.hidden.clear();
        s.hidden.resize(self.dim, 0.0);
        // The rows are scattered over a matrix that is often larger than the caches: each
        // is asked for a few features ahead of its turn, so the loads overlap. The sum's order
        // stays fastText's.
        const AHEAD: usize = 8;
        for (k, &f) in s.features.iter().enumerate() {
            if let Some(&next) = s.features.get(k + AHEAD) {
                self.input.prefetch(next as usize);
            }
            self.input.add_row(f as usize, &mut s.hidden);
        }
        // fastText multiplies by the reciprocal (in f32), not divides.
        let scale = (1.0 / s.features.len() as f64) as f32;
        for h in s.hidden.iter_mut() {
            *h *= scale;
        }
        true
    }

    /// The softmax of the output matrix times `s.hidden` into `s.probs`.
    fn softmax(&self, s: &mut Scratch) {
        s.probs.clear();
        for i in 0..self.labels.len() {
            s.probs.push(self.output.dot_row(i, &s.hidden));
        }
        let max = s.probs.iter().copied().fold(s.probs[0], f32::max);
        let mut z = 0.0f32;
        for p in s.probs.iter_mut() {
            *p = (*p - max).exp();
            z += *p;
        }
        for p in s.probs.iter_mut() {
            *p /= z;
        }
    }

    /// fastText's `predict(line, k, threshold)`: up to `k` (at least 1) `(log(p + 1e-5), label
    /// index)`, best first, those with `p` under `threshold` left out; none when the line has
    /// no features. fastText's Python `predict` reports `exp` of the first (in f32).
    pub fn predict<'s>(
        &self,
        line: &[u8],
        k: usize,
        threshold: f32,
        s: &'s mut Scratch,
    ) -> &'s [Prediction] {
        s.best.clear();
        if !self.hidden(line, s) {
            return &s.best;
        }
        if let Loss::Softmax = self.loss {
            self.softmax(s);
        }
        let mut best = KBest {
            heap: &mut s.best,
            k: k.max(1),
        };
        match &self.loss {
            Loss::Softmax => softmax_k_best(&s.probs, threshold, &mut best),
            Loss::Hierarchical(tree) => tree.k_best(
                &self.output,
                &s.hidden,
                threshold,
                &mut best,
                &mut s.branches,
            ),
        }
        best.sort();
        &s.best
    }

    /// The top label and its probability as fastText's `predict(line, k=1)` reports them:
    /// the label with the largest `log(p + 1e-5)` (the later label on a tie), and
    /// `exp(log(p + 1e-5))`, i.e. its probability plus 1e-5 (rounded in f32). None when the
    /// line has no features.
    pub fn predict_top(&self, line: &[u8], s: &mut Scratch) -> Option<(usize, f32)> {
        self.predict(line, 1, 0.0, s)
            .first()
            .map(|&(score, label)| (label, score.exp()))
    }
}

const ROWS_PER_TASK: usize = 16;

/// What the rows of a column given to [`quality_scores`] are.
#[derive(Clone, Copy)]
pub enum Rows {
    /// Documents, prepared (see `text::fasttext_prep`) from their first `max_chars`
    /// characters (all when None) before they are scored.
    Documents { max_chars: Option<usize> },
    /// Lines already prepared.
    Prepared,
}

/// The probability of label `positive` for every row of `column`, from `predict_top` as the
/// quality classifier reads fastText's top-1 prediction: the top label's probability, or one
/// minus it when the top label is the other one (two labels), clipped to [0, 1]. Null rows
/// read as empty text; a row with no features (possible only in a model without `</s>`)
/// scores 0.
pub fn quality_scores(
    model: &FastText,
    column: &StrColumn<'_>,
    positive: usize,
    rows: Rows,
) -> Result<Vec<f64>> {
    if model.labels.len() != 2 || positive >= 2 {
        return Err(Error::InvalidArgument(format!(
            "a quality score needs a model of two labels and one of them; the model has {} labels",
            model.labels.len()
        )));
    }
    let mut scores = vec![0.0f64; column.len()];
    scores
        .par_chunks_mut(ROWS_PER_TASK)
        .enumerate()
        .for_each(|(chunk, out)| {
            let mut preparer = Preparer::default();
            let mut scratch = Scratch::default();
            let mut line = Vec::new();
            for (j, score) in out.iter_mut().enumerate() {
                let text = column.get(chunk * ROWS_PER_TASK + j);
                let line: &[u8] = match rows {
                    Rows::Documents { max_chars } => {
                        line.clear();
                        preparer.prepare(text, max_chars, &mut line);
                        &line
                    }
                    Rows::Prepared => text.as_bytes(),
                };
                *score = match model.predict_top(line, &mut scratch) {
                    Some((top, p)) => {
                        let p = p as f64;
                        if top == positive { p } else { 1.0 - p }.clamp(0.0, 1.0)
                    }
                    None => 0.0,
                };
            }
        });
    Ok(scores)
}

/// The top label of every row of `column` as fastText's `predict(text, k=1)` gives it for the
/// row's first `max_chars` characters (all when None) with each newline read as a space (the
/// whole text as one line, as fastText's Python `predict` needs it): the label's index (-1 when
/// the text has no features) and its reported probability (`exp(log(p + 1e-5))`, 0 for -1).
/// Null rows read as empty text. This is the `language` stage's fastText backend.
pub fn top_labels(
    model: &FastText,
    column: &StrColumn<'_>,
    max_chars: Option<usize>,
) -> (Vec<i32>, Vec<f32>) {
    let mut out = vec![(-1i32, 0.0f32); column.len()];
    out.par_chunks_mut(ROWS_PER_TASK)
        .enumerate()
        .for_each(|(chunk, out)| {
            let mut scratch = Scratch::default();
            let mut line = Vec::new();
            for (j, slot) in out.iter_mut().enumerate() {
                let text = column.get(chunk * ROWS_PER_TASK + j);
                let text = match max_chars.and_then(|n| text.char_indices().nth(n)) {
                    Some((end, _)) => &text[..end],
                    None => text,
                };
                line.clear();
                line.extend(text.bytes().map(|b| if b == b'\n' { b' ' } else { b }));
                if let Some((label, p)) = model.predict_top(&line, &mut scratch) {
                    *slot = (label as i32, p);
                }
            }
        });
    out.into_iter().unzip()
}

#[cfg(test)]
mod tests;
