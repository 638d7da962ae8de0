# The `tail` scenario of scripts/bench.sh (sourced by it: uses its bench, fresh, row, median,
# jget, REPS, JSON_DIR and DATA_DIR).
#
# Issue 34's shape: 1 shard, 1 producer thread, 1 partition, 10 x 1000 B batches, fsync=never, at
# half of this shape's own peak, 1 GB from a quiet machine (fresh: write-back drained, caches
# dropped). Each run's latency is split: how late the producer sent each batch after it was due
# (its own pacing and wake-up), and from the append call to the ack in hand (admission, queue,
# shard, write, reply, wake-up). fio in the same pattern, moments apart: one psync job, 10 KiB
# writes at the same byte rate (its clat: the write call alone).
#
# The VM's free page reporting. On a VM whose kernel reports free pages to the host
# (/sys/module/page_reporting: virtio-balloon's free page reporting), the memory `fresh` frees
# (dropping the page cache) goes back to the host, and while a run takes it again the host stops
# the whole VM, both vCPUs at once, for up to tens of milliseconds (`perf sched timehist`: no
# event on either CPU while a woken thread waits; /proc/stat's steal grows by as much). No thread
# of any program runs then, so these pauses set the run's max and, through the backlog they
# leave, its p99.9 and p99. The scenario runs its shape once per repetition with the reporting as
# the machine has it, then pauses it (the order of pages reported raised past the largest order,
# restored when the script exits) for the rest of the runs, and says which it could do.
# Beside each run: the vCPU time the host took (steal, from /proc/stat, both vCPUs), and, on
# the idle machine, the longest pause a thread that never sleeps sees (scripts/vm_pauses.py):
# the floor under any max measured here.

PR_ORDER=/sys/module/page_reporting/parameters/page_reporting_order
pr_found=""
[ -w "$PR_ORDER" ] && pr_found=$(cat "$PR_ORDER")
pr_restore() { if [ -n "$pr_found" ]; then echo "$pr_found" >"$PR_ORDER" || true; fi; }
trap 'pr_restore; cleanup' EXIT
# Reporting paused: no order reaches it (the buddy allocator's largest is 10 on x86-64).
pr_pause() { if [ -n "$pr_found" ]; then echo 11 >"$PR_ORDER"; fi; }

T="--shards 1 --producers 1 --partitions 1 --message-size 1000 --messages-per-batch 10 --no-poll --fsync never"
TB="--shards 1 --producers 1 --partitions 1 --message-size 1000 --messages-per-batch 10 --no-poll --fsync batch"
pr_pause
pk=""; pkb=""
for _ in $(seq "$REPS"); do
  pk+=" $(bench append.mb_per_s $T --total-bytes 1GB --warmup 0)"
  pkb+=" $(bench append.mb_per_s $TB --total-bytes 500MB --warmup 0)"
