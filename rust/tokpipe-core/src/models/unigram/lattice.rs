//! The segmentation lattice of one string under a unigram model, for training: every way of
//! cutting the string into pieces is a path from position 0 to the end, and a path's score is
//! the sum of its nodes' log-probabilities.
//!
//! - [`Lattice::viterbi`]: the best path (optionally without one node, which gives the best
//!   segmentation of a piece by *other* pieces: what the trainer's pruning needs).
//! - [`Lattice::marginals`]: forward-backward, the log of the total probability of all paths
//!   (log Z) and each node's posterior probability of being on the path.
//!
//! Positions are character offsets `0..=len`. Nodes are inserted in non-decreasing order of
//! their start, which is the order a trie walk from each position yields them; both passes of
//! forward-backward then run over the node list as it is, without grouping nodes by end.
//!
//! The encoder has its own Viterbi (no marginals, no allocation per call); this one serves the
//! trainer, where lattices are built once per word per pass.

/// One candidate piece in the lattice: characters `start..start + len` of the string.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Node {
    pub start: u32,
    pub len: u32,
    /// The piece's id, or `None` for the unknown-character node.
    pub id: Option<u32>,
    /// Log-probability.
    pub score: f64,
    /// `exp(score)`, given by the caller when it has it cached (the trainer keeps one table per
    /// EM step, so the forward-backward pass computes no exponentials).
    pub prob: f64,
}

/// A lattice over a string of `len` characters; reused across strings to keep its buffers.
#[derive(Clone, Debug, Default)]
pub struct Lattice {
    len: usize,
    nodes: Vec<Node>,
    // Scratch space of the passes, kept between calls.
    forward: Vec<f64>,
    backward: Vec<f64>,
    best_from: Vec<u32>,
}

/// Under this total probability, forward-backward redoes its work in log space: the
/// probability-space passes would lose precision to subnormal numbers.
const MIN_LINEAR_Z: f64 = 1e-250;

const NO_NODE: u32 = u32::MAX;

impl Lattice {
    pub fn new() -> Self {
        Self::default()
    }

    /// Empties the lattice for a string of `len` characters.
    pub fn reset(&mut self, len: usize) {
        self.len = len;
        self.nodes.clear();
    }

    /// Characters in the string.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Adds a node; `start` must not be smaller than the previous node's.
    #[inline]
    pub fn insert(&mut self, start: usize, len: usize, id: Option<u32>, score: f64, prob: f64) {
        debug_assert!(len > 0 && start + len <= self.len, "node out of the string");
        debug_assert!(
            self.nodes.last().is_none_or(|n| n.start as usize <= start),
            "nodes are inserted by start"
        );
        self.nodes.push(Node {
            start: start as u32,
            len: len as u32,
            id,
            score,
            prob,
        });
    }

    /// Adds a node, computing its probability from its score.
    pub fn push(&mut self, start: usize, len: usize, id: Option<u32>, score: f64) {
        self.insert(start, len, id, score, score.exp());
    }

    /// The best path, as indices into [`Lattice::nodes`] in string order, and its score;
    /// `None` when no path spans the string. With `without`, that node is left out.
    ///
    /// Ties go to the node inserted first among those ending at the same position.
    pub fn viterbi(&mut self, without: Option<usize>) -> Option<(f64, Vec<usize>)> {
        let n = self.len;
        let best = &mut self.forward;
        best.clear();
        best.resize(n + 1, f64::NEG_INFINITY);
        best[0] = 0.0;
        self.best_from.clear();
        self.best_from.resize(n + 1, NO_NODE);
        for (k, node) in self.nodes.iter().enumerate() {
            if Some(k) == without {
                continue;
            }
            let from = best[node.start as usize];
            if from == f64::NEG_INFINITY {
                continue;
            }
            let end = (node.start + node.len) as usize;
            let score = from + node.score;
            if score > best[end] {
                best[end] = score;
                self.best_from[end] = k as u32;
            }
        }
        if n > 0 && self.best_from[n] == NO_NODE {
            return None;
        }
        let mut path = Vec::new();
        let mut pos = n;
        while pos > 0 {
            let k = self.best_from[pos] as usize;
            path.push(k);
            pos = self.nodes[k].start as usize;
        }
        path.reverse();
        Some((best[n], path))
    }

