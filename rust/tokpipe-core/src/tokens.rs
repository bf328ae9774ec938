//! Token-id lists laid out as Arrow list columns (flat values plus `len + 1` offsets):
//! gathering rows from several such columns in any order. This is the copy at the heart of
//! `tokpipe tokenize`'s shuffle (`python/tokpipe/pipeline/tokenized.py`): documents are
//! scattered into key-range buckets and then written in key order, each time a gather of
//! whole rows. One `memcpy` per row, and no index array per token (a numpy fancy-index
//! gather needs eight bytes of index per id, several times the ids themselves).

use crate::error::{Error, Result};

/// One list column: row `i` is `values[offsets[i]..offsets[i + 1]]`.
#[derive(Clone, Copy, Debug)]
pub struct Lists<'a, T> {
    pub offsets: &'a [i64],
    pub values: &'a [T],
}

impl<T> Lists<'_, T> {
    /// Rows in the column.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value range of `row`, checked against the values.
    fn range(&self, row: usize) -> Result<std::ops::Range<usize>> {
        let bad = || Error::InvalidArgument(format!("row {row} is not in the list column"));
        if row >= self.len() {
            return Err(bad());
        }
        let (start, end) = (self.offsets[row], self.offsets[row + 1]);
        if start < 0 || end < start || end as usize > self.values.len() {
            return Err(Error::InvalidArgument(format!(
                "row {row}'s offsets ({start}..{end}) are out of order or past the values"
            )));
        }
        Ok(start as usize..end as usize)
    }
}

/// The rows `(source, row)` of `picks`, in that order, as one list column: the offsets
/// (from 0) and the values, written into `values_out` (which must hold exactly the picked
/// rows' values; [`gathered_len`] says how many). Errors name a pick outside its source.
pub fn gather_lists_into<T: Copy>(
    sources: &[Lists<'_, T>],
    picks: impl Iterator<Item = (usize, usize)> + Clone,
    values_out: &mut [T],
) -> Result<Vec<i64>> {
    let mut offsets = Vec::with_capacity(picks.size_hint().0 + 1);
    offsets.push(0i64);
    let mut at = 0usize;
    for (source, row) in picks {
        let lists = sources
            .get(source)
            .ok_or_else(|| Error::InvalidArgument(format!("no list column {source}")))?;
        let range = lists.range(row)?;
        let n = range.len();
        let out = values_out.get_mut(at..at + n).ok_or_else(|| {
            Error::InvalidArgument("the output is smaller than the picked rows".into())
        })?;
        out.copy_from_slice(&lists.values[range]);
        at += n;
        offsets.push(at as i64);
    }
    if at != values_out.len() {
        return Err(Error::InvalidArgument(
            "the output is larger than the picked rows".into(),
        ));
    }
    Ok(offsets)
}

/// How many values the rows of `picks` hold together.
pub fn gathered_len<T>(
    sources: &[Lists<'_, T>],
    picks: impl Iterator<Item = (usize, usize)>,
) -> Result<usize> {
    let mut total = 0usize;
    for (source, row) in picks {
        let lists = sources
            .get(source)
            .ok_or_else(|| Error::InvalidArgument(format!("no list column {source}")))?;
        total += lists.range(row)?.len();
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathers_rows_of_several_columns_in_the_picked_order() {
        let a = Lists {
            offsets: &[0, 2, 2, 5],
            values: &[1u16, 2, 3, 4, 5],
        };
        let b = Lists {
            offsets: &[1, 3],
            values: &[9u16, 10, 11],
        };
        let picks = [(1usize, 0usize), (0, 2), (0, 1), (0, 0), (1, 0)];
        let sources = [a, b];
        let n = gathered_len(&sources, picks.iter().copied()).unwrap();
        assert_eq!(n, 9);
        let mut out = vec![0u16; n];
        let offsets = gather_lists_into(&sources, picks.iter().copied(), &mut out).unwrap();
        assert_eq!(offsets, [0, 2, 5, 5, 7, 9]);
        assert_eq!(out, [10, 11, 3, 4, 5, 1, 2, 10, 11]);
    }

    #[test]
    fn bad_picks_and_offsets_are_errors() {
        let a = Lists {
            offsets: &[0, 2, 9],
            values: &[1u32, 2, 3],
        };
        assert!(gathered_len(&[a], [(0usize, 2usize)].into_iter()).is_err());
        assert!(gathered_len(&[a], [(1usize, 0usize)].into_iter()).is_err());
        assert!(gathered_len(&[a], [(0usize, 1usize)].into_iter()).is_err());
        let mut out = vec![0u32; 1];
        assert!(gather_lists_into(&[a], [(0usize, 0usize)].into_iter(), &mut out).is_err());
    }
}
