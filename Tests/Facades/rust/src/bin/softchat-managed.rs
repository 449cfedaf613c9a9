//! The Rust managed-transport program (scripts/facades/test-facades runs it against rust-nostr's
//! LocalRelay from scripts/interop/peers), like Tests/Facades/kotlin/ManagedProgram.kt: a writer account
//! publishes 200 events through `enqueue_signed` over `start_managed_transport` (100, then 100
//! more while the driver has the relay killed), watches its states until every intent is
//! terminal, and a second account reads the synced events back through `query_events`, page by
//! page.
//!
//! Driver protocol (stdin/stdout lines): HALF when the first 100 are accepted, then wait for DOWN;
//! enqueue the rest, QUEUED, wait for UP; then one line of JSON; exit 0 only if every check held.
//! Environment: SOFTCHAT_RELAY (ws URL), SOFTCHAT_WORK (a fresh directory), SOFTCHAT_TAG.

use softchat::*;
use std::io::BufRead;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

fn wait_until(seconds: u64, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    condition()
}

struct Checks(Vec<String>);

impl Checks {
    fn check(&mut self, ok: bool, what: impl Into<String>) {
        if !ok {
            self.0.push(what.into());
        }
    }
}

fn expect_line(checks: &mut Checks, word: &str) {
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).unwrap();
    checks.check(line.trim() == word, format!("the driver said {:?}, not {word}", line.trim()));
}

