//! Geo commands against a real redis-server 7.0: thousands of random points (uniform, near
//! the poles, around the antimeridian, in dense clusters) and hundreds of random GEOSEARCH /
//! GEOSEARCHSTORE / GEORADIUS queries give the same replies in both protocols; geo writes
//! survive a durable restart, signal WATCH and publish Redis's keyspace events.

mod common;

use common::{
    assert_keyevents_match_redis, durable_server, Conn, Frame, Rng, ServerProcess, WatchProbe,
};
use respite::TestServer;

/// Extra draws on the shared xorshift64* (`common::Rng`).
impl Rng {
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
}

const LAT_MAX: f64 = 85.05112878;

/// A random point: uniform, polar, antimeridian or in a dense cluster.
fn point(rng: &mut Rng) -> (f64, f64) {
    match rng.below(5) {
        0 => (rng.range(-180.0, 180.0), rng.range(-LAT_MAX, LAT_MAX)),
        1 => {
            let lat = rng.range(75.0, LAT_MAX);
            let lat = if rng.below(2) == 0 { lat } else { -lat };
            (rng.range(-180.0, 180.0), lat)
        }
        2 => {
            let lon = rng.range(175.0, 180.0);
            let lon = if rng.below(2) == 0 { lon } else { -lon };
            (lon, rng.range(-60.0, 60.0))
        }
        3 => (rng.range(13.0, 13.5), rng.range(38.0, 38.3)),
        _ => (rng.range(-0.05, 0.05), rng.range(-0.05, 0.05)),
    }
}

fn fmt(v: f64) -> String {
    format!("{v:.6}")
}

fn call(c: &mut Conn, args: &[String]) -> Frame {
    let v: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
    c.call(&v).expect("reply")
}

/// Sends the same command to both servers and asserts the replies are equal.
fn both(r: &mut Conn, s: &mut Conn, args: &[String]) -> Frame {
    let (a, b) = (call(r, args), call(s, args));
    assert_eq!(a, b, "{}", args.join(" "));
    a
}

