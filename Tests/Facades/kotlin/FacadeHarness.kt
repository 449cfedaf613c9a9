// The Kotlin facade test (scripts/facades/test-facades): runs the page's Android recipes (Recipes.kt,
// rendered verbatim from Schema/ by the script) against the real Swift core through JNA, fed the
// recorded relay conversation (Fixture.kt, from Tests/Facades/conversation.json), and checks the
// actions, delivery decisions and error codes; then checks the public names (Names.kt).
// Stand-ins: Socket (records text frames), Logger, the database (a SQLite SoftchatAccount in a
// temporary folder), execute/executeRecovery (record actions) and correlatedRelayResults.
import org.softchat.*
import java.io.File
import kotlin.reflect.KVisibility
import kotlin.reflect.full.companionObject

object Report {
    var passed = 0
    var failed = 0

    fun check(name: String, condition: () -> Boolean) = check(name, condition(), { "" })

    fun check(name: String, ok: Boolean, detail: () -> String) {
        if (ok) {
            passed++
        } else {
            failed++
            println("FAIL kotlin: $name ${detail()}")
        }
    }

    fun <T> equal(name: String, actual: T, expected: T) = check(name, actual == expected) { "\n  got      $actual\n  expected $expected" }

    fun expectError(name: String, code: String, body: () -> Unit) {
        try {
            body()
            check(name, false) { "no SoftchatException (expected $code)" }
        } catch (e: SoftchatException) {
            equal(name, e.code.code, code)
        }
    }
}

class Socket {
    val sent = mutableListOf<String>()
    fun sendText(text: String) {
        sent += text
    }
}

class Logger {
    val lines = mutableListOf<String>()
    fun debug(value: Any?) {
        lines += value.toString()
    }
}

val recovered = mutableListOf<RelaySessionAction>()
fun executeRecovery(action: RelaySessionAction) {
    recovered += action
}

class Harness(val account: SoftchatAccount, val identity: SoftchatIdentity) {
    val session = RelaySession()
    val socket = Socket()
    val logger = Logger()
    val executed = mutableListOf<RelaySessionAction>()
    val frame: String = Fixture.sessionFrame
    val now: Long = Fixture.now
    val recipient: PublicKey = PublicKey(Fixture.alice)
    val challenge: String = Fixture.challenge
    val createdAt: Long = Fixture.createdAt
    val relayUrl: String = Fixture.relayUrl
    var operationId = ""
    var event: VerifiedEvent = SignedNostrEvent.parse(Fixture.published[0])
    var leaseId = ""
    var batch = IngestionBatch(listOf())
    var activeClaim: DeliveryClaimResult? = null
    var auth: VerifiedEvent? = null
    val operationOf = mutableMapOf<String, String>()
    val attempts = mutableMapOf<String, Int>()
    var runDecisions = mutableListOf<DeliveryDecision>()
    var runStart = 0

    fun execute(actions: List<RelaySessionAction>) {
        executed += actions
    }

    fun execute(action: RelaySessionAction) {
        executed += action
    }

    /**
     * The host's correlation of relay OKs with claimed intents: the events written in this run
     * (read back from the socket with parseClientRelayFrame) get their next recorded OK through
     * session.receive; each deliveryChanged decision is paired with its intent (enqueueSigned is
     * idempotent by operation id, so it returns the intent ids again).
     */
    val correlatedRelayResults: List<DeliveryResult>
        get() {
            val results = mutableListOf<DeliveryResult>()
            for (text in socket.sent.drop(runStart)) {
                for (written in parseClientRelayFrame(text).events) {
                    val n = attempts[written.id.hex] ?: 0
                    attempts[written.id.hex] = n + 1
                    val ack = Fixture.acknowledgements.getValue(written.id.hex)[n]
                    val classified = classifyDeliveryAcknowledgement(parseRelayResponseFrame(ack))
                    for (action in session.receive(ack)) {
                        if (action.kind != RelaySessionAction.Kind.DELIVERY_CHANGED) continue
                        val decision = requireNotNull(action.decision)
                        Report.equal("classifyDeliveryAcknowledgement agrees with the session for ${written.id.hex.take(8)}", classified, decision)
                        runDecisions.add(decision)
                        val intents = account.outgoing.enqueueSigned(operationOf.getValue(decision.eventId), listOf(written), listOf(relayUrl), now)
                        results += DeliveryResult(intents.single(), decision)
                    }
                }
            }
            return results
        }
}

