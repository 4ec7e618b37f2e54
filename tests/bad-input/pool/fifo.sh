#!/bin/sh
# pool.json is a FIFO: never opened for reading (it would block forever).
mkfifo "$1"
