#!/bin/sh
# A domain XML of 9 MiB (over AV_DOMAIN_XML_MAX, 8 MiB): refused before libxml2 sees it.
python3 -c "
import sys
pad = '<!--' + 'x' * (9 * 1024 * 1024) + '-->'
open(sys.argv[1], 'w').write(\"<domain><name>evil</name>\" + pad + '</domain>\n')
" "$1"
