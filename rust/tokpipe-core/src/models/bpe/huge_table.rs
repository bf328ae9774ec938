//! [`HugeTable`]: a fixed-size array of plain values on 2 MiB pages where the kernel allows.
//!
//! Why: the byte-level encoder's lookup tables (the per-thread piece cache, 2 MiB; the merge
//! table, 8.5 MiB for cl100k; the whole-token table, 6 MiB) are probed at random addresses.
//! On 4 KiB pages that is thousands of pages, more than the data TLB maps, so many probes pay
//! a page walk on top of the cache miss. Linux gives an anonymous range 2 MiB pages when it
//! is asked (`madvise(MADV_HUGEPAGE)`, the setting of `transparent_hugepage=madvise`, the
//! common default) and the range is 2 MiB-aligned; a table then takes a few TLB entries.
//! Where the kernel refuses or has no huge pages free, the table is an ordinary array.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;

/// The huge page size the alignment aims at (x86-64 and most aarch64 kernels).
const HUGE_PAGE: usize = 2 << 20;

/// A boxed slice of `T` (plain data) whose memory is aligned for, and offered to, huge pages
/// when it is at least one huge page long.
pub(crate) struct HugeTable<T: Copy> {
    ptr: NonNull<T>,
    len: usize,
}

// SAFETY: the table owns its memory exclusively, as a `Box<[T]>` does.
unsafe impl<T: Copy + Send> Send for HugeTable<T> {}
unsafe impl<T: Copy + Sync> Sync for HugeTable<T> {}

impl<T: Copy> HugeTable<T> {
    /// `len` copies of `value`.
    pub(crate) fn filled(len: usize, value: T) -> Self {
        let layout = Self::layout(len);
        if layout.size() == 0 {
            return HugeTable {
                ptr: NonNull::dangling(),
                len,
            };
        }
        // SAFETY: the layout's size is not zero.
        let raw = unsafe { alloc(layout) };
        let Some(ptr) = NonNull::new(raw as *mut T) else {
            handle_alloc_error(layout)
        };
        if layout.size() >= HUGE_PAGE {
            advise_huge(raw, layout.size());
        }
        for i in 0..len {
            // SAFETY: `i < len`, inside the allocation; the memory is uninitialised, so it is
            // written without reading or dropping what was there (`T: Copy` has no drop).
            unsafe { ptr.as_ptr().add(i).write(value) };
        }
        HugeTable { ptr, len }
    }

    /// Huge-page alignment for a table of a huge page or more; a smaller one is aligned to
    /// its size's power of two (at least a cache line), so no table wastes more than itself.
    fn layout(len: usize) -> Layout {
        let size = len
            .checked_mul(std::mem::size_of::<T>())
            .expect("table size overflows");
        let align = size
            .next_power_of_two()
            .clamp(64, HUGE_PAGE)
            .max(std::mem::align_of::<T>());
        Layout::from_size_align(size, align).expect("table layout")
    }
}

/// Asks Linux for huge pages over `[ptr, ptr + len)`; a refusal leaves ordinary pages.
#[cfg(target_os = "linux")]
fn advise_huge(ptr: *mut u8, len: usize) {
    // SAFETY: the range is memory this process just allocated; the advice changes how it is
    // backed, not its contents or its validity.
    unsafe {
        libc::madvise(ptr as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge(_ptr: *mut u8, _len: usize) {}

impl<T: Copy> Drop for HugeTable<T> {
    fn drop(&mut self) {
        let layout = Self::layout(self.len);
        if layout.size() != 0 {
            // SAFETY: allocated in `filled` with this same layout.
            unsafe { dealloc(self.ptr.as_ptr() as *mut u8, layout) };
        }
    }
}

impl<T: Copy> std::ops::Deref for HugeTable<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: `len` initialised values (or a dangling pointer and no bytes).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> std::ops::DerefMut for HugeTable<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` is the only access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> Clone for HugeTable<T> {
    fn clone(&self) -> Self {
        let mut copy = match self.first() {
            Some(&first) => HugeTable::filled(self.len, first),
            None => HugeTable::default(),
        };
        copy.copy_from_slice(self);
        copy
    }
}

impl<T: Copy> Default for HugeTable<T> {
    fn default() -> Self {
        HugeTable {
            ptr: NonNull::dangling(),
            len: 0,
        }
    }
}

impl<T: Copy> std::fmt::Debug for HugeTable<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HugeTable({} entries)", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_of_every_size_hold_their_values_and_clone() {
        for len in [0usize, 1, 3, 1000, (HUGE_PAGE / 8) + 5] {
            let mut t = HugeTable::filled(len, 7u64);
            assert_eq!(t.len(), len);
            assert!(t.iter().all(|&v| v == 7));
            if len > 0 {
                t[len - 1] = 9;
                assert_eq!(t.as_ptr() as usize % 64, 0);
            }
            let c = t.clone();
            assert_eq!(&c[..], &t[..]);
        }
        let big = HugeTable::filled(HUGE_PAGE, 0u8);
        assert_eq!(big.as_ptr() as usize % HUGE_PAGE, 0);
    }
}
