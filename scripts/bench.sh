#!/usr/bin/env bash
# corelog's performance claims, measured in one go on one disk, each against a baseline run in
# the same session: fio (io_uring), a plain single-threaded pwrite loop of the same batches, and
# corelog. Every figure is the median of REPS interleaved runs with the min–max range; a ratio
# is taken per run (corelog and its baseline measured moments apart) and the row gives the
# median and range of those ratios.
#
#   scripts/bench.sh                 # the default scenarios, 3 repetitions
#   REPS=5 DATA_DIR=/mnt/fast scripts/bench.sh
#   scripts/bench.sh polls latency   # only some scenarios (the README is then left alone)
#
# Scenarios: pagecache durable scaling polls latency (the default set), single, peers
# (walrus-rust and commitlog, built with --features peers), wire (corelog-server over Iggy's TCP
# protocol against embedded corelog, and against a real Iggy server when IGGY_SERVER=host:port is
# given), iggy (Iggy's own iggy-bench against a real Iggy server and corelog-server; needs
# IGGY_SERVER_BIN and IGGY_BENCH), partitions (4 to 10,000 partitions), opens (reopening
# 1,000 and 10,000 partitions after a clean shutdown and as after a crash), cluster (a 3-node
# Iggy cluster against a 3-node corelog cluster and one corelog-server, iggy-bench, and
# corelog's failover time; scripts/bench_cluster.sh, which says what it needs), syncs (group commit
# across partitions: side by side against one at a time), prealloc (durable appends with
# preallocation in steps, whole segments, none), admission (criterion: admission against XXH3),
# tail (an append's latency at half load split into the producer's lateness and call-to-ack,
# against fio at the same rate, with the VM's free page reporting as found and paused;
# scripts/bench_tail.sh), tier (tiered storage against a
# SeaweedFS on loopback, iggy-bench: produce with offload on against off, consume from the store
# against local, what the store and the disk hold; scripts/bench_tier.sh, which says what it
# needs: TIER_BYTES, TIER_LOCAL...).
# Results: $OUT (default docs/bench/results.md; docs/bench/tier.md for `tier` alone,
# docs/bench/tail.md for `tail` alone, and
# docs/bench/cluster.md for `cluster` alone).
# After a run of the default set into the default file, the README's block between the
# "bench.sh results" markers is replaced by that file, as it is.
set -euo pipefail
cd "$(dirname "$0")/.."