fun decisionTriples(list: List<DeliveryDecision>) = list.map { listOf(it.eventId, it.state.value, it.category.value) }

fun main() {
    val dir = createTempDir("softchat-kotlin-facade")
    val account = SoftchatAccount.open(File(dir, "account.sqlite").path)
    val identity = SoftchatIdentity.importSecretHex(Fixture.aliceSecretHex)
    Report.equal("identity public key", identity.publicKeyHex, Fixture.alice)
    val h = Harness(account, identity)

    // relay.session: a fresh session, connect, drain, and the relay's AUTH challenge.
    recipeRelaySession(h)
    Report.equal("session recipe actions", h.executed.map { it.kind.value }, Fixture.expectedSessionRecipeActions)
    Report.equal("session recipe challenge", h.executed.last().challenge, Fixture.challenge)

    // relay.wire: subscribe on the host's session and sign the NIP-42 answer.
    h.execute(h.session.connect())
    h.session.transportConnected()
    recipeRelayWire(h)
    Report.equal("wire recipe frames", h.socket.sent.toList(), Fixture.expectedWireRecipeFrames)

    // The relay answers the subscription; persistEvent events form the ingestion batch.
    val kinds = mutableListOf<List<String>>()
    val persisted = mutableListOf<VerifiedEvent>()
    for (text in Fixture.subscriptionFrames) {
        val actions = h.session.receive(text)
        kinds += actions.map { it.kind.value }
        actions.filter { it.kind == RelaySessionAction.Kind.PERSIST_EVENT }.forEach { persisted += requireNotNull(it.event) }
    }
    Report.equal("subscription actions", kinds, Fixture.expectedSubscriptionActions)
    Report.equal("awaiting persistence before ingest", h.session.snapshot().awaitingPersistence, 2L)

    // relay.ingestion: commit, then confirm.
    h.batch = IngestionBatch(persisted)
    recipeRelayIngestion(h)
    Report.equal("ingested ids", persisted.map { it.id.hex }, Fixture.expectedIngested)
    Report.equal("awaiting persistence after confirm", h.session.snapshot().awaitingPersistence, 0L)
    Report.equal("second ingest reports duplicates", account.incoming.ingest(persisted, h.now).receipt.duplicateEventIds, Fixture.expectedIngested)

    // relay.publish, three times: accepted; rate-limited (retryable); the retry (duplicate) with a blocked one.
    for (i in 0 until 3) {
        h.operationId = "op-${i + 1}"
        h.event = SignedNostrEvent.parse(Fixture.published[i])
        h.operationOf[h.event.id.hex] = h.operationId
        h.leaseId = "lease-${i + 1}"
        h.runStart = h.socket.sent.size
        h.runDecisions = mutableListOf()
        recipeRelayPublish(h)
        Report.equal("publish run ${i + 1} decisions", decisionTriples(h.runDecisions), Fixture.expectedPublishRuns[i])
    }
    Report.check("publish run 3 sent one EVENTS batch") { h.socket.sent.last().startsWith("[\"EVENTS\",") }
    Report.equal("nothing pending after the publish runs", h.session.snapshot().pendingPublishes, 0L)

    // relay.recovery: event 4 written but never acknowledged when the transport is lost.
    val fourth = SignedNostrEvent.parse(Fixture.published[3])
    h.operationOf[fourth.id.hex] = "op-4"
    account.outgoing.enqueueSigned("op-4", listOf(fourth), listOf(h.relayUrl), h.now)
    h.activeClaim = account.delivery.claim("lease-4", h.relayUrl, h.now)
    val claim = requireNotNull(h.activeClaim)
    Report.equal("claim holds event 4", claim.payloads.map { it.eventId }, listOf(fourth.id.hex))
    h.session.publish(listOf(fourth))
    h.session.drainOutbound().forEach { outbound ->
        h.socket.sendText(outbound.frame)
        account.delivery.markSocketWritten(claim.claim, claim.payloads.map { it.intentId })
        h.session.confirmSent(outbound.deliveryEventIds)
    }
    recipeRelayRecovery(h)
    Report.equal("recovery actions", recovered.map { it.kind.value }, Fixture.expectedRecoveryActions)
    Report.equal("recovery decision", decisionTriples(listOfNotNull(recovered.first().decision)), listOf(Fixture.expectedRecoveryDecision))
    Report.equal("reconnect attempt", recovered.last().attempt, 1)
    Report.check("snapshot logged") { h.logger.lines.single().contains("reconnectAttempt=1") }

    // Error codes from the schema's catalog.
    val errors = Fixture.errors
    Report.expectError("stale claim", errors.getValue("staleClaim")) {
        account.delivery.markSocketWritten(claim.claim, claim.payloads.map { it.intentId })
    }
    Report.expectError("OK without an event id", errors.getValue("unnamedOk")) {
        classifyDeliveryAcknowledgement(parseRelayResponseFrame(Fixture.unnamedOkFrame))
    }
    Report.equal("transport lost: receive is refused", runCatching { h.session.receive(Fixture.sessionFrame) }
        .exceptionOrNull().let { (it as? SoftchatException)?.code?.code }, errors.getValue("afterClose"))
    val probe = RelaySession()
    probe.connect()
    probe.transportConnected()
    Report.expectError("OK with a malformed id", errors.getValue("badOkId")) { probe.receive(Fixture.badOkFrame) }
    val maxFilters = RelayWireContract.maxFilters.value.toInt()
    Report.expectError("maxFilters + 1 filters", errors.getValue("tooManyFilters")) {
        probe.subscribe("many", List(maxFilters + 1) { "{\"kinds\":[1]}" })
    }
    probe.subscribe("many", List(maxFilters) { "{\"kinds\":[1]}" })
    Report.check("maxFilters filters accepted") { "many" in probe.snapshot().subscriptionIds }
    Report.expectError("empty challenge", errors.getValue("emptyChallenge")) {
        identity.createNip42Authentication("", h.relayUrl, h.createdAt)
    }
    Report.expectError("incomplete ingestion result", errors.getValue("incompleteIngestionResult")) {
        validateIngestionResult(h.batch, IngestionResult(listOf(persisted[0].id.hex), listOf(), listOf()))
    }
    validateIngestionResult(h.batch, IngestionResult(persisted.map { it.id.hex }, listOf(), listOf()))
    val closed = RelaySession()
    closed.close()
    Report.expectError("call after close", errors.getValue("afterClose")) { closed.connect() }
    Report.equal("snapshot after close", closed.snapshot().state, "closed")
    val filter = RelayFilter.fromJson("{\"kinds\":[14],\"#p\":[\"${Fixture.alice}\"]}")
    Report.check("RelayFilter.matches") { filter.matches(persisted[0]) && !filter.matches(fourth) }
    // The verified event is a proof type: what the library returns carries its seal; handed back
    // it is recognised, made by hand (no proof) it is verified in full, and both match.
    Report.check("VerifiedEvent carries its proof (32 hex)", persisted[0].proof?.matches(Regex("[0-9a-f]{32}")) == true) { "${persisted[0].proof}" }
    Report.check("a hand-made copy without the proof is verified in full and matches") { filter.matches(persisted[0].copy(proof = null)) }
    identity.erase()
    Report.expectError("signing after erase", "invalid_relay_authentication") {
        identity.createNip42Authentication(h.challenge, h.relayUrl, h.createdAt)
    }

    // A handle serializes its calls: eight threads share one session.
    val shared = RelaySession()
    shared.connect()
    shared.transportConnected()
    val threads = (0 until 8).map { t ->
        Thread {
            repeat(50) { i ->
                shared.subscribe("t$t", listOf("{\"kinds\":[$i]}"))
                shared.drainOutbound().forEach { shared.confirmSent(it.deliveryEventIds) }
            }
        }
    }
    threads.forEach { it.start() }
    threads.forEach { it.join() }
    val snap = shared.snapshot()
    Report.equal("concurrent subscriptions", snap.subscriptionIds.sorted(), (0 until 8).map { "t$it" })
    Report.equal("concurrent outbound drained", snap.outboundFrames, 0L)
    account.close()
    privateMessages(dir)
    liveQueries(dir)
    chatScreen(dir)
    dir.deleteRecursively()

    checkNames()
    println("kotlin: ${Report.passed} passed, ${Report.failed} failed")
    if (Report.failed > 0) System.exit(1)
}

