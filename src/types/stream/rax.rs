//! Node count of Redis's radix tree (`rax`) over a set of keys, for XINFO STREAM's
//! `radix-tree-nodes`. A rax node starts at the root, at each key end, at each branching
//! position and at each child of a branching position; runs of single-child positions in
//! between are compressed into one node.

use std::collections::BTreeSet;

/// Nodes of a rax holding exactly `keys` (sorted, distinct, equal length).
pub fn node_count(keys: &[[u8; 16]]) -> usize {
    // A position is a key prefix; collect the ones that start a node.
    let mut starts: BTreeSet<(usize, &[u8])> = BTreeSet::new();
    starts.insert((0, &[][..]));
    for k in keys {
        starts.insert((k.len(), &k[..]));
    }
    // Adjacent sorted keys branch exactly where they first differ; every branching
    // position shows up between some adjacent pair.
    for w in keys.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let d = a.iter().zip(b.iter()).take_while(|(x, y)| x == y).count();
        if d < a.len() {
            starts.insert((d, &a[..d]));
            starts.insert((d + 1, &a[..d + 1]));
            starts.insert((d + 1, &b[..d + 1]));
        }
    }
    starts.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts() {
        assert_eq!(node_count(&[]), 1);
        let a = [0u8; 16];
        let mut b = [0u8; 16];
        b[15] = 1;
        assert_eq!(node_count(&[a]), 2);
        // root(compressed 15) -> branch at 15 -> two leaves at 16.
        assert_eq!(node_count(&[a, b]), 4);
        let mut c = [0u8; 16];
        c[8] = 1;
        // branch at 8: a/b share up to 15; c leaves at 9.
        assert_eq!(node_count(&[a, b, c]), 1 + 1 + 2 + 1 + 2 + 1 - 1 + 1);
    }
}
