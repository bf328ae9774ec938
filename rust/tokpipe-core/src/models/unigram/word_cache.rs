//! A bounded, per-thread cache of word -> ids for the Unigram model, used where a
//! pre-tokenizer cuts the text into words (HF's `Metaspace` with `split`, T5's layout).
//!
//! Why: the Viterbi over a word costs a trie walk from every byte and a backtrack; text
//! repeats its words, and a word's best segmentation depends on nothing but the word and the
//! model, so its ids can be remembered exactly.
//!
//! Design:
//! - One cache a thread (no locks), shared by every Unigram model that thread encodes with:
//!   each entry carries its model's cache id (unique in the process, from a counter; 0 once
//!   the counter runs out, and a model with id 0 is never cached), so another model's entries
//!   are misses, never wrong ids.
//! - Words of up to 15 bytes (nine in ten words of text) live in a fixed table of
//!   [`FRONT_BUCKETS`] buckets, one 64-byte line each, of two 32-byte slots: the word packed
//!   with its length (`models::packed_key`), the model, and up to six ids (three for a
//!   vocabulary of more than 65,535 pieces) inline, so a hit reads one cache line. A new word
//!   takes its bucket's first slot and moves the previous one to the second, dropping the
//!   older (a hit in the second slot moves it to the first): the words a text keeps using
//!   stay while the ones it uses once pass through. (The first design, a growing hash table
//!   emptied when full with the ids in an arena, read three lines a hit and spent most of its
//!   time waiting on them, on text with many words seen once.)
//! - A short word of more ids, and a word of 16 to [`MAX_WORD`] bytes, keeps its ids (and a
//!   long word its bytes) in an arena (`models::long_keys`, shared with the BPE piece cache):
//!   a short one's slot points to its ids there, a long one is found through a hash table.
//!   All of it is emptied (keeping its allocations) once the table holds
//!   [`MAX_ENTRIES`] long words or the arena [`MAX_ARENA_BYTES`] bytes.
//!   About 6 MiB a thread that encodes, never growing with the input.
//!
//! Ids never depend on the cache: an entry is the Viterbi's own output for that word and
//! model, so a hit gives the ids a miss computes.
//!
//! (Over 500 lines: about 175 of them are its tests, which compare it with the uncached
//! Viterbi; the rest is one cache in two tables and the lookahead queue in front of it.)

use super::UnigramModel;
use crate::models::long_keys::{entry_bytes, LongKeys};
use crate::models::packed_key::{hash_key, key_of, MAX_PACKED};
use crate::models::prefetch::prefetch;
use std::cell::RefCell;

/// Longest word cached, in bytes.
pub(super) const MAX_WORD: usize = 64;

/// Buckets of the front table of short words (2 MiB).
const FRONT_BUCKETS: usize = 1 << 15;

/// Long words held before the cache is emptied: 7/8 of 2^15, the most a table of 2^15 slots
/// holds without doubling.
pub(super) const MAX_ENTRIES: usize = (1 << 15) / 8 * 7;

/// Bytes of long words' entries (`long_keys::entry_bytes`: their key, ids and an 8-byte
/// header) and of short words' spilled ids held before the cache is emptied.
const MAX_ARENA_BYTES: usize = 2 << 20;

/// Unused id of a slot (wide ids).
const NONE: u32 = u32::MAX;

/// Unused id of a slot (narrow ids, two to a `u32`).
const NONE16: u32 = 0xFFFF;

/// First word of a slot whose ids are in the arena: the next two are where and how many.
const SPILLED: u32 = u32::MAX - 1;

/// One short word of one model and its ids: 32 bytes.
#[derive(Clone, Copy)]
#[repr(C)]
struct Slot {
    /// The packed word ([`key_of`]); 0 is an empty slot (a word's key holds its length).
    key: u128,
    model: u32,
    /// Narrow: up to six ids of 16 bits, low half first, [`NONE16`] past the last. Wide: up to
    /// three ids, [`NONE`] past the last. Either: [`SPILLED`], then the ids' place in the arena
    /// and their number.
    ids: [u32; 3],
}

const EMPTY: Slot = Slot {
    key: 0,
    model: 0,
    ids: [NONE; 3],
};

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Bucket([Slot; 2]);

