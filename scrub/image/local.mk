# SPDX-License-Identifier: Apache-2.0
# scrub/image: the recipe of the vm scrub method's image (scrub/image/build, run by
# hand or by tests/vm/build.sh; not by make), its /init, and its BAR scrubber.
# `make check` builds accelvirt-scrub-bars as a plain check program (the recipe links it
# statically for the image) and runs tests/test-scrub-bars.sh on fake sysfs trees.
check_PROGRAMS += scrub/image/accelvirt-scrub-bars
scrub_image_accelvirt_scrub_bars_SOURCES = scrub/image/accelvirt-scrub-bars.c
# plain C and libc only, as in the image: none of the project's libraries
scrub_image_accelvirt_scrub_bars_LDADD =
dist_check_SCRIPTS += tests/test-scrub-bars.sh
EXTRA_DIST += scrub/image/build scrub/image/init scrub/image/local.mk
