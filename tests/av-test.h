/* accelvirt tests: shared helpers for the g_test programs. */
#pragma once

#include <glib.h>

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

G_END_DECLS
