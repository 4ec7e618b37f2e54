#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: the scrub command of a card of attach netdev
# (tests/test-netdev.sh), standing in for a VCA's reset/reboot command.
# Called as netdev-scrub.sh ADDRESS GROUP; appends "ADDRESS GROUP
# netdev=IFNAME" to $AV_SCRUB_LOG; fails when the file $AV_SCRUB_FAIL exists.
[ -n "$AV_SCRUB_LOG" ] && echo "$* netdev=${ACCELVIRT_SCRUB_NETDEV:-none}" >>"$AV_SCRUB_LOG"
if [ -n "$AV_SCRUB_FAIL" ] && [ -e "$AV_SCRUB_FAIL" ]; then
    echo "the card did not come back" >&2
    exit 1
fi
exit 0
