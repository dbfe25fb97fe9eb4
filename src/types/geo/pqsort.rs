//! Redis's `pqsort.c`: the NetBSD quicksort that only keeps sorting the parts overlapping
//! `[lrange, rrange]`. GEO* COUNT uses it to order just the first N results, and which of
//! several equally distant points make the cut depends on its exact swaps, so this follows
//! it step by step (element indices instead of byte pointers).

use std::cmp::Ordering::{self, Equal, Greater, Less};

/// Sorts `v` enough that positions `l..=r` hold what a full sort would put there.
pub fn pqsort<T>(v: &mut [T], cmp: &impl Fn(&T, &T) -> Ordering, l: usize, r: usize) {
    let n = v.len();
    part(v, 0, n, cmp, l, r);
}

fn med3<T>(v: &[T], a: usize, b: usize, c: usize, cmp: &impl Fn(&T, &T) -> Ordering) -> usize {
    if cmp(&v[a], &v[b]) == Less {
        if cmp(&v[b], &v[c]) == Less {
            b
        } else if cmp(&v[a], &v[c]) == Less {
            c
        } else {
            a
        }
    } else if cmp(&v[b], &v[c]) == Greater {
        b
    } else if cmp(&v[a], &v[c]) == Less {
        a
    } else {
        c
    }
}

fn vecswap<T>(v: &mut [T], a: usize, b: usize, n: usize) {
    for i in 0..n {
        v.swap(a + i, b + i);
    }
}

/// Whether `[s, s + cnt)` overlaps the wanted range (Redis's `_l`/`_r` test).
fn wanted(s: usize, cnt: usize, l: usize, r: usize) -> bool {
    let e = s + cnt - 1;
    !((l < s && r < s) || (l > e && r > e))
}

fn part<T>(
    v: &mut [T],
    mut a: usize,
    mut n: usize,
    cmp: &impl Fn(&T, &T) -> Ordering,
    l: usize,
    r: usize,
) {
    loop {
        if n < 7 {
            for pm in a + 1..a + n {
                let mut pl = pm;
                while pl > a && cmp(&v[pl - 1], &v[pl]) == Greater {
                    v.swap(pl, pl - 1);
                    pl -= 1;
                }
            }
            return;
        }
        let mut pm = a + n / 2;
        if n > 7 {
            let mut pl = a;
            let mut pn = a + n - 1;
            if n > 40 {
                let d = n / 8;
                pl = med3(v, pl, pl + d, pl + 2 * d, cmp);
                pm = med3(v, pm - d, pm, pm + d, cmp);
                pn = med3(v, pn - 2 * d, pn - d, pn, cmp);
            }
            pm = med3(v, pl, pm, pn, cmp);
        }
        v.swap(a, pm);
        let (mut pa, mut pb) = (a + 1, a + 1);
        let (mut pc, mut pd) = (a + n - 1, a + n - 1);
        loop {
            while pb <= pc {
                let c = cmp(&v[pb], &v[a]);
                if c == Greater {
                    break;
                }
                if c == Equal {
                    v.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb <= pc {
                let c = cmp(&v[pc], &v[a]);
                if c == Less {
                    break;
                }
                if c == Equal {
                    v.swap(pc, pd);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb > pc {
                break;
            }
            v.swap(pb, pc);
            pb += 1;
            pc -= 1;
        }
        let pn = a + n;
        let k = (pa - a).min(pb - pa);
        vecswap(v, a, pb - k, k);
        let k = (pd - pc).min(pn - pd - 1);
        vecswap(v, pb, pn - k, k);
        let cnt = pb - pa;
        if cnt > 1 && wanted(a, cnt, l, r) {
            part(v, a, cnt, cmp, l, r);
        }
        let cnt = pd - pc;
        if cnt > 1 {
            // Iterate rather than recurse, as Redis does.
            a = pn - cnt;
            n = cnt;
            if wanted(a, cnt, l, r) {
                continue;
            }
        }
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_the_wanted_prefix() {
        let mut seed = 7u64;
        for len in [1usize, 2, 6, 7, 8, 40, 41, 100, 1000] {
            let mut v: Vec<u32> = (0..len)
                .map(|_| {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                    (seed >> 40) as u32 % 50
                })
                .collect();
            let mut full = v.clone();
            full.sort();
            let k = (len / 3).max(1);
            pqsort(&mut v, &|a: &u32, b: &u32| a.cmp(b), 0, k - 1);
            assert_eq!(&v[..k], &full[..k], "len {len}");
            let mut w = v.clone();
            pqsort(&mut w, &|a: &u32, b: &u32| a.cmp(b), 0, len - 1);
            assert_eq!(w, full);
        }
    }
}
