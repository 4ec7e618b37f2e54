#!/bin/sh
# accelvirt tests: the fake FPGA programmer and driver command of the
# profile test-fpga (tests/test-hook.sh, issue 15).  Called as
#   hook-program.sh program ADDRESS FILE   copies FILE into the fake device's
#                                          BAR file resource2 under $ACCELVIRT_ROOT
#   hook-program.sh verify ADDRESS FILE    exits 0 when resource2 holds FILE
#   hook-program.sh POINT ADDRESS          a driver command (on_prepare, ...)
# Appends its arguments, the ACCELVIRT_ variables it was given and the
# driver the device is on to
# $AV_SCRUB_LOG.program; fails (exit 3) when the file $AV_SCRUB_FAIL.WHAT or
# $AV_SCRUB_FAIL.WHAT.ADDRESS exists (WHAT its first argument).
log=${AV_SCRUB_LOG:?}.program
echo "$* point=$ACCELVIRT_POINT device=$ACCELVIRT_DEVICE card=$ACCELVIRT_CARD region=$ACCELVIRT_REGION" \
    "identity=$ACCELVIRT_IDENTITY profile=$ACCELVIRT_PROFILE name=$ACCELVIRT_BITSTREAM_NAME" \
    "sha256=$ACCELVIRT_BITSTREAM_SHA256 domain=$ACCELVIRT_DOMAIN_NAME uuid=$ACCELVIRT_DOMAIN_UUID" \
    "fd=${ACCELVIRT_VFIO_GROUP_FD:-none}:$(readlink /proc/self/fd/3 2>/dev/null || echo none)" \
    "driver=$(basename "$(readlink "$ACCELVIRT_ROOT/sys/bus/pci/devices/$2/driver")" 2>/dev/null)" >>"$log"
# $AV_SCRUB_FAIL.sleep.WHAT holds seconds to sleep first (a slow command).
if [ -n "$AV_SCRUB_FAIL" ] && [ -e "$AV_SCRUB_FAIL.sleep.$1" ]; then
    sleep "$(cat "$AV_SCRUB_FAIL.sleep.$1")"
fi
if [ -n "$AV_SCRUB_FAIL" ] && { [ -e "$AV_SCRUB_FAIL.$1" ] || [ -e "$AV_SCRUB_FAIL.$1.$2" ]; }; then
    echo "simulated failure of $1 $2"
    exit 3
fi
bar="$ACCELVIRT_ROOT/sys/bus/pci/devices/$2/resource2"
case $1 in
    program) cp "$3" "$bar" ;;
    verify) cmp -s "$3" "$bar" ;;
esac
