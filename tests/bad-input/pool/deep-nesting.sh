#!/bin/sh
# Devices nested 100,000 arrays deep: jansson's depth limit, not the stack.
python3 -c "
import sys
n = 100000
open(sys.argv[1], 'w').write('{\"version\": 1, \"devices\": ' + '[' * n + ']' * n + '}\n')
" "$1"
