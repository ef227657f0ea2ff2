//! Push on this replica (SPEC-0030 REQ-8; `docs/push.md`): the MCP streams this process holds,
//! the background loop that asks the store to decide pushes, and delivery of the doorbells the
//! store decided to the stream that should carry them.
//!
//! Decisions are never taken here: the store takes each one once, in a transaction, across all
//! replicas. This module keeps the replica-local half: which sessions' streams live in this
//! process (`Hub`), nudges that make the loop run now instead of at its next tick, and the
//! after-effects of agent verbs that tell the store who was told to wait (the reopen watch).

pub mod api;
pub mod stream;
pub mod tasks;

use models::push::Ring;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use tokio::sync::{Notify, mpsc};

/// Doorbells one stream buffers while its client reads slowly; past it the oldest are dropped
/// (the client can resume from `Last-Event-ID`, and the queue stays the ledger).
const STREAM_BUFFER_MAX: usize = 64;
/// Delivered event ids remembered per stream, so a doorbell that arrives both directly and by
/// `NOTIFY` is sent once.
const DELIVERED_REMEMBERED_MAX: usize = 256;

/// One event on a session's stream: its id (`seq`) and the JSON-RPC message.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamEvent {
    pub seq: i64,
    pub message: Value,
}

/// What a stream's task receives.
#[derive(Debug)]
pub enum StreamSignal {
    Event(StreamEvent),
    /// The session or its endpoint is gone or revoked: the stream ends.
    Close,
}

struct Slot {
    endpoint_id: String,
    sender: mpsc::Sender<StreamSignal>,
    delivered: VecDeque<i64>,
    /// The stream's event id when it attached (its `Last-Event-ID`, or 0): what it had before.
    attached_after: i64,
    /// Doorbells announced while the stream's replay is still being read, held back so the
    /// client gets them after the older rings the replay sends (`Hub::replayed`). None once the
    /// replay is done.
    held_back: Option<Vec<StreamEvent>>,
}

/// The replica-local half of push: streams held here, and the loop's nudges.
pub struct Hub {
    replica_id: String,
    slots: Mutex<HashMap<String, Slot>>,
    /// Work entered pending: decide pushes now.
    pub(crate) dispatch_now: Notify,
    /// A slot may have freed or a policy changed: run the reopen sweep now.
    pub(crate) reopen_now: Notify,
    /// Hook calls were enqueued: send now.
    pub(crate) hooks_now: Notify,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub").field("replica_id", &self.replica_id).finish()
    }
}

impl Hub {
    pub fn new(replica_id: impl Into<String>) -> Hub {
        Hub {
            replica_id: replica_id.into(),
            slots: Mutex::default(),
            dispatch_now: Notify::new(),
            reopen_now: Notify::new(),
            hooks_now: Notify::new(),
        }
    }

