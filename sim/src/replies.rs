//! What a client heard, summarised into values without the identifiers a store generates (ids,
//! slugs, owners), so the model and PostgreSQL runs of one seed trace the same answers.
//!
//! Exists apart from `trace` so the events stay a short list of what happened, and the shapes of
//! the answers (and how each prints) read on their own. Each `Display` here is part of the trace
//! text and must not change.

use crate::net::Reply;
use serde_json::{Value, json};
use std::fmt;

/// The reasons a claim is refused, as agents are told them (SPEC-0030 REQ-6, REQ-9).
pub const REFUSAL_REASONS: [&str; 4] = ["window_exhausted", "in_flight_full", "admission_unavailable", "paused"];

/// An answer, or a request that never got one.
#[derive(Debug, Clone, PartialEq)]
pub enum Heard<T> {
    Answer(T),
    Network(String),
}

impl<T> Heard<T> {
    /// `answer` of an HTTP reply; a network failure as it is.
    pub fn of(reply: &Reply, answer: impl FnOnce(u16, &Value) -> T) -> Heard<T> {
        match reply {
            Reply::Http(status, body) => Heard::Answer(answer(*status, body)),
            Reply::Network(problem) => Heard::Network(problem.clone()),
        }
    }
}

impl<T: fmt::Display> fmt::Display for Heard<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Heard::Answer(answer) => write!(f, "{answer}"),
            Heard::Network(problem) => write!(f, "network: {problem}"),
        }
    }
}

/// An answer's status and the body's `status` field (the owner's policy writes).
#[derive(Debug, Clone, PartialEq)]
pub struct HttpStatus {
    pub status: u16,
    pub body_status: Value,
}

impl fmt::Display for HttpStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "http {} {}", self.status, self.body_status)
    }
}

/// The answer to a todo created over the operator API.
#[derive(Debug, Clone, PartialEq)]
pub struct Created {
    pub status: u16,
    pub deduped: Value,
    pub title: Value,
}

impl fmt::Display for Created {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "http {} deduped={} {}", self.status, self.deduped, self.title)
    }
}

/// The answer to a webhook delivery: whether it was a redelivery, and how many todos it made.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivered {
    pub status: u16,
    pub deduped: Value,
    pub todos: usize,
}

impl fmt::Display for Delivered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "http {} deduped={} todos={}", self.status, self.deduped, self.todos)
    }
}

/// A reply to a todo verb (list, heartbeat, complete, …) without generated identifiers.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplySummary {
    /// A `{todo: …}` answer.
    Todo {
        title: Value,
        state: Value,
        attempt: Value,
    },
    /// A todo answered at the top level.
    State {
        title: Value,
        state: Value,
        attempt: Value,
        lease: Value,
    },
    /// An error: the status and the body without its message and error text.
    Error {
        status: u16,
        extras: Value,
    },
    Http {
        status: u16,
        body: Value,
    },
    /// A `{todos: [todo, ...]}` answer (`complete {ids}`), each todo as `State` shows it.
    Todos(Vec<ReplySummary>),
    Network(String),
}

impl ReplySummary {
    pub fn of(reply: &Reply) -> ReplySummary {
        match reply {
            Reply::Http(200, body) if body.get("todo").is_some() => ReplySummary::Todo {
                title: body["todo"]["title"].clone(),
                state: body["todo"]["state"].clone(),
                attempt: body["todo"]["attempt"].clone(),
            },
            Reply::Http(200, body) if body["todos"].is_array() => ReplySummary::Todos(
                body["todos"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|todo| ReplySummary::of(&Reply::Http(200, todo.clone())))
                    .collect(),
            ),
            Reply::Http(200, body) if body.get("state").is_some() => ReplySummary::State {
                title: body["title"].clone(),
                state: body["state"].clone(),
                attempt: body["attempt"].clone(),
                lease: body["lease_expires_at"].clone(),
            },
            Reply::Http(status, body) if *status >= 400 => {
                let mut extras = body.as_object().cloned().unwrap_or_default();
                extras.remove("message");
                extras.remove("error");
                ReplySummary::Error { status: *status, extras: scrub(&Value::Object(extras)) }
            }
            Reply::Http(status, body) => ReplySummary::Http { status: *status, body: body.clone() },
            Reply::Network(problem) => ReplySummary::Network(problem.clone()),
        }
    }
}

impl fmt::Display for ReplySummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplySummary::Todo { title, state, attempt } => write!(f, "ok {title} state={state} attempt={attempt}"),
            ReplySummary::State { title, state, attempt, lease } => {
                write!(f, "ok {title} state={state} attempt={attempt} lease={lease}")
            }
            ReplySummary::Error { status, extras } | ReplySummary::Http { status, body: extras } => {
                write!(f, "http {status} {extras}")
            }
            ReplySummary::Todos(todos) => {
                let listed: Vec<String> = todos.iter().map(ReplySummary::to_string).collect();
                write!(f, "[{}]", listed.join("; "))
            }
            ReplySummary::Network(problem) => write!(f, "network: {problem}"),
        }
    }
}

/// One queue a `claim_next` found nothing admitted in, as JSON values of its deferred entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Deferred {
    pub queue: Value,
    pub reason: Value,
    pub pending: Value,
    pub next_eligible_at: Value,
}

