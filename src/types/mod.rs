//! Pure data structures and algorithms with no I/O and no knowledge of the server.

pub mod geo;
pub mod glob;
pub mod hash;
pub mod hll;
pub mod list;
pub mod long_double;
pub mod placement;
pub mod pqsort;
pub mod rdb;
pub mod set;
pub mod stream;
pub mod value;
pub mod zset;

/// A read prefetch of the line holding `*p` (a no-op where the target has none).
#[inline]
pub fn prefetch_read<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is a hint that never faults and changes no memory; `p` is a
        // valid reference anyway.
        unsafe /* SAFETY: above */ {
            _mm_prefetch::<_MM_HINT_T0>((p as *const T).cast::<i8>())
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
