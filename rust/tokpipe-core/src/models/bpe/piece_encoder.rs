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
//! whole-token probe. Pieces are independent of each other, though, so:
//! - the scanner's pieces are gathered in chunks of [`CHUNK`]; a chunk is run in tight loops:
//!   the first requests the long map's lines of its pieces of 16 bytes or more, the second
//!   computes each piece's key and requests its cache bucket from memory, the third probes them
//!   in order (so the loads of a chunk overlap, and no loop carries the scanner's state). An
//!   earlier design probed each bucket 16 pieces after its request, inside the scanner's loop:
//!   one loop doing both was 1% to 24% slower in six alternations of a Rust-only driver
//!   (20 MB of English, cl100k, a fresh tokenizer per run), and 1.6x slower on a second pass
//!   over the same text (benches/RESULTS.md, "Fifth step");
//! - the bucket loop has no branch on a piece's length: a key is one 16-byte load from the
//!   text, masked to the piece ([`key_within`]), and single bytes have keys and cache entries
//!   like longer pieces. Branches on the length (to skip single bytes, and in
//!   [`super::piece_cache::key_of`]) mispredicted on a large share of pieces, whose lengths
//!   are random: without them a second pass over 20 MB of English ran 136-143 MB/s against
//!   123-127, and a fresh tokenizer 80-85 against 74-79 (the same driver, builds
//!   alternating; benches/RESULTS.md, "Seventh step");
//! - a hit's ids are copied from its slot, a whole slot at a time (no branch on their count);
//!   a miss leaves a hole in the output (its position) and joins the batch of distinct
//!   misses, its whole-token slot requested;
//! - when the batch holds [`BATCH`] misses (about 3% of English pieces are misses, so a batch
//!   spans hundreds of pieces), or [`HOLES`] holes, or the text ends, its whole tokens are
//!   read and the others merged side by side, one merge of each in turn: each merge requests
//!   the two pairs it makes and reads them at its piece's next turn, after the other pieces'
//!   merges, so the loads of up to a batch of pieces overlap;
//! - a miss whose entry waits in the neighbour bucket ([`PieceCache::take_from_neighbour`];
//!   its line is requested with the miss) takes its ids from there, not from the merge loop;
//! - the ids after the holes move right, once, from the last hole back, the misses' ids fill
//!   the holes, and each miss not taken from the neighbour is remembered in the cache.
//!
//! An encoder is set up for every text, so it sets up nothing it does not use: the chunk, the
//! batch, the holes and a chunk's keys and buckets are [`InlineVec`]s, whose places stay
//! uninitialised until a value is pushed. Filled with placeholders (about 4 KB in all), they
//! were about a fifth of the time of encoding "hello", and a warm pass over 590-byte English
//! documents ran about 10% slower (benches/RESULTS.md, "Eighth step").
//!
//! Each piece's merges are those of [`BpeModel::merge_short`] in the same order (lowest
//! priority, leftmost on ties), so the ids are the same; the tests compare them with
//! [`BpeModel::encode_piece`]. Pieces of more than [`SHORT_PIECE`] bytes (more than a merge
//! state holds) take the one-at-a-time path.
//!
//! (Over 500 lines: about 250 of them are its tests; the rest is one encoder, whose chunks,
//! batch of misses and merge states share its output, and the merge states' two ways of
//! merging, short and wide.)

use super::inline_vec::InlineVec;
use super::model::{BpeModel, NO_TOKEN, SHORT_PIECE};
use super::pair_table::PairTable;
use super::piece_cache::{id_count, key_within, PieceCache, MAX_IDS, MAX_LONG_PIECE, MAX_PIECE};
use std::cell::RefCell;

/// Pieces gathered from the scanner before their cache buckets are requested and then probed
/// ([`PieceEncoder::run_chunk`]): enough that the first probe comes a load from memory after
/// its request, few enough that the buckets stay in the L1 cache until their probes.
const CHUNK: usize = 64;

/// Distinct misses merged side by side, at most. Misses are a few percent of the pieces of
/// real text, so a batch gathers them from hundreds of pieces.
const BATCH: usize = 16;

/// Misses (repeats included) waiting for their ids, at most.
const HOLES: usize = 64;

/// A piece waiting for its ids: its bytes, and for a piece of 1 to `MAX_PIECE` bytes its key
/// and cache bucket (key 0 for the others, which take the uncached or long-map path).
#[derive(Clone, Copy)]
struct Pending<'t> {
    piece: &'t [u8],
    key: u128,
    bucket: usize,
}

