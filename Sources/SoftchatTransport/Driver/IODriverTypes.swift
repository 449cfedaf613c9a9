/// Identifies one connection for the driver's lifetime; chosen by the handler. An id is in
/// use from `open` until its `.closed` or `.information` event has been delivered, or until
/// the handler's own `close`; then it may be opened again.
public struct ConnectionID: Hashable, Sendable, CustomStringConvertible {
    /// The number the handler chose.
    public let rawValue: Int
    /// Names a connection by a number the handler chooses.
    /// - Parameter rawValue: Any number not in use by another connection of the driver.
    public init(_ rawValue: Int) { self.rawValue = rawValue }
    /// `#` and the number, as `#7`.
    public var description: String { "#\(rawValue)" }
}

/// What a connection opened through `IODriver` is for.
public enum ConnectionPurpose: Sendable, Hashable {
    /// TCP (+TLS for wss, +Noise for noise://), then the RFC 6455 client handshake; the
    /// connection then carries text messages until it closes.
    case webSocket
    /// NIP-11: an HTTP GET with `Accept: application/nostr+json` over the same stack (ws→http,
    /// wss→https; for noise:// the GET runs inside the Noise channel as
    /// `RelayInformation.fetch` does), then close. Ends with one `.information` event.
    case relayInformation
}

/// What the driver tells its handler, on the driver thread, in the order it happened per
/// connection.
public enum IOEvent: Sendable {
    /// The WebSocket handshake is complete; sends are carried from now on.
    case opened(ConnectionID)
    /// One complete, UTF-8-valid text message.
    case text(ConnectionID, String)
    /// A message over `ConnectionOptions.maxMessageBytes` arrived and was skipped (never
    /// buffered; the connection goes on): its first bytes (at most 1,024, cut at a byte count
    /// and decoded with replacement) and its size. Proof of life too.
    case oversized(ConnectionID, head: String, bytes: Int)
    /// A pong (or a ping, which the driver answered) arrived: proof of life.
    case pong(ConnectionID)
    /// Bytes arrived that completed no message (part of a large message on a slow link, whose
    /// pong waits behind it): proof of life. At most one per second per connection.
    case bytesArrived(ConnectionID)
    /// Every byte of the send with this token was accepted by the kernel. Tokens of one
    /// connection are reported in the order they were sent.
    case written(ConnectionID, token: Int)
    /// A `.relayInformation` connection finished: the document, or nil when there is none
    /// or it could not be fetched or read. The id is free afterwards; no `.closed` follows.
    case information(ConnectionID, RelayInformation?)
    /// The connection failed to open, was lost, met a protocol violation, or the peer closed
    /// it. The id is free afterwards. Not sent after the handler's own `close`.
    case closed(ConnectionID, TransportError)

    /// The connection the event is about.
    public var connection: ConnectionID {
        switch self {
        case .opened(let id), .text(let id, _), .oversized(let id, _, _), .pong(let id), .bytesArrived(let id), .written(let id, _),
            .information(let id, _), .closed(let id, _):
            id
        }
    }
}

/// The owner of an `IODriver`'s connections: it receives their events and does its due work
/// when asked. Called on the driver thread only, never re-entrantly (calls the handler makes
/// into the driver queue their events for later delivery).
public protocol IODriverHandler: AnyObject {
    /// Receives one event of one connection, on the driver thread, in the order it happened.
    /// - Parameters:
    ///   - driver: The driver delivering the event.
    ///   - event: What happened.
    func driver(_ driver: IODriver, handle event: IOEvent)
    /// After every round of events, after a wake, and when the last deadline passed (and
    /// once when the thread starts): do due work (it may call open/send/ping/close), and
    /// return the next deadline in `IODriver.monotonicMilliseconds()` terms, or nil for none.
    /// - Parameters:
    ///   - driver: The driver asking.
    ///   - now: ``IODriver/monotonicMilliseconds()`` when the call was made.
    /// - Returns: When to be called again at the latest, on the same clock, or nil when
    ///   nothing is due until an event or a wake.
    func driverService(_ driver: IODriver, now: Int64) -> Int64?
}

/// Counters of one driver, as a snapshot.
public struct IODriverStatistics: Sendable, Hashable, CustomStringConvertible {
    /// How often the thread came back from `poll(2)`: an idle driver does not wake.
    public var wakeups: UInt64 = 0
    /// Connections the handler holds: opening or open, until their last event or its close.
    public var connectionsOpen: Int = 0
    /// Bytes received from the kernel, as on the wire (TLS records and Noise messages
    /// included).
    public var bytesRead: UInt64 = 0
    /// Bytes handed to the kernel, as on the wire (TLS records and Noise messages included).
    public var bytesWritten: UInt64 = 0

    /// Statistics with every counter at zero.
    public init() {}

    /// The counters on one line, for logs.
    public var description: String {
        "wakeups \(wakeups), connections \(connectionsOpen), read \(bytesRead) B, written \(bytesWritten) B"
    }
}
