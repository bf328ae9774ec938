//! MinHash signatures, value for value those of `datasketch.MinHash(num_perm, seed, scheme)`.
//!
//! datasketch hashes each element with `sha1_hash32` (the first 4 bytes of its SHA-1 digest,
//! read little-endian) and then, for every permutation `i`, keeps the minimum of:
//! - `affine32` (datasketch >= 2.0's default): `a[i] * fmix32(h) + b[i] mod 2^32`, where fmix32
//!   is MurmurHash3's finaliser, `a` odd; `a = randint(0, 2^31, num_perm, uint32) * 2 + 1`
//!   then `b = randint(0, 2^32, num_perm, uint32)` from `RandomState(seed)`;
//! - `legacy` (datasketch < 2.0, text-dedup and most published pipelines): `(a[i] * h + b[i])
//!   mod (2^61 - 1)`, masked to 32 bits, with `a[i]` and `b[i]` drawn one pair at a time by
//!   `randint(1, 2^61 - 1)` and `randint(0, 2^61 - 1)` (uint64). numpy multiplies in uint64,
//!   so `a * h` wraps modulo 2^64 *before* the prime modulus; we wrap the same way.
//!
//! An empty set's signature is all `u32::MAX` (datasketch's initial value in both schemes).
//!
//! Speed: SHA-1 of a shingle is the cost. A shingle of up to 55 bytes is one padded block;
//! with the CPU's SHA extensions two such blocks are compressed at once, their instruction
//! chains interleaved ([`super::sha1x2`]), else each goes straight to the `sha1` crate's
//! compression function, skipping the streaming hasher; the permutations are a loop over flat `u32`/`u64` arrays that the
//! compiler vectorises (AVX2 when the CPU has it, chosen at run time).

use super::numpy_rng::RandomState;
use crate::error::{Error, Result};
use sha1::digest::generic_array::GenericArray;
use sha1::{Digest, Sha1};

const MERSENNE_PRIME: u64 = (1 << 61) - 1;
/// Permutations handled together: one AVX2 register of u32.
const LANES: usize = 8;
const SHA1_INIT: [u32; 5] = [
    0x6745_2301,
    0xEFCD_AB89,
    0x98BA_DCFE,
    0x1032_5476,
    0xC3D2_E1F0,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    Affine32,
    Legacy,
}

/// How a shingle becomes the 32-bit value the permutations see.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HashFunc {
    /// datasketch's default `sha1_hash32`.
    Sha1,
    /// xxh3_64 truncated to its low 32 bits: several times faster; equal to datasketch given
    /// `hashfunc=lambda b: xxhash.xxh3_64_intdigest(b) & 0xFFFFFFFF`.
    Xxh3,
}

impl HashFunc {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "sha1" => Some(HashFunc::Sha1),
            "xxh3" => Some(HashFunc::Xxh3),
            _ => None,
        }
    }
}

impl Scheme {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "affine32" => Some(Scheme::Affine32),
            "legacy" => Some(Scheme::Legacy),
            _ => None,
        }
    }
}

/// datasketch's `sha1_hash32`: the first four bytes of SHA-1, little-endian.
#[inline]
pub fn sha1_hash32(data: &[u8]) -> u32 {
    if data.len() <= 55 {
        // One block: the message, 0x80, zeros, and the bit length as a big-endian u64.
        let mut block = [0u8; 64];
        block[..data.len()].copy_from_slice(data);
        block[data.len()] = 0x80;
        block[56..].copy_from_slice(&((data.len() as u64) * 8).to_be_bytes());
        let mut state = SHA1_INIT;
        sha1::compress(
            &mut state,
            std::slice::from_ref(GenericArray::from_slice(&block)),
        );
        // The digest is the state words big-endian; its first 4 bytes read little-endian.
        state[0].swap_bytes()
    } else {
        let digest = Sha1::digest(data);
        u32::from_le_bytes([digest[0], digest[1], digest[2], digest[3]])
    }
}

#[inline]
fn fmix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85EB_CA6B);
    h ^= h >> 13;
    h = h.wrapping_mul(0xC2B2_AE35);
    h ^ (h >> 16)
}

/// `x mod (2^61 - 1)` for any u64, without a division.
#[inline(always)]
fn mod_mersenne(x: u64) -> u64 {
    let r = (x & MERSENNE_PRIME) + (x >> 61);
    if r >= MERSENNE_PRIME {
        r - MERSENNE_PRIME
    } else {
        r
    }
}

