# SPDX-License-Identifier: Apache-2.0
# The placed domain ($PLACED) as its owner edited it: count='1' made
# count='4' and its av:placement dropped, so that `accelvirt start` must
# place it again (and would have claimed four GPUs).
python3 - "$PLACED" "$1" <<'PY'
import re, sys
x = open(sys.argv[1]).read().replace('count="1"', 'count="4"')
open(sys.argv[2], "w").write(re.sub(r"<av:placement.*?</av:placement>", "", x, flags=re.S))
PY
