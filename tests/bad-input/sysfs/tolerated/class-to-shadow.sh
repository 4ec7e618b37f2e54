#!/bin/sh
# The A100's class is a link to /etc/shadow (inside the root there is none).
# (run in a copy of tests/data/hosts/two-socket-8gpu; $OUTSIDE is a directory beside it)
D='sys/bus/pci/devices/0000:17:00.0'
rm "$D/class" && ln -s /etc/shadow "$D/class"
