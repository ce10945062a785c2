/* session.c: the argument helpers every layer of the pure decision reads a request with. */
#include "session.h"

#include "args.h"

int session_arg_is(const struct policy_request *r, size_t i, const char *word)
{
    return i < r->argc && args_word_is(r->argv[i], r->argvlen[i], word);
}

int session_arg_ll(const struct policy_request *r, size_t i, long long *out)
{
    return i < r->argc ? args_ll(r->argv[i], r->argvlen[i], out) : -1;
}

const char *session_printable(const char *s, size_t len, char *out, size_t outlen)
{
    size_t n = len < 128 ? len : 128;
    if (n > outlen - 1) n = outlen - 1;
    for (size_t i = 0; i < n; i++) out[i] = (s[i] == '\r' || s[i] == '\n' || s[i] == '\0') ? ' ' : s[i];
    out[n] = '\0';
    return out;
}
