//! Queue identities and scopes (SPEC-0030 "Terms"; contract §2).
//!
//! A queue is never just a name: it is (endpoint, queue) or (team, queue). Two endpoints' `inbox`
//! queues are unrelated, and every policy, charge, capacity and cancellation is keyed by identity.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Longest queue name the contract allows.
pub const QUEUE_NAME_LENGTH_MAX: usize = 64;

/// The owner half of a queue identity: one endpoint or one team, by id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", content = "id", rename_all = "snake_case")]
pub enum Owner {
    Endpoint(String),
    Team(String),
}

/// A queue as ADR-0038 identifies it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct QueueIdentity {
    pub owner: Owner,
    pub queue: String,
}

impl QueueIdentity {
    /// The identity's scope as the API writes it: `endpoint:<id>` or `team:<id>`.
    pub fn scope_text(&self) -> String {
        match &self.owner {
            Owner::Endpoint(id) => format!("endpoint:{id}"),
            Owner::Team(id) => format!("team:{id}"),
        }
    }

    pub fn endpoint(endpoint_id: impl Into<String>, queue: impl Into<String>) -> Self {
        QueueIdentity { owner: Owner::Endpoint(endpoint_id.into()), queue: queue.into() }
    }

    pub fn team(team_id: impl Into<String>, queue: impl Into<String>) -> Self {
        QueueIdentity { owner: Owner::Team(team_id.into()), queue: queue.into() }
    }

    pub fn endpoint_id(&self) -> Option<&str> {
        match &self.owner {
            Owner::Endpoint(id) => Some(id),
            Owner::Team(_) => None,
        }
    }

    pub fn team_id(&self) -> Option<&str> {
        match &self.owner {
            Owner::Team(id) => Some(id),
            Owner::Endpoint(_) => None,
        }
    }

    /// The owner's id, whichever kind it is: endpoint and team ids never collide (`ep_`, `tm_`),
    /// so charges are keyed by it (`admission_windows.owner_id`).
    pub fn owner_id(&self) -> &str {
        match &self.owner {
            Owner::Endpoint(id) | Owner::Team(id) => id,
        }
    }
}

impl fmt::Display for QueueIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.owner {
            Owner::Endpoint(id) => write!(f, "endpoint:{id}/{}", self.queue),
            Owner::Team(id) => write!(f, "team:{id}/{}", self.queue),
        }
    }
}

/// Checks a queue name: 1–64 characters of `[a-z0-9._-]` (contract §2).
pub fn validate_queue_name(field: &str, name: &str) -> Result<()> {
    if well_formed_name(name, QUEUE_NAME_LENGTH_MAX) {
        Ok(())
    } else {
        Err(Error::invalid(field, format!("{field} must be 1-{QUEUE_NAME_LENGTH_MAX} characters of [a-z0-9._-]")))
    }
}

/// Whether `name` is 1 to `length_max` characters of `[a-z0-9._-]`: the alphabet of queue and
/// shared budget names, which read the same in a URL, a metric label and the CLI.
pub(crate) fn well_formed_name(name: &str, length_max: usize) -> bool {
    !name.is_empty()
        && name.len() <= length_max
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'_' || b == b'-')
}

/// A scope as a caller writes it: `endpoint:<slug-or-id>` or `team:<slug-or-id>`, not yet
/// resolved against what the caller may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScopeRef {
    Endpoint(String),
    Team(String),
}

impl ScopeRef {
    pub fn parse(field: &str, raw: &str) -> Result<ScopeRef> {
        let parsed = match raw.split_once(':') {
            Some(("endpoint", reference)) if !reference.is_empty() => ScopeRef::Endpoint(reference.into()),
            Some(("team", reference)) if !reference.is_empty() => ScopeRef::Team(reference.into()),
            _ => {
                return Err(Error::invalid(
                    field,
                    format!("{field} must be endpoint:<slug-or-id> or team:<slug-or-id>"),
                ));
            }
        };
        Ok(parsed)
    }
}

/// A granted queue as written in a vend request: `name` (the endpoint's own queue) or
/// `team:<slug-or-id>/name` (a team queue the endpoint drains).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrantRef {
    Own(String),
    Team { team: String, queue: String },
}

impl GrantRef {
    pub fn parse(field: &str, raw: &str) -> Result<GrantRef> {
        if let Some(rest) = raw.strip_prefix("team:") {
            let Some((team, queue)) = rest.split_once('/') else {
                return Err(Error::invalid(field, format!("{field}: team queues are written team:<slug>/<queue>")));
            };
            if team.is_empty() {
                return Err(Error::invalid(field, format!("{field}: team reference is empty")));
            }
            validate_queue_name(field, queue)?;
            return Ok(GrantRef::Team { team: team.into(), queue: queue.into() });
        }
        validate_queue_name(field, raw)?;
        Ok(GrantRef::Own(raw.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names_follow_the_contract() {
        for good in ["a", "lane-m", "inbox.v2", "x_y", &"q".repeat(64)] {
            assert!(validate_queue_name("queue", good).is_ok(), "{good}");
        }
        for bad in ["", "Inbox", "a b", "ünï", &"q".repeat(65), "a/b"] {
            let err = validate_queue_name("queue", bad).expect_err(bad);
            assert_eq!(err.extras["field"], "queue");
        }
    }

    #[test]
    fn scopes_and_grants_parse() {
        assert_eq!(ScopeRef::parse("scope", "endpoint:ep_1").ok(), Some(ScopeRef::Endpoint("ep_1".into())));
        assert_eq!(ScopeRef::parse("scope", "team:core").ok(), Some(ScopeRef::Team("core".into())));
        assert!(ScopeRef::parse("scope", "human:x").is_err());
        assert!(ScopeRef::parse("scope", "endpoint:").is_err());
        assert_eq!(GrantRef::parse("queues[0]", "inbox").ok(), Some(GrantRef::Own("inbox".into())));
        assert_eq!(
            GrantRef::parse("queues[0]", "team:core/triage").ok(),
            Some(GrantRef::Team { team: "core".into(), queue: "triage".into() })
        );
        assert!(GrantRef::parse("queues[0]", "team:core").is_err());
    }
}
