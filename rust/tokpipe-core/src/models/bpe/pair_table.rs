//! The merge table of a BPE model as flat arrays: `(left, right)` token ids -> (priority,
//! merged id).
//!
//! Why not a hash map: the merge loop of a piece looks up every adjacent pair, and a fresh
//! tokenizer merges every distinct piece of its input once, so these lookups are a large share
//! of encoding (a profile of cl100k on English text put 80% of the short merge loop on the
//! probes of the map). The table has hundreds of thousands of entries (cl100k 233,378, o200k
//! 446,189: every cut of a token into two tokens), several MB, so each probe is a cache miss;
//! a swiss table reads a group of control bytes, then the entry (its key and value). Here:
//! - pairs of two ids below 256 (the byte tokens of cl100k, o200k and GPT-2: every pair of a
//!   piece's first round of merges) are read from a dense 256 x 256 array (512 KiB, mostly in
//!   cache for the pairs text uses);
//! - the other pairs live in one open-addressed array of 16-byte slots (key and value side by
//!   side, so a probe is one cache line), linear probing, at most half full, the slot picked by
//!   a multiplicative hash of the packed pair; a byte array of hash tags beside them answers
//!   most lookups of pairs that do not merge without reading a slot (as a swiss table's
//!   control bytes do).
//! - when every pair's priority is the id it makes (tiktoken ranks: cl100k, o200k) and ids fit
//!   21 bits, every pair (those of two bytes too) is instead packed into one `u64` (left, right
//!   and merged id, 21 bits each), eight to a cache line, the line picked by a hash of the
//!   pair, about four pairs a line; the few pairs whose line is full wait in a stash, and the
//!   line says so. A lookup reads its line and compares all eight slots without a branch
//!   ([`PairTable::pair`]): whether a pair merges, and where it sits, follow no pattern that a
//!   branch predictor learns, and the merge loop asks two pairs a merge. Against the earlier
//!   layout (the dense array, then linear probing, one branch a slot), 24 languages encoded
//!   about 5% faster with a fresh tokenizer (benches/RESULTS.md, "Thirteenth step").
//!
//! Memory, per model and never per document: cl100k 4 MiB (packed), o200k 8 MiB (packed),
//! GPT-2's merges file (priority is not the id) 16 bytes and a tag a slot.

use super::huge_table::HugeTable;
use rustc_hash::FxHashMap;

/// Value of a pair with no merge in the dense array.
const NO_MERGE: (u32, u32) = (u32::MAX, u32::MAX);

/// Key of an empty slot: `(u32::MAX, u32::MAX)` is no pair of token ids (ids are bounded far
/// below `u32::MAX`, see `check_id_bound`).
const EMPTY_KEY: u64 = u64::MAX;

#[derive(Clone, Copy, Debug)]
#[repr(C, align(16))]
struct Slot {
    key: u64,
    priority: u32,
    merged: u32,
}

const EMPTY: Slot = Slot {
    key: EMPTY_KEY,
    priority: u32::MAX,
    merged: u32::MAX,
};

#[derive(Clone, Debug)]
pub(crate) struct PairTable {
    /// `(priority, merged)` of the pair `left << 8 | right` when both are below 256.
    dense: HugeTable<(u32, u32)>,
    /// The other pairs, keyed by `left << 32 | right`.
    slots: HugeTable<Slot>,
    /// One byte a slot: 0 for an empty slot, else [`PairTable::tag`] of its key. Most pairs
    /// the merge loop asks for do not merge, and their search ends here, in an array 16 times
    /// smaller than the slots (mostly in cache), without reading a slot.
    tags: HugeTable<u8>,
    /// Every pair (the dense ones too) packed as `left << 42 | right << 21 | merged`
    /// ([`PACKED_BITS`] bits each) when every priority is the merged id, eight to a cache line
    /// ([`PairTable::pair`]); then `dense`, `slots` and `tags` are empty, else this is.
    lines: HugeTable<Line>,
    /// The pairs of a packed table whose line was full (a few in a thousand), keyed by their
    /// packed pair; the line's last slot carries [`OVERFLOWED`].
    stash: FxHashMap<u64, u32>,
    /// `64 - log2(slots.len())` (or of `lines`): the hash's top bits index the slots (lines).
    shift: u32,
    /// The highest priority of any pair (0 when there is none).
    max_priority: u32,
}

