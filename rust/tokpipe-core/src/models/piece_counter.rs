//! Counting distinct pre-tokens (the trainers' "words"), shared by every trainer:
//! [`CorpusCounts`] feeds texts or files through a trainer's counting function on all cores,
//! one [`PieceCounter`] per thread.
//!
//! A corpus has tens of millions of pre-token occurrences but only a few million distinct
//! ones, so the counter is built to cost nothing per occurrence beyond one hash and one probe:
//! keys live back to back in one byte arena (no allocation per key, no per-key allocator
//! overhead), and the table holds each key's first bytes, where the rest is, and its count.

use crate::corpus::{self, CorpusOptions, CorpusReport};
use crate::error::{Error, Result};
use hashbrown::HashTable;
use rayon::prelude::*;
use std::path::PathBuf;
use std::sync::Mutex;

/// Texts handed to one counting task by [`CorpusCounts::feed`], in bytes: enough work to hide
/// the task's overhead, small enough to balance threads.
const FEED_TASK_BYTES: usize = 256 << 10;

/// A trainer's counted corpus: distinct pieces with their counts, and how much text was fed.
#[derive(Debug, Default)]
pub(crate) struct CorpusCounts {
    pub(crate) counts: PieceCounter,
    /// Bytes of text fed so far; training on none is an error, not an empty model.
    pub(crate) fed_bytes: u64,
}

/// Counts the pieces of one text into a counter (the trainer's normalizer and pre-tokenizer).
pub(crate) type CountFn<'a> = dyn Fn(&str, &mut PieceCounter) -> Result<()> + Sync + 'a;

impl CorpusCounts {
    /// Counts `texts`, each text one sequence, in parallel.
    pub(crate) fn feed(&mut self, texts: &[&str], count: &CountFn<'_>) -> Result<()> {
        self.feed_items(
            texts,
            |text| text.len(),
            |text, counter| count(text, counter),
        )
    }

    /// Counts `items` (texts with whatever the counting function needs beside them, such as
    /// pre-segmentation cuts), each `len` bytes of text, in parallel.
    pub(crate) fn feed_items<T: Sync>(
        &mut self,
        items: &[T],
        len: impl Fn(&T) -> usize,
        count: impl Fn(&T, &mut PieceCounter) -> Result<()> + Sync,
    ) -> Result<()> {
        // Cut the items into tasks of about FEED_TASK_BYTES each.
        let mut tasks = Vec::new();
        let (mut start, mut size) = (0, 0);
        for (i, item) in items.iter().enumerate() {
            size += len(item);
            if size >= FEED_TASK_BYTES {
                tasks.push(start..i + 1);
                (start, size) = (i + 1, 0);
            }
        }
        if start < items.len() {
            tasks.push(start..items.len());
        }
        let counters = per_thread_counters();
        tasks.into_par_iter().try_for_each(|task| {
            let mut counter = counters[rayon::current_thread_index().unwrap_or(0) % counters.len()]
                .lock()
                .expect("no panics while counting");
            let ThreadCounter { total, batch } = &mut *counter;
            items[task].iter().try_for_each(|item| count(item, batch))?;
            batch.drain_into(total);
            Ok::<(), Error>(())
        })?;
        self.fed_bytes += items.iter().map(|item| len(item) as u64).sum::<u64>();
        self.absorb_counters(counters);
        Ok(())
    }

    /// Streams `paths` (see [`crate::corpus`]) and counts their documents: reader threads open
    /// and decompress files, all rayon threads decode and count.
    pub(crate) fn feed_files(
        &mut self,
        paths: &[PathBuf],
        opts: &CorpusOptions,
        progress: &indicatif::ProgressBar,
        count: &CountFn<'_>,
    ) -> Result<CorpusReport> {
        let counters = per_thread_counters();
        let report = corpus::par_for_each_document(
            paths,
            opts,
            progress,
            &counters,
            |counter, doc| count(doc, &mut counter.batch),
            |counter| {
                let ThreadCounter { total, batch } = counter;
                batch.drain_into(total);
            },
        );
        progress.finish_and_clear();
        let report = report?;
        self.fed_bytes += report.bytes;
        self.absorb_counters(counters);
        Ok(report)
    }

