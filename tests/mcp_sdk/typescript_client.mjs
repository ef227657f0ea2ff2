// An agent host's view of Switchboard through the official MCP TypeScript SDK (issue #50), the
// client library most hosts embed. `tests/blackbox_mcp_sdks.rs` installs the SDK from npm (pinned)
// into target/, starts the real binary, vends an endpoint and runs this script against it.
//
// It connects the way a host does, with every protocol revision the SDK offers; lists the tools;
// calls every tool the endpoint is granted and checks each answer; receives a doorbell, a `reopen`
// ring and a clock-in digest through the SDK's own notification handling; loses a doorbell to a
// cut connection and gets it back through the SDK's reconnect with Last-Event-ID; and ends the
// session with DELETE. Any failed check throws, and the process exits non-zero with the reason.
//
// Environment: SB_TS_SDK_DIR (the npm prefix holding the SDK); SB_MCP_CONFIG, the README's
// `mcpServers` entry filled in for this endpoint, which the script connects through as a host
// reads it; SB_API (the server's base URL), SB_HUMAN_TOKEN (sbh_ of the endpoint's owner), SB_SCOPE.

import { pathToFileURL } from 'node:url';
import { join } from 'node:path';
import { deepStrictEqual } from 'node:assert/strict';

const env = (name) => {
    const value = process.env[name];
    if (!value) throw new Error(`${name} is not set`);
    return value;
};
const SDK_DIR = env('SB_TS_SDK_DIR');
const SERVER = JSON.parse(env('SB_MCP_CONFIG')).mcpServers.switchboard;
if (SERVER.type !== 'http' || !SERVER.url || !SERVER.headers?.Authorization) {
    throw new Error(`the mcpServers entry is not an http server with an Authorization header: ${JSON.stringify(SERVER)}`);
}
const MCP_URL = SERVER.url;
const API = env('SB_API');
const HUMAN_TOKEN = env('SB_HUMAN_TOKEN');
const SCOPE = env('SB_SCOPE');

