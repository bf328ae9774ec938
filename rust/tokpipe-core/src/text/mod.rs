//! Text kernels for the pipeline's stages, over Arrow string columns borrowed from Python:
//! [`StrColumn`] is the zero-copy view, the other modules are the kernels; [`words`] is the
//! script-aware word unit that the statistics kernels share.

pub mod blocklist;
pub mod c4;
pub mod chars;
pub mod decont;
mod en_special;
pub mod en_words;
pub mod encode;
pub mod fasttext_prep;
pub mod fineweb;
pub mod gopher;
pub mod keys;
pub mod lines;
pub mod paragraphs;
pub mod sentences;
pub mod stats;
pub mod urls;
pub mod words;

use crate::error::{Error, Result};
use rayon::prelude::*;

/// One binary value per row, written by `write(row, out)` in parallel over chunks of
/// `rows_per_task` rows, joined in row order as (data, Arrow large-binary offsets): the shape of
/// every per-row key column (paragraph and sentence keys).
pub(crate) fn par_binary_rows<F>(rows: usize, rows_per_task: usize, write: F) -> (Vec<u8>, Vec<i64>)
where
    F: Fn(usize, &mut Vec<u8>) + Sync,
{
    let parts: Vec<(Vec<u8>, Vec<usize>)> = (0..rows)
        .collect::<Vec<_>>()
        .par_chunks(rows_per_task)
        .map(|chunk| {
            let mut data = Vec::new();
            let mut lens = Vec::with_capacity(chunk.len());
            for &row in chunk {
                let before = data.len();
                write(row, &mut data);
                lens.push(data.len() - before);
            }
            (data, lens)
        })
        .collect();
    let mut offsets = Vec::with_capacity(rows + 1);
    offsets.push(0i64);
    let mut data = Vec::with_capacity(parts.iter().map(|p| p.0.len()).sum());
    for (part, lens) in parts {
        data.extend_from_slice(&part);
        for len in lens {
            offsets.push(offsets.last().copied().unwrap_or(0) + len as i64);
        }
    }
    (data, offsets)
}

/// Per-row statistics laid out field by field (`N` arrays of `rows.len()` values): how the
/// kernels hand a table of statistics to numpy.
pub(crate) fn field_major<T: Copy + Default, const N: usize>(rows: &[[T; N]]) -> Vec<T> {
    let n = rows.len();
    let mut out = vec![T::default(); N * n];
    for (i, row) in rows.iter().enumerate() {
        for (f, v) in row.iter().enumerate() {
            out[f * n + i] = *v;
        }
    }
    out
}

/// An Arrow string column as Arrow lays it out: `offsets[i]..offsets[i + 1]` is row `i` in
/// `data`. Borrowed, never copied; offsets are checked on construction so rows can be sliced
/// without bounds surprises. Null rows are read as their (empty) offsets range.
pub struct StrColumn<'a> {
    offsets: Offsets<'a>,
    data: &'a [u8],
}

/// `string` columns have 32-bit offsets, `large_string` columns 64-bit ones.
pub enum Offsets<'a> {
    I32(&'a [i32]),
    I64(&'a [i64]),
}

/// The offsets (`i32` for a `string` column, `i64` for a `large_string` one) and data of a
/// string column holding `texts`, in order: the parts the tests build their columns from.
#[cfg(test)]
pub(crate) fn column_parts<O>(texts: impl IntoIterator<Item = impl AsRef<str>>) -> (Vec<O>, Vec<u8>)
where
    O: TryFrom<usize>,
    O::Error: std::fmt::Debug,
{
    let mut offsets = vec![O::try_from(0).unwrap()];
    let mut data = Vec::new();
    for text in texts {
        data.extend_from_slice(text.as_ref().as_bytes());
        offsets.push(O::try_from(data.len()).unwrap());
    }
    (offsets, data)
}

impl<'a> StrColumn<'a> {
    pub fn new(offsets: Offsets<'a>, data: &'a [u8]) -> Result<Self> {
        let column = StrColumn { offsets, data };
        let n = column.offsets_len();
        if n == 0 {
            return Err(Error::InvalidArgument(
                "a string column needs at least one offset".into(),
            ));
        }
        let mut previous = column.offset(0);
        for i in 1..n {
            let next = column.offset(i);
            if next < previous || next > data.len() {
                return Err(Error::InvalidArgument(format!(
                    "string column offset {i} ({next}) is out of order or past the data"
                )));
            }
            previous = next;
        }
        Ok(column)
    }

    fn offsets_len(&self) -> usize {
        match self.offsets {
            Offsets::I32(o) => o.len(),
            Offsets::I64(o) => o.len(),
        }
    }

    fn offset(&self, i: usize) -> usize {
        match self.offsets {
            Offsets::I32(o) => o[i].max(0) as usize,
            Offsets::I64(o) => o[i].max(0) as usize,
        }
    }

    pub fn len(&self) -> usize {
        self.offsets_len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of row `i`'s text.
    pub fn row_bytes(&self, i: usize) -> usize {
        self.offset(i + 1) - self.offset(i)
    }

    /// Consecutive row ranges of about `run_bytes` of text each (at least one row each): units
    /// of parallel work cut by size, so a run of long documents does not hold up the rest.
    /// They depend on the text alone, never on the thread count.
    pub fn runs(&self, run_bytes: usize) -> Vec<std::ops::Range<usize>> {
        let mut runs = Vec::new();
        let (mut start, mut size) = (0, 0);
        for i in 0..self.len() {
            size += self.row_bytes(i);
            if size >= run_bytes {
                runs.push(start..i + 1);
                (start, size) = (i + 1, 0);
            }
        }
        if start < self.len() {
            runs.push(start..self.len());
        }
        runs
    }

    /// Row `i`'s text. Arrow string data is UTF-8 by contract; a row that is not (a producer
    /// that broke the contract) reads as the valid text before the bad byte, not a panic.
    pub fn get(&self, i: usize) -> &'a str {
        let bytes = &self.data[self.offset(i)..self.offset(i + 1)];
        match std::str::from_utf8(bytes) {
            Ok(s) => s,
            // SAFETY-free fallback: the prefix up to the error is valid UTF-8.
            Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
        }
    }
}
