//! [`prefetch`]: a request that the CPU bring a value's cache line near, without waiting for
//! it, for the per-thread caches' tables whose probes are known a few steps ahead.

/// Asks the CPU to load the cache line of `value` into its nearest cache, without waiting:
/// for a probe of a table a few steps ahead of its use.
#[inline(always)]
pub(crate) fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch cannot fault and changes no memory; the address is a live reference.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(value as *const T as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}
