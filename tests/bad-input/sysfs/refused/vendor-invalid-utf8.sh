#!/bin/sh
# The A100's vendor id holds bytes that are no UTF-8.
# (run in a copy of tests/data/hosts/two-socket-8gpu; $OUTSIDE is a directory beside it)
D='sys/bus/pci/devices/0000:17:00.0'
printf '0x\377\376\n' >"$D/vendor"
