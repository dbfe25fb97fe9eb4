//! Replays every committed fuzz corpus on stable, as ordinary tests: each file under
//! `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/` goes through the same
//! `respite::fuzzing` function the fuzz target calls (see fuzz/README.md). A crash the
//! fuzzer found stays fixed once its input is committed under `fuzz/regressions/`.

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// The files of `dir` (none if it does not exist), sorted so failures repeat.
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    out.sort();
    out
}

fn target(name: &str) -> fn(&[u8]) {
    respite::fuzzing::TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| *f)
        .unwrap_or_else(|| panic!("no fuzz target {name}"))
}

/// Runs every corpus and regression input of `name`; returns how many ran.
fn replay(name: &str) -> usize {
    let f = target(name);
    let mut n = 0;
    for sub in ["corpus", "regressions"] {
        for path in files(&fuzz_dir().join(sub).join(name)) {
            let data = std::fs::read(&path).expect("read input");
            let r = std::panic::catch_unwind(|| f(&data));
            assert!(r.is_ok(), "{} fails on {}", name, path.display());
            n += 1;
        }
    }
    n
}

fn replay_nonempty(name: &str) {
    let n = replay(name);
    assert!(n > 0, "no corpus for {name} under fuzz/corpus/{name}/");
}

#[test]
fn corpus_resp_parse() {
    replay_nonempty("resp_parse");
}

#[test]
fn corpus_rdb_restore() {
    replay_nonempty("rdb_restore");
}

#[test]
fn corpus_wal_decode() {
    replay_nonempty("wal_decode");
}

#[test]
fn corpus_lua_cjson() {
    replay_nonempty("lua_cjson");
}

#[test]
fn corpus_lua_cmsgpack() {
    replay_nonempty("lua_cmsgpack");
}

#[test]
fn corpus_lua_struct() {
    replay_nonempty("lua_struct");
}

#[test]
fn corpus_commands() {
    replay_nonempty("commands");
}

#[test]
fn corpus_commands_model() {
    replay_nonempty("commands_model");
}

/// Every target has a test above (a new target must get one).
#[test]
fn every_target_is_replayed() {
    let src = include_str!("fuzz_corpus.rs");
    for (name, _) in respite::fuzzing::TARGETS {
        assert!(
            src.contains(&format!("fn corpus_{name}()")),
            "fuzz target {name} has no corpus test"
        );
        assert!(
            fuzz_dir()
                .join("fuzz_targets")
                .join(format!("{name}.rs"))
                .exists(),
            "fuzz target {name} has no fuzz/fuzz_targets/{name}.rs"
        );
    }
}

/// The redis-server DUMP payloads in the corpus restore (the target skips what it refuses,
/// so check they are not all refused by a wrong CRC fix-up or a decoder regression).
#[test]
fn redis_dump_seeds_restore() {
    use respite::types::rdb::value::{restore, Limits};
    let dir = fuzz_dir().join("corpus").join("rdb_restore");
    let mut n = 0;
    for path in files(&dir) {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("redis7-") {
            continue;
        }
        let data = std::fs::read(&path).unwrap();
        assert!(
            restore(&data, &Limits::default()).is_ok(),
            "{name} does not restore"
        );
        n += 1;
    }
    assert!(n >= 10, "the redis-server DUMP seeds are missing");
}

/// Writes the generated seeds (`respite::fuzzing::seeds`) into fuzz/corpus/. Run after
/// changing the generators: `cargo test --test fuzz_corpus -- --ignored write_seeds`.
#[test]
#[ignore = "writes files under fuzz/corpus/"]
fn write_seeds() {
    for (target, name, data) in respite::fuzzing::seeds::seeds() {
        let dir = fuzz_dir().join("corpus").join(target);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), data).unwrap();
    }
}

/// How long each corpus input of a target takes (a slow input is a hang in waiting).
#[test]
#[ignore = "timing report"]
fn time_corpus() {
    for (name, f) in respite::fuzzing::TARGETS {
        let mut worst = (std::time::Duration::ZERO, PathBuf::new());
        let mut total = std::time::Duration::ZERO;
        for path in files(&fuzz_dir().join("corpus").join(name)) {
            let data = std::fs::read(&path).unwrap();
            let t = std::time::Instant::now();
            f(&data);
            let d = t.elapsed();
            total += d;
            if d > worst.0 {
                worst = (d, path);
            }
        }
        println!(
            "{name}: total {total:?}, slowest {:?} {}",
            worst.0,
            worst.1.display()
        );
    }
}

/// Runs one committed crash reproducer through its target.
fn regression(target_name: &str, file: &str) {
    let path = fuzz_dir().join("regressions").join(target_name).join(file);
    let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    target(target_name)(&data);
}

/// A write-ahead-log record whose whole-value zset repeats a member (and holds a NaN
/// score) decoded into a zset whose member map and score tree disagreed; it is refused as
/// corrupt now.
#[test]
fn fuzz_wal_zset_duplicate_member_nan_score() {
    regression("wal_decode", "zset-duplicate-member-nan-score");
}
