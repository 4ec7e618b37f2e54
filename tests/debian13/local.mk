# SPDX-License-Identifier: Apache-2.0
# check-debian13: the Debian 13 tier (tests/debian13/README.md).
#
# Makes a Debian 13 root with mmdebstrap (its tarball cached in
# tests/debian13/cache) holding the packages build-aux/install-deps names,
# builds HEAD inside it with --enable-werror (GCC 14 and clang 19) and runs
# make check there (check-debian13) or the VM rig (check-vm-debian13), each
# result a TAP line.  Needs root; the first run
# downloads the root from deb.debian.org.  Not part of `make check`: run
# `make check-debian13`.  Results in tests/debian13/test-debian13.log and
# tests/debian13/test-suite.log.

AV_D13_TESTS = tests/debian13/test-debian13.sh
AV_D13_SUITE_LOG = tests/debian13/test-suite.log

EXTRA_DIST += $(AV_D13_TESTS) tests/debian13/README.md tests/debian13/local.mk

# AV_D13_PHASES: "check" (make check-debian13), "vm" (make check-vm-debian13),
# or "check vm" (both in one root and one build: .ci/run).
check-debian13:
	@$(MAKE) $(AM_MAKEFLAGS) run-tier AV_TIER_TESTS='$(AV_D13_TESTS)' AV_TIER_SUITE_LOG='$(AV_D13_SUITE_LOG)'

# The VM rig in the Debian 13 root: Debian 13's kernel 6.12 in the guest,
# its QEMU 10 and libvirt 11.3 inside (tests/vm, run as on a Debian 13 host).
check-vm-debian13:
	@AV_D13_PHASES=vm $(MAKE) $(AM_MAKEFLAGS) run-tier AV_TIER_TESTS='$(AV_D13_TESTS)' AV_TIER_SUITE_LOG='$(AV_D13_SUITE_LOG)'

clean-local: clean-debian13
clean-debian13:
	-rm -f $(AV_D13_SUITE_LOG) $(AV_D13_TESTS:.sh=.log) $(AV_D13_TESTS:.sh=.trs)
	-rm -rf --one-file-system tests/debian13/run

.PHONY: check-debian13 check-vm-debian13 clean-debian13
