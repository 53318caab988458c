#!/usr/bin/env bash
# On the device tool's TPU host: the corpus's deviceless estimates on its 13 cores, with the
# project's wheels (.whl-tpu/, `pip wheel --no-deps . -w .whl-tpu` and its pure-Python dependencies).
# The entries run from a copy of the repository without its inspector/ source folder, so that a
# sample importing inspector.kernels finds the installed package, not the source tree.
# Usage: OUT=dir [LIMIT=seconds] bash tests/bench/device_estimate.sh ONLY [WORKERS]  (ONLY "" for all; writes
# $OUT/estimated.json as each entry ends, and estimate.log)
set -u
OUT=${OUT:-/tmp/tpu-out}; mkdir -p "$OUT"
PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl-tpu/*.whl || exit 1
export PYTHONPATH=${PYTHONPATH:-}:/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 PYTHONSAFEPATH=1
W=$(mktemp -d); tar cf - --exclude=./inspector --exclude=./views --exclude=./.git --exclude=./.whl-tpu . | tar xf - -C "$W"
cd "$W" && timeout "${LIMIT:-570}" python3 tests/bench/chip_corpus.py estimate "$OUT/estimated.json" --only "$1" --workers "${2:-6}" > "$OUT/estimate.log" 2>&1
echo "rc=$?" >> "$OUT/estimate.log"
