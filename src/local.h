/* local.h: the commands keygate answers itself: PING, ECHO, AUTH, HELLO, SELECT 0, CLIENT, COMMAND, INFO. */
#ifndef KEYGATE_LOCAL_H
#define KEYGATE_LOCAL_H

#include <stddef.h>

#include "conn.h"
#include "policy.h"
#include "request.h"

/* Answer a PLAN_LOCAL request of client c; completes req (request_complete / request_error). */
void local_execute(struct client *c, struct request *req, const struct plan *plan, size_t argc, const char *const *argv,
                   const size_t *argvlen);

#endif
