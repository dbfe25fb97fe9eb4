//! The `hashtable` encoding of sets and hashes: one open-addressed array of slots, with a
//! member (and a hash's value) stored in its slot when it is short.
//!
//! Why: on a big collection a lookup used to chase a bucket, a slot and the member's heap
//! buffer (a hash: an index group, an index entry, a slot and the field's buffer), one cache
//! miss each, about twice Redis's (issue 17). Here a member of up to [`INLINE`] bytes lives
//! in its slot and linear probing keeps a lookup within its home slot's cache line or the
//! next: a hit, or a miss followed by an insert, costs about one miss.
//!
//! Layout: a power-of-two array of `Option<E>` (24 bytes a set slot, 48 a hash slot; `None`
//! is an empty slot), at most 5/8 full (it doubles past that) and shrunk once under 1/8 full
//! (Redis's `HASHTABLE_MIN_FILL` is 1/10). At 5/8 a hit probes 1.8 slots, a miss 4 (3/4
//! took 2.5 and 8.5); a member still costs less than the chained table's slot, bucket and
//! buffer at every fill (24 B / 0.31..0.63 = 38..77 B against 68..92). Removal shifts the rest of the cluster back, so
//! there are no tombstones and every entry sits between its home slot and the next empty
//! slot. No hash is stored (a slot is exactly its strings): growing, removing and scanning
//! rehash the entries they move or classify, which for short members costs less than the
//! cache miss a stored hash would add.
//!
//! SCAN uses Redis's reverse-binary cursor over home slots (`dictScan`): a call takes whole
//! homes (every entry whose home slot it is, found along the home's cluster). An entry present
//! for a whole scan is returned exactly once, whatever grows or shrinks between calls: growth
//! never revisits a home (as in Redis), and the cursor carries the size of the table it was
//! issued for (its low [`SIZE_BITS`] bits), so the first call after a shrink skips the entries
//! whose home in the larger table came before the cursor (Redis returns those twice).

use bytes::Bytes;
use rand::Rng;
use std::sync::OnceLock;

/// Bytes a [`Small`] keeps inline (24 bytes in all, with its tag and length).
pub const INLINE: usize = 22;

/// A byte string in 24 bytes: inline up to [`INLINE`] bytes (zero-padded, so two inline
/// strings compare by their fixed-size arrays, no `memcmp` call), else an exact-size heap
/// buffer. Only [`Small::new`] builds one, so equal bytes always have equal representations.
#[derive(Clone, PartialEq, Eq)]
pub struct Small(Repr);

#[derive(Clone, PartialEq, Eq)]
enum Repr {
    Inline { len: u8, data: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl Small {
    #[inline]
    pub fn new(b: &[u8]) -> Small {
        if b.len() <= INLINE {
            let mut data = [0; INLINE];
            data[..b.len()].copy_from_slice(b);
            Small(Repr::Inline {
                len: b.len() as u8,
                data,
            })
        } else {
            Small(Repr::Heap(b.into()))
        }
    }

    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, data } => &data[..*len as usize],
            Repr::Heap(b) => b,
        }
    }

    /// Bytes allocated outside the slot (0 when inline).
    #[inline]
    pub fn heap_len(&self) -> usize {
        match &self.0 {
            Repr::Inline { .. } => 0,
            Repr::Heap(b) => b.len(),
        }
    }

    /// Replaces the bytes; a heap buffer of the same length is overwritten in place (an
    /// HSET of fixed-width values then allocates and frees nothing).
    pub fn set(&mut self, b: &[u8]) {
        match &mut self.0 {
            Repr::Heap(old) if old.len() == b.len() => old.copy_from_slice(b),
            _ => *self = Small::new(b),
        }
    }

    pub fn to_bytes(&self) -> Bytes {
        Bytes::copy_from_slice(self.as_bytes())
    }
}

impl std::fmt::Debug for Small {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", Bytes::copy_from_slice(self.as_bytes()))
    }
}

/// What a lookup compares slots with: the inline form of a short member (compared as a
/// whole), or the bytes of a long one (only heap slots can hold it).
enum Probe<'a> {
    Short(Small),
    Long(&'a [u8]),
}

