/* args.h: reading command arguments exactly as Redis reads them (option words, integers). */
#ifndef KEYGATE_ARGS_H
#define KEYGATE_ARGS_H

#include <stddef.h>

/*
 * Every place in keygate that interprets an argument of a client's command (key
 * finders, the TTL engine, blocking and pin detection, access checks) goes through
 * these two functions, so keygate and Redis can never read one argument two ways.
 *
 * Redis compares option words with strcasecmp() on the argument's C string, so an
 * argument "STORE\0anything" *is* STORE to Redis: only the bytes before the first NUL
 * count. Redis reads integers with string2ll(): strict decimal, no spaces, no '+',
 * no leading zeros, "-0" refused, the whole argument (a NUL included) must be digits.
 */

/* 1 when Redis's strcasecmp(arg, word) == 0 for the argument s[0..len): the bytes of s
 * up to its first NUL (or len) equal `word` ignoring ASCII case. `word` is a C string. */
int args_word_is(const char *s, size_t len, const char *word);

/* Redis's string2ll over s[0..len): 0 and *out set when s is a strict decimal long long,
 * else -1 (*out untouched). */
int args_ll(const char *s, size_t len, long long *out) __attribute__((warn_unused_result));

#endif
