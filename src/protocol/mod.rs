//! RESP wire format: the request parser (RESP multibulk + inline), the protocol-neutral
//! [`Reply`] and its RESP2/RESP3 writer. Imports nothing from the rest of the crate.

pub mod parse;
pub mod reply;
pub mod write;

pub use parse::{parse_command, Limits, Next, ParseError, Parsed, Parser};
pub use reply::Reply;
pub use write::{put_bulk, write_reply};
