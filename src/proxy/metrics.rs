//! `--metrics-port`: the proxy's counters and latency histograms in the Prometheus text
//! exposition format (0.0.4) on `GET /metrics`.
//!
//! The values live where the hot path keeps them anyway (atomics in [`Proxy`], each node's
//! `NodeInfo`, [`super::stats`] histograms); a `prometheus-client` collector reads them
//! only when scraped, so serving metrics costs requests nothing. The HTTP side is the
//! little a scraper needs: one request per connection, its head read with a size and time
//! bound, any path but `/metrics` a 404.

use super::stats::{exposition_bounds, Histogram};
use super::Proxy;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Metric names start with this.
pub const PREFIX: &str = "respite_proxy";
/// A request head larger than this is refused (a scraper's is a few hundred bytes).
const MAX_HEAD: usize = 8 << 10;
/// A connection that has not sent its request head by then is closed.
const HEAD_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves `/metrics` on `l` until the runtime stops.
pub async fn serve(p: Arc<Proxy>, l: TcpListener) {
    let mut registry = Registry::with_prefix(PREFIX);
    registry.register_collector(Box::new(Fleet(p)));
    let registry = Arc::new(registry);
    loop {
        match l.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(answer(stream, registry.clone()));
            }
            Err(e) => {
                tracing::warn!("metrics accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// The text `/metrics` serves.
pub fn render(registry: &Registry) -> String {
    let mut text = String::new();
    // Writing to a String cannot fail; the collector's own encoding errors would leave
    // a truncated text, which a scraper rejects as a whole.
    if let Err(e) = prometheus_client::encoding::prometheus_text::encode(&mut text, registry) {
        tracing::warn!("metrics encoding failed: {e}");
    }
    text
}

async fn answer(mut s: TcpStream, registry: Arc<Registry>) {
    let head = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut s)).await {
        Ok(Some(head)) => head,
        _ => return,
    };
    let (status, ctype, body) = match route(&head) {
        Ok(()) => (
            "200 OK",
            prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
            render(&registry),
        ),
        Err(status) => (status, "text/plain; charset=utf-8", format!("{status}\n")),
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = s.write_all(reply.as_bytes()).await;
    let _ = s.shutdown().await;
}

/// The request head (through the blank line), or None if the peer closed or sent more
/// than [`MAX_HEAD`] without one.
async fn read_head(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    loop {
        let n = s.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        head.extend_from_slice(&buf[..n]);
        if head.windows(4).any(|w| w == b"\r\n\r\n") || head.windows(2).any(|w| w == b"\n\n") {
            return Some(head);
        }
        if head.len() > MAX_HEAD {
            return None;
        }
    }
}

/// `GET /metrics` (a query string allowed) → Ok; otherwise the HTTP status to answer.
fn route(head: &[u8]) -> Result<(), &'static str> {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let mut words = line.trim_ascii().split(|&b| b == b' ');
    let (method, target) = (words.next().unwrap_or_default(), words.next());
    if method != b"GET" {
        return Err("405 Method Not Allowed");
    }
    let path = target
        .unwrap_or_default()
        .split(|&b| b == b'?')
        .next()
        .unwrap_or_default();
    if path == b"/metrics" {
        Ok(())
    } else {
        Err("404 Not Found")
    }
}

/// Reads the whole proxy at scrape time.
struct Fleet(Arc<Proxy>);

impl fmt::Debug for Fleet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("respite proxy metrics")
    }
}

/// One metric without labels.
fn single<V>(
    e: &mut DescriptorEncoder,
    kind: MetricType,
    name: &str,
    help: &str,
    v: V,
) -> fmt::Result
where
    V: prometheus_client::encoding::EncodeGaugeValue
        + prometheus_client::encoding::EncodeCounterValue,
{
    let mut m = e.encode_descriptor(name, help, None, kind)?;
    match kind {
        MetricType::Counter => m.encode_counter::<NoLabelSet, V, u64>(&v, None),
        _ => m.encode_gauge(&v),
    }
}

/// One value per node, labelled `node="<id>"`.
fn per_node(
    e: &mut DescriptorEncoder,
    p: &Proxy,
    kind: MetricType,
    name: &str,
    help: &str,
    value: impl Fn(&super::node::Node) -> u64,
) -> fmt::Result {
    let mut m = e.encode_descriptor(name, help, None, kind)?;
    let fleet = p.fleet();
    for n in fleet.members.iter().map(|&i| &*fleet.nodes[i]) {
        let labels = [("node", n.id())];
        let mut f = m.encode_family(&labels)?;
        match kind {
            MetricType::Counter => f.encode_counter::<NoLabelSet, u64, u64>(&value(n), None)?,
            _ => f.encode_gauge(&value(n))?,
        }
    }
    Ok(())
}

