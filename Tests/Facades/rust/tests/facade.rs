//! The Rust facade test (scripts/facades/test-facades, `cargo test --offline`): the page's Rust recipes
//! (rendered verbatim from Schema/ by the script into SOFTCHAT_RUST_RECIPES) against the real
//! Swift core, fed the recorded relay conversation (Tests/Facades/conversation.json), checking
//! actions, delivery decisions and error codes as the Kotlin and TypeScript tests do.
//! Stand-ins: a socket that records frames, an in-memory database, a logger.

use softchat::json::Json;
use softchat::*;
use std::cell::OnceCell;
use std::collections::HashMap;
use std::ops::Deref;
use std::rc::Rc;

// MARK: the conversation

fn conversation() -> Json {
    let path = std::env::var("SOFTCHAT_CONVERSATION").expect("SOFTCHAT_CONVERSATION names Tests/Facades/conversation.json");
    Json::parse(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn at<'a>(value: &'a Json, path: &[&str]) -> &'a Json {
    path.iter().fold(value, |v, key| v.get(key).unwrap_or_else(|| panic!("no {key} in the conversation")))
}

fn text(value: &Json) -> String {
    match value {
        Json::String(s) => s.clone(),
        other => panic!("expected a string, found {}", other.write()),
    }
}

fn int(value: &Json) -> i64 {
    match value {
        Json::Number(n) => n.parse().unwrap(),
        other => panic!("expected a number, found {}", other.write()),
    }
}

fn items(value: &Json) -> &[Json] {
    match value {
        Json::Array(items) => items,
        other => panic!("expected an array, found {}", other.write()),
    }
}

fn texts(value: &Json) -> Vec<String> {
    items(value).iter().map(text).collect()
}

/// A NIP-01 event object of the conversation, verified by the core.
fn event(value: &Json) -> VerifiedEvent {
    SignedNostrEvent::parse(&value.write()).expect("the conversation's events verify")
}

fn kinds(actions: &[RelaySessionAction]) -> Vec<String> {
    actions.iter().map(|a| a.kind.as_str().to_owned()).collect()
}

fn triple(d: &DeliveryDecision) -> Vec<String> {
    vec![d.event_id.clone(), d.state.as_str().to_owned(), d.category.as_str().to_owned()]
}

fn code<T>(result: Result<T, SoftchatError>) -> String {
    match result {
        Ok(_) => "no error".to_owned(),
        Err(e) => e.code.as_str().to_owned(),
    }
}

// MARK: stand-ins for the app's own names

/// A WebSocket stand-in: records what the recipes open and send.
#[derive(Default)]
pub struct Socket {
    pub opened: Vec<RelaySessionAction>,
    pub sent: Vec<String>,
}

impl Socket {
    pub fn open(&mut self, actions: Vec<RelaySessionAction>) {
        self.opened.extend(actions);
    }

    pub fn send(&mut self, frame: &str) -> Result<(), SoftchatError> {
        self.sent.push(frame.to_owned());
        Ok(())
    }
}

/// What a transaction ingests: one event (the session recipe) or a batch (the ingestion recipe).
pub trait Ingest {
    fn into_events(self) -> Vec<VerifiedEvent>;
}

impl Ingest for VerifiedEvent {
    fn into_events(self) -> Vec<VerifiedEvent> {
        vec![self]
    }
}

impl Ingest for &[VerifiedEvent] {
    fn into_events(self) -> Vec<VerifiedEvent> {
        self.to_vec()
    }
}

pub struct Transaction {
    accepted: Vec<String>,
    already_present: Vec<String>,
    writes: Vec<VerifiedEvent>,
    stored: Vec<String>,
}

impl Transaction {
    pub fn ingest(&mut self, events: impl Ingest) -> Result<(), SoftchatError> {
        for e in events.into_events() {
            let id = e.id.to_hex();
            if self.stored.contains(&id) || self.accepted.contains(&id) {
                self.already_present.push(id);
            } else {
                self.accepted.push(id);
                self.writes.push(e);
            }
        }
        Ok(())
    }
}

/// The host's database: a transaction commits its events and reports the IngestionResult the
/// recipe then validates (through the `result` stand-in it shares).
#[derive(Default)]
pub struct Database {
    pub stored: HashMap<String, VerifiedEvent>,
    pub intents: Vec<VerifiedEvent>,
    result: Rc<OnceCell<IngestionResult>>,
}

impl Database {
    /// The result of the next transaction, for the recipe's `result`.
    pub fn next_result(&mut self) -> SharedResult {
        self.result = Rc::new(OnceCell::new());
        SharedResult(self.result.clone())
    }

    pub fn transaction(&mut self, body: impl FnOnce(&mut Transaction) -> Result<(), SoftchatError>) -> Result<(), SoftchatError> {
        let mut tx = Transaction { accepted: vec![], already_present: vec![], writes: vec![], stored: self.stored.keys().cloned().collect() };
        body(&mut tx)?;
        for e in tx.writes {
            self.stored.insert(e.id.to_hex(), e);
        }
        let _ = self.result.set(IngestionResult { accepted: tx.accepted, already_present: tx.already_present, rejected: vec![] });
        Ok(())
    }

