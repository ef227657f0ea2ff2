//! The route table of the OpenAPI document: one row per operation of `/api/v1`, with the type of
//! the request body it reads, of its query parameters, of the answers its handler gives and the operations an id in
//! its answer feeds (OpenAPI `links`, which a stateful client follows).
//!
//! Answers every route shares are added by the document builder, not repeated here: 401, 429 and
//! 503 on every authenticated route (credential, rate and load limits run before any handler; a
//! change to what a credential may do also answers 503 when its replicas do not confirm it), 400
//! and 413 on every route with a body (the body must be a JSON object within the size cap), and
//! 400 and 404 on every route with a path parameter (a parameter that names nothing is 404; one
//! that cannot be stored, a NUL character, is 400).

use super::{SchemaFn, of};
use crate::wire_types::requests::{
    CapacityRequest, HookRequest, PolicyRequest, PresenceRequest, ShiftRequest, TodoEdit, TodoFilter, TodoPush,
    TokenRequest, VendBody as VendRequest, WebhookRequest,
};
use crate::wire_types::{
    AdmissionBody, AuditRecords, CapacityBody, ClearedBody, Endpoints, ErrorBody, HookAdded, HookTestBody, Hooks,
    MintedToken, Policies, PresenceBody, PurgedBody, RotatedToken, SecretRotated, Teams, TodoAnswer, TodoBody,
    TodoPushAnswer, Todos, Tokens, VendedBody, WebhookCreated, Webhooks,
};

/// One documented operation.
pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
    pub summary: &'static str,
    pub body: Body,
    /// The query string as one object (a component schema name): each member is its own
    /// parameter (`style: form, explode: true`), so rules between them can be stated.
    pub query: Option<SchemaFn>,
    /// (status, description, the answer's type when it has a body).
    pub responses: &'static [(u16, &'static str, Option<SchemaFn>)],
    pub links: &'static [Link],
}

/// The JSON request body an operation reads.
pub enum Body {
    None,
    /// The body must be there.
    Required(SchemaFn),
    /// The body may be left out; an empty body reads as `{}`.
    Optional(SchemaFn),
}

/// An OpenAPI link from a success answer to another operation: `parameters` maps each of the
/// target's path parameters to a runtime expression (`$response.body#/id`, `$request.path.scope`).
pub struct Link {
    pub status: u16,
    pub name: &'static str,
    pub method: &'static str,
    pub path: &'static str,
    pub parameters: &'static [(&'static str, &'static str)],
}

const fn link(
    status: u16,
    name: &'static str,
    method: &'static str,
    path: &'static str,
    parameters: &'static [(&'static str, &'static str)],
) -> Link {
    Link { status, name, method, path, parameters }
}

const ENDPOINT_ID: &[(&str, &str)] = &[("reference", "$response.body#/id")];
const TODO_ID: &[(&str, &str)] = &[("id", "$response.body#/todo/id")];
const TODO_IN_QUEUE: &[(&str, &str)] = &[
    ("scope", "$response.body#/todo/scope"),
    ("queue", "$response.body#/todo/queue"),
    ("id", "$response.body#/todo/id"),
];
const SAME_QUEUE: &[(&str, &str)] = &[("scope", "$request.path.scope"), ("queue", "$request.path.queue")];
const WEBHOOK_ID: &[(&str, &str)] = &[("id", "$response.body#/id")];
const HOOK_ID: &[(&str, &str)] = &[("reference", "$request.path.reference"), ("hook_id", "$response.body#/hook/id")];

const fn route(
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    body: Body,
    responses: &'static [(u16, &'static str, Option<SchemaFn>)],
) -> Route {
    Route { method, path, summary, body, query: None, responses, links: &[] }
}

