//! Command metadata the table does not carry: COMMAND INFO tips and key specs, COMMAND DOCS
//! doc flags, history and argument trees. Generated from a reference redis-server by
//! `scripts/gen_command_meta.py` into `meta.txt` (format documented there), parsed once.

use crate::protocol::Reply;
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::OnceLock;

/// A value in the metadata notation (kept typed so replies keep Redis's types).
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Bulk(String),
    Status(String),
    Int(i64),
    Array(Vec<Node>),
    Set(Vec<Node>),
    Map(Vec<(Node, Node)>),
    Nil,
}

impl Node {
    pub fn to_reply(&self) -> Reply {
        match self {
            Node::Bulk(s) => Reply::Bulk(Bytes::copy_from_slice(s.as_bytes())),
            Node::Status(s) => Reply::Status(s.clone().into()),
            Node::Int(i) => Reply::Int(*i),
            Node::Array(v) => Reply::Array(v.iter().map(Node::to_reply).collect()),
            Node::Set(v) => Reply::Set(v.iter().map(Node::to_reply).collect()),
            Node::Map(v) => Reply::Map(
                v.iter()
                    .map(|(k, x)| (k.to_reply(), x.to_reply()))
                    .collect(),
            ),
            Node::Nil => Reply::Nil,
        }
    }

    /// Map lookup by a bulk-string key.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(v) => v
                .iter()
                .find(|(k, _)| matches!(k, Node::Bulk(s) if s == key))
                .map(|(_, x)| x),
            _ => None,
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Node::Int(i) => Some(*i),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Node::Bulk(s) | Node::Status(s) => Some(s),
            _ => None,
        }
    }

    pub fn items(&self) -> &[Node] {
        match self {
            Node::Array(v) | Node::Set(v) => v,
            _ => &[],
        }
    }
}

pub struct Meta {
    pub tips: Node,
    pub key_specs: Node,
    /// COMMAND DOCS entries beyond summary/since/group/complexity, in Redis's order.
    pub docs: Vec<(Node, Node)>,
}

static TEXT: &str = include_str!("meta.txt");
/// Commands the 7.0 oracle does not have (Redis 7.4 / 8.0), written from Redis's own
/// `src/commands/*.json`.
static TEXT_NEWER: &str = include_str!("meta_newer.txt");

/// Metadata by full command name (`get`, `config|get`); commands Redis does not have are
/// absent.
pub fn meta(name: &str) -> Option<&'static Meta> {
    static MAP: OnceLock<HashMap<&'static str, Meta>> = OnceLock::new();
    MAP.get_or_init(|| {
        TEXT.lines()
            .chain(TEXT_NEWER.lines())
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .filter_map(parse_line)
            .collect()
    })
    .get(name)
}

fn parse_line(line: &'static str) -> Option<(&'static str, Meta)> {
    let mut f = line.split('\t');
    let name = f.next()?;
    let tips = parse(f.next()?)?;
    let key_specs = parse(f.next()?)?;
    let docs = match parse(f.next()?)? {
        Node::Map(v) => v,
        _ => return None,
    };
    Some((
        name,
        Meta {
            tips,
            key_specs,
            docs,
        },
    ))
}

/// Parses one complete value.
pub fn parse(s: &str) -> Option<Node> {
    let mut p = Parser {
        b: s.as_bytes(),
        i: 0,
    };
    let n = p.value()?;
    p.skip_ws();
    (p.i == p.b.len()).then_some(n)
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while self.b.get(self.i) == Some(&b' ') {
            self.i += 1;
        }
    }

    fn value(&mut self) -> Option<Node> {
        self.skip_ws();
        let c = *self.b.get(self.i)?;
        self.i += 1;
        match c {
            b'"' => self.string().map(Node::Bulk),
            b'+' => Some(Node::Status(self.word())),
            b':' => self.word().parse().ok().map(Node::Int),
            b'_' => Some(Node::Nil),
            b'[' => self.list(b']').map(Node::Array),
            b'<' => self.list(b'>').map(Node::Set),
            b'{' => {
                let items = self.list(b'}')?;
                if items.len() % 2 != 0 {
                    return None;
                }
                let mut it = items.into_iter();
                let mut pairs = Vec::new();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    pairs.push((k, v));
                }
                Some(Node::Map(pairs))
            }
            _ => None,
        }
    }

    fn word(&mut self) -> String {
        let start = self.i;
        while self.b.get(self.i).is_some_and(|c| !b" ]>}".contains(c)) {
            self.i += 1;
        }
        String::from_utf8_lossy(&self.b[start..self.i]).into_owned()
    }

    fn string(&mut self) -> Option<String> {
        let mut out = Vec::new();
        loop {
            let c = *self.b.get(self.i)?;
            self.i += 1;
            match c {
                b'"' => return String::from_utf8(out).ok(),
                b'\\' => {
                    let e = *self.b.get(self.i)?;
                    self.i += 1;
                    out.push(match e {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        other => other,
                    });
                }
                _ => out.push(c),
            }
        }
    }

    fn list(&mut self, end: u8) -> Option<Vec<Node>> {
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            if *self.b.get(self.i)? == end {
                self.i += 1;
                return Some(items);
            }
            items.push(self.value()?);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_notation() {
        let n = parse(r#"{"a" [:1 +RO "x\"y\\z"] "b" <> "c" _}"#).unwrap();
        assert_eq!(
            n.get("a"),
            Some(&Node::Array(vec![
                Node::Int(1),
                Node::Status("RO".into()),
                Node::Bulk("x\"y\\z".into())
            ]))
        );
        assert_eq!(n.get("b"), Some(&Node::Set(vec![])));
        assert_eq!(n.get("c"), Some(&Node::Nil));
        assert!(parse("[:1").is_none());
        assert!(parse("{\"a\"}").is_none());
    }

    #[test]
    fn generated_file_parses_completely() {
        let lines = TEXT
            .lines()
            .chain(TEXT_NEWER.lines())
            .filter(|l| !l.is_empty() && !l.starts_with('#'));
        for l in lines {
            assert!(parse_line(l).is_some(), "bad line: {l}");
        }
        let get = meta("get").expect("get");
        assert_eq!(get.key_specs.items().len(), 1);
        assert!(meta("config|get").is_some());
        assert!(meta("client|setinfo").is_some());
        for newer in ["hexpire", "httl", "hpersist", "hgetex", "hsetex", "hgetdel"] {
            assert!(meta(newer).is_some(), "{newer}");
        }
    }
}
