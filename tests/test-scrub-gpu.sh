#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: the scrubbing kernel's contract (scrub/gpu), where
# configure built it: bad usage exits 2, no CUDA device exits 3 with one
# line on stderr and nothing on stdout.  With AV_TEST_GPU=1 on a host with
# GPUs it also scrubs every GPU the runtime sees (all their free memory:
# not on a machine whose GPUs are in use) and checks each line's format and
# that the exit status agrees with the lines.
. "$AV_TEST_SRCDIR/lib.sh"

# In TESTS only where configure built the program (Makefile.am).
P=${ACCELVIRT_SCRUB_GPU:-}
if [ -z "$P" ] || [ ! -x "$P" ]; then
    echo "Bail out! ACCELVIRT_SCRUB_GPU does not name the built scrub/gpu/accelvirt-scrub-gpu"
    exit 1
fi

# usage ARGS...: exits 2, nothing on stdout, something on stderr.
usage() {
    expect_exit 2 "$P" "$@" || return 1
    [ ! -s "$AV_TMP/out" ] && [ -s "$AV_TMP/err" ]
}
check "an unknown option is bad usage" usage --bogus
check "--device takes a number or a PCI address" usage --device x
check "--device takes no negative number" usage --device -1
check "--reps takes 1 to 1000" usage --bench --reps 0
check "a stray argument is bad usage" usage 0000:01:00.0

# No device visible (an empty CUDA_VISIBLE_DEVICES hides them all; on a
# host without the NVIDIA driver the runtime finds none either).
no_device() {
    CUDA_VISIBLE_DEVICES= expect_exit 3 "$P" "$@" || return 1
    [ ! -s "$AV_TMP/out" ] || { echo "stdout:"; cat "$AV_TMP/out"; return 1; }
    [ "$(wc -l <"$AV_TMP/err")" -eq 1 ] || { echo "stderr is not one line:"; cat "$AV_TMP/err"; return 1; }
    grep -q '^accelvirt-scrub-gpu: no CUDA device found' "$AV_TMP/err" || { cat "$AV_TMP/err"; return 1; }
}
check "no CUDA device: exit 3, one line" no_device
check "no CUDA device, --device 0: exit 3, one line" no_device --device 0
check "no CUDA device, --bench: exit 3, one line" no_device --bench

# The GPUs themselves, when asked for.
gpus() {
    "$P" --bench --reps 3 >"$AV_TMP/out" 2>"$AV_TMP/err"
    rc=$?
    cat "$AV_TMP/err"
    [ -s "$AV_TMP/out" ] || { echo "no line on stdout (exit $rc)"; return 1; }
    # One line per GPU: the first six fields exactly, then key=value pairs.
    bad=$(grep -Evx 'accelvirt-coverage: device=[0-9a-f]{4}:[0-9a-f]{2}:[01][0-9a-f]\.[0-7] method=cuda cleared=[0-9]+ memory=[0-9]+ verified=(yes|no) gbps=[0-9]+\.[0-9]( [a-z_]+=[^ =]+)*' "$AV_TMP/out")
    [ -z "$bad" ] || { echo "lines out of format:"; echo "$bad"; return 1; }
    if grep -q ' verified=no ' "$AV_TMP/out"; then want=1; else want=0; fi
    [ "$rc" -eq "$want" ] || { echo "exit $rc, but the lines say $want"; cat "$AV_TMP/out"; return 1; }
    grep -v ' memset_gbps=[0-9.]* ratio=[0-9.]*' "$AV_TMP/out" | grep . && { echo "--bench lines without memset_gbps= ratio="; return 1; }
    cat "$AV_TMP/out"
    [ "$rc" -eq 0 ]
}
# Only on request (make check-gpu): it takes all free memory of every GPU.
if [ "${AV_TEST_GPU:-0}" = 1 ]; then
    check "every GPU cleared and verified, lines in the contract's format" gpus
fi

finish
