//! The whole-token lookup of short pieces: the id of every "atomic" token (one that a piece is
//! encoded to whole, see [`super::model`]) of 2 to [`MAX_PIECE`] bytes, keyed by its packed
//! bytes ([`key_of`], the piece cache's keys).
//!
//! Why: a piece the per-thread cache has not seen is first looked up in the vocabulary, and on
//! English text most such pieces are tokens. The vocabulary's hash map hashes the bytes, reads
//! a control byte, then an entry, then follows the entry's pointer to the stored bytes to
//! compare them: three cache misses in a table of megabytes. Here the key is computed once
//! (the cache computed it already) and a probe is one 24-byte slot, key and id side by side.
//! Open addressing, linear probing, at most half full (a piece that is no token scans to the
//! next empty slot before it is merged).
//!
//! Memory: 24 bytes a slot, 6 MiB for cl100k (99,226 such tokens), 12 MiB for o200k, per
//! model.

use super::huge_table::HugeTable;
use super::piece_cache::{hash_key, key_of, MAX_PIECE};

/// An empty slot's key (a real key has the piece's length, at least 2, in its top byte).
const EMPTY_KEY: u128 = 0;

#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct Slot {
    /// The key as two halves (a `u128` would align, and pad, the slot to 32 bytes).
    lo: u64,
    hi: u64,
    id: u32,
}

const EMPTY: Slot = Slot {
    lo: 0,
    hi: 0,
    id: u32::MAX,
};

#[derive(Clone, Debug, Default)]
pub(crate) struct ShortTokens {
    slots: HugeTable<Slot>,
    /// `64 - log2(slots.len())`.
    shift: u32,
}

impl ShortTokens {
    /// The table of `tokens`' entries `(bytes, id)` of 2 to [`MAX_PIECE`] bytes (the others
    /// are left out); no two may share their bytes.
    pub(crate) fn new<'a>(tokens: impl Iterator<Item = (&'a [u8], u32)>) -> Self {
        let short: Vec<(u128, u32)> = tokens
            .filter(|(b, _)| (2..=MAX_PIECE).contains(&b.len()))
            .map(|(b, id)| (key_of(b), id))
            .collect();
        let capacity = (2 * short.len()).next_power_of_two().max(16);
        let mut table = ShortTokens {
            slots: HugeTable::filled(capacity, EMPTY),
            shift: 64 - capacity.trailing_zeros(),
        };
        let mask = capacity - 1;
        for (key, id) in short {
            let mut i = table.home(key);
            while table.slots[i].key() != EMPTY_KEY {
                debug_assert_ne!(table.slots[i].key(), key, "two tokens of the same bytes");
                i = (i + 1) & mask;
            }
            table.slots[i] = Slot {
                lo: key as u64,
                hi: (key >> 64) as u64,
                id,
            };
        }
        table
    }

    #[inline(always)]
    fn home(&self, key: u128) -> usize {
        (hash_key(key) >> self.shift) as usize
    }

    /// Asks the CPU to load the slot where the search for `key` starts, ahead of
    /// [`ShortTokens::get`].
    #[inline(always)]
    pub(crate) fn prefetch(&self, key: u128) {
        if !self.slots.is_empty() {
            crate::models::prefetch::prefetch(&self.slots[self.home(key)]);
        }
    }

    /// The id of the token of key `key` (a [`key_of`] key), if it is in the table (never for
    /// the key of a single byte, which the piece cache's misses ask about too).
    #[inline(always)]
    pub(crate) fn get(&self, key: u128) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            let slot = &self.slots[i];
            let k = slot.key();
            if k == key {
                return Some(slot.id);
            }
            if k == EMPTY_KEY {
                return None;
            }
            i = (i + 1) & mask;
        }
    }
}

impl Slot {
    #[inline(always)]
    fn key(&self) -> u128 {
        self.lo as u128 | (self.hi as u128) << 64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::bpe::BpeModel;
    use crate::pre_tokenizers::scanners::tests::corpus_texts;
    use crate::pre_tokenizers::PreTokenizer;

    #[test]
    fn every_piece_of_the_corpora_is_found_as_the_vocabulary_finds_it() {
        // cl100k and o200k: every token of 2 to 15 bytes is found with its id, and every piece
        // of the shared corpora gets what the vocabulary's map says (absent ones included).
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpora/vocab");
        let texts = corpus_texts();
        for name in ["cl100k", "o200k"] {
            let path = dir.join(format!("{name}_base.tiktoken.gz"));
            let ranks = crate::formats::tiktoken::read_ranks(&path).unwrap();
            let model = BpeModel::from_ranks(ranks, name).unwrap();
            let table = ShortTokens::new(model.tokens().map(|(id, b)| (b, id)));
            let mut short = 0;
            for (id, bytes) in model.tokens() {
                if (2..=MAX_PIECE).contains(&bytes.len()) {
                    assert_eq!(table.get(key_of(bytes)), Some(id), "{bytes:?}");
                    short += 1;
                }
            }
            assert!(short > 90_000, "{name}: {short}");
            let (mut found, mut absent) = (0, 0);
            let pre = PreTokenizer::new(name).unwrap();
            for (_, text) in &texts {
                pre.split(text, |piece| {
                    let b = piece.as_bytes();
                    if (2..=MAX_PIECE).contains(&b.len()) {
                        let want = model.token_id(b);
                        assert_eq!(table.get(key_of(b)), want, "{piece:?}");
                        found += want.is_some() as usize;
                        absent += want.is_none() as usize;
                    }
                })
                .unwrap();
            }
            assert!(found > 1000 && absent > 100, "{name}: {found} {absent}");
        }
    }

    #[test]
    fn an_empty_table_finds_nothing() {
        let table = ShortTokens::new(std::iter::empty());
        assert_eq!(table.get(key_of(b"ab")), None);
        assert_eq!(ShortTokens::default().get(key_of(b"ab")), None);
        let one = ShortTokens::new([(&b"ab"[..], 7), (&b"a"[..], 1)].into_iter());
        assert_eq!(one.get(key_of(b"ab")), Some(7));
        assert_eq!(one.get(key_of(b"ba")), None);
    }
}
