//! Token-id lists laid out as Arrow list columns (flat values plus `len + 1` offsets):
//! gathering rows from several such columns in any order. This is the copy at the heart of
//! `tokpipe tokenize`'s shuffle (`python/tokpipe/pipeline/tokenized.py`): documents are
//! scattered into key-range buckets and then written in key order, each time a gather of
//! whole rows. One `memcpy` per row, and no index array per token (a numpy fancy-index
//! gather needs eight bytes of index per id, several times the ids themselves).
//!
//! [`StagedFiles`] gathers rows straight from the files they were staged in (by byte range,
//! with positioned reads), so the shuffle needs neither a copy of the documents on disk nor
//! memory maps of every staged file.

use crate::error::{Error, Result};
use std::fs::File;
use std::path::{Path, PathBuf};

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

/// Files opened once for positioned reads of byte ranges (`pread`): the staged token ids of
/// `tokpipe tokenize`, read back in shuffled order.
//
// Why reads and not memory maps: a gather in key order touches every staged file, and each
// touched page of a map counts in the process's resident memory until it is unmapped (the
// whole staging, not a bounded part of it); a read copies from the page cache into the
// output buffer, which is the copy the gather makes anyway, and maps nothing. One system
// call per range is cheap next to copying a document's ids (kilobytes).
pub struct StagedFiles {
    files: Vec<(PathBuf, File)>,
}

impl StagedFiles {
    pub fn open(paths: &[impl AsRef<Path>]) -> Result<Self> {
        let files = paths
            .iter()
            .map(|p| {
                let path = p.as_ref().to_path_buf();
                File::open(&path)
                    .map(|f| (path.clone(), f))
                    .map_err(|e| Error::io(path, e))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(StagedFiles { files })
    }

    /// The byte ranges `(file, start, len)` of `ranges`, back to back, into `out`, which must
    /// be exactly as long as the ranges together. Ranges that continue one another in the
    /// same file are read with one call. A file shorter than a range is an error naming it
    /// (a damaged staging file), never a short read.
    pub fn read_into(
        &self,
        ranges: impl Iterator<Item = (usize, u64, usize)>,
        out: &mut [u8],
    ) -> Result<()> {
        let mut at = 0usize;
        // The pending read: (file, start, len), grown while ranges are contiguous.
        let mut pending: Option<(usize, u64, usize)> = None;
        for (file, start, len) in ranges {
            if file >= self.files.len() {
                return Err(Error::InvalidArgument(format!("no staged file {file}")));
            }
            match pending {
                Some((f, s, l)) if f == file && s + l as u64 == start => {
                    pending = Some((f, s, l + len))
                }
                _ => {
                    if let Some(read) = pending {
                        at = self.read_one(read, out, at)?;
                    }
                    pending = Some((file, start, len));
                }
            }
        }
        if let Some(read) = pending {
            at = self.read_one(read, out, at)?;
        }
        if at != out.len() {
            return Err(Error::InvalidArgument(
                "the output is larger than the ranges".into(),
            ));
        }
        Ok(())
    }

    fn read_one(
        &self,
        (file, start, len): (usize, u64, usize),
        out: &mut [u8],
        at: usize,
    ) -> Result<usize> {
        let (path, handle) = &self.files[file];
        let target = out.get_mut(at..at + len).ok_or_else(|| {
            Error::InvalidArgument("the output is smaller than the ranges".into())
        })?;
        read_exact_at(handle, target, start).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                Error::io(
                    path,
                    std::io::Error::new(
                        e.kind(),
                        format!(
                            "shorter than expected: bytes {start}..{} are missing",
                            start + len as u64
                        ),
                    ),
                )
            } else {
                Error::io(path, e)
            }
        })?;
        Ok(at + len)
    }
}

#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, buf, offset) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
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

    #[test]
    fn reads_ranges_of_several_files_in_the_given_order() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let bytes_a: Vec<u8> = (0..100u8).collect();
        let bytes_b: Vec<u8> = (100..=255u8).collect();
        std::fs::write(&a, &bytes_a).unwrap();
        std::fs::write(&b, &bytes_b).unwrap();
        let files = StagedFiles::open(&[&a, &b]).unwrap();
        // Out of order, across files, with two contiguous ranges of `a` read as one.
        let ranges = [
            (1usize, 10u64, 5usize),
            (0, 20, 3),
            (0, 23, 4),
            (1, 0, 2),
            (0, 99, 1),
        ];
        let mut out = vec![0u8; 15];
        files.read_into(ranges.iter().copied(), &mut out).unwrap();
        let mut want = Vec::new();
        for (f, s, l) in ranges {
            let src = if f == 0 { &bytes_a } else { &bytes_b };
            want.extend_from_slice(&src[s as usize..s as usize + l]);
        }
        assert_eq!(out, want);
    }

    #[test]
    fn a_short_file_or_a_bad_range_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("staged.arrow");
        std::fs::write(&a, [1u8; 10]).unwrap();
        let files = StagedFiles::open(&[&a]).unwrap();
        let mut out = vec![0u8; 8];
        let err = files
            .read_into([(0usize, 6u64, 8usize)].into_iter(), &mut out)
            .unwrap_err();
        assert!(err.to_string().contains("staged.arrow"), "{err}");
        assert!(files
            .read_into([(1usize, 0u64, 8usize)].into_iter(), &mut out)
            .is_err());
        assert!(files
            .read_into([(0usize, 0u64, 4usize)].into_iter(), &mut out)
            .is_err());
        assert!(StagedFiles::open(&[dir.path().join("missing")]).is_err());
    }
}
