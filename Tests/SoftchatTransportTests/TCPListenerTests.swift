import SoftchatTransport
import Testing

@Suite struct TCPListenerTests {
    /// A host that is not an IPv4 address used to leave the address zeroed, so the listener bound
    /// every interface (0.0.0.0) while its caller asked for one: a loopback-only test relay could
    /// be reached from the network.
    @Test(arguments: ["not-an-address", "localhost", "127.0.0.256", "::1", ""])
    func aHostThatIsNotAnIPv4AddressIsRefusedInsteadOfBindingEveryInterface(_ host: String) {
        #expect(throws: TransportError.self) {
            let listener = try TCPListener(host: host, port: 0)
            listener.close()
        }
    }

    @Test func aLoopbackListenerBindsLoopback() throws {
        let listener = try TCPListener(host: "127.0.0.1", port: 0)
        defer { listener.close() }
        #expect(listener.port > 0)
    }
}
