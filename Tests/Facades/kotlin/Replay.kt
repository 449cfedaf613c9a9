// `Replay SCRIPT`: the session regression scripts (Tests/SessionRegressions/*.jsonl) through the
// Kotlin facade, one JSON line per call in the form `softchat replay` prints, so
// scripts/facades/test-facades can compare the bindings line by line. The JVM has no JSON reader, so the
// script arrives translated by test-facades: one call per line, tab-separated key=value fields
// (\t, \n and \\ escaped; a list repeats its key; events and filters as their JSON text).
import org.softchat.*
import java.io.File

class Call(line: String) {
    val fields: List<Pair<String, String>> = line.split("\t").map { field ->
        val i = field.indexOf('=')
        field.substring(0, i) to unescape(field.substring(i + 1))
    }

    fun one(key: String): String? = fields.firstOrNull { it.first == key }?.second
    fun all(key: String): List<String> = fields.filter { it.first == key }.map { it.second }
    fun long(key: String): Long? = one(key)?.toLong()
    fun bool(key: String): Boolean? = one(key)?.toBoolean()
    fun text(key: String): String = one(key) ?: throw IllegalArgumentException("$key is required")
}

fun unescape(s: String): String {
    val out = StringBuilder()
    var i = 0
    while (i < s.length) {
        val c = s[i]
        if (c == '\\' && i + 1 < s.length) {
            out.append(when (s[i + 1]) { 't' -> '\t'; 'n' -> '\n'; else -> s[i + 1] })
            i += 2
        } else {
            out.append(c)
            i++
        }
    }
    return out.toString()
}

object J {
    fun str(s: String): String {
        val out = StringBuilder("\"")
        for (c in s) {
            when {
                c == '"' -> out.append("\\\"")
                c == '\\' -> out.append("\\\\")
                c == '\n' -> out.append("\\n")
                c == '\r' -> out.append("\\r")
                c == '\t' -> out.append("\\t")
                c < ' ' -> out.append(String.format("\\u%04x", c.toInt()))
                else -> out.append(c)
            }
        }
        return out.append('"').toString()
    }

    fun list(items: List<String>): String = items.joinToString(",", "[", "]")

    /** An object of the members whose value is not null (`softchat replay` omits them too). */
    fun obj(vararg members: Pair<String, String?>): String =
        members.filter { it.second != null }.joinToString(",", "{", "}") { str(it.first) + ":" + it.second }
}

fun event(e: VerifiedEvent): String = J.obj(
    "id" to J.str(e.id.hex), "pubkey" to J.str(e.pubkey.hex), "created_at" to e.createdAt.toString(),
    "kind" to e.kind.toString(), "tags" to J.list(e.tags.map { t -> J.list(t.map { J.str(it) }) }),
    "content" to J.str(e.content), "sig" to J.str(e.sig)
)

fun decision(d: DeliveryDecision): String = J.obj(
    "eventId" to J.str(d.eventId), "state" to J.str(d.state.value), "category" to J.str(d.category.value), "message" to J.str(d.message)
)

fun action(a: RelaySessionAction): String = J.obj(
    "kind" to J.str(a.kind.value), "subscriptionId" to a.subscriptionId?.let { J.str(it) }, "event" to a.event?.let { event(it) },
    "eventId" to a.eventId?.let { J.str(it) }, "reason" to a.reason?.let { J.str(it) }, "prefix" to a.prefix?.let { J.str(it) },
    "message" to a.message?.let { J.str(it) }, "challenge" to a.challenge?.let { J.str(it) },
    "count" to a.count?.let { J.obj("count" to it.count.toString(), "approximate" to it.approximate.toString(), "hll" to it.hll?.let { h -> J.str(h) }) },
    "decision" to a.decision?.let { decision(it) }, "delayMilliseconds" to a.delayMilliseconds?.toString(),
    "attempt" to a.attempt?.toString(), "retryDelayMilliseconds" to a.retryDelayMilliseconds?.toString()
)

fun actions(list: List<RelaySessionAction>): String = J.list(list.map { action(it) })

