#!/bin/sh
# A 64 MiB policy file (a description of 64 MiB).
python3 -c "
import sys
open(sys.argv[1], 'w').write('{\"description\": \"' + 'd' * (64 << 20) + '\", \"profiles\": []}\n')
" "$1"
