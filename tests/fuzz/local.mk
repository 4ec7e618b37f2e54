# SPDX-License-Identifier: Apache-2.0
# The sanitizer build and the fuzzers (tests/fuzz), included from Makefile.am.
#
# configure --enable-sanitizers   every program built with ASan (LSan
#   included) and UBSan, non-recoverable; `make check` runs each test through
#   tests/fuzz/sanitized-test.sh, which sends every report (the detached
#   worker's too) to tests/sanitizer/TEST/ and fails the test when one is
#   there.  Use a build tree of its own (build-aux/quickstart test makes
#   build-sanitize/ with clang).
# configure CC=clang --enable-fuzzers   also the libFuzzer harnesses:
#   make fuzz                     each harness over its corpus for FUZZ_SECONDS
#                                 (default 60), TAP in tests/fuzz/test-fuzz.log
#   make fuzz FUZZ_SECONDS=600 FUZZ_JOBS=4
# In every build, `make check` replays each committed corpus once
# (tests/fuzz/replay-NAME): the inputs that once crashed stay regression tests.

AM_CFLAGS += $(SANITIZER_CFLAGS)
AM_LDFLAGS += $(SANITIZER_LDFLAGS)

AV_FUZZ_NAMES = domain policy pool journal
AV_FUZZ_COMMON = tests/fuzz/fuzz.h tests/fuzz/fuzz-common.c

# The replays: tests of `make check` (no argument: the corpus named by the
# program, tests/fuzz/corpus/NAME).
AV_UNIT_TESTS += \
	tests/fuzz/replay-domain \
	tests/fuzz/replay-policy \
	tests/fuzz/replay-pool \
	tests/fuzz/replay-journal
tests_fuzz_replay_domain_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz-domain.c $(AV_FUZZ_COMMON)
tests_fuzz_replay_domain_LDADD = $(AV_CORE_LIBS)
tests_fuzz_replay_policy_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz-policy.c $(AV_FUZZ_COMMON)
tests_fuzz_replay_policy_LDADD = $(AV_CORE_LIBS)
tests_fuzz_replay_pool_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz-pool.c $(AV_FUZZ_COMMON)
tests_fuzz_replay_pool_LDADD = $(AV_CORE_LIBS)
tests_fuzz_replay_journal_SOURCES = tests/fuzz/replay.c tests/fuzz/fuzz-journal.c $(AV_FUZZ_COMMON)
tests_fuzz_replay_journal_LDADD = $(AV_CORE_LIBS)

# The libFuzzer programs, built by `make fuzz` only.
AV_FUZZERS = \
	tests/fuzz/fuzz-domain \
	tests/fuzz/fuzz-policy \
	tests/fuzz/fuzz-pool \
	tests/fuzz/fuzz-journal
EXTRA_PROGRAMS += $(AV_FUZZERS)
CLEANFILES += $(AV_FUZZERS)
tests_fuzz_fuzz_domain_SOURCES = tests/fuzz/fuzz-domain.c $(AV_FUZZ_COMMON)
tests_fuzz_fuzz_domain_LDADD = $(AV_CORE_LIBS)
tests_fuzz_fuzz_domain_LDFLAGS = $(AM_LDFLAGS) $(FUZZER_LDFLAGS)
tests_fuzz_fuzz_policy_SOURCES = tests/fuzz/fuzz-policy.c $(AV_FUZZ_COMMON)
tests_fuzz_fuzz_policy_LDADD = $(AV_CORE_LIBS)
tests_fuzz_fuzz_policy_LDFLAGS = $(AM_LDFLAGS) $(FUZZER_LDFLAGS)
tests_fuzz_fuzz_pool_SOURCES = tests/fuzz/fuzz-pool.c $(AV_FUZZ_COMMON)
tests_fuzz_fuzz_pool_LDADD = $(AV_CORE_LIBS)
tests_fuzz_fuzz_pool_LDFLAGS = $(AM_LDFLAGS) $(FUZZER_LDFLAGS)
tests_fuzz_fuzz_journal_SOURCES = tests/fuzz/fuzz-journal.c $(AV_FUZZ_COMMON)
tests_fuzz_fuzz_journal_LDADD = $(AV_CORE_LIBS)
tests_fuzz_fuzz_journal_LDFLAGS = $(AM_LDFLAGS) $(FUZZER_LDFLAGS)

