//! HTTP over turmoil's simulated network: the production router served by hyper on
//! turmoil-net's `TcpListener`, and the small HTTP/1 client the simulated agents, owner and
//! producer speak through on turmoil-net's `TcpStream`. Every segment (handshake, data, FIN and
//! RST) crosses turmoil-net's fabric, so latency, partitions and crashes apply to them.
//!
//! Exists because axum and hyper run on real sockets by default; in the simulation every request
//! must take seeded simulated time and be lost the way a network loses it. turmoil-net owns the
//! sockets and TCP; what stays here is what only we need: the harness that owns time (the
//! fabric has no clock of its own), the rule that draws latencies from the seed and cuts
//! partitions, and the host scoping every task that touches a socket needs.
//!
//! The network's rules: every segment arrives after 1 to 25 ms drawn from the seed in the order
//! segments leave, never before a segment sent ahead of it between the same two hosts (the
//! stack takes segments strictly in order, and retransmission is off: it counts egress passes,
//! not time). A partition between two hosts drops every segment between them: open connections
//! go silent for good and a new one across it never completes, so the client's timeout ends
//! the request. A crashed replica's tasks are dropped, so its sockets close as a killed
//! process's do, and its port refuses connections until it listens again; each life listens on
//! a port of its own (turmoil-net 0.1.0 can leave a half-open connection holding the old one).
//!
//! Time: one harness task delivers each segment at its instant and sleeps until the next, so the
//! paused runtime still jumps straight to the next timer or the next due segment; every host
//! task drains the fabric's egress after each poll, so nothing waits on a tick.

use crate::rng::Rng;
use axum::Router;
use axum::body::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Instant;
use turmoil_net::shim::tokio::net::{TcpListener, TcpStream};
use turmoil_net::{HostId, KernelConfig, Packet, Verdict};

/// Latency of one segment, in simulated milliseconds.
const LATENCY_MS_MIN: u64 = 1;
const LATENCY_MS_MAX: u64 = 25;
/// The port a replica's first life listens on; each restart takes the next.
const FIRST_PORT: u16 = 8000;

thread_local! {
    /// The run's fabric on this thread (turmoil-net installs its `Net` per thread too).
    static FABRIC: RefCell<Option<Fabric>> = const { RefCell::new(None) };
}

/// What the harness owns: turmoil-net's installed `Net`, and the segments on their way.
struct Fabric {
    guard: turmoil_net::EnterGuard,
    /// Segments due later, by (instant, order sent).
    due: BTreeMap<(Instant, u64), Packet>,
    sent: u64,
    egress: Vec<Packet>,
    /// Wakes the delivering task when a segment is scheduled.
    scheduled: Arc<Notify>,
}

/// The network of one run. Cheap to clone; clones share it.
#[derive(Clone)]
pub struct Net(Arc<Mutex<Wires>>);

struct Wires {
    hosts: BTreeMap<String, (HostId, IpAddr)>,
    /// The port each replica's current (or last) life listens on.
    ports: BTreeMap<String, u16>,
    /// The seed's latencies and the partitions, which the fabric's rule reads.
    rule: Arc<Mutex<RuleState>>,
}

struct RuleState {
    rng: Rng,
    /// Pairs of hosts that cannot reach each other (each pair sorted).
    cut: BTreeSet<(IpAddr, IpAddr)>,
    /// When the last segment from one host to another arrives, so none overtakes it.
    last_due: BTreeMap<(IpAddr, IpAddr), Instant>,
}

