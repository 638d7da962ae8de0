# The `cluster` scenario of scripts/bench.sh (sourced by it: uses its fresh, row, note, REPS,
# JSON_DIR, DATA_DIR and SERVER_PIDS, whose servers its exit trap kills).
#
# Three-node clusters on loopback, same run: Apache Iggy's own cluster (the prebuilt peers at
# the pinned commit, one copy of its core/server/config.toml with [cluster] enabled = true and
# three [[cluster.nodes]], each node with IGGY_CONFIG_PATH, its own IGGY_SYSTEM_PATH,
# IGGY_SYSTEM_SHARDING_CPU_ALLOCATION=1 and --replica-id N) against corelog-server's cluster
# (--node N --cluster FILE, 2 shards), and corelog-server alone. iggy-bench -m 1000 -P 1000
# -b $CLUSTER_BATCHES: 8 pinned producers (8 streams), then 8 pinned consumers over what they
# wrote, pointed at the third node (the SDK moves to the leader). Page cache (corelog: --fsync
# never) then --enforce-fsync (corelog: --fsync batch). Then failover: kill -9 of corelog's
# leader, time to the first send acknowledged through the new leader (iggy CLI, one message
# per try, through each survivor in turn), $FAILOVER_RUNS runs.
#
# Environment: IGGY_SERVER_BIN, IGGY_BENCH, IGGY_CLI (the peers; else extracted from
# IGGY_PEERS), IGGY_CONFIG (Iggy's config.toml to copy), CLUSTER_BATCHES (300),
# FAILOVER_RUNS (5).

CLUSTER_BATCHES=${CLUSTER_BATCHES:-300}
FAILOVER_RUNS=${FAILOVER_RUNS:-5}
IGGY_PEERS=${IGGY_PEERS:-/work/shared/peers/iggy-cc269ef-x86_64-linux.tar.xz}
IGGY_CONFIG=${IGGY_CONFIG:-/work/iggy-src/core/server/config.toml}
if [[ ! -x "${IGGY_SERVER_BIN:-}" || ! -x "${IGGY_BENCH:-}" || ! -x "${IGGY_CLI:-}" ]]; then
  [ -f "$IGGY_PEERS" ] || { echo "bench.sh cluster: set IGGY_SERVER_BIN, IGGY_BENCH and IGGY_CLI, or IGGY_PEERS to the peers' tarball" >&2; exit 1; }
  mkdir -p "$JSON_DIR/peers" && tar -xJf "$IGGY_PEERS" -C "$JSON_DIR/peers"
  IGGY_SERVER_BIN=$JSON_DIR/peers/iggy-server IGGY_BENCH=$JSON_DIR/peers/iggy-bench IGGY_CLI=$JSON_DIR/peers/iggy
