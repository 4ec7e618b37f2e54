#!/bin/sh
# A *.json that is a directory.
mkdir "$1"
