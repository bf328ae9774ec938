//! A bounded, per-thread cache of piece -> ids for byte-level BPE.
//!
//! Why: text repeats its words, and encoding a piece costs either a lookup in the vocabulary
//! (a hash of the bytes, a pointer to the stored key, a `memcmp`) or, for a piece that is not
//! itself a token, the merge loop with one merge-table lookup per adjacent pair. On English
//! text most pieces have been seen a few hundred pieces earlier, so remembering their ids
//! skips both.
//!
//! Design:
//! - Keys are the piece's bytes packed into a `u128` (pieces of 1 to [`MAX_PIECE`] bytes, the
//!   length in the top byte so that no two pieces share a key). Single bytes are cached too,
//!   though their ids are one table load away: see `piece_encoder` for why.
//!   Comparing a key is one 16-byte compare, with no pointer to follow.
//! - A value is up to [`MAX_IDS`] ids inline; a piece that encodes to more keeps them in the
//!   second map's arena below, with an [`IN_LONG`] mark in its slot.
//! - The table has a fixed size ([`BUCKETS`] buckets of two 32-byte slots, one cache line a
//!   bucket: 16 MiB a thread) and never grows. A new entry takes the bucket's first slot if
//!   that is free (empty, or a mark whose arena ids are gone) or holds another model's entry,
//!   else its second slot; the entry it pushes out of the second slot moves to the second
//!   slot of the neighbour bucket (`bucket ^ 1`), dropping the entry there. A probe reads its
//!   own bucket only; a miss also requests the neighbour's line, and when the batch of misses
//!   is resolved an entry found there is swapped back to the front of its own bucket instead
//!   of being merged again.
//! - So, once taken, the first slot changes hands when a piece comes back from the neighbour
//!   (or its entry is another model's or stale): it is held by a piece that recurs, and new
//!   pieces, most of them rare, pass through the second. Why: the probe compares the first
//!   slot, then the second, and the branch between them is predicted. When every new entry
//!   took the first slot, the text's frequent pieces (a few thousand of them are most of its
//!   pieces) sat behind a rarer one in many of their probes, and the branch mispredicted.
//!   Kept in front, a warm pass over 20 MB of English runs about 1.25x as fast, the 24
//!   languages about 1.08x, and a first pass 1.02-1.04x (a Rust-only driver;
//!   benches/RESULTS.md, "Eleventh step").
//! - Why the neighbour: 190,000 distinct pieces in 262,144 two-slot buckets leave thousands
//!   of buckets with three or more, whose pieces kept pushing each other out. Under the
//!   policy of the time (every new entry in front), a second pass over the same 20 MB of
//!   English still met about 30,000 misses; with the neighbour about 19,000 of them were
//!   answered from there (11,000 left), and a warm pass ran 5-10% faster (benches/RESULTS.md,
//!   "Sixth step"); the first pass, which writes the neighbour's line too, measured the same.
//! - Why 16 MiB: 20 MB of English has about 190,000 distinct pieces, and a table of 2 MiB
//!   (131,072 slots) kept evicting the frequent ones, so that a tokenizer encoding that text a
//!   second time still met about 235,000 misses (the first time, 255,000). At 16 MiB the
//!   second time meets about 30,000, and runs about 1.5x as fast; the first time about 1.1x
//!   (a Rust-only driver, cl100k, alternating builds). Its probes are requested a chunk of
//!   pieces ahead, so its size costs no waiting.
//! - Pieces of 16 to [`MAX_LONG_PIECE`] bytes (long words, rules of `=====`, words of
//!   non-Latin scripts: where the merge loop costs most) go to a second map
//!   (`models::long_keys`: each key with its ids in one arena, found through a hash table whose
//!   lines the encoder requests a chunk ahead), emptied whenever its arena passes
//!   [`LONG_BYTES`] (8 MiB, plus its table, up to 4 MiB). Longer pieces are merged every time.
//!   A shorter piece of more than [`MAX_IDS`] ids keeps them in the same arena, and its slot
//!   says where ([`IN_LONG`]): a hit then costs one more load, not a hash and a search. Why:
//!   on 24 languages of manual pages a warm pass spent about 20% of its time finding long
//!   pieces and short ones of many ids in the second map (the lookups and their `memcmp`);
//!   with the long ones' lines requested ahead and the short ones' ids found from their slots,
//!   about 7% (benches/RESULTS.md, "Tenth step"). Why 8 MiB: text in non-Latin scripts has
//!   many such pieces (24 languages of manual pages: 62,381 distinct ones of 16 bytes or more,
//!   5.2 MB of them), and a map emptied at 2 MiB (or 4) forgot them before they came back, so
//!   a second pass over that text ran no faster than the first; at 8 MiB it runs about 2.2x as
//!   fast (a Rust-only driver), for about 12 MiB more of resident memory.
//! - Memory is therefore bounded per thread that encodes (about 36 MiB at most: the table, the
//!   second map's arena, whose allocation can reach twice [`LONG_BYTES`] as it grows, and its
//!   table), never by the input.
//! - One table per thread (no locks, no sharing between encoding threads), shared by all the
//!   models that thread uses: each entry carries its model's cache id, so entries of another
//!   model are misses, never wrong ids. A model's cache id is unique in the process (a
//!   counter); once the counter runs out, new models get id 0 and are encoded without cache.
//!
//! Ids never depend on the cache: an entry is the merge loop's own output for that piece and
//! model, so a hit gives the ids a miss would compute.
//!
//! (Over 500 lines: about 330 of them are its tests; the rest is one cache, whose table,
//! neighbour buckets and long map share its memory bound.)

