//! Results: per-phase figures, the table, the JSON.

use hdrhistogram::Histogram;
use serde_json::{json, Value};

/// A latency histogram in nanoseconds (1 ns .. 100 s, 3 significant digits).
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("constant, valid histogram bounds")
}

/// One measured phase.
#[derive(Debug, Clone)]
pub struct Phase {
    /// "append", "poll", ...
    pub name: String,
    /// Bytes moved.
    pub bytes: u64,
    /// Messages moved.
    pub messages: u64,
    /// Batches moved.
    pub batches: u64,
    /// Wall time of the phase.
    pub seconds: f64,
    /// Per-operation latency (ns).
    pub latency: Histogram<u64>,
}

impl Phase {
    pub fn new(name: &str) -> Phase {
        Phase {
            name: name.to_string(),
            bytes: 0,
            messages: 0,
            batches: 0,
            seconds: 0.0,
            latency: histogram(),
        }
    }

    pub fn mb_per_s(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 / self.seconds / 1e6
        } else {
            0.0
        }
    }

    pub fn per_s(&self, n: u64) -> f64 {
        if self.seconds > 0.0 {
            n as f64 / self.seconds
        } else {
            0.0
        }
    }

    pub fn merge(&mut self, other: &Phase) {
        self.bytes += other.bytes;
        self.messages += other.messages;
        self.batches += other.batches;
        let _ = self.latency.add(&other.latency);
    }

    pub fn json(&self) -> Value {
        json!({
            "bytes": self.bytes,
            "messages": self.messages,
            "batches": self.batches,
            "seconds": self.seconds,
            "mb_per_s": self.mb_per_s(),
            "msgs_per_s": self.per_s(self.messages),
            "batches_per_s": self.per_s(self.batches),
            "latency_us": latency_json(&self.latency),
        })
    }
}

/// p50 .. max of a nanosecond histogram, in µs.
pub fn latency_json(h: &Histogram<u64>) -> Value {
    let us = |ns: u64| ns as f64 / 1000.0;
    json!({
        "p50": us(h.value_at_quantile(0.5)),
        "p90": us(h.value_at_quantile(0.9)),
        "p99": us(h.value_at_quantile(0.99)),
        "p999": us(h.value_at_quantile(0.999)),
        "p9999": us(h.value_at_quantile(0.9999)),
        "max": us(h.max()),
        "count": h.len(),
    })
}

fn fmt_us(ns: u64) -> String {
    let us = ns as f64 / 1000.0;
    if us >= 10_000.0 {
        format!("{:.1}ms", us / 1000.0)
    } else if us >= 100.0 {
        format!("{us:.0}µs")
    } else {
        format!("{us:.1}µs")
    }
}

/// Prints the table of phases.
pub fn print_table(phases: &[&Phase]) {
    println!(
        "{:<12} {:>10} {:>12} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "phase", "MB/s", "msgs/s", "batches/s", "p50", "p90", "p99", "p99.9", "p99.99", "max"
    );
    for p in phases {
        let h = &p.latency;
        println!(
            "{:<12} {:>10.1} {:>12.0} {:>10.0} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            p.name,
            p.mb_per_s(),
            p.per_s(p.messages),
            p.per_s(p.batches),
            fmt_us(h.value_at_quantile(0.5)),
            fmt_us(h.value_at_quantile(0.9)),
            fmt_us(h.value_at_quantile(0.99)),
            fmt_us(h.value_at_quantile(0.999)),
            fmt_us(h.value_at_quantile(0.9999)),
            fmt_us(h.max()),
        );
    }
}

/// Prints one latency-only row (end-to-end).
pub fn print_latency_row(name: &str, h: &Histogram<u64>) {
    println!(
        "{:<12} {:>10} {:>12} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        name,
        "",
        "",
        "",
        fmt_us(h.value_at_quantile(0.5)),
        fmt_us(h.value_at_quantile(0.9)),
        fmt_us(h.value_at_quantile(0.99)),
        fmt_us(h.value_at_quantile(0.999)),
        fmt_us(h.value_at_quantile(0.9999)),
        fmt_us(h.max()),
    );
}
