//! numpy's legacy `RandomState(seed)`: MT19937 seeded the way `RandomState` seeds an integer,
//! and the masked rejection sampling its `randint` uses. datasketch draws its permutation
//! parameters from it, so reproducing it bit for bit is what makes our signatures equal theirs.
//!
//! Only what datasketch calls is here: `randint(lo, hi, dtype=uint64)` one value at a time
//! (the "legacy" scheme) and `randint(lo, hi, size, dtype=uint32)` (the "affine32" scheme).

const N: usize = 624;
const M: usize = 397;

pub struct RandomState {
    mt: [u32; N],
    pos: usize,
}

impl RandomState {
    /// `numpy.random.RandomState(seed)` for an integer seed in `0..2**32`
    /// (numpy's `mt19937_seed`, Knuth's initialiser).
    pub fn new(seed: u32) -> Self {
        let mut mt = [0u32; N];
        mt[0] = seed;
        for i in 1..N {
            mt[i] = 1_812_433_253u32
                .wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30))
                .wrapping_add(i as u32);
        }
        RandomState { mt, pos: N }
    }

    fn generate(&mut self) {
        for i in 0..N {
            let y = (self.mt[i] & 0x8000_0000) | (self.mt[(i + 1) % N] & 0x7fff_ffff);
            let mag = if y & 1 == 1 { 0x9908_b0df } else { 0 };
            self.mt[i] = self.mt[(i + M) % N] ^ (y >> 1) ^ mag;
        }
        self.pos = 0;
    }

    pub fn next_u32(&mut self) -> u32 {
        if self.pos >= N {
            self.generate();
        }
        let mut y = self.mt[self.pos];
        self.pos += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// numpy's `mt19937_next64`: the first 32-bit draw is the high half.
    pub fn next_u64(&mut self) -> u64 {
        let hi = self.next_u32() as u64;
        (hi << 32) | self.next_u32() as u64
    }

    /// `randint(low, high, dtype=np.uint64)` (one value, `high` exclusive), for ranges wider
    /// than 32 bits as datasketch's are: draws masked to the range's bit width until one fits.
    pub fn randint_u64(&mut self, low: u64, high: u64) -> u64 {
        let rng = high - 1 - low;
        debug_assert!(rng > u32::MAX as u64 && rng < u64::MAX);
        let mask = mask_of(rng);
        loop {
            let v = self.next_u64() & mask;
            if v <= rng {
                return low + v;
            }
        }
    }

    /// `randint(low, high, size, dtype=np.uint32)` (`high` exclusive, up to `2**32`).
    pub fn randint_u32(&mut self, low: u64, high: u64, size: usize) -> Vec<u32> {
        let rng = (high - 1 - low) as u32;
        let low = low as u32;
        if rng == 0 {
            return vec![low; size];
        }
        if rng == u32::MAX {
            return (0..size)
                .map(|_| low.wrapping_add(self.next_u32()))
                .collect();
        }
        let mask = mask_of(rng as u64) as u32;
        (0..size)
            .map(|_| loop {
                let v = self.next_u32() & mask;
                if v <= rng {
                    break low + v;
                }
            })
            .collect()
    }
}

/// The smallest all-ones mask covering `rng` (numpy's `gen_mask`).
fn mask_of(rng: u64) -> u64 {
    if rng == 0 {
        0
    } else {
        u64::MAX >> rng.leading_zeros()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_mt19937_reference_output() {
        // The MT19937 reference (init_genrand(5489)) starts 3499211612, 581869302, 3890346734;
        // numpy.random.RandomState(5489).randint(0, 2**32, 3, dtype=np.uint32) gives the same.
        let mut r = RandomState::new(5489);
        assert_eq!(
            [r.next_u32(), r.next_u32(), r.next_u32()],
            [3499211612, 581869302, 3890346734]
        );
    }

    #[test]
    fn masks() {
        assert_eq!(mask_of(1), 1);
        assert_eq!(mask_of((1 << 61) - 3), (1 << 61) - 1);
        assert_eq!(mask_of((1 << 31) - 1), (1 << 31) - 1);
    }
}
