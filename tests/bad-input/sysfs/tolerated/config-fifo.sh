#!/bin/sh
# The A100's PCI config space is a FIFO.
# (run in a copy of tests/data/hosts/two-socket-8gpu; $OUTSIDE is a directory beside it)
D='sys/bus/pci/devices/0000:17:00.0'
rm -f "$D/config" && mkfifo "$D/config"
