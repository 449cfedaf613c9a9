//! The wire frames as Rust enums with data, one variant per verb, as the core's own frames
//! are. The schema flattens each direction into one record (`verb` plus optional fields) for
//! the C ABI; these enums are read from and written to that record, and a client frame is
//! written to wire text and checked by the core before it is handed out.

use crate::json::Json;
use crate::runtime::{field, FromJson, ToJson};
use crate::types::*;
use crate::{parse_client_relay_frame, SoftchatError};

/// A validated client-to-relay frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientRelayFrame {
    /// `["EVENT", event]`: publish one event.
    Event { event: VerifiedEvent },
    /// `["REQ", id, filter…]`: subscribe with 1 to 64 filters.
    Req { subscription_id: String, filters: Vec<RelayFilter> },
    /// `["CLOSE", id]`: end a subscription or a COUNT.
    Close { subscription_id: String },
    /// `["AUTH", event]`: answer a NIP-42 challenge with a kind-22242 event.
    Auth { event: VerifiedEvent },
    /// `["COUNT", id, filter…]`: ask for a NIP-45 count.
    Count { subscription_id: String, filters: Vec<RelayFilter> },
    /// `["EVENTS", event…]`: Softchat's flat batch of 1 to 256 events with unique ids.
    Events { events: Vec<VerifiedEvent> },
    /// `["NEG-OPEN", id, filter, hex]`: open a NIP-77 reconciliation.
    NegOpen { subscription_id: String, filter: RelayFilter, negentropy: String },
    /// `["NEG-MSG", id, hex]`.
    NegMsg { subscription_id: String, negentropy: String },
    /// `["NEG-CLOSE", id]`.
    NegClose { subscription_id: String },
}

impl ClientRelayFrame {
    /// The frame's verb.
    pub fn verb(&self) -> ClientFrameVerb {
        match self {
            ClientRelayFrame::Event { .. } => ClientFrameVerb::Event,
            ClientRelayFrame::Req { .. } => ClientFrameVerb::Req,
            ClientRelayFrame::Close { .. } => ClientFrameVerb::Close,
            ClientRelayFrame::Auth { .. } => ClientFrameVerb::Auth,
            ClientRelayFrame::Count { .. } => ClientFrameVerb::Count,
            ClientRelayFrame::Events { .. } => ClientFrameVerb::Events,
            ClientRelayFrame::NegOpen { .. } => ClientFrameVerb::NegOpen,
            ClientRelayFrame::NegMsg { .. } => ClientFrameVerb::NegMsg,
            ClientRelayFrame::NegClose { .. } => ClientFrameVerb::NegClose,
        }
    }

    /// The frame's wire text, checked by the core (`parse_client_relay_frame`) before it is
    /// returned, so a frame over a bound (65 filters, 257 events, 512 KiB) is refused here with
    /// the contract's error rather than by the relay.
    pub fn to_json(&self) -> Result<String, SoftchatError> {
        let verb = Json::text(self.verb().as_str());
        let elements = match self {
            ClientRelayFrame::Event { event } | ClientRelayFrame::Auth { event } => vec![verb, wire_event(event)],
            ClientRelayFrame::Req { subscription_id, filters } | ClientRelayFrame::Count { subscription_id, filters } => {
                let mut e = vec![verb, Json::text(subscription_id)];
                e.extend(filters.iter().map(|f| f.json.clone()));
                e
            }
            ClientRelayFrame::Close { subscription_id } | ClientRelayFrame::NegClose { subscription_id } => {
                vec![verb, Json::text(subscription_id)]
            }
            ClientRelayFrame::Events { events } => {
                let mut e = vec![verb];
                e.extend(events.iter().map(wire_event));
                e
            }
            ClientRelayFrame::NegOpen { subscription_id, filter, negentropy } => {
                vec![verb, Json::text(subscription_id), filter.json.clone(), Json::text(negentropy)]
            }
            ClientRelayFrame::NegMsg { subscription_id, negentropy } => {
                vec![verb, Json::text(subscription_id), Json::text(negentropy)]
            }
        };
        let text = Json::Array(elements).write();
        parse_client_relay_frame(&text)?;
        Ok(text)
    }
}

/// An event in NIP-01's form (`created_at`), as frames carry it.
pub(crate) fn wire_event(event: &VerifiedEvent) -> Json {
    Json::Object(vec![
        ("id".to_owned(), Json::text(event.id.as_str())),
        ("pubkey".to_owned(), Json::text(event.pubkey.as_str())),
        ("created_at".to_owned(), Json::int(event.created_at)),
        ("kind".to_owned(), Json::int(event.kind)),
        ("tags".to_owned(), event.tags.to_json()),
        ("content".to_owned(), Json::text(&event.content)),
        ("sig".to_owned(), Json::text(&event.sig)),
    ])
}