const _: () = assert!(std::mem::size_of::<Bucket>() == 64);

/// Words seen on this thread and their ids.
#[derive(Default)]
pub(super) struct WordCache {
    /// [`FRONT_BUCKETS`] buckets, allocated on first use.
    front: Box<[Bucket]>,
    /// Long words, and the ids of short words of more ids than a slot holds.
    long: LongKeys,
}

thread_local! {
    static CACHE: RefCell<WordCache> = RefCell::new(WordCache::default());
}

/// Appends a slot's inline ids to `out`.
#[inline(always)]
fn push_inline(ids: &[u32; 3], narrow: bool, out: &mut Vec<u32>) {
    if narrow {
        for &pair in ids {
            for id in [pair & 0xFFFF, pair >> 16] {
                if id == NONE16 {
                    return;
                }
                out.push(id);
            }
        }
    } else {
        for &id in ids {
            if id == NONE {
                return;
            }
            out.push(id);
        }
    }
}

/// The inline form of `ids`, if they fit a slot.
#[inline(always)]
fn pack_ids(ids: &[u32], narrow: bool) -> Option<[u32; 3]> {
    let mut slot = [NONE; 3];
    if narrow {
        if ids.len() > 6 {
            return None;
        }
        for (k, &id) in ids.iter().enumerate() {
            debug_assert!(id < NONE16);
            let shift = 16 * (k % 2);
            slot[k / 2] = (slot[k / 2] & !(0xFFFF << shift)) | (id << shift);
        }
    } else {
        if ids.len() > 3 {
            return None;
        }
        slot[..ids.len()].copy_from_slice(ids);
    }
    Some(slot)
}

impl WordCache {
    /// Empties every table and arena, keeping their allocations.
    fn clear(&mut self) {
        self.front.fill(Bucket([EMPTY; 2]));
        self.long.clear();
    }

    /// Empties the cache if `extra` more bytes of keys and ids (and one more long word, with
    /// `long`) would pass its bound.
    fn make_room(&mut self, extra: usize, long: bool) {
        if (long && self.long.len() >= MAX_ENTRIES) || self.long.bytes() + extra > MAX_ARENA_BYTES {
            self.clear();
        }
    }

    /// The bucket of a short word's key (the table is allocated on first use).
    #[inline(always)]
    fn bucket_of(&mut self, key: u128) -> usize {
        if self.front.is_empty() {
            self.front = vec![Bucket([EMPTY; 2]); FRONT_BUCKETS].into_boxed_slice();
        }
        (hash_key(key) >> (64 - FRONT_BUCKETS.trailing_zeros())) as usize
    }

    /// Asks the processor to bring bucket `at` into the cache, so that its lookup a few words
    /// later does not wait on memory.
    #[inline(always)]
    fn prefetch(&self, at: usize) {
        prefetch(&self.front[at]);
    }

    /// Appends the ids of the short word packed in `key` (bucket `at`) to `out`, from the
    /// table or from `model`'s Viterbi.
    #[inline(always)]
    fn encode_short(
        &mut self,
        model: &UnigramModel,
        narrow: bool,
        key: u128,
        at: usize,
        out: &mut Vec<u32>,
    ) {
        let bucket = &mut self.front[at];
        for way in 0..2 {
            let slot = bucket.0[way];
            if slot.key == key && slot.model == model.cache_id {
                if slot.ids[0] == SPILLED {
                    out.extend_from_slice(self.long.ids(slot.ids[1], slot.ids[2]));
                } else {
                    push_inline(&slot.ids, narrow, out);
                }
                if way == 1 {
                    bucket.0.swap(0, 1);
                }
                return;
            }
        }
        // The word is its key's first bytes (the length is in the top byte).
        let bytes = key.to_le_bytes();
        let word = std::str::from_utf8(&bytes[..(key >> 120) as usize])
            .expect("a key packs the bytes of a str");
        let mark = out.len();
        model.encode_into(word, out);
        let new_ids = &out[mark..];
        let ids = match pack_ids(new_ids, narrow) {
            Some(ids) => ids,
            None => {
                self.make_room(4 * new_ids.len(), false);
                let from = self.long.push_ids(new_ids);
                [SPILLED, from, new_ids.len() as u32]
            }
        };
        // (`make_room` may have emptied the table: the bucket is looked up again.)
        let bucket = &mut self.front[at];
        bucket.0[1] = bucket.0[0];
        bucket.0[0] = Slot {
            key,
            model: model.cache_id,
            ids,
        };
    }

