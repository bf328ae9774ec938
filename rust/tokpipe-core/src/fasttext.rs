//! fastText supervised classifiers: reading fastText's own model file (`model.bin`, as
//! `fasttext.train_supervised(...).save_model` writes it) and predicting a line's labels the
//! way fastText's `predict` does, so that the quality classifier scores documents without a
//! round trip through Python lists and on every core with the GIL released.
//!
//! The model: a line's features are its words found in the dictionary (with their character
//! n-grams when the model has them, `minn`/`maxn`), the character n-grams of words not in it,
//! the end-of-line token `</s>`, and the hashed word n-grams up to `wordNgrams` (hashed
//! buckets after the words' rows of the input matrix). The hidden vector is the mean of those
//! features' rows of the input matrix; the labels' scores are the output matrix times it,
//! through a softmax. Every step is fastText's, in the same order and in `f32`, so the
//! probabilities are the ones fastText gives (to the last bit, in the tests).
//!
//! The file layout (little-endian): magic `793712314` and version (`<= 12`); the arguments
//! (`dim ws epoch minCount neg wordNgrams loss model bucket minn maxn lrUpdateRate` as i32,
//! then `t` as f64); the dictionary (`size nwords nlabels` as i32, `ntokens pruneidx_size` as
//! i64, then each entry: its bytes, a NUL, its count as i64 and its type as i8, 0 word, 1
//! label; then `pruneidx_size` pairs of i32); a bool (quantized input) and the input matrix
//! (rows, columns as i64, then the f32 values row by row); a bool (quantized output) and the
//! output matrix. Supervised (`model` 3) softmax (`loss` 3) models without quantization are
//! read; others are refused with the reason.
//!
//! (Over 500 lines: 126 of them are its unit tests; the rest is one model: the reader of its file
//! layout (about 140 lines) and the prediction, which follows fastText's every step.)

use crate::error::{Error, Result};
use crate::text::fasttext_prep::Preparer;
use crate::text::StrColumn;
use rayon::prelude::*;

const MAGIC: i32 = 793712314;
const NEWEST_VERSION: i32 = 12;
const SUPERVISED: i32 = 3;
const SOFTMAX: i32 = 3;
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

/// Asks the CPU to bring `row` into the cache (a hint only: no effect on results).
#[inline]
fn prefetch(row: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    for line in row.chunks(16) {
        // SAFETY: prefetching reads nothing architecturally and cannot fault; the pointer is
        // in bounds anyway.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                line.as_ptr().cast(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = row;
}

/// `<` + `word` + `>` into `out`: how fastText marks a word's ends for its character n-grams.
fn bracket(word: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.push(b'<');
    out.extend_from_slice(word);
    out.push(b'>');
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
    labels: Vec<String>,
    input: Vec<f32>,
    output: Vec<f32>,
}

/// Per-thread scratch space of [`FastText::predict`].
#[derive(Default)]
pub struct Scratch {
    features: Vec<u32>,
    hashes: Vec<i32>,
    word: Vec<u8>,
    ngram: Vec<u8>,
    hidden: Vec<f32>,
    probs: Vec<f32>,
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    name: &'a str,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if self.bytes.len() - self.at < n {
            return Err(Error::format(
                self.name,
                format!(
                    "fastText model ends inside its {what} (at byte {})",
                    self.at
                ),
            ));
        }
        let out = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(out)
    }
    fn i32(&mut self, what: &str) -> Result<i32> {
        Ok(i32::from_le_bytes(
            self.take(4, what)?.try_into().expect("4 bytes"),
        ))
    }
    fn i64(&mut self, what: &str) -> Result<i64> {
        Ok(i64::from_le_bytes(
            self.take(8, what)?.try_into().expect("8 bytes"),
        ))
    }
    fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.take(1, what)?[0])
    }
    fn matrix(&mut self, what: &str, rows: usize, cols: usize) -> Result<Vec<f32>> {
        let m = self.i64(what)?;
        let n = self.i64(what)?;
        if m != rows as i64 || n != cols as i64 {
            return Err(Error::format(
                self.name,
                format!("fastText {what} is {m} x {n}; the dictionary and arguments make it {rows} x {cols}"),
            ));
        }
        // Sizes come from the file: checked, so that a corrupt header is an error, not an
        // overflow or an allocation of terabytes.
        let len = rows
            .checked_mul(cols)
            .and_then(|n| n.checked_mul(4))
            .ok_or_else(|| {
                Error::format(
                    self.name,
                    format!("fastText {what} of {rows} x {cols} is too large"),
                )
            })?;
        let values = self.take(len, what)?;
        Ok(values
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
            .collect())
    }
}

