//! The two hash tables of the model, both open addressing with linear probing over one flat
//! array, so a lookup is one multiply, a shift and (usually) one cache line:
//! - [`NgramTable`]: n-gram key (a 64-bit hash of the word ids, see [`combine`]) to
//!   probability and backoff, as KenLM's probing model stores them. Keys are not verified
//!   against the words, exactly like KenLM: two n-grams share an entry only if their 64-bit
//!   keys collide.
//! - [`Vocab`]: word bytes to id, verified against the stored bytes.

use hashbrown::HashTable;
use std::hash::{BuildHasher, Hasher};

/// KenLM's `detail::CombineWordHash`: extends the key of an n-gram by one more word to its
/// left. An n-gram's key starts from its *last* word's id, so the keys of `w`, `v w`, `u v w`
/// are built one after the other while scoring `w` after the context `u v`.
#[inline]
pub fn combine(current: u64, next: u32) -> u64 {
    current.wrapping_mul(8978948897894561157) ^ (1 + next as u64).wrapping_mul(17894857484156487943)
}

/// Key of the n-gram `words` (in text order) as [`combine`] builds it.
#[cfg(test)]
pub fn ngram_key(words: &[u32]) -> u64 {
    let (&last, context) = words.split_last().expect("an n-gram has a word");
    context
        .iter()
        .rev()
        .fold(last as u64, |key, &w| combine(key, w))
}

/// Probability and backoff (log10) as KenLM keeps them: the sign bit of `prob` is set while
/// no longer n-gram ends with this one ("independent left", which stops the search early),
/// and a backoff of exactly `-0.0` means no longer n-gram starts with this one (so the state
/// after it can forget it).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct Weights {
    pub prob: f32,
    pub backoff: f32,
}

const SIGN: u32 = 0x8000_0000;

impl Weights {
    /// The log10 probability (always with its sign bit on, as KenLM returns it).
    #[inline]
    pub fn prob(&self) -> f32 {
        f32::from_bits(self.prob.to_bits() | SIGN)
    }

    #[inline]
    pub fn independent_left(&self) -> bool {
        self.prob.to_bits() & SIGN != 0
    }

    pub fn set_independent_left(&mut self) {
        self.prob = f32::from_bits(self.prob.to_bits() | SIGN);
    }

    pub fn mark_extends_left(&mut self) {
        self.prob = f32::from_bits(self.prob.to_bits() & !SIGN);
    }

    #[inline]
    pub fn has_extension(&self) -> bool {
        has_extension(self.backoff)
    }

    /// KenLM's `SetExtension`: a zero backoff becomes `+0.0`, so the state keeps this n-gram.
    pub fn set_extension(&mut self) {
        if self.backoff == 0.0 {
            self.backoff = 0.0;
        }
    }
}

/// `-0.0` (bit for bit) marks an n-gram that is nobody's context.
#[inline]
pub fn has_extension(backoff: f32) -> bool {
    backoff.to_bits() != (-0.0f32).to_bits()
}

#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
struct Entry {
    key: u64,
    weights: Weights,
}

/// Key 0 marks an empty slot; a real key of 0 is stored as 1 (a 2^-64 event, and KenLM does
/// not verify keys either).
const EMPTY: u64 = 0;

#[inline]
fn stored(key: u64) -> u64 {
    if key == EMPTY {
        1
    } else {
        key
    }
}

/// n-gram key to [`Weights`], linear probing, at most 2/3 full.
#[derive(Clone, Debug, Default)]
pub struct NgramTable {
    entries: Vec<Entry>,
    shift: u32,
    len: usize,
}