/// What a claim (`claim_next` or of a named todo) answered.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimReply {
    /// Nothing admitted; the queues deferred and why.
    Empty {
        deferred: Vec<Deferred>,
    },
    Claimed {
        title: Value,
        queue: Value,
        attempt: Value,
        lease: Value,
        admission: Value,
    },
    /// `claim_next {max}`'s claims (each `Claimed`), and the queues that ended it short.
    Many {
        claims: Vec<ClaimReply>,
        deferred: Vec<Deferred>,
    },
    Other(ReplySummary),
}

impl ClaimReply {
    pub fn of(reply: &Reply) -> ClaimReply {
        match reply {
            Reply::Http(200, body) if body["empty"] == json!(true) => ClaimReply::Empty { deferred: deferred_of(body) },
            Reply::Http(200, body) if body["todos"].is_array() => ClaimReply::Many {
                claims: body["todos"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|claim| ClaimReply::of(&Reply::Http(200, claim.clone())))
                    .collect(),
                deferred: deferred_of(body),
            },
            Reply::Http(200, body) => ClaimReply::Claimed {
                title: body["todo"]["title"].clone(),
                queue: body["todo"]["queue"].clone(),
                attempt: body["todo"]["attempt"].clone(),
                lease: body["todo"]["lease_expires_at"].clone(),
                admission: body["admission"].clone(),
            },
            other => ClaimReply::Other(ReplySummary::of(other)),
        }
    }

    /// Whether a todo was claimed.
    pub fn claimed(&self) -> bool {
        matches!(self, ClaimReply::Claimed { .. } | ClaimReply::Many { .. })
    }

    /// Why the claim was refused, one reason per deferred queue (none for a claim, an ordinary
    /// error or a lost request).
    pub fn refusal_reasons(&self) -> Vec<&str> {
        fn known(reason: &Value) -> Option<&str> {
            reason.as_str().filter(|r| REFUSAL_REASONS.contains(r))
        }
        match self {
            ClaimReply::Empty { deferred } | ClaimReply::Many { deferred, .. } => {
                deferred.iter().filter_map(|d| known(&d.reason)).collect()
            }
            ClaimReply::Other(ReplySummary::Error { extras, .. }) => known(&extras["reason"]).into_iter().collect(),
            _ => vec![],
        }
    }
}

impl fmt::Display for ClaimReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClaimReply::Empty { deferred } => write!(f, "empty deferred=[{}]", listed(deferred)),
            ClaimReply::Many { claims, deferred } => {
                let claims: Vec<String> = claims.iter().map(ClaimReply::to_string).collect();
                write!(f, "{} claims [{}] deferred=[{}]", claims.len(), claims.join("; "), listed(deferred))
            }
            ClaimReply::Claimed { title, queue, attempt, lease, admission } => {
                write!(f, "claimed {title} q={queue} attempt={attempt} lease={lease} admission={admission}")
            }
            ClaimReply::Other(summary) => write!(f, "{summary}"),
        }
    }
}

/// `admission_status`: the scrubbed body, or what else came back.
#[derive(Debug, Clone, PartialEq)]
pub enum StatusReply {
    Ok(Value),
    Other(ReplySummary),
}

impl StatusReply {
    pub fn of(reply: &Reply) -> StatusReply {
        match reply {
            Reply::Http(200, body) => StatusReply::Ok(scrub(body)),
            other => StatusReply::Other(ReplySummary::of(other)),
        }
    }
}

impl fmt::Display for StatusReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StatusReply::Ok(body) => write!(f, "ok {body}"),
            StatusReply::Other(summary) => write!(f, "{summary}"),
        }
    }
}

/// A body without the generated identifiers (ids, slugs, owners), which differ between stores.
/// The deferred list of a `claim_next` answer (absent: none).
fn deferred_of(body: &Value) -> Vec<Deferred> {
    let list = body["deferred"].as_array().into_iter().flatten();
    list.map(|d| Deferred {
        queue: d["queue"].clone(),
        reason: d["reason"].clone(),
        pending: d["pending"].clone(),
        next_eligible_at: d["next_eligible_at"].clone(),
    })
    .collect()
}

/// A deferred list as the trace prints it.
fn listed(deferred: &[Deferred]) -> String {
    let listed: Vec<String> =
        deferred.iter().map(|d| format!("{}:{}:{}:{}", d.queue, d.reason, d.pending, d.next_eligible_at)).collect();
    listed.join(",")
}

fn scrub(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| {
                    !matches!(key.as_str(), "id" | "policy_id" | "scope" | "owner" | "endpoint_id" | "team_id")
                })
                .map(|(key, value)| (key.clone(), scrub(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(scrub).collect()),
        other => other.clone(),
    }
}

/// A path without the generated parts (endpoint slugs, webhook ids differ between stores).
pub fn printable(path: &str) -> &str {
    if path.starts_with("/mcp/") {
        "/mcp/<endpoint>"
    } else if path.starts_with("/ingest/") {
        "/ingest/<webhook>"
    } else if path.starts_with("/api/v1/admission/") {
        "/api/v1/admission/<team>/<queue>"
    } else {
        path
    }
}
