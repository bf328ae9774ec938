//! The merge loop: learns merges from counted pre-tokens exactly as HF `tokenizers`'
//! `BpeTrainer` does, with a leaner memory layout.
//!
//! The algorithm (HF's, kept step for step because its quirks decide the output):
//! - Every distinct pre-token is a word of symbol ids with a count. Pair counts are the
//!   count-weighted number of adjacent occurrences.
//! - A max-heap holds candidates `(count, pair, words)`: a pair, its count when queued, and the
//!   words to rewrite when it wins. It pops the highest count, ties going to the smaller
//!   `(left, right)`. Counts are updated lazily: a popped candidate whose count differs from
//!   the pair's current count is queued again with the current count (the words kept).
//! - Training stops when the vocabulary reaches its size, the queue is empty, or the winning
//!   count is 0 or below `min_frequency`.
//! - The winning pair becomes a token (an already existing token when its bytes were made
//!   before, so one token can come from two merges), and every listed word is rewritten left
//!   to right without overlaps (`a a a` with `(a, a)` becomes `aa a`).
//! - Each rewrite reports its neighbours' changes: the pairs it breaks lose the word's count,
//!   the pairs it makes gain it. The merged pair itself is *not* decremented (HF does not),
//!   which only matters when the same pair is queued again later. Gained pairs are queued as
//!   new candidates listing just the words where they were made, even if the pair already has
//!   a candidate: a pair can thus be merged twice, each time in its own words; the model keeps
//!   the later priority (see [`super::dedup_merges`]).
//! - With `max_token_length`, a made pair is only counted if its two parts are together
//!   shorter than that many characters (HF's strict `<`), so it can never win.
//!
//! Layout: words are runs of `u32` in one flat vector (a header, then the symbols), rewritten
//! in place and named by their offset; candidates list word offsets as sorted `u32`s.
//! Rewrites touching many words are spread over rayon threads, each gathering its own count
//! changes, which are then summed; the result does not depend on the thread count.
//!
//! (Over 500 lines: one algorithm, HF's merge loop, whose token table, candidate heap, word lists
//! and parallel rewrite all work on the same flat word vector; its tests are in [`super`].)

use crate::models::piece_counter::PieceCounter;
use crate::pre_tokenizers::byte_level;
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::cmp::Ordering;

/// Rewrites touching at least this many words run in parallel; below it the threads' setup
/// and the summing of their changes cost more than they save.
const PARALLEL_MIN_WORDS: usize = 2048;

#[inline]
fn pack(left: u32, right: u32) -> u64 {
    ((left as u64) << 32) | right as u64
}

#[inline]
fn unpack(pair: u64) -> (u32, u32) {
    ((pair >> 32) as u32, pair as u32)
}

/// Every token's bytes and id, as they are assigned: special tokens, then the 256 byte-level
/// characters by code point, then one token per merge whose bytes are new.
#[derive(Debug)]
pub(crate) struct TokenTable {
    ids: FxHashMap<Box<[u8]>, u32>,
    /// id -> bytes; `None` for a special token whose text is not made of byte-level characters
    /// (it can never equal an ordinary token).
    bytes: Vec<Option<Box<[u8]>>>,
    /// id -> length in byte-level characters (= bytes), for `max_token_length`.
    lens: Vec<u32>,
    /// Whether the id is an ordinary token (a byte or a merge result). A special token whose
    /// text spells an ordinary token in byte-level characters is both, as in HF.
    ordinary: Vec<bool>,
}

impl TokenTable {
    pub(crate) fn new(special_tokens: &[String]) -> Self {
        let mut table = TokenTable {
            ids: FxHashMap::default(),
            bytes: Vec::new(),
            lens: Vec::new(),
            ordinary: Vec::new(),
        };
        for special in special_tokens {
            let id = table.bytes.len() as u32;
            // HF keeps one string -> id map for all tokens, with ordinary tokens written in
            // byte-level characters; a special token spelled in those characters is therefore
            // the same entry as the ordinary token with those bytes.
            let bytes = byte_level::decode(special).map(Vec::into_boxed_slice);
            if let Some(b) = &bytes {
                table.ids.insert(b.clone(), id);
            }
            table
                .lens
                .push(bytes.as_ref().map_or(0, |b| b.len() as u32));
            table.bytes.push(bytes);
            table.ordinary.push(false);
        }
        let mut alphabet: Vec<u8> = (0..=255).collect();
        alphabet.sort_by_key(|&b| byte_level::byte_char(b) as u32);
        for b in alphabet {
            table.intern(&[b]);
        }
        table
    }

