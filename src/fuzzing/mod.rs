//! Entry points for the fuzz targets in `fuzz/` and their corpus replay in
//! `tests/fuzz_corpus.rs`: both call exactly these functions, so a crash the fuzzer finds is
//! reproduced on stable by committing its input under `fuzz/regressions/<target>/`.
//!
//! Each function takes arbitrary bytes, must never panic, hang or allocate without bound on
//! them, and asserts the invariants of what it drives (a violated invariant panics, which
//! the fuzzer reports as a crash).

mod commands;
mod lua;
pub mod seeds;

pub use commands::{commands, commands_model};
pub use lua::{lua_cjson, lua_cmsgpack, lua_struct};

use crate::persist::{codec, wal, LoadOptions};
use crate::protocol::parse::{Limits, ParseError, Parsed, Parser};
use crate::types::rdb::{self, value as rdb_value};
use crate::types::value::Value;
use bytes::{Bytes, BytesMut};

/// A fuzz target's entry point.
pub type Target = fn(&[u8]);

/// The fuzz targets, by name: `fuzz/fuzz_targets/<name>.rs` calls the function, and
/// `fuzz/corpus/<name>/` holds its corpus.
pub const TARGETS: &[(&str, Target)] = &[
    ("resp_parse", resp_parse),
    ("rdb_restore", rdb_restore),
    ("wal_decode", wal_decode),
    ("lua_cjson", lua_cjson),
    ("lua_cmsgpack", lua_cmsgpack),
    ("lua_struct", lua_struct),
    ("commands", commands),
    ("commands_model", commands_model),
];

// ---------------------------------------------------------------------------------------------
// RESP request parser

/// What a parser made of a whole input: the commands, then the error that ended it (if
/// any), and how many bytes it consumed (an error consumes nothing: the connection closes).
#[derive(Debug, PartialEq)]
struct Parse {
    commands: Vec<Vec<Bytes>>,
    error: Option<ParseError>,
    consumed: usize,
}

/// Feeds `data` to one parser in `chunks` (the cut points), as a connection's reads would.
fn parse_in_chunks(data: &[u8], cuts: &[usize], limits: Limits) -> Parse {
    let mut p = Parser::default();
    let mut buf = BytesMut::new();
    let mut out = Parse {
        commands: Vec::new(),
        error: None,
        consumed: 0,
    };
    let mut from = 0;
    for &cut in cuts.iter().chain(std::iter::once(&data.len())) {
        buf.extend_from_slice(&data[from..cut]);
        from = cut;
        loop {
            let before = buf.len();
            match p.parse(&mut buf, limits) {
                Ok(Parsed::Command(args)) => {
                    let used = before - buf.len();
                    assert!(used > 0, "a command consumed no bytes");
                    let arg_bytes: usize = args.iter().map(|a| a.len()).sum();
                    assert!(arg_bytes <= used, "arguments longer than the frame");
                    out.commands.push(args);
                }
                Ok(Parsed::Incomplete { .. }) => {
                    assert_eq!(buf.len(), before, "an incomplete frame consumed bytes");
                    break;
                }
                Err(e) => {
                    out.error = Some(e);
                    out.consumed = from - buf.len();
                    return out;
                }
            }
        }
    }
    out.consumed = data.len() - buf.len();
    out
}

