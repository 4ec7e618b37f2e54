#!/bin/sh
# A policy "file" that is a FIFO: never opened for reading (it would block).
mkfifo "$1"
