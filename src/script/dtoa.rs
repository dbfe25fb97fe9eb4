//! How Redis 7.2 prints a Lua number passed to a command (`redis.call('SET', k, 0.1+0.2)`,
//! `redis.acl_check_cmd`): `fpconv_dtoa` of deps/fpconv, where 7.0 used `%.17g` and
//! Lua's own `tostring` keeps `%.14g`. The digits come from Grisu2 (they always round-trip
//! and are almost always the shortest; the rare longer outputs are part of the protocol,
//! so this is Grisu2 itself, not a shortest-digits printer), then fpconv's own layout:
//! `1e+20`, `1e-7`, `0.00001`, `12300000`, `-0`, `inf`, `-inf`, `nan` and `-nan`.

/// A 64-bit significand and its binary exponent: `f * 2^e`.
#[derive(Clone, Copy)]
struct Fp {
    f: u64,
    e: i32,
}

const FRAC_MASK: u64 = (1 << 52) - 1;
const EXP_MASK: u64 = 0x7ff << 52;
const HIDDEN: u64 = 1 << 52;
const SIGN: u64 = 1 << 63;

/// `10^(-348 + 8i)` as normalized `Fp`s, the significand rounded to nearest (generated
/// with exact rational arithmetic; the cache of Loitsch's paper).
const POW10: [(u64, i32); 87] = [
    (18054884314459144840, -1220),
    (13451937075301367670, -1193),
    (10022474136428063862, -1166),
    (14934650266808366570, -1140),
    (11127181549972568877, -1113),
    (16580792590934885855, -1087),
    (12353653155963782858, -1060),
    (18408377700990114895, -1034),
    (13715310171984221708, -1007),
    (10218702384817765436, -980),
    (15227053142812498563, -954),
    (11345038669416679861, -927),
    (16905424996341287883, -901),
    (12595523146049147757, -874),
    (9384396036005875287, -847),
    (13983839803942852151, -821),
    (10418772551374772303, -794),
    (15525180923007089351, -768),
    (11567161174868858868, -741),
    (17236413322193710309, -715),
    (12842128665889583758, -688),
    (9568131466127621947, -661),
    (14257626930069360058, -635),
    (10622759856335341974, -608),
    (15829145694278690180, -582),
    (11793632577567316726, -555),
    (17573882009934360870, -529),
    (13093562431584567480, -502),
    (9755464219737475723, -475),
    (14536774485912137811, -449),
    (10830740992659433045, -422),
    (16139061738043178685, -396),
    (12024538023802026127, -369),
    (17917957937422433684, -343),
    (13349918974505688015, -316),
    (9946464728195732843, -289),
    (14821387422376473014, -263),
    (11042794154864902060, -236),
    (16455045573212060422, -210),
    (12259964326927110867, -183),
    (18268770466636286478, -157),
    (13611294676837538539, -130),
    (10141204801825835212, -103),
    (15111572745182864684, -77),
    (11258999068426240000, -50),
    (16777216000000000000, -24),
    (12500000000000000000, 3),
    (9313225746154785156, 30),
    (13877787807814456755, 56),
    (10339757656912845936, 83),
    (15407439555097886824, 109),
    (11479437019748901445, 136),
    (17105694144590052135, 162),
    (12744735289059618216, 189),
    (9495567745759798747, 216),
    (14149498560666738074, 242),
    (10542197943230523224, 269),
    (15709099088952724970, 295),
    (11704190886730495818, 322),
    (17440603504673385349, 348),
    (12994262207056124023, 375),
    (9681479787123295682, 402),
    (14426529090290212157, 428),
    (10748601772107342003, 455),
    (16016664761464807395, 481),
    (11933345169920330789, 508),
    (17782069995880619868, 534),
    (13248674568444952270, 561),
    (9871031767461413346, 588),
    (14708983551653345445, 614),
    (10959046745042015199, 641),
    (16330252207878254650, 667),
    (12166986024289022870, 694),
    (18130221999122236476, 720),
    (13508068024458167312, 747),
    (10064294952495520794, 774),
    (14996968138956309548, 800),
    (11173611982879273257, 827),
    (16649979327439178909, 853),
    (12405201291620119593, 880),
    (9242595204427927429, 907),
    (13772540099066387757, 933),
    (10261342003245940623, 960),
    (15290591125556738113, 986),
    (11392378155556871081, 1013),
    (16975966327722178521, 1039),
    (12648080533535911531, 1066),
];
const FIRST_POW: i32 = -348;
const POW_STEP: i32 = 8;
/// The binary exponent window a scaled value must land in for digit generation.
const ALPHA: i32 = -60;
const GAMMA: i32 = -32;

