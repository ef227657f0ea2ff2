"""schemathesis hooks for ci/schemathesis (issue 30): the client keeps to the API's documented rates.

SPEC-0030 Security Requirements: admission policy writes (PUT and DELETE on
/api/v1/admission/{scope}/{queue}) are limited per human to 1 per second, burst 10. A client
that writes faster is answered 429 rate_limited whatever it sent, and that answer says nothing
about the request. So these writes are paced one per second, as a well-behaved client would
(schemathesis 4.3.2's per-operation `rate-limit` builds a new limiter for every call, so it
cannot do this itself).
"""

import time

import schemathesis

ADMISSION_WRITE_PATH = "/api/v1/admission/{scope}/{queue}"
ADMISSION_WRITE_SPACING_SECONDS = 1.1
_last_admission_write = [0.0]


@schemathesis.hook
def before_call(context, case, **kwargs):
    if case.operation.path != ADMISSION_WRITE_PATH or case.method.upper() not in ("PUT", "DELETE"):
        return
    wait = _last_admission_write[0] + ADMISSION_WRITE_SPACING_SECONDS - time.monotonic()
    if wait > 0:
        time.sleep(wait)
    _last_admission_write[0] = time.monotonic()
