//! Redis 7 error texts, byte for byte, kept in one place: below `script` and `cmd`, which
//! both answer with them.

use crate::protocol::Reply;

pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const SYNTAX: &str = "ERR syntax error";
/// SCAN, SSCAN and ZSCAN given HSCAN's NOVALUES (Redis 7.4).
pub const NOVALUES_HSCAN_ONLY: &str = "ERR NOVALUES option can only be used in HSCAN";
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
pub const HLL_WRONGTYPE: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
pub const HLL_CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";

/// Hash-field expiration (Redis 7.4 / 8.0 `t_hash.c`).
pub const HFE_FIELDS_MISSING: &str =
    "ERR Mandatory argument FIELDS is missing or not at the right position";
pub const HFE_NUMFIELDS_POSITIVE: &str = "ERR Number of fields must be a positive integer";
pub const HFE_NUMFIELDS_GT0: &str = "ERR Parameter `numFields` should be greater than 0";
pub const HFE_NUMFIELDS_MISMATCH: &str =
    "ERR The `numfields` parameter must match the number of arguments";
pub const HFE_NEGATIVE_EXPIRE: &str = "ERR invalid expire time, must be >= 0";
pub const HSETEX_NUMFIELDS: &str = "ERR invalid number of fields";
pub const HSETEX_MISSING_EXPIRE: &str = "ERR missing expire time";
pub const HSETEX_ONE_CONDITION: &str = "ERR Only one of FXX or FNX arguments can be specified";
pub const HSETEX_ONE_EXPIRATION: &str =
    "ERR Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments can be specified";

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
    // Redis formats with %.*s: a NUL byte ends each part.
    let cstr = |b: &[u8]| -> usize { b.iter().position(|&c| c == 0).unwrap_or(b.len()) };
    let name = &args[0][..cstr(&args[0]).min(128)];
    let name = String::from_utf8_lossy(name).into_owned();
    let mut rest = String::new();
    for a in &args[1..] {
        if rest.len() >= 128 {
            break;
        }
        let room = 128 - rest.len();
        let s = String::from_utf8_lossy(&a[..cstr(a).min(room)]).into_owned();
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

pub const EXPIRE_NX_COMBO: &str =
    "ERR NX and XX, GT or LT options at the same time are not compatible";
pub const EXPIRE_GT_LT: &str = "ERR GT and LT options at the same time are not compatible";
pub const INVALID_CURSOR: &str = "ERR invalid cursor";
pub const SAME_OBJECT: &str = "ERR source and destination objects are the same";
pub const INVALID_FIRST_DB: &str = "ERR invalid first DB index";
pub const INVALID_SECOND_DB: &str = "ERR invalid second DB index";
/// `getIntFromObjectOrReply` on a 64-bit integer outside C `int`.
pub const INT_RANGE: &str =
    "ERR value is out of range, value must between -2147483648 and 2147483647";
pub const LFU_NOT_SELECTED: &str = "ERR An LFU maxmemory policy is not selected, access \
     frequency not tracked. Please note that when switching between policies at runtime LRU \
     and LFU data will take some time to adjust.";
pub const LFU_SELECTED: &str = "ERR An LFU maxmemory policy is selected, idle time not \
     tracked. Please note that when switching between policies at runtime LRU and LFU data \
     will take some time to adjust.";

/// `Unsupported option <opt>` (EXPIRE family).
pub fn unsupported_option(opt: &[u8]) -> Reply {
    Reply::error(format!(
        "ERR Unsupported option {}",
        String::from_utf8_lossy(opt)
    ))
}

// String family (t_string.c).
pub const OFFSET_RANGE: &str = "ERR offset is out of range";
pub const DECR_OVERFLOW: &str = "ERR decrement would overflow";
pub const NAN_OR_INF: &str = "ERR increment would produce NaN or Infinity";
pub const LCS_NOT_STRING: &str = "ERR The specified keys must contain string values";
pub const LCS_LEN_AND_IDX: &str =
    "ERR If you want both the length and indexes, please just use IDX.";
pub const LCS_TOO_LONG: &str = "ERR String too long for LCS";
pub const LCS_MEM_LIMIT: &str =
    "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len";
pub const LCS_ALLOC: &str = "ERR Insufficient memory, failed allocating transient memory for LCS";
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

// List family (t_list.c).
pub const INDEX_OUT_OF_RANGE: &str = "ERR index out of range";
/// `getPositiveLongFromObjectOrReply` without a message of its own.
pub const MUST_BE_POSITIVE: &str = "ERR value is out of range, must be positive";
pub const LPOS_RANK_ZERO: &str = "ERR RANK can't be zero: use 1 to start from the first match, \
     2 from the second ... or use negative to start from the end of the list";
pub const LPOS_COUNT_NEGATIVE: &str = "ERR COUNT can't be negative";
pub const LPOS_MAXLEN_NEGATIVE: &str = "ERR MAXLEN can't be negative";
pub const NUMKEYS_POSITIVE: &str = "ERR numkeys should be greater than 0";
pub const COUNT_POSITIVE: &str = "ERR count should be greater than 0";
pub const TIMEOUT_NOT_FLOAT: &str = "ERR timeout is not a float or out of range";
pub const TIMEOUT_NEGATIVE: &str = "ERR timeout is negative";

// Hash family (t_hash.c).
pub const HASH_NOT_INT: &str = "ERR hash value is not an integer";
pub const HASH_NOT_FLOAT: &str = "ERR hash value is not a float";
pub const NAN_OR_INF_VALUE: &str = "ERR value is NaN or Infinity";
pub const OUT_OF_RANGE: &str = "ERR value is out of range";
/// `getRangeLongFromObjectOrReply(-LONG_MAX, LONG_MAX)` (HRANDFIELD's count).
pub const COUNT_RANGE: &str =
    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";

// Set family (t_set.c).
/// `getPositiveLongFromObjectOrReply` without a message (SPOP count).
pub const OUT_OF_RANGE_POSITIVE: &str = "ERR value is out of range, must be positive";
pub const NUMKEYS_TOO_MANY: &str = "ERR Number of keys can't be greater than number of args";
pub const LIMIT_NEGATIVE: &str = "ERR LIMIT can't be negative";
/// Ours: SRANDMEMBER with a negative count whose reply would not fit in memory (Redis
/// streams it until the server runs out of memory).
pub const RANDOM_COUNT_TOO_LARGE: &str = "ERR value is out of range, count is too large";

// Sorted sets (t_zset.c).
pub const ZADD_XX_NX: &str = "ERR XX and NX options at the same time are not compatible";
pub const ZADD_GT_LT_NX: &str = "ERR GT, LT, and/or NX options at the same time are not compatible";
pub const ZADD_INCR_PAIR: &str = "ERR INCR option supports a single increment-element pair";
pub const ZSET_NAN: &str = "ERR resulting score is not a number (NaN)";
pub const ZSET_MINMAX_NOT_FLOAT: &str = "ERR min or max is not a float";
pub const ZSET_LEX_RANGE: &str = "ERR min or max not valid string range item";
pub const ZRANGE_LIMIT: &str =
    "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX";
pub const ZRANGE_BYLEX_WITHSCORES: &str =
    "ERR syntax error, WITHSCORES not supported in combination with BYLEX";
pub const WEIGHT_NOT_FLOAT: &str = "ERR weight value is not a float";

/// `at least 1 input key is needed for '<cmd>' command` (ZUNION/ZINTER/ZDIFF families).
pub fn need_input_key(cmd: &str) -> Reply {
    Reply::error(format!(
        "ERR at least 1 input key is needed for '{cmd}' command"
    ))
}

// Scripting (EVAL family, SCRIPT).
pub const NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";
pub const NUMKEYS_NEGATIVE: &str = "ERR Number of keys can't be negative";
pub const NOTBUSY: &str = "NOTBUSY No scripts in execution right now.";
pub const UNKILLABLE: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";
pub const BUSY: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
pub const FUNCTION_NOT_FOUND: &str = "ERR Function not found";
pub const LIBRARY_NOT_FOUND: &str = "ERR Library not found";
pub const FCALL_BAD_NUMKEYS: &str = "ERR Bad number of keys provided";
pub const FUNCTION_LOAD_TIMEOUT: &str = "ERR FUNCTION LOAD timeout";
/// Redis uses this text for library and function names alike.
pub const FUNCTION_NAME_RULES: &str = "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";
pub const SCRIPT_KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";
pub const SCRIPT_ARG_TYPE: &str = "ERR Lua redis lib command arguments must be strings or integers";
pub const SCRIPT_NO_CLUSTER: &str = "ERR Can not run script on cluster, 'no-cluster' flag is set.";
pub const SCRIPT_WRITE_FLAG_RO: &str =
    "ERR Can not execute a script with write flag using *_ro command.";

// Streams (t_stream.c).
pub const INVALID_STREAM_ID: &str = "ERR Invalid stream ID specified as stream command argument";
pub const XADD_ID_ZERO: &str = "ERR The ID specified in XADD must be greater than 0-0";
pub const XADD_ID_SMALL: &str =
    "ERR The ID specified in XADD is equal or smaller than the target stream top item";
pub const STREAM_EXHAUSTED: &str =
    "ERR The stream has exhausted the last possible ID, unable to add more items";
pub const STREAM_TOO_LARGE: &str = "ERR Elements are too large to be stored";
pub const MAXLEN_AND_MINID: &str =
    "ERR syntax error, MAXLEN and MINID options at the same time are not compatible";
pub const MAXLEN_NEGATIVE: &str = "ERR The MAXLEN argument must be >= 0.";
pub const TRIM_LIMIT_NEGATIVE: &str = "ERR The LIMIT argument must be >= 0.";
pub const LIMIT_WITHOUT_STRATEGY: &str =
    "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy";
pub const XTRIM_WITHOUT_STRATEGY: &str =
    "ERR syntax error, XTRIM must be called with a trimming strategy";
pub const LIMIT_WITHOUT_APPROX: &str =
    "ERR syntax error, LIMIT cannot be used without the special ~ option";
pub const INVALID_START_ID: &str = "ERR invalid start ID for the interval";
pub const INVALID_END_ID: &str = "ERR invalid end ID for the interval";
pub const XGROUP_NEEDS_KEY: &str = "ERR The XGROUP subcommand requires the key to exist. Note \
     that for CREATE you may want to use the MKSTREAM option to create an empty stream \
     automatically.";
pub const BUSYGROUP: &str = "BUSYGROUP Consumer Group name already exists";
pub const ENTRIESREAD_RANGE: &str = "ERR value for ENTRIESREAD must be positive or -1";
pub const ENTRIES_ADDED_POSITIVE: &str = "ERR entries_added must be positive";
pub const XSETID_BELOW_GIVEN_MAX_DELETED: &str =
    "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id";
pub const XSETID_BELOW_MAX_DELETED: &str =
    "ERR The ID specified in XSETID is smaller than current max_deleted_entry_id";
pub const XSETID_BELOW_TOP: &str =
    "ERR The ID specified in XSETID is smaller than the target stream top item";
pub const XSETID_ADDED_BELOW_LEN: &str =
    "ERR The entries_added specified in XSETID is smaller than the target stream length";
pub const XREAD_GROUP_OPTION: &str =
    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.";
pub const XREAD_NOACK_OPTION: &str =
    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.";
pub const XREADGROUP_MISSING_GROUP: &str = "ERR Missing GROUP option for XREADGROUP";
pub const XREADGROUP_DOLLAR: &str = "ERR The $ ID is meaningless in the context of XREADGROUP: \
     you want to read the history of this consumer by specifying a proper ID, or use the > ID \
     to get new messages. The $ ID would just return an empty result set.";
pub const XREAD_GT_ID: &str = "ERR The > ID can be specified only when calling XREADGROUP \
     using the GROUP <group> <consumer> option.";
pub const XCLAIM_MIN_IDLE: &str = "ERR Invalid min-idle-time argument for XCLAIM";
pub const XCLAIM_IDLE: &str = "ERR Invalid IDLE option argument for XCLAIM";
pub const XCLAIM_TIME: &str = "ERR Invalid TIME option argument for XCLAIM";
pub const XCLAIM_RETRYCOUNT: &str = "ERR Invalid RETRYCOUNT option argument for XCLAIM";
pub const XAUTOCLAIM_MIN_IDLE: &str = "ERR Invalid min-idle-time argument for XAUTOCLAIM";
pub const XAUTOCLAIM_COUNT: &str = "ERR COUNT must be > 0";
pub const TIMEOUT_NOT_INT: &str = "ERR timeout is not an integer or out of range";

/// CLIENT UNBLOCK … ERROR's reply to the unblocked client, and a bad reason.
pub const UNBLOCKED_BY_CLIENT: &str = "UNBLOCKED client unblocked via CLIENT UNBLOCK";
pub const CLIENT_UNBLOCK_REASON: &str = "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR";

/// XREAD/XREADGROUP with BLOCK inside a script (Redis 7.2), naming the command as called.
pub fn block_in_script(cmd: &[u8]) -> Reply {
    Reply::error(format!(
        "ERR {} command is not allowed with BLOCK option from scripts",
        String::from_utf8_lossy(cmd)
    ))
}

/// `Unbalanced 'xread' list of streams: for each stream key an ID or '$' must be specified.`
pub fn xread_unbalanced(cmd: &str, symbol: char) -> Reply {
    Reply::error(format!(
        "ERR Unbalanced '{cmd}' list of streams: for each stream key an ID or '{symbol}' must \
         be specified."
    ))
}

/// NOGROUP for a key/group pair; `suffix` is e.g. " in XREADGROUP with GROUP option".
pub fn nogroup_key_or_group(key: &[u8], group: &[u8], suffix: &str) -> Reply {
    Reply::error(format!(
        "NOGROUP No such key '{}' or consumer group '{}'{suffix}",
        cstr_lossy(key),
        cstr_lossy(group)
    ))
}

/// `NOGROUP No such consumer group '<g>' for key name '<k>'` (XGROUP, XINFO CONSUMERS).
pub fn nogroup_for_key(group: &[u8], key: &[u8]) -> Reply {
    Reply::error(format!(
        "NOGROUP No such consumer group '{}' for key name '{}'",
        cstr_lossy(group),
        cstr_lossy(key)
    ))
}

/// `Unrecognized XCLAIM option '<opt>'`.
pub fn xclaim_option(opt: &[u8]) -> Reply {
    Reply::error(format!(
        "ERR Unrecognized XCLAIM option '{}'",
        cstr_lossy(opt)
    ))
}

/// An argument formatted with `%s` into an error: a NUL byte ends it and newlines become
/// spaces (`addReplyErrorFormat`).
fn cstr_lossy(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).replace(['\r', '\n'], " ")
}