    pub fn persist_publish_intent(&mut self, event: &VerifiedEvent) -> Result<(), SoftchatError> {
        self.intents.push(event.clone());
        Ok(())
    }
}

/// The IngestionResult the database's transaction reported.
pub struct SharedResult(Rc<OnceCell<IngestionResult>>);

impl Deref for SharedResult {
    type Target = IngestionResult;
    fn deref(&self) -> &IngestionResult {
        self.0.get().expect("the transaction ran before the result is read")
    }
}

pub struct Harness {
    pub session: RelaySession,
    pub identity: SoftchatIdentity,
    pub socket: Socket,
    pub database: Database,
    pub recipient: PublicKey,
    pub challenge: String,
    pub created_at: i64,
    pub frame_json: String,
    pub response_json: String,
    pub batch: IngestionBatch,
    pub event: VerifiedEvent,
    pub logged: Vec<RelaySessionSnapshot>,
    pub recovered: Vec<RelaySessionAction>,
    pub request: Option<String>,
    pub checked_request: Option<ClientRelayFrame>,
    pub checked_response: Option<RelayResponseFrame>,
    pub auth: Option<VerifiedEvent>,
}

mod recipes {
    #![allow(unused_variables, unused_mut, clippy::all)]
    use super::*;
    include!(env!("SOFTCHAT_RUST_RECIPES"));
}

/// The ```rust samples of docs/guides, compiled against the crate (test-install runs them) as the bodies of
/// functions whose parameters stand in for the app's values.
mod guide_samples {
    #![allow(dead_code, unused_variables, unused_mut, unused_imports, unreachable_code, clippy::all)]
    use softchat::*;
    include!(env!("SOFTCHAT_RUST_GUIDE_SAMPLES"));
}

// MARK: the conversation, through the recipes

