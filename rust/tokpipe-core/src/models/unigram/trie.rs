//! A double-array trie over the pieces' UTF-8 bytes: the Viterbi walks it one byte at a time
//! from every start position, so a transition must be a couple of array reads, with no search
//! among a node's children (the root of a Japanese vocabulary has thousands) and no allocation.
//!
//! State `s` has child `t = base[s] + b` for byte `b` when `check[t] == s`. Building places
//! each node's children at the first base where all their slots are free, scanning from the
//! first mostly-free region (darts' heuristic), which keeps the array about as dense as the
//! trie is large.
//!
//! The transitions (base, check: 8 bytes a state) are apart from the pieces (id, score): a
//! walk's chain of dependent reads touches only the first, which for a vocabulary of a few
//! thousand pieces fits the L1 cache; the top bit of `check` says whether a piece ends at the
//! state, so the second is read only there.

/// No state, no piece: the same sentinel as the pieces' index uses for "no id".
pub(crate) use crate::models::pieces::NONE;

/// A state while building.
#[derive(Clone, Copy, Debug)]
struct Unit {
    base: u32,
    check: u32,
    /// The piece ending at this state, or [`NONE`].
    id: u32,
}

const EMPTY: Unit = Unit {
    base: 0,
    check: NONE,
    id: NONE,
};

/// `check`'s top bit: a piece ends at the state.
const PIECE: u32 = 1 << 31;

/// A state's transitions.
#[derive(Clone, Copy, Debug)]
struct Hot {
    base: u32,
    /// The parent state, with [`PIECE`] set when a piece ends here.
    check: u32,
}

#[derive(Clone, Debug)]
pub(crate) struct DoubleArray {
    hot: Vec<Hot>,
    /// By state: the piece ending there and its score (see [`DoubleArray::set_scores`]).
    pieces: Vec<(u32, f32)>,
}

impl DoubleArray {
    /// The trie of `keys` (bytes, id). A key given twice keeps its last id; an empty key is
    /// ignored.
    pub fn build(mut keys: Vec<(&[u8], u32)>) -> Self {
        // Stable sort: the last of equal keys is the last of its run.
        keys.sort_by(|a, b| a.0.cmp(b.0));
        let mut deduped: Vec<(&[u8], u32)> = Vec::with_capacity(keys.len());
        for (k, id) in keys {
            if k.is_empty() {
                continue;
            }
            match deduped.last_mut() {
                Some(last) if last.0 == k => last.1 = id,
                _ => deduped.push((k, id)),
            }
        }
        let keys = deduped;
        let mut units = vec![EMPTY; 512];
        let mut used = vec![false; 512];
        used[0] = true;
        let mut next_check_pos = 1usize;
        // (state, keys[lo..hi] share the state's prefix of `depth` bytes)
        let mut work = vec![(0u32, 0usize, keys.len(), 0usize)];
        let mut labels: Vec<(u8, usize, usize)> = Vec::new();
        while let Some((state, lo, hi, depth)) = work.pop() {
            let mut i = lo;
            if i < hi && keys[i].0.len() == depth {
                units[state as usize].id = keys[i].1;
                i += 1;
            }
            labels.clear();
            while i < hi {
                let b = keys[i].0[depth];
                let start = i;
                while i < hi && keys[i].0[depth] == b {
                    i += 1;
                }
                labels.push((b, start, i));
            }
            if labels.is_empty() {
                continue;
            }
            let first = labels[0].0 as usize;
            let mut pos = next_check_pos.max(first + 1);
            let mut occupied = 0usize;
            let mut first_free = None;
            let base = loop {
                if pos + 256 >= used.len() {
                    used.resize(pos + 512, false);
                    units.resize(pos + 512, EMPTY);
                }
                if used[pos] {
                    occupied += 1;
                    pos += 1;
                    continue;
                }
                first_free.get_or_insert(pos);
                let base = pos - first;
                if labels.iter().all(|&(b, _, _)| !used[base + b as usize]) {
                    break base;
                }
                pos += 1;
            };
            let scan_from = first_free.unwrap_or(pos);
            if occupied * 20 >= (pos - scan_from + 1) * 19 {
                next_check_pos = pos;
            } else {
                next_check_pos = scan_from;
            }
            units[state as usize].base = base as u32;
            for &(b, lo, hi) in &labels {
                let t = base + b as usize;
                used[t] = true;
                units[t].check = state;
                work.push((t as u32, lo, hi, depth + 1));
            }
        }
        // Every base + byte stays inside the array, so lookups need no length test.
        let max_base = units.iter().map(|u| u.base as usize).max().unwrap_or(0);
        let last_used = used.iter().rposition(|&u| u).unwrap_or(0);
        units.truncate((last_used + 1).max(max_base + 256));
        units.resize((last_used + 1).max(max_base + 256), EMPTY);
        DoubleArray {
            hot: units
                .iter()
                .map(|u| Hot {
                    base: u.base,
                    check: if u.check == NONE {
                        NONE
                    } else {
                        u.check | if u.id != NONE { PIECE } else { 0 }
                    },
                })
                .collect(),
            pieces: units.iter().map(|u| (u.id, f32::NEG_INFINITY)).collect(),
        }
    }

