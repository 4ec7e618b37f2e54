#!/bin/sh
# A directory of /sys/kernel/iommu_groups holds a link to itself.
# (run in a copy of tests/data/hosts/two-socket-8gpu; $OUTSIDE is a directory beside it)
D='sys/bus/pci/devices/0000:17:00.0'
ln -s ../../../../kernel/iommu_groups/40/devices sys/kernel/iommu_groups/40/devices/loop
