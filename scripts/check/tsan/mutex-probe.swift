// A correct program: four threads touch one dictionary, only ever inside Mutex.withLock.
// scripts/check/tsan-ffi runs it under ThreadSanitizer first: on toolchains whose Synchronization
// Mutex is invisible to TSan (its futex lock is not instrumented), TSan reports a race here, and
// only then are the Mutex-guarded sites in scripts/check/tsan/suppressions.txt suppressed.
import Dispatch
import Synchronization

final class Box: Sendable { let map = Mutex([Int: Int]()) }
let box = Box()
DispatchQueue.concurrentPerform(iterations: 4) { thread in
    for i in 0..<20_000 {
        if box.map.withLock({ $0[i % 64] }) == nil { box.map.withLock { $0[i % 64] = thread } }
        box.map.withLock { if $0.count > 32 { $0.removeAll(keepingCapacity: true) } }
    }
}
print("mutex probe done")
