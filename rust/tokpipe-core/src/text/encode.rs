//! Encoding a whole Arrow string column into one flat id buffer plus row offsets, the layout
//! of an Arrow `large_list<uint32>` (or `<uint16>`) column, so a caller never makes an object
//! per document.
//!
//! Rows are encoded in parallel in runs of about [`RUN_BYTES`] of text; each run fills its own
//! buffers, and the runs are then written, in order and in parallel, straight into the
//! caller's output buffers (the Python `bytes` that become the Arrow buffers): the same output
//! for any thread count, and one copy of the ids after encoding.

use crate::error::{Error, Result};
use crate::text::StrColumn;
use crate::tokenizer::{in_pool, AllowedSpecial, Tokenizer};
use rayon::prelude::*;
use std::mem::MaybeUninit;

// Text per parallel run. Runs are cut by size, not by row count: documents range from a
// dictionary entry to a whole manual, and runs of 64 rows left 16 threads waiting on the runs
// that held the largest pages (encoding scaled 4.6x on 16 cores). A run still holds at least
// one row, so one huge document is one run. The cut depends on the text alone, so the output
// does not depend on the thread count.
const RUN_BYTES: usize = 256 << 10;

/// The ids of a column, run by run; [`EncodedColumn::write_ids`] and
/// [`EncodedColumn::write_offsets`] lay them out as Arrow wants them.
pub struct EncodedColumn {
    runs: Vec<EncodedRun>,
    /// Index of each run's first id in the flat output, and the total at the end.
    starts: Vec<usize>,
    rows: usize,
}

struct EncodedRun {
    ids: Vec<u32>,
    /// Ids of each row of the run.
    lengths: Vec<u32>,
}

/// How ids are stored in the output buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdWidth {
    U16,
    U32,
}

impl IdWidth {
    pub fn bytes(self) -> usize {
        match self {
            IdWidth::U16 => 2,
            IdWidth::U32 => 4,
        }
    }
}

impl EncodedColumn {
    /// Ids in the whole column.
    pub fn total_ids(&self) -> usize {
        *self.starts.last().unwrap_or(&0)
    }

    /// Rows in the column.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Writes every id, in row order, into `out` (`total_ids() * width.bytes()` bytes) as
    /// native-endian integers, on `num_threads` threads. An id too large for `U16` is an error
    /// (a vocabulary that does not fit was asked to). `out` may be uninitialised: every byte
    /// is written (why: a caller's buffer cleared first is cleared on one thread, and for a
    /// column of 20 MB that was a tenth of two threads' encode).
    pub fn write_ids(
        &self,
        out: &mut [MaybeUninit<u8>],
        width: IdWidth,
        num_threads: Option<usize>,
    ) -> Result<()> {
        let w = width.bytes();
        if out.len() != self.total_ids() * w {
            return Err(Error::InvalidArgument(format!(
                "id buffer of {} bytes for {} ids of {w} bytes",
                out.len(),
                self.total_ids()
            )));
        }
        let slices = split_by(out, self.runs.iter().map(|r| r.ids.len() * w));
        in_pool(num_threads, || {
            self.runs
                .par_iter()
                .zip(slices)
                .try_for_each(|(run, dst)| match width {
                    IdWidth::U32 => {
                        for (d, id) in dst.chunks_exact_mut(4).zip(&run.ids) {
                            put(d, &id.to_ne_bytes());
                        }
                        Ok(())
                    }
                    IdWidth::U16 => {
                        for (d, &id) in dst.chunks_exact_mut(2).zip(&run.ids) {
                            let narrow = u16::try_from(id).map_err(|_| {
                                Error::InvalidArgument(format!(
                                    "token id {id} does not fit in uint16"
                                ))
                            })?;
                            put(d, &narrow.to_ne_bytes());
                        }
                        Ok(())
                    }
                })
        })?
    }

