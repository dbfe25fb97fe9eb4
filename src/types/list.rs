//! Redis lists: a deque of byte strings (O(1) at both ends, O(1) by index) plus a model of
//! how Redis 7.2 would lay the same list out in memory, so `OBJECT ENCODING` reports what
//! Redis reports.
//!
//! Redis 7.2 keeps a small list in one listpack and converts it to a quicklist (a chain of
//! listpack nodes) when a write would take it past `list-max-listpack-size`; it converts
//! back after removals once the quicklist is a single node at most half the limit
//! (`listTypeTryConvertListpack` / `listTypeTryConvertQuicklist` in t_list.c). Whether a
//! quicklist is one node depends on how quicklist.c filled, split and merged its nodes, so
//! the model tracks each node's entry count and listpack byte size exactly as quicklist.c
//! computes them (entry sizes from the listpack encoding). Elements themselves live only in
//! the deque; the model holds numbers.

use bytes::Bytes;
use std::collections::VecDeque;

/// Which end of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Head,
    Tail,
}

#[derive(Clone, Debug, PartialEq)]
pub struct List {
    items: VecDeque<Bytes>,
    /// Sum of element lengths (memory accounting).
    data_bytes: usize,
    shape: Shape,
}

#[derive(Clone, Debug, PartialEq)]
enum Shape {
    /// One listpack of `bytes` bytes (`lpBytes`).
    Listpack { bytes: usize },
    /// A quicklist; `fill` is `list-max-listpack-size` as it was when the quicklist was
    /// created (quicklist.c keeps its own copy).
    Quicklist { fill: i32, nodes: VecDeque<Node> },
}

/// A quicklist node: entry count and listpack size (`node->count`, `node->sz`).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Node {
    count: usize,
    sz: usize,
}

/// Listpack header (6) plus end marker (1).
const LP_OVERHEAD: usize = 7;
const SIZE_SAFETY_LIMIT: usize = 8192;
const SIZE_ESTIMATE_OVERHEAD: usize = 8;
const OPTIMIZATION_LEVEL: [usize; 5] = [4096, 8192, 16384, 32768, 65536];

/// `quicklistNodeLimit`: (size limit, count limit) of a node for a fill factor.
fn node_limit(fill: i32) -> (usize, usize) {
    if fill >= 0 {
        (usize::MAX, (fill as usize).max(1))
    } else {
        let offset = ((-(fill as i64)) - 1).min(OPTIMIZATION_LEVEL.len() as i64 - 1);
        (OPTIMIZATION_LEVEL[offset as usize], u32::MAX as usize)
    }
}

/// `quicklistNodeExceedsLimit`.
fn exceeds_limit(fill: i32, new_sz: usize, new_count: usize) -> bool {
    let (sz_limit, count_limit) = node_limit(fill);
    if sz_limit != usize::MAX {
        new_sz > sz_limit
    } else {
        new_sz > SIZE_SAFETY_LIMIT || new_count > count_limit
    }
}

/// `_quicklistNodeAllowInsert` for an element of `len` bytes (1 GB "plain" elements cannot
/// reach us: bulk strings are capped below that).
fn allow_insert(node: Option<&Node>, fill: i32, len: usize) -> bool {
    node.is_some_and(|n| !exceeds_limit(fill, n.sz + len + SIZE_ESTIMATE_OVERHEAD, n.count + 1))
}

/// `_quicklistNodeAllowMerge`.
fn allow_merge(a: &Node, b: &Node, fill: i32) -> bool {
    !exceeds_limit(fill, a.sz + b.sz - LP_OVERHEAD, a.count + b.count)
}

