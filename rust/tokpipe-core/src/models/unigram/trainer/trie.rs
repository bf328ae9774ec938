//! A read-only trie of pieces over character ids, for building lattices: from a position of a
//! word, every piece that starts there, shortest first.
//!
//! The root's children sit in a table indexed by character id (one load for the first
//! character, which every lookup pays); a deeper node's children are a sorted run of
//! `(character, node)` edges, searched linearly when short and by bisection when long. Nodes
//! with many children (common prefixes, visited most) also get a table indexed by character,
//! breadth-first while a memory budget lasts. Nodes are laid out breadth-first so that a node's
//! edges are contiguous. Rebuilt whenever the piece set changes (once per EM step), from pieces
//! sorted by their characters.
//
// Why not the encoder's double array (`unigram/trie.rs`): the two serve different walks. The
// encoder's is built once per model and walked over UTF-8 bytes of arbitrary text, so it is
// tuned for byte transitions and carries scores; this one is rebuilt every EM step (dozens of
// times, over up to a million seed pieces) and walked over character ids, where the unknown
// character is an id of its own and a word's characters are already numbered. Building a
// double array is the slow part of the encoder's (placing each node's children), which EM
// would pay on every step, and walking bytes would triple the steps per character on
// Japanese and Chinese text. Both answer "which pieces start here"; the shapes differ because
// the keys (bytes vs character ids) and the rebuild rate differ.

const NONE: u32 = u32::MAX;

/// Edge runs at most this long are scanned linearly: faster than bisection when short.
const LINEAR_SCAN: usize = 8;

/// Nodes with at least this many children get a table indexed by character...
const DENSE_MIN_CHILDREN: usize = 16;
/// ...while all tables together stay under this many entries (16 MiB).
const DENSE_BUDGET: usize = 4 << 20;

#[derive(Debug)]
pub(crate) struct PieceTrie {
    /// Node of each first character, or NONE.
    root: Vec<u32>,
    /// Piece id ending at each node, or NONE. Node 0 is the root.
    value: Vec<u32>,
    /// Node `n`'s edges are `edge_char/edge_node[edge_start[n]..edge_start[n + 1]]`.
    edge_start: Vec<u32>,
    edge_char: Vec<u32>,
    edge_node: Vec<u32>,
    /// Per node, the start of its table in `dense` (`alphabet` entries), or NONE.
    dense_start: Vec<u32>,
    dense: Vec<u32>,
}

