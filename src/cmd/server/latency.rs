//! LATENCY LATEST / HISTORY / RESET / GRAPH / DOCTOR / HISTOGRAM / HELP (Redis `latency.c`),
//! and INFO's `latencystats` section.
//!
//! The events respite measures are the ones `call()` feeds in Redis: `command` and
//! `fast-command` (each call at or past `latency-monitor-threshold` ms, see
//! `cmd::observe`), and `expire-cycle` (a pass of the active expiry task, server/mod.rs). The per-command histograms are kept the way Redis keeps them
//! (instance/latency.rs), so the buckets and percentiles are Redis's.

use super::super::args;
use super::super::{registry, CommandSpec, Cx, KeySpec};
use crate::instance::latency::{self as lat, Series};
use crate::instance::state::Shared;
use crate::protocol::Reply;
use std::fmt::Write;

fn help(_cx: &mut Cx) -> Reply {
    args::help(
        "LATENCY",
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
        ],
    )
}

fn now_secs(srv: &Shared) -> i64 {
    (srv.clock.now_ms() / 1000) as i64
}

/// `[event, time of the latest sample, its latency, all-time max]` per event.
fn latest(cx: &mut Cx) -> Reply {
    Reply::Array(
        cx.srv
            .latency
            .snapshot()
            .into_iter()
            .map(|(event, s)| {
                let last = s.last();
                Reply::Array(vec![
                    Reply::bulk_static(event),
                    Reply::Int(last.time),
                    Reply::Int(last.latency as i64),
                    Reply::Int(s.max as i64),
                ])
            })
            .collect(),
    )
}

/// `[time, latency]` per sample of the event, oldest first (empty for an unknown event).
fn history(cx: &mut Cx) -> Reply {
    let Some((_, s)) = cx.srv.latency.get(&cx.args[2]) else {
        return Reply::Array(Vec::new());
    };
    Reply::Array(
        s.in_order()
            .map(|x| Reply::Array(vec![Reply::Int(x.time), Reply::Int(x.latency as i64)]))
            .collect(),
    )
}

fn reset(cx: &mut Cx) -> Reply {
    let l = &cx.srv.latency;
    let n = if cx.args.len() == 2 {
        l.reset(None)
    } else {
        cx.args[2..].iter().map(|e| l.reset(Some(e))).sum()
    };
    Reply::Int(n as i64)
}

fn graph(cx: &mut Cx) -> Reply {
    let Some((event, s)) = cx.srv.latency.get(&cx.args[2]) else {
        let e = String::from_utf8_lossy(&cx.args[2]);
        return Reply::error(format!("ERR No samples available for event '{e}'"));
    };
    Reply::Verbatim(sparkline_graph(event, &s, now_secs(cx.srv)).into())
}

/// Columns of LATENCY GRAPH (`LATENCY_GRAPH_COLS`) and rows of its sparkline.
const GRAPH_COLS: usize = 80;
const GRAPH_ROWS: usize = 4;

/// Redis `latencyCommandGenSparkeline`: a title line, a rule, then the samples drawn as a
/// filled sparkline, each labelled (vertically) with how long ago it happened.
pub fn sparkline_graph(event: &str, s: &Series, now: i64) -> String {
    let samples: Vec<(f64, String)> = s
        .in_order()
        .map(|x| {
            let ago = now - x.time;
            let label = if ago < 60 {
                format!("{ago}s")
            } else if ago < 3600 {
                format!("{}m", ago / 60)
            } else if ago < 86400 {
                format!("{}h", ago / 3600)
            } else {
                format!("{}d", ago / 86400)
            };
            (x.latency as f64, label)
        })
        .collect();
    let lats: Vec<u64> = s.in_order().map(|x| x.latency).collect();
    let max = lats.iter().copied().max().unwrap_or(0);
    let min = lats.iter().copied().min().unwrap_or(0);
    let mut out = format!(
        "{event} - high {max} ms, low {min} ms (all time high {} ms)\n",
        s.max
    );
    out.push_str(&"-".repeat(GRAPH_COLS));
    out.push('\n');
    let (lo, hi) = samples
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), (v, _)| {
            (lo.min(*v), hi.max(*v))
        });
    for (j, chunk) in samples.chunks(GRAPH_COLS).enumerate() {
        if j != 0 {
            out.push('\n');
        }
        render_range(&mut out, chunk, lo, hi);
    }
    out
}