fi
[ -f "$IGGY_CONFIG" ] || { echo "bench.sh cluster: IGGY_CONFIG: no Iggy config.toml at $IGGY_CONFIG" >&2; exit 1; }
ldconfig -p | grep -q 'libhwloc\.so\.15' || apt-get install -y -qq libhwloc15 libudev1 >/dev/null
cargo build --release -q -p corelog-server
S=${CARGO_TARGET_DIR:-target}/release/corelog-server
# Room for three replicas of what the producers write and fresh's 2.5 GB warm-up file, with 2 GB
# to spare for whoever else shares the disk (a full disk would fail the runs and everyone else's
# work): checked before every start, the last run's data removed, waiting up to 5 minutes for it.
room() {
  local need=$((3 * 8 * CLUSTER_BATCHES * 11 / 10 + 2500 + 2000)) avail t
  rm -rf "${DATA_DIR:?}"/*
  for t in $(seq 30); do
    avail=$(df -Pm "$DATA_DIR" | awk 'NR==2{print $4}')
    [ "$avail" -ge "$need" ] && return 0
    echo "bench.sh cluster: $DATA_DIR has $avail MB free, the next run needs $need MB; waiting" >&2
    sleep 10
  done
  echo "bench.sh cluster: $DATA_DIR has $avail MB free; the runs need $need MB (three replicas of 8 x $CLUSTER_BATCHES MB, the 2.5 GB warm-up, 2 GB to spare): set DATA_DIR elsewhere or CLUSTER_BATCHES lower" >&2
  exit 1
}
room
if [ "$(stat -f -c %T "$DATA_DIR")" = tmpfs ]; then
  echo "- The data directories were on tmpfs (memory): an fsync there returns at once, so the fsync rows measure each system's path through its fsyncs without a device's wait." >>"$JSON_DIR/notes"
fi
CLUSTER_GB=$(python3 -c "print(8 * $CLUSTER_BATCHES * 1000 * 1000 / 1e9)")
plain() { sed 's/\x1b\[[0-9;]*m//g' "$@"; }

# Iggy's config: [cluster] enabled, the shipped roster replaced by three nodes on loopback.
python3 - "$IGGY_CONFIG" "$JSON_DIR/iggy-cluster.toml" <<'PY'
import re, sys
src = open(sys.argv[1]).read()
head, sep, rest = src.partition("\n[cluster]\n")
assert sep, "no [cluster] section"
rest, n = re.subn(r"^enabled = false$", "enabled = true", rest, count=1, flags=re.M)
assert n == 1, "no enabled = false under [cluster]"
src = head + sep + rest
src = re.sub(r"^\[\[cluster\.nodes\]\]\n(?:[a-z_]+ = .*\n)+\n?", "", src, flags=re.M)
nodes = "".join(f'[[cluster.nodes]]\nname = "node-{i}"\nip = "127.0.0.1"\nreplica_id = {i}\n'
                f"ports = {{ tcp = {18101 + i}, tcp_replica = {18201 + i} }}\n\n" for i in range(3))
assert "\n[system.sharding]\n" in src
src = src.replace("\n[system.sharding]\n", "\n" + nodes + "[system.sharding]\n", 1)
open(sys.argv[2], "w").write(src)
PY
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$JSON_DIR/corelog-cluster.secret"
chmod 600 "$JSON_DIR/corelog-cluster.secret"
{
  echo "shards = 2"
  echo 'secret_file = "corelog-cluster.secret"'
  for i in 1 2 3; do printf '[[node]]\nid = %d\nclient = "127.0.0.1:%d"\nreplica = "127.0.0.1:%d"\n' "$i" $((18110 + i)) $((18210 + i)); done
} >"$JSON_DIR/corelog-cluster.toml"

# Every pattern-file pair: waits until each file holds the pattern; fails after $1 seconds.
wait_logs() {
  local deadline=$((SECONDS + $1)) pat=$2 f; shift 2
  for f in "$@"; do
    until plain "$f" 2>/dev/null | grep -q "$pat"; do
      [ "$SECONDS" -lt "$deadline" ] || return 1
      sleep 0.2
    done
  done
}

# The last lines of each server log that say something went wrong.
log_trouble() {
  local f
  for f in "$@"; do
    echo "  - \`$(basename "$f")\`:"
    plain "$f" | grep -E ' (ERROR|WARN) |panicked|error:' | grep -v "default credentials" | tail -n 4 | cut -c1-400 | sed 's/^/    `/; s/$/`/' || true
  done
}

# Starts a system; sets ADDR (where iggy-bench is pointed) and LOGS; fails if it does not come up.
start_system() { # $1 iggy|corelog|single, $2 page|fsync
  local sys=$1 mode=$2 pol=never i
  [ "$mode" = fsync ] && pol=batch
  LOGS=(); DIRS=()
  case $sys in
  iggy)
    for i in 0 1 2; do
      mkdir -p "$DATA_DIR/iggy$i"
      IGGY_CONFIG_PATH="$JSON_DIR/iggy-cluster.toml" IGGY_SYSTEM_PATH="$DATA_DIR/iggy$i" \
        IGGY_SYSTEM_SHARDING_CPU_ALLOCATION=1 IGGY_SYSTEM_SHARDING_PIN_CORES=false \
        IGGY_HTTP_ENABLED=false IGGY_QUIC_ENABLED=false IGGY_WEBSOCKET_ENABLED=false \
        IGGY_ROOT_USERNAME=iggy IGGY_ROOT_PASSWORD=iggy \
        "$IGGY_SERVER_BIN" --replica-id "$i" >"$JSON_DIR/iggy-node$i.log" 2>&1 &
      SERVER_PIDS+=($!); LOGS+=("$JSON_DIR/iggy-node$i.log"); DIRS+=("$DATA_DIR/iggy$i")
    done
    ADDR=127.0.0.1:18103
    wait_logs 60 "replica mesh complete" "${LOGS[@]}"
    ;;
  corelog)
    for i in 1 2 3; do
      "$S" --dir "$DATA_DIR/corelog$i" --node "$i" --cluster "$JSON_DIR/corelog-cluster.toml" --fsync "$pol" \
        2>"$JSON_DIR/corelog-node$i.log" &
      SERVER_PIDS+=($!); LOGS+=("$JSON_DIR/corelog-node$i.log"); DIRS+=("$DATA_DIR/corelog$i")
    done
    ADDR=127.0.0.1:18113
    wait_logs 60 "listening on" "${LOGS[@]}" && wait_logs 60 "group 0: leader is now node" "${LOGS[@]}"
    ;;
  single)
    "$S" --dir "$DATA_DIR/single" --listen 127.0.0.1:0 --fsync "$pol" 2>"$JSON_DIR/single.log" &
    SERVER_PIDS+=($!); LOGS=("$JSON_DIR/single.log"); DIRS=("$DATA_DIR/single")
    wait_logs 30 "listening on" "${LOGS[@]}" || return 1
    ADDR=$(plain "$JSON_DIR/single.log" | sed -n 's/.*listening on \([0-9.:]*\),.*/\1/p' | head -1)
    ;;
  esac
}

