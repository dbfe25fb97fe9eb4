//! TLS (issue 19), with rustls (its `ring` provider) through tokio-rustls:
//! - [`Settings`]: Redis's `tls-*` parameters, by their redis.conf names, and
//!   [`server_config`] / [`client_config`], the rustls configurations they describe;
//! - [`Transport`]: the byte stream a connection loop runs on, plain TCP or [`Tls`] over it.
//!   The loops are generic over it, so a plain connection's loop is compiled for
//!   `TcpStream` alone and pays nothing for TLS.
//!
//! What rustls lacks is refused or left out, never faked: TLS 1.0 and 1.1 (dropped from
//! `tls-protocols` with a warning; a list naming nothing else is an error), encrypted key
//! files (`tls-key-file-pass` is an error), DH parameters (rustls has only ECDHE and TLS 1.3
//! groups), OpenSSL cipher-string keywords other than `DEFAULT`, `ALL` and `HIGH`.

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::{NoServerSessionStorage, ServerSessionMemoryCache, WebPkiClientVerifier};
use rustls::{RootCertStore, SupportedCipherSuite, SupportedProtocolVersion};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

pub use rustls::{ClientConfig, ServerConfig};
pub use tokio_rustls::{TlsAcceptor, TlsConnector};

/// How long a client has to complete its handshake (it holds no client slot meanwhile).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// `tls-auth-clients`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AuthClients {
    No,
    /// Redis's default: a client must present a certificate the CA signed.
    #[default]
    Yes,
    /// A certificate is checked if the client sends one.
    Optional,
}

impl AuthClients {
    /// `yes`, `no` or `optional` (case-insensitive).
    pub fn parse(v: &str) -> Option<AuthClients> {
        match v.to_ascii_lowercase().as_str() {
            "yes" => Some(AuthClients::Yes),
            "no" => Some(AuthClients::No),
            "optional" => Some(AuthClients::Optional),
            _ => None,
        }
    }
}

/// A listener's TLS settings, as Redis names them.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// `tls-cert-file`, `tls-key-file`, `tls-key-file-pass`.
    pub cert_file: String,
    pub key_file: String,
    pub key_file_pass: String,
    /// `tls-ca-cert-file`, `tls-ca-cert-dir`: who signs client certificates.
    pub ca_cert_file: String,
    pub ca_cert_dir: String,
    pub auth_clients: AuthClients,
    /// `tls-protocols`: e.g. `"TLSv1.2 TLSv1.3"`; empty = both.
    pub protocols: String,
    /// `tls-ciphersuites` (TLS 1.3) and `tls-ciphers` (TLS 1.2), OpenSSL's names, `:`
    /// separated; empty = every suite rustls has.
    pub ciphersuites: String,
    pub ciphers: String,
    /// `tls-prefer-server-ciphers`.
    pub prefer_server_ciphers: bool,
    /// `tls-session-caching`, `tls-session-cache-size`.
    pub session_caching: bool,
    pub session_cache_size: usize,
}

/// The parameters [`Settings::from_params`] reads (and CONFIG SET rebuilds the server's
/// configuration after).
pub const PARAMS: &[&str] = &[
    "tls-cert-file",
    "tls-key-file",
    "tls-key-file-pass",
    "tls-ca-cert-file",
    "tls-ca-cert-dir",
    "tls-auth-clients",
    "tls-protocols",
    "tls-ciphersuites",
    "tls-ciphers",
    "tls-prefer-server-ciphers",
    "tls-session-caching",
    "tls-session-cache-size",
];

