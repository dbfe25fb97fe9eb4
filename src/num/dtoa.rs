//! Double → text as Redis 7.2 replies it (`d2string`): `nan`, `inf`/`-inf`, `0`/`-0`,
//! integers within ±2^62 as integers, everything else through Grisu2 with the digit
//! placement of the `fpconv` library Redis bundles. Grisu2 is not always the shortest
//! round-trip form (ryu is), and the placement differs from ryu's and from `%.17g`
//! (`1.5e-7`, `1e+21`, no zero-padded exponent), so both are reproduced step by step here:
//! a reply must match Redis byte for byte.

/// A 64-bit significand and a binary exponent ("do-it-yourself" floating point).
#[derive(Clone, Copy, Debug)]
struct Fp {
    frac: u64,
    exp: i32,
}

const FRAC_MASK: u64 = 0x000F_FFFF_FFFF_FFFF;
const EXP_MASK: u64 = 0x7FF0_0000_0000_0000;
const HIDDEN_BIT: u64 = 0x0010_0000_0000_0000;
const EXP_BIAS: i32 = 1023 + 52;

/// 10^k for k = FIRST_POWER + 8 i: the significand of 10^k rounded to nearest, normalized
/// to [2^63, 2^64), and its binary exponent (computed with exact rational arithmetic).
const FIRST_POWER: i32 = -348;
const POWER_STEP: i32 = 8;
const POWERS: [(u64, i32); 87] = [
    (0xfa8fd5a0081c0288, -1220),
    (0xbaaee17fa23ebf76, -1193),
    (0x8b16fb203055ac76, -1166),
    (0xcf42894a5dce35ea, -1140),
    (0x9a6bb0aa55653b2d, -1113),
    (0xe61acf033d1a45df, -1087),
    (0xab70fe17c79ac6ca, -1060),
    (0xff77b1fcbebcdc4f, -1034),
    (0xbe5691ef416bd60c, -1007),
    (0x8dd01fad907ffc3c, -980),
    (0xd3515c2831559a83, -954),
    (0x9d71ac8fada6c9b5, -927),
    (0xea9c227723ee8bcb, -901),
    (0xaecc49914078536d, -874),
    (0x823c12795db6ce57, -847),
    (0xc21094364dfb5637, -821),
    (0x9096ea6f3848984f, -794),
    (0xd77485cb25823ac7, -768),
    (0xa086cfcd97bf97f4, -741),
    (0xef340a98172aace5, -715),
    (0xb23867fb2a35b28e, -688),
    (0x84c8d4dfd2c63f3b, -661),
    (0xc5dd44271ad3cdba, -635),
    (0x936b9fcebb25c996, -608),
    (0xdbac6c247d62a584, -582),
    (0xa3ab66580d5fdaf6, -555),
    (0xf3e2f893dec3f126, -529),
    (0xb5b5ada8aaff80b8, -502),
    (0x87625f056c7c4a8b, -475),
    (0xc9bcff6034c13053, -449),
    (0x964e858c91ba2655, -422),
    (0xdff9772470297ebd, -396),
    (0xa6dfbd9fb8e5b88f, -369),
    (0xf8a95fcf88747d94, -343),
    (0xb94470938fa89bcf, -316),
    (0x8a08f0f8bf0f156b, -289),
    (0xcdb02555653131b6, -263),
    (0x993fe2c6d07b7fac, -236),
    (0xe45c10c42a2b3b06, -210),
    (0xaa242499697392d3, -183),
    (0xfd87b5f28300ca0e, -157),
    (0xbce5086492111aeb, -130),
    (0x8cbccc096f5088cc, -103),
    (0xd1b71758e219652c, -77),
    (0x9c40000000000000, -50),
    (0xe8d4a51000000000, -24),
    (0xad78ebc5ac620000, 3),
    (0x813f3978f8940984, 30),
    (0xc097ce7bc90715b3, 56),
    (0x8f7e32ce7bea5c70, 83),
    (0xd5d238a4abe98068, 109),
    (0x9f4f2726179a2245, 136),
    (0xed63a231d4c4fb27, 162),
    (0xb0de65388cc8ada8, 189),
    (0x83c7088e1aab65db, 216),
    (0xc45d1df942711d9a, 242),
    (0x924d692ca61be758, 269),
    (0xda01ee641a708dea, 295),
    (0xa26da3999aef774a, 322),
    (0xf209787bb47d6b85, 348),
    (0xb454e4a179dd1877, 375),
    (0x865b86925b9bc5c2, 402),
    (0xc83553c5c8965d3d, 428),
    (0x952ab45cfa97a0b3, 455),
    (0xde469fbd99a05fe3, 481),
    (0xa59bc234db398c25, 508),
    (0xf6c69a72a3989f5c, 534),
    (0xb7dcbf5354e9bece, 561),
    (0x88fcf317f22241e2, 588),
    (0xcc20ce9bd35c78a5, 614),
    (0x98165af37b2153df, 641),
    (0xe2a0b5dc971f303a, 667),
    (0xa8d9d1535ce3b396, 694),
    (0xfb9b7cd9a4a7443c, 720),
    (0xbb764c4ca7a44410, 747),
    (0x8bab8eefb6409c1a, 774),
    (0xd01fef10a657842c, 800),
    (0x9b10a4e5e9913129, 827),
    (0xe7109bfba19c0c9d, 853),
    (0xac2820d9623bf429, 880),
    (0x80444b5e7aa7cf85, 907),
    (0xbf21e44003acdd2d, 933),
    (0x8e679c2f5e44ff8f, 960),
    (0xd433179d9c8cb841, 986),
    (0x9e19db92b4e31ba9, 1013),
    (0xeb96bf6ebadf77d9, 1039),
    (0xaf87023b9bf0ee6b, 1066),
];

