//! Redis's partial quicksort (pqsort.c: Bentley & McIlroy's 3-way quicksort from NetBSD,
//! skipping partitions outside the wanted range), which SORT uses with BY and LIMIT. It is
//! not stable, so elements that compare equal (ALPHA weights that tie or are missing) come
//! out in the order this exact sequence of swaps leaves them; a faithful port gives the same
//! replies as Redis.

use std::cmp::Ordering;

/// Sorts enough of `v` that positions `lo..=hi` hold what a full sort would put there.
pub fn pqsort<T>(v: &mut [T], lo: usize, hi: usize, cmp: &impl Fn(&T, &T) -> Ordering) {
    let n = v.len();
    run(v, 0, n, lo, hi, cmp);
}

/// Whether the sub-array `[s, s + m)` lies wholly outside `lo..=hi` (pqsort's pointer test).
fn outside(s: usize, m: usize, lo: usize, hi: usize) -> bool {
    (lo < s && hi < s) || (lo >= s + m && hi >= s + m)
}

fn insertion<T>(v: &mut [T], a: usize, n: usize, cmp: &impl Fn(&T, &T) -> Ordering) {
    for pm in a + 1..a + n {
        let mut pl = pm;
        while pl > a && cmp(&v[pl - 1], &v[pl]) == Ordering::Greater {
            v.swap(pl, pl - 1);
            pl -= 1;
        }
    }
}

fn med3<T>(v: &[T], a: usize, b: usize, c: usize, cmp: &impl Fn(&T, &T) -> Ordering) -> usize {
    use Ordering::{Greater, Less};
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

fn run<T>(
    v: &mut [T],
    mut a: usize,
    mut n: usize,
    lo: usize,
    hi: usize,
    cmp: &impl Fn(&T, &T) -> Ordering,
) {
    loop {
        if n < 7 {
            insertion(v, a, n, cmp);
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
        let mut swapped = false;
        let (mut pa, mut pb) = (a + 1, a + 1);
        let (mut pc, mut pd) = (a + n - 1, a + n - 1);
        loop {
            while pb <= pc {
                let c = cmp(&v[pb], &v[a]);
                if c == Ordering::Greater {
                    break;
                }
                if c == Ordering::Equal {
                    swapped = true;
                    v.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb <= pc {
                let c = cmp(&v[pc], &v[a]);
                if c == Ordering::Less {
                    break;
                }
                if c == Ordering::Equal {
                    swapped = true;
                    v.swap(pc, pd);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb > pc {
                break;
            }
            v.swap(pb, pc);
            swapped = true;
            pb += 1;
            pc -= 1;
        }
        if !swapped {
            insertion(v, a, n, cmp);
            return;
        }
        let pn = a + n;
        let r = (pa - a).min(pb - pa);
        vecswap(v, a, pb - r, r);
        let r = (pd - pc).min(pn - pd - 1);
        vecswap(v, pb, pn - r, r);
        let r = pb - pa;
        if r > 1 && !outside(a, r, lo, hi) {
            run(v, a, r, lo, hi, cmp);
        }
        let r = pd - pc;
        if r <= 1 {
            return;
        }
        a = pn - r;
        n = r;
        if outside(a, n, lo, hi) {
            return;
        }
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
