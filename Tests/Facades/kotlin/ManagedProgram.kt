// The Kotlin managed-transport program (scripts/facades/test-facades runs it against rust-nostr's LocalRelay
// from scripts/interop/peers): Android's standard path, `account.startManagedTransport(context)`, with
// no frame handled in Kotlin. A writer account publishes 200 events through enqueueSigned (100,
// then 100 more while the driver has the relay killed), observes its states until every intent is
// terminal, and a second account reads the synced messages back through queryEvents, page by page.
//
// Driver protocol (stdin/stdout lines): the program prints HALF when the first 100 are accepted and
// waits for DOWN (the relay is killed); it enqueues the rest, prints QUEUED and waits for UP (the
// relay is back); then it prints one line of JSON with what it saw, and exits 0 only if every check
// held. Environment: SOFTCHAT_RELAY (ws URL), SOFTCHAT_WORK (a fresh directory), SOFTCHAT_TAG.
import org.softchat.*
import java.util.concurrent.ConcurrentLinkedQueue
import java.util.concurrent.atomic.AtomicInteger

val failures = mutableListOf<String>()

fun check(ok: Boolean, what: String) {
    if (!ok) failures += what
}

fun waitUntil(seconds: Int, condition: () -> Boolean): Boolean {
    val deadline = System.nanoTime() + seconds * 1_000_000_000L
    while (System.nanoTime() < deadline) {
        if (condition()) return true
        Thread.sleep(50)
    }
    return condition()
}

fun expectLine(word: String) {
    val line = readLine()
    check(line == word, "driver said $line, not $word")
}

fun now(): Long = System.currentTimeMillis() / 1000

