//! SHA-1 of two one-block messages at once with the x86 SHA extensions, for shingle hashes.
//!
//! One SHA-1 block is a chain of 20 `sha1rnds4` instructions, each waiting for the last, so a
//! single message leaves the SHA unit idle most of the time. Two independent messages, their
//! steps interleaved, fill those gaps. Messages of up to 119 bytes (two padded blocks) are
//! handled, paired with one of the same number of blocks.
//!
//! The message schedule follows the SHA-1 definition (FIPS 180-4): `sha1msg1`, a XOR and
//! `sha1msg2` together compute the next four words of W from the previous sixteen, and
//! `sha1nexte` folds the rotated `e` into the next group of words. The result is checked
//! against the `sha1` crate on many lengths and contents (tests below).

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// True when this CPU has what [`sha1_first_words_x2`] needs.
#[cfg(target_arch = "x86_64")]
pub fn available() -> bool {
    std::arch::is_x86_feature_detected!("sha")
        && std::arch::is_x86_feature_detected!("sse4.1")
        && std::arch::is_x86_feature_detected!("ssse3")
}

#[cfg(not(target_arch = "x86_64"))]
pub fn available() -> bool {
    false
}

/// Longest message [`pad`] takes: two blocks.
pub const MAX_MESSAGE: usize = 119;

/// The padded blocks of a message of at most [`MAX_MESSAGE`] bytes (the message, 0x80,
/// zeros, and the length in bits as a big-endian u64) into `out`; returns how many blocks
/// (1 or 2) they fill.
#[inline]
pub fn pad(data: &[u8], out: &mut [u8; 128]) -> usize {
    debug_assert!(data.len() <= MAX_MESSAGE);
    let blocks = if data.len() <= 55 { 1 } else { 2 };
    let end = 64 * blocks;
    out[..end].fill(0);
    out[..data.len()].copy_from_slice(data);
    out[data.len()] = 0x80;
    out[end - 8..end].copy_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    blocks
}

/// Four rounds of both messages: the step `K` (0..20) of the compression, round function `F`.
macro_rules! step {
    ($k:literal, $f:literal, $abcd:ident, $e0:ident, $e1:ident, $msg:ident, $block:ident, $mask:ident) => {{
        const C: usize = $k % 4;
        for lane in 0..2 {
            if $k < 4 {
                let words = _mm_loadu_si128($block[lane].as_ptr().add(16 * C) as *const __m128i);
                $msg[lane][C] = _mm_shuffle_epi8(words, $mask);
            }
            // `e` plus this step's words: e0 on even steps, e1 on odd ones.
            let e = if $k % 2 == 0 {
                &mut $e0[lane]
            } else {
                &mut $e1[lane]
            };
            *e = if $k == 0 {
                _mm_add_epi32(*e, $msg[lane][C])
            } else {
                _mm_sha1nexte_epu32(*e, $msg[lane][C])
            };
            let e_now = *e;
            if $k % 2 == 0 {
                $e1[lane] = $abcd[lane];
            } else {
                $e0[lane] = $abcd[lane];
            }
            if (3..=18).contains(&$k) {
                $msg[lane][(C + 1) % 4] =
                    _mm_sha1msg2_epu32($msg[lane][(C + 1) % 4], $msg[lane][C]);
            }
            $abcd[lane] = _mm_sha1rnds4_epu32::<$f>($abcd[lane], e_now);
            if (1..=16).contains(&$k) {
                $msg[lane][(C + 3) % 4] =
                    _mm_sha1msg1_epu32($msg[lane][(C + 3) % 4], $msg[lane][C]);
            }
            if (2..=17).contains(&$k) {
                $msg[lane][(C + 2) % 4] = _mm_xor_si128($msg[lane][(C + 2) % 4], $msg[lane][C]);
            }
        }
    }};
}