/// Bytes one element takes in a listpack: its encoding plus the back-length.
pub fn lp_entry_size(e: &[u8]) -> usize {
    // `lpStringToInt64` is `string2ll`: the strict integer form listpacks store as integers.
    let enc = match crate::num::parse_i64(e) {
        Some(v) if (0..=127).contains(&v) => 1,
        Some(v) if (-4096..=4095).contains(&v) => 2,
        Some(v) if i16::try_from(v).is_ok() => 3,
        Some(v) if (-8_388_608..=8_388_607).contains(&v) => 4,
        Some(v) if i32::try_from(v).is_ok() => 5,
        Some(_) => 9,
        None if e.len() < 64 => 1 + e.len(),
        None if e.len() < 4096 => 2 + e.len(),
        None => 5 + e.len(),
    };
    let backlen = match enc {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    };
    enc + backlen
}

impl Default for List {
    fn default() -> Self {
        List::new()
    }
}

impl List {
    /// An empty list as Redis creates it for a push (`createListListpackObject`).
    pub fn new() -> List {
        List {
            items: VecDeque::new(),
            data_bytes: 0,
            shape: Shape::Listpack { bytes: LP_OVERHEAD },
        }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The name `OBJECT ENCODING` reports.
    pub fn encoding(&self) -> &'static str {
        match self.shape {
            Shape::Listpack { .. } => "listpack",
            Shape::Quicklist { .. } => "quicklist",
        }
    }

    /// Quicklist nodes (Redis `ql->len`, what freeing the list walks); 0 while the list is
    /// a single listpack.
    pub fn quicklist_nodes(&self) -> usize {
        match &self.shape {
            Shape::Listpack { .. } => 0,
            Shape::Quicklist { nodes, .. } => nodes.len(),
        }
    }

    /// Rough heap footprint.
    pub fn approx_size(&self) -> usize {
        self.data_bytes + self.items.len() * std::mem::size_of::<Bytes>()
    }