    /// A fresh replica id for a server process (`rp_` and 16 random hex digits).
    pub fn random_replica_id() -> String {
        let bytes: [u8; 8] = rand::random();
        format!("rp_{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
    }

    pub fn replica_id(&self) -> &str {
        &self.replica_id
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        self.slots.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Registers a stream for a session; a previous stream of the same session on this replica
    /// is closed (one stream per session). Until `replayed` is called, announced doorbells are
    /// held back, so a ring announced now cannot overtake an older one the replay sends.
    pub(crate) fn register(
        &self,
        session_id: &str,
        endpoint_id: &str,
        attached_after: i64,
    ) -> mpsc::Receiver<StreamSignal> {
        let (sender, receiver) = mpsc::channel(STREAM_BUFFER_MAX);
        let slot = Slot {
            endpoint_id: endpoint_id.to_string(),
            sender,
            delivered: VecDeque::new(),
            attached_after,
            held_back: Some(Vec::new()),
        };
        if let Some(old) = self.slots().insert(session_id.to_string(), slot) {
            let _ = old.sender.try_send(StreamSignal::Close);
        }
        receiver
    }

    /// Forgets a stream, unless a newer stream of the same session replaced it.
    pub(crate) fn unregister(&self, session_id: &str, sender_closed: bool) {
        let mut slots = self.slots();
        if slots.get(session_id).is_some_and(|slot| sender_closed || slot.sender.is_closed()) {
            slots.remove(session_id);
        }
    }

    /// Each stream held here with the newest event id it has had: where a catch-up reads from
    /// after this replica may have missed announcements (`catch_up`).
    pub fn catch_up_points(&self) -> Vec<(String, i64)> {
        let slots = self.slots();
        slots
            .iter()
            .map(|(session, slot)| {
                let newest = slot.delivered.iter().copied().max().unwrap_or(0).max(slot.attached_after);
                (session.clone(), newest)
            })
            .collect()
    }

    /// Sessions whose streams this replica holds.
    pub fn sessions(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.slots().keys().cloned().collect();
        ids.sort();
        ids
    }

    /// Sends a doorbell to its session's stream if this replica holds it; true when sent (or
    /// held back behind the stream's replay, to be sent when it is done).
    pub fn deliver(&self, session_id: &str, event: StreamEvent) -> bool {
        let mut slots = self.slots();
        let Some(slot) = slots.get_mut(session_id) else {
            return false;
        };
        if let Some(held_back) = slot.held_back.as_mut() {
            held_back.push(event);
            return true;
        }
        Self::send(session_id, slot, event)
    }

    /// Ends a stream's replay: sends the rings it missed (`missed`, from the store), then what
    /// was announced meanwhile, each in event-id order and each once.
    pub fn replayed(&self, session_id: &str, missed: &[Ring]) {
        let mut slots = self.slots();
        let Some(slot) = slots.get_mut(session_id) else { return };
        let mut events: Vec<StreamEvent> = missed
            .iter()
            .filter(|ring| ring.session_id == session_id)
            .map(|ring| StreamEvent { seq: ring.seq, message: ring.message.clone() })
            .collect();
        events.extend(slot.held_back.take().unwrap_or_default());
        events.sort_by_key(|event| event.seq);
        for event in events {
            Self::send(session_id, slot, event);
        }
    }

    fn send(session_id: &str, slot: &mut Slot, event: StreamEvent) -> bool {
        if slot.delivered.contains(&event.seq) {
            return false;
        }
        if slot.delivered.len() >= DELIVERED_REMEMBERED_MAX {
            slot.delivered.pop_front();
        }
        slot.delivered.push_back(event.seq);
        match slot.sender.try_send(StreamSignal::Event(event)) {
            Ok(()) => true,
            Err(error) => {
                tracing::debug!(session = session_id, %error, "stream buffer full or closed; doorbell dropped");
                false
            }
        }
    }

    /// Replays doorbells a reconnecting client missed, on the stream this replica now holds.
    pub fn deliver_rings_to_session(&self, session_id: &str, rings: &[Ring]) {
        for ring in rings.iter().filter(|ring| ring.session_id == session_id) {
            self.deliver(session_id, StreamEvent { seq: ring.seq, message: ring.message.clone() });
        }
    }

    /// Closes the streams of these sessions, or of every session of `endpoint_id`.
    pub fn close(&self, session_ids: &[String], endpoint_id: Option<&str>) {
        let mut slots = self.slots();
        slots.retain(|session_id, slot| {
            let closing = session_ids.contains(session_id) || endpoint_id == Some(slot.endpoint_id.as_str());
            if closing {
                let _ = slot.sender.try_send(StreamSignal::Close);
            }
            !closing
        });
    }

    /// Work entered pending (a create, an ingest): decide its pushes now.
    pub fn work_added(&self) {
        self.dispatch_now.notify_one();
    }

    /// An in-flight slot freed or a policy changed: the reopen sweep runs now.
    pub fn capacity_changed(&self) {
        self.reopen_now.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use models::push::RingReason;
    use serde_json::json;

    fn ring(session: &str, seq: i64) -> Ring {
        Ring {
            seq,
            ring_id: format!("rg_{seq}"),
            session_id: session.into(),
            endpoint_id: "ep_1".into(),
            replica_id: "rp_1".into(),
            queue: Some("q".into()),
            todo_id: None,
            reason: RingReason::Created,
            message: json!({"seq": seq}),
        }
    }

    fn received(receiver: &mut mpsc::Receiver<StreamSignal>) -> Vec<i64> {
        let mut seqs = Vec::new();
        while let Ok(StreamSignal::Event(event)) = receiver.try_recv() {
            seqs.push(event.seq);
        }
        seqs
    }

    // Issue #51: a stream that resumes with Last-Event-ID gets the rings it missed before any
    // ring announced while the replay was read, each once, so a client that breaks off again
    // never resumes past a ring it did not get.
    #[test]
    fn req8_a_resumed_stream_gets_its_missed_rings_before_newer_ones_announced_meanwhile() {
        let hub = Hub::new("rp_1");
        let mut receiver = hub.register("ms_1", "ep_1", 101);
        assert!(hub.deliver("ms_1", StreamEvent { seq: 105, message: json!({"seq": 105}) }));
        assert!(hub.deliver("ms_1", StreamEvent { seq: 103, message: json!({"seq": 103}) }));
        assert_eq!(received(&mut receiver), Vec::<i64>::new(), "held back behind the replay");
        hub.replayed("ms_1", &[ring("ms_1", 102), ring("ms_1", 103), ring("ms_other", 104)]);
        assert_eq!(received(&mut receiver), vec![102, 103, 105]);
        // Once replayed, announcements go straight through, and one already sent is not resent.
        assert!(hub.deliver("ms_1", StreamEvent { seq: 106, message: json!({"seq": 106}) }));
        assert!(!hub.deliver("ms_1", StreamEvent { seq: 105, message: json!({"seq": 105}) }));
        assert_eq!(received(&mut receiver), vec![106]);
    }
}
