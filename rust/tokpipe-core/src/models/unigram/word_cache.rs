//! A bounded, per-thread cache of word -> ids for the Unigram model, used where a
//! pre-tokenizer cuts the text into words (HF's `Metaspace` with `split`, T5's layout).
//!
//! Why: the Viterbi over a word costs a trie walk from every byte and a backtrack; text
//! repeats its words, and a word's best segmentation depends on nothing but the word and the
//! model, so its ids can be remembered exactly.
//!
//! Design:
//! - One hash table a thread (no locks), shared by every Unigram model that thread encodes
//!   with: each entry carries its model's cache id (unique in the process, from a counter;
//!   0 once the counter runs out, and a model with id 0 is never cached), so another model's
//!   entries are misses, never wrong ids.
//! - An entry is 32 bytes: a word of up to 15 bytes (most words) packed inside it, so a hit
//!   is compared without following a pointer; longer words' bytes, and all ids, live in two
//!   arenas the entry points into.
//! - Bounded: words over [`MAX_WORD`] bytes are not cached, and the whole cache is emptied
//!   (keeping its allocations) once it holds [`MAX_ENTRIES`] entries or [`MAX_ARENA_BYTES`]
//!   bytes of long words and ids: about 7 MiB a thread that encodes, never growing with the
//!   input.
//!
//! Ids never depend on the cache: an entry is the Viterbi's own output for that word and
//! model, so a hit gives the ids a miss computes.

use super::UnigramModel;
use hashbrown::HashTable;
use std::cell::RefCell;
use std::hash::Hasher;

/// Longest word cached, in bytes.
pub(super) const MAX_WORD: usize = 64;

/// Longest word whose bytes are kept in its entry, packed with its length into 16 bytes.
const MAX_PACKED: usize = 15;

/// Entries held before the cache is emptied: 7/8 of 2^17, the most a table of 2^17 buckets
/// holds without doubling (32 bytes an entry: 4 MiB).
pub(super) const MAX_ENTRIES: usize = (1 << 17) / 8 * 7;

/// Bytes of long keys and ids held before the cache is emptied.
const MAX_ARENA_BYTES: usize = 2 << 20;

/// 32 bytes: a word of up to [`MAX_PACKED`] bytes is compared inside its entry, with no
/// pointer to follow; a longer one is in the keys arena.
#[derive(Clone, Copy)]
struct Entry {
    /// The word's bytes and length ([`pack`]), or zero for a word kept in the arena.
    packed: [u64; 2],
    model: u32,
    key_at: u32,
    ids_at: u32,
    key_len: u8,
    ids_len: u8,
}

/// Words seen on this thread and their ids.
#[derive(Default)]
pub(super) struct WordCache {
    table: HashTable<Entry>,
    keys: Vec<u8>,
    ids: Vec<u32>,
}

thread_local! {
    static CACHE: RefCell<WordCache> = RefCell::new(WordCache::default());
}

/// A word of up to [`MAX_PACKED`] bytes and its length in 16 bytes (the length in the last,
/// so no two words share one); zero for longer words.
fn pack(word: &[u8]) -> [u64; 2] {
    if word.len() > MAX_PACKED {
        return [0, 0];
    }
    let mut b = [0u8; 16];
    b[..word.len()].copy_from_slice(word);
    b[15] = word.len() as u8;
    let (lo, hi) = b.split_at(8);
    [
        u64::from_le_bytes(lo.try_into().unwrap()),
        u64::from_le_bytes(hi.try_into().unwrap()),
    ]
}

/// The bytes [`pack`] packed (the word, then zeros, then its length).
fn unpack(packed: [u64; 2]) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&packed[0].to_le_bytes());
    b[8..].copy_from_slice(&packed[1].to_le_bytes());
    b
}

fn hash_word(model: u32, word: &[u8]) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    h.write_u32(model);
    h.write(word);
    h.finish()
}