/// Encodes the pieces of a text, in order, into one output, through this thread's piece cache
/// when there is one; see [`BpeModel::with_piece_cache`] and the module's notes.
pub struct PieceEncoder<'m, 'c, 'o, 't> {
    model: &'m BpeModel,
    /// The text whose pieces are encoded (their keys are read from it, [`key_within`]).
    text: &'t [u8],
    cache: Option<(&'c mut PieceCache, &'c mut Scratch)>,
    out: &'o mut Vec<u32>,
    /// The pieces received since the last chunk was run, in order.
    chunk: InlineVec<&'t [u8], CHUNK>,
    batch: Batch<'t>,
}

/// The misses of the cache waiting for their ids.
struct Batch<'t> {
    /// The distinct misses.
    misses: InlineVec<Pending<'t>, BATCH>,
    /// Where each miss's ids go in the output (the ids after it were appended already), and
    /// which of `misses` it is; in the pieces' order.
    holes: InlineVec<(usize, u8), HOLES>,
}

/// The merge loop of one piece of up to [`SHORT_PIECE`] bytes, a merge a turn
/// ([`Merging::step`]). Only the first `n` symbols (and `n - 1` pairs) are meaningful; the
/// rest is whatever an earlier piece left there. A state given ids by [`Merging::set_ids`]
/// (a piece found in the neighbour bucket) has stale pairs and is never stepped.
#[derive(Clone, Copy)]
pub(super) struct Merging {
    syms: [u32; SHORT_PIECE],
    /// Priority and result of the pair starting at each symbol (`u32::MAX`: no merge). A wide
    /// piece keeps keys here instead ([`pair_key_at`]).
    prio: [u32; SHORT_PIECE],
    merged: [u32; SHORT_PIECE],
    n: usize,
    /// The position of the last merge, whose two pairs are still to be read; `usize::MAX`
    /// when there is none.
    refresh: usize,
    /// The piece is a whole token (this id), not merged.
    token: u32,
    /// A wide piece's symbols stay at their byte's place ([`Merging::step_wide`]): the
    /// places of the symbols before and after each living one (`NO_PLACE` past either end),
    /// and how many places the piece has (`n` counts the living symbols).
    prev: [u8; SHORT_PIECE],
    next: [u8; SHORT_PIECE],
    places: usize,
    wide: bool,
}

const IDLE: Merging = Merging {
    syms: [0; SHORT_PIECE],
    prio: [u32::MAX; SHORT_PIECE],
    merged: [0; SHORT_PIECE],
    n: 0,
    refresh: usize::MAX,
    token: NO_TOKEN,
    prev: [NO_PLACE; SHORT_PIECE],
    next: [NO_PLACE; SHORT_PIECE],
    places: 0,
    wide: false,
};

/// Pieces of more symbols than this merge in the wide way ([`Merging::step_wide`]); shorter
/// ones move their symbols left after each merge, which costs less than the wide way's setup.
const WIDE_FROM: usize = 16;

/// The places a wide piece's lowest key is looked for in at a time.
const KEY_BLOCK: usize = 16;

/// No place: before the first symbol or after the last.
const NO_PLACE: u8 = u8::MAX;

/// Bits of a place in a key: `SHORT_PIECE` places fit.
const PLACE_BITS: u32 = 7;
const _: () = assert!(SHORT_PIECE <= 1 << PLACE_BITS && SHORT_PIECE % KEY_BLOCK == 0);

/// A key no pair has: a place without a pair (merged away, or the last).
const NO_KEY: u32 = u32::MAX;

/// Keys of pairs that merge are below this; `u32::MAX << PLACE_BITS | place` (no merge) and
/// `NO_KEY` are not.
const NO_MERGE_KEY: u32 = u32::MAX << PLACE_BITS;

/// Whether every priority of `merges` fits a key's top bits, below the keys of no merge.
#[inline(always)]
fn keys_fit(merges: &PairTable) -> bool {
    merges.max_priority() < u32::MAX >> PLACE_BITS
}

/// The key of the pair at `place` of priority `priority` (`u32::MAX`: no merge): lower for a
/// lower priority, then for a place further left, so the lowest key is the merge to make.
#[inline(always)]
fn pair_key_at(priority: u32, place: usize) -> u32 {
    priority << PLACE_BITS | place as u32
}

