#!/bin/sh
# A profile nested 100,000 arrays deep: jansson's depth limit, not the stack.
python3 -c "
import sys
n = 100000
open(sys.argv[1], 'w').write('{\"profiles\": ' + '[' * n + ']' * n + '}\n')
" "$1"
