#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The VM rig's scrub command (tests/vm/hook-policies, method "command"): the worker
# calls it as scrub-sleep.sh ADDRESS GROUP. It sleeps 2 s (so that `accelvirt status`
# can be seen saying "scrubbing") and notes the call in $AVVM_SCRUB_LOG when set.
sleep 2
if test -n "${AVVM_SCRUB_LOG:-}"; then echo "$*" >> "$AVVM_SCRUB_LOG"; fi
echo "slept 2 s for $*"
exit 0