/// The permutations of one `(num_perm, seed, scheme)`; signs any number of shingle sets.
#[derive(Clone, Debug)]
pub struct MinHasher {
    pub num_perm: usize,
    pub seed: u32,
    pub scheme: Scheme,
    pub hashfunc: HashFunc,
    a32: Vec<u32>,
    b32: Vec<u32>,
    a64: Vec<u64>,
    b64: Vec<u64>,
    /// SHA-1 two shingles at a time with the CPU's SHA extensions ([`super::sha1x2`]).
    sha1_pairs: bool,
}

impl MinHasher {
    pub fn new(num_perm: usize, seed: u64, scheme: Scheme) -> Result<Self> {
        if num_perm == 0 {
            return Err(Error::InvalidArgument("num_perm must be positive".into()));
        }
        let seed = u32::try_from(seed).map_err(|_| {
            Error::InvalidArgument(format!(
                "seed must be between 0 and 2**32 - 1 (numpy's RandomState), got {seed}"
            ))
        })?;
        let mut rng = RandomState::new(seed);
        let (mut a32, mut b32, mut a64, mut b64) = (vec![], vec![], vec![], vec![]);
        match scheme {
            Scheme::Affine32 => {
                a32 = rng.randint_u32(0, 1 << 31, num_perm);
                for a in &mut a32 {
                    *a = a.wrapping_mul(2).wrapping_add(1);
                }
                b32 = rng.randint_u32(0, 1 << 32, num_perm);
            }
            Scheme::Legacy => {
                for _ in 0..num_perm {
                    a64.push(rng.randint_u64(1, MERSENNE_PRIME));
                    b64.push(rng.randint_u64(0, MERSENNE_PRIME));
                }
            }
        }
        Ok(MinHasher {
            num_perm,
            seed,
            scheme,
            hashfunc: HashFunc::Sha1,
            a32,
            b32,
            a64,
            b64,
            sha1_pairs: super::sha1x2::available(),
        })
    }

    /// The same permutations with another shingle hash.
    pub fn with_hashfunc(mut self, hashfunc: HashFunc) -> Self {
        self.hashfunc = hashfunc;
        self
    }

    /// A shingle's 32-bit hash.
    #[inline]
    pub fn hash(&self, shingle: &[u8]) -> u32 {
        match self.hashfunc {
            HashFunc::Sha1 => sha1_hash32(shingle),
            HashFunc::Xxh3 => xxhash_rust::xxh3::xxh3_64(shingle) as u32,
        }
    }

    /// datasketch's `permutations` (a, b), as u64.
    pub fn permutations(&self) -> (Vec<u64>, Vec<u64>) {
        match self.scheme {
            Scheme::Affine32 => (
                self.a32.iter().map(|&a| a as u64).collect(),
                self.b32.iter().map(|&b| b as u64).collect(),
            ),
            Scheme::Legacy => (self.a64.clone(), self.b64.clone()),
        }
    }

    /// A fresh signature: the empty set's.
    pub fn empty(&self) -> Vec<u32> {
        vec![u32::MAX; self.num_perm]
    }

    /// Adds elements, given by their 32-bit hashes, to `mins`.
    pub fn update_hashes(&self, mins: &mut [u32], hashes: &[u32]) {
        assert_eq!(mins.len(), self.num_perm);
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            unsafe { self.update_avx2(mins, hashes) };
            return;
        }
        self.update_portable(mins, hashes);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn update_avx2(&self, mins: &mut [u32], hashes: &[u32]) {
        self.update_portable(mins, hashes)
    }

    #[inline(always)]
    fn update_portable(&self, mins: &mut [u32], hashes: &[u32]) {
        match self.scheme {
            Scheme::Affine32 => {
                // Permutations in lanes of 8 (one AVX2 register), each lane's minima held in
                // registers across the whole block of hashes rather than loaded and stored per
                // hash. The premixed hashes are computed once per block.
                let mut mixed = [0u32; 64];
                for block in hashes.chunks(64) {
                    let mixed = &mut mixed[..block.len()];
                    for (m, &h) in mixed.iter_mut().zip(block) {
                        *m = fmix32(h);
                    }
                    let lanes = mins.len() / LANES * LANES;
                    for ((m, a), b) in mins[..lanes]
                        .chunks_exact_mut(LANES)
                        .zip(self.a32.chunks_exact(LANES))
                        .zip(self.b32.chunks_exact(LANES))
                    {
                        let mut acc: [u32; LANES] = m.try_into().expect("a lane");
                        let a: [u32; LANES] = a.try_into().expect("a lane");
                        let b: [u32; LANES] = b.try_into().expect("a lane");
                        for &h in mixed.iter() {
                            for l in 0..LANES {
                                acc[l] = acc[l].min(a[l].wrapping_mul(h).wrapping_add(b[l]));
                            }
                        }
                        m.copy_from_slice(&acc);
                    }
                    // The permutations past the last whole lane (num_perm not a multiple of 8).
                    for ((m, &a), &b) in mins[lanes..]
                        .iter_mut()
                        .zip(&self.a32[lanes..])
                        .zip(&self.b32[lanes..])
                    {
                        for &h in mixed.iter() {
                            *m = (*m).min(a.wrapping_mul(h).wrapping_add(b));
                        }
                    }
                }
            }
            Scheme::Legacy => {
                for &h in hashes {
                    let h = h as u64;
                    for ((m, &a), &b) in mins.iter_mut().zip(&self.a64).zip(&self.b64) {
                        let v = mod_mersenne(a.wrapping_mul(h).wrapping_add(b)) as u32;
                        *m = (*m).min(v);
                    }
                }
            }
        }
    }
}