#[test]
fn the_pages_rust_recipes_over_the_recorded_conversation() {
    let c = conversation();
    let expected = at(&c, &["expected"]);
    let published: Vec<VerifiedEvent> = items(at(&c, &["published"])).iter().map(event).collect();
    let mut h = Harness {
        session: RelaySession::new(),
        identity: SoftchatIdentity::generate(),
        socket: Socket::default(),
        database: Database::default(),
        recipient: PublicKey::from_hex(&text(at(&c, &["alice", "pubkey"]))).unwrap(),
        challenge: text(at(&c, &["challenge"])),
        created_at: int(at(&c, &["createdAt"])),
        frame_json: text(at(&c, &["sessionFrame"])),
        response_json: text(at(&c, &["sessionFrame"])),
        batch: IngestionBatch { events: vec![] },
        event: published[0].clone(),
        logged: vec![],
        recovered: vec![],
        request: None,
        checked_request: None,
        checked_response: None,
        auth: None,
    };

    // relay.session: connect, the relay's AUTH challenge.
    recipes::recipe_relay_session(&mut h).unwrap();
    let session_kinds = texts(at(expected, &["sessionRecipeActions"]));
    assert_eq!(kinds(&h.socket.opened), session_kinds[..1]);
    let mut probe = RelaySession::new();
    let mut seen = probe.connect().unwrap();
    probe.transport_connected().unwrap();
    seen.extend(probe.receive(&h.frame_json).unwrap());
    assert_eq!(kinds(&seen), session_kinds);
    let last = seen.last().unwrap();
    assert_eq!(last.challenge.as_deref(), Some(h.challenge.as_str()));

    // relay.wire: the REQ frame built in Rust is the one the core's session writes.
    recipes::recipe_relay_wire(&mut h).unwrap();
    let frames = texts(at(expected, &["wireRecipeFrames"]));
    assert_eq!(h.request.as_deref(), Some(frames[0].as_str()));
    match h.checked_request.as_ref().unwrap() {
        ClientRelayFrame::Req { subscription_id, filters } => {
            assert_eq!(subscription_id, "chat");
            assert_eq!(filters.len(), 1);
        }
        other => panic!("not a REQ: {other:?}"),
    }
    assert_eq!(h.checked_response, Some(RelayResponseFrame::Auth { challenge: h.challenge.clone() }));
    let auth = h.auth.clone().unwrap();
    assert_eq!(auth.kind, 22242);
    assert_eq!(auth.tags, vec![vec!["relay".to_owned(), "wss://relay.example".to_owned()], vec!["challenge".to_owned(), h.challenge.clone()]]);
    let filter = format!(r##"{{"kinds":[14],"#p":["{}"],"limit":100}}"##, h.recipient.to_hex());
    h.session.subscribe("chat", [filter]).unwrap();
    for outbound in h.session.drain_outbound(256).unwrap() {
        h.socket.send(&outbound.frame).unwrap();
        h.session.confirm_sent(&outbound.delivery_event_ids).unwrap();
    }
    assert_eq!(h.socket.sent, frames);

    // The subscription's frames, then relay.ingestion.
    let mut subscription_kinds = vec![];
    let mut persisted = vec![];
    for frame in texts(at(&c, &["subscriptionFrames"])) {
        let actions = h.session.receive(&frame).unwrap();
        subscription_kinds.push(kinds(&actions));
        // Each action is the same value as an enum with data, and back.
        for a in &actions {
            let variant = a.clone().into_variant().expect("the library's actions carry their variant's fields");
            if let RelaySessionActionVariant::PersistEvent { event, .. } = &variant {
                assert_eq!(Some(event), a.event.as_ref());
            }
            assert_eq!(RelaySessionAction::from(variant), *a);
        }
        persisted.extend(actions.into_iter().filter(|a| a.kind == RelaySessionActionKind::PersistEvent).filter_map(|a| a.event));
    }
    let expected_kinds: Vec<Vec<String>> = items(at(expected, &["subscriptionActions"])).iter().map(texts).collect();
    assert_eq!(subscription_kinds, expected_kinds);
    assert_eq!(h.session.snapshot().awaiting_persistence, 2);
    h.batch = IngestionBatch { events: persisted };
    recipes::recipe_relay_ingestion(&mut h).unwrap();
    let mut ingested: Vec<String> = h.database.stored.keys().cloned().collect();
    ingested.sort();
    let mut expected_ingested = texts(at(expected, &["ingested"]));
    expected_ingested.sort();
    assert_eq!(ingested, expected_ingested);
    assert_eq!(h.session.snapshot().awaiting_persistence, 0);

    // relay.publish per event, with the relays' acknowledgements.
    let acknowledgements = at(&c, &["acknowledgements"]);
    let mut attempts: HashMap<String, usize> = HashMap::new();
    let order = |id: &str| published.iter().position(|e| e.id.as_str() == id).unwrap();
    for run in 0..3 {
        let start = h.socket.sent.len();
        h.event = published[run].clone();
        recipes::recipe_relay_publish(&mut h).unwrap();
        if run == 2 {
            // The retryable event of run 2 is published again beside the third.
            h.session.publish(vec![published[1].clone()]).unwrap();
            for outbound in h.session.drain_outbound(256).unwrap() {
                h.socket.send(&outbound.frame).unwrap();
                h.session.confirm_sent(&outbound.delivery_event_ids).unwrap();
            }
        }
        let mut decisions: Vec<DeliveryDecision> = vec![];
        for sent in h.socket.sent[start..].to_vec() {
            let written = match parse_client_relay_frame(&sent).unwrap() {
                ClientRelayFrame::Event { event } => vec![event],
                ClientRelayFrame::Events { events } => events,
                other => panic!("not a publish frame: {other:?}"),
            };
            for e in written {
                let n = attempts.entry(e.id.to_hex()).or_insert(0);
                let ack = text(&items(at(acknowledgements, &[e.id.as_str()]))[*n]);
                *n += 1;
                let classified = classify_delivery_acknowledgement(&parse_relay_response_frame(&ack).unwrap()).unwrap();
                for a in h.session.receive(&ack).unwrap() {
                    if a.kind != RelaySessionActionKind::DeliveryChanged {
                        continue;
                    }
                    let decision = a.decision.unwrap();
                    assert_eq!(decision, classified);
                    decisions.push(decision);
                }
            }
        }
        decisions.sort_by_key(|d| order(&d.event_id));
        let want: Vec<Vec<String>> = items(&items(at(expected, &["publishRuns"]))[run])
            .iter()
            .map(|d| vec![text(at(d, &["eventId"])), text(at(d, &["state"])), text(at(d, &["category"]))])
            .collect();
        assert_eq!(decisions.iter().map(triple).collect::<Vec<_>>(), want, "publish run {run}");
    }
    assert_eq!(h.database.intents.len(), 3);
    assert_eq!(h.session.snapshot().pending_publishes, 0);

    // relay.recovery: the transport lost with an event in flight.
    h.session.publish(vec![published[3].clone()]).unwrap();
    for outbound in h.session.drain_outbound(256).unwrap() {
        h.socket.send(&outbound.frame).unwrap();
        h.session.confirm_sent(&outbound.delivery_event_ids).unwrap();
    }
    recipes::recipe_relay_recovery(&mut h).unwrap();
    assert_eq!(kinds(&h.recovered), texts(at(expected, &["recoveryActions"])));
    let d = at(expected, &["recoveryDecision"]);
    assert_eq!(
        triple(h.recovered[0].decision.as_ref().unwrap()),
        vec![text(at(d, &["eventId"])), text(at(d, &["state"])), text(at(d, &["category"]))]
    );
    assert_eq!(h.recovered[1].attempt, Some(1));
    assert_eq!(h.logged[0].reconnect_attempt, 1);

    // Error codes from the schema's catalog.
    let errors = at(expected, &["errors"]);
    let unnamed_ok = parse_relay_response_frame(&text(at(errors, &["unnamedOk", "frame"]))).unwrap();
    assert_eq!(code(classify_delivery_acknowledgement(&unnamed_ok)), text(at(errors, &["unnamedOk", "code"])));
    assert_eq!(code(h.session.receive(&h.frame_json)), text(at(errors, &["afterClose"])), "receive while the transport is lost");
    let mut probe = RelaySession::new();
    probe.connect().unwrap();
    probe.transport_connected().unwrap();
    assert_eq!(code(probe.receive(&text(at(errors, &["badOkId", "frame"])))), text(at(errors, &["badOkId", "code"])));
    let max = contracts::relay_wire::MAX_FILTERS.value as usize;
    assert_eq!(code(probe.subscribe("many", vec![r#"{"kinds":[1]}"#; max + 1])), text(at(errors, &["tooManyFilters"])));
    probe.subscribe("many", vec![r#"{"kinds":[1]}"#; max]).unwrap();
    assert!(probe.snapshot().subscription_ids.contains(&"many".to_owned()));
    assert_eq!(code(h.identity.create_nip42_authentication("", "wss://relay.example", 1)), text(at(errors, &["emptyChallenge"])));
    let events = h.batch.events.clone();
    let partial = IngestionResult { accepted: vec![events[0].id.to_hex()], already_present: vec![], rejected: vec![] };
    assert_eq!(code(validate_ingestion_result(&h.batch, &partial)), text(at(errors, &["incompleteIngestionResult"])));
    let total = IngestionResult { accepted: events.iter().map(|e| e.id.to_hex()).collect(), already_present: vec![], rejected: vec![] };
    validate_ingestion_result(&h.batch, &total).unwrap();
    let mut closed = RelaySession::new();
    assert_eq!(code(closed.cancel()), "invalid_relay_session", "cancel while idle");
    closed.connect().unwrap();
    closed.cancel().unwrap();
    closed.close().unwrap();
    assert_eq!(code(closed.connect()), text(at(errors, &["afterClose"])));
    assert_eq!(closed.snapshot().state, "closed");
    let filter = RelayFilter::from_json(&format!(r##"{{"kinds":[14],"#p":["{}"]}}"##, text(at(&c, &["alice", "pubkey"])))).unwrap();
    assert!(filter.matches(&events[0]));
    assert!(!filter.matches(&published[0]));
    let config = RelaySessionConfig {
        supports_events_batch: true,
        reconnect_base_delay_seconds: 0,
        reconnect_max_delay_seconds: 1,
        reconnect_reset_after_seconds: 1,
        jitter_seed: 0,
        since_overlap_seconds: 0,
        correlate_unnamed_acknowledgements: false,
        relay_url: None,
        max_message_bytes: None,
        acknowledgement_timeout_seconds: 10,
        authentication_wait_seconds: 5,
        authentication_window_seconds: 600,
        answers_authentication: true,
    };
    assert_eq!(code(RelaySession::new_with_config(&config)), "invalid_relay_session");
}

// MARK: the crate's own promises

#[test]
fn enum_values_and_error_codes_come_from_the_schema() {
    let path = std::env::var("SOFTCHAT_NAMES").expect("SOFTCHAT_NAMES");
    let names = Json::parse(&std::fs::read_to_string(path).unwrap()).unwrap();
    let values = |all: Vec<&str>| all.into_iter().map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(values(DeliveryState::ALL.iter().map(|c| c.as_str()).collect()), texts(at(&names, &["enumValues", "DeliveryState"])));
    assert_eq!(values(DeliveryCategory::ALL.iter().map(|c| c.as_str()).collect()), texts(at(&names, &["enumValues", "DeliveryCategory"])));
    assert_eq!(
        values(RelaySessionActionKind::ALL.iter().map(|c| c.as_str()).collect()),
        texts(at(&names, &["enumValues", "RelaySessionActionKind"]))
    );
    assert_eq!(values(SoftchatErrorCode::ALL.iter().map(|c| c.as_str()).collect()), texts(at(&names, &["errorCodes"])));
}

#[test]
fn an_error_code_the_crate_does_not_know_is_kept() {
    let code = SoftchatErrorCode::from_code("relay_on_fire");
    assert!(!code.is_known());
    assert_eq!(code.as_str(), "relay_on_fire");
    assert_eq!(code.retry_rule(), SoftchatRetryRule::Permanent);
    assert!(SoftchatErrorCode::from_code("invalid_relay_frame") == SoftchatErrorCode::INVALID_RELAY_FRAME);
}

#[test]
fn a_client_frame_over_its_bound_is_refused_by_the_core() {
    let identity = SoftchatIdentity::generate();
    let draft = UnsignedEvent { pubkey: None, created_at: 1_700_000_000, kind: 1, tags: vec![], content: "x".into() };
    let signed = identity.sign(&draft).unwrap();
    let batch = ClientRelayFrame::Events { events: vec![signed.clone(); 2] };
    // Two copies of one id: an EVENTS batch needs unique ids.
    assert_eq!(code(batch.to_json()), "invalid_relay_batch");
    let one = ClientRelayFrame::Events { events: vec![signed] }.to_json().unwrap();
    assert!(one.starts_with(r#"["EVENTS",{"id":""#));
    let max = contracts::relay_wire::MAX_FILTERS.value as usize;
    let filter = RelayFilter::from_json(r#"{"kinds":[1]}"#).unwrap();
    let req = ClientRelayFrame::Req { subscription_id: "s".into(), filters: vec![filter; max + 1] };
    assert_eq!(code(req.to_json()), "invalid_relay_filter");
}

#[test]
fn a_secret_with_a_nul_byte_is_refused_before_the_call() {
    let refused = SoftchatIdentity::import_secret_hex("ab\0cd").err().unwrap();
    assert_eq!(refused.code, SoftchatErrorCode::INVALID_RELAY_AUTHENTICATION);
    assert!(!refused.message.contains("ab"), "the message repeats the secret: {}", refused.message);
}

#[test]
fn handles_are_shared_across_threads() {
    let identity = SoftchatIdentity::generate();
    let signed: Vec<VerifiedEvent> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..8)
            .map(|t| {
                let identity = &identity;
                scope.spawn(move || {
                    (0..25)
                        .map(|i| {
                            let draft = UnsignedEvent { pubkey: None, created_at: 1_700_000_000 + i, kind: 1, tags: vec![], content: format!("{t}/{i}") };
                            identity.sign(&draft).unwrap()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap()).collect()
    });
    assert_eq!(signed.len(), 200);
    for e in &signed {
        assert_eq!(e.pubkey.as_str(), identity.public_key_hex());
        assert_eq!(SignedNostrEvent::parse(&wire(e)).unwrap(), *e);
    }
}

/// An event's NIP-01 JSON.
fn wire(e: &VerifiedEvent) -> String {
    let frame = ClientRelayFrame::Event { event: e.clone() }.to_json().unwrap();
    frame["[\"EVENT\",".len()..frame.len() - 1].to_owned()
}

fn temporary_account(name: &str) -> (SoftchatAccount, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("softchat-rust-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let account = SoftchatAccount::open(dir.join("account.db").to_str().unwrap()).unwrap();
    (account, dir)
}

#[test]
fn an_optional_relay_url_crosses_as_a_json_string() {
    let (account, dir) = temporary_account("policy");
    account.set_subscription_with("one-relay", [r#"{"kinds":[1]}"#], Some("wss://relay.example")).unwrap();
    account.set_subscription("every-relay", [r#"{"kinds":[7]}"#]).unwrap();
    let for_relay = account.subscriptions_with(Some("wss://relay.example")).unwrap();
    let mut ids: Vec<&str> = for_relay.iter().map(|s| s.subscription_id.as_str()).collect();
    ids.sort();
    assert_eq!(ids, ["every-relay", "one-relay"]);
    let other = account.subscriptions_with(Some("wss://other.example")).unwrap();
    assert_eq!(other.iter().map(|s| s.subscription_id.as_str()).collect::<Vec<_>>(), ["every-relay"]);
    let one = for_relay.iter().find(|s| s.subscription_id == "one-relay").unwrap();
    assert_eq!(one.relay_url.as_deref(), Some("wss://relay.example"));
    account.close();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_hand_built_action_missing_a_required_field_has_no_variant() {
    let action = RelaySessionAction::from(RelaySessionActionVariant::AuthenticationRequested { challenge: "c".into() });
    assert_eq!(action.kind, RelaySessionActionKind::AuthenticationRequested);
    assert_eq!(action.challenge.as_deref(), Some("c"));
    let broken = RelaySessionAction { challenge: None, ..action };
    assert_eq!(broken.into_variant(), None);
}

#[test]
fn a_panicking_listener_is_caught_at_the_boundary_and_its_closure_freed_at_the_final_call() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let (account, dir) = temporary_account("listener");
    let calls = Arc::new(AtomicUsize::new(0));
    let held = calls.clone();
    // Every call panics; the trampoline must catch each one and the library go on calling.
    let states: ManagedTransportStateListener = Box::new(move |_change| {
        held.fetch_add(1, Ordering::SeqCst);
        panic!("a listener that panics");
    });
    // A relay that refuses connections: the transport fetches, connects, backs off.
    let context = ManagedTransportContext { relay_urls: vec!["ws://127.0.0.1:9".into()], ..Default::default() };
    let transport = account.start_managed_transport(&context, None, Some(states), None).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while calls.load(Ordering::SeqCst) < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(calls.load(Ordering::SeqCst) >= 3, "the library kept calling after a panic ({} calls)", calls.load(Ordering::SeqCst));
    assert_eq!(Arc::strong_count(&calls), 2, "the closure is alive while the transport runs");
    transport.stop();
    assert_eq!(Arc::strong_count(&calls), 1, "stop's final call dropped the closure");
    drop(transport);
    account.close();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn listeners_of_a_transport_that_fails_to_start_are_freed() {
    use std::sync::Arc;
    let (account, dir) = temporary_account("refused");
    let token = Arc::new(());
    let held = token.clone();
    let states: ManagedTransportStateListener = Box::new(move |_change| {
        let _ = &held;
    });
    let bad = ManagedTransportContext { relay_urls: vec!["http://not-a-relay".into()], ..Default::default() };
    let refused = account.start_managed_transport(&bad, None, Some(states), None).err().unwrap();
    assert_eq!(refused.code.as_str(), "invalid_relay_url");
    assert_eq!(Arc::strong_count(&token), 1, "the refused call's listener was dropped");
    account.close();
    let _ = std::fs::remove_dir_all(dir);
}

/// Panics when dropped: a value a listener's closure captures, or a panic's payload.
struct PanicsOnDrop(&'static str);

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("{} panicked in Drop", self.0);
    }
}

#[test]
fn a_panic_in_a_listeners_drop_or_in_its_panic_payloads_drop_does_not_abort_the_host() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let (account, dir) = temporary_account("drop-panics");
    let calls = Arc::new(AtomicUsize::new(0));
    let held = calls.clone();
    let captured = PanicsOnDrop("the states closure's captured value");
    // Every call panics with a payload whose Drop panics again; the final call drops the
    // closure, whose captured value panics in Drop. Before each was contained, the first
    // unwound into the library (undefined behaviour; an abort, rc 134, since Rust 1.81).
    let states: ManagedTransportStateListener = Box::new(move |_change| {
        let _ = &captured;
        held.fetch_add(1, Ordering::SeqCst);
        std::panic::panic_any(PanicsOnDrop("a panic payload"));
    });
    let bomb = PanicsOnDrop("the events closure's captured value");
    let events: ManagedTransportActivityListener = Box::new(move |_activity| {
        let _ = &bomb;
    });
    // A relay that refuses connections: the transport fetches, connects, backs off.
    let context = ManagedTransportContext { relay_urls: vec!["ws://127.0.0.1:9".into()], ..Default::default() };
    let transport = account.start_managed_transport(&context, None, Some(states), Some(events)).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while calls.load(Ordering::SeqCst) < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(calls.load(Ordering::SeqCst) >= 3, "the library kept calling after a panic ({} calls)", calls.load(Ordering::SeqCst));
    transport.stop();
    // The closure was dropped at the final call although a captured value panicked in Drop: the
    // unwinding dropped its other captures, this Arc among them.
    assert_eq!(Arc::strong_count(&calls), 1, "stop's final call dropped the closure");
    drop(transport);
    account.close();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn nip44_round_trips_and_a_tampered_payload_is_refused() {
    let alice = SoftchatIdentity::generate();
    let bob = SoftchatIdentity::generate();
    let payload = alice.nip44_encrypt("hi bob ☃", &bob.public_key_hex()).unwrap();
    assert_eq!(bob.nip44_decrypt(&payload, &alice.public_key_hex()).unwrap(), "hi bob ☃");
    let mut tampered = payload.clone().into_bytes();
    tampered[10] = if tampered[10] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    assert_eq!(code(bob.nip44_decrypt(&tampered, &alice.public_key_hex())), "invalid_private_message");
    assert_eq!(code(alice.nip44_encrypt("", &bob.public_key_hex())), "invalid_private_message");
    let draft = UnsignedEvent { pubkey: None, created_at: 1_800_000_000, kind: 14, tags: vec![vec!["p".into(), bob.public_key_hex()]], content: "sealed".into() };
    let wrap = alice.gift_wrap(&draft, &bob.public_key_hex(), 1_800_000_000).unwrap();
    assert_eq!(wrap.kind, 1059);
    let opened = bob.unwrap_gift(&wrap).unwrap();
    assert_eq!((opened.sender.as_str(), opened.rumor.content.as_str(), opened.wrap_id.as_str()), (alice.public_key_hex().as_str(), "sealed", wrap.id.as_str()));
    assert_eq!(code(alice.unwrap_gift(&wrap)), "invalid_private_message");
}

#[test]
fn a_private_message_goes_to_the_inbox_relays_and_is_unwrapped_once_by_the_recipient() {
    let alice = SoftchatIdentity::generate();
    let bob = SoftchatIdentity::generate();
    let now = 1_800_000_000;
    let inbox = |who: &SoftchatIdentity, relay: &str| {
        who.sign(&UnsignedEvent { pubkey: None, created_at: now - 10, kind: 10050, tags: vec![vec!["relay".into(), relay.into()]], content: String::new() })
            .unwrap()
    };
    let (sender, sender_dir) = temporary_account("dm-alice");
    let (reader, reader_dir) = temporary_account("dm-bob");
    assert_eq!(code(sender.messages().send([bob.public_key_hex()], "hello", &alice, now)), "recipient_has_no_inbox_relays");
    sender.incoming().ingest(vec![inbox(&alice, "wss://alice.example"), inbox(&bob, "wss://bob.example")], now).unwrap();
    let sent = sender.messages().send([bob.public_key_hex()], "hello from rust", &alice, now).unwrap();
    let routes: Vec<(String, Vec<String>)> = sent.deliveries.iter().map(|d| (d.recipient.clone(), d.relay_urls.clone())).collect();
    assert_eq!(
        routes,
        vec![(bob.public_key_hex(), vec!["wss://bob.example".to_owned()]), (alice.public_key_hex(), vec!["wss://alice.example".to_owned()])]
    );
    let wraps = sender.query_events([r#"{"kinds":[1059]}"#], 10, now, None).unwrap().events;
    assert_eq!(wraps.len(), 2);
    assert_eq!(reader.messages().unlock(&bob, now).unwrap(), 0);
    reader.incoming().ingest(wraps, now).unwrap();
    let rooms = reader.messages().rooms(&bob.public_key_hex(), now, 10).unwrap();
    assert_eq!(rooms.len(), 1);
    assert_eq!(rooms[0].latest.as_ref().map(|m| m.content.as_str()), Some("hello from rust"));
    assert_eq!(rooms[0].unread, 1);
    let page = reader.messages().messages(&bob.public_key_hex(), [alice.public_key_hex()], now, 10, None).unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!((page[0].id(), page[0].sender()), (sent.message.id(), alice.public_key_hex().as_str()));
    assert!(reader.messages().messages(&bob.public_key_hex(), [alice.public_key_hex()], now, 10, Some(&page[0].cursor)).unwrap().is_empty());
    reader.messages().mark_read(&bob.public_key_hex(), [alice.public_key_hex()]).unwrap();
    assert_eq!(reader.messages().rooms(&bob.public_key_hex(), now, 10).unwrap()[0].unread, 0);
    sender.close();
    reader.close();
    let _ = std::fs::remove_dir_all(sender_dir);
    let _ = std::fs::remove_dir_all(reader_dir);
}

#[test]
fn a_verified_event_carries_its_proof_and_only_the_crate_can_make_one() {
    let identity = SoftchatIdentity::generate();
    let draft = UnsignedEvent { pubkey: None, created_at: 1_760_000_000, kind: 1, tags: vec![vec!["t".into(), "seal".into()]], content: "hello".into() };
    let signed = identity.sign(&draft).unwrap();
    let proof = signed.proof().expect("an event the library returns carries its seal");
    assert!(proof.len() == 32 && proof.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    // Handed back (the proof recognised) and parsed from text (verified in full, sealed anew).
    let filter = RelayFilter::from_json(r##"{"kinds":[1],"#t":["seal"]}"##).unwrap();
    assert!(filter.matches(&signed));
    let text = format!(
        r#"{{"id":"{}","pubkey":"{}","created_at":{},"kind":1,"tags":[["t","seal"]],"content":"hello","sig":"{}"}}"#,
        signed.id.as_str(), signed.pubkey.as_str(), signed.created_at, signed.sig
    );
    let parsed = SignedNostrEvent::parse(&text).unwrap();
    assert_eq!(parsed, signed);
    // `VerifiedEvent { … }` does not compile outside the crate: its proof field is the crate's.
}

/// Applies one update of an observed window to the reader's copy of it; false when a change does
/// not fit.
fn apply_update(window: &mut Vec<VerifiedEvent>, update: EventWindowUpdate) -> bool {
    match update.into_variant() {
        Some(EventWindowUpdateVariant::Snapshot { events }) | Some(EventWindowUpdateVariant::Reload { events }) => {
            *window = events;
            true
        }
        Some(EventWindowUpdateVariant::Changes { changes }) => changes.into_iter().all(|change| match change.into_variant() {
            Some(EventWindowChangeVariant::Inserted { event, at }) if (at as usize) <= window.len() => {
                window.insert(at as usize, event);
                true
            }
            Some(EventWindowChangeVariant::Removed { id, at }) if window.get(at as usize).map(|e| e.id.as_str() == id) == Some(true) => {
                window.remove(at as usize);
                true
            }
            _ => false,
        }),
        None => false,
    }
}

#[test]
fn a_listener_gets_the_snapshot_then_changes_that_rebuild_a_fresh_read_until_close() {
    use std::sync::mpsc;
    use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
    let (account, dir) = temporary_account("live");
    let author = SoftchatIdentity::generate();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64;
    let note = |i: i64| {
        author
            .sign(&UnsignedEvent { pubkey: None, created_at: now - 100 + i, kind: 1, tags: vec![], content: format!("note {i}") })
            .unwrap()
    };
    account.incoming().ingest([note(0)], now).unwrap();
    let (sender, updates) = mpsc::channel::<EventWindowUpdate>();
    let filters = [r#"{"kinds":[1]}"#];
    let observation = account.observe(filters, 3, Some(Box::new(move |update| { let _ = sender.send(update); }))).unwrap();
    let mut window = Vec::new();
    let first = updates.recv_timeout(Duration::from_secs(5)).expect("the snapshot");
    assert_eq!(first.kind, EventWindowUpdateKind::Snapshot);
    assert!(apply_update(&mut window, first));
    assert_eq!(window.iter().map(|e| e.content.as_str()).collect::<Vec<_>>(), ["note 0"]);
    account.incoming().ingest((1..=4).map(note).collect::<Vec<_>>(), now).unwrap();
    let fresh: Vec<EventId> = account.query_events(filters, 3, now, None).unwrap().events.iter().map(|e| e.id.clone()).collect();
    let deadline = Instant::now() + Duration::from_secs(5);
    while window.iter().map(|e| e.id.clone()).collect::<Vec<_>>() != fresh && Instant::now() < deadline {
        if let Ok(update) = updates.recv_timeout(Duration::from_millis(100)) {
            assert!(apply_update(&mut window, update), "a change did not fit");
        }
    }
    assert_eq!(window.iter().map(|e| e.content.as_str()).collect::<Vec<_>>(), ["note 4", "note 3", "note 2"]);
    assert_eq!(observation.window().iter().map(|e| e.id.clone()).collect::<Vec<_>>(), fresh);
    observation.close();
    account.incoming().ingest([note(5)], now).unwrap();
    assert!(updates.recv_timeout(Duration::from_millis(300)).is_err(), "nothing after close()");
    assert_eq!(code(account.observe(filters, 0, None)), "invalid_relay_filter");
    drop(observation);
    account.close();
    let _ = std::fs::remove_dir_all(dir);
}

/// Applies one change of an observed list of rows (the room list, a room, delivery states) to
/// the reader's copy; false when it does not fit.
fn apply_row_change<R>(rows: &mut Vec<R>, key: impl Fn(&R) -> String, kind: RowChangeKind, row: Option<R>, change_key: Option<String>, from: Option<i64>, at: Option<i64>) -> bool {
    let at = at.map(|a| a as usize);
    match (kind, row, at) {
        (RowChangeKind::Inserted, Some(row), Some(at)) if at <= rows.len() => {
            rows.insert(at, row);
            true
        }
        (RowChangeKind::Removed, _, Some(at)) if rows.get(at).map(&key) == change_key => {
            rows.remove(at);
            true
        }
        (RowChangeKind::Moved, _, Some(at)) => match from.map(|f| f as usize) {
            Some(from) if rows.get(from).map(&key) == change_key && at < rows.len() => {
                let moved = rows.remove(from);
                rows.insert(at, moved);
                true
            }
            _ => false,
        },
        (RowChangeKind::Updated, Some(row), Some(at)) if rows.get(at).map(&key) == Some(key(&row)) => {
            rows[at] = row;
            true
        }
        _ => false,
    }
}

#[test]
fn a_chat_screen_keeps_the_room_list_the_open_room_and_the_delivery_ticks_from_listeners() {
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
    let alice = SoftchatIdentity::generate();
    let bob = SoftchatIdentity::generate();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64;
    let inbox = |who: &SoftchatIdentity, relay: &str| {
        who.sign(&UnsignedEvent { pubkey: None, created_at: now - 10, kind: 10050, tags: vec![vec!["relay".into(), relay.into()]], content: String::new() })
            .unwrap()
    };
    let (account, dir) = temporary_account("chat");
    account.incoming().ingest(vec![inbox(&alice, "wss://alice.example"), inbox(&bob, "wss://bob.example")], now).unwrap();
    // (rooms, messages, ticks, every change fitted)
    type Screen = (Vec<PrivateRoom>, Vec<PrivateMessage>, Vec<PublishIntentStatus>, bool);
    let screen: Arc<Mutex<Screen>> = Arc::new(Mutex::new((vec![], vec![], vec![], true)));
    let s = screen.clone();
    let room_list = account
        .messages()
        .observe_rooms(&alice.public_key_hex(), 10, Some(Box::new(move |u: RoomListUpdate| {
            let mut s = s.lock().unwrap();
            if let Some(rooms) = u.rooms { s.0 = rooms; }
            for c in u.changes.unwrap_or_default() {
                let fits = apply_row_change(&mut s.0, |r: &PrivateRoom| r.members.join(","), c.kind, c.room, c.key, c.from, c.at);
                s.3 &= fits;
            }
        })))
        .unwrap();
    let s = screen.clone();
    let room = account
        .messages()
        .observe_messages(&alice.public_key_hex(), [bob.public_key_hex()], 20, Some(Box::new(move |u: RoomMessagesUpdate| {
            let mut s = s.lock().unwrap();
            if let Some(messages) = u.messages { s.1 = messages; }
            for c in u.changes.unwrap_or_default() {
                let fits = apply_row_change(&mut s.1, |m: &PrivateMessage| m.id.clone(), c.kind, c.message, c.key, c.from, c.at);
                s.3 &= fits;
            }
        })))
        .unwrap();
    let sent = account.messages().send([bob.public_key_hex()], "hello from rust", &alice, now).unwrap();
    let members: Vec<String> = sent.message.recipients.iter().cloned().chain([sent.message.sender.clone()]).collect();
    let s = screen.clone();
    let deliveries = account
        .messages()
        .observe_deliveries(&sent.message.id, members, Some(Box::new(move |u: DeliveryStatesUpdate| {
            let mut s = s.lock().unwrap();
            if let Some(intents) = u.intents { s.2 = intents; }
            for c in u.changes.unwrap_or_default() {
                let fits = apply_row_change(&mut s.2, |i: &PublishIntentStatus| i.intent_id.clone(), c.kind, c.intent, c.key, c.from, c.at);
                s.3 &= fits;
            }
        })))
        .unwrap();
    let wait = |what: &str, condition: &dyn Fn(&Screen) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !condition(&screen.lock().unwrap()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(condition(&screen.lock().unwrap()), "{what}");
    };
    wait("the sent message is in the open room", &|s| s.1.iter().map(|m| m.id.clone()).collect::<Vec<_>>() == [sent.message.id.clone()]);
    wait("the room is in the room list", &|s| s.0.len() == 1 && s.0[0].latest.as_ref().map(|m| m.content.as_str()) == Some("hello from rust"));
    wait("two pending ticks", &|s| s.2.len() == 2 && s.2.iter().all(|i| i.state == DeliveryState::Pending));
    let claim = account.delivery().claim("chat-lease", "wss://bob.example", now, 10).unwrap().unwrap();
    account.delivery().mark_socket_written(&claim.claim, claim.payloads.iter().map(|p| p.intent_id.clone()).collect::<Vec<_>>()).unwrap();
    wait("bob's tick is in flight", &|s| s.2.iter().any(|i| i.relay_url == "wss://bob.example" && i.state == DeliveryState::InFlight));
    assert!(screen.lock().unwrap().3, "every change fits the list it applies to");
    assert_eq!(room.window(), screen.lock().unwrap().1);
    room_list.close();
    room.close();
    deliveries.close();
    assert_eq!(code(account.messages().observe_rooms(&alice.public_key_hex(), 0, None)), "invalid_private_message");
    account.close();
    let _ = std::fs::remove_dir_all(dir);
}
