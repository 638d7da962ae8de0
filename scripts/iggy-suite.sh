#!/usr/bin/env bash
# Apache Iggy's own integration suite (core/integration: tests/sdk, tests/server, tests/cli) run
# against corelog-server, and docs/iggy-suite.md generated from the run.
#
#   scripts/iggy-suite.sh            # prepare + build + run + report
#   scripts/iggy-suite.sh build      # only make the trimmed copy and build it (long: start early)
#   scripts/iggy-suite.sh run        # run the TCP tests (builds what is missing first)
#   scripts/iggy-suite.sh report     # regenerate docs/iggy-suite.md from the last run's log
#   scripts/iggy-suite.sh run FILTER # only the tests whose names contain FILTER (report left alone)
#   scripts/iggy-suite.sh examples   # as a user would: Iggy's Rust examples that use consumer
#                                    # groups and iggy-bench's eight kinds at their defaults
#                                    # against corelog-server; writes docs/iggy-examples.md
#
# Nothing of Iggy is committed to this project. The script works on an Iggy checkout outside the
# tree: IGGY_SRC (default /work/iggy-src, the commit whose iggy_binary_protocol is 0.11.0-edge.4,
# the one corelog-server pins). It makes a TRIMMED COPY of it in SUITE_DIR (default
# /work/iggy-suite/src) and builds there, with a persistent target dir SUITE_TARGET (default
# /work/iggy-suite-target), at `nice -n 15`.
#
# What the trimmed copy drops (so the crate builds in reasonable time on 2 cores):
#   * from core/integration/Cargo.toml the connector and MCP dependencies: deltalake, mongodb,
#     sqlx, testcontainers, testcontainers-modules, rmcp, rust-s3, iggy_connector_doris_sink,
#     iggy_connector_sdk, reqwest-middleware, reqwest-retry, and the crate's `[lints]`
#     (warnings = deny) so the patch below cannot fail the build on an unused import;
#   * the test modules that need them or that are about clustering: tests/connectors,
#     tests/mcp, tests/cluster, tests/config_provider, tests/data_integrity (tests/mod.rs keeps
#     `mod cli; mod sdk; mod server;`);
#   * in the harness, src/harness/handle/mcp.rs loses its rmcp client: `McpClient` becomes an
#     empty type and `create_client` an error (only the dropped tests/mcp use it).
# Everything else (the harness, its server handle and the sdk/server/cli tests) is Iggy's code
# as it is at that commit.
#
# In place of `iggy-server` the harness finds LAUNCHER (written into the suite's target dir as
# target/debug/iggy-server): a few lines of shell that `exec` the real corelog-server of this
# project with the harness's settings: IGGY_SYSTEM_PATH (its data under <path>/corelog),
# IGGY_TCP_ADDRESS, IGGY_ROOT_USERNAME/PASSWORD, IGGY_HEARTBEAT_ENABLED/INTERVAL, and --runtime-config
# <path>/runtime/current_config.toml, the file the harness waits for: corelog-server writes it
# (`[tcp] address = "<bound address>"`) once it listens. When the harness asks for a self-signed
# certificate (IGGY_TCP_TLS_SELF_SIGNED) the launcher makes one with openssl and hands it to
# corelog-server (--tls-cert, --tls-key): corelog-server makes no certificates of its own.
#
# Which tests run: every test whose harness transport is TCP (names ending in `tcp`,
# `tcp_tls_*`) and the tests without a transport matrix that talk TCP (the CLI tests and the
# server scenarios). Not applicable, listed but not run: HTTP, QUIC and WebSocket tests,
# clustering (`cluster`, `vsr`, replica tests), and the features corelog-server lists as
# unimplemented in the README (see NA_RULES below: each rule says why).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
IGGY_SRC=${IGGY_SRC:-/work/iggy-src}
SUITE_DIR=${SUITE_DIR:-/work/iggy-suite/src}
SUITE_TARGET=${SUITE_TARGET:-/work/iggy-suite-target}
SUITE_LOG=${SUITE_LOG:-/work/iggy-suite/last-run.log}
TEST_THREADS=${TEST_THREADS:-2}
TEST_TIMEOUT=${TEST_TIMEOUT:-180}
OUT=${OUT:-$root/docs/iggy-suite.md}
export RUSTUP_TOOLCHAIN=${RUSTUP_TOOLCHAIN:-stable}
export CARGO_TARGET_DIR=$SUITE_TARGET

