#!/bin/sh
# An entry of /sys/bus/pci/devices is a FIFO.
# (run in a copy of tests/data/hosts/two-socket-8gpu; $OUTSIDE is a directory beside it)
D='sys/bus/pci/devices/0000:17:00.0'
mkfifo sys/bus/pci/devices/0000:ff:00.0