impl Settings {
    /// The settings from their values by name (CONFIG GET's text).
    pub fn from_params(get: impl Fn(&str) -> String) -> Settings {
        Settings {
            cert_file: get("tls-cert-file"),
            key_file: get("tls-key-file"),
            key_file_pass: get("tls-key-file-pass"),
            ca_cert_file: get("tls-ca-cert-file"),
            ca_cert_dir: get("tls-ca-cert-dir"),
            auth_clients: AuthClients::parse(&get("tls-auth-clients")).unwrap_or_default(),
            protocols: get("tls-protocols"),
            ciphersuites: get("tls-ciphersuites"),
            ciphers: get("tls-ciphers"),
            prefer_server_ciphers: get("tls-prefer-server-ciphers") == "yes",
            session_caching: get("tls-session-caching") != "no",
            session_cache_size: get("tls-session-cache-size").parse().unwrap_or(20480),
        }
    }
}

fn certs(path: &str, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{what} {path}: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{what} {path}: no certificate in it"));
    }
    Ok(certs)
}

fn key(path: &str) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| format!("tls-key-file {path}: {e}"))
}

/// The CA certificates of `tls-ca-cert-file` and every PEM file in `tls-ca-cert-dir`.
fn roots(file: &str, dir: &str) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    let mut add = |c: CertificateDer<'static>, from: &str| {
        store
            .add(c)
            .map_err(|e| format!("CA certificate in {from}: {e}"))
    };
    if !file.is_empty() {
        for c in certs(file, "tls-ca-cert-file")? {
            add(c, file)?;
        }
    }
    if !dir.is_empty() {
        let entries = std::fs::read_dir(dir).map_err(|e| format!("tls-ca-cert-dir {dir}: {e}"))?;
        for entry in entries.flatten() {
            let path = entry.path();
            // OpenSSL's hashed directory holds other files too: PEM certificates count.
            let Ok(it) = CertificateDer::pem_file_iter(&path) else {
                continue;
            };
            for c in it.flatten() {
                add(c, &path.display().to_string())?;
            }
        }
    }
    Ok(store)
}

/// `tls-protocols`.
fn versions(list: &str) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    if list.trim().is_empty() {
        return Ok(vec![&rustls::version::TLS12, &rustls::version::TLS13]);
    }
    let mut out: Vec<&'static SupportedProtocolVersion> = Vec::new();
    for word in list.split_whitespace() {
        let v: &'static SupportedProtocolVersion = match word.to_ascii_lowercase().as_str() {
            "tlsv1.2" => &rustls::version::TLS12,
            "tlsv1.3" => &rustls::version::TLS13,
            "tlsv1" | "tlsv1.1" => {
                tracing::warn!("tls-protocols: {word} is not implemented by rustls; left out");
                continue;
            }
            _ => {
                return Err(
                    "Invalid tls-protocols specified. Use a combination of 'TLSv1', \
                            'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'."
                        .into(),
                )
            }
        };
        if !out.iter().any(|o| o.version == v.version) {
            out.push(v);
        }
    }
    if out.is_empty() {
        return Err("tls-protocols: only TLSv1.2 and TLSv1.3 are implemented".into());
    }
    Ok(out)
}

/// OpenSSL's TLS 1.2 names of the suites rustls implements, with rustls's names.
const OPENSSL_TLS12: &[(&str, &str)] = &[
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    ),
    (
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    ),
    (
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    ),
    (
        "ECDHE-RSA-AES128-GCM-SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    ),
    (
        "ECDHE-RSA-AES256-GCM-SHA384",
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    ),
    (
        "ECDHE-RSA-CHACHA20-POLY1305",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    ),
];

fn suite_name(s: &SupportedCipherSuite) -> String {
    format!("{:?}", s.suite())
}

/// rustls's name for a name in a cipher list: OpenSSL's (`TLS_AES_128_GCM_SHA256`,
/// `ECDHE-RSA-AES128-GCM-SHA256`) or rustls's own, case-insensitive.
fn rustls_name(name: &str, tls13: bool) -> String {
    let upper = name.to_ascii_uppercase();
    if tls13 {
        if let Some(rest) = upper.strip_prefix("TLS_") {
            return format!("TLS13_{rest}");
        }
        return upper;
    }
    OPENSSL_TLS12
        .iter()
        .find(|(o, _)| *o == upper)
        .map_or(upper, |(_, r)| r.to_string())
}

