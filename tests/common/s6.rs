//! SCENARIOS.md S6, two-phase commit over a hash-tagged key group: the checkpoint data,
//! the three script calls and the MULTI/EXEC load, for sync and async clients alike.

use super::helpers::lua_script;
use super::values::texts;
use redis::aio::MultiplexedConnection;

/// Field/value pairs of a hash.
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;
/// What the load reads: the checkpoint, the committed revision, the prepared record
/// (hashes sorted by field).
pub type Group = (Pairs, Option<String>, Pairs);

/// S6: a checkpoint of ten fields, some binary, for revision `rev`.
pub fn checkpoint(rev: u8) -> Pairs {
    let mut out: Pairs = (0..7)
        .map(|i| {
            (
                format!("f{i}").into_bytes(),
                format!("v{i}-r{rev}").into_bytes(),
            )
        })
        .collect();
    out.push((b"blob".to_vec(), vec![0x00, 0xff, 0x80, rev, b'\r', b'\n']));
    out.push((vec![0xfe, 0x00, b'k'], vec![0x80; 3]));
    out.push((b"empty".to_vec(), Vec::new()));
    out
}

/// One call of an S6 script on vehicle `v`'s key group; [`Call::invocation`] runs it with
/// `invoke` or `invoke_async` (EVALSHA, loading the script on NOSCRIPT).
pub struct Call {
    script: redis::Script,
    keys: Vec<String>,
    args: Vec<Vec<u8>>,
}

fn key(v: &str, name: &str) -> String {
    format!("{{vehicle:{v}}}:{name}")
}

impl Call {
    /// `twophase_prepare.lua`: stage revision `rev`'s checkpoint for `output` on `base`.
    pub fn prepare(v: &str, output: &str, base: &str, rev: u8) -> Call {
        let mut args = vec![
            output.as_bytes().to_vec(),
            base.as_bytes().to_vec(),
            rev.to_string().into_bytes(),
        ];
        for (f, val) in checkpoint(rev) {
            args.push(f);
            args.push(val);
        }
        Call {
            script: lua_script("twophase_prepare.lua"),
            keys: vec![key(v, "prepared"), key(v, "committed-revision")],
            args,
        }
    }

    /// `twophase_mark_published.lua`: `output` was published.
    pub fn mark(v: &str, output: &str) -> Call {
        Call {
            script: lua_script("twophase_mark_published.lua"),
            keys: vec![key(v, "prepared")],
            args: vec![output.as_bytes().to_vec()],
        }
    }

    /// `twophase_promote.lua`: the prepared record becomes the checkpoint (kept an hour).
    pub fn promote(v: &str, output: &str) -> Call {
        Call {
            script: lua_script("twophase_promote.lua"),
            keys: vec![
                key(v, "prepared"),
                key(v, "committed-revision"),
                key(v, "checkpoint"),
            ],
            args: vec![output.as_bytes().to_vec(), b"3600000".to_vec()],
        }
    }

    /// Runs the call on a sync connection: the reply's elements as text.
    pub fn run(&self, c: &mut redis::Connection) -> Vec<String> {
        let r: Vec<redis::Value> = self.invocation().invoke(c).expect("S6 script");
        texts(&r)
    }

    /// Runs the call on an async connection: the reply's elements as text.
    pub async fn run_async(&self, con: &mut MultiplexedConnection) -> Vec<String> {
        let r: Vec<redis::Value> = self
            .invocation()
            .invoke_async(con)
            .await
            .expect("S6 script");
        texts(&r)
    }

    pub fn invocation(&self) -> redis::ScriptInvocation<'_> {
        let mut inv = self.script.prepare_invoke();
        for k in &self.keys {
            inv.key(k);
        }
        for a in &self.args {
            inv.arg(a);
        }
        inv
    }
}

/// [`Call::prepare`] run on `con`.
pub async fn prepare(
    con: &mut MultiplexedConnection,
    v: &str,
    output: &str,
    base: &str,
    rev: u8,
) -> Vec<String> {
    Call::prepare(v, output, base, rev).run_async(con).await
}

/// [`Call::mark`] run on `con`.
pub async fn mark(con: &mut MultiplexedConnection, v: &str, output: &str) -> Vec<String> {
    Call::mark(v, output).run_async(con).await
}

/// [`Call::promote`] run on `con`.
pub async fn promote(con: &mut MultiplexedConnection, v: &str, output: &str) -> Vec<String> {
    Call::promote(v, output).run_async(con).await
}

/// The load path: the whole group in one MULTI/EXEC (checkpoint, revision, prepared).
pub fn load_pipe(v: &str) -> redis::Pipeline {
    let mut p = redis::pipe();
    p.atomic()
        .cmd("HGETALL")
        .arg(key(v, "checkpoint"))
        .cmd("GET")
        .arg(key(v, "committed-revision"))
        .cmd("HGETALL")
        .arg(key(v, "prepared"));
    p
}

/// A loaded group with its hashes sorted by field.
pub fn sorted((mut cp, rev, mut prep): Group) -> Group {
    cp.sort();
    prep.sort();
    (cp, rev, prep)
}
