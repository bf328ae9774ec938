//! [`PieceEncoder`]: encodes the pieces of a text, in order, through this thread's piece cache
//! ([`super::piece_cache`]), hiding the latency of its tables.
//!
//! Why: with a fresh tokenizer every distinct piece of a text is met once without a cache
//! entry; it then costs a probe of the whole-token table ([`super::short_tokens`], megabytes)
//! and, if it is no token, the merge loop, whose every merge looks up two new pairs in the
//! merge table ([`super::pair_table`], megabytes too). Each of those loads waits for memory,
//! and within one piece they depend on each other (a merge decides the next pairs), so one
//! piece at a time they are paid one after the other: a profile of one-document encode of
//! English text with cl100k put 27% of the time on the merge loop's pair loads and 6% on the
//! whole-token probe. Pieces are independent of each other, though, so this encoder works on
//! [`BLOCK`] of them at a time:
//! - a piece's cache bucket is requested from memory when the scanner hands the piece over, and
//!   probed one to two blocks later (the loads of consecutive pieces overlap);
//! - the block's misses have their whole-token slots requested together, then probed;
//! - the misses that are no token are merged side by side, one merge of each in turn: each
//!   merge requests the two pairs it makes, and reads them at its piece's next turn, after the
//!   other pieces' merges, so the loads of up to a block of pieces overlap;
//! - the ids are appended in the pieces' order, and the misses' ids remembered in the cache.
//!
//! Each piece's merges are those of [`BpeModel::merge_short`] in the same order (lowest
//! priority, leftmost on ties), so the ids are the same; the tests compare them with
//! [`BpeModel::encode_piece`]. Pieces of more than [`MAX_PIECE`] bytes, and those the cache
//! keeps in its long map, take the one-at-a-time path.

use super::model::{BpeModel, NO_TOKEN};
use super::pair_table::PairTable;
use super::piece_cache::{key_of, PieceCache, Probe, IN_LONG, MAX_IDS, MAX_LONG_PIECE, MAX_PIECE};

/// Pieces encoded together: the misses merged side by side, at most. The scanner runs one to
/// two blocks ahead of the probes, so `2 * BLOCK` buckets are in flight (2 KiB, in L1).
const BLOCK: usize = 16;

/// Pieces waiting: the block being encoded and the one after it.
const RING: usize = 2 * BLOCK;

/// A piece waiting for its probe: its bytes, and for a piece of 2 to `MAX_PIECE` bytes its key
/// and cache bucket (key 0 for the others, which take the uncached or long-map path).
#[derive(Clone, Copy)]
struct Pending<'t> {
    piece: &'t [u8],
    key: u128,
    bucket: usize,
}

const NO_PENDING: Pending<'static> = Pending {
    piece: &[],
    key: 0,
    bucket: 0,
};

/// Encodes the pieces of a text, in order, into one output, through this thread's piece cache
/// when there is one; see [`BpeModel::with_piece_cache`] and the module's notes.
pub struct PieceEncoder<'m, 'c, 'o, 't> {
    model: &'m BpeModel,
    cache: Option<&'c mut PieceCache>,
    out: &'o mut Vec<u32>,
    ring: [Pending<'t>; RING],
    /// Pieces received so far.
    seen: usize,
    /// Pieces whose ids are in `out`; those from `done` to `seen` wait in `ring`.
    done: usize,
}

/// What the block's first pass found for a piece after the block's first miss.
#[derive(Clone, Copy)]
enum Found {
    /// Encoded one at a time in the last pass (a cache hit, or a piece the cache's bucket
    /// table does not answer for).
    Later,
    /// The `k`th distinct miss of the block.
    Miss(u8),
}

/// The merge loop of one short piece, a merge a turn ([`Merging::step`]).
#[derive(Clone, Copy)]
struct Merging {
    syms: [u32; MAX_PIECE],
    /// Priority and result of the pair starting at each symbol (`u32::MAX`: no merge).
    prio: [u32; MAX_PIECE],
    merged: [u32; MAX_PIECE],
    n: usize,
    /// The position of the last merge, whose two pairs are still to be read; `usize::MAX`
    /// when there is none.
    refresh: usize,
    /// The piece is a whole token (this id), not merged.
    token: u32,
}

const IDLE: Merging = Merging {
    syms: [0; MAX_PIECE],
    prio: [u32::MAX; MAX_PIECE],
    merged: [0; MAX_PIECE],
    n: 0,
    refresh: usize::MAX,
    token: NO_TOKEN,
};

impl Merging {
    /// The state before the first merge of `piece` (its byte tokens and their pairs: pairs of
    /// byte tokens are read from the merge table's dense, cached part).
    #[inline(always)]
    fn start(model: &BpeModel, piece: &[u8]) -> Self {
        let mut m = IDLE;
        for &b in piece {
            let id = model.byte_ids[b as usize];
            if id != NO_TOKEN {
                m.syms[m.n] = id;
                m.n += 1;
            }
        }
        for i in 0..m.n.saturating_sub(1) {
            (m.prio[i], m.merged[i]) = pair(&model.merges, m.syms[i], m.syms[i + 1]);
        }
        m
    }