// The core's defaults that are not contract bounds (RelaySessionConfig.init in SoftchatCore); a
// drift shows as a difference from `softchat replay`.
fun config(c: Call): RelaySessionConfig = RelaySessionConfig(
    supportsEventsBatch = c.bool("supportsEventsBatch") ?: true,
    reconnectBaseDelaySeconds = c.long("reconnectBaseDelaySeconds") ?: RelayRecoveryContract.reconnectBaseDelaySeconds.value,
    reconnectMaxDelaySeconds = c.long("reconnectMaxDelaySeconds") ?: RelayRecoveryContract.reconnectMaxDelaySeconds.value,
    reconnectResetAfterSeconds = c.long("reconnectResetAfterSeconds") ?: RelayRecoveryContract.reconnectResetAfterSeconds.value,
    jitterSeed = c.long("jitterSeed") ?: 0L,
    sinceOverlapSeconds = c.long("sinceOverlapSeconds") ?: 10L,
    correlateUnnamedAcknowledgements = c.bool("correlateUnnamedAcknowledgements") ?: false,
    relayUrl = c.one("relayUrl"),
    maxMessageBytes = c.long("maxMessageBytes"),
    acknowledgementTimeoutSeconds = c.long("acknowledgementTimeoutSeconds") ?: RelayPublishContract.acknowledgementTimeoutSeconds.value,
    authenticationWaitSeconds = c.long("authenticationWaitSeconds") ?: 5L,
    authenticationWindowSeconds = c.long("authenticationWindowSeconds") ?: 600L,
    answersAuthentication = c.bool("answersAuthentication") ?: true
)

var session = RelaySession()

fun step(c: Call): Pair<String, String> {
    val s = session
    val none = "actions" to "[]"
    return when (c.text("call")) {
        "configure" -> { session = RelaySession(config(c)); none }
        "connect" -> "actions" to actions(s.connect())
        "transportConnected" -> "actions" to actions(s.transportConnected(c.long("now")))
        "transportLost" -> "actions" to actions(s.transportLost(c.long("now")))
        "cancel" -> "actions" to actions(s.cancel())
        "close" -> { s.close(); none }
        "subscribe" -> { s.subscribe(c.text("id"), c.all("filters")); none }
        "unsubscribe" -> { s.unsubscribe(c.text("id")); none }
        "count" -> { s.count(c.text("id"), c.all("filters")); none }
        "cancelCount" -> { s.cancelCount(c.text("id")); none }
        "publish" -> { s.publish(c.all("events").map { SignedNostrEvent.parse(it) }); none }
        "drainOutbound" -> "frames" to J.list(s.drainOutbound(c.long("max") ?: RelaySessionContract.defaultDrainMax.value).map { f ->
            J.obj("frame" to J.str(f.frame), "deliveryEventIds" to J.list(f.deliveryEventIds.map { J.str(it.hex) }))
        })
        "confirmSent" -> { s.confirmSent(c.all("eventIds").map { EventId(it) }, c.long("now")); none }
        "receive" -> "actions" to actions(s.receive(c.text("text"), c.long("now")))
        "confirmIngested" -> { s.confirmIngested(EventId(c.text("eventId"))); none }
        "authenticate" -> "actions" to actions(s.authenticate(SignedNostrEvent.parse(c.text("event")), c.long("now")))
        "handleTimeout" -> "actions" to actions(s.handleTimeout(c.long("now")!!))
        "pollTimeout" -> "timeout" to (s.pollTimeout()?.toString() ?: "null")
        "snapshot" -> "snapshot" to s.snapshot().let { n ->
            J.obj(
                "state" to J.str(n.state), "subscriptionIds" to J.list(n.subscriptionIds.map { J.str(it) }),
                "outboundFrames" to n.outboundFrames.toString(), "pendingPublishes" to n.pendingPublishes.toString(),
                "awaitingPersistence" to n.awaitingPersistence.toString(), "reconnectAttempt" to n.reconnectAttempt.toString(),
                "authenticated" to n.authenticated.toString()
            )
        }
        else -> throw IllegalArgumentException("unknown call ${c.one("call")}")
    }
}

fun main(args: Array<String>) {
    for (line in File(args[0]).readLines()) {
        if (line.isBlank()) continue
        val c = Call(line)
        val out = try {
            val (key, value) = step(c)
            J.obj("call" to J.str(c.text("call")), key to value)
        } catch (e: SoftchatException) {
            val prefix = "${e.code.code}: "
            val message = e.message ?: ""
            val text = if (message.startsWith(prefix)) message.substring(prefix.length) else message
            J.obj("call" to J.str(c.text("call")), "error" to J.obj("code" to J.str(e.code.code), "message" to J.str(text)))
        }
        println(out)
    }
}
