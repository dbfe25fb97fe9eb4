//! Seed inputs the corpora start from, for what redis-server cannot hand us: legacy RDB
//! encodings, log segments, library samples and command sequences. Written by the ignored
//! test `write_seeds` in tests/fuzz_corpus.rs (real `DUMP` payloads from redis-server
//! 7.0.15 sit beside them under `fuzz/corpus/rdb_restore/redis7-*`).

use crate::engine::change::Change;
use crate::engine::journal::Journal;
use crate::types::rdb::{listpack, payload, types as t, ziplist, Writer};
use bytes::Bytes;
use std::sync::Arc;

/// (target, file name, bytes).
pub type Seed = (&'static str, String, Vec<u8>);

/// Every generated seed.
pub fn seeds() -> Vec<Seed> {
    let mut out = Vec::new();
    resp(&mut out);
    rdb(&mut out);
    wal(&mut out);
    lua(&mut out);
    commands(&mut out);
    out
}

fn resp(out: &mut Vec<Seed>) {
    let frames: &[(&str, &[u8])] = &[
        (
            "multibulk",
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n",
        ),
        (
            "pipeline",
            b"*1\r\n$4\r\nPING\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
        ),
        ("inline-quotes", b"set a \"x\\x41\\n\" 'it\\'s'\r\nget a\n"),
        ("empty", b"*0\r\n*-1\r\n\r\n\n"),
        ("binary", b"*2\r\n$4\r\nECHO\r\n$4\r\n\x00\r\n\xff\r\n"),
        ("partial", b"*2\r\n$3\r\nGET\r\n$10\r\nabc"),
        ("bad-dollar", b"*1\r\nx3\r\n"),
        ("bad-count", b"*x\r\n"),
        ("big-bulk", b"*1\r\n$600000000\r\n"),
        ("unbalanced", b"set \"a b\"c\r\n"),
        ("nul-inline", b"PING\x00x\r\nPING\r\n"),
        ("unauth-count", b"*11\r\n"),
    ];
    for (name, f) in frames {
        out.push(("resp_parse", format!("seed-{name}"), f.to_vec()));
    }
}

fn wrap(ty: u8, blob: &[u8]) -> Vec<u8> {
    let mut w = Writer::new();
    w.string(blob);
    payload(ty, &w.buf)
}

pub(super) fn rdb(out: &mut Vec<Seed>) {
    let mut add = |name: &str, p: Vec<u8>| out.push(("rdb_restore", format!("seed-{name}"), p));
    add(
        "list-ziplist",
        wrap(
            t::LIST_ZIPLIST,
            &ziplist::build(&[&b"a"[..], b"7", b"-300", b"70000"]),
        ),
    );
    add(
        "hash-ziplist",
        wrap(t::HASH_ZIPLIST, &ziplist::build(&[b"f", b"1", b"g", b"x"])),
    );
    add(
        "zset-ziplist",
        wrap(
            t::ZSET_ZIPLIST,
            &ziplist::build(&[&b"a"[..], b"2", b"b", b"1.5"]),
        ),
    );
    let mut w = Writer::new();
    w.len(2);
    w.string(&ziplist::build(&[b"a", b"b"]));
    w.string(&ziplist::build(&[b"c"]));
    add("list-quicklist-v1", payload(t::LIST_QUICKLIST, &w.buf));
    let mut w = Writer::new();
    w.len(2);
    w.string(b"x");
    w.string(b"12");
    add("list-linked", payload(t::LIST, &w.buf));
    let mut w = Writer::new();
    w.len(3);
    for (m, sc) in [
        (&b"a"[..], &b"\x031.5"[..]),
        (b"b", b"\xfe"),
        (b"c", b"\x02-2"),
    ] {
        w.string(m);
        w.raw(sc);
    }
    add("zset-text-scores", payload(t::ZSET, &w.buf));
    add(
        "hash-zipmap",
        wrap(t::HASH_ZIPMAP, b"\x02\x01f\x02\x00vv\x01g\x01\x00w\xff"),
    );
    let mut lp = listpack::Builder::new();
    for m in [&b"a"[..], b"5", b"-70000", b"hello"] {
        lp.push_bytes(m);
    }
    add("set-listpack", wrap(t::SET_LISTPACK, &lp.finish()));
    // A quicklist with a plain (one big element) node.
    let mut w = Writer::new();
    w.len(1);
    w.len(1);
    w.string(b"a plain node element");
    add("list-quicklist-plain", payload(t::LIST_QUICKLIST_2, &w.buf));
}

/// Runs command lines on a journaled in-process server and returns the changes of each.
fn journaled(lines: &[&str]) -> Vec<Vec<Change>> {
    let srv = super::commands::server(&[]);
    let j = Arc::new(Journal::new());
    assert!(srv.ks.set_journal(j.clone()));
    let mut c = super::commands::client(&srv);
    let mut out = Vec::new();
    for line in lines {
        let args = line
            .split(' ')
            .map(|a| Bytes::from(a.to_string()))
            .collect();
        c.run(&srv, args);
        let (changes, _) = j.take(std::time::Duration::ZERO);
        if !changes.is_empty() {
            out.push(changes);
        }
    }
    out
}

fn wal(out: &mut Vec<Seed>) {
    let batches = journaled(&[
        "SET s hello",
        "SET n 12 PX 100000",
        "RPUSH l a b c",
        "LPOP l",
        "LSET l 0 z",
        "HSET h f v g 1",
        "HDEL h g",
        "SADD st a b 1",
        "SREM st a",
        "ZADD z 1.5 a -2 b",
        "ZREM z a",
        "XADD x 1-1 f v",
        "XGROUP CREATE x g 0",
        "XREADGROUP GROUP g c STREAMS x >",
        "XDEL x 1-1",
        "EXPIRE s 100",
        "PERSIST s",
        "DEL n",
        "COPY h h2",
        "SELECT 1",
        "SWAPDB 0 1",
        "FLUSHDB",
        "FLUSHALL",
    ]);
    // Mode byte 1: the target fixes up CRCs, so mutated payloads reach the decoder.
    let seg = super::wal_segment(&batches);
    out.push((
        "wal_decode",
        "seed-workload".into(),
        [&[1u8][..], &seg].concat(),
    ));
    out.push((
        "wal_decode",
        "seed-workload-strict".into(),
        [&[0u8][..], &seg].concat(),
    ));
    for (i, b) in batches.iter().enumerate() {
        let seg = super::wal_segment(std::slice::from_ref(b));
        out.push((
            "wal_decode",
            format!("seed-record-{i:02}"),
            [&[1u8][..], &seg].concat(),
        ));
    }
    let torn = &seg[..seg.len() - 3];
    out.push((
        "wal_decode",
        "seed-torn".into(),
        [&[0u8][..], torn].concat(),
    ));
}

fn lua(out: &mut Vec<Seed>) {
    let json: &[(&str, &str)] = &[
        (
            "object",
            r#"{"a":1,"b":[true,false,null],"c":{"d":"e\u00e9\n"}}"#,
        ),
        (
            "numbers",
            "[0,-0,1e308,-1.5e-300,123456789012345678,0.1,1E+2]",
        ),
        ("string-escapes", r#""\"\\\/\b\f\n\r\t\u0041\ud83d\ude00""#),
        ("nested", "[[[[[[[[[[{}]]]]]]]]]]"),
        (
            "sparse",
            "[1,null,null,null,null,null,null,null,null,null,null,5]",
        ),
        ("invalid", "{\"a\":}"),
        ("hex-number", "[0x10, nan, inf]"),
    ];
    for (name, j) in json {
        out.push(("lua_cjson", format!("seed-{name}"), j.as_bytes().to_vec()));
    }
    // msgpack samples, packed by cmsgpack itself; two leading bytes: limit, offset.
    let lua = mlua::Lua::new();
    crate::script::open_libraries(&lua).expect("libraries");
    let packs: &[(&str, &str)] = &[
        (
            "scalars",
            "cmsgpack.pack(0, -1, 127, 128, -33, 65536, 2^32, -2^40, 1.5, 1e300, true, false)",
        ),
        (
            "strings",
            "cmsgpack.pack('', 'abc', string.rep('x', 40), string.rep('y', 300))",
        ),
        (
            "tables",
            "cmsgpack.pack({1, 2, 3}, {a = 1, b = {c = 'd'}}, {[1] = 'x', [3] = 'z'})",
        ),
        ("nested", "cmsgpack.pack({{{{{{{{{{1}}}}}}}}}})"),
        (
            "big-array",
            "local t = {} for i = 1, 20 do t[i] = i end return cmsgpack.pack(t)",
        ),
    ];
    for (name, code) in packs {
        let code = if code.starts_with("local") {
            code.to_string()
        } else {
            format!("return {code}")
        };
        let s: mlua::LuaString = lua.load(&code).eval().expect("pack");
        let mut b = vec![3u8, 0];
        b.extend_from_slice(&s.as_bytes());
        out.push(("lua_cmsgpack", format!("seed-{name}"), b));
    }
    // struct: [format length, start position, format, data].
    let structs: &[(&str, &str, &[u8])] = &[
        (
            "ints",
            "<i1i2i4i8",
            b"\x01\x02\x00\x03\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00",
        ),
        ("big-endian", ">I2I4", b"\x01\x02\x00\x00\x00\x03"),
        (
            "floats",
            "<fd",
            b"\x00\x00\xc0\x3f\x00\x00\x00\x00\x00\x00\xf8\x3f",
        ),
        ("strings", "s c3 c0 B", b"abc\x00xyz\x03"),
        (
            "align",
            "!4 b i4 h",
            b"\x01\x00\x00\x00\x02\x00\x00\x00\x03\x00",
        ),
        ("padding", "bxxxh", b"\x01\x00\x00\x00\x02\x00"),
    ];
    for (name, fmt, data) in structs {
        let mut b = vec![fmt.len() as u8, 1];
        b.extend_from_slice(fmt.as_bytes());
        b.extend_from_slice(data);
        out.push(("lua_struct", format!("seed-{name}"), b));
    }
}

/// A `commands` input that runs `lines` (each argument passed as raw bytes) from client 0.
pub fn encode_commands(lines: &[&str]) -> Vec<u8> {
    let table = super::commands::commands_table();
    let mut out = vec![0u8];
    for line in lines {
        let mut words = line.split(' ');
        let name = words.next().expect("a name").to_ascii_lowercase();
        let i = table
            .iter()
            .position(|s| s.name == name)
            .unwrap_or_else(|| panic!("no command {name}"));
        let args: Vec<&str> = words.collect();
        out.extend_from_slice(&[0, (i >> 8) as u8, i as u8, args.len() as u8]);
        assert_ne!(
            name, "config",
            "the generator picks CONFIG's arguments itself"
        );
        for a in args {
            // `@i.at.x`: DUMP payload i, byte `at` xored with x.
            if let Some(p) = a.strip_prefix('@') {
                out.push(0xDF);
                out.extend(p.split('.').map(|n| n.parse::<u8>().expect("@i.at.x")));
                continue;
            }
            assert!(a.len() < 32, "raw arguments are at most 31 bytes");
            out.push(0xE0 + a.len() as u8);
            out.extend_from_slice(a.as_bytes());
        }
    }
    out
}

fn commands(out: &mut Vec<Seed>) {
    let scripts: &[(&str, &[&str])] = &[
        (
            "strings",
            &[
                "SET k 10",
                "INCRBY k 5",
                "APPEND k x",
                "GETRANGE k 0 -1",
                "SETRANGE k 3 abc",
                "GETEX k PX 100",
                "STRLEN k",
                "LCS k k",
            ],
        ),
        (
            "lists",
            &[
                "RPUSH l a b c d",
                "LINSERT l BEFORE c x",
                "LRANGE l 0 -1",
                "LPOS l c",
                "LMOVE l l2 LEFT RIGHT",
                "LTRIM l 1 -1",
                "BLPOP l 0",
                "LMPOP 1 l LEFT COUNT 2",
            ],
        ),
        (
            "hashes",
            &[
                "HSET h a 1 b 2",
                "HINCRBYFLOAT h a 1.5",
                "HRANDFIELD h -5 WITHVALUES",
                "HSCAN h 0",
                "HGETALL h",
            ],
        ),
        (
            "sets",
            &[
                "SADD s 1 2 3 a",
                "SINTERCARD 1 s",
                "SPOP s 2",
                "SMOVE s t 1",
                "SUNIONSTORE u s t",
                "SRANDMEMBER s -3",
            ],
        ),
        (
            "zsets",
            &[
                "ZADD z 1 a 2 b 3 c",
                "ZRANGE z (1 +inf BYSCORE LIMIT 0 2",
                "ZRANGESTORE d z 0 -1",
                "ZUNIONSTORE u 2 z d WEIGHTS 1 2",
                "ZPOPMIN z",
                "ZRANDMEMBER z -2 WITHSCORES",
                "ZRANGEBYLEX z - +",
            ],
        ),
        (
            "streams",
            &[
                "XADD x 1-1 f v",
                "XADD x * g w",
                "XGROUP CREATE x g 0",
                "XREADGROUP GROUP g c COUNT 1 STREAMS x >",
                "XPENDING x g",
                "XAUTOCLAIM x g d 0 0",
                "XINFO STREAM x FULL",
                "XTRIM x MAXLEN 1",
            ],
        ),
        (
            "keys",
            &[
                "SET a 1",
                "COPY a b",
                "RENAME b c",
                "EXPIRE c 10",
                "DUMP c",
                "OBJECT ENCODING c",
                "SCAN 0 TYPE string",
                "SORT l",
                "MOVE c 1",
                "SWAPDB 0 1",
                "KEYS *",
            ],
        ),
        (
            "bitmaps-geo-hll",
            &[
                "SETBIT b 7 1",
                "BITCOUNT b",
                "BITFIELD b INCRBY u8 0 300",
                "BITOP NOT c b",
                "GEOADD g 13.36 38.11 p",
                "GEOSEARCH g FROMLONLAT 13 38 BYRADIUS 200 km",
                "PFADD p a b c",
                "PFCOUNT p",
            ],
        ),
        (
            "multi",
            &[
                "MULTI", "SET k 1", "INCR k", "EXEC", "WATCH k", "MULTI", "GET k", "DISCARD",
            ],
        ),
        (
            "restore",
            &[
                "RESTORE k 0 @5.0.0",
                "SADD k x",
                "SPOP k",
                "RESTORE k 0 @8.3.65 REPLACE",
                "RESTORE l 0 @12.0.0",
                "LPUSH l x",
                "RESTORE x 0 @25.0.0",
                "XADD x * a b",
                "XINFO STREAM x FULL",
                "HGETALL k",
                "DUMP l",
            ],
        ),
        (
            "resp3-pubsub",
            &[
                "SET k v",
                "HELLO 3",
                "GET k",
                "SUBSCRIBE c",
                "PUBLISH c m",
                "UNSUBSCRIBE",
            ],
        ),
    ];
    for (name, lines) in scripts {
        out.push(("commands", format!("seed-{name}"), encode_commands(lines)));
    }
    // Any bytes are a model input; these run a few dozen commands each.
    for i in 0..6u32 {
        let mut x = 0x9e37_79b9u32.wrapping_mul(i + 1);
        let b: Vec<u8> = (0..(64 + 32 * i))
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        out.push(("commands_model", format!("seed-random-{i}"), b));
    }
}