/// One stretch of at most [`GRAPH_COLS`] samples (Redis `sparklineRenderRange` with
/// `SPARKLINE_FILL`): [`GRAPH_ROWS`] rows of `_o#` and `|`, a blank row, then the labels.
fn render_range(out: &mut String, samples: &[(f64, String)], min: f64, max: f64) {
    const FILL: [u8; 3] = *b"_o#";
    let steps = (FILL.len() * GRAPH_ROWS) as f64;
    let relmax = if max - min == 0.0 { 1.0 } else { max - min };
    let label_rows = samples.iter().map(|s| s.1.len()).max().unwrap_or(0);
    for row in 0..GRAPH_ROWS + 1 + label_rows {
        let line: Vec<u8> = samples
            .iter()
            .map(|(v, label)| {
                if row < GRAPH_ROWS {
                    // As Redis computes it: the product truncated, then divided.
                    let step = (((v - min) * steps) as i64 as f64 / relmax) as i64;
                    let step = step.clamp(0, steps as i64 - 1);
                    let idx = step - ((GRAPH_ROWS - row - 1) * FILL.len()) as i64;
                    match usize::try_from(idx) {
                        Ok(i) if i < FILL.len() => FILL[i],
                        Ok(_) => b'|',
                        Err(_) => b' ',
                    }
                } else if row == GRAPH_ROWS {
                    b' '
                } else {
                    label
                        .as_bytes()
                        .get(row - GRAPH_ROWS - 1)
                        .copied()
                        .unwrap_or(b' ')
                }
            })
            .collect();
        out.push_str(&String::from_utf8_lossy(&line));
        out.push('\n');
    }
}

/// Redis `analyzeLatencyForEvent`: (samples, average, mean deviation, period in seconds).
fn analyze(s: &Series, now: i64) -> (u64, u64, u64, i64) {
    let samples: Vec<_> = s.samples.iter().filter(|x| x.time != 0).collect();
    let n = samples.len() as u64;
    if n == 0 {
        return (0, 0, 0, 0);
    }
    let avg = samples.iter().map(|x| x.latency).sum::<u64>() / n;
    let oldest = samples.iter().map(|x| x.time).min().unwrap_or(now);
    let period = (now - oldest).max(0);
    let period = if period == 0 { 1 } else { period };
    let mad = samples
        .iter()
        .map(|x| (avg as i64 - x.latency as i64).unsigned_abs())
        .sum::<u64>()
        / n;
    (n, avg, mad, period)
}

/// Whether the process has transparent huge pages mapped (Redis reads `AnonHugePages` from
/// smaps the same way).
fn anon_huge_pages() -> bool {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return false;
    };
    smaps.lines().any(|l| {
        l.strip_prefix("AnonHugePages:")
            .and_then(|r| r.trim().split(' ').next())
            .and_then(|kb| kb.parse::<u64>().ok())
            .is_some_and(|kb| kb > 0)
    })
}

fn doctor(cx: &mut Cx) -> Reply {
    let srv = cx.srv;
    let threshold = srv.config.get_i64("latency-monitor-threshold");
    let slower = srv.config.get_i64("slowlog-log-slower-than");
    let hz = srv.config.get_i64("hz");
    let events = srv.latency.snapshot();
    let report = doctor_report(
        &events,
        threshold,
        slower,
        hz,
        now_secs(srv),
        anon_huge_pages(),
    );
    Reply::Verbatim(report.into())
}

