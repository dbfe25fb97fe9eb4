//! SCAN across the fleet: the proxy's cursor packs the node index in its low bits and that
//! node's own cursor above them. Nodes are walked in order, each from cursor 0 until it
//! returns 0, so every key present for the whole iteration is returned (Redis's SCAN
//! guarantee, per node), and the proxy cursor is 0 only at the start and the end.

/// Low bits needed to hold a node index.
fn bits(nodes: usize) -> u32 {
    if nodes <= 1 {
        0
    } else {
        usize::BITS - (nodes - 1).leading_zeros()
    }
}

/// (node index, node cursor) of a proxy cursor; None if it names no node.
pub fn split_cursor(cursor: u64, nodes: usize) -> Option<(usize, u64)> {
    let k = bits(nodes);
    let idx = (cursor & ((1u64 << k) - 1)) as usize;
    (idx < nodes).then_some((idx, cursor >> k))
}

/// The proxy cursor after node `node` answered `node_cursor`; None if the node's cursor
/// does not fit next to the index (it never does in practice: Redis cursors stay below
/// the size of its hash table).
pub fn next_cursor(node: usize, nodes: usize, node_cursor: u64) -> Option<u64> {
    if node_cursor == 0 {
        return Some(if node + 1 < nodes {
            (node + 1) as u64
        } else {
            0
        });
    }
    let k = bits(nodes);
    if node_cursor.leading_zeros() < k {
        return None;
    }
    Some((node_cursor << k) | node as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_every_node_once() {
        for nodes in 1..=9 {
            // Simulate nodes that each need three calls: cursors 5, 9, 0.
            let mut cursor = 0u64;
            let mut visits = vec![0; nodes];
            loop {
                let (node, c) = split_cursor(cursor, nodes).unwrap();
                let reply = match c {
                    0 => 5,
                    5 => 9,
                    _ => 0,
                };
                if c == 0 {
                    visits[node] += 1;
                }
                cursor = next_cursor(node, nodes, reply).unwrap();
                if cursor == 0 {
                    break;
                }
            }
            assert_eq!(visits, vec![1; nodes], "{nodes} nodes");
        }
    }

    #[test]
    fn bad_cursors() {
        assert_eq!(split_cursor(3, 3), None);
        assert_eq!(split_cursor(7, 5), None);
        assert_eq!(split_cursor(u64::MAX, 1), Some((0, u64::MAX)));
        assert_eq!(next_cursor(0, 3, u64::MAX), None);
        assert_eq!(next_cursor(0, 1, u64::MAX), Some(u64::MAX));
    }
}
