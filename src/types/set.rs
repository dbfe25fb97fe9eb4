//! Set values with Redis 7.2's three encodings and its conversion rules (`t_set.c`):
//! - `intset`: sorted `i64`s while every member is an integer (`string2ll`) and there are at
//!   most `set-max-intset-entries`; iterates in ascending order.
//! - `listpack`: small sets (≤ `set-max-listpack-entries` members of ≤
//!   `set-max-listpack-value` bytes) in insertion order.
//! - `hashtable`: everything else ([`flat::Flat`]; [`table::Table`] is the sorted set's
//!   member → score dict).
//!
//! Sets only ever move "up" (intset → listpack → hashtable, intset → hashtable); only a set
//! built afresh by a command (SINTERSTORE, SPOP's rebuilt remainder…) starts small again, as
//! in Redis. Algorithms whose choices show in the result (encodings, orders) follow Redis's.

pub mod flat;
pub mod table;

use crate::num::parse_i64;
use bytes::Bytes;
use flat::{Flat, Small};
use rand::Rng;

/// The three size thresholds, read lazily: the hot path (SADD of an existing member) usually
/// needs none or one of them.
pub trait Limits {
    fn intset_entries(&mut self) -> usize;
    fn listpack_entries(&mut self) -> usize;
    fn listpack_value(&mut self) -> usize;
}

/// Limits with fixed values (tests, and callers that read the config once).
#[derive(Clone, Copy, Debug)]
pub struct Fixed {
    pub intset_entries: usize,
    pub listpack_entries: usize,
    pub listpack_value: usize,
}

impl Fixed {
    /// Redis's defaults.
    pub const DEFAULT: Fixed = Fixed {
        intset_entries: 512,
        listpack_entries: 128,
        listpack_value: 64,
    };
}

impl Limits for Fixed {
    fn intset_entries(&mut self) -> usize {
        self.intset_entries
    }
    fn listpack_entries(&mut self) -> usize {
        self.listpack_entries
    }
    fn listpack_value(&mut self) -> usize {
        self.listpack_value
    }
}

/// Redis's `intsetMaxEntries`: the configured limit, capped at 2^30.
fn intset_max(lim: &mut impl Limits) -> usize {
    lim.intset_entries().min(1 << 30)
}

/// A member as stored: an intset integer or a string.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Member<'a> {
    Int(i64),
    Str(&'a [u8]),
}

impl Member<'_> {
    /// The member's bytes (no copy for stored strings).
    pub fn to_bytes(self) -> Bytes {
        match self {
            Member::Int(i) => int_bytes(i),
            Member::Str(b) => Bytes::copy_from_slice(b),
        }
    }

    /// Runs `f` on the member's text, formatting integers on the stack.
    pub fn with_text<R>(self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            Member::Int(i) => f(itoa::Buffer::new().format(i).as_bytes()),
            Member::Str(b) => f(b),
        }
    }
}

fn int_bytes(i: i64) -> Bytes {
    Bytes::copy_from_slice(itoa::Buffer::new().format(i).as_bytes())
}

/// Characters of an integer's decimal form, sign included (Redis `sdigits10`).
fn digits(i: i64) -> usize {
    itoa::Buffer::new().format(i).len()
}

#[derive(Clone, Debug)]
enum Repr {
    Intset(Vec<i64>),
    Listpack(Vec<Bytes>),
    Table(Box<Flat<Small>>),
}

#[derive(Clone, Debug)]
pub struct SetValue(Repr);

/// Sets are equal when they hold the same members, whatever their encodings.
impl PartialEq for SetValue {
    fn eq(&self, other: &SetValue) -> bool {
        self.len() == other.len() && self.iter().all(|m| other.contains_member(m))
    }
}

impl SetValue {
    /// Starts fetching where `m` would be in a big set (see [`Flat::prefetch`]).
    #[inline]
    pub fn prefetch_member(&self, m: &[u8]) {
        if let Repr::Table(t) = &self.0 {
            t.prefetch(m);
        }
    }