# Stops every server started (SIGINT, then SIGKILL after 20 s).
stop_servers() {
  local p t
  for p in "${SERVER_PIDS[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  for p in "${SERVER_PIDS[@]}"; do
    for t in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  SERVER_PIDS=()
}

# A corelog node logs each group's state as it stops ("cluster at shutdown"): acknowledgements
# refused for running ahead of the durable point ("early acks") and peers' messages dropped for a
# batch that did not verify ("refused messages") must both be 0. Prints one word per node, 1 or
# FAILED (with a note); $1 what, the rest the nodes' logs.
shutdown_checks() {
  local what=$1 f lines bad; shift
  for f in "$@"; do
    lines=$(plain "$f" | grep "cluster at shutdown" || true)
    bad=$(echo "$lines" | grep -v "early acks 0, .*refused messages 0;" || true)
    if [ -z "$lines" ]; then
      echo "- **FAILED**: $what: $(basename "$f") logged no group state at shutdown (it did not stop cleanly)" >>"$JSON_DIR/notes"
      echo -n " FAILED"
    elif [ -n "$bad" ]; then
      { echo "- **FAILED**: $what: $(basename "$f") stopped with:"; echo "$bad" | head -n 4 | cut -c1-300 | sed 's/^/  `/; s/$/`/'; } >>"$JSON_DIR/notes"
      echo -n " FAILED"
    else
      echo -n " 1"
    fi
  done
}

# CPU seconds (utime + stime) of each server started, comma-separated; fails if one is gone.
servers_cpu() {
  local p
  for p in "${SERVER_PIDS[@]}"; do [ -r "/proc/$p/stat" ] || return 1; done
  for p in "${SERVER_PIDS[@]}"; do cat "/proc/$p/stat"; done |
    awk -v t="$(getconf CLK_TCK)" '{ printf "%s%.2f", (NR > 1 ? "," : ""), ($14 + $15) / t }'
}

# Bytes each server started has written (/proc/PID/io write_bytes: counted as pages are dirtied,
# so written back or not), comma-separated; fails if one is gone.
servers_written() {
  local p
  for p in "${SERVER_PIDS[@]}"; do [ -r "/proc/$p/io" ] || return 1; done
  for p in "${SERVER_PIDS[@]}"; do awk '/^write_bytes:/ { print $2 }' "/proc/$p/io"; done | paste -sd,
}

# Peak resident memory of each server started (/proc/PID/status VmHWM, MB), comma-separated;
# fails if one is gone.
servers_peak_mb() {
  local p
  for p in "${SERVER_PIDS[@]}"; do [ -r "/proc/$p/status" ] || return 1; done
  for p in "${SERVER_PIDS[@]}"; do awk '/^VmHWM:/ { printf "%.0f\n", $2 / 1024 }' "/proc/$p/status"; done | paste -sd,
}