/// Signature of one document: shingles hashed in blocks so the permutation loop runs over
/// many hashes at a time. `hashes` is scratch.
pub fn sign_into(
    hasher: &MinHasher,
    shingler: &mut super::shingles::Shingler,
    config: &super::shingles::ShingleConfig,
    text: &str,
    hashes: &mut Vec<u32>,
    mins: &mut [u32],
) {
    mins.fill(u32::MAX);
    hashes.clear();
    #[cfg(target_arch = "x86_64")]
    if hasher.hashfunc == HashFunc::Sha1 && hasher.sha1_pairs {
        use super::sha1x2::{pad, sha1_first_words_x2, MAX_MESSAGE};
        // A shingle waits for another of as many blocks (1 or 2) to be hashed with it; a
        // longer one is hashed on its own. The order in which hashes reach the minima does
        // not matter.
        let mut padded = [[0u8; 128]; 2];
        let mut scratch = [0u8; 128];
        let mut waiting = [false; 2];
        shingler.for_each(text, config, |s| {
            if s.len() > MAX_MESSAGE {
                hashes.push(sha1_hash32(s));
            } else {
                let blocks = pad(s, &mut scratch);
                let slot = blocks - 1;
                if waiting[slot] {
                    // SAFETY: the CPU has the SHA extensions (`sha1_pairs`).
                    let words = unsafe { sha1_first_words_x2([&padded[slot], &scratch], blocks) };
                    hashes.extend(words.map(u32::swap_bytes));
                    waiting[slot] = false;
                } else {
                    padded[slot] = scratch;
                    waiting[slot] = true;
                }
            }
            if hashes.len() >= 64 {
                hasher.update_hashes(mins, hashes);
                hashes.clear();
            }
        });
        for slot in 0..2 {
            if waiting[slot] {
                // SAFETY: as above.
                let words =
                    unsafe { sha1_first_words_x2([&padded[slot], &padded[slot]], slot + 1) };
                hashes.push(words[0].swap_bytes());
            }
        }
        hasher.update_hashes(mins, hashes);
        return;
    }
    shingler.for_each(text, config, |s| {
        hashes.push(hasher.hash(s));
        if hashes.len() == 64 {
            hasher.update_hashes(mins, hashes);
            hashes.clear();
        }
    });
    hasher.update_hashes(mins, hashes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_hash32_agrees_with_the_streaming_hasher() {
        for len in [0usize, 1, 30, 55, 56, 63, 64, 65, 200] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let digest = Sha1::digest(&data);
            let expected = u32::from_le_bytes([digest[0], digest[1], digest[2], digest[3]]);
            assert_eq!(sha1_hash32(&data), expected, "length {len}");
        }
        // hashlib.sha1(b"abc").digest()[:4] == a9 99 3e 36
        assert_eq!(
            sha1_hash32(b"abc"),
            u32::from_le_bytes([0xa9, 0x99, 0x3e, 0x36])
        );
    }

    #[test]
    fn mersenne_reduction() {
        for x in [
            0u64,
            1,
            MERSENNE_PRIME - 1,
            MERSENNE_PRIME,
            MERSENNE_PRIME + 5,
            u64::MAX,
        ] {
            assert_eq!(mod_mersenne(x), x % MERSENNE_PRIME);
        }
    }

    #[test]
    fn affine_a_is_odd_and_seed_is_checked() {
        let h = MinHasher::new(64, 1, Scheme::Affine32).unwrap();
        assert!(h.permutations().0.iter().all(|a| a & 1 == 1));
        assert!(MinHasher::new(8, 1 << 32, Scheme::Legacy).is_err());
        assert!(MinHasher::new(0, 1, Scheme::Legacy).is_err());
    }
}
