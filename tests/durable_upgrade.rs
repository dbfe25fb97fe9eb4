//! A `respite.redb` written by redb 2.6 (respite before the move to redb 4), built row by row
//! from the layout documented in `src/persist/layout.rs` — strings of each encoding, a TTL,
//! a hash, a set, a zset, a list, a stream with a consumer group, a FLUSHDB'd db — is
//! served by a durable server after the upgrade on open, and a restart reopens the upgraded
//! file without copying it again. The table and meta names are spelled out here on purpose:
//! they are part of the file format.

use bytes::Bytes;
use redb2::TableDefinition;
use respite::persist::layout::{self as l, str_enc, tag, xsub};
use respite::TestServer;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const DBS: TableDefinition<u32, u32> = TableDefinition::new("dbs");
const KEYS: TableDefinition<(u32, &[u8]), &[u8]> = TableDefinition::new("keys");
/// (namespace, key, sub-key).
type ElemKey = (u32, &'static [u8], &'static [u8]);
const ELEMS: TableDefinition<ElemKey, &[u8]> = TableDefinition::new("elems");

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis() as u64
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// Writes the old file: layout version 2, redb file format 2, as respite on redb 2.6 did.
fn write_old_file(path: &Path, ttl_at: u64) {
    let db = redb2::Database::create(path).expect("create with redb 2.6");
    let w = db.begin_write().unwrap();
    {
        let fresh = l::FIRST_FRESH_NS;
        let mut meta = w.open_table(META).unwrap();
        meta.insert("format_version", 2).unwrap();
        meta.insert("next_ns", u64::from(fresh) + 1).unwrap();
        meta.insert("wal_applied", 0).unwrap();
        // db 1 was flushed once: it lives in the first fresh namespace.
        w.open_table(DBS).unwrap().insert(1, fresh).unwrap();

        let mut keys = w.open_table(KEYS).unwrap();
        let mut elems = w.open_table(ELEMS).unwrap();
        let mut key = |ns: u32, k: &[u8], t: u8, at: Option<u64>, hdr: &[u8]| {
            keys.insert((ns, k), l::key_row(t, at, hdr).as_slice())
                .unwrap();
        };
        key(
            0,
            b"emb",
            tag::STRING,
            None,
            &cat(&[&[str_enc::EMBSTR], b"hello"]),
        );
        key(
            0,
            b"int",
            tag::STRING,
            None,
            &cat(&[&[str_enc::INT], b"-42"]),
        );
        key(
            0,
            b"raw",
            tag::STRING,
            Some(ttl_at),
            &cat(&[&[str_enc::RAW], &[b'x'; 80]]),
        );
        key(0, b"hash", tag::HASH, None, &2u64.to_be_bytes());
        key(0, b"set", tag::SET, None, &2u64.to_be_bytes());
        key(0, b"zset", tag::ZSET, None, &[]);
        key(
            0,
            b"list",
            tag::LIST,
            None,
            &cat(&[&(-1i64).to_be_bytes(), &2i64.to_be_bytes()]),
        );
        let (last, first) = (l::id_bytes((7, 1)), l::id_bytes((5, 0)));
        let header = cat(&[&last, &first, &l::id_bytes((0, 0)), &2u64.to_be_bytes()]);
        key(0, b"stream", tag::STREAM, None, &header);
        key(
            fresh,
            b"in-db1",
            tag::STRING,
            None,
            &cat(&[&[str_enc::EMBSTR], b"one"]),
        );

        let mut elem = |k: &[u8], sub: &[u8], v: &[u8]| {
            elems.insert((0, k, sub), v).unwrap();
        };
        elem(b"hash", b"f1", &cat(&[&0u64.to_be_bytes(), b"v1"]));
        elem(b"hash", b"f2", &cat(&[&1u64.to_be_bytes(), b"v2"]));
        elem(b"set", b"a", &0u64.to_be_bytes());
        elem(b"set", b"b", &1u64.to_be_bytes());
        elem(b"zset", b"lo", &(-1.5f64).to_bits().to_be_bytes());
        elem(b"zset", b"hi", &f64::INFINITY.to_bits().to_be_bytes());
        elem(b"list", &l::list_sub(-1), b"head");
        elem(b"list", &l::list_sub(0), b"mid");
        elem(b"list", &l::list_sub(1), b"tail");
        let fields = |f: &str, v: &str| {
            l::encode_fields(&[Bytes::from(f.to_string()), Bytes::from(v.to_string())])
        };
        elem(
            b"stream",
            &cat(&[&[xsub::ENTRY], &first]),
            &fields("a", "1"),
        );
        elem(b"stream", &cat(&[&[xsub::ENTRY], &last]), &fields("b", "2"));
        elem(
            b"stream",
            &cat(&[&[xsub::GROUP], b"g"]),
            &cat(&[&last, &2i64.to_be_bytes()]),
        );
        let delivered = now_ms() as i64 - 1_000;
        elem(
            b"stream",
            &cat(&[&l::group_prefix(xsub::PEL, b"g"), &first]),
            &cat(&[&delivered.to_be_bytes(), &3u64.to_be_bytes(), b"alice"]),
        );
        elem(
            b"stream",
            &cat(&[&l::group_prefix(xsub::CONSUMER, b"g"), b"alice"]),
            &cat(&[&delivered.to_be_bytes(), &delivered.to_be_bytes()]),
        );
    }
    w.commit().unwrap();
}

