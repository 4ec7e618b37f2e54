#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Bootstrap the autotools build: ./autogen.sh && ./configure && make
set -e
srcdir=$(dirname "$0")
cd "$srcdir"
mkdir -p m4
autoreconf --force --install --verbose
