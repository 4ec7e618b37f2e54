#!/bin/sh
# An entry of /sys/bus/pci/devices points at the directory itself.
# (run in a copy of tests/data/hosts/two-socket-8gpu; $OUTSIDE is a directory beside it)
D='sys/bus/pci/devices/0000:17:00.0'
ln -s . sys/bus/pci/devices/0000:ff:00.0