fn one<T: Clone>(items: &[T], verb: &str) -> Result<T, String> {
    match items {
        [item] => Ok(item.clone()),
        _ => Err(format!("{verb} carries exactly one, found {}", items.len())),
    }
}

fn present<T>(value: Option<T>, verb: &str, name: &str) -> Result<T, String> {
    value.ok_or_else(|| format!("{verb} without {name}"))
}

impl FromJson for ClientRelayFrame {
    fn from_json(value: &Json) -> Result<Self, String> {
        let r = "ClientRelayFrame";
        let verb: ClientFrameVerb = field(value, r, "verb")?;
        let v = verb.as_str();
        let sub: Option<String> = field(value, r, "subscriptionId")?;
        let events: Vec<VerifiedEvent> = field(value, r, "events")?;
        let filters: Vec<RelayFilter> = field(value, r, "filters")?;
        let negentropy: Option<String> = field(value, r, "negentropy")?;
        Ok(match verb {
            ClientFrameVerb::Unrecognized => return Err(format!("{r}: a verb this crate does not know")),
            ClientFrameVerb::Event => ClientRelayFrame::Event { event: one(&events, v)? },
            ClientFrameVerb::Auth => ClientRelayFrame::Auth { event: one(&events, v)? },
            ClientFrameVerb::Req => ClientRelayFrame::Req { subscription_id: present(sub, v, "subscriptionId")?, filters },
            ClientFrameVerb::Count => ClientRelayFrame::Count { subscription_id: present(sub, v, "subscriptionId")?, filters },
            ClientFrameVerb::Close => ClientRelayFrame::Close { subscription_id: present(sub, v, "subscriptionId")? },
            ClientFrameVerb::NegClose => ClientRelayFrame::NegClose { subscription_id: present(sub, v, "subscriptionId")? },
            ClientFrameVerb::Events => ClientRelayFrame::Events { events },
            ClientFrameVerb::NegOpen => ClientRelayFrame::NegOpen {
                subscription_id: present(sub, v, "subscriptionId")?,
                filter: one(&filters, v)?,
                negentropy: present(negentropy, v, "negentropy")?,
            },
            ClientFrameVerb::NegMsg => ClientRelayFrame::NegMsg {
                subscription_id: present(sub, v, "subscriptionId")?,
                negentropy: present(negentropy, v, "negentropy")?,
            },
        })
    }
}

/// A validated relay-to-client frame; `prefix` is the machine-readable part of a reason
/// (`duplicate`, `auth-required`), `message` the relay's whole text, diagnostic only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RelayResponseFrame {
    /// `["EVENT", id, event]`: a verified event for a subscription.
    Event { subscription_id: String, event: VerifiedEvent },
    /// `["OK", event id, accepted, reason]`; `event_id` is `None` when the relay sent an empty id.
    Ok { event_id: Option<String>, accepted: bool, prefix: Option<String>, message: String },
    /// `["EOSE", id]`: the end of stored events.
    Eose { subscription_id: String },
    /// `["CLOSED", id, reason]`.
    Closed { subscription_id: String, prefix: Option<String>, message: String },
    /// `["NOTICE", text]`.
    Notice { prefix: Option<String>, message: String },
    /// `["AUTH", challenge]`: a NIP-42 challenge.
    Auth { challenge: String },
    /// `["COUNT", id, result]`: a NIP-45 count.
    Count { subscription_id: String, count: CountResult },
    /// `["NEG-MSG", id, hex]`.
    NegMsg { subscription_id: String, negentropy: String },
    /// `["NEG-ERR", id, reason]`.
    NegErr { subscription_id: String, prefix: Option<String>, message: String },
}

impl RelayResponseFrame {
    /// The frame's verb.
    pub fn verb(&self) -> RelayFrameVerb {
        match self {
            RelayResponseFrame::Event { .. } => RelayFrameVerb::Event,
            RelayResponseFrame::Ok { .. } => RelayFrameVerb::Ok,
            RelayResponseFrame::Eose { .. } => RelayFrameVerb::Eose,
            RelayResponseFrame::Closed { .. } => RelayFrameVerb::Closed,
            RelayResponseFrame::Notice { .. } => RelayFrameVerb::Notice,
            RelayResponseFrame::Auth { .. } => RelayFrameVerb::Auth,
            RelayResponseFrame::Count { .. } => RelayFrameVerb::Count,
            RelayResponseFrame::NegMsg { .. } => RelayFrameVerb::NegMsg,
            RelayResponseFrame::NegErr { .. } => RelayFrameVerb::NegErr,
        }
    }
}