/// The lowest of the first `blocks` blocks of `keys`: [`KEY_BLOCK`] places side by side, so
/// the compiler makes it vector minimums without a branch. (Built for AVX2 and chosen at run
/// time it measured level: the minimums are no longer what a wide piece's merge waits for.)
#[inline(always)]
fn lowest_key(keys: &[u32; SHORT_PIECE], blocks: usize) -> u32 {
    let mut low = [NO_KEY; KEY_BLOCK];
    for block in keys.chunks_exact(KEY_BLOCK).take(blocks) {
        for (l, &k) in low.iter_mut().zip(block) {
            *l = (*l).min(k);
        }
    }
    low.iter().fold(NO_KEY, |a, &b| a.min(b))
}

/// The merge states of one batch, kept per thread (22 KiB: too much to clear for each batch
/// or document; a state is only read where its piece wrote it).
pub(super) type Scratch = [Merging; BATCH];

thread_local! {
    static SCRATCH: RefCell<Option<Box<Scratch>>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's merge states (new ones if they are in use further up the
/// stack, which the encoder never does).
pub(super) fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => f(slot.get_or_insert_with(|| Box::new([IDLE; BATCH]))),
        Err(_) => f(&mut Box::new([IDLE; BATCH])),
    })
}

impl Merging {
    /// Starts the merge loop of `piece` (its byte tokens and their pairs), or records its
    /// whole-token id.
    #[inline(always)]
    fn start(&mut self, model: &BpeModel, piece: &[u8], token: Option<u32>) {
        self.refresh = usize::MAX;
        self.n = 0;
        self.wide = false;
        if let Some(id) = token {
            self.token = id;
            return;
        }
        self.token = NO_TOKEN;
        let mut n = 0;
        for &b in piece {
            let id = model.byte_ids[b as usize];
            if id != NO_TOKEN {
                self.syms[n] = id;
                n += 1;
            }
        }
        self.n = n;
        if n > WIDE_FROM && keys_fit(&model.merges) {
            return self.start_wide(&model.merges);
        }
        for i in 0..n.saturating_sub(1) {
            (self.prio[i], self.merged[i]) = pair(&model.merges, self.syms[i], self.syms[i + 1]);
        }
    }

