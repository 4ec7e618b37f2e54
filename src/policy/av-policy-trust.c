/* SPDX-License-Identifier: Apache-2.0 */
/* accelvirt: the trust of the files that run as root: the policy files, the
 * programs and scripts that scrub steps, "program" and driver commands
 * name, the scrub VM's template and the images it boots.  Each must be
 * owned by root and writable by nobody else, as must every directory above
 * it (av_file_check_trusted()). */
#include "config.h"

#include "av-policy-private.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xpath.h>

#include "util/av-error.h"
#include "util/av-file.h"

/* ---- the files that policies name ---- */

/* After av_file_check_trusted(@path, @what): the regular file @path, at
 * most @max bytes, read whole (caller frees; NUL-terminated, its length in
 * *ret_len).  NULL with the check's error, or AV_ERROR_POLICY when it is
 * not a regular file or is larger, AV_ERROR_IO when it cannot be read.
 * Opened without blocking, so that a FIFO never hangs the reader. */
char *
policy_read_trusted(const char *path, const char *what, gsize max, gsize *ret_len, GError **error)
{
    g_autofree char *data = NULL;
    struct stat st, fst;
    int fd, r;

    if (!av_file_check_trusted(path, what, &st, error))
        return NULL;
    if (!S_ISREG(st.st_mode)) {
        g_set_error(error, AV_ERROR, AV_ERROR_POLICY, "the %s '%s' is not a regular file", what, path);
        return NULL;
    }
    if ((guint64)st.st_size > max) {
        g_set_error(error, AV_ERROR, AV_ERROR_POLICY, "the %s '%s' is too large (%lld bytes; at most %" G_GSIZE_FORMAT ")",
                    what, path, (long long)st.st_size, max);
        return NULL;
    }
    fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        av_error_errno(error, -errno, "cannot read the %s '%s'", what, path);
        return NULL;
    }
    if (fstat(fd, &fst) < 0 || fst.st_dev != st.st_dev || fst.st_ino != st.st_ino) {
        close(fd);
        g_set_error(error, AV_ERROR, AV_ERROR_UNSAFE, "the %s '%s' was replaced while it was checked; try again",
                    what, path);
        return NULL;
    }
    data = g_malloc((gsize)st.st_size + 1);
    r = av_file_pread_all(fd, data, (gsize)st.st_size, 0);
    close(fd);
    if (r < 0) {
        av_error_errno(error, r, "cannot read the %s '%s'", what, path);
        return NULL;
    }
    data[st.st_size] = '\0';
    *ret_len = (gsize)st.st_size;
    return g_steal_pointer(&data);
}

/* A path the scrub names that does not exist (yet): whoever can create it
 * could put a file of theirs there before it is used, so its nearest
 * existing ancestor must be a directory nobody else can write
 * (av_file_check_trusted(); a sticky /tmp is refused here, since anyone may
 * create the missing name in it). */
static gboolean
check_missing_path(const char *path, const char *what, GError **error)
{
    g_autofree char *dir = g_path_get_dirname(path);

    while (!g_file_test(dir, G_FILE_TEST_EXISTS) && strcmp(dir, "/") != 0) {
        char *up = g_path_get_dirname(dir);

        g_free(dir);
        dir = up;
    }
    if (av_file_check_trusted(dir, what, NULL, error))
        return TRUE;
    g_prefix_error(error, "the %s '%s' does not exist, and another user could create it: ", what, path);
    return FALSE;
}

/* av_policy_check_scrub_program() for a program shown as @what ("scrub
 * program", "program", "driver command").  Borrows @path. */
static gboolean
check_program_file(const char *path, const char *what, GError **error)
{
    struct stat st;

    if (!av_file_check_trusted(path, what, &st, error))
        return FALSE;
    if (!S_ISREG(st.st_mode)) {
        g_set_error(error, AV_ERROR, AV_ERROR_POLICY, "the %s '%s' is not a regular file", what, path);
        return FALSE;
    }
    if (!(st.st_mode & (S_IXUSR | S_IXGRP | S_IXOTH))) {
        g_set_error(error, AV_ERROR, AV_ERROR_POLICY, "the %s '%s' is not executable (mode %04o)", what, path,
                    (unsigned)(st.st_mode & 07777));
        return FALSE;
    }
    return TRUE;
}

/* av_policy_check_scrub_argv() for the argv of a program shown as @what.
 * With @is_template (a "program" or a driver command,
 * av_profile_argv_expand()), whose argv av_program_run() expands and
 * checks again right before it runs it: an argument that names a
 * placeholder is left alone (what it names is known only once expanded),
 * and a program that does not exist yet is taken where nobody else could
 * create it (the vendor's tools may come after the policy; until they do,
 * every run fails, as av_profile_scrub_warnings() says).  The program (the
 * first element) of a template names no placeholder: the parser refuses
 * that. */
gboolean
check_argv_trusted(const json_t *argv, gboolean is_template, const char *what, guint *ret_bad, GError **error)
{
    g_autofree char *arg_what = g_strdup_printf("%s argument", what);

    for (guint i = 0; i < json_array_size(argv); i++) {
        const char *arg = json_string_value(json_array_get(argv, i));
        struct stat st;

        *ret_bad = i;
        if (i == 0) {
            if (is_template && arg && arg[0] == '/' && stat(arg, &st) < 0 && (errno == ENOENT || errno == ENOTDIR)) {
                if (!check_missing_path(arg, what, error))
                    return FALSE;
                continue;
            }
            if (!check_program_file(arg, what, error))
                return FALSE;
            continue;
        }
        /* A script an interpreter runs, a config file: trusted as the
         * program; one that does not exist yet (an output path) sits where
         * nobody else could create it. */
        if (!arg || arg[0] != '/' || (is_template && strchr(arg, '{')))
            continue;
        if (stat(arg, &st) < 0) {
            if (!check_missing_path(arg, arg_what, error))
                return FALSE;
            continue;
        }
        if (!av_file_check_trusted(arg, arg_what, NULL, error))
            return FALSE;
    }
    return TRUE;
}