/// The suites of one TLS version a cipher list keeps: named ones (`!name` / `-name` drops
/// one), `DEFAULT` / `ALL` / `HIGH` for all of them; other OpenSSL keywords match nothing.
fn pick(all: &[SupportedCipherSuite], list: &str, tls13: bool) -> Vec<SupportedCipherSuite> {
    let mine: Vec<SupportedCipherSuite> = all
        .iter()
        .filter(|s| matches!(s, SupportedCipherSuite::Tls13(_)) == tls13)
        .copied()
        .collect();
    if list.trim().is_empty() {
        return mine;
    }
    let mut keep: Vec<SupportedCipherSuite> = Vec::new();
    for token in list.split([':', ',', ' ']).filter(|t| !t.is_empty()) {
        if let Some(name) = token.strip_prefix(['!', '-']) {
            let name = rustls_name(name, tls13);
            keep.retain(|s| suite_name(s) != name);
            continue;
        }
        let token = token.trim_start_matches('+');
        if ["DEFAULT", "ALL", "HIGH"].contains(&token.to_ascii_uppercase().as_str()) {
            for s in &mine {
                if !keep.iter().any(|k| k.suite() == s.suite()) {
                    keep.push(*s);
                }
            }
            continue;
        }
        let name = rustls_name(token, tls13);
        if let Some(s) = mine.iter().find(|s| suite_name(s) == name) {
            if !keep.iter().any(|k| k.suite() == s.suite()) {
                keep.push(*s);
            }
        }
    }
    keep
}

/// The provider with the suites `tls-ciphersuites` / `tls-ciphers` keep, in their order.
fn provider(ciphersuites: &str, ciphers: &str) -> Result<CryptoProvider, String> {
    let mut p = rustls::crypto::ring::default_provider();
    let tls13 = pick(&p.cipher_suites, ciphersuites, true);
    if tls13.is_empty() && !ciphersuites.trim().is_empty() {
        return Err(format!(
            "tls-ciphersuites: no suite rustls implements in '{ciphersuites}'"
        ));
    }
    let tls12 = pick(&p.cipher_suites, ciphers, false);
    if tls12.is_empty() && !ciphers.trim().is_empty() {
        return Err(format!(
            "tls-ciphers: no suite rustls implements in '{ciphers}'"
        ));
    }
    p.cipher_suites = tls13.into_iter().chain(tls12).collect();
    Ok(p)
}

/// The configuration of a TLS listener.
pub fn server_config(s: &Settings) -> Result<Arc<ServerConfig>, String> {
    if s.cert_file.is_empty() {
        return Err("No tls-cert-file configured!".into());
    }
    if s.key_file.is_empty() {
        return Err("No tls-key-file configured!".into());
    }
    if !s.key_file_pass.is_empty() {
        return Err(
            "tls-key-file-pass: encrypted private keys are not supported (rustls); \
                    give tls-key-file an unencrypted key"
                .into(),
        );
    }
    let provider = Arc::new(provider(&s.ciphersuites, &s.ciphers)?);
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions(&s.protocols)?)
        .map_err(|e| format!("TLS configuration: {e}"))?;
    let builder = if s.auth_clients == AuthClients::No {
        builder.with_no_client_auth()
    } else {
        let roots = roots(&s.ca_cert_file, &s.ca_cert_dir)?;
        if roots.is_empty() {
            return Err(
                "Either tls-ca-cert-file or tls-ca-cert-dir must be specified when \
                        tls-cluster, tls-replication or tls-auth-clients are enabled!"
                    .into(),
            );
        }
        let v = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
        let v = if s.auth_clients == AuthClients::Optional {
            v.allow_unauthenticated()
        } else {
            v
        };
        let v = v
            .build()
            .map_err(|e| format!("client certificate verifier: {e}"))?;
        builder.with_client_cert_verifier(v)
    };
    let mut cfg = builder
        .with_single_cert(certs(&s.cert_file, "tls-cert-file")?, key(&s.key_file)?)
        .map_err(|e| format!("tls-cert-file / tls-key-file: {e}"))?;
    cfg.ignore_client_order = s.prefer_server_ciphers;
    cfg.session_storage = if s.session_caching && s.session_cache_size > 0 {
        ServerSessionMemoryCache::new(s.session_cache_size)
    } else {
        Arc::new(NoServerSessionStorage {})
    };
    Ok(Arc::new(cfg))
}

