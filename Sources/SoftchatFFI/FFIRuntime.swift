// The runtime of the C ABI: handle boxes with a lock each, error reporting through
// `softchat_error **`, argument decoding and result encoding. The exports themselves are
// generated from Schema/ at build time (SoftchatFFIExports.swift, by SoftchatContractPlugin).
import SoftchatCore
import SoftchatJSON
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A failure the FFI layer itself detects (an argument that does not decode, a null handle),
/// reported with the entry point's stable error code.
struct FFIFailure: Error {
    let code: String
    let message: String
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
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    let value: T

    init(_ value: T) {
        self.value = value
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func withLock<R>(_ body: () throws -> R) throws -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    static func retain(_ value: T) -> UnsafeMutableRawPointer {
        Unmanaged.passRetained(FFIHandle(value)).toOpaque()
    }

    static func unwrap(_ pointer: UnsafeMutableRawPointer?, code: String) throws -> FFIHandle<T> {
        guard let pointer else { throw FFIFailure(code: code, message: "null \(T.self) handle") }
        return Unmanaged<FFIHandle<T>>.fromOpaque(pointer).takeUnretainedValue()
    }

    static func release(_ pointer: UnsafeMutableRawPointer?) {
        guard let pointer else { return }
        Unmanaged<FFIHandle<T>>.fromOpaque(pointer).release()
    }
}

func ffiDuplicate(_ s: String) -> UnsafeMutablePointer<CChar>? { strdup(s) }

/// Runs one export: on failure stores a `softchat_error` (when `error` is non-null) and
/// returns `fallback`. Errors are SoftchatError (the core's stable code) or FFIFailure.
func ffiCall<R>(
    _ errorOut: UnsafeMutablePointer<UnsafeMutableRawPointer?>?, _ symbol: String, fallback: R, _ body: () throws -> R
) -> R {
    errorOut?.pointee = nil
    do {
        return try body()
    } catch let e as SoftchatError {
        ffiReport(errorOut, code: e.code.rawValue, message: e.message)
    } catch let e as FFIFailure {
        ffiReport(errorOut, code: e.code, message: "\(symbol): \(e.message)")
    } catch {
        ffiReport(errorOut, code: SoftchatErrorCode.allCases[0].rawValue, message: "\(symbol): \(error)")
    }
    return fallback
}

func ffiReport(_ error: UnsafeMutablePointer<UnsafeMutableRawPointer?>?, code: String, message: String) {
    guard let error else { return }
    let s = UnsafeMutablePointer<FFIErrorStruct>.allocate(capacity: 1)
    s.initialize(to: FFIErrorStruct(code: strdup(code), message: strdup(message)))
    error.pointee = UnsafeMutableRawPointer(s)
}

// MARK: Arguments and results

protocol FFIEncodable {
    var ffiJSON: JSONValue { get }
}

protocol FFIDecodable {
    init(ffi value: JSONValue, code: String) throws
}

func ffiArgument<T: FFIDecodable>(_ pointer: UnsafePointer<CChar>?, _ name: String, raw: Bool, code: String) throws -> T {
    guard let pointer else { return try T(ffi: .null, code: code) }
    let text = String(cString: pointer)
    if raw { return try T(ffi: .string(text), code: code) }
    let value: JSONValue
    do {
        value = try JSONReader().parse(text)
    } catch {
        throw FFIFailure(code: code, message: "argument \(name) is not JSON: \(error)")
    }
    do {
        return try T(ffi: value, code: code)
    } catch let e as FFIFailure {
        throw FFIFailure(code: e.code, message: "argument \(name): \(e.message)")
    }
}

func ffiResult<T: FFIEncodable>(_ value: T) -> UnsafeMutablePointer<CChar>? {
    strdup(value.ffiJSON.jsonText)
}

func ffiObject(_ value: JSONValue, _ type: String, code: String) throws -> JSONObject {
    guard let o = value.objectValue else { throw FFIFailure(code: code, message: "\(type) must be a JSON object, not \(value.typeName)") }
    return o
}

func ffiField<T: FFIDecodable>(_ o: JSONObject, _ key: String, in type: String, code: String) throws -> T {
    do {
        return try T(ffi: o[key] ?? .null, code: code)
    } catch let e as FFIFailure {
        throw FFIFailure(code: e.code, message: "\(type).\(key): \(e.message)")
    }
}

extension String: FFIEncodable, FFIDecodable {
    var ffiJSON: JSONValue { .string(self) }
    init(ffi value: JSONValue, code: String) throws {
        guard let s = value.stringValue else { throw FFIFailure(code: code, message: "expected a string, not \(value.typeName)") }
        self = s
    }
}

extension Bool: FFIEncodable, FFIDecodable {
    var ffiJSON: JSONValue { .bool(self) }
    init(ffi value: JSONValue, code: String) throws {
        guard let b = value.boolValue else { throw FFIFailure(code: code, message: "expected a boolean, not \(value.typeName)") }
        self = b
    }
}

extension Int64: FFIEncodable, FFIDecodable {
    var ffiJSON: JSONValue { .integer(self) }
    init(ffi value: JSONValue, code: String) throws {
        guard let n = value.int64Value else { throw FFIFailure(code: code, message: "expected an integer, not \(value.typeName)") }
        self = n
    }
}

extension Int: FFIEncodable, FFIDecodable {
    var ffiJSON: JSONValue { .integer(Int64(self)) }
    init(ffi value: JSONValue, code: String) throws {
        guard let n = value.int64Value, let i = Int(exactly: n) else { throw FFIFailure(code: code, message: "expected an integer, not \(value.typeName)") }
        self = i
    }
}

extension Array: FFIEncodable where Element: FFIEncodable {
    var ffiJSON: JSONValue { .array(map(\.ffiJSON)) }
}

extension Array: FFIDecodable where Element: FFIDecodable {
    init(ffi value: JSONValue, code: String) throws {
        guard let a = value.arrayValue else { throw FFIFailure(code: code, message: "expected an array, not \(value.typeName)") }
        var out: [Element] = []
        out.reserveCapacity(a.count)
        for (i, v) in a.enumerated() {
            do {
                out.append(try Element(ffi: v, code: code))
            } catch let e as FFIFailure {
                throw FFIFailure(code: e.code, message: "[\(i)]: \(e.message)")
            }
        }
        self = out
    }
}

extension Optional: FFIEncodable where Wrapped: FFIEncodable {
    var ffiJSON: JSONValue { self?.ffiJSON ?? .null }
}

extension Optional: FFIDecodable where Wrapped: FFIDecodable {
    init(ffi value: JSONValue, code: String) throws {
        self = value.isNull ? nil : try Wrapped(ffi: value, code: code)
    }
}

extension FFIEncodable where Self: RawRepresentable, RawValue == String {
    var ffiJSON: JSONValue { .string(rawValue) }
}

extension FFIDecodable where Self: RawRepresentable, RawValue == String {
    init(ffi value: JSONValue, code: String) throws {
        guard let s = value.stringValue, let v = Self(rawValue: s) else {
            throw FFIFailure(code: code, message: "unknown \(Self.self) value \(value.jsonText)")
        }
        self = v
    }
}

// MARK: The fixed exports (not per schema entry)

nonisolated(unsafe) private let checksumCString: UnsafeMutablePointer<CChar> = strdup(ffiContractChecksum)!

@_cdecl("softchat_contract_checksum")
public func softchat_contract_checksum() -> UnsafePointer<CChar>? {
    UnsafePointer(checksumCString)
}

@_cdecl("softchat_string_free")
public func softchat_string_free(_ string: UnsafeMutablePointer<CChar>?) {
    free(string)
}

@_cdecl("softchat_error_free")
public func softchat_error_free(_ error: UnsafeMutableRawPointer?) {
    guard let error else { return }
    let s = error.assumingMemoryBound(to: FFIErrorStruct.self)
    free(s.pointee.code)
    free(s.pointee.message)
    s.deinitialize(count: 1)
    s.deallocate()
}