    fn encode_long(&mut self, model: &UnigramModel, word: &str, out: &mut Vec<u32>) {
        let bytes = word.as_bytes();
        if let Some(ids) = self.long.get(model.cache_id, bytes) {
            out.extend_from_slice(ids);
            return;
        }
        let mark = out.len();
        model.encode_into(word, out);
        let new_ids = &out[mark..];
        if new_ids.len() > u8::MAX as usize {
            return;
        }
        self.make_room(entry_bytes(bytes.len(), new_ids.len()), true);
        self.long.insert(model.cache_id, bytes, new_ids);
    }
}

/// Short words whose buckets are fetched ahead of their lookup.
const LOOKAHEAD: usize = 8;

/// This thread's cache, lent to one encoding: [`CachedWords::encode`] for each word, the ids
/// appended to the output it was lent with.
///
/// A short word's lookup waits on its bucket's cache line, a random place in 2 MiB: the
/// bucket is prefetched when the word arrives and looked up [`LOOKAHEAD`] words later (its
/// key holds its bytes, all a miss needs), so the waits overlap. Words leave the queue in
/// order, and a word that does not enter it (long, or uncached) waits for the queue to empty,
/// so the ids come in the words' order.
pub struct CachedWords<'m, 'c, 'o> {
    model: &'m UnigramModel,
    /// The model's ids fit 16 bits, six to a slot.
    narrow: bool,
    cache: Option<&'c mut WordCache>,
    out: &'o mut Vec<u32>,
    /// Keys and buckets of the short words not yet looked up, from `head`, `queued` of them.
    queue: [(u128, usize); LOOKAHEAD],
    head: usize,
    queued: usize,
}

impl CachedWords<'_, '_, '_> {
    /// Appends the ids of `word` to the output, in order (those of the last few words once
    /// the lending ends): the same ids as [`UnigramModel::encode_into`].
    #[inline]
    pub fn encode(&mut self, word: &str) {
        let model = self.model;
        let Some(cache) = self.cache.as_deref_mut() else {
            return model.encode_into(word, self.out);
        };
        let bytes = word.as_bytes();
        if model.cache_id != 0 && (1..=MAX_PACKED).contains(&bytes.len()) {
            let key = key_of(bytes);
            let at = cache.bucket_of(key);
            cache.prefetch(at);
            if self.queued == LOOKAHEAD {
                self.pop();
            }
            self.queue[(self.head + self.queued) % LOOKAHEAD] = (key, at);
            self.queued += 1;
            return;
        }
        self.flush();
        let Some(cache) = self.cache.as_deref_mut() else {
            unreachable!("checked above")
        };
        // (An empty word has no ids.)
        if model.cache_id == 0 || bytes.is_empty() || bytes.len() > MAX_WORD {
            model.encode_into(word, self.out);
        } else {
            cache.encode_long(model, word, self.out);
        }
    }

    /// Looks up the oldest queued word.
    #[inline(always)]
    fn pop(&mut self) {
        let (key, at) = self.queue[self.head];
        self.head = (self.head + 1) % LOOKAHEAD;
        self.queued -= 1;
        if let Some(cache) = self.cache.as_deref_mut() {
            cache.encode_short(self.model, self.narrow, key, at, self.out);
        }
    }

    /// Looks up every queued word.
    fn flush(&mut self) {
        while self.queued > 0 {
            self.pop();
        }
    }
}