impl FastText {
    /// Reads a fastText model file's bytes; `name` (the file) is named in errors.
    pub fn from_bytes(bytes: &[u8], name: &str) -> Result<FastText> {
        let bad = |message: String| Error::format(name, message);
        let mut r = Reader { bytes, at: 0, name };
        if r.i32("header")? != MAGIC {
            return Err(bad("not a fastText model file (wrong magic number)".into()));
        }
        let version = r.i32("header")?;
        if version > NEWEST_VERSION {
            return Err(bad(format!(
                "fastText model version {version}; versions up to {NEWEST_VERSION} are read"
            )));
        }
        let mut args = [0i32; 12];
        for a in args.iter_mut() {
            *a = r.i32("arguments")?;
        }
        r.take(8, "arguments")?; // t, the sampling threshold: training only
        let [dim, _ws, _epoch, _min_count, _neg, word_ngrams, loss, model, bucket, minn, mut maxn, _lr_update] =
            args;
        if model != SUPERVISED {
            return Err(bad(format!(
                "fastText model type {model} is not a supervised classifier (3)"
            )));
        }
        if loss != SOFTMAX {
            return Err(bad(format!(
                "fastText loss {loss} is not supported (softmax, 3, is)"
            )));
        }
        if version == 11 {
            // fastText's own rule: supervised models of version 11 had no character n-grams.
            maxn = 0;
        }
        let minn = if maxn > 0 { minn } else { 0 };
        if dim < 1 || word_ngrams < 1 || bucket < 0 || minn < 0 || maxn < 0 {
            return Err(bad(format!(
                "fastText arguments out of range (dim {dim}, wordNgrams {word_ngrams}, bucket {bucket}, minn {minn}, maxn {maxn})"
            )));
        }
        if bucket == 0 && (word_ngrams > 1 || maxn > 0) {
            return Err(bad(
                "fastText model has n-grams but no buckets for them".into()
            ));
        }
        let size = r.i32("dictionary")?;
        let nwords = r.i32("dictionary")?;
        let nlabels = r.i32("dictionary")?;
        let _ntokens = r.i64("dictionary")?;
        let prune_size = r.i64("dictionary")?;
        if size < 0 || nwords < 0 || nlabels < 1 || nwords.checked_add(nlabels) != Some(size) {
            return Err(bad(format!("fastText dictionary sizes do not add up ({size} entries, {nwords} words, {nlabels} labels)")));
        }
        let (size, nwords) = (size as usize, nwords as usize);
        let mut entries = Vec::new();
        // (Each entry takes at least 10 bytes of the file: no capacity beyond what it can hold.)
        let mut entry_ends = Vec::with_capacity(size.min(bytes.len() / 10));
        let mut labels = Vec::new();
        for i in 0..size {
            let rest = &r.bytes[r.at..];
            let len = memchr::memchr(0, rest)
                .ok_or_else(|| bad("fastText dictionary ends inside an entry".into()))?;
            let word = r.take(len + 1, "dictionary")?;
            let word = &word[..len];
            r.i64("dictionary")?; // the count: training only
            let kind = r.u8("dictionary")?;
            if kind != u8::from(i >= nwords) {
                return Err(bad(format!(
                    "fastText dictionary entry {i} is not ordered words, then labels"
                )));
            }
            if i >= nwords {
                labels.push(String::from_utf8_lossy(word).into_owned());
            }
            entries.extend_from_slice(word);
            entry_ends.push(entries.len());
        }
        let quantized = || bad("quantized fastText models (.ftz) are not supported".into());
        // Only quantization prunes a dictionary (fastText itself refuses the other cases).
        if prune_size >= 0 || r.u8("input matrix")? != 0 {
            return Err(quantized());
        }
        let (dim, bucket_rows) = (dim as usize, bucket as usize);
        let input = r.matrix("input matrix", nwords + bucket_rows, dim)?;
        if r.u8("output matrix")? != 0 {
            return Err(quantized());
        }
        let output = r.matrix("output matrix", labels.len(), dim)?;
        if r.at != bytes.len() {
            return Err(bad(format!(
                "{} bytes after the fastText model",
                bytes.len() - r.at
            )));
        }
        let mut model = FastText {
            dim,
            word_ngrams: word_ngrams as usize,
            bucket: bucket as u64,
            minn: minn as usize,
            maxn: maxn as usize,
            nwords,
            entries,
            entry_ends,
            table: vec![0; (size * 2).next_power_of_two().max(2)],
            subword_ends: Vec::new(),
            subwords: Vec::new(),
            labels,
            input,
            output,
        };
        let mask = model.table.len() - 1;
        for id in 0..size {
            let word = model.entry(id);
            let mut slot = fnv(word) as usize & mask;
            // A word written twice (fastText never does) is found as its last entry, as
            // fastText's loader leaves it.
            while model.table[slot] != 0 && model.entry(model.table[slot] as usize - 1) != word {
                slot = (slot + 1) & mask;
            }
            model.table[slot] = id as u32 + 1;
        }
        if model.maxn > 0 {
            let (mut subwords, mut ends) = (Vec::new(), Vec::with_capacity(nwords));
            let (mut word, mut ngram) = (Vec::new(), Vec::new());
            for id in 0..nwords {
                subwords.push(id as u32);
                let entry = model.entry(id);
                if entry != EOS {
                    bracket(entry, &mut word);
                    model.char_ngrams(&word, &mut subwords, &mut ngram);
                }
                ends.push(subwords.len());
            }
            model.subwords = subwords;
            model.subword_ends = ends;
        }
        Ok(model)
    }

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

