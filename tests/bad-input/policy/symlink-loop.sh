#!/bin/sh
# A policy file that is a symbolic link to itself.
ln -s "$(basename "$1")" "$1"