    /// Distinct tokens so far (HF's vocabulary size during training).
    pub(crate) fn len(&self) -> usize {
        self.bytes.len()
    }

    /// The id of the token with these bytes, made if new.
    fn intern(&mut self, bytes: &[u8]) -> u32 {
        let id = match self.ids.get(bytes) {
            Some(&id) => id,
            None => {
                let id = self.bytes.len() as u32;
                self.ids.insert(bytes.into(), id);
                self.bytes.push(Some(bytes.into()));
                self.lens.push(bytes.len() as u32);
                self.ordinary.push(false);
                id
            }
        };
        self.ordinary[id as usize] = true;
        id
    }

    fn concat(&mut self, left: u32, right: u32) -> u32 {
        let get = |id: u32| {
            self.bytes[id as usize]
                .as_deref()
                .expect("merged tokens are ordinary")
        };
        let joined = [get(left), get(right)].concat();
        self.intern(&joined)
    }

    pub(crate) fn byte_ids(&self) -> [u32; 256] {
        std::array::from_fn(|b| self.ids[&[b as u8][..]])
    }

    /// `(bytes, id)` of every ordinary token, in id order.
    pub(crate) fn into_ordinary(self) -> Vec<(Vec<u8>, u32)> {
        self.bytes
            .into_iter()
            .zip(self.ordinary)
            .enumerate()
            .filter_map(|(id, (bytes, ordinary))| {
                ordinary.then(|| {
                    (
                        bytes.expect("ordinary tokens have bytes").into_vec(),
                        id as u32,
                    )
                })
            })
            .collect()
    }
}

/// Training limits, as given to the trainer.
pub(crate) struct MergeLimits {
    pub vocab_size: usize,
    pub min_frequency: u64,
    /// In characters; `usize::MAX` for no limit.
    pub max_token_length: usize,
}

/// A queued pair (HF's `Merge`): its count when queued and the words to rewrite, kept small
/// (24 bytes) because heap operations move entries around and miss the cache on every level.
#[derive(Debug)]
struct Candidate {
    /// The count when queued, as HF keeps it (`u64`, a negative count would wrap).
    count: u64,
    pair: u64,
    /// Queue order; only orders two candidates of the same pair and count, whose order HF
    /// leaves to its heap's layout (either order gives the same merges in practice).
    seq: u32,
    /// Index of the candidate's word list in [`WordLists`].
    list: u32,
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Candidate {}
impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Candidate {
    /// Highest count first, then the smaller pair, then the older candidate.
    fn cmp(&self, other: &Self) -> Ordering {
        self.count
            .cmp(&other.count)
            .then(other.pair.cmp(&self.pair))
            .then(other.seq.cmp(&self.seq))
    }
}

/// A max-heap of candidates with 8 children per node (as HF's `OctonaryHeap`): a third of a
/// binary heap's depth, and a node's children share three cache lines, so a pop from a heap of
/// a million candidates misses the cache a handful of times instead of twenty.
#[derive(Default)]
struct CandidateHeap {
    nodes: Vec<Candidate>,
}

impl CandidateHeap {
    const ARITY: usize = 8;

    fn push(&mut self, candidate: Candidate) {
        let mut at = self.nodes.len();
        self.nodes.push(candidate);
        while at > 0 {
            let parent = (at - 1) / Self::ARITY;
            if self.nodes[at] <= self.nodes[parent] {
                break;
            }
            self.nodes.swap(at, parent);
            at = parent;
        }
    }

    fn pop(&mut self) -> Option<Candidate> {
        let last = self.nodes.pop()?;
        if self.nodes.is_empty() {
            return Some(last);
        }
        let top = std::mem::replace(&mut self.nodes[0], last);
        let mut at = 0;
        loop {
            let first_child = at * Self::ARITY + 1;
            if first_child >= self.nodes.len() {
                break;
            }
            let children = first_child..(first_child + Self::ARITY).min(self.nodes.len());
            let best = children
                .max_by(|&a, &b| self.nodes[a].cmp(&self.nodes[b]))
                .expect("at least one child");
            if self.nodes[best] <= self.nodes[at] {
                break;
            }
            self.nodes.swap(at, best);
            at = best;
        }
        Some(top)
    }
}

/// The word lists of queued candidates: word offsets (see [`Words`]), strictly increasing.
/// Slots are reused once their candidate has been merged.
#[derive(Default)]
struct WordLists {
    lists: Vec<Vec<u32>>,
    free: Vec<u32>,
}

impl WordLists {
    fn add(&mut self, words: Vec<u32>) -> u32 {
        match self.free.pop() {
            Some(slot) => {
                self.lists[slot as usize] = words;
                slot
            }
            None => {
                self.lists.push(words);
                (self.lists.len() - 1) as u32
            }
        }
    }

