//! LSH banding and clustering: which documents are near-duplicates, and which one of each
//! cluster is kept, for corpora larger than memory.
//!
//! Each signature is cut into `bands` bands of `rows` values (datasketch's layout: band `j`
//! is values `j*rows .. (j+1)*rows`; values past `bands * rows` are unused). Two documents
//! are candidates when some band is equal in both. Every document's band is hashed to 64
//! bits, the (hash, position) pairs of a band are sorted, and each run of equal hashes joins
//! its members in a union-find: no hash map of buckets, no Python objects.
//!
//! [`LshIndex`] does it in bounded memory:
//! - [`LshIndex::add`] takes the dedup keys of one task after another. The keys are appended
//!   to a file in the scratch directory, and each document's band pairs are buffered. When
//!   the buffers reach the memory budget, each band's pairs are sorted and written out as a
//!   sorted run (12 bytes a pair): an external sort.
//! - [`LshIndex::join_band`] walks one band's pairs in sorted order, from memory when nothing
//!   was spilled, else by a k-way merge of its runs, and joins the buckets.
//! - The signatures, needed to verify candidates and for `keep="longest"`, are read back
//!   from their file through a memory map: the page cache holds them, not the heap, so they
//!   are evicted under pressure instead of growing the process.
//!
//! - With [`Verify::Exact`], [`LshIndex::check_documents`] names the documents of the pairs
//!   to check; the caller hands their texts over a slice at a time
//!   ([`LshIndex::add_check_texts`]), whose shingle sets go to a scratch file
//!   ([`super::exact::SetFile`]) that [`LshIndex::check_pairs`] reads the pairs from.
//!
//! What stays in memory is the budget (band pairs while adding, each band's buffer reused
//! after a spill; the runs' read buffers while merging), the union-find (4 bytes a document,
//! turned into the keepers in place by [`LshIndex::finish`]), a bit a document to count the
//! clusters at the end, and with [`Verify::Exact`] the pairs to check (8 bytes a pair, 16
//! while checked) and their documents (12 bytes each): 10M documents with the default 512 MB
//! budget need about 550 MB.
//!
//! Verification ([`Verify`]): with `Signature`, a candidate joins a cluster only if its
//! signature agrees with a member's on at least the threshold fraction of values (the
//! MinHash estimate of their Jaccard similarity), which removes the bands' false positives
//! (and 64-bit hash collisions). Within a bucket, a document is compared with the bucket's
//! first few unmatched members ("representatives", at most [`MAX_REPRESENTATIVES`]), not
//! with every member, so a bucket of a thousand exact copies costs a thousand comparisons,
//! not half a million. With `Exact`, the index joins candidates with equal signatures and
//! collects the pairs whose signatures come near the threshold; the caller computes their
//! exact similarity (see [`super::exact`]) and joins those that pass.
//!
//! Everything is in document order (pairs sort by hash, then position, whether merged from
//! runs or sorted in memory) and the union-find roots at the smallest position, so the
//! clusters are a function of the signatures alone: the same for any number of workers and
//! any memory budget.
//!
//! (Over 500 lines: 367 of them are its unit tests; the rest is one external-memory algorithm,
//! [`LshIndex`], whose spilling, k-way merge and verified joins share its buffers, sorted runs and
//! union-find.)

use super::exact::SetFile;
use super::shingles::ShingleConfig;
use super::union_find::UnionFind;
use super::{key_bytes, map_scratch};
use crate::error::{Error, Result};
use crate::text::StrColumn;
use memmap2::Mmap;
use rayon::prelude::*;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// Representatives compared per bucket when verifying (see the module docs).
pub const MAX_REPRESENTATIVES: usize = 16;

/// Bytes a buffered pair takes in memory (`(u64, u32)` is padded to 16).
const PAIR_BYTES_IN_MEMORY: usize = std::mem::size_of::<(u64, u32)>();
/// Bytes a pair takes in a run file: the hash then the position, little-endian.
const PAIR_BYTES_ON_DISK: usize = 12;
/// Write buffer of a run, and the largest read buffer of a run during the merge.
const RUN_BUFFER: usize = 1 << 20;
/// The smallest read buffer of a run during the merge (the buffers share the budget).
const MIN_RUN_BUFFER: usize = 64 << 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    /// The first document of the cluster (smallest position).
    First,
    /// The longest (in bytes); ties go to the first.
    Longest,
}

impl Keep {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "first" => Some(Keep::First),
            "longest" => Some(Keep::Longest),
            _ => None,
        }
    }
}

/// How candidates (documents sharing a band) are checked before they join.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Verify {
    /// Not at all: every candidate joins.
    Bands,
    /// A candidate joins when its signature agrees with a member's on at least this fraction
    /// of values.
    Signature(f64),
    /// Candidates agreeing on at least this fraction minus [`EXACT_PREFILTER_MARGIN`] are
    /// collected as pairs for an exact check of their texts' shingle sets, which the caller
    /// hands over ([`LshIndex::check_documents`], [`LshIndex::add_check_texts`],
    /// [`LshIndex::check_pairs`]).
    Exact(f64),
}

/// How far below the threshold a signature's agreement may be for its pair still to get an
/// exact check: over four standard errors of a 128-value estimate at 0.8.
pub const EXACT_PREFILTER_MARGIN: f64 = 0.15;

#[derive(Clone, Copy, Debug)]
pub struct ClusterConfig {
    pub bands: usize,
    pub rows: usize,
    pub verify: Verify,
    pub keep: Keep,
}