/// Switches both connections to RESP`v` (their HELLO replies differ by design).
fn proto(r: &mut Conn, s: &mut Conn, v: u8) {
    let hello = words(&format!("HELLO {v}"));
    call(r, &hello);
    call(s, &hello);
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

/// A random radius or box side: log-uniform from 1 m to 20 000 km, in a random unit.
fn size(rng: &mut Rng) -> (f64, &'static str) {
    let meters = 10f64.powf(rng.range(0.0, 7.3));
    match rng.below(4) {
        0 => (meters, "m"),
        1 => (meters / 1000.0, "km"),
        2 => (meters / 0.3048, "ft"),
        _ => (meters / 1609.34, "mi"),
    }
}

/// The options after the shape: WITH* flags, an order, COUNT [ANY].
fn options(rng: &mut Rng, store: bool) -> Vec<String> {
    let mut o = Vec::new();
    if !store {
        for w in ["WITHDIST", "WITHCOORD", "WITHHASH"] {
            if rng.below(2) == 0 {
                o.push(w.to_string());
            }
        }
    }
    match rng.below(3) {
        0 => o.push("ASC".into()),
        1 => o.push("DESC".into()),
        _ => {}
    }
    if rng.below(3) == 0 {
        o.push("COUNT".into());
        o.push((1 + rng.below(50)).to_string());
        if rng.below(2) == 0 {
            o.push("ANY".into());
        }
    }
    o
}

fn geosearch_args(rng: &mut Rng, key: &str, members: &[String]) -> Vec<String> {
    let mut a = vec![key.to_string()];
    if rng.below(3) == 0 {
        a.push("FROMMEMBER".into());
        a.push(members[rng.below(members.len())].clone());
    } else {
        let (lon, lat) = point(rng);
        a.extend(["FROMLONLAT".into(), fmt(lon), fmt(lat)]);
    }
    if rng.below(2) == 0 {
        let (r, u) = size(rng);
        a.extend(["BYRADIUS".into(), format!("{r}"), u.into()]);
    } else {
        let (w, u) = size(rng);
        let h = w * rng.range(0.1, 3.0);
        a.extend(["BYBOX".into(), format!("{w}"), format!("{h}"), u.into()]);
    }
    a
}

#[test]
fn random_searches_match_redis() {
    let redis = ServerProcess::redis();
    let ts = TestServer::builder().start().expect("respite starts");
    let (mut r, mut s) = (
        Conn::connect(redis.port).unwrap(),
        Conn::connect(ts.port()).unwrap(),
    );
    // `GEO_SEED=n` replays another seed.
    let seed = std::env::var("GEO_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x9e37_79b9_7f4a_7c15u64);
    let mut rng = Rng(seed | 1);
    // "big" is a skiplist of 3000 points; "small" a listpack of 100.
    let mut members: Vec<String> = Vec::new();
    for (key, n) in [("big", 3000), ("small", 100)] {
        let mut batch = vec!["GEOADD".to_string(), key.to_string()];
        let mut last = (0.0, 0.0);
        for i in 0..n {
            // Some duplicates: equal distances exercise Redis's sort order for ties.
            let (lon, lat) = if rng.below(8) == 0 {
                last
            } else {
                point(&mut rng)
            };
            last = (lon, lat);
            let m = format!("{key}{i}");
            batch.extend([fmt(lon), fmt(lat), m.clone()]);
            if key == "big" {
                members.push(m);
            }
            if batch.len() > 300 {
                both(&mut r, &mut s, &batch);
                batch.truncate(2);
            }
        }
        if batch.len() > 2 {
            both(&mut r, &mut s, &batch);
        }
    }
    let small: Vec<String> = (0..100).map(|i| format!("small{i}")).collect();
    for (key, n) in [("big", 3000), ("small", 100)] {
        let card = both(&mut r, &mut s, &words(&format!("ZCARD {key}")));
        assert_eq!(card, Frame::Int(n));
    }
    both(&mut r, &mut s, &words("OBJECT ENCODING small"));
    let mut nonempty = 0;
    for q in 0..600 {
        // Both protocols: RESP3 prints coordinates as doubles.
        if q == 300 {
            proto(&mut r, &mut s, 3);
        }
        let (key, ms) = if q % 4 == 0 {
            ("small", &small)
        } else {
            ("big", &members)
        };
        let mut a = vec!["GEOSEARCH".to_string()];
        a.extend(geosearch_args(&mut rng, key, ms));
        a.extend(options(&mut rng, false));
        if let Frame::Array(v) = both(&mut r, &mut s, &a) {
            nonempty += usize::from(!v.is_empty());
        }
        // The deprecated forms and the store forms, now and then.
        if q % 5 == 0 {
            let (lon, lat) = point(&mut rng);
            let (rad, u) = size(&mut rng);
            let mut g = words(&format!(
                "GEORADIUS {key} {} {} {rad} {u}",
                fmt(lon),
                fmt(lat)
            ));
            g.extend(options(&mut rng, false));
            both(&mut r, &mut s, &g);
            let m = &ms[rng.below(ms.len())];
            let mut g = words(&format!("GEORADIUSBYMEMBER_RO {key} {m} {rad} {u}"));
            g.extend(options(&mut rng, false));
            both(&mut r, &mut s, &g);
        }
        if q % 7 == 0 {
            let mut st = vec!["GEOSEARCHSTORE".to_string(), "dst".to_string()];
            st.extend(geosearch_args(&mut rng, key, ms));
            st.extend(options(&mut rng, true));
            if rng.below(2) == 0 {
                st.push("STOREDIST".into());
            }
            both(&mut r, &mut s, &st);
            // RESP2 prints stored distances as %.17g (7.0) vs shortest (7.2): compare
            // scores by value through RESP3.
            proto(&mut r, &mut s, 3);
            both(&mut r, &mut s, &words("ZRANGE dst 0 -1 WITHSCORES"));
            both(&mut r, &mut s, &words("OBJECT ENCODING dst"));
            if q < 300 {
                proto(&mut r, &mut s, 2);
            }
        }
        if q % 3 == 0 {
            let a = &ms[rng.below(ms.len())];
            let b = &ms[rng.below(ms.len())];
            let unit = ["m", "km", "ft", "mi"][rng.below(4)];
            both(
                &mut r,
                &mut s,
                &words(&format!("GEODIST {key} {a} {b} {unit}")),
            );
            both(
                &mut r,
                &mut s,
                &words(&format!("GEOPOS {key} {a} {b} nope")),
            );
            both(
                &mut r,
                &mut s,
                &words(&format!("GEOHASH {key} {a} {b} nope")),
            );
        }
    }
    assert!(nonempty > 200, "too few non-empty searches: {nonempty}");
}

#[test]
fn geo_sets_survive_a_durable_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let checks = [
        "GEOPOS k a b c d",
        "ZRANGE k 0 -1 WITHSCORES",
        "ZRANGE near 0 -1 WITHSCORES",
        "ZRANGE dist 0 -1 WITHSCORES",
        "ZRANGE big 0 -1 WITHSCORES",
        "OBJECT ENCODING big",
    ];
    let before: Vec<Frame>;
    {
        let srv = durable_server(dir.path(), "always");
        let mut c = Conn::connect(srv.port()).expect("connect");
        assert_eq!(
            c.cmd("GEOADD k 13.361389 38.115556 a 15.087269 37.502669 b"),
            Frame::Int(2)
        );
        assert_eq!(c.cmd("GEOADD k CH 13.5 38 a 1 1 c"), Frame::Int(2));
        assert_eq!(c.cmd("GEOADD k XX 2 2 c 3 3 d"), Frame::Int(0));
        assert_eq!(
            c.cmd("GEOSEARCHSTORE near k FROMMEMBER a BYRADIUS 500 km"),
            Frame::Int(2)
        );
        assert_eq!(
            c.cmd("GEORADIUS k 14 38 500 km STOREDIST dist COUNT 1"),
            Frame::Int(1)
        );
        let mut add = String::from("GEOADD big");
        for i in 0..300 {
            add.push_str(&format!(
                " {} {} m{i}",
                i as f64 * 0.5 - 75.0,
                i as f64 * 0.25 - 37.0
            ));
        }
        assert_eq!(c.cmd(&add), Frame::Int(300));
        before = checks.iter().map(|q| c.cmd(q)).collect();
    }
    let srv = durable_server(dir.path(), "always");
    let mut c = Conn::connect(srv.port()).expect("connect");
    let after: Vec<Frame> = checks.iter().map(|q| c.cmd(q)).collect();
    assert_eq!(before, after);
    // Still writable and durable after the reload.
    assert_eq!(c.cmd("GEOADD k 4 4 e"), Frame::Int(1));
    assert_eq!(
        c.cmd("GEOSEARCHSTORE near k FROMLONLAT 0 0 BYRADIUS 1 m"),
        Frame::Int(0)
    );
    drop(c);
    drop(srv);
    let srv = durable_server(dir.path(), "always");
    let mut c = Conn::connect(srv.port()).expect("connect");
    assert_eq!(c.cmd("ZCARD k"), Frame::Int(4));
    assert_eq!(c.cmd("EXISTS near"), Frame::Int(0));
}

#[test]
fn watch_sees_geo_writes() {
    let mut w = WatchProbe::start();
    assert!(!w.exec_runs("GEOADD k 1 1 m"), "new key");
    assert!(w.exec_runs("GEOADD k 1 1 m"), "same point");
    assert!(!w.exec_runs("GEOADD k 2 2 m"), "moved");
    assert!(w.exec_runs("GEOADD k NX 3 3 m"), "nx existing");
    assert!(
        w.exec_runs("GEOSEARCH k FROMMEMBER m BYRADIUS 1 km"),
        "read"
    );
    assert!(w.exec_runs("GEOPOS k m"), "geopos");
    w.b.cmd("GEOADD src 0 0 p");
    assert!(
        !w.exec_runs("GEOSEARCHSTORE k src FROMMEMBER p BYRADIUS 1 km"),
        "store"
    );
    assert!(
        !w.exec_runs("GEORADIUS src 50 50 1 km STORE k"),
        "empty store deletes"
    );
    assert!(
        w.exec_runs("GEORADIUS src 50 50 1 km STORE k"),
        "nothing to delete"
    );
}

#[test]
fn keyspace_events_match_redis() {
    let script = [
        "GEOADD k 1 1 a 2 2 b",
        "GEOADD k 1 1 a",
        "GEOADD k XX 5 5 a",
        "GEOSEARCHSTORE d k FROMMEMBER a BYRADIUS 100 km",
        "GEOSEARCHSTORE d k FROMMEMBER a BYRADIUS 1000 km STOREDIST",
        "GEORADIUS k 2 2 10 km STORE e",
        "GEORADIUSBYMEMBER k a 10 km STOREDIST e",
        "GEORADIUS k 50 50 10 km STORE e",
        "GEOSEARCHSTORE d missing FROMMEMBER a BYRADIUS 1 km",
        "GEOSEARCH k FROMMEMBER a BYRADIUS 1 km",
    ];
    assert_keyevents_match_redis("KEA", &script, 6);
}
