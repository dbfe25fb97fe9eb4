//! TLS (issue 19): respite serves TLS clients on `tls-port` beside plain ones on `port`,
//! with certificates these tests make (rcgen): redis-cli `--tls` (Debian's build links
//! OpenSSL), redis-py `ssl=True`, and a rustls client for what those cannot choose (the
//! protocol version). Client certificates: required by default (`tls-auth-clients yes`, as
//! Redis), optional, or not asked for; a certificate from another CA is refused. The
//! settings come from config-file lines, command-line flags and CONFIG SET, and CONFIG GET
//! shows them under Redis's names.

mod common;

use common::{free_port, ProcessKind, ServerProcess, PATIENCE};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use respite::TestServer;
use rustls::pki_types::pem::PemObject;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A CA, a server certificate it signed (for `localhost` and 127.0.0.1), a client
/// certificate it signed, and a client certificate from another CA, as PEM files.
struct Pki {
    _dir: tempfile::TempDir,
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
    rogue_cert: PathBuf,
    rogue_key: PathBuf,
    rogue_ca: PathBuf,
}

fn ca(name: &str) -> (Issuer<'static, KeyPair>, String) {
    let key = KeyPair::generate().expect("CA key");
    let mut p = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = p.self_signed(&key).expect("CA certificate");
    (Issuer::new(p, key), cert.pem())
}

/// A certificate `issuer` signed: (certificate PEM, key PEM).
fn leaf(
    issuer: &Issuer<'_, KeyPair>,
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> (String, String) {
    let key = KeyPair::generate().expect("key");
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let mut p = CertificateParams::new(names).expect("params");
    p.distinguished_name
        .push(DnType::CommonName, "respite test");
    p.extended_key_usages = vec![usage];
    let cert = p.signed_by(&key, issuer).expect("sign");
    (cert.pem(), key.serialize_pem())
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().expect("tempdir");
        let write = |name: &str, pem: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, pem).expect("write PEM");
            path
        };
        let (issuer, ca_pem) = ca("respite test CA");
        let (rogue, rogue_pem) = ca("someone else's CA");
        let (sc, sk) = leaf(
            &issuer,
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let (cc, ck) = leaf(&issuer, &["client"], ExtendedKeyUsagePurpose::ClientAuth);
        let (rc, rk) = leaf(&rogue, &["client"], ExtendedKeyUsagePurpose::ClientAuth);
        Pki {
            ca: write("ca.crt", &ca_pem),
            server_cert: write("server.crt", &sc),
            server_key: write("server.key", &sk),
            client_cert: write("client.crt", &cc),
            client_key: write("client.key", &ck),
            rogue_cert: write("rogue.crt", &rc),
            rogue_key: write("rogue.key", &rk),
            rogue_ca: write("rogue-ca.crt", &rogue_pem),
            _dir: dir,
        }
    }

    /// The server's `tls-*` parameters (`tls-auth-clients` as given).
    fn params(&self, auth_clients: &str) -> Vec<(&'static str, String)> {
        let s = |p: &Path| p.display().to_string();
        vec![
            ("tls-cert-file", s(&self.server_cert)),
            ("tls-key-file", s(&self.server_key)),
            ("tls-ca-cert-file", s(&self.ca)),
            ("tls-auth-clients", auth_clients.to_string()),
        ]
    }

    fn server(&self, auth_clients: &str) -> TestServer {
        let mut b = TestServer::builder().tls();
        for (k, v) in self.params(auth_clients) {
            b = b.param(k, &v);
        }
        b.start().expect("start TLS test server")
    }
}

/// redis-cli over TLS to `port`, trusting the test CA, with a client certificate if given:
/// (success, stdout + stderr).
fn cli(pki: &Pki, port: u16, client: Option<(&Path, &Path)>, args: &[&str]) -> (bool, String) {
    let mut cmd = Command::new("redis-cli");
    cmd.args(["--tls", "--cacert"])
        .arg(&pki.ca)
        .args(["-h", "127.0.0.1", "-p", &port.to_string()]);
    if let Some((cert, key)) = client {
        cmd.arg("--cert").arg(cert).arg("--key").arg(key);
    }
    let out = cmd.args(args).output().expect("run redis-cli");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.status.success() && !text.contains("ERR") && !text.contains("rror"),
        text,
    )
}