use super::huge_table::HugeTable;
use crate::models::long_keys::{entry_bytes, LongKeys};
pub(super) use crate::models::packed_key::{hash_key, key_of, key_within};
use std::cell::RefCell;

/// Longest piece cached, in bytes (its bytes and length fit a `u128` key).
pub(super) const MAX_PIECE: usize = crate::models::packed_key::MAX_PACKED;

/// Most ids an entry holds.
pub(super) const MAX_IDS: usize = 3;

/// Longest piece the second map keeps, in bytes.
pub(super) const MAX_LONG_PIECE: usize = 256;

/// Bytes of entries and ids the second map's arena holds before it is emptied.
const LONG_BYTES: usize = 8 << 20;

/// Buckets of the table; each holds two slots in one 64-byte line.
const BUCKETS: usize = 1 << 18;

/// Unused id slot of an entry (no id reaches it: ids are bounded far below).
pub(super) const NONE: u32 = u32::MAX;

/// The first id of the entry of a short piece whose ids (more than [`MAX_IDS`]) are in the
/// long map's arena: the next two are where (their count, then the ids) and the arena's epoch
/// when they were put there. A hit then reads the arena once, with no hash of the piece's bytes
/// nor a search of the long map's table; a mark from before the arena was last emptied is a
/// miss. No id reaches it either. (The Unigram word cache's `SPILLED` marks the same way with
/// the count in the slot instead of an epoch: it empties its small table whenever it empties
/// its arena, which this 16 MiB table is too large to do.)
pub(super) const IN_LONG: u32 = u32::MAX - 1;

#[derive(Clone, Copy)]
#[repr(C)]
struct Slot {
    /// The packed piece; 0 is an empty slot (a real key has its length in the top byte).
    key: u128,
    /// The cache id of the model that encoded the piece.
    model: u32,
    /// The piece's ids, `NONE` past the last.
    ids: [u32; MAX_IDS],
}

impl Slot {
    /// Whether this slot is the entry of `key` under `model`.
    #[inline(always)]
    fn holds(&self, model: u32, key: u128) -> bool {
        self.key == key && self.model == model
    }

    /// Whether this slot is an [`IN_LONG`] mark from before the arena was last emptied (its
    /// epoch is not `epoch`): its ids are gone.
    #[inline(always)]
    fn is_stale(&self, epoch: u32) -> bool {
        self.ids[0] == IN_LONG && self.ids[2] != epoch
    }
}

/// How many ids a slot's `ids` hold (1 to [`MAX_IDS`], `NONE` past the last), counted
/// without a branch.
#[inline(always)]
pub(super) fn id_count(ids: &[u32; MAX_IDS]) -> usize {
    1 + ids[1..]
        .iter()
        .map(|&id| (id != NONE) as usize)
        .sum::<usize>()
}

