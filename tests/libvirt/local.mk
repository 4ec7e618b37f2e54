# SPDX-License-Identifier: Apache-2.0
# check-libvirt: the host libvirt tier (tests/libvirt)
#
# A real libvirtd 9.0 (Debian 12), private to a mount namespace, calls a
# recording qemu hook; the tests assert libvirt's exact hook sequences
# (test-sequence.sh), then run the build tree's accelvirt-hook beside it on
# private copies of the fake hosts (test-hook.sh: needs the hook, the worker,
# the CLI and the fake hosts, built first). Needs
# root; installs its packages (tests/libvirt/install-deps.sh) when missing.
# Not part of `make check`: run `make check-libvirt`. The scripts run through
# the same tap-driver as the other tests; results go to tests/libvirt/*.log
# and tests/libvirt/test-suite.log.

AV_LIBVIRT_TESTS = tests/libvirt/test-sequence.sh tests/libvirt/test-hook.sh \
	tests/libvirt/test-scrub-vm.sh
AV_LIBVIRT_SUITE_LOG = tests/libvirt/test-suite.log

EXTRA_DIST += \
	$(AV_LIBVIRT_TESTS) \
	tests/libvirt/harness.sh \
	tests/libvirt/record-hook \
	tests/libvirt/av-hook-wrapper \
	tests/libvirt/install-deps.sh \
	tests/libvirt/build-scrub-image.sh \
	tests/libvirt/README.md

check-libvirt: $(AV_TEST_BUILDS) $(FAKE_HOSTS_STAMP)
	@$(MAKE) $(AM_MAKEFLAGS) run-tier AV_TIER_TESTS='$(AV_LIBVIRT_TESTS)' AV_TIER_SUITE_LOG='$(AV_LIBVIRT_SUITE_LOG)'

# The tier's results. automake allows one clean-local recipe (in Makefile.am);
# this only adds a prerequisite to it.
clean-local: clean-libvirt
clean-libvirt:
	-rm -f $(AV_LIBVIRT_SUITE_LOG) $(AV_LIBVIRT_TESTS:.sh=.log) $(AV_LIBVIRT_TESTS:.sh=.trs)
	-rm -rf tests/libvirt/cache

.PHONY: check-libvirt clean-libvirt