EXTRA_DIST += \
	tests/fuzz/corpus \
	tests/fuzz/dict \
	tests/fuzz/lsan.supp \
	tests/fuzz/make-corpus.sh \
	tests/fuzz/sanitized-test.sh \
	tests/fuzz/test-fuzz.sh

# --- every test under the sanitizers ---
if ENABLE_SANITIZERS
LOG_COMPILER = $(SHELL) $(top_srcdir)/tests/fuzz/sanitized-test.sh
SH_LOG_COMPILER = $(SHELL) $(top_srcdir)/tests/fuzz/sanitized-test.sh
AM_TESTS_ENVIRONMENT += \
	AV_SANITIZER_DIR='$(abs_top_builddir)/tests/sanitizer'; export AV_SANITIZER_DIR; \
	G_SLICE=always-malloc; export G_SLICE;
endif

# --- make fuzz ---
FUZZ_SECONDS = 60
FUZZ_JOBS = 2
AV_FUZZ_TESTS = tests/fuzz/test-fuzz.sh
AV_FUZZ_SUITE_LOG = tests/fuzz/test-suite.log
if ENABLE_FUZZERS
fuzz: $(AV_FUZZERS)
	@rm -f $(AV_FUZZ_SUITE_LOG) $(AV_FUZZ_TESTS:.sh=.log) $(AV_FUZZ_TESTS:.sh=.trs)
	@AV_FUZZ_SECONDS='$(FUZZ_SECONDS)' AV_FUZZ_JOBS='$(FUZZ_JOBS)' \
	  $(MAKE) $(AM_MAKEFLAGS) $(AV_FUZZ_SUITE_LOG) VERBOSE=yes \
	  TESTS='$(AV_FUZZ_TESTS)' TEST_LOGS='$(AV_FUZZ_TESTS:.sh=.log)' TEST_SUITE_LOG='$(AV_FUZZ_SUITE_LOG)'
else
fuzz:
	@echo "make fuzz: this build has no fuzzers: run make -C build-sanitize fuzz after" >&2; \
	echo "  build-aux/quickstart test, or configure a tree of its own with" >&2; \
	echo "  ./configure CC=clang-14 --enable-fuzzers (docs/testing.md)" >&2; exit 1
endif
.PHONY: fuzz

clean-local: clean-fuzz
clean-fuzz:
	-rm -rf tests/fuzz/run tests/sanitizer $(AV_FUZZ_SUITE_LOG) $(AV_FUZZ_TESTS:.sh=.log) $(AV_FUZZ_TESTS:.sh=.trs)
.PHONY: clean-fuzz

# The seed corpus made again from the tests' files (read the diff, commit).
fuzz-corpus: $(AV_TEST_BUILDS) $(FAKE_HOSTS_STAMP)
	@$(AM_TESTS_ENVIRONMENT) $(SHELL) $(srcdir)/tests/fuzz/make-corpus.sh
.PHONY: fuzz-corpus

# The sanitizer build checks its own plumbing: every kind of report, also
# from a detached process, fails a test (tests/fuzz/test-sanitizers.sh).
# (canary is no test itself: built for it as check data.)
EXTRA_PROGRAMS += tests/fuzz/canary
CLEANFILES += tests/fuzz/canary
tests_fuzz_canary_SOURCES = tests/fuzz/canary.c
tests_fuzz_canary_LDADD = $(GLIB_LIBS)
if ENABLE_SANITIZERS
check_DATA += tests/fuzz/canary$(EXEEXT)
dist_check_SCRIPTS += tests/fuzz/test-sanitizers.sh
else
EXTRA_DIST += tests/fuzz/test-sanitizers.sh
endif