/** NIP-17 through the facade: NIP-44 both ways, a send to bob's inbox relays, bob unwrapping it once. */
fun privateMessages(dir: File) {
    val alice = SoftchatIdentity.generate()
    val bob = SoftchatIdentity.generate()
    val payload = alice.nip44Encrypt("hi bob ☃", bob.publicKeyHex)
    Report.equal("nip44 round trip", bob.nip44Decrypt(payload, alice.publicKeyHex), "hi bob ☃")
    val tampered = payload.substring(0, 10) + (if (payload[10] == 'A') 'B' else 'A') + payload.substring(11)
    Report.expectError("nip44 tampered payload", "invalid_private_message") { bob.nip44Decrypt(tampered, alice.publicKeyHex) }
    val now = System.currentTimeMillis() / 1000
    val wrap = alice.giftWrap(UnsignedEvent(pubkey = null, createdAt = now, kind = 14, tags = listOf(listOf("p", bob.publicKeyHex)), content = "sealed"), bob.publicKeyHex, now)
    val opened = bob.unwrapGift(wrap)
    Report.equal("gift wrap", listOf(wrap.kind, opened.sender, opened.rumor.content, opened.wrapId), listOf(1059, alice.publicKeyHex, "sealed", wrap.id.hex))
    Report.expectError("a wrap for someone else", "invalid_private_message") { alice.unwrapGift(wrap) }
    fun inbox(who: SoftchatIdentity, relay: String) =
        who.sign(UnsignedEvent(pubkey = null, createdAt = now - 10, kind = 10050, tags = listOf(listOf("relay", relay)), content = ""))
    val sender = SoftchatAccount.open(File(dir, "alice-dm.sqlite").path)
    val reader = SoftchatAccount.open(File(dir, "bob-dm.sqlite").path)
    Report.expectError("send without an inbox list", "recipient_has_no_inbox_relays") {
        sender.messages.send(listOf(bob.publicKeyHex), "hello", alice, now)
    }
    sender.incoming.ingest(listOf(inbox(alice, "wss://alice.example"), inbox(bob, "wss://bob.example")), now)
    Report.equal("inbox relays", sender.messages.inboxRelays(bob.publicKeyHex), listOf("wss://bob.example"))
    val sent = sender.messages.send(listOf(bob.publicKeyHex), "hello from kotlin", alice, now)
    Report.equal("deliveries", sent.deliveries.map { it.recipient to it.relayUrls }, listOf(bob.publicKeyHex to listOf("wss://bob.example"), alice.publicKeyHex to listOf("wss://alice.example")))
    val wraps = sender.queryEvents(listOf("{\"kinds\":[1059]}"), 10, now).events
    Report.equal("two wraps stored", wraps.size, 2)
    Report.equal("unlock finds nothing", reader.messages.unlock(bob, now), 0)
    reader.incoming.ingest(wraps, now)
    val rooms = reader.messages.rooms(bob.publicKeyHex, now, 10)
    Report.equal("bob's room", rooms.map { it.latest?.content to it.unread }, listOf("hello from kotlin" to 1))
    val page = reader.messages.messages(bob.publicKeyHex, listOf(alice.publicKeyHex), now, 10)
    Report.equal("bob's message", page.map { listOf(it.id, it.sender, it.recipients) }, listOf(listOf(sent.message.id, alice.publicKeyHex, listOf(bob.publicKeyHex))))
    Report.equal("the next page is empty", reader.messages.messages(bob.publicKeyHex, listOf(alice.publicKeyHex), now, 10, page.last().cursor).size, 0)
    reader.messages.markRead(bob.publicKeyHex, listOf(alice.publicKeyHex))
    Report.equal("read", reader.messages.rooms(bob.publicKeyHex, now, 10).single().unread, 0)
    Report.equal("no failed wraps", reader.messages.failedWraps(bob.publicKeyHex).size, 0)
    sender.close()
    reader.close()
}

