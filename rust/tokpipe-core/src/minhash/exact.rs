//! Exact Jaccard similarity of documents' shingle sets, for verifying LSH candidates.
//!
//! A MinHash signature of 128 values estimates Jaccard similarity with a standard error of
//! about 0.035 at 0.8, so verifying candidates by signature agreement misjudges pairs near the
//! threshold both ways (NeMo Curator's fuzzy dedup offers the same remedy as its
//! `false_positive_check`). Here each document involved in a candidate pair is shingled
//! again, exactly as for its signature ([`Shingler`]), its shingles hashed to 64 bits
//! (xxh3; a collision among one document's shingles is vanishingly rare at that width)
//! into a sorted set, and each pair's similarity is the size of the sorted sets'
//! intersection over that of their union.
//!
//! [`SetFile`] holds the sets of every document to check in a file, written slice of texts
//! after slice and read back through a memory map: the page cache holds them, not the heap,
//! so the check needs one slice of texts in memory at a time and reads each document once,
//! whatever pairs it is in.

use super::map_scratch;
use super::shingles::{ShingleConfig, Shingler};
use crate::error::{Error, Result};
use crate::text::StrColumn;
use memmap2::Mmap;
use rayon::prelude::*;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use xxhash_rust::xxh3::xxh3_64;

/// The sorted, distinct 64-bit hashes of a text's shingles.
pub fn shingle_set(shingler: &mut Shingler, text: &str, config: &ShingleConfig) -> Vec<u64> {
    let mut set = Vec::new();
    shingler.for_each(text, config, |shingle| set.push(xxh3_64(shingle)));
    set.sort_unstable();
    set.dedup();
    // The sets of a whole slice of documents are held at once: without the growth's slack.
    set.shrink_to_fit();
    set
}

/// |a ∩ b| / |a ∪ b| of two sorted sets; two empty sets are not similar (0).
pub fn jaccard(a: &[u64], b: &[u64]) -> f64 {
    let (mut i, mut j, mut common) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                common += 1;
                i += 1;
                j += 1;
            }
        }
    }
    let union = a.len() + b.len() - common;
    if union == 0 {
        0.0
    } else {
        common as f64 / union as f64
    }
}

/// The shingle sets of documents, in the order they were added, in a scratch file.
pub struct SetFile {
    path: PathBuf,
    writer: Option<BufWriter<File>>,
    /// Where each set starts, in u64s from the start of the file, and where the last ends.
    starts: Vec<u64>,
    map: Option<Mmap>,
}

impl SetFile {
    /// An empty set file at `path` (created; removed when the `SetFile` is dropped).
    pub fn create(path: &Path) -> Result<Self> {
        let file = File::create(path).map_err(|e| Error::io(path, e))?;
        Ok(SetFile {
            path: path.to_path_buf(),
            writer: Some(BufWriter::with_capacity(1 << 20, file)),
            starts: vec![0],
            map: None,
        })
    }

