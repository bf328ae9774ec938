//! Small helpers shared by modules at different layers of the crate, kept in this leaf module
//! (it uses nothing else of the crate) so that sharing them makes no module import another
//! that imports it back.
//!
//! - [`in_ranges`]: how the generated character tables (spaCy's classes in `text`, HF BERT's
//!   in `normalizers` and `pre_tokenizers`) are looked up.
//! - `KEEP_SCRATCH_BYTES`: the size past which a per-thread scratch buffer (the tokenizer's
//!   normalized text, the Unigram Viterbi's best paths) is freed after use.
//! - [`SplitMix64`]: the random numbers of the Unigram model's sampling and of the tokenizer's
//!   per-text seeds.

/// Whether `x` lies in one of the sorted, disjoint, inclusive `ranges`: how the generated
/// character tables (spaCy's classes, HF BERT's) are looked up.
pub fn in_ranges<T: Ord + Copy>(ranges: &[(T, T)], x: T) -> bool {
    ranges
        .binary_search_by(|&(lo, hi)| {
            if hi < x {
                std::cmp::Ordering::Less
            } else if lo > x {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// Scratch buffers larger than this are freed after use rather than kept per thread.
pub(crate) const KEEP_SCRATCH_BYTES: usize = 64 << 20;

/// Sebastiano Vigna's SplitMix64: small, fast, and good enough for drawing segmentations.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// An index drawn with probability proportional to `weights` (non-negative, not all 0).
    pub(crate) fn pick(&mut self, weights: &[f64]) -> usize {
        let total: f64 = weights.iter().sum();
        let r = self.next_f64() * total;
        let mut acc = 0.0;
        for (i, &w) in weights.iter().enumerate() {
            acc += w;
            if r < acc {
                return i;
            }
        }
        // Rounding left r at the total: the last index with any weight.
        weights.iter().rposition(|&w| w > 0.0).unwrap_or(0)
    }
}

/// A text file of the shared corpora (`../shared/corpora/text/NAME` beside the repository),
/// for the unit tests that train on real text.
#[cfg(test)]
pub(crate) fn shared_text(name: &str) -> String {
    let path = format!(
        "{}/../../../shared/corpora/text/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}