/** Applies one update of an observed window to the reader's copy of it. */
fun applyUpdate(window: MutableList<VerifiedEvent>, update: EventWindowUpdate) {
    when (update) {
        is EventWindowUpdate.Snapshot -> { window.clear(); window.addAll(update.events) }
        is EventWindowUpdate.Reload -> { window.clear(); window.addAll(update.events) }
        is EventWindowUpdate.Changes -> for (change in update.changes) when (change) {
            is EventWindowChange.Inserted -> window.add(change.at, change.event)
            is EventWindowChange.Removed -> check(window.removeAt(change.at).id.hex == change.id) { "removed ${change.id} at ${change.at}" }
            is EventWindowChange.Unrecognized -> error("unrecognized change ${change.kindValue}")
        }
        is EventWindowUpdate.Unrecognized -> error("unrecognized update ${update.kindValue}")
    }
}

/** Live queries through the facade: a listener gets the snapshot, then changes that rebuild the window a fresh read gives; close() ends it. */
fun liveQueries(dir: File) {
    val account = SoftchatAccount.open(File(dir, "live.sqlite").path)
    val author = SoftchatIdentity.generate()
    val now = System.currentTimeMillis() / 1000
    fun note(i: Int) = author.sign(UnsignedEvent(pubkey = null, createdAt = now - 100 + i, kind = 1, tags = listOf(), content = "note $i"))
    account.incoming.ingest(listOf(note(0)), now)
    val updates = java.util.concurrent.LinkedBlockingQueue<EventWindowUpdate>()
    val filters = listOf("{\"kinds\":[1]}")
    val observation = account.observe(filters, 3) { updates.put(it) }
    val window = mutableListOf<VerifiedEvent>()
    val first = updates.poll(5, java.util.concurrent.TimeUnit.SECONDS)
    Report.check("the first update is the snapshot") { first is EventWindowUpdate.Snapshot && first.events.map { it.content } == listOf("note 0") }
    if (first != null) applyUpdate(window, first)
    account.incoming.ingest((1..4).map { note(it) }, now)
    val fresh = account.queryEvents(filters, 3, now).events
    val deadline = System.currentTimeMillis() + 5_000
    while (window != fresh && System.currentTimeMillis() < deadline) {
        updates.poll(100, java.util.concurrent.TimeUnit.MILLISECONDS)?.let { applyUpdate(window, it) }
    }
    Report.equal("the changes rebuild the window a fresh read gives", window.map { it.content }, listOf("note 4", "note 3", "note 2"))
    Report.equal("window() is the same window", observation.window().map { it.content }, fresh.map { it.content })
    Report.check("a window's proof survives the listener") { window.all { it.proof != null } }
    observation.close()
    account.incoming.ingest(listOf(note(5)), now)
    Thread.sleep(300)
    Report.equal("nothing after close()", updates.size, 0)
    Report.expectError("a window of 0", "invalid_relay_filter") { account.observe(filters, 0) }
    Report.expectError("a window over maxObservedWindow", "invalid_relay_filter") {
        account.observe(filters, (RelayIngestionContract.maxObservedWindow.value + 1).toInt())
    }
    account.close()
}

