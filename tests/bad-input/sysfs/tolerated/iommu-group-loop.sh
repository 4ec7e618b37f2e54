#!/bin/sh
# The A100's iommu_group link points at itself.
# (run in a copy of tests/data/hosts/two-socket-8gpu; $OUTSIDE is a directory beside it)
D='sys/bus/pci/devices/0000:17:00.0'
rm "$D/iommu_group" && ln -s iommu_group "$D/iommu_group"