    /// An empty intset (a result set being built, as Redis's `createIntsetObject`).
    pub fn new_intset() -> SetValue {
        SetValue(Repr::Intset(Vec::new()))
    }

    /// An empty listpack set (`createSetListpackObject`).
    pub fn new_listpack() -> SetValue {
        SetValue(Repr::Listpack(Vec::new()))
    }

    /// Redis `setTypeCreate`: the encoding a new set gets from its first member and the number
    /// of members about to be added.
    pub fn create(first: &[u8], size_hint: usize, lim: &mut impl Limits) -> SetValue {
        if parse_i64(first).is_some() && size_hint <= lim.intset_entries() {
            return SetValue::new_intset();
        }
        if size_hint <= lim.listpack_entries() {
            return SetValue::new_listpack();
        }
        SetValue(Repr::Table(Box::new(Flat::with_capacity(size_hint))))
    }

    /// Redis `setTypeMaybeConvert`: about to add up to `size_hint` members, go straight to a
    /// hashtable when that many could not fit the current encoding.
    pub fn maybe_convert(&mut self, size_hint: usize, lim: &mut impl Limits) {
        let convert = match &self.0 {
            Repr::Intset(_) => size_hint > lim.intset_entries(),
            Repr::Listpack(_) => size_hint > lim.listpack_entries(),
            Repr::Table(_) => false,
        };
        if convert {
            self.convert_to_table(size_hint);
        }
    }

    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Intset(v) => v.len(),
            Repr::Listpack(v) => v.len(),
            Repr::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The name `OBJECT ENCODING` reports.
    pub fn encoding(&self) -> &'static str {
        match &self.0 {
            Repr::Intset(_) => "intset",
            Repr::Listpack(_) => "listpack",
            Repr::Table(_) => "hashtable",
        }
    }

    pub fn is_intset(&self) -> bool {
        matches!(self.0, Repr::Intset(_))
    }

    /// Rough heap footprint.
    pub fn approx_size(&self) -> usize {
        match &self.0 {
            Repr::Intset(v) => v.len() * 8,
            Repr::Listpack(v) => v.iter().map(|b| b.len() + 2).sum(),
            Repr::Table(t) => t.key_bytes() + t.capacity() * std::mem::size_of::<Small>(),
        }
    }

    /// Bytes of a hashtable's slot array (0 for the small encodings).
    pub fn table_bytes(&self) -> usize {
        match &self.0 {
            Repr::Table(t) => {
                std::mem::size_of::<Flat<Small>>()
                    + t.capacity() * std::mem::size_of::<Option<Small>>()
            }
            _ => 0,
        }
    }

    /// Converts to a hashtable presized for `cap` members (`setTypeConvertAndExpand`).
    fn convert_to_table(&mut self, cap: usize) {
        let mut t = Flat::with_capacity(cap.max(self.len()));
        match &mut self.0 {
            Repr::Intset(v) => v
                .iter()
                .for_each(|&i| t.insert_new(Small::new(itoa::Buffer::new().format(i).as_bytes()))),
            Repr::Listpack(v) => v.drain(..).for_each(|m| t.insert_new(Small::new(&m))),
            Repr::Table(_) => return,
        }
        self.0 = Repr::Table(Box::new(t));
    }

    /// Adds a member given as text (`setTypeAdd`); true if it was not there.
    pub fn add(&mut self, m: &[u8], lim: &mut impl Limits) -> bool {
        match &mut self.0 {
            Repr::Table(t) => t.get_or_insert_with(m, |s| s).1,
            Repr::Listpack(v) => {
                if v.iter().any(|x| x[..] == *m) {
                    return false;
                }
                let n = v.len();
                if n < lim.listpack_entries() && m.len() <= lim.listpack_value() {
                    v.push(Bytes::copy_from_slice(m));
                } else {
                    self.convert_to_table(n + 1);
                    self.table_insert(m);
                }
                true
            }
            Repr::Intset(v) => match parse_i64(m) {
                Some(i) => Self::intset_add(self, i, lim),
                None => {
                    // Listpack only if every member (integers at their widest) fits.
                    let widest = match (v.first(), v.last()) {
                        (Some(&lo), Some(&hi)) => digits(lo).max(digits(hi)),
                        _ => 0,
                    };
                    let (n, value) = (v.len(), lim.listpack_value());
                    if n < lim.listpack_entries() && m.len() <= value && widest <= value {
                        let mut lp: Vec<Bytes> = Vec::with_capacity(v.len() + 1);
                        lp.extend(v.iter().map(|&i| int_bytes(i)));
                        lp.push(Bytes::copy_from_slice(m));
                        self.0 = Repr::Listpack(lp);
                    } else {
                        self.convert_to_table(n + 1);
                        self.table_insert(m);
                    }
                    true
                }
            },
        }
    }

    /// Adds a member as it came out of another set (`setTypeAddAux`): integers go straight
    /// into an intset.
    pub fn add_member(&mut self, m: Member, lim: &mut impl Limits) -> bool {
        match (m, &self.0) {
            (Member::Int(i), Repr::Intset(_)) => self.intset_add(i, lim),
            (m, _) => m.with_text(|t| self.add(t, lim)),
        }
    }

    fn intset_add(&mut self, i: i64, lim: &mut impl Limits) -> bool {
        let Repr::Intset(v) = &mut self.0 else {
            return false;
        };
        match v.binary_search(&i) {
            Ok(_) => false,
            Err(pos) => {
                v.insert(pos, i);
                let n = v.len();
                if n > intset_max(lim) {
                    self.convert_to_table(n);
                }
                true
            }
        }
    }

    fn table_insert(&mut self, m: &[u8]) {
        if let Repr::Table(t) = &mut self.0 {
            t.get_or_insert_with(m, |s| s);
        }
    }

    /// Removes a member; true if it was there.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match &mut self.0 {
            Repr::Table(t) => t.remove(m).is_some(),
            Repr::Listpack(v) => match v.iter().position(|x| x[..] == *m) {
                Some(p) => {
                    v.remove(p);
                    true
                }
                None => false,
            },
            Repr::Intset(v) => match parse_i64(m).map(|i| v.binary_search(&i)) {
                Some(Ok(p)) => {
                    v.remove(p);
                    true
                }
                _ => false,
            },
        }
    }

    pub fn remove_member(&mut self, m: Member) -> bool {
        match (m, &mut self.0) {
            (Member::Int(i), Repr::Intset(v)) => match v.binary_search(&i) {
                Ok(p) => {
                    v.remove(p);
                    true
                }
                Err(_) => false,
            },
            (m, _) => m.with_text(|t| self.remove(t)),
        }
    }

    pub fn contains(&self, m: &[u8]) -> bool {
        match &self.0 {
            Repr::Table(t) => t.contains(m),
            Repr::Listpack(v) => v.iter().any(|x| x[..] == *m),
            Repr::Intset(v) => parse_i64(m).is_some_and(|i| v.binary_search(&i).is_ok()),
        }
    }

    pub fn contains_member(&self, m: Member) -> bool {
        match (m, &self.0) {
            (Member::Int(i), Repr::Intset(v)) => v.binary_search(&i).is_ok(),
            (m, _) => m.with_text(|t| self.contains(t)),
        }
    }

    /// Members in storage order: ascending for intsets, insertion order for listpacks.
    pub fn iter(&self) -> Iter<'_> {
        match &self.0 {
            Repr::Intset(v) => Iter::Ints(v.iter()),
            Repr::Listpack(v) => Iter::Strs(v.iter()),
            Repr::Table(t) => Iter::Table(t.iter()),
        }
    }

    /// A uniformly random member of a non-empty set.
    pub fn random(&self, rng: &mut impl Rng) -> Member<'_> {
        match &self.0 {
            Repr::Intset(v) => Member::Int(v[rng.gen_range(0..v.len())]),
            Repr::Listpack(v) => Member::Str(&v[rng.gen_range(0..v.len())]),
            Repr::Table(t) => Member::Str(t.random(rng).as_bytes()),
        }
    }

    /// Removes and returns a random member of a non-empty set (`setTypePopRandom`).
    pub fn pop_random(&mut self, rng: &mut impl Rng) -> Bytes {
        match &mut self.0 {
            Repr::Intset(v) => int_bytes(v.remove(rng.gen_range(0..v.len()))),
            Repr::Listpack(v) => v.remove(rng.gen_range(0..v.len())),
            Repr::Table(t) => t.take_random(rng).to_bytes(),
        }
    }

    /// SPOP with `0 < count < len`: the popped members, in reply order. Like Redis, a pop of
    /// most of the set keeps the few remaining members in a newly built set instead (whose
    /// encoding starts small again).
    pub fn pop_many(
        &mut self,
        count: usize,
        lim: &mut impl Limits,
        rng: &mut impl Rng,
    ) -> Vec<Bytes> {
        let len = self.len();
        let remaining = len - count;
        if remaining.saturating_mul(5) > count {
            return (0..count).map(|_| self.pop_random(rng)).collect();
        }
        let mut keep = vec![false; len];
        // Storage order: a listpack's is Redis's, a table's is as good as any.
        let members: Vec<Member> = self.iter().collect();
        let mut picks = rand::seq::index::sample(rng, len, remaining).into_vec();
        let mut rest = match self.0 {
            Repr::Intset(_) => SetValue::new_intset(),
            _ => SetValue::new_listpack(),
        };
        if matches!(self.0, Repr::Listpack(_)) {
            // Redis samples a listpack front to back.
            picks.sort_unstable();
        }
        for &i in &picks {
            keep[i] = true;
            rest.add_member(members[i], lim);
        }
        let popped = (0..len)
            .filter(|&i| !keep[i])
            .map(|i| members[i].to_bytes())
            .collect();
        *self = rest;
        popped
    }

    /// SRANDMEMBER with `0 < count < len`: `count` distinct random members.
    pub fn sample(&self, count: usize, rng: &mut impl Rng) -> Vec<Member<'_>> {
        if let Repr::Table(t) = &self.0 {
            return t
                .random_distinct(count, rng)
                .into_iter()
                .map(|m| Member::Str(m.as_bytes()))
                .collect();
        }
        let mut picks = rand::seq::index::sample(rng, self.len(), count).into_vec();
        if matches!(self.0, Repr::Listpack(_)) {
            // Redis walks a listpack once, so its picks come out in storage order.
            picks.sort_unstable();
        }
        picks
            .into_iter()
            .map(|i| match &self.0 {
                Repr::Intset(v) => Member::Int(v[i]),
                Repr::Listpack(v) => Member::Str(&v[i]),
                Repr::Table(_) => unreachable!("tables sample above"),
            })
            .collect()
    }

    /// One SSCAN step: a hashtable resumes from `cursor`; the small encodings return
    /// everything at once with cursor 0, as Redis does.
    pub fn scan(&self, cursor: u64, count: usize, out: &mut Vec<Bytes>) -> u64 {
        match &self.0 {
            Repr::Table(t) => t.scan_each(cursor, count, |m| out.push(m.to_bytes())),
            _ => {
                out.extend(self.iter().map(Member::to_bytes));
                0
            }
        }
    }

    /// Redis `maybeConvertToIntset`: a set known to hold only integers becomes an intset if
    /// it is small enough.
    fn maybe_convert_to_intset(&mut self, lim: &mut impl Limits) {
        if self.is_intset() || self.len() > intset_max(lim) {
            return;
        }
        let mut v: Vec<i64> = self.iter().filter_map(|m| m.with_text(parse_i64)).collect();
        v.sort_unstable();
        self.0 = Repr::Intset(v);
    }
}

