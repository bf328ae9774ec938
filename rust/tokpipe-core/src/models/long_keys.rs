//! [`LongKeys`]: byte strings too long for a packed key (`packed_key`), each under a model's
//! cache id, and their ids, for the per-thread caches of BPE pieces and Unigram words.
//!
//! Why this layout: a hit should cost as few loads from memory as possible, and the first one
//! should be one its owner can request ahead.
//! - Each entry sits whole in one arena of `u32` words: its model, its two lengths, its ids,
//!   then its key's bytes. A hit that found its slot then reads one stretch of the arena (a
//!   line, or two adjacent ones), where a map of boxed keys to boxed ids read the key and the
//!   ids from two places.
//! - The table holds 8-byte slots (32 bits of the key's hash and where its entry starts),
//!   eight to a 64-byte line. A key's slot is in its home line or, when that line is full, in
//!   the lines after it. [`LongKeys::prefetch`] requests a key's home line, so that a later
//!   [`LongKeys::get`] finds it in the core's caches. hashbrown's table, used before, keeps
//!   its control bytes and its entries apart and offers no way to request either ahead: a
//!   warm BPE pass over 24 languages spent about 20% of its time in its lookups and their
//!   `memcmp`, waiting on four loads a hit (benches/RESULTS.md, "Tenth step").
//! - Emptying keeps every allocation, and nothing is ever removed alone, so a line's slots fill
//!   in order and the first empty slot ends a search.
//!
//! The owner bounds it: it reads [`LongKeys::len`] and [`LongKeys::bytes`] (an entry costs
//! [`entry_bytes`]) and calls [`LongKeys::clear`] before an insert would pass its budget,
//! which must stay below 16 GiB (arena indices are `u32`). The arena also holds ids that the
//! owner keeps for short keys ([`LongKeys::push_ids`]).

use crate::models::prefetch::prefetch;
use std::hash::Hasher;

/// A table slot: 32 bits of the key's folded hash (`tag`, with its lowest bit set, so 0 marks
/// an empty slot) and the arena index of the key's entry.
#[derive(Clone, Copy, Default)]
struct Slot {
    tag: u32,
    at: u32,
}

/// Slots per line of the table.
const LINE_SLOTS: usize = 8;

#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct Line([Slot; LINE_SLOTS]);

const _: () = assert!(std::mem::size_of::<Line>() == 64);

/// Lines of a new table.
const FIRST_LINES: usize = 16;

/// Words of an entry before its ids: the model, and the key's length (low 16 bits) with the
/// ids' count (high 16 bits).
const HEADER_WORDS: usize = 2;

/// Keys of up to `u16::MAX` bytes and their ids (up to `u16::MAX`), per model.
#[derive(Default)]
pub(crate) struct LongKeys {
    /// A power of two of lines (none until the first insert).
    lines: Vec<Line>,
    /// Keys held.
    len: usize,
    /// The entries, and the ids of [`LongKeys::push_ids`].
    arena: Vec<u32>,
}

/// The arena bytes one entry of a `key_len`-byte key and `ids_len` ids takes.
pub(crate) fn entry_bytes(key_len: usize, ids_len: usize) -> usize {
    4 * (HEADER_WORDS + ids_len + key_len.div_ceil(4))
}

/// The slot tag of `key` under `model`: 32 bits of its folded hash, lowest bit set.
#[inline]
fn tag_of(model: u32, key: &[u8]) -> u32 {
    let mut h = rustc_hash::FxHasher::default();
    h.write_u32(model);
    h.write(key);
    // Folded through a 128-bit product, so that every bit of the tag (and of the home line
    // taken from it) depends on every byte.
    let wide = h.finish() as u128 * 0x9E37_79B9_7F4A_7C15;
    ((wide as u64 ^ (wide >> 64) as u64) as u32) | 1
}

/// The index of the arena's next word.
fn arena_index(arena: &[u32]) -> u32 {
    u32::try_from(arena.len()).expect("the owner's budget keeps the arena under 16 GiB")
}

impl LongKeys {
    /// The home line of a slot tag in a table of `lines` lines (taken from the tag, so that
    /// growing moves slots without reading their keys).
    #[inline]
    fn home(tag: u32, lines: usize) -> usize {
        ((tag as u64 * lines as u64) >> 32) as usize
    }