impl WordCache {
    /// Appends the ids of `word` to `out`, from the cache or from `model`'s Viterbi.
    fn encode(&mut self, model: &UnigramModel, word: &str, out: &mut Vec<u32>) {
        let bytes = word.as_bytes();
        // (An empty word would pack like a long one; it has no ids anyway.)
        if model.cache_id == 0 || bytes.is_empty() || bytes.len() > MAX_WORD {
            model.encode_into(word, out);
            return;
        }
        let hash = hash_word(model.cache_id, bytes);
        let packed = pack(bytes);
        let WordCache { table, keys, ids } = self;
        let hit = table.find(hash, |e| {
            e.model == model.cache_id
                && e.packed == packed
                && (bytes.len() <= MAX_PACKED
                    || (e.key_len as usize == bytes.len()
                        && &keys[e.key_at as usize..e.key_at as usize + bytes.len()] == bytes))
        });
        if let Some(e) = hit {
            out.extend_from_slice(&ids[e.ids_at as usize..e.ids_at as usize + e.ids_len as usize]);
            return;
        }
        let mark = out.len();
        model.encode_into(word, out);
        let new_ids = &out[mark..];
        if new_ids.len() > u8::MAX as usize {
            return;
        }
        let long_key = if bytes.len() > MAX_PACKED {
            bytes.len()
        } else {
            0
        };
        if table.len() >= MAX_ENTRIES
            || keys.len() + long_key + 4 * (ids.len() + new_ids.len()) > MAX_ARENA_BYTES
        {
            table.clear();
            keys.clear();
            ids.clear();
        }
        let entry = Entry {
            packed,
            model: model.cache_id,
            key_at: keys.len() as u32,
            ids_at: ids.len() as u32,
            key_len: bytes.len() as u8,
            ids_len: new_ids.len() as u8,
        };
        if long_key > 0 {
            keys.extend_from_slice(bytes);
        }
        ids.extend_from_slice(new_ids);
        // Growing rehashes every entry from its word, in its entry or the arena.
        table.insert_unique(hash, entry, |e| {
            let unpacked;
            let word = if e.packed == [0, 0] {
                &keys[e.key_at as usize..e.key_at as usize + e.key_len as usize]
            } else {
                unpacked = unpack(e.packed);
                &unpacked[..e.key_len as usize]
            };
            hash_word(e.model, word)
        });
    }
}

/// This thread's cache, lent to one encoding: [`CachedWords::encode`] for each word.
pub struct CachedWords<'m, 'c> {
    model: &'m UnigramModel,
    cache: Option<&'c mut WordCache>,
}

impl CachedWords<'_, '_> {
    /// Appends the ids of `word` to `out`: the same ids as [`UnigramModel::encode_into`].
    pub fn encode(&mut self, word: &str, out: &mut Vec<u32>) {
        match self.cache.as_deref_mut() {
            Some(cache) => cache.encode(self.model, word, out),
            None => self.model.encode_into(word, out),
        }
    }
}

impl UnigramModel {
    /// Runs `f` with this thread's word cache for this model (uncached if the cache is
    /// already lent further up this thread's stack, which the encoder never does).
    pub fn with_word_cache<R>(&self, f: impl FnOnce(&mut CachedWords<'_, '_>) -> R) -> R {
        CACHE.with(|cell| match cell.try_borrow_mut() {
            Ok(mut cache) => f(&mut CachedWords {
                model: self,
                cache: Some(&mut cache),
            }),
            Err(_) => f(&mut CachedWords {
                model: self,
                cache: None,
            }),
        })
    }
}

/// Entries in this thread's cache (for the tests of its bound).
#[cfg(test)]
pub(super) fn thread_cache_len() -> usize {
    CACHE.with(|cell| cell.borrow().table.len())
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
        // Twice over (misses, then hits), alternating the two models on the same words: an
        // entry of one model answering for the other would give the other's ids.
        for _ in 0..2 {
            for word in &words {
                for model in [&en, &ja] {
                    let mut got = vec![7];
                    model.with_word_cache(|cache| cache.encode(word, &mut got));
                    assert_eq!(got[0], 7, "{word:?}: ids before are kept");
                    assert_eq!(got[1..], uncached(model, word), "{word:?}");
                }
            }
        }
    }

    #[test]
    fn the_cache_stays_bounded_and_correct_past_its_size() {
        let model = shared_model("spm_botchan_unigram_1000.model");
        let word = |i: usize| format!("▁w{i}x{}", i * 7919 % 1000);
        let mut got = Vec::new();
        for i in 0..MAX_ENTRIES + 5000 {
            got.clear();
            model.with_word_cache(|cache| cache.encode(&word(i), &mut got));
            assert!(thread_cache_len() <= MAX_ENTRIES);
        }
        // After it was emptied: old and new words still give the Viterbi's ids.
        for i in (0..MAX_ENTRIES + 5000).step_by(97) {
            got.clear();
            model.with_word_cache(|cache| cache.encode(&word(i), &mut got));
            assert_eq!(got, uncached(&model, &word(i)));
        }
        // Words too long to cache are encoded, not kept.
        let long = "▁".to_string() + &"abcdefgh".repeat(MAX_WORD / 8 + 1);
        let before = thread_cache_len();
        got.clear();
        model.with_word_cache(|cache| cache.encode(&long, &mut got));
        assert_eq!(got, uncached(&model, &long));
        assert_eq!(thread_cache_len(), before);
    }
}