    /// The labels, in the order of the probabilities [`FastText::predict`] gives.
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// Appends the bucket rows of the character n-grams of `word` (`<` + word + `>`): every
    /// run of `minn..=maxn` characters but a lone `<` or `>`.
    fn char_ngrams(&self, word: &[u8], features: &mut Vec<u32>, ngram: &mut Vec<u8>) {
        let continuation = |b: u8| b & 0xC0 == 0x80;
        for i in 0..word.len() {
            if continuation(word[i]) {
                continue;
            }
            ngram.clear();
            let mut j = i;
            let mut n = 1;
            while j < word.len() && n <= self.maxn {
                ngram.push(word[j]);
                j += 1;
                while j < word.len() && continuation(word[j]) {
                    ngram.push(word[j]);
                    j += 1;
                }
                if n >= self.minn && !(n == 1 && (i == 0 || j == word.len())) {
                    let bucket = fnv(ngram) as u64 % self.bucket;
                    features.push((self.nwords as u64 + bucket) as u32);
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
                        self.char_ngrams(&s.word, &mut s.features, &mut s.ngram);
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
                s.features
                    .push((self.nwords as u64 + h % self.bucket) as u32);
            }
        }
    }

    /// The probability of each label (in [`FastText::labels`] order) for `line`, fastText's
    /// softmax over the output matrix times the mean of the line's feature rows.
    pub fn predict<'s>(&self, line: &[u8], s: &'s mut Scratch) -> &'s [f32] {
        self.features(line, s);
        let dim = self.dim;
        s.hidden.clear();
        s.hidden.resize(dim, 0.0);
        // The rows are scattered over a matrix that is often larger than the caches: each
        // is asked for a few features ahead of its turn, so the loads overlap. The sum's order
        // stays fastText's.
        const AHEAD: usize = 8;
        for (k, &f) in s.features.iter().enumerate() {
            if let Some(&next) = s.features.get(k + AHEAD) {
                prefetch(&self.input[next as usize * dim..(next as usize + 1) * dim]);
            }
            let row = &self.input[f as usize * dim..(f as usize + 1) * dim];
            for (h, &x) in s.hidden.iter_mut().zip(row) {
                *h += x;
            }
        }
        // fastText multiplies by the reciprocal (in f32), not divides.
        let scale = (1.0 / s.features.len() as f64) as f32;
        for h in s.hidden.iter_mut() {
            *h *= scale;
        }
        s.probs.clear();
        for row in self.output.chunks_exact(dim) {
            let mut d = 0.0f32;
            for (&w, &h) in row.iter().zip(&s.hidden) {
                d += w * h;
            }
            s.probs.push(d);
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
        &s.probs
    }