DEFAULT_SCENARIOS="pagecache durable scaling polls latency"
REPS=${REPS:-3}
DATA_DIR=${DATA_DIR:-/var/tmp/corelog-bench-data}
SCENARIOS=${*:-$DEFAULT_SCENARIOS}
OUT_DEFAULT=docs/bench/results.md
case "$SCENARIOS" in tier | cluster | tail) OUT_DEFAULT=docs/bench/$SCENARIOS.md ;; esac
OUT=${OUT:-$OUT_DEFAULT}
COMMAND="REPS=$REPS scripts/bench.sh${*:+ $*}"
JSON_DIR=$(mktemp -d)
SERVER_PIDS=() # servers a scenario has running; whatever is left of them dies with the script
cleanup() {
  local p
  for p in "${SERVER_PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$JSON_DIR" "$DATA_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

command -v fio >/dev/null || { apt-get update -qq && apt-get install -y -qq fio >/dev/null; }
cargo build --release -q -p corelog-bench
B=${CARGO_TARGET_DIR:-target}/release/corelog-bench
mkdir -p "$DATA_DIR" "$(dirname "$OUT")"
: >"$JSON_DIR/cold"

fresh() { # empty data dir, dirty pages written, page cache dropped (if allowed), memory warm
  rm -rf "${DATA_DIR:?}"/*
  settle
}

settle() { # fresh, the data kept
  sync
  # On a VM, memory freed by dropping the page cache may go back to the host; the first writer
  # to take it again pays for faulting it back in (fio measured 0.6 GB/s cold, 4 GB/s warm).
  # Touch it with a throwaway write (deleted before write-back, so the disk is not involved).
  dd if=/dev/zero of="$DATA_DIR/warm" bs=1M count=2500 status=none
  rm -f "$DATA_DIR/warm"
  local err
  if err=$( (echo 3 >/proc/sys/vm/drop_caches) 2>&1); then
    echo cold >>"$JSON_DIR/cold"
  else
    echo "warm: ${err:-drop_caches failed}" >>"$JSON_DIR/cold"
  fi
}

jget() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): d=d[k]
print(d)' "$1" "$2"; }
median() { python3 -c 'import statistics,sys; print(round(statistics.median(float(x) for x in sys.argv[1:])))' "$@"; }

# fio through io_uring; prints MB/s (10^6) over all jobs. $1 = job count, $2 = size per job,
# rest = flags.
fio_mbps() {
  local jobs=$1 size=$2; shift 2
  fresh
  fio --name=seq --directory="$DATA_DIR" --ioengine=io_uring --rw=write --bs=1M --size="$size" \
      --numjobs="$jobs" --group_reporting --direct=0 "$@" \
      --output-format=json --output="$JSON_DIR/fio.json" >/dev/null
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["jobs"][0]["write"]["bw_bytes"]/1e6)' "$JSON_DIR/fio.json"
}

# corelog-bench: prints JSON key $1 from a run with flags $2...
# vCPU time the host took from this VM so far (steal, all CPUs), in ms: /proc/stat counts it in
# USER_HZ ticks.
steal_ms() { awk -v hz="$(getconf CLK_TCK)" '/^cpu /{printf "%d\n", $9 * 1000 / hz}' /proc/stat; }

bench() {
  local key=$1; shift
  fresh
  local s0; s0=$(steal_ms)
  "$B" --quiet --data-dir "$DATA_DIR/c" --json "$JSON_DIR/b.json" "$@" >"$JSON_DIR/b.out" 2>&1 || { cat "$JSON_DIR/b.out" >&2; exit 1; }
  echo $(($(steal_ms) - s0)) >"$JSON_DIR/steal" # the host's share of the run's vCPU time
  jget "$JSON_DIR/b.json" "$key"
}

row() { python3 scripts/bench_rows.py "$@" | tee -a "$JSON_DIR/rows"; }
: >"$JSON_DIR/rows"
: >"$JSON_DIR/notes" # lines printed under the table (what failed, and why)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# 1000 messages of 1000 B per batch (1 MiB batches) unless a scenario says otherwise.
MB1="--message-size 1000 --messages-per-batch 1000 --warmup 0"

for s in $SCENARIOS; do
  case $s in
  pagecache)
    # fsync never, 2 partitions, 2 GB; every checksum verified at admission. corelog with
    # producer threads outside the shards (the default) and on the shards (--on-shard).
    f=""; p=""; c=""; o=""
    for _ in $(seq "$REPS"); do
      f+=" $(fio_mbps 1 2000M --iodepth=4)"
      p+=" $(bench append.mb_per_s --engine pwrite --fsync never --total-bytes 2GB $MB1)"
      c+=" $(bench append.mb_per_s --fsync never --partitions 2 --total-bytes 2GB $MB1 --no-poll)"
      o+=" $(bench append.mb_per_s --fsync never --partitions 2 --total-bytes 2GB $MB1 --no-poll --on-shard)"
    done
    row ratio "page-cache appends, 1 MiB batches, 2 partitions, 2 GB, producer threads (MB/s)" "fio io_uring buffered, 1 MiB, 4 in flight" "$f" "$c" ">=" 1.0
    row ratio "same, producer threads" "corelog, producers on the shards (--on-shard)" "$o" "$c" ">=" 0.9
    row ratio "same, producer threads" "plain \`pwrite\` loop, 1 thread" "$p" "$c"
    ;;
  durable)
    # fsync=batch, 8 partitions, 2 producers x 16 appends in flight = 32 writes in flight, 2 GB.
    # Like for like: fio with one job per partition (8 files), 4 writes in flight each (32 in
    # all), fdatasync after every write, the same 2 GB. The device's ceiling: fio O_DIRECT, 1 MiB
    # writes, 16 in flight, no page cache.
    f=""; d=""; c=""; o=""
    for _ in $(seq "$REPS"); do
      f+=" $(fio_mbps 8 250M --iodepth=4 --fdatasync=1)"
      d+=" $(fio_mbps 1 2000M --direct=1 --iodepth=16 --end_fsync=1)"
      c+=" $(bench append.mb_per_s --fsync batch --partitions 8 --inflight 16 --total-bytes 2GB $MB1 --no-poll)"
      o+=" $(bench append.mb_per_s --fsync batch --partitions 8 --inflight 16 --total-bytes 2GB $MB1 --no-poll --on-shard)"
    done
    row ratio "durable appends, \`fsync=batch\`, 8 partitions, 32 in flight, 2 GB, producer threads (MB/s)" "fio: 8 jobs (one per partition), 4 in flight each, \`--fdatasync=1\`" "$f" "$c" ">=" 3
    row ratio "same, producer threads" "fio O_DIRECT, 16 in flight: the device's ceiling" "$d" "$c" ">=" 0.9
    row ratio "same, producers on the shards" "fio: 8 jobs, 4 in flight each, \`--fdatasync=1\`" "$f" "$o"
    ;;
  single)
    # One partition, one producer: fsync never against fio buffered, fsync batch with 4 and 16
    # appends in flight against one fio job with as many in flight and fdatasync per write.
    f=""; n=""; f4=""; b4=""; f16=""; b16=""
    for _ in $(seq "$REPS"); do
      f+=" $(fio_mbps 1 2000M --iodepth=4)"
      n+=" $(bench append.mb_per_s --fsync never --partitions 1 --producers 1 --total-bytes 2GB $MB1 --no-poll)"
      f4+=" $(fio_mbps 1 1000M --iodepth=4 --fdatasync=1)"
      b4+=" $(bench append.mb_per_s --fsync batch --partitions 1 --producers 1 --total-bytes 1GB $MB1 --no-poll)"
      f16+=" $(fio_mbps 1 1000M --iodepth=16 --fdatasync=1)"
      b16+=" $(bench append.mb_per_s --fsync batch --partitions 1 --producers 1 --inflight 16 --total-bytes 1GB $MB1 --no-poll)"
    done
    row ratio "one partition, \`fsync=never\`, 2 GB (MB/s)" "fio io_uring buffered 1 MiB" "$f" "$n"
    row ratio "one partition, \`fsync=batch\`, 4 in flight, 1 GB (MB/s)" "fio 1 job, 4 in flight, \`--fdatasync=1\`" "$f4" "$b4"
    row ratio "one partition, \`fsync=batch\`, 16 in flight, 1 GB (MB/s)" "fio 1 job, 16 in flight, \`--fdatasync=1\`" "$f16" "$b16"
    ;;
  scaling)
    # 100-byte messages: two shards against one (each shard with its own producer thread).
    one=""; two=""
    for _ in $(seq "$REPS"); do
      one+=" $(bench append.msgs_per_s --shards 1 --producers 1 --partitions 2 --fsync never --total-bytes 1GB --message-size 100 --messages-per-batch 1000 --warmup 0 --no-poll)"
      two+=" $(bench append.msgs_per_s --shards 2 --producers 2 --partitions 2 --fsync never --total-bytes 1GB --message-size 100 --messages-per-batch 1000 --warmup 0 --no-poll)"
    done
    row ratio "100-byte messages, 2 shards (msgs/s)" "1 shard" "$one" "$two" ">=" 1.8
    ;;
  polls)
    # Write 4 GB (fsync never, 2 partitions), then poll it all back with consumer threads.
    # Served: every reply's IoSlices written to loopback TCP, drained and counted by a reader
    # thread (no verification), per consumer; one consumer alone, then two at once. Verified:
    # every checksum checked, nothing served, against raw XXH3 of the same build on the same
    # cores, measured in the same process right after the polls. Every run settles first
    # (--settle: every partition flushed before the polls): 4 GB is past the kernel's
    # background dirty threshold (a tenth of memory here), and its write-back would otherwise
    # run on the two cores through the 0.3-0.5 s of polls, and not through the XXH3 baseline
    # measured after them (docs/bench/profiles.md section 8). Between the two, the same
    # process verifies the same partitions without the engine (the read-only reader of
    # `corelog poll`, every segment mapped afresh, same cores): what reading the page cache
    # through new mappings gives on this machine, with no shard, queue or wake-up in the way.
    s1=""; s2=""; v=""; x=""; ro=""
    for _ in $(seq "$REPS"); do
      s1+=" $(bench poll.mb_per_s_per_consumer --fsync never --partitions 2 --consumers 1 --total-bytes 4GB $MB1 --no-verify --serve tcp --settle)"
      s2+=" $(bench poll.mb_per_s_per_consumer --fsync never --partitions 2 --consumers 2 --total-bytes 4GB $MB1 --no-verify --serve tcp --settle)"
      v+=" $(bench poll.mb_per_s --fsync never --partitions 2 --total-bytes 4GB $MB1 --serve none --settle)"
      x+=" $(python3 -c "import json; print(json.load(open('$JSON_DIR/b.json'))['xxh3_gb_per_s']*1000)")"
      ro+=" $(python3 -c "import json; print(json.load(open('$JSON_DIR/b.json'))['read_only_verify_gb_per_s']*1000)")"
    done
    row value "polls served through loopback TCP, 1 consumer (MB/s per consumer)" "$s1" ">=" 3000 "MB/s"
    row value "polls served through loopback TCP, 2 consumers at once (MB/s per consumer)" "$s2" ">=" 3000 "MB/s"
    row ratio "polls verifying every checksum, 2 consumers (MB/s)" "raw XXH3 over memory, 2 cores at once" "$x" "$v" ">=" 0.8
    row ratio "the same partitions verified without the engine (MB/s; read-only reader, fresh mappings, 2 cores)" "raw XXH3 over memory, 2 cores at once" "$x" "$ro"
    row ratio "polls verifying every checksum, 2 consumers (MB/s)" "the read-only reader, same runs" "$ro" "$v"
    ;;
  latency)
    # Append latency at half of the peak rate, measured from each batch's scheduled send (open
    # loop, sends spaced evenly), 10-message batches of 1000 B, 2 partitions, producer threads.
    # The runs write 1.5 GB, within the page cache's dirty limit: past it the kernel throttles
    # writers to the disk's write-back rate. Under fsync=batch the same, at half of its own peak.
    L="--partitions 2 --message-size 1000 --messages-per-batch 10 --no-poll"
    for pol in never batch; do
      size=1500MB; [ "$pol" = batch ] && size=500MB
      pk=""
      for _ in $(seq "$REPS"); do pk+=" $(bench append.mb_per_s --fsync $pol --total-bytes $size $L --warmup 0)"; done
      peak=$(median $pk); rate=$((peak / 2))
      p99=""; p9999=""; s99=""
      for _ in $(seq "$REPS"); do
        bench append.mb_per_s --fsync $pol --rate "$rate" --total-bytes $size $L --warmup 0.5 >/dev/null
        p99+=" $(jget "$JSON_DIR/b.json" append.latency_us.p99)"
        p9999+=" $(jget "$JSON_DIR/b.json" append.latency_us.p9999)"
        bench append.mb_per_s --fsync $pol --rate "$rate" --total-bytes $size $L --warmup 0.5 --on-shard >/dev/null
        s99+=" $(jget "$JSON_DIR/b.json" append.latency_us.p99)"
      done
      if [ "$pol" = never ]; then
        row value "append p99 at half of peak, \`fsync=never\` ($rate of $peak MB/s), 10 × 1000 B batches, from schedule, producer threads (µs)" "$p99" "<=" 200 "µs"
        row value "append p99.99, same (µs)" "$p9999" "<=" 2000 "µs"
      else
        row value "append p99 at half of peak, \`fsync=batch\` ($rate of $peak MB/s), same batches, from schedule, producer threads (µs)" "$p99" - - "µs"
      fi
      row value "append p99, \`fsync=$pol\`, same rate, producers on the shards (µs)" "$s99" - - "µs"
    done
    ;;
  tail)
    . scripts/bench_tail.sh
    ;;
  peers)
    # Peers a user might pick instead (built with --features peers): walrus-rust and the
    # commitlog crate, same batches, 2 partitions, one writer thread each, then every entry read
    # back and checked as a batch. corelog's read side is its verified poll (not served).
    cargo build --release -q -p corelog-bench --features peers
    for mode in "never 2GB" "batch 1GB"; do
      set -- $mode
      declare -A ap=() rd=()
      for _ in $(seq "$REPS"); do
        for e in corelog walrus commitlog; do
          bench append.mb_per_s --engine "$e" --fsync "$1" --partitions 2 --total-bytes "$2" $MB1 --serve none >/dev/null
          ap[$e]+=" $(jget "$JSON_DIR/b.json" append.mb_per_s)"
          rd[$e]+=" $(jget "$JSON_DIR/b.json" poll.mb_per_s)"
        done
      done
      for e in walrus commitlog; do
        row ratio "appends vs a peer, \`fsync=$1\`, $2 (MB/s)" "$e" "${ap[$e]}" "${ap[corelog]}"
        row ratio "read back and checked vs a peer, \`fsync=$1\` (MB/s)" "$e" "${rd[$e]}" "${rd[corelog]}"
      done
      unset ap rd
    done
    ;;
  wire)
    # Iggy's protocol over loopback TCP against the same workload embedded: 1000 B messages x 1000
    # per batch (Iggy's bench -m 1000 -P 1000), 1 GB, 2 partitions, 2 producers with one request in
    # flight each (like the SDK), then 2 consumers reading everything back verified, 1000 messages
    # (one batch) per poll like Iggy's bench. corelog-server
    # runs with its default shards; IGGY_SERVER=host:port adds a real Iggy server (its data is not
    # dropped between runs).
    cargo build --release -q -p corelog-server
    S=target/release/corelog-server
    W=(--partitions 2 --producers 2 --inflight 1 --consumers 2 --total-bytes 1GB --message-size 1000 --messages-per-batch 1000 --poll-bytes 1MB --warmup 0)
    for fsync in never batch; do
      declare -A ap=() rd=() p99=() rp99=()
      for _ in $(seq "$REPS"); do
        bench append.mb_per_s --fsync "$fsync" "${W[@]}" >/dev/null
        ap[embedded]+=" $(jget "$JSON_DIR/b.json" append.mb_per_s)"; rd[embedded]+=" $(jget "$JSON_DIR/b.json" poll.mb_per_s)"
        p99[embedded]+=" $(jget "$JSON_DIR/b.json" append.latency_us.p99)"; rp99[embedded]+=" $(jget "$JSON_DIR/b.json" poll.latency_us.p99)"
        fresh
        "$S" --dir "$DATA_DIR/s" --listen 127.0.0.1:0 --fsync "$fsync" 2>"$JSON_DIR/s.log" &
        spid=$!
        for _ in $(seq 100); do grep -q "listening on" "$JSON_DIR/s.log" && break; sleep 0.1; done
        addr=$(sed -n 's/.*listening on \([0-9.:]*\),.*/\1/p' "$JSON_DIR/s.log" | head -1)
        "$B" --quiet --target "tcp://$addr" --json "$JSON_DIR/b.json" "${W[@]}" >"$JSON_DIR/b.out" 2>&1 || { cat "$JSON_DIR/b.out"; kill -INT "$spid"; exit 1; }
        kill -INT "$spid"; wait "$spid"
        ap[server]+=" $(jget "$JSON_DIR/b.json" append.mb_per_s)"; rd[server]+=" $(jget "$JSON_DIR/b.json" poll.mb_per_s)"
        p99[server]+=" $(jget "$JSON_DIR/b.json" append.latency_us.p99)"; rp99[server]+=" $(jget "$JSON_DIR/b.json" poll.latency_us.p99)"
        if [[ -n "${IGGY_SERVER:-}" ]]; then
          "$B" --quiet --target "tcp://$IGGY_SERVER" --json "$JSON_DIR/b.json" "${W[@]}" >"$JSON_DIR/b.out" 2>&1 || { cat "$JSON_DIR/b.out"; exit 1; }
          ap[iggy]+=" $(jget "$JSON_DIR/b.json" append.mb_per_s)"; rd[iggy]+=" $(jget "$JSON_DIR/b.json" poll.mb_per_s)"
          p99[iggy]+=" $(jget "$JSON_DIR/b.json" append.latency_us.p99)"; rp99[iggy]+=" $(jget "$JSON_DIR/b.json" poll.latency_us.p99)"
        fi
      done
      row ratio "sends over TCP, \`fsync=$fsync\`, 1 MB batches (MB/s)" "embedded corelog" "${ap[embedded]}" "${ap[server]}"
      row ratio "send p99 over TCP, \`fsync=$fsync\` (µs)" "embedded corelog" "${p99[embedded]}" "${p99[server]}"
      row ratio "polls over TCP, verified, \`fsync=$fsync\` (MB/s)" "embedded corelog" "${rd[embedded]}" "${rd[server]}"
      row ratio "poll p99 over TCP, \`fsync=$fsync\` (µs)" "embedded corelog" "${rp99[embedded]}" "${rp99[server]}"
      if [[ -n "${IGGY_SERVER:-}" ]]; then
        row ratio "sends over TCP, \`fsync=$fsync\` (MB/s)" "Iggy server" "${ap[iggy]}" "${ap[server]}" ">=" 2
        row ratio "send p99 over TCP, \`fsync=$fsync\` (µs)" "Iggy server" "${p99[iggy]}" "${p99[server]}" "<=" 0.5
        row ratio "polls over TCP, verified (MB/s)" "Iggy server" "${rd[iggy]}" "${rd[server]}" ">=" 2
        row ratio "poll p99 over TCP (µs)" "Iggy server" "${rp99[iggy]}" "${rp99[server]}" "<=" 0.5
      fi
      unset ap rd p99 rp99
    done
    ;;
  iggy)
    # Iggy's own benchmark at its default shapes against a real Iggy server and corelog-server,
    # same VM, same run (issue 21): IGGY_BENCH (iggy-bench) -m 1000 -P 1000 -b $IGGY_BATCHES
    # (default 300 batches of 1 MB per actor) with pinned-producer (8 producers, 8 streams), then
    # pinned-consumer (8 consumers), balanced-producer (8 producers, 1 stream, 24 partitions) and
    # end-to-end-producing-consumer (8), each server started fresh per repetition. IGGY_SERVER_BIN
    # (iggy-server) runs with 2 pinned shards (cpu_allocation 2), corelog-server with its
    # defaults (a shard per core). Page cache first; then --enforce-fsync (Iggy: an fsync per
    # write; corelog-server: --fsync batch). Per shape: throughput, iggy-bench's p50/p99/p99.9
    # per batch, and the server's CPU seconds (utime + stime from /proc, login pool included)
    # per GB iggy-bench says it moved. Last, pinned-producer at half of Iggy's median page-cache
    # peak (--rate-limit) against both, for the tail, and the same rate from corelog-bench --target
    # --rate (open loop, latency from each batch's schedule).
    [[ -x "${IGGY_SERVER_BIN:-}" && -x "${IGGY_BENCH:-}" ]] || { echo "bench.sh iggy: set IGGY_SERVER_BIN and IGGY_BENCH to the iggy-server and iggy-bench binaries" >&2; exit 1; }
    cargo build --release -q -p corelog-server
    S=${CARGO_TARGET_DIR:-target}/release/corelog-server
    IGGY_BATCHES=${IGGY_BATCHES:-300}
    SHAPES="pinned-producer pinned-consumer balanced-producer end-to-end-producing-consumer"
    cpu_s() { awk -v t="$(getconf CLK_TCK)" '{ print ($14 + $15) / t }' "/proc/$1/stat"; }
    serve() { # $1 iggy|corelog, $2 page|fsync: starts it on a fresh directory; sets spid, addr
      fresh
      if [ "$1" = iggy ]; then
        IGGY_SYSTEM_PATH="$DATA_DIR/iggy" IGGY_TCP_ADDRESS=127.0.0.1:18090 IGGY_HTTP_ENABLED=false \
          IGGY_QUIC_ENABLED=false IGGY_WEBSOCKET_ENABLED=false IGGY_SYSTEM_SHARDING_CPU_ALLOCATION=2 \
          IGGY_ROOT_USERNAME=iggy IGGY_ROOT_PASSWORD=iggy "$IGGY_SERVER_BIN" >"$JSON_DIR/s.log" 2>&1 &
        spid=$!; addr=127.0.0.1:18090
        for _ in $(seq 100); do grep -q "Client listener (TCP) accepting" "$JSON_DIR/s.log" && break; sleep 0.1; done
      else
        local pol=never; [ "$2" = fsync ] && pol=batch
        "$S" --dir "$DATA_DIR/s" --listen 127.0.0.1:0 --fsync "$pol" 2>"$JSON_DIR/s.log" &
        spid=$!
        for _ in $(seq 100); do grep -q "listening on" "$JSON_DIR/s.log" && break; sleep 0.1; done
        addr=$(sed -n 's/.*listening on \([0-9.:]*\),.*/\1/p' "$JSON_DIR/s.log" | head -1)
      fi
      SERVER_PIDS+=("$spid")
    }
    igb() { # $1 shape, rest: iggy-bench's flags before the shape; prints "MB/s p50 p99 p999 cpu_s_per_GB"
      local shape=$1; shift
      local s0; s0=$(cpu_s "$spid")
      timeout 900 "$IGGY_BENCH" "$@" -m 1000 -P 1000 -b "$IGGY_BATCHES" "$shape" tcp --server-address "$addr" \
        >"$JSON_DIR/igb.out" 2>&1 || true
      python3 - "$JSON_DIR/igb.out" "$s0" "$(cpu_s "$spid")" <<'PY' || echo "FAILED FAILED FAILED FAILED FAILED"
import re, sys
t = re.sub(r"\x1b\[[0-9;]*m", "", open(sys.argv[1]).read())
m = re.search(r"Results: Total throughput: ([0-9.]+) MB/s.*?p50 latency: ([0-9.]+) ms.*?"
              r"p99 latency: ([0-9.]+) ms, p999 latency: ([0-9.]+) ms", t)
d = re.search(r"([0-9.]+)(MB|GB) of data processed", t)
if not m or not d:
    sys.stderr.write("iggy-bench printed no results:\n" + t[-2000:] + "\n")
    sys.exit(1)
gb = float(d.group(1)) / (1000 if d.group(2) == "MB" else 1)
cpu = float(sys.argv[3]) - float(sys.argv[2])
print(m.group(1), m.group(2), m.group(3), m.group(4), "%.3f" % (cpu / gb))
PY
    }
    stop() { kill -INT "$spid"; wait "$spid" || true; SERVER_PIDS=(); }
    declare -A F=() # F[mode.shape.srv.k] = figures over the runs; k: t p50 p99 p999 cpu
    for mode in page fsync; do
      flags=(); [ "$mode" = fsync ] && flags=(--enforce-fsync)
      for _ in $(seq "$REPS"); do
        for srv in iggy corelog; do
          serve "$srv" "$mode"
          for shape in $SHAPES; do
            read -r t p50 p99 p999 cpu < <(igb "$shape" "${flags[@]}")
            for k in t p50 p99 p999 cpu; do F[$mode.$shape.$srv.$k]+=" ${!k}"; done
          done
          stop
        done
      done
      what="page cache"; [ "$mode" = fsync ] && what="--enforce-fsync"
      for shape in $SHAPES; do
        f() { echo "${F[$mode.$shape.$1.$2]}"; }
        row ratio "iggy-bench $shape, $what (MB/s)" "Iggy server" "$(f iggy t)" "$(f corelog t)" ">=" 1.5
        row ratio "iggy-bench $shape p50, $what (ms)" "Iggy server" "$(f iggy p50)" "$(f corelog p50)"
        row ratio "iggy-bench $shape p99, $what (ms)" "Iggy server" "$(f iggy p99)" "$(f corelog p99)"
        row ratio "iggy-bench $shape p99.9, $what (ms)" "Iggy server" "$(f iggy p999)" "$(f corelog p999)"
        row ratio "$shape, $what: server CPU per GB moved (s/GB)" "Iggy server" "$(f iggy cpu)" "$(f corelog cpu)" "<=" 0.5
      done
    done
    # The tail at a rate both can hold: half of Iggy's median page-cache pinned-producer peak.
    peak=$(median ${F[page.pinned-producer.iggy.t]}); rate=$((peak / 2))
    declare -A R=()
    for _ in $(seq "$REPS"); do
      for srv in iggy corelog; do
        serve "$srv" page
        read -r t p50 p99 p999 cpu < <(igb pinned-producer --rate-limit "${rate}MB")
        for k in t p50 p99 p999 cpu; do R[$srv.$k]+=" ${!k}"; done
        stop
      done
    done
    row ratio "iggy-bench pinned-producer at ${rate} MB/s (half of Iggy's peak), page cache (MB/s)" "Iggy server" "${R[iggy.t]}" "${R[corelog.t]}"
    row ratio "same, p50 (ms)" "Iggy server" "${R[iggy.p50]}" "${R[corelog.p50]}"
    row ratio "same, p99 (ms)" "Iggy server" "${R[iggy.p99]}" "${R[corelog.p99]}" "<=" 0.5
    row ratio "same, p99.9 (ms)" "Iggy server" "${R[iggy.p999]}" "${R[corelog.p999]}" "<=" 0.5
    row ratio "same: server CPU per GB moved (s/GB)" "Iggy server" "${R[iggy.cpu]}" "${R[corelog.cpu]}" "<=" 0.5
    # The same rate from corelog-bench: open loop, latency from each batch's scheduled send
    # (iggy-bench's counts from the send, after its rate limiter let it go). pinned-producer's
    # shape: 8 producers with one connection and one request in flight each, 1 MB batches
    # (1000 x 1000 B), 300 batches each (2.4 GB) after half a second of warm-up; one stream of 8
    # partitions (a producer's own) where iggy-bench makes 8 streams of one.
    declare -A Q=()
    for run in $(seq "$REPS"); do
      for srv in iggy corelog; do
        serve "$srv" page
        "$B" --quiet --target "tcp://$addr" --rate "$rate" --producers 8 --inflight 1 --partitions 8 \
          --message-size 1000 --messages-per-batch 1000 --total-bytes 2400MB --warmup 0.5 --no-poll \
          --json "$JSON_DIR/q.json" >"$JSON_DIR/q.out" 2>&1 || { cat "$JSON_DIR/q.out" >&2; echo '{}' >"$JSON_DIR/q.json"; }
        read -r t p50 p99 p999 held got < <(python3 - "$JSON_DIR/q.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
try:
    a, r = d["append"], d["rate"]
    l = a["latency_us"]
    print(a["mb_per_s"], l["p50"] / 1e3, l["p99"] / 1e3, l["p999"] / 1e3, r["held"], r["achieved_mb_per_s"])
except (KeyError, TypeError):
    print("FAILED FAILED FAILED FAILED False 0")
PY
        )
        for k in t p50 p99 p999; do Q[$srv.$k]+=" ${!k}"; done
        [ "$held" = True ] || printf 'corelog-bench --rate %s against the %s server, run %s: RATE NOT HELD (it took %.0f MB/s).\n' \
          "$rate" "$([ "$srv" = iggy ] && echo Iggy || echo corelog)" "$run" "$got" >>"$JSON_DIR/notes"
        stop
      done
    done
    row ratio "corelog-bench --target --rate ${rate} (the same half of Iggy's peak; 8 producers x 1 connection, 1 MB batches, latency from each batch's schedule), page cache (MB/s)" "Iggy server" "${Q[iggy.t]}" "${Q[corelog.t]}"
    row ratio "same, p50 from schedule (ms)" "Iggy server" "${Q[iggy.p50]}" "${Q[corelog.p50]}"
    row ratio "same, p99 from schedule (ms)" "Iggy server" "${Q[iggy.p99]}" "${Q[corelog.p99]}" "<=" 0.5
    row ratio "same, p99.9 from schedule (ms)" "Iggy server" "${Q[iggy.p999]}" "${Q[corelog.p999]}" "<=" 0.5
    unset F R Q
    ;;
  partitions)
    # A broker's shape: the same appends spread over 4, 100, 1,000, 2,000 and 10,000 partitions (default
    # 1 GiB segments), 100-byte messages, 100 per batch, producer threads, fsync never and batch;
    # msgs/s and MB/s, each count against 4 partitions in the same run. Writes a chart of the cost
    # curve (docs/bench/partitions.svg) from the medians.
    P="--message-size 100 --messages-per-batch 100 --warmup 0 --no-poll --segment-bytes 1GiB"
    for fsync in never batch; do
      total=1GB; [ "$fsync" = batch ] && total=256MB
      declare -A m=() mb=()
      for _ in $(seq "$REPS"); do
        for n in 4 100 1000 2000 10000; do
          m[$n]+=" $(bench append.msgs_per_s --partitions $n --fsync $fsync --total-bytes $total $P)"
          mb[$n]+=" $(jget "$JSON_DIR/b.json" append.mb_per_s)"
        done
      done
      for n in 100 1000 2000 10000; do
        target=(); [ "$fsync" = never ] && [ "$n" = 2000 ] && target=(">=" 0.5)
        row ratio "$n partitions, \`fsync=$fsync\`, 100 B messages (msgs/s)" "4 partitions" "${m[4]}" "${m[$n]}" "${target[@]}"
      done
      for n in 4 100 1000 2000 10000; do
        row value "$n partitions, \`fsync=$fsync\` (MB/s)" "${mb[$n]}" - - "MB/s"
        echo "$fsync $n $(median ${m[$n]})" >>"$JSON_DIR/partitions"
      done
      unset m mb
    done
    python3 scripts/partitions_chart.py "$JSON_DIR/partitions" docs/bench/partitions.svg
    ;;
  opens)
    # Opening a directory of N partitions with every partition recovered before Engine::open
    # returns (corelog-bench --reopen, after 100 MB of 100-byte messages, fsync never): as the
    # clean shutdown left it (clean-close records trusted) against the same directory with the
    # records removed, as a crash leaves it (each partition's tail verified, its data and
    # directory synced). Lower is better.
    P="--message-size 100 --messages-per-batch 100 --warmup 0 --no-poll --fsync never --total-bytes 100MB --reopen"
    for n in 1000 10000; do
      c=""; x=""
      for _ in $(seq "$REPS"); do
        c+=" $(bench reopen.clean.ms --partitions $n $P)"
        x+=" $(jget "$JSON_DIR/b.json" reopen.scanned.ms)"
      done
      row ratio "open $n partitions after a clean shutdown (ms)" "the same without clean-close records, as after a crash" "$x" "$c"
    done
    ;;
  prealloc)
    # What step preallocation keeps of whole-segment preallocation: the durable scenario's
    # appends (fsync=batch, 8 partitions, 32 in flight, 1 MiB batches, 1 GB) with the default
    # steps (1 MiB doubling to 64 MiB, 1 GiB a shard) against every segment preallocated whole
    # when created (steps of 1 GiB, the segment size), and against no preallocation, same run.
    D="--fsync batch --partitions 8 --inflight 16 --total-bytes 1GB --no-poll $MB1"
    s1=""; w=""; z=""
    for _ in $(seq "$REPS"); do
      s1+=" $(bench append.mb_per_s $D)"
      w+=" $(bench append.mb_per_s $D --prealloc-step-min 1GiB --prealloc-step-max 1GiB --prealloc-budget 64GiB)"
      z+=" $(bench append.mb_per_s $D --no-preallocate)"
    done
    row ratio "durable appends, \`fsync=batch\`, 8 partitions, preallocated in steps (MB/s)" "each segment preallocated whole" "$w" "$s1"
    row ratio "same, not preallocated" "each segment preallocated whole" "$w" "$z"
    ;;
  syncs)
    # Group commit across partitions: fsync=batch, 100-byte messages, 100 per batch, producer
    # threads; each partition's sync sent to the ring when it is ready, a shard's dirty
    # partitions side by side (--syncs together, the default), against one fdatasync at a time
    # per shard (--syncs one-at-a-time), same run. p99 from each batch's scheduled send. With
    # the bench's default 4 appends in flight per producer few partitions are dirty at once;
    # 1,000 partitions with 256 in flight per producer have hundreds dirty at once.
    P="--message-size 100 --messages-per-batch 100 --warmup 0 --no-poll --fsync batch --total-bytes 128MB"
    for c in 8:4 100:4 1000:4 1000:256; do
      n=${c%:*}; inflight=${c#*:}
      t=""; o=""; lt=""; lo=""
      for _ in $(seq "$REPS"); do
        t+=" $(bench append.msgs_per_s --partitions $n --inflight $inflight $P --syncs together)"
        lt+=" $(jget "$JSON_DIR/b.json" append.latency_us.p99)"
        o+=" $(bench append.msgs_per_s --partitions $n --inflight $inflight $P --syncs one-at-a-time)"
        lo+=" $(jget "$JSON_DIR/b.json" append.latency_us.p99)"
      done
      what="$n partitions, $inflight in flight per producer, \`fsync=batch\`, syncs side by side"
      row ratio "$what (msgs/s)" "one at a time per shard (\`--syncs one-at-a-time\`)" "$o" "$t"
      row ratio "$what, append p99 (µs)" "one at a time per shard" "$lo" "$lt"
    done
    ;;
  admission)
    # Admission against hashing, in memory: criterion's admission bench (`Batch::admit`, one XXH3
    # call over the whole batch, one per frame), ~1 MiB batches at several message sizes; each
    # run's mean of each case, in GiB/s (2^30 bytes of batch per second).
    for _ in $(seq "$REPS"); do
      rm -rf "${CARGO_TARGET_DIR:-target}/criterion"
      cargo bench -q -p corelog-segment --bench admission -- --warm-up-time 1 --measurement-time 2 --noplot >"$JSON_DIR/crit.out" 2>&1 || { cat "$JSON_DIR/crit.out" >&2; exit 1; }
      python3 - "${CARGO_TARGET_DIR:-target}/criterion" >>"$JSON_DIR/crit" <<'PY'
