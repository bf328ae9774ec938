//! Short byte strings packed into a `u128` (their bytes in order, their length in the top
//! byte), and a hash of such a key: the keys of the per-thread caches of BPE pieces
//! (`bpe::piece_cache`, `bpe::short_tokens`) and of Unigram words (`unigram::word_cache`).
//!
//! Why: comparing a packed key is one 16-byte compare, with no pointer to follow to the
//! stored bytes, and the key is computed with two overlapping loads, not a byte loop.

/// Longest string packed, in bytes (its bytes and its length fit 16 bytes).
pub(crate) const MAX_PACKED: usize = 15;

/// Reads `N` bytes at `at` as a little-endian integer.
#[inline(always)]
fn le<const N: usize>(p: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b[..N].copy_from_slice(&p[at..at + N]);
    u64::from_le_bytes(b)
}

/// The key of a piece of 1 to [`MAX_PACKED`] bytes: its bytes in order, then its length in the
/// top byte. Two overlapping loads read pieces of 4 to 15 bytes without a byte loop.
#[inline(always)]
pub(crate) fn key_of(p: &[u8]) -> u128 {
    let n = p.len();
    debug_assert!((1..=MAX_PACKED).contains(&n));
    let (lo, hi) = if n >= 8 {
        // Bytes 8..n are the top n - 8 bytes of the last eight.
        let tail = if n == 8 {
            0
        } else {
            le::<8>(p, n - 8) >> (8 * (16 - n))
        };
        (le::<8>(p, 0), tail)
    } else if n >= 4 {
        // Bytes 4..n are the top n - 4 bytes of the last four.
        let tail = le::<4>(p, n - 4) >> (8 * (8 - n));
        (le::<4>(p, 0) | (tail << 32), 0)
    } else {
        let mut lo = 0;
        for (i, &b) in p.iter().enumerate() {
            lo |= (b as u64) << (8 * i);
        }
        (lo, 0)
    };
    lo as u128 | (hi as u128) << 64 | (n as u128) << 120
}

/// A hash of a [`key_of`] key whose high bits are the ones to index a table with.
#[inline(always)]
pub(crate) fn hash_key(key: u128) -> u64 {
    // A folded multiply mixes every bit of the key into the high bits used as the index.
    let (lo, hi) = (key as u64, (key >> 64) as u64);
    let m = (lo ^ 0x243F_6A88_85A3_08D3) as u128 * (hi ^ 0x1319_8A2E_0370_7344) as u128;
    let h = (m as u64) ^ ((m >> 64) as u64);
    h.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}
