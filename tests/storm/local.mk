# SPDX-License-Identifier: Apache-2.0
# check-storm: the kill storm (tests/storm/kill-storm.py, issue 10).  Not part
# of `make check` (it runs about 2000 processes, 2 to 3 minutes here): run
# `make check-storm`; build-aux/quickstart test and CI do.  Its TAP goes
# through the tap-driver like every test, into tests/storm/*.log and .trs.
#   AV_STORM_KILLS=N   at least N processes killed (default 1000)
#   AV_STORM_SEED=S    the random seed (printed: a failure can be replayed)
#   AV_STORM_KEEP=1    keep the worlds (printed) to look into a failure
AV_STORM_TESTS = tests/storm/kill-storm.py
AV_STORM_SUITE_LOG = tests/storm/test-suite.log
EXTRA_DIST += $(AV_STORM_TESTS) tests/storm/local.mk

check-storm: $(AV_TEST_BUILDS) $(FAKE_HOSTS_STAMP)
	@rm -f $(AV_STORM_SUITE_LOG) tests/storm/kill-storm.log tests/storm/kill-storm.trs
	@$(MAKE) $(AM_MAKEFLAGS) $(AV_STORM_SUITE_LOG) VERBOSE=yes \
	  TESTS='$(AV_STORM_TESTS)' TEST_LOGS='tests/storm/kill-storm.log' TEST_SUITE_LOG='$(AV_STORM_SUITE_LOG)'

clean-local: clean-storm
clean-storm:
	-rm -f $(AV_STORM_SUITE_LOG) tests/storm/kill-storm.log tests/storm/kill-storm.trs
.PHONY: check-storm clean-storm