/// The configuration of a TLS client (the proxy's node connections): server certificates
/// checked against `ca_file`'s CAs; with `cert_key`, a client certificate and its key.
pub fn client_config(
    ca_file: &str,
    cert_key: Option<(&str, &str)>,
) -> Result<Arc<ClientConfig>, String> {
    let roots = roots(ca_file, "")?;
    if roots.is_empty() {
        return Err("a CA certificate file is needed to check the nodes' certificates".into());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS configuration: {e}"))?
        .with_root_certificates(roots);
    let cfg = match cert_key {
        Some((cert, k)) => builder
            .with_client_auth_cert(certs(cert, "client certificate")?, key(k)?)
            .map_err(|e| format!("client certificate {cert}: {e}"))?,
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(cfg))
}

/// The name a client checks the server's certificate against (and sends as SNI).
pub fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(host.to_string()).map_err(|e| format!("TLS server name {host}: {e}"))
}

/// A connection's byte stream: what the connection loops need beyond reading and writing.
pub trait Transport: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    /// Halves that can be polled at once (a read and a write in one `select!`).
    type Read<'a>: AsyncRead + Unpin + Send
    where
        Self: 'a;
    type Write<'a>: AsyncWrite + Unpin + Send
    where
        Self: 'a;
    fn halves(&mut self) -> (Self::Read<'_>, Self::Write<'_>);
    /// Writes what the socket takes now; `WouldBlock` if nothing.
    fn try_write_now(&mut self, buf: &[u8]) -> io::Result<usize>;
    /// Bytes a write accepted that have not reached the socket yet (a TLS record held
    /// while the socket was full); a write of an empty buffer pushes them on.
    fn backlog(&mut self) -> bool;
    /// Ready once the socket has input (before a read buffer is allocated again). A poll
    /// function, not a future: a future type here made the generic loop's future fail
    /// tokio's `Send` check (higher-ranked lifetimes).
    fn poll_readable(r: &Self::Read<'_>, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
    /// Ends the stream as its protocol wants before the socket closes (TLS: close_notify).
    fn close(&mut self) -> impl Future<Output = ()> + Send {
        std::future::ready(())
    }
}

impl Transport for TcpStream {
    type Read<'a> = tokio::net::tcp::ReadHalf<'a>;
    type Write<'a> = tokio::net::tcp::WriteHalf<'a>;

    #[inline]
    fn halves(&mut self) -> (Self::Read<'_>, Self::Write<'_>) {
        self.split()
    }

    #[inline]
    fn try_write_now(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.try_write(buf)
    }

    #[inline]
    fn backlog(&mut self) -> bool {
        false
    }

    fn poll_readable(r: &Self::Read<'_>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        r.as_ref().poll_read_ready(cx)
    }
}

type TlsIo = tokio_rustls::TlsStream<TcpStream>;

/// TLS over TCP, server or client side. The halves share the stream through a mutex that
/// only one task ever takes (the connection's), so it never waits.
pub struct Tls(parking_lot::Mutex<TlsIo>);

impl Tls {
    pub fn new(io: impl Into<TlsIo>) -> Tls {
        Tls(parking_lot::Mutex::new(io.into()))
    }

    pub fn tcp(&mut self) -> &TcpStream {
        self.0.get_mut().get_ref().0
    }
}

