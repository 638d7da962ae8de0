#!/usr/bin/env bash
# corelog-server under hostile and careless clients, on loopback: one
# well-behaved producer (corelog-attack producer: 100 x 1000 B messages a
# request, one request in flight, at a fixed rate, latency from schedule)
# alone, then under each attack in turn (1,000 idle connections; 200
# slowloris; 1,000 signed-out sign-ins trickled a byte a second; a login flood of 50 clients from 127.0.0.2; 50 clients sending
# oversize and malformed requests; 20 clients sending half a batch and
# vanishing), then TLS against plain TCP (the producer closed-loop).
# Writes the table to OUT (default docs/bench/server-load.md) and fails
# (exit 1) when a check fails.
#
#   scripts/server-load.sh            short (CI): 6 s a phase, debug build
#   scripts/server-load.sh --long     30 s a phase, release build
#   OUT=... RATE=MBps PROFILE=debug|release scripts/server-load.sh
set -euo pipefail
cd "$(dirname "$0")/.."
LONG=0
[[ "${1:-}" == "--long" ]] && LONG=1
if [[ $LONG == 1 ]]; then SECS=${SECS:-30}; PROFILE=${PROFILE:-release}; else SECS=${SECS:-6}; PROFILE=${PROFILE:-debug}; fi
RATE=${RATE:-10}
# The closed-loop runs (plain and TLS) write as fast as the server takes
# it: at most 8 s each, to bound the disk they fill.
MAXSECS=$(( SECS < 8 ? SECS : 8 ))
OUT=${OUT:-docs/bench/server-load.md}
# The limits under test (each a corelog-server flag).
MAX_CONN=2000
INFLIGHT_MB=64
REQUEST_MB=2
STALL_S=2
REQUEST_S=4
LOGIN_S=3
LOGIN_THREADS=1
MAX_FAILED=3
SHARDS=2

flag=""; [[ $PROFILE == release ]] && flag="--release"
nice -n 10 cargo build --quiet $flag -p corelog-server --bin corelog-server -p corelog-bench --bin corelog-attack
BIN=target/$PROFILE
WORK=$(mktemp -d "${TMPDIR:-/tmp}/server-load.XXXXXX")
PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do [[ -n "$p" ]] && kill "$p" 2>/dev/null || true; done; [[ -n "${KEEP:-}" ]] || rm -rf "$WORK"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start_server() { # NAME PORT [extra flags...]
  local name=$1 port=$2; shift 2
  "$BIN/corelog-server" --dir "$WORK/$name" --listen "127.0.0.1:$port" --shards $SHARDS --fsync never \
    --max-connections $MAX_CONN --max-connections-per-address $MAX_CONN --max-request-bytes ${REQUEST_MB}M --max-inflight-bytes ${INFLIGHT_MB}M --stall-timeout ${STALL_S}s \
    --request-timeout ${REQUEST_S}s --login-timeout ${LOGIN_S}s --login-concurrency $LOGIN_THREADS \
    --max-failed-logins $MAX_FAILED "$@" >"$WORK/$name.log" 2>&1 &
  SERVER=$!; PIDS+=("$SERVER")
  for _ in $(seq 100); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1',$port),0.2).close()" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "server-load: $name did not start"; cat "$WORK/$name.log"; exit 1
}

# Samples the server's resident memory (kB) and threads every 100 ms.
sample() { # PID FILE
  while kill -0 "$1" 2>/dev/null; do
    awk '/^VmRSS/{r=$2} /^Threads/{t=$2} END{print r, t}' "/proc/$1/status" 2>/dev/null >>"$2" || true
    sleep 0.1
  done
}
peak() { awk 'BEGIN{r=0;t=0} {if($1>r)r=$1; if($2>t)t=$2} END{print r, t}' "$1"; }