fn pair(a: IpAddr, b: IpAddr) -> (IpAddr, IpAddr) {
    if a <= b { (a, b) } else { (b, a) }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The fabric's rule: drop across a partition, else deliver after a seeded latency, in order.
struct Wiring(Arc<Mutex<RuleState>>);

impl turmoil_net::Rule for Wiring {
    fn on_packet(&mut self, packet: &Packet) -> Verdict {
        let mut state = lock(&self.0);
        if state.cut.contains(&pair(packet.src, packet.dst)) {
            return Verdict::Drop;
        }
        let latency = Duration::from_millis(LATENCY_MS_MIN + state.rng.below(LATENCY_MS_MAX - LATENCY_MS_MIN + 1));
        let now = Instant::now();
        let flow = (packet.src, packet.dst);
        let arrives = state.last_due.get(&flow).map_or(now + latency, |last| (now + latency).max(*last));
        state.last_due.insert(flow, arrives);
        Verdict::Deliver(arrives - now)
    }
}

/// Moves every segment the hosts have sent into the schedule (or drops it, as the rule says).
/// Called after each poll of a host task, so a segment leaves the moment it is written.
fn pump() {
    FABRIC.with(|fabric| {
        let mut fabric = fabric.borrow_mut();
        let Some(fabric) = fabric.as_mut() else { return };
        let mut egress = std::mem::take(&mut fabric.egress);
        fabric.guard.egress_all(&mut egress);
        let any = !egress.is_empty();
        for packet in egress.drain(..) {
            match fabric.guard.evaluate(&packet) {
                Verdict::Drop => {}
                Verdict::Deliver(delay) => {
                    fabric.sent += 1;
                    fabric.due.insert((Instant::now() + delay, fabric.sent), packet);
                }
                Verdict::Pass => {
                    fabric.sent += 1;
                    fabric.due.insert((Instant::now(), fabric.sent), packet);
                }
            }
        }
        fabric.egress = egress;
        if any {
            fabric.scheduled.notify_one();
        }
    });
}

/// Delivers every segment due by now; the instant the next one is due, if any.
fn deliver_due() -> Option<Instant> {
    FABRIC.with(|fabric| {
        let mut fabric = fabric.borrow_mut();
        let fabric = fabric.as_mut()?;
        let now = Instant::now();
        while let Some(entry) = fabric.due.first_entry() {
            if entry.key().0 > now {
                return Some(entry.key().0);
            }
            let packet = entry.remove();
            fabric.guard.deliver(packet);
        }
        None
    })
}

/// The harness's clock for the fabric: delivers each segment at its instant, drains what the
/// deliveries made the hosts send, and sleeps until the next segment is due or one is scheduled.
async fn carry(scheduled: Arc<Notify>) {
    loop {
        deliver_due();
        // What the deliveries made the hosts send (acknowledgements above all) is due later.
        pump();
        match deliver_due() {
            Some(at) => {
                tokio::select! {
                    biased;
                    () = tokio::time::sleep_until(at) => {}
                    () = scheduled.notified() => {}
                }
            }
            None => scheduled.notified().await,
        }
    }
}

/// Points turmoil-net's socket calls at `host`; false once the run's fabric is gone.
fn enter_host(host: HostId) -> bool {
    FABRIC.with(|fabric| fabric.borrow().is_some()) && {
        turmoil_net::set_current(host);
        true
    }
}

/// A future run as one host: each poll, and its drop, see that host's sockets, and whatever it
/// sent leaves at once.
pub struct Scoped<F: Future> {
    host: HostId,
    inner: Option<Pin<Box<F>>>,
}

impl<F: Future> Scoped<F> {
    fn new(host: HostId, inner: F) -> Scoped<F> {
        Scoped { host, inner: Some(Box::pin(inner)) }
    }
}

impl<F: Future> Future for Scoped<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        enter_host(self.host);
        let Some(inner) = self.inner.as_mut() else { return Poll::Pending };
        let polled = inner.as_mut().poll(cx);
        if polled.is_ready() {
            self.inner = None;
        }
        pump();
        polled
    }
}

impl<F: Future> Drop for Scoped<F> {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            if enter_host(self.host) {
                drop(inner);
                pump();
            } else {
                // The fabric is gone (the run is over): its sockets cannot be closed, only left.
                std::mem::forget(inner);
            }
        }
    }
}