done
peak=$(median $pk); rate=$((peak / 2)); peakb=$(median $pkb); rateb=$((peakb / 2))
declare -A v=()
add() { v[$1]+=" $2"; } # add KEY VALUE: one run's figure for a row
split_of() { # $1: prefix of the keys; the last run's JSON
  add "$1p50" "$(jget "$JSON_DIR/b.json" append.latency_us.p50)"
  add "$1p99" "$(jget "$JSON_DIR/b.json" append.latency_us.p99)"
  add "$1p999" "$(jget "$JSON_DIR/b.json" append.latency_us.p999)"
  add "$1max" "$(jget "$JSON_DIR/b.json" append.latency_us.max)"
  add "$1l99" "$(jget "$JSON_DIR/b.json" append_split.sent_late_us.p99)"
  add "$1l999" "$(jget "$JSON_DIR/b.json" append_split.sent_late_us.p999)"
  add "$1s50" "$(jget "$JSON_DIR/b.json" append_split.call_to_ack_us.p50)"
  add "$1s99" "$(jget "$JSON_DIR/b.json" append_split.call_to_ack_us.p99)"
  add "$1s999" "$(jget "$JSON_DIR/b.json" append_split.call_to_ack_us.p999)"
  add "$1steal" "$(cat "$JSON_DIR/steal")"
}
fio_pct() { # $1: fio's JSON, $2: write|sync; prints p50 p99 p99.9 in µs
  python3 -c 'import json,sys
j=json.load(open(sys.argv[1]))["jobs"][0]
p=(j["write"]["clat_ns"] if sys.argv[2]=="write" else j["sync"]["lat_ns"])["percentile"]
print(p["50.000000"]/1e3, p["99.000000"]/1e3, p["99.900000"]/1e3)' "$1" "$2"
}
for _ in $(seq "$REPS"); do
  # The machine's own floor: a spinning thread per CPU, idle machine, reporting paused.
  read -r a b _ < <(python3 scripts/vm_pauses.py 4)
  add floor "$a"; add floor_all "$b"
  # As the machine has it: the VM's free page reporting on (where it was).
  pr_restore
  bench append.mb_per_s $T --rate "$rate" --total-bytes 1GB --warmup 0.5 >/dev/null
  split_of found_
  pr_pause
  # The same, the producer a busy thread: it spins for sends due within 300 µs and while
  # its append is in flight (--spin-us), so neither its pacing nor the reply wakes it.
  bench append.mb_per_s $T --rate "$rate" --total-bytes 1GB --warmup 0.5 --spin-us 300 >/dev/null
  split_of spin_
  bench append.mb_per_s $T --rate "$rate" --total-bytes 1GB --warmup 0.5 >/dev/null
  split_of ""
  fresh
  fio --name=tail --directory="$DATA_DIR" --ioengine=psync --rw=write --bs=10k --size=1000m \
      --rate="$((rate * 1000000))" --numjobs=1 --output-format=json --output="$JSON_DIR/fio.json" >/dev/null
  read -r a b c < <(fio_pct "$JSON_DIR/fio.json" write)
  add f50 "$a"; add f99 "$b"; add f999 "$c"
  # A paced writer's view of the same filesystem: corelog-bench's pwrite loop on the same
  # schedule (one write in flight, latency from each slot, as the appends'). fio's clat is the
  # call alone; a writer that falls behind its schedule charges its later writes the wait.
  add pw99 "$(bench append.latency_us.p99 --engine pwrite $T --rate "$rate" --total-bytes 1GB --warmup 0.5)"
  # The default shape (every shard, its producers and partitions), at the same half rate.
  bench append.mb_per_s --message-size 1000 --messages-per-batch 10 --no-poll --fsync never --rate "$rate" --total-bytes 1GB --warmup 0.5 >/dev/null
  add d99 "$(jget "$JSON_DIR/b.json" append.latency_us.p99)"
  # fsync=batch at half of its own peak, against fio writing and fdatasync-ing each 10 KiB.
  bench append.mb_per_s $TB --rate "$rateb" --total-bytes 500MB --warmup 0.5 >/dev/null
  add b99 "$(jget "$JSON_DIR/b.json" append.latency_us.p99)"
  add bl99 "$(jget "$JSON_DIR/b.json" append_split.sent_late_us.p99)"
  add bs50 "$(jget "$JSON_DIR/b.json" append_split.call_to_ack_us.p50)"
  add bs99 "$(jget "$JSON_DIR/b.json" append_split.call_to_ack_us.p99)"
  fresh
  fio --name=tailsync --directory="$DATA_DIR" --ioengine=psync --rw=write --bs=10k --size=500m \
      --fdatasync=1 --rate="$((rateb * 1000000))" --numjobs=1 --output-format=json --output="$JSON_DIR/fio.json" >/dev/null
  read -r a b c < <(fio_pct "$JSON_DIR/fio.json" sync)
  add fs50 "$a"; add fs99 "$b"
  add pwb99 "$(bench append.latency_us.p99 --engine pwrite $TB --rate "$rateb" --total-bytes 500MB --warmup 0.5)"
  add pwbs99 "$(jget "$JSON_DIR/b.json" append_split.call_to_ack_us.p99)"
done
S="1 shard, 1 producer, 10 × 1000 B, \`fsync=never\`, $rate of $peak MB/s"
if [ -n "$pr_found" ]; then
  P="the VM's free page reporting paused"
  F="the VM's free page reporting on (page_reporting_order $pr_found, as the machine has it)"
