//! Calling the C ABI: arguments in, results and errors out, the library check at first use,
//! and the JSON codec traits every generated type implements. Internal to the crate.

use crate::json::Json;
use crate::{SoftchatError, SoftchatErrorCode, CONTRACT_CHECKSUM};
use softchat_sys as sys;
use std::ffi::{c_char, CStr, CString};
use std::ptr;
use std::sync::OnceLock;

/// Reads a value from its JSON form (the C ABI's: the schema's names as keys). `Err` says what
/// was wrong.
pub trait FromJson: Sized {
    fn from_json(value: &Json) -> Result<Self, String>;
}

/// Writes a value in its JSON form (the C ABI's: the schema's names as keys).
pub trait ToJson {
    fn to_json(&self) -> Json;
}

static LIBRARY: OnceLock<Result<(), String>> = OnceLock::new();

/// Checks, once per process, that `libSoftchatFFI` was built from the schema this crate was
/// generated from; a mismatched library is refused before any call reaches it.
pub(crate) fn library() -> Result<(), String> {
    LIBRARY
        .get_or_init(|| {
            // SAFETY: the function returns a static NUL-terminated string.
            let found = unsafe { CStr::from_ptr(sys::softchat_contract_checksum()) };
            let found = found.to_string_lossy();
            if found == CONTRACT_CHECKSUM {
                Ok(())
            } else {
                Err(format!(
                    "libSoftchatFFI was built from schema {found}, this crate from {CONTRACT_CHECKSUM}: rebuild them together"
                ))
            }
        })
        .clone()
}

/// One call into the C ABI: the operation's name (for errors), the code an argument it cannot
/// pass is refused with, and the error slot the call fills.
pub(crate) struct Call {
    pub operation: &'static str,
    pub argument_code: &'static str,
    pub error: *mut sys::softchat_error,
}

impl Call {
    /// Starts a call after the library check.
    pub fn begin(operation: &'static str, argument_code: &'static str) -> Result<Call, SoftchatError> {
        let call = Call { operation, argument_code, error: ptr::null_mut() };
        library().map_err(|message| call.refuse(message))?;
        Ok(call)
    }

    /// Starts a call the schema declares infallible: a mismatched library is a broken install,
    /// reported by a panic that says so.
    pub fn begin_infallible(operation: &'static str, argument_code: &'static str) -> Call {
        match Call::begin(operation, argument_code) {
            Ok(call) => call,
            Err(error) => panic!("{error}"),
        }
    }

    pub fn slot(&mut self) -> *mut *mut sys::softchat_error {
        &mut self.error
    }

    /// An error with the argument code, for an argument that cannot cross (a NUL in text).
    pub fn refuse(&self, message: String) -> SoftchatError {
        SoftchatError::new(SoftchatErrorCode::from_code(self.argument_code), message, self.operation)
    }

    /// A text argument as a C string; text with a NUL byte cannot cross and is refused.
    pub fn text(&self, name: &str, value: &str) -> Result<CString, SoftchatError> {
        CString::new(value).map_err(|_| self.refuse(format!("{name} contains a NUL byte")))
    }

    /// A JSON argument as a C string.
    pub fn json(&self, name: &str, value: &Json) -> Result<CString, SoftchatError> {
        self.text(name, &value.write())
    }

    /// The error the call stored, if any, taken and freed.
    pub fn failure(&mut self) -> Option<SoftchatError> {
        if self.error.is_null() {
            return None;
        }
        // SAFETY: the library stored a valid error; it is freed exactly once, here.
        unsafe {
            let code = take_c(&(*self.error).code);
            let message = take_c(&(*self.error).message);
            sys::softchat_error_free(self.error);
            self.error = ptr::null_mut();
            Some(SoftchatError::new(SoftchatErrorCode::from_code(&code), message, self.operation))
        }
    }