    fn absorb_counters(&mut self, counters: Vec<Mutex<ThreadCounter>>) {
        for counter in counters {
            self.counts.absorb(
                counter
                    .into_inner()
                    .expect("no panics while counting")
                    .total,
            );
        }
    }
}

/// One rayon thread's counts: the running total, and the current batch's counts, kept apart
/// for cache efficiency (see [`PieceCounter::drain_into`]).
#[derive(Default)]
struct ThreadCounter {
    total: PieceCounter,
    batch: PieceCounter,
}

/// One counter per rayon thread of the current pool; a thread only ever locks its own, so the
/// locks are never contended.
fn per_thread_counters() -> Vec<Mutex<ThreadCounter>> {
    (0..rayon::current_num_threads())
        .map(|_| Mutex::default())
        .collect()
}

/// Where a key sits in the arena, and how often it was seen.
#[derive(Clone, Copy, Debug)]
struct Slot {
    /// The key's first 8 bytes (zero-padded): most pre-tokens are that short, and comparing
    /// them here spares a cache miss into the arena on every lookup.
    head: u64,
    start: u64,
    len: u32,
    count: u64,
}

#[derive(Debug, Default)]
pub(crate) struct PieceCounter {
    table: HashTable<Slot>,
    arena: Vec<u8>,
}

/// Up to the first 8 bytes of `bytes` as a little-endian integer, zero-padded, read with at
/// most two overlapping loads instead of a byte loop.
#[inline]
fn head_of(bytes: &[u8]) -> u64 {
    let n = bytes.len();
    if n >= 8 {
        u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"))
    } else if n >= 4 {
        let low = u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes")) as u64;
        let high = u32::from_le_bytes(bytes[n - 4..].try_into().expect("4 bytes")) as u64;
        low | high << (8 * (n - 4))
    } else if n >= 2 {
        let low = u16::from_le_bytes(bytes[..2].try_into().expect("2 bytes")) as u64;
        let high = u16::from_le_bytes(bytes[n - 2..].try_into().expect("2 bytes")) as u64;
        low | high << (8 * (n - 2))
    } else {
        bytes.first().map_or(0, |&b| b as u64)
    }
}

/// 64x64 -> 128-bit multiply folded back to 64 bits: mixes every input bit into both the low
/// bits (the bucket) and the high bits (hashbrown's tag).
#[inline]
fn fold_multiply(a: u64, b: u64) -> u64 {
    let full = (a as u128) * (b as u128);
    (full as u64) ^ ((full >> 64) as u64)
}

/// Hash of a piece whose first 8 bytes are `head`; short pieces (most of them) cost one
/// multiply.
#[inline]
fn hash_piece(head: u64, piece: &[u8]) -> u64 {
    const K0: u64 = 0x243f_6a88_85a3_08d3;
    const K1: u64 = 0x1319_8a2e_0370_7344;
    let mut h = fold_multiply(head ^ K0, piece.len() as u64 ^ K1);
    if piece.len() > 8 {
        for chunk in piece[8..].chunks(8) {
            h = fold_multiply(h ^ head_of(chunk), K1);
        }
    }
    h
}

#[inline]
fn key_of<'a>(arena: &'a [u8], slot: &Slot) -> &'a [u8] {
    &arena[slot.start as usize..slot.start as usize + slot.len as usize]
}

#[inline]
fn rehash(arena: &[u8], slot: &Slot) -> u64 {
    hash_piece(slot.head, key_of(arena, slot))
}

