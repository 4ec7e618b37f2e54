#!/bin/sh
# An entry of /sys/bus/pci/devices climbs to a device outside the root.
# (run in a copy of tests/data/hosts/two-socket-8gpu; $OUTSIDE is a directory beside it)
D='sys/bus/pci/devices/0000:17:00.0'
ln -s ../../../../../outside/sys/bus/pci/devices/0000:ee:00.0 sys/bus/pci/devices/0000:ee:00.0
