//! Sorted set (Redis `zset`): a member → score map for O(1) lookups plus an order-statistic
//! B+tree over (score, member) ([`tree`]) for O(log n + m) rank and range operations.
//!
//! Redis keeps small sets in a listpack and large ones in a skiplist; we keep one
//! representation and only track the encoding name `OBJECT ENCODING` reports (the command
//! layer decides conversions from the `zset-max-listpack-*` thresholds; Redis never converts
//! an existing set back). The encoding still shows in two behaviours that we reproduce:
//! a listpack stores integral scores as integers, so `-0` becomes `0`, and lex ranges over
//! a listpack are found by a linear scan (which matters only when scores differ).

mod tree;

pub use tree::{cmp_key, Item, Pos};

use crate::types::set::table::{Key, Table};
use bytes::Bytes;
use tree::Tree;

/// The member → score table's view of a member whose bytes the tree's [`Item`] owns: each
/// member is stored once, and its `Bytes` stays the only handle (a second handle would add a
/// shared-ownership header per member). Half the size of a `Bytes`, too.
///
/// Invariant, kept by every [`ZSet`] method: an alias in `map` points into the buffer of a
/// `Bytes` held by the tree item of that member, for as long as the alias is in the map. A
/// `Bytes` buffer never moves while a handle to it lives, so items moving between leaves keep
/// their aliases valid, and a cloned `ZSet` clones the tree's handles (same buffers) too.
#[derive(Clone, Copy)]
struct Alias {
    ptr: *const u8,
    len: usize,
}

/// The bytes, not the address: two equal sets print alike (tests compare `Debug` output).
impl std::fmt::Debug for Alias {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", Bytes::copy_from_slice(self.key()))
    }
}

unsafe impl Send for Alias {} // SAFETY: a read-only view of bytes its set's tree keeps alive
unsafe impl Sync for Alias {} // SAFETY: as for Send: only shared reads of immutable bytes

impl Alias {
    #[inline]
    fn of(b: &Bytes) -> Alias {
        Alias {
            ptr: b.as_ptr(),
            len: b.len(),
        }
    }
}

impl Key for Alias {
    #[inline]
    fn key(&self) -> &[u8] {
        unsafe /* SAFETY: the Alias invariant: the tree holds these bytes while the alias is in the map */ {
            std::slice::from_raw_parts(self.ptr, self.len)
        }
    }
}

/// A score interval (`zrangespec`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreRange {
    pub min: f64,
    pub max: f64,
    pub minex: bool,
    pub maxex: bool,
}

impl ScoreRange {
    #[inline]
    pub fn gte_min(&self, v: f64) -> bool {
        if self.minex {
            v > self.min
        } else {
            v >= self.min
        }
    }

    #[inline]
    pub fn lte_max(&self, v: f64) -> bool {
        if self.maxex {
            v < self.max
        } else {
            v <= self.max
        }
    }
}

/// One end of a lex range: `-`, `+`, `[x` or `(x`.
#[derive(Clone, Debug, PartialEq)]
pub enum LexBound {
    NegInf,
    PosInf,
    Incl(Bytes),
    Excl(Bytes),
}

/// A lex interval (`zlexrangespec`).
#[derive(Clone, Debug, PartialEq)]
pub struct LexRange {
    pub min: LexBound,
    pub max: LexBound,
}

/// `sdscmplex` of a member against a bound's value (`-`/`+` below/above everything).
fn cmp_lex(v: &[u8], b: &LexBound) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    match b {
        LexBound::NegInf => Greater,
        LexBound::PosInf => Less,
        LexBound::Incl(x) | LexBound::Excl(x) => v.cmp(x),
    }
}

impl LexRange {
    pub fn gte_min(&self, v: &[u8]) -> bool {
        let c = cmp_lex(v, &self.min);
        match self.min {
            LexBound::Incl(_) => c.is_ge(),
            _ => c.is_gt(),
        }
    }

    pub fn lte_max(&self, v: &[u8]) -> bool {
        let c = cmp_lex(v, &self.max);
        match self.max {
            LexBound::Incl(_) => c.is_le(),
            _ => c.is_lt(),
        }
    }

    /// Whether the interval can hold anything at all (`zslIsInLexRange`'s first test).
    fn non_empty(&self) -> bool {
        use LexBound::*;
        let rank = |b: &LexBound| match b {
            NegInf => 0,
            Incl(_) | Excl(_) => 1,
            PosInf => 2,
        };
        let (a, b) = (&self.min, &self.max);
        let cmp = match (a, b) {
            (Incl(x) | Excl(x), Incl(y) | Excl(y)) => x.cmp(y),
            _ => rank(a).cmp(&rank(b)),
        };
        let exclusive = !matches!(a, Incl(_)) || !matches!(b, Incl(_));
        cmp.is_lt() || (cmp.is_eq() && !exclusive)
    }
}

