//! LOLWUT with Redis 7.2's semantics (lolwut.c): `VERSION n` picks the art of Redis n
//! (5: Georg Nees' "Schotter" in braille, 6: a skyline in ANSI colors), any other version
//! prints only the version line. The version printed is the Redis version respite claims.
//! The drawing follows Redis's arithmetic (C `float` where it uses float), so shapes and
//! undisturbed parts match Redis's; the random parts draw from the server's generator.

use super::super::{errors, Cx};
use crate::num::parse_i64;
use crate::protocol::Reply;
use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::Rng;

pub fn lolwut(cx: &mut Cx) -> Reply {
    let mut args = &cx.args[1..];
    let mut major = None;
    if args.len() >= 2 && args[0].eq_ignore_ascii_case(b"VERSION") {
        // Redis prints the number with "%u.0.0" and reads its first characters.
        match parse_i64(&args[1]) {
            Some(v) => major = Some(v as u32),
            None => return errors::not_int(),
        }
        args = &args[2..];
    }
    let version = major.map_or_else(|| crate::REDIS_VERSION.to_string(), |v| format!("{v}.0.0"));
    let text = match art_of(version.as_bytes()) {
        5 => schotter_command(cx, args),
        6 => skyline_command(cx, args),
        _ => Ok(format!("Redis ver. {}\n", crate::REDIS_VERSION)),
    };
    match text {
        Ok(t) => Reply::Verbatim(Bytes::from(t)),
        Err(e) => e,
    }
}

/// Which art a version gets (lolwut.c's test of the first three characters).
fn art_of(v: &[u8]) -> u8 {
    match (v.first(), v.get(1), v.get(2)) {
        (Some(b'5'), Some(b'.'), Some(b'9')) => 6,
        (Some(b'5'), Some(b'.'), Some(_)) | (Some(b'4'), Some(b'.'), Some(b'9')) => 5,
        (Some(b'6'), Some(b'.'), Some(c)) if *c != b'9' => 6,
        _ => 0,
    }
}

/// Optional numeric arguments, each `getLongFromObjectOrReply`, then clamped.
fn long_args<const N: usize>(args: &[Bytes], mut vals: [i64; N]) -> Result<[i64; N], Reply> {
    for (i, a) in args.iter().take(N).enumerate() {
        vals[i] = parse_i64(a).ok_or_else(errors::not_int)?;
    }
    Ok(vals)
}

/// C `rand()`: 0..=RAND_MAX (glibc's RAND_MAX is i32::MAX).
fn crand(rng: &mut SmallRng) -> i32 {
    rng.gen_range(0..=i32::MAX)
}

struct Canvas {
    width: i32,
    height: i32,
    pixels: Vec<u8>,
}

impl Canvas {
    fn new(width: i32, height: i32, bg: u8) -> Canvas {
        Canvas {
            width,
            height,
            pixels: vec![bg; (width.max(0) as usize) * (height.max(0) as usize)],
        }
    }

    fn set(&mut self, x: i32, y: i32, color: u8) {
        if x >= 0 && x < self.width && y >= 0 && y < self.height {
            self.pixels[(x + y * self.width) as usize] = color;
        }
    }

    fn get(&self, x: i32, y: i32) -> u8 {
        if x >= 0 && x < self.width && y >= 0 && y < self.height {
            self.pixels[(x + y * self.width) as usize]
        } else {
            0
        }
    }

    /// Bresenham, as lwDrawLine.
    fn line(&mut self, mut x1: i32, mut y1: i32, x2: i32, y2: i32, color: u8) {
        let (dx, dy) = ((x2 - x1).abs(), (y2 - y1).abs());
        let (sx, sy) = (if x1 < x2 { 1 } else { -1 }, if y1 < y2 { 1 } else { -1 });
        let mut err = dx - dy;
        loop {
            self.set(x1, y1, color);
            if x1 == x2 && y1 == y2 {
                break;
            }
            let e2 = err * 2;
            if e2 > -dy {
                err -= dy;
                x1 += sx;
            }
            if e2 < dx {
                err += dx;
                y1 += sy;
            }
        }
    }

    /// lwDrawSquare: a square of side `size` centred at x,y, rotated by `angle`.
    fn square(&mut self, x: i32, y: i32, size: f32, angle: f32, color: u8) {
        // Redis's own constant, not SQRT_2: the pixels depend on it.
        #[allow(clippy::approx_constant)]
        let size = ((size as f64 / 1.4142135623) as f32).round();
        let mut k: f32 = (std::f64::consts::PI / 4.0 + angle as f64) as f32;
        let (mut px, mut py) = ([0i32; 4], [0i32; 4]);
        for j in 0..4 {
            px[j] = ((k as f64).sin() * size as f64 + x as f64).round() as i32;
            py[j] = ((k as f64).cos() * size as f64 + y as f64).round() as i32;
            k = (k as f64 + std::f64::consts::PI / 2.0) as f32;
        }
        for j in 0..4 {
            self.line(px[j], py[j], px[(j + 1) % 4], py[(j + 1) % 4], color);
        }
    }
}

fn schotter_command(cx: &Cx, args: &[Bytes]) -> Result<String, Reply> {
    let [cols, per_row, per_col] = long_args(args, [66, 8, 12])?;
    let canvas = schotter(
        &mut cx.srv.rng.lock(),
        cols.clamp(1, 1000) as i32,
        per_row.clamp(1, 200) as i32,
        per_col.clamp(1, 200) as i32,
    );
    let mut out = braille(&canvas);
    out.push_str("\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. ");
    out.push_str(crate::REDIS_VERSION);
    out.push('\n');
    Ok(out)
}

