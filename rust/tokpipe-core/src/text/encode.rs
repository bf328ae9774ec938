//! Encoding a whole Arrow string column into one flat id buffer plus row offsets, the layout
//! of an Arrow `large_list<uint32>` column, so a caller never makes an object per document.
//!
//! Rows are encoded in parallel in small runs; each run fills its own flat buffer and the
//! runs are then concatenated in order, so the output is the same for any thread count and
//! every document's ids are copied once more only (a memcpy, against the encoding's ~µs per
//! word).

use crate::error::{Error, Result};
use crate::text::StrColumn;
use crate::tokenizer::{AllowedSpecial, Tokenizer};
use rayon::prelude::*;

// Rows per parallel run: enough to amortise the per-run buffers, few enough that uneven
// documents still spread over every thread.
const RUN_ROWS: usize = 64;

/// Every row's ids, flat, and `offsets` (`len + 1` entries, starting at 0) such that row
/// `i` is `ids[offsets[i]..offsets[i + 1]]`. `append`, when given, is pushed after the ids
/// of each row that has any (the end-of-document token); a row without tokens stays empty,
/// so a caller can tell (and drop) documents with nothing to train on.
pub struct EncodedColumn {
    pub ids: Vec<u32>,
    pub offsets: Vec<i64>,
}

impl Tokenizer {
    /// Encodes each row of `column` as [`Tokenizer::encode`] does (special tokens only where
    /// `allowed` says), on `num_threads` threads (all cores when `None` or 0).
    pub fn encode_column(
        &self,
        column: &StrColumn<'_>,
        allowed: &AllowedSpecial,
        append: Option<u32>,
        num_threads: Option<usize>,
    ) -> Result<EncodedColumn> {
        let rows = column.len();
        let work = || -> Result<Vec<(Vec<u32>, Vec<u32>)>> {
            (0..rows.div_ceil(RUN_ROWS))
                .into_par_iter()
                .map(|run| {
                    let start = run * RUN_ROWS;
                    let end = (start + RUN_ROWS).min(rows);
                    let mut ids = Vec::new();
                    let mut lengths = Vec::with_capacity(end - start);
                    for i in start..end {
                        let before = ids.len();
                        self.encode_into(column.get(i), allowed, &mut ids)?;
                        if let Some(eos) = append {
                            if ids.len() > before {
                                ids.push(eos);
                            }
                        }
                        lengths.push((ids.len() - before) as u32);
                    }
                    Ok((ids, lengths))
                })
                .collect()
        };
        let runs = match num_threads {
            None | Some(0) => work()?,
            Some(n) => rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .map_err(|e| Error::InvalidArgument(format!("cannot start {n} threads: {e}")))?
                .install(work)?,
        };
        let total: usize = runs.iter().map(|(ids, _)| ids.len()).sum();
        let mut ids = Vec::with_capacity(total);
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0i64);
        let mut at = 0i64;
        for (run_ids, lengths) in runs {
            ids.extend_from_slice(&run_ids);
            for n in lengths {
                at += i64::from(n);
                offsets.push(at);
            }
        }
        Ok(EncodedColumn { ids, offsets })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::Offsets;

    use crate::models::bpe::BpeModel;
    use crate::pre_tokenizers::PreTokenizer;

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
        let mut data = Vec::new();
        let mut offsets = vec![0i32];
        for t in &texts {
            data.extend_from_slice(t.as_bytes());
            offsets.push(data.len() as i32);
        }
        let column = StrColumn::new(Offsets::I32(&offsets), &data).unwrap();
        let out = tok
            .encode_column(&column, &AllowedSpecial::None, Some(999), Some(2))
            .unwrap();
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
        assert_eq!(out.ids, expected);
        assert_eq!(out.offsets, bounds);
    }
}
