#!/usr/bin/env bash
# corelog-server under hostile and careless clients, on loopback: one
# well-behaved producer (corelog-attack producer: 100 x 1000 B messages a
# request, one request in flight, at a fixed rate, latency from schedule)
# alone, then under each attack in turn (1,000 idle connections; 200
# slowloris; 1,000 signed-out sign-ins trickled a byte a second; a login flood of 50 clients from 127.0.0.2; 50 clients sending
# oversize and malformed requests; 20 clients sending half a batch and
# vanishing), then TLS against plain TCP (the producer closed-loop).
# Then three nodes (corelog-server --node --cluster on 127.0.0.1-3): the
# producer through the leader alone and, in turn, while a stranger
# (127.0.0.9) trickles 80 connections to each node's replica port (a first
# frame's length declared, then a byte a second), twice each.
# Writes the tables to OUT (default docs/bench/server-load.md) and fails
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
# The replica port's own defences (replica/src/net/mod.rs), checked
# against, and the trickle against them.
HANDSHAKE_S=2     # HANDSHAKE_TIMEOUT
MAX_STRANGERS=8   # MAX_STRANGERS
TRICKLERS=80      # connections to each node's replica port
STRANGER=127.0.0.9

flag=""; [[ $PROFILE == release ]] && flag="--release"
nice -n 10 cargo build --quiet $flag -p corelog-server --bin corelog-server -p corelog-bench --bin corelog-attack
BIN=target/$PROFILE
WORK=$(mktemp -d "${TMPDIR:-/tmp}/server-load.XXXXXX")
PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do [[ -n "$p" ]] && kill "$p" 2>/dev/null || true; done; [[ -n "${KEEP:-}" ]] || rm -rf "$WORK"; }
trap cleanup EXIT
# A free port on $1 (default 127.0.0.1) for a listener, below the kernel's
# ephemeral range (32768-60999): a port the kernel hands out (bind to 0)
# can be taken as an outgoing connection's source port before the server
# binds it (CI saw "Address already in use" at node3's start). Each is
# checked free and handed out once per run ($WORK/ports).
free_port() {
  python3 - "${1:-127.0.0.1}" "$WORK/ports" <<'PY'
import os, random, socket, sys
ip, used = sys.argv[1], sys.argv[2]
taken = set(open(used).read().split()) if os.path.exists(used) else set()
for port in random.sample(range(20000, 32000), 12000):
    if str(port) in taken:
        continue
    s = socket.socket()
    try:
        s.bind((ip, port))
    except OSError:
        continue
    finally:
        s.close()
    open(used, "a").write(f"{port}\n")
    print(port)
    break
else:
    sys.exit("server-load: no free port below the ephemeral range")
PY
}
wait_port() { # NAME HOST PORT
  for _ in $(seq 100); do
    python3 -c "import socket; socket.create_connection(('$2',$3),0.2).close()" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "server-load: $1 did not start"; cat "$WORK/$1.log"; exit 1
}

