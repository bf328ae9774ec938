//! [`InlineVec`]: a vector of at most `N` plain values, held inline, whose places are left
//! uninitialised until a value is pushed there.
//!
//! Why: the byte-level encoder ([`super::piece_encoder`]) is set up for every text it encodes,
//! and keeps a chunk of pieces, a batch of misses, their holes, and a chunk's keys and buckets
//! in arrays of about 4 KB in all. Filled with placeholders, they were written in full for each
//! text: the `memcpy` of the placeholder arrays was 16-20% of the time of encoding "hello", the
//! `memset` of the keys 3% more (perf, a Rust-only driver; benches/RESULTS.md, "Eighth step").
//! Only the places below the length are ever read, so they need no value before a push.

use std::mem::MaybeUninit;

/// Up to `N` values of `T`, appended and read in order, then cleared as a whole.
pub(super) struct InlineVec<T: Copy, const N: usize> {
    items: [MaybeUninit<T>; N],
    len: usize,
}

impl<T: Copy, const N: usize> InlineVec<T, N> {
    #[inline(always)]
    pub(super) fn new() -> Self {
        InlineVec {
            items: [const { MaybeUninit::uninit() }; N],
            len: 0,
        }
    }

    #[inline(always)]
    pub(super) fn is_full(&self) -> bool {
        self.len == N
    }

    /// Appends `value` and returns its index; panics when the vector is full.
    #[inline(always)]
    pub(super) fn push(&mut self, value: T) -> usize {
        self.items[self.len] = MaybeUninit::new(value);
        self.len += 1;
        self.len - 1
    }

    #[inline(always)]
    pub(super) fn as_slice(&self) -> &[T] {
        // SAFETY: `push` raises `len` only after a checked write, so `len <= N` and places
        // `0..len` are initialised; `MaybeUninit<T>` has the layout of `T`.
        unsafe { std::slice::from_raw_parts(self.items.as_ptr().cast::<T>(), self.len) }
    }

    /// Empties the vector (its values are plain data, with nothing to drop).
    #[inline(always)]
    pub(super) fn clear(&mut self) {
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushed_values_are_read_back_in_order_until_cleared() {
        let mut values: InlineVec<(usize, u8), 4> = InlineVec::new();
        assert!(values.as_slice().is_empty());
        for i in 0..4 {
            assert!(!values.is_full());
            assert_eq!(values.push((i * 10, i as u8)), i);
        }
        assert!(values.is_full());
        assert_eq!(values.as_slice(), &[(0, 0), (10, 1), (20, 2), (30, 3)]);
        values.clear();
        assert!(values.as_slice().is_empty());
        values.push((7, 7));
        assert_eq!(values.as_slice(), &[(7, 7)]);
    }

    #[test]
    #[should_panic(expected = "index out of bounds")]
    fn a_push_past_the_capacity_panics() {
        let mut values: InlineVec<u32, 2> = InlineVec::new();
        for i in 0..3 {
            values.push(i);
        }
    }
}