#[test]
fn redis_cli_over_tls_and_plain_clients_share_the_keyspace() {
    let pki = Pki::new();
    let srv = pki.server("no");
    let port = srv.tls_port().expect("TLS port");
    assert_ne!(port, srv.port());
    let (ok, out) = cli(&pki, port, None, &["PING"]);
    assert!(ok && out.trim() == "PONG", "redis-cli --tls PING: {out}");
    let (ok, out) = cli(&pki, port, None, &["SET", "from-tls", "yes"]);
    assert!(ok && out.trim() == "OK", "{out}");
    // Both ports serve the same server.
    let mut plain = common::Conn::open(srv.port());
    assert_eq!(
        plain.cmd("GET from-tls"),
        common::Frame::Bulk(b"yes".to_vec())
    );
    // A plain client on the TLS port gets nothing back and the server goes on.
    let mut wrong = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    wrong.set_read_timeout(Some(PATIENCE)).unwrap();
    std::io::Write::write_all(&mut wrong, b"PING\r\n").unwrap();
    let mut buf = [0u8; 64];
    let n = std::io::Read::read(&mut wrong, &mut buf).unwrap_or(0);
    assert!(
        !buf[..n].starts_with(b"+PONG"),
        "plain text on the TLS port"
    );
    let (ok, out) = cli(&pki, port, None, &["PING"]);
    assert!(ok && out.trim() == "PONG", "{out}");
    // The test double keeps its TLS port across a restart.
    srv.restart(true);
    assert_eq!(srv.tls_port(), Some(port));
    let (ok, out) = cli(&pki, port, None, &["GET", "from-tls"]);
    assert!(ok && out.trim() == "yes", "after a restart: {out}");
}

#[test]
fn client_certificates_are_required_by_default() {
    let pki = Pki::new();
    let srv = pki.server("yes");
    let port = srv.tls_port().unwrap();
    let mine = Some((pki.client_cert.as_path(), pki.client_key.as_path()));
    let rogue = Some((pki.rogue_cert.as_path(), pki.rogue_key.as_path()));
    let (ok, out) = cli(&pki, port, mine, &["PING"]);
    assert!(
        ok && out.trim() == "PONG",
        "with the CA's client certificate: {out}"
    );
    let (ok, out) = cli(&pki, port, None, &["PING"]);
    assert!(!ok && !out.contains("PONG"), "without a certificate: {out}");
    let (ok, out) = cli(&pki, port, rogue, &["PING"]);
    assert!(
        !ok && !out.contains("PONG"),
        "another CA's certificate: {out}"
    );
    // `optional`: no certificate is fine, a bad one still is not.
    let srv = pki.server("optional");
    let port = srv.tls_port().unwrap();
    let (ok, out) = cli(&pki, port, None, &["PING"]);
    assert!(ok && out.trim() == "PONG", "optional, none sent: {out}");
    let (ok, out) = cli(&pki, port, mine, &["PING"]);
    assert!(ok && out.trim() == "PONG", "optional, good one: {out}");
    let (ok, out) = cli(&pki, port, rogue, &["PING"]);
    assert!(
        !ok && !out.contains("PONG"),
        "optional, another CA's: {out}"
    );
}

/// A Python with redis-py: `$RESPITE_PYTHON`, else the venv examples/run.sh uses
/// (`target/examples-venv`), made here if missing.
fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("RESPITE_PYTHON") {
        return p.into();
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/examples-venv");
    let py = venv.join("bin/python");
    let has_redis = |py: &Path| {
        Command::new(py)
            .args(["-c", "import redis"])
            .status()
            .is_ok_and(|s| s.success())
    };
    if !has_redis(&py) {
        if !py.exists() {
            let ok = Command::new("python3")
                .arg("-m")
                .arg("venv")
                .arg(&venv)
                .status()
                .expect("python3 -m venv");
            assert!(ok.success(), "python3 -m venv {}", venv.display());
        }
        let ok = Command::new(venv.join("bin/pip"))
            .args([
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--retries",
                "5",
                "redis",
            ])
            .status()
            .expect("pip install redis");
        assert!(ok.success(), "pip install redis");
    }
    py
}