    /// The outcome of a call without a result.
    pub fn finish(mut self) -> Result<(), SoftchatError> {
        match self.failure() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// The outcome of a call that returns JSON text: the text, read and freed.
    pub fn finish_json(mut self, result: *mut c_char) -> Result<Json, SoftchatError> {
        if let Some(error) = self.failure() {
            if !result.is_null() {
                // SAFETY: a result the library returned, freed once.
                unsafe { sys::softchat_string_free(result) };
            }
            return Err(error);
        }
        if result.is_null() {
            return Err(self.broken("no result".into()));
        }
        // SAFETY: a NUL-terminated result string the library returned, freed once after copying.
        let text = unsafe {
            let text = CStr::from_ptr(result).to_string_lossy().into_owned();
            sys::softchat_string_free(result);
            text
        };
        Json::parse(&text).map_err(|why| self.broken(format!("result is not JSON ({why})")))
    }

    /// The outcome of a call that returns JSON text of a known type.
    pub fn finish_value<T: FromJson>(self, result: *mut c_char) -> Result<T, SoftchatError> {
        let operation = self.operation;
        let argument_code = self.argument_code;
        let json = self.finish_json(result)?;
        T::from_json(&json).map_err(|why| {
            SoftchatError::new(
                SoftchatErrorCode::from_code(argument_code),
                format!("the library returned a malformed result: {why}"),
                operation,
            )
        })
    }

    /// The outcome of a call that returns a handle.
    pub fn finish_handle<T>(mut self, handle: *mut T) -> Result<ptr::NonNull<T>, SoftchatError> {
        if let Some(error) = self.failure() {
            return Err(error);
        }
        ptr::NonNull::new(handle).ok_or_else(|| self.broken("no handle".into()))
    }

    fn broken(&self, why: String) -> SoftchatError {
        SoftchatError::new(
            SoftchatErrorCode::from_code(self.argument_code),
            format!("the library broke its contract: {why}"),
            self.operation,
        )
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if !self.error.is_null() {
            // SAFETY: an error nobody took; freed once.
            unsafe { sys::softchat_error_free(self.error) };
        }
    }
}

/// Unwraps the result of a call the schema declares infallible.
pub(crate) fn infallible<T>(result: Result<T, SoftchatError>) -> T {
    match result {
        Ok(value) => value,
        Err(error) => panic!("{error}"),
    }
}

/// Runs the whole body of an `extern "C"` callback trampoline (the listener, the drop of its
/// closure at the final call, any logging) so that no panic unwinds into the library: unwinding
/// out of an `extern "C"` function is undefined behaviour before Rust 1.81 (this crate's
/// rust-version is 1.70) and aborts the host since. A caught panic's payload is dropped inside a
/// second guard, as its own `Drop` may panic too; the payload of that second panic is leaked
/// (forgotten) rather than dropped unguarded.
pub(crate) fn contain(body: impl FnOnce()) {
    if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        if let Err(again) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(payload))) {
            std::mem::forget(again);
        }
    }
}

/// Writes one line to stderr, ignoring a failed write (`eprintln!` panics on one). Called
/// inside `contain` only.
pub(crate) fn warn(message: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{message}");
}

/// # Safety
/// `p` is null or a NUL-terminated string.
unsafe fn take_c(p: &*mut c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: the caller's promise.
        unsafe { CStr::from_ptr(*p) }.to_string_lossy().into_owned()
    }
}

/// Overwrites a secret's bytes before they are freed.
pub(crate) fn wipe(secret: CString) {
    let mut bytes = secret.into_bytes();
    for b in bytes.iter_mut() {
        // SAFETY: a valid, aligned pointer into the vector; volatile so the write stays.
        unsafe { ptr::write_volatile(b, 0) };
    }
}

// MARK: codecs of the schema's primitive types

impl FromJson for String {
    fn from_json(value: &Json) -> Result<Self, String> {
        match value {
            Json::String(s) => Ok(s.clone()),
            other => Err(format!("expected a string, found {}", other.write())),
        }
    }
}

impl ToJson for String {
    fn to_json(&self) -> Json {
        Json::String(self.clone())
    }
}

impl ToJson for str {
    fn to_json(&self) -> Json {
        Json::String(self.to_owned())
    }
}

impl FromJson for bool {
    fn from_json(value: &Json) -> Result<Self, String> {
        match value {
            Json::Bool(b) => Ok(*b),
            other => Err(format!("expected a bool, found {}", other.write())),
        }
    }
}

impl ToJson for bool {
    fn to_json(&self) -> Json {
        Json::Bool(*self)
    }
}

