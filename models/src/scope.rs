//! Principals and what they may reach (base-system §1, §3). Tenancy is decided here, from data
//! the store hands over, so every surface and the reference model apply the same rules.

use crate::error::{Error, Result};
use crate::identity::{Owner, QueueIdentity};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Human {
    pub id: String,
    pub name: String,
    pub instance_admin: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TeamRole {
    Owner,
    Admin,
    Member,
}

impl TeamRole {
    pub fn as_str(self) -> &'static str {
        match self {
            TeamRole::Owner => "owner",
            TeamRole::Admin => "admin",
            TeamRole::Member => "member",
        }
    }

    pub fn parse(field: &str, raw: &str) -> Result<TeamRole> {
        match raw {
            "owner" => Ok(TeamRole::Owner),
            "admin" => Ok(TeamRole::Admin),
            "member" => Ok(TeamRole::Member),
            _ => Err(Error::invalid(field, format!("{field} must be owner, admin or member"))),
        }
    }

    /// Owners and admins configure a team's queues and endpoints; members only see and claim.
    pub fn configures(self) -> bool {
        matches!(self, TeamRole::Owner | TeamRole::Admin)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Team {
    pub id: String,
    pub slug: String,
    pub name: String,
}

/// A vended endpoint: an MCP URL plus a bearer, scoped to granted queues and verbs (immutable).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    pub id: String,
    pub slug: String,
    pub name: String,
    /// Exactly one of a human or a team owns an endpoint.
    pub owner_human_id: Option<String>,
    pub owner_team_id: Option<String>,
    pub queues: Vec<QueueIdentity>,
    pub verbs: Vec<String>,
    pub revoked: bool,
}

/// The todos a principal may see at all. Anything outside answers `not_found`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reach {
    pub endpoint_ids: Vec<String>,
    pub team_ids: Vec<String>,
}

impl Reach {
    pub fn contains(&self, identity: &QueueIdentity) -> bool {
        match &identity.owner {
            Owner::Endpoint(id) => self.endpoint_ids.iter().any(|e| e == id),
            Owner::Team(id) => self.team_ids.iter().any(|t| t == id),
        }
    }
}

/// The queues an actor may act on by todo id ([`Actor::todo_access`]), as parallel arrays per
/// owner kind: an owner id and a queue name, or `None` for every queue of that owner.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TodoAccess {
    pub endpoint_ids: Vec<String>,
    pub endpoint_queues: Vec<Option<String>>,
    pub team_ids: Vec<String>,
    pub team_queues: Vec<Option<String>>,
}

impl TodoAccess {
    fn push(&mut self, owner: &Owner, queue: Option<String>) {
        match owner {
            Owner::Endpoint(id) => {
                self.endpoint_ids.push(id.clone());
                self.endpoint_queues.push(queue);
            }
            Owner::Team(id) => {
                self.team_ids.push(id.clone());
                self.team_queues.push(queue);
            }
        }
    }

    /// Whether a todo of `identity` is one the actor may act on.
    pub fn admits(&self, identity: &QueueIdentity) -> bool {
        let (ids, queues, owner_id) = match &identity.owner {
            Owner::Endpoint(id) => (&self.endpoint_ids, &self.endpoint_queues, id),
            Owner::Team(id) => (&self.team_ids, &self.team_queues, id),
        };
        ids.iter().zip(queues).any(|(id, queue)| id == owner_id && queue.as_ref().is_none_or(|q| *q == identity.queue))
    }
}

/// An agent authenticated to one endpoint, with its effective scope for this call: the vend
/// grant intersected with the owner's live reach (a lost team membership drops its team queues).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentScope {
    pub endpoint_id: String,
    pub endpoint_slug: String,
    pub owner_human_id: Option<String>,
    pub reach: Reach,
    /// Shared, not copied: a request clones its scope several times (the credential cache's
    /// answer, the actor, a claim group's seat), and an agent may be granted hundreds of queues.
    pub granted: Arc<[QueueIdentity]>,
    pub verbs: Vec<String>,
    /// What this endpoint could manage if granted the policy verbs (REQ-10): itself, and the
    /// teams its owner configures (a team-owned endpoint: its team).
    pub manages: Reach,
    /// The human an agent acts for: who vended the endpoint. Audit records name them.
    pub acting_for_human_id: Option<String>,
}

/// A human acting through the operator API: everything their own endpoints and teams hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HumanScope {
    pub human: Human,
    pub reach: Reach,
    /// Team memberships with role, for decisions that need a configuring role.
    pub teams: Vec<(String, TeamRole)>,
    /// What the human may manage (admission policies, cancellation): endpoints they own or that
    /// a team they configure owns, and the teams they configure (owner or admin role).
    pub manages: Reach,
}

/// Whoever acts on a todo. The label is what `owner` records on a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    Agent(AgentScope),
    Human(HumanScope),
}

impl Actor {
    pub fn label(&self) -> String {
        match self {
            Actor::Agent(agent) => format!("endpoint:{}", agent.endpoint_id),
            Actor::Human(human) => format!("human:{}", human.human.id),
        }
    }

    pub fn reach(&self) -> &Reach {
        match self {
            Actor::Agent(agent) => &agent.reach,
            Actor::Human(human) => &human.reach,
        }
    }

    pub fn endpoint_id(&self) -> Option<&str> {
        match self {
            Actor::Agent(agent) => Some(&agent.endpoint_id),
            Actor::Human(_) => None,
        }
    }

