//! Redis's `redisLrand48` (src/rand.c): the 48-bit linear congruential generator of
//! POSIX `lrand48`, which Redis's `math.random` draws from instead of the C library's
//! `rand()`, so scripts see the same sequence on every platform.

/// Multiplier and addend of the recurrence `x = (A * x + C) mod 2^48`.
const A: u64 = 0x5_DEEC_E66D;
const C: u64 = 0xB;
const MASK: u64 = (1 << 48) - 1;
/// The state before any seeding (POSIX's default seed words 0x1234, 0xABCD, 0x330E).
pub const INITIAL: u64 = 0x1234_ABCD_330E;
/// `REDIS_LRAND48_MAX`.
pub const LRAND48_MAX: i32 = i32::MAX;

/// One step: the new state and the 31-bit output (the state's top bits).
pub fn step(state: u64) -> (u64, i32) {
    let next = A.wrapping_mul(state).wrapping_add(C) & MASK;
    (next, (next >> 17) as i32)
}

/// The state `redisSrand48(seed)` sets: the seed in the high 32 bits, 0x330E below.
pub fn seeded(seed: i32) -> u64 {
    (u64::from(seed as u32) << 16) | 0x330E
}

/// Lua's `luaL_checkint` on a number: C casts it to `ptrdiff_t` (x86-64 gives the
/// "integer indefinite" value for NaN and out-of-range numbers) and then to `int`.
pub fn lua_checkint(d: f64) -> i32 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
    let wide = if d.is_nan() || !(-LIMIT..LIMIT).contains(&d) {
        i64::MIN
    } else {
        d as i64
    };
    wide as i32
}

/// `math.random`'s value in [0, 1) from one generator output.
pub fn unit(out: i32) -> f64 {
    f64::from(out % LRAND48_MAX) / f64::from(LRAND48_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt14(d: f64) -> String {
        // Lua 5.1's tostring uses "%.14g"; the values below are in [0.1, 1).
        let s = format!("{d:.14}");
        s.trim_end_matches('0').to_string()
    }

    #[test]
    fn matches_redis_after_start() {
        // Measured on redis-server 7.0.15 right after start:
        // {tostring(math.random()), tostring(math.random(100))} -> "0.39646477363839", 85.
        let (s, a) = step(INITIAL);
        assert_eq!(fmt14(unit(a)), "0.39646477363839");
        let (_, b) = step(s);
        assert_eq!((unit(b) * 100.0).floor() + 1.0, 85.0);
    }

    #[test]
    fn matches_redis_after_seed() {
        // math.randomseed(N); tostring(math.random()) on redis-server 7.0.15.
        for (seed, want) in [
            (5, "0.52483957937213"),
            (0, "0.17082803611217"),
            (-1, "0.30002572727391"),
            (2, "0.91243265378868"),
        ] {
            let (_, out) = step(seeded(seed));
            assert_eq!(fmt14(unit(out)), want, "seed {seed}");
        }
        // math.randomseed(5); math.random(), math.random(10), math.random(3, 7) -> _, 3, 6.
        let (s, _) = step(seeded(5));
        let (s, b) = step(s);
        assert_eq!((unit(b) * 10.0).floor() + 1.0, 3.0);
        let (_, c) = step(s);
        assert_eq!((unit(c) * 5.0).floor() + 3.0, 6.0);
    }

    #[test]
    fn checkint_casts_like_c() {
        assert_eq!(lua_checkint(2.9), 2);
        assert_eq!(lua_checkint(-2.9), -2);
        assert_eq!(lua_checkint(4_294_967_301.0), 5);
        assert_eq!(lua_checkint(1e30), 0);
        assert_eq!(lua_checkint(f64::NAN), 0);
        assert_eq!(lua_checkint(-2_147_483_648.0), i32::MIN);
    }
}
