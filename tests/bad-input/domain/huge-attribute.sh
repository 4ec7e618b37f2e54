#!/bin/sh
# A 7 MiB hostdev alias (under the document limit): no value accelvirt reads may be that long.
python3 -c "
import sys
a = 'a' * (7 * 1024 * 1024)
open(sys.argv[1], 'w').write(\"<domain><name>evil</name><uuid>00000001-0000-4000-8000-000000000001</uuid><devices><hostdev mode='subsystem' type='pci' managed='no'><source><address domain='0x0000' bus='0x17' slot='0x00' function='0x0'/></source><alias name='%s'/></hostdev></devices></domain>\n\" % a)
" "$1"
