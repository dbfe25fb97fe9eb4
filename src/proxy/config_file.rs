//! `respite proxy --config FILE`: one directive per line, `#` comments, words split like
//! redis.conf (quotes allowed, e.g. for a password with spaces):
//!
//! ```text
//! port 7000
//! bind 127.0.0.1 ::1          # repeatable; the first bind line replaces the default
//! requirepass "client password"
//! node node-a redis://:pw@10.0.0.1:6379
//! node node-b redis://10.0.0.2:6379/0
//! conns-per-node 2            # optional tunables, as the flags of the same name
//! max-dedicated-per-node 64
//! connect-timeout-ms 2000
//! command-timeout-ms 5000
//! dedicated-wait-ms 5000      # how long blocking/transaction clients queue for one
//! timeout 0                   # as in redis.conf: idle seconds (0 = never)
//! maxclients 10000
//! client-query-buffer-limit 1gb
//! proto-max-bulk-len 512mb
//! metrics-port 9121           # Prometheus text on GET /metrics (HTTP; off by default)
//! announce-ip 10.0.0.9        # the address CLUSTER SLOTS/NODES give cluster clients
//! announce-port 7000
//! move-chunk-bytes 8mb        # online rebalance: bigger values are copied in chunks
//! tls-port 7001               # TLS clients too, with Redis's tls-* directives:
//! tls-cert-file proxy.crt     #   tls-key-file, tls-ca-cert-file, tls-ca-cert-dir,
//! tls-key-file proxy.key      #   tls-auth-clients, tls-protocols, tls-ciphersuites,
//! tls-ca-cert-file ca.crt     #   tls-ciphers; the CA also checks rediss:// nodes, to which
//! node node-c rediss://10.0.0.3:6380   # tls-client-cert-file/-key-file are presented
//! ```
//!
//! Errors name the line and the directive but never echo a value: it may be a password.

use super::config::{NodeSpec, ProxyConfig};
use std::time::Duration;

