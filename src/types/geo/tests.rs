use super::*;

// Values from Redis's documentation (Palermo and Catania).
const PALERMO: (f64, f64) = (13.361389, 38.115556);
const CATANIA: (f64, f64) = (15.087269, 37.502669);

#[test]
fn scores_match_redis() {
    assert_eq!(score_of(PALERMO.0, PALERMO.1), 3479099956230698);
    assert_eq!(score_of(CATANIA.0, CATANIA.1), 3479447370796909);
}

#[test]
fn decode_and_print_like_redis() {
    let (lon, lat) = decode_score(3479099956230698.0);
    assert_eq!(format_coord(lon), "13.36138933897018433");
    assert_eq!(format_coord(lat), "38.11555639549629859");
    let (lon, lat) = decode_score(3479447370796909.0);
    assert_eq!(format_coord(lon), "15.08726745843887329");
    assert_eq!(format_coord(lat), "37.50266842333162032");
}

#[test]
fn geohash_strings() {
    assert_eq!(&geohash_string(3479099956230698.0), b"sqc8b49rny0");
    assert_eq!(&geohash_string(3479447370796909.0), b"sqdtr74hyu0");
}

#[test]
fn distances() {
    let (a, b) = (
        decode_score(3479099956230698.0),
        decode_score(3479447370796909.0),
    );
    let d = distance(a.0, a.1, b.0, b.1);
    assert_eq!(format_distance(d), "166274.1516");
    assert_eq!(format_distance(d / 1000.0), "166.2742");
    assert_eq!(format_distance(d / 1609.34), "103.3182");
    assert_eq!(format_distance(0.0), "0.0000");
    assert_eq!(format_distance(0.00005), "0.0000");
    assert_eq!(format_distance(0.00015), "0.0001");
    assert_eq!(format_distance(12.34564), "12.3456");
}

#[test]
fn coord_text() {
    assert_eq!(format_coord(-0.0), "0");
    assert_eq!(format_coord(1.0), "1");
    assert_eq!(format_coord(-1e-20), "0");
    assert_eq!(format_coord(0.5), "0.5");
}

#[test]
fn limits_and_odd_scores() {
    assert!(encode_wgs84(180.0, 85.05112878, 26).is_some());
    assert!(encode_wgs84(180.1, 0.0, 26).is_none());
    assert!(encode_wgs84(0.0, -85.06, 26).is_none());
    // Scores a ZADD stored directly still decode (clamped), as in Redis.
    let (lon, lat) = decode_score(-1.0);
    assert!((LONG_MIN..=LONG_MAX).contains(&lon) && (LAT_MIN..=LAT_MAX).contains(&lat));
    let _ = decode_score(f64::INFINITY);
    let _ = decode_score(1e300);
}

#[test]
fn steps_and_neighbours() {
    assert_eq!(estimate_steps(0.0, 0.0), 26);
    assert_eq!(estimate_steps(1e9, 0.0), 1);
    assert!(estimate_steps(1000.0, 85.0) < estimate_steps(1000.0, 0.0));
    let s = Search {
        long: PALERMO.0,
        lat: PALERMO.1,
        shape: Shape::Radius(200.0),
        conversion: 1000.0,
    };
    let boxes = s.boxes();
    assert!(!boxes[0].is_zero());
    let (min, max) = score_range(boxes[0]);
    assert!(min < max);
    // The centre itself is inside every shape around it.
    assert_eq!(s.within(PALERMO.0, PALERMO.1), Some(0.0));
    let b = Search {
        shape: Shape::Box(10.0, 10.0),
        ..s
    };
    assert!(b.within(PALERMO.0, PALERMO.1).is_some());
    assert!(b.within(CATANIA.0, CATANIA.1).is_none());
}
