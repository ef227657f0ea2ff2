//! The principals' answers: endpoints (vended, listed), operator tokens, teams.

use super::Millis;
use models::identity::Owner;
use models::scope::{Endpoint, Team, TeamRole};
use models::store::ApiToken;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An endpoint as the API lists it; its grant's queues as the vend request writes them (`inbox`
/// for its own, `team:<id>/<queue>` for a team's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EndpointBody {
    pub id: String,
    pub slug: String,
    pub name: String,
    pub owner_human_id: Option<String>,
    pub owner_team_id: Option<String>,
    pub queues: Vec<String>,
    pub verbs: Vec<String>,
    pub revoked: bool,
}

impl From<&Endpoint> for EndpointBody {
    fn from(endpoint: &Endpoint) -> EndpointBody {
        EndpointBody {
            id: endpoint.id.clone(),
            slug: endpoint.slug.clone(),
            name: endpoint.name.clone(),
            owner_human_id: endpoint.owner_human_id.clone(),
            owner_team_id: endpoint.owner_team_id.clone(),
            queues: endpoint
                .queues
                .iter()
                .map(|q| match &q.owner {
                    Owner::Endpoint(_) => q.queue.clone(),
                    Owner::Team(team) => format!("team:{team}/{}", q.queue),
                })
                .collect(),
            verbs: endpoint.verbs.clone(),
            revoked: endpoint.revoked,
        }
    }
}

/// A vend's answer: the endpoint, its MCP bearer (shown once) and the URL to connect to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct VendedBody {
    #[serde(flatten)]
    pub endpoint: EndpointBody,
    pub token: String,
    pub mcp_url: String,
}

/// `{endpoints}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Endpoints {
    pub endpoints: Vec<EndpointBody>,
}

/// A minted operator token, shown once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MintedToken {
    pub token: String,
    pub label: Option<String>,
    pub human_id: String,
}

/// An operator token as its human lists it: never the secret or its digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TokenBody {
    pub id: String,
    pub label: Option<String>,
    pub created_at: Millis,
    pub expires_at: Option<Millis>,
}

impl From<&ApiToken> for TokenBody {
    fn from(token: &ApiToken) -> TokenBody {
        TokenBody {
            id: token.id.clone(),
            label: token.label.clone(),
            created_at: Millis(token.created_at),
            expires_at: token.expires_at.map(Millis),
        }
    }
}

/// `{tokens}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Tokens {
    pub tokens: Vec<TokenBody>,
}

/// A new MCP credential for an endpoint, shown once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RotatedToken {
    pub token: String,
}

/// A team of the caller's, with the caller's role in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TeamBody {
    pub id: String,
    pub slug: String,
    pub name: String,
    pub role: String,
}

impl TeamBody {
    pub fn of(team: &Team, role: TeamRole) -> TeamBody {
        TeamBody { id: team.id.clone(), slug: team.slug.clone(), name: team.name.clone(), role: role.as_str().into() }
    }
}

/// `{teams}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Teams {
    pub teams: Vec<TeamBody>,
}
