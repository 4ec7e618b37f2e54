#!/bin/sh
# pool.json is a symbolic link out of the state dir (to a pool the attacker wrote).
printf '{"version": 1, "devices": []}\n' >"$1.elsewhere"
ln -s "$(basename "$1").elsewhere" "$1"
