//! The EM loop of the Unigram trainer: expected piece counts by forward-backward over each
//! word's lattice (E-step), the Bayesian update of the scores (M-step), and pruning by how much
//! the corpus likelihood drops when a piece is removed.
//!
//! Parallel over words, and the same result for any number of threads:
//! - expected counts are summed in fixed point (integers, so the order of addition cannot
//!   change the result), one accumulator per rayon thread;
//! - Viterbi frequencies are integer counts anyway;
//! - floating-point partial sums (the log-likelihood) are made per task of a fixed number of
//!   words and added in task order.

use super::trie::PieceTrie;
use super::words::Words;
use crate::models::unigram::lattice::Lattice;
use rayon::prelude::*;
use std::sync::Mutex;

/// Words per parallel task: enough to hide the task's overhead, and the unit of the fixed
/// summation order.
const WORDS_PER_TASK: usize = 512;

/// Below this expected count a piece is dropped by the M-step (sentencepiece's threshold).
const MIN_EXPECTED_COUNT: f64 = 0.5;

/// How much lower than the lowest piece an unknown character scores (sentencepiece's penalty).
const UNKNOWN_PENALTY: f64 = 10.0;

/// Expected counts are summed as integers in units of 2^-24: exact and order-free, fine enough
/// (6e-8 per word), and room for 2^104 before overflow.
const FIXED_ONE: f64 = (1u64 << 24) as f64;

/// Pieces as character-id strings back to back, with their scores.
#[derive(Clone, Debug, Default)]
pub(crate) struct PieceSet {
    arena: Vec<u32>,
    spans: Vec<(u32, u32)>,
    pub(crate) scores: Vec<f64>,
}

impl PieceSet {
    pub(crate) fn push(&mut self, piece: &[u32], score: f64) {
        self.spans
            .push((self.arena.len() as u32, piece.len() as u32));
        self.arena.extend_from_slice(piece);
        self.scores.push(score);
    }

    #[inline]
    pub(crate) fn piece(&self, i: usize) -> &[u32] {
        let (start, len) = self.spans[i];
        &self.arena[start as usize..(start + len) as usize]
    }

    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }

    /// The pieces at `indices`, in that order, with scores from `score`.
    fn select(&self, indices: impl Iterator<Item = (usize, f64)>) -> PieceSet {
        let mut out = PieceSet::default();
        for (i, score) in indices {
            out.push(self.piece(i), score);
        }
        out
    }
}

/// A piece set ready for building lattices.
pub(crate) struct Model {
    pub(crate) pieces: PieceSet,
    probs: Vec<f64>,
    trie: PieceTrie,
    unknown_score: f64,
    pub(crate) min_score: f64,
}

impl Model {
    /// `alphabet` bounds the character ids (the unknown character's included).
    pub(crate) fn new(pieces: PieceSet, alphabet: usize) -> Self {
        let trie = PieceTrie::new(alphabet, |i| pieces.piece(i), pieces.len());
        let probs = pieces.scores.iter().map(|s| s.exp()).collect();
        let min_score = pieces.scores.iter().copied().fold(f64::INFINITY, f64::min);
        Model {
            probs,
            trie,
            unknown_score: min_score - UNKNOWN_PENALTY,
            min_score,
            pieces,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.pieces.len()
    }

    /// Fills `lattice` with every piece occurring in `word`, and an unknown node at each
    /// position no one-character piece starts.
    pub(crate) fn populate(&self, lattice: &mut Lattice, word: &[u32]) {
        lattice.reset(word.len());
        let unknown_prob = self.unknown_score.exp();
        for pos in 0..word.len() {
            let mut has_single = false;
            self.trie.prefixes(&word[pos..], |len, id| {
                has_single |= len == 1;
                let id_ = id as usize;
                lattice.insert(pos, len, Some(id), self.pieces.scores[id_], self.probs[id_]);
            });
            if !has_single {
                lattice.insert(pos, 1, None, self.unknown_score, unknown_prob);
            }
        }
    }
}

/// One value per rayon thread of the current pool; a task locks its own thread's, so the locks
/// are never contended.
fn per_thread<T>(make: impl Fn() -> T) -> Vec<Mutex<T>> {
    (0..rayon::current_num_threads())
        .map(|_| Mutex::new(make()))
        .collect()
}

fn own<T>(slots: &[Mutex<T>]) -> std::sync::MutexGuard<'_, T> {
    slots[rayon::current_thread_index().unwrap_or(0) % slots.len()]
        .lock()
        .expect("no panics while training")
}