/// Powers of ten, 10^19 down to 10^0.
const TENS: [u64; 20] = {
    let mut t = [1u64; 20];
    let mut i = 19;
    while i > 0 {
        t[i - 1] = t[i] * 10;
        i -= 1;
    }
    t
};

fn build_fp(d: f64) -> Fp {
    let bits = d.to_bits();
    let frac = bits & FRAC_MASK;
    let exp = ((bits & EXP_MASK) >> 52) as i32;
    if exp != 0 {
        Fp {
            frac: frac + HIDDEN_BIT,
            exp: exp - EXP_BIAS,
        }
    } else {
        Fp {
            frac,
            exp: 1 - EXP_BIAS,
        }
    }
}

fn normalize(fp: &mut Fp) {
    while fp.frac & HIDDEN_BIT == 0 {
        fp.frac <<= 1;
        fp.exp -= 1;
    }
    fp.frac <<= 11;
    fp.exp -= 11;
}

/// The boundaries halfway to the neighbouring doubles, on a common exponent.
fn boundaries(fp: Fp) -> (Fp, Fp) {
    let mut upper = Fp {
        frac: (fp.frac << 1) + 1,
        exp: fp.exp - 1,
    };
    while upper.frac & (HIDDEN_BIT << 1) == 0 {
        upper.frac <<= 1;
        upper.exp -= 1;
    }
    upper.frac <<= 10;
    upper.exp -= 10;
    // The lower neighbour is closer when the significand is a power of two.
    let l_shift = if fp.frac == HIDDEN_BIT { 2 } else { 1 };
    let mut lower = Fp {
        frac: (fp.frac << l_shift) - 1,
        exp: fp.exp - l_shift,
    };
    lower.frac <<= lower.exp - upper.exp;
    lower.exp = upper.exp;
    (lower, upper)
}

/// The product's high 64 bits, rounded half up on the low ones.
fn multiply(a: Fp, b: Fp) -> Fp {
    const LO: u64 = 0xFFFF_FFFF;
    let ah_bl = (a.frac >> 32) * (b.frac & LO);
    let al_bh = (a.frac & LO) * (b.frac >> 32);
    let al_bl = (a.frac & LO) * (b.frac & LO);
    let ah_bh = (a.frac >> 32) * (b.frac >> 32);
    let mut tmp = (ah_bl & LO) + (al_bh & LO) + (al_bl >> 32);
    tmp += 1 << 31;
    Fp {
        frac: ah_bh + (ah_bl >> 32) + (al_bh >> 32) + (tmp >> 32),
        exp: a.exp + b.exp + 64,
    }
}

/// The cached power whose product with a significand of exponent `exp` lands the result's
/// exponent in [-60, -32]; returns it and its decimal exponent.
fn cached_pow10(exp: i32) -> (Fp, i32) {
    const ONE_LOG_TEN: f64 = 0.301_029_995_663_981_14;
    // C's int conversion truncates toward zero, as `as` does.
    let approx = (f64::from(-(exp + POWERS.len() as i32)) * ONE_LOG_TEN) as i32;
    let mut idx = ((approx - FIRST_POWER) / POWER_STEP) as usize;
    loop {
        let current = exp + POWERS[idx].1 + 64;
        if current < -60 {
            idx += 1;
        } else if current > -32 {
            idx -= 1;
        } else {
            let (frac, exp) = POWERS[idx];
            return (Fp { frac, exp }, FIRST_POWER + idx as i32 * POWER_STEP);
        }
    }
}