# The largest and the sum of a comma-separated list: "max sum".
max_and_sum() {
  python3 -c 'import sys; v = [float(x) for x in sys.argv[1].split(",")]; print("%.0f %.0f" % (max(v), sum(v)))' "$1"
}

# Bytes each node's data directory holds (apparent sizes, its replication journal left out),
# comma-separated, in the order the nodes were started: DIRS.
nodes_held() {
  local d
  for d in "${DIRS[@]}"; do du -s --apparent-size -B1 --exclude=replica "$d" | cut -f1; done | paste -sd,
}

# Per node, bytes written over a run per byte the node holds afterwards: $1 before, $2 after
# (servers_written), $3 held (nodes_held); space-separated, in node order.
written_per_held() {
  python3 -c 'import sys
w0, w1, h = (list(map(float, a.split(","))) for a in sys.argv[1:4])
print(" ".join("%.3f" % ((b - a) / max(c, 1)) for a, b, c in zip(w0, w1, h)))' "$1" "$2" "$3"
}

# The $1-th figure (1-3) of each run's three in $2 ("a1 b1 c1 a2 b2 c2 ..."), each run's sorted
# from the largest; a run with a FAILED figure gives FAILED.
nth_of_three() {
  python3 -c 'import sys
n, v = int(sys.argv[1]), sys.argv[2].split()
out = []
for k in range(0, len(v), 3):
    run = v[k:k + 3]
    out.append("FAILED" if "FAILED" in run else sorted(run, key=float, reverse=True)[n - 1])
print(" ".join(out))' "$1" "$2"
}

# iggy-bench against ADDR; sets RES to "MB/s p50_ms p99_ms cpu busiest others": the servers' CPU
# seconds per GB, all of them, the busiest one's (the leader's), and each other's (the mean); or
# six FAILED with a note saying why. $1 what (for the note), $2 pinned-producer|pinned-consumer,
# rest: flags.
cluster_bench() {
  local what=$1 kind=$2 actors=--producers c0 c1 rc=0; shift 2
  [ "$kind" = pinned-consumer ] && actors=--consumers
  c0=$(servers_cpu) || c0=""
  timeout 300 "$IGGY_BENCH" "$@" -m 1000 -P 1000 -b "$CLUSTER_BATCHES" "$kind" "$actors" 8 tcp --server-address "$ADDR" \
    >"$JSON_DIR/igb.out" 2>&1 || rc=$?
  c1=$(servers_cpu) || c1=""
  if RES=$(python3 - "$JSON_DIR/igb.out" "$rc" "$c0" "$c1" "$CLUSTER_GB" <<'PY'
import re, sys
t = re.sub(r"\x1b\[[0-9;]*m", "", open(sys.argv[1]).read())
rc, c0, c1, gb = sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
m = re.search(r"Results: Total throughput: ([0-9.]+) MB/s.*?p50 latency: ([0-9.]+) ms.*?p99 latency: ([0-9.]+) ms", t)
if rc != "0" or not m or not c0 or not c1:
    sys.exit(1)
d = sorted((float(b) - float(a)) / gb for a, b in zip(c0.split(","), c1.split(",")))[::-1]
others = sum(d[1:]) / len(d[1:]) if len(d) > 1 else 0
print(m.group(1), m.group(2), m.group(3), "%.2f %.2f %.2f" % (sum(d), d[0], others))
PY
  ); then
    return 0
  fi
  RES="FAILED FAILED FAILED FAILED FAILED FAILED"
  {
    echo "- **FAILED**: $what (iggy-bench exit status $rc$([ "$rc" = 124 ] && echo ': killed after 300 s'); $( [ -z "$c1" ] && echo 'a server process was gone afterwards' || echo 'all servers still running')). iggy-bench's last errors:"
    plain "$JSON_DIR/igb.out" | grep -E 'ERROR|WARN|rror' | tail -n 4 | cut -c1-400 | sed 's/^/  `/; s/$/`/' || true
    echo "  Server logs:"
    log_trouble "${LOGS[@]}"
  } >>"$JSON_DIR/notes"
}