/// The bucket whose second slot takes the entries that bucket `bucket` moves out (the other
/// bucket of its 128-byte pair).
#[inline(always)]
fn neighbour(bucket: usize) -> usize {
    bucket ^ 1
}

const EMPTY: Slot = Slot {
    key: 0,
    model: 0,
    ids: [NONE; MAX_IDS],
};

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Bucket([Slot; 2]);

const _: () = assert!(std::mem::size_of::<Bucket>() == 64);

pub(super) struct PieceCache {
    buckets: HugeTable<Bucket>,
    /// Pieces longer than [`MAX_PIECE`], and the ids of short pieces of more than [`MAX_IDS`].
    long: LongKeys,
    /// How many times `long` has been emptied (wrapping; the table is emptied too when it
    /// wraps), so that an [`IN_LONG`] mark knows whether its ids are still there.
    epoch: u32,
}

thread_local! {
    static CACHE: RefCell<Option<PieceCache>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's cache, created on first use; `None` if the cache is already in
/// use further up this thread's stack (never the case for the encoder, which does not nest).
pub(super) fn with_thread_cache<R>(f: impl FnOnce(Option<&mut PieceCache>) -> R) -> R {
    CACHE.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => f(Some(slot.get_or_insert_with(PieceCache::new))),
        Err(_) => f(None),
    })
}

impl PieceCache {
    fn new() -> Self {
        PieceCache {
            buckets: HugeTable::filled(BUCKETS, Bucket([EMPTY; 2])),
            long: LongKeys::default(),
            epoch: 0,
        }
    }

    /// The bucket of `key` (below [`BUCKETS`]).
    #[inline(always)]
    pub(super) fn bucket(key: u128) -> usize {
        (hash_key(key) >> (64 - BUCKETS.trailing_zeros())) as usize
    }

    /// Asks the CPU to load bucket `bucket`'s line ahead of its probe. The table is 16 MiB, so
    /// the probes of a thread's first sights and of rarer words miss the core's caches; the
    /// buckets of a chunk of pieces requested together
    /// ([`super::piece_encoder::PieceEncoder`]) wait for memory side by side, not one after
    /// the other.
    #[inline(always)]
    pub(super) fn prefetch(&self, bucket: usize) {
        crate::models::prefetch::prefetch(&self.buckets[bucket]);
    }

    /// [`PieceCache::prefetch`] of the bucket where the entries pushed out of bucket `bucket`
    /// wait, for [`PieceCache::take_from_neighbour`].
    #[inline(always)]
    pub(super) fn prefetch_neighbour(&self, bucket: usize) {
        self.prefetch(neighbour(bucket));
    }

    /// Appends the cached ids of `key` under `model` to `out`; false on a miss.
    #[cfg(test)]
    pub(super) fn get(&self, model: u32, key: u128, out: &mut Vec<u32>) -> bool {
        self.get_in(Self::bucket(key), model, key, out)
    }

    /// The slot of `key` under `model` in bucket `bucket`, if it has one.
    #[inline(always)]
    fn slot(&self, bucket: usize, model: u32, key: u128) -> Option<&Slot> {
        self.buckets[bucket]
            .0
            .iter()
            .find(|slot| slot.holds(model, key))
    }

    /// The ids of `key` (of bucket `bucket`) under `model` when its slot holds them (`NONE`
    /// past the last); `None` on a miss and for a piece whose ids are in the long map's arena.
    #[inline(always)]
    pub(super) fn ids_in(&self, bucket: usize, model: u32, key: u128) -> Option<&[u32; MAX_IDS]> {
        self.slot(bucket, model, key)
            .filter(|slot| slot.ids[0] != IN_LONG)
            .map(|slot| &slot.ids)
    }

    /// Appends the cached ids of `key` (of bucket `bucket`) under `model` to `out`; false on
    /// a miss.
    #[inline(always)]
    pub(super) fn get_in(&self, bucket: usize, model: u32, key: u128, out: &mut Vec<u32>) -> bool {
        let Some(slot) = self.slot(bucket, model, key) else {
            return false;
        };
        if slot.is_stale(self.epoch) {
            return false;
        }
        match slot.ids {
            [IN_LONG, at, _] => {
                let count = self.long.ids(at, 1)[0];
                out.extend_from_slice(self.long.ids(at + 1, count));
            }
            ids => out.extend_from_slice(&ids[..id_count(&ids)]),
        }
        true
    }

