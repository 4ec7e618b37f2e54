# SPDX-License-Identifier: Apache-2.0
# The placed domain ($PLACED), whose owner the operator pinned to project
# p1 (rewrite --project p1), with a <nova:owner> its owner wrote naming
# another project: its device time would be charged to a victim.
sed "s|<metadata>|<metadata><nova:instance xmlns:nova='http://openstack.org/xmlns/libvirt/nova/1.1'><nova:owner><nova:user uuid='u1'/><nova:project uuid='victim-project'/></nova:owner></nova:instance>|" \
    "$PLACED" >"$1"
