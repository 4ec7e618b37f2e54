#!/bin/sh
# An entry nesting 100,000 arrays: jansson's depth limit, not the stack.
python3 -c "
import sys
n = 100000
open(sys.argv[1], 'w').write('{\"seq\":1,\"time\":\"2026-01-01T00:00:00Z\",\"prev\":\"\",\"event\":\"x\",\"x\":' + '[' * n + ']' * n + '}\n')
" "$1"
