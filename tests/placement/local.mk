# SPDX-License-Identifier: Apache-2.0
# check-placement: the real-Placement tier (tests/placement)
#
# Debian 12's real Placement 8.0.0 (python3-placement: placement-api on
# 127.0.0.1, SQLite, noauth2) with the resource providers Nova makes under
# [pci] report_in_placement and one_time_use; the build tree's hook, worker
# and CLI on private copies of the fake hosts keep each device's "reserved"
# true (tests/placement/README.md). Installs python3-placement
# (build-aux/install-deps --placement, as root) when missing; never skips.
# Not part of `make check`: run `make check-placement`. Through the same
# tap-driver as the other tests; results in tests/placement/*.log and
# tests/placement/test-suite.log; a failed run's server and accelvirt logs in
# tests/placement/logs/.

AV_PLACEMENT_TESTS = tests/placement/test-placement.sh
AV_PLACEMENT_SUITE_LOG = tests/placement/test-suite.log

EXTRA_DIST += \
	$(AV_PLACEMENT_TESTS) \
	tests/placement/placement-server.sh \
	tests/placement/placement.py \
	tests/placement/scrub-gate.sh \
	tests/placement/README.md

check-placement: $(AV_TEST_BUILDS) $(FAKE_HOSTS_STAMP)
	@$(MKDIR_P) tests/placement
	@$(MAKE) $(AM_MAKEFLAGS) run-tier AV_TIER_TESTS='$(AV_PLACEMENT_TESTS)' AV_TIER_SUITE_LOG='$(AV_PLACEMENT_SUITE_LOG)'

clean-local: clean-placement
clean-placement:
	-rm -f $(AV_PLACEMENT_SUITE_LOG) $(AV_PLACEMENT_TESTS:.sh=.log) $(AV_PLACEMENT_TESTS:.sh=.trs)
	-rm -rf tests/placement/logs

.PHONY: check-placement clean-placement
