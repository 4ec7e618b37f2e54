#!/bin/sh
# A first line of 17 MiB (a journal line is a few hundred bytes).
python3 -c "
import sys
open(sys.argv[1], 'w').write('{\"seq\":1,\"time\":\"2026-01-01T00:00:00Z\",\"prev\":\"\",\"event\":\"x\",\"pad\":\"' + 'p' * (17 << 20) + '\"}\n')
" "$1"