#[derive(Debug, Default)]
pub struct Clusters {
    /// For each document, the position of the document kept in its place (its own if kept).
    pub keeper: Vec<u32>,
    /// Documents that share a band with an earlier member of their bucket (summed over bands).
    pub candidates: u64,
    /// Candidates rejected by verification (by their signatures; with [`Verify::Exact`],
    /// the caller counts its own).
    pub rejected: u64,
    /// Sorted runs written to disk (0 when every band fitted the memory budget).
    pub spilled_runs: u64,
    /// Clusters of more than one document.
    pub clusters: u64,
}

#[inline]
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    h ^= h >> 33;
    h = h.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    h ^ (h >> 33)
}

/// A band's values as one 64-bit key (a chain of a bijective mixer), from their
/// little-endian bytes.
#[inline]
pub fn band_hash(values: &[u8]) -> u64 {
    let mut h = 0x9E37_79B9_7F4A_7C15u64 ^ (values.len() / 4) as u64;
    for pair in values.chunks(8) {
        let mut word = [0u8; 8];
        word[..pair.len()].copy_from_slice(pair);
        h = fmix64(h ^ u64::from_le_bytes(word));
    }
    h
}

/// Fraction of equal values of two signatures (as little-endian bytes): the MinHash
/// estimate of their sets' Jaccard similarity.
#[inline]
pub fn agreement(a: &[u8], b: &[u8]) -> f64 {
    let same = a
        .chunks_exact(4)
        .zip(b.chunks_exact(4))
        .filter(|(x, y)| x == y)
        .count();
    same as f64 / (a.len() / 4) as f64
}

/// Band pairs of every band, and where the ones already written to disk are.
struct BandPairs {
    pending: Vec<Vec<(u64, u32)>>,
    runs: Vec<Vec<PathBuf>>,
}

/// Finds near-duplicate clusters over keys added task after task; see the module docs.
pub struct LshIndex {
    config: ClusterConfig,
    width: usize,
    dir: PathBuf,
    keys_path: PathBuf,
    writer: Option<BufWriter<File>>,
    keys: Option<Mmap>,
    n: usize,
    pairs: BandPairs,
    budget_pairs: usize,
    next_band: usize,
    uf: UnionFind,
    /// Pairs awaiting an exact check ([`Verify::Exact`]).
    pairs_to_check: Vec<(u32, u32)>,
    /// False when candidates come from elsewhere ([`LshIndex::offer_pairs`]): no band keys.
    band_here: bool,
    /// The exact check under way ([`LshIndex::check_documents`]).
    check: Option<ExactCheck>,
    out: Clusters,
}

/// The documents of the pairs to check (distinct, in position order) and the shingle sets
/// of those whose texts were added so far.
struct ExactCheck {
    documents: Vec<u32>,
    sets: SetFile,
}

impl LshIndex {
    /// An empty index whose files go in `dir` (which must exist and be private to it), for
    /// keys of `num_perm` values, holding at most about `memory_budget` bytes of band pairs.
    pub fn new(
        dir: &Path,
        num_perm: usize,
        config: ClusterConfig,
        memory_budget: usize,
    ) -> Result<Self> {
        if config.bands == 0 || config.rows == 0 {
            return Err(Error::InvalidArgument(
                "bands and rows must be positive".into(),
            ));
        }
        if config.bands * config.rows > num_perm {
            return Err(Error::InvalidArgument(format!(
                "{} bands of {} rows need {} values, signatures have {num_perm}",
                config.bands,
                config.rows,
                config.bands * config.rows
            )));
        }
        let keys_path = dir.join("signatures.bin");
        let file = File::create(&keys_path).map_err(|e| Error::io(&keys_path, e))?;
        Ok(LshIndex {
            config,
            width: key_bytes(num_perm),
            dir: dir.to_path_buf(),
            keys_path,
            writer: Some(BufWriter::with_capacity(RUN_BUFFER, file)),
            keys: None,
            n: 0,
            pairs: BandPairs {
                pending: vec![Vec::new(); config.bands],
                runs: vec![Vec::new(); config.bands],
            },
            budget_pairs: (memory_budget / PAIR_BYTES_IN_MEMORY).max(config.bands),
            next_band: 0,
            uf: UnionFind::new(0),
            pairs_to_check: Vec::new(),
            band_here: true,
            check: None,
            out: Clusters::default(),
        })
    }

    /// Keeps no band keys: the candidates will come from [`Self::offer_pairs`]. Call it
    /// before adding keys.
    pub fn band_elsewhere(&mut self) {
        self.band_here = false;
    }

    /// Documents added so far.
    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Adds the dedup keys ([`key_bytes`] each: length, then signature) of the next
    /// documents, in corpus order.
    pub fn add(&mut self, keys: &[u8]) -> Result<()> {
        let writer = self
            .writer
            .as_mut()
            .ok_or_else(|| Error::InvalidArgument("keys added after clustering began".into()))?;
        if keys.len() % self.width != 0 {
            return Err(Error::InvalidArgument(format!(
                "minhash keys of {} bytes expected, got {} bytes",
                self.width,
                keys.len()
            )));
        }
        let count = keys.len() / self.width;
        if self.n + count > u32::MAX as usize {
            return Err(Error::InvalidArgument(
                "minhash clustering takes at most 2^32 - 1 documents".into(),
            ));
        }
        writer
            .write_all(keys)
            .map_err(|e| Error::io(&self.keys_path, e))?;
        if !self.band_here {
            self.n += count;
            return Ok(());
        }
        // Added in pieces of at most a budget's worth of band pairs, so that one large task
        // cannot take the buffers past it.
        let piece = (self.budget_pairs / self.config.bands).max(1) * self.width;
        for keys in keys.chunks(piece) {
            self.buffer_bands(keys)?;
        }
        Ok(())
    }

