#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The rig-fpga profile's driver command (tests/vm/fpga-policies/45-fpga.json: on_prepare,
# run by the hook, and on_free, run by the worker): one line per run in the guest's
# /var/log/accelvirt-fpga-driver.log, with what accelvirt passes (argv: {address}
# {profile}; the environment of accelvirt-policy(5), DRIVER COMMANDS), so that phase F
# sees that each ran on the rig's host, when, and for whom.
echo "$(cut -d' ' -f1 /proc/uptime) ${ACCELVIRT_POINT:-none} address=$1 profile=$2" \
    "device=${ACCELVIRT_DEVICE:-none} domain=${ACCELVIRT_DOMAIN_NAME:-none}" \
    "uuid=${ACCELVIRT_DOMAIN_UUID:-none} identity=${ACCELVIRT_IDENTITY:-none}" \
    "bitstream=${ACCELVIRT_BITSTREAM_NAME:-none}" >> /var/log/accelvirt-fpga-driver.log
