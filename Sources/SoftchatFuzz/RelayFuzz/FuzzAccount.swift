import SoftchatCore
import SoftchatSync

/// The account for the relay fuzzer: in memory, ingestion only (the engine runs with
/// `publishes` off, so no claim ever holds work). It keeps what the engine's invariants are
/// checked against: every event committed, every sync state and cursor, NIP-77 records.
final class FuzzAccount {
    var events: [String: VerifiedEvent] = [:]
    var states: [String: (filters: [String], state: String)] = [:]
    var cursors: [String: Int64] = [:]
    var negentropyRecords: [String: NegentropySupportRecord] = [:]
    let policy: [(id: String, filters: [String])]

    init(policy: [(id: String, filters: [String])], cursor: Int64, relayURLs: [String]) {
        self.policy = policy
        for url in relayURLs { for entry in policy { cursors[key(url, entry.id)] = cursor } }
    }

    func key(_ relay: String, _ sub: String) -> String { relay + "\u{0}" + sub }

    func answer(_ request: AccountRequest) -> AccountReply {
        switch request {
        case .group(let requests):
            return .group(requests.map(answer))
        case .loadSubscriptions(let urls):
            var out: [String: [EngineSubscription]] = [:]
            for url in urls {
                out[url] = policy.map { entry in
                    let stored = states[key(url, entry.id)]
                    return EngineSubscription(
                        subscriptionID: entry.id, filtersJSON: entry.filters, storedFiltersJSON: stored?.filters,
                        storedStateJSON: stored?.state, cursor: cursors[key(url, entry.id)])
                }
            }
            return .subscriptions(out)
        case .claim:
            return .claimed(nil)
        case .renew, .markWritten, .applyResults, .release:
            return .failed(.invalidDeliveryState("the fuzzer's account holds no delivery work", operation: .relayPublish))
        case .commit(let batch, let syncStates, _):
            var result = IngestionResult()
            var seen: Set<String> = []
            for e in batch where seen.insert(e.id).inserted {
                if events[e.id] != nil {
                    result.alreadyPresent.append(e.id)
                } else {
                    events[e.id] = e
                    result.accepted.append(e.id)
                }
            }
            for s in syncStates {
                let k = key(s.relayURL, s.subscriptionID)
                states[k] = (s.filtersJSON, s.stateJSON)
                if let c = s.cursor { cursors[k] = max(cursors[k] ?? c, c) }
            }
            return .committed(result)
        case .loadNegentropySupport(let urls):
            return .negentropySupport(negentropyRecords.filter { urls.contains($0.key) })
        case .reconciliationItems(_, _, let filtersJSON):
            return .reconciliationItems(
                filtersJSON.map { text in
                    guard let filter = try? RelayFilter.fromJSON(text) else { return [] }
                    return events.values.filter { filter.matches($0) }.compactMap { NegentropyItem(createdAt: $0.createdAt, idHex: $0.id) }
                })
        case .recordNegentropySupport(let record):
            negentropyRecords[record.relayURL] = record
            return .done
        }
    }
}

/// A relay that does what NIP-01 and NIP-77 say, and nothing else: it holds `stored`, answers
/// each REQ newest first up to the filter's `limit` then EOSE, and each NEG-OPEN with a
/// reconciliation over what its filter matches.
struct HonestRelay {
    /// Newest first, ties by lowest id.
    let stored: [VerifiedEvent]
    private var reconcilers: [String: Negentropy] = [:]

    init(_ events: [VerifiedEvent]) {
        stored = events.sorted { $0.createdAt != $1.createdAt ? $0.createdAt > $1.createdAt : $0.id < $1.id }
    }

    mutating func dropConnection() { reconcilers.removeAll() }

    mutating func receive(_ text: String) -> [String] {
        guard let frame = try? parseClientRelayFrame(text) else { return [RelayResponseFrame.notice(RelayMessage("invalid: cannot parse")).toJSON()] }
        switch frame {
        case .req(let id, let filters):
            var out: [String] = []
            var sent: Set<String> = []
            for filter in filters {
                var count = 0
                for e in stored where filter.matches(e) {
                    if let limit = filter.limit, count >= limit { break }
                    count += 1
                    if sent.insert(e.id).inserted { out.append(RelayResponseFrame.event(subscriptionID: id, event: e).toJSON()) }
                }
            }
            return out + [RelayResponseFrame.eose(subscriptionID: id).toJSON()]
        case .event(let e):
            return [RelayResponseFrame.ok(eventID: e.id, accepted: true, message: RelayMessage("")).toJSON()]
        case .events(let list):
            return list.map { RelayResponseFrame.ok(eventID: $0.id, accepted: true, message: RelayMessage("")).toJSON() }
        case .close, .auth, .count:
            return []
        case .negOpen(let id, let filter, let message):
            let items = stored.filter { filter.matches($0) }.compactMap { NegentropyItem(createdAt: $0.createdAt, idHex: $0.id) }
            reconcilers[id] = Negentropy(storage: NegentropyStorage(items: items), frameSizeLimit: 0)
            return negentropyAnswer(id, message)
        case .negMessage(let id, let message):
            return negentropyAnswer(id, message)
        case .negClose(let id):
            reconcilers[id] = nil
            return []
        }
    }

    mutating func negentropyAnswer(_ id: String, _ message: [UInt8]) -> [String] {
        guard let reconciler = reconcilers[id], let answer = try? reconciler.respond(message) else {
            reconcilers[id] = nil
            return [RelayResponseFrame.negError(subscriptionID: id, message: RelayMessage("error: bad message")).toJSON()]
        }
        return [RelayResponseFrame.negMessage(subscriptionID: id, message: answer).toJSON()]
    }
}