fn check_keyspace(srv: &TestServer) {
    srv.assert_str("emb", "hello");
    srv.assert_str("int", "-42");
    assert_eq!(srv.get("raw"), Some("x".repeat(80)));
    let ttl = srv.ttl("raw").expect("the TTL survived");
    assert!(ttl > Duration::from_secs(3000) && ttl <= Duration::from_secs(3600));
    assert_eq!(srv.ttl("emb"), None);
    srv.assert_hash("hash", &[("f1", "v1"), ("f2", "v2")]);
    srv.assert_members("set", &["a", "b"]);
    srv.assert_zset("zset", &[("lo", -1.5), ("hi", f64::INFINITY)]);
    srv.assert_list("list", &["head", "mid", "tail"]);
    let pair = |f: &str, v: &str| vec![(f.to_string(), v.to_string())];
    assert_eq!(
        srv.stream_entries("stream"),
        [
            ("5-0".to_string(), pair("a", "1")),
            ("7-1".to_string(), pair("b", "2"))
        ]
    );
    let pending = srv.pending("stream", "g");
    assert_eq!(pending.len(), 1);
    assert_eq!(
        (pending[0].id.as_str(), pending[0].consumer.as_str()),
        ("5-0", "alice")
    );
    assert_eq!(pending[0].deliveries, 3);
    assert_eq!(srv.db(1).get("in-db1"), Some("one".to_string()));
    assert_eq!(srv.keys("*").len(), 8);
}

#[test]
fn a_redb2_store_is_upgraded_on_open_and_reopened_as_is() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(respite::persist::FILE_NAME);
    write_old_file(&path, now_ms() + 3_600_000);
    let old_inode = std::fs::metadata(&path).unwrap().ino();

    let srv = TestServer::builder()
        .redb(dir.path())
        .start()
        .expect("start");
    check_keyspace(&srv);
    let inode = std::fs::metadata(&path).unwrap().ino();
    assert_ne!(inode, old_inode, "the upgrade wrote a new file");
    // The upgraded store takes writes, and a restart reopens it without another copy.
    srv.set("after", "upgrade");
    srv.restart(true);
    check_keyspace_after_write(&srv);
    assert_eq!(std::fs::metadata(&path).unwrap().ino(), inode);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("upgrading"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

fn check_keyspace_after_write(srv: &TestServer) {
    srv.assert_str("after", "upgrade");
    srv.db(0).command(&[b"DEL", b"after"]);
    check_keyspace(srv);
}