    /// Buffers the band pairs of `keys` (at most a budget's worth), spilling what was
    /// buffered before when they would not fit.
    fn buffer_bands(&mut self, keys: &[u8]) -> Result<()> {
        let count = keys.len() / self.width;
        let (width, rows, first) = (self.width, self.config.rows, self.n as u32);
        // An empty document's signature (all u32::MAX) would share every band with every
        // other: it takes no part in banding.
        let live = |key: &[u8]| key[8..].iter().any(|&b| b != 0xFF);
        // The buffers grow by exactly what is added (no doubling past the budget); when
        // these keys would take them over it, what is buffered goes to disk first.
        let buffered: usize = self.pairs.pending.iter().map(Vec::len).sum();
        if buffered > 0 && buffered + count * self.config.bands > self.budget_pairs {
            self.spill()?;
        }
        // A band's share of the budget: its buffer doubles up to it and stays at it, reused
        // after each spill. Growing by exactly each piece (as before) moved every buffer at
        // every add, and sixteen of them interleaved left the freed blocks unusable: about
        // 100 MiB over a 64 MiB budget, on 3M documents added a staged row group at a time.
        let share = self.budget_pairs.div_ceil(self.config.bands);
        let pending = &mut self.pairs.pending;
        pending.par_iter_mut().enumerate().for_each(|(band, out)| {
            let span = 8 + band * rows * 4..8 + (band + 1) * rows * 4;
            let needed = out.len() + count;
            if needed > out.capacity() {
                let grown = (out.capacity() * 2).clamp(needed, share.max(needed));
                out.reserve_exact(grown - out.len());
            }
            out.extend(
                keys.chunks_exact(width)
                    .enumerate()
                    .filter(|(_, key)| live(key))
                    .map(|(i, key)| (band_hash(&key[span.clone()]), first + i as u32)),
            );
        });
        self.n += count;
        if pending.iter().map(Vec::len).sum::<usize>() >= self.budget_pairs {
            self.spill()?;
        }
        Ok(())
    }

    /// Sorts every band's buffered pairs and writes each out as a run.
    fn spill(&mut self) -> Result<()> {
        for (band, pending) in self.pairs.pending.iter_mut().enumerate() {
            if pending.is_empty() {
                continue;
            }
            pending.par_sort_unstable();
            let runs = &mut self.pairs.runs[band];
            let path = self
                .dir
                .join(format!("band{band:03}-run{:05}.bin", runs.len()));
            let file = File::create(&path).map_err(|e| Error::io(&path, e))?;
            let mut w = BufWriter::with_capacity(RUN_BUFFER, file);
            for &(hash, pos) in pending.iter() {
                w.write_all(&hash.to_le_bytes())
                    .and_then(|_| w.write_all(&pos.to_le_bytes()))
                    .map_err(|e| Error::io(&path, e))?;
            }
            w.flush().map_err(|e| Error::io(&path, e))?;
            runs.push(path);
            self.out.spilled_runs += 1;
            // The buffer is kept, empty, for the next pairs: its capacity is within the
            // budget, and reusing it leaves nothing to fragment. `seal` frees them.
            pending.clear();
        }
        Ok(())
    }

    /// Ends adding: the keys file is closed and mapped, and the pairs still buffered are
    /// spilled too if any band already has runs (so a band is all in memory or all on disk).
    fn seal(&mut self) -> Result<()> {
        let Some(writer) = self.writer.take() else {
            return Ok(());
        };
        self.keys = map_scratch(writer, &self.keys_path, self.n > 0)?;
        if self.pairs.runs.iter().any(|r| !r.is_empty()) {
            self.spill()?;
            // Every band is on disk: the budget goes to the runs' read buffers now.
            for pending in &mut self.pairs.pending {
                *pending = Vec::new();
            }
        }
        self.uf = UnionFind::new(self.n);
        Ok(())
    }

    /// Joins the buckets of the next band (bands go in order, 0 first); returns how many
    /// bands are left.
    pub fn join_band(&mut self) -> Result<usize> {
        self.seal()?;
        let band = self.next_band;
        if band >= self.config.bands {
            return Ok(0);
        }
        self.next_band += 1;
        let runs = std::mem::take(&mut self.pairs.runs[band]);
        let pending = std::mem::take(&mut self.pairs.pending[band]);
        if runs.is_empty() {
            let mut pending = pending;
            pending.par_sort_unstable();
            self.join_sorted(pending.into_iter().map(Ok))?;
        } else {
            // The band's buffers were spilled at `seal`, so their budget is free for the
            // runs' read buffers (at most RUN_BUFFER each).
            let buffer = (self.budget_pairs * PAIR_BYTES_IN_MEMORY / runs.len())
                .clamp(MIN_RUN_BUFFER, RUN_BUFFER);
            let merge = Merge::open(&runs, buffer)?;
            self.join_sorted(merge)?;
            for path in &runs {
                std::fs::remove_file(path).map_err(|e| Error::io(path, e))?;
            }
        }
        if matches!(self.config.verify, Verify::Exact(_)) {
            // Most bands offer the same pairs again: keep one of each as we go.
            self.pairs_to_check.par_sort_unstable();
            self.pairs_to_check.dedup();
            // Pushes may have doubled the capacity; only the distinct pairs stay.
            self.pairs_to_check.shrink_to_fit();
        }
        Ok(self.config.bands - self.next_band)
    }

