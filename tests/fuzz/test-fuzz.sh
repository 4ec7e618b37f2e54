#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# make fuzz: each libFuzzer harness over its committed corpus for
# AV_FUZZ_SECONDS (default 60), AV_FUZZ_JOBS of them at once (default 2).
# New inputs go to the scratch dir tests/fuzz/run/NAME/new of the build tree,
# never into the committed corpus; a crash, leak, timeout or broken property
# leaves its input in tests/fuzz/run/NAME/ (libFuzzer's crash-*, leak-*,
# timeout-*, oom-*) and fails that harness's TAP line.  To keep such an input
# as a regression test once fixed: copy it into tests/fuzz/corpus/NAME/
# (make check replays the corpus in every build).
#
#   AV_FUZZ_NAMES="domain pool"   only these harnesses
set -u
: "${AV_TEST_SRCDIR:?AV_TEST_SRCDIR is not set: run make fuzz}"
: "${AV_TEST_BUILDDIR:?AV_TEST_BUILDDIR is not set: run make fuzz}"
seconds=${AV_FUZZ_SECONDS:-60}
jobs=${AV_FUZZ_JOBS:-2}
names=${AV_FUZZ_NAMES:-domain policy pool journal}

# The pool and journal harnesses write a state dir per input: on tmpfs when
# there is one (fsync is free there).
if [ -d /dev/shm ] && [ -w /dev/shm ]; then base=/dev/shm; else base=${TMPDIR:-/tmp}; fi
scratch=$(mktemp -d "$base/accelvirt-fuzz.XXXXXX") || exit 99
trap 'rm -rf "$scratch"' EXIT

run_one() {
    name=$1
    run="$AV_TEST_BUILDDIR/fuzz/run/$name"
    rm -rf "$run"
    mkdir -p "$run/new" "$scratch/$name"
    dict="$AV_TEST_SRCDIR/fuzz/dict/$name.dict"
    set -- -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
        -print_final_stats=1 -artifact_prefix="$run/"
    [ -f "$dict" ] && set -- "$@" -dict="$dict"
    TMPDIR="$scratch/$name" "$AV_TEST_BUILDDIR/fuzz/fuzz-$name" "$@" \
        "$run/new" "$AV_TEST_SRCDIR/fuzz/corpus/$name" >"$run/log" 2>&1
    echo $? >"$run/status"
}

# AV_FUZZ_JOBS harnesses at a time.
running=0
for name in $names; do
    run_one "$name" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait
        running=0
    fi
done
wait

n=0
failed=0
for name in $names; do
    n=$((n + 1))
    run="$AV_TEST_BUILDDIR/fuzz/run/$name"
    status=$(cat "$run/status" 2>/dev/null || echo 99)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$run/log" | tail -1)
    seeds=$(find "$AV_TEST_SRCDIR/fuzz/corpus/$name" -type f | wc -l)
    new=$(find "$run/new" -type f | wc -l)
    artifacts=$(find "$run" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
        -o -name 'oom-*' -o -name 'slow-unit-*' \) | sort)
    if [ "$status" -eq 0 ] && [ -z "$artifacts" ]; then
        echo "ok $n - fuzz-$name: ${execs:-?} inputs in ${seconds} s from $seeds seeds, $new new in $run/new, nothing found"
    else
        echo "not ok $n - fuzz-$name: exit $status, input(s) kept: ${artifacts:-none}"
        tail -60 "$run/log" | sed 's/^/# /'
        failed=$((failed + 1))
    fi
done
echo "1..$n"
[ "$failed" -eq 0 ]
