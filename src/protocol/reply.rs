//! Protocol-neutral replies: handlers build these, the writer encodes them per connection
//! protocol (RESP2 or RESP3), so RESP2/3 differences live only in encoding.

use bytes::Bytes;
use std::borrow::Cow;

#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+OK` style status.
    Status(Cow<'static, str>),
    /// Full error line without the leading `-`, e.g. `ERR syntax error`.
    Error(Cow<'static, str>),
    Int(i64),
    Bulk(Bytes),
    /// Null bulk in RESP2 (`$-1`), `_` in RESP3.
    Nil,
    /// Null array in RESP2 (`*-1`), `_` in RESP3.
    NilArray,
    Array(Vec<Reply>),
    /// Flat array in RESP2, `%` map in RESP3.
    Map(Vec<(Reply, Reply)>),
    /// Array in RESP2, `~` set in RESP3.
    Set(Vec<Reply>),
    /// Bulk string in RESP2 (Redis's `%.17g`-style text), `,` double in RESP3.
    Double(f64),
    /// Integer 1/0 in RESP2, `#t`/`#f` in RESP3.
    Bool(bool),
    /// Bulk string in RESP2, `=` verbatim string (`txt`) in RESP3.
    Verbatim(Bytes),
    /// Array in RESP2, `>` push in RESP3.
    Push(Vec<Reply>),
    /// Already-encoded bytes, written as they are (used for queued/forwarded replies).
    Raw(Bytes),
    /// Nothing is written (e.g. `CLIENT REPLY OFF`, `QUIT` handled elsewhere).
    NoReply,
}

impl Reply {
    pub const OK: Reply = Reply::Status(Cow::Borrowed("OK"));
    pub const QUEUED: Reply = Reply::Status(Cow::Borrowed("QUEUED"));

    pub fn ok() -> Reply {
        Reply::OK
    }
    pub fn status(s: &'static str) -> Reply {
        Reply::Status(Cow::Borrowed(s))
    }
    pub fn error(s: impl Into<Cow<'static, str>>) -> Reply {
        Reply::Error(s.into())
    }
    pub fn bulk(b: impl Into<Bytes>) -> Reply {
        Reply::Bulk(b.into())
    }
    pub fn bulk_str(s: &str) -> Reply {
        Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()))
    }
    pub fn bulk_static(s: &'static str) -> Reply {
        Reply::Bulk(Bytes::from_static(s.as_bytes()))
    }
    pub fn opt_bulk(b: Option<Bytes>) -> Reply {
        b.map_or(Reply::Nil, Reply::Bulk)
    }
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }
    pub fn strings<I: IntoIterator<Item = Bytes>>(it: I) -> Reply {
        Reply::Array(it.into_iter().map(Reply::Bulk).collect())
    }
}

impl From<i64> for Reply {
    fn from(v: i64) -> Self {
        Reply::Int(v)
    }
}