impl<'a> Probe<'a> {
    #[inline]
    fn new(m: &'a [u8]) -> Probe<'a> {
        if m.len() <= INLINE {
            Probe::Short(Small::new(m))
        } else {
            Probe::Long(m)
        }
    }

    #[inline]
    fn matches(&self, s: &Small) -> bool {
        match (self, &s.0) {
            (Probe::Short(q), _) => q == s,
            (Probe::Long(m), Repr::Heap(b)) => **b == **m,
            (Probe::Long(_), Repr::Inline { .. }) => false,
        }
    }

    /// The stored form (reuses the inline copy already built).
    #[inline]
    fn into_small(self) -> Small {
        match self {
            Probe::Short(s) => s,
            Probe::Long(m) => Small::new(m),
        }
    }
}

/// What a slot holds: a member, or a field with its value.
pub trait Entry {
    fn key(&self) -> &Small;
    /// Bytes this entry keeps on the heap.
    fn heap_len(&self) -> usize;
}

impl Entry for Small {
    #[inline]
    fn key(&self) -> &Small {
        self
    }
    fn heap_len(&self) -> usize {
        Small::heap_len(self)
    }
}

impl Entry for (Small, Small) {
    #[inline]
    fn key(&self) -> &Small {
        &self.0
    }
    fn heap_len(&self) -> usize {
        self.0.heap_len() + self.1.heap_len()
    }
}

/// One process-wide, randomly keyed hasher (members are client-controlled, and linear
/// probing must not let a client choose colliding members).
#[inline]
pub fn hash(m: &[u8]) -> u64 {
    static STATE: OnceLock<ahash::RandomState> = OnceLock::new();
    STATE.get_or_init(ahash::RandomState::new).hash_one(m)
}

/// The smallest table: Redis's `DICT_HT_INITIAL_SIZE`.
const MIN_CAP: usize = 4;
/// Bits of a SCAN cursor that hold log2 of the table size it was issued for.
pub const SIZE_BITS: u32 = 6;
/// Most slots [`Flat::with_capacity`] reserves up front (a size hint is client input).
const MAX_PRESIZE: usize = 1 << 20;

/// Most entries per 8 slots.
const MAX_FILL_8THS: usize = 5;

/// Slots for `n` entries: a power of two at least `MIN_CAP`, at most 5/8 full.
fn cap_for(n: usize) -> usize {
    let need = n.saturating_add((n * 3).div_ceil(5)); // n * 8/5, rounded up
    need.max(MIN_CAP)
        .checked_next_power_of_two()
        .expect("table size fits usize")
}

/// Entries in slot order.
pub type Iter<'a, E> = std::iter::Flatten<std::slice::Iter<'a, Option<E>>>;

#[derive(Clone)]
pub struct Flat<E> {
    slots: Box<[Option<E>]>,
    len: usize,
    /// Sum of the keys' lengths, for memory accounting.
    key_bytes: usize,
}

impl<E> Default for Flat<E> {
    fn default() -> Self {
        Flat {
            slots: Box::new([]),
            len: 0,
            key_bytes: 0,
        }
    }
}

impl<E: std::fmt::Debug> std::fmt::Debug for Flat<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.slots.iter().flatten()).finish()
    }
}

fn empty_slots<E>(cap: usize) -> Box<[Option<E>]> {
    std::iter::repeat_with(|| None).take(cap).collect()
}

/// A slot array this big hands its pages back to the OS when a resize frees it: the
/// allocator would keep them resident until some later allocation purges them (RSS after an
/// HSET fill stayed up to twice `used_memory`, the sum of the arrays outgrown).
const RELEASE_AT: usize = 1 << 20;

