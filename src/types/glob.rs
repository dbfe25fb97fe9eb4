//! Redis glob matching (util.c `stringmatchlen`): `*`, `?`, `[...]` with ranges and `^`,
//! and `\` escapes; binary safe.

pub fn glob_match(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    matches(pattern, s, nocase, 0)
}

fn lower(c: u8, nocase: bool) -> u8 {
    if nocase {
        c.to_ascii_lowercase()
    } else {
        c
    }
}

fn matches(p: &[u8], s: &[u8], nocase: bool, depth: usize) -> bool {
    // Redis caps recursion to avoid pathological patterns.
    if depth > 1000 {
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
                for start in si..s.len() {
                    if matches(&p[pi + 1..], &s[start..], nocase, depth + 1) {
                        return true;
                    }
                }
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
                    if pi >= p.len() {
                        pi -= 1; // Redis treats an unterminated class as ending here.
                        break;
                    }
                    if p[pi] == b'\\' && pi + 1 < p.len() {
                        pi += 1;
                        if p[pi] == s[si] {
                            matched = true;
                        }
                    } else if p[pi] == b']' {
                        break;
                    } else if pi + 2 < p.len() && p[pi + 1] == b'-' {
                        let (mut a, mut b) = (lower(p[pi], nocase), lower(p[pi + 2], nocase));
                        if a > b {
                            std::mem::swap(&mut a, &mut b);
                        }
                        let c = lower(s[si], nocase);
                        pi += 2;
                        if c >= a && c <= b {
                            matched = true;
                        }
                    } else if lower(p[pi], nocase) == lower(s[si], nocase) {
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
            b'\\' if pi + 1 < p.len() => {
                pi += 1;
                if lower(p[pi], nocase) != lower(s[si], nocase) {
                    return false;
                }
                si += 1;
            }
            c => {
                if lower(c, nocase) != lower(s[si], nocase) {
                    return false;
                }
                si += 1;
            }
        }
        pi += 1;
    }
    if si == s.len() {
        while pi < p.len() && p[pi] == b'*' {
            pi += 1;
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
        assert!(m(b"prefix:*", b"prefix:", false));
        assert!(!m(b"prefix:*", b"prefi", false));
        assert!(m(b"a\\*b", b"a*b", false));
        assert!(m(b"HELLO", b"hello", true));
        assert!(!m(b"a", b"", false));
        assert!(m(b"", b"", false));
    }
}