    fn take(&mut self, slot: u32) -> Vec<u32> {
        self.free.push(slot);
        std::mem::take(&mut self.lists[slot as usize])
    }
}

/// All words in one vector of `u32`, each a header then its symbols: at offset `o`,
/// `symbols[o]` is the current length, `symbols[o + 1..o + 3]` the count (low and high half),
/// then the symbol ids. Words are named by their offset, so reaching one costs a single cache
/// miss (no offset table, no separate count array); they only shrink, in place.
struct Words {
    symbols: Vec<u32>,
}

const HEADER: usize = 3;

/// Asks the CPU to start loading the cache line at `p`: candidate word lists jump around a
/// large vector, and overlapping those misses is most of the speed of the rewrite.
#[inline(always)]
fn prefetch(p: *const u32) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is a hint with no effect on memory; any address is allowed.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0)
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// How far ahead in a word list to prefetch.
const PREFETCH_AHEAD: usize = 8;

/// The pairs one merge made, each with the words where it was made (offsets, strictly
/// increasing because words are rewritten in offset order), in first-made order.
#[derive(Default)]
struct MadePairs {
    index: FxHashMap<u64, usize>,
    groups: Vec<(u64, Vec<u32>)>,
}

impl MadePairs {
    #[inline]
    fn add(&mut self, pair: u64, offset: u32) {
        let groups = &mut self.groups;
        let at = *self.index.entry(pair).or_insert_with(|| {
            groups.push((pair, Vec::new()));
            groups.len() - 1
        });
        let offsets = &mut groups[at].1;
        if offsets.last() != Some(&offset) {
            offsets.push(offset);
        }
    }

    /// Appends pairs made in words that all come after this one's.
    fn append(&mut self, later: MadePairs) {
        for (pair, offsets) in later.groups {
            match self.index.get(&pair) {
                Some(&at) => self.groups[at].1.extend(offsets),
                None => {
                    self.index.insert(pair, self.groups.len());
                    self.groups.push((pair, offsets));
                }
            }
        }
    }
}

/// One merge, as the word rewrite needs it.
struct Rewrite<'a> {
    left: u32,
    right: u32,
    new_id: u32,
    lens: &'a [u32],
    max_token_length: usize,
}

impl Rewrite<'_> {
    #[inline]
    fn counted(&self, a: u32, b: u32) -> bool {
        (self.lens[a as usize] as usize) + (self.lens[b as usize] as usize) < self.max_token_length
    }

    /// Merges every `left right` in `word` (header included; left to right, no overlaps),
    /// adding the count changes of the neighbouring pairs to `deltas` and the pairs made, with
    /// the word's offset, to `made`.
    #[inline]
    fn apply(
        &self,
        word: &mut [u32],
        offset: u32,
        deltas: &mut FxHashMap<u64, i64>,
        made: &mut MadePairs,
    ) {
        let len = word[0] as usize;
        let weight = (word[1] as u64 | (word[2] as u64) << 32) as i64;
        let syms = &mut word[HEADER..HEADER + len];
        // Words listed for a pair may no longer hold it; find the first match before writing.
        let Some(first) = syms
            .windows(2)
            .position(|w| w[0] == self.left && w[1] == self.right)
        else {
            return;
        };
        let mut add = |pair: u64, d: i64| *deltas.entry(pair).or_insert(0) += d;
        let (mut read, mut write) = (first, first);
        while read < len {
            if syms[read] == self.left && read + 1 < len && syms[read + 1] == self.right {
                if write > 0 {
                    // The symbol before, already rewritten if it was merged just now.
                    let prev = syms[write - 1];
                    add(pack(prev, self.left), -weight);
                    if self.counted(prev, self.new_id) {
                        add(pack(prev, self.new_id), weight);
                        made.add(pack(prev, self.new_id), offset);
                    }
                }
                syms[write] = self.new_id;
                if read + 2 < len {
                    // The symbol after, not yet looked at.
                    let next = syms[read + 2];
                    add(pack(self.right, next), -weight);
                    if self.counted(self.new_id, next) {
                        add(pack(self.new_id, next), weight);
                        made.add(pack(self.new_id, next), offset);
                    }
                }
                read += 2;
            } else {
                syms[write] = syms[read];
                read += 1;
            }
            write += 1;
        }
        word[0] = write as u32;
    }
}

