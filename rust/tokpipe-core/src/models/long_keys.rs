//! [`LongKeys`]: byte strings too long for a packed key (`packed_key`), each under a model's
//! cache id, and their ids, for the per-thread caches of BPE pieces and Unigram words.
//!
//! Why: a map of boxed keys to boxed ids reads four lines a hit (the hash table's control
//! bytes, its entry, the key, the ids), allocates twice an entry and frees them all when
//! emptied. Here the keys and the ids sit in two arenas and a hash table holds where: a hit
//! reads the table's control bytes and entry, the key and the ids, and emptying keeps every
//! allocation. On 24 languages of manual pages a warm BPE pass spent about 17% of its time in
//! the boxed map (benches/RESULTS.md, "Ninth step").
//!
//! The owner bounds it: it reads [`LongKeys::len`] and [`LongKeys::bytes`] and calls
//! [`LongKeys::clear`] before an insert would pass its budget. The ids arena also holds ids
//! that the owner keeps for short keys ([`LongKeys::push_ids`]).

use hashbrown::HashTable;
use std::hash::Hasher;

/// Where one key and its ids are in the arenas.
#[derive(Clone, Copy)]
struct Entry {
    model: u32,
    key_at: u32,
    ids_at: u32,
    key_len: u16,
    ids_len: u16,
}

/// Keys of up to `u16::MAX` bytes and their ids (up to `u16::MAX`), per model.
#[derive(Default)]
pub(crate) struct LongKeys {
    table: HashTable<Entry>,
    keys: Vec<u8>,
    ids: Vec<u32>,
}

fn hash(model: u32, key: &[u8]) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    h.write_u32(model);
    h.write(key);
    h.finish()
}

impl LongKeys {
    /// The ids of `key` under `model`, if it is held.
    #[inline]
    pub(crate) fn get(&self, model: u32, key: &[u8]) -> Option<&[u32]> {
        let e = self.find(hash(model, key), model, key)?;
        Some(&self.ids[e.ids_at as usize..e.ids_at as usize + e.ids_len as usize])
    }

    /// The entry of `key` under `model`, whose hash is `h`.
    #[inline]
    fn find(&self, h: u64, model: u32, key: &[u8]) -> Option<&Entry> {
        self.table.find(h, |e| {
            e.model == model
                && e.key_len as usize == key.len()
                && &self.keys[e.key_at as usize..e.key_at as usize + key.len()] == key
        })
    }

    /// Holds `new_ids` for `key` under `model`, unless it is held already or either is longer
    /// than `u16::MAX`.
    pub(crate) fn insert(&mut self, model: u32, key: &[u8], new_ids: &[u32]) {
        let h = hash(model, key);
        if key.len() > u16::MAX as usize
            || new_ids.len() > u16::MAX as usize
            || self.find(h, model, key).is_some()
        {
            return;
        }
        let entry = Entry {
            model,
            key_at: self.keys.len() as u32,
            ids_at: self.ids.len() as u32,
            key_len: key.len() as u16,
            ids_len: new_ids.len() as u16,
        };
        self.keys.extend_from_slice(key);
        self.ids.extend_from_slice(new_ids);
        let keys = &self.keys;
        // Growing rehashes every entry from its key in the arena.
        self.table.insert_unique(h, entry, |e| {
            hash(
                e.model,
                &keys[e.key_at as usize..e.key_at as usize + e.key_len as usize],
            )
        });
    }

    /// Keeps `new_ids` in the ids arena (for the owner's short keys) and returns where.
    pub(crate) fn push_ids(&mut self, new_ids: &[u32]) -> u32 {
        let at = self.ids.len() as u32;
        self.ids.extend_from_slice(new_ids);
        at
    }

    /// The `len` ids kept at `at` by [`LongKeys::push_ids`].
    #[inline]
    pub(crate) fn ids(&self, at: u32, len: u32) -> &[u32] {
        &self.ids[at as usize..(at + len) as usize]
    }

    /// Keys held.
    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// Bytes of keys and ids in the arenas.
    pub(crate) fn bytes(&self) -> usize {
        self.keys.len() + 4 * self.ids.len()
    }

    /// Forgets everything, keeping the allocations.
    pub(crate) fn clear(&mut self) {
        self.table.clear();
        self.keys.clear();
        self.ids.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_found_under_their_model_only_until_cleared() {
        let mut long = LongKeys::default();
        let keys: Vec<String> = (0..5000)
            .map(|i| format!("a long key number {i}"))
            .collect();
        for (i, k) in keys.iter().enumerate() {
            long.insert(7, k.as_bytes(), &[i as u32, 1]);
        }
        // A second insert of a held key keeps the first ids.
        long.insert(7, keys[3].as_bytes(), &[9, 9, 9]);
        assert_eq!(long.len(), keys.len());
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(long.get(7, k.as_bytes()), Some(&[i as u32, 1][..]));
            assert_eq!(long.get(8, k.as_bytes()), None);
        }
        assert_eq!(long.get(7, b"a long key number"), None);
        let at = long.push_ids(&[4, 5, 6]);
        assert_eq!(long.ids(at, 3), &[4, 5, 6]);
        long.clear();
        assert_eq!((long.len(), long.bytes()), (0, 0));
        assert_eq!(long.get(7, keys[0].as_bytes()), None);
    }
}