    /// Reads the pairs of the last merge, then makes the next merge and requests its pairs;
    /// true when the piece has no merge left. The same merges as `BpeModel::merge_short`.
    #[inline(always)]
    fn step(&mut self, merges: &PairTable) -> bool {
        let n = self.n;
        let at = self.refresh;
        if at != usize::MAX {
            if at + 1 < n {
                (self.prio[at], self.merged[at]) = pair(merges, self.syms[at], self.syms[at + 1]);
            }
            if at > 0 {
                (self.prio[at - 1], self.merged[at - 1]) =
                    pair(merges, self.syms[at - 1], self.syms[at]);
            }
        }
        if n < 2 {
            return true;
        }
        // The lowest priority, leftmost on ties.
        let mut at = 0;
        for i in 1..n - 1 {
            if self.prio[i] < self.prio[at] {
                at = i;
            }
        }
        if self.prio[at] == u32::MAX {
            return true;
        }
        self.syms[at] = self.merged[at];
        self.syms.copy_within(at + 2..n, at + 1);
        self.prio.copy_within(at + 1..n - 1, at);
        self.merged.copy_within(at + 1..n - 1, at);
        let n = n - 1;
        self.n = n;
        self.refresh = at;
        if at + 1 < n {
            merges.prefetch(self.syms[at], self.syms[at + 1]);
        }
        if at > 0 {
            merges.prefetch(self.syms[at - 1], self.syms[at]);
        }
        false
    }

    /// The piece's ids.
    fn ids(&self) -> &[u32] {
        if self.token != NO_TOKEN {
            std::slice::from_ref(&self.token)
        } else {
            &self.syms[..self.n]
        }
    }
}

#[inline(always)]
fn pair(merges: &PairTable, left: u32, right: u32) -> (u32, u32) {
    merges.get(left, right).unwrap_or((u32::MAX, 0))
}

impl<'m, 'c, 'o, 't> PieceEncoder<'m, 'c, 'o, 't> {
    pub(super) fn new(
        model: &'m BpeModel,
        cache: Option<&'c mut PieceCache>,
        out: &'o mut Vec<u32>,
    ) -> Self {
        PieceEncoder {
            model,
            cache,
            out,
            ring: [NO_PENDING; RING],
            seen: 0,
            done: 0,
        }
    }

    /// Appends the ids of one piece (those of [`BpeModel::encode_piece`]) after those of the
    /// pieces before it; with a cache they are written up to `2 * BLOCK` pieces later.
    #[inline(always)]
    pub fn encode(&mut self, piece: &'t [u8]) {
        let Some(cache) = self.cache.as_deref_mut() else {
            return self.model.encode_piece(piece, self.out);
        };
        let mut pending = Pending {
            piece,
            key: 0,
            bucket: 0,
        };
        if (2..=MAX_PIECE).contains(&piece.len()) {
            pending.key = key_of(piece);
            pending.bucket = PieceCache::bucket(pending.key);
            cache.prefetch(pending.bucket);
        }
        self.ring[self.seen % RING] = pending;
        self.seen += 1;
        if self.seen - self.done == RING {
            self.encode_block(BLOCK);
        }
    }

    /// Encodes the pieces still waiting.
    pub(super) fn flush(&mut self) {
        while self.done < self.seen {
            self.encode_block((self.seen - self.done).min(BLOCK));
        }
    }