impl Net {
    /// A network of `hosts` with nothing listening, installed on this thread (the run's
    /// runtime thread); latencies come from `seed`. `teardown` uninstalls it.
    pub fn new(seed: u64, hosts: &[String]) -> Net {
        // Retransmission counts egress passes, and this harness drains egress after every poll:
        // it would fire at once, so it is off (segments are never lost but to a partition).
        let config = KernelConfig { retx_threshold: u32::MAX, retx_max: u32::MAX, ..KernelConfig::default() };
        let mut net = turmoil_net::Net::with_config(config);
        let mut known = BTreeMap::new();
        for host in hosts {
            let id = net.add_host(host.as_str());
            known.insert(host.clone(), (id, net.lookup(host)));
        }
        let rule = Arc::new(Mutex::new(RuleState {
            rng: Rng::new(seed ^ 0x4E37),
            cut: BTreeSet::new(),
            last_due: BTreeMap::new(),
        }));
        net.rule(Wiring(rule.clone()));
        let scheduled = Arc::new(Notify::new());
        let fabric = Fabric {
            guard: net.enter(),
            due: BTreeMap::new(),
            sent: 0,
            egress: Vec::with_capacity(64),
            scheduled: scheduled.clone(),
        };
        FABRIC.with(|slot| *slot.borrow_mut() = Some(fabric));
        tokio::spawn(carry(scheduled));
        Net(Arc::new(Mutex::new(Wires { hosts: known, ports: BTreeMap::new(), rule })))
    }

    fn lock(&self) -> MutexGuard<'_, Wires> {
        lock(&self.0)
    }

    fn host(&self, name: &str) -> (HostId, IpAddr) {
        *self.lock().hosts.get(name).unwrap_or_else(|| panic!("host {name} is not on the network"))
    }

    /// `task` as a task of host `host` (its socket calls see that host's sockets).
    pub fn scoped<F: Future>(&self, host: &str, task: F) -> Scoped<F> {
        Scoped::new(self.host(host).0, task)
    }

    /// `host` crashed: the next life listens on a fresh port; until then its last port refuses.
    pub fn crash(&self, host: &str) {
        if let Some(port) = self.lock().ports.get_mut(host) {
            *port += 1;
        }
    }

    /// Hosts `a` and `b` cannot reach each other until `repair`.
    pub fn partition(&self, a: &str, b: &str) {
        let (a, b) = (self.host(a).1, self.host(b).1);
        lock(&self.lock().rule).cut.insert(pair(a, b));
    }

    /// Segments between `a` and `b` flow again (connections that lost one stay silent).
    pub fn repair(&self, a: &str, b: &str) {
        let (a, b) = (self.host(a).1, self.host(b).1);
        lock(&self.lock().rule).cut.remove(&pair(a, b));
    }

    /// Where `host` listens (or last listened).
    fn address(&self, host: &str) -> SocketAddr {
        let ip = self.host(host).1;
        SocketAddr::new(ip, self.lock().ports.get(host).copied().unwrap_or(FIRST_PORT))
    }

    /// The port this life of `host` listens on.
    fn listening_port(&self, host: &str) -> u16 {
        *self.lock().ports.entry(host.to_string()).or_insert(FIRST_PORT)
    }
}

/// A turmoil-net stream read through a buffer initialised once. turmoil-net 0.1.0's `poll_read`
/// zero-fills the caller's whole unfilled buffer on every poll, ready or not (hyper's read buffer
/// is kilobytes), which cost an eighth of a seed's instructions; reading into a scratch buffer
/// that is already initialised skips that, and only the bytes read are copied on.
struct Socket {
    stream: TcpStream,
    scratch: Box<[u8]>,
}

/// Bytes a socket reads at most per poll.
const SCRATCH_BYTES: usize = 8 * 1024;

impl Socket {
    fn new(stream: TcpStream) -> Socket {
        Socket { stream, scratch: vec![0; SCRATCH_BYTES].into_boxed_slice() }
    }
}

