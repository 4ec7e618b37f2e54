#!/bin/sh
# The A100's vendor id file holds 100,000 bytes.
# (run in a copy of tests/data/hosts/two-socket-8gpu; $OUTSIDE is a directory beside it)
D='sys/bus/pci/devices/0000:17:00.0'
head -c 100000 /dev/zero | tr "\\0" a >"$D/vendor"