import json, os, sys
root = sys.argv[1]
for group in ("admit", "xxh3_whole", "xxh3_per_frame"):
    g = os.path.join(root, group)
    for dirpath, _, files in os.walk(g):
        if os.path.basename(dirpath) == "new" and "estimates.json" in files:
            case = os.path.relpath(os.path.dirname(dirpath), g)
            bench = json.load(open(os.path.join(dirpath, "benchmark.json")))
            ns = json.load(open(os.path.join(dirpath, "estimates.json")))["mean"]["point_estimate"]
            gib = bench["throughput"]["Bytes"] / ns * 1e9 / 2**30
            print(group, case, gib)
PY
    done
    python3 - "$JSON_DIR/crit" >"$JSON_DIR/crit.rows" <<'PY'
import collections, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    group, case, v = line.split()
    runs[(group, case)].append(v)
import re
cases = sorted({c for _, c in runs}, key=lambda c: -int(re.findall(r"(\d+)msgs", c)[-1]))
for c in cases:
    print(c, " ".join(runs[("xxh3_whole", c)]), "|", " ".join(runs[("xxh3_per_frame", c)]), "|", " ".join(runs[("admit", c)]))
PY
    while IFS='|' read -r head perframe admit; do
      set -- $head; c=$1; shift; whole="$*"
      row ratio "admission \`Batch::admit\`, $c, in memory (GiB/s)" "one XXH3 call over the whole batch" "$whole" "$admit"
      row ratio "admission \`Batch::admit\`, $c, in memory (GiB/s)" "one XXH3 call per frame (the format's limit)" "$perframe" "$admit"
    done <"$JSON_DIR/crit.rows"
    ;;
  cluster)
    . scripts/bench_cluster.sh
    ;;
  tier)
    . scripts/bench_tier.sh
    ;;
  *) echo "unknown scenario $s" >&2; exit 2 ;;
  esac