/// A [`Histogram`] as a Prometheus histogram in seconds.
fn histogram(m: &mut prometheus_client::encoding::MetricEncoder, h: &Histogram) -> fmt::Result {
    let (buckets, count) = h.exposition(&exposition_bounds());
    let buckets: Vec<(f64, u64)> = buckets
        .into_iter()
        .map(|(le, n)| (le as f64 / 1e6, n))
        .collect();
    m.encode_histogram::<NoLabelSet>(h.sum_us() as f64 / 1e6, count, &buckets, None)
}

impl Collector for Fleet {
    fn encode(&self, mut e: DescriptorEncoder) -> fmt::Result {
        use MetricType::{Counter, Gauge};
        let p = &*self.0;
        let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        single(
            &mut e,
            Counter,
            "commands_processed",
            "Commands received from clients",
            load(&p.commands),
        )?;
        single(
            &mut e,
            Counter,
            "connections_received",
            "Client connections accepted",
            load(&p.total_connections),
        )?;
        single(
            &mut e,
            Counter,
            "rejected_connections",
            "Client connections refused by maxclients",
            load(&p.rejected_connections),
        )?;
        single(
            &mut e,
            Gauge,
            "connected_clients",
            "Client connections open",
            load(&p.connected),
        )?;
        {
            let mut m = e.encode_descriptor(
                "command_latency",
                "Per command: from its arrival to its reply being ready",
                Some(&Unit::Seconds),
                MetricType::Histogram,
            )?;
            for (name, h) in p.command_latency.used() {
                let labels = [("cmd", name)];
                histogram(&mut m.encode_family(&labels)?, h)?;
            }
        }
        per_node(
            &mut e,
            p,
            Counter,
            "node_requests",
            "Commands sent to the node",
            |n| load(&n.info.requests),
        )?;
        per_node(
            &mut e,
            p,
            Counter,
            "node_error_replies",
            "Error replies from the node (shared connections)",
            |n| load(&n.info.error_replies),
        )?;
        per_node(
            &mut e,
            p,
            Counter,
            "node_transport_errors",
            "Requests failed by the proxy: node down, connection lost, timed out",
            |n| transport_errors(&n.info),
        )?;
        per_node(
            &mut e,
            p,
            Counter,
            "node_connection_failures",
            "Node connections that failed or broke",
            |n| load(&n.info.failures),
        )?;
        per_node(
            &mut e,
            p,
            Counter,
            "node_reconnects",
            "Shared node connections established again after a failure",
            |n| load(&n.info.reconnects),
        )?;
        per_node(
            &mut e,
            p,
            Gauge,
            "node_in_flight_requests",
            "Requests written to the node awaiting their replies",
            |n| load(&n.info.in_flight),
        )?;
        per_node(
            &mut e,
            p,
            Gauge,
            "node_dedicated_connections",
            "Dedicated connections held by clients (blocking, transactions)",
            |n| n.dedicated_in_use() as u64,
        )?;
        per_node(
            &mut e,
            p,
            Gauge,
            "node_up",
            "1 while a shared connection to the node is up",
            |n| (n.shared_up().0 > 0) as u64,
        )?;
        let mut m = e.encode_descriptor(
            "node_latency",
            "Per node: round trip of a request on a shared connection",
            Some(&Unit::Seconds),
            MetricType::Histogram,
        )?;
        let fleet = p.fleet();
        for n in fleet.members.iter().map(|&i| &*fleet.nodes[i]) {
            let labels = [("node", n.id())];
            histogram(&mut m.encode_family(&labels)?, &n.info.latency)?;
        }
        Ok(())
    }
}

/// Requests the proxy failed for a node (its `errors` less the node's error replies).
pub fn transport_errors(info: &super::link::NodeInfo) -> u64 {
    let errors = info.errors.load(Ordering::Relaxed);
    errors.saturating_sub(info.error_replies.load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_get_metrics_is_served() {
        assert_eq!(route(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), Ok(()));
        assert_eq!(route(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n"), Ok(()));
        assert_eq!(route(b"GET / HTTP/1.1\r\n\r\n"), Err("404 Not Found"));
        assert_eq!(route(b"GET\r\n\r\n"), Err("404 Not Found"));
        assert_eq!(
            route(b"POST /metrics HTTP/1.1\r\n\r\n"),
            Err("405 Method Not Allowed")
        );
        assert_eq!(route(b""), Err("405 Method Not Allowed"));
        assert_eq!(route(b"\xff\xfe"), Err("405 Method Not Allowed"));
    }
}