fn main() {
    let relay = std::env::var("SOFTCHAT_RELAY").unwrap();
    let work = std::env::var("SOFTCHAT_WORK").unwrap();
    let tag = std::env::var("SOFTCHAT_TAG").unwrap();
    let filter = format!(r##"{{"kinds":[1],"#t":["{tag}"]}}"##);
    let mut checks = Checks(vec![]);

    let writer = SoftchatAccount::open(&format!("{work}/writer.db")).unwrap();
    let reader = SoftchatAccount::open(&format!("{work}/reader.db")).unwrap();
    let identity = SoftchatIdentity::generate();
    reader.set_subscription("chat", [&filter]).unwrap();
    let ids: Vec<String> = reader.subscriptions().unwrap().into_iter().map(|s| s.subscription_id).collect();
    checks.check(ids == ["chat"], "the reader's policy holds its subscription");

    // What the listeners saw (they run on the library's delivery thread).
    let phases = Arc::new(Mutex::new(Vec::<String>::new()));
    let accepted = Arc::new(AtomicUsize::new(0));
    let rejected = Arc::new(AtomicUsize::new(0));
    let received = Arc::new(AtomicUsize::new(0));
    let synced = Arc::new(AtomicUsize::new(0));

    let states: ManagedTransportStateListener = {
        let phases = phases.clone();
        Box::new(move |change: ManagedTransportStateChange| {
            if change.kind == ManagedTransportStateChangeKind::Relay {
                phases.lock().unwrap().push(change.phase.unwrap().as_str().to_owned());
            }
        })
    };
    let deliveries: ManagedTransportActivityListener = {
        let (accepted, rejected) = (accepted.clone(), rejected.clone());
        Box::new(move |activity: ManagedTransportActivity| {
            if let Some(decision) = activity.decision.filter(|_| activity.kind == ManagedTransportActivityKind::Delivery) {
                match decision.state {
                    DeliveryState::Accepted => accepted.fetch_add(1, Ordering::SeqCst),
                    DeliveryState::Rejected => rejected.fetch_add(1, Ordering::SeqCst),
                    _ => 0,
                };
            }
        })
    };
    let writer_context = ManagedTransportContext { relay_urls: vec![relay.clone()], acknowledgement_timeout_seconds: Some(5), ..Default::default() };
    let writer_transport = writer.start_managed_transport(&writer_context, Some(&identity), Some(states), Some(deliveries)).unwrap();
    let ingests: ManagedTransportActivityListener = {
        let (received, synced) = (received.clone(), synced.clone());
        Box::new(move |activity: ManagedTransportActivity| match activity.kind {
            ManagedTransportActivityKind::Ingested => {
                received.fetch_add(activity.result.map_or(0, |r| r.accepted.len()), Ordering::SeqCst);
            }
            ManagedTransportActivityKind::Synced => {
                synced.fetch_add(1, Ordering::SeqCst);
            }
            _ => {}
        })
    };
    let reader_context = ManagedTransportContext { relay_urls: vec![relay.clone()], publishes: Some(false), ..Default::default() };
    let reader_transport = reader.start_managed_transport(&reader_context, None, None, Some(ingests)).unwrap();

    let start = now() - 300;
    let events: Vec<VerifiedEvent> = (0..200)
        .map(|i| {
            let draft = UnsignedEvent {
                pubkey: None,
                created_at: start + i / 4,
                kind: 1,
                tags: vec![vec!["t".into(), tag.clone()]],
                content: format!("managed rust {i}"),
            };
            identity.sign(&draft).unwrap()
        })
        .collect();
    let operations: Vec<String> = (0..200).map(|i| format!("rust-{tag}-{i}")).collect();
    for i in 0..100 {
        writer.outgoing().enqueue_signed(&operations[i], [events[i].clone()], [&relay], now()).unwrap();
    }
    let first = wait_until(60, || accepted.load(Ordering::SeqCst) >= 100);
    checks.check(first, format!("the first 100 accepted (saw {})", accepted.load(Ordering::SeqCst)));
    println!("HALF");
    expect_line(&mut checks, "DOWN");
    for i in 100..200 {
        writer.outgoing().enqueue_signed(&operations[i], [events[i].clone()], [&relay], now()).unwrap();
    }
    println!("QUEUED");
    expect_line(&mut checks, "UP");

    // Every intent terminal, each exactly as the relay said: accepted, and only by its OK.
    let intent_states = || -> Vec<DeliveryState> {
        operations.iter().flat_map(|op| writer.delivery().intents(op).unwrap()).map(|i| i.state).collect()
    };
    let terminal = wait_until(90, || intent_states().iter().all(|s| matches!(s, DeliveryState::Accepted | DeliveryState::Rejected)));
    checks.check(terminal, "every intent terminal");
    let last = intent_states();
    checks.check(
        last.len() == 200 && last.iter().all(|s| *s == DeliveryState::Accepted),
        format!("all 200 intents accepted: {} of {}", last.iter().filter(|s| **s == DeliveryState::Accepted).count(), last.len()),
    );
    let seen = phases.lock().unwrap().clone();
    checks.check(
        seen.contains(&"backingOff".to_owned()) && seen.iter().filter(|p| *p == "ready").count() >= 2,
        format!("the writer saw the relay go away and come back: {seen:?}"),
    );
    let status = writer_transport.relays();
    checks.check(
        status.len() == 1 && status[0].relay_url == relay && status[0].accepted >= 200 && status[0].reconnects >= 1,
        format!("the writer's relay status counts it: {status:?}"),
    );

    // The reader holds all 200 once its sync has run again; paged back newest first, once each.
    let held = wait_until(90, || reader.query_events([&filter], 1000, now(), None).unwrap().events.len() == 200);
    checks.check(held, "the reader holds 200 events");
    let mut paged: Vec<VerifiedEvent> = vec![];
    let mut cursor: Option<EventCursor> = None;
    let mut pages = 0;
    loop {
        let page = reader.query_events([&filter], 33, now(), cursor.as_ref()).unwrap();
        paged.extend(page.events);
        cursor = page.next;
        pages += 1;
        if cursor.is_none() || pages >= 20 {
            break;
        }
    }
    let mut got: Vec<&str> = paged.iter().map(|e| e.id.as_str()).collect();
    let mut want: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
    got.sort();
    want.sort();
    checks.check(paged.len() == 200 && got == want, format!("pages hold the 200 published events once each ({})", paged.len()));
    checks.check(
        paged.windows(2).all(|w| w[0].created_at > w[1].created_at || (w[0].created_at == w[1].created_at && w[0].id < w[1].id)),
        "pages are newest first, ties by id",
    );
    checks.check(pages == 7, format!("200 events in pages of 33 are 7 pages, not {pages}"));

    let zero = reader.query_events([&filter], 0, now(), None).err().map(|e| e.code.as_str().to_owned());
    checks.check(zero.as_deref() == Some("invalid_relay_filter"), format!("a page of 0 is refused with invalid_relay_filter, not {zero:?}"));
    let bad = ManagedTransportContext { relay_urls: vec!["http://not-a-relay".into()], ..Default::default() };
    let refused = writer.start_managed_transport(&bad, None, None, None).err().map(|e| e.code.as_str().to_owned());
    checks.check(refused.as_deref() == Some("invalid_relay_url"), format!("a bad relay URL is refused with invalid_relay_url, not {refused:?}"));

    writer_transport.close();
    drop(reader_transport);
    // close() returns after every update was delivered: one acceptance per intent, no more.
    let (a, r) = (accepted.load(Ordering::SeqCst), rejected.load(Ordering::SeqCst));
    checks.check(a == 200 && r == 0, format!("the events listener saw exactly 200 acceptances, no rejection ({a}, {r})"));
    let writer_check = writer.check(now()).unwrap();
    let reader_check = reader.check(now()).unwrap();
    checks.check(writer_check.ok && writer_check.live_leases == 0, format!("the writer's check: {:?}, leases {}", writer_check.problems, writer_check.live_leases));
    checks.check(
        writer_check.intents.len() == 1 && writer_check.intents[0].state == DeliveryState::Accepted && writer_check.intents[0].count == 200,
        format!("the writer's check counts 200 accepted: {:?}", writer_check.intents),
    );
    checks.check(reader_check.ok && reader_check.events == 200, format!("the reader's check: {:?}, {} events", reader_check.problems, reader_check.events));
    drop(writer_transport);
    writer.close();
    reader.close();
    println!(
        "{{\"language\":\"rust\",\"accepted\":{a},\"received\":{},\"synced\":{},\"pages\":{pages},\"phases\":\"{}\",\"failures\":{}}}",
        received.load(Ordering::SeqCst),
        synced.load(Ordering::SeqCst),
        seen.join(","),
        checks.0.len()
    );
    for f in &checks.0 {
        eprintln!("FAIL {f}");
    }
    std::process::exit(if checks.0.is_empty() { 0 } else { 1 });
}
