//! `<config>.rebalance`: the phase and both node lists of a move in progress, so that a
//! restarted proxy resumes it ([`super::boot`]).

use super::Phase;
use crate::proxy::config::{NodeSpec, ProxyConfig};
use crate::proxy::fleet::Members;
use std::path::{Path, PathBuf};

/// Where a move's phase is kept so a restarted proxy resumes it: next to the config file.
pub(super) fn state_path(cfg: &ProxyConfig) -> Option<PathBuf> {
    let p = cfg.config_path.as_ref()?;
    let mut s = p.as_os_str().to_owned();
    s.push(".rebalance");
    Some(PathBuf::from(s))
}

/// Written whole (temporary file, then rename), readable by the owner only: the URLs hold
/// the nodes' passwords, as the config file does.
pub(super) fn save_state(
    path: &Path,
    phase: Phase,
    old: &Members,
    new: &Members,
) -> std::io::Result<()> {
    let mut text = String::from("# respite proxy: an online rebalance in progress; do not edit\n");
    text.push_str(match phase {
        Phase::Catalog => "phase catalog\n",
        Phase::Moving => "phase moving\n",
    });
    for (what, m) in [("old", old), ("new", new)] {
        for s in &m.specs {
            text.push_str(&format!("{what} {} {}\n", s.id, quote(&s.full_url())));
        }
    }
    let tmp = path.with_extension("rebalance.tmp");
    {
        use std::io::Write;
        let mut o = std::fs::OpenOptions::new();
        o.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
        let mut f = o.open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

/// A double-quoted word as the config file reads it (a password may hold spaces).
fn quote(s: &str) -> String {
    let mut q = String::from("\"");
    for c in s.chars() {
        match c {
            '\\' => q.push_str("\\\\"),
            '"' => q.push_str("\\\""),
            '\n' => q.push_str("\\n"),
            '\r' => q.push_str("\\r"),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

/// A saved move: (phase, old nodes, new nodes).
pub type Saved = (Phase, Vec<NodeSpec>, Vec<NodeSpec>);

pub fn load_state(cfg: &ProxyConfig) -> Result<Option<Saved>, String> {
    let Some(path) = state_path(cfg) else {
        return Ok(None);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let bad = |n: usize| format!("{}: line {n} is not understood", path.display());
    let (mut phase, mut old, mut new) = (None, Vec::new(), Vec::new());
    for (i, line) in text.lines().enumerate() {
        let words =
            crate::protocol::parse::split_args(line.as_bytes()).ok_or_else(|| bad(i + 1))?;
        let words: Vec<String> = words
            .iter()
            .map(|w| String::from_utf8(w.to_vec()))
            .collect::<Result<_, _>>()
            .map_err(|_| bad(i + 1))?;
        let w: Vec<&str> = words.iter().map(String::as_str).collect();
        match w[..] {
            [] => {}
            [c, ..] if c.starts_with('#') => {}
            ["phase", "catalog"] => phase = Some(Phase::Catalog),
            ["phase", "moving"] => phase = Some(Phase::Moving),
            [which @ ("old" | "new"), id, url] => {
                let mut s = NodeSpec::parse_url(url).map_err(|_| bad(i + 1))?;
                s.id = id.to_string();
                if which == "old" {
                    old.push(s)
                } else {
                    new.push(s)
                }
            }
            _ => return Err(bad(i + 1)),
        }
    }
    match phase {
        Some(p) if !old.is_empty() && !new.is_empty() => Ok(Some((p, old, new))),
        _ => Err(bad(0)),
    }
}
