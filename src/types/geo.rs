//! Geohash math as Redis 7.2 does it (`geohash.c`, `geohash_helper.c`): 52-bit interleaved
//! hashes over longitude [-180, 180] and latitude [-85.05112878, 85.05112878] (the Web
//! Mercator limits), the 3x3 neighbour-box search plan, and the haversine distance with
//! Redis's earth radius. Every step is the same `f64` arithmetic in the same order, so
//! results are bit-identical to Redis's.

pub const LONG_MIN: f64 = -180.0;
pub const LONG_MAX: f64 = 180.0;
pub const LAT_MIN: f64 = -85.05112878;
pub const LAT_MAX: f64 = 85.05112878;
/// `GEO_STEP_MAX`: 26 bits per coordinate, 52 in all (a double's mantissa).
pub const STEP_MAX: u8 = 26;

const EARTH_RADIUS_IN_METERS: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;
/// `D_R`: `M_PI / 180.0`.
const D_R: f64 = std::f64::consts::PI / 180.0;

fn deg_rad(a: f64) -> f64 {
    a * D_R
}

fn rad_deg(a: f64) -> f64 {
    a / D_R
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    pub min: f64,
    pub max: f64,
}

/// The WGS84 ranges Redis stores with.
pub const LONG_RANGE: Range = Range {
    min: LONG_MIN,
    max: LONG_MAX,
};
pub const LAT_RANGE: Range = Range {
    min: LAT_MIN,
    max: LAT_MAX,
};

/// `GeoHashBits`: `step` bits per coordinate, latitude in the even bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Hash {
    pub bits: u64,
    pub step: u8,
}