/// The first 32-bit word of the SHA-1 state after compressing each of two padded messages
/// of `blocks` blocks from the initial state: the digest's first four bytes, big-endian.
///
/// # Safety
/// The CPU must have the SHA, SSSE3 and SSE4.1 extensions ([`available`]), and both
/// messages must hold at least `64 * blocks` bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
pub unsafe fn sha1_first_words_x2(messages: [&[u8; 128]; 2], blocks: usize) -> [u32; 2] {
    // Big-endian words, and ABCD kept with A in the highest lane as the instructions want.
    let mask = _mm_set_epi64x(0x0001_0203_0405_0607, 0x0809_0a0b_0c0d_0e0f);
    let init_abcd = _mm_set_epi32(
        0x6745_2301u32 as i32,
        0xEFCD_AB89u32 as i32,
        0x98BA_DCFEu32 as i32,
        0x1032_5476,
    );
    let init_e = _mm_set_epi32(0xC3D2_E1F0u32 as i32, 0, 0, 0);
    let mut state_abcd = [init_abcd; 2];
    let mut state_e = [init_e; 2];
    for b in 0..blocks.min(2) {
        let block = [
            &messages[0][64 * b..64 * b + 64],
            &messages[1][64 * b..64 * b + 64],
        ];
        let mut abcd = state_abcd;
        let mut e0 = state_e;
        let mut e1 = [_mm_setzero_si128(); 2];
        let mut msg = [[_mm_setzero_si128(); 4]; 2];
        step!(0, 0, abcd, e0, e1, msg, block, mask);
        step!(1, 0, abcd, e0, e1, msg, block, mask);
        step!(2, 0, abcd, e0, e1, msg, block, mask);
        step!(3, 0, abcd, e0, e1, msg, block, mask);
        step!(4, 0, abcd, e0, e1, msg, block, mask);
        step!(5, 1, abcd, e0, e1, msg, block, mask);
        step!(6, 1, abcd, e0, e1, msg, block, mask);
        step!(7, 1, abcd, e0, e1, msg, block, mask);
        step!(8, 1, abcd, e0, e1, msg, block, mask);
        step!(9, 1, abcd, e0, e1, msg, block, mask);
        step!(10, 2, abcd, e0, e1, msg, block, mask);
        step!(11, 2, abcd, e0, e1, msg, block, mask);
        step!(12, 2, abcd, e0, e1, msg, block, mask);
        step!(13, 2, abcd, e0, e1, msg, block, mask);
        step!(14, 2, abcd, e0, e1, msg, block, mask);
        step!(15, 3, abcd, e0, e1, msg, block, mask);
        step!(16, 3, abcd, e0, e1, msg, block, mask);
        step!(17, 3, abcd, e0, e1, msg, block, mask);
        step!(18, 3, abcd, e0, e1, msg, block, mask);
        step!(19, 3, abcd, e0, e1, msg, block, mask);
        for lane in 0..2 {
            // The new e is the rotated A of four rounds ago (in e0) plus the old e.
            state_e[lane] = _mm_sha1nexte_epu32(e0[lane], state_e[lane]);
            state_abcd[lane] = _mm_add_epi32(abcd[lane], state_abcd[lane]);
        }
    }
    [
        _mm_extract_epi32::<3>(state_abcd[0]) as u32,
        _mm_extract_epi32::<3>(state_abcd[1]) as u32,
    ]
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use sha1::{Digest, Sha1};

    #[test]
    fn agrees_with_the_sha1_crate() {
        if !available() {
            eprintln!("no SHA extensions on this CPU: the portable path is used instead");
            return;
        }
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        };
        for round in 0..4000 {
            // Both lanes the same number of blocks, as the caller pairs them.
            let first = round % (MAX_MESSAGE + 1);
            let second = if first <= 55 {
                (round * 7 + 3) % 56
            } else {
                56 + (round * 7 + 3) % 64
            };
            let lens = [first, second];
            let data: Vec<Vec<u8>> = lens
                .iter()
                .map(|&n| (0..n).map(|_| next()).collect())
                .collect();
            let mut padded = [[0u8; 128]; 2];
            let blocks = pad(&data[0], &mut padded[0]);
            assert_eq!(pad(&data[1], &mut padded[1]), blocks);
            let got = unsafe { sha1_first_words_x2([&padded[0], &padded[1]], blocks) };
            for lane in 0..2 {
                let digest = Sha1::digest(&data[lane]);
                let want = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
                assert_eq!(got[lane], want, "length {}", lens[lane]);
            }
        }
    }
}
