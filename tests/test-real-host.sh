#!/bin/sh
# accelvirt tests: a sysfs tree copied from a real host reads the same as the
# host itself.  The copy is made now, from this machine's own /sys (read only),
# by tests/data/capture-host.sh, relative links and all.
. "$AV_TEST_SRCDIR/lib.sh"

AV=$ACCELVIRT
POL="$AV_TEST_SRCDIR/../policies"

check "capture-host.sh copies this machine's /sys (read only)" \
    sh "$AV_TEST_SRCDIR/data/capture-host.sh" / "$AV_TMP/copy"
check "accelvirt list --json reads this host" \
    eval "'$AV' --root / --policy-dir '$POL' list --json >'$AV_TMP/live.json'"
check "accelvirt list --json reads the copy" \
    eval "'$AV' --root '$AV_TMP/copy' --policy-dir '$POL' list --json >'$AV_TMP/copy.json'"
check "both say the same, device for device" diff -u "$AV_TMP/live.json" "$AV_TMP/copy.json"
check "the host has PCI devices (the comparison is not empty)" json "$AV_TMP/live.json" "len(d['pci']) > 0"
check "the copy is self-contained: no link in it points outside it" \
    eval "! find '$AV_TMP/copy' -type l -lname '/*' | grep -q ."
finish