/// Eight packed slots, one cache line: a pair's home line holds it, or it is in the stash.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u64; LINE_SLOTS]);

const LINE_SLOTS: usize = 8;

/// An empty packed slot: its pair's left id is `PACKED_ID`, which no packed id reaches.
const EMPTY_PACKED: u64 = (PACKED_ID << PACKED_BITS | PACKED_ID) << PACKED_BITS;

/// Set on a line's last slot when the line was full and pairs of that home are in the stash
/// (a slot uses the low 63 bits).
const OVERFLOWED: u64 = 1 << 63;

/// Set beside the merged id by [`PairTable::pair`]'s search of a line when a slot matched.
const FOUND: u64 = 1 << 62;

/// Bits of each id in a packed slot; ids of a packed table are below `1 << PACKED_BITS`.
const PACKED_BITS: u32 = 21;

/// The mask of one id's bits in a packed slot.
const PACKED_ID: u64 = (1 << PACKED_BITS) - 1;

/// `left << 32 | right`, the key of a pair.
#[inline(always)]
pub(crate) fn pair_key(left: u32, right: u32) -> u64 {
    ((left as u64) << 32) | right as u64
}

impl PairTable {
    /// The table of `merges` (keyed by [`pair_key`]).
    pub(crate) fn new(merges: &FxHashMap<u64, (u32, u32)>) -> Self {
        let max_priority = merges
            .values()
            .map(|&(priority, _)| priority)
            .max()
            .unwrap_or(0);
        let packable = merges.iter().all(|(&key, &(priority, merged))| {
            let (left, right) = (key >> 32, key & 0xFFFF_FFFF);
            priority == merged && left.max(right).max(merged as u64) < PACKED_ID
        });
        if packable {
            return Self::packed(merges, max_priority);
        }
        let mut dense = HugeTable::filled(1 << 16, NO_MERGE);
        let sparse: Vec<(u64, (u32, u32))> = merges
            .iter()
            .filter(|&(&key, &value)| match Self::dense_index(key) {
                Some(i) => {
                    dense[i] = value;
                    false
                }
                None => true,
            })
            .map(|(&k, &v)| (k, v))
            .collect();
        // At most half full (a lookup of an absent pair, common in the merge loop, scans
        // to the next empty slot).
        let capacity = (2 * sparse.len()).next_power_of_two().max(16);
        let mask = capacity - 1;
        let mut table = PairTable {
            dense,
            slots: HugeTable::filled(capacity, EMPTY),
            tags: HugeTable::filled(capacity, 0),
            lines: HugeTable::default(),
            stash: FxHashMap::default(),
            shift: 64 - capacity.trailing_zeros(),
            max_priority,
        };
        for (key, (priority, merged)) in sparse {
            debug_assert_ne!(key, EMPTY_KEY);
            let mut i = table.home(key);
            while table.slots[i].key != EMPTY_KEY {
                i = (i + 1) & mask;
            }
            table.tags[i] = table.tag(key);
            table.slots[i] = Slot {
                key,
                priority,
                merged,
            };
        }
        table
    }

    /// The highest priority of any pair.
    #[inline(always)]
    pub(crate) fn max_priority(&self) -> u32 {
        self.max_priority
    }

