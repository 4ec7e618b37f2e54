#!/bin/sh
# The A100 claims a VF outside the root.
# (run in a copy of tests/data/hosts/two-socket-8gpu; $OUTSIDE is a directory beside it)
D='sys/bus/pci/devices/0000:17:00.0'
ln -s "$OUTSIDE/sys/bus/pci/devices/0000:ee:00.0" "$D/virtfn0"