/// Where [`ZSet::lookup`] found a member (its slot) or would put it (its hash).
#[derive(Clone, Copy, Debug)]
pub struct Place(u64);

#[derive(Clone, Debug, Default)]
pub struct ZSet {
    /// Member → score: Redis's `zset->dict`, with its bucket walk for ZSCAN.
    map: Table<f64, Alias>,
    tree: Tree,
    skiplist: bool,
    member_bytes: usize,
}

impl PartialEq for ZSet {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .zip(other.iter())
                .all(|(a, b)| a.member == b.member && a.score.to_bits() == b.score.to_bits())
    }
}

impl ZSet {
    /// An empty set reporting `listpack` (or `skiplist`).
    pub fn new(skiplist: bool) -> ZSet {
        ZSet {
            skiplist,
            ..ZSet::default()
        }
    }

    pub fn len(&self) -> usize {
        self.tree.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tree.is_empty()
    }

    pub fn is_skiplist(&self) -> bool {
        self.skiplist
    }

    pub fn encoding(&self) -> &'static str {
        if self.skiplist {
            "skiplist"
        } else {
            "listpack"
        }
    }

    /// Converts to the `skiplist` encoding (one way, as Redis).
    pub fn convert_to_skiplist(&mut self) {
        self.skiplist = true;
    }

    /// Marks a freshly built set `listpack` (Redis's `zsetConvertToListpackIfNeeded` on
    /// store results): integral scores are then stored as integers, so `-0` reads back `0`.
    pub fn convert_to_listpack(&mut self) {
        self.skiplist = false;
        let zeros: Vec<Bytes> = self
            .iter()
            .filter(|it| it.score == 0.0 && it.score.is_sign_negative())
            .map(|it| it.member.clone())
            .collect();
        for m in zeros {
            self.tree.set_score_same_order(-0.0, &m, 0.0);
            if let Some(s) = self.map.value_mut(&m[..]) {
                *s = 0.0;
            }
        }
    }

    /// Total member bytes (memory accounting).
    pub fn member_bytes(&self) -> usize {
        self.member_bytes
    }

    /// Longest member (for the listpack value threshold).
    pub fn max_member_len(&self) -> usize {
        self.map.iter().map(|m| m.key().len()).max().unwrap_or(0)
    }

    /// The score as stored: a listpack keeps integral doubles as integers (`-0` → `0`).
    #[inline]
    fn stored(&self, score: f64) -> f64 {
        if !self.skiplist && score == 0.0 {
            0.0
        } else {
            score
        }
    }

    #[inline]
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.map.value(member).copied()
    }

    /// One member lookup for ZADD's read-then-write: `Ok((place, score))` if present,
    /// `Err(place)` if not. A place is valid until the set next changes.
    pub fn lookup(&self, member: &[u8]) -> Result<(Place, f64), Place> {
        match self.map.lookup(member) {
            Ok(slot) => {
                let score = *self.map.value_at(slot);
                Ok((Place(slot as u64), score))
            }
            Err(h) => Err(Place(h)),
        }
    }

    /// [`ZSet::insert`] of a member [`ZSet::lookup`] found absent at `place`.
    pub fn insert_at(&mut self, place: Place, member: Bytes, score: f64) {
        let score = self.stored(score);
        self.member_bytes += member.len();
        self.map.insert_hashed(Alias::of(&member), place.0, score);
        self.tree.insert(Item { score, member });
    }

    /// [`ZSet::rescore`] of a member [`ZSet::lookup`] found at `place`, scored `old`.
    pub fn rescore_at(&mut self, place: Place, member: &[u8], old: f64, new: f64) {
        let new = self.stored(new);
        *self.map.value_at_mut(place.0 as usize) = new;
        self.tree.rescore(old, member, new);
    }

    /// Adds a member that is not in the set.
    pub fn insert(&mut self, member: Bytes, score: f64) {
        let score = self.stored(score);
        self.member_bytes += member.len();
        self.map.insert_new_with(Alias::of(&member), score);
        self.tree.insert(Item { score, member });
    }

    /// Adds or rescores a member; true if it was new.
    pub fn upsert(&mut self, member: &[u8], score: f64) -> bool {
        match self.score(member) {
            Some(old) => {
                if old != score {
                    self.rescore(member, old, score);
                }
                false
            }
            None => {
                self.insert(Bytes::copy_from_slice(member), score);
                true
            }
        }
    }

    /// Changes the score of a member currently scored `old`.
    pub fn rescore(&mut self, member: &[u8], old: f64, new: f64) {
        let new = self.stored(new);
        let Some(slot) = self.map.value_mut(member) else {
            return;
        };
        *slot = new;
        self.tree.rescore(old, member, new);
    }

    /// Removes a member; returns its score.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let score = self.map.take(member)?;
        self.member_bytes -= member.len();
        self.tree.remove_key(score, member);
        Some(score)
    }

    /// 0-based ascending rank and score of a member.
    pub fn rank(&self, member: &[u8]) -> Option<(usize, f64)> {
        let score = self.score(member)?;
        self.tree.rank(score, member).map(|r| (r, score))
    }

    pub fn get(&self, rank: usize) -> Option<&Item> {
        self.tree.get(rank)
    }

    pub fn first(&self) -> Option<&Item> {
        self.tree.first()
    }

    pub fn last(&self) -> Option<&Item> {
        self.tree.last()
    }

    /// All items in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = &Item> + '_ {
        self.tree.iter_from(0)
    }

    /// Items in ascending order from `rank`.
    pub fn iter_from(&self, rank: usize) -> impl Iterator<Item = &Item> + '_ {
        self.tree.iter_from(rank)
    }

    /// Items in descending order from `rank` down.
    pub fn iter_rev_from(&self, rank: usize) -> impl Iterator<Item = &Item> + '_ {
        self.tree.iter_rev_from(rank)
    }

    /// Ranks `[start, end)` of the items inside a score range.
    pub fn score_span(&self, r: &ScoreRange) -> (usize, usize) {
        let start = self.score_first(r).rank;
        let end = self.score_end(r).rank;
        (start, end.max(start))
    }

    /// Position of the first item at or above the range's min.
    pub fn score_first(&self, r: &ScoreRange) -> Pos {
        self.tree.lower_bound(|s, _| !r.gte_min(s))
    }

    /// Position after the last item at or below the range's max.
    pub fn score_end(&self, r: &ScoreRange) -> Pos {
        self.tree.lower_bound(|s, _| r.lte_max(s))
    }

    /// The position of rank `rank` (the end when past it).
    pub fn pos_at(&self, rank: usize) -> Pos {
        self.tree.pos_at(rank)
    }

    /// Items from a position upwards.
    pub fn iter_at(&self, pos: Pos) -> impl Iterator<Item = &Item> + '_ {
        self.tree.iter_at(pos)
    }

    /// Items before a position, downwards.
    pub fn iter_rev_before(&self, pos: Pos) -> impl Iterator<Item = &Item> + '_ {
        self.tree.iter_rev_before(pos)
    }

    /// Rank of the first item in a lex range (`zzlFirstInLexRange`/`zslFirstInLexRange`).
    pub fn lex_first(&self, r: &LexRange) -> Option<usize> {
        if !self.lex_overlaps(r) {
            return None;
        }
        let idx = if self.skiplist {
            self.tree.count_while(|_, m| !r.gte_min(m))
        } else {
            self.iter().position(|it| r.gte_min(&it.member))?
        };
        self.get(idx)
            .filter(|it| r.lte_max(&it.member))
            .map(|_| idx)
    }

    /// Rank of the last item in a lex range (`zzlLastInLexRange`/`zslLastInLexRange`).
    pub fn lex_last(&self, r: &LexRange) -> Option<usize> {
        if !self.lex_overlaps(r) {
            return None;
        }
        let idx = if self.skiplist {
            self.tree.count_while(|_, m| r.lte_max(m)).checked_sub(1)?
        } else {
            let n = self.len();
            n - 1
                - self
                    .iter_rev_from(n - 1)
                    .position(|it| r.lte_max(&it.member))?
        };
        self.get(idx)
            .filter(|it| r.gte_min(&it.member))
            .map(|_| idx)
    }

    /// `zslIsInLexRange`: the interval is non-empty, the last member is at or above min and
    /// the first at or below max.
    fn lex_overlaps(&self, r: &LexRange) -> bool {
        if !r.non_empty() {
            return false;
        }
        match (self.first(), self.last()) {
            (Some(a), Some(z)) => r.gte_min(&z.member) && r.lte_max(&a.member),
            _ => false,
        }
    }

    /// Removes `n` items from `rank` on, handing each to `f` in ascending order.
    pub fn remove_range(&mut self, rank: usize, n: usize, mut f: impl FnMut(Item)) {
        let map = &mut self.map;
        let bytes = &mut self.member_bytes;
        self.tree.remove_range(rank, n, |it| {
            map.take(&it.member);
            *bytes -= it.member.len();
            f(it);
        });
    }

    /// One `ZSCAN` step over a skiplist-encoded set: Redis walks `zset->dict`, and so do we
    /// (the member → score table, in reverse-binary bucket order), so a step returns at
    /// least `count` members (a bucket's worth more at most) whatever their scores, and a
    /// member present for a whole iteration is returned at least once. Appends (member,
    /// score) pairs to `out`; returns the next cursor (0 at the end).
    pub fn scan(&self, cursor: u64, count: usize, out: &mut Vec<(Bytes, f64)>) -> u64 {
        self.map.scan_each(cursor, count.max(1), |m, &s| {
            out.push((Bytes::copy_from_slice(m.key()), s))
        })
    }
}

#[cfg(test)]
mod tests;