/// Iterator over a set's members in storage order.
pub enum Iter<'a> {
    Ints(std::slice::Iter<'a, i64>),
    Strs(std::slice::Iter<'a, Bytes>),
    Table(flat::Iter<'a, Small>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = Member<'a>;
    #[inline]
    fn next(&mut self) -> Option<Member<'a>> {
        match self {
            Iter::Ints(it) => it.next().map(|&i| Member::Int(i)),
            Iter::Strs(it) => it.next().map(|b| Member::Str(b)),
            Iter::Table(it) => it.next().map(|m| Member::Str(m.as_bytes())),
        }
    }
}

// ---- multi-set operations (SINTER*, SUNION*, SDIFF*) ----

/// Calls `f` on every member of the intersection of `sets` (all present: a missing key
/// makes the intersection empty before this is called), iterating the smallest set as Redis
/// does. `f` returns false to stop early (SINTERCARD LIMIT). Returns the set iterated.
pub fn intersect<'a>(sets: &[&'a SetValue], mut f: impl FnMut(Member<'a>) -> bool) -> &'a SetValue {
    let mut order: Vec<&SetValue> = sets.to_vec();
    // Stable, so equal sizes keep key order (glibc's qsort is a merge sort here).
    order.sort_by_key(|s| s.len());
    let first = order[0];
    for m in first.iter() {
        let in_all = order[1..]
            .iter()
            .all(|s| std::ptr::eq(*s, first) || s.contains_member(m));
        if in_all && !f(m) {
            break;
        }
    }
    first
}

/// SINTERSTORE's result set (`sinterGenericCommand` with a destination): built as an intset
/// when the smallest set is one, else as a listpack, and turned into an intset at the end if
/// every member was an integer.
pub fn intersect_store(sets: &[&SetValue], lim: &mut impl Limits) -> SetValue {
    let mut members: Vec<Member> = Vec::new();
    let first = intersect(sets, |m| {
        members.push(m);
        true
    });
    let mut dst = if first.is_intset() {
        SetValue::new_intset()
    } else {
        SetValue::new_listpack()
    };
    let mut only_integers = true;
    for m in members {
        let m = match m {
            Member::Str(b) if only_integers => match parse_i64(b) {
                Some(i) if !matches!(dst.0, Repr::Table(_)) => Member::Int(i),
                Some(_) => m,
                None => {
                    only_integers = false;
                    m
                }
            },
            m => m,
        };
        dst.add_member(m, lim);
    }
    if only_integers && !dst.is_empty() {
        dst.maybe_convert_to_intset(lim);
    }
    dst
}

/// SUNION / SUNIONSTORE result (missing keys are `None`): members added to a fresh intset
/// in key order, so the result's encoding and order are Redis's.
pub fn union(sets: &[Option<&SetValue>], lim: &mut impl Limits) -> SetValue {
    let mut dst = SetValue::new_intset();
    for s in sets.iter().flatten() {
        for m in s.iter() {
            dst.add_member(m, lim);
        }
    }
    dst
}

/// SDIFF / SDIFFSTORE result. `first_repeated` is true when the first key appears again
/// later (the result is then empty). Redis picks one of two algorithms by estimated work;
/// the choice shows in the result's encoding, so it is reproduced.
pub fn difference(
    sets: &[Option<&SetValue>],
    first_repeated: bool,
    lim: &mut impl Limits,
) -> SetValue {
    let mut dst = SetValue::new_intset();
    let Some(Some(first)) = sets.first().copied() else {
        return dst;
    };
    if first_repeated {
        return dst;
    }
    let others: Vec<&SetValue> = sets[1..].iter().flatten().copied().collect();
    let one = others.len().saturating_add(1).saturating_mul(first.len()) / 2;
    let two: usize = first.len() + others.iter().map(|s| s.len()).sum::<usize>();
    if one <= two {
        // Algorithm 1: members of the first set found in no other (largest sets first).
        let mut others = others;
        others.sort_by_key(|s| std::cmp::Reverse(s.len()));
        for m in first.iter() {
            if !others.iter().any(|s| s.contains_member(m)) {
                dst.add_member(m, lim);
            }
        }
    } else {
        // Algorithm 2: copy the first set, then remove every other set's members.
        for m in first.iter() {
            dst.add_member(m, lim);
        }
        for s in others {
            for m in s.iter() {
                dst.remove_member(m);
            }
            if dst.is_empty() {
                break;
            }
        }
    }
    dst
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;
    use std::collections::HashSet;

    fn lim() -> Fixed {
        Fixed::DEFAULT
    }

    fn build(members: &[&str]) -> SetValue {
        let mut l = lim();
        let mut s = SetValue::create(members[0].as_bytes(), members.len(), &mut l);
        for m in members {
            s.add(m.as_bytes(), &mut l);
        }
        s
    }

    fn texts(s: &SetValue) -> Vec<String> {
        s.iter()
            .map(|m| String::from_utf8(m.to_bytes().to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn intset_is_sorted_and_converts_past_the_limit() {
        let mut l = lim();
        let mut s = SetValue::create(b"5", 1, &mut l);
        for m in ["5", "-3", "100", "0", "5"] {
            s.add(m.as_bytes(), &mut l);
        }
        assert_eq!(s.encoding(), "intset");
        assert_eq!(texts(&s), ["-3", "0", "5", "100"]);
        assert!(s.contains(b"100") && !s.contains(b"0100") && !s.contains(b"+5"));
        // "01" and "+1" are strings, not integers: they leave the intset.
        let mut t = s.clone();
        assert!(t.add(b"01", &mut l));
        assert_eq!(t.encoding(), "listpack");
        assert_eq!(texts(&t), ["-3", "0", "5", "100", "01"]);
        let mut big = SetValue::new_intset();
        for i in 0..512 {
            big.add(i.to_string().as_bytes(), &mut l);
        }
        assert_eq!(big.encoding(), "intset");
        big.add(b"512", &mut l);
        assert_eq!(big.encoding(), "hashtable");
        assert_eq!(big.len(), 513);
        // Never back, even when it shrinks.
        for i in 0..500 {
            big.remove(i.to_string().as_bytes());
        }
        assert_eq!(big.encoding(), "hashtable");
    }

    #[test]
    fn intset_to_listpack_or_hashtable_on_a_string() {
        let mut l = lim();
        let mut s = SetValue::new_intset();
        for i in 0..127 {
            s.add(i.to_string().as_bytes(), &mut l);
        }
        let mut a = s.clone();
        a.add(b"x", &mut l);
        assert_eq!(a.encoding(), "listpack");
        s.add(b"127", &mut l);
        let mut b = s.clone();
        b.add(b"x", &mut l);
        assert_eq!(b.encoding(), "hashtable");
        // A long string skips the listpack.
        let mut c = SetValue::new_intset();
        c.add(b"1", &mut l);
        c.add(&[b'a'; 65], &mut l);
        assert_eq!(c.encoding(), "hashtable");
    }

    #[test]
    fn listpack_keeps_insertion_order_and_converts() {
        let mut l = lim();
        let mut s = build(&["b", "a", "c", "a"]);
        assert_eq!(s.encoding(), "listpack");
        assert_eq!(texts(&s), ["b", "a", "c"]);
        assert!(s.remove(b"a") && !s.remove(b"a"));
        assert_eq!(texts(&s), ["b", "c"]);
        let mut long = s.clone();
        long.add(&[b'x'; 64], &mut l);
        assert_eq!(long.encoding(), "listpack");
        long.add(&[b'x'; 65], &mut l);
        assert_eq!(long.encoding(), "hashtable");
        for i in 0..126 {
            s.add(format!("m{i}").as_bytes(), &mut l);
        }
        assert_eq!((s.len(), s.encoding()), (128, "listpack"));
        s.add(b"one more", &mut l);
        assert_eq!((s.len(), s.encoding()), (129, "hashtable"));
    }

    #[test]
    fn create_and_size_hints() {
        let mut l = lim();
        assert_eq!(SetValue::create(b"1", 512, &mut l).encoding(), "intset");
        assert_eq!(SetValue::create(b"1", 513, &mut l).encoding(), "hashtable");
        assert_eq!(SetValue::create(b"a", 128, &mut l).encoding(), "listpack");
        assert_eq!(SetValue::create(b"a", 129, &mut l).encoding(), "hashtable");
        let mut s = build(&["a"]);
        s.maybe_convert(128, &mut l);
        assert_eq!(s.encoding(), "listpack");
        s.maybe_convert(129, &mut l);
        assert_eq!(s.encoding(), "hashtable");
        assert_eq!(texts(&s), ["a"]);
    }

    #[test]
    fn binary_members_and_equality() {
        let mut l = lim();
        let mut s = SetValue::new_listpack();
        assert!(s.add(b"a\x00b", &mut l));
        assert!(s.add(b"", &mut l));
        assert!(!s.add(b"a\x00b", &mut l));
        assert!(s.contains(b"") && !s.contains(b"a"));
        let mut t = s.clone();
        t.convert_to_table(0);
        assert_eq!(s, t);
        t.remove(b"");
        assert_ne!(s, t);
    }

    #[test]
    fn pops_and_samples() {
        let mut rng = SmallRng::seed_from_u64(7);
        let mut l = lim();
        for members in [
            (0..20).map(|i| i.to_string()).collect::<Vec<_>>(),
            (0..20).map(|i| format!("s{i}")).collect(),
            (0..300).map(|i| format!("s{i}")).collect(),
        ] {
            let refs: Vec<&str> = members.iter().map(String::as_str).collect();
            let all: HashSet<Bytes> = members.iter().map(|m| Bytes::from(m.clone())).collect();
            for count in [1, 3, 10, members.len() - 1] {
                let mut s = build(&refs);
                let popped = s.pop_many(count, &mut l, &mut rng);
                assert_eq!(popped.len(), count);
                assert_eq!(s.len(), members.len() - count);
                let p: HashSet<Bytes> = popped.into_iter().collect();
                assert_eq!(p.len(), count);
                for m in &p {
                    assert!(all.contains(m) && !s.contains(m));
                }
                let s = build(&refs);
                let got: HashSet<Bytes> = s
                    .sample(count, &mut rng)
                    .into_iter()
                    .map(Member::to_bytes)
                    .collect();
                assert_eq!(got.len(), count);
            }
        }
        // The remainder of a hashtable popped down to a few members is rebuilt small.
        let many: Vec<String> = (0..300).map(|i| format!("s{i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let mut s = build(&refs);
        s.pop_many(290, &mut l, &mut rng);
        assert_eq!((s.len(), s.encoding()), (10, "listpack"));
    }

    #[test]
    fn set_algebra() {
        let mut l = lim();
        let a = build(&["1", "2", "3", "4"]);
        let b = build(&["3", "4", "5", "x"]);
        let c = build(&["4", "x", "3"]);
        let mut got = Vec::new();
        intersect(&[&a, &b, &c], |m| {
            got.push(m.to_bytes());
            true
        });
        let got: HashSet<_> = got.into_iter().collect();
        assert_eq!(got, HashSet::from([Bytes::from("3"), Bytes::from("4")]));
        let st = intersect_store(&[&b, &c], &mut l);
        assert_eq!(st.encoding(), "listpack");
        let st = intersect_store(&[&a, &b], &mut l);
        assert_eq!(
            (st.encoding(), texts(&st)),
            ("intset", vec!["3".into(), "4".into()])
        );
        let u = union(&[Some(&a), None, Some(&b)], &mut l);
        assert_eq!(texts(&u), ["1", "2", "3", "4", "5", "x"]);
        let d = difference(&[Some(&a), Some(&b), None], false, &mut l);
        assert_eq!(texts(&d), ["1", "2"]);
        assert!(difference(&[Some(&a), Some(&b)], true, &mut l).is_empty());
        assert!(difference(&[None, Some(&b)], false, &mut l).is_empty());
        // Union of intsets stays an intset; reordered as Redis's fresh intset does.
        let lp = build(&["3", "1", "a"]);
        assert_eq!(texts(&union(&[Some(&lp)], &mut l)), ["1", "3", "a"]);
    }

    #[test]
    fn intersection_stops_early() {
        let a = build(&["1", "2", "3", "4"]);
        let mut n = 0;
        intersect(&[&a, &a], |_| {
            n += 1;
            n < 2
        });
        assert_eq!(n, 2);
    }
}