impl PieceTrie {
    /// A trie of `pieces` (distinct, non-empty), whose characters are below `alphabet`; piece
    /// `i` gets the value `i`.
    pub(crate) fn new<'a>(
        alphabet: usize,
        pieces: impl Fn(usize) -> &'a [u32],
        count: usize,
    ) -> Self {
        let mut order: Vec<u32> = (0..count as u32).collect();
        order.sort_unstable_by(|&a, &b| pieces(a as usize).cmp(pieces(b as usize)));
        let mut trie = PieceTrie {
            root: vec![NONE; alphabet],
            value: vec![NONE],
            edge_start: vec![0],
            edge_char: Vec::new(),
            edge_node: Vec::new(),
            dense_start: Vec::new(),
            dense: Vec::new(),
        };
        // Breadth first: (node, run of `order` sharing the node's prefix, prefix length).
        let mut queue = std::collections::VecDeque::new();
        for (c, lo, hi) in groups(&order, 0, order.len(), 0, &pieces) {
            let node = trie.new_node();
            trie.root[c as usize] = node;
            queue.push_back((node, lo, hi, 1usize));
        }
        // The root has no edges: its run is empty.
        trie.edge_start.push(0);
        while let Some((node, mut lo, hi, depth)) = queue.pop_front() {
            debug_assert_eq!(trie.edge_start.len(), node as usize + 1);
            // The shortest piece of the run sorts first; it ends here if it is this long.
            if pieces(order[lo] as usize).len() == depth {
                trie.value[node as usize] = order[lo];
                lo += 1;
            }
            for (c, glo, ghi) in groups(&order, lo, hi, depth, &pieces) {
                let child = trie.new_node();
                trie.edge_char.push(c);
                trie.edge_node.push(child);
                queue.push_back((child, glo, ghi, depth + 1));
            }
            trie.edge_start.push(trie.edge_char.len() as u32);
        }
        trie.dense_start = vec![NONE; trie.value.len()];
        for node in 1..trie.value.len() {
            let (lo, hi) = (
                trie.edge_start[node] as usize,
                trie.edge_start[node + 1] as usize,
            );
            if hi - lo < DENSE_MIN_CHILDREN || trie.dense.len() + alphabet > DENSE_BUDGET {
                continue;
            }
            let start = trie.dense.len();
            trie.dense_start[node] = start as u32;
            trie.dense.resize(start + alphabet, NONE);
            for k in lo..hi {
                trie.dense[start + trie.edge_char[k] as usize] = trie.edge_node[k];
            }
        }
        trie
    }

    fn new_node(&mut self) -> u32 {
        self.value.push(NONE);
        (self.value.len() - 1) as u32
    }

    /// Calls `f(length, piece)` for every piece that is a prefix of `text`, shortest first.
    #[inline]
    pub(crate) fn prefixes(&self, text: &[u32], mut f: impl FnMut(usize, u32)) {
        let Some(&first) = text.first() else { return };
        let Some(&(mut node)) = self.root.get(first as usize) else {
            return;
        };
        let mut len = 1;
        while node != NONE {
            let value = self.value[node as usize];
            if value != NONE {
                f(len, value);
            }
            let Some(&c) = text.get(len) else { return };
            node = self.child(node, c);
            len += 1;
        }
    }

    #[inline]
    fn child(&self, node: u32, c: u32) -> u32 {
        let dense = self.dense_start[node as usize];
        if dense != NONE {
            return self.dense[dense as usize + c as usize];
        }
        let lo = self.edge_start[node as usize] as usize;
        let hi = self.edge_start[node as usize + 1] as usize;
        let chars = &self.edge_char[lo..hi];
        let found = if chars.len() <= LINEAR_SCAN {
            chars.iter().position(|&x| x == c)
        } else {
            chars.binary_search(&c).ok()
        };
        found.map_or(NONE, |k| self.edge_node[lo + k])
    }
}

/// The runs of `order[lo..hi]` sharing the character at `depth` (all pieces there are longer
/// than `depth`): `(character, run start, run end)`.
fn groups<'a>(
    order: &[u32],
    lo: usize,
    hi: usize,
    depth: usize,
    pieces: &impl Fn(usize) -> &'a [u32],
) -> Vec<(u32, usize, usize)> {
    let mut out = Vec::new();
    let mut start = lo;
    while start < hi {
        let c = pieces(order[start] as usize)[depth];
        let mut end = start + 1;
        while end < hi && pieces(order[end] as usize)[depth] == c {
            end += 1;
        }
        out.push((c, start, end));
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::PieceTrie;

    #[test]
    fn finds_every_prefix_shortest_first() {
        // Many children under one node exercise the bisection path.
        let mut pieces: Vec<Vec<u32>> =
            vec![vec![1], vec![1, 2], vec![1, 2, 3], vec![2, 3], vec![4]];
        pieces.extend((10..40).map(|c| vec![1, c]));
        let trie = PieceTrie::new(64, |i| &pieces[i], pieces.len());
        for text in [
            vec![1, 2, 3, 4],
            vec![1, 25, 3],
            vec![2, 3],
            vec![2],
            vec![5],
            vec![],
        ] {
            let mut got = Vec::new();
            trie.prefixes(&text, |len, id| got.push((len, id)));
            let want: Vec<(usize, u32)> = (1..=text.len())
                .filter_map(|len| {
                    pieces
                        .iter()
                        .position(|p| p[..] == text[..len])
                        .map(|id| (len, id as u32))
                })
                .collect();
            assert_eq!(got, want, "{text:?}");
        }
    }
}
