#!/bin/sh
# pool.json is a directory.
mkdir "$1"
