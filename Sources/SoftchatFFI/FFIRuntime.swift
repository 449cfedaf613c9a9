// The runtime of the C ABI: handle boxes with a lock each, error reporting through
// `softchat_error **`, argument decoding and result encoding. The exports themselves are
// generated from Schema/ at build time (SoftchatFFIExports.swift, by SoftchatContractPlugin).
// Portable: the WebAssembly build (scripts/build/build-wasm) compiles this file, the hand-written
// codecs of FFIBindings.swift and the portable exports as Embedded Swift, so it uses typed
// throws, no existentials and no C library (strings are allocated and freed by Swift).
import SoftchatCore
import SoftchatJSON
import Synchronization

/// A failure the FFI layer itself detects (an argument that does not decode, a null handle),
/// with the entry point's stable error code. The C ABI carries the code and the message only.
func ffiFailure(_ code: String, _ message: String) -> SoftchatError {
    SoftchatError(SoftchatErrorCode(rawValue: code), message, operation: .relayWire)
}

/// The C struct `softchat_error { char *code; char *message; }`.
struct FFIErrorStruct {
    var code: UnsafeMutablePointer<CChar>?
    var message: UnsafeMutablePointer<CChar>?
}

/// An opaque handle: the value and a lock that serializes every call made through the handle,
/// so concurrent use from several threads of a Kotlin or Node host never interleaves.
final class FFIHandle<T>: @unchecked Sendable {
    // @unchecked: `value` is only touched under `lock`.
    private let lock = Mutex(())
    let value: T

    init(_ value: T) {
        self.value = value
    }

    func withLock<R>(_ body: () throws(SoftchatError) -> R) throws(SoftchatError) -> R {
        try lock.withLock { _ throws(SoftchatError) -> R in try body() }
    }

    static func retain(_ value: T) -> UnsafeMutableRawPointer {
        Unmanaged.passRetained(FFIHandle(value)).toOpaque()
    }

    /// The handle behind `pointer`; `type` names it in the error (Embedded Swift has no `T.self` text).
    static func unwrap(_ pointer: UnsafeMutableRawPointer?, type: String, code: String) throws(SoftchatError) -> FFIHandle<T> {
        guard let pointer else { throw ffiFailure(code, "null \(type) handle") }
        return Unmanaged<FFIHandle<T>>.fromOpaque(pointer).takeUnretainedValue()
    }

    static func release(_ pointer: UnsafeMutableRawPointer?) {
        guard let pointer else { return }
        Unmanaged<FFIHandle<T>>.fromOpaque(pointer).release()
    }
}

/// A NUL-terminated copy of `s`, freed by `ffiFree` (`softchat_string_free`).
func ffiDuplicate(_ s: String) -> UnsafeMutablePointer<CChar>? {
    var s = s
    return s.withUTF8 { utf8 in
        let out = UnsafeMutablePointer<CChar>.allocate(capacity: utf8.count + 1)
        if let base = utf8.baseAddress {
            base.withMemoryRebound(to: CChar.self, capacity: utf8.count) { out.update(from: $0, count: utf8.count) }
        }
        out[utf8.count] = 0
        return out
    }
}

/// Frees a string from `ffiDuplicate`.
func ffiFree(_ p: UnsafeMutablePointer<CChar>?) { p?.deallocate() }

/// Runs one export: on failure stores a `softchat_error` (when `error` is non-null) and
/// returns `fallback`.
func ffiCall<R>(
    _ errorOut: UnsafeMutablePointer<UnsafeMutableRawPointer?>?, _ symbol: String, fallback: R,
    _ body: () throws(SoftchatError) -> R
) -> R {
    errorOut?.pointee = nil
    do {
        return try body()
    } catch {
        ffiReport(errorOut, code: error.code.rawValue, message: error.message)
    }
    return fallback
}

func ffiReport(_ error: UnsafeMutablePointer<UnsafeMutableRawPointer?>?, code: String, message: String) {
    guard let error else { return }
    let s = UnsafeMutablePointer<FFIErrorStruct>.allocate(capacity: 1)
    s.initialize(to: FFIErrorStruct(code: ffiDuplicate(code), message: ffiDuplicate(message)))
    error.pointee = UnsafeMutableRawPointer(s)
}

// MARK: Arguments and results

protocol FFIEncodable {
    var ffiJSON: JSONValue { get }
}

protocol FFIDecodable {
    init(ffi value: JSONValue, code: String) throws(SoftchatError)
}

func ffiArgument<T: FFIDecodable>(_ pointer: UnsafePointer<CChar>?, _ name: String, raw: Bool, code: String) throws(SoftchatError) -> T {
    guard let pointer else { return try T(ffi: .null, code: code) }
    let text = String(cString: pointer)
    if raw { return try T(ffi: .string(text), code: code) }
    let value: JSONValue
    do {
        value = try JSONReader().parse(text)
    } catch {
        throw ffiFailure(code, "argument \(name) is not JSON: \(error.description)")
    }
    do {
        return try T(ffi: value, code: code)
    } catch {
        throw ffiFailure(error.code.rawValue, "argument \(name): \(error.message)")
    }
}