/// Moves the last digit down while that brings it closer to the exact value (`wfrac` away
/// from the upper bound) and stays inside the interval.
fn round_digit(digits: &mut [u8], n: usize, delta: u64, mut rem: u64, kappa: u64, frac: u64) {
    while rem < frac
        && delta.wrapping_sub(rem) >= kappa
        && (rem.wrapping_add(kappa) < frac
            || frac.wrapping_sub(rem) > rem.wrapping_add(kappa).wrapping_sub(frac))
    {
        digits[n - 1] -= 1;
        rem = rem.wrapping_add(kappa);
    }
}

/// Generates the digits of `upper` until they are inside (lower, upper); adds the number of
/// digits not generated to `k`. Returns the number of digits.
fn generate_digits(w: Fp, upper: Fp, lower: Fp, digits: &mut [u8; 24], k: &mut i32) -> usize {
    let wfrac = upper.frac.wrapping_sub(w.frac);
    let mut delta = upper.frac.wrapping_sub(lower.frac);
    let shift = (-upper.exp) as u32;
    let one = 1u64 << shift;
    let mut part1 = upper.frac >> shift;
    let mut part2 = upper.frac & (one - 1);
    let mut idx = 0;
    let mut kappa = 10;
    // The integral part, from 10^9 down.
    let mut div_i = 10;
    while kappa > 0 {
        let div = TENS[div_i];
        let digit = part1 / div;
        if digit != 0 || idx != 0 {
            digits[idx] = b'0' + digit as u8;
            idx += 1;
        }
        part1 -= digit * div;
        kappa -= 1;
        let tmp = (part1 << shift).wrapping_add(part2);
        if tmp <= delta {
            *k += kappa;
            round_digit(digits, idx, delta, tmp, div << shift, wfrac);
            return idx;
        }
        div_i += 1;
    }
    // The fractional part.
    let mut unit_i = 18;
    loop {
        part2 = part2.wrapping_mul(10);
        delta = delta.wrapping_mul(10);
        kappa -= 1;
        let digit = part2 >> shift;
        if digit != 0 || idx != 0 {
            digits[idx] = b'0' + digit as u8;
            idx += 1;
        }
        part2 &= one - 1;
        if part2 < delta {
            *k += kappa;
            round_digit(
                digits,
                idx,
                delta,
                part2,
                one,
                wfrac.wrapping_mul(TENS[unit_i]),
            );
            return idx;
        }
        unit_i -= 1;
    }
}

/// Digits and decimal exponent of a finite non-zero `d` (value = digits × 10^k).
fn grisu2(d: f64, digits: &mut [u8; 24]) -> (usize, i32) {
    let mut w = build_fp(d);
    let (lower, upper) = boundaries(w);
    normalize(&mut w);
    let (cp, k) = cached_pow10(upper.exp);
    let w = multiply(w, cp);
    let mut upper = multiply(upper, cp);
    let mut lower = multiply(lower, cp);
    lower.frac += 1;
    upper.frac -= 1;
    let mut kk = -k;
    let n = generate_digits(w, upper, lower, digits, &mut kk);
    (n, kk)
}

/// Places the digits: plain integer, plain decimal, or `d.ddde±x`.
fn emit(out: &mut String, digits: &[u8], k: i32, neg: bool) {
    let n = digits.len() as i32;
    let exp = (k + n - 1).abs();
    let push = |out: &mut String, b: &[u8]| out.extend(b.iter().map(|&c| c as char));
    if k >= 0 && exp < n + 7 {
        push(out, digits);
        out.extend(std::iter::repeat_n('0', k as usize));
        return;
    }
    if k < 0 && (k > -7 || exp < 4) {
        let offset = n - k.abs();
        if offset <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-offset) as usize));
            push(out, digits);
        } else {
            push(out, &digits[..offset as usize]);
            out.push('.');
            push(out, &digits[offset as usize..]);
        }
        return;
    }
    let n = n.min(18 - neg as i32);
    out.push(digits[0] as char);
    if n > 1 {
        out.push('.');
        push(out, &digits[1..n as usize]);
    }
    out.push('e');
    out.push(if k + n - 1 < 0 { '-' } else { '+' });
    out.push_str(itoa::Buffer::new().format(exp));
}

/// `fpconv_dtoa`: a double's text (the integral shortcut of `d2string` aside), as Redis
/// 7.2 prints Lua numbers passed to commands: the sign bit first, so `-0`, `-inf`, `-nan`.
pub fn fpconv(d: f64) -> String {
    let mut out = String::with_capacity(24);
    let neg = d.is_sign_negative();
    if neg {
        out.push('-');
    }
    if d == 0.0 {
        out.push('0');
        return out;
    }
    if !d.is_finite() {
        out.push_str(if d.is_nan() { "nan" } else { "inf" });
        return out;
    }
    let mut digits = [0u8; 24];
    let (n, k) = grisu2(d.abs(), &mut digits);
    emit(&mut out, &digits[..n], k, neg);
    out
}