#[test]
fn redis_py_with_ssl() {
    let pki = Pki::new();
    let srv = pki.server("yes");
    let port = srv.tls_port().unwrap();
    // A 3 MB value makes replies larger than the socket takes at once (TLS records held
    // back and sent as it drains); a pipeline, pub/sub and a blocking pop cover the rest
    // of the connection loop.
    let script = r#"
import sys, redis, threading
port, ca, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
def client(**kw):
    return redis.Redis(host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=ca,
                       ssl_certfile=cert, ssl_keyfile=key, **kw)
r = client()
assert r.ping()
big = b"\x00\xff" * (3 << 19)
assert r.set("big", big)
assert r.get("big") == big
p = r.pipeline(transaction=False)
for i in range(1000):
    p.incr("n")
assert p.execute()[-1] == 1000
r3 = client(protocol=3)
assert r3.hset("h", mapping={"a": "1"}) == 1
assert r3.hgetall("h") == {b"a": b"1"}
ps = client().pubsub()
ps.subscribe("ch")
assert ps.get_message(timeout=5)["type"] == "subscribe"
assert r.publish("ch", "hi") == 1
m = ps.get_message(timeout=5)
assert m["data"] == b"hi", m
def later():
    client().rpush("q", "x")
t = threading.Timer(0.2, later)
t.start()
assert r.blpop(["q"], timeout=10) == (b"q", b"x")
t.join()
print("ok")
"#;
    let out = Command::new(python())
        .arg("-c")
        .arg(script)
        .arg(port.to_string())
        .arg(&pki.ca)
        .arg(&pki.client_cert)
        .arg(&pki.client_key)
        .output()
        .expect("run python");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ok",
        "redis-py over TLS: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A rustls client limited to `versions`, with the test client certificate.
async fn rustls_ping(
    pki: &Pki,
    port: u16,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Result<Vec<u8>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_file_iter(&pki.ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let certs: Vec<_> = rustls::pki_types::CertificateDer::pem_file_iter(&pki.client_cert)
        .unwrap()
        .map(|c| c.unwrap())
        .collect();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_file(&pki.client_key).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(certs, key)
        .unwrap();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tls.write_all(b"PING\r\n")
        .await
        .map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 7];
    tls.read_exact(&mut buf).await.map_err(|e| e.to_string())?;
    Ok(buf)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_get_shows_the_settings_and_config_set_reloads_them() {
    let pki = Pki::new();
    let srv = pki.server("yes");
    let port = srv.tls_port().unwrap();
    let mut c = common::Conn::open(srv.port());
    let get = |c: &mut common::Conn, name: &str| match c.cmd(&format!("CONFIG GET {name}")) {
        common::Frame::Array(v) if v.len() == 2 => v[1].clone(),
        other => panic!("CONFIG GET {name}: {other}"),
    };
    let bulk = |s: &str| common::Frame::Bulk(s.as_bytes().to_vec());
    assert_eq!(get(&mut c, "tls-port"), bulk(&port.to_string()));
    assert_eq!(get(&mut c, "tls-auth-clients"), bulk("yes"));
    assert_eq!(
        get(&mut c, "tls-cert-file"),
        bulk(&pki.server_cert.display().to_string())
    );
    use rustls::version::{TLS12, TLS13};
    assert_eq!(
        rustls_ping(&pki, port, &[&TLS12]).await.unwrap(),
        b"+PONG\r\n"
    );
    // TLS 1.3 only, from the next connection on.
    assert_eq!(
        c.cmd("CONFIG SET tls-protocols TLSv1.3"),
        common::Frame::Simple("OK".into())
    );
    assert!(rustls_ping(&pki, port, &[&TLS12]).await.is_err());
    assert_eq!(
        rustls_ping(&pki, port, &[&TLS13]).await.unwrap(),
        b"+PONG\r\n"
    );
    // A setting that does not load is refused and the old one stays in force.
    let r = c.cmd("CONFIG SET tls-cert-file /nonexistent/server.crt");
    assert_eq!(
        r,
        common::Frame::Error(
            "ERR CONFIG SET failed (possibly related to argument 'tls-cert-file') - Unable to \
             update TLS configuration. Check server logs."
                .into()
        )
    );
    assert_eq!(
        get(&mut c, "tls-cert-file"),
        bulk(&pki.server_cert.display().to_string())
    );
    assert!(c
        .cmd("CONFIG SET tls-protocols SSLv3")
        .is_error("ERR CONFIG SET failed"));
    assert_eq!(get(&mut c, "tls-protocols"), bulk("TLSv1.3"));
    assert_eq!(
        rustls_ping(&pki, port, &[&TLS13]).await.unwrap(),
        b"+PONG\r\n"
    );
    // The port moves at run time, as in Redis 7: the old one closes.
    let moved = free_port();
    assert_eq!(
        c.cmd(&format!("CONFIG SET tls-port {moved}")),
        common::Frame::Simple("OK".into())
    );
    assert_eq!(srv.tls_port(), Some(moved));
    assert_eq!(
        rustls_ping(&pki, moved, &[&TLS13]).await.unwrap(),
        b"+PONG\r\n"
    );
    assert!(
        rustls_ping(&pki, port, &[&TLS13]).await.is_err(),
        "the old port"
    );
    // A port that cannot be bound (the plain one) is refused, the TLS one stays.
    assert_eq!(
        c.cmd(&format!("CONFIG SET tls-port {}", srv.port())),
        common::Frame::Error(
            "ERR CONFIG SET failed (possibly related to argument 'tls-port') - Unable to \
             listen on this port. Check server logs."
                .into()
        )
    );
    assert_eq!(get(&mut c, "tls-port"), bulk(&moved.to_string()));
    assert_eq!(
        rustls_ping(&pki, moved, &[&TLS13]).await.unwrap(),
        b"+PONG\r\n"
    );
    // 0 turns TLS off; then the files can change without being loaded (as Redis).
    assert_eq!(
        c.cmd("CONFIG SET tls-port 0"),
        common::Frame::Simple("OK".into())
    );
    assert!(rustls_ping(&pki, moved, &[&TLS13]).await.is_err());
    assert_eq!(
        c.cmd("CONFIG SET tls-cert-file /nonexistent/server.crt"),
        common::Frame::Simple("OK".into())
    );
}

/// A server started without TLS refuses a TLS port it has no certificate for, and serves
/// one once it has (Redis 7 does both).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_can_be_turned_on_at_run_time() {
    let pki = Pki::new();
    let srv = TestServer::start().unwrap();
    let mut c = common::Conn::open(srv.port());
    let port = free_port();
    assert_eq!(
        c.cmd(&format!("CONFIG SET tls-port {port}")),
        common::Frame::Error(
            "ERR CONFIG SET failed (possibly related to argument 'tls-port') - Unable to \
             update TLS configuration. Check server logs."
                .into()
        )
    );
    assert_eq!(srv.tls_port(), None);
    let mut args: Vec<Vec<u8>> = vec![b"CONFIG".to_vec(), b"SET".to_vec()];
    for (k, v) in pki.params("yes") {
        args.push(k.as_bytes().to_vec());
        args.push(v.into_bytes());
    }
    args.push(b"tls-port".to_vec());
    args.push(port.to_string().into_bytes());
    assert_eq!(c.call(&args).unwrap(), common::Frame::Simple("OK".into()));
    assert_eq!(srv.tls_port(), Some(port));
    use rustls::version::TLS13;
    assert_eq!(
        rustls_ping(&pki, port, &[&TLS13]).await.unwrap(),
        b"+PONG\r\n"
    );
}

/// The binary: settings from a config file's lines, the command line's flags over them.
#[test]
fn the_binary_takes_tls_settings_from_its_config_file_and_flags() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("respite.conf");
    let tls_port = free_port();
    let mut text = format!("tls-port {tls_port}\n");
    for (k, v) in pki.params("yes") {
        text.push_str(&format!("{k} \"{v}\"\n"));
    }
    std::fs::write(&conf, text).unwrap();
    let conf_s = conf.display().to_string();
    // The flag turns client certificates off over the file's `yes`.
    let srv = ServerProcess::start_free(
        ProcessKind::Respite,
        &[
            &conf_s,
            "--tls-auth-clients",
            "no",
            "--tls-protocols",
            "TLSv1.2 TLSv1.3",
        ],
    );
    let (ok, out) = cli(&pki, tls_port, None, &["PING"]);
    assert!(ok && out.trim() == "PONG", "{out}");
    let (ok, out) = cli(&pki, tls_port, None, &["CONFIG", "GET", "tls-auth-clients"]);
    assert!(ok && out.contains("tls-auth-clients\nno"), "{out}");
    let mut plain = srv.conn();
    assert_eq!(plain.cmd("PING"), common::Frame::Simple("PONG".into()));
}