A="$BIN/corelog-attack"
PORT=$(free_port)
start_server plain "$PORT"
ADDR=127.0.0.1:$PORT
SETUP=$("$A" producer --addr "$ADDR" --setup --rate "$RATE" --seconds 1)
BASE_KB=$(awk '/^VmRSS/{print $2}' /proc/$SERVER/status)
REST_THREADS=$(awk '/^Threads/{print $2}' /proc/$SERVER/status)
sample "$SERVER" "$WORK/samples.all" & PIDS+=($!)

RESULTS="$WORK/results.jsonl"
: >"$RESULTS"
phase() { # NAME LIMIT_MS ATTACK_MODE COUNT
  local name=$1 limit=$2 mode=$3 count=$4 apid=""
  : >"$WORK/samples.$name"
  sample "$SERVER" "$WORK/samples.$name" & local spid=$!
  if [[ $mode != none ]]; then
    "$A" "$mode" --addr "$ADDR" --count "$count" --seconds $((SECS + 2)) --limit-ms "$limit" >"$WORK/attack.$name" &
    apid=$!
    sleep 1
  fi
  local prod
  prod=$("$A" producer --addr "$ADDR" --rate "$RATE" --seconds "$SECS")
  [[ -n $apid ]] && wait "$apid"
  kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null || true
  local attack='{}'; [[ -s "$WORK/attack.$name" ]] && attack=$(cat "$WORK/attack.$name")
  read -r rss thr < <(peak "$WORK/samples.$name")
  echo "{\"phase\":\"$name\",\"mode\":\"$mode\",\"count\":$count,\"limit_ms\":$limit,\"producer\":$prod,\"attack\":$attack,\"peak_rss_kb\":$rss,\"peak_threads\":$thr}" >>"$RESULTS"
  echo "server-load: $name: producer $prod attack $attack rss ${rss} kB threads $thr"
}
phase alone 0 none 0
phase idle $((LOGIN_S * 1000)) idle 1000
phase slowloris $((REQUEST_S * 1000)) slowloris 200
phase trickle $((LOGIN_S * 1000)) trickle 1000
phase login-flood 0 login-flood 50
phase garbage 0 garbage 50
phase half $((STALL_S * 1000)) half 20
phase alone-after 0 none 0
STORED=$("$A" stored --addr "$ADDR")
PLAIN_MAX=$("$A" producer --addr "$ADDR" --rate 0 --seconds "$MAXSECS")
kill -TERM "$SERVER"; wait "$SERVER" 2>/dev/null || true
COUNTERS=$(sed 's/\x1b\[[0-9;]*m//g' "$WORK/plain.log" | grep -o 'corelog-server stopped: .*' || true)

# TLS: the same producer closed-loop against a TLS server, and plain above.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=localhost \
  -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -addext basicConstraints=critical,CA:FALSE -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
TPORT=$(free_port)
start_server tls "$TPORT" --tls-cert "$WORK/cert.pem" --tls-key "$WORK/key.pem"
"$A" producer --addr "127.0.0.1:$TPORT" --setup --rate "$RATE" --seconds 1 --tls-ca "$WORK/cert.pem" >/dev/null
TLS_MAX=$("$A" producer --addr "127.0.0.1:$TPORT" --rate 0 --seconds "$MAXSECS" --tls-ca "$WORK/cert.pem")
TLS_RATE=$("$A" producer --addr "127.0.0.1:$TPORT" --rate "$RATE" --seconds "$SECS" --tls-ca "$WORK/cert.pem")
kill -TERM "$SERVER"; wait "$SERVER" 2>/dev/null || true