/// Frees an emptied slot array (every slot `None`), releasing a big one's pages first.
fn free_slots<E>(slots: Box<[Option<E>]>) {
    #[cfg(target_os = "linux")]
    if std::mem::size_of_val(&*slots) >= RELEASE_AT {
        debug_assert!(slots.iter().all(Option::is_none));
        let layout = std::alloc::Layout::for_value(&*slots);
        let start = Box::into_raw(slots) as *mut u8;
        // SAFETY: `start..start + layout.size()` is one live allocation that `Box::into_raw`
        // handed over with `layout`; nothing reads it as typed values again (every slot was
        // `None`, so no destructor is skipped). MADV_DONTNEED on whole pages inside it only
        // makes them read back as zeros, which the allocator may reuse as it likes (the range
        // stays mapped). It is then deallocated once, with the layout it was allocated with.
        unsafe /* SAFETY: above */ {
            let page = libc::sysconf(libc::_SC_PAGESIZE).max(4096) as usize;
            let lo = (start as usize).next_multiple_of(page);
            let hi = (start as usize + layout.size()) / page * page;
            if hi > lo {
                libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_DONTNEED);
            }
            std::alloc::dealloc(start, layout);
        }
        return;
    }
    drop(slots);
}

impl<E: Entry> Flat<E> {
    /// An empty table presized for `n` entries (Redis `dictExpand`).
    pub fn with_capacity(n: usize) -> Flat<E> {
        Flat {
            slots: empty_slots(cap_for(n.min(MAX_PRESIZE))),
            len: 0,
            key_bytes: 0,
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Slots allocated (for memory accounting).
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Sum of the keys' lengths.
    pub fn key_bytes(&self) -> usize {
        self.key_bytes
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len().wrapping_sub(1)
    }

    /// `Ok(slot)` of the entry matching `p`, or `Err(first empty slot of its probe)`.
    #[inline]
    fn find(&self, p: &Probe, h: u64) -> Result<usize, usize> {
        let mask = self.mask();
        let mut i = h as usize & mask;
        loop {
            match &self.slots[i] {
                None => return Err(i),
                Some(e) if p.matches(e.key()) => return Ok(i),
                Some(_) => i = (i + 1) & mask,
            }
        }
    }

    #[inline]
    fn position(&self, m: &[u8]) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        self.find(&Probe::new(m), hash(m)).ok()
    }

    /// Starts fetching the slot where a lookup of `m` begins (a command not run yet).
    #[inline]
    pub fn prefetch(&self, m: &[u8]) {
        if !self.slots.is_empty() {
            crate::types::prefetch_read(&self.slots[hash(m) as usize & self.mask()]);
        }
    }

    pub fn get(&self, m: &[u8]) -> Option<&E> {
        self.position(m).and_then(|i| self.slots[i].as_ref())
    }

    pub fn get_mut(&mut self, m: &[u8]) -> Option<&mut E> {
        self.position(m).and_then(|i| self.slots[i].as_mut())
    }

    pub fn contains(&self, m: &[u8]) -> bool {
        self.position(m).is_some()
    }

    /// The entry of `m`, made by `make` from the stored key if absent; true if it is new.
    #[inline]
    pub fn get_or_insert_with(
        &mut self,
        m: &[u8],
        make: impl FnOnce(Small) -> E,
    ) -> (&mut E, bool) {
        let h = hash(m);
        let p = Probe::new(m);
        let mut at = match (self.len, self.slots.len()) {
            (_, 0) => None,
            _ => match self.find(&p, h) {
                Ok(i) => return (self.slots[i].as_mut().expect("found slot is full"), false),
                Err(i) => Some(i),
            },
        };
        if (self.len + 1) * 8 > self.slots.len() * MAX_FILL_8THS {
            self.resize(cap_for(self.len + 1));
            at = None;
        }
        let i = at.unwrap_or_else(|| self.vacancy(h));
        self.len += 1;
        self.key_bytes += m.len();
        (self.slots[i].insert(make(p.into_small())), true)
    }

    /// Adds an entry whose key is known to be absent (conversions, loading).
    pub fn insert_new(&mut self, e: E) {
        debug_assert!(!self.contains(e.key().as_bytes()));
        if (self.len + 1) * 8 > self.slots.len() * MAX_FILL_8THS {
            self.resize(cap_for(self.len + 1));
        }
        let i = self.vacancy(hash(e.key().as_bytes()));
        self.key_bytes += e.key().as_bytes().len();
        self.slots[i] = Some(e);
        self.len += 1;
    }

    /// The first empty slot of hash `h`'s probe.
    #[inline]
    fn vacancy(&self, h: u64) -> usize {
        let mask = self.mask();
        let mut i = h as usize & mask;
        while self.slots[i].is_some() {
            i = (i + 1) & mask;
        }
        i
    }

    /// Removes and returns the entry of `m`.
    pub fn remove(&mut self, m: &[u8]) -> Option<E> {
        let i = self.position(m)?;
        Some(self.remove_at(i))
    }

    /// Removes the entry in slot `i` (full), shifting back the rest of its cluster.
    fn remove_at(&mut self, i: usize) -> E {
        let mask = self.mask();
        let gone = self.slots[i].take().expect("removing a full slot");
        let mut hole = i;
        let mut j = (i + 1) & mask;
        while let Some(e) = &self.slots[j] {
            let home = hash(e.key().as_bytes()) as usize & mask;
            // Move it back unless its home lies cyclically after the hole (in (hole, j]).
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.slots[hole] = self.slots[j].take();
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.len -= 1;
        self.key_bytes -= gone.key().as_bytes().len();
        if self.slots.len() > MIN_CAP && self.len * 8 < self.slots.len() {
            self.resize(cap_for(self.len));
        }
        gone
    }

    fn resize(&mut self, cap: usize) {
        let mut old = std::mem::replace(&mut self.slots, empty_slots(cap));
        for s in old.iter_mut() {
            if let Some(e) = s.take() {
                let i = self.vacancy(hash(e.key().as_bytes()));
                self.slots[i] = Some(e);
            }
        }
        free_slots(old);
    }

    pub fn iter(&self) -> Iter<'_, E> {
        self.slots.iter().flatten()
    }

    /// Under 1/16 full (only a presized table is): random picks walk it instead of drawing
    /// slots until a full one.
    fn sparse(&self) -> bool {
        self.slots.len() > 16 * self.len
    }

    /// A full slot chosen uniformly (the table is non-empty): random slots until a full one
    /// (at least 1/8 are, unless presized), or the k-th entry of a sparse table.
    fn random_slot<R: Rng + ?Sized>(&self, rng: &mut R) -> usize {
        debug_assert!(self.len > 0);
        if !self.sparse() {
            loop {
                let i = rng.gen_range(0..self.slots.len());
                if self.slots[i].is_some() {
                    return i;
                }
            }
        }
        let k = rng.gen_range(0..self.len);
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_some())
            .nth(k)
            .map(|(i, _)| i)
            .expect("k < len")
    }

