#!/bin/sh
# NUMA node 0's CPU list is a FIFO.
# (run in a copy of tests/data/hosts/two-socket-8gpu; $OUTSIDE is a directory beside it)
D='sys/bus/pci/devices/0000:17:00.0'
rm -f sys/devices/system/node/node0/cpulist && mkfifo sys/devices/system/node/node0/cpulist