read -r PEAK_KB PEAK_THREADS < <(peak "$WORK/samples.all")
LOAD="$(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$RESULTS" "$OUT" <<PY
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
out = sys.argv[2]
secs, rate, long_ = $SECS, $RATE, $LONG
base_kb, peak_kb, rest_thr, peak_thr = $BASE_KB, $PEAK_KB, $REST_THREADS, $PEAK_THREADS
max_conn, inflight_mb, login_threads, shards = $MAX_CONN, $INFLIGHT_MB, $LOGIN_THREADS, $SHARDS
stored = json.loads('''$STORED''')["stored"]
plain_max, tls_max, tls_rate = json.loads('''$PLAIN_MAX'''), json.loads('''$TLS_MAX'''), json.loads('''$TLS_RATE''')
counters = '''$COUNTERS'''.strip()
# The baseline: the better of the two runs alone (before and after the
# attacks), so that noise in one of them does not flatter the ratios.
alones = [r["producer"] for r in rows if r["mode"] == "none"]
alone = {"mb_per_s": max(a["mb_per_s"] for a in alones), "p99_us": min(a["p99_us"] for a in alones)}
fail = []
lines = []
w = lines.append
w("<!-- generated by scripts/server-load.sh; do not edit by hand -->")
w(f"Generated by \`scripts/server-load.sh{' --long' if long_ else ''}\` ($PROFILE build) on $(date -u +%Y-%m-%d): "
  f"$(nproc) cores, Linux $(uname -r); load average $LOAD at the end. One corelog-server on loopback, {shards} shards, "
  f"\`--fsync never\`, limits \`--max-connections {max_conn} --max-request-bytes ${REQUEST_MB}M --max-inflight-bytes {inflight_mb}M --stall-timeout ${STALL_S}s "
  f"--request-timeout ${REQUEST_S}s --login-timeout ${LOGIN_S}s --login-concurrency {login_threads} --max-failed-logins $MAX_FAILED\`. "
  f"The producer sends 100 x 1000 B messages a request, one request in flight, at {rate} MB/s for {secs} s a phase, "
  f"latency counted from each request's scheduled time; each attack starts 1 s before it and runs through it.")
w("")
w("| phase | attack | producer MB/s | x alone | p99 ms | x alone | attack's connections | closed by the server | slowest close (limit) | server peak RSS MiB | threads | target (>= 0.8x, <= 2x) |")
w("|---|---|---|---|---|---|---|---|---|---|---|---|")
desc = {"alone": "none (before the attacks)", "alone-after": "none (after the attacks)", "idle": "1,000 idle connections", "slowloris": "200 slowloris (a header, then a byte a second)", "trickle": "1,000 signed-out sign-ins trickled (3 KB declared, a byte a second)",
        "login-flood": "login flood: 50 clients, wrong passwords, from 127.0.0.2", "garbage": "50 clients: oversize and malformed requests",
        "half": "20 clients: half a batch, then silence"}
for r in rows:
    p, a = r["producer"], r["attack"]
    tx = p["mb_per_s"] / alone["mb_per_s"]
    px = p["p99_us"] / max(alone["p99_us"], 1)
    ok = []
    if r["mode"] != "none":
        if tx < 0.8: fail.append(f"{r['phase']}: throughput {tx:.2f}x of alone (< 0.8x)")
        ok.append("met" if tx >= 0.8 and px <= 2.0 else "**missed**" + (" (p99)" if px > 2.0 else "") + (" (throughput)" if tx < 0.8 else ""))
    conns, closed, slow = "", "", ""
    if r["mode"] in ("idle", "slowloris", "trickle", "half"):
        conns, closed = f"{a['opened']:,}", f"{a['closed']:,}"
        slow = f"{a['max_close_ms']/1000:.1f} s ({r['limit_ms']/1000:.0f} s)"
        if a["overdue"] > 0 or a["max_close_ms"] > r["limit_ms"] + 1000:
            fail.append(f"{r['phase']}: {a['overdue']} connections still open past the limit, slowest close {a['max_close_ms']} ms")
        if a["closed"] == 0:
            fail.append(f"{r['phase']}: no connection was closed")
    elif r["mode"] == "login-flood":
        conns, closed = f"{a['connections']:,}", f"{a['closed']:,}"
        slow = f"after {a['max_refused_per_connection']} failures ({$MAX_FAILED})"
        if a["accepted"] or a["max_refused_per_connection"] > $MAX_FAILED:
            fail.append(f"login-flood: {a['accepted']} signed in, up to {a['max_refused_per_connection']} failures on one connection")
    elif r["mode"] == "garbage":
        conns, closed = f"{a['connections']:,}", f"{a['closed']:,}"
        slow = f"{a['refused']:,} refused, {a['accepted']} accepted"
        if a["accepted"]:
            fail.append(f"garbage: {a['accepted']} malformed requests accepted")
    flagtxt = "; ".join(ok)
    w(f"| {r['phase']} | {desc[r['phase']]} | {p['mb_per_s']:.2f} | {tx:.2f} | {p['p99_us']/1000:.2f} | {px:.2f} | {conns} | {closed} | {slow} | {r['peak_rss_kb']/1024:.0f} | {r['peak_threads']} | {flagtxt} |")
