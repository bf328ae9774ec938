//! Short byte strings packed into a `u128` (their bytes in order, their length in the top
//! byte), and a hash of such a key: the keys of the per-thread caches of BPE pieces
//! (`bpe::piece_cache`, `bpe::short_tokens`) and of Unigram words (`unigram::word_cache`).
//!
//! Why: comparing a packed key is one 16-byte compare, with no pointer to follow to the
//! stored bytes, and the key is computed with two overlapping loads, not a byte loop; or, for
//! a piece of a text with 16 bytes of the text after its start ([`key_within`]), with one
//! load and no branch on the length.

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

/// Per length (0 to 16, 16 standing for any longer), the bytes of a 16-byte load that belong
/// to a piece of that length and its length tag: neither for lengths 0 and 16, whose key is 0.
static MASK_AND_TAG: [(u128, u128); 17] = {
    let mut t = [(0u128, 0u128); 17];
    let mut n = 1;
    while n <= MAX_PACKED {
        t[n] = ((1u128 << (8 * n)) - 1, (n as u128) << 120);
        n += 1;
    }
    t
};

/// The [`key_of`] key of `piece` if it has 1 to [`MAX_PACKED`] bytes, else 0, for a piece that
/// is a slice of `text` (any other piece gets its key too, the slow way).
///
/// Why: the pieces of a text have random lengths, and [`key_of`]'s branches on the length
/// mispredict often. Where 16 bytes of `text` follow the piece's start (all but its last 15
/// bytes), the key is one 16-byte load from `text` masked to the piece's length, with no
/// branch on the length. The load is made through `text`, so it never reads outside it.
#[inline(always)]
pub(crate) fn key_within(text: &[u8], piece: &[u8]) -> u128 {
    let n = piece.len();
    // The piece's offset in `text`; a piece that is not in `text` wraps past its end.
    let at = (piece.as_ptr() as usize).wrapping_sub(text.as_ptr() as usize);
    if at < text.len().saturating_sub(MAX_PACKED) {
        // SAFETY: bytes `at..at + 16` are inside `text`. They are the piece's bytes and the
        // ones after it, as the piece starts at the same address.
        let word = unsafe { text.as_ptr().add(at).cast::<u128>().read_unaligned() };
        let (mask, tag) = MASK_AND_TAG[n.min(16)];
        return u128::from_le(word) & mask | tag;
    }
    if (1..=MAX_PACKED).contains(&n) {
        key_of(piece)
    } else {
        0
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks [`key_within`] against [`key_of`] on every piece of `text`.
    fn check_every_piece(text: &[u8]) {
        for start in 0..=text.len() {
            for end in start..=text.len() {
                let piece = &text[start..end];
                let want = match piece.len() {
                    1..=MAX_PACKED => key_of(piece),
                    _ => 0,
                };
                let len = text.len();
                assert_eq!(key_within(text, piece), want, "{len} {start}..{end}");
            }
        }
    }

    /// Bytes with none zero, so that a mask one byte too wide changes the key.
    fn fill(bytes: &mut [u8]) {
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(37) | 0x80;
        }
    }

    #[test]
    fn a_key_read_from_the_text_is_the_key_of_the_piece_at_every_offset_and_length() {
        let mut text = vec![0u8; 64];
        fill(&mut text);
        for len in 0..text.len() {
            check_every_piece(&text[..len]);
        }
    }

    /// Texts that end where a page no read may touch begins: a key read past a text's end
    /// crashes the test instead of passing unseen.
    #[cfg(unix)]
    #[test]
    fn no_key_is_read_past_the_end_of_the_text() {
        // SAFETY: two fresh anonymous pages; the second is made unreadable, and only the
        // first is read, through slices that end at its end; both are unmapped at the end.
        unsafe {
            let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
            let base = libc::mmap(
                std::ptr::null_mut(),
                2 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(base, libc::MAP_FAILED);
            assert_eq!(
                libc::mprotect(base.cast::<u8>().add(page).cast(), page, libc::PROT_NONE),
                0
            );
            let first = std::slice::from_raw_parts_mut(base.cast::<u8>(), page);
            fill(first);
            for len in 0..=40 {
                check_every_piece(&first[page - len..]);
            }
            assert_eq!(libc::munmap(base, 2 * page), 0);
        }
    }

    #[test]
    fn a_piece_outside_the_text_still_gets_its_own_key() {
        // Another allocation, and the bytes just before the text in the same one (whose
        // 16-byte read would overlap the text's start).
        let buffer: Vec<u8> = (0..80u8).map(|b| b'a' + b % 26).collect();
        let text = &buffer[20..];
        let other = b"the quick fox".to_vec();
        assert_eq!(key_within(text, &other), key_of(&other));
        assert_eq!(key_within(text, &other[..0]), 0);
        for start in 0..20 {
            let piece = &buffer[start..(start + 7).min(20)];
            assert_eq!(key_within(text, piece), key_of(piece));
        }
    }
}