/// Redis `createLatencyReport` for the events respite records.
pub fn doctor_report(
    events: &[(&str, Series)],
    threshold: i64,
    slower: i64,
    hz: i64,
    now: i64,
    thp: bool,
) -> String {
    if events.is_empty() && threshold == 0 {
        return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n".to_string();
    }
    let mut out = String::new();
    let mut advices = 0;
    let (mut slowlog_enabled, mut slowlog_tuning, mut slowlog_inspect) = (false, false, false);
    let (mut scheduler, mut large_objects, mut raise_hz) = (false, false, false);
    for (i, (event, s)) in events.iter().enumerate() {
        if i == 0 {
            out.push_str("Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n");
        }
        let (n, avg, mad, period) = analyze(s, now);
        let _ = write!(
            out,
            "{}. {event}: {n} latency spikes (average {avg}ms, mean deviation {mad}ms, period {:.2} sec). Worst all time event {}ms.",
            i + 1,
            period as f64 / n.max(1) as f64,
            s.max
        );
        match *event {
            "command" => {
                if slower < 0 {
                    slowlog_enabled = true;
                    advices += 1;
                } else if slower / 1000 > threshold {
                    slowlog_tuning = true;
                    advices += 1;
                }
                slowlog_inspect = true;
                large_objects = true;
                advices += 2;
            }
            "fast-command" => {
                scheduler = true;
                advices += 1;
            }
            "expire-cycle" => {
                raise_hz = true;
                large_objects = true;
                advices += 2;
            }
            _ => {}
        }
        out.push('\n');
    }
    if thp {
        advices += 1;
    }
    if events.is_empty() && advices == 0 {
        out.push_str("Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n");
        return out;
    }
    if advices == 0 {
        out.push_str("\nWhile there are latency events logged, I'm not able to suggest any easy fix. Please use the Redis community to get some help, providing this report in your help request.\n");
        return out;
    }
    out.push_str("\nI have a few advices for you:\n\n");
    let suggested = threshold.max(0) as u64 * 1000;
    if slowlog_enabled {
        let _ = writeln!(out, "- There are latency issues with potentially slow commands you are using. Try to enable the Slow Log Redis feature using the command 'CONFIG SET slowlog-log-slower-than {suggested}'. If the Slow log is disabled Redis is not able to log slow commands execution for you.");
    }
    if slowlog_tuning {
        let _ = writeln!(out, "- Your current Slow Log configuration only logs events that are slower than your configured latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than {suggested}'.");
    }
    if slowlog_inspect {
        out.push_str("- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n");
    }
    if scheduler {
        out.push_str("- The system is slow to execute Redis code paths not containing system calls. This usually means the system does not provide Redis CPU time to run for long periods. You should try to:\n  1) Lower the system load.\n  2) Use a computer / VM just for Redis if you are running other software in the same system.\n  3) Check if you have a \"noisy neighbour\" problem.\n  4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency in your system.\n  5) Check if the problem is allocator-related by recompiling Redis with MALLOC=libc, if you are using Jemalloc. However this may create fragmentation problems.\n");
    }
    if raise_hz && hz < 100 {
        out.push_str("- In order to make the Redis keys expiring process more incremental, try to set the 'hz' configuration parameter to 100 using 'CONFIG SET hz 100'.\n");
    }
    if large_objects {
        out.push_str("- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you have very large objects that are often deleted, expired, or evicted, try to fragment those objects into multiple smaller objects.\n");
    }
    if thp {
        out.push_str("- I detected a non zero amount of anonymous huge pages used by your process. This creates very serious latency events in different conditions, especially when Redis is persisting on disk. To disable THP support use the command 'echo never > /sys/kernel/mm/transparent_hugepage/enabled', make sure to also add it into /etc/rc.local so that the command will be executed again after a reboot. Note that even if you have already disabled THP, you still need to restart the Redis process to get rid of the huge pages already created.\n");
    }
    out
}

/// `{calls, histogram_usec: {µs: cumulative calls}}` for one command (`fillCommandCDF`).
fn command_cdf(counts: &[u64]) -> Reply {
    let calls: u64 = counts.iter().sum();
    Reply::Map(vec![
        (Reply::bulk_static("calls"), Reply::Int(calls as i64)),
        (
            Reply::bulk_static("histogram_usec"),
            Reply::Map(
                lat::cdf(counts)
                    .into_iter()
                    .map(|(us, n)| (Reply::Int(us as i64), Reply::Int(n as i64)))
                    .collect(),
            ),
        ),
    ])
}

/// LATENCY HISTOGRAM [command ...]: every command (and subcommand) with recorded calls, or
/// the named ones (a container names its subcommands too; unknown names are skipped).
fn histogram(cx: &mut Cx) -> Reply {
    // This connection's pending calls count, as in INFO.
    crate::cmd::flush_stats(cx.srv, cx.sess);
    let reg = registry();
    let h = &cx.srv.histograms;
    let mut ids = Vec::new();
    if cx.args.len() == 2 {
        ids.extend(0..reg.len());
    } else {
        for name in &cx.args[2..] {
            let Some((id, spec)) = reg.lookup(name) else {
                continue;
            };
            ids.push(id);
            for sub in spec.subcommands {
                if let Some((sid, _)) = reg.lookup(sub.name.as_bytes()) {
                    ids.push(sid);
                }
            }
        }
    }
    Reply::Map(
        ids.into_iter()
            .filter_map(|id| {
                let counts = h.counts(id)?;
                Some((Reply::bulk_static(reg.specs[id].name), command_cdf(&counts)))
            })
            .collect(),
    )
}