impl NgramTable {
    pub fn with_capacity(n: usize) -> Self {
        let slots = (n + n / 2 + 1).next_power_of_two().max(8);
        NgramTable {
            entries: vec![Entry::default(); slots],
            shift: 64 - slots.trailing_zeros(),
            len: 0,
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Bytes held by the table.
    pub fn memory(&self) -> usize {
        self.entries.len() * std::mem::size_of::<Entry>()
    }

    #[inline]
    fn slot(&self, key: u64) -> usize {
        // The keys' low bits are poorly mixed (multiplications only carry upwards), so the
        // slot comes from the high bits of one more multiplication.
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    #[inline]
    pub fn get(&self, key: u64) -> Option<&Weights> {
        let key = stored(key);
        let mask = self.entries.len() - 1;
        let mut i = self.slot(key);
        loop {
            let e = &self.entries[i];
            if e.key == key {
                return Some(&e.weights);
            }
            if e.key == EMPTY {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    pub fn get_mut(&mut self, key: u64) -> Option<&mut Weights> {
        let key = stored(key);
        let mask = self.entries.len() - 1;
        let mut i = self.slot(key);
        loop {
            if self.entries[i].key == key {
                return Some(&mut self.entries[i].weights);
            }
            if self.entries[i].key == EMPTY {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    /// The entry for `key`, inserted with `weights` if absent; true when it was inserted. As
    /// in KenLM, the first entry of a key wins.
    pub fn get_or_insert(&mut self, key: u64, weights: Weights) -> (&mut Weights, bool) {
        if (self.len + 1) * 3 > self.entries.len() * 2 {
            self.grow();
        }
        let key = stored(key);
        let mask = self.entries.len() - 1;
        let mut i = self.slot(key);
        loop {
            if self.entries[i].key == key {
                return (&mut self.entries[i].weights, false);
            }
            if self.entries[i].key == EMPTY {
                self.entries[i] = Entry { key, weights };
                self.len += 1;
                return (&mut self.entries[i].weights, true);
            }
            i = (i + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let old = std::mem::take(&mut self.entries);
        *self = NgramTable::with_capacity(old.len());
        for e in old.into_iter().filter(|e| e.key != EMPTY) {
            let mask = self.entries.len() - 1;
            let mut i = self.slot(e.key);
            while self.entries[i].key != EMPTY {
                i = (i + 1) & mask;
            }
            self.entries[i] = e;
            self.len += 1;
        }
    }
}

/// Word bytes to dense ids, the bytes kept in one arena.
#[derive(Clone, Debug, Default)]
pub struct Vocab {
    table: HashTable<u32>,
    arena: Vec<u8>,
    /// `spans[id]` is the word's range in `arena`.
    spans: Vec<(usize, usize)>,
}

#[inline]
fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h = rustc_hash::FxBuildHasher.build_hasher();
    h.write(bytes);
    h.finish()
}

impl Vocab {
    #[allow(clippy::len_without_is_empty)] // never empty: the specials come first
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn word(&self, id: u32) -> &[u8] {
        let (start, end) = self.spans[id as usize];
        &self.arena[start..end]
    }

    #[inline]
    pub fn get(&self, word: &[u8]) -> Option<u32> {
        let (arena, spans) = (&self.arena, &self.spans);
        self.table
            .find(hash_bytes(word), |&id| {
                let (s, e) = spans[id as usize];
                &arena[s..e] == word
            })
            .copied()
    }

    /// The word's id, a new one (the next free) if it is new; true when it was new.
    pub fn insert(&mut self, word: &[u8]) -> (u32, bool) {
        let hash = hash_bytes(word);
        let (arena, spans) = (&self.arena, &self.spans);
        if let Some(&id) = self.table.find(hash, |&id| {
            let (s, e) = spans[id as usize];
            &arena[s..e] == word
        }) {
            return (id, false);
        }
        let id = self.spans.len() as u32;
        let start = self.arena.len();
        self.arena.extend_from_slice(word);
        self.spans.push((start, self.arena.len()));
        let (arena, spans) = (&self.arena, &self.spans);
        self.table.insert_unique(hash, id, |&id| {
            let (s, e) = spans[id as usize];
            hash_bytes(&arena[s..e])
        });
        (id, true)
    }

    pub fn memory(&self) -> usize {
        self.arena.capacity() + self.spans.capacity() * 16 + self.table.capacity() * 5
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_find_what_they_hold_and_grow() {
        let mut t = NgramTable::with_capacity(2);
        for i in 0..10_000u32 {
            let w = Weights {
                prob: -(i as f32),
                backoff: 0.5,
            };
            assert!(t.get_or_insert(ngram_key(&[i, i + 1]), w).1);
        }
        assert_eq!(t.len(), 10_000);
        for i in 0..10_000u32 {
            assert_eq!(t.get(ngram_key(&[i, i + 1])).unwrap().prob, -(i as f32));
            assert!(t.get(ngram_key(&[i + 1, i])).is_none());
        }
        // The first entry of a key wins.
        let (w, inserted) = t.get_or_insert(ngram_key(&[3, 4]), Weights::default());
        assert!(!inserted);
        assert_eq!(w.prob, -3.0);
    }

    #[test]
    fn keys_are_kenlms() {
        // CombineWordHash(CombineWordHash(w, v), u) for the trigram "u v w".
        assert_eq!(ngram_key(&[7, 8, 9]), combine(combine(9, 8), 7));
        assert_eq!(ngram_key(&[5]), 5);
    }

    #[test]
    fn weights_flags() {
        let mut w = Weights {
            prob: -1.5,
            backoff: -0.0,
        };
        assert!(w.independent_left() && !w.has_extension());
        w.mark_extends_left();
        w.set_extension();
        assert!(!w.independent_left() && w.has_extension());
        assert_eq!(w.prob(), -1.5);
        assert_eq!(w.backoff.to_bits(), 0.0f32.to_bits());
    }

    #[test]
    fn vocab_round_trips() {
        let mut v = Vocab::default();
        assert_eq!(v.insert(b"a"), (0, true));
        assert_eq!(v.insert("é".as_bytes()), (1, true));
        assert_eq!(v.insert(b"a"), (0, false));
        assert_eq!(v.get("é".as_bytes()), Some(1));
        assert_eq!(v.get(b"b"), None);
        assert_eq!(v.word(1), "é".as_bytes());
    }
}