    /// Forward-backward: writes each node's posterior probability to `marginal` (indexed like
    /// [`Lattice::nodes`]) and returns log Z, the log of the summed probability of all paths
    /// (negative infinity, with all marginals zero, when no path spans the string).
    pub fn marginals(&mut self, marginal: &mut Vec<f64>) -> f64 {
        marginal.clear();
        marginal.resize(self.nodes.len(), 0.0);
        if self.len == 0 {
            return 0.0;
        }
        let z = self.linear_pass(marginal);
        if z.is_finite() && z > MIN_LINEAR_Z {
            return z.ln();
        }
        self.log_pass(marginal)
    }

    /// Forward-backward in probability space: one multiply-add per node and pass. Returns Z.
    fn linear_pass(&mut self, marginal: &mut [f64]) -> f64 {
        let n = self.len;
        let (alpha, beta) = (&mut self.forward, &mut self.backward);
        alpha.clear();
        alpha.resize(n + 1, 0.0);
        beta.clear();
        beta.resize(n + 1, 0.0);
        alpha[0] = 1.0;
        // Nodes come by start, so alpha[start] is complete when its first node is reached.
        for node in &self.nodes {
            alpha[(node.start + node.len) as usize] += alpha[node.start as usize] * node.prob;
        }
        beta[n] = 1.0;
        for node in self.nodes.iter().rev() {
            beta[node.start as usize] += node.prob * beta[(node.start + node.len) as usize];
        }
        let z = alpha[n];
        if !(z.is_finite() && z > MIN_LINEAR_Z) {
            return z;
        }
        for (m, node) in marginal.iter_mut().zip(&self.nodes) {
            let end = (node.start + node.len) as usize;
            *m = alpha[node.start as usize] * node.prob * beta[end] / z;
        }
        z
    }

    /// Forward-backward in log space with log-sum-exp, for strings whose total probability
    /// is too small for [`Lattice::linear_pass`]. Returns log Z.
    fn log_pass(&mut self, marginal: &mut [f64]) -> f64 {
        let n = self.len;
        let (alpha, beta) = (&mut self.forward, &mut self.backward);
        alpha.clear();
        alpha.resize(n + 1, f64::NEG_INFINITY);
        beta.clear();
        beta.resize(n + 1, f64::NEG_INFINITY);
        alpha[0] = 0.0;
        for node in &self.nodes {
            let end = (node.start + node.len) as usize;
            alpha[end] = log_add(alpha[end], alpha[node.start as usize] + node.score);
        }
        beta[n] = 0.0;
        for node in self.nodes.iter().rev() {
            let end = (node.start + node.len) as usize;
            let start = node.start as usize;
            beta[start] = log_add(beta[start], node.score + beta[end]);
        }
        let log_z = alpha[n];
        if log_z == f64::NEG_INFINITY {
            marginal.fill(0.0);
            return log_z;
        }
        for (m, node) in marginal.iter_mut().zip(&self.nodes) {
            let end = (node.start + node.len) as usize;
            *m = (alpha[node.start as usize] + node.score + beta[end] - log_z).exp();
        }
        log_z
    }
}