/** Applies one change of an observed list of rows (the room list, a room, delivery states) to the reader's copy; false when it does not fit. */
fun <R> applyRowChange(rows: MutableList<R>, key: (R) -> String, kind: RowChangeKind, row: R?, changeKey: String?, from: Int?, at: Int?): Boolean =
    when (kind) {
        RowChangeKind.INSERTED -> at != null && row != null && at <= rows.size && run { rows.add(at, row); true }
        RowChangeKind.REMOVED -> at != null && at < rows.size && key(rows[at]) == changeKey && run { rows.removeAt(at); true }
        RowChangeKind.MOVED -> from != null && at != null && from < rows.size && key(rows[from]) == changeKey && run { rows.add(at, rows.removeAt(from)); true }
        RowChangeKind.UPDATED -> at != null && row != null && at < rows.size && key(rows[at]) == key(row) && run { rows[at] = row; true }
        else -> false
    }

/** A chat screen through the facade: listeners keep the room list, the open room and a sent message's delivery ticks; close() ends each. */
fun chatScreen(dir: File) {
    val account = SoftchatAccount.open(File(dir, "chat.sqlite").path)
    val alice = SoftchatIdentity.generate()
    val bob = SoftchatIdentity.generate()
    val now = System.currentTimeMillis() / 1000
    fun inbox(who: SoftchatIdentity, relay: String) =
        who.sign(UnsignedEvent(pubkey = null, createdAt = now - 10, kind = 10050, tags = listOf(listOf("relay", relay)), content = ""))
    account.incoming.ingest(listOf(inbox(alice, "wss://alice.example"), inbox(bob, "wss://bob.example")), now)
    val lock = Object()
    var fits = true
    val rooms = mutableListOf<PrivateRoom>()
    val messages = mutableListOf<PrivateMessage>()
    val ticks = mutableListOf<PublishIntentStatus>()
    val roomKey = { r: PrivateRoom -> r.members.joinToString(",") }
    val roomList = account.messages.observeRooms(alice.publicKeyHex, 10) { u ->
        synchronized(lock) {
            if (u.rooms != null) { rooms.clear(); rooms.addAll(u.rooms!!) }
            for (c in u.changes ?: listOf()) fits = applyRowChange(rooms, roomKey, c.kind, c.room, c.key, c.from, c.at) && fits
        }
    }
    val room = account.messages.observeMessages(alice.publicKeyHex, listOf(bob.publicKeyHex), 20) { u ->
        synchronized(lock) {
            if (u.messages != null) { messages.clear(); messages.addAll(u.messages!!) }
            for (c in u.changes ?: listOf()) fits = applyRowChange(messages, { it.id }, c.kind, c.message, c.key, c.from, c.at) && fits
        }
    }
    val sent = account.messages.send(listOf(bob.publicKeyHex), "hello from kotlin", alice, now)
    val deliveries = account.messages.observeDeliveries(sent.message.id, sent.message.recipients + sent.message.sender) { u ->
        synchronized(lock) {
            if (u.intents != null) { ticks.clear(); ticks.addAll(u.intents!!) }
            for (c in u.changes ?: listOf()) fits = applyRowChange(ticks, { it.intentId }, c.kind, c.intent, c.key, c.from, c.at) && fits
        }
    }
    fun waitFor(what: String, condition: () -> Boolean) {
        val deadline = System.currentTimeMillis() + 5_000
        while (!synchronized(lock) { condition() } && System.currentTimeMillis() < deadline) Thread.sleep(10)
        Report.check(what) { synchronized(lock) { condition() } }
    }
    waitFor("the sent message is in the open room") { messages.map { it.id } == listOf(sent.message.id) }
    waitFor("the room is in the room list") { rooms.map { it.latest?.content } == listOf("hello from kotlin") }
    waitFor("two pending delivery ticks") { ticks.size == 2 && ticks.all { it.state == DeliveryState.PENDING } }
    val claim = account.delivery.claim("chat-lease", "wss://bob.example", now, 10)!!
    account.delivery.markSocketWritten(claim.claim, claim.payloads.map { it.intentId })
    waitFor("bob's tick is in flight") { ticks.single { it.relayUrl == "wss://bob.example" }.state == DeliveryState.IN_FLIGHT }
    Report.check("every change fits the list it applies to") { fits }
    Report.equal("window() is the same list", room.window(), synchronized(lock) { messages.toList() })
    roomList.close()
    room.close()
    deliveries.close()
    Report.expectError("a list of 0", "invalid_private_message") { account.messages.observeRooms(alice.publicKeyHex, 0) }
    account.close()
}