// Pub/Sub (pubsub.c).
pub const SSUBSCRIBE_DENY_BLOCKING: &str =
    "ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client";

// DUMP / RESTORE
pub const BUSYKEY: &str = "BUSYKEY Target key name already exists.";
pub const DUMP_PAYLOAD: &str = "ERR DUMP payload version or checksum are wrong";
pub const BAD_DATA_FORMAT: &str = "ERR Bad data format";
pub const INVALID_TTL: &str = "ERR Invalid TTL value, must be >= 0";
pub const INVALID_IDLETIME: &str = "ERR Invalid IDLETIME value, must be >= 0";
pub const INVALID_FREQ: &str = "ERR Invalid FREQ value, must be >= 0 and <= 255";

// Bitmaps (bitops.c).
pub const BIT_OFFSET: &str = "ERR bit offset is not an integer or out of range";
pub const BIT_VALUE: &str = "ERR bit is not an integer or out of range";
pub const BITPOS_BIT: &str = "ERR The bit argument must be 1 or 0.";
pub const BITOP_NOT: &str = "ERR BITOP NOT must be called with a single source key.";
pub const BITFIELD_TYPE: &str = "ERR Invalid bitfield type. Use something like i16 u8. \
Note that u64 is not supported but i64 is.";
pub const BITFIELD_OVERFLOW: &str = "ERR Invalid OVERFLOW type specified";
pub const BITFIELD_RO: &str = "ERR BITFIELD_RO only supports the GET subcommand";