done

runs=$(wc -l <"$JSON_DIR/cold"); cold=$(grep -c '^cold$' "$JSON_DIR/cold" || true)
if [ "$runs" = 0 ]; then
  cache="No run touched the disk (in memory), so the page cache played no part"
elif [ "$cold" = "$runs" ]; then
  cache="The page cache was dropped before each of the $runs runs (all started cold)"
else
  cache="**The page cache could not be dropped before $((runs - cold)) of the $runs runs; those started warm** ($(grep -v '^cold$' "$JSON_DIR/cold" | sort | uniq -c | head -3 | tr -s ' ' | tr '\n' ';'))"
fi
# What waking an idle vCPU costs depends on the guest's idle driver: with haltpoll's
# guest_halt_poll_ns at 0 an idle vCPU halts at once (docs/bench/profiles.md section 5).
idle=$(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo none)
hp=/sys/module/haltpoll/parameters/guest_halt_poll_ns
if [ -r "$hp" ]; then idle+=" (guest_halt_poll_ns $(cat "$hp"))"; fi
{
  echo "<!-- generated by scripts/bench.sh; do not edit by hand -->"
  echo "Generated by \`$COMMAND\` on $(date -u +%Y-%m-%d): $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(free -g | awk '/Mem:/{print $2}') GiB, Linux $(uname -r), $(df -T "$DATA_DIR" | awk 'NR==2{print $2" on "$1}'), cpuidle driver $idle; load average $load_before before the run, $(cut -d' ' -f1-3 /proc/loadavg) after. Each figure: the median of $REPS runs (min–max); each ratio: the median (min–max) of the per-run ratios. $cache."
  echo
  echo "| scenario | baseline | baseline figure | corelog | ratio | target | |"
  echo "|---|---|---|---|---|---|---|"
  cat "$JSON_DIR/rows"
  if [ -s "$JSON_DIR/notes" ]; then echo; cat "$JSON_DIR/notes"; fi
} >"$OUT"
echo
echo "results written to $OUT"

# The README shows the default set's results as they are, between its markers.
if [ "$SCENARIOS" = "$DEFAULT_SCENARIOS" ] && [ "$OUT" = docs/bench/results.md ]; then
  python3 - "$OUT" README.md <<'PY'
import re, sys
res, readme = open(sys.argv[1]).read(), open(sys.argv[2]).read()
begin, end = "<!-- bench.sh results: begin -->", "<!-- bench.sh results: end -->"
if begin not in readme or end not in readme:
    sys.exit("README.md has no bench.sh results markers")
head, rest = readme.split(begin, 1)
_, tail = rest.split(end, 1)
open(sys.argv[2], "w").write(head + begin + "\n" + res.rstrip("\n") + "\n" + end + tail)
print("README.md: results block rewritten")
PY
else
  echo "(not the default scenarios into $OUT: README.md left as it was)"
fi
