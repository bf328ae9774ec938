//! Reading fastText's model file: `model.bin` as `save_model` writes it, and the quantized
//! `.ftz` that `quantize` writes (the `lid.176.ftz` language model is one).
//!
//! The layout (little-endian): magic `793712314` and version (`<= 12`); the arguments
//! (`dim ws epoch minCount neg wordNgrams loss model bucket minn maxn lrUpdateRate` as i32,
//! then `t` as f64); the dictionary (`size nwords nlabels` as i32, `ntokens pruneidx_size` as
//! i64, then each entry: its bytes, a NUL, its count as i64 and its type as i8, 0 word, 1
//! label; then `pruneidx_size` pairs of i32, bucket -> row among the kept n-gram rows); a bool
//! (quantized input) and the input matrix; a bool (quantized output) and the output matrix
//! (see `matrix` for both forms). Supervised (`model` 3) models with a softmax (`loss` 3) or a
//! hierarchical softmax (`loss` 1) are read; others are refused with the reason.

use super::loss::{Tree, UNBUILT_COUNT};
use super::matrix::Matrix;
use super::{bracket, fnv, FastText, Loss, PruneMap, EOS};
use crate::error::{Error, Result};

/// The longest character n-gram a model may ask for (see the check on `maxn`).
const MAX_CHAR_NGRAM: i32 = 64;
pub(super) const MAGIC: i32 = 793712314;
const NEWEST_VERSION: i32 = 12;
pub(super) const SUPERVISED: i32 = 3;
pub(super) const HIERARCHICAL_SOFTMAX: i32 = 1;
pub(super) const SOFTMAX: i32 = 3;

/// A cursor over the file's bytes whose errors name the file and where it ends.
pub(super) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    name: &'a str,
}

impl<'a> Reader<'a> {
    pub(super) fn error(&self, message: String) -> Error {
        Error::format(self.name, message)
    }

    pub(super) fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if self.bytes.len() - self.at < n {
            return Err(self.error(format!(
                "fastText model ends inside its {what} (at byte {}; truncated?)",
                self.at
            )));
        }
        let out = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(out)
    }
    pub(super) fn i32(&mut self, what: &str) -> Result<i32> {
        Ok(i32::from_le_bytes(
            self.take(4, what)?.try_into().expect("4 bytes"),
        ))
    }
    pub(super) fn i64(&mut self, what: &str) -> Result<i64> {
        Ok(i64::from_le_bytes(
            self.take(8, what)?.try_into().expect("8 bytes"),
        ))
    }
    pub(super) fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.take(1, what)?[0])
    }
    pub(super) fn f32s(&mut self, n: usize, what: &str) -> Result<Vec<f32>> {
        let len = n
            .checked_mul(4)
            .ok_or_else(|| self.error(format!("fastText {what} of {n} values is too large")))?;
        Ok(self
            .take(len, what)?
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
            .collect())
    }
    /// `rows x cols` values; the sizes come from the file, so they are checked: a corrupt
    /// header is an error, not an overflow or an allocation of terabytes.
    pub(super) fn f32s_checked(&mut self, rows: u64, cols: u64, what: &str) -> Result<Vec<f32>> {
        match rows.checked_mul(cols).and_then(|n| usize::try_from(n).ok()) {
            // (A size past the file's end is a truncated file: `take` says so.)
            Some(n) => self.f32s(n.min(usize::MAX / 4), what),
            None => Err(self.error(format!("fastText {what} of {rows} x {cols} is too large"))),
        }
    }
}

