//! The `switchboard` server: the HTTP router (operator API, MCP, health), authentication and
//! tenancy at the edge, the CLI, and the embedded-PostgreSQL launcher.
//!
//! Must not contain admission logic or SQL that decides admission: the router is generic over
//! `Store`, and decisions live in `models` and `engine`.

pub mod admission_api;
pub mod api;
pub mod app;
pub mod auth;
pub mod board;
pub mod cli;
pub mod credentials_api;
pub mod database;
pub mod extract;
pub mod hook_sender;
pub mod http_server;
pub mod intake_api;
pub mod load;
pub mod mcp;
pub mod metrics;
pub mod openapi;
pub mod public_url;
pub mod push;
mod response_headers;
pub mod serve;
pub mod state;
pub mod tls;
pub mod vend;
pub mod webhooks;
pub mod wire;
pub mod wire_types;