    /// A walk's start: the root state and its base.
    #[inline(always)]
    pub fn root(&self) -> (u32, u32) {
        (0, self.hot[0].base)
    }

    /// One step of a walk from `state` (whose base is `base`) on byte `b`: the child state, its
    /// base, and whether a piece ends there.
    #[inline(always)]
    pub fn step(&self, state: u32, base: u32, b: u8) -> Option<(u32, u32, bool)> {
        let t = base + u32::from(b);
        match self.hot.get(t as usize) {
            Some(h) if h.check & !PIECE == state => Some((t, h.base, h.check & PIECE != 0)),
            _ => None,
        }
    }

    /// The piece ending at `state` ([`NONE`] if none) and its score.
    #[inline(always)]
    pub fn piece(&self, state: u32) -> (u32, f32) {
        self.pieces[state as usize]
    }

    /// Stores `score(id)` beside every piece.
    pub fn set_scores(&mut self, score: impl Fn(u32) -> f32) {
        for p in &mut self.pieces {
            if p.0 != NONE {
                p.1 = score(p.0);
            }
        }
    }

    /// The id of exactly `key`.
    #[cfg(test)]
    pub fn get(&self, key: &[u8]) -> Option<u32> {
        let (mut s, mut base) = self.root();
        for &b in key {
            (s, base, _) = self.step(s, base, b)?;
        }
        Some(self.piece(s).0).filter(|&id| id != NONE)
    }

    /// Number of units (for tests of density).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.hot.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_key_and_nothing_else() {
        let words = [
            "a",
            "ab",
            "abc",
            "b",
            "▁the",
            "▁th",
            "▁",
            "日本",
            "日本語",
            "z\u{0}z",
            "\u{0}",
        ];
        let keys: Vec<(&[u8], u32)> = words
            .iter()
            .enumerate()
            .map(|(i, w)| (w.as_bytes(), i as u32))
            .collect();
        let trie = DoubleArray::build(keys);
        for (i, w) in words.iter().enumerate() {
            assert_eq!(trie.get(w.as_bytes()), Some(i as u32), "{w}");
        }
        for w in ["", "abcd", "c", "▁t", "日", "z", "zz", "\u{0}\u{0}"] {
            assert_eq!(trie.get(w.as_bytes()), None, "{w:?}");
        }
    }

    #[test]
    fn duplicate_keys_keep_the_last_id_and_the_array_stays_dense() {
        let trie = DoubleArray::build(vec![(b"x", 1), (b"x", 7), (b"", 3)]);
        assert_eq!(trie.get(b"x"), Some(7));
        assert_eq!(trie.get(b""), None);
        let owned: Vec<String> = (0..20_000).map(|i| format!("{i}x{}", i * 7)).collect();
        let keys: Vec<(&[u8], u32)> = owned
            .iter()
            .enumerate()
            .map(|(i, w)| (w.as_bytes(), i as u32))
            .collect();
        let bytes: usize = owned.iter().map(String::len).sum();
        let trie = DoubleArray::build(keys);
        for (i, w) in owned.iter().enumerate() {
            assert_eq!(trie.get(w.as_bytes()), Some(i as u32));
        }
        assert!(
            trie.len() < bytes * 2,
            "{} units for {bytes} bytes",
            trie.len()
        );
    }
}
