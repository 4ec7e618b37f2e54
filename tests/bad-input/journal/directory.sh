#!/bin/sh
# journal.jsonl is a directory.
rm -f "$1"; mkdir "$1"