    pub fn iter(&self) -> std::collections::vec_deque::Iter<'_, Bytes> {
        self.items.iter()
    }

    /// Position of a Redis index (negative counts from the tail), if it is in range.
    pub fn index(&self, i: i64) -> Option<usize> {
        let len = self.items.len() as i64;
        let i = if i < 0 { len + i } else { i };
        (0..len).contains(&i).then_some(i as usize)
    }

    pub fn get(&self, pos: usize) -> Option<&Bytes> {
        self.items.get(pos)
    }

    /// LRANGE/LTRIM normalisation: the inclusive position range, or `None` when empty.
    pub fn range(&self, start: i64, end: i64) -> Option<(usize, usize)> {
        let len = self.items.len() as i64;
        let start = if start < 0 {
            (len + start).max(0)
        } else {
            start
        };
        let end = if end < 0 { len + end } else { end };
        if start > end || start >= len {
            return None;
        }
        Some((start as usize, end.min(len - 1) as usize))
    }

    /// Elements `from..=to`, head to tail.
    pub fn slice(&self, from: usize, to: usize) -> impl DoubleEndedIterator<Item = &Bytes> {
        self.items.range(from..=to)
    }

    /// Called before adding `add_len` elements of `add_bytes` total length
    /// (`listTypeTryConversionAppend`): a listpack that would exceed the limit becomes a
    /// quicklist. `fill` (the current `list-max-listpack-size`) is read only if needed.
    pub fn before_add(&mut self, add_bytes: usize, add_len: usize, fill: impl FnOnce() -> i32) {
        let Shape::Listpack { bytes } = self.shape else {
            return;
        };
        let fill = fill();
        if !exceeds_limit(fill, bytes + add_bytes, self.items.len() + add_len) {
            return;
        }
        let mut nodes = VecDeque::new();
        if !self.items.is_empty() {
            nodes.push_back(Node {
                count: self.items.len(),
                sz: bytes,
            });
        }
        self.shape = Shape::Quicklist { fill, nodes };
    }

    /// Called after removing elements from a list that is not empty
    /// (`listTypeTryConversion(.., LIST_CONV_SHRINKING)`): a single-node quicklist at most
    /// half the limit becomes a listpack again.
    pub fn after_remove(&mut self, fill: impl FnOnce() -> i32) {
        let Shape::Quicklist { nodes, .. } = &self.shape else {
            return;
        };
        if nodes.len() != 1 {
            return;
        }
        let (sz_limit, count_limit) = node_limit(fill());
        let node = nodes[0];
        if node.sz > sz_limit / 2 || node.count > count_limit / 2 {
            return;
        }
        self.shape = Shape::Listpack { bytes: node.sz };
    }

    /// Pushes one element (callers run `before_add` first, once per command).
    pub fn push(&mut self, v: Bytes, end: End) {
        let esz = lp_entry_size(&v);
        match &mut self.shape {
            Shape::Listpack { bytes } => *bytes += esz,
            Shape::Quicklist { fill, nodes } => {
                let fill = *fill;
                let node = match end {
                    End::Head => nodes.front_mut(),
                    End::Tail => nodes.back_mut(),
                };
                match node {
                    Some(n) if allow_insert(Some(n), fill, v.len()) => {
                        n.count += 1;
                        n.sz += esz;
                    }
                    _ => {
                        let n = Node {
                            count: 1,
                            sz: LP_OVERHEAD + esz,
                        };
                        match end {
                            End::Head => nodes.push_front(n),
                            End::Tail => nodes.push_back(n),
                        }
                    }
                }
            }
        }
        self.data_bytes += v.len();
        match end {
            End::Head => self.items.push_front(v),
            End::Tail => self.items.push_back(v),
        }
    }

    /// Pops one element (callers run `after_remove` once the command's removals are done,
    /// and delete the key if the list is empty).
    pub fn pop(&mut self, end: End) -> Option<Bytes> {
        let v = match end {
            End::Head => self.items.pop_front(),
            End::Tail => self.items.pop_back(),
        }?;
        let esz = lp_entry_size(&v);
        self.data_bytes -= v.len();
        match &mut self.shape {
            Shape::Listpack { bytes } => *bytes -= esz,
            Shape::Quicklist { nodes, .. } => {
                let (n, last) = match end {
                    End::Head => (nodes.front_mut(), false),
                    End::Tail => (nodes.back_mut(), true),
                };
                if let Some(n) = n {
                    n.count -= 1;
                    n.sz -= esz;
                    if n.count == 0 {
                        if last {
                            nodes.pop_back();
                        } else {
                            nodes.pop_front();
                        }
                    }
                }
            }
        }
        Some(v)
    }

    /// Replaces the element at `pos` (callers run `before_add` for the new value first and
    /// `after_remove` afterwards, as LSET does).
    pub fn set(&mut self, pos: usize, v: Bytes) {
        let Some(old) = self.items.get(pos) else {
            return;
        };
        let (old_esz, new_esz) = (lp_entry_size(old), lp_entry_size(&v));
        self.data_bytes = self.data_bytes - old.len() + v.len();
        match &mut self.shape {
            Shape::Listpack { bytes } => *bytes = *bytes - old_esz + new_esz,
            Shape::Quicklist { nodes, .. } => {
                let (ni, _) = locate(nodes, pos);
                nodes[ni].sz = nodes[ni].sz - old_esz + new_esz;
            }
        }
        self.items[pos] = v;
    }

    /// LINSERT: inserts `v` before or after the first element equal to `pivot`; the new
    /// length, or `None` if there is no such element (callers run `before_add` first).
    pub fn insert(&mut self, pivot: &[u8], v: Bytes, after: bool) -> Option<usize> {
        let pos = self.items.iter().position(|e| e[..] == *pivot)?;
        let esz = lp_entry_size(&v);
        match &mut self.shape {
            Shape::Listpack { bytes } => *bytes += esz,
            Shape::Quicklist { fill, nodes } => {
                quicklist_insert(nodes, *fill, &self.items, pos, v.len(), esz, after);
            }
        }
        self.data_bytes += v.len();
        self.items.insert(if after { pos + 1 } else { pos }, v);
        Some(self.items.len())
    }

    /// LREM: removes up to `count` elements equal to `v` (all when 0; from the tail when
    /// negative); the number removed.
    pub fn remove(&mut self, count: i64, v: &[u8]) -> usize {
        let limit = match count.unsigned_abs() {
            0 => usize::MAX,
            n => usize::try_from(n).unwrap_or(usize::MAX),
        };
        let matches = |(i, e): (usize, &Bytes)| (e[..] == *v).then_some(i);
        let doomed: Vec<usize> = if count < 0 {
            let mut d: Vec<usize> = self
                .items
                .iter()
                .enumerate()
                .rev()
                .filter_map(matches)
                .take(limit)
                .collect();
            d.reverse();
            d
        } else {
            self.items
                .iter()
                .enumerate()
                .filter_map(matches)
                .take(limit)
                .collect()
        };
        let removed = doomed.len();
        if removed > 0 {
            self.remove_sorted(&doomed);
        }
        removed
    }

    /// LTRIM: removes `left` elements from the head and `right` from the tail.
    pub fn trim(&mut self, left: usize, right: usize) {
        let len = self.items.len();
        let left = left.min(len);
        let right = right.min(len - left);
        if left == 0 && right == 0 {
            return;
        }
        let doomed: Vec<usize> = (0..left).chain(len - right..len).collect();
        self.remove_sorted(&doomed);
    }

    /// Removes the elements at the given ascending positions (model first, then the deque).
    fn remove_sorted(&mut self, doomed: &[usize]) {
        let sizes = doomed.iter().map(|&i| lp_entry_size(&self.items[i]));
        match &mut self.shape {
            Shape::Listpack { bytes } => *bytes -= sizes.sum::<usize>(),
            Shape::Quicklist { nodes, .. } => {
                // One pass over nodes and positions together; empty nodes are deleted,
                // nothing is merged (quicklistDelIndex / quicklistDelRange).
                let mut start = 0;
                let mut d = doomed.iter().zip(sizes).peekable();
                for n in nodes.iter_mut() {
                    let end = start + n.count;
                    while let Some((_, esz)) = d.next_if(|(&i, _)| i < end) {
                        n.count -= 1;
                        n.sz -= esz;
                    }
                    start = end;
                }
                nodes.retain(|n| n.count > 0);
            }
        }
        let mut d = doomed.iter().peekable();
        let mut i = 0;
        let mut freed = 0;
        self.items.retain(|e| {
            let keep = d.next_if(|&&p| p == i).is_none();
            if !keep {
                freed += e.len();
            }
            i += 1;
            keep
        });
        self.data_bytes -= freed;
    }

    /// Entry counts of the listpack nodes Redis would hold this list in (one node for a
    /// listpack-encoded list): `DUMP` saves one RDB quicklist node per entry.
    pub(crate) fn node_counts(&self) -> Vec<usize> {
        match &self.shape {
            Shape::Listpack { .. } => vec![self.items.len()],
            Shape::Quicklist { nodes, .. } => nodes.iter().map(|n| n.count).collect(),
        }
    }

    /// A list loaded from RDB quicklist nodes (`rdbLoadObject`): one node per non-empty
    /// group, then `listTypeTryConversionRaw(LIST_CONV_AUTO)`: a single node within the
    /// limits of `fill` becomes a listpack.
    pub(crate) fn from_nodes(groups: Vec<Vec<Bytes>>, fill: i32) -> List {
        let mut items = VecDeque::new();
        let mut nodes = VecDeque::new();
        let mut data_bytes = 0;
        for g in groups.into_iter().filter(|g| !g.is_empty()) {
            let sz = LP_OVERHEAD + g.iter().map(|e| lp_entry_size(e)).sum::<usize>();
            nodes.push_back(Node { count: g.len(), sz });
            data_bytes += g.iter().map(|e| e.len()).sum::<usize>();
            items.extend(g);
        }
        let (sz_limit, count_limit) = node_limit(fill);
        let shape = match nodes.front() {
            Some(n) if nodes.len() == 1 && n.sz <= sz_limit && n.count <= count_limit => {
                Shape::Listpack { bytes: n.sz }
            }
            _ => Shape::Quicklist { fill, nodes },
        };
        List {
            items,
            data_bytes,
            shape,
        }
    }

    /// A list loaded element by element into a fresh quicklist (the pre-quicklist RDB list
    /// type), tail pushes as `quicklistPushTail`, then the same conversion as `from_nodes`.
    pub(crate) fn from_pushes(elems: Vec<Bytes>, fill: i32) -> List {
        let mut l = List {
            items: VecDeque::new(),
            data_bytes: 0,
            shape: Shape::Quicklist {
                fill,
                nodes: VecDeque::new(),
            },
        };
        for e in elems {
            l.push(e, End::Tail);
        }
        let groups = {
            let counts = l.node_counts();
            let mut it = l.items.into_iter();
            counts
                .into_iter()
                .map(|c| it.by_ref().take(c).collect())
                .collect()
        };
        List::from_nodes(groups, fill)
    }

    /// LPOS: the positions of elements equal to `v`, scanning from the head (or from the
    /// tail when `rank` is negative), skipping the first `|rank| - 1` matches, stopping after
    /// `limit` matches (0 = all) or after comparing `maxlen` elements (0 = all).
    pub fn positions(&self, v: &[u8], rank: i64, limit: usize, maxlen: usize) -> Vec<usize> {
        let skip = usize::try_from(rank.unsigned_abs() - 1).unwrap_or(usize::MAX);
        let take = if limit == 0 { usize::MAX } else { limit };
        let scan = if maxlen == 0 { usize::MAX } else { maxlen };
        let matches = |(i, e): (usize, &Bytes)| (e[..] == *v).then_some(i);
        let it = self.items.iter().enumerate();
        if rank < 0 {
            it.rev()
                .take(scan)
                .filter_map(matches)
                .skip(skip)
                .take(take)
                .collect()
        } else {
            it.take(scan)
                .filter_map(matches)
                .skip(skip)
                .take(take)
                .collect()
        }
    }
}