else
  P="no free page reporting to pause on this machine"; F="$P"
fi
row value "a thread that never sleeps, idle machine, 4 s: its longest pause, any CPU (ms; the floor under every max below)" "${v[floor]}" - - "ms"
row value "the same, every CPU's spinner stopped at once (the whole VM paused) (ms)" "${v[floor_all]}" - - "ms"
row value "append p99 from schedule ($S), $F (µs)" "${v[found_p99]}" - - "µs"
row value "append p99.9, same (µs)" "${v[found_p999]}" - - "µs"
row value "append max, same (µs)" "${v[found_max]}" - - "µs"
row value "vCPU time taken by the host during that run (steal, both vCPUs, ms)" "${v[found_steal]}" - - "ms"
row value "append p50 at half of peak, from schedule ($S), $P (µs)" "${v[p50]}" - - "µs"
row value "append p99, same (µs)" "${v[p99]}" "<=" 200 "µs"
row value "append p99.9, same (µs)" "${v[p999]}" "<=" 1000 "µs"
row value "append max, same (µs)" "${v[max]}" "<=" 5000 "µs"
row value "vCPU time taken by the host during that run (steal, both vCPUs, ms)" "${v[steal]}" - - "ms"
row value "of it, sent late after due (the producer's pacing and wake-up): p99 (µs)" "${v[l99]}" - - "µs"
row value "of it, sent late: p99.9 (µs)" "${v[l999]}" - - "µs"
row value "of it, call to ack (admission, queue, shard, write, reply, wake-up): p50 (µs)" "${v[s50]}" - - "µs"
row ratio "append p99 from schedule (µs)" "fio psync, 10 KiB writes at the same rate: clat p99" "${v[f99]}" "${v[p99]}" "<=" 5
row ratio "call to ack p99 (µs)" "fio clat p99" "${v[f99]}" "${v[s99]}" "<=" 5
row ratio "call to ack p99.9 (µs)" "fio clat p99.9" "${v[f999]}" "${v[s999]}"
row ratio "call to ack p50 (µs)" "fio clat p50" "${v[f50]}" "${v[s50]}"
row value "append p99, the default shape (every shard, its producers), $rate MB/s, $P (µs)" "${v[d99]}" "<=" 500 "µs"
row ratio "append p99 at half of \`fsync=batch\` peak ($rateb of $peakb MB/s, same shape), from schedule (µs)" "fio psync, 10 KiB writes each followed by fdatasync, same rate: fdatasync p99" "${v[fs99]}" "${v[b99]}" "<=" 2
row value "of it, sent late (the producer's 4 appends in flight all waiting on syncs): p99 (µs)" "${v[bl99]}" - - "µs"
row ratio "of it, call to ack p99, \`fsync=batch\` (µs)" "fio fdatasync p99" "${v[fs99]}" "${v[bs99]}"
row ratio "call to ack p50, \`fsync=batch\` (µs)" "fio fdatasync p50" "${v[fs50]}" "${v[bs50]}"
row ratio "append p99 from schedule, \`fsync=batch\`, $rateb MB/s (µs)" "a paced pwrite + fdatasync loop, one write in flight (\`corelog-bench --engine pwrite\`), same rate and schedule, from schedule" "${v[pwb99]}" "${v[b99]}"
row value "that loop's write + fdatasync call alone: p99 (µs)" "${v[pwbs99]}" - - "µs"
row ratio "append p99 from schedule, \`fsync=never\`, $rate MB/s (µs)" "the same pwrite loop without the fdatasync, same rate and schedule, from schedule" "${v[pw99]}" "${v[p99]}"
row value "append p50 from schedule, the producer spinning (\`--spin-us 300\`: no wake-ups) (µs)" "${v[spin_p50]}" - - "µs"
row value "append p99, same (µs)" "${v[spin_p99]}" "<=" 200 "µs"
row value "append p99.9, same (µs)" "${v[spin_p999]}" "<=" 1000 "µs"
row value "append max, same (µs)" "${v[spin_max]}" "<=" 5000 "µs"
row ratio "call to ack p50, the producer spinning (µs)" "fio clat p50" "${v[f50]}" "${v[spin_s50]}"
unset v
