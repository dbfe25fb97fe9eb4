//! A dense array stored in fixed-size chunks: element `i` is at
//! `chunks[i / CHUNK][i % CHUNK]`, a chunk being as many elements as fit in 64 KiB (an
//! allocator size class: a chunk of 512 72-byte slots landed in a 40 KiB class, wasting 11%).
//!
//! Growing never moves or copies what is stored (a shard's slots are megabytes: a `Vec`
//! doubling would copy them all under the shard lock, and the freed old buffers stay
//! committed in the allocator for a while, which showed as ~25 B per key of RSS after a
//! bulk load), and at most one chunk is partly empty, where a `Vec` wastes up to half its
//! capacity. The first chunk grows like a `Vec`, so a small shard stays small.

pub struct Chunked<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Chunked<T> {
    const CHUNK: usize = {
        assert!(std::mem::size_of::<T>() > 0 && std::mem::size_of::<T>() <= 1 << 12);
        (1 << 16) / std::mem::size_of::<T>()
    };

    #[inline]
    fn at(i: usize) -> (usize, usize) {
        (i / Self::CHUNK, i % Self::CHUNK)
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The line holding the first chunks' headers (what [`Chunked::get`] reads first), or
    /// `None` when empty: for prefetching.
    #[inline]
    pub fn headers(&self) -> Option<&Vec<T>> {
        self.chunks.first()
    }

    #[inline]
    pub fn get(&self, i: usize) -> Option<&T> {
        let (c, j) = Self::at(i);
        self.chunks.get(c)?.get(j)
    }

    #[inline]
    pub fn push(&mut self, v: T) {
        let c = self.len / Self::CHUNK;
        if c == self.chunks.len() {
            // The first chunk starts small and grows; later ones are allocated whole.
            let cap = if c == 0 { 0 } else { Self::CHUNK };
            self.chunks.push(Vec::with_capacity(cap));
        }
        let chunk = &mut self.chunks[c];
        if chunk.len() == chunk.capacity() {
            let want = (chunk.len() * 2).clamp(4, Self::CHUNK);
            chunk.reserve_exact(want - chunk.len());
        }
        chunk.push(v);
        self.len += 1;
    }

    /// Removes element `i`, moving the last element into its place (as `Vec::swap_remove`).
    pub fn swap_remove(&mut self, i: usize) -> T {
        assert!(
            i < self.len,
            "swap_remove index {i} out of range {}",
            self.len
        );
        let last = self.len - 1;
        let c = last / Self::CHUNK;
        let tail = self.chunks[c]
            .pop()
            .expect("last chunk holds the last element");
        self.len = last;
        // One emptied chunk is kept as a spare until the chunk before it is half empty, so
        // inserting and removing around a chunk boundary does not allocate every time.
        if self.chunks[c].len() <= Self::CHUNK / 2 {
            self.chunks.truncate(c + 1);
        }
        if i == last {
            return tail;
        }
        let (c, j) = Self::at(i);
        std::mem::replace(&mut self.chunks[c][j], tail)
    }

    /// Gives back most of a single chunk left mostly empty: under a quarter full, it keeps
    /// twice what it holds. Later chunks are whole and go when emptied (`swap_remove`).
    pub fn shrink(&mut self) {
        if let [only] = &mut self.chunks[..] {
            let cap = only.capacity();
            if cap > 4 && only.len() <= cap / 4 {
                only.shrink_to((only.len() * 2).max(4));
            }
        }
    }

    /// Elements the chunks have room for without allocating.
    pub fn capacity(&self) -> usize {
        self.chunks.iter().map(Vec::capacity).sum()
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flatten()
    }
}

impl<T> std::ops::Index<usize> for Chunked<T> {
    type Output = T;
    #[inline]
    fn index(&self, i: usize) -> &T {
        let (c, j) = Self::at(i);
        &self.chunks[c][j]
    }
}

impl<T> std::ops::IndexMut<usize> for Chunked<T> {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut T {
        let (c, j) = Self::at(i);
        &mut self.chunks[c][j]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_like_a_vec_with_swap_remove() {
        // 128-byte elements: 512 per chunk, so the walk below crosses many chunks.
        let mut c: Chunked<[u64; 16]> = Chunked::default();
        let mut v: Vec<[u64; 16]> = Vec::new();
        let mut x = 0u64;
        for step in 0..20_000 {
            // Grow past several chunks, then shrink back and forth across the boundaries.
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let grow = step < 3000 || (x >> 60) < 8;
            if grow || v.is_empty() {
                c.push([step; 16]);
                v.push([step; 16]);
            } else {
                let i = (x >> 33) as usize % v.len();
                assert_eq!(c.swap_remove(i), v.swap_remove(i));
            }
            assert_eq!(c.len(), v.len());
            if step % 997 == 0 {
                assert!(c.iter().eq(v.iter()));
            }
        }
        for (i, want) in v.iter().enumerate() {
            assert_eq!(c.get(i), Some(want));
        }
        assert_eq!(c.get(v.len()), None);
        while let Some(i) = v.len().checked_sub(1) {
            assert_eq!(c.swap_remove(i / 2), v.swap_remove(i / 2));
        }
        assert!(c.is_empty() && c.chunks.len() <= 1);
    }
}
