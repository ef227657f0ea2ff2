"""schemathesis hooks for ci/schemathesis (issue 30): the client keeps to the API's documented rates.

SPEC-0030 Security Requirements: admission policy writes (PUT and DELETE on
/api/v1/admission/{scope}/{queue}) are limited per human to 1 per second, burst 10, in
PostgreSQL for the whole cluster. A client that writes faster is answered 429 rate_limited
whatever it sent, and that answer says nothing about the request. So the client here keeps to
that rate, as a well-behaved one would (schemathesis's per-operation `rate-limit` built a new
limiter for every call when this was written, so it could not do this itself).

One human's budget would serialize the run's ~250 policy writes at one a second, so ci/schemathesis
also makes a few "writer" humans who own nothing. A policy write whose scope names an endpoint
the run's human owns is sent as that human; any other scope names nothing either human manages,
so the server answers it exactly as it would the run's human (400 for bad data, else 404), and it
is sent as whichever writer may write soonest. Each human's writes are paced to its own budget.

Environment: SCHEMATHESIS_TOKEN (the run's human, also passed as `--header`),
SCHEMATHESIS_WRITER_TOKENS (space-separated).
"""

import os
import sys
import time
import urllib.parse

import requests.auth
import schemathesis
from schemathesis.transport.prepare import get_exclude_headers

ADMISSION_WRITE_PATH = "/api/v1/admission/{scope}/{queue}"
ENDPOINTS_PATH = "/api/v1/endpoints"

# The server admits a write while its theoretical arrival time (TAT) is at most 9 s ahead of now
# (burst 10 at 1/s), each write moving the TAT 1 s on. This mirror moves it a little more and
# admits a little less far ahead, so it never sends a write the server would refuse.
WRITE_INTERVAL_SECONDS = 1.05
WRITE_TOLERANCE_SECONDS = 8.0

MAIN_TOKEN = os.environ["SCHEMATHESIS_TOKEN"]
WRITER_TOKENS = os.environ.get("SCHEMATHESIS_WRITER_TOKENS", "").split()

# Each human's TAT on the client's clock, by token.
_tat = {}
# `endpoint:<slug>` and `endpoint:<id>` for every endpoint the run's human was seen to own.
_owned_scopes = set()


class _Bearer(requests.auth.AuthBase):
    """A writer's bearer token. requests applies a case's auth after its headers, so it replaces
    the run's token that `--header` puts on every request."""

    def __init__(self, token):
        self.token = token

    def __call__(self, request):
        request.headers["Authorization"] = f"Bearer {self.token}"
        return request


def _is_admission_write(case):
    return case.operation.path == ADMISSION_WRITE_PATH and case.method.upper() in ("PUT", "DELETE")


def _unquoted(text):
    """A path parameter as the server reads it (schemathesis may have percent-encoded it)."""
    while (decoded := urllib.parse.unquote(text)) != text:
        text = decoded
    return text


def _wait_for(token, now):
    return max(_tat.get(token, now), now) - now - WRITE_TOLERANCE_SECONDS


@schemathesis.hook
def before_call(context, case, **kwargs):
    if not _is_admission_write(case) or "Authorization" in get_exclude_headers(case):
        # Not a policy write, or the coverage case that leaves the token out (401, no write).
        return
    scope = _unquoted(str((case.path_parameters or {}).get("scope", "")))
    now = time.monotonic()
    if scope in _owned_scopes or not WRITER_TOKENS:
        token = MAIN_TOKEN
    else:
        token = min(WRITER_TOKENS, key=lambda t: _wait_for(t, now))
    case._auth = None if token == MAIN_TOKEN else _Bearer(token)
    wait = _wait_for(token, now)
    if wait > 0:
        time.sleep(wait)
        now = time.monotonic()
    _tat[token] = max(_tat.get(token, now), now) + WRITE_INTERVAL_SECONDS


@schemathesis.hook
def after_call(context, case, response):
    if case.operation.path == ENDPOINTS_PATH and response.status_code in (200, 201):
        try:
            body = response.json()
        except ValueError:
            return
        for endpoint in body.get("endpoints", [body]) if isinstance(body, dict) else []:
            if isinstance(endpoint, dict):
                for key in ("id", "slug"):
                    if isinstance(endpoint.get(key), str):
                        _owned_scopes.add(f"endpoint:{endpoint[key]}")
    if os.environ.get("SCHEMATHESIS_HOOKS_DEBUG") and _is_admission_write(case):
        print(f"DEBUG {case.method} {response.request.url} {response.status_code} {response.text[:80]}", file=sys.stderr)
    if response.status_code == 429 and _is_admission_write(case):
        # Should not happen; said here so a failure names its cause.
        print(f"schemathesis_hooks: 429 on {case.method} {case.path} {case.path_parameters}: {response.text}", file=sys.stderr)
