#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# accelvirt tests: `accelvirt nova config` (issue 18) on the fake hosts of
# tests/data/mkhosts.py, read-only: the exact nova.conf fragment for
# vfio-pci (a profile that scrubs, one that does not), sriov-vf (one spec by
# the PF's address), mdev ([devices], [mdev_TYPE]) and usb (left out)
# profiles; every rule of Nova's it checks refused with one line, exit 1 and
# nothing on stdout; --json; the provider config YAML read back with
# python3's yaml against nova/compute/provider_config.py's rules; and every
# device_spec and alias line it printed checked by Nova's own rules
# (nova/pci/devspec.py, nova/pci/request.py _ALIAS_SCHEMA, Placement's
# name schemas).
. "$AV_TEST_SRCDIR/lib.sh"

AV=$ACCELVIRT
W="$AV_TMP/w"
mkdir -p "$W"
: >"$W/lines"

# pol NAME JSON: the policy dir $W/NAME with one file holding JSON.
pol() {
    mkdir -p "$W/$1" && printf '%s\n' "$2" >"$W/$1/10.json" && chmod 0755 "$W/$1" && chmod 0644 "$W/$1"/*.json
}
# nova HOST POLICY ARGS...: nova config for the fake HOST with $W/POLICY.
nova() {
    h=$1 p=$2; shift 2
    "$AV" --root "$AV_TEST_HOSTS/$h" --policy-dir "$W/$p" --state-dir "$W/state-$p" nova config --host compute1 "$@"
}
# same EXPECTED ACTUAL: the files are equal, else the diff.
same() {
    diff -u "$1" "$2"
}
# keep FILE: the device_spec and alias lines of FILE for the rules check below.
keep() {
    grep -E '^(device_spec|alias) = ' "$1" >>"$W/lines"
}
# refused POLICY HOST PATTERN: nova config exits 1 with one line matching
# PATTERN on stderr and nothing on stdout.
refused() {
    one_line 1 "$3" nova "$2" "$1" || return 1
    [ ! -s "$AV_TMP/out" ] || { echo "stdout is not empty:"; cat "$AV_TMP/out"; return 1; }
}

# ---- vfio-pci and usb: two-socket-8gpu (six A100s, two A6000s, a Movidius stick) ----
pol gpu '{"profiles": [
  {"name": "a100", "match": {"vendor": "10de", "device": "20f1"}, "attach": "vfio-pci", "numa": "strict",
   "resource_class": "CUSTOM_GPU_A100", "traits": ["CUSTOM_A", "CUSTOM_B"], "scrub": [{"method": "vfio-zero"}]},
  {"name": "a6000", "match": {"vendor": "0x10de", "device": "0x2230"}, "attach": "vfio-pci", "numa": "none",
   "scrub": [{"method": "none"}]},
  {"name": "stick", "match": {"vendor": "03e7"}, "attach": "usb"}
]}'
cat >"$W/gpu.expected" <<EOF
# accelvirt nova config: for host compute1, from the policies in $W/gpu (2 profiles, 8 devices)
# Nova >= 31.0.0 (2025.1) is needed for the "managed" tag, 32.0.0 (2025.2) for "one_time_use"; accelvirt's hook binds the devices to vfio-pci, hence "managed": "no".
# profile 'stick' (usb) is left out: Nova passes no USB devices.
# the compute node does not get CUSTOM_ACCELVIRT_SCRUBBED in the provider config: profile 'a6000' does not scrub.
[pci]
report_in_placement = True
device_spec = {"address": "0000:17:00.0", "vendor_id": "10de", "product_id": "20f1", "resource_class": "CUSTOM_GPU_A100", "traits": "CUSTOM_A,CUSTOM_B", "managed": "no", "one_time_use": "true"}
device_spec = {"address": "0000:31:00.0", "vendor_id": "10de", "product_id": "20f1", "resource_class": "CUSTOM_GPU_A100", "traits": "CUSTOM_A,CUSTOM_B", "managed": "no", "one_time_use": "true"}
device_spec = {"address": "0000:4b:00.0", "vendor_id": "10de", "product_id": "20f1", "resource_class": "CUSTOM_GPU_A100", "traits": "CUSTOM_A,CUSTOM_B", "managed": "no", "one_time_use": "true"}
device_spec = {"address": "0000:65:00.0", "vendor_id": "10de", "product_id": "20f1", "resource_class": "CUSTOM_GPU_A100", "traits": "CUSTOM_A,CUSTOM_B", "managed": "no", "one_time_use": "true"}
device_spec = {"address": "0000:98:00.0", "vendor_id": "10de", "product_id": "2230", "resource_class": "CUSTOM_PCI_10DE_2230", "managed": "no"}
device_spec = {"address": "0000:b1:00.0", "vendor_id": "10de", "product_id": "2230", "resource_class": "CUSTOM_PCI_10DE_2230", "managed": "no"}
device_spec = {"address": "0000:ca:00.0", "vendor_id": "10de", "product_id": "20f1", "resource_class": "CUSTOM_GPU_A100", "traits": "CUSTOM_A,CUSTOM_B", "managed": "no", "one_time_use": "true"}
device_spec = {"address": "0000:e3:00.0", "vendor_id": "10de", "product_id": "20f1", "resource_class": "CUSTOM_GPU_A100", "traits": "CUSTOM_A,CUSTOM_B", "managed": "no", "one_time_use": "true"}
alias = {"name": "a100", "resource_class": "CUSTOM_GPU_A100", "device_type": "type-PCI", "numa_policy": "required"}
alias = {"name": "a6000", "resource_class": "CUSTOM_PCI_10DE_2230", "device_type": "type-PCI", "numa_policy": "legacy"}

[filter_scheduler]
pci_in_placement = True
EOF
case1() {
    nova two-socket-8gpu gpu >"$W/gpu.out" && same "$W/gpu.expected" "$W/gpu.out"
}
check "vfio-pci profiles: one device_spec per GPU by address, class and traits, one_time_use where it scrubs; an alias each; usb left out with a comment" \
    case1
keep "$W/gpu.out"

case2() {
    nova two-socket-8gpu gpu --json >"$W/gpu.json"
}
check "--json: the same content, parsed" case2 
check "  ... host, device_spec, alias, devices, provider_config and notes as the text says" python3 - "$W/gpu.json" "$W/gpu.out" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read().splitlines()
specs = [json.loads(l[len("device_spec = "):]) for l in text if l.startswith("device_spec = ")]
aliases = [json.loads(l[len("alias = "):]) for l in text if l.startswith("alias = ")]
notes = [l[2:] for l in text[1:] if l.startswith("# ")]
assert set(j) >= {"host", "device_spec", "alias", "devices", "provider_config", "notes"}, sorted(j)
assert j["host"] == "compute1", j["host"]
assert j["device_spec"] == specs, (j["device_spec"], specs)
assert j["alias"] == aliases
assert j["notes"] == notes, (j["notes"], notes)
assert j["devices"] == {"enabled_mdev_types": [], "mdev": {}}, j["devices"]
assert j["provider_config"] == {"meta": {"schema_version": "1.0"}, "providers": []}, j["provider_config"]
assert j["provider_config_file"] is None
PY

# ---- sriov-vf: sriov-fpga-qat (a QAT PF 0000:6b:00.0 with 4 VFs, a U250) ----
pol qat '{"profiles": [
  {"name": "qat-vf", "match": {"vendor": "8086", "device": "4941"}, "attach": "sriov-vf",
   "resource_class": "CUSTOM_QAT_VF", "scrub": [{"method": "reset"}]},
  {"name": "u250", "match": {"vendor": "10ee", "device": "5004"}, "attach": "vfio-pci", "scrub": [{"method": "reset"}]}
]}'
cat >"$W/qat.expected" <<EOF
# accelvirt nova config: for host compute1, from the policies in $W/qat (2 profiles, 5 devices)
# Nova >= 31.0.0 (2025.1) is needed for the "managed" tag, 32.0.0 (2025.2) for "one_time_use"; accelvirt's hook binds the devices to vfio-pci, hence "managed": "no".
# profile 'qat-vf' scrubs its VFs, but Nova cannot mark VFs one_time_use: accelvirt's hook still refuses a VF until its scrub is verified.
[pci]
report_in_placement = True
device_spec = {"address": "0000:3b:00.0", "vendor_id": "10ee", "product_id": "5004", "resource_class": "CUSTOM_PCI_10EE_5004", "managed": "no", "one_time_use": "true"}
device_spec = {"address": "0000:6b:00.0", "vendor_id": "8086", "product_id": "4941", "resource_class": "CUSTOM_QAT_VF", "managed": "no"}
alias = {"name": "qat-vf", "resource_class": "CUSTOM_QAT_VF", "device_type": "type-VF", "numa_policy": "preferred"}
alias = {"name": "u250", "resource_class": "CUSTOM_PCI_10EE_5004", "device_type": "type-PCI", "numa_policy": "preferred"}

[filter_scheduler]
pci_in_placement = True
EOF
case3() {
    nova sriov-fpga-qat qat >"$W/qat.out" && same "$W/qat.expected" "$W/qat.out"
}
check "sriov-vf: one device_spec by the PF's address with the VFs' ids, no one_time_use, the comment; an alias of type-VF" \
    case3
keep "$W/qat.out"

# ---- NVIDIA vGPU on VFs: vgpu-sriov (two L40S, 4 VFs each on nvidia) ----
pol vgpusriov '{"profiles": [
  {"name": "l40s-2q", "match": {"vendor": "10de", "pf": "0000:17:00.0"}, "attach": "sriov-vf", "vgpu_type": "L40S-2Q",
   "scrub": [{"method": "reset"}]},
  {"name": "l40s-4q", "match": {"vendor": "10de", "pf": "0000:98:00.0"}, "attach": "sriov-vf",
   "vgpu_type": "NVIDIA L40S-4Q", "scrub": [{"method": "reset"}]}
]}'
case_vgpu_sriov() {
    nova vgpu-sriov vgpusriov >"$W/vgpusriov.out" || return 1
    grep -qx 'device_spec = {"address": "0000:17:00.0", "vendor_id": "10de", "product_id": "26b9", "resource_class": "CUSTOM_VGPU_L40S_2Q", "managed": "no"}' "$W/vgpusriov.out" &&
    grep -qx 'device_spec = {"address": "0000:98:00.0", "vendor_id": "10de", "product_id": "26b9", "resource_class": "CUSTOM_VGPU_L40S_4Q", "managed": "no"}' "$W/vgpusriov.out" &&
    grep -qx 'alias = {"name": "l40s-2q", "resource_class": "CUSTOM_VGPU_L40S_2Q", "device_type": "type-VF", "numa_policy": "preferred"}' "$W/vgpusriov.out" &&
    grep -q "^# profile 'l40s-4q' makes an NVIDIA vGPU of type 'NVIDIA L40S-4Q' on each VF .* one type per GPU" "$W/vgpusriov.out" ||
    { cat "$W/vgpusriov.out"; return 1; }
}
check "vGPU VFs: one device_spec per GPU by its PF's address, a resource class of the type (CUSTOM_VGPU_L40S_2Q), managed no, the note" \
    case_vgpu_sriov
keep "$W/vgpusriov.out"

# ---- mdev: vgpu-mdev (two A10s offering nvidia-590, the mtty sample) ----
pol vgpu '{"profiles": [
  {"name": "a10-4q", "match": {"vendor": "10de", "device": "2236"}, "attach": "mdev", "mdev_type": "nvidia-590",
   "resource_class": "CUSTOM_VGPU_A10_4Q", "traits": ["CUSTOM_A10", "HW_GPU_API_CUDA_V11_0"]},
  {"name": "serial", "match": {"mdev_parent": "mtty"}, "attach": "mdev", "mdev_type": "mtty-2"}
]}'
cat >"$W/vgpu.expected" <<EOF
# accelvirt nova config: for host compute1, from the policies in $W/vgpu (1 profile, 2 devices)
# trait HW_GPU_API_CUDA_V11_0 of profile 'a10-4q' is left out of the provider config, which takes CUSTOM_ traits only.
# mdev parent 'mtty' of profile 'serial' is left out: [mdev_mtty-2] device_addresses takes PCI addresses only.
# the compute node does not get CUSTOM_ACCELVIRT_SCRUBBED in the provider config: profile 'a10-4q' does not scrub.
[devices]
enabled_mdev_types = nvidia-590

[mdev_nvidia-590]
device_addresses = 0000:17:00.0,0000:98:00.0
mdev_class = CUSTOM_VGPU_A10_4Q
EOF
case4() {
    nova vgpu-mdev vgpu >"$W/vgpu.out" && same "$W/vgpu.expected" "$W/vgpu.out"
}
check "mdev: [devices] enabled_mdev_types and [mdev_TYPE] with the parents and the class; no [pci]" \
    case4
pol vgpu-default '{"profiles": [
  {"name": "a10-2q", "match": {"vendor": "10de", "device": "2236"}, "attach": "mdev", "mdev_type": "nvidia-589"}]}'
case5() {
    nova vgpu-mdev vgpu-default | grep -qx "mdev_class = VGPU"
}
check "  ... without a resource_class: mdev_class VGPU, Nova's default" \
    case5

# ---- the provider config ----
pol scrubbed '{"profiles": [
  {"name": "a100", "match": {"vendor": "10de", "device": "20f1"}, "attach": "vfio-pci",
   "resource_class": "CUSTOM_GPU_A100", "scrub": [{"method": "vfio-zero"}]}]}'
mkdir -p "$W/pc" && chmod 0755 "$W/pc"
case6() {
    nova two-socket-8gpu scrubbed --provider-config "$W/pc/accelvirt.yaml" >"$W/pc.out" &&
           test -f "$W/pc/accelvirt.yaml" &&
           grep -qx "# the provider config is in $W/pc/accelvirt.yaml: put it in \[compute\] provider_config_location (default /etc/nova/provider_config/)." "$W/pc.out"
}
check "--provider-config FILE: written, and the fragment says where" \
    case6
case7() {
    nova vgpu-mdev vgpu --provider-config - >"$W/pc-vgpu.yaml" && ! grep -q "^\[" "$W/pc-vgpu.yaml"
}
check "--provider-config - (mdev host): the YAML alone on stdout" \
    case7
# provider_rules FILE HOST_CHECK: provider_config.py's rules on FILE, then HOST_CHECK (python) on it as `doc`.
provider_rules() {
    python3 - "$1" "$2" <<'PY'
import re, sys, yaml
text = open(sys.argv[1]).read()
doc = yaml.safe_load(text)
# meta.schema_version: a string '1.0' (pattern ^1.([0-9]|[1-9][0-9]+)$), quoted
assert doc["meta"]["schema_version"] == "1.0", doc["meta"]
assert isinstance(doc["meta"]["schema_version"], str)
seen = set()
for p in doc["providers"]:
    ident = p["identification"]
    assert len(ident) == 1 and set(ident) <= {"uuid", "name"}, ident
    key = ident.get("uuid") or ident.get("name")
    if "uuid" in ident:
        assert ident["uuid"] == "$COMPUTE_NODE" or re.match(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", ident["uuid"])
    else:
        assert 1 <= len(ident["name"]) <= 200
    assert key not in seen, "provider %s twice" % key
    seen.add(key)
    assert set(p) <= {"identification", "traits", "inventories"}, p
    traits = p["traits"]["additional"]
    assert traits, p
    for t in traits:
        assert re.match(r"^[A-Z0-9_]{1,255}$", t) and t.startswith("CUSTOM_"), t
exec(sys.argv[2])
PY
}
check "  ... the compute node's file: schema_version '1.0', \$COMPUTE_NODE with CUSTOM_ACCELVIRT_SCRUBBED (every profile scrubs)" \
    provider_rules "$W/pc/accelvirt.yaml" \
    'assert doc["providers"] == [{"identification": {"uuid": "$COMPUTE_NODE"}, "traits": {"additional": ["CUSTOM_ACCELVIRT_SCRUBBED"]}}], doc'
case8() {
    test "$(stat -c %a "$W/pc/accelvirt.yaml")" = 644
}
check "  ... written 0644" case8
check "  ... the mdev host's: each pGPU provider named as Nova's libvirt driver names it, with the profile's CUSTOM_ traits only" \
    provider_rules "$W/pc-vgpu.yaml" \
    'assert doc["providers"] == [{"identification": {"name": "compute1_pci_0000_17_00_0"}, "traits": {"additional": ["CUSTOM_A10"]}}, {"identification": {"name": "compute1_pci_0000_98_00_0"}, "traits": {"additional": ["CUSTOM_A10"]}}], doc'
case9() {
    nova two-socket-8gpu scrubbed --json --provider-config "$W/pc/two.yaml" >"$W/pc.json" &&
           python3 -c "import json, sys, yaml; j = json.load(open(sys.argv[1])); assert j[\"provider_config\"] == yaml.safe_load(open(sys.argv[2])), j; assert j[\"provider_config_file\"] == sys.argv[2]" "$W/pc.json" "$W/pc/two.yaml"
}
check "--json --provider-config FILE: the provider config in the JSON as in the file" \
    case9
chmod 0777 "$W/pc"
case10() {
    expect_exit 1 nova two-socket-8gpu scrubbed --provider-config "$W/pc/x.yaml" && test ! -s "$AV_TMP/out" && test ! -e "$W/pc/x.yaml"
}
check "--provider-config in a directory others may write: refused (exit 1), nothing printed" \
    case10
chmod 0755 "$W/pc"
check "--provider-config - with --json: a usage error (exit 2)" \
    one_line 2 "with --json, name a file" nova two-socket-8gpu scrubbed --json --provider-config -

# ---- Nova's rules, refused before anything is printed ----
pol pf-and-vfs '{"profiles": [
  {"name": "qat-pf", "match": {"vendor": "8086", "device": "4940"}, "attach": "vfio-pci"},
  {"name": "qat-vf", "match": {"vendor": "8086", "device": "4941"}, "attach": "sriov-vf"}]}'
check "a PF and its VFs both configured (PlacementPciDependentDeviceException): refused" \
    refused pf-and-vfs sriov-fpga-qat "PF 0000:6b:00.0 is in \[pci\] itself (profile 'qat-pf') and so are its VFs (profile 'qat-vf'): Nova refuses a PF together with its VFs"
pol vf-classes '{"profiles": [
  {"name": "vf-a", "match": {"vendor": "8086", "device": "4941", "address": ["0000:6b:00.1", "0000:6b:00.2"]},
   "attach": "sriov-vf", "resource_class": "CUSTOM_A"},
  {"name": "vf-b", "match": {"vendor": "8086", "device": "4941"}, "attach": "sriov-vf", "resource_class": "CUSTOM_B"}]}'
check "VFs of one PF with different resource classes (PlacementPciMixedResourceClassException): refused" \
    refused vf-classes sriov-fpga-qat "VFs of PF 0000:6b:00.0 are taken by profiles 'vf-a' (CUSTOM_A) and 'vf-b' (CUSTOM_B): Nova needs one resource class and one set of traits"
pol vf-traits '{"profiles": [
  {"name": "vf-a", "match": {"vendor": "8086", "device": "4941", "address": ["0000:6b:00.1"]},
   "attach": "sriov-vf", "traits": ["CUSTOM_X"]},
  {"name": "vf-b", "match": {"vendor": "8086", "device": "4941"}, "attach": "sriov-vf", "traits": ["CUSTOM_Y"]}]}'
check "VFs of one PF with different traits (PlacementPciMixedTraitsException): refused" \
    refused vf-traits sriov-fpga-qat "VFs of PF 0000:6b:00.0 are taken by profiles 'vf-a' (CUSTOM_PCI_8086_4941, CUSTOM_X) and 'vf-b' (CUSTOM_PCI_8086_4941, CUSTOM_Y)"
pol vf-some '{"profiles": [
  {"name": "vf-a", "match": {"vendor": "8086", "device": "4941", "address": ["0000:6b:00.1"]}, "attach": "sriov-vf"}]}'
check "a VF that a PF-address spec would match but the profile does not take (a device matched by a spec twice over): refused" \
    refused vf-some sriov-fpga-qat "device 0000:6b:00.2 is matched by the device_spec of profile 'vf-a' (by its PF 0000:6b:00.0's address, which matches every VF of the PF) but no profile takes it"
pol two-classes '{"profiles": [
  {"name": "nvidia", "match": {"vendor": "10de"}, "attach": "vfio-pci"}]}'
check "one profile, devices of two default classes (its one alias cannot ask for both): refused" \
    refused two-classes two-socket-8gpu "profile 'nvidia' matches devices of two resource classes (CUSTOM_PCI_10DE_20F1 at 0000:17:00.0, CUSTOM_PCI_10DE_2230 at 0000:98:00.0)"
pol mdev-classes '{"profiles": [
  {"name": "a", "match": {"mdev_parent": ["0000:17:00.0"]}, "attach": "mdev", "mdev_type": "nvidia-590", "resource_class": "CUSTOM_X"},
  {"name": "b", "match": {"mdev_parent": ["0000:98:00.0"]}, "attach": "mdev", "mdev_type": "nvidia-590", "resource_class": "CUSTOM_Y"}]}'
check "two profiles of one mdev type with two classes ([mdev_TYPE] has one mdev_class): refused" \
    refused mdev-classes vgpu-mdev "profiles 'a' and 'b' both make mdev type nvidia-590, as CUSTOM_X and CUSTOM_Y"
pol mdev-pgpu '{"profiles": [
  {"name": "a", "match": {"vendor": "10de", "device": "2236"}, "attach": "mdev", "mdev_type": "nvidia-590", "resource_class": "PGPU"}]}'
check "an mdev profile whose class Nova's mdev_class does not take (VGPU or CUSTOM_ only): refused" \
    refused mdev-pgpu vgpu-mdev "profile 'a': resource class 'PGPU' cannot be an mdev_class"
pol usb-only '{"profiles": [{"name": "stick", "match": {"vendor": "03e7"}, "attach": "usb"}]}'
check "nothing for Nova (a usb profile alone): one line, exit 1, nothing on stdout" \
    refused usb-only two-socket-8gpu "nothing for Nova on this host"
pol nothing-here '{"profiles": [{"name": "a100", "match": {"vendor": "10de", "device": "20f1"}, "attach": "vfio-pci"}]}'
check "nothing for Nova (a profile matching no device here): refused" \
    refused nothing-here sriov-fpga-qat "nothing for Nova on this host"
# Names Placement would refuse never get this far: the policy loader
# refuses them (exit 2), and profile names, hence alias names, are unique
# across the files.
pol bad-rc '{"profiles": [{"name": "a100", "match": {"vendor": "10de"}, "attach": "vfio-pci", "resource_class": "CUSTOM_gpu-a100"}]}'
case11() {
    one_line 2 "invalid resource_class .CUSTOM_gpu-a100." nova two-socket-8gpu bad-rc && test ! -s "$AV_TMP/out"
}
check "a resource class Placement refuses: refused at policy load (exit 2), nothing on stdout" \
    case11
pol bad-trait '{"profiles": [{"name": "a100", "match": {"vendor": "10de"}, "attach": "vfio-pci", "traits": ["CUSTOM_A, CUSTOM_B"]}]}'
check "a trait Placement refuses (a blank in it): refused at policy load (exit 2)" \
    one_line 2 "invalid trait .CUSTOM_A, CUSTOM_B." nova two-socket-8gpu bad-trait
pol dup-alias '{"profiles": [{"name": "a100", "match": {"vendor": "10de", "device": "20f1"}, "attach": "vfio-pci"}]}'
printf '%s\n' '{"profiles": [{"name": "a100", "match": {"vendor": "10de", "device": "2230"}, "attach": "vfio-pci"}]}' >"$W/dup-alias/20.json"
chmod 0644 "$W/dup-alias/20.json"
case12() {
    expect_exit 2 nova two-socket-8gpu dup-alias && test ! -s "$AV_TMP/out"
}
check "two aliases of one name (two profiles of one name): refused at policy load (exit 2)" \
    case12
check "'nova' without 'config': a usage error" one_line 2 "'nova' needs 'config'" "$AV" nova
# The host name: --host, else the policy's "nova"."hypervisor_hostname",
# else this host's name as libvirt gives it.
pol named '{"nova": {"hypervisor_hostname": "from-policy.example"}, "profiles": [
  {"name": "a6000", "match": {"vendor": "0x10de", "device": "0x2230"}, "attach": "vfio-pci", "numa": "none",
   "scrub": [{"method": "none"}]}]}'
named() {
    "$AV" --root "$AV_TEST_HOSTS/two-socket-8gpu" --policy-dir "$W/named" --state-dir "$W/state-named" nova config --json "$@" |
        python3 -c "import json, sys; print(json.load(sys.stdin)['host'])"
}
check "no --host: the policy's nova.hypervisor_hostname" test "$(named)" = from-policy.example
check "--host wins over the policy's" test "$(named --host other)" = other
check "'--host' with a blank: a usage error" one_line 2 "'--host' needs a host name" nova two-socket-8gpu gpu --host "a b"

# ---- every device_spec and alias line printed above, by Nova's rules ----
check "every device_spec and alias line passes Nova's own checks" python3 - "$W/lines" <<'PY'
import json, re, sys
lines = open(sys.argv[1]).read().splitlines()
assert sum(l.startswith("device_spec = ") for l in lines) >= 10, lines
RC = re.compile(r"^CUSTOM_[A-Z0-9_]+$")
STANDARD = {"PCI_DEVICE", "SRIOV_NET_VF", "VGPU", "VGPU_DISPLAY_HEAD", "PGPU", "FPGA"}
TRAIT = re.compile(r"^[A-Z0-9_]{1,255}$")
# nova/pci/request.py _ALIAS_SCHEMA properties (additionalProperties: False)
ALIAS_KEYS = {"name", "capability_type", "product_id", "vendor_id", "device_type", "numa_policy",
              "resource_class", "traits", "live_migratable"}
pf_addresses = {"0000:6b:00.0"}     # the fake hosts' SR-IOV PF whose VFs are configured
for l in lines:
    key, value = l.split(" = ", 1)
    d = json.loads(value)
    assert isinstance(d, dict), l
    if key == "device_spec":
        for k in ("vendor_id", "product_id"):
            assert re.match(r"^[0-9a-f]{4}$", d[k]), l          # devspec.py: '%04x'
        assert re.match(r"^[0-9a-f]{4}:[0-9a-f]{2}:[01][0-9a-f]\.[0-7]$", d["address"]), l
        rc = d["resource_class"]
        assert (RC.match(rc) and len(rc) <= 255) or rc in STANDARD, l
        if "traits" in d:
            assert " " not in d["traits"], l
            assert all(TRAIT.match(t) for t in d["traits"].split(",")), l
        assert not {"physical_network", "devname", "remote_managed"} & set(d), l
        assert d["managed"] == "no", l
        # one_time_use only on type-PCI/type-PF specs (pci_placement_translator.py:193-197)
        if d["address"] in pf_addresses:
            assert "one_time_use" not in d, l
        if "one_time_use" in d:
            assert d["one_time_use"] == "true", l
    elif key == "alias":
        assert set(d) <= ALIAS_KEYS, l
        assert 1 <= len(d["name"]) <= 256, l
        assert d["device_type"] in ("type-PCI", "type-PF", "type-VF"), l
        assert d["numa_policy"] in ("required", "legacy", "preferred", "socket"), l
        assert RC.match(d["resource_class"]) or d["resource_class"] in STANDARD, l
    else:
        raise AssertionError(l)
PY

finish
