//! N-best segmentations and subword-regularization sampling over a Unigram lattice, as
//! sentencepiece's `NBestEncode` and `SampleEncode` compute them.
//!
//! The lattice holds a node for every piece that matches at every character position (plus
//! one unknown node where no one-character piece does), in sentencepiece's insertion order.
//! - [`UnigramModel::nbest`]: Viterbi for the exact best score to the start of the text, then
//!   A* from the end, which pops complete paths in order of score. Ties between equal scores
//!   are decided by the order of sentencepiece's `std::priority_queue`, so the agenda here is
//!   a binary heap that moves entries exactly as libstdc++'s `push_heap`/`pop_heap` do, and it
//!   is shrunk when sentencepiece's is (10,000 entries, down to the best `min(512, 10n)`).
//!   Scores are `f32` sums, as there.
//! - [`UnigramModel::sample`]: with `nbest_size < 0`, forward filtering (log-sum-exp of
//!   `alpha * score` over every path to each node) then backward sampling, which draws a
//!   segmentation with probability proportional to `exp(alpha * its score)` over the whole
//!   lattice; with `nbest_size > 1`, one of the n best drawn the same way. The random numbers
//!   are ours ([`SplitMix64`]), so draws are reproducible from a seed but not equal to
//!   sentencepiece's; the distribution is the same (`f64` here, where sentencepiece sums in
//!   `f32`).
//!
//! A text is given as [`Segment`]s: stretches of text (nodes never cross from one to the next,
//! as HF's pre-tokenized words) and fixed tokens (added tokens), so the same code serves a
//! whole sentencepiece text and a pre-tokenized one.
//!
//! (Over 500 lines: 113 of them are its unit tests; the rest is one lattice and its two searches,
//! the A* n-best with an agenda that moves entries as libstdc++'s heap does, and the
//! forward-filtering sampler.)

use super::model::{user_defined_score, UnigramModel};
use super::trie::NONE;
use crate::models::pieces::{PieceKind, Semantics};
use crate::normalizers::sentencepiece::utf8_len;
use crate::util::SplitMix64;

/// Part of a text to segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Segment<'a> {
    /// Normalized text the model segments.
    Text(&'a str),
    /// A token that is there whatever the segmentation (an added token).
    Token(u32),
}

/// sentencepiece's bounds on the A* search (`kMaxAgendaSize`, `kMinAgendaSize`,
/// `kMaxHypothesisSize`, `kMaxAllocatorSize`, `kMaxShrinkCount`): past them the agenda is cut
/// to its best entries, and past the last ones the search gives up and returns the best path
/// alone.
const MAX_AGENDA: usize = 10_000;
const MIN_AGENDA: usize = 512;
const MAX_HYPOTHESES: usize = 100_000;
const MAX_ALLOCATED: usize = 500_000;
const MAX_SHRINKS: usize = 10;

#[derive(Clone, Copy, Debug)]
struct Node {
    /// Character position where the node starts.
    pos: u32,
    /// Length in characters.
    length: u32,
    id: u32,
    score: f32,
    backtrace: f32,
}

const BOS: u32 = 0;
const EOS: u32 = 1;

/// Nodes with their begin and end lists (sentencepiece's `begin_nodes_` / `end_nodes_`, in its
/// insertion order), flattened.
struct Lattice {
    nodes: Vec<Node>,
    /// Byte offset of each character position (`chars + 1` entries).
    offsets: Vec<usize>,
    begin: Vec<u32>,
    begin_at: Vec<u32>,
    end: Vec<u32>,
    end_at: Vec<u32>,
}

impl Lattice {
    fn begin_nodes(&self, pos: u32) -> &[u32] {
        &self.begin[self.begin_at[pos as usize] as usize..self.begin_at[pos as usize + 1] as usize]
    }

    fn end_nodes(&self, pos: u32) -> &[u32] {
        &self.end[self.end_at[pos as usize] as usize..self.end_at[pos as usize + 1] as usize]
    }

    fn len(&self) -> u32 {
        (self.offsets.len() - 1) as u32
    }