/** The public names of the compiled facade (package org.softchat, from the facade jar) against the schema. */
fun checkNames() {
    val jar = java.util.jar.JarFile(System.getProperty("softchat.facadeJar"))
    val names = sortedSetOf<String>()
    val dataMembers = setOf("copy", "equals", "hashCode", "toString")
    for (entry in jar.entries()) {
        val path = entry.name
        if (!path.startsWith("org/softchat/") || !path.endsWith(".class") || path.count { it == '/' } != 2 || '$' in path) continue
        val cls = Class.forName(path.removeSuffix(".class").replace('/', '.'))
        if (cls.simpleName.endsWith("Kt")) {
            // File facades: public top-level functions (SoftchatApi.kt only declares public API).
            if (cls.simpleName == "SoftchatApiKt") {
                cls.declaredMethods.filter { java.lang.reflect.Modifier.isPublic(it.modifiers) }.forEach { names += it.name }
            }
            continue
        }
        val k = cls.kotlin
        if (k.visibility != KVisibility.PUBLIC) continue
        val typeNames = mutableListOf(k.simpleName!!)
        names += k.simpleName!!
        for (nested in k.nestedClasses) {
            if (nested.visibility == KVisibility.PUBLIC && !nested.isCompanion) names += "${k.simpleName}.${nested.simpleName}"
        }
        if (k.java.isEnum || Throwable::class.java.isAssignableFrom(k.java)) continue
        for (m in k.members) {
            if (m.visibility != KVisibility.PUBLIC) continue
            if (m.name in dataMembers || (k.isData && m.name.startsWith("component"))) continue
            names += "${typeNames[0]}.${m.name}"
        }
        k.companionObject?.members?.forEach { m ->
            if (m.visibility == KVisibility.PUBLIC && m.name !in dataMembers) names += "${typeNames[0]}.${m.name}"
        }
    }
    val generated = names.filter { it !in Names.contractLayer && it.substringBefore('.') !in Names.contractLayer }.toSortedSet()
    Report.equal("public names equal the schema's declarations", generated.toList(), Names.kotlinExpected.sorted())
    val missing = Names.androidSymbols.filter { it !in generated }
    Report.check("every android symbol of the page is public") { missing.isEmpty() }
    if (missing.isNotEmpty()) println("  missing android symbols: $missing")
    // Every schema value, then UNRECOGNIZED (what a newer library's values decode to).
    Report.equal("DeliveryState values", DeliveryState.values().map { it.value }, Names.enumValues.getValue("DeliveryState") + "")
    Report.equal("DeliveryCategory values", DeliveryCategory.values().map { it.value }, Names.enumValues.getValue("DeliveryCategory") + "")
    Report.equal("RelaySessionAction.Kind values", RelaySessionAction.Kind.values().map { it.value }, Names.enumValues.getValue("RelaySessionActionKind") + "")
    Report.equal("error codes", SoftchatErrorCode.values().map { it.code }, Names.errorCodes)
}