/// lwDrawSchotter: rows of squares, rotated and shifted more and more going down.
fn schotter(rng: &mut SmallRng, cols: i32, per_row: i32, per_col: i32) -> Canvas {
    let width = cols * 2;
    let padding = if width > 4 { 2 } else { 0 };
    let side: f32 = (width - padding * 2) as f32 / per_row as f32;
    let height = (side * per_col as f32 + (padding * 2) as f32) as i32;
    let mut canvas = Canvas::new(width, height, 0);
    let rand_max = i32::MAX as f32;
    for y in 0..per_col {
        for x in 0..per_row {
            let mut sx = (x as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut sy = (y as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut angle: f32 = 0.0;
            if y > 1 {
                let mut r = [0f32; 3];
                for v in r.iter_mut() {
                    *v = crand(rng) as f32 / rand_max / per_col as f32 * y as f32;
                }
                for v in r.iter_mut() {
                    if crand(rng) % 2 == 1 {
                        *v = -*v;
                    }
                }
                angle = r[0];
                sx = (sx as f32 + r[1] * side / 3.0) as i32;
                sy = (sy as f32 + r[2] * side / 3.0) as i32;
            }
            canvas.square(sx, sy, side, angle, 1);
        }
    }
    canvas
}

/// Renders 2x4 pixel cells as braille characters (U+2800 + the dot bits), lolwut5.c's
/// order of dots.
fn braille(c: &Canvas) -> String {
    let mut out = String::new();
    let mut y = 0;
    while y < c.height {
        let mut x = 0;
        while x < c.width {
            let dots = [
                (0, 0),
                (0, 1),
                (0, 2),
                (1, 0),
                (1, 1),
                (1, 2),
                (0, 3),
                (1, 3),
            ];
            let mut byte = 0u32;
            for (bit, (dx, dy)) in dots.iter().enumerate() {
                if c.get(x + dx, y + dy) != 0 {
                    byte |= 1 << bit;
                }
            }
            out.push(char::from_u32(0x2800 + byte).unwrap_or(' '));
            x += 2;
        }
        if y != c.height - 1 {
            out.push('\n');
        }
        y += 4;
    }
    out
}

fn skyline_command(cx: &Cx, args: &[Bytes]) -> Result<String, Reply> {
    let [cols, rows] = long_args(args, [80, 20])?;
    let mut canvas = Canvas::new(cols.clamp(1, 1000) as i32, rows.clamp(1, 1000) as i32, 3);
    skyline(&mut cx.srv.rng.lock(), &mut canvas);
    let mut out = String::new();
    for y in 0..canvas.height {
        for x in 0..canvas.width {
            let escape = match canvas.get(x, y) {
                1 => "0;90;100m",
                2 => "0;37;47m",
                3 => "0;97;107m",
                _ => "0;30;40m",
            };
            out.push_str(&format!("\x1b[{escape} \x1b[0m"));
        }
        if y != canvas.height - 1 {
            out.push('\n');
        }
    }
    out.push_str(
        "\nDedicated to the 8 bit game developers of past and present.\n\
         Original 8 bit image from Plaguemon by hikikomori. Redis ver. ",
    );
    out.push_str(crate::REDIS_VERSION);
    out.push('\n');
    Ok(out)
}

struct Skyscraper {
    xoff: i32,
    width: i32,
    height: i32,
    windows: bool,
    color: u8,
}

/// generateSkyscraper: a building from the bottom row up, roof two pixels narrower on
/// each side, windows two pixels wide in random grays.
fn skyscraper(rng: &mut SmallRng, c: &mut Canvas, s: &Skyscraper) {
    let starty = c.height - 1;
    let endy = starty - s.height + 1;
    let mut y = starty;
    while y >= endy {
        for x in s.xoff..s.xoff + s.width {
            if y == endy && (x <= s.xoff + 1 || x >= s.xoff + s.width - 2) {
                continue;
            }
            let mut color = s.color;
            if s.windows
                && x > s.xoff + 1
                && x < s.xoff + s.width - 2
                && y > endy + 1
                && y < starty - 1
            {
                let relx = x - (s.xoff + 1);
                let rely = y - (endy + 1);
                if (relx / 2) % 2 != 0 && rely % 2 != 0 {
                    loop {
                        color = 1 + (crand(rng) % 2) as u8;
                        if color != s.color {
                            break;
                        }
                    }
                    if relx % 2 != 0 {
                        color = c.get(x - 1, y);
                    }
                }
            }
            c.set(x, y, color);
        }
        y -= 1;
    }
}

/// generateSkyline: two passes of window-less grays behind, then the black front row.
fn skyline(rng: &mut SmallRng, c: &mut Canvas) {
    let h = c.height;
    for color in [2u8, 1] {
        let mut offset = -10;
        while offset < c.width {
            offset += crand(rng) % 8;
            let width = 10 + crand(rng) % 9;
            let height = if color == 2 {
                h / 2 + (crand(rng) % h) / 2
            } else {
                h / 2 + (crand(rng) % h) / 3
            };
            let s = Skyscraper {
                xoff: offset,
                width,
                height,
                windows: false,
                color,
            };
            skyscraper(rng, c, &s);
            offset += if color == 2 { width / 2 } else { width + 1 };
        }
    }
    let mut offset = -10;
    while offset < c.width {
        offset += crand(rng) % 8;
        let mut width = 5 + crand(rng) % 14;
        if width % 4 != 0 {
            width += width % 3;
        }
        let height = h / 3 + (crand(rng) % h) / 2;
        let s = Skyscraper {
            xoff: offset,
            width,
            height,
            windows: true,
            color: 0,
        };
        skyscraper(rng, c, &s);
        offset += width + 5;
    }
}