/// `latency-tracking-info-percentiles` as numbers.
fn percentiles(srv: &Shared) -> Vec<f64> {
    srv.config
        .get("latency-tracking-info-percentiles")
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// A percentile as Redis labels it: `%f` with trailing zeros (and a bare point) removed.
fn percentile_label(p: f64) -> String {
    let s = format!("{p:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// INFO `latencystats`: `latency_percentiles_usec_<command>:p50=…,p99=…,p99.9=…` per
/// command with recorded calls, while `latency-tracking` is on.
pub(super) fn info_section(srv: &Shared, l: &mut Vec<(String, String)>) {
    if !srv.config.get_bool("latency-tracking") {
        return;
    }
    let ps = percentiles(srv);
    let reg = registry();
    for id in 0..reg.len() {
        let Some(counts) = srv.histograms.counts(id) else {
            continue;
        };
        let v: Vec<String> = ps
            .iter()
            .map(|&p| {
                let ns = lat::value_at_percentile(&counts, p);
                format!("p{}={:.3}", percentile_label(p), ns as f64 / 1000.0)
            })
            .collect();
        l.push((
            format!("latency_percentiles_usec_{}", reg.specs[id].name),
            v.join(","),
        ));
    }
}

const ADMIN: &[&str] = &["admin", "noscript", "loading", "stale"];
const ADMIN_ACL: &[&str] = &["admin", "slow", "dangerous"];

pub const SPEC: CommandSpec = CommandSpec {
    name: "latency",
    arity: -2,
    flags: &[],
    keys: KeySpec::None,
    acl: &["slow"],
    group: "server",
    since: "2.8.13",
    summary: "A container for latency diagnostics commands.",
    complexity: "Depends on subcommand.",
    subcommands: &[
        super::keyless_sub(
            "latency|latest",
            2,
            ADMIN,
            ADMIN_ACL,
            "2.8.13",
            "Returns the latest latency samples for all events.",
            "O(1)",
            latest,
        ),
        super::keyless_sub(
            "latency|history",
            3,
            ADMIN,
            ADMIN_ACL,
            "2.8.13",
            "Returns timestamp-latency samples for an event.",
            "O(1)",
            history,
        ),
        super::keyless_sub(
            "latency|reset",
            -2,
            ADMIN,
            ADMIN_ACL,
            "2.8.13",
            "Resets the latency data for one or more events.",
            "O(1)",
            reset,
        ),
        super::keyless_sub(
            "latency|graph",
            3,
            ADMIN,
            ADMIN_ACL,
            "2.8.13",
            "Returns a latency graph for an event.",
            "O(1)",
            graph,
        ),
        super::keyless_sub(
            "latency|doctor",
            2,
            ADMIN,
            ADMIN_ACL,
            "2.8.13",
            "Returns a human-readable latency analysis report.",
            "O(1)",
            doctor,
        ),
        super::keyless_sub(
            "latency|histogram",
            -2,
            ADMIN,
            ADMIN_ACL,
            "7.0.0",
            "Returns the cumulative distribution of latencies of a subset or all commands.",
            "O(N) where N is the number of commands with latency information being retrieved.",
            histogram,
        ),
        super::keyless_sub(
            "latency|help",
            2,
            &["loading", "stale"],
            &["slow"],
            "2.8.13",
            "Returns helpful text about the different subcommands.",
            "O(1)",
            help,
        ),
    ],
    ..CommandSpec::DEFAULT
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_labels_trim_as_redis() {
        assert_eq!(percentile_label(50.0), "50");
        assert_eq!(percentile_label(99.9), "99.9");
        assert_eq!(percentile_label(1.5), "1.5");
        assert_eq!(percentile_label(0.0), "0");
    }

    #[test]
    fn graph_of_one_sample_is_drawn_as_redis_does() {
        let mut s = Series::default();
        s.add(1000, 10);
        let g = sparkline_graph("command", &s, 1000);
        // Redis 7 for one 10 ms sample taken this second.
        let want = format!(
            "command - high 10 ms, low 10 ms (all time high 10 ms)\n{}\n \n \n \n_\n \n0\ns\n",
            "-".repeat(80)
        );
        assert_eq!(g, want);
        s.add(1001, 40);
        s.add(1002, 25);
        let g = sparkline_graph("command", &s, 1002);
        assert!(g.starts_with("command - high 40 ms, low 10 ms (all time high 40 ms)\n"));
        let body: Vec<&str> = g.lines().skip(2).collect();
        assert_eq!(body, [" # ", " |_", " ||", "_||", "   ", "210", "sss"]);
    }

    #[test]
    fn doctor_texts() {
        assert!(doctor_report(&[], 0, 10000, 10, 0, false).starts_with("I'm sorry, Dave"));
        assert!(doctor_report(&[], 5, 10000, 10, 0, false).starts_with("Dave, no latency spike"));
        let mut s = Series::default();
        s.add(100, 10);
        let r = doctor_report(&[("command", s)], 1, -1, 10, 100, false);
        assert!(r.contains("1. command: 1 latency spikes (average 10ms, mean deviation 0ms, period 1.00 sec). Worst all time event 10ms.\n"), "{r}");
        assert!(r.contains("'CONFIG SET slowlog-log-slower-than 1000'. If the Slow log"));
    }
}