    /// A uniformly chosen entry of a non-empty table.
    pub fn random<R: Rng + ?Sized>(&self, rng: &mut R) -> &E {
        let i = self.random_slot(rng);
        self.slots[i].as_ref().expect("random slot is full")
    }

    /// Removes and returns a uniformly chosen entry of a non-empty table.
    pub fn take_random<R: Rng + ?Sized>(&mut self, rng: &mut R) -> E {
        let i = self.random_slot(rng);
        self.remove_at(i)
    }

    /// `count` distinct entries chosen uniformly (`count <= len`), in random order.
    pub fn random_distinct<R: Rng + ?Sized>(&self, count: usize, rng: &mut R) -> Vec<&E> {
        let count = count.min(self.len);
        if count * 3 > self.len || self.sparse() {
            // Many of them, or a sparse table: sample positions among all the entries.
            let all: Vec<&E> = self.iter().collect();
            return rand::seq::index::sample(rng, all.len(), count)
                .into_iter()
                .map(|i| all[i])
                .collect();
        }
        let mut seen = std::collections::HashSet::with_capacity(count);
        let mut out = Vec::with_capacity(count);
        while out.len() < count {
            let i = self.random_slot(rng);
            if seen.insert(i) {
                out.push(self.slots[i].as_ref().expect("random slot is full"));
            }
        }
        out
    }

