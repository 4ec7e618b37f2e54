#!/bin/sh
# The A100's driver link climbs out of the root (resolved inside it: no such driver).
# (run in a copy of tests/data/hosts/two-socket-8gpu; $OUTSIDE is a directory beside it)
D='sys/bus/pci/devices/0000:17:00.0'
rm "$D/driver" && ln -s ../../../../../../../../../../../etc "$D/driver"
