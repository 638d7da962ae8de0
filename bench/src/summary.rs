//! The end of a corelog run: the table on stdout, the JSON, the charts.

use crate::args::Args;
use crate::live::Series;
use crate::report::{latency_json, print_latency_row, print_table, Phase};
use crate::schedule;
use crate::shape::Shape;
use crate::sink::Serve;
use hdrhistogram::Histogram;
use serde_json::{json, Value};

/// What a corelog run measured.
#[derive(Debug)]
pub struct Summary<'a> {
    pub args: &'a Args,
    pub shape: Shape,
    pub total: Option<u64>,
    pub duration: Option<f64>,
    pub append: Phase,
    /// The append latency's two parts: sent late after the due time, and
    /// from the call to the acknowledgement in hand.
    pub append_late: Histogram<u64>,
    pub append_service: Histogram<u64>,
    /// The engine's own count of its appends (warm-up included): from the
    /// shard taking each to its answer, in power-of-two buckets.
    pub on_shard: corelog::LatencyHistogram,
    /// The engine's writes: made on the shards' threads, of those slow,
    /// and handed to the rings (warm-up included).
    pub writes: [u64; 3],
    pub poll: Phase,
    pub e2e: Histogram<u64>,
    /// Bytes that arrived through the consumers' sockets.
    pub served: Option<u64>,
    /// Raw XXH3 of this build, bytes/s, on `verify_cores` cores at once.
    pub xxh3: f64,
    /// The same partitions verified by the read-only reader, no engine,
    /// bytes/s on `verify_cores` cores (`xxh3::read_only_rate`).
    pub read_only: f64,
    pub verify_cores: usize,
    /// `--reopen`: the cost of opening the directory again.
    pub reopen: Option<crate::reopen::Reopen>,
    pub errors: Vec<String>,
}

impl Summary<'_> {
    pub fn print(&self) {
        let args = self.args;
        println!();
        print_table(&self.phases());
        println!(
            "append latency: from each batch's scheduled send ({})",
            schedule::describe(args.rate)
        );
        print_latency_row("  sent late", &self.append_late);
        print_latency_row("  call->ack", &self.append_service);
        let q = |at| match self.on_shard.quantile_at_most(at) {
            Some(d) => format!("{d:?}"),
            None => "-".into(),
        };
        println!(
            "append split: sent late (the producer's pacing and wake-up) + call->ack (admission, the queue, the shard, the reply, the producer's wake-up); on the shard alone, the engine's own count (warm-up included, power-of-two buckets): p50 <= {}, p99 <= {}, p99.9 <= {}",
            q(0.5),
            q(0.99),
            q(0.999)
        );
        if let Some(r) = &self.reopen {
            r.print();
        }
        if args.no_poll {
            return;
        }
        print_latency_row("end-to-end", &self.e2e);
        let per = self.poll.mb_per_s() / self.poll_workers() as f64;
        match self.served {
            Some(b) => println!(
                "polls served: {b} bytes through {} (reader: {:?}) ({:.2} GB/s, {:.2} GB/s per consumer)",
                args.serve,
                args.drain,
                self.poll.mb_per_s() / 1000.0,
                per / 1000.0
            ),
            None => println!("polls verified, not served (--serve none)"),
        }
        if !args.no_verify {
            println!(
                "poll with verification: {:.2} GB/s; raw XXH3 in this build over memory, {} cores at once: {:.2} GB/s; ratio {:.2}",
                self.poll.mb_per_s() / 1000.0,
                self.verify_cores,
                self.xxh3 / 1e9,
                self.poll.mb_per_s() * 1e6 / self.xxh3
            );
            println!(
                "the same partitions verified without the engine (read-only reader, fresh mappings, {} cores): {:.2} GB/s; poll's ratio to it {:.2}",
                self.verify_cores,
                self.read_only / 1e9,
                self.poll.mb_per_s() * 1e6 / self.read_only
            );
        }
        if !args.tail {
            println!("(end-to-end latency counts from each batch's send to its poll after the append phase; --tail measures it live)");
        }
    }

    fn phases(&self) -> Vec<&Phase> {
        let mut phases = vec![&self.append];
        if !self.args.no_poll {
            phases.push(&self.poll);
        }
        phases
    }

    /// Consumers that had partitions to read.
    fn poll_workers(&self) -> usize {
        self.shape
            .consumers
            .min(self.shape.partitions as usize)
            .max(1)
    }

    pub fn json(&self) -> Value {
        let (args, shape) = (self.args, &self.shape);
        let mut poll = if args.no_poll {
            Value::Null
        } else {
            self.poll.json()
        };
        if let Value::Object(m) = &mut poll {
            m.insert("served_bytes".into(), json!(self.served));
            m.insert(
                "mb_per_s_per_consumer".into(),
                json!(self.poll.mb_per_s() / self.poll_workers() as f64),
            );
        }
        json!({
            "config": {
                "engine": "corelog",
                "shards": shape.shards,
                "partitions": shape.partitions,
                "producers": shape.producers,
                "producers_on": if args.on_shard { "shards" } else { "threads" },
                "inflight": shape.inflight,
                "consumers": shape.consumers,
                "consumers_on": "threads",
                "serve": match args.serve { Serve::None => Value::Null, s => json!(s) },
                "drain": args.drain,
                "message_size": args.message_size,
                "messages_per_batch": args.messages_per_batch,
                "total_bytes": self.total,
                "duration": self.duration,
                "fsync": args.fsync.to_string(),
                "segment_bytes": args.segment_bytes,
                "rate_mb_per_s": args.rate,
                "warmup": args.warmup,
                "verify": !args.no_verify,
                "tail": args.tail,
                "settled": args.settle && !args.tail && !args.no_poll,
                "syncs": args.syncs,
                "checksum_simd": corelog::testing::segment::checksum::simd_path(),
            },
            "latency_from": schedule::LATENCY_FROM,
            "schedule": schedule::describe(args.rate),
            "append": self.append.json(),
            "append_split": {
                "sent_late_us": latency_json(&self.append_late),
                "call_to_ack_us": latency_json(&self.append_service),
            },
            "writes": {
                "inline": self.writes[0],
                "inline_slow": self.writes[1],
                "by_ring": self.writes[2],
            },
            "poll": poll,
            "end_to_end": { "latency_us": latency_json(&self.e2e) },
            "xxh3_gb_per_s": (self.xxh3 > 0.0).then_some(self.xxh3 / 1e9),
            "xxh3_cores": self.verify_cores,
            "read_only_verify_gb_per_s": (self.read_only > 0.0).then_some(self.read_only / 1e9),
            "reopen": self.reopen.map(|r| r.json()),
            "errors": self.errors,
        })
    }

    /// Writes the JSON and charts asked for; fails if the run had errors.
    pub fn write(&self, series: &Series) -> Result<(), String> {
        if let Some(path) = &self.args.json {
            std::fs::write(
                path,
                serde_json::to_string_pretty(&self.json()).unwrap_or_default(),
            )
            .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        if let Some(dir) = &self.args.plot {
            crate::plot::write(dir, series, &self.phases())
                .map_err(|e| format!("plots in {}: {e}", dir.display()))?;
        }
        if !self.errors.is_empty() {
            return Err(self.errors.join("; "));
        }
        Ok(())
    }
}