impl AsyncRead for Socket {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let room = buf.remaining().min(this.scratch.len());
        let mut scratch = ReadBuf::new(&mut this.scratch[..room]);
        match Pin::new(&mut this.stream).poll_read(cx, &mut scratch) {
            Poll::Ready(Ok(())) => {
                buf.put_slice(scratch.filled());
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl AsyncWrite for Socket {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// Uninstalls the run's network from this thread. Call after the runtime (and so every host
/// task, whose drop closes its sockets) is gone.
pub fn teardown() {
    FABRIC.with(|slot| drop(slot.borrow_mut().take()));
}

/// Every task one life of a replica runs: its server, its connections, its sweeps and its hook
/// calls, each as that host. A crash aborts them all, as a process's death ends its threads.
/// Cheap to clone.
#[derive(Clone)]
pub struct HostTasks {
    host: HostId,
    tasks: Arc<Mutex<JoinSet<()>>>,
}

impl HostTasks {
    /// The tasks of one life of `host` on `net`.
    pub fn of(net: &Net, host: &str) -> HostTasks {
        HostTasks { host: net.host(host).0, tasks: Arc::default() }
    }

    /// Runs `task` as part of this host until it ends or the host crashes.
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let mut tasks = lock(&self.tasks);
        // Forget the tasks that have ended, so a long life does not pile them up.
        while tasks.try_join_next().is_some() {}
        tasks.spawn(Scoped::new(self.host, task));
    }

    /// The host is gone: every task of it stops at its next await, and its sockets close.
    pub fn abort(&self) {
        lock(&self.tasks).abort_all();
    }
}

/// Serves `router` as host `host` until the host crashes: every connection on a task of `tasks`.
pub async fn serve(net: Net, host: String, router: Router, tasks: HostTasks) {
    let port = net.listening_port(&host);
    let listener = match TcpListener::bind(SocketAddr::new(net.host(&host).1, port)).await {
        Ok(listener) => listener,
        Err(error) => panic!("{host} cannot listen on port {port}: {error}"),
    };
    while let Ok((stream, _)) = listener.accept().await {
        let service = hyper_util::service::TowerToHyperService::new(router.clone());
        tasks.spawn(async move {
            // As the production server builds it, with a timer: its header-read timeout ends a
            // connection silenced by a partition. A connection ends in an error when its client
            // goes away; the server carries on.
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .serve_connection(TokioIo::new(Socket::new(stream)), service)
                .await;
        });
    }
}

/// What a request came back with: an HTTP status and a JSON body, or a network failure (the
/// request may or may not have been applied: a lost reply looks the same as a lost request).
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Http(u16, Value),
    Network(String),
}

/// One HTTP request as a simulated client sends it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub bearer: Option<&'a str>,
    pub headers: &'a [(&'a str, String)],
    pub body: Option<&'a Value>,
}