fn tasks(words: &Words) -> impl IndexedParallelIterator<Item = std::ops::Range<usize>> + '_ {
    let n = words.len();
    (0..n.div_ceil(WORDS_PER_TASK))
        .into_par_iter()
        .map(move |t| t * WORDS_PER_TASK..((t + 1) * WORDS_PER_TASK).min(n))
}

/// E-step: the expected count of every piece over the corpus, and the objective (the negative
/// log-likelihood per word occurrence).
pub(crate) fn e_step(words: &Words, model: &Model) -> (Vec<f64>, f64) {
    let sums = per_thread(|| vec![0u128; model.len()]);
    let log_likelihoods: Vec<f64> = tasks(words)
        .map_init(
            || (Lattice::new(), Vec::new()),
            |(lattice, marginal), range| {
                let mut sum = own(&sums);
                let mut log_likelihood = 0.0;
                for w in range {
                    model.populate(lattice, words.word(w));
                    let count = words.counts[w] as f64;
                    log_likelihood += count * lattice.marginals(marginal);
                    for (node, &m) in lattice.nodes().iter().zip(marginal.iter()) {
                        if let Some(id) = node.id {
                            // Through u64 (one instruction; f64 to u128 is a library call):
                            // a word's share never nears 2^40 occurrences.
                            sum[id as usize] += (count * m * FIXED_ONE + 0.5) as u64 as u128;
                        }
                    }
                }
                log_likelihood
            },
        )
        .collect();
    let mut total = vec![0u128; model.len()];
    for sum in sums {
        let sum = sum.into_inner().expect("no panics while training");
        total.iter_mut().zip(sum).for_each(|(t, s)| *t += s);
    }
    let expected = total.into_iter().map(|t| t as f64 / FIXED_ONE).collect();
    let objective = -log_likelihoods.iter().sum::<f64>() / words.total() as f64;
    (expected, objective)
}

/// The Bayesian (variational, Dirichlet-process flavoured) M-step of sentencepiece: a piece
/// with expected count `c` below 0.5 is dropped, the others score
/// `digamma(c) - digamma(sum of kept c)`. `None` for dropped pieces.
pub fn bayesian_m_step(expected: &[f64]) -> Vec<Option<f64>> {
    let sum: f64 = expected.iter().filter(|&&c| c >= MIN_EXPECTED_COUNT).sum();
    let log_sum = digamma(sum);
    expected
        .iter()
        .map(|&c| (c >= MIN_EXPECTED_COUNT).then(|| digamma(c) - log_sum))
        .collect()
}

/// M-step on a model: the kept pieces with their new scores, in the same order.
pub(crate) fn m_step(pieces: &PieceSet, expected: &[f64]) -> PieceSet {
    let scores = bayesian_m_step(expected);
    pieces.select(
        scores
            .into_iter()
            .enumerate()
            .filter_map(|(i, s)| s.map(|s| (i, s))),
    )
}

/// The digamma function ψ(x) for x > 0: the recurrence ψ(x) = ψ(x + 1) - 1/x up to x ≥ 10,
/// then the asymptotic series (error under 1e-13 there).
pub fn digamma(mut x: f64) -> f64 {
    let mut result = 0.0;
    while x < 10.0 {
        result -= 1.0 / x;
        x += 1.0;
    }
    let inv = 1.0 / x;
    let inv2 = inv * inv;
    // ln x - 1/(2x) - Σ B_2k / (2k x^2k), k = 1..5
    let series = inv2
        * (1.0 / 12.0
            - inv2 * (1.0 / 120.0 - inv2 * (1.0 / 252.0 - inv2 * (1.0 / 240.0 - inv2 / 132.0))));
    result + x.ln() - 0.5 * inv - series
}

/// How a piece is segmented without itself, for pruning.
enum Alternative {
    /// Its own best segmentation is already into other pieces: remove it freely.
    Remove,
    /// No segmentation without it (a character, or one needing an unknown node): keep it.
    Keep,
    /// The pieces that would replace it.
    Replace(Vec<u32>),
}