/// Applies the file's directives to `cfg` (flags are applied afterwards by the caller).
pub fn parse(text: &str, cfg: &mut ProxyConfig) -> Result<(), String> {
    let mut bind_seen = false;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words = crate::protocol::parse::split_args(line.as_bytes())
            .ok_or_else(|| format!("line {n}: unbalanced quotes"))?;
        let mut words = words
            .into_iter()
            .map(|w| String::from_utf8(w.to_vec()))
            .collect::<Result<Vec<String>, _>>()
            .map_err(|_| format!("line {n}: not UTF-8"))?;
        // A trailing comment.
        if let Some(c) = words.iter().position(|w| w.starts_with('#')) {
            words.truncate(c);
        }
        let Some(name) = words.first().map(|w| w.to_ascii_lowercase()) else {
            continue;
        };
        let args = &words[1..];
        let one = |what: &str| -> Result<&str, String> {
            match args {
                [v] => Ok(v.as_str()),
                _ => Err(format!("line {n}: {name} expects one {what}")),
            }
        };
        let number = |what: &str| -> Result<u64, String> {
            one(what)?
                .parse::<u64>()
                .map_err(|_| format!("line {n}: {name} expects a number"))
        };
        match name.as_str() {
            "port" => {
                cfg.port = u16::try_from(number("port")?)
                    .map_err(|_| format!("line {n}: port out of range"))?
            }
            "bind" => {
                if args.is_empty() {
                    return Err(format!("line {n}: bind expects addresses"));
                }
                if !bind_seen {
                    cfg.bind.clear();
                    bind_seen = true;
                }
                cfg.bind.extend(args.iter().cloned());
            }
            "requirepass" => {
                let pw = one("password")?;
                cfg.requirepass = (!pw.is_empty()).then(|| pw.to_string());
            }
            "aclfile" => cfg.aclfile = Some(one("path")?.to_string()),
            "announce-ip" => cfg.announce_ip = Some(one("address")?.to_string()),
            "announce-port" => {
                cfg.announce_port = Some(
                    u16::try_from(number("port")?)
                        .map_err(|_| format!("line {n}: announce-port out of range"))?,
                )
            }
            "node" => {
                let [id, url] = args else {
                    return Err(format!("line {n}: node expects an id and a URL"));
                };
                if id.is_empty()
                    || !id
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                {
                    // Not echoed: a URL given without an id would land here.
                    return Err(format!("line {n}: node ids must be [A-Za-z0-9_-]+"));
                }
                let mut spec = NodeSpec::parse_urls(url).map_err(|e| format!("line {n}: {e}"))?;
                spec.set_id(id);
                cfg.nodes.push(spec);
            }
            "move-chunk-bytes" => {
                let size = crate::config::parse_memory(one("size")?)
                    .ok_or_else(|| format!("line {n}: {name} expects a size such as 8mb"))?;
                cfg.move_chunk_bytes = (size as usize).max(1);
            }
            "conns-per-node" => cfg.conns_per_node = (number("count")? as usize).max(1),
            "threads" => cfg.threads = number("count")? as usize,
            "max-dedicated-per-node" => {
                cfg.max_dedicated_per_node = (number("count")? as usize).max(1)
            }
            "connect-timeout-ms" => cfg.connect_timeout = Duration::from_millis(number("ms")?),
            "command-timeout-ms" => cfg.command_timeout = Duration::from_millis(number("ms")?),
            "dedicated-wait-ms" => cfg.dedicated_wait = Duration::from_millis(number("ms")?),
            "timeout" => cfg.timeout = Duration::from_secs(number("seconds")?),
            "maxclients" => cfg.maxclients = number("count")? as usize,
            "client-query-buffer-limit" | "proto-max-bulk-len" => {
                let size = crate::config::parse_memory(one("size")?)
                    .ok_or_else(|| format!("line {n}: {name} expects a size such as 512mb"))?;
                if name == "proto-max-bulk-len" {
                    cfg.proto_max_bulk_len = size as usize;
                } else {
                    cfg.client_query_buffer_limit = size as usize;
                }
            }
            "tls-port" => {
                cfg.tls_port = u16::try_from(number("port")?)
                    .map_err(|_| format!("line {n}: tls-port out of range"))?
            }
            "metrics-port" => {
                cfg.metrics_port = Some(
                    u16::try_from(number("port")?)
                        .map_err(|_| format!("line {n}: metrics-port out of range"))?,
                )
            }
            "tls-cert-file" => cfg.tls.cert_file = one("path")?.to_string(),
            "tls-key-file" => cfg.tls.key_file = one("path")?.to_string(),
            "tls-ca-cert-file" => cfg.tls.ca_cert_file = one("path")?.to_string(),
            "tls-ca-cert-dir" => cfg.tls.ca_cert_dir = one("path")?.to_string(),
            "tls-client-cert-file" => cfg.tls_client_cert_file = one("path")?.to_string(),
            "tls-client-key-file" => cfg.tls_client_key_file = one("path")?.to_string(),
            "tls-auth-clients" => {
                cfg.tls.auth_clients = crate::tls::AuthClients::parse(one("yes|no|optional")?)
                    .ok_or_else(|| format!("line {n}: tls-auth-clients is yes, no or optional"))?
            }
            "tls-protocols" => cfg.tls.protocols = args.join(" "),
            "tls-ciphersuites" => cfg.tls.ciphersuites = one("list")?.to_string(),
            "tls-ciphers" => cfg.tls.ciphers = one("list")?.to_string(),
            // Not echoed either: a stray line could be a password.
            _ => return Err(format!("line {n}: unknown directive")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<ProxyConfig, String> {
        let mut cfg = ProxyConfig::default();
        parse(text, &mut cfg).map(|_| cfg)
    }

    #[test]
    fn tls_directives() {
        let cfg = parsed(
            "tls-port 7001\n\
             metrics-port 9121\n\
             tls-cert-file /c.crt\n\
             tls-key-file /c.key\n\
             tls-ca-cert-file \"/ca dir/ca.crt\"\n\
             tls-auth-clients optional\n\
             tls-protocols TLSv1.2 TLSv1.3\n\
             tls-ciphersuites TLS_AES_128_GCM_SHA256\n\
             tls-client-cert-file /p.crt\n\
             tls-client-key-file /p.key\n\
             node a rediss://h:6380\n",
        )
        .unwrap();
        assert_eq!(cfg.tls_port, 7001);
        assert_eq!(cfg.metrics_port, Some(9121));
        assert_eq!(cfg.tls.cert_file, "/c.crt");
        assert_eq!(cfg.tls.ca_cert_file, "/ca dir/ca.crt");
        assert_eq!(cfg.tls.auth_clients, crate::tls::AuthClients::Optional);
        assert_eq!(cfg.tls.protocols, "TLSv1.2 TLSv1.3");
        assert_eq!(cfg.tls_client_key_file, "/p.key");
        assert!(cfg.nodes[0].tls);
        assert_eq!(
            parsed("tls-auth-clients maybe\n").unwrap_err(),
            "line 1: tls-auth-clients is yes, no or optional"
        );
    }

    #[test]
    fn a_full_file() {
        let cfg = parsed(
            "# the fleet\n\
             port 7100\n\
             bind 0.0.0.0 ::1   # both\n\
             bind 10.1.1.1\n\
             requirepass \"pw with spaces\"\n\
             \n\
             node node-a redis://:s3cret@10.0.0.1:6379\n\
             NODE node-b redis://bob:pw2@[::1]:6380/2\n\
             conns-per-node 4\n\
             max-dedicated-per-node 8\n\
             connect-timeout-ms 250\n\
             command-timeout-ms 1500\n\
             dedicated-wait-ms 250\n\
             timeout 30\n\
             maxclients 50\n\
             client-query-buffer-limit 2mb\n\
             proto-max-bulk-len 1GB\n",
        )
        .unwrap();
        assert_eq!(cfg.port, 7100);
        assert_eq!(cfg.bind, ["0.0.0.0", "::1", "10.1.1.1"]);
        assert_eq!(cfg.requirepass.as_deref(), Some("pw with spaces"));
        assert_eq!(cfg.nodes.len(), 2);
        assert_eq!(cfg.nodes[0].id, "node-a");
        assert_eq!(cfg.nodes[0].password.as_deref(), Some("s3cret"));
        assert_eq!(
            (
                cfg.nodes[1].host.as_str(),
                cfg.nodes[1].port,
                cfg.nodes[1].db
            ),
            ("::1", 6380, 2)
        );
        assert_eq!(cfg.conns_per_node, 4);
        assert_eq!(cfg.max_dedicated_per_node, 8);
        assert_eq!(cfg.connect_timeout, Duration::from_millis(250));
        assert_eq!(cfg.command_timeout, Duration::from_millis(1500));
        assert_eq!(cfg.dedicated_wait, Duration::from_millis(250));
        assert_eq!(cfg.timeout, Duration::from_secs(30));
        assert_eq!(cfg.maxclients, 50);
        assert_eq!(cfg.client_query_buffer_limit, 2 << 20);
        assert_eq!(cfg.proto_max_bulk_len, 1 << 30);
        cfg.validate().unwrap();
    }

    #[test]
    fn defaults_stay_when_not_set() {
        let cfg = parsed("node a redis://h:1\n").unwrap();
        assert_eq!(cfg.port, ProxyConfig::default().port);
        assert_eq!(cfg.bind, ProxyConfig::default().bind);
        assert_eq!(cfg.requirepass, None);
        assert_eq!(parsed("requirepass \"\"\n").unwrap().requirepass, None);
    }

    /// A node with a replica: the URLs after its id, comma-separated.
    #[test]
    fn a_node_with_replicas() {
        let cfg = parsed("node a redis://:pw@h:1,redis://:pw@r:2\n").unwrap();
        let n = &cfg.nodes[0];
        assert_eq!((n.id.as_str(), n.port, n.alternates.len()), ("a", 1, 1));
        assert_eq!(
            (n.alternates[0].id.as_str(), n.alternates[0].port),
            ("a", 2)
        );
    }

    #[test]
    fn errors_name_the_line_and_never_a_password() {
        for (text, want) in [
            ("port x\n", "line 1: port expects a number"),
            ("\nport 70000\n", "line 2: port out of range"),
            ("bind\n", "line 1: bind expects addresses"),
            (
                "requirepass a s3cret\n",
                "line 1: requirepass expects one password",
            ),
            ("requirepass \"s3cret\n", "line 1: unbalanced quotes"),
            (
                "node redis://:s3cret@h:1\n",
                "line 1: node expects an id and a URL",
            ),
            (
                "node redis://:s3cret@h:1 x\n",
                "line 1: node ids must be [A-Za-z0-9_-]+",
            ),
            (
                "node a http://:s3cret@h:1\n",
                "line 1: node URLs start with redis:// or rediss://",
            ),
            (
                "node a redis://:s3cret@h:port\n",
                "line 1: the port in a node URL must be a number",
            ),
            ("s3cret\n", "line 1: unknown directive"),
            (
                "conns-per-node -1\n",
                "line 1: conns-per-node expects a number",
            ),
        ] {
            let e = parsed(text).unwrap_err();
            assert_eq!(e, want, "{text}");
        }
        for text in [
            "node a redis://:s3cret@h:1 extra\n",
            "requirepass\n",
            "node a redis://u:s3cret@:1\n",
        ] {
            let e = parsed(text).unwrap_err();
            assert!(!e.contains("s3cret"), "{e}");
        }
    }
}
