#!/bin/sh
# The A100 claims a physfn link to itself (a VF of itself).
# (run in a copy of tests/data/hosts/two-socket-8gpu; $OUTSIDE is a directory beside it)
D='sys/bus/pci/devices/0000:17:00.0'
ln -s . "$D/physfn"
