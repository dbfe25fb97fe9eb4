//! x87 80-bit extended precision ("long double") in software, for `INCRBYFLOAT` (and
//! `HINCRBYFLOAT`). Redis parses both operands with `strtold`, adds them as `long double` and
//! stores `%.17Lf` with trailing zeros trimmed. Rust has no 80-bit float and `f64` shows
//! (10.5 + 0.1 prints `10.59999999999999964`), so this reproduces the x87 format exactly: a
//! 64-bit significand, the IEEE extended exponent range with subnormals, round-half-even
//! everywhere (glibc's `strtold` and `printf` round correctly).

use std::cmp::Ordering;

/// Exponent of the lowest significand bit of the smallest (subnormal) values: 2^-16445.
const EMIN: i64 = -16445;
/// Finite values are below 2^16384.
const EMAX: i64 = 16384;
/// `string2ld` refuses inputs this long or longer (`MAX_LONG_DOUBLE_CHARS`).
const MAX_CHARS: usize = 5120;

/// A finite extended-precision value: `(-1)^neg * m * 2^e`. Canonical: zero has `m == 0`,
/// otherwise `m` has its top bit set unless the value is subnormal (`e == EMIN`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LongDouble {
    neg: bool,
    m: u64,
    e: i64,
}

/// What `string2ld` accepts: a finite value, or an infinity spelled out (`inf`, `-infinity`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Parsed {
    Finite(LongDouble),
    Infinite,
}

impl LongDouble {
    pub const ZERO: LongDouble = LongDouble {
        neg: false,
        m: 0,
        e: 0,
    };

    fn zero(neg: bool) -> LongDouble {
        LongDouble { neg, m: 0, e: 0 }
    }

    /// Exact conversion (the significand has 64 bits).
    pub fn from_i64(v: i64) -> LongDouble {
        if v == 0 {
            return LongDouble::ZERO;
        }
        let m = v.unsigned_abs();
        let z = m.leading_zeros();
        LongDouble {
            neg: v < 0,
            m: m << z,
            e: -(z as i64),
        }
    }

    /// The sum, rounded to nearest-even; `None` when it overflows to infinity.
    pub fn checked_add(self, o: LongDouble) -> Option<LongDouble> {
        if self.m == 0 && o.m == 0 {
            return Some(LongDouble::zero(self.neg && o.neg));
        }
        if self.m == 0 {
            return Some(o);
        }
        if o.m == 0 {
            return Some(self);
        }
        // A value 66+ binary orders below a normalized one is under a quarter of its ulp:
        // the sum rounds back to the larger operand.
        if self.e - o.e >= 66 {
            return Some(self);
        }
        if o.e - self.e >= 66 {
            return Some(o);
        }
        let emin = self.e.min(o.e);
        let mut a = Big::from_u128(self.m as u128);
        a.shl_bits((self.e - emin) as u64);
        let mut b = Big::from_u128(o.m as u128);
        b.shl_bits((o.e - emin) as u64);
        let (neg, n) = if self.neg == o.neg {
            a.add_big(&b);
            (self.neg, a)
        } else {
            match a.cmp_big(&b) {
                Ordering::Greater => {
                    a.sub_big(&b);
                    (self.neg, a)
                }
                Ordering::Less => {
                    b.sub_big(&a);
                    (o.neg, b)
                }
                Ordering::Equal => return Some(LongDouble::ZERO),
            }
        };
        round(neg, &n, emin, false)
    }