    /// The ids of `key` under `model` (`NONE` past the last) when the neighbour of bucket
    /// `bucket`, where [`PieceCache::put_in`] moves the entries it pushes out, holds them; the
    /// entry is then swapped to the front of `bucket` (both buckets keep their entries, in a
    /// new order), so that the piece's next probe is answered by the chunk's fast path.
    pub(super) fn take_from_neighbour(
        &mut self,
        bucket: usize,
        model: u32,
        key: u128,
    ) -> Option<[u32; MAX_IDS]> {
        let neighbour = neighbour(bucket);
        let at = self.buckets[neighbour]
            .0
            .iter()
            .position(|slot| slot.holds(model, key) && slot.ids[0] != IN_LONG)?;
        let found = self.buckets[neighbour].0[at];
        let [first, second] = self.buckets[bucket].0;
        self.buckets[neighbour].0[at] = second;
        self.buckets[bucket].0 = [found, first];
        Some(found.ids)
    }

    /// Remembers the ids of `key` under `model` (at least one).
    #[cfg(test)]
    pub(super) fn put(&mut self, model: u32, key: u128, ids: &[u32]) {
        self.put_in(Self::bucket(key), model, key, ids)
    }

    /// [`PieceCache::put`] with `key`'s bucket already computed. More than [`MAX_IDS`] ids
    /// go to the long map's arena, with an [`IN_LONG`] mark in the slot.
    #[inline]
    pub(super) fn put_in(&mut self, bucket: usize, model: u32, key: u128, ids: &[u32]) {
        debug_assert!(!ids.is_empty());
        debug_assert_eq!(bucket, Self::bucket(key));
        let mut slot = EMPTY;
        slot.key = key;
        slot.model = model;
        if ids.len() <= MAX_IDS {
            slot.ids[..ids.len()].copy_from_slice(ids);
        } else {
            self.make_room(4 * (1 + ids.len()));
            let at = self.long.push_ids(&[ids.len() as u32]);
            self.long.push_ids(ids);
            slot.ids = [IN_LONG, at, self.epoch];
        }
        // The piece's own entry, whose ids the arena no longer has (a stale mark), is
        // replaced where it is: left in front of the new one, it would answer every probe
        // first, a miss each time.
        if let Some(own) = self.buckets[bucket]
            .0
            .iter_mut()
            .find(|entry| entry.holds(model, key))
        {
            *own = slot;
            return;
        }
        // A free first slot (empty, or a stale mark) is taken, and nothing moves.
        let [first, second] = self.buckets[bucket].0;
        if first.key == 0 || first.is_stale(self.epoch) {
            self.buckets[bucket].0[0] = slot;
            return;
        }
        // Otherwise the first slot stays with the piece that holds it (it recurs: see the
        // module's notes), unless it belongs to another model. The entry pushed out of the
        // second slot moves to the second slot of the neighbour bucket instead of being
        // dropped.
        if first.model == model {
            self.buckets[bucket].0[1] = slot;
        } else {
            self.buckets[bucket].0 = [slot, first];
        }
        if second.key != 0 {
            self.buckets[neighbour(bucket)].0[1] = second;
        }
    }

    /// Appends the cached ids of a long piece under `model` to `out`; false on a miss.
    #[inline]
    pub(super) fn get_long(&self, model: u32, piece: &[u8], out: &mut Vec<u32>) -> bool {
        match self.long.get(model, piece) {
            Some(ids) => {
                out.extend_from_slice(ids);
                true
            }
            None => false,
        }
    }

    /// Requests from memory where the long map would hold `piece` under `model`, for a
    /// [`PieceCache::get_long`] soon after.
    #[inline]
    pub(super) fn prefetch_long(&self, model: u32, piece: &[u8]) {
        self.long.prefetch(model, piece);
    }

    /// Remembers the ids of a long piece under `model`, emptying the map first when it is full.
    pub(super) fn put_long(&mut self, model: u32, piece: &[u8], ids: &[u32]) {
        self.make_room(entry_bytes(piece.len(), ids.len()));
        self.long.insert(model, piece, ids);
    }