impl PieceCounter {
    /// Adds `n` occurrences of `piece`.
    #[inline]
    pub(crate) fn add(&mut self, piece: &[u8], n: u64) {
        let head = head_of(piece);
        let hash = hash_piece(head, piece);
        let arena = &self.arena;
        let matches = |s: &Slot| {
            s.head == head
                && s.len as usize == piece.len()
                && (piece.len() <= 8 || key_of(arena, s)[8..] == piece[8..])
        };
        if let Some(slot) = self.table.find_mut(hash, matches) {
            slot.count += n;
            return;
        }
        // Pieces come from text cut at most at line length, far below 4 GiB.
        let len = u32::try_from(piece.len()).expect("a pre-token longer than 4 GiB");
        let slot = Slot {
            head,
            start: self.arena.len() as u64,
            len,
            count: n,
        };
        self.arena.extend_from_slice(piece);
        let arena = &self.arena;
        self.table.insert_unique(hash, slot, |s| rehash(arena, s));
    }

    /// Number of distinct pieces.
    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// Bytes of all distinct pieces together.
    pub(crate) fn key_bytes(&self) -> usize {
        self.arena.len()
    }

    /// Adds every count of `other` to `self`; the bigger counter absorbs the smaller one.
    pub(crate) fn absorb(&mut self, mut other: PieceCounter) {
        if other.len() > self.len() {
            std::mem::swap(self, &mut other);
        }
        self.table.reserve(other.len(), |s| rehash(&self.arena, s));
        for slot in other.table.iter() {
            self.add(key_of(&other.arena, slot), slot.count);
        }
    }

    /// Adds every count of `self` to `total` and empties `self`, keeping its memory for the
    /// next batch.
    ///
    /// Why count a batch apart first: a corpus has millions of distinct pieces, so the
    /// running total is a table far bigger than the CPU caches and nearly every lookup of a
    /// rarer piece misses twice. A batch's own table stays small and cached, and each of its
    /// distinct pieces then costs the big table one lookup instead of one per occurrence.
    pub(crate) fn drain_into(&mut self, total: &mut PieceCounter) {
        total
            .table
            .reserve(self.len().min(1 << 16), |s| rehash(&total.arena, s));
        for slot in self.table.iter() {
            total.add(key_of(&self.arena, slot), slot.count);
        }
        self.table.clear();
        self.arena.clear();
    }

    /// `(piece, count)` for every distinct piece, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        self.table.iter().map(|s| (key_of(&self.arena, s), s.count))
    }
}

#[cfg(test)]
mod tests {
    use super::PieceCounter;

    #[test]
    fn head_reads_zero_padded_prefixes() {
        for n in 0..12 {
            let bytes: Vec<u8> = (1..=n as u8).collect();
            let mut want = [0u8; 8];
            want[..n.min(8)].copy_from_slice(&bytes[..n.min(8)]);
            assert_eq!(
                super::head_of(&bytes),
                u64::from_le_bytes(want),
                "length {n}"
            );
        }
    }

    #[test]
    fn counts_and_absorbs() {
        let mut a = PieceCounter::default();
        for p in [
            "ab",
            "cd",
            "ab",
            "xyz",
            "a longer piece",
            "a longer piecf",
            "a longer piece",
        ] {
            a.add(p.as_bytes(), 1);
        }
        let mut b = PieceCounter::default();
        b.add(b"cd", 5);
        b.add(b"new", 2);
        let mut batch = PieceCounter::default();
        batch.add(b"cd", 1);
        batch.drain_into(&mut b);
        assert_eq!((batch.len(), batch.key_bytes()), (0, 0));
        a.absorb(b);
        let mut all: Vec<(Vec<u8>, u64)> = a.iter().map(|(k, c)| (k.to_vec(), c)).collect();
        all.sort();
        let want: Vec<(Vec<u8>, u64)> = [
            ("a longer piece", 2),
            ("a longer piecf", 1),
            ("ab", 2),
            ("cd", 7),
            ("new", 2),
            ("xyz", 1),
        ]
        .iter()
        .map(|(k, c)| (k.as_bytes().to_vec(), *c))
        .collect();
        assert_eq!(all, want);
        assert_eq!(a.key_bytes(), 2 + 2 + 3 + 14 + 14 + 3);
    }
}
