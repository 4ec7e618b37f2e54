#!/bin/sh
# /sys/devices/system/node is a FIFO (no NUMA nodes).
# (run in a copy of tests/data/hosts/two-socket-8gpu; $OUTSIDE is a directory beside it)
D='sys/bus/pci/devices/0000:17:00.0'
rm -rf sys/devices/system/node && mkfifo sys/devices/system/node