    /// Walks (hash, position) pairs in sorted order, joining each bucket of equal hashes.
    fn join_sorted(&mut self, pairs: impl Iterator<Item = Result<(u64, u32)>>) -> Result<()> {
        let mut bucket: Vec<u32> = Vec::new();
        let mut current = None;
        for pair in pairs {
            let (hash, pos) = pair?;
            if current != Some(hash) {
                self.join_bucket(&bucket);
                bucket.clear();
                current = Some(hash);
            }
            bucket.push(pos);
        }
        self.join_bucket(&bucket);
        Ok(())
    }

    fn signature(&self, pos: u32) -> &[u8] {
        let keys = self.keys.as_ref().expect("sealed with documents");
        let start = pos as usize * self.width;
        &keys[start + 8..start + self.width]
    }

    fn join_bucket(&mut self, bucket: &[u32]) {
        if bucket.len() < 2 {
            return;
        }
        self.out.candidates += (bucket.len() - 1) as u64;
        let threshold = match self.config.verify {
            Verify::Bands => {
                for &i in &bucket[1..] {
                    self.uf.union(bucket[0], i);
                }
                return;
            }
            Verify::Signature(threshold) => threshold,
            Verify::Exact(threshold) => {
                // Every member against the bucket's first members, so that the pairs of a
                // chain (A~B, B~C but not A~C) are all offered. Two signatures equal in every
                // value join at once: for sets below the threshold t that happens with
                // probability t^num_perm (4e-13 at 0.8 and 128), and it spares reading the
                // text of exact copies, the commonest duplicates by far.
                let floor = threshold - EXACT_PREFILTER_MARGIN;
                for (k, &i) in bucket.iter().enumerate().skip(1) {
                    for &rep in &bucket[..k.min(MAX_REPRESENTATIVES)] {
                        if self.uf.find(rep) == self.uf.find(i) {
                            continue;
                        }
                        let agree = agreement(self.signature(rep), self.signature(i));
                        if agree == 1.0 {
                            self.uf.union(rep, i);
                        } else if agree >= floor {
                            self.pairs_to_check.push((rep, i));
                        }
                    }
                }
                return;
            }
        };
        let mut representatives: Vec<u32> = Vec::with_capacity(MAX_REPRESENTATIVES);
        for &i in bucket {
            let root = self.uf.find(i);
            let mut placed = false;
            for &rep in &representatives {
                if self.uf.find(rep) == root
                    || agreement(self.signature(rep), self.signature(i)) >= threshold
                {
                    self.uf.union(rep, i);
                    placed = true;
                    break;
                }
            }
            if !placed {
                if !representatives.is_empty() {
                    self.out.rejected += 1;
                }
                if representatives.len() < MAX_REPRESENTATIVES {
                    representatives.push(i);
                }
            }
        }
    }

    /// With [`Verify::Exact`], once every band is joined: the distinct candidate pairs
    /// (smaller position first, sorted) for the caller to check, but for those already
    /// joined (their signatures are equal, or they are one cluster). Empty otherwise.
    /// (The tests' view of the pairs [`Self::check_pairs`] checks; with [`Self::union_pairs`]
    /// they stand in for a check of texts that synthetic keys do not have.)
    #[cfg(test)]
    fn take_pairs(&mut self) -> Result<Vec<(u32, u32)>> {
        while self.join_band()? > 0 {}
        Ok(std::mem::take(&mut self.pairs_to_check))
    }

    /// Takes candidate pairs found elsewhere (a distributed band join that pairs each member
    /// of a band bucket, in position order, with the bucket's first [`MAX_REPRESENTATIVES`]
    /// members) instead of joining bands here: with [`Verify::Bands`] they join; with
    /// [`Verify::Exact`] they are screened as [`Self::join_band`] screens its own (equal
    /// signatures join, those near the threshold await [`Self::check_documents`]), so the
    /// clusters come out the same. Signature verification depends on the order within each
    /// bucket and is refused.
    pub fn offer_pairs(&mut self, pairs: &[(u32, u32)]) -> Result<()> {
        self.seal()?;
        if let Some(&(a, b)) = pairs
            .iter()
            .find(|&&(a, b)| a as usize >= self.n || b as usize >= self.n)
        {
            return Err(Error::InvalidArgument(format!(
                "pair ({a}, {b}) out of range for {} documents",
                self.n
            )));
        }
        let floor = match self.config.verify {
            Verify::Bands => None,
            Verify::Exact(threshold) => Some(threshold - EXACT_PREFILTER_MARGIN),
            Verify::Signature(_) => {
                return Err(Error::InvalidArgument(
                    "candidate pairs from elsewhere take verify 'exact' or 'none'".into(),
                ))
            }
        };
        self.next_band = self.config.bands;
        for &(a, b) in pairs {
            self.out.candidates += 1;
            match floor {
                None => {
                    self.uf.union(a, b);
                }
                Some(floor) => {
                    if self.uf.find(a) == self.uf.find(b) {
                        continue;
                    }
                    let agree = agreement(self.signature(a), self.signature(b));
                    if agree == 1.0 {
                        self.uf.union(a, b);
                    } else if agree >= floor {
                        self.pairs_to_check.push((a.min(b), a.max(b)));
                    }
                }
            }
        }
        self.pairs_to_check.par_sort_unstable();
        self.pairs_to_check.dedup();
        Ok(())
    }

