import SoftchatClient
import SoftchatCore
import SoftchatSync
import SoftchatTransport
import Testing

/// The managed transport's one vocabulary: the app's options and the engine's reports are the
/// schema's types (Schema/relay.recovery.json, generated into SoftchatCore), read and written by
/// the engine itself; the C ABI and every binding pass them on as they are.
@Suite struct ManagedTransportVocabularyTests {
    @Test func aContextSetsEachOptionItNamesOverTheDefaults() throws {
        let pem = "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"
        let context = ManagedTransportContext(
            relayURLs: ["wss://relay.example"], acknowledgementTimeoutSeconds: 7, keepaliveIntervalMilliseconds: 4_000,
            publishes: false, authenticatesOverCleartext: true, allowsUnauthenticatedNoise: true, allowsPrivateAddresses: false,
            caFile: "/etc/ca.pem", caPem: pem)
        let policy = try ManagedTransportPolicy(context)
        #expect(policy.acknowledgementTimeoutSeconds == 7)
        #expect(policy.keepaliveIntervalMilliseconds == 4_000)
        #expect(policy.publishes == false)
        #expect(policy.authenticatesOverCleartext == true)
        #expect(policy.connection.allowsUnauthenticatedNoise == true)
        #expect(policy.connection.allowsPrivateAddresses == false)
        #expect(policy.connection.tls == TLSOptions(caFile: "/etc/ca.pem", caPEM: pem))
    }

    @Test func aContextThatNamesNothingKeepsEveryDefault() throws {
        let policy = try ManagedTransportPolicy(ManagedTransportContext(relayURLs: ["wss://relay.example"]))
        let defaults = ManagedTransportPolicy()
        #expect(policy.acknowledgementTimeoutSeconds == defaults.acknowledgementTimeoutSeconds)
        #expect(policy.acknowledgementTimeoutSeconds == Int64(RelayPublishContract.acknowledgementTimeoutSeconds.value))
        #expect(policy.keepaliveIntervalMilliseconds == defaults.keepaliveIntervalMilliseconds)
        #expect(policy.publishes == defaults.publishes)
        #expect(policy.authenticatesOverCleartext == defaults.authenticatesOverCleartext)
        #expect(policy.connection.allowsUnauthenticatedNoise == defaults.connection.allowsUnauthenticatedNoise)
        #expect(policy.connection.allowsPrivateAddresses == defaults.connection.allowsPrivateAddresses)
        #expect(policy.connection.tls == defaults.connection.tls)
    }

    @Test(arguments: [
        ManagedTransportContext(relayURLs: [], acknowledgementTimeoutSeconds: 0),
        ManagedTransportContext(relayURLs: [], acknowledgementTimeoutSeconds: Int64.min),
        ManagedTransportContext(relayURLs: [], keepaliveIntervalMilliseconds: 999),
        ManagedTransportContext(relayURLs: [], keepaliveIntervalMilliseconds: -1),
    ])
    func anOptionOutOfItsBoundsIsRefusedWithItsCode(_ context: ManagedTransportContext) {
        #expect(throws: SoftchatError.self) { try ManagedTransportPolicy(context) }
        do {
            _ = try ManagedTransportPolicy(context)
        } catch {
            #expect(error.code == .invalidRelaySession)
        }
    }

    @Test func eachRelayStateReportsItsSchemaPhaseAndOnlyBackoffADelay() {
        let states: [RelayConnectionState] = [
            .fetchingInformation, .connecting, .authenticating, .ready, .backingOff(delayMilliseconds: 250), .stopped,
        ]
        #expect(states.map(\.phase) == RelayPhase.allCases)
        #expect(states.map(\.delayMilliseconds) == [nil, nil, nil, nil, 250, nil])
        let overall: [ManagedTransportState] = [.connecting, .authenticating, .ready, .backingOff(delayMilliseconds: 9), .stopped(reason: "host")]
        #expect(
            overall.map(\.stateChange) == [
                .overall(phase: .connecting, delayMilliseconds: nil, reason: nil),
                .overall(phase: .authenticating, delayMilliseconds: nil, reason: nil),
                .overall(phase: .ready, delayMilliseconds: nil, reason: nil),
                .overall(phase: .backingOff, delayMilliseconds: 9, reason: nil),
                .overall(phase: .stopped, delayMilliseconds: nil, reason: "host"),
            ])
    }

    @Test func eachEngineReportIsExactlyOneOfAStateChangeAnActivityOrNeither() {
        let url = "wss://relay.example"
        let reports: [ManagedTransportEvent] = [
            .state(.ready), .relayState(relayURL: url, .backingOff(delayMilliseconds: 5)),
            .notice(relayURL: url, "slow down"), .connectionFailed(relayURL: url, "refused"),
            .relayInformation(relayURL: url, RelayLimits()),
        ]
        #expect(reports.map { $0.stateChange != nil } == [true, true, false, false, false])
        #expect(reports.map { $0.activity != nil } == [false, false, true, true, false])
        #expect(reports[1].stateChange == .relay(relayURL: url, phase: .backingOff, delayMilliseconds: 5))
        #expect(reports[2].activity == .notice(relayURL: url, message: "slow down"))
        #expect(reports[3].activity == .connectionFailed(relayURL: url, message: "refused"))
    }
}