    /// sentencepiece's `Viterbi`: the best score from the start to each node's start (the
    /// node's own score included), summed in `f32`; returns the best path.
    fn viterbi(&mut self) -> Vec<u32> {
        let len = self.len();
        let mut prev = vec![NONE; self.nodes.len()];
        for pos in 0..=len {
            for k in self.begin_at[pos as usize]..self.begin_at[pos as usize + 1] {
                let r = self.begin[k as usize];
                let mut best: Option<(u32, f32)> = None;
                for &l in self.end_nodes(pos) {
                    let score = self.nodes[l as usize].backtrace + self.nodes[r as usize].score;
                    if best.is_none_or(|(_, b)| score > b) {
                        best = Some((l, score));
                    }
                }
                if let Some((l, score)) = best {
                    prev[r as usize] = l;
                    self.nodes[r as usize].backtrace = score;
                }
            }
        }
        let mut path = Vec::new();
        let mut node = prev[EOS as usize];
        while node != BOS && node != NONE {
            path.push(node);
            node = prev[node as usize];
        }
        path.reverse();
        path
    }
}

#[derive(Clone, Copy, Debug)]
struct Hyp {
    node: u32,
    next: u32,
    fx: f32,
    gx: f32,
}

/// `std::priority_queue<Hyp*, vector, fx-less>` as libstdc++ lays it out.
struct Agenda {
    heap: Vec<u32>,
}

impl Agenda {
    #[inline]
    fn less(hyps: &[Hyp], a: u32, b: u32) -> bool {
        hyps[a as usize].fx < hyps[b as usize].fx
    }

    /// `__push_heap`: moves `value` up from `hole` towards `top`.
    fn sift_up(&mut self, hyps: &[Hyp], mut hole: usize, top: usize, value: u32) {
        while hole > top {
            let parent = (hole - 1) / 2;
            if !Self::less(hyps, self.heap[parent], value) {
                break;
            }
            self.heap[hole] = self.heap[parent];
            hole = parent;
        }
        self.heap[hole] = value;
    }

    fn push(&mut self, hyps: &[Hyp], h: u32) {
        self.heap.push(h);
        let hole = self.heap.len() - 1;
        self.sift_up(hyps, hole, 0, h);
    }

    /// `pop_heap` then `pop_back`.
    fn pop(&mut self, hyps: &[Hyp]) -> Option<u32> {
        let len = self.heap.len();
        if len == 0 {
            return None;
        }
        let top = self.heap[0];
        if len > 1 {
            let value = self.heap[len - 1];
            self.heap[len - 1] = top;
            // `__adjust_heap` over the first len - 1 entries.
            let n = len - 1;
            let mut hole = 0usize;
            let mut child = 0usize;
            while child < (n - 1) / 2 {
                child = 2 * (child + 1);
                if Self::less(hyps, self.heap[child], self.heap[child - 1]) {
                    child -= 1;
                }
                self.heap[hole] = self.heap[child];
                hole = child;
            }
            if n % 2 == 0 && child == (n - 2) / 2 {
                child = 2 * (child + 1);
                self.heap[hole] = self.heap[child - 1];
                hole = child - 1;
            }
            self.sift_up(hyps, hole, 0, value);
        }
        self.heap.pop();
        Some(top)
    }

    fn len(&self) -> usize {
        self.heap.len()
    }
}

impl UnigramModel {
    /// The node score sentencepiece's `PopulateNodes` gives a piece of `length` characters.
    fn lattice_score(&self, id: u32, length: u32) -> f32 {
        match (self.semantics(), self.piece_kind(id)) {
            (Semantics::SentencePiece, Some(PieceKind::UserDefined)) => {
                user_defined_score(length as usize)
            }
            _ => self.pieces()[id as usize].score as f32,
        }
    }