/// A TLS setting that does not load stops the start, as in Redis.
#[test]
fn a_bad_tls_setting_stops_the_start() {
    let pki = Pki::new();
    let mut b = TestServer::builder().tls();
    for (k, v) in pki.params("yes") {
        b = b.param(k, &v);
    }
    let err = b
        .param("tls-key-file", "/nonexistent/server.key")
        .start()
        .err()
        .expect("refused");
    assert!(
        err.to_string()
            .starts_with("Failed to configure TLS: tls-key-file"),
        "{err}"
    );
}

/// The proxy: TLS clients in, `rediss://` nodes out (their certificates checked against
/// the CA, the host name sent as SNI, the proxy's client certificate presented).
#[test]
fn the_proxy_serves_tls_clients_and_reaches_rediss_nodes() {
    use respite::proxy::config::{NodeSpec, ProxyConfig};
    let pki = Pki::new();
    // Nodes that require a client certificate.
    let a = pki.server("yes");
    let b = pki.server("yes");
    let mut cfg = ProxyConfig {
        port: 0,
        tls_port: free_port(),
        ..ProxyConfig::default()
    };
    cfg.nodes = vec![
        NodeSpec::parse(&format!(
            "node-a=rediss://localhost:{}",
            a.tls_port().unwrap()
        ))
        .unwrap(),
        NodeSpec::parse(&format!(
            "node-b=rediss://127.0.0.1:{}",
            b.tls_port().unwrap()
        ))
        .unwrap(),
    ];
    let s = |p: &Path| p.display().to_string();
    cfg.tls.cert_file = s(&pki.server_cert);
    cfg.tls.key_file = s(&pki.server_key);
    cfg.tls.ca_cert_file = s(&pki.ca);
    cfg.tls_client_cert_file = s(&pki.client_cert);
    cfg.tls_client_key_file = s(&pki.client_key);
    let tls_port = cfg.tls_port;
    let proxy = respite::proxy::ProxyServer::start(cfg.clone()).expect("start proxy");
    let mine = Some((pki.client_cert.as_path(), pki.client_key.as_path()));
    for i in 0..20 {
        let (ok, out) = cli(
            &pki,
            tls_port,
            mine,
            &["SET", &format!("k{i}"), &format!("v{i}")],
        );
        assert!(ok && out.trim() == "OK", "{out}");
    }
    // Both nodes got keys, over TLS.
    let keys = |srv: &TestServer| {
        let mut c = common::Conn::open(srv.port());
        match c.cmd("DBSIZE") {
            common::Frame::Int(n) => n,
            other => panic!("DBSIZE {other}"),
        }
    };
    assert!(keys(&a) > 0 && keys(&b) > 0 && keys(&a) + keys(&b) == 20);
    let (ok, out) = cli(&pki, tls_port, mine, &["MGET", "k0", "k7", "k19"]);
    assert!(ok && out.trim() == "v0\nv7\nv19", "{out}");
    // The plain port serves too.
    let mut plain = common::Conn::open(proxy.port());
    assert_eq!(plain.cmd("GET k3"), common::Frame::Bulk(b"v3".to_vec()));
    // Clients need a certificate (tls-auth-clients yes by default).
    let (ok, _) = cli(&pki, tls_port, None, &["PING"]);
    assert!(!ok, "a client without a certificate");
    drop(proxy);

    // A proxy that trusts another CA refuses the nodes' certificates.
    cfg.tls.ca_cert_file = s(&pki.rogue_ca);
    cfg.tls_port = 0;
    let proxy = respite::proxy::ProxyServer::start(cfg).expect("start proxy");
    let mut plain = common::Conn::open(proxy.port());
    let r = plain.cmd("GET k3");
    assert!(r.is_error("ERR node node-"), "{r}");
    assert!(format!("{r}").contains("unavailable"), "{r}");
}