/* See av-policy.h. */
gboolean
av_policy_check_scrub_argv(const json_t *argv, guint *ret_bad, GError **error)
{
    return check_argv_trusted(argv, FALSE, "scrub program", ret_bad, error);
}

/* See av-policy.h. */
gboolean
av_policy_check_scrub_program(const char *path, GError **error)
{
    return check_program_file(path, "scrub program", error);
}

/* TRUE when @needle occurs in @text outside its XML comments. */
static gboolean
text_has_outside_comments(const char *text, const char *needle)
{
    const char *p = text;

    for (;;) {
        const char *open = strstr(p, "<!--");

        if (g_strstr_len(p, open ? open - p : -1, needle))
            return TRUE;
        if (!open)
            return FALSE;
        p = strstr(open + 4, "-->");
        if (!p)
            return FALSE;
        p += 3;
    }
}

/* The files a scrub VM boots from are the scrubber itself: an image that
 * powers off without scrubbing would pass every scrub.  Each absolute path
 * that the template @text (of @path) names in <os><kernel>, <initrd> and
 * <loader>, and in the <source file=> of a <disk> and the <source dir=> of
 * a <filesystem>, must be trusted as the template is
 * (av_file_check_trusted()).  Paths with a placeholder ("@NAME@") are the
 * worker's, not images; an image that does not exist yet must sit in a
 * directory nobody else can write.  AV_ERROR_POLICY when the template is
 * no XML. */
static gboolean
check_template_images(const char *text, gsize len, const char *path, GError **error)
{
    xmlDocPtr doc = xmlReadMemory(text, (int)len, path, NULL, XML_PARSE_NONET | XML_PARSE_NOERROR |
                                  XML_PARSE_NOWARNING);
    xmlXPathContextPtr ctx = NULL;
    xmlXPathObjectPtr found = NULL;
    gboolean ok = TRUE;

    if (!doc) {
        g_set_error(error, AV_ERROR, AV_ERROR_POLICY, "the scrub VM template '%s' is not well-formed XML", path);
        return FALSE;
    }
    ctx = xmlXPathNewContext(doc);
    if (ctx)
        found = xmlXPathEvalExpression(BAD_CAST "/domain/os/kernel/text() | /domain/os/initrd/text() | "
                                       "/domain/os/loader/text() | /domain/devices/disk/source/@file | "
                                       "/domain/devices/filesystem/source/@dir", ctx);
    if (!found) {
        g_set_error(error, AV_ERROR, AV_ERROR_FAILED, "cannot read the scrub VM template '%s'", path);
        ok = FALSE;
    }
    for (int i = 0; ok && found->nodesetval && i < found->nodesetval->nodeNr; i++) {
        xmlChar *value = xmlNodeGetContent(found->nodesetval->nodeTab[i]);
        g_autofree char *image = value ? g_strstrip(g_strdup((const char *)value)) : NULL;

        xmlFree(value);
        if (!image || image[0] != '/' || strchr(image, '@'))
            continue;
        /* One that does not exist (yet) cannot boot, but must sit where
         * nobody else could put it before the scrub VM starts. */
        if (!g_file_test(image, G_FILE_TEST_EXISTS)) {
            if (!check_missing_path(image, "scrub VM image", error)) {
                g_prefix_error(error, "the scrub VM template '%s' names an image that cannot be trusted: ", path);
                ok = FALSE;
            }
            continue;
        }
        if (!av_file_check_trusted(image, "scrub VM image", NULL, error)) {
            g_prefix_error(error, "the scrub VM template '%s' boots from an image that cannot be trusted: ", path);
            ok = FALSE;
        }
    }
    xmlXPathFreeObject(found);
    xmlXPathFreeContext(ctx);
    xmlFreeDoc(doc);
    return ok;
}

/* See av-policy.h. */
char *
av_policy_read_scrub_template(const char *path, GError **error)
{
    g_autofree char *text = NULL;
    gsize len = 0;

    text = policy_read_trusted(path, "scrub VM template", AV_POLICY_TEMPLATE_MAX, &len, error);
    if (!text)
        return NULL;
    if (strlen(text) != len || !g_utf8_validate(text, (gssize)len, NULL)) {
        g_set_error(error, AV_ERROR, AV_ERROR_POLICY,
                    "the scrub VM template '%s' is not a domain XML (it has NUL bytes or is not UTF-8)", path);
        return NULL;
    }
    if (!text_has_outside_comments(text, AV_POLICY_HOSTDEV_PLACEHOLDER)) {
        g_set_error(error, AV_ERROR, AV_ERROR_POLICY,
                    "the scrub VM template '%s' has no %s (outside comments), so its scrub VM would boot without "
                    "the device; put %s inside its <devices>", path, AV_POLICY_HOSTDEV_PLACEHOLDER,
                    AV_POLICY_HOSTDEV_PLACEHOLDER);
        return NULL;
    }
    if (!check_template_images(text, len, path, error))
        return NULL;
    return g_steal_pointer(&text);
}
