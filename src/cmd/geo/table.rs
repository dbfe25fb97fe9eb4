//! The geo command table (generated from redis-server 7.0.15 by scripts/gen_specs.py).

use super::search;
use super::{geoadd, geodist, geohash, geopos};
use crate::cmd::table::{CommandSpec, KeySpec};

/// GEORADIUS and GEORADIUSBYMEMBER: the source key plus an optional STORE/STOREDIST key.
const RADIUS_KEYS: KeySpec = KeySpec::Custom {
    first: 1,
    last: 1,
    step: 1,
    find: search::georadius_keys,
};

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "geoadd",
        arity: -5,
        flags: &["write", "denyoom"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["write", "geo", "slow"],
        group: "geo",
        since: "3.2.0",
        summary: "Add one or more geospatial items in the geospatial index represented using a sorted set",
        complexity: "O(log(N)) for each item added, where N is the number of elements in the sorted set.",
        handler: geoadd,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "geodist",
        arity: -4,
        flags: &["readonly"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "geo", "slow"],
        group: "geo",
        since: "3.2.0",
        summary: "Returns the distance between two members of a geospatial index",
        complexity: "O(log(N))",
        handler: geodist,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "geohash",
        arity: -2,
        flags: &["readonly"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "geo", "slow"],
        group: "geo",
        since: "3.2.0",
        summary: "Returns members of a geospatial index as standard geohash strings",
        complexity: "O(log(N)) for each member requested, where N is the number of elements in the sorted set.",
        handler: geohash,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "geopos",
        arity: -2,
        flags: &["readonly"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "geo", "slow"],
        group: "geo",
        since: "3.2.0",
        summary: "Returns longitude and latitude of members of a geospatial index",
        complexity: "O(N) where N is the number of members requested.",
        handler: geopos,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "geosearch",
        arity: -7,
        flags: &["readonly"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "geo", "slow"],
        group: "geo",
        since: "6.2.0",
        summary: "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle.",
        complexity: "O(N+log(M)) where N is the number of elements in the grid-aligned bounding box area around the shape provided as the filter and M is the number of items inside the shape",
        handler: search::geosearch,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "geosearchstore",
        arity: -8,
        flags: &["write", "denyoom"],
        keys: KeySpec::Range(1, 2, 1),
        acl: &["write", "geo", "slow"],
        group: "geo",
        since: "6.2.0",
        summary: "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle, and store the result in another key.",
        complexity: "O(N+log(M)) where N is the number of elements in the grid-aligned bounding box area around the shape provided as the filter and M is the number of items inside the shape",
        handler: search::geosearchstore,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "georadius",
        arity: -6,
        flags: &["write", "denyoom"],
        keys: RADIUS_KEYS,
        acl: &["write", "geo", "slow"],
        group: "geo",
        since: "3.2.0",
        summary: "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a point",
        complexity: "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.",
        handler: search::georadius,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "georadiusbymember",
        arity: -5,
        flags: &["write", "denyoom"],
        keys: RADIUS_KEYS,
        acl: &["write", "geo", "slow"],
        group: "geo",
        since: "3.2.0",
        summary: "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a member",
        complexity: "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.",
        handler: search::georadiusbymember,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "georadius_ro",
        arity: -6,
        flags: &["readonly"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "geo", "slow"],
        group: "geo",
        since: "3.2.10",
        summary: "A read-only variant for GEORADIUS",
        complexity: "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.",
        handler: search::georadius_ro,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "georadiusbymember_ro",
        arity: -5,
        flags: &["readonly"],
        keys: KeySpec::Range(1, 1, 1),
        acl: &["read", "geo", "slow"],
        group: "geo",
        since: "3.2.10",
        summary: "A read-only variant for GEORADIUSBYMEMBER",
        complexity: "O(N+log(M)) where N is the number of elements inside the bounding box of the circular area delimited by center and radius and M is the number of items inside the index.",
        handler: search::georadiusbymember_ro,
        ..CommandSpec::DEFAULT
    },
];
