/* UTF-8 checks: everything box prints is UTF-8, whatever a guest wrote. */
#ifndef BOX_UTF8_H
#define BOX_UTF8_H

#include <stddef.h>
#include "buf.h"

/* 1 if s[0..n) is well-formed UTF-8 (no overlongs, no surrogates, nothing past U+10FFFF). */
int box_utf8_valid(const char *s, size_t n);

/*
 * Appends s[0..n) to out with every ill-formed sequence replaced by U+FFFD (one per maximal
 * ill-formed subpart, as Unicode recommends). Returns 1 if anything was replaced, 0 if not,
 * -1 with err set when out would pass its cap.
 */
int box_utf8_sanitize(const char *s, size_t n, struct box_buf *out, struct box_err *err);

/* Length of the longest prefix of s[0..n) that does not end inside a UTF-8 sequence; used to
 * cut text at a byte cap without splitting a character. */
size_t box_utf8_cut(const char *s, size_t n);

#endif
