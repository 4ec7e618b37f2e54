#!/bin/sh
# A valid policy in a policy dir anyone may write.
printf '{"profiles": [{"name": "test-a100", "match": {"vendor": "0x10de", "device": "0x20f1"}, "attach": "vfio-pci"}]}\n' >"$1"
chmod 0777 "$(dirname "$1")"