impl UnigramModel {
    /// Runs `f` with this thread's word cache for this model, the ids of the words it encodes
    /// appended to `out` (uncached if the cache is already lent further up this thread's
    /// stack, which the encoder never does).
    pub fn with_word_cache<R>(
        &self,
        out: &mut Vec<u32>,
        f: impl FnOnce(&mut CachedWords<'_, '_, '_>) -> R,
    ) -> R {
        // Every id is below the number of pieces, so at most 0xFFFD here: neither [`NONE16`]
        // nor, with a second id of [`NONE16`], a first word of [`SPILLED`].
        self.with_cache_as(self.len() < NONE16 as usize, out, f)
    }

    /// [`UnigramModel::with_word_cache`] with slots of narrow or wide ids (the tests use both
    /// on a small vocabulary).
    fn with_cache_as<R>(
        &self,
        narrow: bool,
        out: &mut Vec<u32>,
        f: impl FnOnce(&mut CachedWords<'_, '_, '_>) -> R,
    ) -> R {
        CACHE.with(|cell| {
            let mut lent = cell.try_borrow_mut().ok();
            let mut words = CachedWords {
                model: self,
                narrow,
                cache: lent.as_deref_mut(),
                out,
                queue: [(0, 0); LOOKAHEAD],
                head: 0,
                queued: 0,
            };
            let result = f(&mut words);
            words.flush();
            result
        })
    }
}

/// Long words in this thread's cache, and bytes in its arenas (for the tests of its bound).
#[cfg(test)]
fn thread_cache_size() -> (usize, usize) {
    CACHE.with(|cell| {
        let c = cell.borrow();
        (c.long.len(), c.long.bytes())
    })
}

/// Empties this thread's cache (before a test reads the same model's words with the other
/// slot width, which a model never does).
#[cfg(test)]
fn clear_thread_cache() {
    CACHE.with(|cell| cell.borrow_mut().clear())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::ModelWrapper;

    /// A Unigram model of the shared vocabularies (`.model` files read as sentencepiece does).
    fn shared_model(name: &str) -> UnigramModel {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/corpora/vocab")
            .join(name);
        let tokenizer = crate::formats::sentencepiece::load(&path).unwrap();
        match tokenizer.model() {
            ModelWrapper::Unigram(m) => m.clone(),
            _ => panic!("{name} is not a Unigram model"),
        }
    }

    /// Words as Metaspace cuts them (`▁` and a word) from the shared texts, and generated
    /// words over an alphabet with spaces, tabs, NBSP, combining marks and line breaks.
    fn words() -> Vec<String> {
        let mut words = Vec::new();
        for name in ["botchan.txt", "wagahaiwa_nekodearu.txt"] {
            let text = crate::util::shared_text(name);
            words.extend(text.split(' ').take(20_000).map(|w| format!("▁{w}")));
        }
        let alphabet = [
            "a", "e", "t", "th", " ", "\t", "\u{a0}", "\u{301}", "\r\n", "▁", "é", "ぁ", "日", "の",
        ];
        let mut rng = crate::util::SplitMix64::new(7);
        for _ in 0..5000 {
            let len = (rng.next_u64() % 12) as usize;
            words.push(
                (0..len)
                    .map(|_| alphabet[(rng.next_u64() % alphabet.len() as u64) as usize])
                    .collect(),
            );
        }
        words
    }

    fn uncached(model: &UnigramModel, word: &str) -> Vec<u32> {
        let mut out = Vec::new();
        model.encode_into(word, &mut out);
        out
    }

    #[test]
    fn cached_ids_equal_the_viterbi_and_models_never_share_entries() {
        let en = shared_model("spm_botchan_unigram_1000.model");
        let ja = shared_model("spm_ja_unigram_8000.model");
        let words = words();
        // Slots of 16-bit ids (these vocabularies' own) and of 32-bit ones (as a vocabulary of
        // more than 65,535 pieces has): words of up to six or three ids inline, the others in
        // the arena, and words over 15 bytes in the long table.
        for narrow in [true, false] {
            clear_thread_cache();
            // Twice over (misses, then hits), alternating the two models on the same words:
            // an entry of one model answering for the other would give the other's ids.
            for _ in 0..2 {
                for word in &words {
                    for model in [&en, &ja] {
                        let mut got = vec![7];
                        model.with_cache_as(narrow, &mut got, |cache| cache.encode(word));
                        assert_eq!(got[0], 7, "{word:?}: ids before are kept");
                        assert_eq!(got[1..], uncached(model, word), "{word:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn words_of_one_lending_keep_their_order() {
        // Many words in one lending: short ones wait in the lookahead queue while long ones
        // (16 to 64 bytes, and past 64) and empty ones go straight through, so each kind
        // overtaking another would show as ids out of order.
        let en = shared_model("spm_botchan_unigram_1000.model");
        let ja = shared_model("spm_ja_unigram_8000.model");
        let mut words = words();
        let mut rng = crate::util::SplitMix64::new(5);
        for i in (0..words.len()).step_by(7) {
            let len = [16, 40, 64, 65, 90][(rng.next_u64() % 5) as usize];
            words.insert(i, "▁".to_string() + &"ab".repeat(len / 2 - 1));
        }
        for narrow in [true, false] {
            clear_thread_cache();
            for _ in 0..2 {
                for model in [&en, &ja] {
                    for chunk in words.chunks(1000) {
                        let mut got = vec![7];
                        model.with_cache_as(narrow, &mut got, |cache| {
                            chunk.iter().for_each(|w| cache.encode(w))
                        });
                        let mut want = vec![7];
                        chunk.iter().for_each(|w| model.encode_into(w, &mut want));
                        assert_eq!(got, want);
                    }
                }
            }
        }
    }

    #[test]
    fn inline_ids_read_back_as_written() {
        let mut rng = crate::util::SplitMix64::new(11);
        for (narrow, most, top) in [(true, 6, 0xFFFD), (false, 3, u32::MAX - 2)] {
            for len in 0..=most {
                for round in 0..200 {
                    // The largest id a slot may hold, and random ones.
                    let ids: Vec<u32> = (0..len)
                        .map(|k| {
                            if (round + k) % 3 == 0 {
                                top
                            } else {
                                (rng.next_u64() % (top as u64 + 1)) as u32
                            }
                        })
                        .collect();
                    let slot = pack_ids(&ids, narrow).unwrap();
                    assert_ne!(slot[0], SPILLED, "{ids:?}");
                    let mut back = Vec::new();
                    push_inline(&slot, narrow, &mut back);
                    assert_eq!(back, ids);
                }
            }
            assert_eq!(pack_ids(&vec![1; most + 1], narrow), None);
        }
    }

    #[test]
    fn the_cache_stays_bounded_and_correct_past_its_size() {
        let model = shared_model("spm_botchan_unigram_1000.model");
        clear_thread_cache();
        let mut got = Vec::new();
        // Long words past the long table's bound, then short words of many ids (hex digits)
        // past the arena's: each empties the cache, and a slot left pointing into the emptied
        // arena would give other words' ids below.
        let long = |i: usize| format!("▁word{i}x{}long", i * 7919 % 1000);
        let short = |i: usize| format!("▁{:x}", (i as u64).wrapping_mul(0x9E37_79B9) >> 20);
        let mut emptied = 0;
        let mut last = thread_cache_size();
        for word in (0..MAX_ENTRIES + 5000)
            .map(long)
            .chain((0..150_000).map(short))
        {
            got.clear();
            model.with_word_cache(&mut got, |cache| cache.encode(&word));
            let size = thread_cache_size();
            assert!(
                size.0 <= MAX_ENTRIES && size.1 <= MAX_ARENA_BYTES,
                "{size:?}"
            );
            emptied += usize::from(size.1 < last.1);
            last = size;
        }
        assert!(emptied >= 2, "emptied {emptied} times");
        // After it was emptied: old and new words still give the Viterbi's ids.
        for word in (0..MAX_ENTRIES + 5000)
            .step_by(97)
            .map(long)
            .chain((0..150_000).step_by(97).map(short))
        {
            got.clear();
            model.with_word_cache(&mut got, |cache| cache.encode(&word));
            assert_eq!(got, uncached(&model, &word));
        }
        // Words too long to cache are encoded, not kept.
        let long = "▁".to_string() + &"abcdefgh".repeat(MAX_WORD / 8 + 1);
        let before = thread_cache_size();
        got.clear();
        model.with_word_cache(&mut got, |cache| cache.encode(&long));
        assert_eq!(got, uncached(&model, &long));
        assert_eq!(thread_cache_size(), before);
    }
}
