#!/bin/sh
# 100,000 nested elements inside <devices>: libxml2's depth limit, not the stack.
python3 -c "
import sys
n = 100000
open(sys.argv[1], 'w').write(\"<domain><name>evil</name><devices>\" + '<a>' * n + '</a>' * n + '</devices></domain>\n')
" "$1"
