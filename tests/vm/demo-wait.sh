#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The demo's scrub step (tests/vm/demo-lifecycle.json, method "command"): waits until
# the demo's scenario says go (/run/demo-go, at most 120 s), so that what a device
# refuses while it is dirty can be shown before its scrub clears it.
i=0
while ! test -e /run/demo-go && test $i -lt 600; do sleep 0.2; i=$((i + 1)); done
echo "waited $((i / 5)) s for the demo"