impl Net {
    /// `request` from host `from` on a fresh connection to `host`, given up after `timeout` of
    /// simulated time (the client cancels: the server may still be working on it).
    pub async fn send(&self, from: &str, host: &str, request: Request<'_>, timeout: Duration) -> Reply {
        let exchange = self.scoped(from, self.exchange(from, host, request));
        match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(error)) => Reply::Network(error),
            Err(_) => Reply::Network("timed out".into()),
        }
    }

    async fn exchange(
        &self,
        from: &str,
        host: &str,
        Request { method, path, bearer, headers, body }: Request<'_>,
    ) -> Result<Reply, String> {
        let stream = TcpStream::connect(self.address(host)).await.map_err(|error| match error.kind() {
            std::io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
            _ => error.to_string(),
        })?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(Socket::new(stream)))
            .await
            .map_err(|e| e.to_string())?;
        // The connection task ends when the exchange is over (or waits out a silenced line).
        tokio::spawn(self.scoped(from, async move {
            let _ = connection.await;
        }));
        let payload = body.map(|b| b.to_string()).unwrap_or_default();
        let mut builder = hyper::Request::builder().method(method).uri(path).header("host", host);
        if body.is_some() {
            builder = builder.header("content-type", "application/json");
        }
        if let Some(token) = bearer {
            builder = builder.header("authorization", format!("Bearer {token}"));
        }
        for (name, value) in headers {
            builder = builder.header(*name, value.as_str());
        }
        let request = builder.body(Full::new(Bytes::from(payload))).map_err(|e| e.to_string())?;
        let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let bytes = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
        let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok(Reply::Http(status, value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;
    use serde_json::json;

    const PATIENT: Duration = Duration::from_secs(3);

    fn get_root() -> Request<'static> {
        Request { method: "GET", path: "/", bearer: None, headers: &[], body: None }
    }

    /// One replica `r0` answering `{"ok": true}` at once on `/` and after a second on `/slow`, on
    /// the simulation's runtime.
    fn with_replica(test: impl AsyncFnOnce(Net, HostTasks)) {
        crate::sim_time::runtime(7).block_on(async {
            crate::sim_time::start();
            let net = Net::new(7, &["r0", "a0", "a1"].map(String::from));
            let tasks = HostTasks::of(&net, "r0");
            let ok = || async { axum::Json(json!({"ok": true})) };
            let slow = move || async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                ok().await
            };
            let router = Router::new().route("/", get(ok)).route("/slow", get(slow));
            tasks.spawn(serve(net.clone(), "r0".into(), router, tasks.clone()));
            tokio::task::yield_now().await;
            test(net, tasks).await;
            crate::sim_time::stop();
        });
        teardown();
    }

    #[test]
    fn a_request_is_answered_after_seeded_latencies() {
        with_replica(async |net, _| {
            let sent = tokio::time::Instant::now();
            assert_eq!(net.send("a0", "r0", get_root(), PATIENT).await, Reply::Http(200, json!({"ok": true})));
            // At least the connection set-up, the request and the reply, each 1 to 25 ms.
            let took = sent.elapsed();
            assert!(took >= Duration::from_millis(3 * LATENCY_MS_MIN), "{took:?}");
            assert!(took < Duration::from_secs(1), "{took:?}");
        });
    }

    #[test]
    fn a_partition_is_silence_until_repaired() {
        with_replica(async |net, _| {
            net.partition("a0", "r0");
            assert_eq!(net.send("a0", "r0", get_root(), PATIENT).await, Reply::Network("timed out".into()));
            // Another client still gets through.
            assert!(matches!(net.send("a1", "r0", get_root(), PATIENT).await, Reply::Http(200, _)));
            net.repair("a0", "r0");
            assert!(matches!(net.send("a0", "r0", get_root(), PATIENT).await, Reply::Http(200, _)));
        });
    }

    #[test]
    fn a_crashed_replica_refuses_connections_and_its_tasks_stop() {
        with_replica(async |net, tasks| {
            let (ran, heard) = std::sync::mpsc::channel();
            tasks.spawn(async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let _ = ran.send(());
            });
            tasks.abort();
            net.crash("r0");
            let reply = net.send("a0", "r0", get_root(), PATIENT).await;
            assert_eq!(reply, Reply::Network("connection refused".into()));
            tokio::time::sleep(Duration::from_secs(2)).await;
            assert!(heard.try_recv().is_err(), "a task of the crashed replica ran on");
        });
    }

    #[test]
    fn a_partition_silences_a_connection_already_open() {
        with_replica(async |net, _| {
            let cut = net.clone();
            let slow = Request { path: "/slow", ..get_root() };
            let request = tokio::spawn(async move { net.send("a0", "r0", slow, PATIENT).await });
            // Connected and the request delivered (two latencies at most), the reply not yet sent.
            tokio::time::sleep(Duration::from_millis(2 * LATENCY_MS_MAX + 1)).await;
            cut.partition("a0", "r0");
            assert_eq!(request.await.ok(), Some(Reply::Network("timed out".into())));
        });
    }
}