    /// The scoping rule of base-system §3 for a todo the caller names by id: outside reach →
    /// `not_found` (indistinguishable from absent); in reach but outside an agent's granted
    /// queues → `forbidden`.
    pub fn check_todo_access(&self, identity: &QueueIdentity) -> Result<()> {
        if !self.reach().contains(identity) {
            return Err(Error::not_found());
        }
        if !self.todo_access().admits(identity) {
            return Err(Error::forbidden("that todo's queue is outside this endpoint's grant"));
        }
        Ok(())
    }

    /// The queues whose todos this actor may act on by id, as data a store can put into one
    /// statement: an agent's granted queues within its reach, a human's whole reach. Exactly
    /// what [`Actor::check_todo_access`] lets through.
    pub fn todo_access(&self) -> TodoAccess {
        let mut access = TodoAccess::default();
        match self {
            Actor::Agent(agent) => {
                for identity in agent.granted.iter().filter(|identity| agent.reach.contains(identity)) {
                    access.push(&identity.owner, Some(identity.queue.clone()));
                }
            }
            Actor::Human(human) => {
                for id in &human.reach.endpoint_ids {
                    access.push(&Owner::Endpoint(id.clone()), None);
                }
                for id in &human.reach.team_ids {
                    access.push(&Owner::Team(id.clone()), None);
                }
            }
        }
        access
    }
}

impl AgentScope {
    /// REQ-10: the identity named by `queue` if this endpoint may manage its policy: a granted
    /// queue that is its own, or a granted team queue of a team it configures. Anything else is
    /// `not_found`, indistinguishable from a queue that does not exist.
    pub fn managed_queue(&self, queue: &str) -> Result<QueueIdentity> {
        let mut matching = self.granted.iter().filter(|q| q.queue == queue && self.manages.contains(q));
        let own = matching.clone().find(|q| q.endpoint_id().is_some());
        own.or_else(|| matching.next()).cloned().ok_or_else(Error::not_found)
    }

    /// The granted identities a `claim_next`/`list_todos` call covers: all of them, or those
    /// named `queue` (an endpoint queue or `team:<slug-or-id>/<queue>` reference already resolved
    /// by name). A name outside the grant is `forbidden` (base-system §3).
    pub fn narrow(&self, queue: Option<&str>) -> Result<Cow<'_, [QueueIdentity]>> {
        let Some(name) = queue else {
            return Ok(Cow::Borrowed(&self.granted));
        };
        let matching: Vec<QueueIdentity> = self.granted.iter().filter(|q| q.queue == name).cloned().collect();
        if matching.is_empty() {
            return Err(Error::forbidden(format!("queue {name} is outside this endpoint's grant")));
        }
        Ok(Cow::Owned(matching))
    }
}

/// The name rule of a human or team made at bootstrap: not blank, at most 200 bytes. The refusal
/// text names the CLI argument, since only `switchboard admin … add NAME` makes them.
pub fn check_principal_name(name: &str) -> std::result::Result<(), &'static str> {
    if name.trim().is_empty() || name.len() > 200 {
        return Err("NAME must be 1-200 characters");
    }
    Ok(())
}

/// The readable part of a team's or endpoint's slug: lowercase ASCII alphanumerics, any run of
/// anything else as one `-`, at most 40 characters, `x` when nothing is left. Both stores append
/// a random or sequential suffix to it.
pub fn slugify(name: &str) -> String {
    let mut slug = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.ends_with('-') && !slug.is_empty() {
            slug.push('-');
        }
        if slug.len() >= 40 {
            break;
        }
    }
    let slug = slug.trim_end_matches('-').to_string();
    if slug.is_empty() { "x".to_string() } else { slug }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;

    fn agent() -> Actor {
        Actor::Agent(AgentScope {
            endpoint_id: "ep_a".into(),
            endpoint_slug: "a".into(),
            owner_human_id: Some("hu_a".into()),
            reach: Reach { endpoint_ids: vec!["ep_a".into()], team_ids: vec!["tm_1".into()] },
            granted: [QueueIdentity::endpoint("ep_a", "inbox"), QueueIdentity::team("tm_1", "triage")].into(),
            verbs: vec![],
            manages: Reach { endpoint_ids: vec!["ep_a".into()], team_ids: vec![] },
            acting_for_human_id: Some("hu_a".into()),
        })
    }

    #[test]
    fn foreign_todos_are_not_found_and_ungranted_ones_forbidden() {
        let actor = agent();
        assert!(actor.check_todo_access(&QueueIdentity::endpoint("ep_a", "inbox")).is_ok());
        assert!(actor.check_todo_access(&QueueIdentity::team("tm_1", "triage")).is_ok());
        let foreign = actor.check_todo_access(&QueueIdentity::endpoint("ep_b", "inbox")).unwrap_err();
        assert_eq!(foreign.code, Code::NotFound);
        let ungranted = actor.check_todo_access(&QueueIdentity::endpoint("ep_a", "other")).unwrap_err();
        assert_eq!(ungranted.code, Code::Forbidden);
        let other_team = actor.check_todo_access(&QueueIdentity::team("tm_2", "triage")).unwrap_err();
        assert_eq!(other_team.code, Code::NotFound);
    }

    // SPEC-0030 REQ-10: a granted endpoint manages only its own queues (and configured teams').
    #[test]
    fn req10_an_endpoint_manages_only_its_own_granted_queues() {
        let Actor::Agent(agent) = agent() else { unreachable!() };
        assert_eq!(agent.managed_queue("inbox").ok(), Some(QueueIdentity::endpoint("ep_a", "inbox")));
        assert_eq!(agent.managed_queue("triage").unwrap_err().code, Code::NotFound, "team not configured");
        assert_eq!(agent.managed_queue("elsewhere").unwrap_err().code, Code::NotFound);
    }
}