impl FromJson for RelayResponseFrame {
    fn from_json(value: &Json) -> Result<Self, String> {
        let r = "RelayResponseFrame";
        let verb: RelayFrameVerb = field(value, r, "verb")?;
        let v = verb.as_str();
        let sub = || -> Result<String, String> { present(field(value, r, "subscriptionId")?, v, "subscriptionId") };
        let prefix: Option<String> = field(value, r, "prefix")?;
        let message = || -> Result<String, String> { present(field(value, r, "message")?, v, "message") };
        Ok(match verb {
            RelayFrameVerb::Unrecognized => return Err(format!("{r}: a verb this crate does not know")),
            RelayFrameVerb::Event => {
                RelayResponseFrame::Event { subscription_id: sub()?, event: present(field(value, r, "event")?, v, "event")? }
            }
            RelayFrameVerb::Ok => RelayResponseFrame::Ok {
                event_id: field(value, r, "eventId")?,
                accepted: present(field(value, r, "accepted")?, v, "accepted")?,
                prefix,
                message: message()?,
            },
            RelayFrameVerb::Eose => RelayResponseFrame::Eose { subscription_id: sub()? },
            RelayFrameVerb::Closed => RelayResponseFrame::Closed { subscription_id: sub()?, prefix, message: message()? },
            RelayFrameVerb::Notice => RelayResponseFrame::Notice { prefix, message: message()? },
            RelayFrameVerb::Auth => RelayResponseFrame::Auth { challenge: present(field(value, r, "challenge")?, v, "challenge")? },
            RelayFrameVerb::Count => {
                RelayResponseFrame::Count { subscription_id: sub()?, count: present(field(value, r, "count")?, v, "count")? }
            }
            RelayFrameVerb::NegMsg => RelayResponseFrame::NegMsg {
                subscription_id: sub()?,
                negentropy: present(field(value, r, "negentropy")?, v, "negentropy")?,
            },
            RelayFrameVerb::NegErr => RelayResponseFrame::NegErr { subscription_id: sub()?, prefix, message: message()? },
        })
    }
}

impl ToJson for RelayResponseFrame {
    /// The record form the C ABI reads: the verb and every field, null where the verb has none.
    fn to_json(&self) -> Json {
        let mut sub = Json::Null;
        let mut event = Json::Null;
        let mut event_id = Json::Null;
        let mut accepted = Json::Null;
        let mut prefix_json = Json::Null;
        let mut message_json = Json::Null;
        let mut challenge_json = Json::Null;
        let mut count_json = Json::Null;
        let mut negentropy_json = Json::Null;
        match self {
            RelayResponseFrame::Event { subscription_id, event: e } => {
                sub = Json::text(subscription_id);
                event = e.to_json();
            }
            RelayResponseFrame::Ok { event_id: id, accepted: a, prefix, message } => {
                event_id = id.to_json();
                accepted = Json::Bool(*a);
                prefix_json = prefix.to_json();
                message_json = Json::text(message);
            }
            RelayResponseFrame::Eose { subscription_id } => sub = Json::text(subscription_id),
            RelayResponseFrame::Closed { subscription_id, prefix, message }
            | RelayResponseFrame::NegErr { subscription_id, prefix, message } => {
                sub = Json::text(subscription_id);
                prefix_json = prefix.to_json();
                message_json = Json::text(message);
            }
            RelayResponseFrame::Notice { prefix, message } => {
                prefix_json = prefix.to_json();
                message_json = Json::text(message);
            }
            RelayResponseFrame::Auth { challenge } => challenge_json = Json::text(challenge),
            RelayResponseFrame::Count { subscription_id, count } => {
                sub = Json::text(subscription_id);
                count_json = count.to_json();
            }
            RelayResponseFrame::NegMsg { subscription_id, negentropy } => {
                sub = Json::text(subscription_id);
                negentropy_json = Json::text(negentropy);
            }
        }
        Json::Object(vec![
            ("verb".to_owned(), Json::text(self.verb().as_str())),
            ("subscriptionId".to_owned(), sub),
            ("event".to_owned(), event),
            ("eventId".to_owned(), event_id),
            ("accepted".to_owned(), accepted),
            ("prefix".to_owned(), prefix_json),
            ("message".to_owned(), message_json),
            ("challenge".to_owned(), challenge_json),
            ("count".to_owned(), count_json),
            ("negentropy".to_owned(), negentropy_json),
        ])
    }
}