    /// Encodes the `count` oldest waiting pieces (at most [`BLOCK`]) into the output.
    fn encode_block(&mut self, count: usize) {
        let model = self.model;
        let cache = self
            .cache
            .as_deref_mut()
            .expect("blocks are only made with a cache");
        let out = &mut *self.out;
        let first = self.done;
        self.done += count;
        let ring = &self.ring;
        let at = |i: usize| ring[(first + i) % RING];
        // Until the first miss, pieces are encoded as they are probed (most blocks of English
        // text have no miss at all).
        let mut i = 0;
        while i < count {
            let p = at(i);
            if p.key == 0 {
                encode_pending(model, cache, p, out);
            } else {
                match cache.get_in(p.bucket, model.cache_id, p.key, out) {
                    Probe::Hit => {}
                    Probe::Long => encode_pending(model, cache, p, out),
                    Probe::Miss => break,
                }
            }
            i += 1;
        }
        if i == count {
            return;
        }
        // From the first miss on: find the block's distinct misses and request their
        // whole-token slots.
        let start = i;
        let mut found = [Found::Later; BLOCK];
        let mut keys = [0u128; BLOCK];
        let mut misses = 0;
        for (i, f) in found.iter_mut().enumerate().take(count).skip(start) {
            let p = at(i);
            if p.key == 0
                || (i > start && cache.peek(p.bucket, model.cache_id, p.key) != Probe::Miss)
            {
                continue;
            }
            let k = match keys[..misses].iter().position(|&k| k == p.key) {
                Some(k) => k,
                None => {
                    keys[misses] = p.key;
                    model.short_tokens.prefetch(p.key);
                    misses += 1;
                    misses - 1
                }
            };
            *f = Found::Miss(k as u8);
        }
        // Whole tokens, else the merges of every miss side by side.
        let mut states = [IDLE; BLOCK];
        let mut active = [0u8; BLOCK];
        let mut n_active = 0;
        for (i, f) in found.iter().enumerate().take(count).skip(start) {
            let Found::Miss(k) = *f else { continue };
            let k = k as usize;
            if states[k].n != 0 || states[k].token != NO_TOKEN {
                continue; // a repeat of an earlier miss
            }
            let piece = at(i).piece;
            match model.short_tokens.get(keys[k]) {
                Some(id) => states[k].token = id,
                None => {
                    states[k] = Merging::start(model, piece);
                    active[n_active] = k as u8;
                    n_active += 1;
                }
            }
        }
        while n_active > 0 {
            let mut kept = 0;
            for j in 0..n_active {
                let k = active[j];
                if !states[k as usize].step(&model.merges) {
                    active[kept] = k;
                    kept += 1;
                }
            }
            n_active = kept;
        }
        // The ids in order; each distinct miss remembered once.
        let mut remembered = [false; BLOCK];
        for (i, f) in found.iter().enumerate().take(count).skip(start) {
            let p = at(i);
            match *f {
                Found::Later => encode_pending(model, cache, p, out),
                Found::Miss(k) => {
                    let ids = states[k as usize].ids();
                    out.extend_from_slice(ids);
                    if !remembered[k as usize] {
                        remembered[k as usize] = true;
                        remember(model, cache, p, ids);
                    }
                }
            }
        }
    }
}

/// [`BpeModel::encode_piece`] for a byte-level model through `cache`, one piece at a time: a
/// piece of 2 to `MAX_PIECE` bytes (`pending.key` set) is looked up in its bucket, a longer one
/// in the long map, and the ids of a miss are remembered.
#[inline(always)]
fn encode_pending(
    model: &BpeModel,
    cache: &mut PieceCache,
    pending: Pending<'_>,
    out: &mut Vec<u32>,
) {
    let Pending { piece, key, bucket } = pending;
    if key == 0 {
        if piece.len() <= MAX_PIECE || piece.len() > MAX_LONG_PIECE {
            return model.encode_piece(piece, out);
        }
        if cache.get_long(model.cache_id, piece, out) {
            return;
        }
        let start = out.len();
        model.encode_piece(piece, out);
        return cache.put_long(model.cache_id, piece, &out[start..]);
    }
    match cache.get_in(bucket, model.cache_id, key, out) {
        Probe::Hit => return,
        // A short piece of more ids than a slot holds lives in the long map.
        Probe::Long => {
            if cache.get_long(model.cache_id, piece, out) {
                return;
            }
        }
        Probe::Miss => {}
    }
    let start = out.len();
    model.encode_short(key, piece, out);
    remember(model, cache, pending, &out[start..]);
}

/// Puts the ids of a short piece (`pending.key` set) into the cache: in its bucket, or, if
/// more than a slot holds, in the long map with a mark in its bucket.
#[inline(always)]
fn remember(model: &BpeModel, cache: &mut PieceCache, pending: Pending<'_>, ids: &[u32]) {
    let Pending { piece, key, bucket } = pending;
    match ids.len() {
        0 => {}
        n if n <= MAX_IDS => cache.put_in(bucket, model.cache_id, key, ids),
        _ => {
            cache.put_long(model.cache_id, piece, ids);
            cache.put_in(bucket, model.cache_id, key, &[IN_LONG]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::bpe::piece_cache::tests::{openai_tokenizers, uncached};
    use crate::pre_tokenizers::scanners::tests::Rng;
    use crate::tokenizer::AllowedSpecial;

    /// A word of `len` letters from a few consonants and vowels: mostly no token, so a miss
    /// runs the merge loop.
    fn word(rng: &mut Rng, len: usize) -> String {
        let letters = [
            "b", "k", "r", "s", "t", "z", "a", "e", "i", "o", "u", "é", "ø", "ß",
        ];
        (0..len)
            .map(|_| letters[rng.below(letters.len())])
            .collect()
    }

    #[test]
    fn blocks_of_first_sights_merged_side_by_side_equal_the_one_piece_loop() {
        // Texts made mostly of words never seen before (every one a miss of the cache, most
        // no token), with repeats inside a block, single bytes, long words, numbers and
        // punctuation between them: every block mixes hits, misses merged side by side,
        // repeated misses and pieces of the one-at-a-time path.
        let toks = openai_tokenizers();
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for case in 0..3_000 {
            let mut text = String::new();
            let mut words: Vec<String> = Vec::new();
            for _ in 0..rng.below(80) + 1 {
                let piece = match rng.below(10) {
                    0 if !words.is_empty() => words[rng.below(words.len())].clone(),
                    1 => {
                        let len = rng.below(30) + 16;
                        word(&mut rng, len)
                    }
                    2 => format!("{}", rng.next() % 100_000),
                    3 => ["!", ",", "--", "\n", "((", "中文"][rng.below(6)].to_string(),
                    _ => {
                        let len = rng.below(14) + 1;
                        let w = word(&mut rng, len);
                        words.push(w.clone());
                        w
                    }
                };
                text.push(' ');
                text.push_str(&piece);
            }
            for _ in 0..2 {
                for tok in &toks {
                    let got = tok.encode(&text, &AllowedSpecial::None).unwrap();
                    assert!(got == uncached(tok, &text), "case {case}: {text:?}");
                }
            }
        }
    }

    #[test]
    fn a_hit_evicted_by_a_miss_of_its_own_block_is_encoded_right() {
        // Three words of one cache bucket: A and B fill its two slots; then in one block C
        // misses and A hits, and remembering C (after A was found) drops A's entry before A's
        // ids are read.
        let toks = openai_tokenizers();
        let tok = &toks[0];
        let mut by_bucket = std::collections::HashMap::<usize, Vec<String>>::new();
        let mut rng = Rng(7);
        let same = loop {
            let w = format!(" {}", word(&mut rng, 8));
            let list = by_bucket
                .entry(PieceCache::bucket(key_of(w.as_bytes())))
                .or_default();
            if !list.contains(&w) {
                list.push(w);
            }
            if list.len() == 3 {
                break list.clone();
            }
        };
        let encode = |text: &str| tok.encode(text, &AllowedSpecial::None).unwrap();
        let (a, b, c) = (&same[0], &same[1], &same[2]);
        assert_eq!(encode(a), uncached(tok, a));
        assert_eq!(encode(b), uncached(tok, b));
        let text = format!("{c}{a}{b}{c}{a}");
        assert_eq!(encode(&text), uncached(tok, &text));
        assert_eq!(encode(&text), uncached(tok, &text));
    }
}