impl Hash {
    /// `HASHISZERO`: a neighbour box excluded from the search.
    pub fn is_zero(&self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// `geohashAlign52Bits`.
    pub fn align52(&self) -> u64 {
        // Steps never exceed 26 here (C would shift by a negative amount).
        self.bits << 52u32.saturating_sub(u32::from(self.step) * 2)
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Area {
    pub long: Range,
    pub lat: Range,
}

/// Spreads the low 32 bits of `v` over the even bit positions.
fn spread(v: u32) -> u64 {
    let mut x = u64::from(v);
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// Gathers the even bit positions of `x` into 32 bits.
fn squash(x: u64) -> u32 {
    let mut x = x & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x >> 16)) & 0x0000_0000_FFFF_FFFF;
    x as u32
}

/// C's `(uint32_t)` of a non-negative double below 2^32 (always the case here).
fn to_u32(v: f64) -> u32 {
    v as u32
}

/// `geohashEncode`: `None` when outside the WGS84 limits or the given ranges.
pub fn encode(long_r: &Range, lat_r: &Range, long: f64, lat: f64, step: u8) -> Option<Hash> {
    if step > 32 || step == 0 {
        return None;
    }
    if !(LONG_MIN..=LONG_MAX).contains(&long) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    if lat < lat_r.min || lat > lat_r.max || long < long_r.min || long > long_r.max {
        return None;
    }
    let mut lat_offset = (lat - lat_r.min) / (lat_r.max - lat_r.min);
    let mut long_offset = (long - long_r.min) / (long_r.max - long_r.min);
    let scale = (1u64 << step) as f64;
    lat_offset *= scale;
    long_offset *= scale;
    Some(Hash {
        bits: spread(to_u32(lat_offset)) | (spread(to_u32(long_offset)) << 1),
        step,
    })
}

/// `geohashEncodeWGS84`.
pub fn encode_wgs84(long: f64, lat: f64, step: u8) -> Option<Hash> {
    encode(&LONG_RANGE, &LAT_RANGE, long, lat, step)
}

/// The sorted-set score GEOADD stores for a point (already range-checked).
pub fn score_of(long: f64, lat: f64) -> u64 {
    encode_wgs84(long, lat, STEP_MAX).map_or(0, |h| h.align52())
}

/// `geohashDecode`: the cell a hash names (`None` for the zero hash).
pub fn decode(long_r: &Range, lat_r: &Range, hash: Hash) -> Option<Area> {
    if hash.is_zero() {
        return None;
    }
    let ilato = squash(hash.bits);
    let ilono = squash(hash.bits >> 1);
    let lat_scale = lat_r.max - lat_r.min;
    let long_scale = long_r.max - long_r.min;
    let div = (1u64 << hash.step) as f64;
    // `ilato + 1` is 32-bit unsigned arithmetic in C.
    Some(Area {
        lat: Range {
            min: lat_r.min + (f64::from(ilato) / div) * lat_scale,
            max: lat_r.min + (f64::from(ilato.wrapping_add(1)) / div) * lat_scale,
        },
        long: Range {
            min: long_r.min + (f64::from(ilono) / div) * long_scale,
            max: long_r.min + (f64::from(ilono.wrapping_add(1)) / div) * long_scale,
        },
    })
}

/// `geohashDecodeAreaToLongLat`: the cell's centre, clamped to the WGS84 limits.
fn area_center(a: &Area) -> (f64, f64) {
    let long = ((a.long.min + a.long.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((a.lat.min + a.lat.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (long, lat)
}

/// C's `(uint64_t)` of a double as gcc compiles it on x86-64 (a score can be any double a
/// ZADD stored, not only a geohash).
fn double_to_u64(v: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    if v.is_nan() {
        return 1 << 63;
    }
    if v < TWO63 {
        // cvttsd2si: out-of-range gives 0x8000..., as Rust's saturation to i64::MIN does.
        (v as i64) as u64
    } else {
        let w = v - TWO63;
        if w < TWO63 {
            (w as i64 as u64) ^ (1 << 63)
        } else {
            0
        }
    }
}

/// `decodeGeohash`: a member's (longitude, latitude) from its score.
pub fn decode_score(score: f64) -> (f64, f64) {
    let hash = Hash {
        bits: double_to_u64(score),
        step: STEP_MAX,
    };
    // A step of 26 is never the zero hash, so decoding always succeeds.
    decode(&LONG_RANGE, &LAT_RANGE, hash).map_or((0.0, 0.0), |a| area_center(&a))
}

/// GEOHASH's 11-character standard geohash of a score: decoded, then re-encoded over the
/// standard latitude range [-90, 90].
pub fn geohash_string(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (long, lat) = decode_score(score);
    let r_long = Range {
        min: -180.0,
        max: 180.0,
    };
    let r_lat = Range {
        min: -90.0,
        max: 90.0,
    };
    let bits = encode(&r_long, &r_lat, long, lat, 26).map_or(0, |h| h.bits);
    let mut out = [b'0'; 11];
    for (i, c) in out.iter_mut().enumerate().take(10) {
        let idx = (bits >> (52 - (i + 1) * 5)) & 0x1f;
        *c = ALPHABET[idx as usize];
    }
    out
}

fn move_x(h: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let shift = 64 - u32::from(h.step) * 2;
    let mut x = h.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = h.bits & 0x5555_5555_5555_5555;
    let zz = 0x5555_5555_5555_5555u64 >> shift;
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaa_aaaa_aaaa_aaaau64 >> shift;
    h.bits = x | y;
}

fn move_y(h: &mut Hash, d: i8) {
    if d == 0 {
        return;
    }
    let shift = 64 - u32::from(h.step) * 2;
    let x = h.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let mut y = h.bits & 0x5555_5555_5555_5555;
    let zz = 0xaaaa_aaaa_aaaa_aaaau64 >> shift;
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555_5555_5555_5555u64 >> shift;
    h.bits = x | y;
}

fn moved(h: Hash, dx: i8, dy: i8) -> Hash {
    let mut n = h;
    move_x(&mut n, dx);
    move_y(&mut n, dy);
    n
}

/// The search shape, in its unit; `conversion` is metres per unit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Shape {
    Radius(f64),
    /// Width, height.
    Box(f64, f64),
}

/// A search: centre, shape and unit (Redis's `GeoShape`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Search {
    pub long: f64,
    pub lat: f64,
    pub shape: Shape,
    pub conversion: f64,
}

/// `geohashEstimateStepsByRadius`.
pub fn estimate_steps(mut range_meters: f64, lat: f64) -> u8 {
    if range_meters == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range_meters < MERCATOR_MAX {
        range_meters *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

impl Search {
    /// `geohashBoundingBox`: [min long, min lat, max long, max lat].
    pub fn bounding_box(&self) -> [f64; 4] {
        let (h, w) = match self.shape {
            Shape::Radius(r) => (r, r),
            Shape::Box(w, h) => (h / 2.0, w / 2.0),
        };
        let height = self.conversion * h;
        let width = self.conversion * w;
        let lat_delta = rad_deg(height / EARTH_RADIUS_IN_METERS);
        let long_delta_top =
            rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(self.lat + lat_delta).cos());
        let long_delta_bottom =
            rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(self.lat - lat_delta).cos());
        let southern = self.lat < 0.0;
        let dl = if southern {
            long_delta_bottom
        } else {
            long_delta_top
        };
        [
            self.long - dl,
            self.lat - lat_delta,
            self.long + dl,
            self.lat + lat_delta,
        ]
    }

    /// `geohashCalculateAreasByShapeWGS84`: the centre box and its 8 neighbours, in the
    /// order Redis scans them (centre, N, S, E, W, NE, NW, SE, SW); excluded boxes are zero.
    pub fn boxes(&self) -> [Hash; 9] {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounding_box();
        let radius_meters = match self.shape {
            Shape::Radius(r) => r,
            Shape::Box(w, h) => ((w / 2.0) * (w / 2.0) + (h / 2.0) * (h / 2.0)).sqrt(),
        } * self.conversion;
        let mut steps = estimate_steps(radius_meters, self.lat);
        let plan = |steps: u8| {
            let hash = encode_wgs84(self.long, self.lat, steps).unwrap_or(Hash {
                bits: 0,
                step: steps,
            });
            let area = decode(&LONG_RANGE, &LAT_RANGE, hash);
            (hash, area)
        };
        let (mut hash, mut area) = plan(steps);
        let dec = |h: Hash| decode(&LONG_RANGE, &LAT_RANGE, h);
        let mut decrease = false;
        if let Some(north) = dec(moved(hash, 0, 1)) {
            decrease |= north.lat.max < max_lat;
        }
        if let Some(south) = dec(moved(hash, 0, -1)) {
            decrease |= south.lat.min > min_lat;
        }
        if let Some(east) = dec(moved(hash, 1, 0)) {
            decrease |= east.long.max < max_lon;
        }
        if let Some(west) = dec(moved(hash, -1, 0)) {
            decrease |= west.long.min > min_lon;
        }
        if steps > 1 && decrease {
            steps -= 1;
            (hash, area) = plan(steps);
        }
        // [centre, north, south, east, west, north_east, north_west, south_east, south_west]
        let mut n = [
            hash,
            moved(hash, 0, 1),
            moved(hash, 0, -1),
            moved(hash, 1, 0),
            moved(hash, -1, 0),
            moved(hash, 1, 1),
            moved(hash, -1, 1),
            moved(hash, 1, -1),
            moved(hash, -1, -1),
        ];
        if steps >= 2 {
            if let Some(area) = area {
                let zero = |n: &mut [Hash; 9], ix: &[usize]| {
                    for &i in ix {
                        n[i] = Hash::default();
                    }
                };
                if area.lat.min < min_lat {
                    zero(&mut n, &[2, 8, 7]);
                }
                if area.lat.max > max_lat {
                    zero(&mut n, &[1, 5, 6]);
                }
                if area.long.min < min_lon {
                    zero(&mut n, &[4, 8, 6]);
                }
                if area.long.max > max_lon {
                    zero(&mut n, &[3, 7, 5]);
                }
            }
        }
        n
    }

    /// `geoWithinShape`: the distance in metres from the centre when (long, lat) is inside.
    pub fn within(&self, long: f64, lat: f64) -> Option<f64> {
        match self.shape {
            Shape::Radius(r) => {
                let d = distance(self.long, self.lat, long, lat);
                (d <= r * self.conversion).then_some(d)
            }
            Shape::Box(w, h) => {
                let (w, h) = (w * self.conversion, h * self.conversion);
                if lat_distance(lat, self.lat) > h / 2.0 {
                    return None;
                }
                if distance(long, lat, self.long, lat) > w / 2.0 {
                    return None;
                }
                Some(distance(self.long, self.lat, long, lat))
            }
        }
    }
}

/// `scoresOfGeoHashBox`: the score range [min, max) holding every point of a box.
pub fn score_range(h: Hash) -> (u64, u64) {
    let min = h.align52();
    let max = Hash {
        bits: h.bits.wrapping_add(1),
        step: h.step,
    }
    .align52();
    (min, max)
}

/// `geohashGetLatDistance` (Redis 7.2).
pub fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_IN_METERS * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// `geohashGetDistance`: haversine great-circle distance in metres (Redis 7.2, which
/// short-cuts equal longitudes to [`lat_distance`]).
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let lon1r = deg_rad(lon1);
    let lon2r = deg_rad(lon2);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let lat1r = deg_rad(lat1);
    let lat2r = deg_rad(lat2);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_IN_METERS * a.sqrt().asin()
}

/// Redis 7.2 `fixedpoint_d2string(d, 4)`: `llrint(d * 10000)` printed with 4 decimals (what
/// GEODIST and WITHDIST reply; 7.0 used `%.4f`, which rounds the exact value instead).
pub fn format_distance(d: f64) -> String {
    if d == 0.0 {
        return "0.0000".into();
    }
    // llrint: round half to even in the default rounding mode; distances are far from
    // the i64 limits.
    let scaled = (d * 10000.0).round_ties_even();
    let v = if scaled.is_finite() && scaled.abs() < 9.2e18 {
        scaled as i64
    } else {
        i64::MIN
    };
    let neg = v < 0;
    let u = v.unsigned_abs();
    let (int, frac) = (u / 10000, u % 10000);
    format!("{}{int}.{frac:04}", if neg { "-" } else { "" })
}

/// Redis's `addReplyHumanLongDouble` text of a double (`%.17Lf`, trailing zeros and a
/// trailing dot removed, `-0` printed as `0`).
pub fn format_coord(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let mut s = format!("{v:.17}");
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

#[cfg(test)]
mod tests;