func ffiResult<T: FFIEncodable>(_ value: T) -> UnsafeMutablePointer<CChar>? {
    ffiDuplicate(value.ffiJSON.jsonText)
}

func ffiObject(_ value: JSONValue, _ type: String, code: String) throws(SoftchatError) -> JSONObject {
    guard let o = value.objectValue else { throw ffiFailure(code, "\(type) must be a JSON object, not \(value.typeName)") }
    return o
}

func ffiField<T: FFIDecodable>(_ o: JSONObject, _ key: String, in type: String, code: String) throws(SoftchatError) -> T {
    do {
        return try T(ffi: o[key] ?? .null, code: code)
    } catch {
        throw ffiFailure(error.code.rawValue, "\(type).\(key): \(error.message)")
    }
}

extension String: FFIEncodable, FFIDecodable {
    var ffiJSON: JSONValue { .string(self) }
    init(ffi value: JSONValue, code: String) throws(SoftchatError) {
        guard let s = value.stringValue else { throw ffiFailure(code, "expected a string, not \(value.typeName)") }
        self = s
    }
}

extension Bool: FFIEncodable, FFIDecodable {
    var ffiJSON: JSONValue { .bool(self) }
    init(ffi value: JSONValue, code: String) throws(SoftchatError) {
        guard let b = value.boolValue else { throw ffiFailure(code, "expected a boolean, not \(value.typeName)") }
        self = b
    }
}

extension Int64: FFIEncodable, FFIDecodable {
    var ffiJSON: JSONValue { .integer(self) }
    init(ffi value: JSONValue, code: String) throws(SoftchatError) {
        guard let n = value.int64Value else { throw ffiFailure(code, "expected an integer, not \(value.typeName)") }
        self = n
    }
}

extension Int: FFIEncodable, FFIDecodable {
    var ffiJSON: JSONValue { .integer(Int64(self)) }
    init(ffi value: JSONValue, code: String) throws(SoftchatError) {
        guard let n = value.int64Value, let i = Int(exactly: n) else { throw ffiFailure(code, "expected an integer, not \(value.typeName)") }
        self = i
    }
}

extension Array: FFIEncodable where Element: FFIEncodable {
    var ffiJSON: JSONValue { .array(map { $0.ffiJSON }) }
}

extension Array: FFIDecodable where Element: FFIDecodable {
    init(ffi value: JSONValue, code: String) throws(SoftchatError) {
        guard let a = value.arrayValue else { throw ffiFailure(code, "expected an array, not \(value.typeName)") }
        var out: [Element] = []
        out.reserveCapacity(a.count)
        for (i, v) in a.enumerated() {
            do {
                out.append(try Element(ffi: v, code: code))
            } catch {
                throw ffiFailure(error.code.rawValue, "[\(i)]: \(error.message)")
            }
        }
        self = out
    }
}

extension Optional: FFIEncodable where Wrapped: FFIEncodable {
    var ffiJSON: JSONValue { self?.ffiJSON ?? .null }
}

extension Optional: FFIDecodable where Wrapped: FFIDecodable {
    init(ffi value: JSONValue, code: String) throws(SoftchatError) {
        self = value.isNull ? nil : try Wrapped(ffi: value, code: code)
    }
}

extension FFIEncodable where Self: RawRepresentable, RawValue == String {
    var ffiJSON: JSONValue { .string(rawValue) }
}

extension FFIDecodable where Self: RawRepresentable, RawValue == String {
    init(ffi value: JSONValue, code: String) throws(SoftchatError) {
        guard let s = value.stringValue, let v = Self(rawValue: s) else {
            throw ffiFailure(code, "unknown value \(value.jsonText)")
        }
        self = v
    }
}

// MARK: The fixed exports (not per schema entry)

nonisolated(unsafe) private let checksumCString: UnsafeMutablePointer<CChar> = ffiDuplicate(ffiContractChecksum)!

@_cdecl("softchat_contract_checksum")
public func softchat_contract_checksum() -> UnsafePointer<CChar>? {
    UnsafePointer(checksumCString)
}

@_cdecl("softchat_string_free")
public func softchat_string_free(_ string: UnsafeMutablePointer<CChar>?) {
    ffiFree(string)
}

@_cdecl("softchat_error_free")
public func softchat_error_free(_ error: UnsafeMutableRawPointer?) {
    guard let error else { return }
    let s = error.assumingMemoryBound(to: FFIErrorStruct.self)
    ffiFree(s.pointee.code)
    ffiFree(s.pointee.message)
    s.deinitialize(count: 1)
    s.deallocate()
}

/// A secret argument (a key's hex text) as the caller's own bytes, read in place: never copied
/// into a `String`, which the library could not wipe. Valid during the call only.
struct FFISecretText {
    let utf8: UnsafeRawBufferPointer

    init(_ pointer: UnsafePointer<CChar>?, _ name: String, code: String) throws(SoftchatError) {
        guard let pointer else { throw ffiFailure(code, "argument \(name) is null") }
        var count = 0
        while pointer[count] != 0 { count += 1 }
        utf8 = UnsafeRawBufferPointer(start: pointer, count: count)
    }
}