/// A write of an empty buffer flushes what rustls holds (see [`Transport::backlog`]).
fn poll_write_tls(io: &mut TlsIo, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
    if buf.is_empty() {
        return Pin::new(io).poll_flush(cx).map_ok(|()| 0);
    }
    Pin::new(io).poll_write(cx, buf)
}

pub struct TlsHalf<'a>(&'a parking_lot::Mutex<TlsIo>);

impl AsyncRead for TlsHalf<'_> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0.lock()).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsHalf<'_> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        poll_write_tls(&mut self.0.lock(), cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0.lock()).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0.lock()).poll_shutdown(cx)
    }
}

impl AsyncRead for Tls {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(self.get_mut().0.get_mut()).poll_read(cx, buf)
    }
}

impl AsyncWrite for Tls {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        poll_write_tls(self.get_mut().0.get_mut(), cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(self.get_mut().0.get_mut()).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(self.get_mut().0.get_mut()).poll_shutdown(cx)
    }
}

impl Transport for Tls {
    type Read<'a> = TlsHalf<'a>;
    type Write<'a> = TlsHalf<'a>;

    fn halves(&mut self) -> (Self::Read<'_>, Self::Write<'_>) {
        (TlsHalf(&self.0), TlsHalf(&self.0))
    }

    fn try_write_now(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        match poll_write_tls(self.0.get_mut(), &mut cx, buf) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    fn backlog(&mut self) -> bool {
        self.0.get_mut().get_ref().1.wants_write()
    }

    fn poll_readable(r: &Self::Read<'_>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Only ever awaited after a read found nothing (tokio-rustls reads whatever
        // plaintext it holds first), so the socket is what input waits on.
        r.0.lock().get_ref().0.poll_read_ready(cx)
    }

    async fn close(&mut self) {
        use tokio::io::AsyncWriteExt;
        let _ = tokio::time::timeout(Duration::from_secs(1), self.shutdown()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_parse_as_redis_names_them() {
        assert_eq!(versions("").unwrap().len(), 2);
        assert_eq!(versions("TLSv1.2").unwrap().len(), 1);
        assert_eq!(versions("tlsv1.3 TLSv1.3").unwrap().len(), 1);
        assert_eq!(versions("TLSv1 TLSv1.2").unwrap().len(), 1);
        assert!(versions("TLSv1.1").is_err());
        assert!(versions("SSLv3")
            .unwrap_err()
            .starts_with("Invalid tls-protocols specified."));
    }

    #[test]
    fn cipher_lists_take_openssl_names() {
        let all = rustls::crypto::ring::default_provider().cipher_suites;
        let names =
            |v: Vec<SupportedCipherSuite>| -> Vec<String> { v.iter().map(suite_name).collect() };
        assert_eq!(
            names(pick(
                &all,
                "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384",
                true
            )),
            ["TLS13_CHACHA20_POLY1305_SHA256", "TLS13_AES_256_GCM_SHA384"]
        );
        assert_eq!(
            names(pick(&all, "ECDHE-RSA-AES128-GCM-SHA256", false)),
            ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]
        );
        let default = pick(&all, "DEFAULT:!ECDHE-RSA-AES128-GCM-SHA256", false);
        assert_eq!(default.len(), 5);
        assert!(pick(&all, "NOSUCH", true).is_empty());
        assert!(provider("NOSUCH", "").is_err());
        assert_eq!(pick(&all, "", true).len(), 3);
    }

    #[test]
    fn a_server_needs_its_certificate_and_a_ca_to_check_clients() {
        let mut s = Settings::default();
        assert_eq!(
            server_config(&s).unwrap_err(),
            "No tls-cert-file configured!"
        );
        s.cert_file = "/nonexistent.crt".into();
        s.key_file = "/nonexistent.key".into();
        assert!(server_config(&s)
            .unwrap_err()
            .starts_with("Either tls-ca-cert-file or tls-ca-cert-dir"));
    }
}
