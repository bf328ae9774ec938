//! [`InlineStack`]: a vector of at most `N` plain values, inline, whose unused places are left
//! uninitialised.
//!
//! Why: the byte-level encoder ([`super::piece_encoder`]) keeps a chunk of pieces, a batch of
//! misses and their holes in arrays of a few kilobytes, set up for every text it encodes. Arrays
//! filled with a placeholder were written in full for each text, and the write (a `memcpy` of
//! about 2.7 KB from the placeholder arrays) was about a sixth of the time of encoding a short
//! text such as "hello" (perf, a Rust-only driver). Only the places below the length are ever
//! read, so they need no value before they are pushed.

use std::mem::MaybeUninit;

pub(super) struct InlineStack<T: Copy, const N: usize> {
    items: [MaybeUninit<T>; N],
    len: usize,
}

impl<T: Copy, const N: usize> InlineStack<T, N> {
    #[inline(always)]
    pub(super) fn new() -> Self {
        InlineStack {
            items: [const { MaybeUninit::uninit() }; N],
            len: 0,
        }
    }

    #[inline(always)]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    pub(super) fn is_full(&self) -> bool {
        self.len == N
    }

    /// Appends `value`; panics when the stack is full.
    #[inline(always)]
    pub(super) fn push(&mut self, value: T) {
        self.items[self.len] = MaybeUninit::new(value);
        self.len += 1;
    }

    #[inline(always)]
    pub(super) fn as_slice(&self) -> &[T] {
        // SAFETY: the first `len` places were written by `push` (and `len <= N`);
        // `MaybeUninit<T>` has the layout of `T`.
        unsafe { std::slice::from_raw_parts(self.items.as_ptr().cast::<T>(), self.len) }
    }

    /// Empties the stack (its values are plain data, with nothing to drop).
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
        let mut stack: InlineStack<(usize, u8), 4> = InlineStack::new();
        assert!(stack.as_slice().is_empty());
        for i in 0..4 {
            assert!(!stack.is_full());
            stack.push((i * 10, i as u8));
        }
        assert!(stack.is_full());
        assert_eq!(stack.as_slice(), &[(0, 0), (10, 1), (20, 2), (30, 3)]);
        stack.clear();
        assert_eq!(stack.len(), 0);
        stack.push((7, 7));
        assert_eq!(stack.as_slice(), &[(7, 7)]);
    }

    #[test]
    #[should_panic]
    fn a_push_past_the_capacity_panics() {
        let mut stack: InlineStack<u32, 2> = InlineStack::new();
        for i in 0..3 {
            stack.push(i);
        }
    }
}
