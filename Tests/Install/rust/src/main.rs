//! A Rust app's first program: a cargo project depending on the packaged `softchat` crate by path,
//! built with no RUSTFLAGS and run with no LD_LIBRARY_PATH.
use softchat::*;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

fn main() {
    let relay = std::env::var("SOFTCHAT_RELAY").unwrap();
    let work = std::env::var("SOFTCHAT_WORK").unwrap();
    let filter = r##"{"kinds":[1],"#t":["install-rust"]}"##.to_string();
    let writer = SoftchatAccount::open(&format!("{work}/writer.db")).unwrap();
    let reader = SoftchatAccount::open(&format!("{work}/reader.db")).unwrap();
    let identity = SoftchatIdentity::generate();
    reader.set_subscription("install", [&filter]).unwrap();
    // SOFTCHAT_CA_PEM: the private CA of a wss:// relay, given as text (a phone has no store to read).
    let ca_pem = std::env::var("SOFTCHAT_CA_PEM").ok();
    let writer_context = ManagedTransportContext { relay_urls: vec![relay.clone()], ca_pem: ca_pem.clone(), ..Default::default() };
    let writer_transport = writer.start_managed_transport(&writer_context, Some(&identity), None, None).unwrap();
    let reader_context = ManagedTransportContext { relay_urls: vec![relay.clone()], publishes: Some(false), ca_pem, ..Default::default() };
    let reader_transport = reader.start_managed_transport(&reader_context, None, None, None).unwrap();
    let operations: Vec<String> = (0..5).map(|i| format!("install-rust-{i}")).collect();
    for (i, operation) in operations.iter().enumerate() {
        let draft = UnsignedEvent {
            pubkey: None,
            created_at: now() - 10 + i as i64,
            kind: 1,
            tags: vec![vec!["t".into(), "install-rust".into()]],
            content: format!("install rust {i}"),
        };
        let event = identity.sign(&draft).unwrap();
        writer.outgoing().enqueue_signed(operation, [event], [&relay], now()).unwrap();
    }
    let accepted = || {
        operations.iter().flat_map(|op| writer.delivery().intents(op).unwrap()).filter(|i| i.state == DeliveryState::Accepted).count()
    };
    let received = || reader.query_events([&filter], 100, now(), None).unwrap().events.len();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline && (accepted() < 5 || received() < 5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let (a, r) = (accepted(), received());
    writer_transport.close();
    reader_transport.close();
    drop(writer_transport);
    drop(reader_transport);
    writer.close();
    reader.close();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let library = maps.lines().filter_map(|l| l.split_whitespace().nth(5)).find(|p| p.ends_with("/libSoftchatFFI.so")).unwrap_or("");
    println!("{{\"language\":\"rust\",\"published\":5,\"accepted\":{a},\"received\":{r},\"library\":\"{library}\"}}");
    std::process::exit(if a == 5 && r == 5 { 0 } else { 1 });
}