/// `ln(exp(a) + exp(b))` without overflow or underflow.
#[inline]
fn log_add(a: f64, b: f64) -> f64 {
    let (hi, lo) = if a > b { (a, b) } else { (b, a) };
    if lo == f64::NEG_INFINITY {
        return hi;
    }
    hi + (lo - hi).exp().ln_1p()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path through the lattice, as node index lists (depth-first, small lattices only).
    fn all_paths(lattice: &Lattice) -> Vec<Vec<usize>> {
        fn walk(l: &Lattice, pos: usize, path: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
            if pos == l.len() {
                out.push(path.clone());
                return;
            }
            for (k, node) in l.nodes().iter().enumerate() {
                if node.start as usize == pos {
                    path.push(k);
                    walk(l, pos + node.len as usize, path, out);
                    path.pop();
                }
            }
        }
        let mut out = Vec::new();
        walk(lattice, 0, &mut Vec::new(), &mut out);
        out
    }

    /// A deterministic pseudo-random lattice: every span up to `max_len` characters is a node
    /// with probability about one half, single characters always.
    fn random_lattice(len: usize, max_len: usize, seed: u64, score_scale: f64) -> Lattice {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut lattice = Lattice::new();
        lattice.reset(len);
        let mut id = 0;
        for start in 0..len {
            for l in 1..=max_len.min(len - start) {
                if l == 1 || next() % 2 == 0 {
                    let score = -((next() % 1000) as f64 / 100.0 + 0.01) * score_scale;
                    let node_id = if next() % 7 == 0 { None } else { Some(id) };
                    lattice.push(start, l, node_id, score);
                    id += 1;
                }
            }
        }
        lattice
    }

    fn brute_force(lattice: &Lattice) -> (f64, Vec<f64>, f64) {
        let paths = all_paths(lattice);
        let scores: Vec<f64> = paths
            .iter()
            .map(|p| p.iter().map(|&k| lattice.nodes()[k].score).sum())
            .collect();
        let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let z: f64 = scores.iter().map(|s| (s - max).exp()).sum();
        let log_z = max + z.ln();
        let mut marginal = vec![0.0; lattice.nodes().len()];
        for (path, s) in paths.iter().zip(&scores) {
            for &k in path {
                marginal[k] += (s - log_z).exp();
            }
        }
        (log_z, marginal, max)
    }

    #[test]
    fn marginals_equal_brute_force_enumeration() {
        for seed in 0..200 {
            for scale in [1.0, 40.0] {
                let len = 1 + (seed as usize % 9);
                let mut lattice = random_lattice(len, 4, seed, scale);
                let (want_z, want_marginal, _) = brute_force(&lattice);
                let mut got = Vec::new();
                let got_z = lattice.marginals(&mut got);
                assert!(
                    (got_z - want_z).abs() <= 1e-9 * want_z.abs().max(1.0),
                    "seed {seed} scale {scale}: log Z {got_z} vs {want_z}"
                );
                for (k, (g, w)) in got.iter().zip(&want_marginal).enumerate() {
                    assert!((g - w).abs() < 1e-9, "seed {seed} node {k}: {g} vs {w}");
                }
            }
        }
    }

    #[test]
    fn log_space_fallback_matches_brute_force() {
        // Scores near -700 per character: Z underflows in probability space.
        for seed in 0..50 {
            let mut lattice = random_lattice(6, 3, seed, 80.0);
            for node in &mut lattice.nodes {
                node.score -= 600.0;
                node.prob = node.score.exp();
            }
            let (want_z, want_marginal, _) = brute_force(&lattice);
            assert!(want_z < MIN_LINEAR_Z.ln());
            let mut got = Vec::new();
            let got_z = lattice.marginals(&mut got);
            assert!((got_z - want_z).abs() <= 1e-9 * want_z.abs(), "seed {seed}");
            for (g, w) in got.iter().zip(&want_marginal) {
                assert!((g - w).abs() < 1e-9, "seed {seed}: {g} vs {w}");
            }
        }
    }

    #[test]
    fn viterbi_is_the_best_enumerated_path() {
        for seed in 0..200 {
            let len = 1 + (seed as usize % 9);
            let mut lattice = random_lattice(len, 4, seed, 1.0);
            let (_, _, want) = brute_force(&lattice);
            let (got, path) = lattice
                .viterbi(None)
                .expect("single characters always span");
            assert!((got - want).abs() < 1e-9, "seed {seed}");
            let sum: f64 = path.iter().map(|&k| lattice.nodes()[k].score).sum();
            assert!((sum - got).abs() < 1e-9);
            // Without one node of the best path: the best path that avoids it.
            let skip = path[0];
            let best_without = all_paths(&lattice)
                .into_iter()
                .filter(|p| !p.contains(&skip))
                .map(|p| p.iter().map(|&k| lattice.nodes()[k].score).sum::<f64>())
                .fold(f64::NEG_INFINITY, f64::max);
            match lattice.viterbi(Some(skip)) {
                Some((s, p)) => {
                    assert!((s - best_without).abs() < 1e-9, "seed {seed}");
                    assert!(!p.contains(&skip));
                }
                None => assert_eq!(best_without, f64::NEG_INFINITY, "seed {seed}"),
            }
        }
    }

    #[test]
    fn no_path_and_empty_string() {
        let mut lattice = Lattice::new();
        lattice.reset(3);
        lattice.push(0, 1, Some(0), -1.0);
        lattice.push(2, 1, Some(1), -1.0);
        assert_eq!(lattice.viterbi(None), None);
        let mut m = Vec::new();
        assert_eq!(lattice.marginals(&mut m), f64::NEG_INFINITY);
        assert_eq!(m, vec![0.0, 0.0]);
        lattice.reset(0);
        assert_eq!(lattice.viterbi(None), Some((0.0, vec![])));
        assert_eq!(lattice.marginals(&mut m), 0.0);
    }
}