    /// `%.17Lf` with trailing zeros (and a bare `.`) removed, `-0` printed as `0`: Redis's
    /// `ld2string(..., LD_STR_HUMAN)`.
    pub fn to_human(self) -> String {
        let mut s = String::new();
        if self.neg {
            s.push('-');
        }
        if self.e >= 0 {
            let mut n = Big::from_u128(self.m as u128);
            n.shl_bits(self.e as u64);
            s.push_str(&n.to_decimal());
        } else {
            const SCALE: u128 = 100_000_000_000_000_000; // 10^17
            let sh = (-self.e) as u32;
            let x = self.m as u128 * SCALE; // < 2^121
            let f = if sh >= 128 {
                0 // x < 2^121 < half of 2^sh
            } else {
                let q = x >> sh;
                let rem = x & ((1u128 << sh) - 1);
                let half = 1u128 << (sh - 1);
                if rem > half || (rem == half && q & 1 == 1) {
                    q + 1
                } else {
                    q
                }
            };
            s.push_str(&format!("{}.{:017}", f / SCALE, f % SCALE));
            let trimmed = s.trim_end_matches('0').trim_end_matches('.').len();
            s.truncate(trimmed);
        }
        if s == "-0" {
            s = "0".into();
        }
        s
    }
}

/// Redis's `string2ld`: `strtold` over the whole argument, refusing leading whitespace,
/// trailing bytes, NaN, overflow and underflow to zero. `None` = not a valid float.
pub fn parse(s: &[u8]) -> Option<Parsed> {
    if s.is_empty() || s.len() >= MAX_CHARS {
        return None;
    }
    // C isspace(): strtold would skip it, Redis refuses it.
    if matches!(s[0], b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r') {
        return None;
    }
    let (neg, rest) = match s[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if rest.eq_ignore_ascii_case(b"inf") || rest.eq_ignore_ascii_case(b"infinity") {
        return Some(Parsed::Infinite);
    }
    let value = if rest.len() > 2 && rest[0] == b'0' && (rest[1] | 0x20) == b'x' {
        parse_hex(neg, &rest[2..])?
    } else {
        parse_dec(neg, rest)?
    };
    Some(Parsed::Finite(value))
}

/// Splits `digits [. digits]` (at least one digit) and returns (integer part, fraction part,
/// remainder).
fn mantissa(s: &[u8], hex: bool) -> Option<(&[u8], &[u8], &[u8])> {
    let is_digit = |c: &u8| {
        if hex {
            c.is_ascii_hexdigit()
        } else {
            c.is_ascii_digit()
        }
    };
    let n_int = s.iter().take_while(|c| is_digit(c)).count();
    let (int, rest) = s.split_at(n_int);
    let (frac, rest) = match rest.first() {
        Some(b'.') => {
            let n = rest[1..].iter().take_while(|c| is_digit(c)).count();
            (&rest[1..1 + n], &rest[1 + n..])
        }
        _ => (&rest[..0], rest),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    Some((int, frac, rest))
}

/// An exponent suffix (`e`/`p` already matched by the caller): `[+-]digits`, saturating. It
/// must end the input, as anything left over makes the argument invalid.
fn exponent(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v = digits.iter().fold(0i64, |acc, &c| {
        (acc * 10 + (c - b'0') as i64).min(1_000_000_000)
    });
    Some(if neg { -v } else { v })
}

fn parse_dec(neg: bool, s: &[u8]) -> Option<LongDouble> {
    let (int, frac, rest) = mantissa(s, false)?;
    let exp = match rest.first() {
        None => 0,
        Some(b'e' | b'E') => exponent(&rest[1..])?,
        Some(_) => return None,
    };
    let digits: Vec<u8> = int.iter().chain(frac).copied().collect();
    let start = digits.iter().take_while(|&&c| c == b'0').count();
    let digits = &digits[start..];
    if digits.is_empty() {
        return Some(LongDouble::zero(neg));
    }
    let e10 = exp - frac.len() as i64;
    // The value lies in [10^(mag-1), 10^mag).
    let mag = digits.len() as i64 + e10;
    if !(-4952..=4933).contains(&mag) {
        return None; // overflow (max ~1.19e4932) or certain underflow to zero
    }
    let mut d = Big::zero();
    for chunk in digits.chunks(9) {
        let v = chunk
            .iter()
            .fold(0u32, |acc, &c| acc * 10 + (c - b'0') as u32);
        d.mul_small(10u32.pow(chunk.len() as u32));
        d.add_small(v);
    }
    let r = if e10 >= 0 {
        d.mul_pow10(e10 as u64);
        round(neg, &d, 0, false)?
    } else {
        let mut den = Big::from_u128(1);
        den.mul_pow10((-e10) as u64);
        // Scale so the quotient has 66..68 bits: enough for a guard bit plus sticky.
        let s = den.bit_len() as i64 + 66 - d.bit_len() as i64;
        if s >= 0 {
            d.shl_bits(s as u64);
        } else {
            den.shl_bits((-s) as u64);
        }
        let (q, inexact) = d.div_small_quotient(&den);
        round(neg, &Big::from_u128(q), -s, inexact)?
    };
    (r.m != 0).then_some(r)
}

fn parse_hex(neg: bool, s: &[u8]) -> Option<LongDouble> {
    let (int, frac, rest) = mantissa(s, true)?;
    let exp = match rest.first() {
        None => 0,
        Some(b'p' | b'P') => exponent(&rest[1..])?,
        Some(_) => return None,
    };
    let digits: Vec<u8> = int.iter().chain(frac).copied().collect();
    let mut n = Big::zero();
    for chunk in digits.chunks(7) {
        let v = chunk.iter().fold(0u32, |acc, &c| {
            acc * 16 + (c as char).to_digit(16).unwrap_or(0)
        });
        n.mul_small(1 << (4 * chunk.len()));
        n.add_small(v);
    }
    if n.is_zero() {
        return Some(LongDouble::zero(neg));
    }
    let exp2 = exp - 4 * frac.len() as i64;
    let top = n.bit_len() as i64 + exp2; // value < 2^top
    if !(EMIN..=EMAX).contains(&top) {
        return None;
    }
    let r = round(neg, &n, exp2, false)?;
    (r.m != 0).then_some(r)
}

/// Rounds `n * 2^exp2` (plus a sticky "something nonzero below" flag) to the nearest
/// extended value, ties to even. `None` on overflow; underflow gives zero.
fn round(neg: bool, n: &Big, exp2: i64, sticky: bool) -> Option<LongDouble> {
    if n.is_zero() {
        return Some(LongDouble::zero(neg));
    }
    let len = n.bit_len() as i64;
    let mut q = (exp2 + len - 64).max(EMIN);
    let shift = q - exp2;
    let m = if shift <= 0 {
        n.low_u64() << (-shift)
    } else {
        let shift = shift as u64;
        let m = n.bits_u64(shift);
        let guard = n.bit(shift - 1);
        let rest = sticky || n.any_below(shift - 1);
        if guard && (rest || m & 1 == 1) {
            match m.checked_add(1) {
                Some(m) => m,
                None => {
                    q += 1;
                    1 << 63
                }
            }
        } else {
            m
        }
    };
    if m == 0 {
        return Some(LongDouble::zero(neg));
    }
    if q + 64 > EMAX {
        return None;
    }
    Some(LongDouble { neg, m, e: q })
}

/// Minimal unsigned big integer (little-endian 32-bit limbs, no trailing zero limbs).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn zero() -> Big {
        Big(Vec::new())
    }

    fn from_u128(v: u128) -> Big {
        let mut b = Big((0..4).map(|i| (v >> (32 * i)) as u32).collect());
        b.trim();
        b
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn bit_len(&self) -> u64 {
        match self.0.last() {
            None => 0,
            Some(top) => (self.0.len() as u64 - 1) * 32 + (32 - top.leading_zeros()) as u64,
        }
    }

    fn bit(&self, i: u64) -> bool {
        let w = (i / 32) as usize;
        w < self.0.len() && (self.0[w] >> (i % 32)) & 1 == 1
    }

    /// Any bit set below position `n`.
    fn any_below(&self, n: u64) -> bool {
        let full = ((n / 32) as usize).min(self.0.len());
        if self.0[..full].iter().any(|&w| w != 0) {
            return true;
        }
        let rem = n % 32;
        rem != 0
            && self
                .0
                .get(full)
                .is_some_and(|&w| w & ((1u32 << rem) - 1) != 0)
    }

    fn low_u64(&self) -> u64 {
        self.bits_u64(0)
    }

    /// Bits `[shift, shift + 64)`.
    fn bits_u64(&self, shift: u64) -> u64 {
        let w = (shift / 32) as usize;
        let b = shift % 32;
        let limb = |i: usize| self.0.get(i).copied().unwrap_or(0) as u128;
        let window = limb(w) | (limb(w + 1) << 32) | (limb(w + 2) << 64) | (limb(w + 3) << 96);
        (window >> b) as u64
    }

    fn mul_small(&mut self, m: u32) {
        let mut carry = 0u64;
        for w in &mut self.0 {
            let v = *w as u64 * m as u64 + carry;
            *w = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
        self.trim();
    }

    fn add_small(&mut self, a: u32) {
        let mut carry = a as u64;
        for w in &mut self.0 {
            if carry == 0 {
                break;
            }
            let v = *w as u64 + carry;
            *w = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
    }

    fn mul_pow10(&mut self, mut k: u64) {
        while k >= 9 {
            self.mul_small(1_000_000_000);
            k -= 9;
        }
        if k > 0 {
            self.mul_small(10u32.pow(k as u32));
        }
    }

    fn shl_bits(&mut self, n: u64) {
        if self.is_zero() || n == 0 {
            return;
        }
        let bits = (n % 32) as u32;
        if bits > 0 {
            let mut carry = 0u32;
            for w in &mut self.0 {
                let nw = (*w << bits) | carry;
                carry = *w >> (32 - bits);
                *w = nw;
            }
            if carry > 0 {
                self.0.push(carry);
            }
        }
        let words = (n / 32) as usize;
        if words > 0 {
            self.0.splice(0..0, std::iter::repeat_n(0, words));
        }
    }

    fn shr1(&mut self) {
        let mut carry = 0u32;
        for w in self.0.iter_mut().rev() {
            let nw = (*w >> 1) | (carry << 31);
            carry = *w & 1;
            *w = nw;
        }
        self.trim();
    }

    fn cmp_big(&self, o: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&o.0.len())
            .then_with(|| self.0.iter().rev().cmp(o.0.iter().rev()))
    }

    fn add_big(&mut self, o: &Big) {
        if self.0.len() < o.0.len() {
            self.0.resize(o.0.len(), 0);
        }
        let mut carry = 0u64;
        for (i, w) in self.0.iter_mut().enumerate() {
            let v = *w as u64 + o.0.get(i).copied().unwrap_or(0) as u64 + carry;
            *w = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
    }

    /// `self -= o`; requires `self >= o`.
    fn sub_big(&mut self, o: &Big) {
        let mut borrow = 0i64;
        for (i, w) in self.0.iter_mut().enumerate() {
            let mut v = *w as i64 - o.0.get(i).copied().unwrap_or(0) as i64 - borrow;
            borrow = 0;
            if v < 0 {
                v += 1 << 32;
                borrow = 1;
            }
            *w = v as u32;
        }
        self.trim();
    }

    /// `(self / den, self % den != 0)` for quotients below 2^127 (restoring division over
    /// the quotient's bits only).
    fn div_small_quotient(&self, den: &Big) -> (u128, bool) {
        let mut rem = self.clone();
        let top = self.bit_len().saturating_sub(den.bit_len()).min(126);
        let mut d = den.clone();
        d.shl_bits(top);
        let mut q = 0u128;
        for i in (0..=top).rev() {
            if rem.cmp_big(&d) != Ordering::Less {
                rem.sub_big(&d);
                q |= 1 << i;
            }
            d.shr1();
        }
        (q, !rem.is_zero())
    }

    fn divmod_small(&mut self, d: u32) -> u32 {
        let mut rem = 0u64;
        for w in self.0.iter_mut().rev() {
            let cur = (rem << 32) | *w as u64;
            *w = (cur / d as u64) as u32;
            rem = cur % d as u64;
        }
        self.trim();
        rem as u32
    }

    fn to_decimal(&self) -> String {
        if self.is_zero() {
            return "0".into();
        }
        let mut n = self.clone();
        let mut chunks = Vec::new();
        while !n.is_zero() {
            chunks.push(n.divmod_small(1_000_000_000));
        }
        let mut s = String::with_capacity(chunks.len() * 9);
        for (i, c) in chunks.iter().rev().enumerate() {
            if i == 0 {
                s.push_str(&c.to_string());
            } else {
                s.push_str(&format!("{c:09}"));
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> LongDouble {
        match parse(s.as_bytes()) {
            Some(Parsed::Finite(v)) => v,
            other => panic!("{s}: {other:?}"),
        }
    }

    fn sum(a: &str, b: &str) -> String {
        p(a).checked_add(p(b)).expect("finite").to_human()
    }

    #[test]
    fn formats_like_redis() {
        assert_eq!(sum("10.5", "0.1"), "10.6");
        assert_eq!(sum("10.6", "3.0e3"), "3010.60000000000000009");
        assert_eq!(p("3.0e3").to_human(), "3000");
        assert_eq!(p("0x1p-18").to_human(), "0.00000381469726562"); // exact tie → even
        assert_eq!(p("1.5e-17").to_human(), "0.00000000000000002");
        assert_eq!(p("-1e-30").to_human(), "0");
        assert_eq!(p("-0").to_human(), "0");
        assert_eq!(p("-2.5").to_human(), "-2.5");
        assert_eq!(p("0x1.8p1").to_human(), "3");
        assert_eq!(p(".5").to_human(), "0.5");
        assert_eq!(p("5.").to_human(), "5");
        assert_eq!(p("1e-4950").to_human(), "0");
        assert!(p("1e4932")
            .to_human()
            .starts_with("10000000000000000000060189493879638913"));
    }

    #[test]
    fn integers_are_exact() {
        let max = LongDouble::from_i64(i64::MAX);
        assert_eq!(max.to_human(), "9223372036854775807");
        assert_eq!(
            LongDouble::from_i64(i64::MIN).to_human(),
            "-9223372036854775808"
        );
        assert_eq!(
            max.checked_add(p("1")).unwrap().to_human(),
            "9223372036854775808"
        );
        assert_eq!(sum("12345678901234567", "1"), "12345678901234568");
        assert_eq!(sum("5", "-5"), "0");
    }

    #[test]
    fn parse_rejects_like_string2ld() {
        for bad in [
            "",
            " 1",
            "1 ",
            "\t1",
            "nan",
            "NaN",
            "nan(1)",
            "infinit",
            "1e",
            "1e+",
            "0x",
            "0x1p",
            "0x.p1",
            ".",
            "-.",
            "+",
            "1.2.3",
            "1e5000",
            "0x1p16384",
            "1e-4951",
            "1e-5000",
            "1_0",
            "1\0",
            "--1",
            "abc",
        ] {
            assert_eq!(parse(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(parse(&[b'1'; MAX_CHARS]), None);
        for inf in ["inf", "-inf", "+INF", "Infinity", "-infinity"] {
            assert_eq!(parse(inf.as_bytes()), Some(Parsed::Infinite), "{inf}");
        }
        assert_eq!(p("0e999999").to_human(), "0");
        assert_eq!(p("0xffffffffffffffff").to_human(), "18446744073709551615");
        assert_eq!(p("0x1ffffffffffffffff").to_human(), "36893488147419103232");
        assert_eq!(p("0x0.0000001p28").to_human(), "1");
        assert_eq!(p("3.6e-4951").m, 1); // the smallest subnormal
    }

    #[test]
    fn overflow_is_detected() {
        let big = p("0x1.fffffffffffffffep16383");
        assert!(big.checked_add(big).is_none());
        assert!(big.checked_add(p("-1")).is_some());
        let huge = p("1e4000");
        assert_eq!(huge.checked_add(p("1e308")), Some(huge));
    }

    #[test]
    fn big_helpers() {
        let mut b = Big::from_u128(1);
        b.mul_pow10(30);
        assert_eq!(b.to_decimal(), "1000000000000000000000000000000");
        let mut c = b.clone();
        c.shl_bits(70);
        c.sub_big(&b);
        let (q, inexact) = c.div_small_quotient(&b);
        assert_eq!(q, (1u128 << 70) - 1);
        assert!(!inexact);
    }
}