/// What one thread's share of a parallel rewrite changed: pair count deltas, pairs made.
type ChunkChanges = (FxHashMap<u64, i64>, MadePairs);

/// Lets rayon threads rewrite different words of [`Words`] at the same time.
struct SharedSymbols {
    ptr: *mut u32,
    len: usize,
}

// SAFETY: the pointer is only turned into slices of distinct words (see `word`), so no two
// threads ever touch the same memory.
unsafe impl Sync for SharedSymbols {}

impl SharedSymbols {
    /// The word at `offset`, header included.
    ///
    /// # Safety
    /// `offset` must be a word's offset, and no two slices for the same word may be alive at
    /// once. Candidates list strictly increasing offsets, so handing each listed word to one
    /// thread upholds this.
    #[allow(clippy::mut_from_ref)]
    unsafe fn word(&self, offset: u32) -> &mut [u32] {
        let start = offset as usize;
        let len = HEADER + *self.ptr.add(start) as usize;
        assert!(
            start + len <= self.len,
            "word offsets stay inside the vector"
        );
        std::slice::from_raw_parts_mut(self.ptr.add(start), len)
    }
}

impl Words {
    fn word_mut(&mut self, offset: u32) -> &mut [u32] {
        let start = offset as usize;
        let len = HEADER + self.symbols[start] as usize;
        &mut self.symbols[start..start + len]
    }

    /// Applies `rewrite` to the `listed` words (strictly increasing offsets), adding the pair
    /// count changes to `deltas` and the pairs made to `made`.
    fn rewrite(
        &mut self,
        listed: &[u32],
        rewrite: &Rewrite,
        deltas: &mut FxHashMap<u64, i64>,
        made: &mut MadePairs,
    ) {
        debug_assert!(
            listed.windows(2).all(|w| w[0] < w[1]),
            "candidate word lists are strictly increasing"
        );
        let threads = rayon::current_num_threads();
        if listed.len() < PARALLEL_MIN_WORDS || threads == 1 {
            for (i, &w) in listed.iter().enumerate() {
                if let Some(&ahead) = listed.get(i + PREFETCH_AHEAD) {
                    prefetch(self.symbols[ahead as usize..].as_ptr());
                }
                rewrite.apply(self.word_mut(w), w, deltas, made);
            }
            return;
        }
        let shared = SharedSymbols {
            ptr: self.symbols.as_mut_ptr(),
            len: self.symbols.len(),
        };
        let chunk = listed.len().div_ceil(threads * 4);
        let parts: Vec<ChunkChanges> = listed
            .par_chunks(chunk)
            .map(|ws| {
                let (mut deltas, mut made) = (FxHashMap::default(), MadePairs::default());
                for (i, &w) in ws.iter().enumerate() {
                    if let Some(&ahead) = ws.get(i + PREFETCH_AHEAD) {
                        prefetch(shared.ptr.wrapping_add(ahead as usize));
                    }
                    // SAFETY: `listed` holds strictly increasing word offsets, so every word
                    // is handed out once.
                    let word = unsafe { shared.word(w) };
                    rewrite.apply(word, w, &mut deltas, &mut made);
                }
                (deltas, made)
            })
            .collect();
        for (part_deltas, part_made) in parts {
            for (pair, d) in part_deltas {
                *deltas.entry(pair).or_insert(0) += d;
            }
            made.append(part_made);
        }
    }
}

/// The state the merge loop starts from: words, pair counts, and every byte pair queued
/// (HF's `count_pairs`).
struct Start {
    words: Words,
    pair_counts: FxHashMap<u64, i64>,
    queue: CandidateHeap,
    lists: WordLists,
}