/// The multibulk frame of a command.
fn encode_multibulk(args: &[Bytes]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// The request parser on a byte stream: parsing it whole, byte by byte and cut in two at
/// every point (for short inputs) gives the same commands, error and leftover; nothing is
/// consumed beyond the input; every command re-encoded as multibulk parses back to itself.
/// Run with and without the unauthenticated limits.
pub fn resp_parse(data: &[u8]) {
    // The inline and count-line limits depend on how much has arrived, as in Redis: keep
    // inputs below them so chunking cannot change the outcome.
    if data.len() > 8192 {
        return;
    }
    for authenticated in [true, false] {
        let limits = Limits {
            max_bulk_len: 512 * 1024 * 1024,
            authenticated,
        };
        let whole = parse_in_chunks(data, &[], limits);
        assert!(whole.consumed <= data.len());
        if whole.error.is_none() {
            // Only a trailing incomplete frame may be left.
            let mut p = Parser::default();
            let mut rest = BytesMut::from(&data[whole.consumed..]);
            assert!(matches!(
                p.parse(&mut rest, limits),
                Ok(Parsed::Incomplete { .. })
            ));
        }
        let bytewise: Vec<usize> = (1..data.len()).collect();
        assert_eq!(
            parse_in_chunks(data, &bytewise, limits),
            whole,
            "byte by byte"
        );
        if data.len() <= 512 {
            for cut in 1..data.len() {
                assert_eq!(parse_in_chunks(data, &[cut], limits), whole, "cut at {cut}");
            }
        }
        for cmd in &whole.commands {
            let frame = encode_multibulk(cmd);
            let again = parse_in_chunks(&frame, &[], Limits::default());
            assert_eq!(again.error, None);
            assert_eq!(again.consumed, frame.len());
            let expect: Vec<Vec<Bytes>> = vec![cmd.clone()];
            assert_eq!(again.commands, expect, "re-encoded command");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// RESTORE payloads

/// Makes a payload's CRC match its bytes, so the fuzzer's mutations reach the decoders
/// (a wrong checksum is refused before anything is decoded). The version bytes are kept.
pub fn fix_payload_crc(p: &mut [u8]) {
    let n = p.len();
    if n >= 10 {
        let crc = rdb::crc64(0, &p[..n - 8]);
        p[n - 8..].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Encoding thresholds of 1 (and a list node size of 1 entry): loading converts nearly
/// everything, which exercises the conversions on decoded data.
fn tiny_limits() -> rdb_value::Limits {
    rdb_value::Limits {
        hash: crate::types::hash::Limits {
            max_entries: 1,
            max_value: 1,
        },
        set: crate::types::set::Fixed {
            intset_entries: 1,
            listpack_entries: 1,
            listpack_value: 1,
        },
        zset_entries: 1,
        zset_value: 1,
        list_fill: 1,
    }
}

/// RESTORE's decoder on a payload (its CRC fixed up first): never a panic, and a value it
/// accepts dumps to a payload that restores to an equal value, under the default and under
/// tiny encoding thresholds.
pub fn rdb_restore(data: &[u8]) {
    let mut p = data.to_vec();
    fix_payload_crc(&mut p);
    for lim in [rdb_value::Limits::default(), tiny_limits()] {
        let Ok(v) = rdb_value::restore(&p, &lim) else {
            continue;
        };
        let dumped = rdb_value::dump(&v);
        let again = rdb_value::restore(&dumped, &lim)
            .unwrap_or_else(|e| panic!("our own DUMP of {v:?} does not restore: {e:?}"));
        // A stream's nodes are rewritten without their deleted entries on DUMP, so its
        // layout may change once; what it holds is compared through the stable DUMP below.
        if !matches!(v, Value::Stream(_)) {
            assert!(
                again == v,
                "DUMP/RESTORE changed the value: {v:?} -> {again:?}"
            );
        }
        // A set's or hash's hash table is dumped in table order (Redis dumps its dict's
        // order), and where a member lands depends on the order it came in: the bytes of a
        // second DUMP may differ; what they hold may not.
        if again.encoding() == "hashtable" && matches!(again, Value::Set(_) | Value::Hash(_)) {
            let twice = rdb_value::restore(&rdb_value::dump(&again), &lim)
                .unwrap_or_else(|e| panic!("our own DUMP of {again:?} does not restore: {e:?}"));
            assert!(
                twice == again,
                "DUMP/RESTORE changed the value: {again:?} -> {twice:?}"
            );
        } else {
            assert_eq!(rdb_value::dump(&again), dumped, "DUMP is not stable");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Write-ahead log

/// Rewrites each record's CRC to match its bytes, as far as the framing goes, so mutated
/// payloads reach the decoder.
pub fn fix_wal_crcs(data: &mut [u8]) {
    let mut at = 0usize;
    while let Some(h) = data.get(at..at + 16) {
        let len = u32::from_le_bytes(h[0..4].try_into().expect("4 bytes")) as usize;
        let end = at + 16 + len;
        if end > data.len() {
            break;
        }
        let crc = wal::crc32(&data[at + 8..end]);
        data[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
        at = end;
    }
}

/// The log's framing and record decoder on a segment (CRCs fixed up when the first byte is
/// odd, taken as they are otherwise): never a panic; a segment cut anywhere yields a prefix
/// of the records, torn unless the cut falls on a record boundary; every record that
/// decodes re-encodes to bytes that decode and re-encode to the same bytes.
pub fn wal_decode(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut seg = rest.to_vec();
    if mode & 1 == 1 {
        fix_wal_crcs(&mut seg);
    }
    let whole = wal::scan(&seg);
    assert!(whole.end <= seg.len());
    assert_eq!(whole.torn, whole.end < seg.len());
    // The boundaries of the records found.
    let mut ends = Vec::with_capacity(whole.records.len());
    let mut at = 0;
    for (_, payload) in &whole.records {
        at += 16 + payload.len();
        ends.push(at);
    }
    assert_eq!(at, whole.end);
    let cuts: Vec<usize> = if seg.len() <= 256 {
        (0..seg.len()).collect()
    } else {
        (0..seg.len()).step_by(seg.len() / 64 + 1).collect()
    };
    for cut in cuts {
        let part = wal::scan(&seg[..cut]);
        let complete = ends.iter().take_while(|&&e| e <= cut).count();
        assert_eq!(part.records.len(), complete, "cut at {cut}");
        assert_eq!(&part.records[..], &whole.records[..complete]);
        assert_eq!(
            part.torn,
            cut > ends.get(complete.wrapping_sub(1)).copied().unwrap_or(0)
        );
    }
    let opts = LoadOptions::new(0);
    for (_, payload) in &whole.records {
        wal_payload(payload, &opts);
    }
}

/// One record payload through the decoder and back.
fn wal_payload(payload: &[u8], opts: &LoadOptions) {
    if let Ok(changes) = codec::decode(payload, opts) {
        codec_round_trip(&changes, opts);
    }
}

/// Changes encode, decode and re-encode stably. The first re-encoding may order a set's or
/// hash's elements differently (decoding rebuilds the value, e.g. an intset sorts), so
/// stability is checked from the second round on.
pub(crate) fn codec_round_trip(changes: &[crate::engine::change::Change], opts: &LoadOptions) {
    let mut enc = Vec::new();
    codec::encode(changes, &mut enc);
    let mut prev = Vec::new();
    for round in 0..3 {
        let back = codec::decode(&enc, opts)
            .unwrap_or_else(|e| panic!("round {round}: {changes:?} does not decode: {e}"));
        let mut again = Vec::new();
        codec::encode(&back, &mut again);
        if round > 0 {
            assert_eq!(prev, again, "the codec is not stable on {changes:?}");
        }
        prev = again.clone();
        enc = again;
    }
}

/// A segment of `records` framed as the log writes them, numbered from 1.
pub fn wal_segment(records: &[Vec<crate::engine::change::Change>]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, changes) in records.iter().enumerate() {
        out.extend(wal::frame(i as u64 + 1, changes));
    }
    out
}