setup_msgs = json.loads('''$SETUP''')["messages"]
acked = sum(r["producer"]["messages"] for r in rows) + setup_msgs
w("")
w(f"- **Nothing stored from a refused request**: load/t holds {stored:,} messages after all phases; the producer had "
  f"{acked:,} acknowledged (its 1 s set-up run included): " + ("**equal**." if stored == acked else "**different**."))
if stored != acked:
    fail.append(f"stored {stored} messages, the producer had {acked} acknowledged")
per_conn_kb = 64
pool_mb = min(16, inflight_mb / 4)  # request buffers kept for reuse (server/src/guard/buffers.rs)
bound_kb = base_kb + inflight_mb * 1024 + pool_mb * 1024 + max_conn * per_conn_kb + login_threads * 20 * 1024
w(f"- **Peak RSS** over the whole run: {peak_kb/1024:.0f} MiB. Bound: RSS at rest after set-up ({base_kb/1024:.0f} MiB) "
  f"+ \`--max-inflight-bytes\` ({inflight_mb} MiB) + reused request buffers ({pool_mb:.0f} MiB) + \`--max-connections\` x 64 KiB ({max_conn*per_conn_kb/1024:.0f} MiB) "
  f"+ \`--login-concurrency\` x 20 MiB (argon2's 19 MiB each) = {bound_kb/1024:.0f} MiB: "
  + ("**within**." if peak_kb <= bound_kb else "**exceeded**."))
if peak_kb > bound_kb: fail.append(f"peak RSS {peak_kb} kB over the bound {bound_kb} kB")
thr_bound = rest_thr + login_threads + 64
w(f"- **Threads**: {rest_thr} at rest, {peak_thr} at most (bound: at rest + the login pool + 64 io_uring workers = {thr_bound}): "
  + ("**within**." if peak_thr <= thr_bound else "**exceeded**."))
if peak_thr > thr_bound: fail.append(f"threads {peak_thr} over {thr_bound}")
tr = tls_max["mb_per_s"] / max(plain_max["mb_per_s"], 1e-9)
w(f"- **TLS**: the same producer closed-loop (as fast as replies come, $MAXSECS s each): {tls_max['mb_per_s']:.1f} MB/s over TLS against "
  f"{plain_max['mb_per_s']:.1f} MB/s over plain TCP (**{tr:.2f}x**), p99 {tls_max['p99_us']/1000:.2f} ms against "
  f"{plain_max['p99_us']/1000:.2f} ms; at {rate} MB/s over TLS: {tls_rate['mb_per_s']:.2f} MB/s, p99 {tls_rate['p99_us']/1000:.2f} ms.")
w(f"- Server counters at shutdown of the plain server: \`{counters.replace('corelog-server stopped: ', '')}\`.")
w(f"- \"x alone\" is against the better of the two runs alone (the higher throughput, the lower p99: {alone['mb_per_s']:.2f} MB/s, {alone['p99_us']/1000:.2f} ms). "
  f"Targets: throughput >= 0.8x (a failed check: the script exits 1) and p99 <= 2x (reported; on a shared machine the p99 of a run alone "
  f"varies several-fold between runs, so it is not a pass/fail check). The other checks: every attack's connections closed by the server "
  f"within its limit + 1 s, none signed in or accepted, nothing refused stored, peak RSS and threads within their bounds.")
open(out, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
if fail:
    print("server-load: FAILED:\n  " + "\n  ".join(fail))
    sys.exit(1)
print("server-load: PASS")
PY
