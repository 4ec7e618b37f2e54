#!/bin/sh
# The A100's numa_node is a FIFO (a device without one has node -1).
# (run in a copy of tests/data/hosts/two-socket-8gpu; $OUTSIDE is a directory beside it)
D='sys/bus/pci/devices/0000:17:00.0'
rm "$D/numa_node" && mkfifo "$D/numa_node"
