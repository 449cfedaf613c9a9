// A JVM app's first program, compiled and run with `java -cp softchat.jar:jna.jar:kotlin-stdlib.jar`
// and no jna.library.path: the jar carries the native library.
import org.softchat.*
import java.io.File

fun now(): Long = System.currentTimeMillis() / 1000

fun main() {
    val relay = System.getenv("SOFTCHAT_RELAY")!!
    val work = System.getenv("SOFTCHAT_WORK")!!
    val filter = "{\"kinds\":[1],\"#t\":[\"install-kotlin\"]}"
    val writer = SoftchatAccount.open("$work/writer.db")
    val reader = SoftchatAccount.open("$work/reader.db")
    val identity = SoftchatIdentity.generate()
    reader.setSubscription("install", listOf(filter))
    // SOFTCHAT_CA_PEM: the private CA of a wss:// relay, given as text (a phone has no store to read).
    val caPem = System.getenv("SOFTCHAT_CA_PEM")
    val writerTransport = writer.startManagedTransport(ManagedTransportContext(relayUrls = listOf(relay), caPem = caPem), identity)
    val readerTransport = reader.startManagedTransport(ManagedTransportContext(relayUrls = listOf(relay), publishes = false, caPem = caPem))
    val operations = (0 until 5).map { "install-kotlin-$it" }
    for (i in 0 until 5) {
        val event = identity.sign(UnsignedEvent(createdAt = now() - 10 + i, kind = 1, tags = listOf(listOf("t", "install-kotlin")), content = "install kotlin $i"))
        writer.outgoing.enqueueSigned(operations[i], listOf(event), listOf(relay), now())
    }
    fun accepted() = operations.flatMap { writer.delivery.intents(it) }.count { it.state == DeliveryState.ACCEPTED }
    fun received() = reader.queryEvents(listOf(filter), 100, now()).events.size
    val deadline = System.nanoTime() + 30_000_000_000L
    while (System.nanoTime() < deadline && (accepted() < 5 || received() < 5)) Thread.sleep(50)
    val a = accepted()
    val r = received()
    writerTransport.close()
    readerTransport.close()
    writer.close()
    reader.close()
    val library = File("/proc/self/maps").readLines().map { it.trim().split(Regex("\\s+")).getOrNull(5) ?: "" }
        .firstOrNull { it.endsWith("/libSoftchatFFI.so") }
    println("{\"language\":\"kotlin\",\"published\":5,\"accepted\":$a,\"received\":$r,\"library\":\"$library\"}")
    System.exit(if (a == 5 && r == 5) 0 else 1)
}
