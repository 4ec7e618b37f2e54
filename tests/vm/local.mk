# SPDX-License-Identifier: Apache-2.0
# check-vm: the VM rig (tests/vm). Not part of `make check`: it boots a QEMU guest
# (TCG, ~1 min) with a real Linux kernel: emulated Intel IOMMU, 2 NUMA nodes, pxb-pcie,
# ivshmem, edu, a pcie-pci-bridge and the mtty mdev sample. Needs the Debian packages
# that tests/vm/install-deps.sh installs (as root); a missing one fails, naming it.
#   make check-vm                    build the guest (cached) and run tests/vm/test-vm.sh
#   AV_VM_CACHE=DIR make check-vm    keep the cache elsewhere (default tests/vm/cache)
VM_CACHE = $(abs_top_builddir)/tests/vm/cache
VM_RUN = $(abs_top_builddir)/tests/vm/run
VM_RIG_FILES = \
	tests/vm/install-deps.sh \
	tests/vm/build.sh \
	tests/vm/run-vm.sh \
	tests/vm/test-vm.sh \
	tests/vm/init.sh \
	tests/vm/scenario-basic.sh \
	tests/vm/scenario-e2e.sh \
	tests/vm/scenario-accel.sh \
	tests/vm/scenario-hotplug.sh \
	tests/vm/scenario-fpga.sh \
	tests/vm/fpga-policies \
	tests/vm/fpga-driver.sh \
	tests/vm/fpga-prog.c \
	tests/vm/scenario-topology.sh \
	tests/vm/topo-policies \
	tests/vm/accel-policies \
	tests/vm/scenario-demo-e2e.sh \
	tests/vm/demo-lifecycle.json \
	tests/vm/demo-wait.sh \
	tests/vm/demo-policies \
	tests/vm/hook-policies \
	tests/vm/scrub-policies \
	tests/vm/id-policies \
	tests/vm/reboot-policies \
	tests/vm/scrub-sleep.sh \
	tests/vm/make-fixture.sh \
	tests/vm/zero-bar.c \
	tests/vm/README.md

EXTRA_DIST += $(VM_RIG_FILES)

# test-vm.sh runs through the same tap-driver as `make check`, so its results
# land in tests/vm/test-vm.{log,trs} and are counted with the others.
AV_VM_TESTS = tests/vm/test-vm.sh
AV_VM_SUITE_LOG = tests/vm/test-suite.log
# The guest's kernel is real and the rig needs no double: it runs the builds
# that `make install` installs (AV_TEST_BINDIR, Makefile.am), not tests/bin/.
# bench-zero (an EXTRA_PROGRAM) runs in boot 1 on a real vfio-pci BAR (scenario-basic.sh);
# boot 2's init runs the command of the built accelvirt-reconcile.service.
check-vm: accelvirt$(EXEEXT) accelvirt-hook$(EXEEXT) accelvirt-worker$(EXEEXT) accelvirt-hold$(EXEEXT) bench/bench-zero$(EXEEXT) \
		systemd/accelvirt-reconcile.service
	@cache="$${AV_VM_CACHE:-$(VM_CACHE)}"; \
	$(MKDIR_P) "$$cache" tests/vm && \
	AV_VM_CACHE="$$cache" $(SHELL) $(srcdir)/tests/vm/build.sh "$$cache" >/dev/null && \
	rm -f $(AV_VM_SUITE_LOG) $(AV_VM_TESTS:.sh=.log) $(AV_VM_TESTS:.sh=.trs) && \
	AV_VM_CACHE="$$cache" AV_VM_RUN='$(VM_RUN)' \
	  $(MAKE) $(AM_MAKEFLAGS) $(AV_VM_SUITE_LOG) VERBOSE=yes AV_TEST_BINDIR='$(abs_top_builddir)' \
	  TESTS='$(AV_VM_TESTS)' TEST_LOGS='$(AV_VM_TESTS:.sh=.log)' TEST_SUITE_LOG='$(AV_VM_SUITE_LOG)'
.PHONY: check-vm

# The committed fixture tests/data/captured/qemu-q35-viommu.tar.xz, made again from one
# boot of the guest (tests/vm/make-fixture.sh); then regenerate its golden file:
#   AV_TEST_REGENERATE=1 make check TESTS=tests/test-real-host.sh   (and read the diff)
capture-vm-fixture:
	@cache="$${AV_VM_CACHE:-$(VM_CACHE)}"; \
	$(MKDIR_P) "$$cache" && \
	AV_VM_CACHE="$$cache" $(SHELL) $(srcdir)/tests/vm/make-fixture.sh \
	  $(srcdir)/tests/data/captured/qemu-q35-viommu.tar.xz
.PHONY: capture-vm-fixture

# The cache and the last run dir (automake allows one clean-local recipe, in
# Makefile.am; this only adds a prerequisite to it).
clean-local: clean-vm
clean-vm:
	-rm -rf tests/vm/cache tests/vm/run $(AV_VM_SUITE_LOG) $(AV_VM_TESTS:.sh=.log) $(AV_VM_TESTS:.sh=.trs)
.PHONY: clean-vm