impl FastText {
    /// Reads a fastText model file's bytes (`model.bin` or `.ftz`); `name` (the file) is named
    /// in errors.
    pub fn from_bytes(bytes: &[u8], name: &str) -> Result<FastText> {
        let mut r = Reader { bytes, at: 0, name };
        if r.i32("header")? != MAGIC {
            return Err(r.error("not a fastText model file (wrong magic number)".into()));
        }
        let version = r.i32("header")?;
        if version > NEWEST_VERSION {
            return Err(r.error(format!(
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
            return Err(r.error(format!(
                "fastText model type {model} is not a supervised classifier (3)"
            )));
        }
        if loss != SOFTMAX && loss != HIERARCHICAL_SOFTMAX {
            return Err(r.error(format!(
                "fastText loss {loss} is not supported (softmax, 3, and hierarchical softmax, 1, are)"
            )));
        }
        if version == 11 {
            // fastText's own rule: supervised models of version 11 had no character n-grams.
            maxn = 0;
        }
        let minn = if maxn > 0 { minn } else { 0 };
        // A word of L characters gives up to L * maxn character n-grams: a corrupt maxn would
        // make every long word ask for gigabytes. Released models use 0 to 6.
        if dim < 1
            || word_ngrams < 1
            || bucket < 0
            || minn < 0
            || !(0..=MAX_CHAR_NGRAM).contains(&maxn)
        {
            return Err(r.error(format!(
                "fastText arguments out of range (dim {dim}, wordNgrams {word_ngrams}, bucket {bucket}, minn {minn}, maxn {maxn})"
            )));
        }
        if bucket == 0 && (word_ngrams > 1 || maxn > 0) {
            return Err(r.error("fastText model has n-grams but no buckets for them".into()));
        }
        let size = r.i32("dictionary")?;
        let nwords = r.i32("dictionary")?;
        let nlabels = r.i32("dictionary")?;
        let _ntokens = r.i64("dictionary")?;
        let prune_size = r.i64("dictionary")?;
        if size < 0 || nwords < 0 || nlabels < 1 || nwords.checked_add(nlabels) != Some(size) {
            return Err(r.error(format!("fastText dictionary sizes do not add up ({size} entries, {nwords} words, {nlabels} labels)")));
        }
        let (size, nwords) = (size as usize, nwords as usize);
        let mut entries = Vec::new();
        // (Each entry takes at least 10 bytes of the file: no capacity beyond what it can hold.)
        let mut entry_ends = Vec::with_capacity(size.min(bytes.len() / 10));
        let mut labels = Vec::new();
        let mut label_counts = Vec::new();
        for i in 0..size {
            let rest = &r.bytes[r.at..];
            let len = memchr::memchr(0, rest).ok_or_else(|| {
                r.error("fastText model ends inside its dictionary (truncated?)".into())
            })?;
            let word = &r.take(len + 1, "dictionary")?[..len];
            let count = r.i64("dictionary")?;
            let kind = r.u8("dictionary")?;
            if kind != u8::from(i >= nwords) {
                return Err(r.error(format!(
                    "fastText dictionary entry {i} is not ordered words, then labels"
                )));
            }
            if i >= nwords {
                labels.push(String::from_utf8_lossy(word).into_owned());
                label_counts.push(count);
            }
            entries.extend_from_slice(word);
            entry_ends.push(entries.len());
        }
        // A pruned dictionary (quantized with a cutoff) keeps some n-gram buckets only, each
        // renumbered to its row among the kept ones.
        let prune = if prune_size >= 0 {
            let pairs = usize::try_from(prune_size)
                .ok()
                .filter(|&n| n <= (bytes.len() - r.at) / 8)
                .ok_or_else(|| r.error(format!("fastText dictionary prunes to {prune_size} n-grams, more than the file holds (truncated?)")))?;
            let mut map = PruneMap::with_capacity(pairs);
            for _ in 0..pairs {
                let bucket_id = r.i32("dictionary")?;
                let row = r.i32("dictionary")?;
                if bucket_id < 0 || row < 0 || row as i64 >= prune_size {
                    return Err(r.error(format!(
                        "fastText dictionary maps n-gram bucket {bucket_id} to row {row} of {prune_size}"
                    )));
                }
                map.insert(bucket_id as u32, row as u32);
            }
            Some(map)
        } else {
            None
        };
        let (dim, bucket_rows) = (dim as usize, bucket as usize);
        let quantized_input = r.u8("input matrix")? != 0;
        if prune.is_some() && !quantized_input {
            // fastText refuses this too (a pruned dictionary comes with quantization only).
            return Err(r.error(
                "fastText model has a pruned dictionary but an unquantized input matrix".into(),
            ));
        }
        let input = Matrix::read(&mut r, "input matrix", quantized_input, dim)?;
        let input_rows = nwords + prune_size.try_into().unwrap_or(bucket_rows);
        if input.rows() != input_rows {
            return Err(r.error(format!(
                "fastText input matrix has {} rows; the dictionary and arguments make it {input_rows}",
                input.rows()
            )));
        }
        // fastText reads the output's flag always but quantizes it only with the input.
        let quantized_output = r.u8("output matrix")? != 0 && quantized_input;
        let output = Matrix::read(&mut r, "output matrix", quantized_output, dim)?;
        // One row per label (a hierarchical softmax uses the first `labels - 1`, one per inner
        // node of its tree).
        if output.rows() != labels.len() {
            return Err(r.error(format!(
                "fastText output matrix has {} rows for {} labels",
                output.rows(),
                labels.len()
            )));
        }
        if r.at != bytes.len() {
            return Err(r.error(format!(
                "{} bytes after the fastText model",
                bytes.len() - r.at
            )));
        }
        let loss = if loss == SOFTMAX {
            Loss::Softmax
        } else {
            if let Some(count) = label_counts.iter().find(|&&c| c >= UNBUILT_COUNT) {
                return Err(r.error(format!(
                    "fastText label count {count} is too large for its hierarchical softmax tree (at most {})",
                    UNBUILT_COUNT - 1
                )));
            }
            Loss::Hierarchical(Tree::new(&label_counts))
        };
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
            prune,
            labels,
            input,
            output,
            loss,
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
            let mut word = Vec::new();
            for id in 0..nwords {
                subwords.push(id as u32);
                let entry = model.entry(id);
                if entry != EOS {
                    bracket(entry, &mut word);
                    model.char_ngrams(&word, &mut subwords);
                }
                ends.push(subwords.len());
            }
            model.subwords = subwords;
            model.subword_ends = ends;
        }
        Ok(model)
    }
}