fn initial_state(pieces: &PieceCounter, byte_ids: &[u32; 256]) -> Start {
    let total = pieces.key_bytes() + HEADER * pieces.len();
    // Word offsets are u32; 4 billion symbols would be 16 GB of words, far beyond any corpus
    // whose distinct pre-tokens fit in memory to begin with.
    assert!(
        total < u32::MAX as usize,
        "distinct pre-tokens too large to train on (over 4 billion bytes)"
    );
    let mut words = Words {
        symbols: Vec::with_capacity(total),
    };
    // Every initial pair is two bytes, so dense tables indexed by `b0 << 8 | b1` replace maps.
    let mut totals = vec![0i64; 1 << 16];
    let mut word_counts = vec![0u32; 1 << 16];
    let mut last_word = vec![u32::MAX; 1 << 16];
    for (piece, count) in pieces.iter() {
        let offset = words.symbols.len() as u32;
        words
            .symbols
            .extend([piece.len() as u32, count as u32, (count >> 32) as u32]);
        words
            .symbols
            .extend(piece.iter().map(|&b| byte_ids[b as usize]));
        for pair in piece.windows(2) {
            let i = (pair[0] as usize) << 8 | pair[1] as usize;
            totals[i] += count as i64;
            if last_word[i] != offset {
                last_word[i] = offset;
                word_counts[i] += 1;
            }
        }
    }
    let mut listed: Vec<Vec<u32>> = word_counts
        .iter()
        .map(|&c| Vec::with_capacity(c as usize))
        .collect();
    last_word.fill(u32::MAX);
    let mut offset = 0u32;
    for (piece, _) in pieces.iter() {
        for pair in piece.windows(2) {
            let i = (pair[0] as usize) << 8 | pair[1] as usize;
            if last_word[i] != offset {
                last_word[i] = offset;
                listed[i].push(offset);
            }
        }
        offset += (HEADER + piece.len()) as u32;
    }
    let mut start = Start {
        words,
        pair_counts: FxHashMap::default(),
        queue: CandidateHeap::default(),
        lists: WordLists::default(),
    };
    for (i, words_of_pair) in listed.into_iter().enumerate() {
        if totals[i] > 0 {
            let pair = pack(byte_ids[i >> 8], byte_ids[i & 0xff]);
            start.pair_counts.insert(pair, totals[i]);
            let list = start.lists.add(words_of_pair);
            start.queue.push(Candidate {
                count: totals[i] as u64,
                pair,
                seq: i as u32,
                list,
            });
        }
    }
    start
}

/// Learns merges from `pieces` (consumed: its memory is given back once the words are built),
/// adding the new tokens to `tokens`. Returns every merge in the order made, repeats included.
pub(crate) fn learn_merges(
    pieces: PieceCounter,
    tokens: &mut TokenTable,
    limits: &MergeLimits,
    progress: &indicatif::ProgressBar,
) -> Vec<(u32, u32)> {
    let Start {
        mut words,
        mut pair_counts,
        mut queue,
        mut lists,
    } = initial_state(&pieces, &tokens.byte_ids());
    drop(pieces);
    let mut next_seq = 1u32 << 16;
    let mut merges = Vec::new();
    let mut made = MadePairs::default();
    // One merge's count changes, gathered in a small map that stays in cache before they
    // reach `pair_counts`, whose millions of pairs do not: a merge changes a few pairs many
    // times each.
    let mut deltas: FxHashMap<u64, i64> = FxHashMap::default();
    let start_len = tokens.len();
    loop {
        if tokens.len() >= limits.vocab_size {
            break;
        }
        let Some(mut top) = queue.pop() else { break };
        // As HF: a negative count would wrap to a huge one; queued pairs never go negative.
        let current = pair_counts[&top.pair] as u64;
        if top.count != current {
            top.count = current;
            queue.push(top);
            continue;
        }
        if top.count < 1 || limits.min_frequency > top.count {
            break;
        }
        let (left, right) = unpack(top.pair);
        let new_id = tokens.concat(left, right);
        merges.push((left, right));
        let rewrite = Rewrite {
            left,
            right,
            new_id,
            lens: &tokens.lens,
            max_token_length: limits.max_token_length,
        };
        let listed = lists.take(top.list);
        words.rewrite(&listed, &rewrite, &mut deltas, &mut made);
        drop(listed);
        // Apply the changes, leaving each changed pair's new count in `deltas` for the
        // lookups below (every made pair was changed).
        for (pair, change) in deltas.iter_mut() {
            let count = pair_counts.entry(*pair).or_insert(0);
            *count += *change;
            *change = *count;
        }
        // Queue each made pair once, with the words where it was made and its count after
        // all of this merge's changes.
        for (pair, offsets) in made.groups.drain(..) {
            let count = deltas[&pair];
            if count > 0 {
                let list = lists.add(offsets);
                queue.push(Candidate {
                    count: count as u64,
                    pair,
                    seq: next_seq,
                    list,
                });
                next_seq = next_seq.wrapping_add(1);
            }
        }
        made.index.clear();
        deltas.clear();
        progress.set_position((tokens.len() - start_len) as u64);
    }
    merges
}