fun main() {
    val relay = System.getenv("SOFTCHAT_RELAY")!!
    val work = System.getenv("SOFTCHAT_WORK")!!
    val tag = System.getenv("SOFTCHAT_TAG")!!
    val filter = "{\"kinds\":[1],\"#t\":[\"$tag\"]}"

    val writer = SoftchatAccount.open("$work/writer.db")
    val reader = SoftchatAccount.open("$work/reader.db")
    val identity = SoftchatIdentity.generate()
    reader.setSubscription("chat", listOf(filter))
    check(reader.subscriptions().map { it.subscriptionId } == listOf("chat"), "the reader's policy holds its subscription")

    // What the listeners saw (they run on the library's delivery thread).
    val writerPhases = ConcurrentLinkedQueue<String>()
    val accepted = AtomicInteger()
    val rejected = AtomicInteger()
    val received = AtomicInteger()
    val synced = AtomicInteger()

    val writerTransport = writer.startManagedTransport(
        ManagedTransportContext(relayUrls = listOf(relay), acknowledgementTimeoutSeconds = 5),
        identity,
        states = { change -> if (change is ManagedTransportStateChange.Relay) writerPhases += change.phase.value },
        events = { activity ->
            if (activity is ManagedTransportActivity.Delivery) {
                if (activity.decision.state == DeliveryState.ACCEPTED) accepted.incrementAndGet()
                if (activity.decision.state == DeliveryState.REJECTED) rejected.incrementAndGet()
            }
        }
    )
    val readerTransport = reader.startManagedTransport(
        ManagedTransportContext(relayUrls = listOf(relay), publishes = false),
        events = { activity ->
            when (activity) {
                is ManagedTransportActivity.Ingested -> received.addAndGet(activity.result.accepted.size)
                is ManagedTransportActivity.Synced -> synced.incrementAndGet()
                else -> {}
            }
        }
    )

    val start = now() - 300
    val events = (0 until 200).map { i ->
        identity.sign(UnsignedEvent(createdAt = start + i / 4, kind = 1, tags = listOf(listOf("t", tag)), content = "managed kotlin $i"))
    }
    val operations = events.indices.map { "kotlin-$tag-$it" }
    for (i in 0 until 100) writer.outgoing.enqueueSigned(operations[i], listOf(events[i]), listOf(relay), now())
    check(waitUntil(60) { accepted.get() >= 100 }, "the first 100 accepted (saw ${accepted.get()})")
    println("HALF")
    expectLine("DOWN")
    for (i in 100 until 200) writer.outgoing.enqueueSigned(operations[i], listOf(events[i]), listOf(relay), now())
    println("QUEUED")
    expectLine("UP")

    // Every intent terminal, each exactly as the relay said: accepted, and only by its OK.
    fun states() = operations.flatMap { writer.delivery.intents(it) }.map { it.state }
    check(waitUntil(90) { states().all { it == DeliveryState.ACCEPTED || it == DeliveryState.REJECTED } }, "every intent terminal")
    val final = states()
    check(final.size == 200 && final.all { it == DeliveryState.ACCEPTED }, "all 200 intents accepted: ${final.groupBy { it }.mapValues { it.value.size }}")
    check(writerPhases.contains("backingOff") && writerPhases.count { it == "ready" } >= 2, "the writer saw the relay go away and come back: $writerPhases")
    val status = writerTransport.relays().single()
    check(status.relayUrl == relay && status.accepted >= 200 && status.reconnects >= 1, "the writer's relay status counts it: $status")

    // The reader holds all 200 once its sync has run again; paged back newest first, exactly once each.
    fun page(before: EventCursor?) = reader.queryEvents(listOf(filter), 33, now(), before)
    check(waitUntil(90) { reader.queryEvents(listOf(filter), 1000, now()).events.size == 200 }, "the reader holds 200 events")
    val paged = mutableListOf<VerifiedEvent>()
    var cursor: EventCursor? = null
    var pages = 0
    do {
        val p = page(cursor)
        paged += p.events
        cursor = p.next
        pages += 1
    } while (cursor != null && pages < 20)
    check(paged.size == 200 && paged.map { it.id.hex }.toSet() == events.map { it.id.hex }.toSet(), "pages hold the 200 published events once each (${paged.size})")
    check(paged.zipWithNext().all { (a, b) -> a.createdAt > b.createdAt || (a.createdAt == b.createdAt && a.id.hex < b.id.hex) }, "pages are newest first, ties by id")
    check(pages == 7, "200 events in pages of 33 are 7 pages, not $pages")
    val kind: Int = paged.first().kind
    check(kind == 1, "kinds are Int")

    var error: String? = null
    try {
        reader.queryEvents(listOf(filter), 0, now())
    } catch (e: SoftchatException) {
        error = e.code.code
    }
    check(error == "invalid_relay_filter", "a page of 0 is refused with invalid_relay_filter, not $error")
    try {
        writer.startManagedTransport(ManagedTransportContext(relayUrls = listOf("http://not-a-relay")))
        error = "none"
    } catch (e: SoftchatException) {
        error = e.code.code
    }
    check(error == "invalid_relay_url", "a bad relay URL is refused with invalid_relay_url, not $error")

    // The CompletableFuture forms: the same answers off the calling thread, and the same codes.
    val viaFuture = reader.queryEventsAsync(listOf(filter), 33, now()).get()
    check(viaFuture == reader.queryEvents(listOf(filter), 33, now()), "queryEventsAsync returns what queryEvents does")
    val ranOn = java.util.concurrent.atomic.AtomicReference<String>()
    val report = reader.checkAsync(now(), java.util.concurrent.Executor { task ->
        Thread({ ranOn.set(Thread.currentThread().name); task.run() }, "app-io").start()
    }).get()
    check(report.ok && ranOn.get() == "app-io", "an Async form runs on the executor it is given (${ranOn.get()})")
    error = try {
        reader.queryEventsAsync(listOf(filter), 0, now()).get()
        "none"
    } catch (e: java.util.concurrent.ExecutionException) {
        (e.cause as? SoftchatException)?.code?.code ?: "not a SoftchatException: ${e.cause}"
    }
    check(error == "invalid_relay_filter", "queryEventsAsync with a page of 0 fails with invalid_relay_filter, not $error")

    writerTransport.close()
    readerTransport.use { }
    // close() returns after every update was delivered: one acceptance per intent, no more.
    check(accepted.get() == 200 && rejected.get() == 0, "the events listener saw exactly 200 acceptances, no rejection (${accepted.get()}, ${rejected.get()})")
    val writerCheck = writer.check(now())
    val readerCheck = reader.check(now())
    check(writerCheck.ok && writerCheck.liveLeases == 0, "the writer's check: ${writerCheck.problems}, leases ${writerCheck.liveLeases}")
    check(writerCheck.intents.singleOrNull()?.let { it.state == DeliveryState.ACCEPTED && it.count == 200 } == true, "the writer's check counts 200 accepted: ${writerCheck.intents}")
    check(readerCheck.ok && readerCheck.events == 200, "the reader's check: ${readerCheck.problems}, ${readerCheck.events} events")
    writer.close()
    reader.close()
    println("{\"language\":\"kotlin\",\"accepted\":${accepted.get()},\"received\":${received.get()},\"synced\":${synced.get()},\"pages\":$pages,\"phases\":\"${writerPhases.joinToString(",")}\",\"failures\":${failures.size}}")
    for (f in failures) System.err.println("FAIL $f")
    System.exit(if (failures.isEmpty()) 0 else 1)
}