phase=${1:-all}
filter=${2:-}

log() { echo "iggy-suite: $*" >&2; }

prepare() {
    [[ -f $IGGY_SRC/core/integration/Cargo.toml ]] || {
        log "no Iggy checkout at IGGY_SRC=$IGGY_SRC (fetch apache/iggy at the pinned commit there)"
        exit 2
    }
    case "$SUITE_DIR" in "$root"/*) log "SUITE_DIR must be outside the project"; exit 2 ;; esac
    # Copied once per IGGY_SRC (a stamp says from where); the patches below are idempotent and
    # write a file only when it changes, so the persistent target stays warm between runs.
    local stamp=$SUITE_DIR/.copied-from
    if [[ ! -f $stamp || $(cat "$stamp") != "$IGGY_SRC" ]]; then
        rm -rf "$SUITE_DIR"
        mkdir -p "$SUITE_DIR"
        (cd "$IGGY_SRC" && tar -cf - --exclude=./target --exclude=./.git --exclude=./web \
            --exclude=./foreign --exclude=node_modules .) | tar -xf - -C "$SUITE_DIR"
        echo "$IGGY_SRC" >"$stamp"
    fi
    local it=$SUITE_DIR/core/integration
    python3 - "$it" <<'PY'
import re, sys, pathlib
it = pathlib.Path(sys.argv[1])
dropped = ["deltalake", "mongodb", "sqlx", "testcontainers", "testcontainers-modules",
           "rust-s3", "iggy_connector_doris_sink", "iggy_connector_sdk",
           "reqwest-middleware", "reqwest-retry"]
toml = (it / "Cargo.toml").read_text()
out, skip = [], False
for line in toml.splitlines():
    name = line.split("=")[0].strip()
    if skip:
        skip = not line.startswith("] }")
        continue
    if name == "rmcp":
        skip = True          # a multi-line entry, ends with "] }"
        continue
    if name in dropped:
        continue
    out.append(line)
toml = "\n".join(out) + "\n"
toml = toml.replace("[lints]\nworkspace = true\n", "")
def put(path, text):
    if path.read_text() != text:
        path.write_text(text)
put(it / "Cargo.toml", toml)

mod = (it / "tests" / "mod.rs").read_text()
for m in ["cluster", "config_provider", "connectors", "data_integrity", "mcp"]:
    mod = mod.replace(f"mod {m};\n", "")
put(it / "tests" / "mod.rs", mod)

mcp = it / "src" / "harness" / "handle" / "mcp.rs"
src = mcp.read_text()
src = re.sub(r"use rmcp::\{.*?\};\n", "", src, flags=re.S)
src = re.sub(r"pub type McpClient = .*?;\n",
             "/// Trimmed copy: the rmcp client is dropped (only tests/mcp used it).\n"
             "#[derive(Debug)]\npub struct McpClient;\n", src)
src = re.sub(r"(pub async fn create_client\(&self\) -> Result<McpClient, TestBinaryError> \{).*?\n    \}\n",
             r"""\1
        Err(TestBinaryError::ClientCreation {
            transport: "MCP".to_string(),
            address: self.mcp_url(),
            source: "MCP is dropped from the trimmed suite".to_string(),
        })
    }
""", src, count=1, flags=re.S)
put(mcp, src)
PY
    log "trimmed copy ready in $SUITE_DIR"
}

build() {
    prepare
    cd "$SUITE_DIR"
    log "building the suite (target $SUITE_TARGET); this is long the first time"
    nice -n 15 cargo test --no-run -p integration --test mod
    nice -n 15 cargo build -p iggy-cli --bin iggy
}

suite_binary() {
    cd "$SUITE_DIR"
    nice -n 15 cargo test --no-run -p integration --test mod --message-format=json 2>/dev/null |
        python3 -c 'import json,sys
for l in sys.stdin:
    try: m = json.loads(l)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "mod":
        print(m["executable"])' | tail -1
}

# The launcher the harness starts as `iggy-server`: the real corelog-server with the
# harness's settings. Its data lives under IGGY_SYSTEM_PATH/corelog; it writes
# IGGY_SYSTEM_PATH/runtime/current_config.toml (`[tcp] address = ...`) once it listens.
write_launcher() {
    local server=$1 dir=$SUITE_TARGET/debug
    mkdir -p "$dir"
    cat >"$dir/iggy-server" <<LAUNCHER
#!/usr/bin/env bash
# Written by corelog's scripts/iggy-suite.sh: Iggy's test harness starts "iggy-server";
# this starts corelog-server instead, with the harness's settings. Arguments (--replica-id)
# are Iggy's and ignored. --fsync batch: Iggy's tests create topics with enforce_fsync, which
# corelog-server (durability is the server's setting) honours only when it syncs every batch.
set -euo pipefail
sys=\${IGGY_SYSTEM_PATH:?IGGY_SYSTEM_PATH is not set}
tls=()
mkdir -p "\$sys"
if [[ \${IGGY_TCP_TLS_ENABLED:-false} == true ]]; then
    if [[ \${IGGY_TCP_TLS_SELF_SIGNED:-false} == true ]]; then
        # corelog-server takes a certificate, it makes none: make one as an operator would.
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \\
            -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \\
            -keyout "\$sys/self-signed.key" -out "\$sys/self-signed.crt" 2>/dev/null
        tls=(--tls-cert "\$sys/self-signed.crt" --tls-key "\$sys/self-signed.key")
    else
        tls=(--tls-cert "\${IGGY_TCP_TLS_CERT_FILE:?}" --tls-key "\${IGGY_TCP_TLS_KEY_FILE:?}")
    fi
fi
# Iggy's [heartbeat]: a consumer-group member silent for 1.2 intervals is evicted.
heartbeat=\${IGGY_HEARTBEAT_INTERVAL:-30s}
heartbeat=\${heartbeat// /}
[[ \${IGGY_HEARTBEAT_ENABLED:-true} == true ]] || heartbeat=0
export CORELOG_SERVER_USERNAME=\${IGGY_ROOT_USERNAME:-iggy}
export CORELOG_SERVER_PASSWORD=\${IGGY_ROOT_PASSWORD:-iggy}
exec "$server" --dir "\$sys/corelog" --listen "\${IGGY_TCP_ADDRESS:-127.0.0.1:8090}" \\
    --shards 1 --fsync batch --heartbeat-interval "\$heartbeat" \\
    --runtime-config "\$sys/runtime/current_config.toml" "\${tls[@]}"
LAUNCHER
    chmod +x "$dir/iggy-server"
    echo "$dir/iggy-server"
}

# Tests that are not applicable, by a pattern of their full name, with why; the first rule
# that matches wins. A test whose last name segment starts with `tcp` is a TCP variant of a
# transport matrix (some carry QUIC or HTTP settings in their names; they still run over TCP).
NA_RULES=(
    'server::cluster_|_view_durability_|full_cluster_restart|_cluster_[0-9]=clustering (multi-node VSR)'
    'server::message_cleanup::=reads the segment files under Iggy'"'"'s partition directories, on topics whose own segment_size (1 MiB) corelog does not apply (its segments are sized by --segment-bytes); corelog'"'"'s retention through the API is tested in server/tests/topic_lifecycle.rs'
    'server::purge_delete::=asserts Iggy'"'"'s data-directory layout (segment files named by their first offset, one file per consumer offset) on topics with their own segment_size (1 MiB), which corelog does not apply'
    'server::specific::consumer_offset_ahead_after_crash=edits a consumer-offset file under Iggy'"'"'s partition directory (corelog keeps offsets in its own log)'
    'server::specific::rejoin_window_exceeding_evicted_ring=clustering: a replica rejoining past its peers'"'"' evicted journal ring (VSR RangeEvicted and the commit floor), proven by the growth of the .log files under Iggy'"'"'s own partition directory (streams/0/topics/0/partitions/0)'
    'log_rotation_scenario=rotation of Iggy'"'"'s own log files under its data directory (corelog-server logs to stderr)'
    'encryption_scenario.*encryption_enabled=Iggy'"'"'s at-rest encryption of message data, not implemented in corelog-server'
    'server::specific::segment_rotation_scenario=HTTP transport (the scenario signs in over HTTP)'
    'server::flush_vsr::|cli::message::test_message_flush_command::should_be_successful=expects FLUSH_UNSAVED_BUFFER refused (Iggy at this commit answers FeatureUnavailable over TCP); corelog-server implements it (the partition'"'"'s stored messages are synced), tested in server/tests/sdk_roundtrip.rs'
    'cli::system::test_snapshot_cmd::should_be_successful=its server_logs section must hold Iggy'"'"'s own log lines (`INFO shard-...`, named after Iggy'"'"'s shard threads); corelog-server logs to stderr and keeps no log files, which its snapshot says; the archive itself is checked by server::general::snapshot and server/tests/iggy_semantics.rs'
    'sdk::options::given_explicit_segment_size_when_creating_topic_should_roll_at_it=a topic'"'"'s own segment_size, not implemented (stored and answered; corelog'"'"'s segments are sized by --segment-bytes, README)'
    'cli::general::test_missing_credentials::should_fail_with_error_message|cli::personal_access_token::test_pat_delete_command::should_be_successful|cli::personal_access_token::test_pat_login_options::should_be_successful|cli::system::test_cli_session_scenario::should_be_successful|cli::system::test_me_command::should_be_unsuccessful_using_transport_tcp=environment: the CLI needs a secret-service keyring (D-Bus), which this machine lacks'
    'cli::context::test_context_applied::should_apply_context$=QUIC transport: the CLI context it applies selects quic, and the CLI then connects to the QUIC address (corelog-server has none; the CLI retries until the timeout)'
    '::tcp[^:]*$=RUN'
    '(::|_)http(_|$)|a2a_jwt|cross_protocol=HTTP transport'
    '::quic|transportprotocol_quic|transport_quic=QUIC transport'
    '::websocket|transportprotocol_websocket|transport_websocket|::ws_=WebSocket transport'
)

classify() {
    # stdin: test names; stdout: "name<TAB>run" or "name<TAB>na<TAB>why"
    python3 -c '
import re, sys
rules = [r.split("=", 1) for r in sys.argv[1:]]
for name in sys.stdin.read().split():
    why = next((w for p, w in rules if re.search(p, name)), "RUN")
    print(f"{name}\trun" if why == "RUN" else f"{name}\tna\t{why}")
' "${NA_RULES[@]}"
}

run() {
    [[ -d $SUITE_DIR ]] || build
    prepare
    local bin
    bin=$(suite_binary)
    [[ -x $bin ]] || { log "no suite binary (build first: scripts/iggy-suite.sh build)"; exit 1; }
    # corelog-server of this checkout, built into the suite's target dir (outside the tree).
    (cd "$root" && nice -n 10 cargo build -q -p corelog-server)
    local server=$SUITE_TARGET/debug/corelog-server
    local launcher
    launcher=$(write_launcher "$server")
    local out=${SUITE_LOG%.log}
    rm -rf "$out.d"
    mkdir -p "$out.d/logs"
    "$bin" --list --format terse 2>/dev/null | sed -n 's/: test$//p' | sort >"$out.d/all"
    classify <"$out.d/all" >"$out.d/plan"
    if [[ -n $filter ]]; then
        awk -F'\t' -v f="$filter" 'index($1, f) && $2 == "run" {print $1}' "$out.d/plan" >"$out.d/torun"
    else
        awk -F'\t' '$2 == "run" {print $1}' "$out.d/plan" >"$out.d/torun"
    fi
    log "$(wc -l <"$out.d/all") tests, running $(wc -l <"$out.d/torun") ($TEST_THREADS at a time, ${TEST_TIMEOUT}s each)"
    # The harness runs a test on a 3-node cluster unless the test pins its node count or
    # this says otherwise: corelog-server is one node.
    export IGGY_TEST_CLUSTER_NODES=1
    export LAUNCHER=$launcher SUITE_BIN=$bin SUITE_OUT=$out.d TEST_TIMEOUT
    # One process per test: a hung test is cut by its timeout, each has its own log.
    xargs -P "$TEST_THREADS" -I{} bash -c '
        name="$1"; safe=${name//::/__}
        start=$(date +%s.%N)
        set +e
        env "CARGO_BIN_EXE_iggy-server=$LAUNCHER" timeout -k 10 "$TEST_TIMEOUT" \
            "$SUITE_BIN" --exact "$name" --test-threads 1 --nocapture \
            >"$SUITE_OUT/logs/$safe.log" 2>&1
        rc=$?
        end=$(date +%s.%N)
        printf "%s\t%s\t%.1f\n" "$name" "$rc" "$(echo "$end - $start" | bc)" >>"$SUITE_OUT/results"
    ' _ {} <"$out.d/torun"
    log "results in $out.d/results"
    [[ -n $filter ]] || report
}

report() {
    local out=${SUITE_LOG%.log}.d
    [[ -f $out/results ]] || { log "no run to report on ($out/results)"; exit 1; }
    # The rules as they are now: a test a new rule makes not applicable is reported so.
    classify <"$out/all" >"$out/plan"
    python3 "$root/scripts/iggy_suite_report.py" "$out" "$OUT"
    log "wrote $OUT"
}

# Iggy's Rust examples that consume through consumer groups (multi-tenant; new-sdk, also with
# --consumer-kind 2, a group; the stream builder's, whose consumers are groups by default), each
# after the producer its README pairs it with, in the README's order, Iggy's CLI creating a
# stream, a topic, a consumer group, a user and a personal access token, and iggy-bench's eight
# kinds at their defaults (each consumer kind after the producer kind that fills its streams),
# against a release corelog-server at its defaults (--fsync never, as Iggy's page-cache
# default), a fresh data directory per group of runs. The examples are built from the trimmed
# copy into SUITE_TARGET, outside the tree; iggy-bench is IGGY_BENCH (default the prebuilt
# peer in /dev/shm/peers). The stream-builder examples dial localhost:8090, so the examples'
# server listens there (the phase stops if the port is taken); iggy-bench's on EXAMPLES_BENCH_PORT.
EXAMPLE_TIMEOUT=${EXAMPLE_TIMEOUT:-120}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-1200}
IGGY_BENCH=${IGGY_BENCH:-/dev/shm/peers/iggy-bench}
EXAMPLES_OUT=${EXAMPLES_OUT:-$root/docs/iggy-examples.md}
EXAMPLES_BENCH_PORT=${EXAMPLES_BENCH_PORT:-18090}
# group: a fresh server for each group; rows: an example's name and arguments, or `iggy ...`
# (Iggy's CLI, as built by `build`, signed in as the root user through IGGY_USERNAME/PASSWORD)
EXAMPLE_GROUPS=(
    "multi-tenant-producer;multi-tenant-consumer"
    "new-sdk-producer;new-sdk-consumer;new-sdk-consumer --consumer-kind 2"
    "stream-basic"
    "stream-producer;stream-consumer"
    "stream-producer-config;stream-consumer-config"
    "iggy stream create cli-stream;iggy topic create cli-stream cli-topic 3 none;iggy consumer-group create cli-stream cli-topic cli-group;iggy consumer-group get cli-stream cli-topic cli-group;iggy user create cli-user cli-Password1;iggy pat create cli-token"
)
BENCH_KINDS=(pinned-producer pinned-consumer balanced-producer balanced-consumer-group
    pinned-producer-and-consumer balanced-producer-and-consumer-group
    end-to-end-producing-consumer end-to-end-producing-consumer-group)

examples() {
    prepare
    [[ -x $IGGY_BENCH ]] || { log "no iggy-bench at IGGY_BENCH=$IGGY_BENCH"; exit 2; }
    log "building Iggy's Rust examples (target $SUITE_TARGET)"
    (cd "$SUITE_DIR" && nice -n 15 cargo build -q --examples -p iggy_examples)
    (cd "$root" && nice -n 10 cargo build -q --release -p corelog-server)
    local server=$SUITE_TARGET/release/corelog-server ex=$SUITE_TARGET/debug/examples
    local out=${SUITE_LOG%/*}/examples.d
    rm -rf "$out"
    mkdir -p "$out/logs"
    : >"$out/results"
    EXAMPLES_SPID=""
    serve() { # $1: address; a fresh data directory
        rm -rf "$out/data"
        "$server" --dir "$out/data" --listen "$1" >>"$out/server.log" 2>&1 &
        EXAMPLES_SPID=$!
        for _ in $(seq 100); do
            ss -ltn | grep -q " ${1}\b" && return 0
            sleep 0.1
        done
        log "corelog-server did not listen on $1"; exit 1
    }
    stop() { kill -INT "$EXAMPLES_SPID"; wait "$EXAMPLES_SPID" || true; EXAMPLES_SPID=""; }
    trap '[[ -n ${EXAMPLES_SPID:-} ]] && kill -9 "$EXAMPLES_SPID" 2>/dev/null; true' EXIT
    if ss -ltn | grep -q " 127.0.0.1:8090\b\| \*:8090\b\| 0.0.0.0:8090\b"; then
        log "port 8090 is taken (the stream-builder examples dial it); stop what listens there"; exit 1
    fi
    local group row name args safe start rc
    for group in "${EXAMPLE_GROUPS[@]}"; do
        serve 127.0.0.1:8090
        IFS=';' read -ra rows <<<"$group"
        for row in "${rows[@]}"; do
            name=${row%% *}; args=${row#"$name"}
            safe=${row// /_}
            start=$(date +%s.%N)
            set +e
            local bin=$ex/$name
            [[ $name == iggy ]] && bin=$SUITE_TARGET/debug/iggy
            # shellcheck disable=SC2086
            (cd "$out" && IGGY_USERNAME=iggy IGGY_PASSWORD=iggy timeout -k 5 "$EXAMPLE_TIMEOUT" "$bin" $args) \
                >"$out/logs/example.$safe.log" 2>&1
            rc=$?
            set -e
            printf "example\t%s\t%s\t%.1f\n" "$row" "$rc" "$(echo "$(date +%s.%N) - $start" | bc)" >>"$out/results"
        done
        stop
    done
    serve "127.0.0.1:$EXAMPLES_BENCH_PORT"
    for kind in "${BENCH_KINDS[@]}"; do
        start=$(date +%s.%N)
        set +e
        timeout -k 10 "$BENCH_TIMEOUT" "$IGGY_BENCH" "$kind" tcp --server-address "127.0.0.1:$EXAMPLES_BENCH_PORT" \
            >"$out/logs/bench.$kind.log" 2>&1
        rc=$?
        set -e
        printf "bench\t%s\t%s\t%.1f\n" "$kind" "$rc" "$(echo "$(date +%s.%N) - $start" | bc)" >>"$out/results"
    done
    stop
    python3 "$root/scripts/iggy_examples_report.py" "$out" "$EXAMPLES_OUT" "$EXAMPLE_TIMEOUT" "$BENCH_TIMEOUT"
    log "wrote $EXAMPLES_OUT"
}

case "$phase" in
    prepare) prepare ;;
    build) build ;;
    run) run ;;
    report) report ;;
    examples) examples ;;
    all) build; run ;;
    *) log "unknown phase $phase"; exit 2 ;;
esac
