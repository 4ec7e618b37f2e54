#!/bin/sh
# A valid policy anyone may write (policies name commands run as root).
printf '{"profiles": [{"name": "test-a100", "match": {"vendor": "0x10de", "device": "0x20f1"}, "attach": "vfio-pci"}]}\n' >"$1"
chmod 0666 "$1"
