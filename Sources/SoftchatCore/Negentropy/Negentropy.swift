/// One step of the initiator: what to send next, and what this step found out.
public struct NegentropyStep: Sendable, Hashable {
    /// The next message for the responder; nil when every range is settled (send NEG-CLOSE).
    public var next: [UInt8]?
    /// Ids this side has and the responder lacks.
    public var have: [NegentropyID]
    /// Ids the responder has and this side lacks.
    public var need: [NegentropyID]
}

/// Negentropy v1 range-based set reconciliation over one `NegentropyStorage`, in either role.
/// It is a pure function of the storage and the message in hand (the initiator keeps no state
/// between rounds: each response carries the ranges still open), so a round can be retried or
/// abandoned freely.
///
/// - Initiator: `initiate()` → send; on each response `reconcile(_:)` → collect `have` and
///   `need`, send `next` until it is nil.
/// - Responder: `respond(_:)` to each message.
///
/// Ranges whose fingerprints differ are split into 16 buckets, or listed whole below 32 items.
/// With a `frameSizeLimit`, no message is longer than it: when the next range would pass
/// `frameSizeLimit − 200` bytes, the rest of the space is sent as one fingerprint, which the
/// other side splits in the next round.
public struct Negentropy: Sendable {
    /// This side's items.
    public let storage: NegentropyStorage
    /// 0 (no limit) or at least 4,096 bytes of binary message.
    public let frameSizeLimit: Int
    /// Fingerprints by summing each range's ids instead of the prefix sums: the baseline
    /// `softchat-dev bench negentropy` measures the prefix sums against.
    package var rescansFingerprints = false

    static let buckets = 16

    /// A reconciler over this side's items, its messages bounded when `frameSizeLimit` is set.
    ///
    /// - Parameters:
    ///   - storage: This side's items.
    ///   - frameSizeLimit: The largest binary message to produce: 0 (or less) for no limit; a
    ///     positive value below 4,096 is raised to 4,096.
    public init(storage: NegentropyStorage, frameSizeLimit: Int = 0) {
        self.storage = storage
        self.frameSizeLimit = frameSizeLimit <= 0 ? 0 : max(4096, frameSizeLimit)
    }

    /// The initiator's first message: the whole space, split.
    ///
    /// - Returns: The binary message to send with NEG-OPEN.
    public func initiate() -> [UInt8] {
        var writer = NegentropyWriter()
        splitRange(0, storage.count, .infinity, into: &writer)
        return writer.bytes
    }

    /// The initiator's step on a response.
    ///
    /// - Parameter response: The responder's binary message (from its NEG-MSG).
    /// - Returns: The ids this round found only on this side (`have`) and only on the responder's
    ///   (`need`), and the next message to send, nil when every range is settled.
    /// - Throws: ``SoftchatError`` with code `invalid_negentropy_message` for a message that does not
    ///   decode, including a responder's one-byte answer naming another protocol version.
    public func reconcile(_ response: [UInt8]) throws(SoftchatError) -> NegentropyStep {
        let message = try NegentropyMessage.decode(response)
        var have: [NegentropyID] = []
        var need: [NegentropyID] = []
        let out = process(message, initiator: true, have: &have, need: &need)
        return NegentropyStep(next: out.count > 1 ? out : nil, have: have, need: need)
    }

    /// The responder's answer. A message of another protocol version is answered with the one
    /// byte 0x61 (the version this side speaks), as the protocol asks.
    ///
    /// - Parameter query: The initiator's binary message (from its NEG-OPEN or NEG-MSG).
    /// - Returns: The binary message to send back with NEG-MSG: the ranges still open, or the version
    ///   byte alone when every range matched.
    /// - Throws: ``SoftchatError`` with code `invalid_negentropy_message` for a message that does not
    ///   decode.
    public func respond(_ query: [UInt8]) throws(SoftchatError) -> [UInt8] {
        if let first = query.first, first != NegentropyMessage.version, first & 0xF0 == 0x60 {
            return [NegentropyMessage.version]
        }
        let message = try NegentropyMessage.decode(query)
        var have: [NegentropyID] = []
        var need: [NegentropyID] = []
        return process(message, initiator: false, have: &have, need: &need)
    }