/// Node index and offset inside it of list position `pos`.
fn locate(nodes: &VecDeque<Node>, pos: usize) -> (usize, usize) {
    let mut start = 0;
    for (i, n) in nodes.iter().enumerate() {
        if pos < start + n.count {
            return (i, pos - start);
        }
        start += n.count;
    }
    (nodes.len().saturating_sub(1), 0)
}

/// `_quicklistInsert` next to the element at `pos`: into its node when it has room, else
/// into the neighbour on that side, else a new node at either end of the list, else the
/// node is split at the pivot and the neighbourhood merged (`_quicklistMergeNodes`).
fn quicklist_insert(
    nodes: &mut VecDeque<Node>,
    fill: i32,
    items: &VecDeque<Bytes>,
    pos: usize,
    len: usize,
    esz: usize,
    after: bool,
) {
    let (ni, off) = locate(nodes, pos);
    let node = nodes[ni];
    let full = !allow_insert(Some(&node), fill, len);
    let at_tail = after && off == node.count - 1;
    let at_head = !after && off == 0;
    let add = |n: &mut Node| {
        n.count += 1;
        n.sz += esz;
    };
    if !full {
        add(&mut nodes[ni]);
    } else if at_tail && allow_insert(nodes.get(ni + 1), fill, len) {
        add(&mut nodes[ni + 1]);
    } else if at_head && ni > 0 && allow_insert(nodes.get(ni - 1), fill, len) {
        add(&mut nodes[ni - 1]);
    } else if (at_tail && ni + 1 == nodes.len()) || (at_head && ni == 0) {
        let n = Node {
            count: 1,
            sz: LP_OVERHEAD + esz,
        };
        nodes.insert(if after { ni + 1 } else { ni }, n);
    } else {
        // `_quicklistSplitNode`: after → the node keeps [0..=off] and the new node takes the
        // rest plus the element in front; before → the new node takes [0..off) plus the
        // element at its end and goes before the node, which keeps the rest.
        let first = pos - off;
        let moved = if after {
            first + off + 1..first + node.count
        } else {
            first..first + off
        };
        let moved_sz: usize = items.range(moved.clone()).map(|e| lp_entry_size(e)).sum();
        let new = Node {
            count: moved.len() + 1,
            sz: LP_OVERHEAD + moved_sz + esz,
        };
        nodes[ni].count -= moved.len();
        nodes[ni].sz -= moved_sz;
        let center = if after {
            nodes.insert(ni + 1, new);
            ni
        } else {
            nodes.insert(ni, new);
            ni + 1
        };
        merge_around(nodes, fill, center);
    }
}

