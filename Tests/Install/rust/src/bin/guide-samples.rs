//! The guides' ```rust samples, run: test-install renders each as a function of the names the
//! guides leave to the app (samples.rs, beside Cargo.toml) and this program calls each with real
//! values, in a fresh folder whose chat.db holds both keys' inbox relay lists (the world the
//! private-message sample assumes), against the relay SOFTCHAT_RELAY names. `frame` is a relay's
//! EVENT frame for the subscription "chat" (SOFTCHAT_FRAME), as a socket would deliver it.
#![allow(unused_variables, unused_mut, unused_imports, clippy::all)]
use softchat::*;
use std::time::{SystemTime, UNIX_EPOCH};

/// What each sample becomes (scripts/lib/checks.py's RUST_SAMPLE_PARAMETERS, in order).
type Sample = fn(&SoftchatAccount, &SoftchatIdentity, &UnsignedEvent, i64, &str, &str) -> Result<(), SoftchatError>;

include!(concat!(env!("CARGO_MANIFEST_DIR"), "/samples.rs"));

fn main() {
    let relay = std::env::var("SOFTCHAT_RELAY").expect("SOFTCHAT_RELAY");
    let frame = std::env::var("SOFTCHAT_FRAME").expect("SOFTCHAT_FRAME");
    let root = std::env::current_dir().unwrap();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64;
    let mut failed = 0;
    for (i, (place, sample)) in SAMPLES.iter().enumerate() {
        let folder = root.join(format!("sample-{}", i + 1));
        std::fs::create_dir_all(&folder).unwrap();
        std::env::set_current_dir(&folder).unwrap();
        let identity = SoftchatIdentity::generate();
        let friend = SoftchatIdentity::generate();
        let account = SoftchatAccount::open("chat.db").unwrap();
        let inbox = |key: &SoftchatIdentity| {
            let list = UnsignedEvent { pubkey: None, created_at: now - 10, kind: 10050, tags: vec![vec!["relay".into(), relay.clone()]], content: String::new() };
            key.sign(&list).unwrap()
        };
        account.incoming().ingest([inbox(&identity), inbox(&friend)], now).unwrap();
        let draft = UnsignedEvent { pubkey: None, created_at: now, kind: 1, tags: vec![], content: "a guide sample".into() };
        match sample(&account, &identity, &draft, now, &friend.public_key_hex(), &frame) {
            Ok(()) => println!("ran {place}"),
            Err(e) => {
                failed += 1;
                println!("failed {place}: {e}");
            }
        }
        account.close();
    }
    std::process::exit(if failed == 0 { 0 } else { 1 });
}
