#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The placement tier's scrub "command" step: scrub-gate.sh GATES ADDRESS GROUP
# (the policy gives GATES; accelvirt appends the address and the IOMMU group).
# Writes GATES/waiting-ADDRESS, then waits until GATES/open-ADDRESS exists (60 s
# at most: then it fails), so that the test sees the device scrubbing; fails
# when GATES/fail-ADDRESS exists (the scrub did not verify: quarantined).
gates=$1 addr=$2
echo "$$" >"$gates/waiting-$addr"
i=0
while [ ! -e "$gates/open-$addr" ]; do
    i=$((i + 1))
    if [ $i -gt 600 ]; then
        rm -f "$gates/waiting-$addr"
        echo "scrub-gate: $gates/open-$addr did not appear within 60 s"
        exit 1
    fi
    sleep 0.1
done
rm -f "$gates/waiting-$addr"
if [ -e "$gates/fail-$addr" ]; then
    echo "scrub-gate: simulated failure scrubbing $addr"
    exit 1
fi
echo "scrub-gate: scrubbed $addr"
exit 0
