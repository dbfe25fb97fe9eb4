//! Redis's partial quicksort (pqsort.c: Bentley & McIlroy's 3-way quicksort from NetBSD,
//! skipping partitions outside the wanted range), which SORT uses with BY and LIMIT and
//! GEOSEARCH/GEORADIUS with COUNT. It is not stable, so elements that compare equal (ALPHA
//! weights that tie, equally distant points) come out in the order this exact sequence of
//! swaps leaves them; a faithful port gives the same replies as Redis.

use std::cmp::Ordering::{self, Equal, Greater, Less};

/// Sorts enough of `v` that positions `lo..=hi` hold what a full sort would put there.
pub fn pqsort<T>(v: &mut [T], lo: usize, hi: usize, cmp: &impl Fn(&T, &T) -> Ordering) {
    let n = v.len();
    part(v, 0, n, cmp, lo, hi);
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

    /// xorshift: deterministic inputs.
    fn seq(seed: u64, n: usize, modulo: u64) -> Vec<u64> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % modulo
            })
            .collect()
    }

    #[test]
    fn range_matches_a_full_sort() {
        for seed in 1..200u64 {
            for n in [0usize, 1, 5, 7, 8, 20, 41, 100, 300] {
                let v = seq(seed, n, 50);
                let mut full = v.clone();
                full.sort();
                for (lo, hi) in [(0, n.saturating_sub(1)), (n / 3, n / 2), (n / 2, n / 2)] {
                    if n == 0 {
                        continue;
                    }
                    let mut p = v.clone();
                    pqsort(&mut p, lo, hi, &|a: &u64, b: &u64| a.cmp(b));
                    assert_eq!(&p[lo..=hi], &full[lo..=hi], "seed {seed} n {n}");
                }
            }
        }
    }

    #[test]
    fn ties_follow_the_swaps() {
        // Keys tie on the first field; the second shows where each element went.
        let v: Vec<(u8, u8)> = [1u8, 0, 1, 0, 1, 0, 0, 1]
            .iter()
            .enumerate()
            .map(|(i, &k)| (k, i as u8))
            .collect();
        let mut p = v.clone();
        pqsort(&mut p, 0, 3, &|a: &(u8, u8), b: &(u8, u8)| a.0.cmp(&b.0));
        assert!(p[..4].iter().all(|e| e.0 == 0));
        // Not a stable order: that is the point of porting it exactly.
        let order: Vec<u8> = p.iter().map(|e| e.1).collect();
        assert_eq!(order.len(), 8);
    }
}
