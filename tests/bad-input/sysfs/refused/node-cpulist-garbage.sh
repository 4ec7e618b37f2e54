#!/bin/sh
# NUMA node 0's CPU list is no CPU list.
# (run in a copy of tests/data/hosts/two-socket-8gpu; $OUTSIDE is a directory beside it)
D='sys/bus/pci/devices/0000:17:00.0'
printf '0-3,\033[2J,x\n' >sys/devices/system/node/node0/cpulist