/// Pruning: keeps the pieces whose removal would cost the corpus likelihood the most, about
/// `shrinking_factor` of them and never fewer than `desired` (sentencepiece's approximation:
/// every occurrence of a removed piece is replaced by its best segmentation into other pieces).
pub(crate) fn prune(
    words: &Words,
    model: &Model,
    desired: usize,
    shrinking_factor: f64,
) -> PieceSet {
    let n = model.len();
    let alternatives: Vec<Alternative> = (0..n)
        .into_par_iter()
        .map_init(Lattice::new, |lattice, i| {
            model.populate(lattice, model.pieces.piece(i));
            let (_, best) = lattice.viterbi(None).expect("unknown nodes make a path");
            if best.len() >= 2 {
                return Alternative::Remove;
            }
            let Some((_, path)) = lattice.viterbi(Some(best[0])) else {
                return Alternative::Keep;
            };
            let ids: Option<Vec<u32>> = path.iter().map(|&k| lattice.nodes()[k].id).collect();
            ids.map_or(Alternative::Keep, Alternative::Replace)
        })
        .collect();

    // How often each piece is on the best path of the corpus.
    let counts = per_thread(|| vec![0u64; n]);
    tasks(words).for_each_init(Lattice::new, |lattice, range| {
        let mut freq = own(&counts);
        for w in range {
            model.populate(lattice, words.word(w));
            let (_, path) = lattice.viterbi(None).expect("unknown nodes make a path");
            for k in path {
                if let Some(id) = lattice.nodes()[k].id {
                    freq[id as usize] += words.counts[w];
                }
            }
        }
    });
    let mut freq = vec![0u64; n];
    for c in counts {
        let c = c.into_inner().expect("no panics while training");
        freq.iter_mut().zip(c).for_each(|(f, c)| *f += c);
    }
    let occurrences = words.total() as f64;
    let sum = freq.iter().sum::<u64>() as f64;
    let log_sum = sum.ln();

    let mut kept = Vec::new();
    let mut candidates: Vec<(usize, f64)> = Vec::new();
    for (i, alternative) in alternatives.iter().enumerate() {
        let f = freq[i] as f64;
        match alternative {
            _ if freq[i] == 0 => {}
            Alternative::Remove => {}
            Alternative::Keep => kept.push(i),
            Alternative::Replace(alt) => {
                // Share of word occurrences using the piece (each use counted).
                let share = f / occurrences;
                let log_prob = f.ln() - log_sum;
                // Without it, its occurrences go to each of its replacements.
                let log_sum_alt = (sum + f * (alt.len() as f64 - 1.0)).ln();
                let log_prob_alt: f64 = alt
                    .iter()
                    .map(|&a| (freq[a as usize] as f64 + f).ln() - log_sum_alt)
                    .sum();
                candidates.push((i, share * (log_prob - log_prob_alt)));
            }
        }
    }
    let target = desired.max((shrinking_factor * n as f64) as usize);
    candidates.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    for (i, _) in candidates {
        if kept.len() >= target {
            break;
        }
        kept.push(i);
    }
    model
        .pieces
        .select(kept.into_iter().map(|i| (i, model.pieces.scores[i])))
}

#[cfg(test)]
mod scipy_reference;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digamma_satisfies_its_recurrence_and_known_values() {
        // ψ(1) = -γ, ψ(1/2) = -γ - 2 ln 2 (closed forms, not computed by this code)
        let euler = 0.577_215_664_901_532_9;
        assert!((digamma(1.0) + euler).abs() < 1e-13);
        assert!((digamma(0.5) + euler + 2.0 * std::f64::consts::LN_2).abs() < 1e-13);
        for x in [0.3, 1.7, 5.9, 6.0, 42.0, 1e6] {
            assert!(
                (digamma(x + 1.0) - digamma(x) - 1.0 / x).abs() < 1e-12,
                "{x}"
            );
        }
    }

    /// The M-step against scipy's digamma (`scripts/gen_unigram_m_step_reference.py` wrote
    /// the values, and `tests/test_train_unigram.py` checks them against the installed scipy).
    #[test]
    fn m_step_matches_scipy() {
        for case in super::scipy_reference::CASES {
            let expected: Vec<f64> = case.iter().map(|&(c, _)| c).collect();
            let got = bayesian_m_step(&expected);
            assert_eq!(got.len(), case.len());
            for (&(c, want), got) in case.iter().zip(got) {
                match (want, got) {
                    (None, None) => {}
                    // Within a few ulps of the scores' terms: the digamma above agrees with
                    // scipy's to 3e-15 here, and leaving out its last series term is off by
                    // up to 7e-13.
                    (Some(want), Some(got)) => assert!(
                        (got - want).abs() <= 5e-14_f64.max(1e-14 * want.abs()),
                        "{c}: {got} against scipy's {want}"
                    ),
                    _ => panic!("{c}: kept {:?}, scipy {:?}", got, want),
                }
            }
        }
    }

    #[test]
    fn m_step_drops_rare_pieces() {
        let got = bayesian_m_step(&[10.0, 0.4, 3.0]);
        assert!(got[1].is_none());
        let sum = digamma(13.0);
        assert!((got[0].unwrap() - (digamma(10.0) - sum)).abs() < 1e-15);
        assert!((got[2].unwrap() - (digamma(3.0) - sum)).abs() < 1e-15);
    }
}