    /// One SCAN step (Redis `dictScan` loop over home slots): from `cursor`, passes every
    /// entry of each home visited to `f`, until at least `count` entries were passed,
    /// `count * 10` more homes were visited, or the scan wrapped (next cursor 0). Returns
    /// the next cursor: the reverse-binary position shifted left by [`SIZE_BITS`], over
    /// log2 of this table's size.
    pub fn scan_each<'a>(&'a self, cursor: u64, count: usize, mut f: impl FnMut(&'a E)) -> u64 {
        if self.len == 0 {
            return 0;
        }
        let mask = self.mask() as u64;
        let log2 = u64::from(self.slots.len().trailing_zeros());
        let issued = cursor & ((1 << SIZE_BITS) - 1);
        let mut v = cursor >> SIZE_BITS;
        // Issued for a larger table: entries whose home there precedes the cursor were
        // returned already (homes are visited in ascending reversed-bit order).
        let mut done_before = (issued > log2).then(|| {
            let old = u64::MAX >> (64 - issued);
            (old, (v & old).reverse_bits())
        });
        let mut budget = count.saturating_mul(10);
        let mut seen = 0;
        loop {
            let home = (v & mask) as usize;
            let mut i = home;
            while let Some(e) = &self.slots[i] {
                let h = hash(e.key().as_bytes());
                let skip = done_before.is_some_and(|(old, at)| (h & old).reverse_bits() < at);
                if h as usize & mask as usize == home && !skip {
                    f(e);
                    seen += 1;
                }
                i = (i + 1) & mask as usize;
            }
            done_before = None;
            // Increment the reversed cursor: high bits first, so a resize between calls
            // neither skips nor restarts homes already covered.
            v |= !mask;
            v = v.reverse_bits().wrapping_add(1).reverse_bits();
            if v == 0 {
                return 0;
            }
            if budget == 0 || seen >= count {
                return (v << SIZE_BITS) | log2;
            }
            budget -= 1;
        }
    }

    /// Bytes the entries keep outside their slots.
    pub fn heap_bytes(&self) -> usize {
        self.iter().map(Entry::heap_len).sum()
    }

