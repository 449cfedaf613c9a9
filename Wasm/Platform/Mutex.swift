/// The WebAssembly build's stand-in for `Synchronization.Mutex`, which Embedded Swift does not
/// offer for wasm32 (one thread, no atomics): the same `init` and `withLock`, with nothing to
/// lock. The core's `RelaySession`, `EventContent` and `PublicKeyCache` use it unchanged.
package final class Mutex<Value>: @unchecked Sendable {
    // @unchecked: the wasm module runs on one thread (a Worker or Node's main thread).
    // A class rather than a ~Copyable struct: a noncopyable type's deinit cannot be used from
    // another module in Embedded Swift, and the FFI module holds these too.
    private var value: Value

    package init(_ initialValue: consuming Value) {
        value = initialValue
    }

    package func withLock<Result, E: Error>(_ body: (inout Value) throws(E) -> Result) throws(E) -> Result {
        try body(&value)
    }
}
