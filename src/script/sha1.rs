//! SHA-1, used to name scripts as Redis does (`redis.sha1hex`, EVALSHA): RustCrypto's `sha1`
//! (SHA-NI when the CPU has it; benches/checksums.rs measured it against the hand-written
//! digest this replaced).

use ::sha1::Digest;

pub fn sha1(data: &[u8]) -> [u8; 20] {
    ::sha1::Sha1::digest(data).into()
}

/// Lowercase hex digest, the form Redis uses for script names.
pub fn sha1_hex(data: &[u8]) -> String {
    let mut s = String::with_capacity(40);
    for b in sha1(data) {
        s.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
        s.push(char::from_digit(u32::from(b & 15), 16).unwrap_or('0'));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::sha1_hex;

    #[test]
    fn vectors() {
        assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(sha1_hex(b"abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(
            sha1_hex(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1"
        );
        // Redis: EVAL "return redis.call('incr','s')" names the script by this digest.
        assert_eq!(
            sha1_hex(b"return redis.call('incr','s')"),
            "c243b9f46db13ba8f69da41b45a77708832babed"
        );
        assert_eq!(
            sha1_hex(&vec![b'a'; 1_000_000]),
            "34aa973cd4c4daa4f61eeb2bdbad27316534016f"
        );
    }
}