    /// Writes the `rows() + 1` row offsets (native-endian `i64`, starting at 0: row `i` is ids
    /// `offsets[i]..offsets[i + 1]`) into `out`, which may be uninitialised.
    pub fn write_offsets(
        &self,
        out: &mut [MaybeUninit<u8>],
        num_threads: Option<usize>,
    ) -> Result<()> {
        if out.len() != (self.rows + 1) * 8 {
            return Err(Error::InvalidArgument(format!(
                "offset buffer of {} bytes for {} rows",
                out.len(),
                self.rows
            )));
        }
        let (first, rest) = out.split_at_mut(8);
        put(first, &0i64.to_ne_bytes());
        let slices = split_by(rest, self.runs.iter().map(|r| r.lengths.len() * 8));
        in_pool(num_threads, || {
            self.runs
                .par_iter()
                .zip(&self.starts)
                .zip(slices)
                .for_each(|((run, &start), dst)| {
                    let mut at = start as i64;
                    for (d, &n) in dst.chunks_exact_mut(8).zip(&run.lengths) {
                        at += i64::from(n);
                        put(d, &at.to_ne_bytes());
                    }
                })
        })
    }

    /// The flat ids (tests and callers that want a `Vec`).
    pub fn ids(&self) -> Vec<u32> {
        self.runs
            .iter()
            .flat_map(|r| r.ids.iter().copied())
            .collect()
    }

    /// The row offsets as [`EncodedColumn::write_offsets`] lays them out.
    pub fn offsets(&self) -> Vec<i64> {
        let mut out = Vec::with_capacity(self.rows + 1);
        let mut at = 0i64;
        out.push(at);
        for n in self.runs.iter().flat_map(|r| &r.lengths) {
            at += i64::from(*n);
            out.push(at);
        }
        out
    }
}

/// Writes `bytes` into the start of `dst`.
#[inline(always)]
fn put(dst: &mut [MaybeUninit<u8>], bytes: &[u8]) {
    for (d, &b) in dst.iter_mut().zip(bytes) {
        d.write(b);
    }
}

/// `out` cut into consecutive pieces of the given sizes.
fn split_by(
    mut out: &mut [MaybeUninit<u8>],
    sizes: impl Iterator<Item = usize>,
) -> Vec<&mut [MaybeUninit<u8>]> {
    sizes
        .map(|n| {
            let (head, tail) = std::mem::take(&mut out).split_at_mut(n);
            out = tail;
            head
        })
        .collect()
}

impl Tokenizer {
    /// Encodes each row of `column` as [`Tokenizer::encode`] does (special tokens only where
    /// `allowed` says), on `num_threads` threads (all cores when `None` or 0). `append`, when
    /// given, is pushed after the ids of each row that has any (the end-of-document token); a
    /// row without tokens stays empty, so a caller can tell (and drop) documents with nothing
    /// to train on.
    pub fn encode_column(
        &self,
        column: &StrColumn<'_>,
        allowed: &AllowedSpecial,
        append: Option<u32>,
        num_threads: Option<usize>,
    ) -> Result<EncodedColumn> {
        self.encode_column_in_runs(column, allowed, append, num_threads, RUN_BYTES)
    }