    /// The top label and its probability as fastText's `predict(line, k=1)` reports them:
    /// the label with the largest `log(p + 1e-5)` (the later label on a tie), and
    /// `exp(log(p + 1e-5))`, i.e. its probability plus 1e-5 (rounded in f32).
    pub fn predict_top(&self, line: &[u8], s: &mut Scratch) -> (usize, f32) {
        let probs = self.predict(line, s);
        let std_log = |p: f32| ((p as f64 + 1e-5).ln()) as f32;
        let mut best = 0;
        let mut best_log = std_log(probs[0]);
        for (i, &p) in probs.iter().enumerate().skip(1) {
            let l = std_log(p);
            if l >= best_log {
                best = i;
                best_log = l;
            }
        }
        (best, best_log.exp())
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
/// read as empty text.
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
                let (top, p) = model.predict_top(line, &mut scratch);
                let p = p as f64;
                *score = if top == positive { p } else { 1.0 - p }.clamp(0.0, 1.0);
            }
        });
    Ok(scores)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_sign_extends_high_bytes() {
        // FNV-1a of "a" is 0xe40c292c; a byte >= 0x80 is xored as 0xffffff80 and up.
        assert_eq!(fnv(b"a"), 0xe40c292c);
        let unsigned = (2166136261u32 ^ 0xC3).wrapping_mul(16777619);
        let signed = (2166136261u32 ^ 0xFFFF_FFC3).wrapping_mul(16777619);
        assert_ne!(unsigned, signed);
        assert_eq!(fnv(&[0xC3]), signed);
    }

    /// A model file as fastText lays it out: `words` then `labels` in the dictionary, no
    /// buckets, no character n-grams, word unigrams only.
    fn model_file(
        dim: i32,
        words: &[&str],
        labels: &[&str],
        input: &[f32],
        output: &[f32],
    ) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend(MAGIC.to_le_bytes());
        f.extend(12i32.to_le_bytes());
        for a in [dim, 5, 5, 1, 5, 1, SOFTMAX, SUPERVISED, 0, 0, 0, 100] {
            f.extend(a.to_le_bytes());
        }
        f.extend(1e-4f64.to_le_bytes());
        f.extend(((words.len() + labels.len()) as i32).to_le_bytes());
        f.extend((words.len() as i32).to_le_bytes());
        f.extend((labels.len() as i32).to_le_bytes());
        f.extend(100i64.to_le_bytes());
        f.extend((-1i64).to_le_bytes());
        for (kind, entries) in [(0u8, words), (1u8, labels)] {
            for e in entries {
                f.extend(e.as_bytes());
                f.push(0);
                f.extend(7i64.to_le_bytes());
                f.push(kind);
            }
        }
        for (rows, values) in [(words.len(), input), (labels.len(), output)] {
            f.push(0);
            f.extend((rows as i64).to_le_bytes());
            f.extend((dim as i64).to_le_bytes());
            f.extend(values.iter().flat_map(|v| v.to_le_bytes()));
        }
        f
    }

    #[test]
    fn predict_follows_fasttexts_rules() {
        // Rows: </s> = (1, 0), "a" = (0, 1); label x scores the first coordinate, y the second.
        let file = model_file(
            2,
            &["</s>", "a"],
            &["__label__x", "__label__y"],
            &[1., 0., 0., 1.],
            &[1., 0., 0., 1.],
        );
        let model = FastText::from_bytes(&file, "m.bin").unwrap();
        assert_eq!(model.labels(), ["__label__x", "__label__y"]);
        let mut s = Scratch::default();
        let sigmoid = |x: f32| 1.0 / (1.0 + (-x).exp());
        // "a", then "</s>": hidden (0.5, 0.5), a tie, which the later label wins.
        for line in [
            "a",
            "a b",
            " a\tb\x0b",
            "__label__x a __label__other",
            "a\nzzz a a",
            "a </s> a a",
        ] {
            assert_eq!(
                model.predict(line.as_bytes(), &mut s),
                [0.5, 0.5],
                "{line:?}"
            );
            let (top, p) = model.predict_top(line.as_bytes(), &mut s);
            assert_eq!(top, 1, "{line:?}");
            assert!((p - 0.50001).abs() < 1e-7, "{line:?}");
        }
        // "a a </s>": hidden (1/3, 2/3).
        let probs = model.predict(b"a a", &mut s).to_vec();
        assert!(
            (probs[1] - sigmoid(1.0 / 3.0)).abs() < 1e-6
                && (probs[0] + probs[1] - 1.0).abs() < 1e-6
        );
        // "</s>" alone (an empty line): hidden (1, 0), label x.
        assert_eq!(model.predict_top(b"", &mut s).0, 0);
        // A word written twice is its last entry, as fastText's loader leaves it.
        let file = model_file(
            2,
            &["</s>", "a", "a"],
            &["__label__x", "__label__y"],
            &[1., 0., 0., 1., 9., 0.],
            &[1., 0., 0., 1.],
        );
        let model = FastText::from_bytes(&file, "m.bin").unwrap();
        assert_eq!(model.predict_top(b"a a a", &mut s).0, 0);
    }

    #[test]
    fn bad_files_are_refused_with_a_reason() {
        let err = |bytes: &[u8]| {
            FastText::from_bytes(bytes, "m.bin")
                .err()
                .map(|e| e.to_string())
                .unwrap()
        };
        assert!(err(b"").contains("m.bin: fastText model ends inside its header"));
        assert!(err(&[0u8; 8]).contains("wrong magic"));
        let mut header = MAGIC.to_le_bytes().to_vec();
        header.extend(13i32.to_le_bytes());
        assert!(err(&header).contains("version 13"));
        let mut header = MAGIC.to_le_bytes().to_vec();
        header.extend(12i32.to_le_bytes());
        for a in [16, 5, 5, 1, 5, 2, 1, 3, 100, 0, 0, 100] {
            header.extend(i32::to_le_bytes(a));
        }
        header.extend(0f64.to_le_bytes());
        assert!(err(&header).contains("loss 1 is not supported"));
    }
}