// Geo (geo.c).
pub const GEO_UNIT: &str = "ERR unsupported unit provided. please use M, KM, FT, MI";
pub const GEO_NEED_RADIUS: &str = "ERR need numeric radius";
pub const GEO_NEED_WIDTH: &str = "ERR need numeric width";
pub const GEO_NEED_HEIGHT: &str = "ERR need numeric height";
pub const GEO_RADIUS_NEGATIVE: &str = "ERR radius cannot be negative";
pub const GEO_BOX_NEGATIVE: &str = "ERR height or width cannot be negative";
pub const GEO_MEMBER: &str = "ERR could not decode requested zset member";
pub const GEO_COUNT: &str = "ERR COUNT must be > 0";
pub const GEO_ANY: &str = "ERR the ANY argument requires COUNT argument";

/// `invalid longitude,latitude pair %f,%f`.
pub fn geo_lonlat(long: f64, lat: f64) -> Reply {
    Reply::error(format!(
        "ERR invalid longitude,latitude pair {long:.6},{lat:.6}"
    ))
}
pub const SORT_NOT_DOUBLE: &str = "ERR One or more scores can't be converted into double";

/// The C library's text for an I/O error (what Redis prints with `strerror`): Rust's
/// rendering without its ` (os error N)` suffix.
pub fn strerror(e: &std::io::Error) -> String {
    let s = e.to_string();
    match (e.raw_os_error(), s.rfind(" (os error ")) {
        (Some(_), Some(i)) => s[..i].to_string(),
        _ => s,
    }
}