const TENS: [u64; 20] = {
    let mut t = [1u64; 20];
    let mut i = 19;
    while i > 0 {
        t[i - 1] = t[i] * 10;
        i -= 1;
    }
    t
};

/// The decimal text of `d`, exactly as Redis 7.2's `fpconv_dtoa`.
pub fn fpconv_dtoa(d: f64) -> String {
    let bits = d.to_bits();
    let mut out = String::with_capacity(24);
    if bits & SIGN != 0 {
        out.push('-');
    }
    if d == 0.0 {
        out.push('0');
        return out;
    }
    if bits & EXP_MASK == EXP_MASK {
        out.push_str(if bits & FRAC_MASK != 0 { "nan" } else { "inf" });
        return out;
    }
    let (digits, k) = grisu2(d);
    layout(&mut out, &digits, k, bits & SIGN != 0);
    out
}

/// Digits and decimal exponent: `d = digits * 10^k` (up to rounding).
fn grisu2(d: f64) -> (Vec<u8>, i32) {
    let w = unpack(d);
    let (lower, upper) = boundaries(w);
    let w = normalize(w);
    let (cp, k) = cached_power(upper.e);
    let w = multiply(w, cp);
    let mut upper = multiply(upper, cp);
    let mut lower = multiply(lower, cp);
    lower.f = lower.f.wrapping_add(1);
    upper.f = upper.f.wrapping_sub(1);
    generate(w, upper, lower, -k)
}

fn unpack(d: f64) -> Fp {
    let bits = d.to_bits();
    let frac = bits & FRAC_MASK;
    let exp = ((bits & EXP_MASK) >> 52) as i32;
    if exp != 0 {
        Fp {
            f: frac + HIDDEN,
            e: exp - 1075,
        }
    } else {
        Fp { f: frac, e: -1074 }
    }
}

fn normalize(mut fp: Fp) -> Fp {
    while fp.f & HIDDEN == 0 {
        fp.f <<= 1;
        fp.e -= 1;
    }
    Fp {
        f: fp.f << 11,
        e: fp.e - 11,
    }
}

/// The midpoints to the neighbouring doubles, on the upper one's exponent.
fn boundaries(fp: Fp) -> (Fp, Fp) {
    let mut upper = Fp {
        f: (fp.f << 1) + 1,
        e: fp.e - 1,
    };
    while upper.f & (HIDDEN << 1) == 0 {
        upper.f <<= 1;
        upper.e -= 1;
    }
    upper.f <<= 10;
    upper.e -= 10;
    // The gap below a power of two is half the gap above it.
    let shift = if fp.f == HIDDEN { 2 } else { 1 };
    let mut lower = Fp {
        f: (fp.f << shift) - 1,
        e: fp.e - shift,
    };
    lower.f <<= lower.e - upper.e;
    lower.e = upper.e;
    (lower, upper)
}

/// The high 64 bits of the product, rounded half up.
fn multiply(a: Fp, b: Fp) -> Fp {
    let p = u128::from(a.f) * u128::from(b.f);
    Fp {
        f: ((p + (1u128 << 63)) >> 64) as u64,
        e: a.e + b.e + 64,
    }
}

/// The cached power that scales a value of binary exponent `exp` into the window,
/// and its decimal exponent.
fn cached_power(exp: i32) -> (Fp, i32) {
    // Truncated like C's double-to-int conversion.
    let approx = (f64::from(-(exp + 87)) * 0.301_029_995_663_981_14) as i32;
    let mut idx = ((approx - FIRST_POW) / POW_STEP) as usize;
    loop {
        let (f, e) = POW10[idx];
        let current = exp + e + 64;
        if current < ALPHA {
            idx += 1;
        } else if current > GAMMA {
            idx -= 1;
        } else {
            return (Fp { f, e }, FIRST_POW + idx as i32 * POW_STEP);
        }
    }
}