/// Redis 7.2 `d2string`: the text of a double in replies (`addReplyDouble`) and in
/// listpack-encoded sorted sets.
pub fn d2string(d: f64) -> String {
    if d.is_nan() {
        return "nan".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if d == 0.0 {
        return if d.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    // `double2ll`: within ±(LLONG_MAX/2), which rounds to ±2^62, integral values print as
    // integers.
    const LIM: f64 = (i64::MAX / 2) as f64;
    if (-LIM..=LIM).contains(&d) && d.trunc() == d {
        return itoa::Buffer::new().format(d as i64).to_string();
    }
    fpconv(d)
}

/// C's `%.17g` of a double (Redis's `ld2string(.., LD_STR_AUTO)` of a double-valued long
/// double prints the same digits): 17 significant digits, trailing zeros dropped, `e±dd`
/// below 1e-4 and from 1e17.
pub fn g17(d: f64) -> String {
    if d.is_nan() {
        return "nan".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    // 17 correctly rounded significant digits and the decimal exponent.
    let sci = format!("{:.16e}", d);
    let (mant, e) = sci.split_once('e').expect("exponent");
    let x: i32 = e.parse().expect("exponent digits");
    let neg = mant.starts_with('-');
    let digits: Vec<u8> = mant.bytes().filter(u8::is_ascii_digit).collect();
    let mut out = String::with_capacity(26);
    if neg {
        out.push('-');
    }
    let trim = |s: &mut String| {
        if s.contains('.') {
            let t = s.trim_end_matches('0').trim_end_matches('.').len();
            s.truncate(t);
        }
    };
    if !(-4..17).contains(&x) {
        let mut m = String::new();
        m.push(digits[0] as char);
        m.push('.');
        m.extend(digits[1..].iter().map(|&c| c as char));
        trim(&mut m);
        out.push_str(&m);
        out.push('e');
        out.push(if x < 0 { '-' } else { '+' });
        if x.abs() < 10 {
            out.push('0');
        }
        out.push_str(itoa::Buffer::new().format(x.abs()));
        return out;
    }
    let mut m = String::new();
    if x < 0 {
        m.push_str("0.");
        m.extend(std::iter::repeat_n('0', (-x - 1) as usize));
        m.extend(digits.iter().map(|&c| c as char));
    } else {
        let int = x as usize + 1;
        m.extend(digits[..int].iter().map(|&c| c as char));
        m.push('.');
        m.extend(digits[int..].iter().map(|&c| c as char));
    }
    trim(&mut m);
    out.push_str(&m);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn d2string_matches_redis_7_2() {
        // Expected texts printed by Redis 7.2's fpconv_dtoa / d2string.
        let cases: &[(f64, &str)] = &[
            (0.1, "0.1"),
            (1e21, "1e+21"),
            (1.5e-7, "1.5e-7"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (123456789012345678.0, "123456789012345680"),
            (3.0, "3"),
            (-0.0, "-0"),
            (0.0, "0"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (-2.5, "-2.5"),
            (4611686018427387904.0, "4611686018427387904"),
        ];
        for &(d, want) in cases {
            assert_eq!(d2string(d), want, "{d:e}");
        }
    }

    #[test]
    fn fpconv_layouts() {
        // Redis 7.2's fpconv_dtoa, as used for Lua numbers passed to redis.call.
        for (d, want) in [
            (0.1 + 0.2, "0.30000000000000004"),
            (9007199254740991.0, "9007199254740991"),
            (1e16, "1e+16"),
            (12300000.0, "12300000"),
            (1e-5, "0.00001"),
            (1e-7, "1e-7"),
            (1.5e300, "1.5e+300"),
            (-0.0, "-0"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
            (-f64::NAN, "-nan"),
            (-1234.5, "-1234.5"),
            (2f64.powi(63), "9223372036854776000"),
        ] {
            assert_eq!(fpconv(d), want, "{d:e}");
        }
    }

    #[test]
    fn g17_is_printf() {
        let cases: &[(f64, &str)] = &[
            (0.1, "0.10000000000000001"),
            (1.0, "1"),
            (-0.0, "-0"),
            (1e17, "1e+17"),
            (1.5e-7, "1.4999999999999999e-07"),
            (0.0001, "0.0001"),
            (123.5, "123.5"),
            (1e300, "1.0000000000000001e+300"),
        ];
        for &(d, want) in cases {
            assert_eq!(g17(d), want, "{d:e}");
        }
    }
}