    /// Joins pairs of documents (in the tests, after their own exact check).
    #[cfg(test)]
    fn union_pairs(&mut self, pairs: &[(u32, u32)]) -> Result<()> {
        self.seal()?;
        for &(a, b) in pairs {
            if a as usize >= self.n || b as usize >= self.n {
                return Err(Error::InvalidArgument(format!(
                    "pair ({a}, {b}) out of range for {} documents",
                    self.n
                )));
            }
            self.uf.union(a, b);
        }
        Ok(())
    }

    /// With [`Verify::Exact`], once every band is joined (joins those left): the documents
    /// of the pairs awaiting the exact check, distinct and in position order, and where to
    /// cut them into slices of about `budget` bytes of text: 0, then the first document at
    /// which the running total of lengths reaches each multiple of `budget`, then their
    /// number (cuts may repeat). The caller reads each slice's texts, in order, into
    /// [`Self::add_check_texts`], then calls [`Self::check_pairs`]. The lengths come from the
    /// keys' memory map, so the caller holds none.
    pub fn check_documents(&mut self, budget: u64) -> Result<(Vec<u32>, Vec<usize>)> {
        while self.join_band()? > 0 {}
        let mut documents: Vec<u32> = self
            .pairs_to_check
            .iter()
            .flat_map(|&(a, b)| [a, b])
            .collect();
        documents.par_sort_unstable();
        documents.dedup();
        documents.shrink_to_fit();
        let budget = budget.max(1);
        let mut cuts = vec![0];
        let (mut total, mut next) = (0u64, budget);
        for (i, &doc) in documents.iter().enumerate() {
            total = total.saturating_add(self.length(doc));
            while total >= next {
                cuts.push(i);
                next = next.saturating_add(budget);
            }
        }
        cuts.push(documents.len());
        let sets = SetFile::create(&self.dir.join("shingle-sets.bin"))?;
        self.check = Some(ExactCheck {
            documents: documents.clone(),
            sets,
        });
        Ok((documents, cuts))
    }

    /// The texts of the next documents [`Self::check_documents`] gave, in its order: their
    /// shingle sets (`config`: as for the signatures) go to a scratch file.
    pub fn add_check_texts(&mut self, texts: &StrColumn<'_>, config: &ShingleConfig) -> Result<()> {
        let check = self.check.as_mut().ok_or_else(|| {
            Error::InvalidArgument("texts to check given before check_documents".into())
        })?;
        if check.sets.len() + texts.len() > check.documents.len() {
            return Err(Error::InvalidArgument(format!(
                "texts of {} documents to check, got {}",
                check.documents.len(),
                check.sets.len() + texts.len()
            )));
        }
        check.sets.append(texts, config)
    }

    /// Ends the exact check: each pair awaiting it joins when the exact Jaccard similarity
    /// of its documents' shingle sets reaches the threshold. Returns how many did not.
    pub fn check_pairs(&mut self) -> Result<u64> {
        let Verify::Exact(threshold) = self.config.verify else {
            return Err(Error::InvalidArgument(
                "an exact check needs verify 'exact'".into(),
            ));
        };
        let mut check = self.check.take().ok_or_else(|| {
            Error::InvalidArgument("check_pairs called before check_documents".into())
        })?;
        if check.sets.len() != check.documents.len() {
            return Err(Error::InvalidArgument(format!(
                "texts of {} documents to check, got {}",
                check.documents.len(),
                check.sets.len()
            )));
        }
        // Each pair's positions become its documents' places in the set file, in place.
        let mut pairs = std::mem::take(&mut self.pairs_to_check);
        let place = |pos: u32| {
            check
                .documents
                .binary_search(&pos)
                .expect("a pair's document") as u32
        };
        for pair in &mut pairs {
            *pair = (place(pair.0), place(pair.1));
        }
        let similarities = check.sets.similarities(&pairs)?;
        let mut rejected = 0;
        for (&(a, b), &similarity) in pairs.iter().zip(&similarities) {
            if similarity >= threshold {
                self.uf
                    .union(check.documents[a as usize], check.documents[b as usize]);
            } else {
                rejected += 1;
            }
        }
        Ok(rejected)
    }

    /// A document's length in bytes (the first 8 bytes of its key).
    fn length(&self, pos: u32) -> u64 {
        let keys = self.keys.as_ref().expect("sealed with documents");
        let start = pos as usize * self.width;
        u64::from_le_bytes(keys[start..start + 8].try_into().expect("8 bytes"))
    }

