/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt tests: shared helpers for the g_test programs. */
#pragma once

#include <glib.h>
#include <sys/types.h>

G_BEGIN_DECLS

/* g_test_init() plus the checks every test program needs (the environment
 * that `make check` sets).  Aborts with a clear message when run outside it. */
void av_test_init(int *argc, char ***argv);

/* $AV_TEST_SRCDIR/@rel: a file of the source tree (tests/...).  Caller frees. */
char *av_test_srcdir_path(const char *rel);

/* The generated fake host @name: $AV_TEST_HOSTS/@name.  Caller frees. */
char *av_test_host_path(const char *name);

/* A new empty temporary directory, removed (recursively) by
 * av_test_tmpdir_remove().  Caller frees the string. */
char *av_test_tmpdir(void);
void av_test_tmpdir_remove(const char *dir);

/* A private copy of fake host @name in a new temporary directory, for tests
 * that change the tree (links and all are preserved: cp -a).  Caller frees
 * and removes it with av_test_tmpdir_remove(). */
char *av_test_host_copy(const char *name);

/* Writes @contents to @dir/@rel, creating parent directories. */
void av_test_write(const char *dir, const char *rel, const char *contents);

/* Creates the symlink @dir/@rel -> @target, creating parent directories. */
void av_test_symlink(const char *dir, const char *rel, const char *target);

/* Takes a lock (or whatever holds one) described by @data; returns the
 * handle that the matching GDestroyNotify releases, or NULL on failure. */
typedef gpointer (*AvTestTakeFunc)(gconstpointer data);

/* Forks a child that calls @take(@data), tells the parent it holds what it
 * took, waits for the parent's word, calls @release on the handle and exits
 * 0 (2 when @take failed).  Returns once the child holds it: the child's
 * pid, and in *ret_fd the pipe to give the word on (av_test_hold_release(),
 * or write to it and close it yourself).  @data is only read by the child. */
pid_t av_test_hold(AvTestTakeFunc take, GDestroyNotify release, gconstpointer data, int *ret_fd);

/* Lets the child of av_test_hold() go and asserts that it exits 0. */
void av_test_hold_release(pid_t pid, int fd);

G_END_DECLS