cat >>"$JSON_DIR/notes" <<EOF
- Shape: \`iggy-bench -m 1000 -P 1000 -b $CLUSTER_BATCHES pinned-producer --producers 8 tcp --server-address NODE3\` (8 streams of one partition, 1 MB batches, $CLUSTER_GB GB), then \`pinned-consumer --consumers 8\` over what it wrote, same flags; \`--enforce-fsync\` added in the fsync rows. Pointed at the third node: the SDK asks GET_CLUSTER_METADATA and moves to the leader. Latencies are iggy-bench's per-batch percentiles. A failed run is counted, never dropped; figures are the medians of the runs that did not fail.
- Iggy: \`iggy-server\` 0.9.0-edge.5 (commit cc269ef70), one copy of its \`core/server/config.toml\` with \`[cluster] enabled = true\` and three \`[[cluster.nodes]]\` (tcp 18101-18103, tcp_replica 18201-18203); each node with \`IGGY_CONFIG_PATH\`, its own \`IGGY_SYSTEM_PATH\`, \`IGGY_SYSTEM_SHARDING_CPU_ALLOCATION=1\`, \`IGGY_SYSTEM_SHARDING_PIN_CORES=false\` (pinned, all three one-shard nodes would sit on core 0 of the two) and \`--replica-id N\`; HTTP, QUIC and WebSocket off. Ready when every node logs "replica mesh complete".
- corelog: \`corelog-server --node N --cluster FILE\` (\`shards = 2\`: each node's two shards pinned to the two cores), \`--fsync never\` for the page-cache rows and \`--fsync batch\` for the fsync rows; alone: the same binary with \`--listen\`, two shards. Three nodes of either system share the machine's two cores (with iggy-bench and, here, other work: see the load average); the CPU rows are the servers' utime+stime from /proc over each run, per GB iggy-bench moved.
EOF
declare -A NAME=([iggy]="Iggy cluster (3 nodes)" [corelog]="corelog cluster (3 nodes)" [single]="corelog-server alone")
for mode in page fsync; do
  declare -A pt=() p50=() p99=() pcpu=() pmax=() poth=() ct=() c50=() c99=() ccpu=() wph=() mmax=() mall=()
  chk=""
  flags=(); [ "$mode" = fsync ] && flags=(--enforce-fsync)
  what="page cache"; [ "$mode" = fsync ] && what="fsync (Iggy: --enforce-fsync; corelog: --fsync batch)"
  for rep in $(seq "$REPS"); do
    for sys in iggy corelog single; do
      room
      fresh
      if start_system "$sys" "$mode"; then
        w0=$(servers_written) || w0=""
        cluster_bench "${NAME[$sys]}, $what, producers, run $rep" pinned-producer "${flags[@]}"
        w1=$(servers_written) || w1=""
        [[ $RES == FAILED* ]] && w1=""
        read -r a b c d e f <<<"$RES"; pt[$sys]+=" $a"; p50[$sys]+=" $b"; p99[$sys]+=" $c"; pcpu[$sys]+=" $d"; pmax[$sys]+=" $e"; poth[$sys]+=" $f"
        # Peak memory over the producers' run (before the consumers read through mappings).
        if m=$(servers_peak_mb) && [[ $RES != FAILED* ]]; then
          read -r a b <<<"$(max_and_sum "$m")"; mmax[$sys]+=" $a"; mall[$sys]+=" $b"
        else
          mmax[$sys]+=" FAILED"; mall[$sys]+=" FAILED"
        fi
        cluster_bench "${NAME[$sys]}, $what, consumers, run $rep" pinned-consumer "${flags[@]}"
        read -r a b c d _ _ <<<"$RES"; ct[$sys]+=" $a"; c50[$sys]+=" $b"; c99[$sys]+=" $c"; ccpu[$sys]+=" $d"
      else
        for v in pt p50 p99 pcpu pmax poth ct c50 c99 ccpu mmax mall; do declare -n arr=$v; arr[$sys]+=" FAILED"; unset -n arr; done
        { echo "- **FAILED**: ${NAME[$sys]}, $what, run $rep: did not come up within 60 s. Server logs:"; log_trouble "${LOGS[@]}"; } >>"$JSON_DIR/notes"
        w0=""; w1=""
      fi
      stop_servers
      [ "$sys" = corelog ] && chk+=$(shutdown_checks "${NAME[$sys]}, $what, run $rep" "${LOGS[@]}")
      # Bytes written over the producers' run per byte held once the nodes stopped (a clean
      # stop trims preallocated segment tails): one figure per node, in node order.
      if [ -n "$w0" ] && [ -n "$w1" ] && [ "$sys" != single ]; then
        wph[$sys]+=" $(written_per_held "$w0" "$w1" "$(nodes_held)")"
      elif [ "$sys" != single ]; then
        wph[$sys]+=" FAILED FAILED FAILED"
      fi
    done
  done
  short="page cache"; [ "$mode" = fsync ] && short="fsync"
  I="${NAME[iggy]}"
  row ratio "8 pinned producers, $what (MB/s)" "$I" "${pt[iggy]}" "${pt[corelog]}" ">=" 1.1
  row ratio "producers p99, $short (ms)" "$I" "${p99[iggy]}" "${p99[corelog]}" "<=" 1.0
  row ratio "producers p50, $short (ms)" "$I" "${p50[iggy]}" "${p50[corelog]}"
  row ratio "8 pinned consumers, after $short (MB/s)" "$I" "${ct[iggy]}" "${ct[corelog]}" ">=" 2
  row ratio "consumers p99, after $short (ms)" "$I" "${c99[iggy]}" "${c99[corelog]}" "<=" 0.5
  row ratio "consumers p50, after $short (ms)" "$I" "${c50[iggy]}" "${c50[corelog]}"
  row ratio "replicated produce against one node, $short (MB/s)" "${NAME[single]}" "${pt[single]}" "${pt[corelog]}" ">=" 0.28
  row ratio "produce p99 against one node, $short (ms)" "${NAME[single]}" "${p99[single]}" "${p99[corelog]}"
  row ratio "consume against one node, after $short (MB/s)" "${NAME[single]}" "${ct[single]}" "${ct[corelog]}"
  row ratio "servers' CPU per GB produced, $short (CPU s/GB, all nodes)" "$I" "${pcpu[iggy]}" "${pcpu[corelog]}" "<=" 1.0
  row ratio "same, the busiest node's (the leader's)" "$I" "${pmax[iggy]}" "${pmax[corelog]}" "<=" 1.0
  row ratio "same, each other node's (mean of the two)" "$I" "${poth[iggy]}" "${poth[corelog]}"
  row ratio "servers' CPU per GB consumed, after $short (CPU s/GB, all nodes)" "$I" "${ccpu[iggy]}" "${ccpu[corelog]}"
  row ratio "server CPU per GB produced, $short (CPU s/GB)" "${NAME[single]}" "${pcpu[single]}" "${pcpu[corelog]}"
  row ratio "peak resident memory over the producers' run, $short: the largest node (VmHWM, MB)" "$I" "${mmax[iggy]}" "${mmax[corelog]}"
  row ratio "same, all nodes together (MB)" "$I" "${mall[iggy]}" "${mall[corelog]}"
  for n in 1 2 3; do
    row ratio "bytes written per byte held, producers, $short: the node that wrote $(echo "the most|the second most|the least" | cut -d'|' -f"$n") (write_bytes over the run / bytes in its data directory afterwards; target per node: <= 1.15)" "$I" \
      "$(nth_of_three "$n" "${wph[iggy]}")" "$(nth_of_three "$n" "${wph[corelog]}")"
  done
  row failed "failed iggy-bench runs, $short (producers and consumers)" "$I" "${pt[iggy]}${ct[iggy]}" "${pt[corelog]}${ct[corelog]}${pt[single]}${ct[single]}"
  row failed "corelog nodes that stopped with an early acknowledgement or a refused peer message, $short (each node, each run)" "–" "" "$chk"
  unset pt p50 p99 pcpu pmax poth ct c50 c99 ccpu wph mmax mall
done

# Failover: corelog's cluster at --fsync batch with a one-partition topic; kill -9 of the node
# the cluster names leader, then a one-message send through a survivor (the SDK moves to the
# leader), a new one every 100 ms, the survivors in turn, each allowed 10 s, until one is
# acknowledged: milliseconds from the kill to that acknowledgement.
cli() { # $1 addr, rest: the command (no reconnect loop)
  local addr=$1; shift
  timeout 10 "$IGGY_CLI" --tcp-server-address "$addr" --tcp-reconnection-max-retries 0 -u iggy -p iggy "$@"
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }
echo "- Failover: corelog's cluster at \`--fsync batch\`, a topic of one partition; \`kill -9\` of the node the cluster names leader, then \`iggy message send\` of one message through a survivor every 100 ms (the survivors in turn, each try allowed 10 s; the SDK moves to the leader) until one is acknowledged: the figure is the time from the kill to that acknowledgement. Raft's election timeout here: 10 ticks of 50 ms, randomised up to twice that." >>"$JSON_DIR/notes"
fo=""
for run in $(seq "$FAILOVER_RUNS"); do
  room
  fresh
  if ! start_system corelog fsync || ! { cli 127.0.0.1:18111 stream create fo && cli 127.0.0.1:18111 topic create fo t 1 none \
    && cli 127.0.0.1:18111 message send -p 0 fo t before; } >"$JSON_DIR/cli.out" 2>&1; then
    fo+=" FAILED"
    { echo "- **FAILED**: failover run $run: the cluster did not take a first send. CLI:"; plain "$JSON_DIR/cli.out" | grep -iE 'error|caused|^    [A-Z]' | tail -n 3 | sed 's/^/  `/; s/$/`/' || true; log_trouble "${LOGS[@]}"; } >>"$JSON_DIR/notes"
    stop_servers; continue
  fi
  leader=$(plain "${LOGS[0]}" | sed -n 's/.*group 0: leader is now node \([0-9]*\).*/\1/p' | tail -1)
  rm -f "$JSON_DIR"/fo.*
  t0=$(now_ms)
  kill -9 "${SERVER_PIDS[$((leader - 1))]}"
  tries=()
  while [ ! -s "$JSON_DIR/fo.ok" ] && [ $(($(now_ms) - t0)) -lt 60000 ]; do
    for i in 1 2 3; do
      [ "$i" = "$leader" ] && continue
      k=${#tries[@]}
      (b=$(now_ms); cli "127.0.0.1:$((18110 + i))" message send -p 0 fo t after >"$JSON_DIR/fo.$k.out" 2>&1 && echo "$(now_ms) $b $i" >>"$JSON_DIR/fo.ok") &
      tries+=($!)
      sleep 0.1
      [ -s "$JSON_DIR/fo.ok" ] && break
    done
  done
  for p in "${tries[@]}"; do wait "$p" || true; done
  if [ -s "$JSON_DIR/fo.ok" ]; then
    read -r t1 b i < <(sort -n "$JSON_DIR/fo.ok" | head -1)
    fo+=" $((t1 - t0))"
    new=$(plain "${LOGS[$((i - 1))]}" | sed -n 's/.*group 0: leader is now node \([0-9]*\).*/\1/p' | tail -1)
    echo "- failover run $run: \`kill -9\` of node $leader (the leader); the first send acknowledged $((t1 - t0)) ms after (sent through node $i at $((b - t0)) ms, taking $((t1 - b)) ms; leader now node $new); ${#tries[@]} sends tried, $(wc -l <"$JSON_DIR/fo.ok") acknowledged" >>"$JSON_DIR/notes"
  else
    fo+=" FAILED"
    { echo "- **FAILED**: failover run $run: \`kill -9\` of node $leader; no send acknowledged within 60 s (${#tries[@]} tried). The last CLI errors:"
      cat "$JSON_DIR"/fo.*.out | plain | grep -iE 'error|caused|^    [A-Z]' | tail -n 3 | sed 's/^/  `/; s/$/`/' || true; log_trouble "${LOGS[@]}"; } >>"$JSON_DIR/notes"
  fi
  stop_servers
done
row value "corelog failover: \`kill -9\` of the leader to the first send acknowledged through the new leader, $FAILOVER_RUNS runs (ms): median (min–max)" "$fo" - - ms
row failed "failed failover runs" "–" "" "$fo"