impl FromJson for i64 {
    fn from_json(value: &Json) -> Result<Self, String> {
        match value {
            Json::Number(n) => n.parse().map_err(|_| format!("expected an integer, found {n}")),
            other => Err(format!("expected an integer, found {}", other.write())),
        }
    }
}

impl ToJson for i64 {
    fn to_json(&self) -> Json {
        Json::int(*self)
    }
}

impl<T: FromJson> FromJson for Vec<T> {
    fn from_json(value: &Json) -> Result<Self, String> {
        match value {
            Json::Array(items) => items.iter().map(T::from_json).collect(),
            other => Err(format!("expected an array, found {}", other.write())),
        }
    }
}

impl<T: ToJson> ToJson for [T] {
    fn to_json(&self) -> Json {
        Json::Array(self.iter().map(ToJson::to_json).collect())
    }
}

impl<T: ToJson> ToJson for Vec<T> {
    fn to_json(&self) -> Json {
        self.as_slice().to_json()
    }
}

impl<T: FromJson> FromJson for Option<T> {
    fn from_json(value: &Json) -> Result<Self, String> {
        match value {
            Json::Null => Ok(None),
            other => T::from_json(other).map(Some),
        }
    }
}

impl<T: ToJson> ToJson for Option<T> {
    fn to_json(&self) -> Json {
        match self {
            None => Json::Null,
            Some(value) => value.to_json(),
        }
    }
}

impl FromJson for Json {
    fn from_json(value: &Json) -> Result<Self, String> {
        Ok(value.clone())
    }
}

/// A field of a record: absent and null are both `Json::Null` (an optional field's none).
pub(crate) fn field<T: FromJson>(object: &Json, record: &str, name: &str) -> Result<T, String> {
    if !matches!(object, Json::Object(_)) {
        return Err(format!("{record}: expected an object"));
    }
    T::from_json(object.get(name).unwrap_or(&Json::Null)).map_err(|why| format!("{record}.{name}: {why}"))
}

/// A list of texts (`[string]`, `[json]`, `[EventId]`) as a JSON array.
pub(crate) fn text_list<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> Json {
    Json::Array(items.into_iter().map(|s| Json::String(s.as_ref().to_owned())).collect())
}

/// Output of a library built from a newer schema: values this crate was not generated with decode
/// to `Unrecognized` instead of failing the whole value (and with it a listener's update).
#[cfg(test)]
mod newer_library_output {
    use super::FromJson;
    use crate::json::Json;
    use crate::{DeliveryState, ManagedTransportActivity, ManagedTransportActivityKind, PublishIntentStatus};

    #[test]
    fn an_enum_value_a_newer_library_adds_decodes_as_unrecognized() {
        let state = DeliveryState::from_json(&Json::String("expired".into())).unwrap();
        assert_eq!(state, DeliveryState::Unrecognized);
        assert_eq!(state.as_str(), "");
        assert!(!DeliveryState::ALL.contains(&DeliveryState::Unrecognized));
        assert_eq!(DeliveryState::from_json(&Json::String("accepted".into())).unwrap(), DeliveryState::Accepted);
    }

    #[test]
    fn a_record_holding_a_newer_enum_value_still_decodes() {
        let status = Json::parse(
            r#"{"intentId":"i","eventId":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","relayUrl":"wss://r","state":"expired","category":"quota","message":"m","attempts":1}"#,
        )
        .unwrap();
        let decoded = PublishIntentStatus::from_json(&status);
        assert!(decoded.is_ok(), "{decoded:?}");
        let decoded = decoded.unwrap();
        assert_eq!(decoded.state, DeliveryState::Unrecognized);
        assert_eq!(decoded.category, Some(crate::DeliveryCategory::Unrecognized));
    }

    #[test]
    fn a_union_kind_a_newer_library_adds_decodes_and_has_no_variant() {
        let activity = ManagedTransportActivity::from_json(&Json::parse(r#"{"kind":"relayMigrated","relayUrl":"wss://r"}"#).unwrap()).unwrap();
        assert_eq!(activity.kind, ManagedTransportActivityKind::Unrecognized);
        assert_eq!(activity.relay_url.as_deref(), Some("wss://r"));
        assert!(activity.into_variant().is_none());
    }
}
