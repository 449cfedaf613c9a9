//! `softchat-replay SCRIPT`: the session regression scripts (Tests/SessionRegressions/*.jsonl)
//! through the Rust binding, one JSON line per call, in the form `softchat replay` prints, so
//! scripts/facades/test-facades can compare the two line by line.

use softchat::json::{FromJson, Json, ToJson};
use softchat::*;

fn member<'a>(o: &'a Json, key: &str) -> Option<&'a Json> {
    o.get(key).filter(|v| **v != Json::Null)
}

fn int(o: &Json, key: &str) -> Option<i64> {
    member(o, key).map(|v| i64::from_json(v).expect("an integer"))
}

fn text(o: &Json, key: &str) -> String {
    String::from_json(member(o, key).unwrap_or_else(|| panic!("{key} is required"))).expect("a string")
}

fn list(o: &Json, key: &str) -> Vec<Json> {
    match member(o, key) {
        Some(Json::Array(items)) => items.clone(),
        _ => panic!("{key} must be an array"),
    }
}

fn event(value: &Json) -> Result<VerifiedEvent, SoftchatError> {
    SignedNostrEvent::parse(&value.write())
}

fn actions(list: Vec<RelaySessionAction>) -> Json {
    Json::Array(list.iter().map(ToJson::to_json).collect())
}

fn config(o: &Json) -> RelaySessionConfig {
    // The core's defaults (RelaySessionConfig()), then what the script sets.
    let flag = |key: &str, default: bool| member(o, key).map(|v| bool::from_json(v).unwrap()).unwrap_or(default);
    RelaySessionConfig {
        supports_events_batch: flag("supportsEventsBatch", true),
        reconnect_base_delay_seconds: int(o, "reconnectBaseDelaySeconds").unwrap_or(contracts::relay_recovery::RECONNECT_BASE_DELAY_SECONDS.value),
        reconnect_max_delay_seconds: int(o, "reconnectMaxDelaySeconds").unwrap_or(contracts::relay_recovery::RECONNECT_MAX_DELAY_SECONDS.value),
        reconnect_reset_after_seconds: int(o, "reconnectResetAfterSeconds")
            .unwrap_or(contracts::relay_recovery::RECONNECT_RESET_AFTER_SECONDS.value),
        jitter_seed: int(o, "jitterSeed").unwrap_or(0),
        since_overlap_seconds: int(o, "sinceOverlapSeconds").unwrap_or(DEFAULT_SINCE_OVERLAP_SECONDS),
        correlate_unnamed_acknowledgements: flag("correlateUnnamedAcknowledgements", false),
        relay_url: member(o, "relayUrl").map(|v| String::from_json(v).unwrap()),
        max_message_bytes: int(o, "maxMessageBytes"),
        acknowledgement_timeout_seconds: int(o, "acknowledgementTimeoutSeconds")
            .unwrap_or(contracts::relay_publish::ACKNOWLEDGEMENT_TIMEOUT_SECONDS.value),
        authentication_wait_seconds: int(o, "authenticationWaitSeconds").unwrap_or(DEFAULT_AUTHENTICATION_WAIT_SECONDS),
        authentication_window_seconds: int(o, "authenticationWindowSeconds").unwrap_or(DEFAULT_AUTHENTICATION_WINDOW_SECONDS),
        answers_authentication: flag("answersAuthentication", true),
    }
}

// The core's defaults that are not contract bounds (RelaySessionConfig.init in SoftchatCore); a
// drift shows as a difference from `softchat replay` in scripts/facades/test-facades.
const DEFAULT_SINCE_OVERLAP_SECONDS: i64 = 10;
const DEFAULT_AUTHENTICATION_WAIT_SECONDS: i64 = 5;
const DEFAULT_AUTHENTICATION_WINDOW_SECONDS: i64 = 600;

fn step(o: &Json, session: &mut RelaySession) -> Result<(&'static str, Json), SoftchatError> {
    let call = text(o, "call");
    let done = || Ok(("actions", Json::Array(vec![])));
    match call.as_str() {
        "configure" => {
            *session = RelaySession::new_with_config(&config(o))?;
            done()
        }
        "connect" => Ok(("actions", actions(session.connect()?))),
        "transportConnected" => Ok(("actions", actions(session.transport_connected_with(int(o, "now"))?))),
        "transportLost" => Ok(("actions", actions(session.transport_lost_with(int(o, "now"))?))),
        "cancel" => Ok(("actions", actions(session.cancel()?))),
        "close" => session.close().and_then(|_| done()),
        "subscribe" => session.subscribe(&text(o, "id"), list(o, "filters").iter().map(Json::write)).and_then(|_| done()),
        "unsubscribe" => session.unsubscribe(&text(o, "id")).and_then(|_| done()),
        "count" => session.count(&text(o, "id"), list(o, "filters").iter().map(Json::write)).and_then(|_| done()),
        "cancelCount" => session.cancel_count(&text(o, "id")).and_then(|_| done()),
        "publish" => {
            let events = list(o, "events").iter().map(event).collect::<Result<Vec<_>, _>>()?;
            session.publish(events).and_then(|_| done())
        }
        "drainOutbound" => {
            let max = int(o, "max").unwrap_or(contracts::relay_session::DEFAULT_DRAIN_MAX.value);
            Ok(("frames", Json::Array(session.drain_outbound(max)?.iter().map(ToJson::to_json).collect())))
        }
        "confirmSent" => {
            let ids: Vec<String> = list(o, "eventIds").iter().map(|v| String::from_json(v).unwrap()).collect();
            session.confirm_sent_with(ids, int(o, "now")).and_then(|_| done())
        }
        "receive" => Ok(("actions", actions(session.receive_with(&text(o, "text"), int(o, "now"))?))),
        "confirmIngested" => session.confirm_ingested(text(o, "eventId")).and_then(|_| done()),
        "authenticate" => {
            let e = event(member(o, "event").expect("authenticate needs an event"))?;
            Ok(("actions", actions(session.authenticate_with(&e, int(o, "now"))?)))
        }
        "handleTimeout" => Ok(("actions", actions(session.handle_timeout(int(o, "now").expect("handleTimeout needs now"))?))),
        "pollTimeout" => Ok(("timeout", session.poll_timeout().map(Json::int).unwrap_or(Json::Null))),
        "snapshot" => Ok(("snapshot", session.snapshot().to_json())),
        other => panic!("unknown call {other}"),
    }
}

fn main() {
    let path = std::env::args().nth(1).expect("usage: softchat-replay SCRIPT");
    let script = std::fs::read_to_string(&path).expect("a readable script");
    let mut session = RelaySession::new();
    for line in script.lines().filter(|l| !l.trim().is_empty()) {
        let o = Json::parse(line).expect("each line is JSON");
        let mut out = vec![("call".to_owned(), member(&o, "call").cloned().expect("a call"))];
        match step(&o, &mut session) {
            Ok((key, value)) => out.push((key.to_owned(), value)),
            Err(e) => out.push((
                "error".to_owned(),
                Json::Object(vec![("code".to_owned(), Json::text(e.code.as_str())), ("message".to_owned(), Json::text(&e.message))]),
            )),
        }
        println!("{}", Json::Object(out).write());
    }
}
