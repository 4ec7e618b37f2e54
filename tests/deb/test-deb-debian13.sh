#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The Debian package tier on Debian 13 (make check-deb runs it after the
# Debian 12 one): the .deb built with Debian 13's dpkg-buildpackage and
# lintian in a Debian 13 build chroot, then installed, checked, removed and
# purged in a fresh Debian 13 chroot, as tests/deb/test-deb.sh does on
# Debian 12.
AV_DEB_SUITE=trixie exec bash "$(dirname "$0")/test-deb.sh" "$@"
