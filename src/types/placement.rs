//! Placement contract (DESIGN.md §8), shared by the keyspace shards and the proxy:
//! Redis Cluster hash tags, FNV-1a 64 and a final mix, rendezvous ownership.

/// The hash tag of a key: bytes between the first `{` and the first `}` after it, when
/// non-empty; otherwise the whole key.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&c| c == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&c| c == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

pub fn mix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    x
}

/// Hash of a key's tag, mixed: the input to both shard choice and rendezvous.
pub fn tag_hash(key: &[u8]) -> u64 {
    fnv1a64(hash_tag(key))
}

/// Rendezvous owner among node seeds (`fnv1a64(node_id)`): index of the largest
/// `(mix64(tag_hash ^ seed), seed)`.
pub fn owner(key: &[u8], seeds: &[u64]) -> Option<usize> {
    let h = tag_hash(key);
    seeds
        .iter()
        .enumerate()
        .max_by_key(|(_, &s)| (mix64(h ^ s), s))
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner_of(key: &str) -> &'static str {
        let nodes = ["node-a", "node-b", "node-c"];
        let seeds: Vec<u64> = nodes.iter().map(|n| fnv1a64(n.as_bytes())).collect();
        nodes[owner(key.as_bytes(), &seeds).unwrap()]
    }

    #[test]
    fn tags() {
        assert_eq!(hash_tag(b"{user1000}.following"), b"user1000");
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
        assert_eq!(hash_tag(b"nobrace"), b"nobrace");
    }

    #[test]
    fn design_test_vectors() {
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(owner_of("foo"), "node-b");
        assert_eq!(owner_of("{vehicle:42}:checkpoint"), "node-c");
        assert_eq!(owner_of("{vehicle:42}:prepared"), "node-c");
        assert_eq!(owner_of("partition:7:frontier"), "node-a");
        assert_eq!(owner_of("{user1000}.following"), "node-c");
        assert_eq!(owner_of("{}x"), "node-a");
    }
}
