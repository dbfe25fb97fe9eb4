//! Redis glob matching (util.c `stringmatchlen`): `*`, `?`, `[...]` with ranges and `^`,
//! and `\` escapes; binary safe. The structure follows Redis step by step because its edge
//! cases are observable: an empty string matches no pattern that has to be "walked" (even
//! `*`; KEYS and SCAN special-case the exact pattern `*` before calling this), an
//! unterminated `[` class ends at the pattern's end, and class ranges compare bytes as C's
//! signed `char`.

pub fn glob_match(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    let mut skip_longer = false;
    matches(pattern, s, nocase, &mut skip_longer, 0)
}

#[inline]
fn same(a: u8, b: u8, nocase: bool) -> bool {
    if nocase {
        a.eq_ignore_ascii_case(&b)
    } else {
        a == b
    }
}

/// A byte as C's (signed) `char`, lowered like `tolower` in the C locale.
fn signed_char(c: u8, nocase: bool) -> i32 {
    let c = if nocase { c.to_ascii_lowercase() } else { c };
    c as i8 as i32
}

/// `skip_longer` is Redis's fix for exponential backtracking: once the rest of the pattern
/// after a `*` matched nowhere in the remaining string, no earlier `*` can help either.
fn matches(p: &[u8], s: &[u8], nocase: bool, skip_longer: &mut bool, nesting: usize) -> bool {
    // Redis caps recursion to avoid pathological patterns.
    if nesting > 1000 {
        return false;
    }
    let (mut pi, mut si) = (0usize, 0usize);
    while pi < p.len() && si < s.len() {
        match p[pi] {
            b'*' => {
                while pi + 1 < p.len() && p[pi + 1] == b'*' {
                    pi += 1;
                }
                if pi + 1 == p.len() {
                    return true;
                }
                while si < s.len() {
                    if matches(&p[pi + 1..], &s[si..], nocase, skip_longer, nesting + 1) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    si += 1;
                }
                *skip_longer = true;
                return false;
            }
            b'?' => si += 1,
            b'[' => {
                pi += 1;
                let not = pi < p.len() && p[pi] == b'^';
                if not {
                    pi += 1;
                }
                let mut matched = false;
                loop {
                    let left = p.len() - pi;
                    if left >= 2 && p[pi] == b'\\' {
                        pi += 1;
                        if p[pi] == s[si] {
                            matched = true;
                        }
                    } else if left >= 1 && p[pi] == b']' {
                        break;
                    } else if left == 0 {
                        // Unterminated class: it ends with the pattern.
                        pi -= 1;
                        break;
                    } else if left >= 3 && p[pi + 1] == b'-' {
                        let (mut a, mut b) = (p[pi] as i8 as i32, p[pi + 2] as i8 as i32);
                        if a > b {
                            std::mem::swap(&mut a, &mut b);
                        }
                        if nocase {
                            a = signed_char(a as u8, true);
                            b = signed_char(b as u8, true);
                        }
                        let c = signed_char(s[si], nocase);
                        pi += 2;
                        if c >= a && c <= b {
                            matched = true;
                        }
                    } else if same(p[pi], s[si], nocase) {
                        matched = true;
                    }
                    pi += 1;
                }
                if not {
                    matched = !matched;
                }
                if !matched {
                    return false;
                }
                si += 1;
            }
            c => {
                let c = if c == b'\\' && pi + 1 < p.len() {
                    pi += 1;
                    p[pi]
                } else {
                    c
                };
                if !same(c, s[si], nocase) {
                    return false;
                }
                si += 1;
            }
        }
        pi += 1;
        if si == s.len() {
            while pi < p.len() && p[pi] == b'*' {
                pi += 1;
            }
            break;
        }
    }
    pi == p.len() && si == s.len()
}

#[cfg(test)]
mod tests {
    use super::glob_match as m;

    #[test]
    fn globs() {
        assert!(m(b"*", b"anything", false));
        assert!(m(b"h?llo", b"hello", false));
        assert!(m(b"h*llo", b"heeeello", false));
        assert!(m(b"h[ae]llo", b"hallo", false));
        assert!(!m(b"h[^e]llo", b"hello", false));
        assert!(m(b"h[a-b]llo", b"hbllo", false));
        assert!(m(b"h[b-a]llo", b"hbllo", false));
        assert!(m(b"prefix:*", b"prefix:", false));
        assert!(!m(b"prefix:*", b"prefi", false));
        assert!(m(b"a\\*b", b"a*b", false));
        assert!(!m(b"a\\*b", b"axb", false));
        assert!(m(b"HELLO", b"hello", true));
        assert!(!m(b"a", b"", false));
        assert!(m(b"", b"", false));
        assert!(!m(b"", b"a", false));
    }

    #[test]
    fn redis_edge_cases() {
        // stringmatchlen never walks an empty string, so even "*" does not match it.
        assert!(!m(b"*", b"", false));
        assert!(!m(b"**", b"", false));
        // Trailing stars match nothing after the string is used up.
        assert!(m(b"a**", b"a", false));
        assert!(m(b"a*", b"a", false));
        assert!(m(b"*a*", b"a", false));
        // Unterminated class ends with the pattern.
        assert!(!m(b"[", b"a", false));
        assert!(m(b"[^", b"a", false));
        assert!(m(b"[a", b"a", false));
        assert!(m(b"x[ab", b"xb", false));
        // Escapes inside classes; a trailing backslash is literal.
        assert!(m(b"[\\]]", b"]", false));
        assert!(m(b"a\\", b"a\\", false));
        // Ranges swap before lowering, as Redis does.
        assert!(!m(b"[Z-a]", b"b", true));
        assert!(m(b"[Z-a]", b"_", false));
        assert!(m(b"[A-C]", b"b", true));
        // Signed char ranges: 0xff is -1 in C, so [a-\xff] is [-1..97].
        assert!(!m(b"[a-\xff]", b"b", false));
        assert!(m(b"[a-\xff]", b"\xff", false));
        assert!(m(b"[a-\xff]", b"A", false));
    }

    #[test]
    fn pathological_patterns_are_fast() {
        let s = vec![b'a'; 5000];
        let p = b"*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b";
        let t = std::time::Instant::now();
        assert!(!m(p, &s, false));
        assert!(t.elapsed().as_secs() < 2);
    }
}