    /// Reads the pairs of the last merge, then makes the next merge and requests its pairs;
    /// true when the piece has no merge left. The same merges as `BpeModel::merge_short`.
    #[inline(always)]
    fn step(&mut self, merges: &PairTable) -> bool {
        if self.wide {
            return self.step_wide(merges);
        }
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
        // The lowest priority, leftmost on ties (a slice of the `n - 1` pairs: no bound
        // check in the loop).
        let pairs = &self.prio[..n - 1];
        let mut at = 0;
        let mut low = pairs[0];
        for (i, &p) in pairs.iter().enumerate().skip(1) {
            if p < low {
                (at, low) = (i, p);
            }
        }
        if low == u32::MAX {
            return true;
        }
        self.syms[at] = self.merged[at];
        // The symbols after the merge, and the pairs from it on, move one place left (one
        // loop: three `copy_within` calls of a few elements cost more in calls than in copies).
        for i in at..n - 2 {
            self.syms[i + 1] = self.syms[i + 2];
            self.prio[i] = self.prio[i + 1];
            self.merged[i] = self.merged[i + 1];
        }
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

    /// The pairs of the `n` byte symbols of a wide piece, as keys, and their places' links.
    #[inline(always)]
    fn start_wide(&mut self, merges: &PairTable) {
        let n = self.n;
        self.wide = true;
        self.places = n;
        for i in 0..n {
            self.prev[i] = if i == 0 { NO_PLACE } else { (i - 1) as u8 };
            self.next[i] = if i + 1 == n { NO_PLACE } else { (i + 1) as u8 };
        }
        for i in 0..n - 1 {
            self.read_wide_pair(merges, i, i + 1);
        }
        let blocks = (n - 1).div_ceil(KEY_BLOCK);
        self.prio[n - 1..blocks * KEY_BLOCK].fill(NO_KEY);
    }

    /// [`Merging::step`] of a wide piece. Its symbols stay where their first byte was, linked
    /// to their neighbours, and the pair at each place is a key ([`pair_key_at`]): the merge
    /// to make is the lowest key, found over all places at once ([`lowest_key`]), with no
    /// symbols moved. Why: a piece of dozens of symbols (Japanese and Chinese words, whose
    /// letters take three bytes each) makes dozens of merges, and the one-by-one search for
    /// the lowest pair and the moves after each merge grew with its length at every merge.
    #[inline(always)]
    fn step_wide(&mut self, merges: &PairTable) -> bool {
        let at = self.refresh;
        if at != usize::MAX {
            let next = self.next[at];
            if next != NO_PLACE {
                self.read_wide_pair(merges, at, next as usize);
            }
            let prev = self.prev[at];
            if prev != NO_PLACE {
                self.read_wide_pair(merges, prev as usize, at);
            }
        }
        let low = lowest_key(&self.prio, (self.places - 1).div_ceil(KEY_BLOCK));
        if low >= NO_MERGE_KEY {
            self.close_wide();
            return true;
        }
        let at = (low & ((1 << PLACE_BITS) - 1)) as usize;
        let right = self.next[at] as usize;
        self.syms[at] = self.merged[at];
        self.prio[right] = NO_KEY;
        let after = self.next[right];
        self.next[at] = after;
        if after != NO_PLACE {
            self.prev[after as usize] = at as u8;
            merges.prefetch(self.syms[at], self.syms[after as usize]);
        } else {
            self.prio[at] = NO_KEY;
        }
        let prev = self.prev[at];
        if prev != NO_PLACE {
            merges.prefetch(self.syms[prev as usize], self.syms[at]);
        }
        self.n -= 1;
        self.refresh = at;
        false
    }

    /// Reads the pair of a wide piece's symbols at places `left` and `right` (its neighbour)
    /// into `left`'s key and result.
    #[inline(always)]
    fn read_wide_pair(&mut self, merges: &PairTable, left: usize, right: usize) {
        let (priority, merged) = pair(merges, self.syms[left], self.syms[right]);
        (self.prio[left], self.merged[left]) = (pair_key_at(priority, left), merged);
    }

    /// Moves a wide piece's living symbols to the front, in order (the first place always
    /// lives: a merge keeps its left symbol's place).
    fn close_wide(&mut self) {
        let (mut place, mut n) = (0, 0);
        loop {
            self.syms[n] = self.syms[place];
            n += 1;
            match self.next[place] {
                NO_PLACE => break,
                next => place = next as usize,
            }
        }
        debug_assert_eq!(n, self.n);
        self.n = n;
        self.wide = false;
    }

    /// Records ids found in the cache (`NONE` past the last), as the merge loop's result.
    fn set_ids(&mut self, ids: &[u32; MAX_IDS]) {
        let n = id_count(ids);
        self.syms[..n].copy_from_slice(&ids[..n]);
        self.n = n;
        self.wide = false;
        self.token = NO_TOKEN;
        self.refresh = usize::MAX;
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
    merges.pair(left, right)
}

/// Whether a piece without a packed key is merged in a batch when the cache misses it: one
/// the long map keeps, short enough for a merge state.
#[inline(always)]
fn long_in_batch(piece: &[u8]) -> bool {
    (MAX_PIECE + 1..=SHORT_PIECE.min(MAX_LONG_PIECE)).contains(&piece.len())
}

impl<'m, 'c, 'o, 't> PieceEncoder<'m, 'c, 'o, 't> {
    pub(super) fn new(
        model: &'m BpeModel,
        text: &'t [u8],
        cache: Option<(&'c mut PieceCache, &'c mut Scratch)>,
        out: &'o mut Vec<u32>,
    ) -> Self {
        PieceEncoder {
            model,
            text,
            cache,
            out,
            chunk: InlineVec::new(),
            batch: Batch {
                misses: InlineVec::new(),
                holes: InlineVec::new(),
            },
        }
    }

    /// Appends the ids of one piece (those of [`BpeModel::encode_piece`]) after those of the
    /// pieces before it; with a cache they are written later (at the latest by
    /// [`PieceEncoder::flush`]).
    #[inline(always)]
    pub fn encode(&mut self, piece: &'t [u8]) {
        if self.cache.is_none() {
            return self.model.encode_piece(piece, self.out);
        }
        self.chunk.push(piece);
        if self.chunk.is_full() {
            self.run_chunk();
        }
    }

    /// Encodes the pieces still waiting.
    pub(super) fn flush(&mut self) {
        if self.cache.is_none() {
            return;
        }
        self.run_chunk();
        let Some((cache, states)) = self.cache.as_mut() else {
            return;
        };
        self.batch.resolve(self.model, cache, states, self.out);
    }

    /// Appends the ids of the chunk's pieces, in three passes: the first requests the long
    /// map's lines of the long pieces, the second the cache bucket of every piece, the third
    /// probes them, so the loads of the chunk overlap. A hit's ids are copied with no branch on
    /// their count; a miss goes to the batch.
    #[inline(never)]
    fn run_chunk(&mut self) {
        let model = self.model;
        let Some((cache, states)) = self.cache.as_mut() else {
            return self.chunk.clear();
        };
        let pieces = self.chunk.as_slice();
        let mut keys: InlineVec<u128, CHUNK> = InlineVec::new();
        let mut buckets: InlineVec<u32, CHUNK> = InlineVec::new();
        // The long map's lines of the chunk's long pieces, requested first (their probes below
        // would otherwise wait on memory one after the other). A separate loop, so that the
        // next one keeps no branch on the length.
        for piece in pieces {
            if (MAX_PIECE + 1..=MAX_LONG_PIECE).contains(&piece.len()) {
                cache.prefetch_long(model.cache_id, piece);
            }
        }
        // No branch on a piece's length here: a key of 0 (an empty piece, or one too long for a
        // key) requests a bucket it never probes.
        for piece in pieces {
            let key = key_within(self.text, piece);
            let bucket = PieceCache::bucket(key);
            cache.prefetch(bucket);
            keys.push(key);
            buckets.push(bucket as u32);
        }
        let id = model.cache_id;
        let mut end = End::of(self.out);
        let keyed = pieces.iter().zip(keys.as_slice()).zip(buckets.as_slice());
        for ((&piece, &key), &bucket) in keyed {
            if key != 0 {
                if let Some(ids) = cache.ids_in(bucket as usize, id, key) {
                    end.push_slot(self.out, ids);
                    continue;
                }
            }
            let pending = Pending {
                piece,
                key,
                bucket: bucket as usize,
            };
            end.write_back(self.out);
            self.batch.probe(model, cache, states, self.out, pending);
            end = End::of(self.out);
        }
        end.write_back(self.out);
        self.chunk.clear();
    }
}

/// Where the chunk's hits append their ids: the output's length, capacity and buffer in
/// locals, written back to the vector before anything else appends to it. Why: appended
/// through the vector, each hit loaded and stored its length in memory (its buffer's writes
/// might alias it, for all the compiler knows), on the path that most pieces take.
struct End {
    ptr: *mut u32,
    len: usize,
    cap: usize,
}

impl End {
    #[inline(always)]
    fn of(out: &mut Vec<u32>) -> Self {
        End {
            ptr: out.as_mut_ptr(),
            len: out.len(),
            cap: out.capacity(),
        }
    }

    /// Sets `out`'s length to the ids appended (its buffer is `self.ptr`'s).
    #[inline(always)]
    fn write_back(&self, out: &mut Vec<u32>) {
        debug_assert_eq!(out.as_mut_ptr(), self.ptr);
        // SAFETY: the first `len` ids of the buffer are written (those of `out` before, and
        // the slots' ids after), and `len <= cap`.
        unsafe { out.set_len(self.len) };
    }

    /// Appends a cache slot's ids (1 to [`MAX_IDS`], `NONE` past the last), copying the
    /// whole slot and keeping its ids: no branch on their count.
    #[inline(always)]
    fn push_slot(&mut self, out: &mut Vec<u32>, ids: &[u32; MAX_IDS]) {
        // The vector grows with the ids actually written (the caller sized it for a typical
        // text), not by a chunk's worst case, which would reallocate most documents.
        if self.cap - self.len < MAX_IDS {
            self.write_back(out);
            out.reserve(MAX_IDS);
            *self = End::of(out);
        }
        // SAFETY: there is room for `MAX_IDS` ids past `len` (checked above); the first
        // `id_count` of them are the slot's ids.
        unsafe { std::ptr::copy_nonoverlapping(ids.as_ptr(), self.ptr.add(self.len), MAX_IDS) };
        self.len += id_count(ids);
    }
}

impl<'t> Batch<'t> {
    /// Appends the ids of a piece the chunk's fast path did not answer: a hit of the long map,
    /// the one-at-a-time path, or a hole for a miss of the batch.
    #[inline(always)]
    fn probe(
        &mut self,
        model: &BpeModel,
        cache: &mut PieceCache,
        states: &mut Scratch,
        out: &mut Vec<u32>,
        p: Pending<'t>,
    ) {
        let id = model.cache_id;
        if p.key != 0 {
            if cache.get_in(p.bucket, id, p.key, out) {
                return;
            }
        } else if !long_in_batch(p.piece) {
            return encode_unbatched(model, cache, p.piece, out);
        } else if cache.get_long(id, p.piece, out) {
            return;
        }
        let same = |m: &Pending<'_>| m.key == p.key && (p.key != 0 || m.piece == p.piece);
        let k = match self.misses.as_slice().iter().position(same) {
            Some(k) => k,
            None => {
                if p.key != 0 {
                    model.short_tokens.prefetch(p.key);
                    cache.prefetch_neighbour(p.bucket);
                }
                self.misses.push(p)
            }
        };
        self.holes.push((out.len(), k as u8));
        if self.misses.is_full() || self.holes.is_full() {
            self.resolve(model, cache, states, out);
        }
    }

    /// Encodes the batch's misses (whole tokens, else their merges side by side), writes their
    /// ids into their holes and remembers them in the cache (but those the neighbour bucket
    /// held, which are back in their own).
    fn resolve(
        &mut self,
        model: &BpeModel,
        cache: &mut PieceCache,
        states: &mut Scratch,
        out: &mut Vec<u32>,
    ) {
        // The merges built for AVX2 where the CPU has it (the wheels target x86-64's baseline,
        // SSE2): a merge table's line is compared four slots an instruction instead of
        // emulated two at a time, and a wide piece's keys eight at a time. 24 languages
        // encoded 4% to 9% faster with a fresh tokenizer, English 2% (benches/RESULTS.md,
        // "Thirteenth step"). The rest of the encoder built so measured no faster.
        #[cfg(target_arch = "x86_64")]
        if has_avx2() && !baseline_forced() {
            // SAFETY: the CPU has the features `resolve_avx2` is built for.
            return unsafe { self.resolve_avx2(model, cache, states, out) };
        }
        self.resolve_in(model, cache, states, out)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt")]
    unsafe fn resolve_avx2(
        &mut self,
        model: &BpeModel,
        cache: &mut PieceCache,
        states: &mut Scratch,
        out: &mut Vec<u32>,
    ) {
        self.resolve_in(model, cache, states, out)
    }

    #[inline(always)]
    fn resolve_in(
        &mut self,
        model: &BpeModel,
        cache: &mut PieceCache,
        states: &mut Scratch,
        out: &mut Vec<u32>,
    ) {
        let (misses, holes) = (self.misses.as_slice(), self.holes.as_slice());
        if misses.is_empty() {
            // A hole is pushed only after its miss.
            debug_assert!(holes.is_empty());
            return;
        }
        let mut active = [0u8; BATCH];
        let mut n_active = 0;
        // Misses the neighbour bucket answers (its line was requested with the miss) take
        // their ids from there and are not remembered again.
        let mut found = [false; BATCH];
        for (k, p) in misses.iter().enumerate() {
            if p.key != 0 {
                if let Some(ids) = cache.take_from_neighbour(p.bucket, model.cache_id, p.key) {
                    states[k].set_ids(&ids);
                    found[k] = true;
                    continue;
                }
            }
            let token = if p.key != 0 {
                model.short_tokens.get(p.key)
            } else {
                model.atomic_token(p.piece)
            };
            states[k].start(model, p.piece, token);
            if token.is_none() {
                active[n_active] = k as u8;
                n_active += 1;
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
        // Open the holes, from the last: each stretch of ids after a hole moves right by the
        // ids of the holes up to it.
        let mut shift: usize = holes
            .iter()
            .map(|&(_, k)| states[k as usize].ids().len())
            .sum();
        let mut end = out.len();
        out.resize(end + shift, 0);
        for &(at, k) in holes.iter().rev() {
            out.copy_within(at..end, at + shift);
            let ids = states[k as usize].ids();
            shift -= ids.len();
            out[at + shift..at + shift + ids.len()].copy_from_slice(ids);
            end = at;
        }
        debug_assert_eq!(shift, 0);
        for (k, &p) in misses.iter().enumerate() {
            if found[k] {
                continue;
            }
            let ids = states[k].ids();
            if p.key == 0 {
                cache.put_long(model.cache_id, p.piece, ids);
            } else if !ids.is_empty() {
                cache.put_in(p.bucket, model.cache_id, p.key, ids);
            }
        }
        self.misses.clear();
        self.holes.clear();
    }
}

/// Whether this CPU has what [`Batch::resolve_avx2`] is built for (each answer is cached by
/// the standard library).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn has_avx2() -> bool {
    use std::arch::is_x86_feature_detected as has;
    has!("avx2") && has!("bmi1") && has!("bmi2") && has!("lzcnt") && has!("popcnt")
}

/// [`BpeModel::encode_piece`] for a piece without a packed key that is not merged in a batch,
/// one at a time: one of more than [`SHORT_PIECE`] bytes (looked up in the long map, and
/// remembered there, up to [`MAX_LONG_PIECE`] bytes), or an empty one.
#[inline(always)]
fn encode_unbatched(model: &BpeModel, cache: &mut PieceCache, piece: &[u8], out: &mut Vec<u32>) {
    if piece.len() <= MAX_PIECE || piece.len() > MAX_LONG_PIECE {
        return model.encode_piece(piece, out);
    }
    if cache.get_long(model.cache_id, piece, out) {
        return;
    }
    let start = out.len();
    model.encode_piece(piece, out);
    cache.put_long(model.cache_id, piece, &out[start..]);
}

/// Whether a test asked for the baseline build of the merges on a CPU with AVX2.
#[cfg(all(target_arch = "x86_64", not(test)))]
#[inline(always)]
fn baseline_forced() -> bool {
    false
}

#[cfg(all(target_arch = "x86_64", test))]
fn baseline_forced() -> bool {
    tests::BASELINE.load(std::sync::atomic::Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::bpe::piece_cache::tests::{openai_tokenizers, uncached};
    use crate::pre_tokenizers::scanners::tests::Rng;
    use crate::tokenizer::AllowedSpecial;
    use std::sync::atomic::{AtomicBool, Ordering};

    pub(super) static BASELINE: AtomicBool = AtomicBool::new(false);

    #[test]
    fn the_baseline_build_of_the_merges_gives_the_ids_of_the_one_piece_loop() {
        // Other tests may run meanwhile on the baseline build too; both give the same ids.
        BASELINE.store(true, Ordering::Relaxed);
        wide_pieces_of_letters_of_three_bytes_and_of_one_repeated_letter_equal_the_one_piece_loop();
        blocks_of_first_sights_merged_side_by_side_equal_the_one_piece_loop();
        BASELINE.store(false, Ordering::Relaxed);
    }

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
        // no token), with repeats inside a block, single bytes, long words (of 16 bytes to
        // the merge states' 96 and past them), numbers and punctuation between them: every block mixes hits, misses merged side by side,
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
                    4 if rng.below(4) == 0 => {
                        // Past the merge states' length (some past the long map's).
                        let len = rng.below(150) + 50;
                        word(&mut rng, len)
                    }
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
    fn wide_pieces_of_letters_of_three_bytes_and_of_one_repeated_letter_equal_the_one_piece_loop() {
        // Pieces past `WIDE_FROM` symbols up to the merge states' length: Japanese and Chinese
        // letters (three bytes each, merged within and across letters), and runs of one letter
        // (every pair of one priority, so the leftmost must merge first), side by side in
        // batches with short words.
        let toks = openai_tokenizers();
        let letters: Vec<char> = "日本語の文章を書いて中文字符测试東京都市場はがでるかなカタナ"
            .chars()
            .collect();
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        for case in 0..2_000 {
            let mut text = String::new();
            for _ in 0..rng.below(24) + 1 {
                let piece: String = match rng.below(3) {
                    0 => (0..rng.below(30) + 6)
                        .map(|_| letters[rng.below(letters.len())])
                        .collect(),
                    1 => "ab"[rng.below(2)..][..1].repeat(rng.below(90) + WIDE_FROM - 4),
                    _ => {
                        let len = rng.below(8) + 1;
                        word(&mut rng, len)
                    }
                };
                text.push(' ');
                text.push_str(&piece);
            }
            for tok in &toks {
                let got = tok.encode(&text, &AllowedSpecial::None).unwrap();
                assert!(got == uncached(tok, &text), "case {case}: {text:?}");
            }
        }
    }

    #[test]
    fn texts_around_the_chunk_size_give_the_same_ids() {
        // Texts of CHUNK - 2 to CHUNK + 2 pieces and of two and three chunks, each mixing hits,
        // single bytes, new words, long words and pieces of the one-at-a-time path, so that
        // each kind falls on the last piece of a chunk and the first of the next.
        let toks = openai_tokenizers();
        let mut rng = Rng(0xC0FF_EE00_1234_5678);
        let counts = (CHUNK - 2..=CHUNK + 2).chain([2 * CHUNK, 3 * CHUNK + 1]);
        for (case, count) in counts.clone().chain(counts).enumerate() {
            for shift in 0..6 {
                let mut pieces: Vec<String> = Vec::new();
                for i in 0..count {
                    pieces.push(match (i + shift) % 6 {
                        0 => " the".to_string(),
                        1 => ",".to_string(),
                        2 => format!(" {}", word(&mut rng, 5)),
                        3 => format!(" {}", word(&mut rng, 20)),
                        4 => format!(" {}", word(&mut rng, 120)),
                        _ => " of".to_string(),
                    });
                }
                let text: String = pieces.concat();
                for tok in &toks {
                    let pieces_seen = {
                        let mut n = 0;
                        tok.pre_tokenizer().split(&text, |_| n += 1).unwrap();
                        n
                    };
                    assert_eq!(
                        pieces_seen, count,
                        "case {case}: the text is cut as planned"
                    );
                    let got = tok.encode(&text, &AllowedSpecial::None).unwrap();
                    assert!(got == uncached(tok, &text), "case {case}: {text:?}");
                }
            }
        }
    }

    #[test]
    fn a_single_byte_that_is_no_token_stays_without_ids_on_every_pass() {
        // Single bytes have cache entries; one whose byte is no token encodes to no ids, which
        // no entry holds, so it is a miss each time and must still give nothing (as the
        // uncached loop does), in a chunk's middle and at a text's end (the keys of the last
        // 15 bytes are read the slow way).
        use crate::pre_tokenizers::PreTokenizer;
        use crate::tokenizer::Tokenizer;
        let mut ranks: Vec<(Vec<u8>, u32)> = (0..=255u8)
            .filter(|b| !b"!q".contains(b))
            .map(|b| vec![b])
            .zip(0..)
            .collect();
        for token in [&b"th"[..], b"he", b"the", b" the", b"!!"] {
            let id = ranks.len() as u32;
            ranks.push((token.to_vec(), id));
        }
        let model = BpeModel::from_ranks(ranks, "test").unwrap();
        let tok = Tokenizer::new(PreTokenizer::new("cl100k").unwrap(), model, vec![]).unwrap();
        let body = " the q, the! q the !! q".repeat(CHUNK / 4);
        for text in [
            body.clone(),
            format!("{body} q"),
            "!".to_string(),
            "q!".to_string(),
        ] {
            let want = uncached(&tok, &text);
            assert!(!want.is_empty() || text.len() < 3);
            for pass in 0..3 {
                let got = tok.encode(&text, &AllowedSpecial::None).unwrap();
                assert_eq!(got, want, "pass {pass}: {text:?}");
            }
        }
    }

    #[test]
    fn pieces_that_are_not_slices_of_the_text_get_the_ids_of_the_one_piece_loop() {
        // `with_piece_cache` reads keys from its text; pieces from elsewhere (the bytes just
        // before the text in the same buffer, a copy) must get their own ids all the same.
        let buffer =
            "Caf\u{e9} owners' 1234 signs, unbelievably; the quick brown fox jumps. \n".repeat(4);
        let (before, text) = buffer.split_at(buffer.len() / 2);
        let copy = text.to_string();
        for tok in openai_tokenizers() {
            let model = tok.model().as_bpe().unwrap();
            let mut pieces: Vec<&[u8]> = Vec::new();
            for source in [before, copy.as_str(), text] {
                tok.pre_tokenizer()
                    .split(source, |p| pieces.push(p.as_bytes()))
                    .unwrap();
            }
            let mut want = Vec::new();
            for piece in &pieces {
                model.encode_piece(piece, &mut want);
            }
            for pass in 0..2 {
                let mut got = Vec::new();
                model.with_piece_cache(text.as_bytes(), &mut got, |encoder| {
                    for &piece in &pieces {
                        encoder.encode(piece);
                    }
                });
                assert_eq!(got, want, "pass {pass}");
            }
        }
    }

    #[test]
    fn a_batch_closed_by_its_repeats_or_its_distinct_misses_gives_the_same_ids() {
        // A few new words repeated until the holes are full (more than `HOLES` misses of
        // fewer than `BATCH` pieces), then more new words than a batch holds, hits and long
        // words between them, in one text and across texts.
        let toks = openai_tokenizers();
        let mut rng = Rng(11);
        for case in 0..50 {
            let few: Vec<String> = (0..3).map(|_| word(&mut rng, 9)).collect();
            let many: Vec<String> = (0..3 * BATCH).map(|_| word(&mut rng, 6)).collect();
            let mut text = String::new();
            for i in 0..2 * HOLES + case {
                text.push(' ');
                text.push_str(&few[i % few.len()]);
                if i % 7 == 0 {
                    text.push_str(" the");
                }
            }
            for (i, w) in many.iter().enumerate() {
                text.push(' ');
                text.push_str(w);
                if i % 5 == 0 {
                    let len = 20 + i;
                    text.push(' ');
                    text.push_str(&word(&mut rng, len));
                }
            }
            for tok in &toks {
                for _ in 0..2 {
                    let got = tok.encode(&text, &AllowedSpecial::None).unwrap();
                    assert!(got == uncached(tok, &text), "case {case}: {text:?}");
                }
            }
        }
    }
}
