# SPDX-License-Identifier: Apache-2.0
# check-deb: the Debian package tier (tests/deb)
#
# Builds the .deb from HEAD (git archive: commit first) with
# dpkg-buildpackage -us -uc -b and DEB_BUILD_OPTIONS=nocheck (make check
# runs apart), runs lintian --fail-on error, installs the package with apt in
# a Debian 12 chroot made by mmdebstrap (its tarball cached in
# tests/deb/cache), checks it, then removes and purges it; then the same on
# Debian 13 (tests/deb/test-deb-debian13.sh: built with dpkg-buildpackage and
# lintian in a Debian 13 build chroot, installed in a Debian 13 one). Needs root;
# installs its packages (build-aux/install-deps --deb) when missing; the first
# run downloads the chroot from deb.debian.org. Not part of `make check`:
# run `make check-deb`. Through the same tap-driver as the other tests;
# results in tests/deb/test-deb.log and tests/deb/test-suite.log.

AV_DEB_TESTS = tests/deb/test-deb.sh tests/deb/test-deb-debian13.sh
AV_DEB_SUITE_LOG = tests/deb/test-suite.log

EXTRA_DIST += \
	$(AV_DEB_TESTS) \
	tests/deb/README.md \
	debian/changelog \
	debian/control \
	debian/copyright \
	debian/rules \
	debian/source/format \
	debian/accelvirt.links \
	debian/accelvirt.postinst \
	debian/accelvirt.postrm

# Debian 13's after Debian 12's, even under make -j: both install packages on
# this host first (build-aux/install-deps --deb), and apt takes one at a time.
tests/deb/test-deb-debian13.log: tests/deb/test-deb.log

# The build tree's accelvirt lists the same fake host, for comparison.
# The package's programs are the installed ones: the build tree's accelvirt
# it is compared with is too (AV_TEST_BINDIR, Makefile.am).
check-deb: accelvirt$(EXEEXT) $(FAKE_HOSTS_STAMP)
	@$(MAKE) $(AM_MAKEFLAGS) run-tier AV_TEST_BINDIR='$(abs_top_builddir)' AV_TIER_TESTS='$(AV_DEB_TESTS)' AV_TIER_SUITE_LOG='$(AV_DEB_SUITE_LOG)'

clean-local: clean-deb
clean-deb:
	-rm -f $(AV_DEB_SUITE_LOG) $(AV_DEB_TESTS:.sh=.log) $(AV_DEB_TESTS:.sh=.trs)
	-rm -rf --one-file-system tests/deb/run tests/deb/run-trixie

.PHONY: check-deb clean-deb