    /// Documents added so far.
    pub fn len(&self) -> usize {
        self.starts.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds the shingle sets of every row of `column`, in order. The column's sets are built
    /// in parallel and held until written: about 8 bytes a shingle on top of the texts.
    pub fn append(&mut self, column: &StrColumn<'_>, config: &ShingleConfig) -> Result<()> {
        let writer = self.writer.as_mut().ok_or_else(|| {
            Error::InvalidArgument("shingle sets added after reading began".into())
        })?;
        let sets: Vec<Vec<u64>> = (0..column.len())
            .into_par_iter()
            .map_init(Shingler::default, |shingler, row| {
                shingle_set(shingler, column.get(row), config)
            })
            .collect();
        let mut end = *self.starts.last().expect("starts at 0");
        for set in &sets {
            for value in set {
                // Native byte order: the file is this process's own, read back by `set`.
                writer
                    .write_all(&value.to_ne_bytes())
                    .map_err(|e| Error::io(&self.path, e))?;
            }
            end += set.len() as u64;
            self.starts.push(end);
        }
        Ok(())
    }

    /// Ends adding: the file is flushed and mapped.
    fn seal(&mut self) -> Result<()> {
        let Some(writer) = self.writer.take() else {
            return Ok(());
        };
        let written = *self.starts.last().expect("starts at 0") > 0;
        self.map = map_scratch(writer, &self.path, written)?;
        Ok(())
    }

    /// The set of document `i` (in the order added).
    fn set(&self, i: usize) -> &[u64] {
        let Some(map) = &self.map else {
            return &[];
        };
        // SAFETY: any 8 bytes are a u64; a mapping starts on a page, so the middle part is
        // the whole file, which is written in u64s.
        let (head, words, _) = unsafe { map.align_to::<u64>() };
        debug_assert!(head.is_empty());
        &words[self.starts[i] as usize..self.starts[i + 1] as usize]
    }

    /// The exact Jaccard similarity of each pair of documents (indices in the order added).
    pub fn similarities(&mut self, pairs: &[(u32, u32)]) -> Result<Vec<f64>> {
        self.seal()?;
        if let Some(&(a, b)) = pairs
            .iter()
            .find(|&&(a, b)| a as usize >= self.len() || b as usize >= self.len())
        {
            return Err(Error::InvalidArgument(format!(
                "pair ({a}, {b}) out of range for {} shingle sets",
                self.len()
            )));
        }
        Ok(pairs
            .par_iter()
            .map(|&(a, b)| jaccard(self.set(a as usize), self.set(b as usize)))
            .collect())
    }
}

impl Drop for SetFile {
    fn drop(&mut self) {
        // A scratch file is worthless once its sets are; a failure to remove it only leaves
        // it for the scratch directory's owner to clean.
        self.map = None;
        self.writer = None;
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{column_parts, Offsets};

    #[test]
    fn jaccard_of_sorted_sets() {
        assert_eq!(jaccard(&[1, 2, 3, 4], &[3, 4, 5, 6]), 2.0 / 6.0);
        assert_eq!(jaccard(&[1, 2], &[1, 2]), 1.0);
        assert_eq!(jaccard(&[], &[]), 0.0);
        assert_eq!(jaccard(&[7], &[]), 0.0);
    }

    #[test]
    fn a_set_file_gives_each_pairs_jaccard_of_its_texts() {
        let texts = [
            "the cat sat on the mat and then the cat sat on the hat",
            "the cat sat on the mat and then the dog sat on the hat",
            "",
            "something else entirely, with no words in common at all here",
            "the cat sat on the mat and then the cat sat on the hat",
        ];
        let config = ShingleConfig::default();
        let expected_set = |t: &str| shingle_set(&mut Shingler::default(), t, &config);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sets.bin");
        let mut file = SetFile::create(&path).unwrap();
        // Two slices, as the caller adds them.
        for slice in [&texts[..2], &texts[2..]] {
            let (offsets, data) = column_parts::<i32>(slice);
            let column = StrColumn::new(Offsets::I32(&offsets), &data).unwrap();
            file.append(&column, &config).unwrap();
        }
        assert_eq!(file.len(), texts.len());
        let pairs: Vec<(u32, u32)> = (0..5).flat_map(|a| (0..5).map(move |b| (a, b))).collect();
        let got = file.similarities(&pairs).unwrap();
        for (&(a, b), &similarity) in pairs.iter().zip(&got) {
            let (x, y) = (
                expected_set(texts[a as usize]),
                expected_set(texts[b as usize]),
            );
            assert_eq!(similarity, jaccard(&x, &y), "pair ({a}, {b})");
        }
        assert_eq!(
            got[1],
            jaccard(&expected_set(texts[0]), &expected_set(texts[1]))
        );
        assert!(got[1] > 0.3 && got[1] < 1.0);
        assert_eq!(got[4], 1.0);
        assert!(file.similarities(&[(0, 5)]).is_err());
        drop(file);
        assert!(!path.exists());
    }
}
