/// How the account lays out its events and their tag index on disk.
///
/// Accounts before schema 9 kept events in a `WITHOUT ROWID` table clustered by the 64-hex id,
/// and keyed every tag row by that id. Ids are random, so at a million events each batch of 256
/// dirtied hundreds of pages spread over the whole file, and ingest slowed five times as the
/// account grew. From schema 9 events are a rowid table in arrival order (`seq`, from
/// `AUTOINCREMENT`, so never reused): a batch appends to the end of the table. The id is found through a narrow index on its first 8 bytes
/// (`id_key`, 16 bytes an entry with the rowid, against about 75 for the hex text) and the row's
/// full id decides, so a prefix shared by two ids (one in 2^32 at 2^32 events) costs one more
/// row read and never a wrong answer. Tag rows carry the event's `seq`.
enum EventLayout: Equatable {
    /// Schema 1–8: events keyed by id; `tagTimes` from schema 5, when tag rows gained their
    /// event's `created_at`. Written only by upgrade tests and fixtures of old accounts.
    case byID(tagTimes: Bool)
    /// Schema 9 and later: events by arrival, tags by `seq`.
    case byArrival

    init(version: Int) {
        self = version >= 9 ? .byArrival : .byID(tagTimes: version >= 5)
    }

    /// The first 8 bytes of a 64-hex event id as a signed integer: the key of `events_id_key`.
    /// Characters that are not lowercase hex count as 0 (a stored id is always lowercase hex).
    static func idKey(_ id: String) -> Int64 {
        var key: UInt64 = 0
        var digits = 0
        for byte in id.utf8 {
            guard digits < 16 else { break }
            let nibble: UInt8 =
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
                default: 0
                }
            key = key << 4 | UInt64(nibble)
            digits += 1
        }
        return Int64(bitPattern: key << (4 * UInt64(16 - digits)))
    }

    /// ``idKey(_:)`` as an SQL expression over a text `column`, for the migration that fills
    /// `id_key` for events already stored (SQLite has no hex-to-integer function).
    static func idKeySQL(_ column: String) -> String {
        (0..<16).map { "(max(instr('0123456789abcdef', substr(\(column), \($0 + 1), 1)) - 1, 0) << \(60 - 4 * $0))" }
            .joined(separator: " | ")
    }

    /// The SQL condition that selects the event row with `id` (bound as `?1` to its key and `?2`
    /// to the id text): the narrow index first, the full id deciding.
    var idCondition: String {
        switch self {
        case .byID: "id = ?2"
        case .byArrival: "id_key = ?1 AND id = ?2"
        }
    }
}
