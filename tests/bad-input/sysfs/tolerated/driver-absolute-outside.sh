#!/bin/sh
# The A100's driver link is absolute, to a directory outside the root.
# (run in a copy of tests/data/hosts/two-socket-8gpu; $OUTSIDE is a directory beside it)
D='sys/bus/pci/devices/0000:17:00.0'
rm "$D/driver" && ln -s "$OUTSIDE/etc" "$D/driver"