start_server() { # NAME PORT [extra flags...]
  local name=$1 port=$2; shift 2
  "$BIN/corelog-server" --dir "$WORK/$name" --listen "127.0.0.1:$port" --shards $SHARDS --fsync never \
    --max-connections $MAX_CONN --max-connections-per-address $MAX_CONN --max-request-bytes ${REQUEST_MB}M --max-inflight-bytes ${INFLIGHT_MB}M --stall-timeout ${STALL_S}s \
    --request-timeout ${REQUEST_S}s --login-timeout ${LOGIN_S}s --login-concurrency $LOGIN_THREADS \
    --max-failed-logins $MAX_FAILED "$@" >"$WORK/$name.log" 2>&1 &
  SERVER=$!; PIDS+=("$SERVER")
  wait_port "$name" 127.0.0.1 "$port"
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
ON=server  # what the phases run against: server, or cluster (ADDR its leader)
phase() { # NAME LIMIT_MS ATTACK_MODE COUNT [the attack's own flags...]
  local name=$1 limit=$2 mode=$3 count=$4 apid=""
  shift 4
  : >"$WORK/samples.$name"
  sample "$SERVER" "$WORK/samples.$name" & local spid=$!
  if [[ $mode != none ]]; then
    "$A" "$mode" --addr "$ADDR" --count "$count" --seconds $((SECS + 2)) --limit-ms "$limit" "$@" >"$WORK/attack.$name" &
    apid=$!
    sleep 1
  fi
  local prod
  prod=$("$A" producer --addr "$ADDR" --rate "$RATE" --seconds "$SECS")
  [[ -n $apid ]] && wait "$apid"
  kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null || true
  local attack='{}'; [[ -s "$WORK/attack.$name" ]] && attack=$(cat "$WORK/attack.$name")
  read -r rss thr < <(peak "$WORK/samples.$name")
  echo "{\"phase\":\"$name\",\"on\":\"$ON\",\"mode\":\"$mode\",\"count\":$count,\"limit_ms\":$limit,\"producer\":$prod,\"attack\":$attack,\"peak_rss_kb\":$rss,\"peak_threads\":$thr}" >>"$RESULTS"
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

# The replica-port trickle against three nodes on 127.0.0.1-3 (each its
# client and replica port), a secret in the cluster file, the producer
# through the leader.
CSTART=$SECONDS
CDIR=$WORK/cluster
mkdir -p "$CDIR"
head -c 32 /dev/urandom | base64 >"$CDIR/secret"; chmod 600 "$CDIR/secret"
printf 'shards = %s\nsecret_file = "secret"\n' $SHARDS >"$CDIR/cluster.toml"
CLIENTS=(); REPLICAS=(); NODES=()
for id in 1 2 3; do
  ip=127.0.0.$id
  CLIENTS+=("$ip:$(free_port $ip)"); REPLICAS+=("$ip:$(free_port $ip)")
  printf '[[node]]\nid = %s\nclient = "%s"\nreplica = "%s"\n' $id "${CLIENTS[-1]}" "${REPLICAS[-1]}" >>"$CDIR/cluster.toml"
done
for id in 1 2 3; do
  "$BIN/corelog-server" --dir "$CDIR/node$id" --node $id --cluster "$CDIR/cluster.toml" --shards $SHARDS --fsync never \
    >"$WORK/node$id.log" 2>&1 &
  NODES+=($!); PIDS+=($!)
done
for id in 1 2 3; do wait_port "node$id" "${CLIENTS[id-1]%:*}" "${CLIENTS[id-1]##*:}"; done
leader_of() { "$A" leader --addr "$1" --seconds 30 | python3 -c 'import json,sys; print(json.load(sys.stdin)["leader"])'; }
# The metadata group's leader is named first; the data groups follow it
# a moment later (sends refused meanwhile): set up until a second's sends
# all succeed (every try's acknowledged messages counted), for up to 30 s.
: >"$WORK/csetup"
for try in $(seq 30); do
  LEADER=$(leader_of "${CLIENTS[0]}")
  "$A" producer --addr "$LEADER" --setup --rate "$RATE" --seconds 1 >>"$WORK/csetup" || true
  tail -1 "$WORK/csetup" | python3 -c 'import json,sys; p=json.load(sys.stdin); sys.exit(0 if p["errors"] == 0 and p["batches"] > 0 else 1)' && break
  [[ $try == 30 ]] && { echo "server-load: the cluster took no send in 30 s"; cat "$WORK/csetup"; exit 1; }
done
CSETUP=$(python3 -c 'import json,sys; print(sum(json.loads(l)["messages"] for l in open(sys.argv[1])))' "$WORK/csetup")
echo "server-load: cluster set up through $LEADER in $try tries"
SERVER=""
for id in 1 2 3; do [[ ${CLIENTS[id-1]} == "$LEADER" ]] && SERVER=${NODES[id-1]}; done
[[ -n $SERVER ]] || { echo "server-load: the leader $LEADER is none of ${CLIENTS[*]}"; exit 1; }
ADDR=$LEADER ON=cluster
# Two runs alone and two under the trickle, in turn: the targets compare
# the better of each pair (the p99 of one 6 s run on a shared machine
# varies several-fold; a trickle that hurts the leader hurts both runs).
TO=$(IFS=,; echo "${REPLICAS[*]}")
phase cluster-alone 0 none 0
phase replica-trickle $((HANDSHAKE_S * 1000)) replica-trickle $TRICKLERS --source $STRANGER --to "$TO"
phase cluster-alone-2 0 none 0
phase replica-trickle-2 $((HANDSHAKE_S * 1000)) replica-trickle $TRICKLERS --source $STRANGER --to "$TO"
CSTORED=$("$A" stored --addr "$ADDR")
# Every node still running, and naming the same leader as before.
LEADERS_AFTER=""
for id in 1 2 3; do
  kill -0 "${NODES[id-1]}" 2>/dev/null || { echo "server-load: node$id exited"; cat "$WORK/node$id.log"; exit 1; }
  LEADERS_AFTER+="$(leader_of "${CLIENTS[id-1]}") "
done
kill -TERM "${NODES[@]}"; wait "${NODES[@]}" 2>/dev/null || true
echo "server-load: the three nodes' section took $((SECONDS - CSTART)) s"
# What the nodes logged: connections closed for want of a slot (from
# strangers; from the nodes' own addresses there must be none).
NODE_LOGS=$(sed 's/\x1b\[[0-9;]*m//g' "$WORK"/node[123].log)
REFUSED_STRANGERS=$({ grep -o 'other addresses already served: [0-9.:]* closed ([0-9]* refused' <<<"$NODE_LOGS" || true; } | awk -F'(' '{s+=$2} END{print s+0}')
REFUSED_NODES=$(grep -c "the nodes' addresses already served" <<<"$NODE_LOGS" || true)

read -r PEAK_KB PEAK_THREADS < <(peak "$WORK/samples.all")
LOAD="$(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$RESULTS" "$OUT" <<PY
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
crows = [r for r in rows if r["on"] == "cluster"]
rows = [r for r in rows if r["on"] == "server"]
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
# The replica-port trickle against three nodes.
handshake_s, max_strangers, tricklers, stranger = $HANDSHAKE_S, $MAX_STRANGERS, $TRICKLERS, "$STRANGER"
csetup = $CSETUP
cstored = json.loads('''$CSTORED''')["stored"]
leader, leaders_after = "$LEADER", "$LEADERS_AFTER".split()
refused_strangers, refused_nodes = $REFUSED_STRANGERS, $REFUSED_NODES
calones = [r["producer"] for r in crows if r["mode"] == "none"]
calone = {"mb_per_s": max(a["mb_per_s"] for a in calones), "p99_us": min(a["p99_us"] for a in calones)}
ctrickles = [r["producer"] for r in crows if r["mode"] != "none"]
ctrickle = {"mb_per_s": max(a["mb_per_s"] for a in ctrickles), "p99_us": min(a["p99_us"] for a in ctrickles)}
ctx, cpx = ctrickle["mb_per_s"] / calone["mb_per_s"], ctrickle["p99_us"] / max(calone["p99_us"], 1)
w("")
w(f"Against three nodes (\`corelog-server --node N --cluster FILE\` on 127.0.0.1, .2 and .3, {shards} shards, \`--fsync never\`, "
  f"a \`secret_file\`): the same producer at {rate} MB/s through the leader (the node at {leader}), alone and, in turn, while a stranger "
  f"({stranger}, no node's address) holds {tricklers} connections to each node's replica port, each declaring a first frame "
  f"(half 80 MiB, over a handshake's; half 100 B, under it) and then trickling a byte a second, a closed one replaced about a second "
  f"later (the trickle starts 1 s before the producer and runs through it); twice each. The replica port's limits: the handshake within {handshake_s} s of the accept, "
  f"at most {max_strangers} connections from strangers served at once (the rest closed at once), a first frame over a handshake's refused unread.")
w("")
w("| phase | attack | producer MB/s | x alone | p99 ms | x alone | slowest ms | send errors | attack's connections | closed by the nodes | at once / at the deadline | slowest close (limit) | most served by one node (limit) | leader peak RSS MiB | threads | this run (>= 0.9x, <= 2x) |")
w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
trickled = f"{tricklers} connections to each node's replica port from {stranger}, trickled"
cdesc = {"cluster-alone": "none (first)", "cluster-alone-2": "none (after the first trickle)",
         "replica-trickle": trickled, "replica-trickle-2": trickled + " (again)"}
for r in crows:
    p, a = r["producer"], r["attack"]
    tx = p["mb_per_s"] / calone["mb_per_s"]
    px = p["p99_us"] / max(calone["p99_us"], 1)
    flag, conns, closed, split, slow, held = "", "", "", "", "", ""
    if p["errors"]:
        fail.append(f"{r['phase']}: {p['errors']} sends refused")
    if r["mode"] != "none":
        if p["max_us"] > handshake_s * 1_000_000:
            fail.append(f"{r['phase']}: a send took {p['max_us']/1e6:.2f} s, longer than a handshake's deadline")
        flag = "met" if tx >= 0.9 and px <= 2.0 else "**missed**" + (" (p99)" if px > 2.0 else "") + (" (throughput)" if tx < 0.9 else "")
        conns, closed = f"{a['opened']:,}", f"{a['closed']:,}"
        split = f"{a['closed_at_once']:,} / {a['closed_held']:,}"
        slow = f"{a['max_close_ms']/1000:.1f} s ({r['limit_ms']/1000:.0f} s)"
        held = f"{a['max_held_per_target']} ({max_strangers})"
        if a["overdue"] > 0 or a["max_close_ms"] > r["limit_ms"] + 1000:
            fail.append(f"{r['phase']}: {a['overdue']} connections still open past the handshake deadline, slowest close {a['max_close_ms']} ms (limit {r['limit_ms']} ms + 1 s)")
        if a["closed"] == 0 or a["closed_held"] == 0:
            fail.append(f"{r['phase']}: {a['closed']} connections closed, {a['closed_held']} of them at the deadline (the trickle did not reach it)")
        if a["max_close_large_ms"] >= 1000:
            fail.append(f"{r['phase']}: a connection declaring an 80 MiB first frame was open {a['max_close_large_ms']} ms (not refused unread)")
        if a["max_held_per_target"] > max_strangers:
            fail.append(f"{r['phase']}: one node served {a['max_held_per_target']} strangers' connections at once (> {max_strangers})")
    w(f"| {r['phase']} | {cdesc[r['phase']]} | {p['mb_per_s']:.2f} | {tx:.2f} | {p['p99_us']/1000:.2f} | {px:.2f} | {p['max_us']/1000:.1f} | {p['errors']} | {conns} | {closed} | {split} | {slow} | {held} | {r['peak_rss_kb']/1024:.0f} | {r['peak_threads']} | {flag} |")
cacked = sum(r["producer"]["messages"] for r in crows) + csetup
w("")
w(f"- **Under the trickle**, the better of its two runs against the better of the two alone: {ctrickle['mb_per_s']:.2f} MB/s "
  f"(**{ctx:.2f}x**, target >= 0.9x), p99 {ctrickle['p99_us']/1000:.2f} ms (**{cpx:.2f}x**, target <= 2x): "
  + ("**met**." if ctx >= 0.9 and cpx <= 2.0 else "**missed**."))
if ctx < 0.9: fail.append(f"replica-trickle: throughput {ctx:.2f}x of alone (< 0.9x)")
if cpx > 2.0: fail.append(f"replica-trickle: p99 {cpx:.2f}x of alone (> 2x)")
w(f"- **Nothing lost, no new election**: the leader holds {cstored:,} messages in load/t, the producer had {cacked:,} acknowledged "
  f"(its set-up runs included): " + ("**equal**" if cstored == cacked else "**different**") + f"; after the trickle the three nodes name "
  f"{', '.join(leaders_after)} leader: " + ("**the same one as before**." if leaders_after == [leader] * 3 else "**not the one before**."))
if cstored != cacked:
    fail.append(f"cluster: the leader stored {cstored} messages, the producer had {cacked} acknowledged")
if leaders_after != [leader] * 3:
    fail.append(f"cluster: leader {leader} before the trickle, {leaders_after} after")
w(f"- **The nodes' own slots untouched**: the nodes logged {refused_strangers:,} strangers' connections closed for want of a slot (at least: "
  f"a node logs the count at most once a second), and {refused_nodes} lines of connections from the nodes' addresses closed so: "
  + ("**none**." if refused_nodes == 0 else "**some**."))
if refused_nodes:
    fail.append(f"cluster: {refused_nodes} log lines of node connections closed for want of a slot")
w(f"- \"x alone\" is against the better of the two runs alone ({calone['mb_per_s']:.2f} MB/s, {calone['p99_us']/1000:.2f} ms). "
  f"Targets: the better run under the trickle keeps throughput >= 0.9x and p99 <= 2x of that (the p99 of one run on a shared machine varies "
  f"several-fold, so each side takes the better of two); in every run no send refused and none slower than the {handshake_s} s handshake deadline; every trickling connection closed by its node within "
  f"{handshake_s} s + 1 s of its connect, each declaring 80 MiB within 1 s, some at the deadline, and no node serving more than "
  f"{max_strangers} of them at once (a connection open 1 s or more counts as served); nothing acknowledged missing on the leader, "
  f"the same leader throughout, no node's own connection refused; each a failed check (exit 1).")
open(out, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
if fail:
    print("server-load: FAILED:\n  " + "\n  ".join(fail))
    sys.exit(1)
print("server-load: PASS")
PY
