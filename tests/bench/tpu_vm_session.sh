#!/usr/bin/env bash
# On a TPU VM (the device tool's v5e): install the project's wheels, then try every verb as a new user
# would, deviceless ones while another process holds the chip (the corpus measurement), and measure
# the corpus (tests/bench/chip_corpus.py). Writes under $OUT: log.txt, measured.json, estimated.json,
# extra.tar.gz. Usage: OUT=dir bash tests/bench/tpu_vm_session.sh [SECONDS]
set -u
OUT=${OUT:-/tmp/tpu-out}; mkdir -p "$OUT"; LOG=$OUT/log.txt; T=$(mktemp -d); START=$(date +%s); LIMIT=${1:-560}
PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl-tpu/*.whl || exit 1
export PYTHONPATH=${PYTHONPATH:-}:/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 PYTHONSAFEPATH=1
left() { echo $(( LIMIT - ($(date +%s) - START) )); }
step() {  # step NAME TIMEOUT CMD...: run, log rc, wall time and the output's tail
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s%N)
  timeout "$limit" "$@" > "$T/$name.out" 2> "$T/$name.err"; local rc=$?
  printf '\n=== %s rc=%s %sms: %s\n' "$name" "$rc" "$(( ($(date +%s%N) - t0) / 1000000 ))" "$*" >> "$LOG"
  tail -c 1500 "$T/$name.out" >> "$LOG"; echo "--- stderr" >> "$LOG"; tail -c 800 "$T/$name.err" >> "$LOG"
}
{
  echo "=== probe"; date; python3 -c 'import platform; print(platform.libc_ver())'
  env | grep -iE '^(TPU|JAX|XLA|LIBTPU|ALLOW)' ; ls -la /dev/vfio /dev/accel* 2>&1 | head
  for d in /sys/bus/pci/devices/*; do echo "$(cat $d/vendor 2>/dev/null) $(cat $d/device 2>/dev/null)"; done | sort | uniq -c
  python3 -c 'from inspector.compilation.backends import attached_chip; print("attached:", attached_chip())'
} >> "$LOG" 2>&1
step doctor 120 inspector doctor --target tpu-v5e
# the corpus: one process holds the chip for all of it; the deviceless estimates beside it
python3 tests/bench/chip_corpus.py measure "$OUT/measured.json" > "$OUT/measure.log" 2>&1 &
MEASURE=$!
ESTIMATE=
[ -z "${SKIP_ESTIMATE:-}" ] && { python3 tests/bench/chip_corpus.py estimate "$OUT/estimated.json" --workers 5 > "$T/estimate.log" 2>&1 & ESTIMATE=$!; }
sleep 20  # the measurement has the chip now
step show_default 180 inspector show samples/attention.py:flash
step show_time 240 inspector show samples/attention.py:flash --time
step check3 240 inspector check samples/attention.py:flash --target tpu-v5e,tpu-v6e,tpu-7x
step tune8 300 inspector tune samples/matmul.py:tiled --args 'bf16[1024,1024] bf16[1024,1024]' --grid bm=128,256,512 --grid bn=256,512 --workers 8
step export 180 inspector export samples/attention.py:naive --json "$T/naive.json" --dot "$T/naive.dot"
step compare 240 inspector compare samples/attention.py:flash --set-a block_q=256 --set-b block_q=512
step api 180 python3 -c 'import inspector; r = inspector.inspect("samples/attention.py:flash"); print("API", r.chip.name, r.stages.device_kind, len(r.fusions.kernels))'
step session 180 python3 -c 'from inspector.session import Session; s = Session("samples/attention.py:flash"); s.chip = s.suggested_chip(); r = s.report(); print("TUI session", s.chip, len(r.fusions.kernels))'
step diff_busy 120 inspector diff samples/attention.py:flash
step measure_busy 120 inspector show samples/attention.py:flash --measure
wait $MEASURE
echo "measure finished at $(( $(date +%s) - START ))s" >> "$LOG"
[ -n "${SKIP_CHIP_VERBS:-}" ] && { tar czf "$OUT/extra.tar.gz" -C "$T" . ; exit 0; }
step show_measure 120 inspector show samples/attention.py:flash --measure --json
# --measure against a plain profiler trace: tests/test_on_chip.py (pytest -m tpu)
step diff_chip 180 inspector diff samples/attention.py:flash
[ "$(left)" -gt 150 ] && step tune_measure 240 inspector tune samples/matmul.py:tiled --args 'bf16[4096,4096] bf16[4096,4096]' --grid bm=256,512,1024 --grid bk=512,1024 --grid bn=512,1024 --measure --top 8 --workers 8
[ "$(left)" -gt 40 ] && step naive_measure 60 inspector show samples/attention.py:naive --measure --view fusions --top 12
[ -n "$ESTIMATE" ] && kill $ESTIMATE 2>/dev/null; sleep 1
cp "$T/estimate.log" "$OUT/estimate.log"
cp "$T/show_measure.out" "$OUT/show_measure.json" 2>/dev/null
tar czf "$OUT/extra.tar.gz" -C "$T" . 2>/dev/null
echo "done at $(( $(date +%s) - START ))s" >> "$LOG"