    // MARK: The algorithm

    private func exceeds(_ size: Int) -> Bool { frameSizeLimit != 0 && size > frameSizeLimit - 200 }

    private func fingerprint(_ lower: Int, _ upper: Int) -> NegentropyFingerprint {
        rescansFingerprints ? storage.scannedFingerprint(lower, upper) : storage.fingerprint(lower, upper)
    }

    private func process(_ message: NegentropyMessage, initiator: Bool, have: inout [NegentropyID], need: inout [NegentropyID]) -> [UInt8] {
        let items = storage.items
        var out = NegentropyWriter()
        var prevIndex = 0
        var prevBound = NegentropyBound(timestamp: 0)
        var skip = false
        for range in message.ranges {
            var o = out.continuing()
            // A skip pending from the ranges before this one, and whether this range's output
            // went into `out` directly (the responder's id list) rather than through `o`.
            let skipBefore = skip
            var wroteThrough = false
            func flushSkip() {
                guard skip else { return }
                skip = false
                o.range(NegentropyRange(upperBound: prevBound, payload: .skip))
            }
            let lower = prevIndex
            var upper = storage.lowerBound(range.upperBound, from: prevIndex, to: storage.count)
            switch range.payload {
            case .skip:
                skip = true
            case .fingerprint(let theirs):
                if fingerprint(lower, upper) == theirs {
                    skip = true
                } else {
                    flushSkip()
                    splitRange(lower, upper, range.upperBound, into: &o)
                }
            case .idList(let theirIDs):
                if initiator {
                    let theirs = Set(theirIDs)
                    var ours = Set<NegentropyID>(minimumCapacity: upper - lower)
                    for i in lower..<upper {
                        ours.insert(items[i].id)
                        if !theirs.contains(items[i].id) { have.append(items[i].id) }
                    }
                    for id in theirIDs where !ours.contains(id) { need.append(id) }
                    skip = true
                } else {
                    flushSkip()
                    var endBound = range.upperBound
                    var ids: [NegentropyID] = []
                    for i in lower..<upper {
                        if exceeds(out.count + o.count + 32 * ids.count) {
                            endBound = NegentropyBound(timestamp: items[i].timestamp, idPrefix: items[i].id.bytes)
                            upper = i
                            break
                        }
                        ids.append(items[i].id)
                    }
                    o.range(NegentropyRange(upperBound: endBound, payload: .idList(ids)))
                    out.append(o)
                    o = out.continuing()
                    wroteThrough = true
                }
            }
            if exceeds(out.count + o.count) {
                // This range's output does not fit: the ranges settled before it are closed
                // with their skip, and everything from it on becomes one fingerprint (exact,
                // so nothing already reported comes back in a later round).
                var from = upper
                if !wroteThrough {
                    if skipBefore { out.range(NegentropyRange(upperBound: prevBound, payload: .skip)) }
                    from = lower
                }
                out.range(NegentropyRange(upperBound: .infinity, payload: .fingerprint(fingerprint(from, storage.count))))
                return out.bytes
            }
            out.append(o)
            prevIndex = upper
            prevBound = range.upperBound
        }
        return out.bytes
    }

    /// Fingerprints of 16 buckets of `lower..<upper`, or its ids when it holds fewer than 32.
    private func splitRange(_ lower: Int, _ upper: Int, _ upperBound: NegentropyBound, into o: inout NegentropyWriter) {
        let items = storage.items
        let count = upper - lower
        if count < 2 * Self.buckets {
            o.range(NegentropyRange(upperBound: upperBound, payload: .idList(items[lower..<upper].map { $0.id })))
            return
        }
        let perBucket = count / Self.buckets
        let extra = count % Self.buckets
        var current = lower
        for bucket in 0..<Self.buckets {
            let size = perBucket + (bucket < extra ? 1 : 0)
            let digest = fingerprint(current, current + size)
            current += size
            let bound = current == upper ? upperBound : NegentropyBound.minimal(between: items[current - 1], and: items[current])
            o.bound(bound)
            o.fingerprint(digest)
        }
    }
}