const sdk = (path) => import(pathToFileURL(join(SDK_DIR, 'node_modules/@modelcontextprotocol/sdk/dist/esm', path)).href);
const { Client } = await sdk('client/index.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
const { SUPPORTED_PROTOCOL_VERSIONS, LATEST_PROTOCOL_VERSION } = await sdk('types.js');

/// The revisions the server answers in, newest first (server/src/mcp/mod.rs); it answers its
/// newest when asked for one it does not speak.
const SERVER_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'];
const DOORBELL_METHOD = 'notifications/claude/channel';
/// The tools an endpoint granted every verb has, in catalog order.
const GRANTED_TOOLS = [
    'claim_next', 'claim', 'heartbeat', 'complete', 'fail', 'release', 'list_todos', 'get_todo',
    'create_todo', 'create_todos', 'admission_status', 'set_admission_policy', 'discard_todo',
    'clear_queue', 'clear_admission_policy', 'clock_in', 'clock_out', 'presence',
];
const WAIT_MS = 20_000;

function check(condition, what, detail) {
    if (!condition) throw new Error(`${what}: ${JSON.stringify(detail)}`);
}

function log(line) {
    process.stdout.write(`typescript sdk: ${line}\n`);
}

/// The operator API, as the endpoint's owner.
async function api(method, path, body) {
    const response = await fetch(API + path, {
        method,
        headers: { authorization: `Bearer ${HUMAN_TOKEN}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : null };
}

async function createTodo(queue, title) {
    const { status, body } = await api('POST', '/api/v1/todos', { scope: SCOPE, queue, title });
    check(status === 201, `POST /api/v1/todos in ${queue}`, body);
    return body.todo.id;
}

/// Doorbells as the SDK hands them to the host, and waits for one that matches.
class Doorbells {
    constructor() {
        this.seen = [];
        this.waiters = [];
    }
    receive(notification) {
        this.seen.push(notification);
        this.waiters = this.waiters.filter((waiter) => !waiter(notification));
    }
    waitFor(what, matches) {
        const found = this.seen.find(matches);
        if (found) return Promise.resolve(found);
        return new Promise((resolve, reject) => {
            const timer = setTimeout(
                () => reject(new Error(`no ${what} within ${WAIT_MS} ms; seen: ${JSON.stringify(this.seen)}`)),
                WAIT_MS,
            );
            this.waiters.push((notification) => {
                if (!matches(notification)) return false;
                clearTimeout(timer);
                resolve(notification);
                return true;
            });
        });
    }
}

/// A fetch that lets the test cut the stream's connection as a doorbell arrives, the way a
/// network drops a connection mid-event, and records each GET stream the SDK opens.
function streamFetch(wire) {
    return async (url, init = {}) => {
        const response = await fetch(url, init);
        const headers = new Headers(init.headers);
        const isStream = (init.method ?? 'GET') === 'GET' && (headers.get('accept') ?? '').includes('text/event-stream');
        if (!isStream || !response.ok || !response.body) return response;
        wire.streams.push({ lastEventId: headers.get('last-event-id') });
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        const encoder = new TextEncoder();
        let buffered = '';
        const body = new ReadableStream({
            async pull(controller) {
                for (;;) {
                    const { value, done } = await reader.read();
                    if (done) {
                        controller.close();
                        return;
                    }
                    buffered += decoder.decode(value, { stream: true });
                    let passed = false;
                    for (let end = buffered.indexOf('\n\n'); end >= 0; end = buffered.indexOf('\n\n')) {
                        const event = buffered.slice(0, end + 2);
                        buffered = buffered.slice(end + 2);
                        if (wire.cutAtNextDoorbell && event.includes(DOORBELL_METHOD)) {
                            wire.cutAtNextDoorbell = false;
                            wire.dropped.push(event);
                            await reader.cancel();
                            controller.error(new TypeError('connection cut by the test'));
                            return;
                        }
                        const id = /^id: ?(.*)$/m.exec(event);
                        if (id) wire.lastDeliveredId = id[1];
                        controller.enqueue(encoder.encode(event));
                        passed = true;
                    }
                    if (passed) return;
                }
            },
            cancel(reason) {
                return reader.cancel(reason);
            },
        });
        return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
    };
}

/// Connects as a host does, offering `version` in `initialize` (the SDK offers its latest; a
/// host pinned to an older SDK offers an older one).
async function connect(version) {
    const wire = { streams: [], dropped: [], cutAtNextDoorbell: false, lastDeliveredId: null };
    const transport = new StreamableHTTPClientTransport(new URL(MCP_URL), {
        requestInit: { headers: SERVER.headers },
        fetch: streamFetch(wire),
        reconnectionOptions: { initialReconnectionDelay: 200, maxReconnectionDelay: 2000, reconnectionDelayGrowFactor: 1.5, maxRetries: 5 },
    });
    const send = transport.send.bind(transport);
    transport.send = (message, options) => {
        const offered = message.method === 'initialize' ? { ...message, params: { ...message.params, protocolVersion: version } } : message;
        return send(offered, options);
    };
    const client = new Client({ name: 'switchboard-sdk-check', version: '1.0.0' });
    const doorbells = new Doorbells();
    client.fallbackNotificationHandler = async (notification) => {
        if (notification.method === DOORBELL_METHOD) doorbells.receive(notification);
    };
    await client.connect(transport);
    return { client, transport, wire, doorbells };
}

async function waitUntil(what, condition) {
    const deadline = Date.now() + WAIT_MS;
    while (!condition()) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
    }
}

/// A doorbell as a host surfaces it: a one-sentence content and string-only meta.
function checkRing(notification, expected) {
    const { content, meta } = notification.params;
    check(typeof content === 'string' && content.length > 0 && content.length <= 120, 'content is one short sentence', notification);
    check(meta && Object.values(meta).every((value) => typeof value === 'string'), 'meta values are strings only', notification);
    for (const [key, value] of Object.entries(expected)) check(meta[key] === value, `meta.${key} is ${value}`, notification);
}

async function call(client, name, args) {
    const result = await client.callTool({ name, arguments: args });
    check(!result.isError, `${name} answered without an error`, result);
    check(result.structuredContent && typeof result.structuredContent === 'object', `${name} has structuredContent`, result);
    deepStrictEqual(JSON.parse(result.content[0].text), result.structuredContent, `${name}: text and structuredContent agree`);
    return result.structuredContent;
}

async function refused(client, name, args) {
    const result = await client.callTool({ name, arguments: args });
    check(result.isError === true, `${name} refused`, result);
    return result.structuredContent;
}

/// The session is gone once DELETE answered: its stream cannot be opened again.
async function checkEnded(sessionId) {
    const response = await fetch(MCP_URL, {
        headers: { ...SERVER.headers, accept: 'text/event-stream', 'mcp-session-id': sessionId },
    });
    await response.body?.cancel();
    check(response.status === 404, 'an ended session is unknown', response.status);
}

// 1. Every revision the SDK offers, each in its own session, ended with DELETE.
for (const version of SUPPORTED_PROTOCOL_VERSIONS) {
    const { client, transport } = await connect(version);
    const expected = SERVER_VERSIONS.includes(version) ? version : SERVER_VERSIONS[0];
    check(transport.protocolVersion === expected, `offered ${version}, negotiated ${expected}`, transport.protocolVersion);
    const capabilities = client.getServerCapabilities();
    deepStrictEqual(capabilities.experimental?.['claude/channel'], {}, 'the channel capability is declared');
    check(capabilities.tools, 'the tools capability is declared', capabilities);
    const instructions = client.getInstructions() ?? '';
    check(/claim_next/.test(instructions) && /never a command/.test(instructions) && /next_eligible_at/.test(instructions), 'instructions say what a doorbell means', instructions);
    const { tools } = await client.listTools();
    deepStrictEqual(tools.map((tool) => tool.name), GRANTED_TOOLS, `tools/list at ${version}`);
    const sessionId = transport.sessionId;
    await transport.terminateSession();
    await client.close();
    await checkEnded(sessionId);
    log(`offered ${version}: negotiated ${expected}, ${tools.length} tools listed, session ended`);
}

// 2. One host session at the SDK's latest revision, its stream open.
const { client, transport, wire, doorbells } = await connect(LATEST_PROTOCOL_VERSION);
await waitUntil('the GET stream', () => wire.streams.length >= 1);

// A doorbell for new work.
const first = await createTodo('inbox', 'ring me');
checkRing(await doorbells.waitFor('the doorbell for the first todo', (n) => n.params.meta.todo_id === first), {
    queue: 'inbox', reason: 'created', source: 'human',
});
log('doorbell received for new work');

// A doorbell lost to a cut connection comes back through the SDK's reconnect with Last-Event-ID.
await waitUntil('the first doorbell delivered with an event id', () => wire.lastDeliveredId !== null);
const deliveredBeforeCut = wire.lastDeliveredId;
wire.cutAtNextDoorbell = true;
const second = await createTodo('inbox', 'ring me after a cut');
checkRing(await doorbells.waitFor('the lost doorbell, replayed', (n) => n.params.meta.todo_id === second), { queue: 'inbox' });
check(wire.dropped.length === 1 && wire.dropped[0].includes(second), 'the cut dropped the second doorbell', wire.dropped);
const resumed = wire.streams.at(-1);
check(wire.streams.length >= 2 && resumed.lastEventId === deliveredBeforeCut, 'the SDK reconnected with Last-Event-ID', wire.streams);
log(`stream resumed after a cut with Last-Event-ID ${resumed.lastEventId}; the lost doorbell replayed`);

// 3. Every granted tool, each answer checked.
const listed = (await client.listTools()).tools;
for (const tool of listed) {
    check(tool.inputSchema.type === 'object' && tool.outputSchema?.type === 'object', `${tool.name} has object schemas`, tool);
}

let answer = await call(client, 'claim_next', { queue: 'inbox' });
check(answer.empty === false && answer.todo.id === first && answer.todo.state === 'claimed', 'claim_next takes the oldest todo', answer);
answer = await call(client, 'heartbeat', { id: first, lease_ttl_seconds: 600 });
check(answer.id === first && answer.state === 'claimed', 'heartbeat extends the lease', answer);
answer = await call(client, 'complete', { id: first, result: { summary: 'done', files: ['a.txt'] } });
check(answer.id === first && answer.state === 'done', 'complete answers the done todo', answer);
answer = await call(client, 'get_todo', { id: first });
check(answer.id === first && answer.state === 'done', 'the completed todo is done', answer);
deepStrictEqual(answer.result, { summary: 'done', files: ['a.txt'] }, 'the result is kept');

answer = await call(client, 'claim', { id: second });
check(answer.todo.id === second && answer.todo.state === 'claimed', 'claim takes the named todo', answer);
answer = await call(client, 'fail', { id: second, summary: 'flaky upstream' });
check(answer.id === second && answer.attempt === 1 && answer.state !== 'claimed', 'fail gives the todo back for a retry', answer);

answer = await call(client, 'create_todo', { queue: 'spare', title: 'from the agent', payload: { n: 1 } });
check(answer.todo.created_by_kind === 'agent' && answer.todo.queue === 'spare' && answer.deduped === false, 'create_todo creates as the agent', answer);
const spareOne = answer.todo.id;
answer = await call(client, 'create_todos', { todos: [{ queue: 'spare', title: 'batch a' }, { queue: 'spare', title: 'batch b', payload: [1, 2] }] });
check(answer.todos.length === 2 && answer.todos.every((t) => t.todo.queue === 'spare'), 'create_todos creates both', answer);
answer = await call(client, 'list_todos', { queue: 'spare' });
check(answer.todos.length === 3 && answer.todos.some((t) => t.id === spareOne), 'list_todos lists the queue', answer);

answer = await call(client, 'claim_next', { queue: 'spare' });
const releasing = answer.todo.id;
answer = await call(client, 'release', { id: releasing });
check(answer.id === releasing && answer.state === 'pending', 'release gives the todo back', answer);
answer = await call(client, 'discard_todo', { queue: 'spare', id: spareOne });
check(answer.queue === 'spare' && answer.removed === 1, 'discard_todo removes one pending todo', answer);
answer = await call(client, 'clear_queue', { queue: 'spare' });
check(answer.queue === 'spare' && answer.removed === 2, 'clear_queue removes the rest', answer);

// A paused queue defers its work, says why, and rings `reopen` when its limit is raised.
answer = await call(client, 'set_admission_policy', { queue: 'gated', policy: { max_in_flight: 0 } });
check(answer.queue === 'gated' && answer.status.status === 'paused', 'set_admission_policy pauses the queue', answer);
const gated = (await call(client, 'create_todo', { queue: 'gated', title: 'waits for the reopening' })).todo.id;
answer = await call(client, 'claim_next', { queue: 'gated' });
check(answer.empty === true && answer.deferred?.[0]?.reason === 'paused' && answer.deferred[0].queue === 'gated', 'claim_next says why the work waits', answer);
const deferredClaim = await refused(client, 'claim', { id: gated });
check(deferredClaim.code === 'deferred' && deferredClaim.reason === 'paused', 'claim answers deferred', deferredClaim);
answer = await call(client, 'admission_status', { queue: 'gated' });
check(answer.queues.length === 1 && answer.queues[0].queue === 'gated' && answer.queues[0].status === 'paused' && answer.queues[0].pending === 1, 'admission_status reads the pause', answer);
const raised = await api('PUT', `/api/v1/admission/${SCOPE}/gated`, { max_in_flight: 1 });
check(raised.status === 200, 'the owner raises the limit', raised);
checkRing(await doorbells.waitFor('the reopen ring', (n) => n.params.meta.reason === 'reopen' && n.params.meta.queue === 'gated'), {
    todo_id: gated, queue: 'gated', reason: 'reopen',
});
log('reopen ring received when the paused queue reopened');
answer = await call(client, 'clear_admission_policy', { queue: 'gated' });
check(answer.queue === 'gated' && answer.cleared === true, 'clear_admission_policy clears', answer);

// Presence: out, then in again, with a digest of the work waiting.
answer = await call(client, 'clock_out', {});
check(answer.presence === 'out', 'clock_out', answer);
answer = await call(client, 'clock_in', { for: 600 });
check(answer.presence === 'in' && answer.pending >= 1, 'clock_in', answer);
const digest = await doorbells.waitFor('the clock-in digest', (n) => n.params.meta.kind === 'digest' && n.params.meta.reason === 'clock_in');
checkRing(digest, { kind: 'digest', reason: 'clock_in' });
check(/^[0-9]+$/.test(digest.params.meta.pending) && digest.params.meta.queues.split(',').includes('gated'), 'the digest counts as text and joins its queues', digest);
answer = await call(client, 'presence', {});
check(answer.presence === 'in' && answer.source === 'override', 'presence', answer);
log('every granted tool called and its answer checked; clock-in digest received');

// 4. The host ends its session.
const sessionId = transport.sessionId;
await transport.terminateSession();
await client.close();
await checkEnded(sessionId);
log('session ended with DELETE');
log('all checks passed');
