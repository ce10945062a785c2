/* args.c: option-word and integer reading with Redis's own rules (strcasecmp, string2ll). */
#include "args.h"

#include <limits.h>
#include <string.h>

static unsigned char ascii_lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c - 'A' + 'a') : c;
}

int args_word_is(const char *s, size_t len, const char *word)
{
    size_t i = 0;
    for (; word[i] != '\0'; i++) {
        if (i >= len || s[i] == '\0') return 0;
        if (ascii_lower((unsigned char)s[i]) != ascii_lower((unsigned char)word[i])) return 0;
    }
    return i == len || s[i] == '\0'; /* strcasecmp stops at the argument's first NUL */
}

int args_ll(const char *s, size_t len, long long *out)
{
    size_t i = 0;
    int negative = 0;
    if (len == 0 || len > 20) return -1;
    if (len == 1 && s[0] == '0') {
        *out = 0;
        return 0;
    }
    if (s[0] == '-') {
        negative = 1;
        i = 1;
        if (len == 1) return -1;
    }
    if (s[i] < '1' || s[i] > '9') return -1; /* no leading zero, no "-0", no space, no '+' */
    unsigned long long v = 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        unsigned digit = (unsigned)(s[i] - '0');
        if (v > (ULLONG_MAX - digit) / 10) return -1;
        v = v * 10 + digit;
    }
    if (negative) {
        if (v > (unsigned long long)LLONG_MAX + 1) return -1;
        *out = v == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)v;
    } else {
        if (v > (unsigned long long)LLONG_MAX) return -1;
        *out = (long long)v;
    }
    return 0;
}