pub const ROUTES: &[Route] = &[
    Route {
        links: &[
            link(201, "EndpointPresence", "get", "/api/v1/endpoints/{reference}/presence", ENDPOINT_ID),
            link(201, "EndpointHooks", "get", "/api/v1/endpoints/{reference}/hooks", ENDPOINT_ID),
            link(201, "RotateEndpoint", "post", "/api/v1/endpoints/{reference}/rotate", ENDPOINT_ID),
            link(201, "RevokeEndpoint", "post", "/api/v1/endpoints/{reference}/revoke", ENDPOINT_ID),
            link(201, "DeleteEndpoint", "delete", "/api/v1/endpoints/{reference}", ENDPOINT_ID),
        ],
        ..route(
            "post",
            "/api/v1/endpoints",
            "Vend an endpoint; the sbk_ token is shown once",
            Body::Required(of::<VendRequest>),
            &[
                (201, "vended", Some(of::<VendedBody>)),
                (404, "team not manageable", Some(of::<ErrorBody<'static>>)),
                (409, "the owner already holds endpoints_per_owner_max endpoints", Some(of::<ErrorBody<'static>>)),
            ],
        )
    },
    route(
        "get",
        "/api/v1/endpoints",
        "Endpoints in the caller's reach",
        Body::None,
        &[(200, "endpoints", Some(of::<Endpoints>))],
    ),
    Route {
        links: &[
            link(201, "ShowTodo", "get", "/api/v1/todos/{id}", TODO_ID),
            link(201, "EditTodo", "patch", "/api/v1/todos/{id}", TODO_ID),
            link(201, "RemoveTodo", "delete", "/api/v1/queues/{scope}/{queue}/todos/{id}", TODO_IN_QUEUE),
        ],
        ..route(
            "post",
            "/api/v1/todos",
            "Push a todo, or a batch of up to 1000 in one transaction (dedup on idempotency_key)",
            Body::Required(of::<TodoPush>),
            &[
                (201, "created (a batch: at least one created)", Some(of::<TodoPushAnswer>)),
                (200, "deduped onto a live todo (a batch: every one deduped)", Some(of::<TodoPushAnswer>)),
                (404, "scope not in reach", Some(of::<ErrorBody<'static>>)),
                (
                    429,
                    "queue_full: the queue holds its intake capacity of pending todos",
                    Some(of::<ErrorBody<'static>>),
                ),
            ],
        )
    },
    Route {
        query: Some(of::<TodoFilter>),
        ..route(
            "get",
            "/api/v1/todos",
            "Todos in reach, newest first; pending todos of budgeted queues carry admission",
            Body::None,
            &[
                (200, "todos", Some(of::<Todos<TodoBody>>)),
                (
                    400,
                    "invalid_argument: a malformed parameter, or queue without scope",
                    Some(of::<ErrorBody<'static>>),
                ),
                (404, "scope not in reach", Some(of::<ErrorBody<'static>>)),
            ],
        )
    },
    route(
        "get",
        "/api/v1/todos/{id}",
        "One todo",
        Body::None,
        &[(200, "the todo", Some(of::<TodoAnswer>)), (404, "not found", Some(of::<ErrorBody<'static>>))],
    ),
    route(
        "post",
        "/api/v1/todos/{id}/{action}",
        "Owner action: claim {lease_ttl_seconds?}, complete {result?}, fail {result?}, release or retry",
        // Each action reads its own body, optional (`TODO_ACTIONS`).
        Body::None,
        &[
            (200, "the todo", Some(of::<TodoAnswer>)),
            (409, "conflict with the todo's state", Some(of::<ErrorBody<'static>>)),
            (429, "deferred (claim): the queue's admission policy holds it back", Some(of::<ErrorBody<'static>>)),
            (404, "not found", Some(of::<ErrorBody<'static>>)),
        ],
    ),
    route(
        "post",
        "/api/v1/tokens",
        "Mint another operator API token for the caller (the body is required, `{}` at least)",
        Body::Required(of::<TokenRequest>),
        &[
            (201, "token (shown once)", Some(of::<MintedToken>)),
            (409, "the caller already holds tokens_per_human_max live tokens", Some(of::<ErrorBody<'static>>)),
        ],
    ),
    route(
        "get",
        "/api/v1/tokens",
        "The caller's unrevoked operator tokens (never the secret)",
        Body::None,
        &[(200, "tokens", Some(of::<Tokens>))],
    ),
    route(
        "delete",
        "/api/v1/tokens/{id}",
        "Revoke one of the caller's operator tokens; it is refused (401) from then on",
        Body::None,
        &[(204, "revoked", None), (404, "not the caller's token", Some(of::<ErrorBody<'static>>))],
    ),
    route(
        "post",
        "/api/v1/endpoints/{reference}/revoke",
        "Revoke the endpoint's MCP credential, keeping the endpoint and its todos",
        Body::None,
        &[(204, "revoked", None), (404, "not manageable", Some(of::<ErrorBody<'static>>))],
    ),
    route(
        "post",
        "/api/v1/endpoints/{reference}/rotate",
        "Issue a new sbk_ credential for the endpoint; the old one is refused at once",
        Body::None,
        &[
            (200, "new token (shown once)", Some(of::<RotatedToken>)),
            (404, "not manageable", Some(of::<ErrorBody<'static>>)),
        ],
    ),
    route("get", "/api/v1/teams", "The caller's teams and roles", Body::None, &[(200, "teams", Some(of::<Teams>))]),
    route(
        "get",
        "/api/v1/admission",
        "Policies the caller manages, with status and usage",
        Body::None,
        &[(200, "policies", Some(of::<Policies>))],
    ),
    route(
        "get",
        "/api/v1/admission/{scope}/{queue}",
        "Policy, status, usage, last 30 windows, audit tail",
        Body::None,
        &[
            (200, "the policy", Some(of::<AdmissionBody>)),
            (404, "foreign or unknown: the same answer", Some(of::<ErrorBody<'static>>)),
        ],
    ),
    Route {
        links: &[
            link(200, "ShowPolicy", "get", "/api/v1/admission/{scope}/{queue}", SAME_QUEUE),
            link(200, "PolicyAudit", "get", "/api/v1/admission/{scope}/{queue}/audit", SAME_QUEUE),
            link(200, "DeletePolicy", "delete", "/api/v1/admission/{scope}/{queue}", SAME_QUEUE),
        ],
        ..route(
            "put",
            "/api/v1/admission/{scope}/{queue}",
            "Create or fully replace a policy (body at most 16 KiB; writes limited per human to 1/s, burst 10)",
            Body::Required(of::<PolicyRequest>),
            &[
                (200, "saved", Some(of::<AdmissionBody>)),
                (404, "not manageable", Some(of::<ErrorBody<'static>>)),
                (
                    429,
                    "rate_limited: the caller's policy writes are over 1/s (burst 10)",
                    Some(of::<ErrorBody<'static>>),
                ),
            ],
        )
    },
    route(
        "delete",
        "/api/v1/admission/{scope}/{queue}",
        "Remove a policy; the audit stays (writes limited per human to 1/s, burst 10)",
        Body::None,
        &[
            (204, "removed", None),
            (404, "no policy, or not manageable", Some(of::<ErrorBody<'static>>)),
            (429, "rate_limited: the caller's policy writes are over 1/s (burst 10)", Some(of::<ErrorBody<'static>>)),
        ],
    ),
    route(
        "get",
        "/api/v1/admission/{scope}/{queue}/audit",
        "Who changed the policy, when, from what to what",
        Body::None,
        &[
            (200, "records", Some(of::<AuditRecords>)),
            (404, "not manageable or never had a policy", Some(of::<ErrorBody<'static>>)),
        ],
    ),
    Route {
        links: &[
            link(201, "RotateWebhook", "post", "/api/v1/webhooks/{id}/rotate", WEBHOOK_ID),
            link(201, "DeleteWebhook", "delete", "/api/v1/webhooks/{id}", WEBHOOK_ID),
        ],
        ..route(
            "post",
            "/api/v1/webhooks",
            "Register a webhook; answers its ingest URL and signing secret",
            Body::Required(of::<WebhookRequest>),
            &[
                (201, "registered", Some(of::<WebhookCreated>)),
                (404, "target not manageable", Some(of::<ErrorBody<'static>>)),
            ],
        )
    },
    route(
        "get",
        "/api/v1/webhooks",
        "The caller's webhooks with their targets (never the secret)",
        Body::None,
        &[(200, "webhooks", Some(of::<Webhooks>))],
    ),
    route(
        "delete",
        "/api/v1/webhooks/{id}",
        "Delete one of the caller's webhooks; its ingest URL is 404 from then on",
        Body::None,
        &[(204, "deleted", None), (404, "not the caller's webhook", Some(of::<ErrorBody<'static>>))],
    ),
    route(
        "post",
        "/api/v1/webhooks/{id}/rotate",
        "Issue a new signing secret; the old one still verifies for 24 h (previous_secret_expires_at)",
        Body::None,
        &[
            (200, "new secret (shown once)", Some(of::<SecretRotated>)),
            (404, "not the caller's webhook", Some(of::<ErrorBody<'static>>)),
        ],
    ),
    route(
        "delete",
        "/api/v1/endpoints/{reference}",
        "Delete an endpoint and every todo of its queues (purge)",
        Body::None,
        &[(204, "deleted", None), (404, "not manageable", Some(of::<ErrorBody<'static>>))],
    ),
    route(
        "get",
        "/api/v1/endpoints/{reference}/presence",
        "Whether the endpoint is rung for new work now: presence, its source, until, shift",
        Body::None,
        &[(200, "presence", Some(of::<PresenceBody>)), (404, "not manageable", Some(of::<ErrorBody<'static>>))],
    ),
    route(
        "put",
        "/api/v1/endpoints/{reference}/presence",
        "Clock the endpoint in (for_seconds, ending at the shift's next boundary) or out",
        Body::Required(of::<PresenceRequest>),
        &[(200, "presence", Some(of::<PresenceBody>)), (404, "not manageable", Some(of::<ErrorBody<'static>>))],
    ),
    route(
        "delete",
        "/api/v1/endpoints/{reference}/presence",
        "Clear the operator's presence override; the shift decides again",
        Body::None,
        &[(200, "presence", Some(of::<PresenceBody>)), (404, "not manageable", Some(of::<ErrorBody<'static>>))],
    ),
    route(
        "put",
        "/api/v1/endpoints/{reference}/shift",
        "Set or clear (null) the endpoint's working hours",
        Body::Required(of::<ShiftRequest>),
        &[(200, "presence", Some(of::<PresenceBody>)), (404, "not manageable", Some(of::<ErrorBody<'static>>))],
    ),
    route(
        "get",
        "/api/v1/endpoints/{reference}/hooks",
        "The endpoint's notify hooks (never their secrets)",
        Body::None,
        &[(200, "hooks", Some(of::<Hooks>)), (404, "not manageable", Some(of::<ErrorBody<'static>>))],
    ),
    Route {
        links: &[
            link(201, "TestHook", "post", "/api/v1/endpoints/{reference}/hooks/{hook_id}/test", HOOK_ID),
            link(201, "RemoveHook", "delete", "/api/v1/endpoints/{reference}/hooks/{hook_id}", HOOK_ID),
        ],
        ..route(
            "post",
            "/api/v1/endpoints/{reference}/hooks",
            "Add a notify hook; the Standard Webhooks signing secret is shown once. The URL must \
             resolve to a public address (the SSRF guard), else 400 on url",
            Body::Required(of::<HookRequest>),
            &[
                (201, "added", Some(of::<HookAdded>)),
                (404, "not manageable", Some(of::<ErrorBody<'static>>)),
                (409, "the endpoint holds its most hooks", Some(of::<ErrorBody<'static>>)),
            ],
        )
    },
    route(
        "delete",
        "/api/v1/endpoints/{reference}/hooks/{hook_id}",
        "Remove a notify hook",
        Body::None,
        &[(204, "removed", None), (404, "no such hook, or not manageable", Some(of::<ErrorBody<'static>>))],
    ),
    route(
        "post",
        "/api/v1/endpoints/{reference}/hooks/{hook_id}/test",
        "Call the hook once now with a signed test body; answers the outcome",
        Body::None,
        &[
            (200, "outcome", Some(of::<HookTestBody>)),
            (404, "no such hook, or not manageable", Some(of::<ErrorBody<'static>>)),
        ],
    ),
    route(
        "patch",
        "/api/v1/todos/{id}",
        "Edit a pending todo's title/payload (only the human who created it)",
        Body::Required(of::<TodoEdit>),
        &[
            (200, "the todo", Some(of::<TodoAnswer>)),
            (409, "not editable", Some(of::<ErrorBody<'static>>)),
            (404, "not found", Some(of::<ErrorBody<'static>>)),
        ],
    ),
    route(
        "delete",
        "/api/v1/queues/{scope}/{queue}",
        "Delete a queue identity with all its todos (pending and claimed) and its policy",
        Body::None,
        &[(200, "the count purged", Some(of::<PurgedBody>)), (404, "not manageable", Some(of::<ErrorBody<'static>>))],
    ),
    route(
        "post",
        "/api/v1/queues/{scope}/{queue}/clear",
        "Remove every pending todo of a queue identity",
        Body::None,
        &[(200, "the exact count", Some(of::<ClearedBody>)), (404, "not manageable", Some(of::<ErrorBody<'static>>))],
    ),
    route(
        "delete",
        "/api/v1/queues/{scope}/{queue}/todos/{id}",
        "Remove one pending todo, whatever created it",
        Body::None,
        &[
            (204, "removed", None),
            (409, "not_pending with state", Some(of::<ErrorBody<'static>>)),
            (404, "not found", Some(of::<ErrorBody<'static>>)),
        ],
    ),
    route(
        "get",
        "/api/v1/system/queue-capacity",
        "Intake capacity: configured and effective value, source, lock",
        Body::None,
        &[(200, "capacity", Some(of::<CapacityBody>))],
    ),
    route(
        "patch",
        "/api/v1/system/queue-capacity",
        "Set the install-wide intake capacity (instance admins)",
        Body::Required(of::<CapacityRequest>),
        &[
            (200, "capacity", Some(of::<CapacityBody>)),
            (403, "not an admin", Some(of::<ErrorBody<'static>>)),
            (409, "locked by the environment", Some(of::<ErrorBody<'static>>)),
        ],
    ),
    route("get", "/api/v1/openapi.json", "This document", Body::None, &[(200, "OpenAPI 3.1", None)]),
];