    /// A packed table of `merges`: about four pairs a line on average, so that few lines are
    /// full (a line holds eight), and at least two lines, so that the hash keeps some bits.
    fn packed(merges: &FxHashMap<u64, (u32, u32)>, max_priority: u32) -> Self {
        let n_lines = merges.len().div_ceil(4).next_power_of_two().max(2);
        let mut table = PairTable {
            dense: HugeTable::default(),
            slots: HugeTable::default(),
            tags: HugeTable::default(),
            lines: HugeTable::filled(n_lines, Line([EMPTY_PACKED; LINE_SLOTS])),
            stash: FxHashMap::default(),
            shift: 64 - n_lines.trailing_zeros(),
            max_priority,
        };
        // In key order, so that which pairs overflow to the stash does not depend on the
        // map's order.
        let mut pairs: Vec<(u64, u32)> = merges.iter().map(|(&k, &(_, m))| (k, m)).collect();
        pairs.sort_unstable();
        for (key, merged) in pairs {
            let pair = Self::packed_pair(key);
            let line = &mut table.lines[Self::line_of(pair, table.shift)].0;
            match line.iter().position(|&slot| slot == EMPTY_PACKED) {
                Some(i) => line[i] = pair << PACKED_BITS | merged as u64,
                None => {
                    line[LINE_SLOTS - 1] |= OVERFLOWED;
                    table.stash.insert(pair, merged);
                }
            }
        }
        table
    }

