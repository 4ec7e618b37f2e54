#!/bin/sh
# 65 accelerator requests (the limit is 64).
python3 -c "
import sys
r = \"<av:request profile='test-a100'/>\" * 65
open(sys.argv[1], 'w').write(\"<domain><name>evil</name><uuid>00000001-0000-4000-8000-000000000001</uuid><metadata><av:accelerators xmlns:av='urn:accelvirt:domain:1'>%s</av:accelerators></metadata></domain>\n\" % r)
" "$1"
