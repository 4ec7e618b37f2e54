#!/bin/sh
# journal.jsonl is a FIFO: verify must not wait on it forever.
rm -f "$1"; mkfifo "$1"