/// Grisu's digit generation from the scaled upper boundary.
fn generate(w: Fp, upper: Fp, lower: Fp, mut k: i32) -> (Vec<u8>, i32) {
    let wfrac = upper.f.wrapping_sub(w.f);
    let mut delta = upper.f.wrapping_sub(lower.f);
    let shift = -upper.e as u32;
    let one = 1u64 << shift;
    let mut part1 = upper.f >> shift;
    let mut part2 = upper.f & (one - 1);
    let mut digits = Vec::with_capacity(18);

    // The integral part, from the 10^9 place down.
    let mut kappa = 10;
    for &div in &TENS[10..20] {
        let digit = part1 / div;
        if digit != 0 || !digits.is_empty() {
            digits.push(b'0' + digit as u8);
        }
        part1 -= digit * div;
        kappa -= 1;
        let rest = (part1 << shift) + part2;
        if rest <= delta {
            k += kappa;
            round_last(&mut digits, delta, rest, div << shift, wfrac);
            return (digits, k);
        }
    }
    // The fraction, one digit per step, until the remainder is inside the bounds.
    let mut unit = 18;
    loop {
        part2 = part2.wrapping_mul(10);
        delta = delta.wrapping_mul(10);
        kappa -= 1;
        let digit = part2 >> shift;
        if digit != 0 || !digits.is_empty() {
            digits.push(b'0' + digit as u8);
        }
        part2 &= one - 1;
        if part2 < delta {
            k += kappa;
            round_last(
                &mut digits,
                delta,
                part2,
                one,
                wfrac.wrapping_mul(TENS[unit]),
            );
            return (digits, k);
        }
        unit = unit.saturating_sub(1);
    }
}

/// Moves the last digit down while that brings the text closer to the value.
fn round_last(digits: &mut [u8], delta: u64, mut rem: u64, kappa: u64, frac: u64) {
    let Some(last) = digits.last_mut() else {
        return;
    };
    while rem < frac
        && delta.wrapping_sub(rem) >= kappa
        && (rem.wrapping_add(kappa) < frac
            || frac.wrapping_sub(rem) > rem.wrapping_add(kappa).wrapping_sub(frac))
    {
        *last -= 1;
        rem = rem.wrapping_add(kappa);
    }
}

/// fpconv's layout of `digits * 10^k`: plain integers up to 7 trailing zeros past the
/// digits, plain decimals down to six leading zeros, scientific otherwise.
fn layout(out: &mut String, digits: &[u8], k: i32, neg: bool) {
    let n = digits.len() as i32;
    let exp = (k + n - 1).abs();
    let text = |d: &[u8]| std::str::from_utf8(d).unwrap_or_default().to_owned();
    if k >= 0 && exp < n + 7 {
        out.push_str(&text(digits));
        out.extend(std::iter::repeat_n('0', k as usize));
        return;
    }
    if k < 0 && (k > -7 || exp < 4) {
        let int_len = n + k;
        if int_len <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-int_len) as usize));
            out.push_str(&text(digits));
        } else {
            let (int, frac) = digits.split_at(int_len as usize);
            out.push_str(&text(int));
            out.push('.');
            out.push_str(&text(frac));
        }
        return;
    }
    let shown = &digits[..digits.len().min(18 - usize::from(neg))];
    out.push(shown[0] as char);
    if shown.len() > 1 {
        out.push('.');
        out.push_str(&text(&shown[1..]));
    }
    out.push('e');
    out.push(if k + shown.len() as i32 - 1 < 0 {
        '-'
    } else {
        '+'
    });
    out.push_str(&exp.to_string());
}

#[cfg(test)]
mod tests {
    use super::fpconv_dtoa;

    #[test]
    fn layouts() {
        for (d, want) in [
            (0.1 + 0.2, "0.30000000000000004"),
            (0.1, "0.1"),
            (9007199254740991.0, "9007199254740991"),
            (1e16, "1e+16"),
            (12300000.0, "12300000"),
            (1e20, "1e+20"),
            (1e-5, "0.00001"),
            (1e-7, "1e-7"),
            (1.5e-7, "1.5e-7"),
            (1.5e300, "1.5e+300"),
            (5e-324, "5e-324"),
            (-0.0, "-0"),
            (0.0, "0"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
            (-f64::NAN, "-nan"),
            (-1234.5, "-1234.5"),
            (2f64.powi(63), "9223372036854776000"),
        ] {
            assert_eq!(fpconv_dtoa(d), want, "{d:e}");
        }
    }
}