    /// The line of a packed pair (`left << 21 | right`).
    #[inline(always)]
    fn line_of(pair: u64, shift: u32) -> usize {
        (pair.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize
    }

    /// The priority and merged id of the pair `(left, right)`, a priority of `u32::MAX` when it
    /// does not merge: [`PairTable::get`] without an `Option`, and in a packed table without a
    /// branch on the answer. Why: whether a pair merges, and where in its line it is, follow
    /// no pattern a branch predictor learns (see the module's notes).
    #[inline(always)]
    pub(crate) fn pair(&self, left: u32, right: u32) -> (u32, u32) {
        if self.lines.is_empty() {
            return self.get(left, right).unwrap_or((u32::MAX, 0));
        }
        if left.max(right) as u64 >= PACKED_ID {
            return (u32::MAX, u32::MAX);
        }
        let pair = Self::packed_pair(pair_key(left, right));
        let line = &self.lines[Self::line_of(pair, self.shift)].0;
        let mut found = 0;
        for &slot in line {
            let hit = (slot >> PACKED_BITS) & ((1 << (2 * PACKED_BITS)) - 1) == pair;
            found |= (hit as u64).wrapping_neg() & (slot & PACKED_ID | FOUND);
        }
        if found == 0 && line[LINE_SLOTS - 1] & OVERFLOWED != 0 {
            return self.stash.get(&pair).map_or((u32::MAX, 0), |&m| (m, m));
        }
        // `u32::MAX` when no slot matched, else the merged id, computed (a `bool` made a mask)
        // rather than chosen, which the compiler makes a branch.
        let merged = (found & PACKED_ID) as u32 | ((found == 0) as u32).wrapping_neg();
        (merged, merged)
    }

    /// `left << 21 | right` of a pair of ids below `1 << PACKED_BITS`: a packed slot's top
    /// bits. (The empty slot's, [`EMPTY_PACKED`]'s, is no packed pair: its left is `PACKED_ID`.)
    #[inline(always)]
    fn packed_pair(key: u64) -> u64 {
        (key >> 32) << PACKED_BITS | (key & 0xFFFF_FFFF)
    }

    #[inline(always)]
    fn dense_index(key: u64) -> Option<usize> {
        let (left, right) = (key >> 32, key & 0xFFFF_FFFF);
        (left < 256 && right < 256).then_some(((left << 8) | right) as usize)
    }

    /// The slot where the search for `key` starts.
    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        // Fold the high half in first so that both ids reach the top bits of the product.
        ((key ^ (key >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// A key's tag: the eight hash bits below those of [`PairTable::home`], the top one set
    /// so that no tag is 0.
    #[inline(always)]
    fn tag(&self, key: u64) -> u8 {
        let h = (key ^ (key >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (h >> (self.shift - 8)) as u8 | 0x80
    }

    /// The priority and merged id of the pair `(left, right)`, if it merges.
    #[inline(always)]
    pub(crate) fn get(&self, left: u32, right: u32) -> Option<(u32, u32)> {
        if !self.lines.is_empty() {
            let (priority, merged) = self.pair(left, right);
            return (priority != u32::MAX).then_some((priority, merged));
        }
        if (left | right) < 256 {
            let value = self.dense[((left << 8) | right) as usize];
            return (value.0 != u32::MAX).then_some(value);
        }
        let key = pair_key(left, right);
        let mask = self.slots.len() - 1;
        let (mut i, tag) = (self.home(key), self.tag(key));
        loop {
            let t = self.tags[i];
            if t == 0 {
                return None;
            }
            if t == tag {
                let slot = &self.slots[i];
                if slot.key == key {
                    return Some((slot.priority, slot.merged));
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// Asks the CPU to load the line where [`PairTable::get`] of `(left, right)` starts its
    /// search (nothing for a pair of the dense array, which stays in cache).
    #[inline(always)]
    pub(crate) fn prefetch(&self, left: u32, right: u32) {
        if !self.lines.is_empty() {
            let pair = Self::packed_pair(pair_key(left, right));
            return crate::models::prefetch::prefetch(&self.lines[Self::line_of(pair, self.shift)]);
        }
        if (left | right) < 256 {
            return;
        }
        let i = self.home(pair_key(left, right));
        crate::models::prefetch::prefetch(&self.tags[i]);
        crate::models::prefetch::prefetch(&self.slots[i]);
    }

    /// Every merge as `(pair_key(left, right), (priority, merged))`, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, (u32, u32))> + '_ {
        let dense = self
            .dense
            .iter()
            .enumerate()
            .filter(|(_, v)| v.0 != u32::MAX)
            .map(|(i, &v)| (pair_key((i >> 8) as u32, (i & 0xFF) as u32), v));
        let sparse = self
            .slots
            .iter()
            .filter(|s| s.key != EMPTY_KEY)
            .map(|s| (s.key, (s.priority, s.merged)));
        let unpack = |pair: u64, merged: u32| {
            let (left, right) = (pair >> PACKED_BITS, pair & PACKED_ID);
            (pair_key(left as u32, right as u32), (merged, merged))
        };
        let packed = self
            .lines
            .iter()
            .flat_map(|line| line.0)
            .map(|slot| slot & !OVERFLOWED)
            .filter(|&slot| slot != EMPTY_PACKED)
            .map(move |slot| unpack(slot >> PACKED_BITS, (slot & PACKED_ID) as u32));
        let stashed = self.stash.iter().map(move |(&pair, &m)| unpack(pair, m));
        dense.chain(sparse).chain(packed).chain(stashed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::bpe::BpeModel;

    /// Looks every merge of `map` up in `table`, and pairs next to each (absent ones).
    fn check_same(map: &FxHashMap<u64, (u32, u32)>, table: &PairTable, id_bound: u32) {
        let mut iterated: Vec<_> = table.iter().collect();
        iterated.sort_unstable();
        let mut expected: Vec<_> = map.iter().map(|(&k, &v)| (k, v)).collect();
        expected.sort_unstable();
        assert!(iterated == expected, "iter differs from the map");
        let mut absent = 0;
        for &key in map.keys() {
            let (l, r) = ((key >> 32) as u32, key as u32);
            assert_eq!(table.get(l, r), map.get(&key).copied(), "pair ({l}, {r})");
            // Neighbouring pairs, many of which are no merge.
            for (l2, r2) in [(r, l), (l, r + 1), (l + 1, r), (l, id_bound), (id_bound, r)] {
                let want = map.get(&pair_key(l2, r2)).copied();
                absent += want.is_none() as usize;
                assert_eq!(table.get(l2, r2), want, "pair ({l2}, {r2})");
            }
        }
        assert!(absent > map.len(), "too few absent pairs tried: {absent}");
        // Every pair of bytes: the dense array, present or not.
        for l in 0..256 {
            for r in 0..256 {
                assert_eq!(table.get(l, r), map.get(&pair_key(l, r)).copied());
            }
        }
    }

    fn vocab_dir() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpora/vocab")
    }

    #[test]
    fn the_table_of_every_shared_vocabulary_answers_as_its_map() {
        for name in ["cl100k", "o200k"] {
            let path = vocab_dir().join(format!("{name}_base.tiktoken.gz"));
            let ranks = crate::formats::tiktoken::read_ranks(&path).unwrap();
            let model = BpeModel::from_ranks(ranks, name).unwrap();
            let map: FxHashMap<u64, (u32, u32)> = model.merges.iter().collect();
            assert!(map.len() > 200_000, "{name}: {}", map.len());
            assert!(!model.merges.lines.is_empty(), "{name} is not packed");
            // Some lines overflowed, so the stash's answers (and its misses) are checked too.
            assert!(
                model.merges.stash.len() > 100,
                "{name}: {}",
                model.merges.stash.len()
            );
            check_same(&map, &PairTable::new(&map), model.id_bound() as u32);
        }
        let dir = vocab_dir();
        let (model, _) = crate::formats::gpt2::load(
            &dir.join("gpt2_encoder.json"),
            &dir.join("gpt2_vocab.bpe"),
            &[],
        )
        .unwrap();
        let map: FxHashMap<u64, (u32, u32)> = model.merges.iter().collect();
        assert_eq!(map.len(), model.merge_list().len());
        assert!(
            model.merges.lines.is_empty(),
            "GPT-2's priorities are not its ids"
        );
        check_same(&map, &PairTable::new(&map), model.id_bound() as u32);
    }

    #[test]
    fn tiny_and_crowded_tables_answer_as_their_maps() {
        // An empty table; one pair; and keys that share their low bits (the hash must still
        // find each after a long probe).
        let empty = FxHashMap::default();
        let table = PairTable::new(&empty);
        assert_eq!(table.get(1, 2), None);
        assert_eq!(table.get(300, 2), None);
        let mut map = FxHashMap::default();
        for i in 0..5000u32 {
            map.insert(pair_key(i * 4096, 7), (i, i + 1));
            map.insert(pair_key(9, i << 18), (i + 10_000, i));
            map.insert(pair_key(i % 256, (i * 7) % 256), (i, 3 * i));
        }
        check_same(&map, &PairTable::new(&map), 1 << 31);
    }

    #[test]
    fn packed_tables_hold_ids_up_to_21_bits_and_wider_ids_fall_back() {
        // The highest packed id (`PACKED_ID` itself marks an empty slot).
        let top = PACKED_ID as u32 - 1;
        let mut map = FxHashMap::default();
        for i in 0..5000u32 {
            let id = top - i;
            map.insert(pair_key(i * 400, 7), (id, id));
            map.insert(pair_key(top - i, top - 2 * i), (id, id));
            map.insert(pair_key(i % 256, (i * 7) % 256), (i, i));
        }
        // Two ids whose bits together are all ones (as an id, that marks an empty slot).
        map.insert(pair_key(1 << 20, (1 << 20) - 1), (9, 9));
        let table = PairTable::new(&map);
        assert!(!table.lines.is_empty() && table.slots.is_empty());
        check_same(&map, &table, top + 1);
        assert_eq!(table.get(top + 1, 7), None);
        assert_eq!(table.get(0, top + 1), None);
        // One id past 21 bits, or one priority that is not its id: the wide slots.
        for (key, value) in [(pair_key(top + 1, 7), (9, 9)), (pair_key(300, 7), (9, 10))] {
            let mut wide = map.clone();
            wide.insert(key, value);
            let table = PairTable::new(&wide);
            assert!(table.lines.is_empty() && !table.slots.is_empty());
            check_same(&wide, &table, top + 2);
        }
    }
}