    /// Joins the bands not joined yet and gives, for each document, the one kept for it.
    ///
    /// Memory: the keepers are computed in the union-find's own vector (4 bytes a document),
    /// plus a bit a document to count the clusters.
    pub fn finish(mut self) -> Result<Clusters> {
        while self.join_band()? > 0 {}
        self.pairs_to_check = Vec::new();
        let mut out = std::mem::take(&mut self.out);
        let mut keeper = std::mem::replace(&mut self.uf, UnionFind::new(0)).into_parents();
        // A parent is never after its child (unions root at the smaller position, path
        // halving only skips ancestors), so in position order a document's parent is
        // already its root when the document is reached: one pass makes every entry a root.
        for i in 0..keeper.len() {
            let parent = keeper[i] as usize;
            keeper[i] = keeper[parent];
        }
        let mut clustered = vec![0u64; keeper.len().div_ceil(64)];
        for (i, &root) in keeper.iter().enumerate() {
            if root as usize != i {
                clustered[root as usize / 64] |= 1 << (root % 64);
            }
        }
        out.clusters = clustered.iter().map(|w| u64::from(w.count_ones())).sum();
        drop(clustered);
        if self.config.keep == Keep::Longest {
            // Each root's entry becomes its cluster's longest member (ties to the first), a
            // position >= the root; a member's entry (< its own position) still names its
            // root, whose entry is final once the pass is over.
            for i in 0..keeper.len() {
                let root = keeper[i] as usize;
                if root != i && self.length(i as u32) > self.length(keeper[root]) {
                    keeper[root] = i as u32;
                }
            }
            for i in 0..keeper.len() {
                let root = keeper[i] as usize;
                if root < i {
                    keeper[i] = keeper[root];
                }
            }
        }
        out.keeper = keeper;
        Ok(out)
    }
}