    /// Empties the long map if `bytes` more would pass [`LONG_BYTES`], starting a new epoch.
    fn make_room(&mut self, bytes: usize) {
        if self.long.bytes() + bytes <= LONG_BYTES {
            return;
        }
        self.long.clear();
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            // Marks from 2^32 epochs ago would pass for current ones.
            self.buckets.fill(Bucket([EMPTY; 2]));
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::models::bpe::BpeModel;
    use crate::pre_tokenizers::scanners::tests::{corpus_texts, Rng, ALPHABET};
    use crate::pre_tokenizers::PreTokenizer;
    use crate::tokenizer::{AllowedSpecial, Tokenizer};

    /// cl100k and o200k from the shared vocabularies, with their preset scanners.
    pub(in crate::models::bpe) fn openai_tokenizers() -> Vec<Tokenizer> {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpora/vocab");
        ["cl100k", "o200k"]
            .iter()
            .map(|name| {
                let path = dir.join(format!("{name}_base.tiktoken.gz"));
                let ranks = crate::formats::tiktoken::read_ranks(&path).unwrap();
                let model = BpeModel::from_ranks(ranks, name).unwrap();
                Tokenizer::new(PreTokenizer::new(name).unwrap(), model, vec![]).unwrap()
            })
            .collect()
    }

    /// The ids of `text` with every piece merged afresh, bypassing the cache.
    pub(in crate::models::bpe) fn uncached(tok: &Tokenizer, text: &str) -> Vec<u32> {
        let model = tok.model().as_bpe().unwrap();
        let mut out = Vec::new();
        tok.pre_tokenizer()
            .split(text, |piece| model.encode_piece(piece.as_bytes(), &mut out))
            .unwrap();
        out
    }

    #[test]
    fn cached_encoding_equals_uncached_on_the_corpora_with_two_models_in_turn() {
        // Both models share this thread's cache; two passes over the corpora, each text encoded
        // by one model then the other: the first pass fills the tables (and evicts), the second
        // is mostly hits, and entries of one model must never answer for the other.
        let toks = openai_tokenizers();
        let texts = corpus_texts();
        for pass in 0..2 {
            for (name, text) in &texts {
                for tok in &toks {
                    let got = tok.encode(text, &AllowedSpecial::None).unwrap();
                    assert!(got == uncached(tok, text), "pass {pass}, {name}");
                }
            }
        }
    }

    #[test]
    fn cached_encoding_equals_uncached_on_generated_text() {
        // Pieces around the 15/16-byte limit of the packed keys and the long map's limit:
        // runs of letters, digits, apostrophes, whitespace, zero bytes, emoji and CJK.
        let toks = openai_tokenizers();
        let extra = [
            "\0",
            "\0\0",
            "aaaaaaaaaaaaaaa",
            "0123456789",
            "😀😀",
            "ééééééé",
            "中文字",
        ];
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        for case in 0..20_000 {
            let sub: Vec<&str> = (0..rng.below(5) + 2)
                .map(|_| {
                    let k = rng.below(ALPHABET.len() + extra.len());
                    if k < ALPHABET.len() {
                        ALPHABET[k]
                    } else {
                        extra[k - ALPHABET.len()]
                    }
                })
                .collect();
            let len = rng.below(if case % 8 == 0 { 400 } else { 40 }) + 1;
            let text: String = (0..len).map(|_| sub[rng.below(sub.len())]).collect();
            // Twice: a miss then (unless evicted) a hit.
            for _ in 0..2 {
                for tok in &toks {
                    let got = tok.encode(&text, &AllowedSpecial::None).unwrap();
                    assert!(got == uncached(tok, &text), "case {case}: {text:?}");
                }
            }
        }
    }

    #[test]
    fn a_short_piece_of_many_ids_stays_right_after_its_long_entry_is_emptied() {
        // Bytes only: a piece of n bytes is n ids, so every short piece of 4 or more bytes
        // keeps its ids in the long map's arena, with an `IN_LONG` mark in the table.
        let vocab: Vec<(Vec<u8>, u32)> = (0..=255u8).map(|b| (vec![b], b as u32)).collect();
        let model = BpeModel::from_ranks(vocab, "bytes").unwrap();
        let tok = Tokenizer::new(PreTokenizer::new("cl100k").unwrap(), model, vec![]).unwrap();
        let encode = |text: &str| tok.encode(text, &AllowedSpecial::None).unwrap();
        let text = "abcd efghijk abcd";
        let want: Vec<u32> = text.bytes().map(u32::from).collect();
        assert_eq!(encode(text), want);
        assert_eq!(encode(text), want);
        // Long pieces of letters until the long map has been emptied at least once.
        let word = |i: usize| -> String {
            let tag: String = (0..4)
                .map(|k| (b'a' + ((i >> (4 * k)) & 15) as u8) as char)
                .collect();
            format!(" {tag}{}", "x".repeat(200))
        };
        for i in 0..3 * LONG_BYTES / 800 {
            let piece = word(i);
            let ids = encode(&piece);
            assert_eq!(ids.len(), piece.len());
        }
        assert_eq!(encode(text), want);
        assert_eq!(uncached(&tok, text), want);
    }

    #[test]
    fn the_long_map_is_emptied_when_full_and_keeps_answering_right() {
        let mut cache = PieceCache::new();
        let piece = |i: usize| format!("{i:0>40}");
        let per_entry = entry_bytes(40, 1);
        let count = 3 * LONG_BYTES / per_entry;
        for i in 0..count {
            cache.put_long(1, piece(i).as_bytes(), &[i as u32]);
            assert!(cache.long.bytes() <= LONG_BYTES);
        }
        let mut out = Vec::new();
        assert!(cache.get_long(1, piece(count - 1).as_bytes(), &mut out));
        assert_eq!(out, [count as u32 - 1]);
        assert!(!cache.get_long(2, piece(count - 1).as_bytes(), &mut out));
        assert!(!cache.get_long(1, piece(0).as_bytes(), &mut out));
    }

    #[test]
    fn the_ids_of_short_pieces_of_many_ids_keep_the_arena_within_its_budget() {
        let mut cache = PieceCache::new();
        let ids: Vec<u32> = (0..16).collect();
        let count = 3 * LONG_BYTES / (4 * (1 + ids.len()));
        for i in 0..count {
            cache.put(7, key_of(format!(" w{i}").as_bytes()), &ids);
            assert!(cache.long.bytes() <= LONG_BYTES);
        }
        assert!(cache.epoch >= 2);
        let mut out = Vec::new();
        assert!(cache.get(7, key_of(format!(" w{}", count - 1).as_bytes()), &mut out));
        assert_eq!(out, ids);
    }

    #[test]
    fn a_mark_from_an_emptied_arena_is_a_miss_even_after_the_epochs_wrap() {
        let mut cache = PieceCache::new();
        let (old, new) = (key_of(b" old"), key_of(b" new"));
        cache.put(7, old, &[1, 2, 3, 4]);
        let mut out = Vec::new();
        assert!(cache.get(7, old, &mut out));
        assert_eq!(out, [1, 2, 3, 4]);
        // Emptied once: the mark is stale, and a new piece's ids take its place in the arena.
        cache.make_room(LONG_BYTES + 1);
        cache.put(7, new, &[5, 6, 7, 8, 9]);
        assert!(!cache.get(7, old, &mut out));
        // 2^32 emptyings after the old mark was made, the epoch is its epoch again (and the
        // arena holds other ids where it points): the table was emptied.
        cache.epoch = u32::MAX;
        cache.make_room(LONG_BYTES + 1);
        assert_eq!(cache.epoch, 0);
        cache.put(7, new, &[5, 6, 7, 8, 9]);
        let mut out = Vec::new();
        assert!(!cache.get(7, old, &mut out));
        assert!(cache.get(7, new, &mut out));
        assert_eq!(out, [5, 6, 7, 8, 9]);
    }

    #[test]
    fn keys_differ_for_every_pair_of_distinct_short_pieces() {
        // Every piece over a small alphabet (including the zero byte, so padding cannot hide a
        // length) up to 15 bytes long at the lengths where the loads change shape.
        let alphabet = [0u8, 1, b'a', 0xFF];
        let mut seen = std::collections::HashMap::new();
        for n in 1..=MAX_PIECE {
            for seed in 0..300u32 {
                let p: Vec<u8> = (0..n)
                    .map(|i| alphabet[((seed.wrapping_mul(2654435761) >> (i * 2)) & 3) as usize])
                    .collect();
                if let Some(prev) = seen.insert(key_of(&p), p.clone()) {
                    assert_eq!(prev, p, "two pieces share a key");
                }
            }
        }
        // Each position of each length changes the key.
        for n in 1..=MAX_PIECE {
            let base = vec![b'x'; n];
            for i in 0..n {
                let mut other = base.clone();
                other[i] = b'y';
                assert_ne!(key_of(&base), key_of(&other), "length {n}, byte {i}");
            }
            assert_ne!(key_of(&base), 0);
        }
    }

    #[test]
    fn entries_of_another_model_are_misses_and_the_table_stays_bounded() {
        let mut cache = PieceCache::new();
        let key = key_of(b" hello");
        cache.put(7, key, &[1, 2]);
        let mut out = Vec::new();
        assert!(!cache.get(8, key, &mut out));
        assert!(cache.get(7, key, &mut out));
        assert_eq!(out, [1, 2]);
        // Many more entries than slots: the table keeps its size and the newest entries.
        for i in 0..(4 * BUCKETS as u32) {
            let piece = format!("w{i}");
            cache.put(7, key_of(piece.as_bytes()), &[i]);
        }
        assert_eq!(cache.buckets.len(), BUCKETS);
        let mut out = Vec::new();
        let last = 4 * BUCKETS as u32 - 1;
        assert!(cache.get(7, key_of(format!("w{last}").as_bytes()), &mut out));
        assert_eq!(out, [last]);
    }

    /// The first `n` keys of pieces whose bucket is `bucket`.
    fn keys_of_bucket(bucket: usize, prefix: &str, n: usize) -> Vec<u128> {
        (0u32..)
            .map(|i| key_of(format!("{prefix}{i}").as_bytes()))
            .filter(|&key| PieceCache::bucket(key) == bucket)
            .take(n)
            .collect()
    }

    #[test]
    fn new_entries_pass_through_the_second_slot_and_a_returning_one_takes_the_first() {
        let mut cache = PieceCache::new();
        // Four pieces of one bucket, put in turn: the first keeps the first slot, each later
        // one takes the second, pushing the one there to the neighbour (dropping the one
        // there: the neighbour keeps one).
        let keys = keys_of_bucket(40, "p", 4);
        for (i, &key) in keys.iter().enumerate() {
            cache.put(7, key, &[i as u32, 100]);
        }
        assert_eq!(cache.buckets[40].0[0].key, keys[0]);
        assert_eq!(cache.ids_in(40, 7, keys[0]), Some(&[0, 100, NONE]));
        assert_eq!(cache.ids_in(40, 7, keys[3]), Some(&[3, 100, NONE]));
        let mut out = Vec::new();
        for &key in &keys[1..3] {
            assert_eq!(cache.ids_in(40, 7, key), None);
            assert!(!cache.get_in(40, 7, key, &mut out));
        }
        // The neighbour keeps the latest pushed out, never for another model.
        assert_eq!(cache.take_from_neighbour(40, 7, keys[1]), None);
        assert_eq!(cache.take_from_neighbour(40, 8, keys[2]), None);
        assert_eq!(
            cache.take_from_neighbour(40, 7, keys[2]),
            Some([2, 100, NONE])
        );
        // Back, it takes the first slot; the first moves to the second, and the second to
        // the neighbour, where it is found in turn. No entry was lost on the way.
        assert_eq!(cache.buckets[40].0[0].key, keys[2]);
        assert_eq!(cache.ids_in(40, 7, keys[2]), Some(&[2, 100, NONE]));
        assert_eq!(cache.ids_in(40, 7, keys[0]), Some(&[0, 100, NONE]));
        assert_eq!(
            cache.take_from_neighbour(40, 7, keys[3]),
            Some([3, 100, NONE])
        );
        assert_eq!(cache.buckets[40].0[0].key, keys[3]);
        // The pieces of the neighbour bucket itself keep its first slot.
        let theirs = keys_of_bucket(41, "q", 1)[0];
        cache.put(7, theirs, &[9]);
        for &key in &keys {
            cache.put(7, key, &[5]);
        }
        assert_eq!(cache.buckets[41].0[0].key, theirs);
        assert_eq!(cache.ids_in(41, 7, theirs), Some(&[9, NONE, NONE]));
    }

    #[test]
    fn an_entry_of_another_model_gives_up_the_first_slot() {
        let mut cache = PieceCache::new();
        let keys = keys_of_bucket(40, "p", 3);
        cache.put(8, keys[0], &[1]);
        cache.put(7, keys[1], &[2]);
        // A model no longer used leaves its entries behind; they must not hold the first
        // slot against every entry of the model in use.
        assert_eq!(cache.buckets[40].0[0].key, keys[1]);
        assert_eq!(cache.buckets[40].0[1].key, keys[0]);
        cache.put(7, keys[2], &[3]);
        assert_eq!(cache.buckets[40].0[0].key, keys[1]);
        assert_eq!(cache.ids_in(40, 7, keys[2]), Some(&[3, NONE, NONE]));
        assert_eq!(
            cache.take_from_neighbour(40, 8, keys[0]),
            Some([1, NONE, NONE])
        );
    }

    #[test]
    fn a_piece_put_again_after_the_arena_is_emptied_is_found_at_the_next_probe() {
        let mut cache = PieceCache::new();
        let keys = keys_of_bucket(40, "p", 2);
        cache.put(7, keys[0], &[1, 2, 3, 4]);
        cache.put(7, keys[1], &[5]);
        let mut out = Vec::new();
        assert!(cache.get(7, keys[0], &mut out));
        // The arena is emptied: the mark in the first slot is stale, a miss.
        cache.make_room(LONG_BYTES + 1);
        assert!(!cache.get(7, keys[0], &mut out));
        // Merged again and put back, the piece is found (its stale mark does not stay in
        // front of the new entry), and the other piece of the bucket is still there.
        cache.put(7, keys[0], &[1, 2, 3, 4]);
        out.clear();
        assert!(cache.get(7, keys[0], &mut out));
        assert_eq!(out, [1, 2, 3, 4]);
        assert_eq!(cache.ids_in(40, 7, keys[1]), Some(&[5, NONE, NONE]));
    }

    #[test]
    fn a_free_first_slot_is_taken_without_pushing_the_second_out() {
        let mut cache = PieceCache::new();
        // The neighbour's overflow lands in bucket 40's second slot, its first still empty.
        let theirs = keys_of_bucket(41, "q", 3);
        for (i, &key) in theirs.iter().enumerate() {
            cache.put(7, key, &[i as u32]);
        }
        assert_eq!(cache.buckets[40].0[1].key, theirs[1]);
        let ours = keys_of_bucket(40, "p", 3);
        cache.put(7, ours[0], &[10]);
        assert_eq!(cache.buckets[40].0[0].key, ours[0]);
        assert_eq!(
            cache.take_from_neighbour(41, 7, theirs[1]),
            Some([1, NONE, NONE])
        );
        // A mark whose arena ids are gone frees the first slot too.
        let mut cache = PieceCache::new();
        cache.put(7, ours[0], &[1, 2, 3, 4]);
        cache.put(7, ours[1], &[5]);
        cache.make_room(LONG_BYTES + 1);
        cache.put(7, ours[2], &[6]);
        assert_eq!(cache.buckets[40].0[0].key, ours[2]);
        assert_eq!(cache.ids_in(40, 7, ours[1]), Some(&[5, NONE, NONE]));
    }

    #[test]
    fn a_piece_whose_ids_are_in_the_arena_is_not_taken_from_the_neighbour() {
        // Such a piece is merged again and its ids put back in the arena.
        let mut cache = PieceCache::new();
        let keys = keys_of_bucket(40, "p", 3);
        let marked = keys[1];
        cache.put(7, keys[0], &[6]);
        cache.put(7, marked, &[1, 2, 3, 4]);
        assert_eq!(cache.buckets[40].0[1].ids[0], IN_LONG);
        cache.put(7, keys[2], &[6]);
        assert_eq!(cache.buckets[41].0[1].key, marked);
        assert_eq!(cache.take_from_neighbour(40, 7, marked), None);
    }
}
