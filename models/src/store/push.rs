//! Push (SPEC-0030 REQ-8; docs/push.md): MCP sessions and their streams, the doorbells rung on
//! them, and the passes that decide each push. Every push is decided here, once, in a
//! transaction; replicas only deliver what was decided.

use crate::error::Result;
use std::future::Future;

/// The push role: sessions (open, attach, detach, refresh), the doorbells of a session, and the
/// dispatch, reopen and heartbeat passes.
pub trait Push: Send + Sync {
    /// Opens an MCP session for an endpoint (`initialize`) and answers its id.
    fn open_session(&self, endpoint_id: &str) -> impl Future<Output = Result<String>> + Send;
    /// A stream opened on `replica_id` for a session: false when the session is not this
    /// endpoint's (or is gone).
    fn attach_session(
        &self,
        endpoint_id: &str,
        session_id: &str,
        replica_id: &str,
    ) -> impl Future<Output = Result<bool>> + Send;
    /// The stream closed (only if `replica_id` still holds it).
    fn detach_session(&self, session_id: &str, replica_id: &str) -> impl Future<Output = Result<()>> + Send;
    /// Ends a session (`DELETE /mcp/{slug}`): the session and its doorbells are gone, and a
    /// stream of it closes on the replica's next refresh. False when it is not this endpoint's.
    fn close_session(&self, endpoint_id: &str, session_id: &str) -> impl Future<Output = Result<bool>> + Send;
    /// Marks the sessions whose streams a replica holds as alive, and answers those of them that
    /// must close (the session or its endpoint is gone or revoked).
    fn refresh_sessions(
        &self,
        replica_id: &str,
        session_ids: &[String],
    ) -> impl Future<Output = Result<Vec<String>>> + Send;
    /// Doorbells of a session after stream event `after_seq`, oldest first (`Last-Event-ID`).
    fn rings_since(
        &self,
        session_id: &str,
        after_seq: i64,
    ) -> impl Future<Output = Result<Vec<crate::push::Ring>>> + Send;
    /// Decides the pushes of work that entered pending (created, requeued) and was not yet
    /// decided: a doorbell to one session and a call per hook, or nothing while the queue
    /// identity is deferred (then the reopen sweep watches it) or the endpoint is out.
    fn dispatch_pushes(&self) -> impl Future<Output = Result<crate::push::PushReport>> + Send;
    /// The reopen sweep (REQ-8): each watched identity that admits claims again is rung once per
    /// endpoint and queue with pending work (presence permitting), and no longer watched.
    fn reopen_sweep(&self) -> impl Future<Output = Result<crate::push::PushReport>> + Send;
    /// The doorbell heartbeat: re-rings a few unclaimed todos on their schedule.
    fn heartbeat_sweep(&self) -> impl Future<Output = Result<crate::push::PushReport>> + Send;
}