impl Drop for LshIndex {
    fn drop(&mut self) {
        // Scratch files are worthless once the index is gone; a failure to remove one only
        // leaves it for the scratch directory's owner to clean.
        self.keys = None;
        let _ = std::fs::remove_file(&self.keys_path);
        for path in self.pairs.runs.iter().flatten() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The k-way merge of a band's sorted runs: every pair, in (hash, position) order.
struct Merge {
    readers: Vec<BufReader<File>>,
    paths: Vec<PathBuf>,
    heap: BinaryHeap<Reverse<((u64, u32), usize)>>,
}

impl Merge {
    fn open(paths: &[PathBuf], buffer: usize) -> Result<Self> {
        let mut merge = Merge {
            readers: Vec::with_capacity(paths.len()),
            paths: paths.to_vec(),
            heap: BinaryHeap::with_capacity(paths.len()),
        };
        for (run, path) in paths.iter().enumerate() {
            let file = File::open(path).map_err(|e| Error::io(path, e))?;
            merge.readers.push(BufReader::with_capacity(buffer, file));
            merge.refill(run)?;
        }
        Ok(merge)
    }

    /// Reads the next pair of `run` into the heap, if it has one.
    fn refill(&mut self, run: usize) -> Result<()> {
        let mut record = [0u8; PAIR_BYTES_ON_DISK];
        match self.readers[run].read_exact(&mut record) {
            Ok(()) => {
                let hash = u64::from_le_bytes(record[..8].try_into().expect("8 bytes"));
                let pos = u32::from_le_bytes(record[8..].try_into().expect("4 bytes"));
                self.heap.push(Reverse(((hash, pos), run)));
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(()),
            Err(e) => Err(Error::io(&self.paths[run], e)),
        }
    }
}

impl Iterator for Merge {
    type Item = Result<(u64, u32)>;

    fn next(&mut self) -> Option<Self::Item> {
        let Reverse((pair, run)) = self.heap.pop()?;
        Some(self.refill(run).map(|()| pair))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys as `dedup_keys` lays them out: length, then the signature.
    fn keys(sigs: &[Vec<u32>], lengths: &[u64]) -> Vec<u8> {
        let mut out = Vec::new();
        for (sig, length) in sigs.iter().zip(lengths) {
            out.extend(length.to_le_bytes());
            out.extend(sig.iter().flat_map(|v| v.to_le_bytes()));
        }
        out
    }

    fn cluster(keys: &[u8], num_perm: usize, config: ClusterConfig, budget: usize) -> Clusters {
        let dir = tempfile::tempdir().unwrap();
        let mut index = LshIndex::new(dir.path(), num_perm, config, budget).unwrap();
        // Added in uneven pieces, as tasks are.
        let width = key_bytes(num_perm);
        let n = keys.len() / width;
        let mut start = 0;
        for size in [1, 2, 3, 7].into_iter().cycle() {
            if start == n {
                break;
            }
            let end = (start + size).min(n);
            index.add(&keys[start * width..end * width]).unwrap();
            start = end;
        }
        let out = index.finish().unwrap();
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "scratch files left behind"
        );
        out
    }

    #[test]
    fn equal_bands_join_and_keep_rules_apply() {
        let sigs = vec![
            vec![1, 2, 3, 4],
            vec![9, 9, 9, 9],
            vec![7, 7, 3, 4], // shares band 1 with doc 0
            vec![u32::MAX; 4],
            vec![u32::MAX; 4], // empty documents never join
        ];
        let k = keys(&sigs, &[10, 10, 30, 0, 0]);
        let config = ClusterConfig {
            bands: 2,
            rows: 2,
            verify: Verify::Bands,
            keep: Keep::First,
        };
        let c = cluster(&k, 4, config, 1 << 20);
        assert_eq!(c.keeper, [0, 1, 0, 3, 4]);
        assert_eq!(c.clusters, 1);
        assert_eq!(c.spilled_runs, 0);
        let longest = ClusterConfig {
            keep: Keep::Longest,
            ..config
        };
        assert_eq!(cluster(&k, 4, longest, 1 << 20).keeper, [2, 1, 2, 3, 4]);
        // Agreement 0.5 < 0.8: verification keeps them apart.
        let verified = ClusterConfig {
            verify: Verify::Signature(0.8),
            ..config
        };
        let c = cluster(&k, 4, verified, 1 << 20);
        assert_eq!(c.keeper, [0, 1, 2, 3, 4]);
        assert_eq!(c.rejected, 1);
    }

    #[test]
    fn spilling_to_disk_changes_nothing_but_memory() {
        // Families of near-copies: each member differs from its family's base in a few
        // values, so some bands collide and verification has work to do.
        let num_perm = 16;
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut sigs = Vec::new();
        let mut lengths = Vec::new();
        for family in 0..60u64 {
            let base: Vec<u32> = (0..num_perm).map(|_| next() as u32).collect();
            for member in 0..(1 + family % 5) {
                let mut sig = base.clone();
                for _ in 0..member * 2 {
                    sig[next() as usize % num_perm] = next() as u32;
                }
                sigs.push(sig);
                lengths.push(next() % 1000);
            }
        }
        let k = keys(&sigs, &lengths);
        for verify in [Verify::Bands, Verify::Signature(0.7)] {
            for keep in [Keep::First, Keep::Longest] {
                let config = ClusterConfig {
                    bands: 4,
                    rows: 4,
                    verify,
                    keep,
                };
                let in_memory = cluster(&k, num_perm, config, 1 << 30);
                // A budget of a few pairs: a run per band at nearly every add.
                let spilled = cluster(&k, num_perm, config, 64 * PAIR_BYTES_IN_MEMORY);
                assert_eq!(in_memory.spilled_runs, 0);
                assert!(spilled.spilled_runs > 4 * 3, "{}", spilled.spilled_runs);
                assert_eq!(in_memory.keeper, spilled.keeper);
                assert_eq!(in_memory.candidates, spilled.candidates);
                assert_eq!(in_memory.rejected, spilled.rejected);
                assert_eq!(in_memory.clusters, spilled.clusters);
                // The keepers and clusters `finish` computes in place, against a plain
                // computation from the clusters' roots (the keepers of `first`).
                let roots = cluster(
                    &k,
                    num_perm,
                    ClusterConfig {
                        keep: Keep::First,
                        ..config
                    },
                    1 << 30,
                )
                .keeper;
                let mut best: Vec<u32> = (0..roots.len() as u32).collect();
                let mut size = vec![0u32; roots.len()];
                for (i, &root) in roots.iter().enumerate() {
                    size[root as usize] += 1;
                    if lengths[i] > lengths[best[root as usize] as usize] {
                        best[root as usize] = i as u32;
                    }
                }
                let expected: Vec<u32> = match keep {
                    Keep::First => roots.clone(),
                    Keep::Longest => roots.iter().map(|&r| best[r as usize]).collect(),
                };
                assert_eq!(in_memory.keeper, expected);
                assert_eq!(
                    in_memory.clusters,
                    size.iter().filter(|&&s| s > 1).count() as u64
                );
                assert!(in_memory.clusters > 0);
                assert!(in_memory
                    .keeper
                    .iter()
                    .enumerate()
                    .any(|(i, &k)| k as usize != i));
            }
        }
    }

    /// Families of near-copies: each member differs from its family's base in a few
    /// values, so some bands collide and verification has work to do.
    fn families(num_perm: usize) -> Vec<u8> {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut sigs = Vec::new();
        let mut lengths = Vec::new();
        for family in 0..60u64 {
            let base: Vec<u32> = (0..num_perm).map(|_| next() as u32).collect();
            for member in 0..(1 + family % 5) {
                let mut sig = base.clone();
                for _ in 0..member * 2 {
                    sig[next() as usize % num_perm] = next() as u32;
                }
                sigs.push(sig);
                lengths.push(next() % 1000);
            }
        }
        sigs.push(vec![u32::MAX; num_perm]);
        lengths.push(0);
        keys(&sigs, &lengths)
    }

    #[test]
    fn exact_mode_candidates_spilled_banded_or_offered() {
        let num_perm = 16;
        let k = families(num_perm);
        let config = ClusterConfig {
            bands: 4,
            rows: 4,
            verify: Verify::Exact(0.7),
            keep: Keep::First,
        };
        // The pairs the index offers for checking, and the clusters when every one passes.
        let banded = |budget: usize| {
            let dir = tempfile::tempdir().unwrap();
            let mut index = LshIndex::new(dir.path(), num_perm, config, budget).unwrap();
            for chunk in k.chunks(5 * key_bytes(num_perm)) {
                index.add(chunk).unwrap();
            }
            let pairs = index.take_pairs().unwrap();
            index.union_pairs(&pairs).unwrap();
            (pairs, index.finish().unwrap().keeper)
        };
        let (in_memory, spilled) = (banded(1 << 30), banded(64 * PAIR_BYTES_IN_MEMORY));
        assert!(!in_memory.0.is_empty());
        assert!(in_memory.0.windows(2).all(|w| w[0] < w[1]));
        assert!(in_memory.0.iter().all(|&(a, b)| a < b));
        assert_eq!(in_memory, spilled);

        // The same candidates found by a band join elsewhere (each bucket member with the
        // bucket's first members, buckets by equal band values) give the same clusters.
        let width = key_bytes(num_perm);
        let mut offered = Vec::new();
        for band in 0..4 {
            let mut buckets: std::collections::BTreeMap<Vec<u8>, Vec<u32>> = Default::default();
            for (i, key) in k.chunks(width).enumerate() {
                if key[8..].iter().any(|&b| b != 0xFF) {
                    let values = key[8 + band * 16..8 + (band + 1) * 16].to_vec();
                    buckets.entry(values).or_default().push(i as u32);
                }
            }
            for members in buckets.values() {
                for (m, &i) in members.iter().enumerate().skip(1) {
                    for &rep in &members[..m.min(MAX_REPRESENTATIVES)] {
                        offered.push((rep, i));
                    }
                }
            }
        }
        for verify in [Verify::Exact(0.7), Verify::Bands] {
            let dir = tempfile::tempdir().unwrap();
            let config = ClusterConfig { verify, ..config };
            let mut index = LshIndex::new(dir.path(), num_perm, config, 1 << 20).unwrap();
            index.band_elsewhere();
            index.add(&k).unwrap();
            index.offer_pairs(&offered).unwrap();
            let to_check = index.take_pairs().unwrap();
            index.union_pairs(&to_check).unwrap();
            let keeper = index.finish().unwrap().keeper;
            if verify == Verify::Bands {
                assert!(to_check.is_empty());
                assert_eq!(keeper, cluster(&k, num_perm, config, 1 << 20).keeper);
            } else {
                assert_eq!(keeper, in_memory.1);
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let signature = ClusterConfig {
            verify: Verify::Signature(0.7),
            ..config
        };
        let mut index = LshIndex::new(dir.path(), num_perm, signature, 1 << 20).unwrap();
        index.add(&k).unwrap();
        assert!(index.offer_pairs(&offered).is_err());
    }

    #[test]
    fn band_buffers_stay_within_their_share_and_are_reused() {
        let num_perm = 16;
        let k = families(num_perm);
        let width = key_bytes(num_perm);
        let config = ClusterConfig {
            bands: 4,
            rows: 4,
            verify: Verify::Bands,
            keep: Keep::First,
        };
        let budget = 40 * PAIR_BYTES_IN_MEMORY;
        let dir = tempfile::tempdir().unwrap();
        let mut index = LshIndex::new(dir.path(), num_perm, config, budget).unwrap();
        let share = index.budget_pairs.div_ceil(config.bands);
        let mut spills = 0;
        // Three documents at a time (a small staged row group): the buffers reach their share
        // and are never moved again, however many spills follow.
        let mut grown: Option<Vec<*const (u64, u32)>> = None;
        for chunk in k.chunks(3 * width) {
            index.add(chunk).unwrap();
            for pending in &index.pairs.pending {
                assert!(
                    pending.capacity() <= share,
                    "{} > {share}",
                    pending.capacity()
                );
            }
            if index.out.spilled_runs > spills {
                spills = index.out.spilled_runs;
                let at: Vec<_> = index.pairs.pending.iter().map(|p| p.as_ptr()).collect();
                match &grown {
                    None => grown = Some(at),
                    Some(first) => assert_eq!(first, &at),
                }
            }
        }
        assert!(spills > 4 * 3, "{spills}");
        index.join_band().unwrap();
        assert!(index.pairs.pending.iter().all(|p| p.capacity() == 0));
    }

    #[test]
    fn check_documents_are_cut_at_each_multiple_of_the_budget() {
        let num_perm = 16;
        let k = families(num_perm);
        let width = key_bytes(num_perm);
        let length = |i: u32| {
            let start = i as usize * width;
            u64::from_le_bytes(k[start..start + 8].try_into().unwrap())
        };
        let config = ClusterConfig {
            bands: 4,
            rows: 4,
            verify: Verify::Exact(0.7),
            keep: Keep::First,
        };
        for budget in [1, 500, 3_000, 1 << 40] {
            let dir = tempfile::tempdir().unwrap();
            let mut index = LshIndex::new(dir.path(), num_perm, config, 1 << 20).unwrap();
            index.add(&k).unwrap();
            let (documents, cuts) = index.check_documents(budget).unwrap();
            // The pairs' documents, distinct and sorted, as take_pairs would give the pairs.
            let other_dir = tempfile::tempdir().unwrap();
            let mut other = LshIndex::new(other_dir.path(), num_perm, config, 1 << 20).unwrap();
            other.add(&k).unwrap();
            let mut expected_docs: Vec<u32> = other
                .take_pairs()
                .unwrap()
                .iter()
                .flat_map(|&(a, b)| [a, b])
                .collect();
            expected_docs.sort_unstable();
            expected_docs.dedup();
            assert!(!expected_docs.is_empty());
            assert_eq!(documents, expected_docs);
            // For each multiple of the budget up to the last running total, the first
            // document whose total reaches it (numpy's searchsorted, side left).
            let mut cost = Vec::new();
            let mut total = 0;
            for &d in &documents {
                total += length(d);
                cost.push(total);
            }
            let mut expected = vec![0];
            expected
                .extend((1..=total / budget).map(|m| cost.partition_point(|&c| c < m * budget)));
            expected.push(documents.len());
            assert_eq!(cuts, expected, "budget {budget}");
        }
    }

    #[test]
    fn bad_keys_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let config = ClusterConfig {
            bands: 2,
            rows: 2,
            verify: Verify::Bands,
            keep: Keep::First,
        };
        assert!(LshIndex::new(dir.path(), 3, config, 1 << 20).is_err());
        let mut index = LshIndex::new(dir.path(), 4, config, 1 << 20).unwrap();
        assert!(index.add(&[0u8; 23]).is_err());
        index.join_band().unwrap();
        assert!(
            index.add(&[0u8; 24]).is_err(),
            "keys after clustering began"
        );
    }
}
