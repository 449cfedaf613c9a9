/// Why a Noise operation failed, said plainly. Never carries secret material (private keys,
/// cipher keys, chaining keys); public keys may appear in messages.
public struct NoiseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The category of a Noise failure; its raw value appears in ``NoiseError/description``.
    public enum Kind: String, Sendable {
        /// A ciphertext failed authentication (bad MAC): tampered, replayed into another
        /// session, or encrypted under another key (for example a wrong pinned static key).
        case decryptFailed
        /// The 64-bit nonce reached 2^64-1: the session must end.
        case nonceExhausted
        /// A Noise message over 65,535 bytes (or a payload that would make one).
        case messageTooLong
        /// A message shorter than its pattern requires.
        case malformedMessage
        /// A call in the wrong state: not our turn, the handshake is over or has failed.
        case unexpectedState
        /// A key the pattern needs is missing (local static, remote static, PSK).
        case missingKey
        /// A key of the wrong length or an X25519 input that yields no shared secret.
        case invalidKey
        /// The remote static key is not the pinned one.
        case remoteKeyMismatch
        /// A protocol name or pattern this implementation does not speak.
        case unsupportedProtocol
        /// Reading or writing a key file failed.
        case keyFile
        /// libcrypto failed unexpectedly.
        case crypto
    }

    /// The category of the failure.
    public let kind: Kind
    /// A human-readable account of the failure; never secret material.
    public let message: String

    /// Creates an error of `kind` explained by `message`.
    /// - Parameters:
    ///   - kind: The category of the failure.
    ///   - message: A human-readable explanation; it must not contain secret material.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    /// `noise`, the kind's raw value and the message, as `"noise decryptFailed: …"`.
    public var description: String { "noise \(kind.rawValue): \(message)" }
}
