//! Counting distinct pre-tokens (the trainer's "words").
//!
//! A corpus has tens of millions of pre-token occurrences but only a few million distinct
//! ones, so the counter is built to cost nothing per occurrence beyond one hash and one probe:
//! keys live back to back in one byte arena (no allocation per key, no per-key allocator
//! overhead), and the table holds each key's first bytes, where the rest is, and its count.

use hashbrown::HashTable;
use std::hash::Hasher;

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

#[inline]
fn head_of(piece: &[u8]) -> u64 {
    let mut head = [0u8; 8];
    let n = piece.len().min(8);
    head[..n].copy_from_slice(&piece[..n]);
    u64::from_le_bytes(head)
}

#[inline]
fn hash_piece(head: u64, piece: &[u8]) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    h.write_u64(head);
    h.write_usize(piece.len());
    if piece.len() > 8 {
        h.write(&piece[8..]);
    }
    h.finish()
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
            s.head == head && s.len as usize == piece.len() && (piece.len() <= 8 || key_of(arena, s)[8..] == piece[8..])
        };
        if let Some(slot) = self.table.find_mut(hash, matches) {
            slot.count += n;
            return;
        }
        // Pieces come from text cut at most at line length, far below 4 GiB.
        let len = u32::try_from(piece.len()).expect("a pre-token longer than 4 GiB");
        let slot = Slot { head, start: self.arena.len() as u64, len, count: n };
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

    /// `(piece, count)` for every distinct piece, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        self.table.iter().map(|s| (key_of(&self.arena, s), s.count))
    }
}

#[cfg(test)]
mod tests {
    use super::PieceCounter;

    #[test]
    fn counts_and_absorbs() {
        let mut a = PieceCounter::default();
        for p in ["ab", "cd", "ab", "xyz", "a longer piece", "a longer piecf", "a longer piece"] {
            a.add(p.as_bytes(), 1);
        }
        let mut b = PieceCounter::default();
        b.add(b"cd", 5);
        b.add(b"new", 2);
        a.absorb(b);
        let mut all: Vec<(Vec<u8>, u64)> = a.iter().map(|(k, c)| (k.to_vec(), c)).collect();
        all.sort();
        let want: Vec<(Vec<u8>, u64)> =
            [("a longer piece", 2), ("a longer piecf", 1), ("ab", 2), ("cd", 6), ("new", 2), ("xyz", 1)].iter().map(|(k, c)| (k.as_bytes().to_vec(), *c)).collect();
        assert_eq!(all, want);
        assert_eq!(a.key_bytes(), 2 + 2 + 3 + 14 + 14 + 3);
    }
}