    /// sentencepiece's `PopulateNodes` over the segments.
    fn lattice(&self, segments: &[Segment<'_>]) -> Lattice {
        // Character positions of the whole text, segment by segment; a token is one position.
        let mut offsets = Vec::new();
        let mut bytes_before = 0usize;
        for seg in segments {
            match seg {
                Segment::Text(t) => {
                    let b = t.as_bytes();
                    let mut i = 0;
                    while i < b.len() {
                        offsets.push(bytes_before + i);
                        i += utf8_len(b[i]).min(b.len() - i);
                    }
                    bytes_before += b.len();
                }
                Segment::Token(_) => offsets.push(bytes_before),
            }
        }
        offsets.push(bytes_before);
        let len = (offsets.len() - 1) as u32;
        let edge = |pos| Node {
            pos,
            length: 0,
            id: NONE,
            score: 0.0,
            backtrace: 0.0,
        };
        let mut nodes = vec![edge(0), edge(len)];
        let trie = self.trie();
        let mut pos = 0u32;
        for seg in segments {
            match *seg {
                Segment::Token(id) => {
                    nodes.push(Node {
                        pos,
                        length: 1,
                        id,
                        score: 0.0,
                        backtrace: 0.0,
                    });
                    pos += 1;
                }
                Segment::Text(t) => {
                    let b = t.as_bytes();
                    let mut at = 0usize;
                    while at < b.len() {
                        let (mut state, mut base) = trie.root();
                        let mut single = false;
                        let mut chars = 0u32;
                        let mut i = at;
                        while i < b.len() {
                            let Some((s, bs, ends_piece)) = trie.step(state, base, b[i]) else {
                                break;
                            };
                            (state, base) = (s, bs);
                            chars += u32::from(b[i] & 0xc0 != 0x80);
                            i += 1;
                            // A piece ends where the next character starts.
                            if !ends_piece || b.get(i).is_some_and(|&c| c & 0xc0 == 0x80) {
                                continue;
                            }
                            let id = trie.piece(state).0;
                            nodes.push(Node {
                                pos,
                                length: chars,
                                id,
                                score: self.lattice_score(id, chars),
                                backtrace: 0.0,
                            });
                            single |= chars == 1;
                        }
                        if !single {
                            nodes.push(Node {
                                pos,
                                length: 1,
                                id: self.unk_or_none(),
                                score: self.unk_score(),
                                backtrace: 0.0,
                            });
                        }
                        at += utf8_len(b[at]).min(b.len() - at);
                        pos += 1;
                    }
                }
            }
        }
        // begin lists: nodes were inserted by position, so each is a contiguous run; EOS
        // begins at `len` (and is the only node there).
        let count = len as usize + 1;
        let mut begin_at = vec![0u32; count + 1];
        let mut end_at = vec![0u32; count + 1];
        for (i, n) in nodes.iter().enumerate() {
            if i as u32 != BOS {
                begin_at[n.pos as usize + 1] += 1;
            }
            if i as u32 != EOS {
                end_at[(n.pos + n.length) as usize + 1] += 1;
            }
        }
        for p in 0..count {
            begin_at[p + 1] += begin_at[p];
            end_at[p + 1] += end_at[p];
        }
        let mut begin = vec![0u32; begin_at[count] as usize];
        let mut end = vec![0u32; end_at[count] as usize];
        let mut bfill = begin_at.clone();
        let mut efill = end_at.clone();
        for (i, n) in nodes.iter().enumerate() {
            let i = i as u32;
            if i != BOS {
                begin[bfill[n.pos as usize] as usize] = i;
                bfill[n.pos as usize] += 1;
            }
            if i != EOS {
                let e = (n.pos + n.length) as usize;
                end[efill[e] as usize] = i;
                efill[e] += 1;
            }
        }
        Lattice {
            nodes,
            offsets,
            begin,
            begin_at,
            end,
            end_at,
        }
    }

    /// Appends the ids of a path of lattice nodes: per text segment, unknown runs fused or
    /// spelled in bytes (sentencepiece's `PopulateSentencePieceText`).
    fn emit_path(
        &self,
        lattice: &Lattice,
        segments: &[Segment<'_>],
        path: &[u32],
        out: &mut Vec<u32>,
    ) {
        // Byte offsets restart with each segment: map a node to (segment, local start).
        let mut seg_start = Vec::with_capacity(segments.len());
        let mut acc = 0usize;
        for seg in segments {
            seg_start.push(acc);
            if let Segment::Text(t) = seg {
                acc += t.len();
            }
        }
        let mut k = 0usize;
        let mut spans: Vec<(usize, u32)> = Vec::new();
        for (s, seg) in segments.iter().enumerate() {
            match *seg {
                Segment::Token(id) => {
                    out.push(id);
                    k += 1;
                }
                Segment::Text(t) => {
                    spans.clear();
                    let end = seg_start[s] + t.len();
                    while k < path.len() {
                        let node = lattice.nodes[path[k] as usize];
                        let start = lattice.offsets[node.pos as usize];
                        if start >= end {
                            break;
                        }
                        spans.push((start - seg_start[s], node.id));
                        k += 1;
                    }
                    self.emit(t.as_bytes(), spans.iter().copied(), out);
                }
            }
        }
    }

    /// The `n` best segmentations with their scores, best first (sentencepiece's
    /// `NBestEncode`; `n` is clamped to 1..=1024, and `n = 1` is the plain encoding with
    /// score 0, as there).
    pub fn nbest(&self, segments: &[Segment<'_>], n: usize) -> Vec<(Vec<u32>, f32)> {
        let n = n.clamp(1, 1024);
        let is_empty = segments
            .iter()
            .all(|s| matches!(s, Segment::Text(t) if t.is_empty()));
        if is_empty {
            return vec![(Vec::new(), 0.0)];
        }
        if n == 1 {
            let mut ids = Vec::new();
            for seg in segments {
                match *seg {
                    Segment::Text(t) => self.encode_into(t, &mut ids),
                    Segment::Token(id) => ids.push(id),
                }
            }
            return vec![(ids, 0.0)];
        }
        let mut lattice = self.lattice(segments);
        let best_path = lattice.viterbi();
        let best_only = |lattice: &Lattice| {
            let mut ids = Vec::new();
            self.emit_path(lattice, segments, &best_path, &mut ids);
            vec![(ids, lattice.nodes[EOS as usize].backtrace)]
        };
        let mut hyps = vec![Hyp {
            node: EOS,
            next: NONE,
            fx: lattice.nodes[EOS as usize].backtrace,
            gx: 0.0,
        }];
        let mut agenda = Agenda { heap: Vec::new() };
        agenda.push(&hyps, 0);
        let min_agenda = MIN_AGENDA.min(n * 10);
        let mut max_hypotheses = MAX_HYPOTHESES;
        let mut total = 1usize;
        let mut shrinks = 0;
        let mut results = Vec::new();
        while let Some(top) = agenda.pop(&hyps) {
            let h = hyps[top as usize];
            if h.node == BOS {
                let mut path = Vec::new();
                let mut k = h.next;
                while hyps[k as usize].next != NONE {
                    path.push(hyps[k as usize].node);
                    k = hyps[k as usize].next;
                }
                let mut ids = Vec::new();
                self.emit_path(&lattice, segments, &path, &mut ids);
                results.push((ids, h.fx));
                if results.len() == n {
                    break;
                }
                continue;
            }
            let ends = lattice.end_nodes(lattice.nodes[h.node as usize].pos);
            for &l in ends {
                let node = lattice.nodes[l as usize];
                hyps.push(Hyp {
                    node: l,
                    next: top,
                    gx: node.score + h.gx,
                    fx: node.backtrace + h.gx,
                });
                let new = (hyps.len() - 1) as u32;
                agenda.push(&hyps, new);
            }
            total += ends.len();
            if total >= MAX_ALLOCATED || hyps.len() >= MAX_ALLOCATED {
                return best_only(&lattice);
            }
            if agenda.len() >= MAX_AGENDA
                || (agenda.len() > min_agenda && hyps.len() >= max_hypotheses)
            {
                if shrinks >= MAX_SHRINKS {
                    return best_only(&lattice);
                }
                shrinks += 1;
                let keep = agenda.len().min(min_agenda);
                let order: Vec<u32> = (0..keep).filter_map(|_| agenda.pop(&hyps)).collect();
                // The kept hypotheses and the ones on their paths, copied into a new arena
                // (sentencepiece's CloneHypAndDependents): the arena's size after a shrink
                // sets the next bound, so it must hold exactly these.
                let mut remap = rustc_hash::FxHashMap::default();
                let mut compact: Vec<Hyp> = Vec::new();
                for &t in &order {
                    let mut chain = Vec::new();
                    let mut k = t;
                    while k != NONE && !remap.contains_key(&k) {
                        chain.push(k);
                        k = hyps[k as usize].next;
                    }
                    for &c in chain.iter().rev() {
                        let mut hyp = hyps[c as usize];
                        if hyp.next != NONE {
                            hyp.next = remap[&hyp.next];
                        }
                        compact.push(hyp);
                        remap.insert(c, (compact.len() - 1) as u32);
                    }
                }
                hyps = compact;
                agenda = Agenda {
                    heap: Vec::with_capacity(keep),
                };
                for &t in &order {
                    agenda.push(&hyps, remap[&t]);
                }
                max_hypotheses = hyps.len() + MAX_HYPOTHESES;
            }
        }
        results
    }

    /// One segmentation drawn for subword regularization (sentencepiece's `SampleEncode`):
    /// `nbest_size < 0` samples the whole lattice, `nbest_size > 1` one of the n best, in both
    /// cases with probability proportional to `exp(alpha * score)`; `nbest_size` 0 or 1 is the
    /// plain encoding.
    pub fn sample(
        &self,
        segments: &[Segment<'_>],
        alpha: f32,
        nbest_size: i32,
        rng: &mut SplitMix64,
    ) -> Vec<u32> {
        if nbest_size == 0 || nbest_size == 1 {
            return self.nbest(segments, 1).swap_remove(0).0;
        }
        if nbest_size > 1 {
            let nbests = self.nbest(segments, nbest_size as usize);
            let logits: Vec<f64> = nbests
                .iter()
                .map(|(_, score)| f64::from(alpha * score))
                .collect();
            let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = logits.iter().map(|l| (l - max).exp()).collect();
            let i = rng.pick(&weights);
            return nbests
                .into_iter()
                .nth(i)
                .map(|(ids, _)| ids)
                .unwrap_or_default();
        }
        if segments
            .iter()
            .all(|s| matches!(s, Segment::Text(t) if t.is_empty()))
        {
            return Vec::new();
        }
        let lattice = self.lattice(segments);
        let theta = f64::from(alpha);
        // Forward filtering: log of the summed weight of every path from the start to each
        // node's start.
        let mut log_alpha = vec![0.0f64; lattice.nodes.len()];
        for pos in 0..=lattice.len() {
            for &r in lattice.begin_nodes(pos) {
                log_alpha[r as usize] = log_sum_exp(lattice.end_nodes(pos).iter().map(|&l| {
                    theta * f64::from(lattice.nodes[l as usize].score) + log_alpha[l as usize]
                }));
            }
        }
        // Backward sampling from the end.
        let mut path = Vec::new();
        let mut node = EOS;
        let mut weights = Vec::new();
        loop {
            let z = log_alpha[node as usize];
            let ends = lattice.end_nodes(lattice.nodes[node as usize].pos);
            weights.clear();
            weights.extend(ends.iter().map(|&l| {
                (log_alpha[l as usize] + theta * f64::from(lattice.nodes[l as usize].score) - z)
                    .exp()
            }));
            node = ends[rng.pick(&weights)];
            if node == BOS {
                break;
            }
            path.push(node);
        }
        path.reverse();
        let mut ids = Vec::new();
        self.emit_path(&lattice, segments, &path, &mut ids);
        ids
    }
}

fn log_sum_exp(values: impl Iterator<Item = f64> + Clone) -> f64 {
    let max = values.clone().fold(f64::NEG_INFINITY, f64::max);
    if max == f64::NEG_INFINITY {
        return max;
    }
    max + values.map(|v| (v - max).exp()).sum::<f64>().ln()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::pieces::Piece;

    fn model() -> UnigramModel {
        let pieces = [
            ("<unk>", 0.0, PieceKind::Unknown),
            ("a", -1.0, PieceKind::Normal),
            ("b", -1.5, PieceKind::Normal),
            ("ab", -2.0, PieceKind::Normal),
            ("abc", -4.0, PieceKind::Normal),
            ("c", -2.25, PieceKind::Normal),
            ("bc", -3.0, PieceKind::Normal),
        ];
        UnigramModel::new(
            pieces
                .iter()
                .map(|&(t, s, k)| Piece::new(t, s, k))
                .collect(),
            None,
            false,
            Semantics::SentencePiece,
            "test",
        )
        .unwrap()
    }

    /// Every segmentation of `text` with its score (no unknowns in these texts).
    fn all_segmentations(m: &UnigramModel, text: &str) -> Vec<(Vec<u32>, f32)> {
        if text.is_empty() {
            return vec![(vec![], 0.0)];
        }
        let mut out = Vec::new();
        for end in 1..=text.len() {
            if let Some(id) = m.token_to_id_for_test(&text[..end]) {
                for (mut rest, s) in all_segmentations(m, &text[end..]) {
                    rest.insert(0, id);
                    out.push((rest, s + m.pieces()[id as usize].score as f32));
                }
            }
        }
        out
    }

    impl UnigramModel {
        fn token_to_id_for_test(&self, t: &str) -> Option<u32> {
            self.trie().get(t.as_bytes())
        }
    }

    #[test]
    fn nbest_lists_segmentations_in_score_order() {
        let m = model();
        for text in ["abc", "abcab", "cabcba"] {
            let mut all = all_segmentations(&m, text);
            all.sort_by(|a, b| b.1.total_cmp(&a.1));
            let got = m.nbest(&[Segment::Text(text)], 1000);
            assert_eq!(got.len(), all.len(), "{text}");
            let got_scores: Vec<f32> = got.iter().map(|g| g.1).collect();
            let want_scores: Vec<f32> = all.iter().map(|g| g.1).collect();
            assert_eq!(got_scores, want_scores, "{text}");
            let mut got_paths: Vec<Vec<u32>> = got.into_iter().map(|g| g.0).collect();
            let mut want_paths: Vec<Vec<u32>> = all.into_iter().map(|g| g.0).collect();
            got_paths.sort();
            want_paths.sort();
            assert_eq!(got_paths, want_paths, "{text}");
        }
        assert_eq!(m.nbest(&[Segment::Text("")], 5), vec![(vec![], 0.0)]);
    }

    #[test]
    fn tokens_and_segment_boundaries_hold_in_the_lattice() {
        let m = model();
        let segs = [Segment::Text("ab"), Segment::Token(99), Segment::Text("c")];
        for (ids, _) in m.nbest(&segs, 10) {
            assert!(ids.windows(1).any(|w| w[0] == 99));
            assert_eq!(ids.last(), Some(&5));
        }
        let mut rng = SplitMix64::new(7);
        for _ in 0..50 {
            let ids = m.sample(&segs, 0.5, -1, &mut rng);
            assert_eq!(ids[ids.len() - 2..], [99, 5]);
        }
    }

    #[test]
    fn the_heap_pops_in_libstdcpp_order() {
        // Equal priorities leave the order to the heap's moves. The expected order is what
        // std::priority_queue (libstdc++, g++ 12) printed for the same pushes and pops.
        let fx = [1.0, 1.0, 2.0, 1.0, 2.0, 1.0, 1.0, 3.0, 1.0, 2.0, 1.0, 1.0];
        let hyps: Vec<Hyp> = fx
            .iter()
            .enumerate()
            .map(|(i, &fx)| Hyp {
                node: i as u32,
                next: NONE,
                fx,
                gx: 0.0,
            })
            .collect();
        let mut agenda = Agenda { heap: Vec::new() };
        for i in 0..7 {
            agenda.push(&hyps, i);
        }
        let mut order = vec![agenda.pop(&hyps).unwrap()];
        for i in 7..12 {
            agenda.push(&hyps, i);
        }
        order.extend(std::iter::from_fn(|| agenda.pop(&hyps)));
        assert_eq!(order, [2, 7, 4, 9, 0, 11, 3, 5, 8, 10, 6, 1]);
    }
}
