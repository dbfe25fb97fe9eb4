//! Live heap bytes for `used_memory` and `maxmemory`: a counting wrapper around the real
//! allocator (Redis's `zmalloc_used_memory`).
//!
//! Why a wrapper and not mimalloc's own statistics: mimalloc's release build (the one the
//! `mimalloc` crate compiles, `MI_STAT` 0) keeps no per-allocation counters, only the
//! committed and reserved segments, which move in 64 MiB arenas and say nothing about what
//! the keyspace holds.
//!
//! Cost on the hot path: no shared atomic per allocation. Each thread adds its own signed
//! delta to a plain thread-local cell and folds it into the shared total only once it
//! passes [`FOLD`] bytes either way (one relaxed `fetch_add` per 8 KiB of net change). The
//! total is therefore within `threads × FOLD` of the truth; the thread reading it adds its
//! own residue, so a thread measuring what it just freed (eviction) sees the exact change.
//!
//! Only a binary (or test) that installs [`Counting`] as its `#[global_allocator]` gets
//! these figures: [`used`] is `None` until the first fold, and callers fall back to the
//! resident set size.

// Linked even where nothing else names it (the library's own test binary), for
// `mi_collect` below.
extern crate mimalloc;

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// Net bytes a thread may keep unfolded.
const FOLD: i64 = 8 << 10;

static TOTAL: AtomicI64 = AtomicI64::new(0);
static INSTALLED: AtomicBool = AtomicBool::new(false);
/// The highest total a fold produced (Redis `used_memory_peak`, at fold resolution).
static PEAK: AtomicI64 = AtomicI64::new(0);

thread_local! {
    // Const-initialised, no destructor: access is a plain TLS offset, never a lazy init.
    static LOCAL: Cell<i64> = const { Cell::new(0) };
    // Registered on a thread's first fold (rare): hands its residue back when it exits, so
    // short-lived threads leave no drift behind.
    static FLUSH_ON_EXIT: FlushOnExit = const { FlushOnExit };
}

struct FlushOnExit;

impl Drop for FlushOnExit {
    fn drop(&mut self) {
        let rest = LOCAL.try_with(|c| c.replace(0)).unwrap_or(0);
        TOTAL.fetch_add(rest, Ordering::Relaxed);
    }
}

/// Counts live bytes (as requested, like Redis without `malloc_size`) of the wrapped
/// allocator: `#[global_allocator] static A: Counting<MiMalloc> = Counting(MiMalloc);`.
pub struct Counting<A>(pub A);

#[inline]
fn note(delta: i64) {
    let folded = LOCAL.try_with(|c| {
        let v = c.get() + delta;
        if v.abs() < FOLD {
            c.set(v);
            false
        } else {
            c.set(0);
            let now = TOTAL.fetch_add(v, Ordering::Relaxed) + v;
            if v > 0 && now > PEAK.load(Ordering::Relaxed) {
                PEAK.fetch_max(now, Ordering::Relaxed);
            }
            true
        }
    });
    match folded {
        Ok(false) => {}
        Ok(true) => fold_slow(),
        // The thread's locals are gone (its exit): count straight into the total.
        Err(_) => {
            TOTAL.fetch_add(delta, Ordering::Relaxed);
        }
    }
}

#[cold]
fn fold_slow() {
    if !INSTALLED.load(Ordering::Relaxed) {
        INSTALLED.store(true, Ordering::Relaxed);
    }
    // Registering the exit hook may allocate: LOCAL is already settled, so the nested
    // `note` sees a consistent cell.
    let _ = FLUSH_ON_EXIT.try_with(|_| {});
}

// Every method forwards to the wrapped allocator with the caller's arguments unchanged; the
// counting touches only a thread-local cell and an atomic, and never allocates itself.
// Not formatted: rustfmt would move each line's SAFETY note off the `unsafe` it explains.
#[rustfmt::skip]
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> { // SAFETY: see above
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 { // SAFETY: the caller's GlobalAlloc contract, passed on
        let p = self.0.alloc(layout);
        if !p.is_null() {
            note(layout.size() as i64);
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 { // SAFETY: the caller's GlobalAlloc contract, passed on
        let p = self.0.alloc_zeroed(layout);
        if !p.is_null() {
            note(layout.size() as i64);
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) { // SAFETY: the caller's GlobalAlloc contract, passed on
        self.0.dealloc(ptr, layout);
        note(-(layout.size() as i64));
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 { // SAFETY: the caller's GlobalAlloc contract, passed on
        let p = self.0.realloc(ptr, layout, new_size);
        if !p.is_null() {
            note(new_size as i64 - layout.size() as i64);
        }
        p
    }
}

/// Live heap bytes, as seen from this thread (the shared total plus this thread's unfolded
/// residue); `None` when [`Counting`] is not the global allocator.
pub fn used() -> Option<u64> {
    if !INSTALLED.load(Ordering::Relaxed) {
        return None;
    }
    let local = LOCAL.try_with(Cell::get).unwrap_or(0);
    Some((TOTAL.load(Ordering::Relaxed) + local).max(0) as u64)
}

/// The highest live total seen so far; `None` as for [`used`].
pub fn peak() -> Option<u64> {
    INSTALLED
        .load(Ordering::Relaxed)
        .then(|| PEAK.load(Ordering::Relaxed).max(0) as u64)
}

/// Bytes a drop must free before [`drop_releasing`] returns them to the OS at once: below
/// this, mimalloc's delayed purge is cheap wherever it lands (~50 µs of `madvise` per MB
/// measured here).
pub const RELEASE_AT: u64 = 16 << 20;

/// Drops `garbage` (a big value detached from the keyspace) on this thread and, when that
/// freed at least [`RELEASE_AT`] bytes, returns the freed pages to the OS here and now.
///
/// Why: mimalloc (v3) purges freed memory a second after it is freed (`purge_delay`), all
/// of a range at once, on whichever thread next frees a page. After a 1 M-field hash was
/// freed that was a command worker, stalled ~10 ms in `madvise` a second later (issue 17,
/// `perf record` during scripts/bench_tail.sh). The thread that did the freeing, off the
/// command path, pays for the purge instead.
pub fn drop_releasing<T>(garbage: T) {
    let before = used();
    drop(garbage);
    if let (Some(b), Some(a)) = (before, used()) {
        if b.saturating_sub(a) >= RELEASE_AT {
            purge();
        }
    }
}

/// Asks mimalloc to return freed memory to the OS now (`MEMORY PURGE`).
pub fn purge() {
    extern "C" {
        // mimalloc's `void mi_collect(bool force)`; the library is linked by `libmimalloc-sys`.
        fn mi_collect(force: bool);
    }
    // mi_collect takes a plain bool, is thread-safe and only releases pages mimalloc owns.
    unsafe { mi_collect(true) }; // SAFETY: see above
}
