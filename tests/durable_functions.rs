//! FUNCTION libraries on the durable engine (issue 19): what FUNCTION LOAD, DELETE, FLUSH
//! and RESTORE leave is what a server restarted on the same directory has, before its first
//! client — after a clean restart (the final checkpoint), and after a SIGKILL under
//! `appendfsync always`, from the write-ahead log alone or from the store after a SAVE.
//! FLUSHALL leaves the libraries, as in Redis.

mod common;

use common::{durable_server, Conn, Frame, ProcessKind, ServerProcess};
use std::path::Path;

const COUNTER: &str = "#!lua name=counter\n\
    redis.register_function('bump', function(keys, args) return redis.call('INCRBY', keys[1], args[1]) end)\n\
    redis.register_function{function_name='peek', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}}";

const GREET: &str = "#!lua name=greet\n\
    redis.register_function('hello', function(_, args) return 'hello ' .. args[1] end)";

fn call(c: &mut Conn, args: &[&str]) -> Frame {
    let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
    c.call(&args).expect("reply")
}

fn bulk(s: &str) -> Frame {
    Frame::Bulk(s.as_bytes().to_vec())
}

/// The library names FUNCTION LIST shows, sorted.
fn libraries(c: &mut Conn) -> Vec<String> {
    let Frame::Array(libs) = call(c, &["FUNCTION", "LIST"]) else {
        panic!("FUNCTION LIST");
    };
    let mut names: Vec<String> = libs
        .iter()
        .map(|lib| {
            let Frame::Array(fields) = lib else {
                panic!("library entry {lib}")
            };
            let at = fields
                .iter()
                .position(|f| *f == bulk("library_name"))
                .expect("library_name");
            match &fields[at + 1] {
                Frame::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
                other => panic!("library name {other}"),
            }
        })
        .collect();
    names.sort();
    names
}

fn conn(srv: &respite::TestServer) -> Conn {
    Conn::open(srv.port())
}

fn restart(srv: respite::TestServer, dir: &Path) -> respite::TestServer {
    // Stopped first (its final commit closes the file): two servers cannot share it.
    drop(srv);
    durable_server(dir, "everysec")
}

#[test]
fn libraries_survive_restarts_and_so_do_delete_flush_and_restore() {
    let dir = tempfile::tempdir().unwrap();
    let srv = durable_server(dir.path(), "everysec");
    let mut c = conn(&srv);
    assert_eq!(
        call(&mut c, &["FUNCTION", "LOAD", COUNTER]),
        bulk("counter")
    );
    assert_eq!(call(&mut c, &["FUNCTION", "LOAD", GREET]), bulk("greet"));
    assert_eq!(
        call(&mut c, &["FCALL", "bump", "1", "n", "5"]),
        Frame::Int(5)
    );

    let srv = restart(srv, dir.path());
    let mut c = conn(&srv);
    assert_eq!(libraries(&mut c), ["counter", "greet"]);
    assert_eq!(
        call(&mut c, &["FCALL", "bump", "1", "n", "2"]),
        Frame::Int(7)
    );
    assert_eq!(call(&mut c, &["FCALL_RO", "peek", "1", "n"]), bulk("7"));
    assert_eq!(call(&mut c, &["FCALL", "hello", "0", "x"]), bulk("hello x"));
    // The code comes back byte for byte (FUNCTION DUMP carries it).
    let dump = call(&mut c, &["FUNCTION", "DUMP"]);
    let Frame::Bulk(dump) = dump else {
        panic!("FUNCTION DUMP: {dump}")
    };
    assert_eq!(
        call(&mut c, &["FUNCTION", "DELETE", "greet"]),
        Frame::Simple("OK".into())
    );
    // A keyspace flush is not a FUNCTION FLUSH.
    assert_eq!(call(&mut c, &["FLUSHALL"]), Frame::Simple("OK".into()));

    let srv = restart(srv, dir.path());
    let mut c = conn(&srv);
    assert_eq!(libraries(&mut c), ["counter"]);
    assert!(call(&mut c, &["FCALL", "hello", "0", "x"]).is_error("ERR Function not found"));
    assert_eq!(
        call(&mut c, &["FCALL", "bump", "1", "n", "1"]),
        Frame::Int(1)
    );
    assert_eq!(
        call(&mut c, &["FUNCTION", "FLUSH"]),
        Frame::Simple("OK".into())
    );

    let srv = restart(srv, dir.path());
    let mut c = conn(&srv);
    assert!(libraries(&mut c).is_empty());
    assert!(call(&mut c, &["FCALL", "bump", "1", "n", "1"]).is_error("ERR Function not found"));
    let restore = vec![b"FUNCTION".to_vec(), b"RESTORE".to_vec(), dump.clone()];
    assert_eq!(c.call(&restore).unwrap(), Frame::Simple("OK".into()));
    // A failed RESTORE (the libraries exist) changes nothing, on disk either.
    assert!(c.call(&restore).unwrap().is_error("ERR Library"));

    let srv = restart(srv, dir.path());
    let mut c = conn(&srv);
    assert_eq!(libraries(&mut c), ["counter", "greet"]);
    assert_eq!(call(&mut c, &["FUNCTION", "DUMP"]), Frame::Bulk(dump));
    // LOAD REPLACE keeps the new code.
    let v2 = GREET.replace("'hello '", "'hi '");
    assert_eq!(
        call(&mut c, &["FUNCTION", "LOAD", "REPLACE", &v2]),
        bulk("greet")
    );
    drop(c);

    let srv = restart(srv, dir.path());
    let mut c = conn(&srv);
    assert_eq!(call(&mut c, &["FCALL", "hello", "0", "x"]), bulk("hi x"));
    drop(srv);
}

/// SIGKILL under `appendfsync always`: an acknowledged FUNCTION command is in the log, so
/// the next start has it, whether the store had been checkpointed (SAVE) or not.
#[test]
fn acknowledged_function_commands_survive_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let mut srv = ServerProcess::start_free(
        ProcessKind::Respite,
        &["--engine", "redb", "--dir", d, "--appendfsync", "always"],
    );
    let mut c = srv.conn();
    assert_eq!(
        call(&mut c, &["FUNCTION", "LOAD", COUNTER]),
        bulk("counter")
    );
    assert_eq!(
        call(&mut c, &["FCALL", "bump", "1", "n", "3"]),
        Frame::Int(3)
    );
    // Killed before any checkpoint could matter: the log alone has the library.
    srv.restart();
    let mut c = srv.conn();
    assert_eq!(libraries(&mut c), ["counter"]);
    assert_eq!(
        call(&mut c, &["FCALL", "bump", "1", "n", "1"]),
        Frame::Int(4)
    );

    // In the store (SAVE checkpoints), then changed again in the log only.
    assert_eq!(call(&mut c, &["FUNCTION", "LOAD", GREET]), bulk("greet"));
    assert_eq!(call(&mut c, &["SAVE"]), Frame::Simple("OK".into()));
    assert_eq!(
        call(&mut c, &["FUNCTION", "DELETE", "counter"]),
        Frame::Simple("OK".into())
    );
    srv.restart();
    let mut c = srv.conn();
    assert_eq!(libraries(&mut c), ["greet"]);
    assert_eq!(call(&mut c, &["FCALL", "hello", "0", "y"]), bulk("hello y"));
    assert_eq!(call(&mut c, &["GET", "n"]), bulk("4"));

    assert_eq!(
        call(&mut c, &["FUNCTION", "FLUSH"]),
        Frame::Simple("OK".into())
    );
    srv.restart();
    let mut c = srv.conn();
    assert!(libraries(&mut c).is_empty());
}