    /// Requests the home line of `key` under `model` from memory, for a [`LongKeys::get`] of
    /// the same key soon after.
    #[inline]
    pub(crate) fn prefetch(&self, model: u32, key: &[u8]) {
        if !self.lines.is_empty() {
            prefetch(&self.lines[Self::home(tag_of(model, key), self.lines.len())]);
        }
    }

    /// The ids of `key` under `model`, if it is held.
    #[inline]
    pub(crate) fn get(&self, model: u32, key: &[u8]) -> Option<&[u32]> {
        self.find(tag_of(model, key), model, key)
    }

    /// [`LongKeys::get`] with the key's tag already computed.
    #[inline]
    fn find(&self, tag: u32, model: u32, key: &[u8]) -> Option<&[u32]> {
        if self.lines.is_empty() {
            return None;
        }
        let mask = self.lines.len() - 1;
        let mut line = Self::home(tag, self.lines.len());
        loop {
            for slot in &self.lines[line].0 {
                if slot.tag == 0 {
                    return None;
                }
                if slot.tag == tag {
                    if let Some(ids) = self.entry(slot.at, model, key) {
                        return Some(ids);
                    }
                }
            }
            // The table is never full (see `insert`), so this ends.
            line = (line + 1) & mask;
        }
    }

    /// The ids of the entry at `at` if it is `key`'s under `model`.
    #[inline]
    fn entry(&self, at: u32, model: u32, key: &[u8]) -> Option<&[u32]> {
        let at = at as usize;
        let lens = self.arena[at + 1] as usize;
        let (key_len, ids_len) = (lens & 0xFFFF, lens >> 16);
        if self.arena[at] != model || key_len != key.len() {
            return None;
        }
        let ids_at = at + HEADER_WORDS;
        let words = &self.arena[ids_at + ids_len..ids_at + ids_len + key_len.div_ceil(4)];
        // SAFETY: any `u32` is four valid bytes, and `key_len` bytes lie within `words`.
        let held = unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), key_len) };
        (held == key).then(|| &self.arena[ids_at..ids_at + ids_len])
    }

    /// Holds `new_ids` for `key` under `model`, unless it is held already or either is longer
    /// than `u16::MAX`.
    pub(crate) fn insert(&mut self, model: u32, key: &[u8], new_ids: &[u32]) {
        let tag = tag_of(model, key);
        if key.len() > u16::MAX as usize
            || new_ids.len() > u16::MAX as usize
            || self.find(tag, model, key).is_some()
        {
            return;
        }
        // At most 7/8 of the slots are used, so a search always meets an empty one.
        if (self.len + 1) * 8 > self.lines.len() * LINE_SLOTS * 7 {
            self.grow();
        }
        let at = self.push_entry(model, key, new_ids);
        self.place(Slot { tag, at });
        self.len += 1;
    }

    /// Appends the entry of `key` under `model` with `ids` to the arena (no slot points to it
    /// yet) and returns where it starts.
    fn push_entry(&mut self, model: u32, key: &[u8], ids: &[u32]) -> u32 {
        let at = arena_index(&self.arena);
        self.arena.push(model);
        self.arena.push(key.len() as u32 | (ids.len() as u32) << 16);
        self.arena.extend_from_slice(ids);
        // The key's bytes in memory order (the last word padded with zeros).
        self.arena.extend(key.chunks(4).map(|c| {
            let mut word = [0; 4];
            word[..c.len()].copy_from_slice(c);
            u32::from_ne_bytes(word)
        }));
        at
    }

    /// Puts `slot` in the first empty slot from its home line on.
    fn place(&mut self, slot: Slot) {
        let mask = self.lines.len() - 1;
        let mut line = Self::home(slot.tag, self.lines.len());
        loop {
            if let Some(free) = self.lines[line].0.iter_mut().find(|s| s.tag == 0) {
                *free = slot;
                return;
            }
            line = (line + 1) & mask;
        }
    }

    /// Doubles the table (or makes the first one), moving every slot to its new home.
    fn grow(&mut self) {
        let lines = (self.lines.len() * 2).max(FIRST_LINES);
        let old = std::mem::replace(&mut self.lines, vec![Line::default(); lines]);
        for slot in old.iter().flat_map(|line| line.0).filter(|s| s.tag != 0) {
            self.place(slot);
        }
    }

    /// Keeps `new_ids` in the arena (for the owner's short keys) and returns where.
    pub(crate) fn push_ids(&mut self, new_ids: &[u32]) -> u32 {
        let at = arena_index(&self.arena);
        self.arena.extend_from_slice(new_ids);
        at
    }

    /// The `len` ids kept at `at` by [`LongKeys::push_ids`].
    #[inline]
    pub(crate) fn ids(&self, at: u32, len: u32) -> &[u32] {
        &self.arena[at as usize..(at + len) as usize]
    }

    /// Keys held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Bytes of entries and ids in the arena.
    pub(crate) fn bytes(&self) -> usize {
        4 * self.arena.len()
    }

    /// Forgets everything, keeping the allocations.
    pub(crate) fn clear(&mut self) {
        self.lines.fill(Line::default());
        self.len = 0;
        self.arena.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_found_under_their_model_only_until_cleared() {
        let mut long = LongKeys::default();
        // Lengths of every padding of the last word, enough keys to grow the table several
        // times; each key starts with its own number and a colon, so none is another's prefix.
        let keys: Vec<String> = (0..5000)
            .map(|i| {
                let k = format!("{i}:{}", "abcdefghij".repeat(4));
                k[..i.to_string().len() + 1 + i % 40].to_string()
            })
            .collect();
        for (i, k) in keys.iter().enumerate() {
            long.insert(7, k.as_bytes(), &[i as u32, 1]);
        }
        // A second insert of a held key keeps the first ids.
        long.insert(7, keys[3].as_bytes(), &[9, 9, 9]);
        assert_eq!(long.len(), keys.len());
        for (i, k) in keys.iter().enumerate() {
            long.prefetch(7, k.as_bytes());
            assert_eq!(long.get(7, k.as_bytes()), Some(&[i as u32, 1][..]));
            assert_eq!(long.get(8, k.as_bytes()), None);
            // A prefix or an extension of a held key is another key.
            assert_eq!(long.get(7, &k.as_bytes()[..k.len() - 1]), None);
            assert_eq!(long.get(7, format!("{k}x").as_bytes()), None);
        }
        let held: usize = keys.iter().map(|k| entry_bytes(k.len(), 2)).sum();
        let at = long.push_ids(&[4, 5, 6]);
        assert_eq!(long.ids(at, 3), &[4, 5, 6]);
        assert_eq!(long.bytes(), held + 12);
        long.clear();
        assert_eq!((long.len(), long.bytes()), (0, 0));
        assert_eq!(long.get(7, keys[0].as_bytes()), None);
        long.insert(7, keys[0].as_bytes(), &[3]);
        assert_eq!(long.get(7, keys[0].as_bytes()), Some(&[3][..]));
    }

    /// Puts an entry of `key` under `model` with `ids` in the arena, its slot tagged `tag`
    /// (forged: any tag), and returns where it is.
    fn forge(long: &mut LongKeys, tag: u32, model: u32, key: &[u8], ids: &[u32]) -> u32 {
        let at = long.push_entry(model, key, ids);
        long.place(Slot { tag, at });
        at
    }

    #[test]
    fn keys_whose_tags_collide_are_told_apart_by_their_model_and_bytes() {
        // Slots of one tag, as if every key hashed alike: entries are compared by model,
        // length and bytes.
        let mut long = LongKeys::default();
        let key: &[u8] = b"first key of many bytes";
        long.insert(1, b"a key that makes the table", &[0]);
        let tag = tag_of(1, key);
        // Found first from the key's home line: the same key under another model.
        let theirs = forge(&mut long, tag, 2, key, &[3]);
        long.insert(1, key, &[1]);
        let other = forge(&mut long, tag, 1, b"other key of many bytes", &[2]);
        assert_eq!(long.get(1, key), Some(&[1][..]));
        assert_eq!(long.entry(theirs, 1, key), None);
        assert_eq!(long.entry(theirs, 2, key), Some(&[3][..]));
        assert_eq!(
            long.entry(other, 1, b"other key of many bytes"),
            Some(&[2][..])
        );
        assert_eq!(long.entry(other, 1, key), None);
        assert_eq!(long.entry(other, 1, b"other key of many byte"), None);
    }
}