    fn encode_column_in_runs(
        &self,
        column: &StrColumn<'_>,
        allowed: &AllowedSpecial,
        append: Option<u32>,
        num_threads: Option<usize>,
        run_bytes: usize,
    ) -> Result<EncodedColumn> {
        let ranges = column.runs(run_bytes);
        let runs = in_pool(num_threads, || {
            ranges
                .into_par_iter()
                .map(|rows| {
                    let mut ids = Vec::new();
                    let mut lengths = Vec::with_capacity(rows.len());
                    for i in rows {
                        let before = ids.len();
                        self.encode_into(column.get(i), allowed, &mut ids)?;
                        if let Some(eos) = append {
                            if ids.len() > before {
                                ids.push(eos);
                            }
                        }
                        lengths.push((ids.len() - before) as u32);
                    }
                    Ok(EncodedRun { ids, lengths })
                })
                .collect::<Result<Vec<_>>>()
        })??;
        let mut starts = Vec::with_capacity(runs.len() + 1);
        let mut total = 0;
        starts.push(0);
        for run in &runs {
            total += run.ids.len();
            starts.push(total);
        }
        Ok(EncodedColumn {
            runs,
            starts,
            rows: column.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::Offsets;

    use crate::models::bpe::BpeModel;
    use crate::pre_tokenizers::PreTokenizer;

    /// The `n` bytes `write` puts in a buffer, which starts as a pattern no test expects
    /// (so a byte left unwritten shows, and every byte read is initialised).
    fn written(n: usize, write: impl FnOnce(&mut [MaybeUninit<u8>]) -> Result<()>) -> Vec<u8> {
        let mut buf = vec![MaybeUninit::new(0xA5u8); n];
        write(&mut buf).unwrap();
        // SAFETY: every byte was initialised with the pattern.
        buf.into_iter()
            .map(|b| unsafe { b.assume_init() })
            .collect()
    }

    #[test]
    fn same_ids_as_encode_with_eos_after_non_empty_rows() {
        let mut vocab: Vec<(Vec<u8>, u32)> = (0..=255u8).map(|b| (vec![b], b as u32)).collect();
        for (i, t) in ["th", "the", " the", "in", "ing"].iter().enumerate() {
            vocab.push((t.as_bytes().to_vec(), 256 + i as u32));
        }
        let tok = Tokenizer::new(
            PreTokenizer::new("gpt2").unwrap(),
            BpeModel::from_ranks(vocab, "test").unwrap(),
            vec![],
        )
        .unwrap();
        let owned: Vec<String> = (0..300)
            .map(|i| "the thing ".repeat(i % 7) + &i.to_string())
            .collect();
        let mut texts: Vec<&str> = owned.iter().map(|s| s.as_str()).collect();
        texts.insert(5, "");
        let (offsets, data) = crate::text::column_parts::<i32>(&texts);
        let column = StrColumn::new(Offsets::I32(&offsets), &data).unwrap();
        let mut expected = Vec::new();
        let mut bounds = vec![0i64];
        for t in &texts {
            let ids = tok.encode(t, &AllowedSpecial::None).unwrap();
            expected.extend(&ids);
            if !ids.is_empty() {
                expected.push(999);
            }
            bounds.push(expected.len() as i64);
        }
        // One run, runs of a few rows, a run per row; 1 to 3 threads or all cores.
        for (run_bytes, threads) in [(1 << 20, Some(2)), (100, Some(3)), (1, None), (50, Some(1))] {
            let out = tok
                .encode_column_in_runs(
                    &column,
                    &AllowedSpecial::None,
                    Some(999),
                    threads,
                    run_bytes,
                )
                .unwrap();
            assert_eq!(out.ids(), expected);
            assert_eq!(out.offsets(), bounds);
            // The buffers Arrow gets hold the same.
            let wide = written(out.total_ids() * 4, |b| {
                out.write_ids(b, IdWidth::U32, threads)
            });
            let got: Vec<u32> = wide
                .chunks_exact(4)
                .map(|b| u32::from_ne_bytes(b.try_into().unwrap()))
                .collect();
            assert_eq!(got, expected);
            let narrow = written(out.total_ids() * 2, |b| {
                out.write_ids(b, IdWidth::U16, threads)
            });
            let got: Vec<u32> = narrow
                .chunks_exact(2)
                .map(|b| u32::from(u16::from_ne_bytes(b.try_into().unwrap())))
                .collect();
            assert_eq!(got, expected);
            let offsets = written((out.rows() + 1) * 8, |b| out.write_offsets(b, threads));
            let got: Vec<i64> = offsets
                .chunks_exact(8)
                .map(|b| i64::from_ne_bytes(b.try_into().unwrap()))
                .collect();
            assert_eq!(got, bounds);
        }
        // An id past uint16 cannot be written narrow.
        let out = tok
            .encode_column_in_runs(&column, &AllowedSpecial::None, Some(70_000), Some(2), 100)
            .unwrap();
        let mut narrow = vec![MaybeUninit::new(0u8); out.total_ids() * 2];
        let err = out
            .write_ids(&mut narrow, IdWidth::U16, Some(2))
            .unwrap_err();
        assert!(err.to_string().contains("70000"), "{err}");
    }
}