    #[cfg(test)]
    pub fn check(&self) {
        let mask = self.mask();
        let mut n = 0;
        for (i, s) in self.slots.iter().enumerate() {
            let Some(e) = s else { continue };
            n += 1;
            // No empty slot between the entry's home and the entry.
            let mut j = hash(e.key().as_bytes()) as usize & mask;
            while j != i {
                assert!(self.slots[j].is_some(), "gap before slot {i}");
                j = (j + 1) & mask;
            }
        }
        assert_eq!(n, self.len);
        let keys: usize = self.iter().map(|e| e.key().as_bytes().len()).sum();
        assert_eq!(keys, self.key_bytes);
        assert!(self.slots.is_empty() || self.slots.len().is_power_of_two());
        assert!(self.len * 8 <= self.slots.len() * MAX_FILL_8THS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;
    use std::collections::{HashMap, HashSet};

    fn key(i: usize) -> Vec<u8> {
        format!("member:{i:06}").into_bytes()
    }

    fn add(t: &mut Flat<Small>, m: &[u8]) -> bool {
        t.get_or_insert_with(m, |s| s).1
    }

    fn full_scan(t: &Flat<Small>, count: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut c = 0;
        loop {
            c = t.scan_each(c, count, |m| out.push(m.as_bytes().to_vec()));
            if c == 0 {
                return out;
            }
        }
    }

    #[test]
    fn slots_are_their_strings() {
        assert_eq!(std::mem::size_of::<Small>(), 24);
        assert_eq!(std::mem::size_of::<Option<Small>>(), 24);
        assert_eq!(std::mem::size_of::<Option<(Small, Small)>>(), 48);
    }

    #[test]
    fn small_keeps_bytes_inline_or_on_the_heap() {
        for len in [0, 1, 21, 22, 23, 64, 1000] {
            let b: Vec<u8> = (0..len).map(|i| (i * 7 + 1) as u8).collect();
            let s = Small::new(&b);
            assert_eq!(s.as_bytes(), &b[..]);
            assert_eq!(s.heap_len(), if len > INLINE { len } else { 0 });
            assert_eq!(s, Small::new(&b), "equal bytes, equal representation");
            let mut other = b.clone();
            if let Some(x) = other.last_mut() {
                *x ^= 1;
                assert_ne!(s, Small::new(&other));
            }
        }
        // A trailing zero byte is part of the string, not padding.
        assert_ne!(Small::new(b"a"), Small::new(b"a\0"));
        assert_ne!(Small::new(b""), Small::new(b"\0"));
        let mut s = Small::new(&[b'x'; 40]);
        s.set(&[b'y'; 40]);
        assert_eq!(s.as_bytes(), &[b'y'; 40][..]);
        s.set(b"short");
        assert_eq!(s.as_bytes(), b"short");
        s.set(&[b'z'; 30]);
        assert_eq!(s.as_bytes(), &[b'z'; 30][..]);
    }

    #[test]
    fn matches_a_model_under_churn() {
        let mut rng = SmallRng::seed_from_u64(3);
        let mut t: Flat<(Small, Small)> = Flat::default();
        let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        for step in 0..60_000 {
            let n = rng.gen_range(0..3_000);
            // Short and long members, binary ones, the empty string.
            let m = match n % 4 {
                0 => format!("m{n}").into_bytes(),
                1 => format!("{:040}", n).into_bytes(),
                2 => vec![0, (n % 251) as u8, 0],
                _ => vec![b'\0'; n % 30],
            };
            match rng.gen_range(0..10) {
                0..=5 => {
                    let v = format!("v{step}").into_bytes();
                    let (e, new) = t.get_or_insert_with(&m, |k| (k, Small::new(&v)));
                    if !new {
                        e.1.set(&v);
                    }
                    assert_eq!(new, model.insert(m, v).is_none());
                }
                6..=8 => {
                    let got = t.remove(&m).map(|e| e.1.as_bytes().to_vec());
                    assert_eq!(got, model.remove(&m));
                }
                _ => {
                    if !t.is_empty() {
                        let e = t.take_random(&mut rng);
                        assert!(model.remove(e.0.as_bytes()).is_some());
                    }
                }
            }
            assert_eq!(t.len(), model.len());
            if step % 997 == 0 {
                t.check();
            }
        }
        t.check();
        for (m, v) in &model {
            assert_eq!(t.get(m).map(|e| e.1.as_bytes()), Some(&v[..]));
        }
        let all: HashSet<Vec<u8>> = t.iter().map(|e| e.0.as_bytes().to_vec()).collect();
        assert_eq!(all.len(), model.len());
        assert_eq!(
            t.heap_bytes(),
            model
                .iter()
                .map(|(m, v)| [m, v]
                    .iter()
                    .map(|b| if b.len() > INLINE { b.len() } else { 0 })
                    .sum::<usize>())
                .sum::<usize>()
        );
    }

    #[test]
    fn grows_past_five_eighths_and_shrinks_under_an_eighth() {
        let mut t: Flat<Small> = Flat::default();
        for i in 0..5000 {
            assert!(add(&mut t, &key(i)));
            assert!(!add(&mut t, &key(i)));
            assert!(t.len() * 8 <= t.capacity() * 5);
        }
        assert_eq!(t.capacity(), 8192);
        t.check();
        for i in 0..4990 {
            assert!(t.remove(&key(i)).is_some());
            assert!(t.remove(&key(i)).is_none());
        }
        t.check();
        assert!(t.capacity() <= 32, "shrunk: {}", t.capacity());
        assert!((4990..5000).all(|i| t.contains(&key(i))));
        let presized: Flat<Small> = Flat::with_capacity(100);
        assert_eq!(presized.capacity(), 256);
        assert_eq!(Flat::<Small>::with_capacity(160).capacity(), 256);
        assert_eq!(Flat::<Small>::with_capacity(161).capacity(), 512);
        assert_eq!(Flat::<Small>::with_capacity(usize::MAX).capacity(), 1 << 21);
    }

    #[test]
    fn big_arrays_outgrown_are_released_and_entries_kept() {
        // Growing past 65 536 slots frees a 1.5 MiB array (the RELEASE_AT path), twice.
        let mut t: Flat<(Small, Small)> = Flat::default();
        let n = 200_000;
        for i in 0..n {
            t.get_or_insert_with(&key(i), |k| (k, Small::new(&key(i + 1))));
        }
        assert!(t.capacity() * std::mem::size_of::<Option<(Small, Small)>>() >= 4 * RELEASE_AT);
        t.check();
        for i in 0..n {
            assert_eq!(
                t.get(&key(i)).map(|e| e.1.as_bytes()),
                Some(&key(i + 1)[..])
            );
        }
        // And the shrinks back down free big arrays the same way.
        for i in 0..n - 10 {
            assert!(t.remove(&key(i)).is_some());
        }
        t.check();
        assert_eq!(t.iter().count(), 10);
    }

    #[test]
    fn random_picks_are_uniform_enough_and_distinct_when_asked() {
        let mut rng = SmallRng::seed_from_u64(9);
        // Dense and sparse (presized) tables both reach every member.
        for cap in [0, 5000] {
            let mut t: Flat<Small> = Flat::with_capacity(cap);
            for i in 0..50 {
                add(&mut t, &key(i));
            }
            let mut hits: HashMap<Vec<u8>, usize> = HashMap::new();
            for _ in 0..20_000 {
                *hits
                    .entry(t.random(&mut rng).as_bytes().to_vec())
                    .or_default() += 1;
            }
            assert_eq!(hits.len(), 50);
            // 400 expected each: far from 0 and 1000 unless the choice is skewed.
            assert!(hits.values().all(|&n| (250..600).contains(&n)), "{hits:?}");
            for count in [1, 10, 16, 17, 49, 50] {
                let picks = t.random_distinct(count, &mut rng);
                let set: HashSet<&[u8]> = picks.iter().map(|m| m.as_bytes()).collect();
                assert_eq!((picks.len(), set.len()), (count, count));
            }
        }
    }

    #[test]
    fn scan_returns_everything_once_without_churn() {
        let mut t: Flat<Small> = Flat::default();
        for i in 0..1000 {
            add(&mut t, &key(i));
        }
        for count in [1, 7, 10, 5000] {
            let got = full_scan(&t, count);
            assert_eq!(got.len(), 1000);
            assert_eq!(got.iter().collect::<HashSet<_>>().len(), 1000);
        }
    }

    #[test]
    fn scan_returns_stable_members_exactly_once_under_churn() {
        // Members present throughout come back once each, while others come and go and the
        // table shrinks (several sizes at once, too) and grows between calls.
        for (shrink_per_call, grow_per_call) in [(30, 20), (200, 5), (3, 10)] {
            let mut t: Flat<Small> = Flat::default();
            for i in 0..300 {
                add(&mut t, format!("stable:{i}").as_bytes());
            }
            for i in 0..4000 {
                add(&mut t, format!("churn:{i}").as_bytes());
            }
            let mut seen: HashMap<Vec<u8>, usize> = HashMap::new();
            let (mut cursor, mut step, mut sizes) = (0u64, 0usize, HashSet::new());
            loop {
                cursor = t.scan_each(cursor, 5, |m| {
                    *seen.entry(m.as_bytes().to_vec()).or_default() += 1;
                });
                sizes.insert(t.capacity());
                if cursor == 0 {
                    break;
                }
                step += 1;
                if step < 150 {
                    for j in 0..shrink_per_call {
                        t.remove(format!("churn:{}", step * shrink_per_call + j).as_bytes());
                    }
                } else {
                    for j in 0..grow_per_call {
                        add(&mut t, format!("new:{step}:{j}").as_bytes());
                    }
                }
                t.check();
                assert!(step < 100_000, "scan does not terminate");
            }
            assert!(sizes.len() >= 2, "the scan crossed resizes: {sizes:?}");
            for i in 0..300 {
                let m = format!("stable:{i}").into_bytes();
                assert_eq!(seen.get(&m), Some(&1), "stable:{i}");
            }
            assert!(seen.values().all(|&n| n == 1), "nothing returned twice");
        }
    }

    #[test]
    fn scan_survives_foreign_cursors() {
        let mut t: Flat<Small> = Flat::default();
        for i in 0..100 {
            add(&mut t, &key(i));
        }
        // Any cursor a client makes up ends the scan without a panic.
        for c in [1u64, 63, 64, u64::MAX, 1 << 63, 12345 << SIZE_BITS | 40] {
            let mut cursor = c;
            for _ in 0..10_000 {
                cursor = t.scan_each(cursor, 10, |_| {});
                if cursor == 0 {
                    break;
                }
            }
            assert_eq!(cursor, 0);
        }
    }
}