/// `_quicklistMergeNodes`: tries prev_prev+prev, next+next_next, prev+center, then the
/// result with its next.
fn merge_around(nodes: &mut VecDeque<Node>, fill: i32, mut center: usize) {
    let merge = |nodes: &mut VecDeque<Node>, i: usize| {
        let b = nodes.remove(i + 1).expect("merge partner");
        let a = &mut nodes[i];
        a.count += b.count;
        a.sz = a.sz + b.sz - LP_OVERHEAD;
    };
    if center >= 2 && allow_merge(&nodes[center - 2], &nodes[center - 1], fill) {
        merge(nodes, center - 2);
        center -= 1;
    }
    if center + 2 < nodes.len() && allow_merge(&nodes[center + 1], &nodes[center + 2], fill) {
        merge(nodes, center + 1);
    }
    let target = if center >= 1 && allow_merge(&nodes[center - 1], &nodes[center], fill) {
        merge(nodes, center - 1);
        center - 1
    } else {
        center
    };
    if target + 1 < nodes.len() && allow_merge(&nodes[target], &nodes[target + 1], fill) {
        merge(nodes, target);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILL: i32 = -2;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn list(items: &[&str]) -> List {
        let mut l = List::new();
        for s in items {
            l.before_add(s.len(), 1, || FILL);
            l.push(b(s), End::Tail);
        }
        l
    }

    fn contents(l: &List) -> Vec<String> {
        l.iter()
            .map(|e| String::from_utf8_lossy(e).into_owned())
            .collect()
    }

    /// The model's own consistency: counts add up, sizes are 7 + the entries' sizes.
    fn check(l: &List) {
        let total: usize = l.iter().map(|e| lp_entry_size(e)).sum();
        assert_eq!(l.data_bytes, l.iter().map(|e| e.len()).sum::<usize>());
        match &l.shape {
            Shape::Listpack { bytes } => assert_eq!(*bytes, LP_OVERHEAD + total),
            Shape::Quicklist { nodes, .. } => {
                assert_eq!(nodes.iter().map(|n| n.count).sum::<usize>(), l.len());
                assert!(nodes.iter().all(|n| n.count > 0));
                let sz: usize = nodes.iter().map(|n| n.sz - LP_OVERHEAD).sum();
                assert_eq!(sz, total);
                let mut start = 0;
                for n in nodes {
                    let s: usize = l
                        .slice(start, start + n.count - 1)
                        .map(|e| lp_entry_size(e))
                        .sum();
                    assert_eq!(n.sz, LP_OVERHEAD + s);
                    start += n.count;
                }
            }
        }
    }

    #[test]
    fn entry_sizes_follow_listpack_encodings() {
        assert_eq!(lp_entry_size(b"0"), 2);
        assert_eq!(lp_entry_size(b"127"), 2);
        assert_eq!(lp_entry_size(b"128"), 3);
        assert_eq!(lp_entry_size(b"-4096"), 3);
        assert_eq!(lp_entry_size(b"-4097"), 4);
        assert_eq!(lp_entry_size(b"100000"), 5);
        assert_eq!(lp_entry_size(b"10000000000"), 10);
        assert_eq!(lp_entry_size(b"-9223372036854775808"), 10);
        assert_eq!(lp_entry_size(b"9223372036854775808"), 21);
        assert_eq!(lp_entry_size(b"01"), 4, "leading zero is a string");
        assert_eq!(lp_entry_size(b"-0"), 4);
        assert_eq!(lp_entry_size(b""), 2);
        assert_eq!(lp_entry_size(b"abc"), 5);
        assert_eq!(lp_entry_size(&[b'x'; 63]), 65);
        assert_eq!(lp_entry_size(&[b'x'; 64]), 67);
        assert_eq!(lp_entry_size(&[b'x'; 125]), 128);
        assert_eq!(
            lp_entry_size(&[b'x'; 126]),
            130,
            "back-length grows past 127"
        );
        assert_eq!(lp_entry_size(&[b'x'; 4096]), 4101 + 2);
    }

    #[test]
    fn push_pop_both_ends() {
        let mut l = List::new();
        l.push(b("b"), End::Head);
        l.push(b("a"), End::Head);
        l.push(b("c"), End::Tail);
        assert_eq!(contents(&l), ["a", "b", "c"]);
        assert_eq!(l.pop(End::Tail), Some(b("c")));
        assert_eq!(l.pop(End::Head), Some(b("a")));
        assert_eq!(l.pop(End::Head), Some(b("b")));
        assert_eq!(l.pop(End::Head), None);
        assert!(l.is_empty());
        check(&l);
    }

    #[test]
    fn indices_and_ranges() {
        let l = list(&["a", "b", "c"]);
        assert_eq!(l.index(0), Some(0));
        assert_eq!(l.index(-1), Some(2));
        assert_eq!(l.index(-3), Some(0));
        assert_eq!(l.index(-4), None);
        assert_eq!(l.index(3), None);
        assert_eq!(l.index(i64::MIN), None);
        assert_eq!(l.range(0, -1), Some((0, 2)));
        assert_eq!(l.range(-100, 100), Some((0, 2)));
        assert_eq!(l.range(1, 0), None);
        assert_eq!(l.range(3, 5), None);
        assert_eq!(l.range(i64::MIN, i64::MAX), Some((0, 2)));
        assert_eq!(l.range(0, i64::MIN), None);
    }

    #[test]
    fn small_lists_are_listpacks_and_grow_into_quicklists() {
        let mut l = list(&["a", "b"]);
        assert_eq!(l.encoding(), "listpack");
        // 7 + 2*3 bytes: adding 8180 bytes passes 8192.
        l.before_add(8179, 1, || FILL);
        assert_eq!(l.encoding(), "listpack");
        l.before_add(8180, 1, || FILL);
        assert_eq!(l.encoding(), "quicklist");
        check(&l);
        // A count-based fill converts on entries.
        let mut l = list(&["a", "b", "c"]);
        l.before_add(1, 1, || 3);
        assert_eq!(l.encoding(), "quicklist");
    }

    #[test]
    fn shrinking_back_needs_one_node_at_half_the_limit() {
        let big = "x".repeat(1000);
        let mut l = List::new();
        for _ in 0..12 {
            l.before_add(big.len(), 1, || FILL);
            l.push(b(&big), End::Tail);
            check(&l);
        }
        assert_eq!(l.encoding(), "quicklist");
        // Entries take 1004 bytes: 8 fit the listpack, the quicklist is [8][4]. Pop down to
        // one node.
        while l.len() > 5 {
            l.pop(End::Tail);
            l.after_remove(|| FILL);
            check(&l);
        }
        assert_eq!(l.encoding(), "quicklist", "5 * 1004 + 7 > 4096");
        l.pop(End::Tail);
        l.after_remove(|| FILL);
        assert_eq!(l.encoding(), "listpack", "4 * 1004 + 7 <= 4096");
        check(&l);
    }

    #[test]
    fn two_small_nodes_stay_a_quicklist() {
        let big = "x".repeat(1000);
        let mut l = List::new();
        for _ in 0..9 {
            l.before_add(big.len(), 1, || FILL);
            l.push(b(&big), End::Tail);
        }
        // [8 elements][1 element]: popping from the head leaves two nodes.
        for _ in 0..6 {
            l.pop(End::Head);
            l.after_remove(|| FILL);
        }
        assert_eq!(l.len(), 3);
        assert_eq!(l.encoding(), "quicklist");
        check(&l);
    }

    #[test]
    fn set_insert_remove_trim() {
        let mut l = list(&["a", "b", "c", "b"]);
        l.set(1, b("B"));
        assert_eq!(contents(&l), ["a", "B", "c", "b"]);
        assert_eq!(l.insert(b"c", b("x"), false), Some(5));
        assert_eq!(l.insert(b"c", b("y"), true), Some(6));
        assert_eq!(l.insert(b"nope", b("z"), true), None);
        assert_eq!(contents(&l), ["a", "B", "x", "c", "y", "b"]);
        check(&l);
        let mut l = list(&["a", "x", "a", "x", "a"]);
        assert_eq!(l.remove(-2, b"a"), 2);
        assert_eq!(contents(&l), ["a", "x", "x"]);
        assert_eq!(l.remove(0, b"x"), 2);
        assert_eq!(contents(&l), ["a"]);
        assert_eq!(l.remove(i64::MIN, b"a"), 1);
        assert!(l.is_empty());
        check(&l);
        let mut l = list(&["a", "b", "c", "d", "e"]);
        l.trim(1, 2);
        assert_eq!(contents(&l), ["b", "c"]);
        l.trim(5, 5);
        assert!(l.is_empty());
        check(&l);
    }

    #[test]
    fn positions_follow_lpos() {
        let l = list(&["a", "b", "a", "c", "a"]);
        assert_eq!(l.positions(b"a", 1, 1, 0), [0]);
        assert_eq!(l.positions(b"a", 2, 1, 0), [2]);
        assert_eq!(l.positions(b"a", -1, 1, 0), [4]);
        assert_eq!(l.positions(b"a", -1, 0, 0), [4, 2, 0]);
        assert_eq!(l.positions(b"a", 1, 0, 3), [0, 2]);
        assert_eq!(l.positions(b"a", -2, 0, 3), [2]);
        assert_eq!(l.positions(b"a", i64::MAX, 0, 0), Vec::<usize>::new());
        assert_eq!(l.positions(b"z", 1, 0, 0), Vec::<usize>::new());
    }

    /// Quicklist node bookkeeping under every kind of edit, including inserts that split
    /// nodes and merge neighbours.
    #[test]
    fn quicklist_model_stays_consistent() {
        let mut l = List::new();
        let mut seed = 7u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for step in 0..4000 {
            let r = next();
            let len = (r % 700) as usize;
            let v = Bytes::from(vec![b'a' + (r % 3) as u8; len]);
            match r % 7 {
                0 | 1 => {
                    l.before_add(v.len(), 1, || FILL);
                    l.push(v, if r % 2 == 0 { End::Head } else { End::Tail });
                }
                2 => {
                    l.pop(if r % 2 == 0 { End::Head } else { End::Tail });
                    l.after_remove(|| FILL);
                }
                3 if !l.is_empty() => {
                    let pivot = l
                        .get((r as usize / 7) % l.len())
                        .cloned()
                        .unwrap_or_default();
                    l.before_add(v.len(), 1, || FILL);
                    assert!(l.insert(&pivot, v, r % 2 == 0).is_some());
                }
                4 if !l.is_empty() => {
                    let pos = (r as usize / 7) % l.len();
                    l.before_add(v.len(), 1, || FILL);
                    l.set(pos, v);
                    l.after_remove(|| FILL);
                }
                5 if step % 50 == 0 => {
                    l.remove(1, &v);
                    l.after_remove(|| FILL);
                }
                6 if step % 100 == 0 && l.len() > 4 => {
                    l.trim(1, 1);
                    l.after_remove(|| FILL);
                }
                _ => {}
            }
            check(&l);
        }
    }
}
