//! Redis 7 error texts, byte for byte, kept in one place.

use crate::protocol::Reply;

pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const SYNTAX: &str = "ERR syntax error";
pub const NOT_INT: &str = "ERR value is not an integer or out of range";
pub const NOT_FLOAT: &str = "ERR value is not a valid float";
pub const OVERFLOW: &str = "ERR increment or decrement would overflow";
pub const NO_SUCH_KEY: &str = "ERR no such key";
pub const DB_INDEX: &str = "ERR DB index is out of range";
pub const NOAUTH: &str = "NOAUTH Authentication required.";
pub const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
pub const EXECABORT: &str = "EXECABORT Transaction discarded because of previous errors.";
pub const INVALID_EXPIRE: &str = "ERR invalid expire time in '{}' command";
pub const STRING_TOO_LONG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";

pub fn err(s: &'static str) -> Reply {
    Reply::error(s)
}

pub fn wrongtype() -> Reply {
    Reply::error(WRONGTYPE)
}

pub fn syntax() -> Reply {
    Reply::error(SYNTAX)
}

pub fn not_int() -> Reply {
    Reply::error(NOT_INT)
}

pub fn wrong_args(name: &str) -> Reply {
    Reply::error(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

pub fn invalid_expire(cmd: &str) -> Reply {
    Reply::error(INVALID_EXPIRE.replace("{}", cmd))
}

/// `unknown command 'x', with args beginning with: 'a' 'b' ` (Redis truncates both parts).
pub fn unknown_command(args: &[bytes::Bytes]) -> Reply {
    let name = String::from_utf8_lossy(&args[0][..args[0].len().min(128)]).into_owned();
    let mut rest = String::new();
    for a in &args[1..] {
        if rest.len() >= 128 {
            break;
        }
        let room = 128 - rest.len();
        let s = String::from_utf8_lossy(&a[..a.len().min(room)]).into_owned();
        rest.push_str(&format!("'{s}' "));
    }
    Reply::error(format!(
        "ERR unknown command '{name}', with args beginning with: {rest}"
    ))
}

pub fn unknown_subcommand(container: &str, sub: &[u8]) -> Reply {
    let sub = String::from_utf8_lossy(&sub[..sub.len().min(128)]).into_owned();
    Reply::error(format!(
        "ERR unknown subcommand '{sub}'. Try {} HELP.",
        container.to_ascii_uppercase()
    ))
}

/// `addReplySubcommandSyntaxError`: a known subcommand called with arguments it cannot take.
pub fn subcommand_syntax(container: &str, sub: &[u8]) -> Reply {
    let sub = String::from_utf8_lossy(&sub[..sub.len().min(128)]).into_owned();
    Reply::error(format!(
        "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try {} HELP.",
        container.to_ascii_uppercase()
    ))
}

pub const CLIENT_NAME: &str =
    "ERR Client names cannot contain spaces, newlines or special characters.";
pub const NO_CONFIG_FILE: &str = "ERR The server is running without a config file";
pub const TIMEOUT_OUT_OF_RANGE: &str = "ERR timeout is out of range";
pub const DEBUG_NOT_ALLOWED: &str = "ERR DEBUG command not allowed. If the enable-debug-command \
    option is set to \"local\", you can run it from a local connection, otherwise you need to set \
    this option in the configuration file, and then restart the server.";
